//! A UCX worker driven by its own progress thread: frames to and from peers, heartbeats,
//! and a sleep on the worker's event fd when idle (`docs/design/0005-transport.md` §4).
//!
//! The thread polls (`ucp_worker_progress`, probes for arrived messages) while there is work
//! and for `spin` after it, then arms the worker and sleeps in `poll` on the worker's event fd
//! and a wake-up eventfd that every command rings: idle, it wakes only for heartbeats.
//! Messages carry a tag of kind (frame or heartbeat, the top byte) and the sender's id as the
//! receiver knows it (the low 32 bits), so one probe for any tag serves every peer. Frames of
//! one peer are delivered in the order they were sent, whatever their size (a rendezvous
//! receive that completes after a later eager one waits for its turn). A peer from which
//! nothing (not even a heartbeat) arrived for `dead_after` is reported lost and dropped: the
//! endpoints use error-handling mode NONE, so silence is the only sign of a dead peer.

use crate::{Context, Endpoint, Gathered, Owned, PoolBuf, PoolStats, RecvPool, Result, Ucx};
use crate::{UcxError, Worker};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A peer, by the id this side gave it.
pub type PeerId = u32;

const KIND_SHIFT: u32 = 56;
const KIND_FRAME: u64 = 0;
const KIND_HEARTBEAT: u64 = 1;
/// Frames of a head and a tail are sent gathered by UCX from both buffers below this size, and
/// copied into one buffer from it on. Measured with `ucx_bench` (UCX 1.13): gathering saves
/// the copy at every size over shared memory (2-4 %) and up to 64 KiB over UCX's TCP
/// transport, but from 128 KiB on a gathered message over TCP took 1.3-1.8× as long as a
/// copy into one buffer (UCX's rendezvous has no zero-copy path for a gather list there).
const GATHER_BELOW: usize = 64 * 1024;
/// How long a stopping link gives its endpoints' closes.
const STOP_LIMIT: Duration = Duration::from_secs(2);

fn tag(kind: u64, id: u32) -> u64 {
    (kind << KIND_SHIFT) | u64::from(id)
}

/// Timings of a link.
#[derive(Debug, Clone)]
pub struct LinkOptions {
    /// A heartbeat goes to every peer this often.
    pub heartbeat: Duration,
    /// A peer silent this long is lost.
    pub dead_after: Duration,
    /// How long the thread keeps polling after the last event before it sleeps.
    pub spin: Duration,
    /// Bytes of free receive buffers the link keeps for reuse (`pool.rs`).
    pub pool_bytes: usize,
}

impl Default for LinkOptions {
    fn default() -> LinkOptions {
        LinkOptions {
            heartbeat: Duration::from_secs(1),
            dead_after: Duration::from_secs(3),
            spin: Duration::from_micros(100),
            pool_bytes: 4 << 20,
        }
    }
}

/// What the progress thread reports. Called on that thread: never block in it.
pub trait Events: Send + 'static {
    /// A frame arrived from `peer`. What is pushed to `replies` is sent at once from the
    /// progress thread, with no hand-off to another thread (a call answered where it
    /// arrived, as the TCP reactor answers Gets from memory).
    /// The frame's bytes are a buffer of the link's pool, which it gets back once the last
    /// slice of them is dropped.
    fn frame(&mut self, peer: PeerId, frame: Bytes, replies: &mut Replies);
    /// Every frame that had arrived by now has been handed to [`Events::frame`]: a moment to
    /// finish work batched over them (puts sharing one WAL write) and answer it.
    fn frames_done(&mut self, _replies: &mut Replies) {}
    /// `peer` is gone (silent past `dead_after`, or an operation to it failed); it has been
    /// dropped and frames to it are refused until it is connected again.
    fn lost(&mut self, peer: PeerId, why: String);
}

/// Frames to send from inside [`Events::frame`].
#[derive(Default)]
pub struct Replies(Vec<(PeerId, Bytes, Bytes)>);

impl Replies {
    /// Queues `frame` for `peer`, sent as soon as the callback returns.
    pub fn send(&mut self, peer: PeerId, frame: Bytes) {
        self.0.push((peer, frame, Bytes::new()));
    }

    /// Queues `head` and `tail` for `peer` as one frame, gathered without a copy.
    pub fn send_gathered(&mut self, peer: PeerId, head: Bytes, tail: Bytes) {
        self.0.push((peer, head, tail));
    }
}

enum Command {
    Connect {
        peer: PeerId,
        address: Vec<u8>,
        id_at_peer: u32,
    },
    Send {
        peer: PeerId,
        head: Bytes,
        tail: Bytes,
    },
    Close {
        peer: PeerId,
    },
    Stop,
}

