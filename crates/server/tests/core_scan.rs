//! Scanners through `Handler::call`: caching, batch, limit, reversed, result size bounds,
//! scans across regions, leases, connection close, and regions split under a scanner.

mod core_support;

use bytes::Bytes;
use cellar_model::MutationKind;
use cellar_model::{RowMutation, Scan};
use cellar_proto::pb::{self, ErrorCode, Method};
use cellar_server::rpc::Handler;
use core_support::*;
use std::time::{Duration, Instant};

fn fill(ts: &TestServer, table: &str, rows: usize) {
    for i in 0..rows {
        ts.put(table, &format!("r{i:03}"), "cf", "q", &format!("v{i}"));
    }
}

fn keys_of(results: &Results) -> Vec<String> {
    results
        .iter()
        .map(|(cells, _)| String::from_utf8_lossy(&cells[0].row).into_owned())
        .collect()
}

#[test]
fn caching_decides_rows_per_call_and_the_scanner_closes_at_the_end() {
    let ts = TestServer::start();
    ts.create("t", &["cf"], &[]);
    fill(&ts, "t", 25);
    let region = region_ref(&ts.locate("t", b"").expect("locate"));
    let (open, first) = ts
        .scan_open(CONN, region.clone(), &Scan::new(), 10)
        .expect("open");
    assert_eq!(first.len(), 10);
    assert!(open.more_in_region);
    assert_eq!(open.lease_ms, 60_000);
    assert_eq!(ts.server().current_gauges().open_scanners, 1);
    let (more, second) = ts.scan_next(open.scanner_id, 10).expect("next");
    assert!(more);
    assert_eq!(keys_of(&second)[0], "r010");
    let (more, third) = ts.scan_next(open.scanner_id, 10).expect("last");
    assert!(!more, "the region is done: more_in_region is exact");
    assert_eq!(third.len(), 5);
    assert_eq!(ts.server().current_gauges().open_scanners, 0);
    let msg = expect_code(ts.scan_next(open.scanner_id, 10), ErrorCode::UnknownScanner);
    assert!(msg.contains(&open.scanner_id.to_string()), "{msg}");
    // Exactly `rows` rows left: the first call already says there are no more.
    let (open, all) = ts
        .scan_open(CONN, region.clone(), &Scan::new(), 25)
        .expect("open");
    assert_eq!(all.len(), 25);
    assert!(!open.more_in_region);
    // rows = 0 on open: the configured default caching (100).
    let (open, all) = ts.scan_open(CONN, region, &Scan::new(), 0).expect("open");
    assert_eq!((all.len(), open.more_in_region), (25, false));
    assert_eq!(ts.server().current_gauges().open_scanners, 0);
}

#[test]
fn batch_limit_range_and_reversed() {
    let ts = TestServer::start();
    ts.create("t", &["cf"], &[]);
    fill(&ts, "t", 20);
    let lt = cellar_model::LATEST_TIMESTAMP;
    let mut wide = RowMutation::new(b("r005"));
    for q in 0..7 {
        wide = wide.put(b"cf", format!("c{q}").as_bytes(), lt, b("w"));
    }
    ts.mutate("t", &wide, MutationKind::PutDelete, None)
        .expect("wide row");
    let region = region_ref(&ts.locate("t", b"").expect("locate"));

    // batch 3: the 8-cell row comes in parts 3, 3, 2; results count against caching.
    let scan = Scan::new().range(b"r004", b"r007").batch(3);
    let results = ts
        .scan_region(region.clone(), &scan, 2)
        .expect("batch scan");
    let shape: Vec<(String, usize, bool)> = results
        .iter()
        .map(|(c, p)| (String::from_utf8_lossy(&c[0].row).into_owned(), c.len(), *p))
        .collect();
    assert_eq!(
        shape,
        vec![
            ("r004".into(), 1, false),
            ("r005".into(), 3, true),
            ("r005".into(), 3, true),
            ("r005".into(), 2, false),
            ("r006".into(), 1, false)
        ]
    );
    let mut rows = Vec::new();
    merge_results(&mut rows, results);
    assert_eq!(rows[1].len(), 8);

    // limit counts rows.
    let results = ts
        .scan_region(region.clone(), &Scan::new().limit(7), 3)
        .expect("limit");
    assert_eq!(
        keys_of(&results),
        (0..7).map(|i| format!("r{i:03}")).collect::<Vec<_>>()
    );

    // Reversed: from the start row down to (not including) the stop row.
    let scan = Scan::new().range(b"r015", b"r010").reversed();
    let results = ts.scan_region(region.clone(), &scan, 2).expect("reversed");
    assert_eq!(
        keys_of(&results),
        vec!["r015", "r014", "r013", "r012", "r011"]
    );
    let results = ts
        .scan_region(region.clone(), &Scan::new().reversed().limit(3), 10)
        .expect("reversed from the end");
    assert_eq!(keys_of(&results), vec!["r019", "r018", "r017"]);

    // Columns and prefix.
    let results = ts
        .scan_region(
            region,
            &Scan::new().prefix(b"r00").column(b"cf", b"c1"),
            100,
        )
        .expect("column");
    assert_eq!(keys_of(&results), vec!["r005"]);
}

