//! Two links (each a UCX worker on its own progress thread) over shared memory: frames of
//! every size arrive whole and in order, an idle link sleeps instead of polling, and a peer
//! that goes away is reported lost by its silence (heartbeats stop).

use bytes::Bytes;
use cellar_ucx::link::{Events, Link, LinkOptions, PeerId, Replies};
use cellar_ucx::Ucx;
use std::sync::mpsc;
use std::time::{Duration, Instant};

enum Got {
    Frame(PeerId, Bytes),
    Lost(PeerId, String),
}

/// Reports to a channel; with `echo`, also answers every frame from the progress thread.
struct ToChannel(mpsc::Sender<Got>, bool);

impl Events for ToChannel {
    fn frame(&mut self, peer: PeerId, frame: Bytes, replies: &mut Replies) {
        if self.1 {
            replies.send(peer, frame.clone());
        }
        let _ = self.0.send(Got::Frame(peer, frame));
    }
    fn lost(&mut self, peer: PeerId, why: String) {
        let _ = self.0.send(Got::Lost(peer, why));
    }
}

fn frame(i: usize) -> Vec<u8> {
    // Sizes from 1 byte to 256 KiB: eager and rendezvous messages interleaved.
    let size = match i % 4 {
        0 => 1,
        1 => 1000,
        2 => 64 * 1024,
        _ => 256 * 1024,
    };
    (0..size).map(|j| (i * 7 + j) as u8).collect()
}

/// The process's CPU time (user + system).
/// Held by each test of this file for its whole run: one test measures the process's CPU time
/// over an idle second, which another test's traffic (or a link closing beside it) would
/// count too.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cpu() -> Duration {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: an out-parameter.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()) };
    // SAFETY: zeroed and filled by getrusage.
    let u = unsafe { u.assume_init() };
    let t = |tv: libc::timeval| Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
    t(u.ru_utime) + t(u.ru_stime)
}

#[test]
fn frames_arrive_in_order_idle_links_sleep_and_silent_peers_are_lost() {
    let _alone = one_at_a_time();
    std::env::set_var("UCX_TLS", "sm,self");
    let ucx = Ucx::load().unwrap_or_else(|e| panic!("{e}"));
    let opts = LinkOptions {
        heartbeat: Duration::from_millis(100),
        dead_after: Duration::from_millis(600),
        ..LinkOptions::default()
    };
    let (a_tx, a_rx) = mpsc::channel();
    let (b_tx, b_rx) = mpsc::channel();
    let a = Link::start(&ucx, opts.clone(), ToChannel(a_tx, false)).expect("link a");
    let b = Link::start(&ucx, opts, ToChannel(b_tx, true)).expect("link b");
    // a knows b as 1; b knows a as 7.
    a.connect(1, b.address().to_vec(), 7).expect("a -> b");
    b.connect(7, a.address().to_vec(), 1).expect("b -> a");

    // b echoes every frame back from its progress thread; both sides check each frame
    // against what was sent, in order.
    const N: usize = 400;
    for i in 0..N {
        a.send(1, Bytes::from(frame(i))).expect("send");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut echoed = 0;
    let mut back = 0;
    while back < N {
        assert!(Instant::now() < deadline, "{back} of {N} frames came back");
        while let Ok(got) = b_rx.try_recv() {
            match got {
                Got::Frame(from, f) => {
                    assert_eq!(from, 7, "b hears a as 7");
                    assert!(
                        f == frame(echoed),
                        "frame {echoed} arrived changed or out of order"
                    );
                    echoed += 1;
                }
                Got::Lost(p, why) => panic!("b lost {p}: {why}"),
            }
        }
        match a_rx.recv_timeout(Duration::from_millis(10)) {
            Ok(Got::Frame(from, f)) => {
                assert_eq!(from, 1, "a hears b as 1");
                assert!(
                    f == frame(back),
                    "echo {back} came back changed or out of order"
                );
                back += 1;
            }
            Ok(Got::Lost(p, why)) => panic!("a lost {p}: {why}"),
            Err(_) => {}
        }
    }

    // Idle (heartbeats every 100 ms only): the progress threads sleep, and the process burns
    // little CPU over a second.
    std::thread::sleep(Duration::from_millis(200));
    let (sleeps, used) = (a.sleeps(), cpu());
    std::thread::sleep(Duration::from_secs(1));
    let (sleeps, used) = (a.sleeps() - sleeps, cpu() - used);
    assert!(
        sleeps >= 5,
        "a's progress thread slept {sleeps} times in an idle second"
    );
    assert!(
        used < Duration::from_millis(250),
        "two idle links used {used:?} of CPU in one second"
    );
    assert!(
        a_rx.try_recv().is_err() && b_rx.try_recv().is_err(),
        "nothing lost while idle"
    );

    // b goes away: a hears nothing more and reports it lost after dead_after.
    let gone = Instant::now();
    drop(b);
    match a_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Got::Lost(peer, why)) => {
            assert_eq!(peer, 1);
            assert!(why.contains("no message or heartbeat"), "{why}");
            let after = gone.elapsed();
            assert!(
                after >= Duration::from_millis(400) && after < Duration::from_secs(5),
                "lost after {after:?}"
            );
        }
        Ok(Got::Frame(..)) => panic!("a frame from a peer that is gone"),
        Err(_) => panic!("a never noticed that b is gone"),
    }
    // Frames to a lost peer are refused.
    a.send(1, Bytes::from_static(b"x")).expect("queued");
    match a_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Got::Lost(1, why)) => assert!(why.contains("not connected"), "{why}"),
        _ => panic!("a send to a lost peer was not refused"),
    }
}

