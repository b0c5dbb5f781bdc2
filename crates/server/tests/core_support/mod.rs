//! Drives a region server in-process through `Handler::call` with real protobuf messages and
//! cell blocks, as a client would over the wire.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use cellar_model::MutationKind;
use cellar_model::{Cell, FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_proto::cellblock::CellReader;
use cellar_proto::convert;
use cellar_proto::pb::{self, Method};
use cellar_server::master::Master;
use cellar_server::native_service::NativeService;
use cellar_server::region_server::RegionServer;
use cellar_server::rpc::{CallContext, Handler};
use cellar_server::ServerConfig;
use prost::Message;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const CONN: u64 = 1;

/// Results of a scan call: each result's cells and whether it is partial.
pub type Results = Vec<(Vec<Cell>, bool)>;

/// A config for tests: data in `dir`, no automatic splits, small caches.
pub fn test_config(dir: &std::path::Path) -> ServerConfig {
    let mut c = ServerConfig {
        data_dir: dir.to_path_buf(),
        ..ServerConfig::default()
    };
    c.split.auto = false;
    c.storage.block_cache_bytes = Some(8 * 1024 * 1024);
    c
}

/// A server in a temporary directory, shut down when dropped.
pub struct TestServer {
    /// Removed when the server is dropped, unless the directory was given.
    _tmp: Option<tempfile::TempDir>,
    pub config: ServerConfig,
    server: Option<Arc<NativeService>>,
}

pub fn code(e: &pb::RpcError) -> pb::ErrorCode {
    pb::ErrorCode::try_from(e.code).unwrap_or(pb::ErrorCode::Unspecified)
}

/// Panics unless `r` failed with `want`, and returns the message.
#[track_caller]
pub fn expect_code<T: std::fmt::Debug>(r: Result<T, pb::RpcError>, want: pb::ErrorCode) -> String {
    match r {
        Ok(v) => panic!("expected {want:?}, got success {v:?}"),
        Err(e) => {
            assert_eq!(code(&e), want, "message: {}", e.message);
            e.message
        }
    }
}

/// Retries a call while its region is being split (NOT_SERVING_REGION), as clients do.
pub fn retrying<T>(what: &str, mut f: impl FnMut() -> Result<T, pb::RpcError>) -> T {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if code(&e) == pb::ErrorCode::NotServingRegion && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => panic!("{what}: {e:?}"),
        }
    }
}

/// A standalone server on `config`'s directory: its region server, master and dispatcher.
fn open(config: &ServerConfig, what: &str) -> Arc<NativeService> {
    let rs = RegionServer::open(config, "127.0.0.1:16200".into()).expect(what);
    let master = Master::start(Arc::clone(&rs));
    NativeService::new(rs, Some(master))
}

pub fn family(name: &str) -> FamilySchema {
    FamilySchema::new(name)
}

