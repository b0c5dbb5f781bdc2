//! `ucx_bench`: round trips over UCX (the system's, loaded at run time) beside TCP loopback,
//! in one run, as floors for the transport of `docs/design/0005-transport.md`:
//!
//! - `ucx-inline`: two UCX workers progressed by one thread (UCX alone: no thread hand-off);
//! - `ucx-link`: two `Link`s, each a worker on its own progress thread, a frame echoed by a
//!   second thread of the echoing side (what a server's handler does: two hand-offs a side);
//! - `ucx-link-answer`: the same, but the echoing side answers on its progress thread, its
//!   answer a head of 64 bytes and the rest as a second buffer, sent as the server sends a
//!   large cell block (gathered by UCX below 64 KiB, copied into one buffer above:
//!   `link::GATHER_BELOW`); received into the links' reused buffers (`pool.rs`);
//! - `ucx-link-driven`: as `ucx-link-answer`, but the calling thread progresses its link
//!   itself while it waits (`Link::drive`), taking the answer off the wire with no hand-off;
//! - `ucx-link-answer-copy`: the same with the head and the rest always copied into one buffer
//!   first (what the server did before gathered sends);
//! - `ucx-link-answer-nopool`: the same as `ucx-link-answer` with no buffer reuse (a fresh,
//!   zeroed buffer per message);
//! - `tcp`: a blocking TCP ping-pong on 127.0.0.1 between two threads, the same sizes.
//!
//! Transports come from `UCX_TLS` (default here: `sm,self`, shared memory).

use bytes::Bytes;
use cellar_ucx::link::{Events, Link, LinkOptions, PeerId, Replies};
use cellar_ucx::{Context, Ucx};
use clap::Parser;
use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "ucx_bench",
    about = "Round trips over UCX (inline and on progress threads) beside TCP loopback"
)]
struct Args {
    /// Message sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "1024,16384,262144")]
    sizes: Vec<usize>,
    /// Round trips per measurement.
    #[arg(long, default_value_t = 20000)]
    rounds: usize,
    /// Passes; the order of the variants rotates between them.
    #[arg(long, default_value_t = 3)]
    passes: usize,
}

fn main() {
    let args = Args::parse();
    if std::env::var_os("UCX_TLS").is_none() {
        std::env::set_var("UCX_TLS", "sm,self");
    }
    if let Err(e) = run(&args) {
        eprintln!("ucx_bench: error: {e}");
        std::process::exit(1);
    }
}