/// Answers every frame from the progress thread as a 16-byte head and the rest, gathered.
struct GatherEcho;

impl Events for GatherEcho {
    fn frame(&mut self, peer: PeerId, frame: Bytes, replies: &mut Replies) {
        let at = frame.len().min(16);
        replies.send_gathered(peer, frame.slice(..at), frame.slice(at..));
    }
    fn lost(&mut self, _peer: PeerId, _why: String) {}
}

#[test]
fn receive_buffers_are_reused_across_messages_and_gathered_sends_arrive_whole() {
    let _alone = one_at_a_time();
    std::env::set_var("UCX_TLS", "sm,self");
    let ucx = Ucx::load().unwrap_or_else(|e| panic!("{e}"));
    let (a_tx, a_rx) = mpsc::channel();
    let a = Link::start(&ucx, LinkOptions::default(), ToChannel(a_tx, false)).expect("link a");
    let b = Link::start(&ucx, LinkOptions::default(), GatherEcho).expect("link b");
    a.connect(1, b.address().to_vec(), 7).expect("a -> b");
    b.connect(7, a.address().to_vec(), 1).expect("b -> a");
    const N: usize = 200;
    for i in 0..N {
        // One at a time, each dropped (on this thread) before the next is sent.
        // Below and above the size from which a head and a tail are copied into one buffer.
        let size = if i % 2 == 0 { 32 * 1024 } else { 96 * 1024 };
        let sent = Bytes::from((0..size).map(|j| (i + j) as u8).collect::<Vec<u8>>());
        a.send(1, sent.clone()).expect("send");
        match a_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Got::Frame(_, back)) => assert!(back == sent, "echo {i} came back changed"),
            Ok(Got::Lost(p, why)) => panic!("a lost {p}: {why}"),
            Err(_) => panic!("no echo of frame {i} within 10 s"),
        }
    }
    for (side, link) in [("a", &a), ("b", &b)] {
        let stats = link.pool_stats();
        assert!(
            stats.allocated <= 12 && stats.reused + stats.allocated >= N as u64,
            "{side} received into {} new and {} reused buffers for {N} frames (and heartbeats)",
            stats.allocated,
            stats.reused
        );
    }
}

/// Reports each frame with the thread it was delivered on.
struct OnThread(mpsc::Sender<(std::thread::ThreadId, Bytes)>);

impl Events for OnThread {
    fn frame(&mut self, _peer: PeerId, frame: Bytes, _replies: &mut Replies) {
        let _ = self.0.send((std::thread::current().id(), frame));
    }
    fn lost(&mut self, peer: PeerId, why: String) {
        panic!("peer {peer} lost: {why}");
    }
}

#[test]
fn a_driving_caller_takes_its_answers_off_the_wire_itself() {
    let _alone = one_at_a_time();
    std::env::set_var("UCX_TLS", "sm,self");
    let ucx = Ucx::load().unwrap_or_else(|e| panic!("{e}"));
    let (a_tx, a_rx) = mpsc::channel();
    let a = Link::start(&ucx, LinkOptions::default(), OnThread(a_tx)).expect("link a");
    let b = Link::start(&ucx, LinkOptions::default(), GatherEcho).expect("link b");
    a.connect(1, b.address().to_vec(), 7).expect("a -> b");
    b.connect(7, a.address().to_vec(), 1).expect("b -> a");
    const N: usize = 200;
    let me = std::thread::current().id();
    let mut here = 0;
    for i in 0..N {
        let sent = Bytes::from(vec![i as u8; 1000]);
        a.send_then_drive(1, sent.clone()).expect("queue");
        let mut got = None;
        a.drive(
            Duration::from_secs(2),
            || {
                got = a_rx.try_recv().ok();
                got.is_some()
            },
            || false,
        );
        let (on, back) = match got {
            Some(g) => g,
            // Not driven to the end (it may not have been this thread's turn): the progress
            // thread delivers it.
            None => a_rx
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("no echo of frame {i}")),
        };
        assert!(back == sent, "echo {i} came back changed");
        here += usize::from(on == me);
    }
    assert!(
        here >= N * 9 / 10,
        "only {here} of {N} answers were delivered on the driving thread"
    );
    // Left alone, the progress thread delivers again.
    a.send(1, Bytes::from_static(b"alone")).expect("send");
    let (on, back) = a_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the progress thread delivers once nobody drives");
    assert_eq!(&back[..], b"alone");
    assert_ne!(on, me);
}
