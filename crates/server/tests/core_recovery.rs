//! Recovery: acknowledged writes survive a crash (a server dropped without shutdown, and a
//! child process killed with SIGKILL while it writes and splits), interrupted splits roll
//! back or forward, and leftovers meta does not know are removed.

mod core_support;

use bytes::Bytes;
use cellar_model::MutationKind;
use cellar_model::{Durability, Get, RowMutation, Scan, TableSchema};
use cellar_proto::convert;
use cellar_proto::pb::{self, ErrorCode, Method};
use cellar_server::master::SplitStep;
use cellar_server::ServerConfig;
use core_support::*;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn small_blocks_table(ts: &TestServer, name: &str) {
    let mut f = family("cf");
    f.block_size = 1024;
    ts.create_table(&TableSchema::new(name, vec![f]), &[])
        .expect("create");
}

fn put_rows(ts: &TestServer, table: &str, range: std::ops::Range<u32>, tag: &str) {
    for i in range {
        let row = format!("row{i:04}");
        ts.put(
            table,
            &row,
            "cf",
            "q",
            &format!("{tag}{i}-{}", "p".repeat(60)),
        );
    }
}

fn assert_rows(ts: &TestServer, table: &str, range: std::ops::Range<u32>, tag: &str) {
    for i in range.clone() {
        let row = format!("row{i:04}");
        let v = ts.value(table, &row, "cf", "q");
        assert_eq!(
            v.as_deref(),
            Some(format!("{tag}{i}-{}", "p".repeat(60)).as_bytes()),
            "row {row}"
        );
    }
}

fn assert_row_count(ts: &TestServer, table: &str, n: usize) {
    let rows = ts.scan_table(table, &Scan::new(), 64).expect("scan");
    assert_eq!(rows.len(), n, "each row once");
}

#[test]
fn acknowledged_writes_and_admin_changes_survive_a_crash() {
    let mut ts = TestServer::start();
    ts.create("t", &["cf"], &[b"row0100"]);
    ts.create("gone", &["cf"], &[]);
    put_rows(&ts, "t", 0..200, "a");
    ts.admin(Method::FlushTable, "t").expect("flush");
    put_rows(&ts, "t", 100..150, "b"); // newer versions, only in the WAL
    let fsync = RowMutation::new(b("fsynced"))
        .put(b"cf", b"q", cellar_model::LATEST_TIMESTAMP, b("durable"))
        .with_durability(Durability::FsyncWal);
    ts.mutate("t", &fsync, MutationKind::PutDelete, None)
        .expect("fsync put");
    ts.put("gone", "x", "cf", "q", "1");
    ts.admin(Method::DisableTable, "gone").expect("disable");
    ts.admin(Method::DeleteTable, "gone").expect("delete");
    ts.create("off", &["cf"], &[]);
    ts.admin(Method::DisableTable, "off").expect("disable");
    ts.crash_restart();
    assert_rows(&ts, "t", 0..100, "a");
    for i in 100..150 {
        assert_eq!(
            ts.value("t", &format!("row{i:04}"), "cf", "q").as_deref(),
            Some(format!("b{i}-{}", "p".repeat(60)).as_bytes())
        );
    }
    assert_eq!(
        ts.value("t", "fsynced", "cf", "q").as_deref(),
        Some(&b"durable"[..])
    );
    assert_row_count(&ts, "t", 201);
    expect_code(ts.describe("gone"), ErrorCode::TableNotFound);
    assert_eq!(
        ts.describe("off").expect("off").state,
        pb::TableState::Disabled as i32
    );
    // A table created again under a deleted name does not see the old data replayed.
    ts.create("gone", &["cf"], &[]);
    assert_eq!(ts.value("gone", "x", "cf", "q"), None);
    // Crash again right away: replayed edits are not lost by a second crash.
    ts.crash_restart();
    assert_rows(&ts, "t", 0..100, "a");
    assert_eq!(
        ts.value("t", "fsynced", "cf", "q").as_deref(),
        Some(&b"durable"[..])
    );
}

fn split_region_rows(ts: &TestServer) -> Vec<(String, String, bool)> {
    let meta = region_ref(&ts.locate("hbase:meta", b"").expect("meta"));
    let mut rows = Vec::new();
    merge_results(
        &mut rows,
        ts.scan_region(meta, &Scan::new().prefix(b"t,"), 100)
            .expect("scan meta"),
    );
    rows.iter()
        .map(|cells| {
            let state = cells
                .iter()
                .find(|c| &c.qualifier[..] == b"state")
                .map(|c| String::from_utf8_lossy(&c.value).into_owned())
                .unwrap_or_default();
            let has_daughters = cells.iter().any(|c| &c.qualifier[..] == b"splitA");
            (
                String::from_utf8_lossy(&cells[0].row).into_owned(),
                state,
                has_daughters,
            )
        })
        .collect()
}

