//! Major compactions that nobody asks for: a minor selection that takes every file of a store,
//! and the periodic one (`major_compaction_period_ms`, HBase's weekly major compaction).

use cellar_model::{FamilySchema, Get, RowMutation, TableSchema};
use cellar_storage::region::{Compacted, CompactionStyle, ManualClock, Region, StorageConfig};
use std::path::Path;
use std::sync::Arc;

const DAY_MS: u64 = 24 * 3600 * 1000;
const T0: u64 = 1_800_000_000_000;

fn schema(ttl_secs: Option<u64>) -> TableSchema {
    let mut f = FamilySchema::new("cf");
    f.ttl_secs = ttl_secs;
    TableSchema::new("t", vec![f])
}

fn open(dir: &Path, clock: &Arc<ManualClock>, background: bool, ttl: Option<u64>) -> Region {
    open_with_style(dir, clock, background, ttl, CompactionStyle::Leveled)
}

fn open_with_style(
    dir: &Path,
    clock: &Arc<ManualClock>,
    background: bool,
    ttl: Option<u64>,
    compaction_style: CompactionStyle,
) -> Region {
    let config = StorageConfig {
        compaction_style,
        major_compaction_period_ms: 7 * DAY_MS,
        major_compaction_jitter: 0.0,
        // Overwrites here are whole files of the same rows; the space-amplification rule
        // (tested in `region_sorted_runs.rs`) would merge them before the periodic rule could.
        compaction_max_space_amp: 0.0,
        background,
        clock: Arc::clone(clock) as _,
        ..StorageConfig::default()
    };
    Region::open_with_config(dir, schema(ttl), config).expect("open")
}

/// Writes `rows` rows, each one version of `cf:q` at `ts`, and flushes them to one file.
fn write_file(region: &Region, rows: u32, ts: u64, tag: u8) {
    for i in 0..rows {
        let m =
            RowMutation::new(format!("r{i:05}").into_bytes()).put(b"cf", b"q", ts, vec![tag; 100]);
        region.mutate(&m).expect("put");
    }
    region.flush().expect("flush");
}

fn value(region: &Region, row: &str) -> Option<u8> {
    let cells = region.get(&Get::new(row.as_bytes().to_vec())).expect("get");
    cells.first().map(|c| c.value[0])
}

#[test]
fn a_minor_selection_of_every_file_drops_overwritten_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0));
    // The ratio rule's selections (leveled compaction's are in `region_leveled.rs`).
    let region = open_with_style(dir.path(), &clock, false, None, CompactionStyle::Tiered);
    // Three files of equal size: the ratio rule takes all three.
    for (ts, tag) in [(1, b'a'), (2, b'b'), (3, b'c')] {
        write_file(&region, 500, ts, tag);
    }
    let before = region.stats();
    assert_eq!(before.store_files, 3);
    assert_eq!(
        region.compact_stores(false).expect("compact"),
        vec![Compacted::Major]
    );
    let after = region.stats();
    assert_eq!(after.store_files, 1);
    assert_eq!(after.major_compactions, 1);
    // One version (the family keeps one) of 500 rows instead of three.
    assert!(
        after.store_file_bytes * 2 < before.store_file_bytes,
        "excess versions dropped: {before:?} -> {after:?}"
    );
    assert_eq!(value(&region, "r00007"), Some(b'c'));

    // Three small files beside the big one: the ratio rule leaves the big one out, so the
    // compaction is minor and keeps every version the reads see.
    for (ts, tag) in [(4, b'd'), (5, b'e'), (6, b'f')] {
        write_file(&region, 50, ts, tag);
    }
    assert_eq!(
        region.compact_stores(false).expect("compact"),
        vec![Compacted::Minor]
    );
    assert_eq!(region.stats().store_files, 2);
    assert_eq!(value(&region, "r00001"), Some(b'f'));
    assert_eq!(value(&region, "r00400"), Some(b'c'));
    region.close().expect("close");
}

#[test]
fn a_store_is_major_compacted_once_its_oldest_file_is_a_period_old() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0));
    let region = open(dir.path(), &clock, true, None);
    write_file(&region, 300, 1, b'a');
    clock.advance(DAY_MS);
    write_file(&region, 300, 2, b'b');
    region.wait_for_background();
    assert_eq!(
        region.stats().store_files,
        2,
        "two files: no minor compaction"
    );

    // Six days after the first file: not due yet.
    clock.advance(5 * DAY_MS);
    assert!(!region.major_compaction_due());
    region.request_compaction_if_due();
    region.wait_for_background();
    assert_eq!(region.stats().compactions, 0);

    // A week after it: due, and done without anyone asking for a compaction.
    clock.advance(DAY_MS + 1);
    assert!(region.major_compaction_due());
    region.request_compaction_if_due();
    region.wait_for_background();
    let s = region.stats();
    assert_eq!((s.store_files, s.major_compactions), (1, 1), "{s:?}");
    assert_eq!(value(&region, "r00010"), Some(b'b'));

    // One major-compacted file without a TTL has nothing to drop: never due again by age.
    clock.advance(30 * DAY_MS);
    assert!(!region.major_compaction_due());
    region.request_compaction_if_due();
    region.wait_for_background();
    assert_eq!(region.stats().major_compactions, 1);
    region.close().expect("close");

    // The file's age is in the file: after a reopen, the next flush finds the store (a
    // 30-day-old compacted file and a new one) due, and compacts it.
    let region = open(dir.path(), &clock, true, None);
    write_file(&region, 10, 3, b'c');
    region.wait_for_background();
    let s = region.stats();
    assert_eq!((s.store_files, s.major_compactions), (1, 1), "{s:?}");
    assert_eq!(value(&region, "r00005"), Some(b'c'));
    assert_eq!(value(&region, "r00100"), Some(b'b'));
    region.close().expect("close");
}

#[test]
fn a_compacted_store_with_a_ttl_is_compacted_again_once_cells_can_have_expired() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0));
    // Cells live for 10 days.
    let region = open(dir.path(), &clock, true, Some(10 * 24 * 3600));
    for i in 0..200u32 {
        let m =
            RowMutation::new(format!("r{i:05}").into_bytes()).put(b"cf", b"q", T0, vec![1; 100]);
        region.mutate(&m).expect("put");
    }
    region.flush().expect("flush");
    region.compact(true).expect("major");
    assert_eq!(region.stats().major_compactions, 1);

    clock.advance(8 * DAY_MS);
    assert!(
        !region.major_compaction_due(),
        "a week old, but nothing can have expired"
    );
    clock.advance(3 * DAY_MS);
    assert!(region.major_compaction_due(), "cells are past their TTL");
    region.request_compaction_if_due();
    region.wait_for_background();
    let s = region.stats();
    assert_eq!(s.major_compactions, 2, "{s:?}");
    assert_eq!(value(&region, "r00001"), None, "expired");
    assert!(!region.major_compaction_due());
    region.close().expect("close");
}
