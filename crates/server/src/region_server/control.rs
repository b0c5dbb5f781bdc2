//! A region server's side of assignment: OPEN_REGION, CLOSE_REGION and FLUSH_REGION, sent by
//! the master of its cluster. Each is idempotent (the master retries after failures and
//! after a takeover), and they run one at a time under the admin lock.

use super::placement::RegionWork;
use super::{RegionServer, Role};
use crate::error::ServerError;
use crate::router::{HostedRegion, RegionState};
use cellar_model::TableSchema;
use cellar_storage::region::RegionInfo;

impl RegionServer {
    fn check_region_server(&self, call: &str) -> Result<(), ServerError> {
        match self.role {
            Role::RegionServer => self.check_running(),
            _ => Err(ServerError::invalid(format!(
                "{call} is sent by a cluster's master to its region servers; this server is {}",
                self.role.name()
            ))),
        }
    }

    /// Opens region `info` of `schema`'s table here (replaying edits recovered for it), as
    /// open number `open_seq` of the region, addressed to the server started at
    /// `target_startcode`.
    ///
    /// Refused when `target_startcode` is not this process's (an open meant for an earlier
    /// server on this address) or when a CLOSE_REGION fenced off opens numbered `open_seq` or
    /// lower: the master sends that close when an open went unanswered, and opens the region
    /// elsewhere only once this server has answered it, so an open arriving late never opens
    /// a region a second time. Refused too when `master` (the sender's server name) is not
    /// the active master ZooKeeper names now: a master deposed between its tenure check and
    /// this call (paused past its session) opens nothing the new master does not know of.
    /// The checks run under the admin lock, as closes do.
    #[allow(clippy::too_many_arguments, reason = "the request's fields, one each")]
    pub fn open_region_call(
        &self,
        table: &str,
        info: RegionInfo,
        schema: TableSchema,
        table_splits: u32,
        target_startcode: u64,
        open_seq: u64,
        master: &str,
    ) -> Result<(), ServerError> {
        self.check_region_server("OPEN_REGION")?;
        if let Some(delay) = crate::faults::open_region_delay() {
            tracing::warn!(
                table,
                region = info.id,
                ms = delay.as_millis() as u64,
                "fault point open_region_delay_ms: holding an open back"
            );
            std::thread::sleep(delay);
        }
        schema.validate()?;
        if schema.name != table {
            return Err(ServerError::invalid(format!(
                "OPEN_REGION: region of table '{table}' sent with the schema of '{}'",
                schema.name
            )));
        }
        let _admin = self.admin.lock();
        if target_startcode != self.startcode {
            return Err(ServerError::invalid(format!(
                "OPEN_REGION of region {} of '{table}' was meant for the server started at {}; \
                 this one started at {}",
                info.id, target_startcode, self.startcode
            )));
        }
        self.check_sender_is_active_master(master, table, info.id)?;
        let fence = self.open_fences.lock().get(&info.id).copied().unwrap_or(0);
        if open_seq <= fence {
            return Err(ServerError::invalid(format!(
                "OPEN_REGION number {open_seq} of region {} of '{table}' was called off by the \
                 master (a CLOSE_REGION fenced off opens up to number {fence})",
                info.id
            )));
        }
        if let Some(h) = self.router.region(info.id) {
            if h.is_open() && h.table == table {
                return Ok(());
            }
        }
        let dir = self.region_dir(table, info.id);
        let region = self.open_region(table, &info, &schema, &[])?;
        let hosted = HostedRegion::new(table, info, &dir, Some(region));
        self.note_region_id(hosted.info.id);
        self.router.add_region(&schema, hosted);
        self.router
            .update_table(table, |t| t.splits = t.splits.max(table_splits));
        tracing::info!(table, region = %dir.display(), "region opened");
        Ok(())
    }

    /// Refuses a call from `master` unless ZooKeeper names it the active master now (read
    /// afresh: a region server may not have heard of a takeover yet).
    fn check_sender_is_active_master(
        &self,
        master: &str,
        table: &str,
        region: u64,
    ) -> Result<(), ServerError> {
        let Some(coord) = self.coordination.get() else {
            return Err(ServerError::invalid(
                "OPEN_REGION: this region server has no coordination to tell the active master",
            ));
        };
        let active = coord.active_master().map_err(|e| {
            ServerError::Internal(format!(
                "cannot read the active master from {}: {e}",
                coord.describe()
            ))
        })?;
        match active {
            Some(a) if a.name.to_string() == master => Ok(()),
            other => Err(ServerError::invalid(format!(
                "OPEN_REGION of region {region} of '{table}' from {}, which is not the active \
                 master ({}): refused",
                if master.is_empty() {
                    "a master that did not name itself"
                } else {
                    master
                },
                other.map_or_else(
                    || "none is active".to_string(),
                    |a| format!("that is {}", a.name)
                )
            ))),
        }
    }

    /// Flushes and closes a region served here; one not served here is already closed.
    /// Opens of the region numbered `fence_seq` or lower are refused from then on.
    pub fn close_region_call(
        &self,
        table: &str,
        id: u64,
        fence_seq: u64,
    ) -> Result<(), ServerError> {
        self.check_region_server("CLOSE_REGION")?;
        let _admin = self.admin.lock();
        {
            let mut fences = self.open_fences.lock();
            let fence = fences.entry(id).or_insert(0);
            *fence = (*fence).max(fence_seq);
        }
        let Some(hosted) = self.router.region(id).filter(|h| h.table == table) else {
            return Ok(());
        };
        if let Some(region) = hosted.take(RegionState::Closed) {
            region.close()?;
        }
        self.router.remove_region(id);
        tracing::info!(table, region = id, "region closed");
        Ok(())
    }

