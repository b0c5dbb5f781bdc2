//! Region splits: the automatic split checker, SPLIT_TABLE, the crash-safe split procedure
//! and the janitor that removes retired regions (split parents, and merge parents from
//! `merge_procedure.rs`) once nothing reads their files.
//!
//! Split size (Hypertable's policy): a table's regions split once they hold
//! `split.initial_bytes`; each split of the table doubles that, up to `split.max_bytes`. The
//! count is kept in the table's meta row, so the size survives restarts.
//!
//! The procedure (`docs/design/0002-server.md`), under the admin lock:
//! 1. the parent's meta row: `state=SPLITTING`, `splitA`/`splitB` = the planned daughters;
//! 2. the parent leaves the router's slot (calls get NOT_SERVING_REGION and locate again) and
//!    `Region::split` flushes it and writes the daughters' directories with `.ref` files;
//! 3. one mutation of the parent row, `state=SPLIT` + both daughters: the commit point;
//! 4. the daughters' rows (`OPEN`), the daughters open (their first compaction rewrites the
//!    references), and the router swaps parent for daughters in one step.
//!
//! Recovery (`region_server::restart`): `SPLITTING` → daughter directories removed, parent
//! reopened (its WAL records replay); `SPLIT` → missing daughter rows written. A region that
//! still has references is never split, so a parent's files are only ever read by its own
//! daughters, and the janitor can drop the parent once neither daughter has references.

use crate::error::ServerError;
use crate::master::Master;
use crate::names;
use crate::region_server::split_check::{split_point, table_split_size};
use crate::region_server::RetiredRegion;
use crate::router::{HostedRegion, RegionState, TableRoute, TableState};
use bytes::Bytes;
use cellar_storage::region::RegionInfo;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where [`Master::split_interrupted`] stops, as if the process died there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitStep {
    /// The parent's row says SPLITTING; nothing else happened.
    Marked,
    /// The daughters' directories are written and the parent is closed; not committed.
    DaughtersWritten,
    /// The parent's row says SPLIT; the daughters have no rows yet.
    Committed,
}

impl Master {
    /// One round of the split thread: the janitor, then automatic splits.
    pub(crate) fn split_tick(&self) {
        self.janitor();
        if self.archive_due() {
            let _admin = self.rs.admin.lock();
            if self.rs.check_running().is_ok() {
                self.clean_archive_locked();
            }
        }
        if self.rs.config.split.auto {
            self.auto_split();
        }
    }

    fn auto_split(&self) {
        let cfg = &self.rs.config.split;
        let mut candidates = Vec::new();
        for (name, t) in self.rs.router.tables() {
            if names::is_system(&name) || t.state != TableState::Enabled {
                continue;
            }
            let limit = table_split_size(cfg, &t);
            for hosted in t.regions.values() {
                let big = hosted.if_open(|r| {
                    let s = r.stats();
                    !r.has_references() && s.store_file_bytes + s.memstore_bytes >= limit
                });
                if big == Some(true) {
                    candidates.push(Arc::clone(hosted));
                }
            }
        }
        for hosted in candidates {
            let _admin = self.rs.admin.lock();
            if self.rs.check_running().is_err() {
                return;
            }
            // Still here, still big enough now that earlier splits may have raised the size.
            let Some(t) = self.rs.router.table(&hosted.table) else {
                continue;
            };
            if t.state != TableState::Enabled || self.rs.router.region(hosted.info.id).is_none() {
                continue;
            }
            let limit = table_split_size(cfg, &t);
            if let Some(row) = split_point(&hosted, limit) {
                if let Err(e) = self.split_region(&hosted, row, None) {
                    tracing::error!(table = %hosted.table, region = hosted.info.id, error = %e, "automatic split failed");
                }
            }
        }
    }

