//! What the region server shows of itself: its tables and regions (LIST, DESCRIBE, LOCATE,
//! the web UI's view with each open region's numbers) and its STATUS numbers.

use super::{RegionServer, Role};
use crate::error::ServerError;
use crate::names;
use crate::router::{RegionLocation, TableInfo, TableRoute, TableState};
use crate::status::{region_load, Gauges, RegionView, ServerLoad, ServerStatus, TableView};
use cellar_model::to_string_binary;
use cellar_storage::wal::WalHealth;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl RegionServer {
    /// The tables (or the one named) and their regions as this process knows them.
    pub fn tables_view(&self, only: Option<&str>) -> Vec<TableView> {
        self.router
            .tables()
            .into_iter()
            .filter(|(name, _)| only.is_none_or(|t| t == name))
            .map(|(name, t)| TableView {
                enabled: t.state == TableState::Enabled,
                families: t.schema.families.iter().map(|f| f.name.clone()).collect(),
                regions: t
                    .regions
                    .values()
                    .map(|r| {
                        let load = region_load(r);
                        let server = r.server();
                        RegionView {
                            name: r.name(),
                            id: r.info.id,
                            start_key: to_string_binary(&r.info.start_key),
                            end_key: to_string_binary(&r.info.end_key),
                            state: r.state().name().to_string(),
                            server: server
                                .as_ref()
                                .map(|s| s.name.to_string())
                                .unwrap_or_default(),
                            server_http: server.map(|s| s.http_addr.clone()).unwrap_or_default(),
                            load,
                        }
                    })
                    .collect(),
                name,
            })
            .collect()
    }
}

impl RegionServer {
    /// A table by name (canonical form) with its route.
    pub(crate) fn existing_table(&self, name: &str) -> Result<(String, TableRoute), ServerError> {
        let name = names::canonical(name)?;
        let t = self.router.require(&name)?;
        Ok((name, t))
    }

    /// The user tables this server knows (every table, on standalone and a master).
    pub fn list_tables(&self) -> Vec<TableInfo> {
        self.router
            .tables()
            .into_iter()
            .filter(|(name, _)| !names::is_system(name))
            .map(|(_, t)| self.table_info(&t))
            .collect()
    }

    pub fn describe_table(&self, name: &str) -> Result<TableInfo, ServerError> {
        let (_, t) = self.existing_table(name)?;
        Ok(self.table_info(&t))
    }

    fn table_info(&self, t: &TableRoute) -> TableInfo {
        TableInfo {
            schema: Arc::clone(&t.schema),
            state: t.state,
            regions: t
                .regions
                .values()
                .map(|r| r.location(&self.advertised))
                .collect(),
        }
    }

    /// Every region of a table in key order (meta's too, as `hbase:meta`).
    pub fn list_regions(&self, table: &str) -> Result<Vec<RegionLocation>, ServerError> {
        let (_, t) = self.existing_table(table)?;
        Ok(t.regions
            .values()
            .map(|r| r.location(&self.advertised))
            .collect())
    }

    /// The region of `table` holding `row`.
    pub fn locate_region(&self, table: &str, row: &[u8]) -> Result<RegionLocation, ServerError> {
        let table = names::canonical(table)?;
        if matches!(self.role, Role::Master(_))
            && self
                .router
                .table(&table)
                .is_some_and(|t| t.state == TableState::Disabled)
        {
            // Its regions are open nowhere: say why instead of sending clients round.
            return Err(ServerError::TableDisabled(table));
        }
        Ok(self.router.locate(&table, row)?.location(&self.advertised))
    }

    /// This server's numbers for STATUS: its user tables, their regions open here, its root
    /// (with its scheme); its `servers` list is itself with its open regions (a master
    /// replaces the regions and the list with the cluster's, see `Master::status`).
    pub fn status(&self) -> ServerStatus {
        let mut s = ServerStatus {
            version: env!("CARGO_PKG_VERSION").to_string(),
            uptime: self.started.elapsed(),
            requests: self.requests.load(Ordering::Relaxed),
            data_dir: self.config().root_url(),
            server: self.advertised.clone(),
            ..Default::default()
        };
        // Tables and regions are the users': hbase:meta (and any other system table) is in
        // neither count, as `list` does not show it.
        for (name, t) in self.router.tables() {
            let user = !names::is_system(&name);
            if user {
                s.tables += 1;
            }
            for r in t.regions.values() {
                if let Some(load) = region_load(r) {
                    if user {
                        s.regions += 1;
                    }
                    s.memstore_bytes += load.memstore_bytes;
                    s.store_file_bytes += load.store_file_bytes;
                    s.region_loads.push(load);
                }
            }
        }
        (s.used_memory_bytes, s.max_memory_bytes) = crate::metrics::process_memory();
        let cache = self.services.block_cache.stats();
        s.block_cache_hits = cache.hits;
        s.block_cache_misses = cache.misses;
        s.role = self.role.name().to_string();
        s.servers = self.own_loads();
        s.dead_servers = self.dead_loads();
        s
    }