    /// Flushes (and compacts, if asked) a region served here.
    pub fn flush_region_call(
        &self,
        table: &str,
        id: u64,
        compact: bool,
        major: bool,
    ) -> Result<(), ServerError> {
        self.check_region_server("FLUSH_REGION")?;
        let hosted = self.router.region_for_call(table, id)?;
        let work = if compact {
            RegionWork::Compact { major }
        } else {
            RegionWork::Flush
        };
        self.region_work(&hosted, work)
    }
}

impl RegionServer {
    /// Readies a region served here for a split: flushed, its references compacted away;
    /// its middle row, if it has one.
    pub fn prepare_split_call(
        &self,
        table: &str,
        id: u64,
    ) -> Result<Option<bytes::Bytes>, ServerError> {
        self.check_region_server("PREPARE_SPLIT")?;
        let hosted = self.router.region_for_call(table, id)?;
        hosted.with(|r| {
            r.flush()?;
            if r.has_references() {
                r.compact(true)?;
            }
            Ok(r.middle_row())
        })
    }

    /// Closes a region served here and writes its daughters' directories (references to its
    /// files). On failure the region stays closed: its unflushed edits are in this server's
    /// log only, and the master leaves it offline rather than reopen it without them.
    pub fn split_region_call(
        &self,
        table: &str,
        id: u64,
        row: bytes::Bytes,
        daughters: (u64, u64),
    ) -> Result<(), ServerError> {
        self.check_region_server("SPLIT_REGION")?;
        let _admin = self.admin.lock();
        let hosted = self.router.region_for_call(table, id)?;
        if hosted.info.contains_row(&row) && row != hosted.info.start_key {
            let Some(region) = hosted.take(RegionState::Splitting) else {
                return Err(hosted.not_serving("it is closed"));
            };
            let dir_a = self.region_dir(table, daughters.0);
            let dir_b = self.region_dir(table, daughters.1);
            let split = region.split(
                &row,
                (dir_a.clone(), daughters.0),
                (dir_b.clone(), daughters.1),
            );
            self.router.remove_region(id);
            if let Err(e) = split {
                let _ = self.services.fs.delete_dir_all(&dir_a);
                let _ = self.services.fs.delete_dir_all(&dir_b);
                // Its unflushed edits may be in this server's log only: the server stops, and
                // the master recovers its log as for any dead server (HBase aborts too).
                tracing::error!(table, region = id, error = %e, "split failed after the region closed; this server stops so that its log is recovered");
                self.fence();
                return Err(e.into());
            }
            tracing::info!(
                table,
                region = id,
                "region closed for a split; daughters written"
            );
            Ok(())
        } else {
            Err(ServerError::invalid(format!(
                "split row {:?} is not strictly inside region {id} of table '{table}'",
                String::from_utf8_lossy(&row)
            )))
        }
    }

    /// Closes adjacent regions served here (in key order) and writes the directory of region
    /// `merged` that reads their files. On failure after they closed, the server stops (their
    /// unflushed edits are in its log only), as for a split.
    pub fn merge_regions_call(
        &self,
        table: &str,
        ids: &[u64],
        merged: u64,
    ) -> Result<(), ServerError> {
        self.check_region_server("MERGE_REGION")?;
        let _admin = self.admin.lock();
        let hosted = ids
            .iter()
            .map(|id| self.router.region_for_call(table, *id))
            .collect::<Result<Vec<_>, _>>()?;
        // Checked before any closes: a refused merge leaves every region serving.
        let adjacent = hosted.len() >= 2
            && hosted
                .windows(2)
                .all(|p| !p[0].info.end_key.is_empty() && p[0].info.end_key == p[1].info.start_key);
        if !adjacent {
            return Err(ServerError::invalid(format!(
                "merge: regions {ids:?} of table '{table}' are not two or more adjacent regions \
                 in key order"
            )));
        }
        if let Some(h) = hosted.iter().find(|h| !h.is_open()) {
            return Err(h.not_serving("it is closed"));
        }
        let mut regions = Vec::with_capacity(hosted.len());
        for h in &hosted {
            if let Some(r) = h.take(RegionState::Merging) {
                regions.push(r);
            }
        }
        if regions.len() != hosted.len() {
            for (h, r) in hosted.iter().zip(regions) {
                h.put(r);
            }
            return Err(ServerError::invalid(format!(
                "merge: a region of table '{table}' closed during the merge"
            )));
        }
        let dir = self.region_dir(table, merged);
        let result = cellar_storage::region::Region::merge(regions, &dir, merged);
        for id in ids {
            self.router.remove_region(*id);
        }
        if let Err(e) = result {
            let _ = self.services.fs.delete_dir_all(&dir);
            tracing::error!(table, regions = ?ids, error = %e, "merge failed after the regions closed; this server stops so that its log is recovered");
            self.fence();
            return Err(e.into());
        }
        tracing::info!(table, regions = ?ids, merged, "regions closed for a merge; merged region written");
        Ok(())
    }

    /// Flushes a region served here (unless `skip_flush`) and names its store files, for a
    /// snapshot the master takes.
    pub fn snapshot_region_call(
        &self,
        table: &str,
        id: u64,
        skip_flush: bool,
    ) -> Result<Vec<cellar_storage::region::SnapshotFile>, ServerError> {
        self.check_region_server("SNAPSHOT_REGION")?;
        let hosted = self.router.region_for_call(table, id)?;
        hosted.with(|r| Ok(r.snapshot_files(!skip_flush)?))
    }
}