/// A worker on its own progress thread. Dropping it stops the thread.
pub struct Link {
    address: Vec<u8>,
    pool: RecvPool,
    sender: Sender,
    sleeps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Link {
    /// Creates a context and worker on `ucx` and starts the progress thread.
    pub fn start(ucx: &Arc<Ucx>, opts: LinkOptions, events: impl Events) -> Result<Link> {
        Link::start_in(&Context::new(ucx)?, opts, events)
    }

    /// Creates a worker in `ctx` and starts the progress thread. A link per connection keeps
    /// connections apart: shared-memory transports deliver every sender's messages through
    /// one FIFO per worker, and a sender killed in the middle of a write can stall that FIFO
    /// for good, so a worker shared by several peers would lose them all with one.
    pub fn start_in(ctx: &Context, opts: LinkOptions, events: impl Events) -> Result<Link> {
        let ctx = ctx.clone();
        let worker = ctx.worker()?;
        let address = worker.address()?;
        // SAFETY: a plain system call; the descriptor is owned from here on.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(UcxError::Invalid(format!(
                "cannot create the progress thread's eventfd: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let (tx, rx) = mpsc::channel();
        let sleeps = Arc::new(AtomicU64::new(0));
        let pool = RecvPool::new(opts.pool_bytes);
        let thread = {
            let (wake, sleeps, pool) = (Arc::clone(&wake), Arc::clone(&sleeps), pool.clone());
            std::thread::Builder::new()
                .name("cellar-ucx-progress".into())
                .spawn(move || {
                    let _ctx = ctx;
                    Progress {
                        worker: &worker,
                        pool,
                        rx,
                        wake,
                        sleeps,
                        opts,
                    }
                    .run(events);
                })
                .map_err(|e| UcxError::Invalid(format!("cannot start the progress thread: {e}")))?
        };
        Ok(Link {
            address,
            pool,
            sender: Sender { tx, wake },
            sleeps,
            thread: Some(thread),
        })
    }

    /// This worker's address, for peers to connect to.
    pub fn address(&self) -> &[u8] {
        &self.address
    }

    /// Connects to the worker at `address` as `peer`; `id_at_peer` is the id that worker
    /// gave this side (every frame sent carries it).
    pub fn connect(&self, peer: PeerId, address: Vec<u8>, id_at_peer: u32) -> Result<()> {
        self.command(Command::Connect {
            peer,
            address,
            id_at_peer,
        })
    }

    /// Queues `frame` for `peer`.
    pub fn send(&self, peer: PeerId, frame: Bytes) -> Result<()> {
        self.sender.send(peer, frame)
    }

    /// Drops `peer` (its endpoint closes after what was sent to it).
    pub fn close(&self, peer: PeerId) -> Result<()> {
        self.sender.close(peer)
    }

    /// A handle other threads send through (answers from a handler pool); it does not keep
    /// the progress thread alive.
    pub fn sender(&self) -> Sender {
        self.sender.clone()
    }

    /// Stops the link on a thread of its own: stopping waits for the endpoints to close (up
    /// to two seconds when a peer is gone), which a reactor or a caller's thread must not.
    pub fn stop_in_background(self) {
        let stopping = std::thread::Builder::new()
            .name("cellar-ucx-stop".into())
            .spawn(move || drop(self));
        if let Err(e) = stopping {
            // Without a thread the link stops here, waiting as it must.
            eprintln!("cellar-ucx: cannot start a thread to stop a link ({e}); stopping it here");
        }
    }

    /// How the link's receive buffers were served: reused, or newly allocated.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// How many times the progress thread has slept on the event fd.
    pub fn sleeps(&self) -> u64 {
        self.sleeps.load(Ordering::Relaxed)
    }

    fn command(&self, c: Command) -> Result<()> {
        self.sender.command(c)
    }
}

/// Sends frames and closes peers of a [`Link`] from any thread.
#[derive(Clone)]
pub struct Sender {
    tx: mpsc::Sender<Command>,
    wake: Arc<OwnedFd>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("link::Sender")
    }
}

impl Sender {
    /// Queues `frame` for `peer`; an error once the link has stopped.
    pub fn send(&self, peer: PeerId, frame: Bytes) -> Result<()> {
        self.send_gathered(peer, frame, Bytes::new())
    }

    /// Queues `head` and `tail` for `peer` as one frame: UCX gathers them from where they
    /// are (a large cell block is sent from the handler's buffer, never copied).
    pub fn send_gathered(&self, peer: PeerId, head: Bytes, tail: Bytes) -> Result<()> {
        self.command(Command::Send { peer, head, tail })
    }

