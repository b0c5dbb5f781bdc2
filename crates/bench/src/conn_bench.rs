//! `conn_bench`: what a connection costs a real `cellar standalone` in resident memory.
//!
//! Opens thousands of connections to the native and the HBase port, each after its handshake
//! and one call (so its buffers have been used), leaves them idle, and reads the server's
//! `VmRSS` from `/proc/PID/status` before and after each group, in one run. Then the same for
//! connections stalled in the middle of a frame: a length prefix announcing a large frame, a
//! little of its body, then nothing. `docs/reliability.md` records the figures.

use bytes::BytesMut;
use cellar_proto::{frame, hbase, hbase_wire, pb};
use cellar_testing::{Cellar, CellarServer};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub type Result<T> = std::result::Result<T, String>;

#[derive(Debug, Clone)]
pub struct Options {
    pub cellar_bin: PathBuf,
    /// Idle connections per protocol.
    pub connections: usize,
    /// Connections stalled in a half-sent frame, per protocol.
    pub stalled: usize,
    /// The body length a stalled connection announces.
    pub stall_announced: u32,
    /// Bytes of that body it actually sends.
    pub stall_sent: usize,
    /// How long the server is left to settle before each reading.
    pub settle: Duration,
    /// Passed to the server as `--config`.
    pub server_config: Option<PathBuf>,
}

/// One group of connections and what it added to the server's memory.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub what: String,
    pub connections: usize,
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
    pub rss_per_connection_kib: f64,
    pub vm_size_per_connection_kib: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub open_files_limit: u64,
    pub rss_at_start_kib: u64,
    pub groups: Vec<Group>,
}

/// Raises this process's soft open-files limit to at least `need` (up to the hard limit);
/// children started afterwards inherit it. Returns the soft limit in force.
pub fn raise_open_files(need: u64) -> Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a plain struct owned by this frame; getrlimit only writes it.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!("getrlimit: {}", std::io::Error::last_os_error()));
    }
    if lim.rlim_cur >= need {
        return Ok(lim.rlim_cur);
    }
    if lim.rlim_max < need {
        return Err(format!(
            "{need} open files are needed but the hard limit is {} (raise it: ulimit -Hn, /etc/security/limits.conf), or ask for fewer connections",
            lim.rlim_max
        ));
    }
    let new = libc::rlimit {
        rlim_cur: need,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: `new` is a plain struct owned by this frame; setrlimit only reads it.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } != 0 {
        return Err(format!(
            "setrlimit to {need}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(need)
}

/// Starts the server and waits (at most `cellar_testing::START_TIMEOUT`) for its native and
/// HBase addresses.
fn start_server(opts: &Options, data: &std::path::Path) -> Result<(CellarServer, String, String)> {
    let mut cellar = Cellar::standalone(&opts.cellar_bin)
        .data_dir(data)
        .env("RUST_LOG", "warn");
    if let Some(c) = &opts.server_config {
        cellar = cellar.config(c);
    }
    let server = cellar.start()?;
    let hbase = server.hbase.clone().ok_or_else(|| {
        format!(
            "{} never printed its HBase address:\n{}",
            server.process.name(),
            server.process.output()
        )
    })?;
    let native = server.native.clone();
    Ok((server, native, hbase))
}

/// `(VmRSS, VmSize)` of process `pid`, in KiB.
pub fn memory_kib(pid: u32) -> Result<(u64, u64)> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
    let field = |name: &str| -> Result<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| format!("{path}: no {name}"))
    };
    Ok((field("VmRSS:")?, field("VmSize:")?))
}

const IO_TIMEOUT: Duration = Duration::from_secs(30);

fn connect(addr: &str) -> Result<TcpStream> {
    let s = TcpStream::connect(addr).map_err(|e| format!("connecting to {addr}: {e}"))?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// Reads one `u32 BE length | body` frame; the body.
fn read_frame(s: &mut TcpStream) -> Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)
        .map_err(|e| format!("reading a frame length: {e}"))?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)
        .map_err(|e| format!("reading a frame body: {e}"))?;
    Ok(body)
}