fn region_dirs(ts: &TestServer) -> usize {
    std::fs::read_dir(ts.dir().join("data/default/t"))
        .expect("table dir")
        .count()
}

#[test]
fn a_split_interrupted_before_its_commit_rolls_back() {
    for step in [SplitStep::Marked, SplitStep::DaughtersWritten] {
        let mut ts = TestServer::start();
        small_blocks_table(&ts, "t");
        put_rows(&ts, "t", 0..300, "a");
        let parent = ts.regions("t").expect("regions")[0].region_id;
        ts.master()
            .split_interrupted("t", b"row0150", step)
            .expect("interrupted split");
        let meta = split_region_rows(&ts);
        assert_eq!(meta.len(), 1);
        assert_eq!((meta[0].1.as_str(), meta[0].2), ("SPLITTING", true));
        if step == SplitStep::DaughtersWritten {
            assert_eq!(region_dirs(&ts), 3, "parent and two daughters on disk");
            expect_code(
                ts.get("t", &Get::new(b("row0001"))),
                ErrorCode::NotServingRegion,
            );
        } else {
            // Still serving: these writes are only in the WAL when the process dies.
            put_rows(&ts, "t", 300..320, "a");
        }
        ts.crash_restart();
        let regions = ts.regions("t").expect("regions");
        assert_eq!(regions.len(), 1, "{step:?}: the parent serves again");
        assert_eq!(regions[0].region_id, parent);
        let end = if step == SplitStep::Marked { 320 } else { 300 };
        assert_rows(&ts, "t", 0..end, "a");
        assert_row_count(&ts, "t", end as usize);
        assert_eq!(
            region_dirs(&ts),
            1,
            "{step:?}: daughter directories removed"
        );
        let meta = split_region_rows(&ts);
        assert_eq!(meta.len(), 1);
        assert_eq!((meta[0].1.as_str(), meta[0].2), ("OPEN", false));
        // And it can split for real afterwards.
        ts.call::<_, pb::Empty>(
            Method::SplitTable,
            &pb::SplitTableRequest {
                table: "t".into(),
                split_row: Some(b("row0150")),
            },
            Bytes::new(),
        )
        .expect("split");
        assert_eq!(ts.regions("t").expect("regions").len(), 2);
        assert_rows(&ts, "t", 0..end, "a");
        assert_row_count(&ts, "t", end as usize);
    }
}

