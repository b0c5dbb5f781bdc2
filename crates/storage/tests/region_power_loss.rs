//! Power-loss tests on the fault-injecting file system: whatever was not synced is lost.
//! FSYNC_WAL writes survive a power cut; a cut at any point of a flush or a compaction leaves a
//! region that opens with nothing acknowledged lost.

use cellar_model::{Durability, FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_storage::fs::{FaultFs, FsRef};
use cellar_storage::region::{Region, StorageConfig};
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