/// A native connection after its preamble and one PING.
fn native_idle(addr: &str) -> Result<TcpStream> {
    let mut s = connect(addr)?;
    let mut out = BytesMut::new();
    out.extend_from_slice(&frame::PREAMBLE);
    let header = pb::RequestHeader {
        call_id: 1,
        method: pb::Method::Ping as i32,
        ..Default::default()
    };
    frame::encode_request(&mut out, &header, &pb::Empty {}, &[]);
    s.write_all(&out).map_err(|e| format!("sending: {e}"))?;
    let mut preamble = [0u8; 8];
    s.read_exact(&mut preamble)
        .map_err(|e| format!("reading the preamble: {e}"))?;
    if preamble != frame::PREAMBLE {
        return Err(format!("unexpected preamble answer {preamble:?}"));
    }
    read_frame(&mut s)?;
    Ok(s)
}

fn hbase_hello(addr: &str) -> Result<(TcpStream, BytesMut)> {
    let s = connect(addr)?;
    let mut out = BytesMut::new();
    out.extend_from_slice(&hbase_wire::HBAS_MAGIC);
    out.extend_from_slice(&[hbase_wire::RPC_VERSION, hbase_wire::AUTH_SIMPLE]);
    let header = hbase::ConnectionHeader {
        service_name: Some("ClientService".into()),
        cell_block_codec_class: Some(hbase_wire::KEY_VALUE_CODEC.into()),
        ..Default::default()
    };
    hbase_wire::encode_connection_header(&mut out, &header);
    Ok((s, out))
}

/// A Get of a region that does not exist: answered (with `NotServingRegionException`)
/// without touching a table.
fn hbase_get() -> hbase::GetRequest {
    hbase::GetRequest {
        region: hbase::RegionSpecifier {
            r#type: hbase::region_specifier::RegionSpecifierType::RegionName as i32,
            value: bytes::Bytes::from_static(b"no-such-table,,1.0."),
        },
        get: hbase::Get {
            row: bytes::Bytes::from_static(b"row"),
            ..Default::default()
        },
    }
}

/// An HBase connection after its preamble, connection header and one call.
fn hbase_idle(addr: &str) -> Result<TcpStream> {
    let (mut s, mut out) = hbase_hello(addr)?;
    hbase_wire::encode_request(&mut out, 1, "Get", &hbase_get(), &[]);
    s.write_all(&out).map_err(|e| format!("sending: {e}"))?;
    read_frame(&mut s)?;
    Ok(s)
}

/// A frame prefix announcing `announced` body bytes of which `sent` follow: a real request
/// header first (so the server could name the call), then filler.
fn half_frame(header_and_param: &[u8], announced: u32, sent: usize) -> Vec<u8> {
    let mut out = announced.to_be_bytes().to_vec();
    out.extend_from_slice(header_and_param);
    out.resize(4 + sent.max(header_and_param.len()), 0);
    out
}

/// A native connection that sent its preamble, then part of a large frame.
fn native_stalled(addr: &str, announced: u32, sent: usize) -> Result<TcpStream> {
    let mut s = connect(addr)?;
    s.write_all(&frame::PREAMBLE)
        .map_err(|e| format!("sending: {e}"))?;
    let mut preamble = [0u8; 8];
    s.read_exact(&mut preamble)
        .map_err(|e| format!("reading the preamble: {e}"))?;
    let header = pb::RequestHeader {
        call_id: 7,
        method: pb::Method::Mutate as i32,
        ..Default::default()
    };
    let mut whole = BytesMut::new();
    frame::encode_request(&mut whole, &header, &pb::Empty {}, &[]);
    s.write_all(&half_frame(&whole[4..], announced, sent))
        .map_err(|e| format!("sending: {e}"))?;
    Ok(s)
}

