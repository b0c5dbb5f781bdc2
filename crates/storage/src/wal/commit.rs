//! Group commit: many writers, one write and at most one fdatasync per round.
//!
//! HOT PATH. `append` frames the record (CRC) outside every lock, then under the state mutex
//! only copies it into the shared buffer and takes a ticket. No IO, no allocation beyond buffer
//! growth, no logging under that mutex.
//!
//! Protocol (leader/follower). A writer that must wait for its ticket and finds no flush in
//! progress becomes the leader: it takes the whole buffer (swapping in a spare, so nothing is
//! allocated), releases the state mutex, writes the batch to the active segment, fdatasyncs if
//! any waiter asked for `FsyncWal`, then publishes the new `written`/`synced` tickets and wakes
//! everyone. Writers arriving meanwhile append to the fresh buffer and wait; the next leader
//! takes all of them at once, so one write/sync serves many waiters. A background thread leads
//! a round every `async_flush_interval` (and when the buffer grows large) for `AsyncWal`.
//!
//! Invariants: tickets are handed out 1, 2, 3… in buffer order; `synced ≤ written < next`;
//! at most one leader (`flushing`); every segment but the active one and the one in `closing`
//! is fully synced, and a sync round syncs `closing` before the active segment, so it covers
//! every record before it. A failed round, or a failed sync of `closing`, poisons the log:
//! every waiter and every later call gets `WalFailed`.
//!
//! Rolls. A full segment is not synced by the round that rolls it: that fdatasync writes the
//! whole segment (64 MiB) out and took 70 ms, on a network thread, with every writer behind
//! it. The round opens the next segment and leaves the old one in `closing`; the background
//! thread syncs it, unless a round that must sync (`FsyncWal`, a close) or the next roll gets
//! there first. A `SyncWal` acknowledgement promises the OS has the record, which a segment
//! in `closing` keeps.
//!
//! Lock order: `state` is never held while waiting for `writer` or `closing`; `writer` may
//! take `segments` and `closing`.

use super::format::{self, HEADER_LEN};
use super::segments::{SegmentMeta, SegmentSet};
use super::writer::SegmentWriter;
use super::{WalOptions, WalStats};
use crate::fs::FsRef;
use cellar_model::{Durability, Error, Result};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Buffered bytes at which the background thread is woken to write them out early.
const FLUSH_THRESHOLD: u64 = 1024 * 1024;
/// Capacity a spare buffer keeps after a round; a burst larger than this is given back.
const MAX_SPARE: usize = 4 * 1024 * 1024;

/// Everything appenders and leaders coordinate on.
#[derive(Default)]
struct State {
    /// Framed records not yet handed to the file.
    buf: Vec<u8>,
    spare_buf: Vec<u8>,
    /// Highest seq per region among the records in `buf`.
    regions: HashMap<u64, u64>,
    spare_regions: HashMap<u64, u64>,
    /// The ticket the next append gets; tickets start at 1.
    next_ticket: u64,
    /// Every ticket ≤ this is in the OS.
    written: u64,
    /// Every ticket ≤ this is fdatasync'ed.
    synced: u64,
    /// The highest ticket a waiter wants fdatasync'ed.
    fsync_wanted: u64,
    /// A leader is doing IO with the state mutex released.
    flushing: bool,
    poisoned: Option<String>,
    closed: bool,
    /// Tells the background thread to exit.
    stop: bool,
    background_poked: bool,
    stats: WalStats,
}

/// What one leader round did.
#[derive(Default)]
struct Round {
    synced: bool,
    syncs: u64,
    rolled: bool,
    /// The rolled segment waits in `closing` for its sync.
    closing: bool,
    obsolete: Vec<SegmentMeta>,
}

/// The log's shared core; the background thread holds it too.
pub struct Shared {
    fs: FsRef,
    dir: PathBuf,
    opts: WalOptions,
    flush_threshold: usize,
    state: Mutex<State>,
    /// Signalled after every round: waiters re-check their tickets.
    progress: Condvar,
    wake_background: Condvar,
    /// The active segment; `None` once closed. Only the leader locks it.
    writer: Mutex<Option<SegmentWriter>>,
    /// The segment rolled away from, written in full but perhaps not yet synced.
    closing: Mutex<Option<SegmentWriter>>,
    segments: Mutex<SegmentSet>,
    /// Poisoned or closed: lets `AsyncWal` syncs skip the state mutex when all is well.
    failed: AtomicBool,
}

