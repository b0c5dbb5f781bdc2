//! Readahead: store files are mapped without the kernel's read-around, so an iterator that
//! reads blocks in order asks for what lies ahead itself, and one that reads a block or two
//! (a Get, a short scan) asks for nothing beyond them. A seek across several files asks for
//! each file's block before it reads any, so that their reads from the disk overlap.

mod common;

use bytes::Bytes;
use cellar_model::{BloomType, Compression, Result};
use cellar_storage::block_cache::{BlockCache, Priority};
use cellar_storage::fs::{FileSystem, FsRef, LocalFs, LockGuard, RandomAccessFile, WritableFile};
use cellar_storage::iter::{CellIter, MergeIter};
use cellar_storage::storefile::StoreFile;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the store file asked of its file, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read { offset: u64, len: u64 },
    Prefetch { offset: u64, len: u64 },
}

/// What the files asked of their files, in order, each with its file.
type Trace = Arc<Mutex<Vec<(PathBuf, Op)>>>;

/// Local disk, recording the reads and prefetches of the files it opens.
struct Recording {
    ops: Arc<Mutex<Vec<Op>>>,
    trace: Trace,
}

struct RecordingFile {
    inner: Arc<dyn RandomAccessFile>,
    ops: Arc<Mutex<Vec<Op>>>,
    trace: Trace,
}

impl RecordingFile {
    fn record(&self, op: Op) {
        self.ops.lock().push(op);
        self.trace
            .lock()
            .push((self.inner.path().to_path_buf(), op));
    }
}

