//! Engine configuration and the clock, which sits behind a trait so TTL tests can move time.

use crate::wal::WalOptions;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, HBase's timestamp unit.
/// Debug so that a configuration holding one can be printed and compared as text.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_millis(&self) -> u64;
}

#[derive(Debug)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock tests set by hand.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(ms: u64) -> ManualClock {
        ManualClock(AtomicU64::new(ms))
    }

    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// What a store's compactions merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactionStyle {
    /// Levels of disjoint files, each ~`level_fanout` times the one above (`levels.rs`):
    /// space within ~1.1× the live data, few runs per read.
    Leveled,
    /// HBase's ratio rule over whole sorted runs, plus the space-amplification rule
    /// (`compaction_max_space_amp`): less rewriting, more space and more runs per read.
    Tiered,
}

impl CompactionStyle {
    pub fn name(self) -> &'static str {
        match self {
            CompactionStyle::Leveled => "leveled",
            CompactionStyle::Tiered => "tiered",
        }
    }

    pub fn parse(s: &str) -> Option<CompactionStyle> {
        match s {
            "leveled" => Some(CompactionStyle::Leveled),
            "tiered" => Some(CompactionStyle::Tiered),
            _ => None,
        }
    }
}

/// Tuning of the engine. Defaults follow HBase's where HBase has one.
#[derive(Clone, Debug)]
pub struct StorageConfig {
    /// Block cache bound (HBase: 40 % of heap; here an absolute size).
    pub block_cache_bytes: u64,
    /// Keep data blocks compressed in the block cache, decompressing on each hit (HBase's
    /// `hbase.block.data.cachecompressed`): more blocks per byte, CPU per hit. Only blocks of
    /// families with compression differ.
    pub block_cache_compressed: bool,
    /// A region's memstores are flushed once they hold this much (HBase: 128 MiB).
    pub memstore_flush_bytes: u64,
    /// Writers wait once memstores reach `flush_bytes × multiplier` (HBase: 4).
    pub memstore_block_multiplier: u64,
    /// How a store chooses what to merge (`compaction.rs`, `levels.rs`).
    pub compaction_style: CompactionStyle,
    /// A minor compaction needs at least this many eligible files (HBase: 3); leveled: level 0
    /// files that start a merge into the level below.
    pub compaction_min_files: usize,
    /// and takes at most this many (HBase: 10).
    pub compaction_max_files: usize,
    /// A file joins a minor compaction if it is at most `ratio ×` the newer files' total
    /// size (HBase: 1.2).
    pub compaction_ratio: f64,
    /// When a store's runs add up to more than this many times its oldest run (the overwritten
    /// versions and deleted cells they may hold), every run is merged, major: the space a
    /// store of overwrites takes stays bounded without waiting a week for the periodic major
    /// compaction (RocksDB universal compaction's size-amplification rule). 0: off (HBase).
    pub compaction_max_space_amp: f64,
    /// Leveled: the smallest size a level below level 0 is given (RocksDB's
    /// `max_bytes_for_level_base`: 256 MiB).
    pub level_base_bytes: u64,
    /// Leveled: each level is this many times the size of the one above it (RocksDB: 10).
    pub level_fanout: u64,
    /// Leveled: compactions write files of about this size, ending at a row boundary
    /// (RocksDB's `target_file_size_base`: 64 MiB).
    pub compaction_file_bytes: u64,
    /// Threads running compactions, shared by the regions of the services (HBase: one for
    /// small and one for large compactions). More merge sooner; each takes a core from the
    /// foreground while it runs.
    pub compaction_threads: usize,
    /// The nice value compaction threads run at (Linux; 0..=19): with every core busy, reads
    /// and writes get the CPU first. A compaction of a store whose file count holds writers
    /// back runs at normal priority. 0: compactions compete equally (HBase).
    pub compaction_nice: i32,
    /// Compactions together read at most this many bytes per second of their inputs; 0: no
    /// limit. Not applied to a store whose file count holds writers back (`region/throttle.rs`).
    pub compaction_bytes_per_sec: u64,
    /// A store whose oldest file is this old is major compacted (HBase's
    /// `hbase.hregion.majorcompaction`: 7 days); 0: never on a schedule. Checked after every
    /// flush and by the server's compaction checker.
    pub major_compaction_period_ms: u64,
    /// Each store's period is moved by up to this fraction of it, earlier or later, so the
    /// stores of a server do not all compact at once (HBase's
    /// `hbase.hregion.majorcompaction.jitter`: 0.5).
    pub major_compaction_jitter: f64,
    /// With this many files in a store, writers are slowed until compaction catches up
    /// (HBase: 16).
    pub blocking_store_files: usize,
    /// The longest a writer is held back; then it proceeds anyway (writes are slowed, never
    /// failed).
    pub blocking_wait: Duration,
    /// Flushes and compactions run on their own threads. Off: only explicit `flush` /
    /// `compact` calls write files (deterministic tests).
    pub background: bool,
    /// The region-level gate: a single-row read first asks each family's memstore row indexes
    /// and file row blooms whether the row can be there, and skips the family (or a memstore)
    /// that rules it out. Off only to measure what it saves.
    pub region_gate: bool,
    /// Bytes of Get results the query cache keeps, for families that enable it
    /// (`QUERY_CACHE => true`); shared by every region of the services.
    pub query_cache_bytes: u64,
    pub wal: WalOptions,
    pub clock: Arc<dyn Clock>,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            block_cache_bytes: 256 * 1024 * 1024,
            block_cache_compressed: false,
            memstore_flush_bytes: 128 * 1024 * 1024,
            memstore_block_multiplier: 4,
            compaction_style: CompactionStyle::Leveled,
            compaction_min_files: 3,
            compaction_max_files: 10,
            compaction_ratio: 1.2,
            compaction_max_space_amp: 1.5,
            compaction_bytes_per_sec: 0,
            compaction_threads: 2,
            compaction_nice: 10,
            level_base_bytes: 256 * 1024 * 1024,
            level_fanout: 10,
            compaction_file_bytes: 64 * 1024 * 1024,
            major_compaction_period_ms: 7 * 24 * 3600 * 1000,
            major_compaction_jitter: 0.5,
            blocking_store_files: 16,
            blocking_wait: Duration::from_secs(10),
            background: true,
            region_gate: true,
            query_cache_bytes: 64 * 1024 * 1024,
            wal: WalOptions::default(),
            clock: Arc::new(SystemClock),
        }
    }
}