    /// Drops `peer` (its endpoint closes after what was sent to it).
    pub fn close(&self, peer: PeerId) -> Result<()> {
        self.command(Command::Close { peer })
    }

    fn command(&self, c: Command) -> Result<()> {
        self.tx
            .send(c)
            .map_err(|_| UcxError::Invalid("the UCX progress thread has stopped".into()))?;
        ring(&self.wake);
        Ok(())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.command(Command::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Wakes a progress thread sleeping in `poll`.
fn ring(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a local to an eventfd; a full counter (EAGAIN) is a wake-up
    // already pending.
    let _ = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

struct Peer<'w> {
    ep: Endpoint<'w>,
    id_at_peer: u32,
    last_heard: Instant,
    last_beat: Instant,
}

struct Progress<'w> {
    worker: &'w Worker,
    pool: RecvPool,
    rx: mpsc::Receiver<Command>,
    wake: Arc<OwnedFd>,
    sleeps: Arc<AtomicU64>,
    opts: LinkOptions,
}

impl<'w> Progress<'w> {
    fn run(self, mut events: impl Events) {
        let worker = self.worker;
        let mut peers: HashMap<PeerId, Peer<'w>> = HashMap::new();
        let mut sends: Vec<(PeerId, Owned<'w, Gathered>)> = Vec::new();
        // In arrival order: delivered from the front as they complete.
        let mut recvs: VecDeque<(PeerId, u64, Owned<'w, PoolBuf>)> = VecDeque::new();
        let mut closing = Vec::new();
        let mut lost: Vec<(PeerId, String)> = Vec::new();
        let mut replies = Replies::default();
        let mut last_event = Instant::now();
        let heartbeat = Bytes::from_static(b"\0");
        'run: loop {
            let mut busy = false;
            while let Ok(cmd) = self.rx.try_recv() {
                busy = true;
                match cmd {
                    Command::Connect {
                        peer,
                        address,
                        id_at_peer,
                    } => match worker.connect(&address) {
                        Ok(ep) => {
                            let now = Instant::now();
                            if let Some(old) = peers.insert(
                                peer,
                                Peer {
                                    ep,
                                    id_at_peer,
                                    last_heard: now,
                                    last_beat: now - self.opts.heartbeat,
                                },
                            ) {
                                closing.push(old.ep.close());
                            }
                        }
                        Err(e) => events.lost(peer, format!("cannot connect: {e}")),
                    },
                    Command::Send { peer, head, tail } => match peers.get(&peer) {
                        Some(p) => {
                            match send_frame(&p.ep, tag(KIND_FRAME, p.id_at_peer), head, tail) {
                                Ok(op) => sends.push((peer, op)),
                                Err(e) => lost.push((peer, e.to_string())),
                            }
                        }
                        None => events.lost(peer, "not connected".into()),
                    },
                    Command::Close { peer } => {
                        if let Some(p) = peers.remove(&peer) {
                            closing.push(p.ep.close());
                        }
                    }
                    Command::Stop => break 'run,
                }
            }
            if worker.progress() > 0 {
                busy = true;
            }
            while let Some(probed) = worker.probe(0, 0) {
                busy = true;
                let (kind, from) = (probed.tag >> KIND_SHIFT, probed.tag as u32);
                match worker.recv_probed(probed, &self.pool) {
                    Ok(op) => recvs.push_back((from, kind, op)),
                    Err(e) => lost.push((from, e.to_string())),
                }
            }
            sends.retain_mut(|(peer, op)| match op.test() {
                Ok(done) => !done,
                Err(e) => {
                    lost.push((*peer, e.to_string()));
                    false
                }
            });
            let mut delivered = false;
            while let Some((from, kind, op)) = recvs.front_mut() {
                match op.test() {
                    Ok(false) => break,
                    Ok(true) => {
                        let (from, kind) = (*from, *kind);
                        let got = op.take();
                        recvs.pop_front();
                        if let Some(p) = peers.get_mut(&from) {
                            p.last_heard = Instant::now();
                        }
                        if let (KIND_FRAME, Some((frame, _))) = (kind, got) {
                            events.frame(from, frame.into_bytes(), &mut replies);
                            delivered = true;
                            send_replies(&mut replies, &peers, &mut sends, &mut lost, &mut events);
                        }
                    }
                    Err(e) => {
                        lost.push((*from, e.to_string()));
                        recvs.pop_front();
                    }
                }
            }
            if delivered {
                events.frames_done(&mut replies);
                send_replies(&mut replies, &peers, &mut sends, &mut lost, &mut events);
            }
            closing.retain_mut(|c: &mut crate::Closing<'w>| !c.test());
            let now = Instant::now();
            for (id, p) in peers.iter_mut() {
                if now.duration_since(p.last_heard) >= self.opts.dead_after {
                    lost.push((
                        *id,
                        format!(
                            "no message or heartbeat for {} ms",
                            now.duration_since(p.last_heard).as_millis()
                        ),
                    ));
                } else if now.duration_since(p.last_beat) >= self.opts.heartbeat {
                    p.last_beat = now;
                    match p.ep.send_gathered(
                        tag(KIND_HEARTBEAT, p.id_at_peer),
                        heartbeat.clone(),
                        Bytes::new(),
                    ) {
                        Ok(op) => sends.push((*id, op)),
                        Err(e) => lost.push((*id, e.to_string())),
                    }
                }
            }
            for (id, why) in lost.drain(..) {
                if let Some(p) = peers.remove(&id) {
                    sends.retain(|(peer, _)| *peer != id);
                    closing.push(p.ep.close());
                    events.lost(id, why);
                }
            }
            if busy {
                last_event = now;
                continue;
            }
            let pending = !sends.is_empty() || !recvs.is_empty() || !closing.is_empty();
            if pending || now.duration_since(last_event) < self.opts.spin {
                continue;
            }
            match worker.arm() {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
            }
            let next = peers
                .values()
                .map(|p| {
                    (p.last_beat + self.opts.heartbeat).min(p.last_heard + self.opts.dead_after)
                })
                .min()
                .map(|t| t.saturating_duration_since(now))
                .unwrap_or(self.opts.heartbeat);
            self.sleep(next);
            last_event = Instant::now();
        }
        // Stopping: close every endpoint, give the closes a moment, then let UCX finish them.
        let deadline = Instant::now() + STOP_LIMIT;
        closing.extend(peers.drain().map(|(_, p)| p.ep.close()));
        while !closing.is_empty() && Instant::now() < deadline {
            worker.progress();
            closing.retain_mut(|c| !c.test());
        }
    }

    /// Sleeps until the worker has events, a command rings, or `timeout` passes.
    fn sleep(&self, timeout: Duration) {
        let Ok(efd) = self.worker.event_fd() else {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return;
        };
        let mut fds = [
            libc::pollfd {
                fd: efd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = c_int_ms(timeout);
        self.sleeps.fetch_add(1, Ordering::Relaxed);
        // SAFETY: two valid pollfd entries.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        let mut counter: u64 = 0;
        // SAFETY: reads 8 bytes into a local from a non-blocking eventfd (EAGAIN if not rung).
        let _ = unsafe { libc::read(self.wake.as_raw_fd(), (&mut counter as *mut u64).cast(), 8) };
    }
}

/// Sends what [`Events`] queued in `replies`, from the progress thread.
fn send_replies<'w>(
    replies: &mut Replies,
    peers: &HashMap<PeerId, Peer<'w>>,
    sends: &mut Vec<(PeerId, Owned<'w, Gathered>)>,
    lost: &mut Vec<(PeerId, String)>,
    events: &mut impl Events,
) {
    for (peer, head, tail) in replies.0.drain(..) {
        match peers.get(&peer) {
            Some(p) => match send_frame(&p.ep, tag(KIND_FRAME, p.id_at_peer), head, tail) {
                Ok(op) => sends.push((peer, op)),
                Err(e) => lost.push((peer, e.to_string())),
            },
            None => events.lost(peer, "not connected".into()),
        }
    }
}

/// Sends `head` and `tail` as one frame: gathered by UCX below [`GATHER_BELOW`], else copied
/// into one buffer first.
fn send_frame<'w>(
    ep: &Endpoint<'w>,
    tag: u64,
    head: Bytes,
    tail: Bytes,
) -> Result<Owned<'w, Gathered>> {
    if tail.is_empty() || head.len() + tail.len() < GATHER_BELOW {
        return ep.send_gathered(tag, head, tail);
    }
    let mut one = Vec::with_capacity(head.len() + tail.len());
    one.extend_from_slice(&head);
    one.extend_from_slice(&tail);
    ep.send_gathered(tag, Bytes::from(one), Bytes::new())
}

/// A poll timeout in whole milliseconds, at least 1.
fn c_int_ms(d: Duration) -> libc::c_int {
    libc::c_int::try_from(d.as_millis().max(1)).unwrap_or(libc::c_int::MAX)
}
