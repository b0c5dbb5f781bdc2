//! `rpc_bench transports`: Cellar Get and Put over TCP, UCX shared memory and UCX over its
//! own TCP transport, each beside its own floor measured the same way in the same run
//! (`docs/design/0005-transport.md` §5).
//!
//! A floor is a sized echo on the same transport, with the same shape as a Cellar call: a
//! separate server process, one connection shared by every caller of the client, calls
//! matched to answers by id, the request and the answer of a Get's or a Put's sizes. Over UCX
//! both sides use `cellar_ucx::link` as Cellar does (the echo answers from its progress thread,
//! as Cellar's server answers a Get from memory; a caller alone on the connection drives the
//! link while it waits, as Cellar's client does, others wait on a oneshot the progress thread
//! completes), so the floor differs from Cellar by the protocol and the server's work alone. Rounds interleave floor and Cellar calls; passes rotate the order of
//! the transports.

use crate::rpc_bench::{spawn_listening, standalone};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use cellar_client::{Client, ClientConfig, Transport};
use cellar_model::{FamilySchema, Get, RowMutation, TableSchema, LATEST_TIMESTAMP};
use cellar_ucx::link::{Events, Link, LinkOptions, PeerId, Replies};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex as StdMutex;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

pub type Result<T> = std::result::Result<T, String>;

/// The request bytes of a Get and the answer bytes beyond the value, and the reverse for a
/// Put, as Cellar's frames of these calls measure (headers, region, row, column, cell key).
const CALL_BYTES: usize = 64;
/// A Put's answer.
const PUT_ANSWER_BYTES: usize = 16;

/// One way the client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Way {
    Tcp,
    UcxSm,
    UcxTcp,
}

