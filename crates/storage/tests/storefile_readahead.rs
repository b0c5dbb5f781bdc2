//! Readahead: store files are mapped without the kernel's read-around, so an iterator that
//! reads blocks in order asks for what lies ahead itself, and one that reads a block or two
//! (a Get, a short scan) asks for nothing beyond them.

mod common;

use bytes::Bytes;
use cellar_model::{BloomType, Compression, Result};
use cellar_storage::block_cache::Priority;
use cellar_storage::fs::{FileSystem, FsRef, LocalFs, LockGuard, RandomAccessFile, WritableFile};
use cellar_storage::iter::CellIter;
use cellar_storage::storefile::StoreFile;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::Arc;

/// What the store file asked of its file, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read { offset: u64, len: u64 },
    Prefetch { offset: u64, len: u64 },
}

/// Local disk, recording the reads and prefetches of the files it opens.
struct Recording {
    ops: Arc<Mutex<Vec<Op>>>,
}

struct RecordingFile {
    inner: Arc<dyn RandomAccessFile>,
    ops: Arc<Mutex<Vec<Op>>>,
}

impl RandomAccessFile for RecordingFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        self.ops.lock().push(Op::Read {
            offset,
            len: len as u64,
        });
        self.inner.read_at(offset, len)
    }
    fn prefetch(&self, offset: u64, len: u64) {
        self.ops.lock().push(Op::Prefetch { offset, len });
        self.inner.prefetch(offset, len);
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

impl FileSystem for Recording {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        LocalFs.create(path)
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        LocalFs.open(path)
    }
    fn open_immutable(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(RecordingFile {
            inner: LocalFs.open_immutable(path)?,
            ops: Arc::clone(&self.ops),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        LocalFs.rename(from, to)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        LocalFs.list(dir)
    }
    fn delete(&self, path: &Path) -> Result<()> {
        LocalFs.delete(path)
    }
    fn delete_dir_all(&self, dir: &Path) -> Result<()> {
        LocalFs.delete_dir_all(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        LocalFs.create_dir_all(dir)
    }
    fn exists(&self, path: &Path) -> Result<bool> {
        LocalFs.exists(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        LocalFs.truncate(path, len)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        LocalFs.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> Result<LockGuard> {
        LocalFs.lock(path)
    }
}

/// A file of ~600 KiB in 4 KiB blocks, opened through a recording file system.
fn open_recorded(dir: &Path) -> (Arc<StoreFile>, Arc<Mutex<Vec<Op>>>, u64) {
    let entries = common::entries(12_000);
    let o = common::opts(Compression::None, BloomType::Row, 4096);
    let (path, _) = common::write(&common::fs(), dir, "f", o, &entries);
    let ops = Arc::new(Mutex::new(Vec::new()));
    let fs: FsRef = Arc::new(Recording {
        ops: Arc::clone(&ops),
    });
    let file = StoreFile::open(&fs, &path, 1, None, Priority::Normal).expect("open");
    ops.lock().clear();
    let len = std::fs::metadata(&path).expect("stat").len();
    (file, ops, len)
}

fn prefetched(ops: &[Op]) -> Vec<(u64, u64)> {
    ops.iter()
        .filter_map(|op| match *op {
            Op::Prefetch { offset, len } => Some((offset, offset + len)),
            Op::Read { .. } => None,
        })
        .collect()
}

/// Whether the union of `ranges` holds all of `start..end`.
fn covered(ranges: &[(u64, u64)], start: u64, end: u64) -> bool {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    let mut at = start;
    for (s, e) in sorted {
        if s <= at && e > at {
            at = e;
        }
    }
    at >= end
}

/// Checks a full read's operations: every block from the fourth on lies inside ranges asked
/// for before it was read, no byte is asked for twice, windows stay bounded.
fn check_full_read(ops: &[Op], len: u64, fill_cache: bool) {
    let reads: Vec<(u64, u64)> = ops
        .iter()
        .filter_map(|op| match *op {
            Op::Read { offset, len } => Some((offset, offset + len)),
            Op::Prefetch { .. } => None,
        })
        .collect();
    assert!(reads.len() > 100, "{} blocks read", reads.len());
    for (i, &(start, end)) in reads.iter().enumerate().skip(3) {
        let pos = ops
            .iter()
            .position(|op| {
                *op == Op::Read {
                    offset: start,
                    len: end - start,
                }
            })
            .expect("read recorded");
        let asked = prefetched(ops.get(..pos).expect("prefix"));
        assert!(
            covered(&asked, start, end.min(len)),
            "block {i} at {start}..{end} was not prefetched (fill_cache {fill_cache}): {asked:?}"
        );
    }
    let asked = prefetched(ops);
    for pair in asked.windows(2) {
        let (Some(a), Some(b)) = (pair.first(), pair.get(1)) else {
            continue;
        };
        assert!(a.1 <= b.0, "overlapping prefetches {a:?} {b:?}");
    }
    let max = if fill_cache { 1 << 20 } else { 2 << 20 };
    assert!(asked.iter().all(|&(s, e)| e - s <= max), "{asked:?}");
    assert!(
        asked.len() < reads.len() / 4,
        "{} prefetches for {} blocks",
        asked.len(),
        reads.len()
    );
}

#[test]
fn a_full_read_asks_ahead_for_every_block_after_the_first_few() {
    let dir = tempfile::tempdir().expect("tmp");
    let (file, ops, len) = open_recorded(dir.path());
    for fill_cache in [false, true] {
        let mut it = file.iter(fill_cache);
        // Twice with one iterator: after the seek back to the start, what was asked for
        // ahead of the end of the first pass must not stop it asking again.
        for pass in 0..2 {
            ops.lock().clear();
            let cells = common::read_all(&mut it);
            assert_eq!(cells.len(), 12_000, "pass {pass}");
            check_full_read(&ops.lock().clone(), len, fill_cache);
        }
    }
}

#[test]
fn point_reads_ask_for_nothing_ahead() {
    let dir = tempfile::tempdir().expect("tmp");
    let (file, ops, _) = open_recorded(dir.path());
    let mut it = file.iter(true);
    for i in (0..12_000u64).step_by(997) {
        let key = common::key(i);
        it.seek(&key).expect("seek");
        assert!(it.valid());
        assert_eq!(it.key(), key.as_slice());
        it.next().expect("next");
    }
    let ops = ops.lock().clone();
    assert!(ops.iter().any(|op| matches!(op, Op::Read { .. })));
    assert_eq!(prefetched(&ops), Vec::<(u64, u64)>::new(), "{ops:?}");
}
