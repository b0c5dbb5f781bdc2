//! Links of one context on several threads at once. In a test binary of its own: `link.rs`
//! measures the process's CPU while idle, which links busy here would disturb.

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

/// Links of one context on several threads at once (the server's and the client's shape: a
/// worker and progress thread per connection, all in one UCP context), created, used with
/// eager and rendezvous frames, and destroyed concurrently: the context is one UCX made
/// thread-safe, or each worker has its own (`Context::workers_shared`).
#[test]
fn links_of_one_context_on_many_threads_at_once() {
    std::env::set_var("UCX_TLS", "sm,self");
    let ucx = Ucx::load().unwrap_or_else(|e| panic!("{e}"));
    let ctx = cellar_ucx::Context::new(&ucx).expect("context");
    eprintln!("workers share the context: {}", ctx.workers_shared());
    const THREADS: usize = 4;
    const ROUNDS: usize = 4;
    const FRAMES: usize = 16;
    let deadline = Instant::now() + Duration::from_secs(60);
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let ctx = ctx.clone();
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    let (a_tx, a_rx) = mpsc::channel();
                    let (b_tx, _b_rx) = mpsc::channel();
                    let opts = LinkOptions::default();
                    let a =
                        Link::start_in(&ctx, opts.clone(), ToChannel(a_tx, false)).expect("link a");
                    let b = Link::start_in(&ctx, opts, ToChannel(b_tx, true)).expect("link b");
                    a.connect(1, b.address().to_vec(), 7).expect("a -> b");
                    b.connect(7, a.address().to_vec(), 1).expect("b -> a");
                    for i in 0..FRAMES {
                        let size = if i % 2 == 0 { 1000 } else { 256 * 1024 };
                        let sent = Bytes::from(vec![(t * 31 + round * 7 + i) as u8; size]);
                        a.send(1, sent.clone()).expect("send");
                        let left = deadline.saturating_duration_since(Instant::now());
                        match a_rx.recv_timeout(left.min(Duration::from_secs(10))) {
                            Ok(Got::Frame(from, back)) => {
                                assert_eq!(from, 1, "a hears b as 1");
                                assert!(back == sent, "thread {t} round {round} frame {i}")
                            }
                            Ok(Got::Lost(p, why)) => panic!("thread {t} lost {p}: {why}"),
                            Err(_) => panic!("thread {t} round {round}: no echo of frame {i}"),
                        }
                    }
                    drop((a, b));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a thread's links failed");
    }
}
