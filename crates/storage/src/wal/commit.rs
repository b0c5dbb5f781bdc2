//! Group commit: many writers, one write per round and one fdatasync per sync round, the two
//! running side by side.
//!
//! HOT PATH. `append` frames the record (CRC) outside every lock, then under the state mutex
//! only copies it into the shared buffer and takes a ticket. No IO, no allocation beyond buffer
//! growth, no logging under that mutex.
//!
//! Write rounds. A writer that needs its record in the OS and finds no write round in progress
//! leads one: it takes the whole buffer (swapping in a spare), releases the state mutex, writes
//! the batch to the active segment, then publishes `written` and wakes everyone. Writers
//! arriving meanwhile append to the fresh buffer; the next leader takes all of them at once.
//! A write round never syncs, rolls or deletes: it only hands bytes to the OS, so a network
//! thread may lead one ([`Shared::try_sync`]).
//!
//! Sync rounds. A writer that asked for `FsyncWal` leads a sync round once its record is
//! written: it notes `written`, syncs the active segment through its [`FileSyncer`], without
//! the writer mutex, then publishes `synced`. Write rounds go on during the fdatasync, so a
//! slow disk delays only the writers that asked for it (what the reactor test on a slowed file
//! system checks).
//!
//! The background thread leads a write round every `async_flush_interval` (and when the
//! buffer grows large) for `AsyncWal`, rolls a full segment, deletes segments no region needs,
//! and retries a stalled log. A roll creates the next segment and syncs the full one while
//! writers go on, then, holding write leadership, syncs the few records written meanwhile and
//! swaps: a segment takes records only once every older segment is durable, so a power cut
//! leaves a prefix of the log.
//!
//! Failures. A failed write stalls the log: the records of the round and of the buffer are
//! thrown away and their tickets marked lost (their edits are aborted, never visible here; the
//! buffer's writers get `WalFailed`, "not logged", and the round's get `OutcomeUnknown`, since
//! its records may be in the file a replay reads), appends are refused, and the background thread cuts the segment back
//! to its last whole record and rolls to a fresh one, after which writes are accepted again
//! (a full disk recovers by itself once space returns). A failed sync fails the log for good:
//! what was written may not be on disk, and only a restart (replaying what is) can say; every
//! later write is refused.
//!
//! Invariants: tickets are handed out 1, 2, 3… in buffer order; `synced ≤ written < next`;
//! every ticket ≤ `written` is in the OS or lost; at most one write round and one sync round
//! at a time; the writer mutex is taken only by the holder of `writing`; every segment but
//! the active one is fully synced, so syncing the active one covers every record before.
//!
//! Lock order: `roll_lock`, then `state`, then `syncer`; `writer` (never while holding
//! `state`), then `syncer` or `segments`. `state` is never held across IO.

use super::format::{self, RecordFramer};
use super::segments::{SegmentMeta, SegmentSet};
use super::writer::SegmentWriter;
use super::{WalOptions, WalStats};
use crate::fs::{DirWatch, FileSyncer, FsRef};
use cellar_model::{Durability, Error, Result};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A roll syncs the full segment up to this many times before taking write leadership,
const ROLL_SYNC_ROUNDS: usize = 4;
/// stopping once writers added at most this many bytes during a sync.
const ROLL_SMALL_TAIL: u64 = 1 << 20;

/// Buffered bytes at which the background thread is woken to write them out early.
const FLUSH_THRESHOLD: u64 = 1024 * 1024;
/// Capacity a spare buffer keeps after a round; a burst larger than this is given back.
const MAX_SPARE: usize = 4 * 1024 * 1024;
/// How often the background thread retries a stalled log.
const RECOVERY_INTERVAL: Duration = Duration::from_secs(1);

/// Whether the log accepts writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalHealth {
    Ok,
    /// A write failed (a full disk, an IO error): writes are refused until the log has cut
    /// the damaged segment back and rolled to a new one, which it retries by itself.
    Stalled(String),
    /// A sync failed: what was written may not be on disk. Writes are refused until restart.
    Failed(String),
}

/// Everything appenders and leaders coordinate on.
struct State {
    /// Framed records not yet handed to the file.
    buf: Vec<u8>,
    spare_buf: Vec<u8>,
    /// Highest seq per region among the records in `buf`.
    regions: HashMap<u64, u64>,
    spare_regions: HashMap<u64, u64>,
    /// The ticket the next append gets; tickets start at 1.
    next_ticket: u64,
    /// Every ticket ≤ this is in the OS, or lost.
    written: u64,
    /// Every ticket ≤ this is fdatasync'ed, or lost.
    synced: u64,
    /// The highest ticket a waiter wants fdatasync'ed.
    fsync_wanted: u64,
    /// A write round is in progress (its leader holds the writer mutex).
    writing: bool,
    /// A sync round is in progress.
    syncing: bool,
    /// Tickets thrown away by failed writes: never in the log.
    lost: Vec<RangeInclusive<u64>>,
    /// Tickets written to a segment the log then found fenced (its directory moved): not
    /// applied here, but in the file whoever splits the log reads. Their writers hear that the
    /// outcome is unknown, never "not logged".
    unknown: Vec<RangeInclusive<u64>>,
    health: WalHealth,
    closed: bool,
    /// Tells the background thread to exit.
    stop: bool,
    background_poked: bool,
    /// The active segment is full: the background thread rolls it.
    roll_wanted: bool,
    /// Tasks waiting for a round to end ([`Shared::poll_sync`]); woken after every round.
    wakers: Vec<Waker>,
    stats: WalStats,
}

