//! Slow, silent and greedy clients never take a real `cellar standalone` down, on either
//! port: connections stuck in half a preamble, half a connection header or half a frame (a
//! length prefix announcing megabytes, then a trickle) hold no handler thread and no more
//! memory than what they sent, and are closed by their timeouts; a client that pipelines big
//! Gets and never reads stalls only itself, with the server's in-flight bytes within their
//! bounds, until the write timeout closes it; past the server-wide bound calls are refused as
//! busy and served again once the greedy clients are gone. Meanwhile other clients are
//! served promptly.

mod support;

use bytes::{Bytes, BytesMut};
use cellar_client::blocking::Client;
use cellar_client::{ClientConfig, FamilySchema, Get, RowMutation, TableSchema};
use cellar_proto::{frame, hbase, hbase_wire, pb};
use prost::Message;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::Server;

const MIB: u64 = 1024 * 1024;
/// Per connection: requests unanswered plus answers unwritten.
const CONNECTION_BOUND: u64 = 4 * MIB;
/// Per front end.
const SERVER_BOUND: u64 = 16 * MIB;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);
const FRAME_TIMEOUT: Duration = Duration::from_secs(4);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a well-behaved client's call may take while others misbehave. Stuck
/// connections that held a handler or the reactor would make calls wait for a timeout
/// (seconds); a served call takes milliseconds.
const PROMPT: Duration = Duration::from_secs(2);
/// The value a greedy client Gets over and over.
const BIG_VALUE: usize = 1024 * 1024;

fn config(extra: &str) -> String {
    format!(
        "[rpc]\nhandler_count = 2\nmax_request_bytes = {CONNECTION_BOUND}\n\
         max_connection_in_flight_bytes = {CONNECTION_BOUND}\nmax_in_flight_bytes = {SERVER_BOUND}\n\
         handshake_timeout_ms = {}\nframe_timeout_ms = {}\nwrite_timeout_ms = {}\n{extra}",
        HANDSHAKE_TIMEOUT.as_millis(),
        FRAME_TIMEOUT.as_millis(),
        WRITE_TIMEOUT.as_millis(),
    )
}

fn client(server: &Server) -> Client {
    let config = ClientConfig {
        rpc_timeout: Duration::from_secs(10),
        retries: 2,
        retry_backoff: Duration::from_millis(50),
        ..ClientConfig::default()
    };
    Client::connect_with(&server.native, config).expect("connect")
}

/// Creates table `t` (family `cf`) holding a small row `small` and a row `big` of
/// [`BIG_VALUE`] bytes.
fn setup(server: &Server) -> Client {
    let c = client(server);
    c.admin()
        .create_table(TableSchema::new("t", vec![FamilySchema::new("cf")]), vec![])
        .expect("create");
    let t = c.table("t");
    t.put(RowMutation::new("small").put(b"cf", b"q", 1, "v"))
        .expect("put small");
    t.put(RowMutation::new("big").put(b"cf", b"q", 1, vec![7u8; BIG_VALUE]))
        .expect("put big");
    c
}

/// `/status` as JSON.
fn status(server: &Server) -> serde_json::Value {
    serde_json::from_str(&server.http_get("/status")).expect("/status is JSON")
}

