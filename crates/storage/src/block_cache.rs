//! The block cache: store-file blocks kept in memory under a byte bound, uncompressed, or (a
//! cache made [`BlockCache::compressed`], HBase's `hbase.block.data.cachecompressed`) as they
//! are on disk, decompressed on every hit: more blocks in the same memory, CPU per hit.
//!
//! Sharded to keep lock hold times short; scan-resistant (blocks seen once are evicted before
//! blocks seen twice, so one large scan cannot flush the working set); blocks of in-memory
//! families get a priority that ordinary blocks cannot evict.
//!
//! Each shard is a segmented LRU (`block_cache/shard.rs` describes the segments); a key picks
//! its shard by a hash of (file id, offset), so one file's blocks spread over all shards. Every
//! operation is O(1) except [`BlockCache::evict_file`], which walks the cache (files are
//! deleted rarely).
//!
//! HOT PATH: `get` runs on every block a read touches. It takes one shard mutex for a few
//! list operations and clones a `Bytes` (a reference-count increment); nothing else.

mod shard;

use bytes::Bytes;
use parking_lot::Mutex;
use shard::Shard;
use std::hash::Hasher;

/// Identifies a block: the store file's process-unique id and the block's offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockKey {
    /// The store file's id (unique within the process).
    pub file_id: u64,
    /// The block's offset in the file.
    pub offset: u64,
}

/// How a block competes for space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Scan-resistant LRU: enters probation, promoted to protected on a second hit.
    Normal,
    /// Families marked in-memory: a segment of its own (up to a quarter of each shard) that
    /// ordinary blocks cannot evict.
    InMemory,
}

/// Counters for observability and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// `get` calls that found their block.
    pub hits: u64,
    /// `get` calls that did not.
    pub misses: u64,
    /// Blocks admitted (oversized blocks that were refused are not counted).
    pub inserts: u64,
    /// Blocks dropped to make room (not those dropped by `evict_file` or replaced).
    pub evictions: u64,
    /// Bytes currently charged.
    pub used_bytes: u64,
    /// The configured bound.
    pub capacity_bytes: u64,
}

impl CacheStats {
    /// Hits over lookups (0 before the first lookup).
    pub fn hit_ratio(&self) -> f64 {
        let lookups = self.hits + self.misses;
        if lookups == 0 {
            0.0
        } else {
            self.hits as f64 / lookups as f64
        }
    }
}

/// Bytes charged per entry on top of the block: the slab entry, the map slot and the
/// `Bytes` header, rounded up.
pub const ENTRY_OVERHEAD: u64 = 96;

/// The most shards a cache uses.
const MAX_SHARDS: usize = 16;
/// Shards are made no smaller than this, so that a default 64 KiB block fits many times
/// over; a small cache therefore has fewer shards.
const MIN_SHARD_BYTES: u64 = 4 * 1024 * 1024;

/// A Fx-style multiplicative hasher finished with a 64-bit avalanche (fmix64): keys are two
/// integers, so SipHash's protection against chosen keys buys nothing here.
#[derive(Default)]
pub(crate) struct BlockKeyHasher(u64);

impl Hasher for BlockKeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// Thread-safe; share as `Arc<BlockCache>`.
pub struct BlockCache {
    shards: Box<[Mutex<Shard>]>,
    capacity: u64,
    compressed: bool,
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of blocks (charged by block length plus a
    /// fixed per-entry overhead).
    pub fn new(capacity_bytes: u64) -> BlockCache {
        let mut shards = MAX_SHARDS;
        while shards > 1 && capacity_bytes / (shards as u64) < MIN_SHARD_BYTES {
            shards /= 2;
        }
        BlockCache::with_shards(capacity_bytes, shards)
    }

    /// A cache with an explicit shard count (rounded up to a power of two, at least 1).
    /// Each shard holds `capacity_bytes / shards`; a block larger than that is not cached.
    pub fn with_shards(capacity_bytes: u64, shards: usize) -> BlockCache {
        let n = shards.clamp(1, 1 << 16).next_power_of_two();
        let per_shard = capacity_bytes / n as u64;
        BlockCache {
            shards: (0..n).map(|_| Mutex::new(Shard::new(per_shard))).collect(),
            capacity: capacity_bytes,
            compressed: false,
        }
    }

    /// This cache holding data blocks compressed (as their files store them) instead.
    pub fn compressed(mut self, on: bool) -> BlockCache {
        self.compressed = on;
        self
    }

    /// Whether data blocks are kept compressed (the store-file reader's concern: it caches
    /// and decodes accordingly).
    pub fn keeps_compressed(&self) -> bool {
        self.compressed
    }

    #[allow(
        clippy::indexing_slicing,
        reason = "the shard count is a power of two (with_shards), so the masked hash is below it"
    )]
    fn shard(&self, key: &BlockKey) -> &Mutex<Shard> {
        let mut h = BlockKeyHasher::default();
        h.write_u64(key.file_id);
        h.write_u64(key.offset);
        // The high bits: the shard map's own hashing uses the low ones.
        let i = (h.finish() >> 32) as usize & (self.shards.len() - 1);
        &self.shards[i]
    }

    /// The block, counting a hit or a miss.
    pub fn get(&self, key: &BlockKey) -> Option<Bytes> {
        self.shard(key).lock().get(key)
    }

    /// Whether the block is cached, without counting a hit or a miss or making it recent (a
    /// reader deciding whether to ask the disk for it ahead of time).
    pub fn contains(&self, key: &BlockKey) -> bool {
        self.shard(key).lock().contains(key)
    }

    /// Inserts (or replaces) a block; evicts as needed to stay within the bound. A block larger
    /// than a shard's capacity is not cached.
    pub fn insert(&self, key: BlockKey, block: Bytes, priority: Priority) {
        let charge = block.len() as u64 + ENTRY_OVERHEAD;
        self.shard(&key).lock().insert(key, block, charge, priority);
    }

    /// Drops every block of a file (called when a store file is deleted).
    pub fn evict_file(&self, file_id: u64) {
        for s in self.shards.iter() {
            s.lock().evict_file(file_id);
        }
    }

    /// A snapshot of the counters (shards are read one after another, not atomically).
    pub fn stats(&self) -> CacheStats {
        let mut out = CacheStats {
            capacity_bytes: self.capacity,
            ..CacheStats::default()
        };
        for s in self.shards.iter() {
            let st = s.lock().stats();
            out.hits += st.hits;
            out.misses += st.misses;
            out.inserts += st.inserts;
            out.evictions += st.evictions;
            out.used_bytes += st.used;
        }
        out
    }
}