impl RandomAccessFile for RecordingFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        self.record(Op::Read {
            offset,
            len: len as u64,
        });
        self.inner.read_at(offset, len)
    }
    fn prefetch(&self, offset: u64, len: u64) {
        self.record(Op::Prefetch { offset, len });
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
    fn create_in_existing_dir(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        LocalFs.create_in_existing_dir(path)
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        LocalFs.open(path)
    }
    fn open_immutable(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(RecordingFile {
            inner: LocalFs.open_immutable(path)?,
            ops: Arc::clone(&self.ops),
            trace: Arc::clone(&self.trace),
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
        trace: Trace::default(),
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

/// Three files of interleaved keys (every third key each) in 4 KiB blocks, opened through one
/// recording file system sharing `cache`.
fn open_three(dir: &Path, cache: Option<Arc<BlockCache>>) -> (Vec<Arc<StoreFile>>, Trace) {
    let trace = Trace::default();
    let fs: FsRef = Arc::new(Recording {
        ops: Arc::default(),
        trace: Arc::clone(&trace),
    });
    let all = common::entries(12_000);
    let files = (0..3u64)
        .map(|f| {
            let mine: Vec<_> = all
                .iter()
                .enumerate()
                .filter(|(i, _)| *i as u64 % 3 == f)
                .map(|(_, e)| e.clone())
                .collect();
            let o = common::opts(Compression::None, BloomType::Row, 4096);
            let (path, _) = common::write(&common::fs(), dir, &format!("f{f}"), o, &mine);
            StoreFile::open(&fs, &path, f + 1, cache.clone(), Priority::Normal).expect("open")
        })
        .collect();
    trace.lock().clear();
    (files, trace)
}

fn merge_of(files: &[Arc<StoreFile>]) -> MergeIter {
    MergeIter::new(
        files
            .iter()
            .map(|f| Box::new(f.iter(true)) as Box<dyn CellIter>)
            .collect(),
    )
}

#[test]
fn a_seek_across_files_asks_for_every_files_block_before_reading_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let (files, trace) = open_three(dir.path(), None);
    let mut merge = merge_of(&files);
    for i in [100u64, 5_000, 11_000] {
        trace.lock().clear();
        let key = common::key(i);
        merge.seek(&key).expect("seek");
        assert!(merge.valid());
        assert_eq!(merge.key(), key.as_slice(), "seek to key {i}");
        let ops = trace.lock().clone();
        // One prefetch and then one read of the same bytes per file, every prefetch first.
        let (asked, read): (Vec<_>, Vec<_>) = ops
            .iter()
            .partition(|(_, op)| matches!(op, Op::Prefetch { .. }));
        assert_eq!(asked.len(), 3, "seek to key {i}: {ops:?}");
        assert_eq!(read.len(), 3, "seek to key {i}: {ops:?}");
        assert!(ops[..3]
            .iter()
            .all(|(_, op)| matches!(op, Op::Prefetch { .. })));
        for (path, op) in read {
            let Op::Read { offset, len } = *op else {
                unreachable!()
            };
            assert!(
                asked.contains(&&(path.clone(), Op::Prefetch { offset, len })),
                "{path:?} read {offset}+{len} without asking for it first: {ops:?}"
            );
        }
        // Seeking again (the next column of a row, say) uses the blocks in hand: nothing is
        // asked for or read.
        trace.lock().clear();
        merge.seek(&key).expect("seek");
        assert_eq!(merge.key(), key.as_slice());
        assert_eq!(trace.lock().clone(), Vec::new(), "seek to key {i} again");
    }
}

#[test]
fn a_seek_asks_nothing_for_cached_blocks_nor_for_a_single_file() {
    let dir = tempfile::tempdir().expect("tmp");
    let cache = Arc::new(BlockCache::new(64 << 20));
    let (files, trace) = open_three(dir.path(), Some(cache));
    let key = common::key(7_000);
    merge_of(&files).seek(&key).expect("seek");
    assert_eq!(
        trace
            .lock()
            .iter()
            .filter(|(_, op)| matches!(op, Op::Read { .. }))
            .count(),
        3
    );
    // The blocks are cached now: a new merge seeks without asking for or reading anything.
    trace.lock().clear();
    let mut merge = merge_of(&files);
    merge.seek(&key).expect("seek");
    assert_eq!(merge.key(), key.as_slice());
    assert_eq!(trace.lock().clone(), Vec::new());
    // One file, alone or beside a memstore (a Get's usual sources), has no other read to
    // overlap with: it reads without asking first.
    let (memstore, _) = common::filled_memstore(10, 1);
    for (n, with_memstore) in [(3_000u64, false), (9_000, true)] {
        trace.lock().clear();
        let mut sources = vec![Box::new(files[0].iter(true)) as Box<dyn CellIter>];
        if with_memstore {
            sources.push(Box::new(memstore.iter()));
        }
        let mut merge = MergeIter::new(sources);
        merge.seek(&common::key(n)).expect("seek");
        let ops = trace.lock().clone();
        assert!(
            ops.iter().any(|(_, op)| matches!(op, Op::Read { .. })),
            "{ops:?}"
        );
        assert!(
            ops.iter().all(|(_, op)| matches!(op, Op::Read { .. })),
            "{ops:?}"
        );
    }
}

#[test]
fn a_scan_that_expects_rows_asks_for_their_blocks_with_its_seek() {
    let dir = tempfile::tempdir().expect("tmp");
    let (files, trace) = open_three(dir.path(), None);
    let mut merge = merge_of(&files);
    let start = 3_000u64;
    merge
        .seek_ahead(&common::key(start), 300, &[])
        .expect("seek");
    // Everything asked for is asked for before the first read: one wait on the disk.
    let first_read = trace
        .lock()
        .iter()
        .position(|(_, op)| matches!(op, Op::Read { .. }))
        .expect("a read");
    let asked: Vec<(PathBuf, u64, u64)> = trace.lock()[..first_read]
        .iter()
        .map(|(p, op)| match *op {
            Op::Prefetch { offset, len } => (p.clone(), offset, offset + len),
            Op::Read { .. } => unreachable!(),
        })
        .collect();
    assert!(asked.len() > 3, "more than the seeks' blocks: {asked:?}");
    for i in 0..300u64 {
        assert!(merge.valid());
        assert_eq!(merge.key(), common::key(start + i).as_slice());
        merge.advance().expect("next");
    }
    // The 300 rows' blocks were all asked for with the seek, none read without that.
    for (path, op) in trace.lock().iter() {
        if let Op::Read { offset, len } = *op {
            assert!(
                asked
                    .iter()
                    .any(|(p, s, e)| p == path && *s <= offset && offset + len <= *e),
                "{path:?} read {offset}+{len} not asked for with the seek: {asked:?}"
            );
        }
    }
    // And not much more: each file's share is bounded by its size times 300 rows over the
    // largest file's cells (here each file holds every third row: three times the share).
    for f in &files {
        let mine: u64 = asked
            .iter()
            .filter(|(p, _, _)| p == f.path())
            .map(|(_, s, e)| e - s)
            .sum();
        let share = f.meta().file_size * 300 / f.meta().cell_count;
        assert!(
            mine <= share + 2 * 4200,
            "{:?} asked {mine} B, share {share} B",
            f.path()
        );
    }
}

#[test]
fn a_scan_asks_for_nothing_past_its_stop_row() {
    let dir = tempfile::tempdir().expect("tmp");
    let (files, trace) = open_three(dir.path(), None);
    let mut merge = merge_of(&files);
    // 300 rows expected, but the stop key is 12 keys on: each file reads four of its
    // entries, in the seek's block or the next one.
    let (start, stop) = (3_000u64, 3_012u64);
    merge
        .seek_ahead(&common::key(start), 300, &common::key(stop))
        .expect("seek");
    let asked: Vec<(PathBuf, u64)> = trace
        .lock()
        .iter()
        .filter_map(|(p, op)| match *op {
            Op::Prefetch { len, .. } => Some((p.clone(), len)),
            Op::Read { .. } => None,
        })
        .collect();
    for f in &files {
        let blocks = asked.iter().filter(|(p, _)| p == f.path()).count();
        assert!(
            (1..=2).contains(&blocks),
            "{:?}: {blocks} blocks asked for: {asked:?}",
            f.path()
        );
    }
    for i in start..stop {
        assert_eq!(merge.key(), common::key(i).as_slice());
        merge.advance().expect("next");
    }
}