pub fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::with_config(|_| {})
    }

    pub fn with_config(f: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut ts = TestServer::at(tmp.path(), f);
        ts._tmp = Some(tmp);
        ts
    }

    /// A server on an existing data directory (kept when dropped).
    pub fn at(dir: &std::path::Path, f: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let mut config = test_config(dir);
        f(&mut config);
        let server = open(&config, "server opens");
        TestServer {
            _tmp: None,
            config,
            server: Some(server),
        }
    }

    pub fn dir(&self) -> &std::path::Path {
        &self.config.data_dir
    }

    /// The running server: its native dispatcher, over its region server and master.
    pub fn server(&self) -> &Arc<NativeService> {
        self.server.as_ref().expect("server is running")
    }

    /// The running server's region server.
    pub fn region_server(&self) -> &Arc<RegionServer> {
        self.server().region_server()
    }

    /// The running server's master.
    pub fn master(&self) -> &Arc<Master> {
        self.server()
            .master()
            .expect("a standalone server has a master")
    }

    /// Clean shutdown, then open again.
    pub fn restart(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().expect("shutdown");
        }
        self.open();
    }

    /// Drops the server without shutdown (no flush, as a crash), then opens again.
    pub fn crash_restart(&mut self) {
        let s = self.server.take().expect("running");
        let rs = Arc::clone(s.region_server());
        drop(s);
        assert_eq!(Arc::strong_count(&rs), 1, "someone still holds the server");
        drop(rs);
        self.open();
    }

    pub fn open(&mut self) {
        self.server = Some(open(&self.config, "server reopens"));
    }

    pub fn take(&mut self) -> Arc<NativeService> {
        self.server.take().expect("running")
    }

    /// One call through the handler on connection `conn`.
    pub fn call_on<Req: Message, Resp: Message + Default>(
        &self,
        conn: u64,
        method: Method,
        req: &Req,
        cells: Bytes,
    ) -> Result<(Resp, Bytes), pb::RpcError> {
        let reply = self.server().call(
            &CallContext::internal(conn),
            method,
            req.encode_to_vec().into(),
            cells,
        )?;
        let resp = Resp::decode(reply.param).expect("response decodes");
        Ok((resp, reply.cellblock))
    }

    pub fn call<Req: Message, Resp: Message + Default>(
        &self,
        method: Method,
        req: &Req,
        cells: Bytes,
    ) -> Result<(Resp, Bytes), pb::RpcError> {
        self.call_on(CONN, method, req, cells)
    }

    pub fn admin(&self, method: Method, table: &str) -> Result<(), pb::RpcError> {
        self.call::<_, pb::Empty>(
            method,
            &pb::TableRequest {
                table: table.into(),
            },
            Bytes::new(),
        )
        .map(|_| ())
    }

    pub fn create_table(&self, schema: &TableSchema, splits: &[&[u8]]) -> Result<(), pb::RpcError> {
        self.call::<_, pb::Empty>(
            Method::CreateTable,
            &pb::CreateTableRequest {
                schema: Some(convert::schema_to_pb(schema)),
                split_keys: splits.iter().map(|s| Bytes::copy_from_slice(s)).collect(),
            },
            Bytes::new(),
        )
        .map(|_| ())
    }

    /// Creates `table` with families named, default options.
    pub fn create(&self, table: &str, families: &[&str], splits: &[&[u8]]) {
        let schema = TableSchema::new(table, families.iter().map(|f| family(f)).collect());
        self.create_table(&schema, splits).expect("create table");
    }

    pub fn describe(&self, table: &str) -> Result<pb::TableInfo, pb::RpcError> {
        let (r, _): (pb::DescribeTableResponse, _) = self.call(
            Method::DescribeTable,
            &pb::TableRequest {
                table: table.into(),
            },
            Bytes::new(),
        )?;
        Ok(r.table.expect("table info"))
    }

    pub fn regions(&self, table: &str) -> Result<Vec<pb::RegionLocation>, pb::RpcError> {
        let (r, _): (pb::ListRegionsResponse, _) = self.call(
            Method::ListRegions,
            &pb::ListRegionsRequest {
                table: table.into(),
            },
            Bytes::new(),
        )?;
        Ok(r.regions)
    }

    pub fn locate(&self, table: &str, row: &[u8]) -> Result<pb::RegionLocation, pb::RpcError> {
        let (r, _): (pb::LocateRegionResponse, _) = self.call(
            Method::LocateRegion,
            &pb::LocateRegionRequest {
                table: table.into(),
                row: Bytes::copy_from_slice(row),
            },
            Bytes::new(),
        )?;
        Ok(r.location.expect("location"))
    }

    /// A mutation sent to a given region.
    pub fn mutate_at(
        &self,
        region: pb::RegionRef,
        m: &RowMutation,
        kind: MutationKind,
        condition: Option<pb::Condition>,
    ) -> Result<(bool, Vec<Cell>), pb::RpcError> {
        let mut cells = BytesMut::new();
        let mutation = convert::mutation_to_pb(m, kind, &mut cells);
        let (resp, block): (pb::MutateResponse, _) = self.call(
            Method::Mutate,
            &pb::MutateRequest {
                region: Some(region),
                mutation: Some(mutation),
                condition,
            },
            cells.freeze(),
        )?;
        let cells = match &resp.result {
            Some(r) => {
                convert::result_from_pb(r, &mut CellReader::new(block)).expect("result cells")
            }
            None => Vec::new(),
        };
        Ok((resp.processed, cells))
    }

    /// A mutation sent where `locate` says its row is (one attempt).
    pub fn mutate(
        &self,
        table: &str,
        m: &RowMutation,
        kind: MutationKind,
        condition: Option<pb::Condition>,
    ) -> Result<(bool, Vec<Cell>), pb::RpcError> {
        let loc = self.locate(table, &m.row)?;
        self.mutate_at(region_ref(&loc), m, kind, condition)
    }

    pub fn put(&self, table: &str, row: &str, fam: &str, q: &str, v: &str) {
        let m = convert::single_put(row.as_bytes(), fam.as_bytes(), q.as_bytes(), v.as_bytes());
        self.mutate(table, &m, MutationKind::PutDelete, None)
            .expect("put");
    }

    pub fn get_at(&self, region: pb::RegionRef, get: &Get) -> Result<Vec<Cell>, pb::RpcError> {
        let (resp, block): (pb::GetResponse, _) = self.call(
            Method::Get,
            &pb::GetRequest {
                region: Some(region),
                get: Some(convert::get_to_pb(get)),
            },
            Bytes::new(),
        )?;
        Ok(
            convert::result_from_pb(&resp.result.expect("result"), &mut CellReader::new(block))
                .expect("cells"),
        )
    }

    pub fn get(&self, table: &str, get: &Get) -> Result<Vec<Cell>, pb::RpcError> {
        let loc = self.locate(table, &get.row)?;
        self.get_at(region_ref(&loc), get)
    }

    /// The newest value of one column, if any.
    pub fn value(&self, table: &str, row: &str, fam: &str, q: &str) -> Option<Bytes> {
        let g = Get::new(b(row)).column(fam.as_bytes(), q.as_bytes());
        self.get(table, &g)
            .expect("get")
            .first()
            .map(|c| c.value.clone())
    }

    pub fn scan_open(
        &self,
        conn: u64,
        region: pb::RegionRef,
        scan: &Scan,
        rows: u32,
    ) -> Result<(pb::ScanOpenResponse, Results), pb::RpcError> {
        let (resp, block): (pb::ScanOpenResponse, _) = self.call_on(
            conn,
            Method::ScanOpen,
            &pb::ScanOpenRequest {
                region: Some(region),
                scan: Some(convert::scan_to_pb(scan)),
                rows,
                ..Default::default()
            },
            Bytes::new(),
        )?;
        let results = take_results(&resp.results, block);
        Ok((resp, results))
    }

    pub fn scan_next(&self, scanner_id: u64, rows: u32) -> Result<(bool, Results), pb::RpcError> {
        let (resp, block): (pb::ScanNextResponse, _) = self.call(
            Method::ScanNext,
            &pb::ScanNextRequest { scanner_id, rows },
            Bytes::new(),
        )?;
        let results = take_results(&resp.results, block);
        Ok((resp.more_in_region, results))
    }

    /// Every result of one region's scan, `rows` per call.
    pub fn scan_region(
        &self,
        region: pb::RegionRef,
        scan: &Scan,
        rows: u32,
    ) -> Result<Vec<(Vec<Cell>, bool)>, pb::RpcError> {
        let (open, mut all) = self.scan_open(CONN, region, scan, rows)?;
        let mut more = open.more_in_region;
        let mut calls = 0;
        while more {
            calls += 1;
            assert!(calls < 1_000_000, "scan does not end");
            let (m, results) = self.scan_next(open.scanner_id, rows)?;
            more = m;
            all.extend(results);
        }
        Ok(all)
    }

    /// A whole-table forward scan as a client does it: region by region in key order,
    /// locating each. A region split or closed under the scan (NOT_SERVING_REGION) is located
    /// again and the scan resumes after the last whole row received.
    pub fn scan_table(
        &self,
        table: &str,
        scan: &Scan,
        rows: u32,
    ) -> Result<Vec<Vec<Cell>>, pb::RpcError> {
        assert!(!scan.reversed, "forward scans only");
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut out: Vec<Vec<Cell>> = Vec::new();
        let mut start = scan.start_row.clone();
        let mut relocations = 0;
        loop {
            assert!(Instant::now() < deadline, "table scan takes too long");
            let loc = self.locate(table, &start)?;
            let mut s = scan.clone();
            s.start_row = start.clone();
            if scan.limit > 0 {
                s.limit = scan.limit - out.len() as u64;
            }
            let mut partial = false;
            let attempt = (|| -> Result<(), pb::RpcError> {
                let (open, results) = self.scan_open(CONN, region_ref(&loc), &s, rows)?;
                partial = merge_tracking(&mut out, results, partial);
                let mut more = open.more_in_region;
                while more {
                    let (m, results) = self.scan_next(open.scanner_id, rows)?;
                    partial = merge_tracking(&mut out, results, partial);
                    more = m;
                }
                Ok(())
            })();
            match attempt {
                Ok(()) => {
                    let done = loc.end_key.is_empty()
                        || (!scan.stop_row.is_empty() && loc.end_key >= scan.stop_row)
                        || (scan.limit > 0 && out.len() as u64 >= scan.limit);
                    if done {
                        return Ok(out);
                    }
                    start = loc.end_key.clone();
                }
                Err(e) if code(&e) == pb::ErrorCode::NotServingRegion => {
                    relocations += 1;
                    assert!(relocations < 10_000, "scan keeps failing: {}", e.message);
                    if partial {
                        out.pop(); // an incomplete wide row is read again whole
                    }
                    if let Some(last) = out.last() {
                        let mut next = last[0].row.to_vec();
                        next.push(0);
                        if next.as_slice() > &start[..] {
                            start = Bytes::from(next);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Appends results to `out`, joining partial rows; `continuing`: the last result appended
/// was partial. Returns whether the last result now appended is partial.
pub fn merge_tracking(
    out: &mut Vec<Vec<Cell>>,
    results: Vec<(Vec<Cell>, bool)>,
    mut continuing: bool,
) -> bool {
    for (cells, partial) in results {
        match out.last_mut() {
            Some(last) if continuing => last.extend(cells),
            _ => out.push(cells),
        }
        continuing = partial;
    }
    continuing
}

/// Appends results, joining partial rows.
pub fn merge_results(out: &mut Vec<Vec<Cell>>, results: Vec<(Vec<Cell>, bool)>) {
    merge_tracking(out, results, false);
}

fn take_results(results: &[pb::Result], block: Bytes) -> Vec<(Vec<Cell>, bool)> {
    let mut reader = CellReader::new(block);
    results
        .iter()
        .map(|r| {
            (
                convert::result_from_pb(r, &mut reader).expect("result cells"),
                r.partial,
            )
        })
        .collect()
}

pub fn region_ref(loc: &pb::RegionLocation) -> pb::RegionRef {
    pb::RegionRef {
        table: loc.table.clone(),
        region_id: loc.region_id,
    }
}

/// Rows of cells as `(row, qualifier, value)` strings, for assertions.
pub fn flat(rows: &[Vec<Cell>]) -> Vec<(String, String, String)> {
    rows.iter()
        .flatten()
        .map(|c| {
            (
                String::from_utf8_lossy(&c.row).into_owned(),
                String::from_utf8_lossy(&c.qualifier).into_owned(),
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect()
}

pub fn row_keys(rows: &[Vec<Cell>]) -> Vec<String> {
    rows.iter()
        .map(|r| String::from_utf8_lossy(&r[0].row).into_owned())
        .collect()
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            let _ = s.shutdown();
        }
    }
}