/// An HBase connection that sent its hello, then part of a large frame.
fn hbase_stalled(addr: &str, announced: u32, sent: usize) -> Result<TcpStream> {
    let (mut s, mut out) = hbase_hello(addr)?;
    let mut whole = BytesMut::new();
    hbase_wire::encode_request(&mut whole, 7, "Mutate", &hbase_get(), &[]);
    out.extend_from_slice(&half_frame(&whole[4..], announced, sent));
    s.write_all(&out).map_err(|e| format!("sending: {e}"))?;
    Ok(s)
}

/// Opens `n` connections with `open`, keeping them in `keep`, and measures what they added.
fn group(
    what: &str,
    n: usize,
    pid: u32,
    settle: Duration,
    keep: &mut Vec<TcpStream>,
    mut open: impl FnMut() -> Result<TcpStream>,
) -> Result<Group> {
    std::thread::sleep(settle);
    let (rss0, vm0) = memory_kib(pid)?;
    let started = Instant::now();
    for i in 0..n {
        keep.push(open().map_err(|e| format!("{what}, connection {i}: {e}"))?);
    }
    let opened = started.elapsed();
    std::thread::sleep(settle);
    let (rss1, vm1) = memory_kib(pid)?;
    let per = |a: u64, b: u64| (b as f64 - a as f64) / n.max(1) as f64;
    eprintln!("{what}: {n} connections opened in {opened:.1?}");
    Ok(Group {
        what: what.into(),
        connections: n,
        rss_before_kib: rss0,
        rss_after_kib: rss1,
        rss_per_connection_kib: per(rss0, rss1),
        vm_size_per_connection_kib: per(vm0, vm1),
    })
}

/// The whole measurement against one server.
pub fn run(opts: &Options) -> Result<Report> {
    let need = 2 * (opts.connections + opts.stalled) as u64 + 256;
    let limit = raise_open_files(need)?;
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (server, native, hbase_addr) = start_server(opts, data.path())?;
    let pid = server.process.pid();
    std::thread::sleep(opts.settle);
    let (rss_at_start_kib, _) = memory_kib(pid)?;
    let mut keep = Vec::new();
    let mut groups = Vec::new();
    let n = opts.connections;
    groups.push(group(
        "native idle",
        n,
        pid,
        opts.settle,
        &mut keep,
        || native_idle(&native),
    )?);
    groups.push(group("hbase idle", n, pid, opts.settle, &mut keep, || {
        hbase_idle(&hbase_addr)
    })?);
    let (a, s) = (opts.stall_announced, opts.stall_sent);
    groups.push(group(
        "native half frame",
        opts.stalled,
        pid,
        opts.settle,
        &mut keep,
        || native_stalled(&native, a, s),
    )?);
    groups.push(group(
        "hbase half frame",
        opts.stalled,
        pid,
        opts.settle,
        &mut keep,
        || hbase_stalled(&hbase_addr, a, s),
    )?);
    drop(keep);
    drop(server);
    Ok(Report {
        open_files_limit: limit,
        rss_at_start_kib,
        groups,
    })
}

pub fn print(r: &Report, opts: &Options) {
    println!(
        "server RSS at start {} KiB; open-files limit {}; half frames announce {} B and send {} B",
        r.rss_at_start_kib, r.open_files_limit, opts.stall_announced, opts.stall_sent
    );
    println!(
        "{:<18} {:>6} {:>12} {:>12} {:>14} {:>14}",
        "group", "conns", "RSS before", "RSS after", "RSS/conn", "VmSize/conn"
    );
    for g in &r.groups {
        println!(
            "{:<18} {:>6} {:>9} KiB {:>9} KiB {:>10.1} KiB {:>10.1} KiB",
            g.what,
            g.connections,
            g.rss_before_kib,
            g.rss_after_kib,
            g.rss_per_connection_kib,
            g.vm_size_per_connection_kib
        );
    }
}
