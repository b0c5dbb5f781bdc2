//! A fake Cellar server for client transport tests: it speaks the real frame format over
//! 127.0.0.1 and keeps rows of one column (`cf:q`) in memory, split into regions the test can
//! split further. Faults are injected per method: an error, a dropped connection, silence.

use bytes::{Buf, Bytes, BytesMut};
use cellar_client::CellType;
use cellar_proto::cellblock::{self, CellReader};
use cellar_proto::frame::{self, PREAMBLE};
use cellar_proto::pb::{self, ErrorCode, Method};
use prost::Message;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

pub const TABLE: &str = "t";

/// What the fake does with the next calls of a method.
#[derive(Debug, Clone)]
pub enum Fault {
    Error(ErrorCode, String),
    /// Closes the connection instead of answering.
    Close,
    /// Never answers.
    Hang,
    /// Answers normally after a pause.
    Delay(Duration),
}

#[derive(Debug, Clone)]
pub struct Region {
    pub id: u64,
    pub start: Bytes,
    pub end: Bytes,
}

impl Region {
    fn contains(&self, row: &[u8]) -> bool {
        row >= &self.start[..] && (self.end.is_empty() || row < &self.end[..])
    }
}

struct OpenScan {
    region: u64,
    rows: VecDeque<Bytes>,
}

#[derive(Default)]
pub struct State {
    pub rows: BTreeMap<Bytes, Bytes>,
    pub regions: Vec<Region>,
    next_region_id: u64,
    scanners: HashMap<u64, OpenScan>,
    next_scanner: u64,
    faults: HashMap<i32, VecDeque<Fault>>,
    /// Every call received: (connection number, method).
    pub calls: Vec<(u64, Method)>,
    /// Every SCAN_OPEN's start row.
    pub scan_opens: Vec<Bytes>,
    pub connections: u64,
    pub scanners_closed: u64,
    /// Reject the preamble with this error frame.
    pub reject_preamble: Option<String>,
    /// The lease SCAN_OPEN announces (the fake never expires scanners by itself).
    pub lease_ms: u32,
    addr: String,
}

impl State {
    pub fn open_scanners(&self) -> usize {
        self.scanners.len()
    }

    pub fn count(&self, m: Method) -> usize {
        self.calls.iter().filter(|(_, c)| *c == m).count()
    }
}

#[derive(Clone)]
pub struct Fake {
    pub addr: String,
    state: Arc<Mutex<State>>,
}

impl Fake {
    /// Starts a fake whose table has rows `rows` and regions starting at `splits`.
    pub async fn start(rows: &[&str], splits: &[&str]) -> Fake {
        let mut state = State {
            lease_ms: 60_000,
            ..State::default()
        };
        for r in rows {
            state.rows.insert(
                Bytes::copy_from_slice(r.as_bytes()),
                Bytes::from(format!("v-{r}")),
            );
        }
        let mut bounds: Vec<Bytes> = vec![Bytes::new()];
        bounds.extend(splits.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())));
        for (i, start) in bounds.iter().enumerate() {
            state.next_region_id += 1;
            state.regions.push(Region {
                id: state.next_region_id,
                start: start.clone(),
                end: bounds.get(i + 1).cloned().unwrap_or_default(),
            });
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        state.addr = addr.clone();
        let state = Arc::new(Mutex::new(state));
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let conn_no = {
                    let mut s = st.lock().expect("state");
                    s.connections += 1;
                    s.connections
                };
                tokio::spawn(serve(sock, conn_no, st.clone()));
            }
        });
        Fake { addr, state }
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("state")
    }

    /// The next `n` calls of `method` meet `fault`.
    pub fn inject(&self, method: Method, n: usize, fault: Fault) {
        let mut s = self.state();
        let q = s.faults.entry(method as i32).or_default();
        for _ in 0..n {
            q.push_back(fault.clone());
        }
    }

    /// Splits the region holding `at` there; its scanners now fail with NOT_SERVING_REGION.
    pub fn split(&self, at: &str) {
        let mut s = self.state();
        let at = Bytes::copy_from_slice(at.as_bytes());
        let i = s
            .regions
            .iter()
            .position(|r| r.contains(&at))
            .expect("region to split");
        let parent = s.regions.remove(i);
        let a = s.next_region_id + 1;
        let b = s.next_region_id + 2;
        s.next_region_id = b;
        s.regions.insert(
            i,
            Region {
                id: b,
                start: at.clone(),
                end: parent.end.clone(),
            },
        );
        s.regions.insert(
            i,
            Region {
                id: a,
                start: parent.start,
                end: at,
            },
        );
    }
}

