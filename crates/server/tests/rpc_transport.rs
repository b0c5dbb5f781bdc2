//! The native RPC transport over real 127.0.0.1 sockets, driven by raw frames against a test
//! handler: pipelining, ordering, refusals, bad input, back-pressure, shutdown.

mod rpc_support;

use cellar_proto::pb::{ErrorCode, Method};
use rpc_support::{config, sleep_param, start, take_u64, wait_until, Client};
use std::collections::HashSet;
use std::io::Write;
use std::sync::atomic::Ordering;

#[test]
fn many_calls_in_flight_on_one_connection_are_answered_by_id_in_completion_order() {
    let (server, handler) = start(&config(8, 300, 1 << 20));
    let mut c = Client::connect(server.local_addr());
    // Call 0 waits at the gate until every other call has been answered: its answer must come
    // last although it was sent first.
    c.send(0, Method::ScanOpen, b"gated", b"");
    let n = 60u64;
    for id in 1..=n {
        if id % 2 == 0 {
            c.send(
                id,
                Method::Mutate,
                &sleep_param(id % 7 * 3),
                format!("cells {id}").as_bytes(),
            );
        } else {
            c.send(
                id,
                Method::Get,
                format!("param {id}").as_bytes(),
                format!("cells {id}").as_bytes(),
            );
        }
    }
    let mut seen = HashSet::new();
    let mut order = Vec::new();
    for _ in 1..=n {
        let r = c.recv();
        assert!(r.error.is_none(), "{:?}", r.error);
        assert!(seen.insert(r.call_id), "call {} answered twice", r.call_id);
        assert_ne!(r.call_id, 0, "the gated call cannot be answered yet");
        assert_eq!(&r.cellblock[..], format!("cells {}", r.call_id).as_bytes());
        if r.call_id % 2 == 1 {
            assert_eq!(&r.param[..], format!("param {}", r.call_id).as_bytes());
        }
        order.push(r.call_id);
    }
    assert_eq!(seen.len() as u64, n);
    handler.open_gate();
    let last = c.recv();
    assert_eq!(last.call_id, 0);
    assert_eq!(&last.param[..], b"gated");
    assert_eq!(server.metrics().calls(Method::Get), n / 2);
    assert_eq!(server.metrics().calls(Method::Mutate), n / 2);
}

#[test]
fn ping_is_answered_without_the_handler() {
    let (server, handler) = start(&config(1, 10, 1 << 20));
    let mut c = Client::connect(server.local_addr());
    for id in 1..=5 {
        let r = c.call(id, Method::Ping, b"", b"");
        assert!(r.error.is_none());
        assert!(r.param.is_empty() && r.cellblock.is_empty());
    }
    assert_eq!(handler.calls.load(Ordering::SeqCst), 0);
    assert_eq!(server.metrics().calls(Method::Ping), 5);
}

#[test]
fn a_bad_preamble_gets_one_error_frame_then_the_connection_closes() {
    let (server, _handler) = start(&config(1, 10, 1 << 20));
    let mut c = Client::raw(server.local_addr());
    c.stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("written");
    let r = c.recv();
    assert_eq!(r.call_id, 0);
    assert_eq!(r.code(), Some(ErrorCode::MalformedRequest));
    assert!(r.message().contains("preamble"), "{}", r.message());
    c.expect_closed();

    let mut v9 = cellar_proto::PREAMBLE;
    v9[4] = 9;
    let mut c = Client::raw(server.local_addr());
    c.stream.write_all(&v9).expect("written");
    let r = c.recv();
    assert_eq!(r.call_id, 0);
    assert_eq!(r.code(), Some(ErrorCode::MalformedRequest));
    assert!(r.message().contains("version 9"), "{}", r.message());
    assert!(r.message().contains("speaks 1"), "{}", r.message());
    c.expect_closed();

    // The server still serves.
    let mut c = Client::connect(server.local_addr());
    assert!(c.call(1, Method::Get, b"p", b"").error.is_none());
}

#[test]
fn an_oversized_frame_is_refused_by_call_id_and_the_connection_keeps_working() {
    let (server, _handler) = start(&config(2, 10, 4096));
    let mut c = Client::connect(server.local_addr());
    let big = vec![0xabu8; 300 * 1024];
    let frame = Client::request_frame(5, Method::Get as i32, b"big", &big);
    c.stream.write_all(&frame).expect("written");
    let r = c.recv();
    assert_eq!(r.call_id, 5);
    assert_eq!(r.code(), Some(ErrorCode::RequestTooLarge));
    let body_len = (frame.len() - 4).to_string();
    assert!(r.message().contains(&body_len), "{}", r.message());
    assert!(r.message().contains("4096"), "{}", r.message());
    assert!(r.message().contains("GET"), "{}", r.message());
    let ok = c.call(6, Method::Get, b"small", b"cells");
    assert!(ok.error.is_none());
    assert_eq!(&ok.cellblock[..], b"cells");
    assert_eq!(server.metrics().errors(ErrorCode::RequestTooLarge), 1);
}

