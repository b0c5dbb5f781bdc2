//! Power-loss tests on the fault-injecting file system: whatever was not synced is lost, file
//! data and names alike (creates, renames and deletes whose directory was not synced are
//! undone). FSYNC_WAL writes survive a power cut; a cut at any point of a flush, a minor or
//! major compaction, a WAL roll, the deletion of flushed WAL segments or a split leaves a region
//! that opens with nothing acknowledged lost and nothing deleted back.

use cellar_model::{Durability, FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::fs::{FaultFs, FsRef};
use cellar_storage::region::{Region, RegionInfo, StorageConfig, StorageServices};
use cellar_storage::wal::WalOptions;
use std::path::Path;
use std::sync::Arc;

fn schema() -> TableSchema {
    let mut f = FamilySchema::new("cf");
    f.block_size = 1024;
    TableSchema::new("power", vec![f])
}

fn open(fs: &FaultFs, dir: &Path) -> Region {
    let config = StorageConfig {
        background: false,
        ..StorageConfig::default()
    };
    Region::open_standalone(Arc::new(fs.clone()) as FsRef, dir, schema(), config)
        .expect("open region")
}

fn put(region: &Region, i: u32, d: Durability) -> cellar_model::Result<()> {
    let k = format!("key{i:05}");
    region.mutate(
        &RowMutation::new(k.clone().into_bytes())
            .put(b"cf", b"q", 1000 + i as u64, format!("v-{k}").into_bytes())
            .with_durability(d),
    )
}

fn check(region: &Region, keys: impl Iterator<Item = u32>) {
    for i in keys {
        let k = format!("key{i:05}");
        let cells = region.get(&Get::new(k.clone().into_bytes())).expect("get");
        assert_eq!(cells.len(), 1, "acknowledged {k} lost");
        assert_eq!(
            cells[0].value,
            format!("v-{k}").into_bytes(),
            "{k} has a wrong value"
        );
    }
    for row in region.scan(&Scan::new()).expect("scan") {
        let row = row.expect("row");
        let k = String::from_utf8(row[0].row.to_vec()).expect("utf8");
        assert_eq!(
            row[0].value,
            format!("v-{k}").into_bytes(),
            "{k}: value never written"
        );
    }
}

#[test]
fn fsync_wal_writes_survive_a_power_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let region = open(&fs, dir.path());
    for i in 0..200 {
        put(&region, i, Durability::FsyncWal).expect("fsync put");
    }
    // Written to the OS only: allowed to vanish.
    for i in 200..300 {
        put(&region, i, Durability::SyncWal).expect("sync put");
    }
    fs.power_cut();
    drop(region);
    fs.restore_power();
    let region = open(&fs, dir.path());
    check(&region, 0..200);
    region.close().expect("close");
}

/// Cuts the power after `n` file operations of a flush followed by a major compaction, for every
/// `n` until both complete; after each cut the region must open with every write.
#[test]
fn power_cut_anywhere_in_flush_or_compaction_loses_nothing() {
    for n in 0..400u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        let region = open(&fs, dir.path());
        // Two flushed files (so the compaction has inputs), then more writes in the memstore.
        for batch in 0..3u32 {
            for i in batch * 100..batch * 100 + 100 {
                put(&region, i, Durability::FsyncWal).expect("put");
            }
            if batch < 2 {
                region.flush().expect("setup flush");
            }
        }
        // A deletion, so the major compaction drops something.
        region
            .mutate(
                &RowMutation::new(b"key00007".to_vec())
                    .delete_column(b"cf", b"q", u64::MAX >> 2)
                    .with_durability(Durability::FsyncWal),
            )
            .expect("delete");
        fs.cut_after(n);
        let flushed = region.flush();
        let compacted = flushed.is_ok() && region.compact(true).is_ok();
        let finished = compacted && !fs.is_dead();
        fs.power_cut();
        drop(region);
        fs.restore_power();
        let region = open(&fs, dir.path());
        check(&region, (0..300).filter(|&i| i != 7));
        assert!(
            region
                .get(&Get::new(b"key00007".to_vec()))
                .expect("get")
                .is_empty(),
            "cut {n}: deleted row came back"
        );
        region.close().expect("close");
        if finished {
            // Every earlier n cut the power inside the flush or the compaction.
            assert!(
                n > 5,
                "the sweep must land cuts inside flush and compaction"
            );
            return;
        }
    }
    panic!("flush + compaction never completed within 400 operations");
}

fn config() -> StorageConfig {
    StorageConfig {
        background: false,
        // Small segments: the sweep rolls and deletes several.
        wal: WalOptions {
            segment_size: 4096,
            async_flush_interval: std::time::Duration::from_secs(3600),
            ..WalOptions::default()
        },
        ..StorageConfig::default()
    }
}