async fn serve(sock: tokio::net::TcpStream, conn_no: u64, state: Arc<Mutex<State>>) {
    let (mut rd, mut wr) = sock.into_split();
    let mut pre = [0u8; 8];
    if rd.read_exact(&mut pre).await.is_err() {
        return;
    }
    let reject = state.lock().expect("state").reject_preamble.clone();
    if let Some(msg) = reject {
        let mut out = BytesMut::new();
        let header = pb::ResponseHeader {
            call_id: 0,
            error: Some(pb::RpcError {
                code: ErrorCode::MalformedRequest as i32,
                message: msg,
            }),
            ..Default::default()
        };
        frame::encode_response(&mut out, &header, &pb::Empty {}, &[]);
        let _ = wr.write_all(&out).await;
        return;
    }
    if frame::check_preamble(&pre).is_err() || wr.write_all(&PREAMBLE).await.is_err() {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Option<Bytes>>();
    tokio::spawn(async move {
        while let Some(Some(frame)) = rx.recv().await {
            if wr.write_all(&frame).await.is_err() {
                return;
            }
        }
        // `None` (or every sender gone): close the connection.
    });
    loop {
        let mut len = [0u8; 4];
        if rd.read_exact(&mut len).await.is_err() {
            break;
        }
        let len = (&len[..]).get_u32() as usize;
        let mut body = BytesMut::zeroed(len);
        if rd.read_exact(&mut body).await.is_err() {
            break;
        }
        let (header, parts) = frame::decode_request(body.freeze()).expect("request frame");
        let method = Method::try_from(header.method).expect("method");
        let fault = {
            let mut s = state.lock().expect("state");
            s.calls.push((conn_no, method));
            s.faults.get_mut(&header.method).and_then(|q| q.pop_front())
        };
        let answer = |result: Result<(Vec<u8>, Bytes), (ErrorCode, String)>| {
            let mut out = BytesMut::new();
            match result {
                Ok((param, cells)) => frame::encode_frame_raw(
                    &mut out,
                    &pb::ResponseHeader {
                        call_id: header.call_id,
                        error: None,
                        ..Default::default()
                    },
                    &param,
                    &cells,
                ),
                Err((code, message)) => frame::encode_response(
                    &mut out,
                    &pb::ResponseHeader {
                        call_id: header.call_id,
                        error: Some(pb::RpcError {
                            code: code as i32,
                            message,
                        }),
                        ..Default::default()
                    },
                    &pb::Empty {},
                    &[],
                ),
            }
            out.freeze()
        };
        match fault {
            Some(Fault::Error(code, msg)) => {
                let _ = tx.send(Some(answer(Err((code, msg)))));
            }
            Some(Fault::Close) => {
                let _ = tx.send(None);
                return;
            }
            Some(Fault::Hang) => {}
            Some(Fault::Delay(d)) => {
                let reply = handle(&state, method, parts.param, parts.cellblock);
                let tx = tx.clone();
                let frame = answer(reply);
                tokio::spawn(async move {
                    tokio::time::sleep(d).await;
                    let _ = tx.send(Some(frame));
                });
            }
            None => {
                let reply = handle(&state, method, parts.param, parts.cellblock);
                let _ = tx.send(Some(answer(reply)));
            }
        }
    }
}

type Reply = Result<(Vec<u8>, Bytes), (ErrorCode, String)>;

fn ok(m: impl Message) -> Reply {
    Ok((m.encode_to_vec(), Bytes::new()))
}

fn not_serving(id: u64) -> (ErrorCode, String) {
    (
        ErrorCode::NotServingRegion,
        format!("region {id} is not served here"),
    )
}

fn location(r: &Region, addr: &str) -> pb::RegionLocation {
    pb::RegionLocation {
        table: TABLE.into(),
        region_id: r.id,
        start_key: r.start.clone(),
        end_key: r.end.clone(),
        server: addr.to_string(),
        name: format!("{TABLE},{},{}", String::from_utf8_lossy(&r.start), r.id),
        state: pb::RegionState::Open as i32,
    }
}

fn put_row(cells: &mut BytesMut, row: &Bytes, value: &Bytes) -> pb::Result {
    cellblock::put_cell(cells, row, b"cf", b"q", 1, CellType::Put, value);
    pb::Result {
        cell_count: 1,
        partial: false,
    }
}

fn handle(state: &Mutex<State>, method: Method, param: Bytes, cells: Bytes) -> Reply {
    let mut s = state.lock().expect("state");
    let addr = s.addr.clone();
    match method {
        Method::Ping => ok(pb::Empty {}),
        Method::LocateRegion => {
            let req = pb::LocateRegionRequest::decode(param).expect("locate");
            if req.table != TABLE {
                return Err((
                    ErrorCode::TableNotFound,
                    format!("table '{}' not found", req.table),
                ));
            }
            let r = s
                .regions
                .iter()
                .find(|r| r.contains(&req.row))
                .expect("a region holds every row");
            ok(pb::LocateRegionResponse {
                location: Some(location(r, &addr)),
            })
        }
        Method::ListRegions => ok(pb::ListRegionsResponse {
            regions: s.regions.iter().map(|r| location(r, &addr)).collect(),
        }),
        Method::Get => {
            let req = pb::GetRequest::decode(param).expect("get");
            let region = req.region.expect("region");
            let get = req.get.expect("get");
            if !s
                .regions
                .iter()
                .any(|r| r.id == region.region_id && r.contains(&get.row))
            {
                return Err(not_serving(region.region_id));
            }
            let mut cells = BytesMut::new();
            let result = match s.rows.get(&get.row) {
                Some(v) => put_row(&mut cells, &get.row, v),
                None => pb::Result::default(),
            };
            Ok((
                pb::GetResponse {
                    result: Some(result),
                }
                .encode_to_vec(),
                cells.freeze(),
            ))
        }
        Method::Mutate => {
            let req = pb::MutateRequest::decode(param).expect("mutate");
            let m = req.mutation.expect("mutation");
            let cells = CellReader::new(cells)
                .take(m.cell_count as usize)
                .expect("cells");
            let mut out = BytesMut::new();
            let mut result = None;
            for c in cells {
                if m.kind == pb::MutationKind::Increment as i32 {
                    let old = s
                        .rows
                        .get(&c.row)
                        .and_then(|v| <[u8; 8]>::try_from(&v[..]).ok())
                        .map(i64::from_be_bytes)
                        .unwrap_or(0);
                    let add = <[u8; 8]>::try_from(&c.value[..]).map(i64::from_be_bytes);
                    let new = Bytes::copy_from_slice(&(old + add.unwrap_or(0)).to_be_bytes());
                    s.rows.insert(c.row.clone(), new.clone());
                    result = Some(put_row(&mut out, &c.row, &new));
                } else {
                    s.rows.insert(c.row, c.value);
                }
            }
            Ok((
                pb::MutateResponse {
                    processed: true,
                    result,
                }
                .encode_to_vec(),
                out.freeze(),
            ))
        }
        Method::Multi => {
            let req = pb::MultiRequest::decode(param).expect("multi");
            let mut reader = CellReader::new(cells);
            let mut out = BytesMut::new();
            let mut results = Vec::new();
            for a in req.actions {
                let region = a.region.expect("region");
                let (row, op) = match a.op.expect("op") {
                    pb::action::Op::Get(g) => (g.row.clone(), None),
                    pb::action::Op::Mutation(m) => {
                        let cells = reader.take(m.cell_count as usize).expect("cells");
                        (m.row.clone(), Some(cells))
                    }
                };
                if !s
                    .regions
                    .iter()
                    .any(|r| r.id == region.region_id && r.contains(&row))
                {
                    let (code, message) = not_serving(region.region_id);
                    results.push(pb::ActionResult {
                        index: a.index,
                        error: Some(pb::RpcError {
                            code: code as i32,
                            message,
                        }),
                        result: None,
                    });
                    continue;
                }
                let result = match op {
                    Some(cells) => {
                        for c in cells {
                            s.rows.insert(c.row, c.value);
                        }
                        None
                    }
                    None => Some(match s.rows.get(&row) {
                        Some(v) => put_row(&mut out, &row, v),
                        None => pb::Result::default(),
                    }),
                };
                results.push(pb::ActionResult {
                    index: a.index,
                    error: None,
                    result,
                });
            }
            Ok((pb::MultiResponse { results }.encode_to_vec(), out.freeze()))
        }
        Method::ScanOpen => {
            let req = pb::ScanOpenRequest::decode(param).expect("scan open");
            let region = req.region.expect("region");
            let scan = req.scan.expect("scan");
            s.scan_opens.push(scan.start_row.clone());
            let Some(r) = s.regions.iter().find(|r| r.id == region.region_id).cloned() else {
                return Err(not_serving(region.region_id));
            };
            let mut rows: VecDeque<Bytes> = s
                .rows
                .keys()
                .filter(|k| r.contains(k))
                .filter(|k| {
                    if scan.reversed {
                        (scan.start_row.is_empty() || **k <= scan.start_row)
                            && (scan.stop_row.is_empty() || **k > scan.stop_row)
                    } else {
                        **k >= scan.start_row && (scan.stop_row.is_empty() || **k < scan.stop_row)
                    }
                })
                .cloned()
                .collect();
            if scan.reversed {
                rows = rows.into_iter().rev().collect();
            }
            if scan.limit > 0 {
                rows.truncate(scan.limit as usize);
            }
            s.next_scanner += 1;
            let id = s.next_scanner;
            s.scanners.insert(id, OpenScan { region: r.id, rows });
            let (results, more, cells) = next_rows(&mut s, id, req.rows);
            Ok((
                pb::ScanOpenResponse {
                    scanner_id: id,
                    results,
                    more_in_region: more,
                    lease_ms: s.lease_ms,
                    ..Default::default()
                }
                .encode_to_vec(),
                cells,
            ))
        }
        Method::ScanNext => {
            let req = pb::ScanNextRequest::decode(param).expect("scan next");
            let Some(open) = s.scanners.get(&req.scanner_id) else {
                return Err((
                    ErrorCode::UnknownScanner,
                    format!("scanner {} is unknown", req.scanner_id),
                ));
            };
            let region = open.region;
            if !s.regions.iter().any(|r| r.id == region) {
                s.scanners.remove(&req.scanner_id);
                return Err(not_serving(region));
            }
            let (results, more, cells) = next_rows(&mut s, req.scanner_id, req.rows);
            Ok((
                pb::ScanNextResponse {
                    results,
                    more_in_region: more,
                    ..Default::default()
                }
                .encode_to_vec(),
                cells,
            ))
        }
        Method::ScanClose => {
            let req = pb::ScanCloseRequest::decode(param).expect("scan close");
            if s.scanners.remove(&req.scanner_id).is_some() {
                s.scanners_closed += 1;
            }
            ok(pb::Empty {})
        }
        other => Err((
            ErrorCode::UnknownMethod,
            format!("the fake does not do {other:?}"),
        )),
    }
}

/// Takes up to `n` rows from a scanner; closes it when it has no more.
fn next_rows(s: &mut State, id: u64, n: u32) -> (Vec<pb::Result>, bool, Bytes) {
    let mut cells = BytesMut::new();
    let mut results = Vec::new();
    let Some(open) = s.scanners.get_mut(&id) else {
        return (results, false, cells.freeze());
    };
    let mut taken = Vec::new();
    for _ in 0..n {
        match open.rows.pop_front() {
            Some(r) => taken.push(r),
            None => break,
        }
    }
    let more = !open.rows.is_empty();
    if !more {
        s.scanners.remove(&id);
    }
    for row in taken {
        let v = s.rows.get(&row).cloned().unwrap_or_default();
        results.push(put_row(&mut cells, &row, &v));
    }
    (results, more, cells.freeze())
}
