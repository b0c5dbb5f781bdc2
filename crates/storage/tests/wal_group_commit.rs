//! Many writers share writes and fdatasyncs: every record is logged exactly once, and there are
//! fewer syncs than records.

use cellar_model::Durability;
use cellar_storage::fs::LocalFs;
use cellar_storage::wal::{Wal, WalOptions};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const THREADS: u64 = 16;
const PER_THREAD: u64 = 200;

fn run(durability: Durability, segment_size: u64) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let opts = WalOptions {
        segment_size,
        async_flush_interval: Duration::from_millis(50),
        ..WalOptions::default()
    };
    let (wal, _) = Wal::open(LocalFs::shared(), tmp.path(), opts.clone()).expect("open");
    let handles: Vec<_> = (0..THREADS)
        .map(|region| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                for seq in 1..=PER_THREAD {
                    let payload = format!("r{region}-s{seq}");
                    let t = wal.append(region, seq, payload.as_bytes()).expect("append");
                    wal.sync(t, durability).expect("sync");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    let stats = wal.stats();
    eprintln!(
        "{durability:?}: {} records, {} flushes, {} syncs, {} rolls, {:.1} records/sync",
        stats.appends,
        stats.flushes,
        stats.syncs,
        stats.rolls,
        stats.records_per_sync()
    );
    assert_eq!(stats.appends, THREADS * PER_THREAD);
    match durability {
        Durability::FsyncWal => assert!(
            stats.syncs < stats.appends,
            "group commit: {} syncs for {} records",
            stats.syncs,
            stats.appends
        ),
        _ => assert_eq!(
            stats.syncs,
            2 * stats.rolls,
            "SyncWal never fsyncs but the two syncs of a roll (the full segment while writers \
             go on, then what they wrote meanwhile)"
        ),
    }
    wal.close().expect("close");
    drop(wal);

    let (_wal, replayed) = Wal::open(LocalFs::shared(), tmp.path(), opts).expect("reopen");
    assert_eq!(replayed.len() as u64, THREADS * PER_THREAD);
    let mut last: HashMap<u64, u64> = HashMap::new();
    for r in &replayed {
        let prev = last.insert(r.region, r.seq).unwrap_or(0);
        assert_eq!(
            r.seq,
            prev + 1,
            "region {} replays each seq once, in order",
            r.region
        );
        assert_eq!(r.payload, format!("r{}-s{}", r.region, r.seq).as_bytes());
    }
    assert!(last.values().all(|&s| s == PER_THREAD));
}

#[test]
fn fsync_writers_share_syncs() {
    run(Durability::FsyncWal, 64 * 1024 * 1024);
}

#[test]
fn sync_writers_never_fsync() {
    run(Durability::SyncWal, 64 * 1024 * 1024);
}

#[test]
fn concurrent_writers_across_rolls() {
    run(Durability::FsyncWal, 4096);
}
