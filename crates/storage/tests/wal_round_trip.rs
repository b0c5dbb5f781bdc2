//! Records appended across several segments come back from `open` in order, and the log keeps
//! working across reopens.

use cellar_model::Durability;
use cellar_storage::fs::LocalFs;
use cellar_storage::wal::{Wal, WalOptions, WalRecord};
use std::path::Path;
use std::time::Duration;

fn opts(segment_size: u64) -> WalOptions {
    WalOptions {
        segment_size,
        async_flush_interval: Duration::from_millis(10),
        ..WalOptions::default()
    }
}

fn open(dir: &Path, segment_size: u64) -> (std::sync::Arc<Wal>, Vec<WalRecord>) {
    Wal::open(LocalFs::shared(), dir, opts(segment_size)).expect("open wal")
}

fn record(i: u64) -> WalRecord {
    let payload = format!("value-{i}-").repeat((i % 7 + 1) as usize);
    WalRecord {
        region: i % 3,
        seq: i,
        payload: payload.into_bytes().into(),
    }
}

fn write(wal: &Wal, records: &[WalRecord]) {
    for (n, r) in records.iter().enumerate() {
        let t = wal.append(r.region, r.seq, &r.payload).expect("append");
        if n % 10 == 0 {
            wal.sync(t, Durability::SyncWal).expect("sync");
        }
        // The background thread rolls full segments when it gets to it; roll here too, so the
        // records surely span several segments.
        if n % 150 == 149 {
            wal.roll().expect("roll");
        }
    }
}

#[test]
fn records_survive_close_and_reopen_in_order() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("wal");
    let (wal, replayed) = open(&dir, 2048);
    assert!(replayed.is_empty());
    let first: Vec<WalRecord> = (0..1000).map(record).collect();
    write(&wal, &first);
    wal.close().expect("close");
    let segments = wal.segments();
    assert!(
        segments.len() > 5,
        "small segments roll: {}",
        segments.len()
    );
    assert!(wal.append(0, 5000, b"late").is_err(), "append after close");
    drop(wal);

    let (wal, replayed) = open(&dir, 2048);
    assert_eq!(replayed, first);
    let newest = wal.segments().last().cloned().expect("active segment");
    assert!(
        segments.iter().all(|s| s < &newest),
        "the new segment sorts after every old one"
    );
    let second: Vec<WalRecord> = (1000..1100).map(record).collect();
    write(&wal, &second);
    wal.close().expect("close");
    drop(wal);

    let (_wal, replayed) = open(&dir, 2048);
    let all: Vec<WalRecord> = first.into_iter().chain(second).collect();
    assert_eq!(replayed, all);
}

#[test]
fn roll_starts_a_new_segment() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(tmp.path(), 1 << 30);
    assert_eq!(wal.segments().len(), 1);
    let t = wal.append(1, 1, b"a").expect("append");
    wal.roll().expect("roll");
    assert_eq!(wal.segments().len(), 2);
    wal.sync(t, Durability::FsyncWal).expect("already durable");
    assert_eq!(wal.stats().rolls, 1);
    wal.close().expect("close");
    assert!(wal.roll().is_err(), "roll after close");
}

#[test]
fn async_and_skip_return_at_once_and_async_reaches_the_os() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(tmp.path(), 1 << 30);
    let t = wal.append(1, 1, b"async record").expect("append");
    wal.sync(t, Durability::AsyncWal).expect("async");
    wal.sync(t, Durability::SkipWal).expect("skip");
    let seg = wal.segments().pop().expect("segment");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let header = cellar_storage::wal::SEGMENT_HEADER_LEN as u64;
    while std::fs::metadata(&seg).expect("stat").len() <= header {
        assert!(
            std::time::Instant::now() < deadline,
            "background flush never ran"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(wal.stats().syncs, 0, "nothing asked for fsync");
    // Dropping without close still hands buffered records to the OS.
    let t = wal.append(1, 2, b"dropped, not closed").expect("append");
    wal.sync(t, Durability::AsyncWal).expect("async");
    drop(wal);
    let (_wal, replayed) = open(tmp.path(), 1 << 30);
    assert_eq!(replayed.len(), 2);
}

#[test]
fn unknown_ticket_is_rejected() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(tmp.path(), 1 << 30);
    assert!(wal.sync(1, Durability::SyncWal).is_err());
    wal.sync(0, Durability::FsyncWal)
        .expect("ticket 0 is trivially durable");
}