#[test]
fn a_split_interrupted_after_its_commit_rolls_forward() {
    let mut ts = TestServer::start();
    small_blocks_table(&ts, "t");
    put_rows(&ts, "t", 0..300, "a");
    let parent = ts.regions("t").expect("regions")[0].region_id;
    ts.master()
        .split_interrupted("t", b"row0150", SplitStep::Committed)
        .expect("interrupted split");
    ts.crash_restart();
    let regions = ts.regions("t").expect("regions");
    assert_eq!(regions.len(), 2, "the daughters serve");
    assert!(regions.iter().all(|r| r.region_id > parent));
    assert_eq!(&regions[1].start_key[..], b"row0150");
    assert_rows(&ts, "t", 0..300, "a");
    assert_row_count(&ts, "t", 300);
    put_rows(&ts, "t", 300..310, "a");
    // The parent waits for the janitor, which runs once the daughters compacted.
    let pending = ts.master().pending_retired_regions();
    assert!(
        pending.is_empty() || pending[0].info.id == parent,
        "{pending:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ts.master().pending_retired_regions().is_empty() {
        assert!(Instant::now() < deadline, "the parent was never removed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(region_dirs(&ts), 2);
    let meta = split_region_rows(&ts);
    assert_eq!(meta.len(), 2);
    assert!(
        meta.iter().all(|(_, state, d)| state == "OPEN" && !d),
        "{meta:?}"
    );
    ts.restart();
    assert_rows(&ts, "t", 0..310, "a");
    assert_row_count(&ts, "t", 310);
}

#[test]
fn a_truncate_interrupted_after_its_commit_is_finished() {
    let mut ts = TestServer::start();
    ts.create("t", &["cf"], &[b"row0100", b"row0200"]);
    put_rows(&ts, "t", 0..300, "a");
    ts.admin(Method::DisableTable, "t").expect("disable");
    ts.master()
        .truncate_interrupted("t")
        .expect("truncate to its commit point");
    ts.crash_restart();
    let info = ts.describe("t").expect("table");
    assert_eq!(info.state, pb::TableState::Enabled as i32);
    assert_eq!(info.regions.len(), 1);
    assert_row_count(&ts, "t", 0);
    assert_eq!(region_dirs(&ts), 1, "old region directories removed");
    put_rows(&ts, "t", 0..10, "b");
    ts.restart();
    assert_rows(&ts, "t", 0..10, "b");
    assert_row_count(&ts, "t", 10);
}

#[test]
fn leftovers_meta_does_not_know_are_removed() {
    let mut ts = TestServer::start();
    ts.create("t", &["cf"], &[]);
    ts.put("t", "r", "cf", "q", "v");
    let s = ts.take();
    s.shutdown().expect("shutdown");
    drop(s);
    let data = ts.dir().join("data/default");
    std::fs::create_dir_all(data.join("ghost/123/cf")).expect("ghost table");
    std::fs::create_dir_all(data.join("t/999/cf")).expect("ghost region");
    let region = std::fs::read_dir(data.join("t"))
        .expect("t")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n != "999")
        .expect("the real region");
    // A family directory the schema does not have (an alter that crashed half way).
    std::fs::create_dir_all(data.join("t").join(&region).join("oldfam")).expect("old family");
    ts.open();
    assert!(!data.join("ghost").exists());
    assert!(!data.join("t/999").exists());
    assert!(!data.join("t").join(&region).join("oldfam").exists());
    assert_eq!(ts.value("t", "r", "cf", "q").as_deref(), Some(&b"v"[..]));
}

// ---- a real crash: a child process killed with SIGKILL while it writes and splits ----

const CHILD_DIR: &str = "CELLAR_CRASH_CHILD_DIR";
const CHILD_ROUND: &str = "CELLAR_CRASH_CHILD_ROUND";

fn crash_config(c: &mut ServerConfig) {
    c.split.auto = true;
    c.split.initial_bytes = 32 * 1024;
    c.split.max_bytes = 64 * 1024;
    c.split.check_interval_ms = 20;
    c.storage.memstore_flush_bytes = Some(16 * 1024);
}

/// Not a test on its own: the child process of `sigkill_loses_no_acknowledged_write`, which
/// runs this binary with `--ignored --exact crash_child` and the environment set. Writes rows
/// forever, printing `ACK <row>` after each acknowledged one. Ignored, so a plain test run
/// neither runs it nor counts it.
#[test]
#[ignore = "child process of sigkill_loses_no_acknowledged_write"]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        eprintln!("crash_child runs only as the child of sigkill_loses_no_acknowledged_write");
        return;
    };
    let round: u32 = std::env::var(CHILD_ROUND)
        .ok()
        .and_then(|r| r.parse().ok())
        .expect("round");
    let ts = TestServer::at(std::path::Path::new(&dir), crash_config);
    if ts.describe("t").is_err() {
        let mut f = family("cf");
        f.block_size = 1024;
        ts.create_table(&TableSchema::new("t", vec![f]), &[])
            .expect("create");
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    for i in 0u64.. {
        assert!(Instant::now() < deadline, "the parent never killed us");
        // Spread over the key space so every region grows and splits.
        let row = format!("{:05}-{round}", (i * 7919) % 100_000);
        let m = convert::single_put(
            row.as_bytes(),
            b"cf",
            b"q",
            format!("{row}{}", "x".repeat(100)).as_bytes(),
        );
        retrying("put", || ts.mutate("t", &m, MutationKind::PutDelete, None));
        println!("ACK {row}");
    }
}

/// Kills the child when dropped, whatever happened.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sigkill_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("test binary");
    let mut acked: Vec<String> = Vec::new();
    for (round, kill_after) in [
        (0u32, 800usize),
        (1, 300),
        (2, 1500),
        (3, 200),
        (4, 1000),
        (5, 500),
    ] {
        let child = Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "crash_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_ROUND, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let mut child = KillOnDrop(child);
        let stdout = child.0.stdout.take().expect("child stdout");
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(row) = line.strip_prefix("ACK ") {
                    if tx.send(row.to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut this_round = 0;
        while this_round < kill_after {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(row) => {
                    acked.push(row);
                    this_round += 1;
                }
                Err(_) => panic!("round {round}: the child acknowledged only {this_round} writes"),
            }
        }
        child.0.kill().expect("SIGKILL");
        child.0.wait().expect("reap");
        // Rows acknowledged in the pipe before the kill count too.
        while let Ok(row) = rx.recv_timeout(Duration::from_millis(200)) {
            acked.push(row);
        }
        reader.join().expect("reader");
        drop(child);

        let ts = TestServer::at(dir.path(), crash_config);
        for row in &acked {
            let get = Get::new(Bytes::from(row.clone()));
            let cells = retrying("get", || ts.get("t", &get));
            assert_eq!(
                cells.len(),
                1,
                "round {round}: acknowledged row {row} is lost"
            );
        }
        let rows = ts.scan_table("t", &Scan::new(), 200).expect("scan");
        let keys = row_keys(&rows);
        assert!(
            keys.windows(2).all(|w| w[0] < w[1]),
            "round {round}: each row once, in order"
        );
        assert!(keys.len() >= acked.len());
        let regions = ts.regions("t").expect("regions");
        eprintln!(
            "round {round}: {} rows acknowledged, {} regions",
            acked.len(),
            regions.len()
        );
        // The next round's child opens the directory itself.
        drop(ts);
    }
}
