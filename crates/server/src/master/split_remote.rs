//! Splits in a cluster, run by the master with the region's server doing the file work, and
//! the janitor that removes split parents (`docs/design/0004-cluster.md` §5).

use super::{Assignment, Master};
use crate::error::ServerError;
use crate::router::{HostedRegion, RegionState};
use cellar_storage::wal::log_split;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

impl Master {
    /// A split in a cluster (the procedure of `split_procedure.rs`, with the region server doing the
    /// file work): meta says SPLITTING; the region's server closes it and writes the
    /// daughters; meta says SPLIT (the commit point); the daughters get rows and open on the
    /// same server; the router swaps them in. The admin lock is held.
    pub(crate) fn split_remote(
        &self,
        a: &Assignment,
        hosted: &Arc<HostedRegion>,
        row: bytes::Bytes,
    ) -> Result<(), ServerError> {
        let table = hosted.table.clone();
        let t = self.rs.router.require(&table)?;
        let server = a.serving(hosted)?;
        let parent = hosted.info.clone();
        let [da, db] = self.daughters(&parent, &row);
        let mut rec = self.rs.record_of(hosted, RegionState::Splitting);
        rec.split_a = Some(da.clone());
        rec.split_b = Some(db.clone());
        self.rs.meta()?.put_region(&rec)?;
        hosted.set_state(RegionState::Splitting);
        let (t_name, id, at, ids) = (table.clone(), parent.id, row.clone(), (da.id, db.id));
        let split = a.call(&server, move |admin, addr| async move {
            admin.split_region_on(&addr, &t_name, id, at, ids).await
        });
        if let Err(e) = split {
            // Not committed: the daughters go, the parent is its server's again (if the
            // server failed the split it exits, and its log is split like any dead server's).
            for d in [&da, &db] {
                let _ = self
                    .rs
                    .services
                    .fs
                    .delete_dir_all(&self.rs.region_dir(&table, d.id));
            }
            rec.split_a = None;
            rec.split_b = None;
            rec.state = RegionState::Open;
            self.rs.meta()?.put_region(&rec)?;
            hosted.assign(Some(server), RegionState::Offline);
            tracing::warn!(table = %table, region = parent.id, error = %e, "split not done; the region reopens");
            return Err(e);
        }
        rec.state = RegionState::Split;
        if let Err(e) = self.rs.meta()?.put_region(&rec) {
            hosted.set_state(RegionState::Offline);
            tracing::error!(table = %table, region = parent.id, error = %e, "could not commit a split; the region is offline until the master restarts");
            return Err(e);
        }
        hosted.assign(None, RegionState::Split);
        let mut daughters = Vec::with_capacity(2);
        for info in [da.clone(), db.clone()] {
            let d = HostedRegion::new(
                &table,
                info.clone(),
                &self.rs.region_dir(&table, info.id),
                None,
            );
            a.assign(&self.rs, &d, &t.schema, Some(Arc::clone(&server)));
            self.rs
                .meta()?
                .put_region(&self.rs.record_of(&d, RegionState::Open))?;
            daughters.push(d);
        }
        let [a_region, b_region]: [Arc<HostedRegion>; 2] = daughters
            .try_into()
            .map_err(|_| ServerError::Internal("split made other than two daughters".into()))?;
        self.rs
            .router
            .swap_split(&table, parent.id, [a_region, b_region]);
        self.rs
            .retired_regions
            .lock()
            .push(crate::region_server::RetiredRegion {
                table: table.clone(),
                info: parent.clone(),
                successors: vec![da.id, db.id],
            });
        self.rs
            .splits_done
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.rs.router.table(&table) {
            self.rs.meta()?.put_table(&crate::meta::TableRecord {
                schema: (*t.schema).clone(),
                state: t.state,
                splits: t.splits,
                truncate_to: None,
            })?;
        }
        tracing::info!(table = %table, parent = parent.id, daughter_a = da.id, daughter_b = db.id,
            at = %String::from_utf8_lossy(&row), server = %server.name, "region split");
        Ok(())
    }

    /// Removes split parents once neither daughter has reference files left, and then only
    /// after twice the scanner lease: a scanner opened on a daughter before its compaction may
    /// still read the parent's files, and HDFS has no unlink-while-open.
    pub(super) fn cluster_janitor(&self, a: &Assignment) {
        let parents = self.rs.retired_regions.lock().clone();
        if parents.is_empty() {
            return;
        }
        let grace = Duration::from_millis(self.rs.config.scanner.lease_ms.saturating_mul(2));
        for p in parents {
            let referenced = p.successors.iter().any(|d| {
                has_reference_files(&*self.rs.services.fs, &self.rs.region_dir(&p.table, *d))
                    .unwrap_or(true)
            });
            let mut clean = a.clean_since.lock();
            if referenced {
                clean.remove(&p.info.id);
                continue;
            }
            let since = *clean
                .entry(p.info.id)
                .or_insert_with(std::time::Instant::now);
            if since.elapsed() < grace {
                continue;
            }
            clean.remove(&p.info.id);
            drop(clean);
            self.remove_retired_region(&p);
        }
    }
}

/// Whether any family directory of a region holds reference files (`*.ref`).
fn has_reference_files(
    fs: &dyn cellar_storage::fs::FileSystem,
    region_dir: &Path,
) -> Result<bool, ServerError> {
    if !fs.exists(region_dir)? {
        return Ok(false);
    }
    for family in fs.list(region_dir)? {
        let dir = region_dir.join(&family);
        if family.starts_with('.') || family == log_split::RECOVERED_EDITS || !fs.exists(&dir)? {
            continue;
        }
        if fs
            .list(&dir)
            .unwrap_or_default()
            .iter()
            .any(|f| f.ends_with(".ref"))
        {
            return Ok(true);
        }
    }
    Ok(false)
}