    /// Splits a table's regions: at `split_row` (the region holding it), or each region at
    /// its middle row (regions too small to split are left alone, as HBase does).
    pub fn split_table(&self, name: &str, split_row: Option<Bytes>) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        let (name, t) = self.splittable(name)?;
        match split_row {
            Some(row) => {
                if row.is_empty() {
                    return Err(ServerError::invalid("split row is empty"));
                }
                let hosted = t.region_for_row(&row).cloned().ok_or_else(|| {
                    ServerError::Internal(format!("table '{name}' has no region for the split row"))
                })?;
                self.split_at(&hosted, row)
            }
            None => {
                for hosted in t.regions.values() {
                    if let Some(row) = self.prepare_split(hosted)? {
                        self.split_region(hosted, row, None)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Splits one region of `table`, named by id, at `split_row` or else at its middle row:
    /// HBase's `SplitRegion` (`Admin.split`, `splitRegionAsync`). A row outside the region or
    /// at its start, or no row on a region too small to have a middle, is refused.
    pub fn split_region_by_id(
        &self,
        table: &str,
        region_id: u64,
        split_row: Option<Bytes>,
    ) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        let (name, t) = self.splittable(table)?;
        let hosted = t
            .regions
            .values()
            .find(|h| h.info.id == region_id)
            .cloned()
            .ok_or_else(|| {
                // Not NotServingRegion: a client would retry that with the same stale region.
                ServerError::invalid(format!(
                    "region {region_id} of table '{name}' is not open (already split, closed or \
                     unknown); look the table's regions up again"
                ))
            })?;
        match split_row {
            Some(row) => {
                let info = &hosted.info;
                let inside =
                    row > info.start_key && (info.end_key.is_empty() || row < info.end_key);
                if !inside {
                    return Err(ServerError::invalid(format!(
                        "split row {:?} is not inside region {region_id} of table '{name}' \
                         (rows from {:?} to {:?}, the start excluded)",
                        String::from_utf8_lossy(&row),
                        String::from_utf8_lossy(&info.start_key),
                        String::from_utf8_lossy(&info.end_key),
                    )));
                }
                self.split_at(&hosted, row)
            }
            None => match self.prepare_split(&hosted)? {
                Some(row) => self.split_region(&hosted, row, None),
                None => Err(ServerError::invalid(format!(
                    "region {region_id} of table '{name}' has no middle row to split at (it \
                     holds too few rows); name a split row"
                ))),
            },
        }
    }

    /// The route of a table that may be split: a running server, a user table, enabled.
    fn splittable(&self, name: &str) -> Result<(String, TableRoute), ServerError> {
        self.rs.check_running()?;
        let name = names::canonical(name)?;
        if names::is_system(&name) {
            return Err(ServerError::invalid(format!(
                "table '{name}' is a system table and cannot be split"
            )));
        }
        let t = self.rs.router.require(&name)?;
        if t.state == TableState::Disabled {
            return Err(ServerError::TableDisabled(name));
        }
        Ok((name, t))
    }

    /// Splits `hosted` at `row`, which must not be where it starts; the admin lock is held.
    fn split_at(&self, hosted: &Arc<HostedRegion>, row: Bytes) -> Result<(), ServerError> {
        if row == hosted.info.start_key {
            return Err(ServerError::invalid(format!(
                "split row {:?} is where region {} already starts",
                String::from_utf8_lossy(&row),
                hosted.info.id
            )));
        }
        self.prepare_split(hosted)?;
        self.split_region(hosted, row, None)
    }

    /// Readies a region for a split (flushed, no references left) and returns its middle
    /// row, if it has one.
    fn prepare_split(&self, hosted: &Arc<HostedRegion>) -> Result<Option<Bytes>, ServerError> {
        if let Some(a) = self.assignment() {
            return a.prepare_split(hosted);
        }
        hosted.with(|r| {
            r.flush()?;
            if r.has_references() {
                r.compact(true)?;
            }
            Ok(r.middle_row())
        })
    }

    /// Runs the split procedure on the region of `table` holding `row` and stops at `step`
    /// as if the process died there: for crash-recovery tests. Drop the server afterwards
    /// (without `shutdown`) and open it again.
    #[doc(hidden)]
    pub fn split_interrupted(
        &self,
        table: &str,
        row: &[u8],
        step: SplitStep,
    ) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        let hosted = self.rs.router.locate(table, row)?;
        hosted.with(|r| Ok(r.flush()?))?;
        self.split_region(&hosted, Bytes::copy_from_slice(row), Some(step))
    }

    /// The split procedure (module docs); the caller holds the admin lock. `stop`: tests only.
    fn split_region(
        &self,
        hosted: &Arc<HostedRegion>,
        row: Bytes,
        stop: Option<SplitStep>,
    ) -> Result<(), ServerError> {
        if let Some(a) = self.assignment() {
            return self.split_remote(a, hosted, row);
        }
        let table = hosted.table.clone();
        let t = self.rs.router.require(&table)?;
        let parent = hosted.info.clone();
        let [a, b] = self.daughters(&parent, &row);
        let mut rec = self
            .rs
            .record(&table, parent.clone(), RegionState::Splitting);
        rec.split_a = Some(a.clone());
        rec.split_b = Some(b.clone());
        self.rs.meta()?.put_region(&rec)?;
        hosted.set_state(RegionState::Splitting);
        if stop == Some(SplitStep::Marked) {
            return Ok(());
        }

        let Some(region) = hosted.take(RegionState::Splitting) else {
            // Closed under us (cannot happen under the admin lock): undo step 1.
            rec.split_a = None;
            rec.split_b = None;
            rec.state = RegionState::Closed;
            return self.rs.meta()?.put_region(&rec);
        };
        let dir_a = self.rs.region_dir(&table, a.id);
        let dir_b = self.rs.region_dir(&table, b.id);
        if let Err(e) = region.split(&row, (dir_a.clone(), a.id), (dir_b.clone(), b.id)) {
            // The parent is closed and its unflushed edits are only in the WAL: it stays
            // offline, SPLITTING in meta, until a restart rolls the split back and replays them.
            hosted.set_state(RegionState::Offline);
            let _ = self.rs.services.fs.delete_dir_all(&dir_a);
            let _ = self.rs.services.fs.delete_dir_all(&dir_b);
            tracing::error!(table = %table, region = parent.id, error = %e, "split failed; the region is offline until the server restarts");
            return Err(e.into());
        }
        if stop == Some(SplitStep::DaughtersWritten) {
            return Ok(());
        }
        rec.state = RegionState::Split;
        if let Err(e) = self.rs.meta()?.put_region(&rec) {
            hosted.set_state(RegionState::Offline);
            tracing::error!(table = %table, region = parent.id, error = %e, "could not commit a split; the region is offline until the server restarts");
            return Err(e);
        }
        hosted.set_state(RegionState::Split);
        if stop == Some(SplitStep::Committed) {
            return Ok(());
        }

        let mut daughters = Vec::with_capacity(2);
        for (info, dir) in [(a.clone(), dir_a), (b.clone(), dir_b)] {
            self.rs
                .meta()?
                .put_region(&self.rs.record(&table, info.clone(), RegionState::Open))?;
            let region = match self.rs.open_region(&table, &info, &t.schema, &[]) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::error!(table = %table, region = info.id, error = %e, "a split daughter did not open; it is offline until the server restarts");
                    None
                }
            };
            let d = HostedRegion::new(&table, info, &dir, region);
            if !d.is_open() {
                d.set_state(RegionState::Offline);
            }
            daughters.push(d);
        }
        let [da, db]: [Arc<HostedRegion>; 2] = daughters
            .try_into()
            .map_err(|_| ServerError::Internal("split made other than two daughters".into()))?;
        self.rs.router.swap_split(&table, parent.id, [da, db]);
        self.rs.retired_regions.lock().push(RetiredRegion {
            table: table.clone(),
            info: parent.clone(),
            successors: vec![a.id, b.id],
        });
        self.rs.splits_done.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = self.rs.router.table(&table) {
            self.rs.meta()?.put_table(&crate::meta::TableRecord {
                schema: (*t.schema).clone(),
                state: t.state,
                splits: t.splits,
                truncate_to: None,
            })?;
        }
        tracing::info!(
            table = %table,
            parent = parent.id,
            daughter_a = a.id,
            daughter_b = b.id,
            at = %String::from_utf8_lossy(&row),
            "region split"
        );
        Ok(())
    }

