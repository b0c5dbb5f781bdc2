//! Snapshots: taken while writers write (a clone holds every row acknowledged before the
//! snapshot began and none written after it returned), surviving a major compaction, a split
//! and the drop of their table (the archive), restore, delete and the archive cleaner, and
//! interrupted snapshots that are absent after a crash.

mod core_support;

use bytes::Bytes;
use cellar_model::{MutationKind, Scan};
use cellar_proto::convert;
use cellar_proto::pb::{self, ErrorCode, Method};
use core_support::*;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn snapshot(ts: &TestServer, table: &str, name: &str) -> Result<(), pb::RpcError> {
    ts.call::<_, pb::Empty>(
        Method::Snapshot,
        &pb::SnapshotRequest {
            table: table.into(),
            name: name.into(),
            skip_flush: false,
        },
        Bytes::new(),
    )
    .map(|_| ())
}

fn clone_snapshot(ts: &TestServer, name: &str, table: &str) -> Result<(), pb::RpcError> {
    ts.call::<_, pb::Empty>(
        Method::CloneSnapshot,
        &pb::CloneSnapshotRequest {
            name: name.into(),
            table: table.into(),
        },
        Bytes::new(),
    )
    .map(|_| ())
}

fn by_name(ts: &TestServer, method: Method, name: &str) -> Result<(), pb::RpcError> {
    ts.call::<_, pb::Empty>(
        method,
        &pb::SnapshotNameRequest { name: name.into() },
        Bytes::new(),
    )
    .map(|_| ())
}

fn list(ts: &TestServer) -> Vec<pb::SnapshotInfo> {
    ts.call::<_, pb::ListSnapshotsResponse>(Method::ListSnapshots, &pb::Empty {}, Bytes::new())
        .expect("list snapshots")
        .0
        .snapshots
}

/// Every row of `table` and its value.
fn contents(ts: &TestServer, table: &str) -> BTreeMap<String, String> {
    ts.scan_table(table, &Scan::new(), 500)
        .expect("scan")
        .iter()
        .map(|cells| {
            (
                String::from_utf8_lossy(&cells[0].row).into_owned(),
                String::from_utf8_lossy(&cells[0].value).into_owned(),
            )
        })
        .collect()
}

fn archived_files(ts: &TestServer) -> usize {
    fn count(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |d| {
            d.filter_map(Result::ok)
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        count(&p)
                    } else {
                        usize::from(p.extension().is_some_and(|x| x == "sf"))
                    }
                })
                .sum()
        })
    }
    count(&ts.dir().join("archive"))
}

fn ref_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter_map(Result::ok)
            .map(|e| {
                let p = e.path();
                if p.is_dir() {
                    ref_files(&p)
                } else {
                    usize::from(p.extension().is_some_and(|x| x == "ref"))
                }
            })
            .sum()
    })
}

fn put(ts: &TestServer, table: &str, row: &str, value: &str) {
    let m = convert::single_put(row.as_bytes(), b"cf", b"q", value.as_bytes());
    retrying("put", || {
        ts.mutate(table, &m, MutationKind::PutDelete, None)
    });
}

/// One acknowledged write: row, value, and the logical clock before and after it.
type Write = (String, String, u64, u64);

