//! Prometheus metrics. (Counters and histograms are being written; [`Gauges`] is the contract
//! the region server fills.)

/// Point-in-time values the region server reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    /// Open regions per table (meta included, as `hbase:meta`).
    pub regions_per_table: Vec<(String, usize)>,
    pub memstore_bytes: u64,
    pub store_file_bytes: u64,
    pub store_files: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// Regions waiting for / running a flush.
    pub flush_queue: usize,
    /// Stores waiting for / running a compaction.
    pub compaction_queue: usize,
    pub open_scanners: usize,
    /// Splits done since start.
    pub splits: u64,
}
