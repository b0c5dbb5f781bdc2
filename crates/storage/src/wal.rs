//! The write-ahead log: one per region server, shared by its regions. The segment format is
//! specified in `docs/wal-format.md`.
//!
//! HOT PATH: every logged write appends here. Group commit: many writers, one flush/sync.
//!
//! Layout: [`format`] (segment header, record framing, checksums), `writer` (the active
//! segment), `commit` (append buffer, write and sync rounds, background thread, rolling,
//! failures), `reader` (replay: prefix, torn tails, corruption), `segments` (segment names and
//! per-region bookkeeping for deletion), [`log_split`] (failover: a dead server's log split by
//! region).

mod commit;
// `format` and `reader` are the crate's, not private: `crate::fuzzing` hands the fuzz targets
// the segment codec and the replay of one segment.
pub(crate) mod format;
pub mod log_split;
pub(crate) mod reader;
mod segments;
mod writer;

/// Sizes in the segment format (`docs/wal-format.md`): where a segment's records begin and
/// how long a record's header is, for tools and tests that find a record by its offset.
pub use format::{HEADER_LEN as SEGMENT_HEADER_LEN, RECORD_HEADER_LEN};

use crate::fs::FsRef;
use bytes::Bytes;
use cellar_model::{Durability, Error, Result};
use commit::Shared;
pub use commit::WalHealth;
use parking_lot::Mutex;
/// One segment's records, for readers outside the log (tests, tools).
pub use reader::{replay_segment, SegmentReplay};
use segments::{SegmentMeta, SegmentSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use writer::SegmentWriter;

/// How the log is laid out and flushed.
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// A segment is rolled once it is this large.
    pub segment_size: u64,
    /// How soon ASYNC_WAL records reach the OS.
    pub async_flush_interval: Duration,
    /// Records buffered and not yet in the OS beyond which writers wait (ASYNC_WAL writers
    /// would otherwise outrun the disk and grow memory without bound).
    pub max_buffered_bytes: usize,
    /// On open, move damaged segments aside and replay what precedes the damage instead of
    /// failing (HBase's `hbase.hlog.split.skip.errors`). Records after the damage are lost.
    pub skip_errors: bool,
    /// After each write round, check that the log's directory is still where it was before
    /// anything is acknowledged: a cluster's master renames a dead (or paused) server's WAL
    /// directory before splitting it, and a server that finds it gone stops acknowledging
    /// writes (a fence on file systems without leases). On HDFS the check is not needed, so
    /// not made (it would be a NameNode request per round): the master recovers the lease of
    /// every segment in the moved directory before it reads it, after which the old writer
    /// cannot make a byte durable (what it made durable before is in the split), and a new
    /// segment is created only inside the existing directory, never remaking it, so a segment
    /// either moved with the directory (and is taken over and split) or was never created.
    pub fence_dir: bool,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_size: 64 * 1024 * 1024,
            async_flush_interval: Duration::from_millis(100),
            max_buffered_bytes: 64 * 1024 * 1024,
            skip_errors: false,
            fence_dir: false,
        }
    }
}

/// A record read back during replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// The region the record belongs to.
    pub region: u64,
    /// The region's sequence id of the edit.
    pub seq: u64,
    /// The edit itself, opaque to the log.
    pub payload: Bytes,
}

/// Counters since the log was opened: how well group commit is doing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Records appended.
    pub appends: u64,
    /// Framed bytes handed to segment files (segment headers not counted).
    pub bytes_written: u64,
    /// Write rounds that handed bytes to the OS.
    pub flushes: u64,
    /// fdatasyncs of segment files.
    pub syncs: u64,
    /// Segments rolled (closed and replaced by a new one).
    pub rolls: u64,
    /// Microseconds writers waited on rolls (the last sync of the full segment and the swap,
    /// done holding write leadership).
    pub roll_hold_us: u64,
    /// Failed writes and syncs.
    pub failures: u64,
    /// Times a stalled log recovered by itself.
    pub recoveries: u64,
}

impl WalStats {
    /// Records per fdatasync: above 1 means group commit shared syncs between writers.
    pub fn records_per_sync(&self) -> f64 {
        self.appends as f64 / self.syncs.max(1) as f64
    }
}

/// The write-ahead log. Thread-safe; share as `Arc<Wal>`. Dropping it flushes what is
/// buffered (without syncing) and stops its background thread; call [`Wal::close`] to sync.
pub struct Wal {
    shared: Arc<Shared>,
    background: Mutex<Option<JoinHandle<()>>>,
    /// Held while the log is open; let go by [`Wal::close`].
    lock: Mutex<Option<crate::fs::LockGuard>>,
}

/// The lock file in a WAL directory, held while a log is open on it.
pub const LOCK_FILE: &str = "LOCK";