#[test]
fn a_garbage_frame_closes_only_its_own_connection() {
    let (server, handler) = start(&config(2, 10, 1 << 20));
    let mut good = Client::connect(server.local_addr());
    let mut bad = Client::connect(server.local_addr());
    assert!(good.call(1, Method::Get, b"a", b"").error.is_none());
    let bad_id = take_u64(bad.call(1, Method::LocateRegion, b"", b"").param);
    // A body whose header length overruns the frame.
    let garbage = [0, 0, 0, 6, 0xff, 0xff, 0xff, 0x7f, 1, 2];
    bad.stream.write_all(&garbage).expect("written");
    let r = bad.recv();
    assert_eq!(r.code(), Some(ErrorCode::MalformedRequest));
    assert!(r.message().contains("malformed"), "{}", r.message());
    bad.expect_closed();
    wait_until("connection_closed for the bad connection", || {
        handler.closed().contains(&bad_id)
    });
    for id in 2..20 {
        let r = good.call(id, Method::Get, b"still here", b"");
        assert!(r.error.is_none());
    }
}

#[test]
fn unknown_methods_and_handler_errors_keep_the_connection() {
    let (server, _handler) = start(&config(2, 10, 1 << 20));
    let mut c = Client::connect(server.local_addr());
    let frame = Client::request_frame(1, 99, b"", b"");
    c.stream.write_all(&frame).expect("written");
    let r = c.recv();
    assert_eq!((r.call_id, r.code()), (1, Some(ErrorCode::UnknownMethod)));
    assert!(r.message().contains("99"), "{}", r.message());
    let r = c.call(2, Method::Status, b"", b"");
    assert_eq!(r.code(), Some(ErrorCode::InvalidArgument));
    assert_eq!(r.message(), "status refused by the test handler");
    let r = c.call(3, Method::ScanClose, b"", b"");
    assert_eq!(r.code(), Some(ErrorCode::Internal));
    assert!(r.message().contains("SCAN_CLOSE"), "{}", r.message());
    assert!(c.call(4, Method::Get, b"", b"").error.is_none());
}

#[test]
fn a_full_call_queue_answers_server_busy_at_once() {
    let (server, handler) = start(&config(1, 1, 1 << 20));
    let mut c = Client::connect(server.local_addr());
    c.send(1, Method::ScanOpen, b"holds the only handler", b"");
    handler.wait_at_gate(1);
    c.send(2, Method::Get, b"fills the queue", b"");
    wait_until("call 2 queued", || server.metrics().queue_depth() == 1);
    c.send(3, Method::Get, b"refused", b"");
    let busy = c.recv();
    assert_eq!(busy.call_id, 3);
    assert_eq!(busy.code(), Some(ErrorCode::ServerBusy));
    assert!(
        busy.message().contains("rpc.max_queued_calls"),
        "{}",
        busy.message()
    );
    handler.open_gate();
    let mut ids = vec![c.recv().call_id, c.recv().call_id];
    ids.sort();
    assert_eq!(ids, vec![1, 2]);
    assert_eq!(server.metrics().errors(ErrorCode::ServerBusy), 1);
}

#[test]
fn calls_the_handler_serves_inline_are_answered_while_every_handler_is_busy() {
    let (server, handler) = start(&config(1, 1, 1 << 20));
    let mut c = Client::connect(server.local_addr());
    c.send(1, Method::ScanOpen, b"holds the only handler", b"");
    handler.wait_at_gate(1);
    c.send(2, Method::Get, b"fills the queue", b"");
    wait_until("call 2 queued", || server.metrics().queue_depth() == 1);
    let r = c.call(3, Method::ListRegions, b"now", b"");
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(&r.param[..], b"inline now");
    handler.open_gate();
    let mut ids = vec![c.recv().call_id, c.recv().call_id];
    ids.sort();
    assert_eq!(ids, vec![1, 2]);
    assert_eq!(server.metrics().calls(Method::ListRegions), 1);
}