#[test]
fn a_clone_holds_what_was_acknowledged_before_the_snapshot_and_nothing_after() {
    let ts = Arc::new(TestServer::with_config(|c| {
        c.storage.memstore_flush_bytes = Some(16 * 1024);
    }));
    ts.create("t", &["cf"], &[b"3", b"6"]);
    // Writers overwrite rows with increasing values; each logs (row, value, start, end) with a
    // sequence number around the write.
    let clock = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let log: Arc<Mutex<Vec<Write>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (ts, log, stop, clock) = (ts.clone(), log.clone(), stop.clone(), clock.clone());
            std::thread::spawn(move || {
                for i in 0..3000u32 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let row = format!("{}-{w}-{:03}", i % 9, i % 50);
                    let value = format!("{w}:{i:06}");
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    put(&ts, "t", &row, &value);
                    let end = clock.fetch_add(1, Ordering::SeqCst);
                    log.lock().push((row, value, start, end));
                }
            })
        })
        .collect();
    while log.lock().len() < 1500 {
        std::thread::sleep(Duration::from_millis(2));
    }
    let before = clock.fetch_add(1, Ordering::SeqCst);
    snapshot(&ts, "t", "s1").expect("snapshot under load");
    let after = clock.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().expect("writer");
    }
    clone_snapshot(&ts, "s1", "c1").expect("clone");
    let clone = contents(&ts, "c1");
    // Per row: the writes acknowledged before the snapshot began; the clone's value must be
    // the last of them or one that overlapped the snapshot, never one begun after it.
    let log = log.lock().clone();
    let mut checked = 0;
    let mut rows: BTreeMap<&str, Vec<&Write>> = BTreeMap::new();
    for e in &log {
        rows.entry(&e.0).or_default().push(e);
    }
    for (row, writes) in &rows {
        // One writer per row: its writes are in order. Allowed: from the last acknowledged
        // before the snapshot began to the last begun before it returned.
        let first = writes.iter().rposition(|e| e.3 < before);
        let allowed: Vec<&str> = writes
            .iter()
            .enumerate()
            .filter(|(i, e)| e.2 < after && first.is_none_or(|f| *i >= f))
            .map(|(_, e)| e.1.as_str())
            .collect();
        let last_before = first;
        match clone.get(*row) {
            Some(v) => {
                assert!(
                    allowed.contains(&v.as_str()),
                    "row {row}: clone has {v}, allowed {allowed:?}"
                );
                checked += 1;
            }
            None => assert!(
                last_before.is_none(),
                "row {row} acknowledged before the snapshot is missing from the clone"
            ),
        }
    }
    assert!(checked > 50, "{checked}");
    assert!(
        clone.keys().all(|k| rows.contains_key(k.as_str())),
        "no row from nowhere"
    );
    let listed = list(&ts);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].name.as_str(),
            listed[0].table.as_str(),
            listed[0].regions
        ),
        ("s1", "t", 3)
    );
}

#[test]
fn a_clone_survives_compaction_split_and_drop_of_its_source_and_the_cleaner_waits_for_it() {
    let mut ts = TestServer::start();
    ts.create("t", &["cf"], &[b"m"]);
    for i in 0..300 {
        put(&ts, "t", &format!("r{i:03}"), &format!("v{i}"));
    }
    let want = contents(&ts, "t");
    snapshot(&ts, "t", "s").expect("snapshot");
    // The source changes and compacts away the files the snapshot names, splits, and goes.
    for i in 0..300 {
        put(&ts, "t", &format!("r{i:03}"), "new");
    }
    ts.admin(Method::FlushTable, "t").expect("flush");
    ts.call::<_, pb::Empty>(
        Method::CompactTable,
        &pb::CompactTableRequest {
            table: "t".into(),
            major: true,
        },
        Bytes::new(),
    )
    .expect("compact");
    eprintln!("archived after the compaction: {}", archived_files(&ts));
    ts.admin(Method::DisableTable, "t").expect("disable");
    ts.admin(Method::DeleteTable, "t").expect("drop");
    assert!(
        archived_files(&ts) > 0,
        "the dropped table's files are archived"
    );
    ts.master().clean_archive_locked();
    clone_snapshot(&ts, "s", "c").expect("clone after the drop");
    assert_eq!(contents(&ts, "c"), want, "the clone reads every cell");
    ts.restart();
    assert_eq!(contents(&ts, "c"), want, "and after a restart");
    ts.master().clean_archive_locked();
    assert_eq!(contents(&ts, "c"), want, "and after the archive's cleaning");

    // Deleting the snapshot keeps what the clone still reads through references (unless its
    // background compaction already rewrote them)...
    let refs = ref_files(&ts.dir().join("data/default/c"));
    by_name(&ts, Method::DeleteSnapshot, "s").expect("delete snapshot");
    assert!(list(&ts).is_empty());
    if refs > 0 && ref_files(&ts.dir().join("data/default/c")) > 0 {
        assert!(archived_files(&ts) > 0, "files the clone reads are kept");
    }
    assert_eq!(contents(&ts, "c"), want);
    // ...until the clone compacted them into files of its own.
    ts.call::<_, pb::Empty>(
        Method::CompactTable,
        &pb::CompactTableRequest {
            table: "c".into(),
            major: true,
        },
        Bytes::new(),
    )
    .expect("compact clone");
    ts.master().clean_archive_locked();
    assert_eq!(
        archived_files(&ts),
        0,
        "nothing names the archived files any more"
    );
    assert_eq!(contents(&ts, "c"), want);
}

