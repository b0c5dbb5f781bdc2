//! What a server reports about itself (STATUS, the web UI, the master's view of its region
//! servers): plain data, below everything that fills it in or shows it.

use crate::router::HostedRegion;

/// Server-wide numbers (STATUS).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStatus {
    pub version: String,
    pub uptime_ms: u64,
    /// User tables.
    pub tables: u32,
    /// Regions open, meta's included.
    pub regions: u32,
    pub requests: u64,
    pub memstore_bytes: u64,
    pub store_file_bytes: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    pub data_dir: String,
    /// The native address of this server.
    pub server: String,
    /// standalone, master or regionserver.
    pub role: String,
    /// The region servers and their regions (see [`ServerLoad`]).
    pub servers: Vec<ServerLoad>,
    pub balancer_on: bool,
    /// This server's open regions, in table and key order.
    pub region_loads: Vec<RegionLoad>,
    /// Resident memory and the most the process may use (0: unknown).
    pub used_memory_bytes: u64,
    pub max_memory_bytes: u64,
}

/// One open region's numbers (STATUS; HBase's RegionLoad): the type the client reads them
/// into, so a master passes a region server's answer on as it came.
pub use cellar_client::RegionLoad;

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

/// A region server and the regions on it, as `status 'detailed'` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerLoad {
    /// `host,port,startcode` (empty for a server outside ZooKeeper).
    pub name: String,
    pub native_addr: String,
    pub http_addr: String,
    pub regions: Vec<String>,
}
