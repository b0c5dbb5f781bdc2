//! The engines under test behind one small interface.
//!
//! An [`Engine`] is shared by the client threads of a workload; each thread opens its own
//! [`Session`] (RocksDB's write options are not `Sync`, and a session lets an adapter keep
//! per-thread buffers). Adapters translate the benchmark's options into each engine's own; the
//! mapping is written down in `docs/engine-bench.md`.

pub mod cellar;
#[cfg(test)]
pub mod memory;
#[cfg(feature = "rocksdb")]
pub mod rocks;

use crate::engine_bench::args::{Args, CompressionArg, EngineKind, SyncMode};
use crate::engine_bench::error::{BenchError, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// The options both engines get, from the flags.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub block_size: u32,
    pub compression: CompressionArg,
    /// 0: no bloom filter.
    pub bloom_bits: u32,
    pub cache_bytes: u64,
    /// Memstore flush size / RocksDB write buffer size; 0: Cellar's default for both.
    pub memstore_bytes: u64,
    pub sync: SyncMode,
    /// Cellar's region-level gate (RocksDB has none to turn off).
    pub region_gate: bool,
    /// Cellar's block cache keeps blocks compressed.
    pub cache_compressed: bool,
    /// Cellar's compaction style.
    pub compaction_style: cellar_storage::region::CompactionStyle,
    pub compaction_threads: usize,
    pub compaction_nice: i32,
}

impl EngineConfig {
    pub fn from_args(a: &Args) -> EngineConfig {
        EngineConfig {
            block_size: a.block_size,
            compression: a.compression,
            bloom_bits: a.bloom_bits,
            cache_bytes: a.cache_bytes,
            memstore_bytes: a.memstore_bytes,
            sync: a.sync,
            region_gate: a.region_gate,
            cache_compressed: a.cache_compressed,
            compaction_style: cellar_storage::region::CompactionStyle::parse(&a.compaction_style)
                .unwrap_or(cellar_storage::region::CompactionStyle::Leveled),
            compaction_threads: a.compaction_threads,
            compaction_nice: a.compaction_nice,
        }
    }

    /// The memstore flush size both engines use: the flag, or Cellar's default.
    pub fn effective_memstore_bytes(&self) -> u64 {
        if self.memstore_bytes > 0 {
            self.memstore_bytes
        } else {
            cellar_storage::region::StorageConfig::default().memstore_flush_bytes
        }
    }
}

/// Block-cache counters, where the engine exposes them cheaply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounters {
    pub hits: u64,
    pub misses: u64,
}

/// A store under test. Thread-safe: workloads share one engine among their client threads.
pub trait Engine: Send + Sync {
    fn kind(&self) -> EngineKind;

    /// A handle for one client thread.
    fn session(&self) -> Result<Box<dyn Session + '_>>;

    /// Writes the memtable out to a file and waits for it.
    fn flush(&self) -> Result<()>;

    /// Waits until no flush or compaction is queued or running.
    fn wait_for_background(&self) -> Result<()>;

    /// Block-cache hits and misses so far, if the engine counts them.
    fn cache_counters(&self) -> Option<CacheCounters>;

    /// Bytes read from the engine's files so far, if it counts them itself (an engine that
    /// maps its files: `/proc/self/io` sees only read system calls).
    fn file_bytes_read(&self) -> Option<u64> {
        None
    }

    /// Engine-internal counters worth keeping with a result (file counts, bytes flushed and
    /// compacted, ...), under the engine's own names.
    fn stats(&self) -> BTreeMap<String, u64>;

    /// Closes the store cleanly.
    fn close(self: Box<Self>) -> Result<()>;
}

/// One client thread's view of an engine.
pub trait Session {
    /// Writes `value` under `key` with the configured durability.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Reads `key`: the length of its value, or `None` if absent.
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>>;

    /// Reads up to `count` entries from the first key at or after `start`: the number of
    /// entries read and their key plus value bytes.
    fn scan(&mut self, start: &[u8], count: usize) -> Result<(u64, u64)>;
}

/// Opens `kind` in `dir` (created if missing) with `config`.
pub fn open(kind: EngineKind, dir: &Path, config: &EngineConfig) -> Result<Box<dyn Engine>> {
    match kind {
        EngineKind::Cellar => Ok(Box::new(cellar::CellarEngine::open(dir, config)?)),
        #[cfg(feature = "rocksdb")]
        EngineKind::Rocksdb => Ok(Box::new(rocks::RocksEngine::open(dir, config)?)),
        #[cfg(not(feature = "rocksdb"))]
        EngineKind::Rocksdb => Err(not_built()),
    }
}

/// Whether this binary can run RocksDB.
pub const ROCKSDB_BUILT: bool = cfg!(feature = "rocksdb");

/// The error for asking for RocksDB in a build without it.
pub fn not_built() -> BenchError {
    BenchError::new(
        "this binary was built without RocksDB; rebuild with \
         `cargo build --release -p cellar-bench --features rocksdb`",
    )
}