#[test]
fn work_begun_on_the_reactor_is_awaited_there_while_every_handler_is_busy() {
    let (server, handler) = start(&config(1, 1, 1 << 20));
    let mut c = Client::connect(server.local_addr());
    c.send(1, Method::ScanOpen, b"holds the only handler", b"");
    handler.wait_at_gate(1);
    c.send(2, Method::Get, b"fills the queue", b"");
    wait_until("call 2 queued", || server.metrics().queue_depth() == 1);
    let r = c.call(3, Method::ListTables, b"", b"");
    assert!(r.error.is_none(), "{:?}", r.error);
    let thread = String::from_utf8_lossy(&r.param).into_owned();
    assert!(thread.starts_with("cellar-rpc-io"), "finished on {thread}");
    handler.open_gate();
    let mut ids = vec![c.recv().call_id, c.recv().call_id];
    ids.sort();
    assert_eq!(ids, vec![1, 2]);
    assert_eq!(server.metrics().errors(ErrorCode::ServerBusy), 0);
}

#[test]
fn the_handler_hears_of_every_closed_connection() {
    let (server, handler) = start(&config(2, 10, 1 << 20));
    let mut ids = Vec::new();
    for _ in 0..3 {
        let mut c = Client::connect(server.local_addr());
        ids.push(take_u64(c.call(1, Method::LocateRegion, b"", b"").param));
    }
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        3,
        "distinct ids {ids:?}"
    );
    wait_until("three connections closed", || handler.closed().len() == 3);
    let mut closed = handler.closed();
    closed.sort();
    ids.sort();
    assert_eq!(closed, ids);
    wait_until("open connections back to zero", || {
        server.metrics().open_connections() == 0
    });
}

#[test]
fn shutdown_lets_in_flight_calls_finish_then_closes() {
    let (server, handler) = start(&config(2, 10, 1 << 20));
    let addr = server.local_addr();
    let mut c = Client::connect(addr);
    let id = take_u64(c.call(1, Method::LocateRegion, b"", b"").param);
    c.send(7, Method::ScanOpen, b"in flight", b"");
    handler.wait_at_gate(1);
    let stopper = std::thread::spawn(move || server.shutdown());
    // New connections are refused once the listener is gone (probes made before that are
    // served and closed like any other).
    wait_until("listener closed", || {
        std::net::TcpStream::connect(addr).is_err()
    });
    handler.open_gate();
    let r = c.recv();
    assert_eq!(r.call_id, 7);
    assert!(r.error.is_none());
    c.expect_closed();
    stopper.join().expect("shutdown returns");
    assert!(handler.closed().contains(&id), "{:?}", handler.closed());
}

#[test]
fn a_call_whose_deadline_passes_in_the_queue_is_not_run() {
    let (server, handler) = start(&config(1, 10, 1 << 20));
    let mut c = Client::connect(server.local_addr());
    c.send(1, Method::ScanOpen, b"holds the only handler", b"");
    handler.wait_at_gate(1);
    let frame = Client::request_frame_with_timeout(2, Method::Get as i32, 1, b"late", b"");
    c.stream.write_all(&frame).expect("written");
    wait_until("call 2 queued", || server.metrics().queue_depth() == 1);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let calls_before = handler.calls.load(Ordering::SeqCst);
    handler.open_gate();
    let mut by_id = [c.recv(), c.recv()];
    by_id.sort_by_key(|r| r.call_id);
    assert!(by_id[0].error.is_none());
    assert_eq!(by_id[1].code(), Some(ErrorCode::Timeout));
    assert!(
        by_id[1].message().contains("deadline"),
        "{}",
        by_id[1].message()
    );
    assert_eq!(handler.calls.load(Ordering::SeqCst), calls_before);
}

#[test]
fn many_connections_at_once_each_get_their_own_answers() {
    // 16 connections × 20 pipelined calls: up to 320 queued at once, so the queue holds them
    // all (SERVER_BUSY is another test's subject).
    let (server, handler) = start(&config(4, 16 * 20, 1 << 20));
    let addr = server.local_addr();
    let clients: Vec<_> = (0..16u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                for round in 0..10u64 {
                    for i in 0..20u64 {
                        let id = round * 100 + i;
                        c.send(
                            id,
                            Method::Get,
                            format!("{t}/{id}").as_bytes(),
                            &vec![t as u8; 1500],
                        );
                    }
                    let mut got = HashSet::new();
                    for _ in 0..20 {
                        let r = c.recv();
                        assert!(r.error.is_none(), "{:?}", r.error);
                        assert_eq!(&r.param[..], format!("{t}/{}", r.call_id).as_bytes());
                        assert!(r.cellblock.iter().all(|&b| b == t as u8));
                        got.insert(r.call_id);
                    }
                    assert_eq!(got.len(), 20);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("client thread");
    }
    assert_eq!(handler.calls.load(Ordering::SeqCst), 16 * 10 * 20);
    assert_eq!(server.metrics().calls(Method::Get), 16 * 10 * 20);
}
