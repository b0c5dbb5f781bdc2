//! What a server reports about itself (STATUS): one type for the server that fills it in, the
//! wire (`cellar_proto::convert::status_to_pb`/`status_from_pb`) and the client that reads
//! it.

use bytes::Bytes;
use std::time::Duration;

/// What the server reports about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStatus {
    pub version: String,
    pub uptime: Duration,
    pub tables: u32,
    pub regions: u32,
    pub requests: u64,
    pub memstore_bytes: u64,
    pub store_file_bytes: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    pub data_dir: String,
    pub server: String,
    /// standalone, master or regionserver.
    pub role: String,
    /// The region servers and the regions on each.
    pub servers: Vec<ServerLoad>,
    /// A cluster's master: the region servers it saw that are gone (HBase's dead servers;
    /// one leaves the list when a server starts again on its host and port). No regions.
    pub dead_servers: Vec<ServerLoad>,
    pub balancer_on: bool,
    /// This server's own open regions and their numbers.
    pub region_loads: Vec<RegionLoad>,
    /// The server process's resident memory and the most it may use (0: unknown).
    pub used_memory_bytes: u64,
    pub max_memory_bytes: u64,
}

/// One open region's numbers, as its server reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionLoad {
    pub table: String,
    pub start_key: Bytes,
    pub region_id: u64,
    /// Families.
    pub stores: u32,
    pub store_files: u32,
    pub store_file_bytes: u64,
    pub memstore_bytes: u64,
    /// Gets and scanned rows served, mutations admitted, since the region opened there.
    pub read_requests: u64,
    pub write_requests: u64,
}

/// A region server and its regions, as the server reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerLoad {
    /// `host,port,startcode`; empty for a standalone server; `(not open)` for regions open
    /// nowhere.
    pub name: String,
    pub native_addr: String,
    pub http_addr: String,
    pub regions: Vec<String>,
}
