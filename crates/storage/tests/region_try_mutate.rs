//! `Region::try_mutate`, the write a network reactor may run itself: it applies plain puts
//! exactly as `mutate` does, and declines (doing nothing) whatever could wait on disk or on
//! back-pressure, so the caller can hand it to a thread that may wait.

use cellar_model::{Durability, FamilySchema, Get, RowMutation, TableSchema};
use cellar_storage::region::{Region, StorageConfig};
use std::time::Duration;

fn open(dir: &std::path::Path, config: StorageConfig) -> Region {
    Region::open_with_config(
        dir,
        TableSchema::new("t", vec![FamilySchema::new("cf")]),
        config,
    )
    .expect("open")
}

fn value(region: &Region, row: &[u8]) -> Option<Vec<u8>> {
    region
        .get(&Get::new(row.to_vec()))
        .expect("get")
        .first()
        .map(|c| c.value.to_vec())
}

#[test]
fn plain_puts_are_applied_and_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path(), StorageConfig::default());
    let put = RowMutation::new(b"r1".to_vec()).put(b"cf", b"q", 5, b"v1".to_vec());
    region
        .try_mutate(&put)
        .expect("a plain put is served inline")
        .expect("put");
    assert_eq!(value(&region, b"r1").as_deref(), Some(&b"v1"[..]));
    drop(region);
    // Acknowledged through the log like any write: a reopen replays it.
    let region = open(dir.path(), StorageConfig::default());
    assert_eq!(value(&region, b"r1").as_deref(), Some(&b"v1"[..]));
    region.close().expect("close");
}

#[test]
fn writes_that_may_wait_are_declined_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path(), StorageConfig::default());
    let fsync = RowMutation::new(b"r1".to_vec())
        .put(b"cf", b"q", 5, b"v".to_vec())
        .with_durability(Durability::FsyncWal);
    assert!(
        region.try_mutate(&fsync).is_none(),
        "FSYNC_WAL waits on the disk"
    );
    let delete = RowMutation::new(b"r1".to_vec()).delete_column(b"cf", b"q", 9);
    assert!(
        region.try_mutate(&delete).is_none(),
        "deletes go to the pool"
    );
    assert_eq!(value(&region, b"r1"), None, "nothing was written");
    // Bad input is still answered inline, with the error mutate gives.
    let bad = RowMutation::new(b"r1".to_vec()).put(b"nope", b"q", 5, b"v".to_vec());
    let err = region
        .try_mutate(&bad)
        .expect("answered inline")
        .expect_err("unknown family");
    assert!(err.to_string().contains("nope"), "{err}");
    region.close().expect("close");
}

#[test]
fn back_pressure_declines_instead_of_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StorageConfig {
        blocking_store_files: 1,
        blocking_wait: Duration::from_millis(50),
        ..StorageConfig::default()
    };
    let region = open(dir.path(), config);
    let put = |row: &[u8]| RowMutation::new(row.to_vec()).put(b"cf", b"q", 5, b"v".to_vec());
    region.mutate(&put(b"a")).expect("put");
    region.flush().expect("flush");
    // One store file is the limit: writers are held back, so the reactor must not take it.
    assert!(region.try_mutate(&put(b"b")).is_none());
    region
        .mutate(&put(b"b"))
        .expect("the blocking path waits, then proceeds");
    assert_eq!(value(&region, b"b").as_deref(), Some(&b"v"[..]));
    region.close().expect("close");
}

#[test]
fn deferred_puts_are_invisible_until_finished_and_share_one_wal_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = open(dir.path(), StorageConfig::default());
    let put = |row: &[u8], v: &[u8]| RowMutation::new(row.to_vec()).put(b"cf", b"q", 5, v.to_vec());
    let before = region.services().wal.stats();
    let first = region
        .try_mutate_deferred(&put(b"a", b"1"))
        .expect("plain put")
        .expect("started");
    let second = region
        .try_mutate_deferred(&put(b"b", b"2"))
        .expect("plain put")
        .expect("started");
    // Not acknowledged yet: readers do not see either write.
    assert_eq!(value(&region, b"a"), None);
    assert_eq!(value(&region, b"b"), None);
    first.finish().expect("finish");
    let after_first = region.services().wal.stats();
    assert_eq!(after_first.appends - before.appends, 2);
    assert!(
        after_first.flushes - before.flushes <= 1,
        "both records went to the OS in one write round"
    );
    assert!(after_first.bytes_written > before.bytes_written);
    assert_eq!(value(&region, b"a").as_deref(), Some(&b"1"[..]));
    second.finish().expect("finish");
    assert_eq!(
        region.services().wal.stats().flushes,
        after_first.flushes,
        "the second record was already in the OS"
    );
    assert_eq!(value(&region, b"b").as_deref(), Some(&b"2"[..]));

    // Dropped without finish: it finishes then, so later writes do not wait for it forever.
    drop(
        region
            .try_mutate_deferred(&put(b"c", b"3"))
            .expect("plain put")
            .expect("started"),
    );
    region
        .mutate(&put(b"d", b"4"))
        .expect("a later write completes");
    assert_eq!(value(&region, b"c").as_deref(), Some(&b"3"[..]));
    drop(region);
    // Every finished write was logged: a reopen replays them.
    let region = open(dir.path(), StorageConfig::default());
    for (row, v) in [(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"4")] {
        assert_eq!(value(&region, row).as_deref(), Some(&v[..]));
    }
    region.close().expect("close");
}