impl Shared {
    pub fn new(
        fs: FsRef,
        dir: &Path,
        opts: WalOptions,
        writer: SegmentWriter,
        segments: SegmentSet,
    ) -> Shared {
        let threshold = FLUSH_THRESHOLD.min(opts.segment_size.max(1));
        Shared {
            fs,
            dir: dir.to_path_buf(),
            flush_threshold: usize::try_from(threshold).unwrap_or(usize::MAX),
            opts,
            state: Mutex::new(State {
                next_ticket: 1,
                ..State::default()
            }),
            progress: Condvar::new(),
            wake_background: Condvar::new(),
            writer: Mutex::new(Some(writer)),
            closing: Mutex::new(None),
            segments: Mutex::new(segments),
            failed: AtomicBool::new(false),
        }
    }

    fn refusal(&self, st: &State) -> Error {
        match &st.poisoned {
            Some(why) => Error::WalFailed(why.clone()),
            None => Error::Closed(format!("write-ahead log {}", self.dir.display())),
        }
    }

    pub fn append(&self, region: u64, seq: u64, payload: &[u8]) -> Result<u64> {
        let header = format::record_header(region, seq, payload)?;
        let mut st = self.state.lock();
        if st.closed || st.poisoned.is_some() {
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

    pub fn sync(&self, ticket: u64, durability: Durability) -> Result<()> {
        let fsync = match durability.resolve() {
            Durability::SkipWal => return Ok(()),
            Durability::AsyncWal => {
                if self.failed.load(Ordering::Acquire) {
                    let st = self.state.lock();
                    if let Some(why) = &st.poisoned {
                        return Err(Error::WalFailed(why.clone()));
                    }
                }
                return Ok(());
            }
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
            if let Some(why) = &st.poisoned {
                return Err(Error::WalFailed(why.clone()));
            }
            let done = if fsync { st.synced } else { st.written } >= ticket;
            if done {
                return Ok(());
            }
            if st.flushing {
                self.progress.wait(&mut st);
            } else {
                self.lead(&mut st, false, false)?;
            }
        }
    }

    pub fn roll(&self) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if st.closed || st.poisoned.is_some() {
                return Err(self.refusal(&st));
            }
            if !st.flushing {
                return self.lead(&mut st, false, true);
            }
            self.progress.wait(&mut st);
        }
    }

