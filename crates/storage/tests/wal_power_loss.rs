//! Records acknowledged with FSYNC_WAL survive a power cut; a failed write or sync makes the log
//! refuse writes so that no caller is told a record is safe when it is not.

use cellar_model::Durability;
use cellar_storage::fs::{FaultFs, FsRef};
use cellar_storage::wal::{Wal, WalHealth, WalOptions};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn open(
    fs: &FaultFs,
    dir: &Path,
    segment_size: u64,
) -> (Arc<Wal>, Vec<cellar_storage::wal::WalRecord>) {
    let fs: FsRef = Arc::new(fs.clone());
    let opts = WalOptions {
        segment_size,
        async_flush_interval: Duration::from_secs(3600),
        ..WalOptions::default()
    };
    Wal::open(fs, dir, opts).expect("open")
}

#[test]
fn fsync_acknowledged_records_survive_power_cuts() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let fs = FaultFs::new();
    let mut acked: HashSet<(u64, u64)> = HashSet::new();
    for round in 0..3u64 {
        let (wal, replayed) = open(&fs, &dir, 2048);
        let got: HashSet<(u64, u64)> = replayed.iter().map(|r| (r.region, r.seq)).collect();
        assert!(
            acked.is_subset(&got),
            "round {round}: lost {:?}",
            acked.difference(&got)
        );
        let handles: Vec<_> = (0..4u64)
            .map(|region| {
                let wal = Arc::clone(&wal);
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..50u64 {
                        let seq = round * 1000 + i;
                        let t = wal
                            .append(region, seq, &[region as u8; 64])
                            .expect("append");
                        let level = if i % 3 == 0 {
                            Durability::SyncWal
                        } else {
                            Durability::FsyncWal
                        };
                        wal.sync(t, level).expect("sync");
                        if level == Durability::FsyncWal {
                            mine.push((region, seq));
                        }
                    }
                    mine
                })
            })
            .collect();
        for h in handles {
            acked.extend(h.join().expect("writer"));
        }
        // Unsynced tails a real crash could leave behind.
        for i in 0..5u64 {
            let t = wal
                .append(9, round * 1000 + i, b"maybe lost")
                .expect("append");
            wal.sync(t, Durability::SyncWal).expect("sync");
        }
        fs.power_cut();
        drop(wal);
        fs.restore_power();
    }
    let (_wal, replayed) = open(&fs, &dir, 2048);
    let got: HashSet<(u64, u64)> = replayed.iter().map(|r| (r.region, r.seq)).collect();
    assert!(acked.is_subset(&got), "lost {:?}", acked.difference(&got));
}

#[test]
fn failed_sync_poisons_the_log_for_every_caller() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let (wal, _) = open(&fs, tmp.path(), 1 << 30);
    let t = wal.append(1, 1, b"safe").expect("append");
    wal.sync(t, Durability::FsyncWal).expect("sync");
    fs.power_cut();
    let handles: Vec<_> = (0..8u64)
        .map(|i| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                wal.append(1, 10 + i, b"doomed")
                    .and_then(|t| wal.sync(t, Durability::FsyncWal))
            })
        })
        .collect();
    for h in handles {
        assert!(
            h.join().expect("thread").is_err(),
            "no waiter is told it is safe"
        );
    }
    assert!(
        wal.append(1, 99, b"later").is_err(),
        "poisoned: appends fail"
    );
    assert!(
        matches!(wal.health(), WalHealth::Stalled(_) | WalHealth::Failed(_)),
        "{:?}",
        wal.health()
    );
    assert!(
        wal.sync(t, Durability::FsyncWal).is_ok(),
        "the record synced before the failure stays acknowledged"
    );
    assert!(wal.close().is_err());
    fs.restore_power();
    drop(wal);
    let (_wal, replayed) = open(&fs, tmp.path(), 1 << 30);
    assert_eq!(replayed.len(), 1, "only the synced record");
}

#[test]
fn power_cut_at_every_point_of_a_roll_keeps_acknowledged_records() {
    for cut in 0..8 {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs = FaultFs::new();
        let (wal, _) = open(&fs, tmp.path(), 1 << 30);
        let t = wal.append(1, 1, b"before roll").expect("append");
        wal.sync(t, Durability::FsyncWal).expect("sync");
        fs.cut_after(cut);
        let mut acked = 1;
        let ok = wal.roll().is_ok()
            && wal
                .append(1, 2, b"after roll")
                .and_then(|t| wal.sync(t, Durability::FsyncWal))
                .is_ok();
        if ok {
            acked = 2;
        }
        fs.power_cut();
        drop(wal);
        fs.restore_power();
        let (_wal, replayed) = open(&fs, tmp.path(), 1 << 30);
        assert!(replayed.len() >= acked, "cut after {cut} ops: {replayed:?}");
    }
}
