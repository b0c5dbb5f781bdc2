//! `rpc_bench`: Get and Put of one value over loopback TCP against a real `cellar standalone`,
//! beside the floor — a bare tokio TCP ping-pong of the same message size — in the same run.
//!
//! Placement matters more than anything else on a small machine: a wake-up that crosses CPUs
//! costs tens of microseconds. Each placement pins the server process and this process with
//! `sched_setaffinity` (children inherit the parent's mask at spawn): `same` puts both on CPU 0,
//! `split` the server on CPU 1 and the client on CPU 0.

use bytes::Bytes;
use cellar_client::{Client, ClientConfig};
use cellar_model::{FamilySchema, Get, RowMutation, TableSchema, LATEST_TIMESTAMP};
use cellar_testing::{Cellar, Log, Process, START_TIMEOUT};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub type Result<T> = std::result::Result<T, String>;

/// Where the server and the client run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Server and client share CPU 0.
    Same,
    /// Server on CPU 1, client on CPU 0.
    Split,
}

impl Placement {
    fn cpus(self) -> (usize, usize) {
        match self {
            Placement::Same => (0, 0),
            Placement::Split => (1, 0),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    pub cellar_bin: PathBuf,
    pub ops: u64,
    pub value_size: usize,
    pub concurrency: usize,
    pub placements: Vec<Placement>,
    /// Passed to the server as `--config`.
    pub server_config: Option<PathBuf>,
}

/// Latency of one operation run by one client, one call at a time.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub op: String,
    pub ops: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
}

/// Throughput of `concurrency` client tasks.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    pub op: String,
    /// Connections the tasks ran over: one each, or one shared by all.
    pub connections: usize,
    pub ops: u64,
    pub ops_per_sec: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlacementResult {
    pub placement: Placement,
    pub latency: Vec<Latency>,
    pub throughput: Vec<Throughput>,
    /// Cellar Get p50 / ping-pong p50 (target ≤ 2).
    pub get_over_floor: f64,
}

/// Pins this process (and children spawned afterwards) to one CPU.
fn pin_to(cpu: usize) -> Result<()> {
    // SAFETY: `set` is a plain bit mask owned by this frame; sched_setaffinity only reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(format!(
            "cannot pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Spawns `cmd` and waits (at most `cellar_testing::START_TIMEOUT`) for the stdout line
/// `listening <name>=ADDR`; the process (stopped by PID when dropped) and the address.
pub(crate) fn spawn_listening(cmd: Command, name: &str) -> Result<(Process, String)> {
    let mut child = Process::spawn(cmd, Log::Temp)?;
    let prefix = format!("listening {name}=");
    let addr = child.wait_for_line(START_TIMEOUT, &format!("'{prefix}HOST:PORT'"), |line| {
        line.trim().strip_prefix(&prefix).map(str::to_string)
    })?;
    Ok((child, addr))
}

/// The echo server behind the floor: reads `u32 len | payload` frames and writes each back.
/// Answers are buffered and written when no more input is waiting, so pipelined calls on one
/// connection are answered in one write, as a server that batches its answers does.
pub async fn echo_server() -> Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening echo={addr}");
    loop {
        let (sock, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let _ = sock.set_nodelay(true);
        tokio::spawn(async move {
            let (r, w) = sock.into_split();
            let mut r = tokio::io::BufReader::new(r);
            let mut w = tokio::io::BufWriter::new(w);
            let mut buf = Vec::new();
            loop {
                let Ok(len) = r.read_u32().await else {
                    return;
                };
                buf.resize(len as usize, 0);
                if r.read_exact(&mut buf).await.is_err() {
                    return;
                }
                if w.write_all(&len.to_be_bytes()).await.is_err()
                    || w.write_all(&buf).await.is_err()
                {
                    return;
                }
                if r.buffer().is_empty() && w.flush().await.is_err() {
                    return;
                }
            }
        });
    }
}

fn histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())
}

fn latency(op: &str, h: &Histogram<u64>) -> Latency {
    Latency {
        op: op.to_string(),
        ops: h.len(),
        p50_us: h.value_at_quantile(0.5) as f64 / 1000.0,
        p99_us: h.value_at_quantile(0.99) as f64 / 1000.0,
        mean_us: h.mean() / 1000.0,
    }
}

