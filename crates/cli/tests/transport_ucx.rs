//! The native protocol over UCX against a real `cellar standalone` process: calls of every
//! size over shared memory and over UCX's own TCP transport, a server that does not offer UCX
//! refusing clearly (and `auto` staying on TCP), a stopped server detected by heartbeat, a
//! client killed mid-load while the server keeps serving others (this found two ways a dead
//! peer could take a UCX server down: `cellar_ucx::transports_without_peer_copy` and
//! `Link::start_in` say how each is avoided), and no CPU burned while idle.
//!
//! Skipped, saying so, where the UCX library is not installed (`scripts/test.sh` installs it).

mod support;

use bytes::Bytes;
use cellar_client::{
    BatchOp, Client, ClientConfig, FamilySchema, Get, RowMutation, Scan, TableSchema, Transport,
};
use cellar_testing::{Log, Process};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::Server;

fn ucx_installed() -> bool {
    if cellar_ucx::Ucx::load().is_ok() {
        return true;
    }
    eprintln!("skipped: the UCX library (libucp.so.0, Debian libucx0) is not installed");
    false
}

fn config(transport: Transport) -> ClientConfig {
    ClientConfig {
        transport,
        rpc_timeout: Duration::from_secs(20),
        ..ClientConfig::default()
    }
}

async fn connect(server: &Server, transport: Transport) -> Client {
    Client::connect_with(&server.native, config(transport))
        .await
        .expect("connect")
}

async fn create(client: &Client, name: &str) {
    let schema = TableSchema::new(name, vec![FamilySchema::new("f")]);
    client
        .admin()
        .create_table(schema, vec![Bytes::from_static(b"m")])
        .await
        .expect("create table");
}

