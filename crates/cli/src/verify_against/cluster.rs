//! One side of a comparison, read over HBase's RPC as HBase's own client reads it: where
//! `hbase:meta` is (a bootstrap server's `ClientMetaService.GetMetaRegionLocations`, or the
//! `meta-region-server` znode in ZooKeeper), the table's regions from `hbase:meta`, and a
//! key range scanned region by region, picking up after the last row read when a region
//! moves, splits or its server restarts.

use super::rpc::{RpcConn, RpcError};
use bytes::Bytes;
use cellar_model::{Cell, CellType};
use cellar_proto::cellblock::CellReader;
use cellar_proto::hbase;
use prost::Message;
use std::collections::HashMap;
use std::time::Duration;

/// Where to find a cluster's `hbase:meta`.
#[derive(Debug, Clone)]
pub enum Locator {
    /// HOST:PORT of servers answering `ClientMetaService` (HBase's
    /// `hbase.client.bootstrap.servers`: a master or region server; Cellar's HBase port).
    Bootstrap(Vec<String>),
    /// A ZooKeeper quorum and the cluster's parent znode (HBase's cluster key
    /// `HOST:PORT[,HOST:PORT]:/hbase`).
    ZooKeeper { quorum: String, parent: String },
}

impl Locator {
    /// `zk://QUORUM[/PARENT]` or `QUORUM:/PARENT` (a cluster key) for ZooKeeper, otherwise
    /// bootstrap servers HOST:PORT[,HOST:PORT...].
    pub fn parse(spec: &str) -> Result<Locator, String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err("an empty cluster address".into());
        }
        if let Some(rest) = spec.strip_prefix("zk://") {
            let (quorum, parent) = match rest.find('/') {
                Some(at) => (&rest[..at], &rest[at..]),
                None => (rest, "/hbase"),
            };
            return Ok(Locator::ZooKeeper {
                quorum: quorum.to_string(),
                parent: parent.to_string(),
            });
        }
        if let Some(at) = spec.find(":/") {
            return Ok(Locator::ZooKeeper {
                quorum: spec[..at].to_string(),
                parent: spec[at + 1..].to_string(),
            });
        }
        let servers: Vec<String> = spec.split(',').map(|s| s.trim().to_string()).collect();
        if let Some(bad) = servers.iter().find(|s| !s.contains(':')) {
            return Err(format!("'{bad}' is not HOST:PORT"));
        }
        Ok(Locator::Bootstrap(servers))
    }
}

/// What a scan reads.
#[derive(Debug, Clone, Default)]
pub struct ScanSpec {
    /// Versions per column; `None` for every version.
    pub versions: Option<u32>,
    /// Delete markers and deleted cells too (HBase's raw scan).
    pub raw: bool,
    /// Only these families; every family when empty.
    pub families: Vec<Bytes>,
    /// Only cells with timestamps in [from, to).
    pub time_range: Option<(u64, u64)>,
}

/// One row as a scan returns it: its cells in HBase's order.
pub struct Row {
    pub key: Bytes,
    pub cells: Vec<Cell>,
}

/// A region of the table and the server holding it.
#[derive(Debug, Clone)]
pub struct RegionLoc {
    pub name: Bytes,
    pub start: Bytes,
    pub end: Bytes,
    pub server: String,
}

/// Attempts per region before a scan gives up (a region in transition is retried).
const ATTEMPTS: u32 = 12;
/// Rows asked for per scan call.
const ROWS_PER_CALL: u32 = 1000;
/// The `hbase:meta` region every HBase 2 cluster has.
const META_REGION: &[u8] = b"hbase:meta,,1";

/// A cluster read through its HBase port.
pub struct Cluster {
    /// How this side is named in messages ("source", "target").
    pub label: String,
    locator: Locator,
    user: String,
    conns: HashMap<String, RpcConn>,
}

