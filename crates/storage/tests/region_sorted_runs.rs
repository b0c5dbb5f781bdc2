//! Sorted runs (`region/runs.rs`): files that hold disjoint row ranges, as sequential writes
//! flush them, count as one run. They are not compacted for their number, and every read
//! through them (Gets, forward and reversed scans, scans starting anywhere) sees what it
//! would see in one file; files that overlap are still compacted by the ratio rule.

use cellar_model::{FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::region::{Compacted, CompactionStyle, Region, StorageConfig};
use std::path::Path;

const FILES: u32 = 8;
const ROWS_PER_FILE: u32 = 250;

fn open(dir: &Path) -> Region {
    open_with_space_amp(dir, StorageConfig::default().compaction_max_space_amp)
}

fn open_with_space_amp(dir: &Path, compaction_max_space_amp: f64) -> Region {
    let mut f = FamilySchema::new("cf");
    f.block_size = 4096;
    let config = StorageConfig {
        background: false,
        compaction_min_files: 3,
        compaction_max_space_amp,
        // Runs and the space rule are tiered compaction's (leveled: `region_leveled.rs`).
        compaction_style: CompactionStyle::Tiered,
        ..StorageConfig::default()
    };
    Region::open_with_config(dir, TableSchema::new("t", vec![f]), config).expect("open")
}

fn row(i: u32) -> Vec<u8> {
    format!("r{i:06}").into_bytes()
}

fn put(region: &Region, i: u32, tag: u8) {
    let m = RowMutation::new(row(i)).put(b"cf", b"q", 0, vec![tag; 64]);
    region.mutate(&m).expect("put");
}

/// The rows a scan returns, with the first byte of each row's value.
fn scan(region: &Region, scan: Scan) -> Vec<(Vec<u8>, u8)> {
    region
        .scan(&scan)
        .expect("scan")
        .map(|r| {
            let cells = r.expect("row");
            let c = cells.first().expect("a cell per row");
            (c.row.to_vec(), c.value[0])
        })
        .collect()
}

fn value(region: &Region, i: u32) -> Option<u8> {
    let cells = region.get(&Get::new(row(i))).expect("get");
    cells.first().map(|c| c.value[0])
}

/// `FILES` files of `ROWS_PER_FILE` rows each, every file's rows after the previous file's;
/// returns the number of rows.
fn write_sequential_files(region: &Region) -> u32 {
    for f in 0..FILES {
        for i in f * ROWS_PER_FILE..(f + 1) * ROWS_PER_FILE {
            put(region, i, b'a');
        }
        region.flush().expect("flush");
    }
    FILES * ROWS_PER_FILE
}

/// Every read of rows `0..n`, where row `i` holds `expected(i)`.
fn check_reads(region: &Region, n: u32, expected: impl Fn(u32) -> u8) {
    let all: Vec<(Vec<u8>, u8)> = (0..n).map(|i| (row(i), expected(i))).collect();
    assert_eq!(scan(region, Scan::new()), all, "full scan");
    let mut reversed = all.clone();
    reversed.reverse();
    assert_eq!(
        scan(region, Scan::new().reversed()),
        reversed,
        "reversed scan"
    );
    for start in [
        0,
        1,
        ROWS_PER_FILE - 1,
        ROWS_PER_FILE,
        3 * ROWS_PER_FILE + 7,
        n - 1,
    ] {
        let want: Vec<_> = all.iter().skip(start as usize).take(20).cloned().collect();
        let got = scan(region, Scan::new().range(&row(start), b"").limit(20));
        assert_eq!(got, want, "scan from row {start}");
        let want_rev: Vec<_> = all
            .iter()
            .take(start as usize + 1)
            .rev()
            .take(20)
            .cloned()
            .collect();
        let got_rev = scan(
            region,
            Scan::new().range(&row(start), b"").reversed().limit(20),
        );
        assert_eq!(got_rev, want_rev, "reversed scan from row {start}");
    }
    // Bounded scans across file boundaries.
    let got = scan(
        region,
        Scan::new().range(&row(ROWS_PER_FILE - 5), &row(2 * ROWS_PER_FILE + 5)),
    );
    assert_eq!(got.len() as u32, ROWS_PER_FILE + 10);
    for i in (0..n).step_by(7).chain([n - 1]) {
        assert_eq!(value(region, i), Some(expected(i)), "get row {i}");
    }
    assert_eq!(value(region, n + 3), None, "a row after the last");
}

#[test]
fn sequential_files_are_one_run_never_compacted_and_read_as_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path());
    let n = write_sequential_files(&region);
    assert_eq!(region.stats().store_files, FILES as usize);
    assert_eq!(
        region.compact_stores(false).expect("compact"),
        vec![Compacted::Nothing],
        "eight disjoint files are one run: nothing to merge"
    );
    let stats = region.stats();
    assert_eq!((stats.store_files, stats.compactions), (FILES as usize, 0));
    check_reads(&region, n, |_| b'a');

    // The same after a reopen, which groups the files again.
    region.close().expect("close");
    let region = open(dir.path());
    assert_eq!(region.stats().store_files, FILES as usize);
    check_reads(&region, n, |_| b'a');

    // Overwrites of every other row make files that overlap the run: three runs now, the
    // two newer ones together as large as the old one, so the ratio rule merges them (every
    // file taken: a major compaction).
    for tag in [b'b', b'c'] {
        for i in (0..n).step_by(2) {
            put(&region, i, tag);
        }
        region.flush().expect("flush");
        // Readers see the newest version whichever run holds it.
        check_reads(&region, n, |i| if i % 2 == 0 { tag } else { b'a' });
    }
    assert_eq!(
        region.compact_stores(false).expect("compact"),
        vec![Compacted::Major]
    );
    let stats = region.stats();
    assert_eq!((stats.store_files, stats.compactions), (1, 1));
    check_reads(&region, n, |i| if i % 2 == 0 { b'c' } else { b'a' });
    region.close().expect("close");
}