impl State {
    fn is_lost(&self, ticket: u64) -> bool {
        self.lost.iter().any(|r| r.contains(&ticket)) || self.is_unknown(ticket)
    }

    fn is_unknown(&self, ticket: u64) -> bool {
        self.unknown.iter().any(|r| r.contains(&ticket))
    }
}

/// The log's shared core; the background thread holds it too.
pub struct Shared {
    fs: FsRef,
    dir: PathBuf,
    opts: WalOptions,
    flush_threshold: usize,
    /// Frames records with this log's salt, which every segment it creates carries.
    framer: RecordFramer,
    salt: u64,
    state: Mutex<State>,
    /// Signalled after every round and state change: waiters re-check their tickets.
    progress: Condvar,
    wake_background: Condvar,
    /// The active segment; `None` once closed. Only the holder of `State::writing` locks it.
    writer: Mutex<Option<SegmentWriter>>,
    /// Syncs the active segment.
    syncer: Mutex<Arc<dyn FileSyncer>>,
    segments: Mutex<SegmentSet>,
    /// Serializes rolls and stall recovery.
    roll_lock: Mutex<()>,
    active_id: AtomicU64,
    /// Stalled, failed or closed: lets `AsyncWal` syncs skip the state mutex when all is well.
    refusing: AtomicBool,
    /// With `fence_dir`: the file system's cheap watch on `dir`, if it has one.
    dir_watch: Option<Box<dyn DirWatch>>,
    /// Set once a round found `dir` gone: the master may be splitting the log, so it fails
    /// for good (a directory moved back must not let the background recovery reopen it).
    fenced: AtomicBool,
}

impl Shared {
    pub fn new(
        fs: FsRef,
        dir: &Path,
        opts: WalOptions,
        writer: SegmentWriter,
        segments: SegmentSet,
        dir_watch: Option<Box<dyn DirWatch>>,
    ) -> Shared {
        let threshold = FLUSH_THRESHOLD.min(opts.segment_size.max(1));
        let salt = writer.salt();
        Shared {
            fs,
            dir: dir.to_path_buf(),
            flush_threshold: usize::try_from(threshold).unwrap_or(usize::MAX),
            opts,
            framer: RecordFramer::new(salt),
            salt,
            state: Mutex::new(State {
                buf: Vec::new(),
                spare_buf: Vec::new(),
                regions: HashMap::new(),
                spare_regions: HashMap::new(),
                next_ticket: 1,
                written: 0,
                synced: 0,
                fsync_wanted: 0,
                writing: false,
                syncing: false,
                lost: Vec::new(),
                unknown: Vec::new(),
                health: WalHealth::Ok,
                closed: false,
                stop: false,
                background_poked: false,
                roll_wanted: false,
                wakers: Vec::new(),
                stats: WalStats::default(),
            }),
            progress: Condvar::new(),
            wake_background: Condvar::new(),
            active_id: AtomicU64::new(writer.id()),
            syncer: Mutex::new(writer.syncer()),
            writer: Mutex::new(Some(writer)),
            segments: Mutex::new(segments),
            roll_lock: Mutex::new(()),
            refusing: AtomicBool::new(false),
            dir_watch,
            fenced: AtomicBool::new(false),
        }
    }

    /// Whether the log's directory is still where it was (`WalOptions::fence_dir`).
    fn dir_intact(&self) -> Result<bool> {
        match &self.dir_watch {
            Some(w) => w.intact(),
            None => self.fs.exists(&self.dir),
        }
    }

    /// Why writes are refused now (the log is stalled, failed or closed).
    fn refusal(&self, st: &State) -> Error {
        let dir = self.dir.display();
        match &st.health {
            WalHealth::Stalled(why) => Error::WalFailed(format!(
                "write-ahead log {dir} refuses writes until it recovers from: {why}"
            )),
            WalHealth::Failed(why) => Error::WalFailed(format!(
                "write-ahead log {dir} failed and refuses writes until the server restarts: {why}"
            )),
            WalHealth::Ok => Error::Closed(format!("write-ahead log {dir}")),
        }
    }

    /// The error of a lost ticket's writer: "not logged" for what never reached the file;
    /// "unknown" for what a failed round may have left in it.
    fn lost_error(&self, st: &State, ticket: u64) -> Error {
        let why = match &st.health {
            WalHealth::Stalled(why) | WalHealth::Failed(why) => why.as_str(),
            WalHealth::Ok => "a write failed (the log has recovered since)",
        };
        if st.is_unknown(ticket) {
            return Error::OutcomeUnknown(format!(
                "the write is not applied on this server, but it was being written to the \
                 write-ahead log {} when this happened: {why}. Its records may be in the log, \
                 and a replay of it (a restart, or the server that takes the region over) may \
                 apply them. Retry it (increments and appends carry nonces and apply once).",
                self.dir.display()
            ));
        }
        Error::WalFailed(format!(
            "the write was not logged and not applied: write-ahead log {}: {why}",
            self.dir.display()
        ))
    }

    pub fn health(&self) -> WalHealth {
        self.state.lock().health.clone()
    }

    /// An error if the log refuses writes now; cheap when it does not.
    pub fn check_accepting(&self) -> Result<()> {
        if !self.refusing.load(Ordering::Acquire) {
            return Ok(());
        }
        let st = self.state.lock();
        if st.closed || st.health != WalHealth::Ok {
            return Err(self.refusal(&st));
        }
        Ok(())
    }

