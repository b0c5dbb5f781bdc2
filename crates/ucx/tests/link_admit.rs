//! A link's receiver decides on each frame by the length UCX announces, before any buffer is
//! taken for it (`link::Events::admit`). In a test binary of its own: `link.rs` measures the
//! process's CPU while idle, which links spinning here would disturb.

use bytes::Bytes;
use cellar_ucx::link::{Events, Link, LinkOptions, PeerId, Replies};
use cellar_ucx::Ucx;
use std::sync::mpsc;
use std::time::Duration;

/// The sending side: hears nothing it needs.
struct Quiet;

impl Events for Quiet {
    fn frame(&mut self, _: PeerId, _: Bytes, _: &mut Replies) {}
    fn lost(&mut self, _: PeerId, _: String) {}
}

/// Admits frames up to 4 KiB once `open` is set (they wait in UCX until then), refuses larger
/// ones, and reports what happened in order.
struct Gate {
    open: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tx: mpsc::Sender<String>,
}

impl Events for Gate {
    fn admit(&mut self, _peer: PeerId, len: usize) -> cellar_ucx::link::Admit {
        use cellar_ucx::link::Admit;
        if len > 4096 {
            Admit::Refuse
        } else if self.open.load(std::sync::atomic::Ordering::SeqCst) {
            Admit::Take(Some(Box::new(len)))
        } else {
            Admit::Wait
        }
    }
    fn held_frame(
        &mut self,
        _peer: PeerId,
        frame: Bytes,
        hold: Option<cellar_ucx::link::Hold>,
        _replies: &mut Replies,
    ) {
        let held = hold.and_then(|h| h.downcast::<usize>().ok()).map(|l| *l);
        let _ = self.tx.send(format!("frame {} held {held:?}", frame[0]));
    }
    fn frame(&mut self, _peer: PeerId, _frame: Bytes, _replies: &mut Replies) {
        let _ = self.tx.send("frame without its hold".into());
    }
    fn refused(&mut self, _peer: PeerId, len: usize, _replies: &mut Replies) {
        let _ = self.tx.send(format!("refused {len}"));
    }
    fn lost(&mut self, peer: PeerId, why: String) {
        let _ = self.tx.send(format!("lost {peer}: {why}"));
    }
}

/// A receiver decides on each frame by the length UCX announces, before a buffer is taken:
/// frames left waiting stay in UCX, in order, while heartbeats still arrive (the peer is not
/// lost meanwhile); refused ones are dropped unread, without a buffer.
#[test]
fn frames_are_admitted_by_their_announced_length_before_any_buffer() {
    std::env::set_var("UCX_TLS", "sm,self");
    let ucx = Ucx::load().unwrap_or_else(|e| panic!("{e}"));
    let opts = LinkOptions {
        heartbeat: Duration::from_millis(100),
        dead_after: Duration::from_millis(600),
        ..LinkOptions::default()
    };
    let (b_tx, b_rx) = mpsc::channel();
    let open = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let a = Link::start(&ucx, opts.clone(), Quiet).expect("link a");
    let gate = Gate {
        open: open.clone(),
        tx: b_tx,
    };
    let b = Link::start(&ucx, opts, gate).expect("link b");
    a.connect(1, b.address().to_vec(), 7).expect("a -> b");
    b.connect(7, a.address().to_vec(), 1).expect("b -> a");

    for i in 0..3u8 {
        a.send(1, Bytes::from(vec![i; 100])).expect("send");
    }
    // Longer than dead_after: heartbeats keep the peer alive while its frames wait.
    match b_rx.recv_timeout(Duration::from_millis(1500)) {
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        other => panic!("nothing is delivered while admission waits: {other:?}"),
    }
    open.store(true, std::sync::atomic::Ordering::SeqCst);
    let next = || {
        b_rx.recv_timeout(Duration::from_secs(10))
            .expect("an event")
    };
    for i in 0..3 {
        assert_eq!(next(), format!("frame {i} held Some(100)"));
    }

    // Refused: 1 MiB (a rendezvous message) and 5000 bytes (eager), then one admitted again.
    let taken = |s: cellar_ucx::PoolStats| s.allocated + s.reused;
    let before = taken(b.pool_stats());
    a.send(1, Bytes::from(vec![9u8; 1 << 20]))
        .expect("send 1 MiB");
    a.send(1, Bytes::from(vec![8u8; 5000]))
        .expect("send 5000 bytes");
    a.send(1, Bytes::from(vec![3u8; 10])).expect("send after");
    assert_eq!(next(), format!("refused {}", 1 << 20));
    assert_eq!(next(), "refused 5000");
    assert_eq!(next(), "frame 3 held Some(10)");
    assert_eq!(
        taken(b.pool_stats()),
        before + 1,
        "only the admitted frame took a buffer"
    );
    drop((a, b));
}
