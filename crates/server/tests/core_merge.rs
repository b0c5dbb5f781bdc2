//! Region merges: under load (no acknowledged row lost, none repeated or out of order in a
//! table scan, clients follow the merged region), interrupted at each step of the procedure
//! and restarted, refusals, and the janitor removing the parents.

mod core_support;

use bytes::Bytes;
use cellar_model::{Get, MutationKind, Scan, TableSchema};
use cellar_proto::convert;
use cellar_proto::pb::{self, ErrorCode, Method};
use cellar_server::master::MergeStep;
use core_support::*;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn value_of(row: &str) -> String {
    format!("{row}-{}", "v".repeat(100))
}

fn merge(
    ts: &TestServer,
    regions: &[u64],
    forcible: bool,
) -> Result<pb::MergeRegionsResponse, pb::RpcError> {
    ts.call(
        Method::MergeRegions,
        &pb::MergeRegionsRequest {
            regions: regions.iter().map(u64::to_string).collect(),
            forcible,
        },
        Bytes::new(),
    )
    .map(|(r, _)| r)
}

fn ids(ts: &TestServer, table: &str) -> Vec<u64> {
    ts.regions(table)
        .expect("regions")
        .iter()
        .map(|r| r.region_id)
        .collect()
}

/// The meta rows of table `t`: (region id in the row key, state).
fn meta_rows(ts: &TestServer) -> Vec<(String, String)> {
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
            (String::from_utf8_lossy(&cells[0].row).into_owned(), state)
        })
        .collect()
}

fn region_dirs(ts: &TestServer) -> usize {
    std::fs::read_dir(ts.dir().join("data/default/t"))
        .expect("table dir")
        .count()
}

fn put_rows(ts: &TestServer, range: std::ops::Range<u32>) {
    for i in range {
        let row = format!("row{i:04}");
        ts.put("t", &row, "cf", "q", &value_of(&row));
    }
}

fn assert_rows(ts: &TestServer, range: std::ops::Range<u32>) {
    let want: Vec<String> = range.map(|i| format!("row{i:04}")).collect();
    let rows = ts.scan_table("t", &Scan::new(), 64).expect("scan");
    assert_eq!(row_keys(&rows), want, "each row once, in order");
    for r in want.iter().step_by(37) {
        assert_eq!(
            ts.value("t", r, "cf", "q").as_deref(),
            Some(value_of(r).as_bytes()),
            "row {r}"
        );
    }
}

