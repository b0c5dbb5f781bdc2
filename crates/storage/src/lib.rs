//! Cellar's storage engine.
//!
//! Write path: [`region::Region::mutate`] → [`wal`] (group commit) → [`memstore`] →
//! flush to a [`storefile`] → [`region::compaction`].
//! Read path: [`region::Region::get`] / [`region::Region::scan`] → per-family store scanners
//! merging the memstore and store files ([`iter`]) under an MVCC read point, store files read
//! through the [`block_cache`]; Gets of families with the query cache on are answered from
//! [`query_cache`] when they can be.
//! All file access goes through [`fs::FileSystem`].

// Policy: nothing read from a file or the network may panic the reader, so no slice indexing
// outside tests; where an index is in bounds by construction, an `allow` on the smallest item
// says why.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

pub mod block_cache;
pub mod counter;
pub mod deadline_wait;
pub mod fs;
mod heap;
pub mod iter;
pub mod memstore;
pub mod query_cache;
pub mod region;
pub mod storefile;
pub mod wal;

pub use cellar_model as model;
