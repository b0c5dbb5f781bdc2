//! The archive (HBase's `archive/` directory): a store file that a region stops using is moved
//! out of the way instead of deleted, so that a snapshot or a cloned table that names it keeps
//! reading it. Everything that deletes a store file under `<root>/data/` (a compaction's
//! inputs, a retired region's directory, a dropped or truncated table, leftovers removed on
//! open) goes through this one wrapper, which moves each `*.sf` to the same relative path
//! under `<root>/archive/data/`. A read of a store file that is no longer at its path finds it
//! there (HBase's HFileLink). The master's cleaner deletes archived files that no snapshot and
//! no reference file names any more (`docs/snapshots.md`).
//!
//! Only store files are kept: descriptors, references, markers and `.tmp` files are deleted
//! as before. Store file names are unique (region ids never repeat, and each name carries a
//! writer tag), so an archived file is never overwritten.

use super::{DirWatch, FileSystem, FsRef, LockGuard, RandomAccessFile, WritableFile};
use cellar_model::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The archive directory of a root.
pub fn archive_root(root: &Path) -> PathBuf {
    root.join("archive").join("data")
}

/// Where a store file under `<root>/data/` goes when it is archived; `None` for any other path.
pub fn archived_path(root: &Path, path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(root.join("data")).ok()?;
    (!rel.as_os_str().is_empty()).then(|| archive_root(root).join(rel))
}

/// Files of a region directory that are never directories: not looked into.
const FILE_SUFFIXES: &[&str] = &[".ref", ".compaction", ".tmp", ".regioninfo", ".sf"];

/// Whether a file name is a store file's (and so is archived rather than deleted).
fn is_store_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "sf")
}

/// A file system that archives store files under `<root>/data/` instead of deleting them.
pub struct ArchivingFs {
    inner: FsRef,
    root: PathBuf,
}

impl ArchivingFs {
    pub fn new(inner: FsRef, root: &Path) -> ArchivingFs {
        ArchivingFs {
            inner,
            root: root.to_path_buf(),
        }
    }

    /// Moves one store file to the archive; a file already gone is not an error.
    fn archive(&self, path: &Path, to: &Path) -> Result<()> {
        if !self.inner.exists(path)? {
            return Ok(());
        }
        if let Some(dir) = to.parent() {
            self.inner.create_dir_all(dir)?;
        }
        self.inner.rename(path, to)
    }

    /// Archives every store file under `dir` (a namespace, table, region or family
    /// directory: at most `depth` levels of directories above a store file).
    fn archive_tree(&self, dir: &Path, depth: u32) -> Result<()> {
        if depth == 0 || !self.inner.exists(dir)? {
            return Ok(());
        }
        let Ok(names) = self.inner.list(dir) else {
            // Not a directory.
            return Ok(());
        };
        for name in names {
            let path = dir.join(&name);
            if is_store_file(&path) {
                if let Some(to) = archived_path(&self.root, &path) {
                    self.archive(&path, &to)?;
                }
            } else if !FILE_SUFFIXES.iter().any(|s| name.ends_with(s)) {
                // A directory, or a file whose listing fails and is skipped above.
                self.archive_tree(&path, depth - 1)?;
            }
        }
        Ok(())
    }

    /// Opens `path` or, if it is not there, its archived copy.
    fn open_with(
        &self,
        path: &Path,
        open: impl Fn(&dyn FileSystem, &Path) -> Result<Arc<dyn RandomAccessFile>>,
    ) -> Result<Arc<dyn RandomAccessFile>> {
        match open(self.inner.as_ref(), path) {
            Ok(f) => Ok(f),
            Err(e) => match archived_path(&self.root, path) {
                Some(a) if is_store_file(path) && self.inner.exists(&a).unwrap_or(false) => {
                    open(self.inner.as_ref(), &a)
                }
                _ => Err(e),
            },
        }
    }
}

impl FileSystem for ArchivingFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.create(path)
    }

    fn create_in_existing_dir(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.create_in_existing_dir(path)
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_with(path, |fs, p| fs.open(p))
    }

    fn open_immutable(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_with(path, |fs, p| fs.open_immutable(p))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }

    fn delete(&self, path: &Path) -> Result<()> {
        match archived_path(&self.root, path) {
            Some(to) if is_store_file(path) => self.archive(path, &to),
            _ => self.inner.delete(path),
        }
    }

    fn delete_dir_all(&self, dir: &Path) -> Result<()> {
        if archived_path(&self.root, dir).is_some() {
            self.archive_tree(dir, 5)?;
        }
        self.inner.delete_dir_all(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.inner.exists(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.inner.truncate(path, len)
    }

    fn truncate_replaces_file(&self) -> bool {
        self.inner.truncate_replaces_file()
    }

    fn fences_writers(&self) -> bool {
        self.inner.fences_writers()
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }

    fn watch_dir(&self, dir: &Path) -> Result<Option<Box<dyn DirWatch>>> {
        self.inner.watch_dir(dir)
    }

    fn lock(&self, path: &Path) -> Result<LockGuard> {
        self.inner.lock(path)
    }

    fn recover(&self, path: &Path) -> Result<()> {
        self.inner.recover(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{read_all, write_atomic, LocalFs};

    #[test]
    fn store_files_under_data_are_archived_and_still_read_from_their_old_path() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path();
        let fs = ArchivingFs::new(LocalFs::shared(), root);
        let family = root.join("data/default/t/17/cf");
        std::fs::create_dir_all(&family).expect("mkdir");
        let sf = family.join("0000000000000001-00000000000000aa.sf");
        let r = family.join("0000000000000002.ref");
        write_atomic(&fs, &sf, b"cells").expect("write sf");
        write_atomic(&fs, &r, b"ref").expect("write ref");

        fs.delete(&sf).expect("delete sf");
        let archived =
            root.join("archive/data/default/t/17/cf/0000000000000001-00000000000000aa.sf");
        assert!(!sf.exists() && archived.exists(), "moved to the archive");
        assert_eq!(&read_all(&fs, &sf).expect("read through")[..], b"cells");
        fs.delete(&r).expect("delete ref");
        assert!(!r.exists(), "references are deleted");
        assert!(!root
            .join("archive/data/default/t/17/cf/0000000000000002.ref")
            .exists());

        // A whole table: its store files go to the archive, the rest is deleted.
        let other = root.join("data/default/t/18/cf/0000000000000003-00000000000000bb.sf");
        std::fs::create_dir_all(other.parent().expect("parent")).expect("mkdir");
        std::fs::write(&other, b"more").expect("write");
        std::fs::write(root.join("data/default/t/18/.regioninfo"), b"info").expect("write");
        fs.delete_dir_all(&root.join("data/default/t"))
            .expect("drop table");
        assert!(!root.join("data/default/t").exists());
        assert!(root
            .join("archive/data/default/t/18/cf/0000000000000003-00000000000000bb.sf")
            .exists());
        assert!(!root.join("archive/data/default/t/18/.regioninfo").exists());

        // Outside data/ nothing changes.
        let wal = root.join("wal/x.sf");
        std::fs::create_dir_all(root.join("wal")).expect("mkdir");
        std::fs::write(&wal, b"w").expect("write");
        fs.delete(&wal).expect("delete");
        assert!(!wal.exists() && !root.join("archive/wal").exists());
        // A missing file with no archived copy is still an error on open.
        assert!(fs.open(&family.join("0000000000000009.sf")).is_err());
    }
}
