//! The write-ahead log: one per region server, shared by its regions. The segment format is
//! specified in `docs/wal-format.md`.
//!
//! HOT PATH: every logged write appends here. Group commit: many writers, one flush/sync.

use crate::fs::FsRef;
use bytes::Bytes;
use cellar_model::{Durability, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct WalOptions {
    /// A segment is rolled once it is this large.
    pub segment_size: u64,
    /// How soon ASYNC_WAL records reach the OS.
    pub async_flush_interval: Duration,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_size: 64 * 1024 * 1024,
            async_flush_interval: Duration::from_millis(100),
        }
    }
}

/// A record read back during replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    pub region: u64,
    pub seq: u64,
    pub payload: Bytes,
}

/// Thread-safe; share as `Arc<Wal>`.
pub struct Wal {}

impl Wal {
    /// Opens the log in `dir` (creating it), replays every existing segment in order and
    /// returns their records; then starts a new segment. A torn tail (an incomplete last record)
    /// is truncated with a warning; any other damage is a `Checksum`/`Corruption` error naming
    /// the segment and offset. Replayed segments are kept until their regions mark the data
    /// flushed.
    pub fn open(fs: FsRef, dir: &Path, opts: WalOptions) -> Result<(Arc<Wal>, Vec<WalRecord>)> {
        let _ = (fs, dir, opts);
        unimplemented!()
    }

    /// Appends a record to the buffer and returns its ticket. Records reach the log in the
    /// order `append` calls return.
    pub fn append(&self, region: u64, seq: u64, payload: &[u8]) -> Result<u64> {
        let _ = (region, seq, payload);
        unimplemented!()
    }

    /// Returns once the record with `ticket` (and all before it) meets `durability`:
    /// `SyncWal`: written to the OS; `FsyncWal`: fdatasync'ed; `AsyncWal`/`SkipWal`: at once.
    /// One flush/sync serves every waiter whose record it covers (group commit).
    pub fn sync(&self, ticket: u64, durability: Durability) -> Result<()> {
        let _ = (ticket, durability);
        unimplemented!()
    }

    /// Everything `region` logged with a sequence id ≤ `seq` is in durable store files.
    /// Segments none of whose records are still needed are deleted (never the active one).
    pub fn mark_flushed(&self, region: u64, seq: u64) {
        let _ = (region, seq);
        unimplemented!()
    }

    /// Closes the active segment and starts a new one.
    pub fn roll(&self) -> Result<()> {
        unimplemented!()
    }

    /// Paths of the segments still on disk, oldest first.
    pub fn segments(&self) -> Vec<PathBuf> {
        unimplemented!()
    }

    /// Flushes and syncs, stops the background thread. Later appends fail.
    pub fn close(&self) -> Result<()> {
        unimplemented!()
    }
}
