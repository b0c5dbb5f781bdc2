//! Small store files for tests of what groups and picks files (`runs.rs`, `levels.rs`).

use super::store_files::StoreFileHandle;
use crate::block_cache::Priority;
use crate::fs::{FsRef, LocalFs};
use crate::storefile::{StoreFileOptions, StoreFileWriter};
use cellar_model::key::make_key;
use cellar_model::CellType;
use std::sync::Arc;

/// Store files in a temporary directory, numbered from 1 in the order they are made.
pub struct Files {
    dir: tempfile::TempDir,
    fs: FsRef,
    next: u64,
}

impl Files {
    pub fn new() -> Files {
        Files {
            dir: tempfile::tempdir().expect("temp dir"),
            fs: Arc::new(LocalFs),
            next: 1,
        }
    }

    /// A store file holding one cell for each of `rows` (sorted, deduplicated here).
    pub fn file(&mut self, rows: &[u32]) -> Arc<StoreFileHandle> {
        let mut rows = rows.to_vec();
        rows.sort_unstable();
        rows.dedup();
        let number = self.next;
        self.next += 1;
        let path = self.dir.path().join(format!("{number:016x}.sf"));
        let mut w =
            StoreFileWriter::create(&self.fs, &path, StoreFileOptions::default()).expect("create");
        for r in rows {
            let key = make_key(&row(r), b"q", 1, CellType::Put, number);
            w.add(&key, &number.to_be_bytes()).expect("add");
        }
        w.finish().expect("finish");
        StoreFileHandle::open(&self.fs, path, number, None, Priority::Normal).expect("open")
    }
}

/// The row named by `r`: sorts as `r` does.
pub fn row(r: u32) -> Vec<u8> {
    format!("row{r:06}").into_bytes()
}