/// A region of its own services on `fs`, so the WAL is rolled and its segments deleted by
/// the sweep's own calls.
fn open_services(fs: &FaultFs, dir: &Path) -> (std::sync::Arc<StorageServices>, Region) {
    let fs: FsRef = Arc::new(fs.clone());
    let (services, replay) =
        StorageServices::open(Arc::clone(&fs), &dir.join("wal"), config()).expect("services");
    let region = Region::open_in(
        &services,
        &dir.join("region"),
        RegionInfo::whole(1),
        schema(),
        &replay,
    )
    .expect("open region");
    (services, region)
}

/// Writes keys `from..to` with FSYNC_WAL.
fn put_range(region: &Region, from: u32, to: u32) {
    for i in from..to {
        put(region, i, Durability::FsyncWal).expect("put");
    }
}

/// Cuts the power after `n` file operations of: a flush, a minor compaction, a WAL roll, more
/// writes, a flush that lets flushed segments go, a major compaction; for every `n` until the
/// whole sequence completes. After each cut every acknowledged write is there, the deleted
/// row stays deleted, and nothing else appears.
#[test]
fn power_cut_anywhere_in_compactions_rolls_and_segment_deletion_loses_nothing() {
    let mut n = 0u64;
    loop {
        assert!(n < 3000, "the sequence never completed");
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        let (services, region) = open_services(&fs, dir.path());
        // Three flushed files (a minor compaction has inputs), then the memstore.
        for batch in 0..3u32 {
            put_range(&region, batch * 60, batch * 60 + 60);
            region.flush().expect("setup flush");
        }
        put_range(&region, 180, 240);
        region
            .mutate(
                &RowMutation::new(b"key00007".to_vec())
                    .delete_column(b"cf", b"q", u64::MAX >> 2)
                    .with_durability(Durability::FsyncWal),
            )
            .expect("delete");
        let mut acked = 240u32;
        fs.cut_after(n);
        let sequence = (|| -> cellar_model::Result<()> {
            region.flush()?;
            region.compact(false)?;
            services.wal.roll()?;
            for i in 240..300 {
                put(&region, i, Durability::FsyncWal)?;
                acked = i + 1;
            }
            region.flush()?;
            region.compact(true)
        })();
        let finished = sequence.is_ok() && !fs.is_dead();
        fs.power_cut();
        drop(region);
        drop(services);
        fs.restore_power();
        let (services, region) = open_services(&fs, dir.path());
        check(&region, (0..acked).filter(|&i| i != 7));
        assert!(
            region
                .get(&Get::new(b"key00007".to_vec()))
                .expect("get")
                .is_empty(),
            "cut after {n} operations: the deleted row came back"
        );
        region.close().expect("close");
        drop(services);
        if finished {
            assert!(n > 20, "the sweep must land cuts inside the sequence");
            return;
        }
        n += 1;
    }
}

/// Cuts the power anywhere in a split: the parent opens whole afterwards, and once the split
/// completes, the daughters hold every row between them.
#[test]
fn power_cut_anywhere_in_a_split_keeps_every_row() {
    let mut n = 0u64;
    loop {
        assert!(n < 500, "the split never completed");
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        let (services, region) = open_services(&fs, dir.path());
        put_range(&region, 0, 100);
        region.flush().expect("flush");
        put_range(&region, 100, 150);
        let mid = region.middle_row().expect("middle row");
        let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
        fs.cut_after(n);
        let split = region.split(&mid, (a_dir.clone(), 2), (b_dir.clone(), 3));
        let finished = split.is_ok() && !fs.is_dead();
        fs.power_cut();
        drop(services);
        fs.restore_power();
        let fsr: FsRef = Arc::new(fs.clone());
        let (services, replay) =
            StorageServices::open(Arc::clone(&fsr), &dir.path().join("wal"), config())
                .expect("services");
        if let (true, Ok((a_info, b_info))) = (finished, split) {
            let a = Region::open_in(&services, &a_dir, a_info, schema(), &replay).expect("a");
            let b = Region::open_in(&services, &b_dir, b_info, schema(), &replay).expect("b");
            let rows = |r: &Region| r.scan(&Scan::new()).expect("scan").count();
            assert_eq!(rows(&a) + rows(&b), 150, "every row in one daughter");
            a.close().expect("close a");
            b.close().expect("close b");
            return;
        }
        let parent = Region::open_in(
            &services,
            &dir.path().join("region"),
            RegionInfo::whole(1),
            schema(),
            &replay,
        )
        .expect("the parent opens after a cut in its split");
        check(&parent, 0..150);
        parent.close().expect("close");
        n += 1;
    }
}
