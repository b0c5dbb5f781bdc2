//! What a server reports about itself: STATUS's numbers (the shell, the master's view of its
//! region servers), and what `/metrics`, `/status` and the web UI read through the
//! [`StatusSource`] the node's region server implements. Plain data, below everything that
//! fills it in or shows it; kept apart from the RPC [`crate::rpc::Handler`] so that the front
//! end serving calls knows nothing of the pages reading the server's state.

use crate::router::HostedRegion;

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
    pub query_cache: cellar_storage::query_cache::QueryCacheStats,
    /// Regions waiting for / running a flush.
    pub flush_queue: usize,
    /// Stores waiting for / running a compaction.
    pub compaction_queue: usize,
    pub open_scanners: usize,
    /// Prepared scans held (all connections), prepared since start, executions since start.
    pub prepared_scans_open: u64,
    pub prepared_scans_total: u64,
    pub prepared_scan_executions: u64,
    /// Splits done since start.
    pub splits: u64,
    /// Edits replicated in from another cluster since start (`ReplicateWALEntry`).
    pub replication_sink: ReplicationSinkGauges,
    /// Gets and scanned rows served, and mutations admitted, by the regions open here (each
    /// counted since it opened here).
    pub read_requests: u64,
    pub write_requests: u64,
    /// Writers held back by a full memstore or by too many store files, and the milliseconds
    /// they waited, in the regions open here (each counted since it opened here).
    pub writes_blocked: u64,
    pub writes_blocked_ms: u64,
    /// The write-ahead log: `ok`, `stalled` (a write failed; writes are refused until it
    /// recovers by itself) or `failed` (a sync failed; writes are refused until restart).
    pub wal_state: String,
    /// Why the log is stalled or failed.
    pub wal_problem: Option<String>,
    pub wal_failures: u64,
    pub wal_recoveries: u64,
    /// Records waiting to be handed to the OS.
    pub wal_buffered_bytes: u64,
    /// standalone, master or regionserver.
    pub role: String,
    /// The region servers and their regions (`status 'detailed'`).
    pub servers: Vec<ServerLoad>,
    /// A cluster master's dead region servers (no regions).
    pub dead_servers: Vec<ServerLoad>,
}

/// What the replication sink has applied (HBase's `sink.*` metrics, by Cellar's names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationSinkGauges {
    pub batches: u64,
    pub failed_batches: u64,
    pub entries: u64,
    pub cells: u64,
    pub bytes: u64,
    /// Bulk-loaded files replicated in, and their cells.
    pub hfiles: u64,
    pub hfile_cells: u64,
    /// How far behind its source the last batch was when applied, ms (0 before any).
    pub lag_ms: u64,
}

impl Gauges {
    /// Block cache hits over lookups; 0 before the first lookup.
    pub fn block_cache_hit_ratio(&self) -> f64 {
        let total = self.block_cache_hits + self.block_cache_misses;
        if total == 0 {
            0.0
        } else {
            self.block_cache_hits as f64 / total as f64
        }
    }
}

/// Where `/metrics`, `/status` and the web UI read the server's state from.
pub trait StatusSource: Send + Sync + 'static {
    /// Server-wide gauges for `/metrics`.
    fn gauges(&self) -> Gauges;

    /// The tables (or the one named) and their regions as this process knows them, for the
    /// web UI (`/api/regions`).
    fn tables_view(&self, _table: Option<&str>) -> Vec<TableView> {
        Vec::new()
    }
}

/// A table as this process knows it, for `/api/regions`.
#[derive(Debug, Clone)]
pub struct TableView {
    pub name: String,
    pub enabled: bool,
    pub families: Vec<String>,
    pub regions: Vec<RegionView>,
}

/// One region: where it is and, when it is open in this process, its numbers.
#[derive(Debug, Clone)]
pub struct RegionView {
    pub name: String,
    pub id: u64,
    pub start_key: String,
    pub end_key: String,
    pub state: String,
    /// The region server holding it (`host,port,startcode`), empty when it is this process
    /// outside a cluster or nobody holds it.
    pub server: String,
    /// That server's HTTP address, where its own numbers are (empty: here, or unknown).
    pub server_http: String,
    /// Its numbers, when it is open in this process.
    pub load: Option<RegionLoad>,
}

/// The write-ahead log's state, as `/status` and `/api/server` show it.
pub(crate) fn wal_json(g: &Gauges) -> serde_json::Value {
    serde_json::json!({
        "state": g.wal_state,
        "problem": g.wal_problem,
        "failures": g.wal_failures,
        "recoveries": g.wal_recoveries,
        "buffered_bytes": g.wal_buffered_bytes,
    })
}

/// STATUS's types: the model's, shared with the client and the wire.
pub use cellar_model::{RegionLoad, ServerLoad, ServerStatus};

/// `r`'s numbers, if it is open here.
pub fn region_load(r: &HostedRegion) -> Option<RegionLoad> {
    let (stats, stores) = r.if_open(|region| (region.stats(), region.schema().families.len()))?;
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Some(RegionLoad {
        table: r.table.clone(),
        start_key: r.info.start_key.clone(),
        region_id: r.info.id,
        stores: count(stores),
        store_files: count(stats.store_files),
        store_file_bytes: stats.store_file_bytes,
        memstore_bytes: stats.memstore_bytes,
        read_requests: stats.read_requests,
        write_requests: stats.write_requests,
    })
}