impl Cluster {
    pub fn new(label: &str, locator: Locator, user: &str) -> Cluster {
        Cluster {
            label: label.to_string(),
            locator,
            user: user.to_string(),
            conns: HashMap::new(),
        }
    }

    /// The server holding `hbase:meta`.
    fn meta_server(&self) -> Result<String, String> {
        let label = &self.label;
        match &self.locator {
            Locator::Bootstrap(servers) => {
                let mut last = String::new();
                for server in servers {
                    let asked =
                        RpcConn::open(server, "ClientMetaService", &self.user).and_then(|mut c| {
                            c.call::<hbase::GetMetaRegionLocationsResponse>(
                                "GetMetaRegionLocations",
                                &hbase::GetMetaRegionLocationsRequest {},
                            )
                        });
                    match asked {
                        Ok((answer, _)) => {
                            let located = answer.meta_locations.first().and_then(|l| {
                                l.server_name
                                    .as_ref()
                                    .map(|s| format!("{}:{}", s.host_name, s.port.unwrap_or(0)))
                            });
                            match located {
                                Some(at) => return Ok(at),
                                None => last = format!("{server}: hbase:meta is not open"),
                            }
                        }
                        Err(e) => last = e.to_string(),
                    }
                }
                Err(format!(
                    "{label}: cannot find hbase:meta through {}: {last}",
                    servers.join(",")
                ))
            }
            Locator::ZooKeeper { quorum, parent } => {
                let path = format!("{}/meta-region-server", parent.trim_end_matches('/'));
                let data = read_znode(quorum, &path)
                    .map_err(|e| format!("{label}: reading {path} on ZooKeeper {quorum}: {e}"))?;
                let message = cellar_server::coord::znodes::unwrap(&data)
                    .map_err(|e| format!("{label}: {path}: {e}"))?;
                let meta = hbase::MetaRegionServer::decode(message)
                    .map_err(|e| format!("{label}: {path}: {e}"))?;
                Ok(format!(
                    "{}:{}",
                    meta.server.host_name,
                    meta.server.port.unwrap_or(0)
                ))
            }
        }
    }

    fn conn(&mut self, server: &str) -> Result<&mut RpcConn, RpcError> {
        if !self.conns.contains_key(server) {
            let conn = RpcConn::open(server, "ClientService", &self.user)?;
            self.conns.insert(server.to_string(), conn);
        }
        self.conns
            .get_mut(server)
            .ok_or_else(|| RpcError::Io(format!("{server}: no connection")))
    }

    /// The table's online regions in key order, each with its server, from `hbase:meta`.
    /// A region being moved or split has no server for a moment: read again, a few times.
    pub fn regions(&mut self, table: &str) -> Result<Vec<RegionLoc>, String> {
        let mut attempt = 0;
        loop {
            match self.regions_once(table) {
                Err((e, true)) if attempt < ATTEMPTS => {
                    attempt += 1;
                    tracing::debug!(error = %e, "looking up the regions again");
                    std::thread::sleep(Duration::from_millis(100 << attempt.min(5)));
                }
                other => return other.map_err(|(e, _)| e),
            }
        }
    }

