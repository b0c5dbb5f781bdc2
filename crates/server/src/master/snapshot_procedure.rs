//! Snapshots (`docs/snapshots.md`): take one of a table, list, delete, clone into a new table,
//! restore a table to one; and the archive cleaner. Everything runs under the admin lock, so a
//! snapshot, a clone and the cleaner never run at once.
//!
//! Taking a snapshot copies nothing and costs a flush per region and a manifest write,
//! whatever the table holds: each region (flushed unless `skip_flush`) names its store files,
//! and the manifest is written atomically (the commit point: a snapshot interrupted before it
//! is no snapshot, and its directory goes on the cleaner's next pass). Online: writes go on
//! during it; each region's part is consistent as of its flush. A clone is a new table whose
//! regions read the snapshot's files through references until their first compaction. A
//! restore replaces a disabled table's regions by the snapshot's (same references).
//!
//! Files stay readable because a store file a region stops using is archived, not deleted
//! (`cellar_storage::fs::ArchivingFs`); the cleaner deletes an archived file once no
//! snapshot manifest and no reference file under `data/` names it.

use super::Master;
use crate::error::ServerError;
use crate::names;
use crate::router::TableState;
use crate::snapshot::{self, Manifest, SnapshotKind, SnapshotRegion};
use cellar_storage::fs::{archive_root, FileSystem};
use cellar_storage::region::{RegionDir, SnapshotFile};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the split thread's janitor also cleans the archive.
const ARCHIVE_CLEAN_EVERY: Duration = Duration::from_secs(60);