fn num(v: &serde_json::Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected a number, got {v}"))
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// A native connection past its preamble.
fn native(addr: &str) -> TcpStream {
    let mut s = connect(addr);
    s.write_all(&frame::PREAMBLE).expect("preamble");
    let mut back = [0u8; 8];
    s.read_exact(&mut back).expect("preamble answer");
    assert_eq!(back, frame::PREAMBLE);
    s
}

fn native_request(out: &mut BytesMut, call_id: u64, method: pb::Method, param: &impl Message) {
    let header = pb::RequestHeader {
        call_id,
        method: method as i32,
        ..Default::default()
    };
    frame::encode_request(out, &header, param, &[]);
}

fn read_native_response(s: &mut TcpStream) -> (pb::ResponseHeader, frame::Parts) {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("response length");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("response body");
    frame::decode_response(Bytes::from(body)).expect("a well-formed response")
}

/// The region of table `t` holding `row`, asked on `s`.
fn native_region(s: &mut TcpStream, row: &[u8]) -> pb::RegionRef {
    let mut out = BytesMut::new();
    let req = pb::LocateRegionRequest {
        table: "t".into(),
        row: Bytes::copy_from_slice(row),
    };
    native_request(&mut out, 1, pb::Method::LocateRegion, &req);
    s.write_all(&out).expect("locate");
    let (h, parts) = read_native_response(s);
    assert!(h.error.is_none(), "locate: {:?}", h.error);
    let loc = pb::LocateRegionResponse::decode(parts.param)
        .expect("decodes")
        .location
        .expect("a location");
    pb::RegionRef {
        table: loc.table,
        region_id: loc.region_id,
    }
}

fn native_get(region: &pb::RegionRef, row: &[u8]) -> pb::GetRequest {
    pb::GetRequest {
        region: Some(region.clone()),
        get: Some(pb::Get {
            row: Bytes::copy_from_slice(row),
            max_versions: 1,
            ..Default::default()
        }),
    }
}

/// An HBase connection past its preamble and connection header.
fn hbase_hello(addr: &str) -> TcpStream {
    let mut s = connect(addr);
    let mut out = BytesMut::new();
    out.extend_from_slice(&hbase_wire::HBAS_MAGIC);
    out.extend_from_slice(&[hbase_wire::RPC_VERSION, hbase_wire::AUTH_SIMPLE]);
    let header = hbase::ConnectionHeader {
        service_name: Some("ClientService".into()),
        cell_block_codec_class: Some(hbase_wire::KEY_VALUE_CODEC.into()),
        ..Default::default()
    };
    hbase_wire::encode_connection_header(&mut out, &header);
    s.write_all(&out).expect("hello");
    s
}

fn hbase_get(region: &Bytes, row: &[u8]) -> hbase::GetRequest {
    hbase::GetRequest {
        region: support::hbase::region(region),
        get: hbase::Get {
            row: Bytes::copy_from_slice(row),
            ..Default::default()
        },
    }
}

/// A frame prefix announcing `announced` body bytes followed by the first `sent` of them: a
/// real request header, then filler.
fn half_frame(whole: &[u8], announced: u32, sent: usize) -> Vec<u8> {
    let body = &whole[4..];
    let mut out = announced.to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out.resize(4 + sent.max(body.len()), 0);
    out
}

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Runs `calls` rounds of a well-behaved client's work on both ports and returns the slowest
/// call: a native put and get (on the reactor), a native table listing (on a handler
/// thread), an HBase put and get.
fn served_promptly(server: &Server, c: &Client, rounds: usize) -> Duration {
    let mut hb = support::hbase::Conn::open(&server.hbase, "ClientService");
    let region = hb.locate("t", "small");
    let t = c.table("t");
    let mut slowest = Duration::ZERO;
    for i in 0..rounds {
        let row = format!("good-{i}");
        let started = Instant::now();
        t.put(RowMutation::new(row.clone()).put(b"cf", b"q", 1, "v"))
            .expect("native put");
        let got = t.get(Get::new(row.clone())).expect("native get");
        assert_eq!(got.value(b"cf", b"q").map(|v| &v[..]), Some(&b"v"[..]));
        slowest = slowest.max(started.elapsed());
        let started = Instant::now();
        let tables = c.admin().list_tables().expect("list tables");
        assert!(!tables.is_empty());
        slowest = slowest.max(started.elapsed());
        let started = Instant::now();
        hb.put(&region, row.as_bytes(), b"cf", b"h", b"w");
        // The row's first cell is `cf:h`, just put.
        assert_eq!(
            hb.get(&region, row.as_bytes()).as_deref(),
            Some(&b"w"[..]),
            "HBase get of {row}"
        );
        slowest = slowest.max(started.elapsed());
    }
    slowest
}

/// Waits (bounded) for the server to close `s`: a read that ends (EOF or reset) rather than
/// times out. Returns when it closed.
fn closed_by_server(s: &mut TcpStream, within: Duration) -> Option<Instant> {
    let deadline = Instant::now() + within;
    let mut scratch = [0u8; 4096];
    for _ in 0..10_000 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        s.set_read_timeout(Some(left)).expect("timeout");
        match s.read(&mut scratch) {
            Ok(0) => return Some(Instant::now()),
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(_) => return Some(Instant::now()),
        }
    }
    None
}

