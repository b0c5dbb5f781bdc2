//! Automatic splits while writers and readers keep going: every acknowledged row stays
//! readable, a client-style table scan returns each row once in order, parents are cleaned
//! up, and the split count persists in meta.

mod core_support;

use bytes::Bytes;
use cellar_model::{Get, MutationKind, Scan, TableSchema};
use cellar_proto::convert;
use core_support::*;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn value_of(row: &str) -> String {
    format!("{row}-{}", "v".repeat(180))
}

#[test]
fn regions_split_under_load_without_losing_or_repeating_rows() {
    let ts = Arc::new(TestServer::with_config(|c| {
        c.split.auto = true;
        c.split.initial_bytes = 64 * 1024;
        c.split.max_bytes = 256 * 1024;
        c.split.check_interval_ms = 50;
        c.storage.memstore_flush_bytes = Some(32 * 1024);
    }));
    let mut f = family("cf");
    f.block_size = 4096;
    ts.create_table(&TableSchema::new("t", vec![f]), &[])
        .expect("create");

    let acked: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let writing = Arc::new(AtomicBool::new(true));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (ts, acked) = (Arc::clone(&ts), Arc::clone(&acked));
            std::thread::spawn(move || {
                for i in 0..2000 {
                    // Spread writes over the key space so every region keeps growing.
                    let row = format!("{:04}-w{w}", (i * 7919 + w * 3) % 10_000);
                    let m =
                        convert::single_put(row.as_bytes(), b"cf", b"q", value_of(&row).as_bytes());
                    retrying("put", || ts.mutate("t", &m, MutationKind::PutDelete, None));
                    acked.lock().push(row);
                }
            })
        })
        .collect();
    let reader = {
        let (ts, acked, writing) = (Arc::clone(&ts), Arc::clone(&acked), Arc::clone(&writing));
        std::thread::spawn(move || {
            let mut checked = 0u64;
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
                let get = Get::new(Bytes::from(row.clone()));
                let cells = retrying("get", || ts.get("t", &get));
                assert_eq!(cells.len(), 1, "acknowledged row {row} is readable");
                assert_eq!(cells[0].value, value_of(&row).as_bytes());
                checked += 1;
            }
            checked
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
    for w in writers {
        w.join().expect("writer");
    }
    let splits_while_writing = ts.server().current_gauges().splits;
    // Let the checker catch up with the last writes before stopping the readers.
    let deadline = Instant::now() + Duration::from_secs(60);
    while ts.server().current_gauges().splits < 3 {
        assert!(Instant::now() < deadline, "no splits happened");
        std::thread::sleep(Duration::from_millis(50));
    }
    writing.store(false, Ordering::SeqCst);
    let checked = reader.join().expect("reader");
    let scans = scanner.join().expect("scanner");
    assert!(checked > 0 && scans > 0);

    // Splits can go on for a few check intervals after the last write (a compaction may leave
    // a region over the split size): compare regions, directories and meta once none has
    // happened for ten intervals and every parent is gone.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let before = ts.server().current_gauges().splits;
        std::thread::sleep(Duration::from_millis(500));
        let settled = ts.server().current_gauges().splits == before
            && ts.master().pending_retired_regions().is_empty();
        if settled {
            break;
        }
        assert!(Instant::now() < deadline, "splits never settled");
    }
    let splits = ts.server().current_gauges().splits;
    let regions = ts.regions("t").expect("regions");
    eprintln!(
        "{splits} splits ({splits_while_writing} while writing), {} regions, {checked} gets and {scans} table scans during the load",
        regions.len()
    );
    assert!(
        splits_while_writing >= 1,
        "the writes (over 1 MiB) took longer than one check interval"
    );
    assert_eq!(regions.len() as u64, splits + 1, "{regions:?}");
    for w in regions.windows(2) {
        assert_eq!(w[0].end_key, w[1].start_key, "regions tile the key space");
    }
    let mut want = acked.lock().clone();
    want.sort();
    want.dedup();
    let rows = ts.scan_table("t", &Scan::new(), 100).expect("final scan");
    assert_eq!(row_keys(&rows), want);

    // The janitor removes parents once the daughters compacted their references away.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ts.master().pending_retired_regions().is_empty() {
        assert!(Instant::now() < deadline, "split parents never cleaned up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let table_dir = ts.dir().join("data/default/t");
    let dirs = std::fs::read_dir(&table_dir).expect("table dir").count();
    assert_eq!(dirs, regions.len(), "only serving regions keep directories");

    // Meta: one OPEN row per region, no split parents left, the split count persisted.
    let meta = region_ref(&ts.locate("hbase:meta", b"").expect("meta"));
    let mut meta_rows = Vec::new();
    merge_results(
        &mut meta_rows,
        ts.scan_region(meta, &Scan::new().prefix(b"t,"), 100)
            .expect("scan meta"),
    );
    assert_eq!(meta_rows.len(), regions.len());
    let table_row = ts
        .get_at(
            region_ref(&ts.locate("hbase:meta", b"t").expect("meta")),
            &Get::new(b("t")).column(b"table", b"splits"),
        )
        .expect("table row");
    let persisted = u64::from_be_bytes(table_row[0].value[..].try_into().expect("8 bytes"));
    assert_eq!(persisted, splits);

    // After a restart the same regions serve the same rows.
    let mut ts = Arc::into_inner(ts).expect("threads are done");
    ts.restart();
    assert_eq!(ts.regions("t").expect("regions").len(), regions.len());
    let rows = ts
        .scan_table("t", &Scan::new(), 100)
        .expect("scan after restart");
    assert_eq!(row_keys(&rows), want);
}

#[test]
fn split_size_doubles_per_split() {
    // With a split size of 16 KiB doubling per split, ~200 KiB of data make only a few
    // regions: far fewer than 200 / 16.
    let ts = TestServer::with_config(|c| {
        c.split.auto = true;
        c.split.initial_bytes = 16 * 1024;
        c.split.max_bytes = 64 * 1024 * 1024;
        c.split.check_interval_ms = 20;
        c.storage.memstore_flush_bytes = Some(16 * 1024);
    });
    let mut f = family("cf");
    f.block_size = 1024;
    ts.create_table(&TableSchema::new("t", vec![f]), &[])
        .expect("create");
    for i in 0..1000 {
        let row = format!("{:05}", (i * 7919) % 100_000);
        let m = convert::single_put(row.as_bytes(), b"cf", b"q", value_of(&row).as_bytes());
        retrying("put", || ts.mutate("t", &m, MutationKind::PutDelete, None));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while ts.server().current_gauges().splits < 2 {
        assert!(Instant::now() < deadline, "no splits happened");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Give the checker a few more rounds to do every split it wants.
    std::thread::sleep(Duration::from_millis(500));
    let regions = ts.regions("t").expect("regions").len();
    assert!(
        (3..=7).contains(&regions),
        "doubling split size: {regions} regions for ~200 KiB"
    );
    let rows = ts.scan_table("t", &Scan::new(), 100).expect("scan");
    assert_eq!(rows.len(), 1000);
}