fn wait_for_janitor(ts: &TestServer) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ts.master().pending_retired_regions().is_empty() {
        assert!(Instant::now() < deadline, "merge parents never cleaned up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn regions_merge_under_load_without_losing_or_repeating_rows() {
    let ts = Arc::new(TestServer::with_config(|c| {
        c.storage.memstore_flush_bytes = Some(32 * 1024);
    }));
    let mut f = family("cf");
    f.block_size = 4096;
    let splits: Vec<Vec<u8>> = (1..8)
        .map(|i| format!("{}", i * 1250).into_bytes())
        .collect();
    let split_refs: Vec<&[u8]> = splits.iter().map(Vec::as_slice).collect();
    ts.create_table(&TableSchema::new("t", vec![f]), &split_refs)
        .expect("create");
    assert_eq!(ids(&ts, "t").len(), 8);

    let acked: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let writing = Arc::new(AtomicBool::new(true));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (ts, acked) = (Arc::clone(&ts), Arc::clone(&acked));
            std::thread::spawn(move || {
                for i in 0..1500 {
                    let row = format!("{:04}-w{w}", (i * 7919 + w * 3) % 10_000);
                    let m =
                        convert::single_put(row.as_bytes(), b"cf", b"q", value_of(&row).as_bytes());
                    retrying("put", || ts.mutate("t", &m, MutationKind::PutDelete, None));
                    acked.lock().push(row);
                }
            })
        })
        .collect();
    let reads = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (ts, acked, writing, reads) = (
            Arc::clone(&ts),
            Arc::clone(&acked),
            Arc::clone(&writing),
            Arc::clone(&reads),
        );
        std::thread::spawn(move || {
            let mut i = 0usize;
            while writing.load(Ordering::SeqCst) {
                let row = {
                    let a = acked.lock();
                    if a.is_empty() {
                        None
                    } else {
                        i = (i * 31 + 17) % a.len();
                        Some(a[i].clone())
                    }
                };
                let Some(row) = row else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                let cells = retrying("get", || ts.get("t", &Get::new(Bytes::from(row.clone()))));
                assert_eq!(cells.len(), 1, "acknowledged row {row} is readable");
                assert_eq!(cells[0].value, value_of(&row).as_bytes());
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let scanner = {
        let (ts, acked, writing) = (Arc::clone(&ts), Arc::clone(&acked), Arc::clone(&writing));
        std::thread::spawn(move || {
            let mut scans = 0;
            while writing.load(Ordering::SeqCst) {
                let before: Vec<String> = acked.lock().clone();
                let rows = ts.scan_table("t", &Scan::new(), 50).expect("table scan");
                let keys = row_keys(&rows);
                assert!(keys.windows(2).all(|w| w[0] < w[1]), "in order, each once");
                let seen: std::collections::HashSet<&String> = keys.iter().collect();
                for r in &before {
                    assert!(
                        seen.contains(r),
                        "row {r} acknowledged before the scan is missing"
                    );
                }
                scans += 1;
            }
            scans
        })
    };
    // Merge pairs, then a triple, while the load runs: 8 → 4 → 2 regions.
    let mut merges = 0;
    while acked.lock().len() < 500 {
        std::thread::sleep(Duration::from_millis(5));
    }
    for round in 0..2 {
        let now = ids(&ts, "t");
        for pair in now.chunks(2) {
            let r = merge(&ts, pair, false).expect("merge");
            let m = r.merged.expect("the merged region");
            assert!(
                m.region_id > *pair.iter().max().expect("ids"),
                "round {round}"
            );
            merges += 1;
        }
    }
    let writes_during = acked.lock().len();
    for w in writers {
        w.join().expect("writer");
    }
    writing.store(false, Ordering::SeqCst);
    reader.join().expect("reader");
    let scans = scanner.join().expect("scanner");
    eprintln!(
        "{merges} merges with {writes_during} writes acknowledged so far, {} gets and {scans} scans during the load",
        reads.load(Ordering::Relaxed)
    );
    assert!(
        writes_during < 4500,
        "the merges ran while writers were writing"
    );
    let regions = ts.regions("t").expect("regions");
    assert_eq!(regions.len(), 2);
    assert_eq!(&regions[0].start_key[..], b"");
    assert_eq!(&regions[0].end_key[..], b"5000");
    assert_eq!(&regions[1].end_key[..], b"");

    let mut want = acked.lock().clone();
    want.sort();
    want.dedup();
    let rows = ts.scan_table("t", &Scan::new(), 100).expect("final scan");
    assert_eq!(row_keys(&rows), want);

    // The parents go once the merged regions compacted their references away.
    ts.admin(Method::CompactTable, "t").expect("compact");
    wait_for_janitor(&ts);
    assert_eq!(region_dirs(&ts), 2, "only serving regions keep directories");
    let meta = meta_rows(&ts);
    assert_eq!(meta.len(), 2, "{meta:?}");
    assert!(meta.iter().all(|(_, s)| s == "OPEN"), "{meta:?}");
    let rows = ts
        .scan_table("t", &Scan::new(), 100)
        .expect("scan after cleanup");
    assert_eq!(row_keys(&rows), want);
}

#[test]
fn merges_are_refused_with_reasons_and_change_nothing() {
    let ts = TestServer::start();
    ts.create("t", &["cf"], &[b"row0100", b"row0200"]);
    ts.create("u", &["cf"], &[]);
    put_rows(&ts, 0..300);
    let [a, b, c]: [u64; 3] = ids(&ts, "t").try_into().expect("three regions");
    let u = ids(&ts, "u")[0];
    for (regions, forcible, want) in [
        (vec![a, c], false, "not adjacent"),
        (vec![a, c], true, "even when forced"),
        (vec![a], false, "at least two"),
        (vec![a, a], false, "named twice"),
        (vec![a, u], false, "different tables"),
        (vec![a, 12345], false, "no region"),
    ] {
        let err = expect_code(merge(&ts, &regions, forcible), ErrorCode::InvalidArgument);
        assert!(err.contains(want), "{regions:?}: {err}");
    }
    let meta_id = ts.locate("hbase:meta", b"").expect("meta").region_id;
    let err = expect_code(merge(&ts, &[meta_id, a], false), ErrorCode::InvalidArgument);
    assert!(err.contains("meta"), "{err}");
    assert_eq!(ids(&ts, "t"), vec![a, b, c], "nothing changed");
    assert_rows(&ts, 0..300);
    ts.admin(Method::DisableTable, "t").expect("disable");
    expect_code(merge(&ts, &[a, b], false), ErrorCode::TableDisabled);
    ts.admin(Method::EnableTable, "t").expect("enable");
    // In any order, three at once.
    let m = merge(&ts, &[c, a, b], false)
        .expect("merge")
        .merged
        .expect("merged");
    assert_eq!((&m.start_key[..], &m.end_key[..]), (&b""[..], &b""[..]));
    assert_rows(&ts, 0..300);
}

#[test]
fn a_merge_interrupted_before_its_commit_rolls_back() {
    for step in [MergeStep::Marked, MergeStep::Written] {
        let mut ts = TestServer::start();
        ts.create("t", &["cf"], &[b"row0150"]);
        put_rows(&ts, 0..300);
        let parents = ids(&ts, "t");
        let names: Vec<String> = parents.iter().map(u64::to_string).collect();
        let merged = ts
            .master()
            .merge_interrupted(&names, step)
            .expect("interrupted merge");
        let meta = meta_rows(&ts);
        assert_eq!(meta.len(), 3, "{meta:?}");
        assert!(meta
            .iter()
            .any(|(r, s)| r.ends_with(&format!(",{}", merged.id)) && s == "MERGING"));
        if step == MergeStep::Written {
            assert_eq!(region_dirs(&ts), 3, "parents and the merged region on disk");
            expect_code(
                ts.get("t", &Get::new(b("row0001"))),
                ErrorCode::NotServingRegion,
            );
            ts.crash_restart();
            assert_rows(&ts, 0..300);
        } else {
            // Still serving: these writes are only in the WAL when the process dies.
            put_rows(&ts, 300..320);
            ts.crash_restart();
            assert_rows(&ts, 0..320);
        }
        assert_eq!(ids(&ts, "t"), parents, "{step:?}: the parents serve again");
        assert_eq!(
            region_dirs(&ts),
            2,
            "{step:?}: the merged directory removed"
        );
        let meta = meta_rows(&ts);
        assert_eq!(meta.len(), 2, "{step:?}: {meta:?}");
        assert!(meta.iter().all(|(_, s)| s == "OPEN"), "{meta:?}");
        // And they merge for real afterwards.
        merge(&ts, &parents, false).expect("merge");
        assert_eq!(ids(&ts, "t").len(), 1);
    }
}

#[test]
fn a_merge_interrupted_after_its_commit_rolls_forward() {
    let mut ts = TestServer::start();
    ts.create("t", &["cf"], &[b"row0100", b"row0200"]);
    put_rows(&ts, 0..300);
    let parents = ids(&ts, "t");
    let names: Vec<String> = parents[..2].iter().map(u64::to_string).collect();
    let merged = ts
        .master()
        .merge_interrupted(&names, MergeStep::Committed)
        .expect("interrupted merge");
    ts.crash_restart();
    assert_eq!(
        ids(&ts, "t"),
        vec![merged.id, parents[2]],
        "the merged region serves"
    );
    assert_rows(&ts, 0..300);
    let meta = meta_rows(&ts);
    let merged_rows = meta.iter().filter(|(_, s)| s == "MERGED").count();
    assert_eq!(merged_rows, 2, "parents marked: {meta:?}");
    put_rows(&ts, 300..310);
    ts.admin(Method::CompactTable, "t").expect("compact");
    wait_for_janitor(&ts);
    assert_eq!(region_dirs(&ts), 2);
    let meta = meta_rows(&ts);
    assert_eq!(meta.len(), 2, "{meta:?}");
    ts.restart();
    assert_rows(&ts, 0..310);
}