#[test]
fn half_preambles_headers_and_frames_hold_nothing_and_are_closed_by_their_timeouts() {
    let server = Server::start_with_config(&config(""));
    let c = setup(&server);
    let rss_before = rss_kib(server.pid());
    const EACH: usize = 40;
    const ANNOUNCED: u32 = CONNECTION_BOUND as u32;
    const SENT: usize = 1024;
    let mut native_stuck = Vec::new();
    let mut hbase_stuck = Vec::new();
    // (socket, the timeout that must close it, when its clock started)
    let mut trickled = Vec::new();
    let mut whole = BytesMut::new();
    native_request(&mut whole, 9, pb::Method::Mutate, &pb::Empty {});
    let native_half = half_frame(&whole, ANNOUNCED, SENT);
    let mut whole = BytesMut::new();
    hbase_wire::encode_request(&mut whole, 9, "Mutate", &pb::Empty {}, &[]);
    let hbase_half = half_frame(&whole, ANNOUNCED, SENT);
    for _ in 0..EACH {
        let mut s = connect(&server.native);
        s.write_all(&frame::PREAMBLE[..3]).expect("half a preamble");
        native_stuck.push((s, HANDSHAKE_TIMEOUT, Instant::now()));
        let mut s = native(&server.native);
        s.write_all(&native_half).expect("half a frame");
        trickled.push(s.try_clone().expect("clone"));
        native_stuck.push((s, FRAME_TIMEOUT, Instant::now()));

        let mut s = connect(&server.hbase);
        s.write_all(b"HBa").expect("half a preamble");
        hbase_stuck.push((s, HANDSHAKE_TIMEOUT, Instant::now()));
        let mut s = connect(&server.hbase);
        let mut hello = b"HBas\x00\x50".to_vec();
        hello.extend_from_slice(&100u32.to_be_bytes());
        hello.extend_from_slice(&[0x12, 0x0d]);
        s.write_all(&hello).expect("half a connection header");
        hbase_stuck.push((s, HANDSHAKE_TIMEOUT, Instant::now()));
        let mut s = hbase_hello(&server.hbase);
        s.write_all(&hbase_half).expect("half a frame");
        trickled.push(s.try_clone().expect("clone"));
        hbase_stuck.push((s, FRAME_TIMEOUT, Instant::now()));
    }
    // The half frames keep trickling, a byte per socket every 100 ms: slow, not silent.
    let stop = Arc::new(AtomicBool::new(false));
    let trickle = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stop.load(Ordering::Acquire) && started.elapsed() < Duration::from_secs(30) {
                for s in &mut trickled {
                    let _ = s.write(&[0]);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    // The server holds them all open, each with no more than what it sent.
    let v = support::wait_for(Duration::from_secs(5), || {
        let v = status(&server);
        let open = |f: &str| num(&v[f]["open_connections"]) as usize;
        (open("rpc") >= 2 * EACH && open("hbase") >= 3 * EACH).then_some(v)
    })
    .unwrap_or_else(|| panic!("stuck connections open: {}", status(&server)));
    for front in ["rpc", "hbase"] {
        let in_flight = num(&v[front]["in_flight_bytes"]);
        assert!(
            in_flight <= SERVER_BOUND && in_flight < (EACH * 16 * 1024) as u64,
            "{front}: {in_flight} bytes in flight for {EACH} half frames of {SENT} bytes sent \
             (each announcing {ANNOUNCED}): only what arrived may be held"
        );
    }
    let rss_stuck = rss_kib(server.pid());
    eprintln!(
        "RSS {rss_before} KiB before, {rss_stuck} KiB with {} stuck connections",
        5 * EACH
    );

    // Meanwhile everyone else is served, on the reactor and on the two handler threads.
    let slowest = served_promptly(&server, &c, 3);
    eprintln!("slowest well-behaved call {slowest:?}");
    assert!(
        slowest < PROMPT,
        "a call took {slowest:?} beside stuck clients"
    );
    let v = status(&server);
    assert!(
        num(&v["rpc"]["open_connections"]) as usize >= 2 * EACH
            && num(&v["hbase"]["open_connections"]) as usize >= 3 * EACH,
        "the stuck connections were still there while the others were served: {v}"
    );

    // Each is closed by its own timeout, not before.
    for (front, stuck) in [("native", &mut native_stuck), ("hbase", &mut hbase_stuck)] {
        for (i, (s, timeout, opened)) in stuck.iter_mut().enumerate() {
            let closed = closed_by_server(s, *timeout + Duration::from_secs(20))
                .unwrap_or_else(|| panic!("{front} stuck connection {i} was never closed"));
            let after = closed.duration_since(*opened);
            assert!(
                after >= timeout.mul_f64(0.9),
                "{front} stuck connection {i} closed after {after:?}, before its {timeout:?} timeout"
            );
        }
    }
    stop.store(true, Ordering::Release);
    trickle.join().expect("trickle thread");
    let v = support::wait_for(Duration::from_secs(10), || {
        let v = status(&server);
        (num(&v["rpc"]["open_connections"]) <= 2 && num(&v["hbase"]["open_connections"]) <= 2)
            .then_some(v)
    })
    .unwrap_or_else(|| panic!("stuck connections gone: {}", status(&server)));
    assert!(
        num(&v["rpc"]["connection_timeouts"]) >= 2 * EACH as u64,
        "{v}"
    );
    assert!(
        num(&v["hbase"]["connection_timeouts"]) >= 3 * EACH as u64,
        "{v}"
    );
    let metrics = server.http_get("/metrics");
    assert!(
        metrics.contains("cellar_hbase_connection_timeouts_total "),
        "{metrics}"
    );
    // And the server still serves.
    assert!(served_promptly(&server, &c, 1) < PROMPT);
}

/// Where the big row is, for each port: the native region and the HBase region name.
fn big_row_regions(server: &Server) -> (pb::RegionRef, Bytes) {
    let native_region = native_region(&mut native(&server.native), b"big");
    let hbase_region =
        support::hbase::Conn::open(&server.hbase, "ClientService").locate("t", "big");
    (native_region, hbase_region)
}

/// Opens a native connection that asks for the big row `n` times and never reads.
fn greedy_native(server: &Server, region: &pb::RegionRef, n: u64) -> TcpStream {
    let mut s = native(&server.native);
    let mut out = BytesMut::new();
    for i in 0..n {
        native_request(
            &mut out,
            100 + i,
            pb::Method::Get,
            &native_get(region, b"big"),
        );
    }
    s.write_all(&out).expect("pipelined gets");
    s
}

/// Opens an HBase connection that asks for the big row `n` times and never reads.
fn greedy_hbase(server: &Server, region: &Bytes, n: u32) -> TcpStream {
    let mut s = hbase_hello(&server.hbase);
    let mut out = BytesMut::new();
    for i in 0..n {
        hbase_wire::encode_request(&mut out, 100 + i, "Get", &hbase_get(region, b"big"), &[]);
    }
    s.write_all(&out).expect("pipelined gets");
    s
}

/// How the server holds a greedy client back.
#[derive(Clone, Copy, PartialEq)]
enum HeldBack {
    /// Its connection is not read until answers drain.
    Stalled,
    /// Answers past the bound are dropped for a busy refusal.
    Refused,
}

/// A greedy client on each port is held back; everyone else is served; the server holds no
/// more for it than the connection bound and one answer; the write timeout closes it.
fn greedy_readers_stall_only_themselves(extra_config: &str, how: HeldBack) {
    let server = Server::start_with_config(&config(extra_config));
    let c = setup(&server);
    // 300 answers of 1 MiB: far more than the kernel's socket buffers and the bound.
    let (native_region, hbase_region) = big_row_regions(&server);
    let native_greedy = greedy_native(&server, &native_region, 300);
    let hbase_greedy = greedy_hbase(&server, &hbase_region, 300);
    let held = support::wait_for(Duration::from_secs(15), || {
        let v = status(&server);
        let held = |f: &str| match how {
            HeldBack::Stalled => num(&v[f]["stalled_connections"]) >= 1,
            HeldBack::Refused => num(&v[f]["overload_refusals"]["in_flight_bytes"]) >= 1,
        };
        (held("rpc") && held("hbase")).then_some(v)
    });
    let v = held.unwrap_or_else(|| panic!("both greedy clients held back: {}", status(&server)));
    eprintln!("held back: {v}");

    let slowest = served_promptly(&server, &c, 5);
    eprintln!("slowest well-behaved call {slowest:?}");
    assert!(
        slowest < PROMPT,
        "a call took {slowest:?} beside greedy clients"
    );

    // Held for the greedy client: at most its bound plus the one answer that crossed it (plus
    // the well-behaved client's few bytes).
    let v = status(&server);
    let allowed = CONNECTION_BOUND + BIG_VALUE as u64 + 256 * 1024;
    for front in ["rpc", "hbase"] {
        let peak = num(&v[front]["in_flight_bytes_peak"]);
        assert!(
            peak <= allowed,
            "{front}: in-flight bytes peaked at {peak}, above {allowed}: {v}"
        );
        assert!(num(&v[front]["in_flight_bytes"]) <= allowed, "{v}");
    }

    // The greedy connections are closed once their answers could not be written for the
    // write timeout; what they held is given back.
    let gone = support::wait_for(WRITE_TIMEOUT + Duration::from_secs(20), || {
        let v = status(&server);
        let idle = |f: &str| {
            num(&v[f]["stalled_connections"]) == 0
                && num(&v[f]["in_flight_bytes"]) < 64 * 1024
                && num(&v[f]["connection_timeouts"]) >= 1
        };
        (idle("rpc") && idle("hbase")).then_some(v)
    });
    assert!(
        gone.is_some(),
        "greedy connections closed by the write timeout: {}",
        status(&server)
    );
    drop((native_greedy, hbase_greedy));
    assert!(served_promptly(&server, &c, 1) < PROMPT);
}

#[test]
fn a_client_that_pipelines_big_gets_and_never_reads_stalls_only_itself() {
    // Gets served on the reactor: the reader stops at the connection's bound.
    greedy_readers_stall_only_themselves("", HeldBack::Stalled);
}

#[test]
fn big_answers_from_handler_threads_past_the_bound_are_refused_not_held() {
    // Gets served by the handler threads: every queued Get is answered whether or not the
    // reader stops, so answers past the bound are dropped for a busy refusal.
    greedy_readers_stall_only_themselves(
        "inline_gets = false\nmax_queued_calls = 1000\n",
        HeldBack::Refused,
    );
}

#[test]
fn past_the_server_bound_calls_are_refused_busy_until_the_greedy_clients_are_gone() {
    let server = Server::start_with_config(&config(""));
    let c = setup(&server);
    let mut probe = native(&server.native);
    let region = native_region(&mut probe, b"small");
    // Six greedy clients per port can hold more than the server's bound between them.
    let (native_big, hbase_big) = big_row_regions(&server);
    let greedy: Vec<TcpStream> = (0..6)
        .flat_map(|_| {
            [
                greedy_native(&server, &native_big, 100),
                greedy_hbase(&server, &hbase_big, 100),
            ]
        })
        .collect();
    // They keep asking, a Get each every 20 ms, as clients that ignore busy answers would:
    // whatever the server gives back is taken again at once.
    let stop = Arc::new(AtomicBool::new(false));
    let pressure = {
        let mut frames = (BytesMut::new(), BytesMut::new());
        native_request(
            &mut frames.0,
            1,
            pb::Method::Get,
            &native_get(&native_big, b"big"),
        );
        hbase_wire::encode_request(&mut frames.1, 1, "Get", &hbase_get(&hbase_big, b"big"), &[]);
        let mut socks: Vec<(TcpStream, Vec<u8>, &'static str)> = greedy
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let s = s.try_clone().expect("clone");
                s.set_nonblocking(true).expect("non-blocking");
                (s, Vec::new(), if i % 2 == 0 { "native" } else { "hbase" })
            })
            .collect();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stop.load(Ordering::Acquire) && started.elapsed() < Duration::from_secs(60) {
                for (s, pending, kind) in &mut socks {
                    if pending.is_empty() {
                        let f = if *kind == "native" {
                            &frames.0
                        } else {
                            &frames.1
                        };
                        pending.extend_from_slice(f);
                    }
                    // Whole frames only: what a write leaves is finished by the next ones.
                    if let Ok(n) = s.write(pending) {
                        pending.drain(..n);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let full = support::wait_for(Duration::from_secs(15), || {
        let v = status(&server);
        let full = |f: &str| {
            num(&v[f]["in_flight_bytes"]) + BIG_VALUE as u64 >= SERVER_BOUND
                && num(&v[f]["overload_refusals"]["in_flight_bytes"]) >= 1
        };
        (full("rpc") && full("hbase")).then_some(v)
    });
    let v = full.unwrap_or_else(|| panic!("both front ends full: {}", status(&server)));
    eprintln!("full: {v}");

    // A call now is refused at once, as busy, on each port (the bound is a level the greedy
    // clients hover at, so a call may slip in just after an answer drained: ask a few times).
    let mut native_refused = None;
    for call_id in 0..100 {
        let mut out = BytesMut::new();
        native_request(
            &mut out,
            call_id,
            pb::Method::Get,
            &native_get(&region, b"small"),
        );
        let started = Instant::now();
        probe.write_all(&out).expect("get");
        let (h, _) = read_native_response(&mut probe);
        assert!(started.elapsed() < PROMPT);
        if h.error.is_some() {
            native_refused = h.error;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = native_refused.expect("a native call refused while full");
    assert_eq!(
        refused.code,
        pb::ErrorCode::ServerBusy as i32,
        "{refused:?}"
    );
    assert!(
        refused.message.contains("rpc.max_in_flight_bytes"),
        "{refused:?}"
    );
    let mut hb = support::hbase::Conn::open(&server.hbase, "ClientService");
    let mut hbase_refused = None;
    for _ in 0..100 {
        let started = Instant::now();
        // Refused before the region is looked at: any region name does.
        let answer = hb.call("Get", &hbase_get(&Bytes::from_static(b"t,,1.x."), b"small"));
        assert!(started.elapsed() < PROMPT);
        if let Err(e) = answer {
            if e.exception_class_name.as_deref()
                == Some("org.apache.hadoop.hbase.CallQueueTooBigException")
            {
                hbase_refused = Some(e);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = hbase_refused.expect("an HBase call refused while full");
    assert_eq!(refused.do_not_retry, Some(false), "{refused:?}");
    let v = status(&server);
    let allowed = SERVER_BOUND + 4 * (BIG_VALUE as u64 + 64 * 1024);
    for front in ["rpc", "hbase"] {
        assert!(
            num(&v[front]["overload_refusals"]["in_flight_bytes"]) >= 1,
            "{front}: {v}"
        );
        let peak = num(&v[front]["in_flight_bytes_peak"]);
        assert!(peak <= allowed, "{front}: peak {peak} above {allowed}: {v}");
    }
    let metrics = server.http_get("/metrics");
    assert!(
        metrics.contains("cellar_rpc_overload_refusals_total{reason=\"in_flight_bytes\"} "),
        "{metrics}"
    );

    // Once the greedy clients stop and the write timeout has closed them, calls are served
    // again.
    stop.store(true, Ordering::Release);
    pressure.join().expect("pressure thread");
    let served = support::wait_for(WRITE_TIMEOUT + Duration::from_secs(20), || {
        let v = status(&server);
        (num(&v["rpc"]["in_flight_bytes"]) < MIB && num(&v["hbase"]["in_flight_bytes"]) < MIB)
            .then_some(())
    });
    assert!(served.is_some(), "greedy clients gone: {}", status(&server));
    drop(greedy);
    assert!(served_promptly(&server, &c, 2) < PROMPT);
}
