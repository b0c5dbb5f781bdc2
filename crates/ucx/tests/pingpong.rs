//! Messages between two UCX workers through the system's UCX (Debian `libucx0`, which
//! `scripts/test.sh` installs): over shared memory and over UCX's TCP transport on loopback
//! (the path RDMA transports share), eager and rendezvous sizes, every byte checked.
//!
//! One test function: UCX reads its transports from the environment when a context is
//! created, so the two passes set `UCX_TLS` one after the other, not in parallel threads.

use cellar_ucx::{Context, Request, Ucx, Worker};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(20);

/// Progresses both workers until both requests complete.
fn both(a: &Worker, b: &Worker, mut x: Request<'_>, mut y: Request<'_>) {
    let deadline = Instant::now() + LIMIT;
    let (mut x_done, mut y_done) = (false, false);
    while !(x_done && y_done) {
        assert!(
            Instant::now() < deadline,
            "messages not delivered within {LIMIT:?}"
        );
        a.progress();
        b.progress();
        x_done = x_done || x.test().expect("first request");
        y_done = y_done || y.test().expect("second request");
    }
}

fn pass(ucx: &std::sync::Arc<Ucx>, transports: &str) {
    std::env::set_var("UCX_TLS", transports);
    std::env::set_var("UCX_NET_DEVICES", "lo");
    let ctx = Context::new(ucx).expect("context");
    let (w1, w2) = (
        ctx.worker().expect("worker 1"),
        ctx.worker().expect("worker 2"),
    );
    let (a1, a2) = (
        w1.address().expect("address"),
        w2.address().expect("address"),
    );
    assert!(
        !a1.is_empty() && a1 != a2,
        "{transports}: distinct worker addresses"
    );
    let to2 = w1.connect(&a2).expect("endpoint 1 -> 2");
    let to1 = w2.connect(&a1).expect("endpoint 2 -> 1");

    // Eager and rendezvous sizes (UCX switches to zero-copy rendezvous above a few KiB to
    // tens of KiB, depending on the transport).
    for size in [1usize, 1024, 64 * 1024, 1024 * 1024] {
        let out: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        let mut back = vec![0u8; size];
        let mut inbox = vec![0u8; size];
        for round in 0..20u64 {
            let tag = (size as u64) << 16 | round;
            let r = w2.recv(tag, u64::MAX, &mut inbox).expect("post receive");
            let s = to2.send(tag, &out).expect("send");
            both(&w1, &w2, s, r);
            let r = w1.recv(tag, u64::MAX, &mut back).expect("post receive");
            let s = to1.send(tag, &inbox).expect("send back");
            both(&w2, &w1, s, r);
            assert!(back == out, "{transports}: {size} bytes came back changed");
        }
    }

    // A receive reports the sender's tag and the length; a masked receive matches any tag
    // with the same high bits.
    let mut inbox = vec![0u8; 64];
    let r = w2.recv(0xAB00, 0xFF00, &mut inbox).expect("post receive");
    let s = to2.send(0xAB42, b"hello").expect("send");
    let deadline = Instant::now() + LIMIT;
    let mut s = Some(s);
    while s.as_mut().is_some_and(|s| !s.test().expect("send")) {
        assert!(Instant::now() < deadline);
        w1.progress();
        w2.progress();
    }
    drop(s);
    let got = r.wait(LIMIT).expect("receive").expect("receive info");
    assert_eq!((got.tag, got.len), (0xAB42, 5), "{transports}");
    assert_eq!(&inbox[..5], b"hello");

    // A message larger than the receive buffer is an error, not an overrun.
    let mut small = vec![0u8; 8];
    let big = vec![1u8; 4096];
    let r = w2.recv(7, u64::MAX, &mut small).expect("post receive");
    let s = to2.send(7, &big).expect("send");
    let deadline = Instant::now() + LIMIT;
    let (mut r, mut s) = (r, s);
    let outcome = loop {
        assert!(
            Instant::now() < deadline,
            "truncated receive never completed"
        );
        w1.progress();
        w2.progress();
        let _ = s.test();
        match r.test() {
            Ok(false) => continue,
            other => break other,
        }
    };
    let err = outcome.expect_err("a 4 KiB message into 8 bytes");
    assert!(err.to_string().contains("receiving"), "{transports}: {err}");
    drop(s);

    // A receive nobody sends to is cancelled when dropped, without hanging.
    let mut nothing = vec![0u8; 16];
    let r = w2.recv(99, u64::MAX, &mut nothing).expect("post receive");
    drop(r);

    // Idle: the worker can be armed and slept on.
    let fd = w1.event_fd().expect("event fd");
    assert!(fd >= 0);
    let deadline = Instant::now() + LIMIT;
    while !w1.arm().expect("arm") {
        assert!(Instant::now() < deadline, "never quiet enough to arm");
        w1.progress();
    }
    drop((to1, to2));
}

#[test]
fn messages_cross_shared_memory_and_tcp_intact() {
    let ucx = Ucx::load().unwrap_or_else(|e| panic!("{e}"));
    assert!(ucx.version() >= (1, 10, 0), "{ucx:?}");
    pass(&ucx, "sm,self");
    pass(&ucx, "tcp,self");
}
