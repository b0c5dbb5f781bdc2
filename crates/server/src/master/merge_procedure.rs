//! Region merges: `merge_region` / HBase's `MergeTableRegions`, the converse of a split. Two or
//! more adjacent regions of a table become one that reads their files through references
//! until its first compaction (`cellar_storage::region::Region::merge`); the janitor of
//! `split_procedure.rs` removes the parents once nothing reads their files.
//!
//! The procedure, under the admin lock:
//! 1. each parent is flushed and its own references compacted away (a region that reads a
//!    split parent's files is never merged, as it is never split: so a retired region's files
//!    are only ever read by its own successors); in a cluster, the parents are moved to the
//!    first one's server;
//! 2. the merged region's meta row: `state=MERGING`, `mergeParents` = the parents;
//! 3. the parents leave the router's slots (calls get NOT_SERVING_REGION and locate again),
//!    close with a flush, and the merged region's directory is written with `.ref` files;
//! 4. the merged row says `OPEN`: the commit point, one row mutation;
//! 5. each parent's row says `MERGED` with `mergedInto`; the merged region opens (on the
//!    parents' server) and the router swaps the parents for it in one step.
//!
//! Recovery (`region_server::restart`): a `MERGING` row → its directory and row go, the
//! parents serve again; an `OPEN` row still naming parents → the parents' rows are marked
//! `MERGED`; `MERGED` rows never open and wait for the janitor.
//!
//! Regions that do not touch are refused even when forced (HBase's `forcible` merges them into
//! one region that overlaps whatever lies between: a table with holes and overlaps is not a
//! state Cellar lets an operator reach).

use super::{Assignment, Master};
use crate::error::ServerError;
use crate::meta::RegionRecord;
use crate::names;
use crate::region_server::RetiredRegion;
use crate::router::{HostedRegion, RegionState, TableState};
use cellar_storage::region::RegionInfo;
use std::sync::Arc;

/// Where [`Master::merge_interrupted`] stops, as if the process died there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeStep {
    /// The merged region's row says MERGING; nothing else happened.
    Marked,
    /// The merged directory is written and the parents are closed; not committed.
    Written,
    /// The merged row says OPEN; the parents' rows do not say MERGED yet.
    Committed,
}

impl Master {
    /// Merges regions (each named by id, region name or encoded name; at least two, of one
    /// table, together covering one range without a gap) into one; returns the new region.
    pub fn merge_regions(
        &self,
        regions: &[String],
        forcible: bool,
    ) -> Result<RegionInfo, ServerError> {
        let _admin = self.rs.admin.lock();
        let parents = self.mergeable(regions, forcible)?;
        self.merge_locked(&parents, None)
    }

    /// The tables of the regions named (for a permission check before a merge).
    pub fn tables_of_regions(&self, regions: &[String]) -> Result<Vec<String>, ServerError> {
        let mut tables = Vec::new();
        for name in regions {
            let t = self.find_region(name)?.table.clone();
            if !tables.contains(&t) {
                tables.push(t);
            }
        }
        Ok(tables)
    }

    /// Runs the merge procedure on `regions` and stops at `step` as if the process died
    /// there: for crash-recovery tests. Drop the server afterwards (without `shutdown`) and
    /// open it again.
    #[doc(hidden)]
    pub fn merge_interrupted(
        &self,
        regions: &[String],
        step: MergeStep,
    ) -> Result<RegionInfo, ServerError> {
        let _admin = self.rs.admin.lock();
        let parents = self.mergeable(regions, false)?;
        self.merge_locked(&parents, Some(step))
    }