async fn ping_pong_once(sock: &mut TcpStream, msg: &[u8], buf: &mut Vec<u8>) -> Result<()> {
    sock.write_all(msg).await.map_err(|e| e.to_string())?;
    let len = sock.read_u32().await.map_err(|e| e.to_string())?;
    buf.resize(len as usize, 0);
    sock.read_exact(buf).await.map_err(|e| e.to_string())?;
    Ok(())
}

fn echo_message(size: usize) -> Vec<u8> {
    let mut msg = Vec::with_capacity(4 + size);
    msg.extend_from_slice(&(size as u32).to_be_bytes());
    msg.resize(4 + size, 0x5a);
    msg
}

/// The floor's throughput with `concurrency` tasks, each on a connection of its own
/// (`connections`), or all on one connection (`shared`): each task sends a frame and waits
/// for its answer; a writer task sends what the tasks queued in one write, a reader task hands
/// the answers back in order (the echo server answers in order) — the least any multiplexing
/// client over one connection can do.
async fn floor_throughput(addr: &str, opts: &Options, shared: bool) -> Result<Throughput> {
    let per_task = opts.ops / opts.concurrency as u64;
    let msg = echo_message(opts.value_size);
    let start = Instant::now();
    let mut tasks = Vec::new();
    if shared {
        let mux = Arc::new(Mux::connect(addr).await?);
        for _ in 0..opts.concurrency {
            let mux = Arc::clone(&mux);
            let msg = msg.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..per_task {
                    mux.call(&msg).await?;
                }
                Ok::<_, String>(())
            }));
        }
    } else {
        for _ in 0..opts.concurrency {
            let addr = addr.to_string();
            let msg = msg.clone();
            tasks.push(tokio::spawn(async move {
                let mut sock = TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
                sock.set_nodelay(true).map_err(|e| e.to_string())?;
                let mut buf = Vec::new();
                for _ in 0..per_task {
                    ping_pong_once(&mut sock, &msg, &mut buf).await?;
                }
                Ok::<_, String>(())
            }));
        }
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let n = per_task * opts.concurrency as u64;
    Ok(Throughput {
        op: "ping-pong".into(),
        connections: if shared { 1 } else { opts.concurrency },
        ops: n,
        ops_per_sec: n as f64 / start.elapsed().as_secs_f64(),
    })
}

/// One echo connection shared by many tasks (the floor of a multiplexing client).
struct Mux {
    /// Frames to send, each with the sender its answer goes to.
    send: tokio::sync::mpsc::UnboundedSender<(Vec<u8>, tokio::sync::oneshot::Sender<()>)>,
}

impl Mux {
    async fn connect(addr: &str) -> Result<Mux> {
        use tokio::sync::{mpsc, oneshot};
        let sock = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        sock.set_nodelay(true).map_err(|e| e.to_string())?;
        let (r, mut w) = sock.into_split();
        let (send, mut queued) = mpsc::unbounded_channel::<(Vec<u8>, oneshot::Sender<()>)>();
        let (waiting_tx, mut waiting) = mpsc::unbounded_channel::<oneshot::Sender<()>>();
        // Writer: everything queued so far in one write; answers are expected in that order.
        tokio::spawn(async move {
            let mut out = Vec::new();
            while let Some((frame, answer)) = queued.recv().await {
                out.clear();
                out.extend_from_slice(&frame);
                if waiting_tx.send(answer).is_err() {
                    return;
                }
                while let Ok((frame, answer)) = queued.try_recv() {
                    out.extend_from_slice(&frame);
                    if waiting_tx.send(answer).is_err() {
                        return;
                    }
                }
                if w.write_all(&out).await.is_err() {
                    return;
                }
            }
        });
        // Reader: each answer to the oldest waiting call.
        tokio::spawn(async move {
            let mut r = tokio::io::BufReader::new(r);
            let mut buf = Vec::new();
            loop {
                let Ok(len) = r.read_u32().await else {
                    return;
                };
                buf.resize(len as usize, 0);
                if r.read_exact(&mut buf).await.is_err() {
                    return;
                }
                match waiting.recv().await {
                    Some(answer) => {
                        let _ = answer.send(());
                    }
                    None => return,
                }
            }
        });
        Ok(Mux { send })
    }