    /// Removes retired regions (split or merge parents) none of whose successors still reads
    /// their files.
    fn janitor(&self) {
        let parents = self.rs.retired_regions.lock().clone();
        for p in parents {
            let done = p
                .successors
                .iter()
                .all(|d| match self.rs.router.region(*d) {
                    // Open and compacted: no reference left.
                    Some(h) => h.if_open(|r| !r.has_references()).unwrap_or(false),
                    // Split again itself, which needs no references: nothing of ours is read.
                    None => true,
                });
            if !done {
                continue;
            }
            let _admin = self.rs.admin.lock();
            let still_listed = self.rs.retired_regions.lock().contains(&p);
            if !still_listed || self.rs.check_running().is_err() {
                continue;
            }
            self.remove_retired_region(&p);
        }
    }

    /// Deletes a split parent's directory and meta row, and forgets it; a failure is logged
    /// and the parent stays listed for a later pass.
    pub(crate) fn remove_retired_region(&self, p: &RetiredRegion) {
        let removed = self
            .rs
            .services
            .fs
            .delete_dir_all(&self.rs.region_dir(&p.table, p.info.id))
            .map_err(ServerError::from)
            .and_then(|()| self.rs.meta()?.delete_region(&p.table, &p.info));
        match removed {
            Ok(()) => {
                self.rs.retired_regions.lock().retain(|q| q != p);
                tracing::info!(table = %p.table, region = p.info.id, "retired region removed (a split or merge parent)");
            }
            Err(e) => {
                tracing::warn!(table = %p.table, region = p.info.id, error = %e, "could not remove a retired region; will retry")
            }
        }
    }

    /// The two regions `parent` splits into at `row`, with new ids.
    pub(crate) fn daughters(&self, parent: &RegionInfo, row: &Bytes) -> [RegionInfo; 2] {
        [
            RegionInfo {
                id: self.rs.next_region_id(),
                start_key: parent.start_key.clone(),
                end_key: row.clone(),
            },
            RegionInfo {
                id: self.rs.next_region_id(),
                start_key: row.clone(),
                end_key: parent.end_key.clone(),
            },
        ]
    }

    /// Split parents not yet removed (for tests and status).
    pub fn pending_retired_regions(&self) -> Vec<RetiredRegion> {
        self.rs.retired_regions.lock().clone()
    }
}