#[test]
fn replies_stop_at_max_result_bytes() {
    let ts = TestServer::with_config(|c| c.scanner.max_result_bytes = 1000);
    ts.create("t", &["cf"], &[]);
    let big = "x".repeat(300);
    for i in 0..12 {
        ts.put("t", &format!("r{i:02}"), "cf", "q", &big);
    }
    let region = region_ref(&ts.locate("t", b"").expect("locate"));
    let (open, first) = ts.scan_open(CONN, region, &Scan::new(), 100).expect("open");
    assert!(open.more_in_region);
    assert!(
        (3..=4).contains(&first.len()),
        "about 1000 bytes per reply: {} rows",
        first.len()
    );
    let mut total = first.len();
    let mut more = true;
    while more {
        let (m, r) = ts.scan_next(open.scanner_id, 100).expect("next");
        assert!(!r.is_empty());
        total += r.len();
        more = m;
    }
    assert_eq!(total, 12);
}

#[test]
fn table_scans_cross_regions_in_order() {
    let ts = TestServer::start();
    ts.create("t", &["cf"], &[b"r010", b"r020", b"r025"]);
    fill(&ts, "t", 40);
    let rows = ts.scan_table("t", &Scan::new(), 4).expect("scan");
    assert_eq!(
        row_keys(&rows),
        (0..40).map(|i| format!("r{i:03}")).collect::<Vec<_>>()
    );
    let rows = ts
        .scan_table("t", &Scan::new().range(b"r008", b"r022"), 3)
        .expect("range");
    assert_eq!(
        row_keys(&rows),
        (8..22).map(|i| format!("r{i:03}")).collect::<Vec<_>>()
    );
    let rows = ts
        .scan_table("t", &Scan::new().limit(15), 4)
        .expect("limit");
    assert_eq!(rows.len(), 15);
    // Reversed across regions: region by region from the last, as a client does.
    let mut regions = ts.regions("t").expect("regions");
    regions.reverse();
    let mut keys = Vec::new();
    for r in regions {
        let results = ts
            .scan_region(region_ref(&r), &Scan::new().reversed(), 6)
            .expect("reversed region");
        keys.extend(keys_of(&results));
    }
    assert_eq!(
        keys,
        (0..40)
            .rev()
            .map(|i| format!("r{i:03}"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn leases_expire_unless_renewed() {
    let ts = TestServer::with_config(|c| c.scanner.lease_ms = 1000);
    ts.create("t", &["cf"], &[]);
    fill(&ts, "t", 10);
    let region = region_ref(&ts.locate("t", b"").expect("locate"));
    let (idle, _) = ts
        .scan_open(CONN, region.clone(), &Scan::new(), 1)
        .expect("open idle");
    let (kept, _) = ts
        .scan_open(CONN, region, &Scan::new(), 1)
        .expect("open kept");
    assert_eq!(idle.lease_ms, 1000);
    let deadline = Instant::now() + Duration::from_secs(60);
    // Renew one with rows = 0 while the other expires.
    loop {
        let (more, r) = ts.scan_next(kept.scanner_id, 0).expect("renew");
        assert!(more && r.is_empty());
        if ts.server().current_gauges().open_scanners == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the idle scanner never expired");
        std::thread::sleep(Duration::from_millis(100));
    }
    let msg = expect_code(ts.scan_next(idle.scanner_id, 5), ErrorCode::UnknownScanner);
    assert!(msg.contains(&idle.scanner_id.to_string()), "{msg}");
    assert!(msg.contains("lease"), "{msg}");
    // The renewed scanner continues where it was.
    let (_, r) = ts
        .scan_next(kept.scanner_id, 1)
        .expect("kept scanner works");
    assert_eq!(keys_of(&r), vec!["r001"]);
}

#[test]
fn closing_a_connection_or_a_scanner_drops_it() {
    let ts = TestServer::start();
    ts.create("t", &["cf"], &[]);
    fill(&ts, "t", 10);
    let region = region_ref(&ts.locate("t", b"").expect("locate"));
    let (a, _) = ts
        .scan_open(7, region.clone(), &Scan::new(), 1)
        .expect("conn 7");
    let (b_, _) = ts
        .scan_open(8, region.clone(), &Scan::new(), 1)
        .expect("conn 8");
    assert_ne!(a.scanner_id, b_.scanner_id);
    ts.server().connection_closed(7);
    expect_code(ts.scan_next(a.scanner_id, 1), ErrorCode::UnknownScanner);
    ts.scan_next(b_.scanner_id, 1)
        .expect("other connection's scanner");
    ts.call::<_, pb::Empty>(
        Method::ScanClose,
        &pb::ScanCloseRequest {
            scanner_id: b_.scanner_id,
        },
        Bytes::new(),
    )
    .expect("close");
    expect_code(ts.scan_next(b_.scanner_id, 1), ErrorCode::UnknownScanner);
    // Closing twice is harmless.
    ts.call::<_, pb::Empty>(
        Method::ScanClose,
        &pb::ScanCloseRequest {
            scanner_id: b_.scanner_id,
        },
        Bytes::new(),
    )
    .expect("close again");
    assert_eq!(ts.server().current_gauges().open_scanners, 0);
}

#[test]
fn a_scanner_on_a_split_region_is_not_serving_and_the_client_resumes() {
    let ts = TestServer::start();
    ts.create("t", &["cf"], &[]);
    fill(&ts, "t", 30);
    let region = region_ref(&ts.locate("t", b"").expect("locate"));
    let (open, first) = ts
        .scan_open(CONN, region.clone(), &Scan::new(), 5)
        .expect("open");
    assert_eq!(first.len(), 5);
    ts.call::<_, pb::Empty>(
        Method::SplitTable,
        &pb::SplitTableRequest {
            table: "t".into(),
            split_row: Some(b("r015")),
        },
        Bytes::new(),
    )
    .expect("split");
    let msg = expect_code(
        ts.scan_next(open.scanner_id, 5),
        ErrorCode::NotServingRegion,
    );
    assert!(msg.contains("reopen"), "{msg}");
    expect_code(ts.scan_next(open.scanner_id, 5), ErrorCode::UnknownScanner);
    expect_code(
        ts.scan_open(CONN, region, &Scan::new(), 5),
        ErrorCode::NotServingRegion,
    );
    // Resuming after the last row received gives every row once.
    let mut rows = Vec::new();
    merge_results(&mut rows, first);
    let rest = ts
        .scan_table("t", &Scan::new().range(b"r004\x00", b""), 4)
        .expect("resume");
    rows.extend(rest);
    assert_eq!(
        row_keys(&rows),
        (0..30).map(|i| format!("r{i:03}")).collect::<Vec<_>>()
    );
}
