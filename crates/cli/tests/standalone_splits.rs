//! Regions split under load: writers fill a table with a tiny split size until it has split
//! several times, while readers check that every acknowledged row stays readable and that full
//! scans return each acknowledged row exactly once, in order.

mod support;

use bytes::Bytes;
use cellar_client::{Client, FamilySchema, Get, RowMutation, Scan, TableSchema, LATEST_TIMESTAMP};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::Server;

const CONFIG: &str = r#"
[split]
initial_bytes = 65536
max_bytes = 1048576
check_interval_ms = 100

[storage]
memstore_flush_bytes = 32768
"#;

/// Regions the table must reach.
const TARGET_REGIONS: usize = 5;
const WRITERS: u64 = 2;
const MAX_ROWS_PER_WRITER: u64 = 200_000;

/// Keys spread over the key space so splits happen all over it.
fn key(writer: u64, i: u64) -> String {
    let h = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ writer.rotate_left(17)) >> 32;
    format!("{h:08x}-{writer}-{i}")
}

fn value_of(row: &str) -> Bytes {
    Bytes::from(format!("{row}:").repeat(12))
}

type Acked = Arc<Mutex<BTreeSet<String>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_stay_readable_and_scans_exact_while_regions_split() {
    let server = Server::start_with_config(CONFIG);
    let client = Client::connect(&server.native).await.expect("connect");
    client
        .admin()
        .create_table(
            TableSchema::new("sp", vec![FamilySchema::new("cf")]),
            vec![],
        )
        .await
        .expect("create");
    let acked: Acked = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (t, acked, stop) = (client.table("sp"), acked.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..MAX_ROWS_PER_WRITER {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let row = key(w, i);
                t.put(RowMutation::new(Bytes::from(row.clone())).put(
                    b"cf",
                    b"v",
                    LATEST_TIMESTAMP,
                    value_of(&row),
                ))
                .await
                .unwrap_or_else(|e| panic!("put {row} while splitting: {e}"));
                acked.lock().expect("acked").insert(row);
            }
        }));
    }
    let (t, acked_r, stop_r) = (client.table("sp"), acked.clone(), stop.clone());
    let reader = tokio::spawn(async move {
        let mut scans = 0;
        let mut reads = 0u64;
        while !stop_r.load(Ordering::Relaxed) {
            // Point reads of a sample of what is acknowledged.
            let sample: Vec<String> = {
                let a = acked_r.lock().expect("acked");
                a.iter().step_by((a.len() / 50).max(1)).cloned().collect()
            };
            for row in &sample {
                let r = t
                    .get(Get::new(Bytes::from(row.clone())))
                    .await
                    .unwrap_or_else(|e| panic!("get {row}: {e}"));
                assert_eq!(r.value(b"cf", b"v"), Some(&value_of(row)), "row {row}");
                reads += 1;
            }
            full_scan_is_exact(&t, &acked_r).await;
            scans += 1;
        }
        (scans, reads)
    });

    let deadline = Instant::now() + Duration::from_secs(300);
    let mut regions = 1;
    while regions < TARGET_REGIONS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        regions = client
            .admin()
            .list_regions("sp")
            .await
            .expect("list regions")
            .len();
        if tasks.iter().any(|t| t.is_finished()) || reader.is_finished() {
            break; // a task failed: awaiting it below reports why
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("writer");
    }
    let (scans, reads) = reader.await.expect("reader");
    assert!(
        regions >= TARGET_REGIONS,
        "the table reached only {regions} regions within the time bound ({} rows written)\n{}",
        acked.lock().expect("acked").len(),
        server.output()
    );
    assert!(scans > 0 && reads > 0);
    eprintln!(
        "{regions} regions, {} rows, {scans} full scans and {reads} point reads during splits",
        acked.lock().expect("acked").len()
    );
    // Quiet now: a full scan is exactly the acknowledged set, also reversed.
    let t = client.table("sp");
    full_scan_is_exact(&t, &acked).await;
    let expected: Vec<String> = acked.lock().expect("acked").iter().rev().cloned().collect();
    let rows = t
        .scan(Scan::new().reversed().caching(37))
        .collect()
        .await
        .expect("reversed scan");
    let got: Vec<String> = rows
        .iter()
        .map(|r| String::from_utf8_lossy(&r.row).into_owned())
        .collect();
    assert_eq!(got.len(), expected.len());
    assert!(
        got == expected,
        "reversed scan differs from the acknowledged rows"
    );
}

/// A full scan returns rows in strictly increasing order (no row twice) and every row
/// acknowledged before it began.
async fn full_scan_is_exact(t: &cellar_client::Table, acked: &Acked) {
    let before: BTreeSet<String> = acked.lock().expect("acked").clone();
    let mut s = t.scan(Scan::new().caching(50));
    let mut seen = BTreeSet::new();
    let mut last: Option<String> = None;
    while let Some(r) = s.next().await.expect("scan while splitting") {
        let row = String::from_utf8_lossy(&r.row).into_owned();
        if let Some(prev) = &last {
            assert!(
                *prev < row,
                "scan out of order or repeated: {prev} then {row}"
            );
        }
        assert_eq!(r.value(b"cf", b"v"), Some(&value_of(&row)), "row {row}");
        seen.insert(row.clone());
        last = Some(row);
    }
    let missing: Vec<&String> = before.difference(&seen).take(5).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged rows missing from a full scan, e.g. {missing:?}",
        before.difference(&seen).count()
    );
}
