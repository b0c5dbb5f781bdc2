//! Cellar benchmarks.
//!
//! [`engine_bench`] is the storage-engine harness behind the `engine_bench` binary: db_bench-style
//! workloads run against Cellar's [`cellar_storage::region::Region`] and, with the `rocksdb`
//! feature, against RocksDB with the same options, one child process per engine.

pub mod availability;
pub mod bigtable;
pub mod breakdown;
pub mod conn_bench;
pub mod conn_memory;
pub mod engine_bench;
pub mod linearizability;
pub mod linkedlist;
pub mod report;
pub mod rpc_bench;
pub mod transport_bench;
pub mod ycsb;