    /// Refuses further appends, writes and syncs what is buffered, stops the background thread
    /// (the caller joins it) and releases the active segment. Closing twice is a no-op.
    pub fn close(&self) -> Result<()> {
        let mut st = self.state.lock();
        if st.closed {
            return Ok(());
        }
        st.closed = true;
        self.failed.store(true, Ordering::Release);
        let result = loop {
            if let Some(why) = &st.poisoned {
                break Err(Error::WalFailed(why.clone()));
            }
            if !st.flushing {
                break self.lead(&mut st, true, false);
            }
            self.progress.wait(&mut st);
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
            self.failed.store(true, Ordering::Release);
            while st.flushing {
                self.progress.wait(&mut st);
            }
            if st.poisoned.is_none() {
                if let Err(e) = self.lead(&mut st, false, false) {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "WAL flush on drop failed");
                }
            }
        }
        self.stop_background(&mut st);
    }

    fn stop_background(&self, st: &mut State) {
        st.stop = true;
        self.wake_background.notify_all();
        self.progress.notify_all();
    }

    /// Runs one leader round. Called with the state locked and no round in progress; returns
    /// with it locked again. The state mutex is released for the IO.
    fn lead(
        &self,
        st: &mut MutexGuard<'_, State>,
        force_sync: bool,
        force_roll: bool,
    ) -> Result<()> {
        debug_assert!(!st.flushing);
        if let Some(why) = &st.poisoned {
            return Err(Error::WalFailed(why.clone()));
        }
        let last = st.next_ticket - 1;
        let sync = (force_sync || st.fsync_wanted > st.synced) && st.synced < last;
        if st.written == last && !sync && !force_roll {
            return Ok(());
        }
        st.flushing = true;
        let spare = std::mem::take(&mut st.spare_buf);
        let mut batch = std::mem::replace(&mut st.buf, spare);
        let spare = std::mem::take(&mut st.spare_regions);
        let mut regions = std::mem::replace(&mut st.regions, spare);

        let outcome = MutexGuard::unlocked(st, || {
            // A panic here must not leave `flushing` set forever: every waiter would hang.
            let mut round = catch_unwind(AssertUnwindSafe(|| {
                self.write_round(&batch, &regions, sync, force_roll)
            }))
            .unwrap_or_else(|_| Err(Error::WalFailed("the WAL writer panicked".into())));
            if let Ok(r) = &mut round {
                self.delete_segments(std::mem::take(&mut r.obsolete));
            }
            round
        });

        let bytes = batch.len() as u64;
        batch.clear();
        batch.shrink_to(MAX_SPARE);
        st.spare_buf = batch;
        regions.clear();
        st.spare_regions = regions;
        st.flushing = false;
        let result = match outcome {
            Ok(round) => {
                st.written = last;
                if round.synced {
                    st.synced = last;
                }
                st.stats.syncs += round.syncs;
                st.stats.rolls += u64::from(round.rolled);
                if round.closing {
                    st.background_poked = true;
                    self.wake_background.notify_one();
                }
                if bytes > 0 {
                    st.stats.flushes += 1;
                    st.stats.bytes_written += bytes;
                }
                Ok(())
            }
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "WAL write failed; log poisoned");
                st.poisoned = Some(e.to_string());
                self.failed.store(true, Ordering::Release);
                Err(e)
            }
        };
        self.progress.notify_all();
        result
    }

    /// The IO of one round: write the batch, sync if asked, roll if due.
    fn write_round(
        &self,
        batch: &[u8],
        regions: &HashMap<u64, u64>,
        sync: bool,
        force_roll: bool,
    ) -> Result<Round> {
        let mut writer = self.writer.lock();
        let seg = match writer.as_mut() {
            Some(seg) => seg,
            None => {
                return Err(Error::Closed(format!(
                    "write-ahead log {}",
                    self.dir.display()
                )))
            }
        };
        if !batch.is_empty() {
            seg.write(batch)?;
        }
        if !regions.is_empty() {
            self.segments.lock().note_batch(seg.id(), regions);
        }
        let mut round = Round::default();
        if sync {
            // `closing` first: this sync must cover every record before the active segment's.
            round.syncs += self.sync_closing()?;
            seg.sync()?;
            round.synced = true;
            round.syncs += 1;
        }
        let full = seg.len() >= self.opts.segment_size && seg.len() > HEADER_LEN as u64;
        if force_roll || full {
            let next = SegmentWriter::create(&*self.fs, &self.dir, seg.id() + 1)?;
            let mut set = self.segments.lock();
            set.push(SegmentMeta::new(next.id(), next.path().to_path_buf()));
            // The segment just closed may already be fully flushed.
            round.obsolete = set.take_obsolete();
            drop(set);
            let old = std::mem::replace(seg, next);
            round.rolled = true;
            if !round.synced {
                // Only one segment waits: an older one still waiting is synced now (a roll
                // every round would otherwise outrun the background thread).
                let mut closing = self.closing.lock();
                if let Some(mut older) = closing.take() {
                    older.sync()?;
                    round.syncs += 1;
                }
                *closing = Some(old);
                round.closing = true;
            }
        }
        Ok(round)
    }

    /// Syncs and releases the segment waiting in `closing`, if any; returns the syncs made.
    /// Holds `closing` through the sync, so a round that finds it empty knows it is synced.
    fn sync_closing(&self) -> Result<u64> {
        let mut closing = self.closing.lock();
        match closing.as_mut() {
            Some(seg) => {
                seg.sync()?;
                *closing = None;
                Ok(1)
            }
            None => Ok(0),
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

    /// The background thread: leads a round every `async_flush_interval`, or sooner when the
    /// buffer passes the flush threshold, so `AsyncWal` records reach the OS without a waiter.
    pub fn run_background(&self) {
        let interval = self.opts.async_flush_interval.max(Duration::from_millis(1));
        let mut st = self.state.lock();
        loop {
            if !st.stop && !st.background_poked {
                self.wake_background.wait_for(&mut st, interval);
            }
            st.background_poked = false;
            while st.flushing && !st.stop {
                self.progress.wait(&mut st);
            }
            if st.stop {
                return;
            }
            if st.poisoned.is_none() && st.written + 1 < st.next_ticket {
                // A failure poisons the log and reaches every waiter; nothing more to do here.
                let _ = self.lead(&mut st, false, false);
            }
            if st.poisoned.is_none() {
                let synced = MutexGuard::unlocked(&mut st, || self.sync_closing());
                match synced {
                    Ok(n) => st.stats.syncs += n,
                    Err(e) => {
                        tracing::error!(dir = %self.dir.display(), error = %e, "syncing a rolled WAL segment failed; log poisoned");
                        st.poisoned = Some(e.to_string());
                        self.failed.store(true, Ordering::Release);
                        self.progress.notify_all();
                    }
                }
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
    use std::time::Instant;

    /// A log in a fresh directory over a power-cut file system, with small segments and no
    /// background thread, so a rolled segment stays in `closing` until a round syncs it.
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
        shared.create_dir_all(&dir).expect("dir");
        let active = SegmentWriter::create(&*shared, &dir, 1).expect("segment");
        let mut set = SegmentSet::default();
        set.push(SegmentMeta::new(active.id(), active.path().to_path_buf()));
        let opts = WalOptions {
            segment_size: 256,
            async_flush_interval: Duration::from_secs(3600),
        };
        let wal = Arc::new(Shared::new(shared, &dir, opts, active, set));
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
            let rec = reader::recover(&crate::fs::LocalFs, &self.dir).expect("recover");
            rec.records.iter().map(|r| r.seq).collect()
        }
    }

    /// Appends `SyncWal` records of region 1 from `seq` on until a round rolls; returns the
    /// next seq.
    fn write_until_roll(wal: &Shared, mut seq: u64) -> u64 {
        let rolls = wal.stats().rolls;
        while wal.stats().rolls == rolls {
            let t = wal.append(1, seq, &[7u8; 40]).expect("append");
            wal.sync(t, Durability::SyncWal).expect("sync");
            seq += 1;
            assert!(seq < 1000, "no roll");
        }
        seq
    }

    #[test]
    fn a_roll_leaves_the_sync_to_later_and_an_fsync_covers_the_rolled_segment() {
        let f = fixture();
        let next = write_until_roll(&f.wal, 1);
        assert!(
            f.wal.closing.lock().is_some(),
            "the rolled segment waits for its sync"
        );
        let t = f.wal.append(1, next, b"fsynced").expect("append");
        f.wal.sync(t, Durability::FsyncWal).expect("fsync");
        assert!(
            f.wal.closing.lock().is_none(),
            "the fsync round synced it first"
        );
        let expected: Vec<u64> = (1..=next).collect();
        assert_eq!(f.seqs_after_power_cut(), expected, "all up to the fsync");
    }

    #[test]
    fn without_a_sync_the_rolled_segment_is_what_a_power_cut_takes() {
        // The converse, so the test above shows something: a rolled segment no round synced
        // loses its records to a power cut.
        let f = fixture();
        let next = write_until_roll(&f.wal, 1);
        assert!(next > 2);
        assert!(f.seqs_after_power_cut().is_empty());
    }

    #[test]
    fn the_background_thread_syncs_a_rolled_segment() {
        let f = fixture();
        let bg = Arc::clone(&f.wal);
        let handle = std::thread::spawn(move || bg.run_background());
        let next = write_until_roll(&f.wal, 1);
        let deadline = Instant::now() + Duration::from_secs(20);
        while f.wal.closing.lock().is_some() {
            assert!(Instant::now() < deadline, "never synced");
            std::thread::sleep(Duration::from_millis(2));
        }
        // Stops the background thread (the close itself fails: the power is out by then).
        let stopper = Arc::clone(&f.wal);
        f.fs.power_cut();
        let _ = stopper.close();
        handle.join().expect("background thread");
        drop(stopper);
        f.fs.restore_power();
        // Every record went to the rolled segment (a round writes its batch, then rolls).
        let expected: Vec<u64> = (1..next).collect();
        assert_eq!(f.seqs_after_power_cut(), expected);
    }
}