    /// The regions named, in key order, once checked: one enabled user table, open, adjacent.
    fn mergeable(
        &self,
        regions: &[String],
        forcible: bool,
    ) -> Result<Vec<Arc<HostedRegion>>, ServerError> {
        self.rs.check_running()?;
        let mut parents = Vec::with_capacity(regions.len());
        for name in regions {
            let hosted = self.find_region(name)?;
            if parents
                .iter()
                .any(|p: &Arc<HostedRegion>| p.info.id == hosted.info.id)
            {
                return Err(ServerError::invalid(format!(
                    "merge: region {name:?} is named twice"
                )));
            }
            parents.push(hosted);
        }
        if parents.len() < 2 {
            return Err(ServerError::invalid(
                "merge: name at least two regions (their ids, names or encoded names)",
            ));
        }
        let table = parents[0].table.clone();
        if let Some(other) = parents.iter().find(|p| p.table != table) {
            return Err(ServerError::invalid(format!(
                "merge: regions of different tables ('{table}' and '{}') cannot merge",
                other.table
            )));
        }
        if names::is_system(&table) {
            return Err(ServerError::invalid(format!(
                "merge: table '{table}' is a system table and cannot be merged"
            )));
        }
        let t = self.rs.router.require(&table)?;
        if t.state == TableState::Disabled {
            return Err(ServerError::TableDisabled(table));
        }
        parents.sort_by(|a, b| a.info.start_key.cmp(&b.info.start_key));
        for pair in parents.windows(2) {
            let (a, b) = (&pair[0].info, &pair[1].info);
            if a.end_key != b.start_key || a.end_key.is_empty() {
                let forced = if forcible {
                    " (even when forced: a merge across a gap would overlap the regions between)"
                } else {
                    ""
                };
                return Err(ServerError::invalid(format!(
                    "merge: regions {} and {} of table '{table}' are not adjacent: one ends at \
                     {:?}, the next starts at {:?}{forced}",
                    a.id,
                    b.id,
                    String::from_utf8_lossy(&a.end_key),
                    String::from_utf8_lossy(&b.start_key),
                )));
            }
        }
        if let Some(p) = parents.iter().find(|p| p.state() != RegionState::Open) {
            return Err(p.not_serving("it is not open (being split, merged, moved or closed)"));
        }
        Ok(parents)
    }

