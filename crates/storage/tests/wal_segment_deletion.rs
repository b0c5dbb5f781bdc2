//! A segment is deleted once every region with records in it has flushed past them; a segment
//! some region still needs is kept, replayed segments included.

use cellar_model::Durability;
use cellar_storage::fs::LocalFs;
use cellar_storage::wal::{Wal, WalOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn open(dir: &Path) -> (std::sync::Arc<Wal>, Vec<cellar_storage::wal::WalRecord>) {
    let opts = WalOptions {
        segment_size: 1024,
        async_flush_interval: Duration::from_millis(10),
        ..WalOptions::default()
    };
    Wal::open(LocalFs::shared(), dir, opts).expect("open")
}

/// The segment files in `dir` (the lock file aside).
fn on_disk(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

/// Logs `seqs` of `region`, rolling after every tenth record: segments are rolled by the log's
/// background thread when it gets to it, so the test rolls itself to know where records go.
fn log(wal: &Wal, region: u64, seqs: std::ops::Range<u64>) {
    for seq in seqs {
        let t = wal.append(region, seq, &[b'x'; 100]).expect("append");
        wal.sync(t, Durability::SyncWal).expect("sync");
        if seq % 10 == 0 {
            wal.roll().expect("roll");
        }
    }
}

#[test]
fn segments_go_when_all_their_regions_are_flushed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let (wal, _) = open(dir);
    // Phase A: both regions interleaved.
    for seq in 1..=30 {
        log(&wal, 1, seq..seq + 1);
        log(&wal, 2, seq..seq + 1);
    }
    wal.roll().expect("roll");
    let phase_a = wal.segments();
    let phase_a = &phase_a[..phase_a.len() - 1];
    assert!(phase_a.len() >= 3, "{phase_a:?}");
    // Phase B: region 2 only.
    log(&wal, 2, 31..60);
    wal.roll().expect("roll");
    let all = wal.segments();
    assert_eq!(on_disk(dir), all);

    wal.mark_flushed(1, 30);
    assert_eq!(wal.segments(), all, "region 2 still needs every segment");
    wal.mark_flushed(2, 29);
    assert!(
        wal.segments()
            .contains(phase_a.last().expect("last of phase A")),
        "the segment holding region 2's seq 30 stays"
    );
    wal.mark_flushed(2, 30);
    let left = wal.segments();
    assert!(phase_a.iter().all(|s| !left.contains(s)), "phase A gone");
    assert_eq!(on_disk(dir), left, "files deleted, not just forgotten");
    assert!(
        left.len() >= 2,
        "phase B segments and the active one: {left:?}"
    );

    wal.mark_flushed(2, 1000);
    assert_eq!(wal.segments().len(), 1, "only the active segment is left");
    assert_eq!(on_disk(dir), wal.segments());
}

#[test]
fn replayed_segments_are_deleted_once_flushed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let (wal, _) = open(dir);
    log(&wal, 1, 1..20);
    log(&wal, 2, 1..20);
    wal.close().expect("close");
    drop(wal);

    let (wal, replayed) = open(dir);
    assert_eq!(replayed.len(), 38);
    let before = wal.segments().len();
    wal.mark_flushed(1, 19);
    let after = wal.segments().len();
    assert!(
        after < before,
        "region-1-only segments go: {before} -> {after}"
    );
    assert!(after > 1, "region 2's are kept");
    wal.mark_flushed(2, 19);
    assert_eq!(wal.segments().len(), 1);
    assert_eq!(on_disk(dir), wal.segments());
    wal.close().expect("close");
    drop(wal);

    let (_wal, replayed) = open(dir);
    assert!(
        replayed.is_empty(),
        "flushed records are not replayed again"
    );
}
