//! A region as the server holds it: identity and key range (fixed for its life), the open
//! engine region when it is serving, its row locks and its reported state.

use super::{RegionLocation, RegionState, RowGuard, RowLocks};
use crate::coord::ServerRecord;
use crate::error::ServerError;
use bytes::Bytes;
use cellar_storage::region::{Region, RegionInfo};
use parking_lot::RwLock;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// One region of a table on this server. The engine region sits in a slot: calls use it
/// under a read lock; closing or splitting takes it out under the write lock, which waits
/// only for the calls already inside. Later calls find the slot empty: NOT_SERVING_REGION.
pub struct HostedRegion {
    pub table: String,
    pub info: RegionInfo,
    pub dir: PathBuf,
    slot: RwLock<Option<Region>>,
    /// Set while the region is being taken out: new calls fail at once instead of queueing
    /// on the slot behind the closer (which may wait for a long flush or compaction inside).
    closing: AtomicBool,
    /// Bumped each time a region is put in or taken out, so a scanner can tell that the
    /// region it was opened on is gone even if the same id serves again (after an alter).
    epoch: AtomicU64,
    state: AtomicU8,
    locks: RowLocks,
    /// On the master of a cluster: the region server the region is assigned to (its slot
    /// stays empty there). `None` here: this process serves it, or nobody does yet.
    server: RwLock<Option<Arc<ServerRecord>>>,
    /// On a cluster's master: the number of the last OPEN_REGION sent for this region (meta's
    /// `info:openseq`), and whether that open went unanswered (it may yet happen on `server`,
    /// so the region opens nowhere else before that server answers a CLOSE_REGION fencing it
    /// off, or is dead with its log split).
    open_seq: AtomicU64,
    unanswered: AtomicBool,
}

impl HostedRegion {
    pub fn new(
        table: &str,
        info: RegionInfo,
        dir: &Path,
        region: Option<Region>,
    ) -> Arc<HostedRegion> {
        let state = if region.is_some() {
            RegionState::Open
        } else {
            RegionState::Closed
        };
        Arc::new(HostedRegion {
            table: table.to_string(),
            info,
            dir: dir.to_path_buf(),
            slot: RwLock::new(region),
            closing: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            state: AtomicU8::new(state.code()),
            locks: RowLocks::new(),
            server: RwLock::new(None),
            open_seq: AtomicU64::new(0),
            unanswered: AtomicBool::new(false),
        })
    }

    /// Runs `f` on the open region; NOT_SERVING_REGION when it is closed or being split.
    pub fn with<T>(
        &self,
        f: impl FnOnce(&Region) -> Result<T, ServerError>,
    ) -> Result<T, ServerError> {
        if self.closing.load(Ordering::Acquire) {
            return Err(self.not_serving("it is closing or being split"));
        }
        let slot = self.slot.read();
        match slot.as_ref() {
            Some(r) => f(r),
            None => Err(self.not_serving("it is closed or being split")),
        }
    }

    /// [`HostedRegion::with`] for the network reactor: `None` instead of waiting when the
    /// region is being taken out (its lock is held or wanted by a closer).
    pub fn try_with<T>(
        &self,
        f: impl FnOnce(&Region) -> Option<Result<T, ServerError>>,
    ) -> Option<Result<T, ServerError>> {
        if self.closing.load(Ordering::Acquire) {
            return None;
        }
        let slot = self.slot.try_read()?;
        f(slot.as_ref()?)
    }

    /// Runs `f` on the open region, if any (background work: no error when closed).
    pub fn if_open<T>(&self, f: impl FnOnce(&Region) -> T) -> Option<T> {
        if self.closing.load(Ordering::Acquire) {
            return None;
        }
        self.slot.read().as_ref().map(f)
    }

    pub fn is_open(&self) -> bool {
        !self.closing.load(Ordering::Acquire) && self.slot.read().is_some()
    }

    /// Takes the region out (waiting for calls inside it) and reports `state`.
    pub fn take(&self, state: RegionState) -> Option<Region> {
        self.closing.store(true, Ordering::Release);
        let mut slot = self.slot.write();
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.state.store(state.code(), Ordering::SeqCst);
        slot.take()
    }

    /// Puts an open region in; the region serves from now on.
    pub fn put(&self, region: Region) {
        let mut slot = self.slot.write();
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.state.store(RegionState::Open.code(), Ordering::SeqCst);
        *slot = Some(region);
        self.closing.store(false, Ordering::Release);
    }

    /// Changes the reported state only.
    pub fn set_state(&self, state: RegionState) {
        self.state.store(state.code(), Ordering::SeqCst);
    }

    pub fn state(&self) -> RegionState {
        RegionState::from_code(self.state.load(Ordering::SeqCst))
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The lock every mutation of `row` holds (see [`RowLocks`]).
    pub fn lock_row(&self, row: &Bytes) -> RowGuard {
        self.locks.lock(row)
    }

    /// [`HostedRegion::lock_row`] for the network reactor: `None` instead of waiting.
    pub fn try_lock_row(&self, row: &Bytes) -> Option<RowGuard> {
        self.locks.try_lock(row)
    }

    /// HBase's region name: `table,start_key,region_id`.
    pub fn name(&self) -> String {
        crate::names::region_name(&self.table, &self.info.start_key, self.info.id)
    }

    /// The region server a master assigned this region to.
    pub fn server(&self) -> Option<Arc<ServerRecord>> {
        self.server.read().clone()
    }

    /// The number of the last OPEN_REGION sent for this region (0: none yet).
    pub fn open_seq(&self) -> u64 {
        self.open_seq.load(Ordering::SeqCst)
    }

    /// Takes the next open number.
    pub fn next_open_seq(&self) -> u64 {
        self.open_seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Makes later open numbers larger than `seq` (meta's, when a master takes over).
    pub fn note_open_seq(&self, seq: u64) {
        self.open_seq.fetch_max(seq, Ordering::SeqCst);
    }

    /// Whether the last OPEN_REGION went unanswered (see the field).
    pub fn open_unanswered(&self) -> bool {
        self.unanswered.load(Ordering::SeqCst)
    }

    pub fn set_open_unanswered(&self, unanswered: bool) {
        self.unanswered.store(unanswered, Ordering::SeqCst);
    }

    /// Records where the region is assigned, and its state there.
    pub fn assign(&self, server: Option<Arc<ServerRecord>>, state: RegionState) {
        *self.server.write() = server;
        self.set_state(state);
    }

    /// Where the region is, for clients: its assigned server, else `here`.
    pub fn location(&self, here: &str) -> RegionLocation {
        let server = match self.server() {
            Some(s) => s.native_addr.clone(),
            None => here.to_string(),
        };
        RegionLocation {
            table: self.table.clone(),
            info: self.info.clone(),
            server,
            name: self.name(),
            state: self.state(),
        }
    }

    /// NOT_SERVING_REGION for this region, with why.
    pub fn not_serving(&self, reason: &str) -> ServerError {
        ServerError::not_serving(&self.table, self.info.id, reason)
    }

    /// NOT_SERVING_REGION unless `row` is inside the region.
    pub fn check_row(&self, row: &[u8]) -> Result<(), ServerError> {
        if self.info.contains_row(row) {
            Ok(())
        } else {
            Err(self.not_serving(&format!(
                "row {:?} is outside [{:?}, {:?})",
                String::from_utf8_lossy(row),
                String::from_utf8_lossy(&self.info.start_key),
                String::from_utf8_lossy(&self.info.end_key)
            )))
        }
    }
}