    /// One read of the table's regions from `hbase:meta`; on failure, whether reading again
    /// may help.
    fn regions_once(&mut self, table: &str) -> Result<Vec<RegionLoc>, (String, bool)> {
        let meta = self.meta_server().map_err(|e| (e, false))?;
        let spec = ScanSpec {
            versions: Some(1),
            families: vec![Bytes::from_static(b"info")],
            ..Default::default()
        };
        // Meta rows are `TABLE,START,ID.ENCODED.`, compared as HBase's meta comparator does
        // (table, then start key, then the rest): all sort in [`TABLE,,`, `TABLE-`). `TABLE,`
        // would not do: without a second ',' the comparator compares it whole with the id.
        let (start, stop) = (format!("{table},,"), format!("{table}-"));
        let meta_region = RegionLoc {
            name: Bytes::from_static(META_REGION),
            start: Bytes::new(),
            end: Bytes::new(),
            server: meta.clone(),
        };
        let mut regions = Vec::new();
        let mut problem = None;
        let scanned = self.scan_region(
            &meta_region,
            start.as_bytes(),
            stop.as_bytes(),
            &spec,
            &mut |row| {
                match region_of(&row) {
                    Ok(Some(r)) => regions.push(r),
                    Ok(None) => {}
                    Err(e) => problem = Some(e),
                }
                Ok(())
            },
        );
        scanned.map_err(|(e, retry)| {
            (
                format!("{}: reading hbase:meta on {meta}: {e}", self.label),
                retry,
            )
        })?;
        if let Some((e, retry)) = problem {
            return Err((format!("{}: hbase:meta: {e}", self.label), retry));
        }
        if regions.is_empty() {
            return Err((
                format!(
                    "{}: table '{table}' has no regions in hbase:meta (it does not exist?)",
                    self.label
                ),
                false,
            ));
        }
        Ok(regions)
    }

    /// Every row in [start, stop) (`stop` empty: to the end), in order, to `visit`, crossing
    /// regions. A region that moved or split is looked up again and the scan resumes after
    /// the last row handed over.
    pub fn scan_range(
        &mut self,
        table: &str,
        start: &[u8],
        stop: &[u8],
        spec: &ScanSpec,
        visit: &mut dyn FnMut(Row) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut cursor = Bytes::copy_from_slice(start);
        let mut regions = self.regions(table)?;
        let mut failures = 0u32;
        loop {
            let Some(region) = regions
                .iter()
                .find(|r| {
                    r.start.as_ref() <= cursor.as_ref()
                        && (r.end.is_empty() || cursor.as_ref() < r.end.as_ref())
                })
                .cloned()
            else {
                return Err(format!(
                    "{}: no region of '{table}' holds row {}",
                    self.label,
                    printable(&cursor)
                ));
            };
            let region_stop: &[u8] =
                if region.end.is_empty() || (!stop.is_empty() && stop < region.end.as_ref()) {
                    stop
                } else {
                    &region.end
                };
            let mut last: Option<Bytes> = None;
            let scanned = self.scan_region(&region, &cursor, region_stop, spec, &mut |row| {
                last = Some(row.key.clone());
                visit(row)
            });
            match scanned {
                Ok(()) => {
                    failures = 0;
                    if region_stop == stop {
                        return Ok(());
                    }
                    cursor = region.end.clone();
                }
                Err((e, retry)) => {
                    failures += 1;
                    if !retry || failures >= ATTEMPTS {
                        return Err(format!(
                            "{}: scanning region {} on {}: {e}",
                            self.label,
                            printable(&region.name),
                            region.server
                        ));
                    }
                    if let Some(last) = last {
                        // Resume just after the last row handed over.
                        let mut next = last.to_vec();
                        next.push(0);
                        cursor = Bytes::from(next);
                    }
                    self.conns.remove(&region.server);
                    std::thread::sleep(Duration::from_millis(100 << failures.min(5)));
                    regions = self.regions(table)?;
                }
            }
        }
    }