    pub fn append(&self, region: u64, seq: u64, payload: &[u8]) -> Result<u64> {
        let header = self.framer.header(region, seq, payload)?;
        let mut st = self.state.lock();
        if st.closed || st.health != WalHealth::Ok {
            return Err(self.refusal(&st));
        }
        st.buf.extend_from_slice(&header);
        st.buf.extend_from_slice(payload);
        let max = st.regions.entry(region).or_insert(seq);
        *max = (*max).max(seq);
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.stats.appends += 1;
        if st.buf.len() >= self.flush_threshold && !st.background_poked {
            st.background_poked = true;
            self.wake_background.notify_one();
        }
        Ok(ticket)
    }

    /// Bytes of records buffered and not yet handed to the OS.
    pub fn buffered_bytes(&self) -> usize {
        self.state.lock().buf.len()
    }

    /// Whether the buffer of records not yet in the OS is under its bound.
    pub fn has_room(&self) -> bool {
        self.state.lock().buf.len() < self.opts.max_buffered_bytes
    }

    /// Waits (writing the buffer out itself when no round is in progress) until the buffer is
    /// under its bound, so `AsyncWal` writers slow down to the disk's pace and memory stays
    /// bounded.
    pub fn wait_for_room(&self) {
        let mut st = self.state.lock();
        while st.buf.len() >= self.opts.max_buffered_bytes
            && st.health == WalHealth::Ok
            && !st.closed
        {
            if st.writing {
                self.progress.wait(&mut st);
            } else {
                let _ = self.lead_write(&mut st);
            }
        }
    }

    pub fn sync(&self, ticket: u64, durability: Durability) -> Result<()> {
        let fsync = match durability.resolve() {
            Durability::SkipWal => return Ok(()),
            Durability::AsyncWal => return self.async_outcome(ticket),
            Durability::FsyncWal => true,
            Durability::SyncWal | Durability::UseDefault => false,
        };
        let mut st = self.state.lock();
        if ticket >= st.next_ticket {
            return Err(Error::InvalidArgument(format!(
                "WAL ticket {ticket} was never handed out"
            )));
        }
        if fsync {
            st.fsync_wanted = st.fsync_wanted.max(ticket);
        }
        loop {
            if st.is_lost(ticket) {
                return Err(self.lost_error(&st, ticket));
            }
            if st.written < ticket {
                if st.health != WalHealth::Ok {
                    return Err(self.refusal(&st));
                }
                if st.writing {
                    self.progress.wait(&mut st);
                } else {
                    // A failure marks the round's tickets lost: the next pass reports it.
                    let _ = self.lead_write(&mut st);
                }
                continue;
            }
            if !fsync || st.synced >= ticket {
                return Ok(());
            }
            if let WalHealth::Failed(why) = &st.health {
                // In the OS, not known to be on disk: a restart replays it if the disk has it.
                return Err(Error::WalFailed(format!(
                    "write-ahead log {} could not make the write durable ({why}); it is not applied now, and a restart may or may not replay it",
                    self.dir.display()
                )));
            }
            if st.syncing {
                self.progress.wait(&mut st);
            } else {
                self.lead_sync(&mut st)?;
            }
        }
    }

    /// [`Shared::sync`] for a thread that must not wait (a network reactor): `None` when the
    /// record's durability needs an fdatasync, or another writer's round is in progress.
    /// Otherwise the answer, after leading a write round (a write to the OS) if needed.
    pub fn try_sync(&self, ticket: u64, durability: Durability) -> Option<Result<()>> {
        match durability.resolve() {
            Durability::SkipWal => return Some(Ok(())),
            Durability::AsyncWal => return Some(self.async_outcome(ticket)),
            Durability::FsyncWal => {
                let st = self.state.lock();
                return (st.synced >= ticket && !st.is_lost(ticket)).then_some(Ok(()));
            }
            Durability::SyncWal | Durability::UseDefault => {}
        }
        let mut st = self.state.lock();
        for attempt in 0..2 {
            if st.is_lost(ticket) {
                return Some(Err(self.lost_error(&st, ticket)));
            }
            if st.written >= ticket {
                return Some(Ok(()));
            }
            if st.health != WalHealth::Ok {
                return Some(Err(self.refusal(&st)));
            }
            if st.writing || attempt > 0 {
                return None;
            }
            // A failure is recorded in the state (lost tickets), read on the next pass.
            let _ = self.lead_write(&mut st);
        }
        None
    }

    /// [`Shared::sync`] for an async task on a network reactor: never blocks. Ready when the
    /// record is as durable as asked (after leading a write round itself when none is in
    /// progress); otherwise the task is woken when a round ends. An fdatasync is never run
    /// here: the background thread leads the sync rounds async waiters need.
    pub fn poll_sync(
        &self,
        ticket: u64,
        durability: Durability,
        cx: &mut Context<'_>,
    ) -> Poll<Result<()>> {
        let fsync = match durability.resolve() {
            Durability::SkipWal => return Poll::Ready(Ok(())),
            Durability::AsyncWal => return Poll::Ready(self.async_outcome(ticket)),
            Durability::FsyncWal => true,
            Durability::SyncWal | Durability::UseDefault => false,
        };
        let mut st = self.state.lock();
        if fsync {
            st.fsync_wanted = st.fsync_wanted.max(ticket);
        }
        for attempt in 0..2 {
            if st.is_lost(ticket) {
                return Poll::Ready(Err(self.lost_error(&st, ticket)));
            }
            if st.written >= ticket && (!fsync || st.synced >= ticket) {
                return Poll::Ready(Ok(()));
            }
            if st.health != WalHealth::Ok {
                return Poll::Ready(Err(self.refusal(&st)));
            }
            if st.written < ticket && !st.writing && attempt == 0 {
                // A failure is recorded in the state (lost tickets), read on the next pass.
                let _ = self.lead_write(&mut st);
                continue;
            }
            break;
        }
        st.wakers.push(cx.waker().clone());
        if fsync && !st.syncing && !st.background_poked {
            st.background_poked = true;
            self.wake_background.notify_one();
        }
        Poll::Pending
    }