    async fn call(&self, frame: &[u8]) -> Result<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send
            .send((frame.to_vec(), tx))
            .map_err(|_| "the echo connection closed".to_string())?;
        rx.await
            .map_err(|_| "the echo connection closed".to_string())
    }
}

/// Rounds the latency runs are cut into: each round measures the floor, then Puts, then Gets,
/// so machine noise lands on all three alike.
const ROUNDS: u64 = 10;

/// Single-client latency: ping-pong, Put and Get interleaved round by round.
async fn latency_run(
    echo_addr: &str,
    table: &cellar_client::Table,
    opts: &Options,
) -> Result<Vec<Latency>> {
    let mut sock = TcpStream::connect(echo_addr)
        .await
        .map_err(|e| e.to_string())?;
    sock.set_nodelay(true).map_err(|e| e.to_string())?;
    let msg = echo_message(opts.value_size);
    let mut buf = Vec::new();
    let value = Bytes::from(vec![0x61u8; opts.value_size]);
    // Warm-up: connections, allocator, caches.
    for i in 0..opts.ops.min(1000) {
        ping_pong_once(&mut sock, &msg, &mut buf).await?;
        table
            .put(put_of(i, &value))
            .await
            .map_err(|e| e.to_string())?;
    }
    let (mut floor, mut puts, mut gets) = (histogram()?, histogram()?, histogram()?);
    let per_round = (opts.ops / ROUNDS).max(1);
    for round in 0..ROUNDS {
        for _ in 0..per_round {
            let t = Instant::now();
            ping_pong_once(&mut sock, &msg, &mut buf).await?;
            let _ = floor.record(t.elapsed().as_nanos() as u64);
        }
        for j in 0..per_round {
            let m = put_of(round * per_round + j, &value);
            let t = Instant::now();
            table.put(m).await.map_err(|e| e.to_string())?;
            let _ = puts.record(t.elapsed().as_nanos() as u64);
        }
        let written = (round + 1) * per_round;
        for j in 0..per_round {
            let k = key((j * 7919) % written);
            let g = Get::new(k.clone()).column(b"cf", b"v");
            let t = Instant::now();
            let row = table.get(g).await.map_err(|e| e.to_string())?;
            let _ = gets.record(t.elapsed().as_nanos() as u64);
            if row.cells.is_empty() {
                return Err(format!("row {k:?} was written and is not found"));
            }
        }
    }
    Ok(vec![
        latency("ping-pong", &floor),
        latency("put", &puts),
        latency("get", &gets),
    ])
}

fn key(i: u64) -> Bytes {
    Bytes::from(format!(
        "user{:012}",
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000
    ))
}

fn put_of(i: u64, value: &Bytes) -> RowMutation {
    RowMutation::new(key(i)).put(b"cf", b"v", LATEST_TIMESTAMP, value.clone())
}

/// Throughput of `concurrency` tasks: Puts, then Gets of the loaded keys, over `tables` (one
/// shared client, or one client — one connection — per task, as the floor's two shapes).
async fn throughput_run(
    tables: &[cellar_client::Table],
    opts: &Options,
) -> Result<Vec<Throughput>> {
    let value = Bytes::from(vec![0x61u8; opts.value_size]);
    let mut throughput = Vec::new();
    for op in ["put", "get"] {
        let per_task = opts.ops / opts.concurrency as u64;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for t in 0..opts.concurrency as u64 {
            let table = tables[t as usize % tables.len()].clone();
            let value = value.clone();
            tasks.push(tokio::spawn(async move {
                for j in 0..per_task {
                    let i = t * per_task + j;
                    if op == "put" {
                        table.put(put_of(i, &value)).await?;
                    } else {
                        table.get(Get::new(key(i)).column(b"cf", b"v")).await?;
                    }
                }
                Ok::<_, cellar_client::Error>(())
            }));
        }
        for t in tasks {
            t.await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
        }
        let n = per_task * opts.concurrency as u64;
        throughput.push(Throughput {
            op: op.into(),
            connections: tables.len(),
            ops: n,
            ops_per_sec: n as f64 / start.elapsed().as_secs_f64(),
        });
    }
    Ok(throughput)
}

