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
//!
//! A caller waiting for an answer may progress the worker itself ([`Link::drive`]): the
//! answer is then taken off the wire by the thread that waits for it, with no hand-off from
//! the progress thread (a wake-up of a sleeping thread is several microseconds; UCX's
//! shared-memory round trip is a third of one). Meanwhile the progress thread stays parked,
//! so the two never spin against each other; it takes over again when the caller leaves.
//!
//! Nothing a peer announces becomes an allocation before the receiver has agreed to it: a
//! frame's length is known from UCX's probe before any of it is received, and
//! [`Events::admit`] takes it (into a buffer of its size), leaves it in UCX for a later turn
//! (the frames behind it wait too: order is kept), or refuses it, in which case UCX drops it
//! unread ([`crate::Worker::discard_probed`]). Heartbeats and messages of unknown kinds carry
//! nothing Cellar reads and are discarded the same way, whatever length they announce.

use crate::{Context, Endpoint, Gathered, Owned, PoolBuf, PoolStats, RecvPool, Result, Ucx};
use crate::{UcxError, Worker};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A peer, by the id this side gave it.
pub type PeerId = u32;

const KIND_SHIFT: u32 = 56;
const KIND_FRAME: u64 = 0;
const KIND_HEARTBEAT: u64 = 1;
/// The bits of a tag that hold its kind.
const KIND_MASK: u64 = 0xff << KIND_SHIFT;
/// How often a link whose next frame waits for admission ([`Admit::Wait`]) asks again when
/// nothing else wakes it.
const ADMIT_RETRY: Duration = Duration::from_millis(1);
/// Frames of a head and a tail are sent gathered by UCX from both buffers below this size, and
/// copied into one buffer from it on. Measured with `ucx_bench` (UCX 1.13): gathering saves
/// the copy at every size over shared memory (2-4 %) and up to 64 KiB over UCX's TCP
/// transport, but from 128 KiB on a gathered message over TCP took 1.3-1.8× as long as a
/// copy into one buffer (UCX's rendezvous has no zero-copy path for a gather list there).
const GATHER_BELOW: usize = 64 * 1024;
/// Turns between readings of the clock (heartbeats, silent peers, a driver's limit, the
/// progress thread's spin): reading it is a third of a spinning turn's time in a VM.
const CLOCK_EVERY: u32 = 32;
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

/// Whatever an [`Events`] wants to keep with a frame it admitted until the frame is delivered
/// (bytes counted against a budget, say): handed back with it, or dropped if the frame never
/// arrives whole (its peer is lost, or the link stops).
pub type Hold = Box<dyn std::any::Any + Send>;

/// What [`Events::admit`] decides about a frame that has arrived in UCX, before any memory is
/// taken for it.
pub enum Admit {
    /// Receive it into a buffer of its length; the hold comes back with it
    /// ([`Events::held_frame`]).
    Take(Option<Hold>),
    /// Leave it in UCX and ask again on a later turn (at least every millisecond); frames that
    /// arrived after it wait with it, heartbeats do not.
    Wait,
    /// Drop it unread ([`Events::refused`] is told once UCX has let go of it).
    Refuse,
}

/// What the progress thread reports. Called on that thread: never block in it.
pub trait Events: Send + 'static {
    /// A frame of `len` bytes (as the sender's UCX announced it) from `peer` has arrived and
    /// nothing of it is received yet: take it, leave it for later, or refuse it. Asked in
    /// arrival order, before the frame gets a buffer. Every frame is taken by default.
    fn admit(&mut self, _peer: PeerId, _len: usize) -> Admit {
        Admit::Take(None)
    }
    /// A frame admitted with `hold` arrived whole: [`Events::frame`] by default, the hold
    /// dropped after it.
    fn held_frame(
        &mut self,
        peer: PeerId,
        frame: Bytes,
        hold: Option<Hold>,
        replies: &mut Replies,
    ) {
        self.frame(peer, frame, replies);
        drop(hold);
    }
    /// A frame of `len` bytes from `peer` that [`Events::admit`] refused has been dropped
    /// unread; told in arrival order among `peer`'s frames.
    fn refused(&mut self, _peer: PeerId, _len: usize, _replies: &mut Replies) {}
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
    core: Arc<Core>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the progress thread and driving callers share.
