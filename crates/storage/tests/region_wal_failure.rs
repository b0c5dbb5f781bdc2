//! A write whose WAL write or sync fails is never visible and never flushed; its caller gets an
//! error; the region refuses writes while the log cannot take them, saying why. A full disk
//! heals by itself once space returns, and a restart then recovers exactly the acknowledged
//! writes. A failed sync refuses writes until restart.

use bytes::Bytes;
use cellar_model::{Durability, FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::fs::{FaultFs, FsRef};
use cellar_storage::region::{Region, StorageConfig};
use cellar_storage::wal::WalHealth;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn open(fs: &FaultFs, dir: &Path) -> Region {
    Region::open_standalone(
        Arc::new(fs.clone()) as FsRef,
        dir,
        TableSchema::new("t", vec![FamilySchema::new("cf")]),
        StorageConfig::default(),
    )
    .expect("open region")
}

fn put(region: &Region, row: &str, d: Durability) -> cellar_model::Result<()> {
    region.mutate(
        &RowMutation::new(Bytes::copy_from_slice(row.as_bytes()))
            .put(b"cf", b"q", 1, format!("v-{row}").into_bytes())
            .with_durability(d),
    )
}

fn rows(region: &Region) -> Vec<String> {
    region
        .scan(&Scan::new())
        .expect("scan")
        .map(|r| String::from_utf8_lossy(&r.expect("row")[0].row).into_owned())
        .collect()
}

fn visible(region: &Region, row: &str) -> bool {
    !region
        .get(&Get::new(Bytes::copy_from_slice(row.as_bytes())))
        .expect("get")
        .is_empty()
}

#[test]
fn a_full_disk_refuses_writes_exposes_nothing_and_heals_when_space_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let region = open(&fs, dir.path());
    put(&region, "a", Durability::FsyncWal).expect("put a");
    put(&region, "b", Durability::SyncWal).expect("put b");

    fs.set_free_space(Some(0));
    let err = put(&region, "c", Durability::SyncWal).expect_err("the disk is full");
    let msg = err.to_string();
    assert!(msg.contains("No space left on device"), "{msg}");
    assert!(msg.contains("not applied"), "{msg}");
    assert!(
        !visible(&region, "c"),
        "a write the log lost is not visible"
    );
    assert_eq!(rows(&region), ["a", "b"]);
    assert!(matches!(
        region.services().wal.health(),
        WalHealth::Stalled(_)
    ));
    let refused = put(&region, "d", Durability::AsyncWal).expect_err("refused while full");
    assert!(refused.to_string().contains("refuses writes"), "{refused}");
    assert!(region.flush().is_err(), "no space for a store file either");

    fs.set_free_space(None);
    let deadline = Instant::now() + Duration::from_secs(30);
    while put(&region, "e", Durability::FsyncWal).is_err() {
        assert!(Instant::now() < deadline, "the log never recovered");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(region.services().wal.health(), WalHealth::Ok);
    assert_eq!(region.services().wal.stats().recoveries, 1);
    region.flush().expect("flush once space is back");
    assert_eq!(rows(&region), ["a", "b", "e"]);
    region.close().expect("close");

    let region = open(&fs, dir.path());
    assert_eq!(
        rows(&region),
        ["a", "b", "e"],
        "exactly the acknowledged writes"
    );
    region.close().expect("close");
}

#[test]
fn a_failed_write_is_neither_visible_nor_flushed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let region = open(&fs, dir.path());
    put(&region, "a", Durability::SyncWal).expect("put a");
    fs.fail_writes(1);
    put(&region, "b", Durability::SyncWal).expect_err("EIO");
    assert!(!visible(&region, "b"));
    // The log recovers by itself (the fault was one write); the flush leaves "b" out.
    let deadline = Instant::now() + Duration::from_secs(30);
    while put(&region, "c", Durability::SyncWal).is_err() {
        assert!(Instant::now() < deadline, "the log never recovered");
        std::thread::sleep(Duration::from_millis(20));
    }
    region.flush().expect("flush");
    region.close().expect("close");
    // Without the log, the store files alone hold exactly the acknowledged writes.
    std::fs::remove_dir_all(dir.path().join("wal")).expect("remove wal");
    let region = open(&fs, dir.path());
    assert_eq!(rows(&region), ["a", "c"]);
    region.close().expect("close");
}

#[test]
fn a_failed_sync_is_not_visible_and_writes_are_refused_until_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let region = open(&fs, dir.path());
    put(&region, "a", Durability::FsyncWal).expect("put a");
    fs.fail_syncs(1);
    let err = put(&region, "b", Durability::FsyncWal).expect_err("fdatasync failed");
    assert!(err.to_string().contains("Input/output error"), "{err}");
    assert!(!visible(&region, "b"), "not durable, so not visible");
    assert!(matches!(
        region.services().wal.health(),
        WalHealth::Failed(_)
    ));
    std::thread::sleep(Duration::from_millis(1500)); // past a recovery attempt
    let refused = put(&region, "c", Durability::SyncWal).expect_err("refused");
    assert!(
        refused.to_string().contains("until the server restarts"),
        "{refused}"
    );
    region.flush().expect("flush what is visible");
    assert_eq!(rows(&region), ["a"]);
    assert!(region.close().is_err(), "the log cannot close cleanly");
    std::fs::remove_dir_all(dir.path().join("wal")).expect("remove wal");
    let region = open(&fs, dir.path());
    assert_eq!(rows(&region), ["a"], "the flush left the failed write out");
    region.close().expect("close");
}
