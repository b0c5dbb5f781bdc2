//! The shell's [`Cluster`] over Cellar's blocking client. The connection is made on the
//! first command that needs the server, so `help` works without one.

use super::exec::{Cluster, Rows, TableState};
use super::format::to_string_binary;
use bytes::Bytes;
use cellar_client::blocking::{Admin, Client};
use cellar_client::{ClientConfig, RegionLocation, Status, TableInfo};
use cellar_model::{Cell, FamilySchema, Get, RowMutation, Scan, TableSchema};

pub struct RemoteCluster {
    addr: String,
    config: ClientConfig,
    client: Option<Client>,
}

impl RemoteCluster {
    pub fn new(addr: String, config: ClientConfig) -> RemoteCluster {
        RemoteCluster {
            addr,
            config,
            client: None,
        }
    }

    fn client(&mut self) -> Result<&Client, String> {
        if self.client.is_none() {
            let client = Client::connect_with(&self.addr, self.config.clone())
                .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
            self.client = Some(client);
        }
        self.client
            .as_ref()
            .ok_or_else(|| format!("no connection to {}", self.addr))
    }

    fn admin(&mut self) -> Result<Admin, String> {
        Ok(self.client()?.admin())
    }
}

fn msg(e: cellar_client::Error) -> String {
    e.to_string()
}

fn state(t: TableInfo) -> TableState {
    TableState {
        schema: t.schema,
        enabled: t.enabled,
        regions: t.regions.iter().map(region_line).collect(),
    }
}

fn region_line(r: &RegionLocation) -> String {
    format!(
        "{}: STARTKEY => '{}', ENDKEY => '{}', SERVER => '{}'",
        r.region_id,
        to_string_binary(&r.start_key),
        to_string_binary(&r.end_key),
        r.server
    )
}

/// Live region servers in a master's list (regions open nowhere are listed apart).
fn live_servers(s: &Status) -> usize {
    s.servers.iter().filter(|l| l.name != "(not open)").count()
}

fn status_lines(s: &Status) -> Vec<String> {
    let secs = s.uptime.as_secs();
    let mut lines = vec![
        format!(
            "server {} (Cellar {}), up {}h {}m {}s",
            s.server,
            s.version,
            secs / 3600,
            secs % 3600 / 60,
            secs % 60
        ),
        format!(
            "{} tables, {} regions (hbase:meta in neither), {} requests",
            s.tables, s.regions, s.requests
        ),
        format!(
            "memstore {} bytes, store files {} bytes, block cache {} hits / {} misses",
            s.memstore_bytes, s.store_file_bytes, s.block_cache_hits, s.block_cache_misses
        ),
        format!("root {}", s.data_dir),
    ];
    if s.role == "master" {
        // A cluster's master: HBase's summary counts the dead beside the live.
        lines.push(format!(
            "{} live servers, {} dead servers",
            live_servers(s),
            s.dead_servers.len()
        ));
    }
    lines
}

/// A region server as `status 'detailed'` names it: HBase's name (`host,port,startcode`),
/// else its native address.
fn server_name(l: &cellar_client::ServerLoad) -> &str {
    if l.name.is_empty() {
        &l.native_addr
    } else {
        &l.name
    }
}

/// Cellar's addresses of a named server, which tell `scripts/cluster.sh`'s servers apart.
fn server_addrs(l: &cellar_client::ServerLoad) -> String {
    let mut out = String::new();
    if !l.native_addr.is_empty() && !l.name.is_empty() {
        out.push_str(&format!(", native {}", l.native_addr));
    }
    if !l.http_addr.is_empty() {
        out.push_str(&format!(", http {}", l.http_addr));
    }
    out
}