impl Way {
    pub fn parse(s: &str) -> Result<Way> {
        match s {
            "tcp" => Ok(Way::Tcp),
            "ucx-sm" => Ok(Way::UcxSm),
            "ucx-tcp" => Ok(Way::UcxTcp),
            other => Err(format!(
                "unknown transport {other:?}: use tcp, ucx-sm or ucx-tcp"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Way::Tcp => "tcp",
            Way::UcxSm => "ucx-sm",
            Way::UcxTcp => "ucx-tcp",
        }
    }

    /// `UCX_TLS` (and `UCX_NET_DEVICES`) for this way; children inherit them.
    pub fn env(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Way::Tcp => vec![],
            Way::UcxSm => vec![("UCX_TLS", "sm,self")],
            Way::UcxTcp => vec![("UCX_TLS", "tcp,self"), ("UCX_NET_DEVICES", "lo")],
        }
    }

    pub fn client(self) -> Transport {
        match self {
            Way::Tcp => Transport::Tcp,
            Way::UcxSm | Way::UcxTcp => Transport::Ucx,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub cellar_bin: PathBuf,
    pub self_exe: PathBuf,
    pub ways: Vec<Way>,
    pub sizes: Vec<usize>,
    /// Calls per measurement for 1 KiB values; fewer for larger ones (same bytes moved, at
    /// least 500 calls).
    pub ops: u64,
    pub passes: usize,
    pub concurrency: usize,
}

/// One row of the results: a transport, a size, an operation, Cellar beside its floor.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub transport: Way,
    pub value_size: usize,
    pub op: &'static str,
    pub p50_us: f64,
    pub p99_us: f64,
    pub floor_p50_us: f64,
    pub floor_p99_us: f64,
    pub ops_per_sec_1: f64,
    pub ops_per_sec_n: f64,
    pub floor_ops_per_sec_1: f64,
    pub floor_ops_per_sec_n: f64,
}

/// Accumulated over passes.
#[derive(Default)]
struct Acc {
    lat: Option<Histogram<u64>>,
    floor_lat: Option<Histogram<u64>>,
    tput1: Vec<f64>,
    tputn: Vec<f64>,
    floor_tput1: Vec<f64>,
    floor_tputn: Vec<f64>,
}

fn histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| e.to_string())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs every pass and returns one row per transport, size and operation.
pub fn run(opts: &Options) -> Result<Vec<Row>> {
    let mut acc: BTreeMap<(Way, usize, &'static str), Acc> = BTreeMap::new();
    for pass in 0..opts.passes {
        let mut ways = opts.ways.clone();
        let n = ways.len().max(1);
        ways.rotate_left(pass % n);
        for way in ways {
            eprintln!("pass {}/{}: {}", pass + 1, opts.passes, way.name());
            run_way(way, opts, &mut acc)?;
        }
    }
    Ok(acc
        .into_iter()
        .map(|((way, size, op), a)| {
            let q = |h: &Option<Histogram<u64>>, q: f64| {
                h.as_ref()
                    .map_or(0.0, |h| h.value_at_quantile(q) as f64 / 1000.0)
            };
            Row {
                transport: way,
                value_size: size,
                op,
                p50_us: q(&a.lat, 0.5),
                p99_us: q(&a.lat, 0.99),
                floor_p50_us: q(&a.floor_lat, 0.5),
                floor_p99_us: q(&a.floor_lat, 0.99),
                ops_per_sec_1: median(&a.tput1),
                ops_per_sec_n: median(&a.tputn),
                floor_ops_per_sec_1: median(&a.floor_tput1),
                floor_ops_per_sec_n: median(&a.floor_tputn),
            }
        })
        .collect())
}

fn ops_for(opts: &Options, size: usize) -> u64 {
    (opts.ops * 1024 / size.max(1024) as u64).max(500)
}

fn key(size: usize, i: u64) -> Bytes {
    Bytes::from(format!(
        "s{size:07}-{:010}",
        i.wrapping_mul(0x9E37_79B9) % 10_000_000_000
    ))
}

fn run_way(
    way: Way,
    opts: &Options,
    acc: &mut BTreeMap<(Way, usize, &'static str), Acc>,
) -> Result<()> {
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let env = way.env();
    let cellar = standalone(&opts.cellar_bin, data.path())
        .envs(env.iter().copied())
        .start()?;
    let cellar_addr = cellar.native.clone();
    let server_pid = cellar.process.pid();
    let mut echo = Command::new(&opts.self_exe);
    echo.arg("sized-echo");
    if way != Way::Tcp {
        echo.arg("--ucx");
    }
    echo.envs(env.iter().copied());
    let (_echo, echo_addr) = spawn_listening(echo, "echo")?;
    in_way_env(way, async {
        let client = Client::connect_with(
            &cellar_addr,
            ClientConfig {
                transport: way.client(),
                ..ClientConfig::default()
            },
        )
        .await
        .map_err(|e| format!("connect to Cellar over {}: {e}", way.name()))?;
        if way != Way::Tcp && !client.uses_ucx().await.map_err(|e| e.to_string())? {
            return Err(format!("the client is not on UCX for {}", way.name()));
        }
        client
            .admin()
            .create_table(
                TableSchema::new("bench", vec![FamilySchema::new("cf")]),
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        let floor = Arc::new(FloorClient::connect(&echo_addr, way != Way::Tcp).await?);
        for &size in &opts.sizes {
            measure_size(way, size, opts, &client, server_pid, &floor, acc).await?;
        }
        Ok(())
    })
}

/// Runs `client` on a runtime of one worker thread with `way`'s UCX settings in this
/// process's environment (the client's UCX context reads them when it starts), and takes them
/// out again afterwards.
pub fn in_way_env<T>(way: Way, client: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let env = way.env();
    for (k, v) in &env {
        std::env::set_var(k, v);
    }
    let result = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(client));
    for (k, _) in &env {
        std::env::remove_var(k);
    }
    result
}

#[allow(clippy::too_many_arguments)]
async fn measure_size(
    way: Way,
    size: usize,
    opts: &Options,
    client: &Client,
    server_pid: u32,
    floor: &Arc<FloorClient>,
    acc: &mut BTreeMap<(Way, usize, &'static str), Acc>,
) -> Result<()> {
    let table = &client.table("bench");
    let ops = ops_for(opts, size);
    let value = Bytes::from(vec![0x61u8; size]);
    // Load the keys the Gets read (and warm every path up).
    for i in 0..ops {
        table
            .put(RowMutation::new(key(size, i)).put(b"cf", b"v", LATEST_TIMESTAMP, value.clone()))
            .await
            .map_err(|e| e.to_string())?;
    }
    // Measure a quiet server (the load's flushes and compactions done) with every key read
    // once, so the Gets are timed on a warm block cache from their first round on.
    settle(server_pid).await;
    for i in 0..ops {
        cellar_call(table, "get", size, i, &value).await?;
    }
    for _ in 0..ops.min(500) {
        floor.call(CALL_BYTES, size + CALL_BYTES).await?;
        floor.call(size + CALL_BYTES, PUT_ANSWER_BYTES).await?;
    }
    const ROUNDS: u64 = 10;
    let per_round = (ops / ROUNDS).max(1);
    for op in ["get", "put"] {
        let (req, ans) = if op == "get" {
            (CALL_BYTES, size + CALL_BYTES)
        } else {
            (size + CALL_BYTES, PUT_ANSWER_BYTES)
        };
        let a = acc.entry((way, size, op)).or_default();
        if a.lat.is_none() {
            a.lat = Some(histogram()?);
            a.floor_lat = Some(histogram()?);
        }
        let (Some(lat), Some(floor_lat)) = (a.lat.as_mut(), a.floor_lat.as_mut()) else {
            return Err("histograms missing".into());
        };
        for round in 0..ROUNDS {
            for _ in 0..per_round {
                let t = Instant::now();
                floor.call(req, ans).await?;
                floor_lat.saturating_record(t.elapsed().as_nanos() as u64);
            }
            for j in 0..per_round {
                let i = (round * per_round + j) % ops;
                let t = Instant::now();
                cellar_call(table, op, size, i, &value).await?;
                lat.saturating_record(t.elapsed().as_nanos() as u64);
            }
        }
        for callers in [1, opts.concurrency] {
            let n = (ops / callers as u64).max(1);
            let floor_rate = throughput(callers, n, {
                let floor = floor.clone();
                move |_| {
                    let floor = floor.clone();
                    async move { floor.call(req, ans).await }
                }
            })
            .await?;
            let rate = throughput(callers, n, {
                let (table, value) = (table.clone(), value.clone());
                move |i| {
                    let (table, value) = (table.clone(), value.clone());
                    async move { cellar_call(&table, op, size, i % ops, &value).await }
                }
            })
            .await?;
            let a = acc.entry((way, size, op)).or_default();
            if callers == 1 {
                a.tput1.push(rate);
                a.floor_tput1.push(floor_rate);
            } else {
                a.tputn.push(rate);
                a.floor_tputn.push(floor_rate);
            }
        }
    }
    Ok(())
}

/// Waits (at most 20 s) until the server uses under 5 % of a CPU over 200 ms.
async fn settle(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    // SAFETY: a plain query of a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    while Instant::now() < deadline {
        let Ok(before) = crate::rpc_bench::cpu_ticks(pid) else {
            return;
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Ok(after) = crate::rpc_bench::cpu_ticks(pid) else {
            return;
        };
        if ((after - before) as f64 / hz) < 0.2 * 0.05 {
            return;
        }
    }
}

async fn cellar_call(
    table: &cellar_client::Table,
    op: &str,
    size: usize,
    i: u64,
    value: &Bytes,
) -> Result<()> {
    if op == "get" {
        let row = table
            .get(Get::new(key(size, i)).column(b"cf", b"v"))
            .await
            .map_err(|e| e.to_string())?;
        if row.cells.first().map(|c| c.value.len()) != Some(size) {
            return Err(format!(
                "get of a {size}-byte value read back something else"
            ));
        }
    } else {
        table
            .put(RowMutation::new(key(size, i)).put(b"cf", b"v", LATEST_TIMESTAMP, value.clone()))
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Calls per second of `callers` tasks making `n` calls each.
async fn throughput<F, Fut>(callers: usize, n: u64, call: F) -> Result<f64>
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..callers as u64 {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            for j in 0..n {
                call(c * n + j).await?;
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok((n * callers as u64) as f64 / started.elapsed().as_secs_f64())
}

// ---- The floor: a sized echo ----
//
// A request is `u32 len | u32 answer_bytes | u64 id | padding`; the answer `u32 len | u64 id |
// padding` of `answer_bytes` in all. Over TCP both go on one connection; over UCX each is one
// message, after the two sides swapped worker addresses on a TCP connection
// (`u32 len | address | u32 peer id` each way), as Cellar's TRANSPORT_HELLO does.

type Waiters = Arc<StdMutex<HashMap<u64, oneshot::Sender<()>>>>;

fn waiting(w: &Waiters) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<()>>> {
    w.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The floor's client: one connection, callers matched to answers by id.
pub struct FloorClient {
    waiters: Waiters,
    next: AtomicU64,
    out: FloorOut,
}

enum FloorOut {
    Tcp(tokio::sync::Mutex<tokio::net::tcp::OwnedWriteHalf>),
    Ucx {
        link: Link,
        peer: PeerId,
        _control: TcpStream,
    },
}

fn request(id: u64, bytes: usize, answer: usize) -> Bytes {
    let bytes = bytes.max(16);
    let mut b = BytesMut::with_capacity(bytes);
    b.put_u32((bytes - 4) as u32);
    b.put_u32(answer.max(12) as u32);
    b.put_u64(id);
    b.resize(bytes, 0x5a);
    b.freeze()
}

fn answer_of(req: &[u8]) -> Option<Bytes> {
    let mut r = req.get(4..16)?;
    let bytes = (r.get_u32() as usize).max(12);
    let id = r.get_u64();
    let mut b = BytesMut::with_capacity(bytes);
    b.put_u32((bytes - 4) as u32);
    b.put_u64(id);
    b.resize(bytes, 0xa5);
    Some(b.freeze())
}

struct FloorDeliver {
    waiters: Waiters,
}

impl Events for FloorDeliver {
    fn frame(&mut self, _peer: PeerId, frame: Bytes, _replies: &mut Replies) {
        if let Some(mut id) = frame.get(4..12) {
            if let Some(w) = waiting(&self.waiters).remove(&id.get_u64()) {
                let _ = w.send(());
            }
        }
    }

    fn lost(&mut self, peer: PeerId, why: String) {
        eprintln!("floor: UCX peer {peer} lost: {why}");
        waiting(&self.waiters).clear();
    }
}

impl FloorClient {
    pub async fn connect(addr: &str, ucx: bool) -> Result<FloorClient> {
        let mut sock = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        sock.set_nodelay(true).map_err(|e| e.to_string())?;
        let waiters: Waiters = Arc::default();
        let out = if ucx {
            let lib = cellar_ucx::Ucx::load().map_err(|e| e.to_string())?;
            let link = Link::start(
                &lib,
                LinkOptions::default(),
                FloorDeliver {
                    waiters: waiters.clone(),
                },
            )
            .map_err(|e| e.to_string())?;
            let mine: PeerId = 1;
            let (address, theirs) = swap_addresses(&mut sock, link.address(), mine).await?;
            link.connect(mine, address, theirs)
                .map_err(|e| e.to_string())?;
            FloorOut::Ucx {
                link,
                peer: mine,
                _control: sock,
            }
        } else {
            let (mut rd, wr) = sock.into_split();
            let w = waiters.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let Ok(len) = rd.read_u32().await else { return };
                    buf.resize(len as usize, 0);
                    if rd.read_exact(&mut buf).await.is_err() {
                        return;
                    }
                    let Some(mut id) = buf.get(..8) else { return };
                    if let Some(waiter) = waiting(&w).remove(&id.get_u64()) {
                        let _ = waiter.send(());
                    }
                }
            });
            FloorOut::Tcp(tokio::sync::Mutex::new(wr))
        };
        Ok(FloorClient {
            waiters,
            next: AtomicU64::new(1),
            out,
        })
    }

    /// One call: `bytes` out, `answer` bytes back.
    pub async fn call(&self, bytes: usize, answer: usize) -> Result<()> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        waiting(&self.waiters).insert(id, tx);
        let req = request(id, bytes, answer);
        match &self.out {
            FloorOut::Tcp(wr) => wr
                .lock()
                .await
                .write_all(&req)
                .await
                .map_err(|e| e.to_string())?,
            FloorOut::Ucx { link, peer, .. } => {
                // As the client does (`ClientConfig::ucx_drive`): the caller drives the link
                // while it waits, for as long.
                link.send_then_drive(*peer, req)
                    .map_err(|e| e.to_string())?;
                let drive = ClientConfig::default().ucx_drive;
                link.drive(
                    drive,
                    || !waiting(&self.waiters).contains_key(&id),
                    || waiting(&self.waiters).keys().any(|k| *k != id),
                );
            }
        }
        tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .map_err(|_| "floor call timed out".to_string())?
            .map_err(|_| "floor connection lost".to_string())
    }
}

async fn swap_addresses(
    sock: &mut TcpStream,
    mine: &[u8],
    my_id: PeerId,
) -> Result<(Vec<u8>, PeerId)> {
    let mut out = BytesMut::new();
    out.put_u32(mine.len() as u32);
    out.put_slice(mine);
    out.put_u32(my_id);
    sock.write_all(&out).await.map_err(|e| e.to_string())?;
    let len = sock.read_u32().await.map_err(|e| e.to_string())? as usize;
    if len > 1 << 20 {
        return Err(format!("a worker address of {len} bytes"));
    }
    let mut address = vec![0u8; len];
    sock.read_exact(&mut address)
        .await
        .map_err(|e| e.to_string())?;
    let id = sock.read_u32().await.map_err(|e| e.to_string())?;
    Ok((address, id))
}

struct EchoEvents;

impl Events for EchoEvents {
    fn frame(&mut self, peer: PeerId, frame: Bytes, replies: &mut Replies) {
        if let Some(answer) = answer_of(&frame) {
            replies.send(peer, answer);
        }
    }

    fn lost(&mut self, _peer: PeerId, _why: String) {}
}

/// The floor's server (`rpc_bench sized-echo [--ucx]`): prints `listening echo=ADDR`.
pub async fn sized_echo(ucx: bool) -> Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "listening echo={}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let link = if ucx {
        let lib = cellar_ucx::Ucx::load().map_err(|e| e.to_string())?;
        Some(Arc::new(
            Link::start(&lib, LinkOptions::default(), EchoEvents).map_err(|e| e.to_string())?,
        ))
    } else {
        None
    };
    let mut next_peer: PeerId = 1;
    loop {
        let (mut sock, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let _ = sock.set_nodelay(true);
        if let Some(link) = &link {
            let peer = next_peer;
            next_peer += 1;
            let (address, theirs) = swap_addresses(&mut sock, link.address(), peer).await?;
            link.connect(peer, address, theirs)
                .map_err(|e| e.to_string())?;
            // The control connection stays open until the client goes.
            tokio::spawn(async move {
                let mut b = [0u8; 64];
                while matches!(sock.read(&mut b).await, Ok(n) if n > 0) {}
            });
            continue;
        }
        tokio::spawn(async move {
            let mut buf = Vec::new();
            loop {
                let Ok(len) = sock.read_u32().await else {
                    return;
                };
                buf.resize(len as usize + 4, 0);
                buf[..4].copy_from_slice(&len.to_be_bytes());
                if sock.read_exact(&mut buf[4..]).await.is_err() {
                    return;
                }
                let Some(answer) = answer_of(&buf) else {
                    return;
                };
                if sock.write_all(&answer).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Prints the rows as one table per size.
pub fn print(rows: &[Row], concurrency: usize) {
    println!(
        "{:<8} {:>7} {:<4} {:>9} {:>9} {:>9} {:>9} {:>6} {:>10} {:>10} {:>10} {:>10}",
        "transport",
        "size",
        "op",
        "p50 µs",
        "p99 µs",
        "floor p50",
        "floor p99",
        "×floor",
        "ops/s 1",
        "floor 1",
        format!("ops/s {concurrency}"),
        format!("floor {concurrency}"),
    );
    for r in rows {
        println!(
            "{:<8} {:>7} {:<4} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>6.2} {:>10.0} {:>10.0} {:>10.0} {:>10.0}",
            r.transport.name(),
            r.value_size,
            r.op,
            r.p50_us,
            r.p99_us,
            r.floor_p50_us,
            r.floor_p99_us,
            r.p50_us / r.floor_p50_us.max(0.001),
            r.ops_per_sec_1,
            r.floor_ops_per_sec_1,
            r.ops_per_sec_n,
            r.floor_ops_per_sec_n,
        );
    }
}
