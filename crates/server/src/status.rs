//! What a server reports about itself to the HTTP endpoint (`/metrics`, `/status`) and the web
//! UI: the [`StatusSource`] the node's region server implements, the tables' view it answers,
//! and the WAL's state as both endpoints show it. Kept apart from the RPC [`crate::rpc::Handler`]
//! so that the front end serving calls knows nothing of the pages reading the server's state.

use crate::metrics::Gauges;

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
    pub load: Option<RegionLoad>,
}

/// A region's numbers where it is open.
#[derive(Debug, Clone, Copy)]
pub struct RegionLoad {
    pub memstore_bytes: u64,
    pub store_file_bytes: u64,
    pub store_files: usize,
    pub read_requests: u64,
    pub write_requests: u64,
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
