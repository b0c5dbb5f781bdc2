//! What a snapshot records of a region: the store files that hold its data, each restricted
//! to the rows the region reads from it. A reference (a split daughter's or a clone's view of
//! another region's file) is recorded as the file it points into, never as itself, so a
//! snapshot names only store files and a clone made from it never holds a reference to a
//! reference.

use super::inspect::RegionDir;
use super::store_files::{ref_file_name, Reference};
use super::{Region, RegionInfo};
use crate::fs::FsRef;
use cellar_model::{Result, TableSchema};
use std::path::{Path, PathBuf};

/// One store file of a region as a snapshot keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    pub family: String,
    /// The store file's path (under the root's `data/`; it may since have moved to the
    /// archive, where reads find it).
    pub path: PathBuf,
    /// The rows of it the region reads: `[start, end)`, empty for unbounded.
    pub start: Vec<u8>,
    pub end: Vec<u8>,
}

impl SnapshotFile {
    fn of(family: &str, info: &RegionInfo, path: PathBuf, r: Option<&Reference>) -> SnapshotFile {
        let (mut start, mut end) = (info.start_key.to_vec(), info.end_key.to_vec());
        let path = match r {
            None => path,
            Some(r) => {
                start = start.max(r.start.clone());
                end = match (end.is_empty(), r.end.is_empty()) {
                    (true, _) => r.end.clone(),
                    (false, true) => end,
                    (false, false) => end.min(r.end.clone()),
                };
                r.parent.clone()
            }
        };
        SnapshotFile {
            family: family.to_string(),
            path,
            start,
            end,
        }
    }
}

impl Region {
    /// The store files holding this region's data, in each store's order; with `flush`, the
    /// memstore is flushed first (HBase's default; without it, a snapshot has only what was
    /// flushed: `SKIP_FLUSH`).
    pub fn snapshot_files(&self, flush: bool) -> Result<Vec<SnapshotFile>> {
        if flush {
            self.flush()?;
        }
        let info = &self.inner.info;
        let mut out = Vec::new();
        for store in &self.inner.stores {
            let view = store.view();
            let mut files: Vec<_> = view.files.iter().collect();
            files.sort_by_key(|f| f.number);
            for f in files {
                out.push(SnapshotFile::of(
                    &store.family.name,
                    info,
                    f.own_path.clone(),
                    f.reference.as_ref(),
                ));
            }
        }
        Ok(out)
    }
}

impl RegionDir {
    /// [`Region::snapshot_files`] of a closed region (a disabled table's), from its directory.
    pub fn snapshot_files(&self) -> Result<Vec<SnapshotFile>> {
        let mut out = Vec::new();
        for family in &self.schema().families {
            let Some(mut names) = self.store_files(&family.name)? else {
                continue;
            };
            names.sort();
            let dir = self.dir().join(&family.name);
            for name in names {
                let path = dir.join(&name);
                if name.ends_with(".sf") {
                    out.push(SnapshotFile::of(&family.name, self.info(), path, None));
                } else if name.ends_with(".ref") {
                    let r = Reference::read(self.fs(), &path)?;
                    out.push(SnapshotFile::of(&family.name, self.info(), path, Some(&r)));
                }
            }
        }
        Ok(out)
    }
}

/// Writes a region directory that reads `files` (a snapshot's, for a clone or a restore)
/// through references: the descriptor, and per family one `.ref` per file, numbered from 1.
pub fn write_region_of_files(
    fs: &FsRef,
    dir: &Path,
    info: &RegionInfo,
    schema: &TableSchema,
    files: &[SnapshotFile],
) -> Result<()> {
    crate::fs::create_dir_durable(fs.as_ref(), dir)?;
    for family in &schema.families {
        let family_dir = dir.join(&family.name);
        crate::fs::create_dir_durable(fs.as_ref(), &family_dir)?;
        let mine = files.iter().filter(|f| f.family == family.name);
        for (n, f) in (1u64..).zip(mine) {
            Reference {
                parent: f.path.clone(),
                start: f.start.clone(),
                end: f.end.clone(),
            }
            .write(fs, &family_dir.join(ref_file_name(n)))?;
        }
        fs.sync_dir(&family_dir)?;
    }
    super::descriptor::write(fs.as_ref(), dir, info, schema)
}

/// The store file a reference file (`.ref`) points into.
pub fn reference_parent(fs: &FsRef, path: &Path) -> Result<PathBuf> {
    Ok(Reference::read(fs, path)?.parent)
}