/// Puts, gets, a batch and a scan over two regions with values of 1 KiB, 16 KiB and 256 KiB
/// (eager and rendezvous UCX messages): everything read back is what was written.
async fn every_size_round_trips(client: &Client, table: &str) {
    let t = client.table(table);
    let sizes = [1usize << 10, 16 << 10, 256 << 10];
    for (i, size) in sizes.iter().enumerate() {
        for row in ["a", "z"] {
            let key = format!("{row}{i}");
            let value = Bytes::from(vec![b'a' + i as u8; *size]);
            t.put(RowMutation::new(key.clone()).put(b"f", b"q", 0, value.clone()))
                .await
                .expect("put");
            let got = t.get(Get::new(key.clone())).await.expect("get");
            assert_eq!(got.value(b"f", b"q"), Some(&value), "{key}");
        }
    }
    let ops = (0..20)
        .map(|i| {
            BatchOp::Mutate(RowMutation::new(format!("b{i:02}")).put(
                b"f",
                b"q",
                0,
                vec![b'x'; 100],
            ))
        })
        .collect();
    for outcome in t.batch(ops).await.expect("batch") {
        outcome.expect("batch op");
    }
    let rows = t.scan(Scan::new()).collect().await.expect("scan");
    assert_eq!(rows.len(), 26, "3 sizes × 2 rows + 20 batch rows");
    let big = rows.iter().find(|r| &r.row[..] == b"z2").expect("row z2");
    assert_eq!(big.value(b"f", b"q").map(Bytes::len), Some(256 << 10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_every_size_travel_over_shared_memory_and_ucx_tcp() {
    if !ucx_installed() {
        return;
    }
    let server = Server::start();
    let client = connect(&server, Transport::Ucx).await;
    assert!(
        client.uses_ucx().await.expect("uses_ucx"),
        "the client asked for UCX"
    );
    create(&client, "t").await;
    every_size_round_trips(&client, "t").await;
    drop(client);
    // Every answer through the connection's progress thread, none taken off the wire by
    // the waiting caller (ClientConfig::ucx_drive = 0).
    let undriven = Client::connect_with(
        &server.native,
        ClientConfig {
            ucx_drive: Duration::ZERO,
            ..config(Transport::Ucx)
        },
    )
    .await
    .expect("connect");
    assert!(undriven.uses_ucx().await.expect("uses_ucx"));
    every_size_round_trips(&undriven, "t").await;
    drop(undriven);

    // A client process whose UCX may use only its TCP transport (the path RDMA devices take:
    // no shared memory) against the same server.
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["bench", "load", "--db"])
        .arg(format!("cellar+ucx://{}", server.native))
        .args([
            "-p",
            "workload=site.ycsb.workloads.CoreWorkload",
            "-p",
            "recordcount=200",
            "-p",
            "table=usertable",
            "-threads",
            "2",
        ])
        .env("UCX_TLS", "tcp,self")
        .env("UCX_NET_DEVICES", "lo")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run cellar bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "ycsb load over UCX-over-TCP failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("[INSERT], Operations, 200"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("transport=ucx"),
        "the run names its transport: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_ucx_refuses_clearly_and_auto_stays_on_tcp() {
    if !ucx_installed() {
        return;
    }
    let server = Server::start_with_config("[rpc]\nucx = false\n");
    let err = Client::connect_with(&server.native, config(Transport::Ucx))
        .await
        .expect_err("UCX was asked of a server that does not offer it");
    let text = err.to_string();
    assert!(text.contains("does not carry calls over UCX"), "{text}");
    assert!(text.contains("rpc.ucx = false"), "{text}");
    assert!(!err.is_retryable(), "retrying cannot help: {text}");

    let client = connect(&server, Transport::Auto).await;
    assert!(!client.uses_ucx().await.expect("uses_ucx"));
    create(&client, "t").await;
    every_size_round_trips(&client, "t").await;
}

/// Reads a process's CPU time (user + system) in clock ticks from `/proc`.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // The command name (field 2) may hold spaces; fields after its ')' are fixed.
    let after = stat.rsplit_once(')').expect("stat format").1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields[11].parse().expect("utime");
    let stime: u64 = fields[12].parse().expect("stime");
    utime + stime
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_ucx_connections_burn_no_cpu() {
    if !ucx_installed() {
        return;
    }
    let server = Server::start();
    let client = connect(&server, Transport::Ucx).await;
    create(&client, "t").await;
    every_size_round_trips(&client, "t").await;
    // Let the progress threads go back to sleep, then watch both sides for three seconds.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let me = std::process::id();
    let (server_before, client_before) = (cpu_ticks(server.pid()), cpu_ticks(me));
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let elapsed = started.elapsed().as_secs_f64();
    // SAFETY: a plain query of a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let server_share = (cpu_ticks(server.pid()) - server_before) as f64 / hz / elapsed;
    let client_share = (cpu_ticks(me) - client_before) as f64 / hz / elapsed;
    // A busy-polling progress thread would show a whole core (1.0); heartbeats and the
    // server's own housekeeping cost a few per cent at most.
    assert!(
        server_share < 0.10,
        "idle server used {:.0} % of a core",
        server_share * 100.0
    );
    assert!(
        client_share < 0.10,
        "idle client used {:.0} % of a core",
        client_share * 100.0
    );
    assert!(client.uses_ucx().await.expect("still connected"));
    client.ping().await.expect("a ping after the idle spell");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_is_detected_by_heartbeat() {
    if !ucx_installed() {
        return;
    }
    let server = Server::start();
    let client = Client::connect_with(
        &server.native,
        ClientConfig {
            transport: Transport::Ucx,
            rpc_timeout: Duration::from_secs(30),
            retries: 0,
            ..ClientConfig::default()
        },
    )
    .await
    .expect("connect");
    create(&client, "t").await;
    // SIGSTOP: the TCP connection stays open; only the UCX heartbeats can tell.
    let pid = server.pid() as libc::pid_t;
    // SAFETY: signals a child process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    // The signal lands asynchronously: a Get sent at once could still be answered.
    let stopped = support::wait_for(Duration::from_secs(5), || {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        let all_stopped = tasks.filter_map(|t| t.ok()).all(|t| {
            std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|stat| stat.rsplit_once(") ")?.1.chars().next())
                == Some('T')
        });
        all_stopped.then_some(())
    });
    assert!(
        stopped.is_some(),
        "every thread of the server stops on SIGSTOP"
    );
    let started = Instant::now();
    let err = client
        .table("t")
        .get(Get::new("a"))
        .await
        .expect_err("the stopped server cannot answer");
    let waited = started.elapsed();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let text = err.to_string();
    assert!(
        text.contains("UCX endpoint is gone") && text.contains("heartbeat"),
        "the error names the transport and why: {text}"
    );
    assert!(
        waited < Duration::from_secs(15),
        "detected after {waited:?}, well before the 30 s call timeout"
    );
    // The server, running again, serves a new connection.
    let again = connect(&server, Transport::Ucx).await;
    again.ping().await.expect("ping after SIGCONT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_mid_load_leaves_the_server_serving_others() {
    if !ucx_installed() {
        return;
    }
    let server = Server::start();
    let client = connect(&server, Transport::Ucx).await;
    let mut load = Command::new(env!("CARGO_BIN_EXE_cellar"));
    load.args(["bench", "load", "--db"])
        .arg(format!("cellar+ucx://{}", server.native))
        .args([
            "-p",
            "workload=site.ycsb.workloads.CoreWorkload",
            "-p",
            "recordcount=10000000",
            "-p",
            "fieldlength=1000",
            "-threads",
            "4",
        ]);
    let mut loader = Process::spawn(load, Log::Temp).expect("start a loader");
    // Kill it while its calls are in flight.
    let deadline = Instant::now() + Duration::from_secs(60);
    let t = client.table("usertable");
    loop {
        // The loader creates the table; until then the scan fails.
        let rows = t
            .scan(Scan::new().limit(5))
            .collect()
            .await
            .unwrap_or_default();
        if rows.len() >= 5 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let it load for a moment (10 KiB rows: rendezvous messages in flight), then kill it.
    tokio::time::sleep(Duration::from_millis(700)).await;
    loader.kill9();
    // Others go on: this client's calls, and a new client's.
    for i in 0..50 {
        if let Err(e) = t
            .put(RowMutation::new(format!("after{i}")).put(b"family", b"q", 0, vec![b'v'; 64]))
            .await
        {
            panic!(
                "put after the kill: {e}\nserver output:\n{}",
                server.output()
            );
        }
    }
    let other = connect(&server, Transport::Ucx).await;
    let got = other
        .table("usertable")
        .get(Get::new("after49"))
        .await
        .expect("get");
    assert_eq!(got.value(b"family", b"q").map(Bytes::len), Some(64));
}

/// Zero-filled memory of any size that costs no memory: an anonymous read-only mapping
/// without swap reservation, whose pages all map the kernel's zero page when read. The first
/// page is written (a frame's head) before the rest is made read-only.
struct Zeros {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by the value alone and never written after `Zeros::new`.
unsafe impl Send for Zeros {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for Zeros {}

impl Zeros {
    /// `len` bytes starting with `head`.
    fn new(len: usize, head: &[u8]) -> Zeros {
        assert!(head.len() <= 4096 && head.len() <= len);
        // SAFETY: a fresh private anonymous mapping at an address the kernel picks;
        // MAP_FAILED is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap of {len} bytes");
        let ptr = ptr.cast::<u8>();
        // SAFETY: the mapping is at least `head.len()` bytes long and writable.
        unsafe { std::ptr::copy_nonoverlapping(head.as_ptr(), ptr, head.len()) };
        // SAFETY: the same mapping, whole; from here on it is only read.
        let rc = unsafe { libc::mprotect(ptr.cast(), len, libc::PROT_READ) };
        assert_eq!(rc, 0, "mprotect");
        Zeros { ptr, len }
    }
}

impl AsRef<[u8]> for Zeros {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `len` readable bytes mapped at `ptr` for as long as the value lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Zeros {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped, once, when no slice of it is left.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Frames a hand-made UCX peer receives.
struct Collect(std::sync::mpsc::Sender<Bytes>);

impl cellar_ucx::link::Events for Collect {
    fn frame(&mut self, _: u32, frame: Bytes, _: &mut cellar_ucx::link::Replies) {
        let _ = self.0.send(frame);
    }
    fn lost(&mut self, _: u32, _: String) {}
}

/// A UCX client of the native protocol made by hand, to send what the Rust client never
/// would: its TCP control connection (preamble and TRANSPORT_HELLO done) and its link.
struct RawPeer {
    _tcp: std::net::TcpStream,
    link: cellar_ucx::link::Link,
    frames: std::sync::mpsc::Receiver<Bytes>,
}

impl RawPeer {
    fn connect(addr: &str) -> RawPeer {
        use cellar_proto::{frame, pb};
        use prost::Message;
        use std::io::{Read, Write};
        let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        tcp.write_all(&frame::PREAMBLE).expect("preamble");
        let mut preamble = [0u8; 8];
        tcp.read_exact(&mut preamble).expect("server preamble");
        assert_eq!(preamble, frame::PREAMBLE);
        let (tx, frames) = std::sync::mpsc::channel();
        let ucx = cellar_ucx::Ucx::load().expect("UCX");
        let link = cellar_ucx::link::Link::start(
            &ucx,
            cellar_ucx::link::LinkOptions::default(),
            Collect(tx),
        )
        .expect("link");
        let hello = pb::TransportHelloRequest {
            transport: "ucx".into(),
            worker_address: Bytes::copy_from_slice(link.address()),
            client_peer_id: 1,
        };
        let header = pb::RequestHeader {
            call_id: 1,
            method: pb::Method::TransportHello as i32,
            ..Default::default()
        };
        let mut out = bytes::BytesMut::new();
        frame::encode_request(&mut out, &header, &hello, &[]);
        tcp.write_all(&out).expect("hello");
        let mut len = [0u8; 4];
        tcp.read_exact(&mut len).expect("hello answer");
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        tcp.read_exact(&mut body).expect("hello answer");
        let (header, parts) = frame::decode_response(Bytes::from(body)).expect("response");
        assert!(header.error.is_none(), "{:?}", header.error);
        let answer = pb::TransportHelloResponse::decode(parts.param).expect("hello response");
        link.connect(1, answer.worker_address.to_vec(), answer.server_peer_id)
            .expect("connect the link");
        RawPeer {
            _tcp: tcp,
            link,
            frames,
        }
    }

    /// Sends one UCX message of `len` bytes whose head is a MUTATE request's frame head (call
    /// id 7, the frame's length prefix saying what a u32 can of `len`), and waits for the
    /// server's answer.
    fn send_and_answer(&self, len: usize) -> Option<cellar_proto::pb::ResponseHeader> {
        use cellar_proto::{frame, pb};
        let header = pb::RequestHeader {
            call_id: 7,
            method: pb::Method::Mutate as i32,
            ..Default::default()
        };
        let mut head = bytes::BytesMut::new();
        frame::encode_request(&mut head, &header, &pb::Empty {}, &[]);
        let body_len = u32::try_from(len - 4).unwrap_or(u32::MAX);
        head[..4].copy_from_slice(&body_len.to_be_bytes());
        let message = Bytes::from_owner(Zeros::new(len, &head));
        self.link.send(1, message).expect("send");
        let frame = self.frames.recv_timeout(Duration::from_secs(60)).ok()?;
        let (header, _) = frame::decode_response(frame.slice(4..)).expect("a response frame");
        Some(header)
    }
}

/// The peak resident memory of a process (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmHWM in kB");
    kib * 1024
}

/// A UCX message over `rpc.max_request_bytes` is refused by the length UCX announces, before
/// the server takes any memory for it: a 256 MiB one leaves the server's peak memory where it
/// was (it used to be received whole, into a buffer of its size, and refused after), and one
/// of a TiB, which no buffer could hold (it used to abort the server: "memory allocation of
/// 1099511627776 bytes failed"), is refused the same way. The sender is told why, and the
/// server goes on serving others.
#[test]
fn oversized_ucx_messages_are_refused_before_they_take_memory() {
    if !ucx_installed() {
        return;
    }
    let server = Server::start_with_config("[rpc]\nmax_request_bytes = 4194304\n");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt.block_on(connect(&server, Transport::Ucx));
    rt.block_on(create(&client, "t"));
    let pid = server.pid();

    for len in [256usize << 20, 1 << 40] {
        let before = peak_rss(pid);
        let peer = RawPeer::connect(&server.native);
        let Some(answer) = peer.send_and_answer(len) else {
            panic!(
                "no answer to a message of {len} bytes\nserver output:\n{}",
                server.output()
            );
        };
        let error = answer.error.expect("an error answer");
        assert_eq!(
            error.code,
            cellar_proto::pb::ErrorCode::RequestTooLarge as i32,
            "{error:?}"
        );
        assert!(
            error.message.contains("rpc.max_request_bytes"),
            "the error names the limit: {}",
            error.message
        );
        let grown = peak_rss(pid).saturating_sub(before);
        assert!(
            grown < 64 << 20,
            "a refused message of {len} bytes grew the server's peak memory by {grown} bytes"
        );
        // Others are served, over UCX, on the connection that was there and on a new one.
        let t = client.table("t");
        rt.block_on(t.put(RowMutation::new("k").put(b"f", b"q", 0, vec![b'v'; 1000])))
            .unwrap_or_else(|e| panic!("put after the refusal: {e}\n{}", server.output()));
        let other = rt.block_on(connect(&server, Transport::Ucx));
        let got = rt
            .block_on(other.table("t").get(Get::new("k")))
            .expect("get");
        assert_eq!(got.value(b"f", b"q").map(Bytes::len), Some(1000));
        drop(peer);
    }
}