struct Core {
    /// The link's state, progressed by whoever holds it. `None` once the link stopped.
    state: Mutex<Option<State>>,
    /// Callers driving the worker now ([`Link::drive`]); the progress thread parks meanwhile.
    drivers: AtomicUsize,
    /// Set while the progress thread is parked for drivers: the last to leave rings it.
    parked: AtomicBool,
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
        // The worker lives as long as the state whose endpoints and operations borrow it:
        // leaked here, freed by the progress thread once it has dropped the state.
        let worker: &'static Worker = Box::leak(Box::new(worker));
        let core = Arc::new(Core {
            state: Mutex::new(Some(State {
                worker,
                pool: pool.clone(),
                rx,
                events: Box::new(events),
                opts: opts.clone(),
                peers: HashMap::new(),
                sends: Vec::new(),
                recvs: VecDeque::new(),
                waiting: None,
                closing: Vec::new(),
                lost: Vec::new(),
                replies: Replies::default(),
                heartbeat: Bytes::from_static(b"\0"),
                turns: 0,
                timers_due: false,
                #[cfg(test)]
                before_progress: None,
            })),
            drivers: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
        });
        let spawned = {
            let (wake, sleeps, core) = (Arc::clone(&wake), Arc::clone(&sleeps), Arc::clone(&core));
            std::thread::Builder::new()
                .name("cellar-ucx-progress".into())
                .spawn(move || {
                    Progress {
                        core,
                        wake,
                        sleeps,
                        opts,
                    }
                    .run();
                })
        };
        let thread = match spawned {
            Ok(t) => t,
            Err(e) => {
                free_worker(&core);
                return Err(UcxError::Invalid(format!(
                    "cannot start the progress thread: {e}"
                )));
            }
        };
        Ok(Link {
            address,
            pool,
            sender: Sender { tx, wake },
            sleeps,
            core,
            thread: Some(thread),
        })
    }

    /// Progresses the worker from the calling thread until `done()` holds or `limit` has
    /// passed (then false), delivering what arrives to [`Events`] on this thread. For a
    /// caller about to wait for an answer: it takes the answer off the wire itself instead of
    /// being woken by the progress thread. One caller drives at a time; another finds it
    /// taken and returns false at once (its answer comes through the progress thread, or the
    /// driver's turns). The progress thread stays parked while anyone drives; when the driver
    /// leaves it is woken only if the driver's own wait is not over, operations are still in
    /// flight, or `others_wait()` says someone else still waits for the link (else it resumes
    /// within 10 ms on its own, and a caller that drives again needs it no sooner).
    pub fn drive(
        &self,
        limit: Duration,
        mut done: impl FnMut() -> bool,
        others_wait: impl FnOnce() -> bool,
    ) -> bool {
        let core = &*self.core;
        if core
            .drivers
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            // Someone else drives; a frame queued quietly for this caller must still go out.
            ring(&self.sender.wake);
            return false;
        }
        let started = Instant::now();
        let mut finished = false;
        let mut stopped = false;
        let mut pending = false;
        let mut n: u32 = 0;
        while !finished && !stopped {
            let held = match core.state.try_lock() {
                Ok(g) => Some(g),
                // A panic in an earlier turn's callback: the state itself is still whole.
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if let Some(mut state) = held {
                match state.as_mut() {
                    Some(state) => {
                        let turn = state.turn();
                        (stopped, pending) = (turn.stop, turn.pending);
                    }
                    None => stopped = true,
                }
            }
            finished = done();
            n = n.wrapping_add(1);
            if !finished && n.is_multiple_of(CLOCK_EVERY) && started.elapsed() >= limit {
                break;
            }
        }
        // SeqCst here and in the progress thread's parking: each side stores, then loads
        // what the other stored, and neither may miss the other.
        core.drivers.store(0, Ordering::SeqCst);
        if stopped {
            // The stop command was taken here: hand it back to the progress thread.
            let _ = self.sender.tx.send(Command::Stop);
        }
        let needed = !finished || pending || others_wait();
        if stopped || (core.parked.load(Ordering::SeqCst) && needed) {
            ring(&self.sender.wake);
        }
        finished
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

    /// Queues `frame` for `peer` without waking the progress thread, for a caller that calls
    /// [`Link::drive`] next: its first turn sends the frame (or, if another caller drives,
    /// that one's; `drive` wakes the progress thread when it cannot drive).
    pub fn send_then_drive(&self, peer: PeerId, frame: Bytes) -> Result<()> {
        self.sender
            .tx
            .send(Command::Send {
                peer,
                head: frame,
                tail: Bytes::new(),
            })
            .map_err(|_| UcxError::Invalid("the UCX progress thread has stopped".into()))
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

struct Peer {
    ep: Endpoint<'static>,
    id_at_peer: u32,
    /// Something arrived since the clock was last read; `last_heard` is then set to it.
    heard: bool,
    last_heard: Instant,
    last_beat: Instant,
}

/// A link's worker state: its peers and operations in flight, and what it reports to. Held
/// under `Core::state` and progressed by one thread at a time ([`State::turn`]).
struct State {
    worker: &'static Worker,
    pool: RecvPool,
    rx: mpsc::Receiver<Command>,
    events: Box<dyn Events>,
    opts: LinkOptions,
    peers: HashMap<PeerId, Peer>,
    sends: Vec<(PeerId, Owned<'static, Gathered>)>,
    /// In arrival order: delivered from the front as they complete.
    recvs: VecDeque<Recv>,
    /// A frame taken out of UCX's queue whose admission waits ([`Admit::Wait`]): asked about
    /// again before any frame that arrived after it.
    waiting: Option<crate::Probed>,
    closing: Vec<crate::Closing<'static>>,
    lost: Vec<(PeerId, String)>,
    replies: Replies,
    heartbeat: Bytes,
    /// Turns taken, for reading the clock every [`CLOCK_EVERY`].
    turns: u32,
    /// Read the clock on the next turn (set after a sleep: heartbeats may be due).
    timers_due: bool,
    /// Tests only: called on every turn just before the worker is progressed.
    #[cfg(test)]
    before_progress: Option<Box<dyn FnMut() + Send>>,
}

// SAFETY: the worker is in UCX's serialized mode (any thread, one at a time), and everything
// here that touches it (endpoints, operations, the worker itself) is reached only through
// `Core::state`'s mutex, so one thread at a time.
unsafe impl Send for State {}

/// A message being received, in arrival order.
struct Recv {
    from: PeerId,
    op: RecvOp,
}

enum RecvOp {
    /// A frame admitted, into a buffer of its length, with what [`Events::admit`] kept.
    Frame(Owned<'static, PoolBuf>, Option<Hold>),
    /// A frame refused: dropped unread. Its announced length.
    Refused(Owned<'static, Box<[u8]>>, usize),
    /// A heartbeat (or a message of an unknown kind), dropped unread.
    Other(Owned<'static, Box<[u8]>>),
}

impl RecvOp {
    fn test(&mut self) -> Result<bool> {
        match self {
            RecvOp::Frame(op, _) => op.test(),
            RecvOp::Refused(op, _) | RecvOp::Other(op) => op.test(),
        }
    }
}

/// What one [`State::turn`] saw.
struct Turn {
    /// Something happened (a command, a message, progress).
    busy: bool,
    /// Operations are still in flight.
    pending: bool,
    /// The link was told to stop.
    stop: bool,
    /// A frame waits for admission ([`Admit::Wait`]).
    waiting: bool,
}

impl State {
    /// Takes the commands queued so far (connects, sends, closes). True if any was taken;
    /// and true if one was to stop (the rest wait).
    fn take_commands(&mut self) -> (bool, bool) {
        let worker = self.worker;
        let mut took = false;
        while let Ok(cmd) = self.rx.try_recv() {
            took = true;
            match cmd {
                Command::Connect {
                    peer,
                    address,
                    id_at_peer,
                } => match worker.connect(&address) {
                    Ok(ep) => {
                        let now = Instant::now();
                        if let Some(old) = self.peers.insert(
                            peer,
                            Peer {
                                ep,
                                id_at_peer,
                                heard: false,
                                last_heard: now,
                                last_beat: now - self.opts.heartbeat,
                            },
                        ) {
                            self.closing.push(old.ep.close());
                        }
                    }
                    Err(e) => self.events.lost(peer, format!("cannot connect: {e}")),
                },
                Command::Send { peer, head, tail } => match self.peers.get(&peer) {
                    Some(p) => match send_frame(&p.ep, tag(KIND_FRAME, p.id_at_peer), head, tail) {
                        Ok(op) => self.sends.push((peer, op)),
                        Err(e) => self.lost.push((peer, e.to_string())),
                    },
                    None => self.events.lost(peer, "not connected".into()),
                },
                Command::Close { peer } => {
                    if let Some(p) = self.peers.remove(&peer) {
                        self.closing.push(p.ep.close());
                    }
                }
                Command::Stop => return (true, true),
            }
        }
        (took, false)
    }

    /// One round: worker progress, commands, arrived messages delivered in order, finished
    /// sends, heartbeats and silent peers.
    ///
    /// Commands are taken after the worker is progressed and before its arrivals are probed:
    /// a message is put in UCX's queue only while the worker is progressed, so a frame taken
    /// here was sent before the commands are, and any `connect` of its peer queued before the
    /// peer could send it (the peer learns this side's address after `connect`, as the
    /// server's `rpc/ucx.rs` answers a TRANSPORT_HELLO) has been carried out before the frame is
    /// admitted or delivered and its answer sent. Taken before the progress instead, a
    /// `connect` queued while the worker was being progressed would wait a turn, and the first
    /// frame of the fresh peer, arrived in that progress, would be answered as from a peer
    /// "not connected": dropped, and told to [`Events::lost`] (`docs/transports.md`).
    fn turn(&mut self) -> Turn {
        let worker = self.worker;
        let mut busy = false;
        #[cfg(test)]
        if let Some(hook) = self.before_progress.as_mut() {
            hook();
        }
        if worker.progress() > 0 {
            busy = true;
        }
        let (took, stop) = self.take_commands();
        if took {
            busy = true;
        }
        if stop {
            return Turn {
                busy,
                pending: false,
                stop: true,
                waiting: false,
            };
        }
        if self.take_arrivals() {
            busy = true;
        }
        let lost = &mut self.lost;
        self.sends.retain_mut(|(peer, op)| match op.test() {
            Ok(done) => !done,
            Err(e) => {
                lost.push((*peer, e.to_string()));
                false
            }
        });
        let mut delivered = false;
        while let Some(recv) = self.recvs.front_mut() {
            match recv.op.test() {
                Ok(false) => break,
                Ok(true) => {
                    let Some(Recv { from, op }) = self.recvs.pop_front() else {
                        break;
                    };
                    if let Some(p) = self.peers.get_mut(&from) {
                        p.heard = true;
                    }
                    match op {
                        RecvOp::Frame(mut op, hold) => {
                            if let Some((frame, _)) = op.take() {
                                self.events.held_frame(
                                    from,
                                    frame.into_bytes(),
                                    hold,
                                    &mut self.replies,
                                );
                                delivered = true;
                                self.send_replies();
                            }
                        }
                        RecvOp::Refused(_, len) => {
                            self.events.refused(from, len, &mut self.replies);
                            self.send_replies();
                        }
                        RecvOp::Other(_) => {}
                    }
                }
                Err(e) => {
                    self.lost.push((recv.from, e.to_string()));
                    self.recvs.pop_front();
                }
            }
        }
        if delivered {
            self.events.frames_done(&mut self.replies);
            self.send_replies();
        }
        self.closing.retain_mut(|c| !c.test());
        self.turns = self.turns.wrapping_add(1);
        if self.timers_due || self.turns.is_multiple_of(CLOCK_EVERY) {
            self.timers_due = false;
            self.timers(Instant::now());
        }
        for (id, why) in std::mem::take(&mut self.lost) {
            if let Some(p) = self.peers.remove(&id) {
                self.sends.retain(|(peer, _)| *peer != id);
                self.closing.push(p.ep.close());
                self.events.lost(id, why);
            }
        }
        Turn {
            busy,
            pending: !self.sends.is_empty() || !self.recvs.is_empty() || !self.closing.is_empty(),
            stop: false,
            waiting: self.waiting.is_some(),
        }
    }

    /// Takes the messages that have arrived out of UCX's queue, in order: frames as
    /// [`Events::admit`] decides, before any buffer is taken for them; heartbeats and unknown
    /// kinds dropped unread. While a frame waits for admission, only heartbeats are taken.
    /// True if anything was taken.
    fn take_arrivals(&mut self) -> bool {
        let worker = self.worker;
        let mut took = false;
        loop {
            let probed = match self.waiting.take() {
                Some(p) => p,
                None => match worker.probe(0, 0) {
                    Some(p) => p,
                    None => break,
                },
            };
            let (kind, from, len) = (probed.tag >> KIND_SHIFT, probed.tag as u32, probed.len);
            let op = if kind != KIND_FRAME {
                worker.discard_probed(probed).map(RecvOp::Other)
            } else {
                match self.events.admit(from, len) {
                    Admit::Take(hold) => worker
                        .recv_probed(probed, &self.pool)
                        .map(|op| RecvOp::Frame(op, hold)),
                    Admit::Refuse => worker
                        .discard_probed(probed)
                        .map(|op| RecvOp::Refused(op, len)),
                    Admit::Wait => {
                        self.waiting = Some(probed);
                        break;
                    }
                }
            };
            took = true;
            match op {
                Ok(op) => self.recvs.push_back(Recv { from, op }),
                Err(e) => self.lost.push((from, e.to_string())),
            }
        }
        if self.waiting.is_some() {
            // Heartbeats are not held up by a frame that waits: a peer whose frames wait is
            // not silent.
            while let Some(probed) = worker.probe(tag(KIND_HEARTBEAT, 0), KIND_MASK) {
                took = true;
                let from = probed.tag as u32;
                match worker.discard_probed(probed) {
                    Ok(op) => self.recvs.push_back(Recv {
                        from,
                        op: RecvOp::Other(op),
                    }),
                    Err(e) => self.lost.push((from, e.to_string())),
                }
            }
        }
        took
    }

    /// Heartbeats due, and peers silent too long (reported lost on this turn).
    fn timers(&mut self, now: Instant) {
        for (id, p) in self.peers.iter_mut() {
            if std::mem::take(&mut p.heard) {
                p.last_heard = now;
            }
            if now.duration_since(p.last_heard) >= self.opts.dead_after {
                self.lost.push((
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
                    self.heartbeat.clone(),
                    Bytes::new(),
                ) {
                    Ok(op) => self.sends.push((*id, op)),
                    Err(e) => self.lost.push((*id, e.to_string())),
                }
            }
        }
    }

    /// Sends what [`Events`] queued in `replies`.
    fn send_replies(&mut self) {
        for (peer, head, tail) in self.replies.0.drain(..) {
            match self.peers.get(&peer) {
                Some(p) => match send_frame(&p.ep, tag(KIND_FRAME, p.id_at_peer), head, tail) {
                    Ok(op) => self.sends.push((peer, op)),
                    Err(e) => self.lost.push((peer, e.to_string())),
                },
                None => self.events.lost(peer, "not connected".into()),
            }
        }
    }

    /// When the next heartbeat is due or a peer would be lost, from `now`.
    fn next_deadline(&self, now: Instant) -> Duration {
        self.peers
            .values()
            .map(|p| (p.last_beat + self.opts.heartbeat).min(p.last_heard + self.opts.dead_after))
            .min()
            .map(|t| t.saturating_duration_since(now))
            .unwrap_or(self.opts.heartbeat)
    }

    /// Stopping: drops a frame still waiting for admission, closes every endpoint and gives
    /// the closes a moment.
    fn close_all(&mut self) {
        let deadline = Instant::now() + STOP_LIMIT;
        let mut dropping = self
            .waiting
            .take()
            .and_then(|p| self.worker.discard_probed(p).ok());
        self.closing
            .extend(self.peers.drain().map(|(_, p)| p.ep.close()));
        while (!self.closing.is_empty() || dropping.is_some()) && Instant::now() < deadline {
            self.worker.progress();
            self.closing.retain_mut(|c| !c.test());
            if dropping.as_mut().is_none_or(|d| d.test().unwrap_or(true)) {
                dropping = None;
            }
        }
    }
}

/// Drops the link's state, then the worker it borrowed.
fn free_worker(core: &Core) {
    let state = match core.state.lock() {
        Ok(mut s) => s.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    };
    let Some(state) = state else { return };
    let worker: *const Worker = state.worker;
    drop(state);
    // SAFETY: leaked by `Link::start_in`; the state, whose endpoints and operations were its
    // only borrowers, is gone, and no driver can take it again (`Core::state` is `None`).
    unsafe { drop(Box::from_raw(worker as *mut Worker)) };
}

/// Locks the state, whatever a panicking holder left.
fn lock(core: &Core) -> std::sync::MutexGuard<'_, Option<State>> {
    match core.state.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

struct Progress {
    core: Arc<Core>,
    wake: Arc<OwnedFd>,
    sleeps: Arc<AtomicU64>,
    opts: LinkOptions,
}

impl Progress {
    fn run(self) {
        let core = &*self.core;
        // The worker's event fd, read once (the worker is touched only under the lock).
        let efd = lock(core).as_ref().and_then(|s| s.worker.event_fd().ok());
        let mut last_event = Instant::now();
        // Idle turns since the last busy one; the clock is read on the first and every
        // `CLOCK_EVERY`th.
        let mut idle: u32 = 0;
        loop {
            if core.drivers.load(Ordering::Acquire) > 0 {
                // A caller progresses the worker: stay out of its way until it leaves (it
                // rings) or a heartbeat may be due.
                core.parked.store(true, Ordering::SeqCst);
                if core.drivers.load(Ordering::SeqCst) > 0 {
                    self.sleep(None, self.opts.heartbeat.min(Duration::from_millis(10)));
                    // Heartbeats may be due (a driver busy turning reads the clock itself).
                    if let Ok(mut state) = core.state.try_lock() {
                        if let Some(state) = state.as_mut() {
                            state.timers_due = true;
                        }
                    }
                }
                core.parked.store(false, Ordering::Release);
                idle = 0;
                continue;
            }
            let turn = {
                let mut guard = lock(core);
                let Some(state) = guard.as_mut() else { break };
                let turn = state.turn();
                if turn.stop {
                    state.close_all();
                    break;
                }
                turn
            };
            if turn.busy {
                idle = 0;
                continue;
            }
            if turn.waiting && !turn.pending {
                // A frame waits for room: ask again soon, without spinning meanwhile
                // (commands still wake the thread at once).
                self.sleep(None, ADMIT_RETRY);
                continue;
            }
            idle += 1;
            if idle == 1 {
                last_event = Instant::now();
            }
            if turn.pending
                || !idle.is_multiple_of(CLOCK_EVERY)
                || last_event.elapsed() < self.opts.spin
            {
                continue;
            }
            let next = match lock(core).as_ref() {
                Some(state) => state.next_deadline(Instant::now()),
                None => break,
            };
            let armed = match lock(core).as_ref() {
                Some(state) => state.worker.arm(),
                None => break,
            };
            match armed {
                Ok(true) => {}
                Ok(false) => continue,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
            }
            match efd {
                Some(efd) => self.sleep(Some(efd), next),
                None => std::thread::sleep(next.min(Duration::from_millis(1))),
            }
            idle = 0;
            if let Some(state) = lock(core).as_mut() {
                state.timers_due = true;
            }
        }
        free_worker(core);
    }

    /// Sleeps until the worker has events (when `efd` is its event fd), a command or a
    /// leaving driver rings, or `timeout` passes.
    fn sleep(&self, efd: Option<std::os::fd::RawFd>, timeout: Duration) {
        let mut fds = [
            libc::pollfd {
                fd: self.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: efd.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let n = if efd.is_some() { 2 } else { 1 };
        let ms = c_int_ms(timeout);
        self.sleeps.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `n` valid pollfd entries.
        unsafe { libc::poll(fds.as_mut_ptr(), n, ms) };
        let mut counter: u64 = 0;
        // SAFETY: reads 8 bytes into a local from a non-blocking eventfd (EAGAIN if not rung).
        let _ = unsafe { libc::read(self.wake.as_raw_fd(), (&mut counter as *mut u64).cast(), 8) };
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The first frame of a fresh link, sent by its peer only after this side's `connect` was
    /// called, reaches this side within the very turn that was already under way when
    /// `connect` was called: the frame is answered all the same, not dropped as from a peer
    /// "not connected". The interleaving is forced: b's progress thread is held just before
    /// it progresses its worker while b is connected to a plain worker, which then sends its
    /// frame (eager, over shared memory: in b's queue once the send completes).
    #[test]
    fn a_frame_that_arrives_in_the_turn_its_connect_was_queued_in_is_answered() {
        let Ok(ucx) = Ucx::load() else {
            eprintln!("skipped: UCX is not installed");
            return;
        };
        let ctx = Context::new(&ucx).expect("context");
        let (b_tx, b_rx) = mpsc::channel();
        // `a` below is a plain worker, which sends no heartbeats: b must not lose it meanwhile.
        let opts = LinkOptions {
            heartbeat: Duration::from_secs(30),
            dead_after: Duration::from_secs(60),
            ..LinkOptions::default()
        };
        let b = Link::start_in(&ctx, opts, ToChannel(b_tx, true)).expect("b");
        // b's hook, once armed: tell the test b's thread is held, and wait for its go.
        let armed = Arc::new(AtomicBool::new(false));
        let (held_tx, held_rx) = mpsc::channel::<()>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        {
            let armed = Arc::clone(&armed);
            let go_rx = Mutex::new(go_rx);
            lock(&b.core).as_mut().expect("b runs").before_progress = Some(Box::new(move || {
                if armed.swap(false, Ordering::SeqCst) {
                    let _ = held_tx.send(());
                    let _ = go_rx
                        .lock()
                        .map(|rx| rx.recv_timeout(Duration::from_secs(10)));
                }
            }));
        }
        armed.store(true, Ordering::SeqCst);
        // A command (closing a peer b never had: nothing) wakes b's thread for a turn.
        b.close(99).expect("b runs");
        held_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("b's thread reaches its hook");
        // b's thread is inside a turn, held before it progresses. Now b is connected to the
        // worker `a`, and only then does `a` connect and send.
        let a = ctx.worker().expect("worker a");
        b.connect(7, a.address().expect("a's address"), 1)
            .expect("b -> a");
        let ep = a.connect(b.address()).expect("a -> b");
        let sent = vec![5u8; 1000];
        ep.send(tag(KIND_FRAME, 7), &sent)
            .expect("send")
            .wait(Duration::from_secs(5))
            .expect("the frame is sent");
        go_tx.send(()).expect("b's hook waits");
        let mut back = vec![0u8; 2000];
        let got = a
            .recv(tag(KIND_FRAME, 1), u64::MAX, &mut back)
            .expect("receive")
            .wait(Duration::from_secs(10));
        let b_saw: Vec<String> = b_rx
            .try_iter()
            .map(|g| match g {
                Got::Frame(p, f) => format!("frame from {p} ({} bytes)", f.len()),
                Got::Lost(p, why) => format!("lost {p}: {why}"),
            })
            .collect();
        let got =
            got.unwrap_or_else(|e| panic!("no echo of the first frame ({e}); b saw {b_saw:?}"));
        assert_eq!(got.map(|r| r.len), Some(sent.len()), "b saw {b_saw:?}");
        assert!(
            back.get(..sent.len()) == Some(&sent[..]),
            "the echo is the frame"
        );
        assert!(
            b_saw.iter().all(|s| !s.starts_with("lost")),
            "b saw {b_saw:?}"
        );
        drop(ep);
        drop(b);
    }
}