impl Wal {
    /// Opens the log in `dir` (creating it durably), takes its lock file (a second log on the
    /// same directory, in this process or another, is refused), replays every existing segment
    /// in order and returns their records; then starts a new segment. A torn tail is truncated
    /// with a warning; any other damage is a `Corruption` error naming the segment and offset
    /// (or, with `skip_errors`, is moved aside and logged). Replayed segments are kept until
    /// their regions mark the data flushed.
    pub fn open(fs: FsRef, dir: &Path, opts: WalOptions) -> Result<(Arc<Wal>, Vec<WalRecord>)> {
        crate::fs::create_dir_durable(&*fs, dir)?;
        let lock = fs.lock(&dir.join(LOCK_FILE))?;
        let recovered = reader::recover(&*fs, dir, opts.skip_errors)?;
        let salt = format::new_salt(recovered.next_id);
        let active = SegmentWriter::create(&*fs, dir, recovered.next_id, salt)?;
        let mut set = SegmentSet::default();
        for seg in recovered.segments {
            set.push(seg);
        }
        set.push(SegmentMeta::new(active.id(), active.path().to_path_buf()));
        // Replayed segments holding no record at all need no flush to go.
        let empty = set.take_obsolete();
        // Watched from now on: a move of the directory after this point is always seen.
        let watch = if opts.fence_dir {
            fs.watch_dir(dir)?
        } else {
            None
        };
        let shared = Arc::new(Shared::new(fs, dir, opts, active, set, watch));
        shared.delete_segments(empty);
        let bg = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("cellar-wal-flush".into())
            .spawn(move || bg.run_background())
            .map_err(|e| Error::io(dir.display(), e))?;
        let wal = Wal {
            shared,
            background: Mutex::new(Some(handle)),
            lock: Mutex::new(Some(lock)),
        };
        Ok((Arc::new(wal), recovered.records))
    }

    /// Whether the log accepts writes (see [`WalHealth`]).
    pub fn health(&self) -> WalHealth {
        self.shared.health()
    }

    /// An error naming why, if the log refuses writes now; one atomic load when it does not.
    pub fn check_accepting(&self) -> Result<()> {
        self.shared.check_accepting()
    }

    /// Bytes of records buffered and not yet handed to the OS (at most about
    /// `max_buffered_bytes`).
    pub fn buffered_bytes(&self) -> usize {
        self.shared.buffered_bytes()
    }

    /// Whether the buffer of records not yet in the OS is under `max_buffered_bytes`.
    pub fn has_room(&self) -> bool {
        self.shared.has_room()
    }

    /// Waits until the buffer is under `max_buffered_bytes`, writing it out if nobody is.
    pub fn wait_for_room(&self) {
        self.shared.wait_for_room()
    }

    /// [`Wal::sync`] for an async task that must not block its thread (a network reactor):
    /// ready when the record is as durable as asked, else the task is woken when a round ends.
    pub fn poll_sync(
        &self,
        ticket: u64,
        durability: Durability,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<()>> {
        self.shared.poll_sync(ticket, durability, cx)
    }

    /// [`Wal::sync`] for a thread that must not wait: `None` when the durability needs an
    /// fdatasync or another round is in progress; otherwise the answer (after writing the
    /// buffer to the OS itself if needed).
    pub fn try_sync(&self, ticket: u64, durability: Durability) -> Option<Result<()>> {
        self.shared.try_sync(ticket, durability)
    }

    /// Appends a record to the buffer and returns its ticket. Records reach the log in the
    /// order `append` calls return.
    pub fn append(&self, region: u64, seq: u64, payload: &[u8]) -> Result<u64> {
        self.shared.append(region, seq, payload)
    }

    /// Returns once the record with `ticket` (and all before it) meets `durability`:
    /// `SyncWal`: written to the OS; `FsyncWal`: fdatasync'ed; `AsyncWal`/`SkipWal`: at once.
    /// One flush/sync serves every waiter whose record it covers (group commit).
    pub fn sync(&self, ticket: u64, durability: Durability) -> Result<()> {
        self.shared.sync(ticket, durability)
    }

    /// Everything `region` logged with a sequence id ≤ `seq` is in durable store files.
    /// Segments none of whose records are still needed are deleted (never the active one).
    pub fn mark_flushed(&self, region: u64, seq: u64) {
        self.shared.mark_flushed(region, seq)
    }

    /// Closes the active segment and starts a new one.
    pub fn roll(&self) -> Result<()> {
        self.shared.roll()
    }

    /// Paths of the segments still on disk, oldest first.
    pub fn segments(&self) -> Vec<PathBuf> {
        self.shared.segment_paths()
    }

    /// Group-commit counters since the log was opened.
    pub fn stats(&self) -> WalStats {
        self.shared.stats()
    }

    /// Flushes and syncs, stops the background thread, lets go of the directory. Later
    /// appends fail.
    pub fn close(&self) -> Result<()> {
        let result = self.shared.close();
        self.join_background();
        drop(self.lock.lock().take());
        result
    }

    fn join_background(&self) {
        if let Some(handle) = self.background.lock().take() {
            if handle.join().is_err() {
                tracing::error!("WAL background thread panicked");
            }
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.shared.shutdown();
        self.join_background();
    }
}