/// `status 'detailed'`: each region server, its addresses and its regions; a cluster's
/// master then lists the dead servers as HBase's `status` does.
fn detailed_lines(s: &Status) -> Vec<String> {
    let servers = live_servers(s);
    let mut lines = vec![format!(
        "{} ({}), {servers} region server(s), balancer {}",
        s.server,
        s.role,
        if s.balancer_on { "on" } else { "off" }
    )];
    for l in &s.servers {
        lines.push(format!(
            "    {}: {} region(s){}",
            server_name(l),
            l.regions.len(),
            server_addrs(l)
        ));
        lines.extend(l.regions.iter().map(|r| format!("        {r}")));
    }
    if s.role == "master" {
        lines.push(format!("{} dead servers", s.dead_servers.len()));
        lines.extend(
            s.dead_servers
                .iter()
                .map(|l| format!("    {}{}", server_name(l), server_addrs(l))),
        );
    }
    lines
}

impl Cluster for RemoteCluster {
    fn create_table(&mut self, schema: TableSchema, splits: Vec<Bytes>) -> Result<(), String> {
        self.admin()?.create_table(schema, splits).map_err(msg)
    }

    fn alter_table(
        &mut self,
        table: &str,
        families: Vec<FamilySchema>,
        deletes: Vec<String>,
        options: Option<cellar_model::TableOptions>,
    ) -> Result<(), String> {
        self.admin()?
            .alter_table_with(table, families, deletes, options)
            .map_err(msg)
    }

    fn list_tables(&mut self) -> Result<Vec<TableState>, String> {
        Ok(self
            .admin()?
            .list_tables()
            .map_err(msg)?
            .into_iter()
            .map(state)
            .collect())
    }

    fn describe_table(&mut self, table: &str) -> Result<TableState, String> {
        self.admin()?.describe_table(table).map(state).map_err(msg)
    }

    fn table_exists(&mut self, table: &str) -> Result<bool, String> {
        self.admin()?.table_exists(table).map_err(msg)
    }

    fn mutate(&mut self, table: &str, mutation: RowMutation) -> Result<(), String> {
        self.client()?.table(table).mutate(mutation).map_err(msg)
    }

    fn get(&mut self, table: &str, get: Get) -> Result<Vec<Cell>, String> {
        Ok(self.client()?.table(table).get(get).map_err(msg)?.cells)
    }