    /// Wakes the tasks waiting for a round; call after changing `written`, `synced`, `lost`
    /// or `health`.
    fn wake_tasks(&self, st: &mut State) {
        for w in st.wakers.drain(..) {
            w.wake();
        }
    }

    /// `AsyncWal` was acknowledged at append; it fails only if a failed write threw it away.
    fn async_outcome(&self, ticket: u64) -> Result<()> {
        if !self.refusing.load(Ordering::Acquire) {
            return Ok(());
        }
        let st = self.state.lock();
        if st.is_lost(ticket) {
            return Err(self.lost_error(&st, ticket));
        }
        Ok(())
    }

    /// Closes the active segment and starts a new one, now, in this thread.
    pub fn roll(&self) -> Result<()> {
        self.roll_now()
    }

    /// Refuses further appends, writes and syncs what is buffered, stops the background thread
    /// (the caller joins it) and releases the active segment. Closing twice is a no-op.
    pub fn close(&self) -> Result<()> {
        let mut st = self.state.lock();
        if st.closed {
            return Ok(());
        }
        st.closed = true;
        self.refusing.store(true, Ordering::Release);
        while st.writing || st.syncing {
            self.progress.wait(&mut st);
        }
        let result = match st.health {
            WalHealth::Ok => self
                .lead_write(&mut st)
                .and_then(|()| self.lead_sync_all(&mut st)),
            _ => Err(self.refusal(&st)),
        };
        self.stop_background(&mut st);
        drop(st);
        // No round can start any more: appends are refused and every ticket is settled.
        *self.writer.lock() = None;
        result
    }