    /// The procedure (module docs); the admin lock is held. `stop`: tests only.
    fn merge_locked(
        &self,
        parents: &[Arc<HostedRegion>],
        stop: Option<MergeStep>,
    ) -> Result<RegionInfo, ServerError> {
        let table = parents[0].table.clone();
        let t = self.rs.router.require(&table)?;
        // 1. Flushed, without references, and (in a cluster) on one server.
        let server = match self.assignment() {
            Some(a) => Some(self.gather(a, parents)?),
            None => {
                for p in parents {
                    p.with(|r| {
                        r.flush()?;
                        if r.has_references() {
                            r.compact(true)?;
                        }
                        Ok(())
                    })?;
                }
                None
            }
        };
        let info = RegionInfo {
            id: self.rs.next_region_id(),
            start_key: parents[0].info.start_key.clone(),
            end_key: parents[parents.len() - 1].info.end_key.clone(),
        };
        let dir = self.rs.region_dir(&table, info.id);
        // 2. Marked.
        let mut rec = RegionRecord::new(&table, info.clone(), RegionState::Merging);
        rec.merge_parents = parents.iter().map(|p| p.info.clone()).collect();
        self.rs.meta()?.put_region(&rec)?;
        for p in parents {
            p.set_state(RegionState::Merging);
        }
        if stop == Some(MergeStep::Marked) {
            return Ok(info);
        }
        // 3. The parents close and the merged directory is written.
        let written = match (&server, self.assignment()) {
            (Some(server), Some(a)) => {
                let ids: Vec<u64> = parents.iter().map(|p| p.info.id).collect();
                let (name, merged) = (table.clone(), info.id);
                a.call(server, move |admin, addr| async move {
                    admin.merge_regions_on(&addr, &name, &ids, merged).await
                })
            }
            _ => self.merge_here(parents, &dir, info.id),
        };
        if let Err(e) = written {
            let _ = self.rs.services.fs.delete_dir_all(&dir);
            let _ = self.rs.meta()?.delete_region(&table, &info);
            for p in parents {
                match &server {
                    // Not committed: the parents are their server's again (a server that
                    // failed the merge after closing them exits, and its log is split).
                    Some(s) => p.assign(Some(Arc::clone(s)), RegionState::Offline),
                    None if p.is_open() => p.set_state(RegionState::Open),
                    // Closed with unflushed edits in the WAL only: offline until a restart
                    // replays them (as a failed split leaves its parent).
                    None => p.set_state(RegionState::Offline),
                }
            }
            tracing::warn!(table = %table, error = %e, "merge not done");
            return Err(e);
        }
        if stop == Some(MergeStep::Written) {
            return Ok(info);
        }
        // 4. The commit point.
        rec.state = RegionState::Open;
        if let Err(e) = self.rs.meta()?.put_region(&rec) {
            for p in parents {
                p.set_state(RegionState::Offline);
            }
            tracing::error!(table = %table, error = %e, "could not commit a merge; its regions are offline until a restart");
            return Err(e);
        }
        if stop == Some(MergeStep::Committed) {
            return Ok(info);
        }
        // 5. The parents are marked; the merged region opens and replaces them.
        self.rs
            .mark_merged(&table, parents.iter().map(|p| &p.info), &info)?;
        let merged = match (&server, self.assignment()) {
            (Some(server), Some(a)) => {
                let m = HostedRegion::new(&table, info.clone(), &dir, None);
                a.assign(&self.rs, &m, &t.schema, Some(Arc::clone(server)));
                m
            }
            _ => {
                let region = match self.rs.open_region(&table, &info, &t.schema, &[]) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        tracing::error!(table = %table, region = info.id, error = %e, "a merged region did not open; it is offline until the server restarts");
                        None
                    }
                };
                let m = HostedRegion::new(&table, info.clone(), &dir, region);
                if !m.is_open() {
                    m.set_state(RegionState::Offline);
                }
                m
            }
        };
        let state = if merged.state() == RegionState::Open {
            RegionState::Open
        } else {
            RegionState::Offline
        };
        // The row now names where it opened; its parents are marked, so `mergeParents` goes.
        self.rs
            .meta()?
            .put_region(&self.rs.record_of(&merged, state))?;
        let ids: Vec<u64> = parents.iter().map(|p| p.info.id).collect();
        self.rs.router.swap_merge(&table, &ids, merged);
        {
            let mut retired = self.rs.retired_regions.lock();
            for p in parents {
                p.assign(None, RegionState::Merged);
                retired.push(RetiredRegion {
                    table: table.clone(),
                    info: p.info.clone(),
                    successors: vec![info.id],
                });
            }
        }
        tracing::info!(table = %table, parents = ?ids, merged = info.id, "regions merged");
        Ok(info)
    }

    /// Standalone step 3: the parents are taken out of their slots and merged here.
    fn merge_here(
        &self,
        parents: &[Arc<HostedRegion>],
        dir: &std::path::Path,
        id: u64,
    ) -> Result<(), ServerError> {
        let mut regions = Vec::with_capacity(parents.len());
        for p in parents {
            match p.take(RegionState::Merging) {
                Some(r) => regions.push(r),
                None => {
                    // Closed under us (cannot happen under the admin lock): put back the others.
                    for (q, r) in parents.iter().zip(regions) {
                        q.put(r);
                    }
                    return Err(p.not_serving("it closed during the merge"));
                }
            }
        }
        cellar_storage::region::Region::merge(regions, dir, id)?;
        Ok(())
    }

    /// In a cluster: readies each parent on its server (flushed, references compacted away)
    /// and moves them all to the first one's server; returns that server.
    fn gather(
        &self,
        a: &Assignment,
        parents: &[Arc<HostedRegion>],
    ) -> Result<Arc<crate::coord::ServerRecord>, ServerError> {
        let target = a.serving(&parents[0])?;
        for p in parents {
            if p.server().is_some_and(|s| s.name != target.name) {
                self.move_to(a, p, Arc::clone(&target))?;
            }
            a.prepare_split(p)?;
        }
        Ok(target)
    }
}