#[test]
fn restore_brings_a_disabled_table_back_and_refusals_are_clear() {
    let ts = TestServer::start();
    ts.create("t", &["cf"], &[b"m"]);
    for i in 0..100 {
        put(&ts, "t", &format!("r{i:03}"), "old");
    }
    let want = contents(&ts, "t");
    snapshot(&ts, "t", "s").expect("snapshot");
    let e = expect_code(snapshot(&ts, "t", "s"), ErrorCode::InvalidArgument);
    assert!(e.contains("already exists"), "{e}");
    expect_code(snapshot(&ts, "nope", "s2"), ErrorCode::TableNotFound);
    let e = expect_code(snapshot(&ts, "t", "bad name"), ErrorCode::InvalidArgument);
    assert!(e.contains("illegal snapshot name"), "{e}");
    let e = expect_code(
        clone_snapshot(&ts, "missing", "x"),
        ErrorCode::InvalidArgument,
    );
    assert!(e.contains("does not exist"), "{e}");
    expect_code(clone_snapshot(&ts, "s", "t"), ErrorCode::TableExists);
    for i in 0..100 {
        put(&ts, "t", &format!("r{i:03}"), "new");
    }
    put(&ts, "t", "zzz", "extra");
    expect_code(
        by_name(&ts, Method::RestoreSnapshot, "s"),
        ErrorCode::TableNotDisabled,
    );
    ts.admin(Method::DisableTable, "t").expect("disable");
    by_name(&ts, Method::RestoreSnapshot, "s").expect("restore");
    expect_code(
        ts.describe("t")
            .map(|_| ())
            .and_then(|_| ts.get("t", &cellar_model::Get::new(b("r001"))).map(|_| ())),
        ErrorCode::TableDisabled,
    );
    ts.admin(Method::EnableTable, "t").expect("enable");
    assert_eq!(
        contents(&ts, "t"),
        want,
        "the table is as it was at the snapshot"
    );
    assert_eq!(ts.regions("t").expect("regions").len(), 2);
    // Writes go on after a restore.
    put(&ts, "t", "after", "x");
    assert_eq!(contents(&ts, "t").len(), want.len() + 1);
}

#[test]
fn a_snapshot_interrupted_before_its_manifest_is_absent_after_a_crash() {
    let mut ts = TestServer::start();
    ts.create("t", &["cf"], &[]);
    put(&ts, "t", "r", "v");
    snapshot(&ts, "t", "whole").expect("snapshot");
    // What a kill during a snapshot leaves: its directory, a half-written manifest.
    let half = ts.dir().join(".snapshots/half");
    std::fs::create_dir_all(&half).expect("mkdir");
    std::fs::write(
        half.join("manifest.tmp"),
        b"cellar-snapshot v1\nname=half\n",
    )
    .expect("write");
    ts.crash_restart();
    let names: Vec<String> = list(&ts).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["whole"]);
    ts.master().clean_archive_locked();
    assert!(
        !half.exists(),
        "the interrupted snapshot's directory is removed"
    );
    clone_snapshot(&ts, "whole", "c").expect("clone");
    assert_eq!(contents(&ts, "c").len(), 1);
}