    /// A cluster master's dead region servers, as STATUS lists servers (no regions); none
    /// elsewhere.
    pub fn dead_loads(&self) -> Vec<ServerLoad> {
        let Role::Master(m) = &self.role else {
            return Vec::new();
        };
        m.dead_servers()
            .into_iter()
            .map(|d| ServerLoad {
                name: d.name.to_string(),
                native_addr: d.native_addr,
                http_addr: d.http_addr,
                regions: Vec::new(),
            })
            .collect()
    }

    /// This server and the regions open on it, as STATUS lists servers.
    pub fn own_loads(&self) -> Vec<ServerLoad> {
        let mut me = ServerLoad {
            name: String::new(),
            native_addr: self.advertised.clone(),
            http_addr: String::new(),
            regions: Vec::new(),
        };
        for (_, t) in self.router.tables() {
            me.regions
                .extend(t.regions.values().filter(|r| r.is_open()).map(|r| r.name()));
        }
        vec![me]
    }

    /// Point-in-time gauges for `/metrics` (the servers list: this one).
    pub fn gauges(&self) -> Gauges {
        let mut g = Gauges::default();
        let mut per_table: BTreeMap<String, usize> = BTreeMap::new();
        for (name, t) in self.router.tables() {
            let mut open = 0;
            for r in t.regions.values() {
                if let Some(s) = r.if_open(|r| r.stats()) {
                    open += 1;
                    g.memstore_bytes += s.memstore_bytes;
                    g.store_file_bytes += s.store_file_bytes;
                    g.store_files += s.store_files as u64;
                    g.read_requests += s.read_requests;
                    g.write_requests += s.write_requests;
                    g.writes_blocked += s.writes_blocked_memstore + s.writes_blocked_files;
                    g.writes_blocked_ms += s.writes_blocked_ms;
                }
            }
            per_table.insert(name, open);
        }
        g.regions_per_table = per_table.into_iter().collect();
        let cache = self.services.block_cache.stats();
        g.block_cache_hits = cache.hits;
        g.block_cache_misses = cache.misses;
        g.query_cache = self.services.query_cache.stats();
        (g.flush_queue, g.compaction_queue) = self.services.background_queues();
        g.open_scanners = self.scanners.open_count();
        (
            g.prepared_scans_open,
            g.prepared_scans_total,
            g.prepared_scan_executions,
        ) = self.prepared.counts();
        g.splits = self.splits_done.load(Ordering::Relaxed);
        let sink = &self.replication_sink;
        g.replication_sink = crate::status::ReplicationSinkGauges {
            batches: sink.batches.load(Ordering::Relaxed),
            failed_batches: sink.failed_batches.load(Ordering::Relaxed),
            entries: sink.entries.load(Ordering::Relaxed),
            cells: sink.cells.load(Ordering::Relaxed),
            bytes: sink.bytes.load(Ordering::Relaxed),
            hfiles: sink.hfiles.load(Ordering::Relaxed),
            hfile_cells: sink.hfile_cells.load(Ordering::Relaxed),
            lag_ms: sink.lag_ms(),
        };
        g.role = self.role.name().to_string();
        g.servers = self.own_loads();
        g.dead_servers = self.dead_loads();
        let wal = &self.services.wal;
        let stats = wal.stats();
        g.wal_failures = stats.failures;
        g.wal_recoveries = stats.recoveries;
        g.wal_buffered_bytes = wal.buffered_bytes() as u64;
        (g.wal_state, g.wal_problem) = match wal.health() {
            WalHealth::Ok => ("ok".into(), None),
            WalHealth::Stalled(why) => ("stalled".into(), Some(why)),
            WalHealth::Failed(why) => ("failed".into(), Some(why)),
        };
        g
    }
}