    fn scan(&mut self, table: &str, scan: Scan) -> Result<Rows<'_>, String> {
        let scanner = self.client()?.table(table).scan(scan);
        Ok(Box::new(
            scanner.map(|r| r.map(|row| (row.row, row.cells)).map_err(msg)),
        ))
    }

    fn scan_prepared(&mut self, table: &str, scan: Scan) -> Result<Rows<'_>, String> {
        let (start, stop, limit, caching) = (
            scan.start_row.clone(),
            scan.stop_row.clone(),
            scan.limit,
            scan.caching,
        );
        let compress = scan.compress;
        let prepared = self.client()?.table(table).prepare_scan(scan, compress);
        let scanner = prepared.execute(start, stop, limit, caching);
        Ok(Box::new(
            scanner.map(|r| r.map(|row| (row.row, row.cells)).map_err(msg)),
        ))
    }

    fn increment(
        &mut self,
        table: &str,
        row: Bytes,
        family: &[u8],
        qualifier: &[u8],
        amount: i64,
    ) -> Result<i64, String> {
        self.client()?
            .table(table)
            .increment(&row, family, qualifier, amount)
            .map_err(msg)
    }

    fn disable_table(&mut self, table: &str) -> Result<(), String> {
        self.admin()?.disable_table(table).map_err(msg)
    }

    fn enable_table(&mut self, table: &str) -> Result<(), String> {
        self.admin()?.enable_table(table).map_err(msg)
    }

    fn delete_table(&mut self, table: &str) -> Result<(), String> {
        self.admin()?.delete_table(table).map_err(msg)
    }

    fn truncate_table(&mut self, table: &str) -> Result<(), String> {
        self.admin()?.truncate_table(table).map_err(msg)
    }

    fn flush(&mut self, table: &str) -> Result<(), String> {
        self.admin()?.flush(table).map_err(msg)
    }

    fn major_compact(&mut self, table: &str) -> Result<(), String> {
        self.admin()?.compact(table, true).map_err(msg)
    }

    fn split(&mut self, table: &str, row: Option<&[u8]>) -> Result<(), String> {
        self.admin()?.split(table, row).map_err(msg)
    }

    fn status(&mut self, detailed: bool) -> Result<Vec<String>, String> {
        let s = self.admin()?.status().map_err(msg)?;
        let mut lines = status_lines(&s);
        if detailed {
            lines.extend(detailed_lines(&s));
        }
        Ok(lines)
    }
    fn grant(
        &mut self,
        user: &str,
        actions: &str,
        scope: cellar_client::PermissionScope,
    ) -> Result<(), String> {
        self.admin()?.grant(user, scope, actions).map_err(msg)
    }

    fn revoke(&mut self, user: &str, scope: cellar_client::PermissionScope) -> Result<(), String> {
        self.admin()?.revoke(user, scope, None).map_err(msg)
    }

    fn user_permissions(
        &mut self,
        scope: Option<cellar_client::PermissionScope>,
    ) -> Result<Vec<cellar_client::Permission>, String> {
        self.admin()?.user_permissions(scope, None).map_err(msg)
    }

    fn balance_switch(&mut self, on: bool) -> Result<bool, String> {
        self.admin()?.balance_switch(on).map_err(msg)
    }
    fn balance(&mut self) -> Result<(u32, bool), String> {
        self.admin()?.balance().map_err(msg)
    }
    fn snapshot(&mut self, table: &str, name: &str, skip_flush: bool) -> Result<(), String> {
        self.admin()?.snapshot(table, name, skip_flush).map_err(msg)
    }
    fn list_snapshots(&mut self) -> Result<Vec<(String, String, u64)>, String> {
        Ok(self
            .admin()?
            .list_snapshots()
            .map_err(msg)?
            .into_iter()
            .map(|s| (s.name, s.table, s.created_ms))
            .collect())
    }
    fn delete_snapshot(&mut self, name: &str) -> Result<(), String> {
        self.admin()?.delete_snapshot(name).map_err(msg)
    }
    fn clone_snapshot(&mut self, name: &str, table: &str) -> Result<(), String> {
        self.admin()?.clone_snapshot(name, table).map_err(msg)
    }
    fn restore_snapshot(&mut self, name: &str) -> Result<(), String> {
        self.admin()?.restore_snapshot(name).map_err(msg)
    }
    fn merge_regions(&mut self, regions: &[String], force: bool) -> Result<Option<String>, String> {
        let names: Vec<&str> = regions.iter().map(String::as_str).collect();
        let merged = self.admin()?.merge_regions(&names, force).map_err(msg)?;
        Ok(merged.map(|l| l.name))
    }
    fn move_region(&mut self, region: &str, server: Option<&str>) -> Result<(), String> {
        self.admin()?.move_region(region, server).map_err(msg)
    }
    fn assign(&mut self, region: &str) -> Result<(), String> {
        self.admin()?.assign_region(region).map_err(msg)
    }
    fn unassign(&mut self, region: &str) -> Result<(), String> {
        self.admin()?.unassign_region(region).map_err(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_client::ServerLoad;

    fn load(name: &str, native: &str, http: &str, regions: &[&str]) -> ServerLoad {
        ServerLoad {
            name: name.into(),
            native_addr: native.into(),
            http_addr: http.into(),
            regions: regions.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn a_masters_status_lists_its_dead_servers_as_hbase_does() {
        let s = Status {
            role: "master".into(),
            server: "m:1".into(),
            servers: vec![load("h,16020,2", "h:9001", "h:8001", &["t,,1.1."])],
            dead_servers: vec![load("h,16021,1", "h:9000", "h:8000", &[])],
            ..Status::default()
        };
        let simple = status_lines(&s);
        assert!(
            simple.contains(&"1 live servers, 1 dead servers".to_string()),
            "{simple:?}"
        );
        let detailed = detailed_lines(&s);
        assert_eq!(
            detailed[1..],
            [
                "    h,16020,2: 1 region(s), native h:9001, http h:8001",
                "        t,,1.1.",
                "1 dead servers",
                "    h,16021,1, native h:9000, http h:8000",
            ],
            "{detailed:?}"
        );
    }
}