/// `n` clients of their own (a connection each) on the bench table.
async fn clients(addr: &str, n: usize) -> Result<Vec<cellar_client::Table>> {
    let mut tables = Vec::with_capacity(n);
    for _ in 0..n {
        let client = Client::connect_with(addr, ClientConfig::default())
            .await
            .map_err(|e| e.to_string())?;
        tables.push(client.table("bench"));
    }
    Ok(tables)
}

async fn connect_and_create(addr: &str) -> Result<cellar_client::Table> {
    let client = Client::connect_with(addr, ClientConfig::default())
        .await
        .map_err(|e| e.to_string())?;
    client
        .admin()
        .create_table(
            TableSchema::new("bench", vec![FamilySchema::new("cf")]),
            Vec::new(),
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(client.table("bench"))
}

/// `cellar standalone` on free loopback ports, without the HBase port, on `data_dir`.
pub(crate) fn standalone(cellar_bin: &Path, data_dir: &Path) -> Cellar {
    Cellar::standalone(cellar_bin)
        .listen("127.0.0.1:0", "127.0.0.1:0", "off")
        .data_dir(data_dir)
}

/// One placement: the floor and Cellar, one after the other, with the same pinning.
pub fn run_placement(p: Placement, opts: &Options, self_exe: &Path) -> Result<PlacementResult> {
    let (server_cpu, client_cpu) = p.cpus();
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    pin_to(server_cpu)?;
    let mut echo = Command::new(self_exe);
    echo.arg("echo-server");
    let (_echo, echo_addr) = spawn_listening(echo, "echo")?;
    let mut cellar = standalone(&opts.cellar_bin, data.path());
    if let Some(c) = &opts.server_config {
        cellar = cellar.config(c);
    }
    let cellar = cellar.start()?;
    let cellar_addr = cellar.native.clone();
    pin_to(client_cpu)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (lat, tp) = rt.block_on(async {
        let table = connect_and_create(&cellar_addr).await?;
        let lat = latency_run(&echo_addr, &table, opts).await?;
        // Each shape beside its own floor: tasks sharing one connection, then a connection
        // per task.
        let mut tp = vec![floor_throughput(&echo_addr, opts, true).await?];
        tp.extend(throughput_run(std::slice::from_ref(&table), opts).await?);
        let own = clients(&cellar_addr, opts.concurrency).await?;
        tp.push(floor_throughput(&echo_addr, opts, false).await?);
        tp.extend(throughput_run(&own, opts).await?);
        Ok::<_, String>((lat, tp))
    })?;
    let p50 = |op: &str| lat.iter().find(|l| l.op == op).map_or(0.0, |l| l.p50_us);
    let ratio = p50("get") / p50("ping-pong").max(0.001);
    std::thread::sleep(Duration::from_millis(10));
    Ok(PlacementResult {
        placement: p,
        latency: lat,
        throughput: tp,
        get_over_floor: ratio,
    })
}

/// Prints one placement's table.
pub fn print(r: &PlacementResult, opts: &Options) {
    println!(
        "placement {:?} ({} B values, {} ops, {} tasks for throughput)",
        r.placement, opts.value_size, opts.ops, opts.concurrency
    );
    println!(
        "  {:<10} {:>10} {:>10} {:>10}",
        "op", "p50 µs", "p99 µs", "mean µs"
    );
    for l in &r.latency {
        println!(
            "  {:<10} {:>10.1} {:>10.1} {:>10.1}",
            l.op, l.p50_us, l.p99_us, l.mean_us
        );
    }
    for t in &r.throughput {
        println!(
            "  {:<10} {:>10.0} ops/s  ({} tasks over {} connection{})",
            t.op,
            t.ops_per_sec,
            opts.concurrency,
            t.connections,
            if t.connections == 1 { "" } else { "s" }
        );
    }
    println!(
        "  Get p50 / ping-pong p50 = {:.2} (target ≤ 2)",
        r.get_over_floor
    );
}

/// The kernel's share of a call, measured: a bare echo server process answering `ops`
/// sequential `value_size`-byte ping-pongs over one loopback connection, the CPU time
/// (user + system, from `/proc/PID/stat`) it spent per call, and the round trips' latency.
/// No server can spend less per call, or answer faster, on this machine: it is one receive,
/// one send and one sleep/wake-up per call.
///
/// Measured twice: first with both processes free to run on any CPU (as the servers in a
/// benchmark are), then with both on CPU 0. The difference is what a wake-up that crosses CPUs
/// costs here, which on a virtual machine can be most of the floor.
#[derive(Debug, Clone, Serialize)]
pub struct FloorCpu {
    pub ops: u64,
    pub value_size: usize,
    /// Any CPU: the floor of a benchmark whose processes the scheduler places. Its fields
    /// sit at the top level of the JSON, where `server_cpu_us_per_call` always was.
    #[serde(flatten)]
    pub any_cpu: FloorRun,
    /// Both processes on CPU 0: no wake-up crosses CPUs.
    pub one_cpu: FloorRun,
}

/// One measurement of the floor.
#[derive(Debug, Clone, Serialize)]
pub struct FloorRun {
    pub server_cpu_us_per_call: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

/// Runs the [`FloorCpu`] measurements, each against a fresh `self_exe echo-server` process.
/// Leaves this thread pinned to CPU 0 (the second measurement's placement).
pub fn floor_cpu(self_exe: &Path, ops: u64, value_size: usize) -> Result<FloorCpu> {
    let any_cpu = floor_run(self_exe, ops, value_size)?;
    // The echo server inherits the mask at spawn.
    pin_to(0)?;
    let one_cpu = floor_run(self_exe, ops, value_size)?;
    Ok(FloorCpu {
        ops,
        value_size,
        any_cpu,
        one_cpu,
    })
}

fn floor_run(self_exe: &Path, ops: u64, value_size: usize) -> Result<FloorRun> {
    let mut echo = Command::new(self_exe);
    echo.arg("echo-server");
    let (echo, addr) = spawn_listening(echo, "echo")?;
    let pid = echo.pid();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (ticks, h) = rt.block_on(async {
        let mut sock = TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
        sock.set_nodelay(true).map_err(|e| e.to_string())?;
        let msg = echo_message(value_size);
        let mut buf = Vec::new();
        // Warm up (connection, allocations) outside the measured window.
        for _ in 0..ops.min(1000) {
            ping_pong_once(&mut sock, &msg, &mut buf).await?;
        }
        let mut h = histogram()?;
        let before = cpu_ticks(pid)?;
        for _ in 0..ops {
            let start = Instant::now();
            ping_pong_once(&mut sock, &msg, &mut buf).await?;
            h.saturating_record(start.elapsed().as_nanos() as u64);
        }
        Ok::<_, String>((cpu_ticks(pid)? - before, h))
    })?;
    // SAFETY: sysconf has no preconditions.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if tck <= 0 {
        return Err("sysconf(_SC_CLK_TCK) failed".into());
    }
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Ok(FloorRun {
        server_cpu_us_per_call: ticks as f64 * 1e6 / tck as f64 / ops as f64,
        p50_us: us(0.5),
        p99_us: us(0.99),
        p999_us: us(0.999),
    })
}

/// utime + stime of process `pid`, in clock ticks.
pub(crate) fn cpu_ticks(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    // Fields after the command name, which is parenthesised and may contain spaces.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| format!("{path}: no ')' after the command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    let field = |i: usize| -> Result<u64> {
        fields
            .get(i - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("{path}: field {i} is not a number"))
    };
    Ok(field(14)? + field(15)?)
}

#[cfg(test)]
mod tests {
    use super::cpu_ticks;

    #[test]
    fn this_process_has_cpu_ticks() {
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        let ticks = cpu_ticks(std::process::id()).expect("own /proc/PID/stat");
        assert!(ticks > 0, "30 ms of spinning shows as CPU time");
    }
}
