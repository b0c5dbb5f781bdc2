//! The block cache: uncompressed store-file blocks kept in memory under a byte bound.
//!
//! Sharded to keep lock hold times short; scan-resistant (blocks seen once are evicted before
//! blocks seen twice, so one large scan cannot flush the working set); blocks of in-memory
//! families get a priority that ordinary blocks cannot evict.

use bytes::Bytes;

/// Identifies a block: the store file's process-unique id and the block's offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockKey {
    pub file_id: u64,
    pub offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Normal,
    /// Families marked in-memory.
    InMemory,
}

/// Counters for observability and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
    /// Bytes currently charged.
    pub used_bytes: u64,
    pub capacity_bytes: u64,
}

/// Thread-safe; share as `Arc<BlockCache>`.
pub struct BlockCache {}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of blocks (charged by block length plus a
    /// fixed per-entry overhead).
    pub fn new(capacity_bytes: u64) -> BlockCache {
        let _ = capacity_bytes;
        unimplemented!()
    }

    /// The block, counting a hit or a miss.
    pub fn get(&self, key: &BlockKey) -> Option<Bytes> {
        let _ = key;
        unimplemented!()
    }

    /// Inserts (or replaces) a block; evicts as needed to stay within the bound. A block larger
    /// than a shard's capacity is not cached.
    pub fn insert(&self, key: BlockKey, block: Bytes, priority: Priority) {
        let _ = (key, block, priority);
        unimplemented!()
    }

    /// Drops every block of a file (called when a store file is deleted).
    pub fn evict_file(&self, file_id: u64) {
        let _ = file_id;
        unimplemented!()
    }

    pub fn stats(&self) -> CacheStats {
        unimplemented!()
    }
}
