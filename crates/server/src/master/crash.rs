//! A dead server's log: renamed (fencing), split by region into `recovered.edits`, removed
//! (`docs/design/0004-cluster.md` §6).

use super::{wal_root, Assignment, SPLITTING};
use crate::coord::ServerName;
use crate::error::ServerError;
use crate::meta::META_REGION_ID;
use crate::names;
use cellar_storage::wal::log_split;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

impl Assignment {
    /// Splits the WAL directory of every server that is not alive (and not this master) by
    /// region, then removes it. Run before meta opens (an earlier master's log holds meta's
    /// edits) and on every tick.
    pub fn split_dead_logs(&self) -> Result<usize, ServerError> {
        // Only the active master takes logs over.
        self.tenure.check()?;
        let root = wal_root(&self.data_dir);
        if !self.fs.exists(&root)? {
            return Ok(0);
        }
        // Directories first, live servers second (see the module's comment).
        let dirs = self.fs.list(&root)?;
        let live = self.refresh_live()?;
        let mut split_count = 0;
        for d in dirs {
            let server = d.strip_suffix(SPLITTING).unwrap_or(&d);
            let Some(name) = ServerName::parse(server) else {
                continue;
            };
            if name == self.me || live.iter().any(|s| s.name == name) {
                continue;
            }
            self.split_one(&root, &d)?;
            self.note_dead_name(name);
            split_count += 1;
        }
        Ok(split_count)
    }

    fn split_one(&self, root: &Path, dir: &str) -> Result<(), ServerError> {
        let started = std::time::Instant::now();
        let splitting = if dir.ends_with(SPLITTING) {
            root.join(dir)
        } else {
            // Fencing: a server that is only paused finds its directory gone (local disk:
            // it checks after every write round) and cannot create a segment outside it
            // (`create_in_existing_dir`); on HDFS the split's lease recovery of every segment
            // in the moved directory shuts the old writer out of the segments it has.
            let to = root.join(format!("{dir}{SPLITTING}"));
            self.fs.rename(&root.join(dir), &to)?;
            to
        };
        let regions = region_dirs(&*self.fs, &self.data_dir)?;
        let summary = log_split::split(&*self.fs, &splitting, self.skip_wal_errors, |id| {
            regions.get(&id).cloned()
        })?;
        self.fs.delete_dir_all(&splitting)?;
        tracing::info!(
            server = dir,
            records = summary.records,
            regions = summary.regions.len(),
            dropped = summary.dropped,
            ms = started.elapsed().as_millis() as u64,
            "split a dead server's log"
        );
        Ok(())
    }
}

/// Every region directory under the root by region id (meta's included).
fn region_dirs(
    fs: &dyn cellar_storage::fs::FileSystem,
    data_dir: &Path,
) -> Result<HashMap<u64, PathBuf>, ServerError> {
    let mut out = HashMap::from([(META_REGION_ID, data_dir.join("meta"))]);
    let root = names::data_root(data_dir);
    if !fs.exists(&root)? {
        return Ok(out);
    }
    for ns in fs.list(&root)? {
        for table in fs.list(&root.join(&ns))? {
            let table_dir = root.join(&ns).join(&table);
            for region in fs.list(&table_dir)? {
                if let Ok(id) = region.parse::<u64>() {
                    out.insert(id, table_dir.join(region));
                }
            }
        }
    }
    Ok(out)
}