    /// For `Drop`: hands what is buffered to the OS (as dropping a file does) and stops the
    /// background thread. Errors have nobody to go to and are only logged.
    pub fn shutdown(&self) {
        let mut st = self.state.lock();
        if !st.closed {
            st.closed = true;
            self.refusing.store(true, Ordering::Release);
            while st.writing {
                self.progress.wait(&mut st);
            }
            if st.health == WalHealth::Ok {
                if let Err(e) = self.lead_write(&mut st) {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "WAL flush on drop failed");
                }
            }
        }
        self.stop_background(&mut st);
    }

    fn stop_background(&self, st: &mut State) {
        st.stop = true;
        self.wake_tasks(st);
        self.wake_background.notify_all();
        self.progress.notify_all();
    }

    /// Runs one write round. Called with the state locked and no write round in progress;
    /// returns with it locked again. The state mutex is released for the write.
    fn lead_write(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        debug_assert!(!st.writing);
        let last = st.next_ticket - 1;
        if st.written >= last {
            return Ok(());
        }
        st.writing = true;
        let spare = std::mem::take(&mut st.spare_buf);
        let mut batch = std::mem::replace(&mut st.buf, spare);
        let spare = std::mem::take(&mut st.spare_regions);
        let mut regions = std::mem::replace(&mut st.regions, spare);

        let outcome = MutexGuard::unlocked(st, || {
            // A panic here must not leave `writing` set forever: every waiter would hang.
            catch_unwind(AssertUnwindSafe(|| self.write_batch(&batch, &regions)))
                .unwrap_or_else(|_| Err(Error::WalFailed("the WAL writer panicked".into())))
        });

        let bytes = batch.len() as u64;
        batch.clear();
        batch.shrink_to(MAX_SPARE);
        st.spare_buf = batch;
        regions.clear();
        st.spare_regions = regions;
        st.writing = false;
        let result = match outcome {
            Ok(full) => {
                st.written = last;
                if bytes > 0 {
                    st.stats.flushes += 1;
                    st.stats.bytes_written += bytes;
                }
                if full && !st.roll_wanted {
                    st.roll_wanted = true;
                    st.background_poked = true;
                    self.wake_background.notify_one();
                }
                Ok(())
            }
            Err(e) => {
                // The round's records may be in the segment, whole or in part (a write that
                // failed midway, a directory the master moved after the write): a replay of
                // it may apply them. Only what came after the round is surely not logged.
                if st.written < last {
                    let first = st.written + 1;
                    st.unknown.push(first..=last);
                    st.written = last;
                }
                self.stall(st, &e);
                Err(e)
            }
        };
        self.wake_tasks(st);
        self.progress.notify_all();
        result
    }

    /// Writes one round's batch to the active segment; returns whether the segment is full.
    fn write_batch(&self, batch: &[u8], regions: &HashMap<u64, u64>) -> Result<bool> {
        // Uncontended: only the holder of `writing` takes this mutex.
        let mut writer = self.writer.lock();
        let Some(seg) = writer.as_mut() else {
            return Err(Error::Closed(format!(
                "write-ahead log {}",
                self.dir.display()
            )));
        };
        if !batch.is_empty() {
            seg.write(batch)?;
            // Checked after the write: if the directory is still in place now, a master that
            // renames it later splits a log that already holds this batch. If it is gone, the
            // batch may be in what the master splits, or not: its outcome is unknown.
            if self.opts.fence_dir && !self.dir_intact()? {
                self.fenced.store(true, Ordering::Release);
                return Err(Error::WalFailed(format!(
                    "the WAL directory {} is gone: the master has taken this server's log over \
                     (its session expired); nothing more is acknowledged",
                    self.dir.display()
                )));
            }
        }
        if !regions.is_empty() {
            self.segments.lock().note_batch(seg.id(), regions);
        }
        Ok(seg.len() >= self.opts.segment_size && seg.len() > format::HEADER_LEN as u64)
    }

    /// A write failed: every ticket not yet written is lost, appends are refused, and the
    /// background thread is asked to recover.
    fn stall(&self, st: &mut State, e: &Error) {
        let last = st.next_ticket - 1;
        if st.written < last {
            st.lost.push(st.written + 1..=last);
        }
        st.written = last;
        st.buf.clear();
        st.regions.clear();
        st.stats.failures += 1;
        if self.fenced.load(Ordering::Acquire) {
            if !matches!(st.health, WalHealth::Failed(_)) {
                tracing::error!(dir = %self.dir.display(), error = %e, "WAL fenced: its directory moved; writes are refused until the server restarts");
                st.health = WalHealth::Failed(e.to_string());
            }
        } else if st.health == WalHealth::Ok {
            tracing::error!(dir = %self.dir.display(), error = %e, "WAL write failed: unlogged writes are refused and rolled back; writes are refused until the log recovers");
            st.health = WalHealth::Stalled(e.to_string());
        }
        self.refusing.store(true, Ordering::Release);
        st.background_poked = true;
        self.wake_background.notify_one();
    }

    /// A sync failed: the log refuses writes until restart.
    fn fail(&self, st: &mut State, e: &Error) {
        st.stats.failures += 1;
        if !matches!(st.health, WalHealth::Failed(_)) {
            tracing::error!(dir = %self.dir.display(), error = %e, "WAL sync failed: what was written may not be on disk; writes are refused until the server restarts");
            st.health = WalHealth::Failed(e.to_string());
        }
        self.refusing.store(true, Ordering::Release);
        self.wake_tasks(st);
        self.progress.notify_all();
    }

    /// Runs one sync round covering every ticket written so far. Called with the state locked
    /// and no sync round in progress; returns with it locked again.
    fn lead_sync(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        debug_assert!(!st.syncing);
        let target = st.written;
        if st.synced >= target {
            return Ok(());
        }
        self.lead_sync_all(st)
    }

    /// A sync round even if nothing new was written (a close syncs whatever it finds).
    fn lead_sync_all(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let target = st.written;
        st.syncing = true;
        // Every ticket ≤ `target` is in this segment or in an older one, which a roll synced
        // before it swapped.
        let active = Arc::clone(&self.syncer.lock());
        let outcome = MutexGuard::unlocked(st, || active.sync());
        st.syncing = false;
        let result = match outcome {
            Ok(()) => {
                st.synced = st.synced.max(target);
                st.stats.syncs += 1;
                Ok(())
            }
            Err(e) => {
                self.fail(st, &e);
                Err(e)
            }
        };
        self.wake_tasks(st);
        self.progress.notify_all();
        result
    }

    /// Waits for the write round in progress to end and takes write leadership, unless the
    /// log is closed or `healthy_only` and it is not healthy.
    fn claim_writer(&self, healthy_only: bool) -> Result<()> {
        let mut st = self.state.lock();
        while st.writing {
            self.progress.wait(&mut st);
        }
        if st.closed || (healthy_only && st.health != WalHealth::Ok) {
            return Err(self.refusal(&st));
        }
        st.writing = true;
        Ok(())
    }

    fn release_writer(&self, update: impl FnOnce(&mut State)) {
        let mut st = self.state.lock();
        st.writing = false;
        update(&mut st);
        self.wake_tasks(&mut st);
        drop(st);
        self.progress.notify_all();
    }

    /// Rolls to a new segment: creates it and syncs the full one while writers go on (more
    /// than once while they keep writing much), then,
    /// holding write leadership, syncs what was written meanwhile and swaps. Deletes the
    /// segments nobody needs any more.
    fn roll_now(&self) -> Result<()> {
        let _roll = self.roll_lock.lock();
        self.check_accepting()?;
        {
            // Records appended before the roll go to the segment it closes.
            let mut st = self.state.lock();
            while st.writing {
                self.progress.wait(&mut st);
            }
            self.lead_write(&mut st)?;
        }
        let next_id = self.active_id.load(Ordering::Acquire) + 1;
        let next = SegmentWriter::create(&*self.fs, &self.dir, next_id, self.salt)?;
        let old = Arc::clone(&self.syncer.lock());
        let abandon = |e: Error| {
            let _ = self
                .fs
                .delete(&self.dir.join(super::segments::segment_name(next_id)));
            e
        };
        // Synced while writers go on, and again while they wrote much meanwhile: the last
        // sync, done holding write leadership, then has little left (at 150 MB/s of puts a
        // single sync of a full segment left ~15 ms of writes for it, every 64 MiB).
        let mut syncs = 1; // the one holding leadership
        for _ in 0..ROLL_SYNC_ROUNDS {
            syncs += 1;
            let before = self.state.lock().stats.bytes_written;
            if let Err(e) = old.sync() {
                self.fail(&mut self.state.lock(), &e);
                return Err(abandon(e));
            }
            let after = self.state.lock().stats.bytes_written;
            if after.saturating_sub(before) <= ROLL_SMALL_TAIL {
                break;
            }
        }
        self.claim_writer(true).map_err(abandon)?;
        let held = std::time::Instant::now();
        // Usually a few records, written during the sync above.
        if let Err(e) = old.sync() {
            self.release_writer(|st| self.fail(st, &e));
            return Err(abandon(e));
        }
        let obsolete = self.swap_segment(next);
        let held_us = u64::try_from(held.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.release_writer(|st| {
            st.roll_wanted = false;
            st.stats.rolls += 1;
            st.stats.syncs += syncs;
            st.stats.roll_hold_us = st.stats.roll_hold_us.saturating_add(held_us);
        });
        self.delete_segments(obsolete);
        Ok(())
    }

    /// Puts `next` in place of the active segment, which must be fully synced; returns the
    /// segments no region needs any more. The caller holds write leadership.
    fn swap_segment(&self, next: SegmentWriter) -> Vec<SegmentMeta> {
        let next_id = next.id();
        *self.syncer.lock() = next.syncer();
        let meta = SegmentMeta::new(next_id, next.path().to_path_buf());
        // Dropping the old segment closes it; its buffer is empty (writes flush, failed
        // writes discard).
        drop(self.writer.lock().replace(next));
        self.active_id.store(next_id, Ordering::Release);
        let mut set = self.segments.lock();
        set.push(meta);
        // The segment just closed may already be fully flushed.
        set.take_obsolete()
    }

    /// Recovers a stalled log: cuts the segment back to its last whole record, syncs it and
    /// rolls to a new one. Returns whether the log accepts writes again.
    fn try_recover(&self) -> bool {
        let _roll = self.roll_lock.lock();
        if !matches!(self.health(), WalHealth::Stalled(_)) || self.claim_writer(false).is_err() {
            return false;
        }
        let recovered = (|| -> Result<Vec<SegmentMeta>> {
            let (path, good_len, id) = {
                let writer = self.writer.lock();
                let seg = writer.as_ref().ok_or_else(|| {
                    Error::Closed(format!("write-ahead log {}", self.dir.display()))
                })?;
                (seg.path().to_path_buf(), seg.len(), seg.id())
            };
            self.fs.truncate(&path, good_len)?;
            if !self.fs.truncate_replaces_file() {
                Arc::clone(&self.syncer.lock()).sync()?;
            }
            let next = SegmentWriter::create(&*self.fs, &self.dir, id + 1, self.salt)?;
            Ok(self.swap_segment(next))
        })();
        match recovered {
            Ok(obsolete) => {
                self.release_writer(|st| {
                    if matches!(st.health, WalHealth::Stalled(_)) {
                        st.health = WalHealth::Ok;
                        st.stats.rolls += 1;
                        st.stats.recoveries += 1;
                        self.refusing.store(st.closed, Ordering::Release);
                    }
                });
                tracing::info!(dir = %self.dir.display(), "WAL recovered: the damaged segment was cut back to its last whole record; writes are accepted again");
                self.delete_segments(obsolete);
                true
            }
            Err(e) => {
                self.release_writer(|_| {});
                tracing::warn!(dir = %self.dir.display(), error = %e, "WAL still cannot recover; retrying");
                false
            }
        }
    }

    /// Records a region's flushed seq and deletes the segments nobody needs any more.
    pub fn mark_flushed(&self, region: u64, seq: u64) {
        let doomed = self.segments.lock().mark_flushed(region, seq);
        self.delete_segments(doomed);
    }

    /// Deletes segment files already removed from the set. A failed delete is logged and the
    /// segment put back, so a later pass retries (a stale segment only costs replay time).
    pub fn delete_segments(&self, doomed: Vec<SegmentMeta>) {
        if doomed.is_empty() {
            return;
        }
        let mut kept = Vec::new();
        for seg in doomed {
            match self.fs.delete(&seg.path) {
                Ok(()) => tracing::debug!(file = %seg.path.display(), "deleted WAL segment"),
                Err(e) => {
                    tracing::warn!(file = %seg.path.display(), error = %e, "cannot delete WAL segment");
                    kept.push(seg);
                }
            }
        }
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot sync WAL directory");
        }
        if !kept.is_empty() {
            let mut set = self.segments.lock();
            for seg in kept {
                set.restore(seg);
            }
        }
    }

    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.segments.lock().paths()
    }

    pub fn stats(&self) -> WalStats {
        self.state.lock().stats.clone()
    }

    /// The background thread: writes `AsyncWal` records out every `async_flush_interval` (or
    /// sooner when the buffer passes the flush threshold), rolls full segments, and recovers a
    /// stalled log.
    pub fn run_background(&self) {
        let interval = self.opts.async_flush_interval.max(Duration::from_millis(1));
        let mut last_recovery: Option<Instant> = None;
        let mut st = self.state.lock();
        loop {
            if !st.stop && !st.background_poked {
                let wait = match st.health {
                    WalHealth::Stalled(_) => interval.min(RECOVERY_INTERVAL),
                    _ => interval,
                };
                self.wake_background.wait_for(&mut st, wait);
            }
            st.background_poked = false;
            if st.stop {
                return;
            }
            if st.health == WalHealth::Ok && !st.writing && st.written + 1 < st.next_ticket {
                // A failure stalls the log and reaches every waiter; nothing more to do here.
                let _ = self.lead_write(&mut st);
            }
            if st.health == WalHealth::Ok && !st.syncing && st.fsync_wanted > st.synced {
                // For tasks that cannot sync themselves (`poll_sync`).
                let _ = self.lead_sync(&mut st);
            }
            if st.roll_wanted && st.health == WalHealth::Ok && !st.closed {
                MutexGuard::unlocked(&mut st, || {
                    if let Err(e) = self.roll_now() {
                        tracing::warn!(dir = %self.dir.display(), error = %e, "WAL roll failed; the segment grows until a roll succeeds");
                    }
                });
            }
            let due = last_recovery.is_none_or(|t| t.elapsed() >= RECOVERY_INTERVAL);
            if matches!(st.health, WalHealth::Stalled(_)) && !st.closed && due {
                last_recovery = Some(Instant::now());
                MutexGuard::unlocked(&mut st, || self.try_recover());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::FaultFs;
    use crate::wal::reader;
    use std::sync::Arc;

    /// A log in a fresh directory over a power-cut file system, with small segments and no
    /// background thread unless a test starts one.
    struct Fixture {
        _tmp: tempfile::TempDir,
        dir: std::path::PathBuf,
        fs: FaultFs,
        wal: Arc<Shared>,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("wal");
        let fs = FaultFs::new();
        let shared: FsRef = Arc::new(fs.clone());
        crate::fs::create_dir_durable(&*shared, &dir).expect("dir");
        let active = SegmentWriter::create(&*shared, &dir, 1, 7).expect("segment");
        let mut set = SegmentSet::default();
        set.push(SegmentMeta::new(active.id(), active.path().to_path_buf()));
        let opts = WalOptions {
            segment_size: 256,
            async_flush_interval: Duration::from_secs(3600),
            ..WalOptions::default()
        };
        let wal = Arc::new(Shared::new(shared, &dir, opts, active, set, None));
        Fixture {
            _tmp: tmp,
            dir,
            fs,
            wal,
        }
    }

    impl Fixture {
        /// Cuts the power with the log still open, restores it and replays the directory.
        fn seqs_after_power_cut(self) -> Vec<u64> {
            self.fs.power_cut();
            drop(self.wal);
            self.fs.restore_power();
            let rec = reader::recover(&crate::fs::LocalFs, &self.dir, false).expect("recover");
            rec.records.iter().map(|r| r.seq).collect()
        }

        fn start_background(&self) -> std::thread::JoinHandle<()> {
            let bg = Arc::clone(&self.wal);
            std::thread::spawn(move || bg.run_background())
        }

        fn stop_background(&self, handle: std::thread::JoinHandle<()>) {
            self.wal.stop_background(&mut self.wal.state.lock());
            handle.join().expect("background thread");
        }
    }

    fn put(wal: &Shared, seq: u64, d: Durability) -> Result<()> {
        let t = wal.append(1, seq, &[7u8; 40])?;
        wal.sync(t, d)
    }

    #[test]
    fn a_write_round_never_rolls_the_background_thread_does() {
        let f = fixture();
        for seq in 1..=20 {
            put(&f.wal, seq, Durability::SyncWal).expect("put");
        }
        assert_eq!(f.wal.stats().rolls, 0, "writers do not roll");
        assert!(f.wal.state.lock().roll_wanted, "but they ask for it");
        let bg = f.start_background();
        let deadline = Instant::now() + Duration::from_secs(20);
        while f.wal.stats().rolls == 0 {
            assert!(Instant::now() < deadline, "never rolled");
            std::thread::sleep(Duration::from_millis(2));
        }
        f.stop_background(bg);
        // Every record went to the rolled segment, which the roll synced.
        let expected: Vec<u64> = (1..=20).collect();
        assert_eq!(f.seqs_after_power_cut(), expected);
    }

    #[test]
    fn without_a_sync_sync_wal_records_are_what_a_power_cut_takes() {
        // The converse, so the test above shows something.
        let f = fixture();
        for seq in 1..=5 {
            put(&f.wal, seq, Durability::SyncWal).expect("put");
        }
        assert!(f.seqs_after_power_cut().is_empty());
    }

    #[test]
    fn write_rounds_go_on_while_a_sync_is_slow() {
        let f = fixture();
        f.fs.set_sync_delay(Duration::from_millis(300));
        let wal = Arc::clone(&f.wal);
        let fsyncer = std::thread::spawn(move || put(&wal, 1, Durability::FsyncWal));
        // Wait until the sync round is under way.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !f.wal.state.lock().syncing {
            assert!(Instant::now() < deadline, "no sync round");
            std::thread::sleep(Duration::from_millis(1));
        }
        let started = Instant::now();
        for seq in 2..=4 {
            let t = f.wal.append(1, seq, b"x").expect("append");
            assert_eq!(
                f.wal.try_sync(t, Durability::SyncWal).map(|r| r.is_ok()),
                Some(true),
                "a SYNC_WAL record is written without waiting for the fdatasync"
            );
        }
        assert!(
            f.wal.state.lock().syncing,
            "still syncing: nothing waited for it"
        );
        assert!(started.elapsed() < Duration::from_millis(300));
        let t = f.wal.append(1, 5, b"x").expect("append");
        assert!(f.wal.try_sync(t, Durability::FsyncWal).is_none());
        fsyncer.join().expect("thread").expect("fsync put");
    }

    #[test]
    fn a_failed_write_loses_its_round_and_the_log_recovers() {
        let f = fixture();
        put(&f.wal, 1, Durability::SyncWal).expect("put");
        f.fs.fail_writes(1);
        let err = put(&f.wal, 2, Durability::SyncWal).expect_err("failed write");
        assert!(err.to_string().contains("not applied"), "{err}");
        let refused = f.wal.append(1, 3, b"x").expect_err("stalled");
        assert!(refused.to_string().contains("refuses writes"), "{refused}");
        assert!(matches!(f.wal.health(), WalHealth::Stalled(_)));
        assert!(f.wal.try_recover(), "recovers once the disk works");
        assert_eq!(f.wal.health(), WalHealth::Ok);
        put(&f.wal, 4, Durability::FsyncWal).expect("put after recovery");
        assert_eq!(f.seqs_after_power_cut(), vec![1, 4]);
    }

    #[test]
    fn a_failed_sync_fails_the_log_for_good() {
        let f = fixture();
        put(&f.wal, 1, Durability::FsyncWal).expect("put");
        f.fs.fail_syncs(1);
        assert!(put(&f.wal, 2, Durability::FsyncWal).is_err());
        assert!(matches!(f.wal.health(), WalHealth::Failed(_)));
        assert!(!f.wal.try_recover());
        assert!(f.wal.append(1, 3, b"x").is_err());
    }

    /// A fenced log on `fs` in a temporary `wal` directory, one record acknowledged, then the
    /// directory moved to `wal-splitting` as a master moves it before a split.
    fn moved_after_one_write(
        fs: FsRef,
    ) -> (tempfile::TempDir, std::path::PathBuf, Arc<crate::wal::Wal>) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("wal");
        let opts = WalOptions {
            fence_dir: true,
            ..WalOptions::default()
        };
        let (wal, _) = crate::wal::Wal::open(fs, &dir, opts).expect("open");
        let t = wal.append(1, 1, b"before").expect("append");
        wal.sync(t, Durability::SyncWal)
            .expect("acknowledged while in place");
        std::fs::rename(&dir, tmp.path().join("wal-splitting")).expect("the master's rename");
        (tmp, dir, wal)
    }

    /// A cluster's master renames a dead (or paused) server's WAL directory before splitting
    /// it: from then on the server acknowledges nothing, whether its file system watches the
    /// directory (local disk: inotify) or looks the path up (here, the fault-injecting one).
    #[test]
    fn a_moved_directory_fences_the_log() {
        for fs in [
            crate::fs::LocalFs::shared(),
            Arc::new(FaultFs::new()) as FsRef,
        ] {
            let (tmp, dir, wal) = moved_after_one_write(fs);
            let t = wal.append(1, 2, b"after").expect("append");
            let err = wal
                .sync(t, Durability::SyncWal)
                .expect_err("nothing is acknowledged once the directory moved");
            assert!(err.to_string().contains("is gone"), "{err}");
            // Failed, not stalled: the background thread never recovers a fenced log.
            assert!(
                matches!(wal.health(), WalHealth::Failed(_)),
                "{:?}",
                wal.health()
            );
            // Moved back, it stays fenced: the master may already be splitting it.
            std::fs::rename(tmp.path().join("wal-splitting"), &dir).expect("rename back");
            assert!(wal.append(1, 3, b"x").is_err(), "still refusing writes");
        }
    }

    /// A server that wakes after the master moved its log directory and rolls before it
    /// writes cannot start a segment outside the moved directory: the create does not make
    /// the directory again (`FileSystem::create_in_existing_dir`), on local disk and on the
    /// fault-injecting file system alike (`hdfs_wal_fence.rs` checks HDFS).
    #[test]
    fn a_roll_after_the_directory_moved_creates_nothing() {
        for fs in [
            crate::fs::LocalFs::shared(),
            Arc::new(FaultFs::new()) as FsRef,
        ] {
            let (_tmp, dir, wal) = moved_after_one_write(fs);
            assert!(
                wal.roll().is_err(),
                "no segment outside the moved directory"
            );
            assert!(!dir.exists(), "the roll made the directory again");
            let refused = wal
                .append(1, 2, b"after")
                .and_then(|t| wal.sync(t, Durability::SyncWal));
            assert!(refused.is_err(), "acknowledged after the move");
            assert!(!dir.exists());
        }
    }

    /// The fence is seen after the write: the record is in the moved segment the master
    /// splits, so its writer must hear that the outcome is unknown, never "not logged and not
    /// applied" (a retry told the write was not applied would apply it twice).
    #[test]
    fn a_write_the_fence_caught_after_it_reached_the_log_is_reported_unknown() {
        let (tmp, _dir, wal) = moved_after_one_write(crate::fs::LocalFs::shared());
        let moved = tmp.path().join("wal-splitting");
        let t = wal.append(1, 2, b"after").expect("append");
        let err = wal
            .sync(t, Durability::SyncWal)
            .expect_err("not acknowledged once the directory moved");
        assert!(
            matches!(err, Error::OutcomeUnknown(_)),
            "the writer must hear the outcome is unknown: {err}"
        );
        assert!(!err.to_string().contains("not logged"), "{err}");
        // And it is unknown indeed: the master's split of the moved log finds the record.
        let split = reader::recover(&crate::fs::LocalFs, &moved, false).expect("read the log");
        let seqs: Vec<u64> = split.records.iter().map(|r| r.seq).collect();
        assert_eq!(
            seqs,
            vec![1, 2],
            "the refused write is in the log the master splits"
        );
    }
}