impl Master {
    /// Takes snapshot `name` of `table` (HBase's `snapshot`). With `skip_flush`, each region
    /// gives only what it has flushed (HBase's `SKIP_FLUSH`).
    pub fn snapshot(
        &self,
        table: &str,
        name: &str,
        skip_flush: bool,
    ) -> Result<Manifest, ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        snapshot::check_name(name)?;
        let fs = &self.rs.services.fs;
        let root = self.rs.data_dir();
        if Manifest::read(&**fs, root, name)?.is_some() {
            return Err(ServerError::invalid(format!(
                "snapshot '{name}' already exists; delete it first or choose another name"
            )));
        }
        let (table, t) = self.rs.existing_table(table)?;
        if names::is_system(&table) {
            return Err(ServerError::invalid(format!(
                "table '{table}' is a system table; snapshots are of user tables"
            )));
        }
        let mut regions = Vec::with_capacity(t.regions.len());
        for hosted in t.regions.values() {
            let files = match (t.state, self.assignment()) {
                (TableState::Disabled, _) => {
                    let dir = self.rs.region_dir(&table, hosted.info.id);
                    RegionDir::open_read_only(fs.clone(), &dir)?.snapshot_files()?
                }
                (TableState::Enabled, None) => {
                    hosted.with(|r| Ok(r.snapshot_files(!skip_flush)?))?
                }
                (TableState::Enabled, Some(a)) => {
                    let server = a.serving(hosted)?;
                    let (t_name, id) = (table.clone(), hosted.info.id);
                    a.call(&server, move |admin, addr| async move {
                        admin
                            .snapshot_region_on(&addr, &t_name, id, skip_flush)
                            .await
                    })?
                    .into_iter()
                    .map(|f| SnapshotFile {
                        family: f.family,
                        path: PathBuf::from(f.path),
                        start: f.start.to_vec(),
                        end: f.end.to_vec(),
                    })
                    .collect()
                }
            };
            regions.push(SnapshotRegion {
                start_key: hosted.info.start_key.clone(),
                end_key: hosted.info.end_key.clone(),
                files,
            });
        }
        let manifest = Manifest {
            name: name.to_string(),
            table: table.clone(),
            created_ms: self.rs.services.config.clock.now_millis(),
            kind: match (t.state, skip_flush) {
                (TableState::Disabled, _) => SnapshotKind::Disabled,
                (_, true) => SnapshotKind::SkipFlush,
                (_, false) => SnapshotKind::Flush,
            },
            schema: (*t.schema).clone(),
            regions,
        };
        manifest.write(&**fs, root)?;
        tracing::info!(snapshot = name, table = %table, regions = manifest.regions.len(), "snapshot taken");
        Ok(manifest)
    }

    /// Every snapshot, oldest first.
    pub fn list_snapshots(&self) -> Result<Vec<Manifest>, ServerError> {
        let mut all = snapshot::list(&*self.rs.services.fs, self.rs.data_dir())?;
        all.sort_by(|a, b| (a.created_ms, &a.name).cmp(&(b.created_ms, &b.name)));
        Ok(all)
    }

    /// Snapshot `name`; an error naming it if there is none.
    pub fn snapshot_named(&self, name: &str) -> Result<Manifest, ServerError> {
        snapshot::check_name(name)?;
        Manifest::read(&*self.rs.services.fs, self.rs.data_dir(), name)?.ok_or_else(|| {
            ServerError::invalid(format!(
                "snapshot '{name}' does not exist (list_snapshots lists them)"
            ))
        })
    }

    /// Deletes snapshot `name`; the files only it kept go with the archive's next cleaning,
    /// which runs at once.
    pub fn delete_snapshot(&self, name: &str) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        self.snapshot_named(name)?;
        let dir = snapshot::snapshot_dir(self.rs.data_dir(), name);
        self.rs.services.fs.delete_dir_all(&dir)?;
        tracing::info!(snapshot = name, "snapshot deleted");
        self.clean_archive_locked();
        Ok(())
    }

    /// Creates table `table` from snapshot `name` (HBase's `clone_snapshot`): the snapshot's
    /// schema and regions, reading its files through references; no data is copied.
    pub fn clone_snapshot(&self, name: &str, table: &str) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let m = self.snapshot_named(name)?;
        let table = names::user_table(table)?;
        if self.rs.router.contains(&table) {
            return Err(ServerError::TableExists(table));
        }
        let mut schema = m.schema.clone();
        schema.name = table.clone();
        self.create_from(&m, schema, TableState::Enabled)?;
        tracing::info!(snapshot = name, table = %table, "snapshot cloned");
        Ok(())
    }

    /// Brings the snapshot's table back to the snapshot (HBase's `restore_snapshot`): the table
    /// must be disabled and stays so; its schema and regions become the snapshot's. The
    /// table's grants are kept. A crash during a restore leaves the table as it was or absent
    /// (then `clone_snapshot` of the same snapshot brings it back).
    pub fn restore_snapshot(&self, name: &str) -> Result<(), ServerError> {
        let table = self.snapshot_named(name)?.table;
        self.restore_snapshot_into(name, &table)
    }

    /// [`Master::restore_snapshot`] onto `table` (the snapshot's own, or another disabled
    /// table, as HBase's `RestoreSnapshot` allows); a table that does not exist is created
    /// from the snapshot, enabled.
    pub fn restore_snapshot_into(&self, name: &str, table: &str) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let m = self.snapshot_named(name)?;
        let table = names::user_table(table)?;
        let existed = self.rs.router.table(&table);
        if let Some(t) = &existed {
            if t.state != TableState::Disabled {
                return Err(ServerError::TableNotDisabled(table.clone()));
            }
            self.rs.meta()?.delete_table(&table)?;
            self.rs.router.remove_table(&table);
            self.forget_regions(&table, t)?;
            self.rs
                .services
                .fs
                .delete_dir_all(&names::table_dir(self.rs.data_dir(), &table))?;
        }
        let mut schema = m.schema.clone();
        schema.name = table.clone();
        let state = if existed.is_some() {
            TableState::Disabled
        } else {
            // HBase restores a table that was dropped meanwhile too, enabled (a clone).
            TableState::Enabled
        };
        self.create_from(&m, schema, state)?;
        tracing::info!(snapshot = name, table = %table, "snapshot restored");
        Ok(())
    }

    /// A table with the snapshot's regions, each reading the snapshot's files.
    fn create_from(
        &self,
        m: &Manifest,
        schema: cellar_model::TableSchema,
        state: TableState,
    ) -> Result<(), ServerError> {
        let fs = self.rs.services.fs.clone();
        let ranges = m
            .regions
            .iter()
            .map(|r| (r.start_key.clone(), r.end_key.clone()))
            .collect();
        let for_files = schema.clone();
        self.create_regions(schema, ranges, state, |i, info, dir| {
            let files = m.regions.get(i).map_or(&[][..], |r| &r.files[..]);
            Ok(cellar_storage::region::write_region_of_files(
                &fs, dir, info, &for_files, files,
            )?)
        })
    }

    /// Whether the archive is due a cleaning (every [`ARCHIVE_CLEAN_EVERY`], by the janitor's
    /// thread); if so, the next one is timed from now.
    pub(crate) fn archive_due(&self) -> bool {
        let mut last = self.archive_cleaned.lock();
        let due = last.is_none_or(|t| t.elapsed() >= ARCHIVE_CLEAN_EVERY);
        if due {
            *last = Some(Instant::now());
        }
        due
    }

    /// Deletes archived store files no snapshot and no reference names, and snapshot
    /// directories a crash left without a manifest; the admin lock is held. Errors are logged
    /// (the next pass tries again). Returns how many files went.
    pub fn clean_archive_locked(&self) -> usize {
        match self.clean_archive() {
            Ok(n) => {
                if n > 0 {
                    tracing::info!(files = n, "archive cleaned");
                }
                n
            }
            Err(e) => {
                tracing::warn!(error = %e, "cleaning the archive; will retry");
                0
            }
        }
    }

    fn clean_archive(&self) -> Result<usize, ServerError> {
        let fs = &self.rs.services.fs;
        let root = self.rs.data_dir();
        snapshot::remove_incomplete(&**fs, root)?;
        let archive = archive_root(root);
        if !fs.exists(&archive)? {
            return Ok(0);
        }
        let mut kept: HashSet<PathBuf> = HashSet::new();
        let importing = snapshot::importing(&**fs, root)?;
        for m in snapshot::list(&**fs, root)?.into_iter().chain(importing) {
            kept.extend(m.regions.into_iter().flat_map(|r| r.files).map(|f| f.path));
        }
        let mut refs = Vec::new();
        walk(&**fs, &root.join("data"), 5, &mut |p| {
            if p.extension().is_some_and(|e| e == "ref") {
                refs.push(p.to_path_buf());
            }
        })?;
        for r in refs {
            match cellar_storage::region::reference_parent(fs, &r) {
                Ok(parent) => {
                    kept.insert(parent);
                }
                // A damaged or vanished reference: keep everything this pass.
                Err(e) => {
                    return Err(ServerError::Internal(format!(
                        "reading reference {}: {e}",
                        r.display()
                    )))
                }
            }
        }
        let mut gone = Vec::new();
        walk(&**fs, &archive, 5, &mut |p| {
            if p.extension().is_some_and(|e| e == "sf") {
                let live = p
                    .strip_prefix(&archive)
                    .map(|rel| root.join("data").join(rel))
                    .ok();
                if live.is_some_and(|l| !kept.contains(&l)) {
                    gone.push(p.to_path_buf());
                }
            }
        })?;
        for p in &gone {
            fs.delete(p)?;
        }
        Ok(gone.len())
    }
}

/// Calls `f` with every file under `dir`, at most `depth` directories down.
fn walk(
    fs: &dyn FileSystem,
    dir: &Path,
    depth: u32,
    f: &mut dyn FnMut(&Path),
) -> Result<(), ServerError> {
    if depth == 0 || !fs.exists(dir)? {
        return Ok(());
    }
    let Ok(names) = fs.list(dir) else {
        return Ok(());
    };
    for name in names {
        let path = dir.join(&name);
        if [".sf", ".ref", ".compaction", ".tmp", ".regioninfo"]
            .iter()
            .any(|s| name.ends_with(s))
        {
            f(&path);
        } else {
            walk(fs, &path, depth - 1, f)?;
        }
    }
    Ok(())
}
