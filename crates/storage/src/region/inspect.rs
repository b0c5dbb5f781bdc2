//! A region directory read without opening the region, for offline tools (`cellar verify`).
//!
//! Opening a region changes its directory: it replays and flushes the WAL, deletes `.tmp`
//! files, finishes or undoes a half-done compaction. A tool that checks a directory must see
//! it as it is, so this reads the descriptor and each store's files and writes nothing.
//! Layout: `docs/region-layout.md`.

use super::descriptor;
use super::store_files::{next_file_id, Reference};
use super::{RegionInfo, STANDALONE_WAL_DIR};
use crate::block_cache::Priority;
use crate::fs::FsRef;
use crate::storefile::{FileMeta, StoreFile};
use cellar_model::{Result, TableSchema};
use std::path::{Path, PathBuf};

/// A region's directory and what its descriptor (`.regioninfo`) says, read without opening
/// the region.
pub struct RegionDir {
    fs: FsRef,
    dir: PathBuf,
    info: RegionInfo,
    schema: TableSchema,
}

/// What checking one file of a store found (a damaged file is an error instead).
#[derive(Debug)]
pub enum FileCheck {
    /// A store file (`.sf`) whose every block matched its checksum and decoded.
    StoreFile(FileMeta),
    /// A reference (`.ref`, a daughter's view of a parent's store file after a split) that
    /// reads back whole; `parent` is the store file it points into.
    Reference { parent: PathBuf },
    /// A file the check does not read: a compaction marker, a `.tmp` file, anything else.
    NotChecked,
}

impl RegionDir {
    /// Reads the descriptor of the region in `dir`; a missing or damaged descriptor is an
    /// error naming the file.
    pub fn open_read_only(fs: FsRef, dir: &Path) -> Result<RegionDir> {
        let (info, schema) = descriptor::read(fs.as_ref(), dir)?;
        Ok(RegionDir {
            fs,
            dir: dir.to_path_buf(),
            info,
            schema,
        })
    }

    pub fn info(&self) -> &RegionInfo {
        &self.info
    }

    pub fn schema(&self) -> &TableSchema {
        &self.schema
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn fs(&self) -> &FsRef {
        &self.fs
    }

    /// The names of the files in `family`'s store directory, as the file system lists them;
    /// `None` when the family has no directory yet.
    pub fn store_files(&self, family: &str) -> Result<Option<Vec<String>>> {
        let dir = self.dir.join(family);
        if !self.fs.exists(&dir)? {
            return Ok(None);
        }
        self.fs.list(&dir).map(Some)
    }

    /// Reads file `name` of `family`'s store and checks it: every block of a store file, the
    /// checksum and fields of a reference.
    pub fn check_file(&self, family: &str, name: &str) -> Result<FileCheck> {
        let path = self.dir.join(family).join(name);
        if name.ends_with(".sf") {
            // Outside every block cache, so the id only has to be unique in this process.
            let file = StoreFile::open(&self.fs, &path, next_file_id(), None, Priority::Normal)?;
            file.verify()?;
            Ok(FileCheck::StoreFile(file.meta().clone()))
        } else if name.ends_with(".ref") {
            let r = Reference::read(&self.fs, &path)?;
            Ok(FileCheck::Reference { parent: r.parent })
        } else {
            Ok(FileCheck::NotChecked)
        }
    }

    /// How many segments the region's own WAL directory (`wal/`, a standalone region's) holds;
    /// `None` when there is none. They are checked when the region opens and replays them.
    pub fn wal_segments(&self) -> Result<Option<usize>> {
        let wal = self.dir.join(STANDALONE_WAL_DIR);
        if !self.fs.exists(&wal)? {
            return Ok(None);
        }
        Ok(Some(self.fs.list(&wal)?.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::LocalFs;
    use crate::region::{Region, StorageConfig};
    use cellar_model::{FamilySchema, RowMutation};

    #[test]
    fn reads_a_closed_region_without_changing_it() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("region");
        let schema = TableSchema::new(
            "t",
            vec![FamilySchema::new("cf"), FamilySchema::new("empty")],
        );
        let region =
            Region::open_with_config(&dir, schema.clone(), StorageConfig::default()).expect("open");
        region
            .mutate(&RowMutation::new(b"row".to_vec()).put(b"cf", b"q", 1, b"value".to_vec()))
            .expect("mutate");
        region.flush().expect("flush");
        region.close().expect("close");
        std::fs::write(dir.join("cf").join("left-over.tmp"), b"half").expect("write");

        let fs = LocalFs::shared();
        let r = RegionDir::open_read_only(fs, &dir).expect("read");
        assert_eq!(r.schema(), &schema);
        assert_eq!(r.info().id, 1);
        assert_eq!(r.store_files("no-such-family").expect("list"), None);
        let mut names = r
            .store_files("cf")
            .expect("list")
            .expect("a store directory");
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        match r.check_file("cf", &names[0]).expect("check") {
            FileCheck::StoreFile(m) => assert_eq!(m.cell_count, 1),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            r.check_file("cf", "left-over.tmp").expect("check"),
            FileCheck::NotChecked
        ));
        assert!(r.wal_segments().expect("list").is_some());
        assert!(
            dir.join("cf").join("left-over.tmp").exists(),
            "nothing deleted"
        );
    }
}