fn pct(mut v: Vec<u64>) -> (f64, f64) {
    v.sort_unstable();
    let at = |q: f64| {
        v.get(((v.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    (at(0.5), at(0.99))
}

fn run(args: &Args) -> Result<(), String> {
    let ucx = Ucx::load().map_err(|e| e.to_string())?;
    println!(
        "UCX {:?}, UCX_TLS={}",
        ucx.version(),
        std::env::var("UCX_TLS").unwrap_or_default()
    );
    println!("| variant | size | p50 µs | p99 µs | pass |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let variants = [
        "ucx-inline",
        "ucx-link-answer",
        "ucx-link-driven",
        "ucx-link-answer-copy",
        "ucx-link-answer-nopool",
        "ucx-link",
        "tcp",
    ];
    for pass in 0..args.passes {
        for &size in &args.sizes {
            for k in 0..variants.len() {
                let v = variants[(k + pass) % variants.len()];
                let lat = match v {
                    "ucx-inline" => inline(&ucx, size, args.rounds)?,
                    "ucx-link" => link(&ucx, size, args.rounds)?,
                    "ucx-link-answer" => {
                        link_inline(&ucx, size, args.rounds, Answer::Gather, true, false)?
                    }
                    "ucx-link-driven" => {
                        link_inline(&ucx, size, args.rounds, Answer::Gather, true, true)?
                    }
                    "ucx-link-answer-copy" => {
                        link_inline(&ucx, size, args.rounds, Answer::Copy, true, false)?
                    }
                    "ucx-link-answer-nopool" => {
                        link_inline(&ucx, size, args.rounds, Answer::Gather, false, false)?
                    }
                    _ => tcp(size, args.rounds)?,
                };
                let (p50, p99) = pct(lat);
                println!("| {v} | {size} | {p50:.2} | {p99:.2} | {} |", pass + 1);
            }
        }
    }
    Ok(())
}

fn inline(ucx: &std::sync::Arc<Ucx>, size: usize, rounds: usize) -> Result<Vec<u64>, String> {
    let e = |e: cellar_ucx::UcxError| e.to_string();
    let ctx = Context::new(ucx).map_err(e)?;
    let (w1, w2) = (ctx.worker().map_err(e)?, ctx.worker().map_err(e)?);
    let (a1, a2) = (w1.address().map_err(e)?, w2.address().map_err(e)?);
    let (to2, to1) = (w1.connect(&a2).map_err(e)?, w2.connect(&a1).map_err(e)?);
    let out = vec![7u8; size];
    let (mut x, mut y) = (vec![0u8; size], vec![0u8; size]);
    let mut lat = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        for (from, to, ep, buf) in [(&w1, &w2, &to2, &mut x), (&w2, &w1, &to1, &mut y)] {
            let mut r = to.recv(1, u64::MAX, buf).map_err(e)?;
            let mut s = ep.send(1, &out).map_err(e)?;
            let (mut rd, mut sd) = (false, false);
            while !(rd && sd) {
                from.progress();
                to.progress();
                sd = sd || s.test().map_err(e)?;
                rd = rd || r.test().map_err(e)?;
            }
        }
        lat.push(t.elapsed().as_nanos() as u64);
    }
    Ok(lat)
}

struct ToChannel(mpsc::Sender<Bytes>);

impl Events for ToChannel {
    fn frame(&mut self, _peer: PeerId, frame: Bytes, _replies: &mut Replies) {
        let _ = self.0.send(frame);
    }
    fn lost(&mut self, peer: PeerId, why: String) {
        eprintln!("ucx_bench: peer {peer} lost: {why}");
    }
}

/// How [`Echo`] sends its answer: a head and the rest, gathered by UCX or copied into one.
#[derive(Clone, Copy)]
enum Answer {
    Gather,
    Copy,
}

/// Echoes every frame from the progress thread itself.
struct Echo(Answer);

impl Events for Echo {
    fn frame(&mut self, peer: PeerId, frame: Bytes, replies: &mut Replies) {
        let at = frame.len().min(64);
        let (head, tail) = (frame.slice(..at), frame.slice(at..));
        match self.0 {
            Answer::Gather => replies.send_gathered(peer, head, tail),
            Answer::Copy => {
                let mut one = Vec::with_capacity(frame.len());
                one.extend_from_slice(&head);
                one.extend_from_slice(&tail);
                replies.send(peer, Bytes::from(one));
            }
        }
    }
    fn lost(&mut self, peer: PeerId, why: String) {
        eprintln!("ucx_bench: peer {peer} lost: {why}");
    }
}

/// Two links connected to each other (each knows the other as peer 1).
fn pair(
    ucx: &std::sync::Arc<Ucx>,
    opts: LinkOptions,
    a: impl Events,
    b: impl Events,
) -> Result<(Link, Link), String> {
    let e = |e: cellar_ucx::UcxError| e.to_string();
    let a = Link::start(ucx, opts.clone(), a).map_err(e)?;
    let b = Link::start(ucx, opts, b).map_err(e)?;
    a.connect(1, b.address().to_vec(), 1).map_err(e)?;
    b.connect(1, a.address().to_vec(), 1).map_err(e)?;
    Ok((a, b))
}

/// Round trips from `a` to its peer and back, answers arriving on `a_rx`; with `drive`, the
/// calling thread progresses `a` itself while it waits.
fn bounce(
    a: &Link,
    a_rx: &mpsc::Receiver<Bytes>,
    size: usize,
    rounds: usize,
    drive: bool,
) -> Result<Vec<u64>, String> {
    let frame = Bytes::from(vec![7u8; size]);
    let mut lat = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        if drive {
            a.send_then_drive(1, frame.clone())
        } else {
            a.send(1, frame.clone())
        }
        .map_err(|e| e.to_string())?;
        let mut got = None;
        if drive {
            a.drive(
                Duration::from_millis(1),
                || {
                    got = a_rx.try_recv().ok();
                    got.is_some()
                },
                || false,
            );
        }
        if got.is_none() {
            a_rx.recv_timeout(Duration::from_secs(10))
                .map_err(|_| "no echo within 10 s".to_string())?;
        }
        lat.push(t.elapsed().as_nanos() as u64);
    }
    Ok(lat)
}

/// The echoing side answers on its progress thread: one hand-off a side fewer. `pool`: the
/// links reuse their receive buffers.
fn link_inline(
    ucx: &std::sync::Arc<Ucx>,
    size: usize,
    rounds: usize,
    answer: Answer,
    pool: bool,
    drive: bool,
) -> Result<Vec<u64>, String> {
    let (a_tx, a_rx) = mpsc::channel();
    let mut opts = LinkOptions::default();
    if !pool {
        opts.pool_bytes = 0;
    }
    let (a, _b) = pair(ucx, opts, ToChannel(a_tx), Echo(answer))?;
    bounce(&a, &a_rx, size, rounds, drive)
}

fn link(ucx: &std::sync::Arc<Ucx>, size: usize, rounds: usize) -> Result<Vec<u64>, String> {
    let (a_tx, a_rx) = mpsc::channel();
    let (b_tx, b_rx) = mpsc::channel::<Bytes>();
    let (a, b) = pair(
        ucx,
        LinkOptions::default(),
        ToChannel(a_tx),
        ToChannel(b_tx),
    )?;
    let echo = std::thread::spawn(move || {
        // An empty frame ends the echo (and drops `b`, whose thread holds the sender).
        while let Ok(f) = b_rx.recv() {
            if f.is_empty() || b.send(1, f).is_err() {
                break;
            }
        }
    });
    let lat = bounce(&a, &a_rx, size, rounds, false);
    a.send(1, Bytes::new()).map_err(|e| e.to_string())?;
    let _ = echo.join();
    lat
}

fn tcp(size: usize, rounds: usize) -> Result<Vec<u64>, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = vec![0u8; size];
        loop {
            if s.read_exact(&mut buf).is_err() {
                return Ok(());
            }
            s.write_all(&buf)?;
        }
    });
    let mut c = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    c.set_nodelay(true).map_err(|e| e.to_string())?;
    let out = vec![7u8; size];
    let mut back = vec![0u8; size];
    let mut lat = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        c.write_all(&out).map_err(|e| e.to_string())?;
        c.read_exact(&mut back).map_err(|e| e.to_string())?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    drop(c);
    let _ = echo.join();
    Ok(lat)
}