    /// Scans [start, stop) of one region. On failure: the error, and whether a retry (after
    /// looking the region up again) may succeed.
    fn scan_region(
        &mut self,
        region: &RegionLoc,
        start: &[u8],
        stop: &[u8],
        spec: &ScanSpec,
        visit: &mut dyn FnMut(Row) -> Result<(), String>,
    ) -> Result<(), (String, bool)> {
        let retryable = |e: RpcError| {
            let fatal = matches!(
                e.short_class(),
                "TableNotFoundException"
                    | "AccessDeniedException"
                    | "NoSuchColumnFamilyException"
                    | "DoNotRetryIOException"
            ) || matches!(e, RpcError::Protocol(_));
            (e.to_string(), !fatal)
        };
        let conn = self.conn(&region.server).map_err(retryable)?;
        let scan = hbase::Scan {
            column: spec
                .families
                .iter()
                .map(|f| hbase::Column {
                    family: f.clone(),
                    qualifier: Vec::new(),
                })
                .collect(),
            start_row: Some(Bytes::copy_from_slice(start)),
            stop_row: Some(Bytes::copy_from_slice(stop)),
            time_range: spec.time_range.map(|(from, to)| hbase::TimeRange {
                from: Some(from),
                to: Some(to),
            }),
            max_versions: Some(spec.versions.unwrap_or(i32::MAX as u32)),
            cache_blocks: Some(false),
            caching: Some(ROWS_PER_CALL),
            ..Default::default()
        };
        let scan = if spec.raw { with_raw(scan) } else { scan };
        let open = hbase::ScanRequest {
            region: Some(hbase::RegionSpecifier {
                r#type: hbase::region_specifier::RegionSpecifierType::RegionName as i32,
                value: region.name.clone(),
            }),
            scan: Some(scan),
            number_of_rows: Some(ROWS_PER_CALL),
            client_handles_partials: Some(false),
            client_handles_heartbeats: Some(true),
            ..Default::default()
        };
        let (mut answer, mut cells) = conn
            .call::<hbase::ScanResponse>("Scan", &open)
            .map_err(retryable)?;
        let scanner = answer.scanner_id;
        let mut seq = 0u64;
        loop {
            let more_in_region = answer.more_results_in_region.unwrap_or(true)
                && answer.more_results.unwrap_or(true);
            let done = !more_in_region
                || (answer.results.is_empty()
                    && answer.cells_per_result.is_empty()
                    && !answer.heartbeat_message.unwrap_or(false));
            for row in rows_of(&answer, cells).map_err(|e| (e, false))? {
                visit(row).map_err(|e| (e, false))?;
            }
            if done {
                if more_in_region {
                    if let Some(id) = scanner {
                        let close = hbase::ScanRequest {
                            scanner_id: Some(id),
                            close_scanner: Some(true),
                            number_of_rows: Some(0),
                            ..Default::default()
                        };
                        let _ = conn.call::<hbase::ScanResponse>("Scan", &close);
                    }
                }
                return Ok(());
            }
            let Some(id) = scanner else {
                return Err(("the scan was opened without a scanner id".into(), true));
            };
            seq += 1;
            let next = hbase::ScanRequest {
                scanner_id: Some(id),
                number_of_rows: Some(ROWS_PER_CALL),
                next_call_seq: Some(seq - 1),
                client_handles_partials: Some(false),
                client_handles_heartbeats: Some(true),
                ..Default::default()
            };
            (answer, cells) = conn
                .call::<hbase::ScanResponse>("Scan", &next)
                .map_err(retryable)?;
        }
    }
}

/// `scan` made raw: HBase's client sends `Scan.setRaw(true)` as the `_raw_` attribute.
fn with_raw(mut scan: hbase::Scan) -> hbase::Scan {
    scan.attribute.push(hbase::NameBytesPair {
        name: "_raw_".to_string(),
        value: Some(Bytes::from_static(&[0xff])),
    });
    scan
}

/// The rows of a scan answer: cells in its cell block (counted by `cells_per_result`) or in
/// its protobuf results.
fn rows_of(answer: &hbase::ScanResponse, block: Bytes) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    if !answer.cells_per_result.is_empty() {
        let mut reader = CellReader::new(block);
        for &n in &answer.cells_per_result {
            let cells = reader
                .take(n as usize)
                .map_err(|e| format!("a scan answer's cell block: {e}"))?;
            if let Some(first) = cells.first() {
                rows.push(Row {
                    key: first.row.clone(),
                    cells,
                });
            }
        }
        return Ok(rows);
    }
    for result in &answer.results {
        let cells = result
            .cell
            .iter()
            .map(cell_of)
            .collect::<Result<Vec<_>, String>>()?;
        if let Some(first) = cells.first() {
            rows.push(Row {
                key: first.row.clone(),
                cells,
            });
        }
    }
    Ok(rows)
}