/// With background flushes and compactions and a low file limit: sequential rows flushed into
/// many files start no compaction, and the writes never count as over the store-file limit.
#[test]
fn many_sequential_files_are_left_alone_in_the_background() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = FamilySchema::new("cf");
    f.block_size = 1024;
    let config = StorageConfig {
        memstore_flush_bytes: 16 * 1024,
        blocking_store_files: 3,
        ..StorageConfig::default()
    };
    let region =
        Region::open_with_config(dir.path(), TableSchema::new("t", vec![f]), config).expect("open");
    for i in 0..4000 {
        put(&region, i, b'a');
    }
    region.wait_for_background();
    let stats = region.stats();
    assert!(
        stats.store_files > 10,
        "tiny memstores flushed often: {stats:?}"
    );
    assert_eq!(stats.compactions, 0, "one run: {stats:?}");
    assert_eq!(scan(&region, Scan::new()).len(), 4000);
    region.close().expect("close");
}

/// `compaction_max_space_amp` (1.5 by default): two runs, fewer than a minor compaction needs,
/// are merged (major: the overwritten versions go) once the newer one makes the store more
/// than 1.5 times the older.
#[test]
fn overwrites_past_the_space_limit_merge_every_run() {
    let n = 2000;
    let store_after = |overwritten: u32, amp: f64| {
        let dir = tempfile::tempdir().expect("tempdir");
        let region = open_with_space_amp(dir.path(), amp);
        for i in 0..n {
            put(&region, i, b'a');
        }
        region.flush().expect("flush");
        for i in 0..overwritten {
            put(&region, i * (n / overwritten), b'b');
        }
        region.flush().expect("flush");
        let before = region.stats();
        let done = region.compact_stores(false).expect("compact");
        let after = region.stats();
        check_reads(&region, n, |i| {
            if i % (n / overwritten) == 0 && i / (n / overwritten) < overwritten {
                b'b'
            } else {
                b'a'
            }
        });
        region.close().expect("close");
        (done, before, after)
    };
    // 60 % of the rows again: 1.6 times the old run.
    let (done, before, after) = store_after(1200, 1.5);
    assert_eq!(done, vec![Compacted::Major]);
    assert_eq!(after.store_files, 1);
    assert!(
        (after.store_file_bytes as f64) < before.store_file_bytes as f64 / 1.5,
        "overwritten versions dropped: {before:?} -> {after:?}"
    );
    // Off, or under the limit: two runs are left as they are.
    assert_eq!(store_after(1200, 0.0).0, vec![Compacted::Nothing]);
    assert_eq!(store_after(400, 1.5).0, vec![Compacted::Nothing]);
}

/// A split of sequential data cuts the run, not one of its files, in the middle: a daughter
/// gets about half the rows, not the few percent the middle of one file gave.
#[test]
fn the_middle_row_of_sequential_files_is_the_middle_of_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path());
    let n = write_sequential_files(&region);
    let mid = region.middle_row().expect("a middle row");
    let (lo, hi) = (row(n * 35 / 100), row(n * 65 / 100));
    assert!(
        lo.as_slice() <= &mid[..] && &mid[..] <= hi.as_slice(),
        "middle row {} of rows 0..{n}",
        String::from_utf8_lossy(&mid)
    );
    region.close().expect("close");
}