fn cell_of(c: &hbase::Cell) -> Result<Cell, String> {
    let code = c.cell_type.unwrap_or(4);
    let cell_type = u8::try_from(code)
        .ok()
        .and_then(CellType::from_code)
        .ok_or_else(|| format!("a cell of unknown type {code}"))?;
    Ok(Cell {
        row: c.row.clone().unwrap_or_default(),
        family: c.family.clone().unwrap_or_default(),
        qualifier: c.qualifier.clone().unwrap_or_default(),
        timestamp: c.timestamp.unwrap_or(0),
        cell_type,
        seq_id: 0,
        value: c.value.clone().unwrap_or_default(),
    })
}

/// The region a `hbase:meta` row describes, `None` for a split parent or an offline region.
/// On failure, whether reading again may help (a region not assigned yet).
fn region_of(row: &Row) -> Result<Option<RegionLoc>, (String, bool)> {
    let find = |q: &[u8]| {
        row.cells
            .iter()
            .find(|c| c.family.as_ref() == b"info" && c.qualifier.as_ref() == q)
    };
    let Some(info) = find(b"regioninfo") else {
        return Ok(None);
    };
    let pb = info.value.strip_prefix(b"PBUF").ok_or_else(|| {
        (
            format!("row {}: info:regioninfo is not PBUF", printable(&row.key)),
            false,
        )
    })?;
    let region = hbase::RegionInfo::decode(pb).map_err(|e| {
        (
            format!("row {}: info:regioninfo: {e}", printable(&row.key)),
            false,
        )
    })?;
    if region.offline.unwrap_or(false)
        || region.split.unwrap_or(false)
        || region.replica_id.unwrap_or(0) != 0
    {
        return Ok(None);
    }
    let server = find(b"server")
        .map(|c| String::from_utf8_lossy(&c.value).into_owned())
        .ok_or_else(|| {
            (
                format!(
                    "region {} is not assigned to a server yet",
                    printable(&row.key)
                ),
                true,
            )
        })?;
    Ok(Some(RegionLoc {
        name: row.key.clone(),
        start: region.start_key.unwrap_or_default(),
        end: region.end_key.unwrap_or_default(),
        server,
    }))
}

/// Reads one znode, bounded in time.
fn read_znode(quorum: &str, path: &str) -> Result<Vec<u8>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let read = async {
            let client = zookeeper_client::Client::connector()
                .with_session_timeout(Duration::from_secs(10))
                .with_connection_timeout(Duration::from_secs(10))
                .connect(quorum)
                .await
                .map_err(|e| e.to_string())?;
            let (data, _) = client.get_data(path).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(data)
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .map_err(|_| "no answer within 20 s".to_string())?
    })
}

/// A key as HBase's shell prints it: printable ASCII as is, other bytes as `\xNN`.
pub fn printable(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_addresses_parse_as_hbase_writes_them() {
        assert!(matches!(
            Locator::parse("127.0.0.1:16020").expect("bootstrap"),
            Locator::Bootstrap(s) if s == ["127.0.0.1:16020"]
        ));
        assert!(matches!(
            Locator::parse("h1:2181,h2:2181:/hbase").expect("cluster key"),
            Locator::ZooKeeper { quorum, parent } if quorum == "h1:2181,h2:2181" && parent == "/hbase"
        ));
        assert!(matches!(
            Locator::parse("zk://127.0.0.1:2182").expect("zk url"),
            Locator::ZooKeeper { quorum, parent } if quorum == "127.0.0.1:2182" && parent == "/hbase"
        ));
        assert!(Locator::parse("localhost").is_err());
        assert!(Locator::parse("").is_err());
    }

    #[test]
    fn keys_print_as_hbase_shell_prints_them() {
        assert_eq!(printable(b"row-1"), "row-1");
        assert_eq!(printable(&[0, b'a', 0xff]), "\\x00a\\xFF");
    }
}
