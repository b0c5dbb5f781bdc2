//! Scan: scanners opened, moved on, renewed and closed; meta scans; wide rows.

use super::*;

fn open(scan: hbase::Scan, rows: u32, limit: u32) -> hbase::ScanRequest {
    hbase::ScanRequest {
        region: Some(hbase::RegionSpecifier {
            r#type: 1,
            value: b("r"),
        }),
        scan: Some(scan),
        number_of_rows: Some(rows),
        limit_of_rows: Some(limit),
        ..Default::default()
    }
}

fn next(id: u64, rows: u32) -> hbase::ScanRequest {
    hbase::ScanRequest {
        scanner_id: Some(id),
        number_of_rows: Some(rows),
        ..Default::default()
    }
}

#[test]
fn scanners_open_continue_and_close_with_hbase_flags() {
    let fx = fixture();
    for r in ["r1", "r2", "r3", "r4", "r5"] {
        fx.put(r, "a", r, 1);
    }
    for ctx in [PB, BLOCKS] {
        let (resp, res) = fx
            .scan_call(&ctx, open(hbase::Scan::default(), 2, 0))
            .expect("open");
        assert_eq!(rows(&res), vec!["r1", "r2"]);
        assert_eq!(resp.more_results_in_region, Some(true));
        assert!(resp.ttl.is_some_and(|t| t > 0));
        let id = resp.scanner_id.expect("id");
        let (_, res) = fx.scan_call(&ctx, next(id, 2)).expect("next");
        assert_eq!(rows(&res), vec!["r3", "r4"]);
        let (resp, res) = fx.scan_call(&ctx, next(id, 2)).expect("last");
        assert_eq!(rows(&res), vec!["r5"]);
        assert_eq!(resp.more_results_in_region, Some(false));
        let e = fx.scan_call(&ctx, next(id, 2)).expect_err("gone");
        assert_eq!(e.class, UNKNOWN_SCANNER);
    }
    // Limit, then close of an open scanner.
    let (resp, res) = fx
        .scan_call(&PB, open(hbase::Scan::default(), 2, 3))
        .expect("open");
    assert_eq!(rows(&res), vec!["r1", "r2"]);
    let id = resp.scanner_id.expect("id");
    let (resp, res) = fx.scan_call(&PB, next(id, 10)).expect("next");
    assert_eq!(rows(&res), vec!["r3"]);
    assert_eq!(resp.more_results_in_region, Some(false));
    let (resp, _) = fx
        .scan_call(&PB, open(hbase::Scan::default(), 1, 0))
        .expect("open");
    let id = resp.scanner_id.expect("id");
    let renew = hbase::ScanRequest {
        scanner_id: Some(id),
        renew: Some(true),
        ..Default::default()
    };
    let (_, res) = fx.scan_call(&PB, renew).expect("renew");
    assert!(res.is_empty());
    let close = hbase::ScanRequest {
        scanner_id: Some(id),
        close_scanner: Some(true),
        ..Default::default()
    };
    let (resp, _) = fx.scan_call(&PB, close).expect("close");
    assert_eq!(resp.more_results, Some(false));
    assert_eq!(
        fx.scan_call(&PB, next(id, 1)).expect_err("closed").class,
        UNKNOWN_SCANNER
    );
    // Bounds: exclusive start / inclusive stop, forward and reversed.
    let bounded = |reversed: bool, start: &str, inc_start: bool, stop: &str, inc_stop: bool| {
        let s = hbase::Scan {
            start_row: Some(b(start)),
            stop_row: Some(b(stop)),
            include_start_row: Some(inc_start),
            include_stop_row: Some(inc_stop),
            reversed: Some(reversed),
            ..Default::default()
        };
        rows(&fx.scan_call(&PB, open(s, 100, 0)).expect("bounded").1)
    };
    assert_eq!(bounded(false, "r2", false, "r4", true), vec!["r3", "r4"]);
    assert_eq!(bounded(false, "r2", true, "r4", false), vec!["r2", "r3"]);
    assert_eq!(
        bounded(true, "r4", true, "r2", true),
        vec!["r4", "r3", "r2"]
    );
    assert_eq!(bounded(true, "r4", false, "r2", false), vec!["r3"]);
    assert_eq!(
        bounded(true, "r9", true, "", false),
        vec!["r5", "r4", "r3", "r2", "r1"]
    );
}

/// HBase's per-scanner call sequence: nexts, renewals and closes that carry `next_call_seq`
/// must carry the scanner's next number (the Java client counts nexts and renewals from 0);
/// any other gets `OutOfOrderScannerNextException` and changes nothing. Calls without a
/// number are not counted.
#[test]
fn scanner_calls_out_of_sequence_are_refused_and_change_nothing() {
    let fx = fixture();
    for r in ["r1", "r2", "r3", "r4", "r5", "r6"] {
        fx.put(r, "a", r, 1);
    }
    let numbered = |id: u64, seq: u64| hbase::ScanRequest {
        next_call_seq: Some(seq),
        ..next(id, 1)
    };
    let (resp, res) = fx
        .scan_call(&PB, open(hbase::Scan::default(), 1, 0))
        .expect("open");
    assert_eq!(rows(&res), vec!["r1"]);
    let id = resp.scanner_id.expect("id");
    let (_, res) = fx.scan_call(&PB, numbered(id, 0)).expect("next 0");
    assert_eq!(rows(&res), vec!["r2"]);
    for (seq, what) in [(0, "a repeated number"), (2, "a skipped number")] {
        let e = fx.scan_call(&PB, numbered(id, seq)).expect_err(what);
        assert_eq!(e.class, OUT_OF_ORDER_SCANNER_NEXT, "{what}");
        assert!(e.do_not_retry);
        assert!(
            e.message.contains("Expected nextCallSeq: 1")
                && e.message.contains(&format!("from client: {seq}")),
            "{}",
            e.message
        );
    }
    // The Java client's lease renewal takes a number too.
    let renew = hbase::ScanRequest {
        renew: Some(true),
        ..numbered(id, 1)
    };
    let (_, res) = fx.scan_call(&PB, renew.clone()).expect("renew 1");
    assert!(res.is_empty());
    assert_eq!(
        fx.scan_call(&PB, renew).expect_err("renew 1 again").class,
        OUT_OF_ORDER_SCANNER_NEXT
    );
    // An unnumbered next is served and not counted.
    let (_, res) = fx.scan_call(&PB, next(id, 1)).expect("unnumbered");
    assert_eq!(rows(&res), vec!["r3"]);
    let (_, res) = fx.scan_call(&PB, numbered(id, 2)).expect("next 2");
    assert_eq!(rows(&res), vec!["r4"]);
    // A close out of order leaves the scanner open; in order, it closes it.
    let close = |seq: u64| hbase::ScanRequest {
        close_scanner: Some(true),
        ..numbered(id, seq)
    };
    assert_eq!(
        fx.scan_call(&PB, close(7)).expect_err("close 7").class,
        OUT_OF_ORDER_SCANNER_NEXT
    );
    let (_, res) = fx.scan_call(&PB, numbered(id, 3)).expect("next 3");
    assert_eq!(rows(&res), vec!["r5"]);
    fx.scan_call(&PB, close(4)).expect("close 4");
    assert_eq!(
        fx.scan_call(&PB, numbered(id, 5))
            .expect_err("closed")
            .class,
        UNKNOWN_SCANNER
    );
    // A numbered open is call 0: its first next is 1; another number is refused.
    let opened = |seq: u64| hbase::ScanRequest {
        next_call_seq: Some(seq),
        ..open(hbase::Scan::default(), 1, 0)
    };
    let e = fx.scan_call(&PB, opened(3)).expect_err("open numbered 3");
    assert_eq!(e.class, OUT_OF_ORDER_SCANNER_NEXT);
    let (resp, _) = fx.scan_call(&PB, opened(0)).expect("open numbered 0");
    let id = resp.scanner_id.expect("id");
    let refused = hbase::ScanRequest {
        next_call_seq: Some(0),
        ..next(id, 1)
    };
    assert_eq!(
        fx.scan_call(&PB, refused)
            .expect_err("0 was the open")
            .class,
        OUT_OF_ORDER_SCANNER_NEXT
    );
    let (_, res) = fx
        .scan_call(
            &PB,
            hbase::ScanRequest {
                next_call_seq: Some(1),
                ..next(id, 1)
            },
        )
        .expect("next 1");
    assert_eq!(rows(&res), vec!["r2"]);
}

/// A scan of `hbase:meta` answers at most `number_of_rows` rows per call, as HBase's region
/// server does, with a scanner for the rest (its calls numbered like any scanner's); without
/// a number of rows every row comes at once.
#[test]
fn meta_scans_answer_number_of_rows_at_a_time() {
    let fx = fixture();
    fx.svc
        .master()
        .expect("a master")
        .create_table(
            TableSchema::new("m", vec![FamilySchema::new("f")]),
            &[b("b"), b("c"), b("d"), b("e")],
        )
        .expect("table m created");
    let meta = |_: &hbase::RegionSpecifier| Ok(RegionTarget::Meta);
    let call = |r: hbase::ScanRequest| -> Result<(hbase::ScanResponse, Vec<Vec<u8>>)> {
        let reply = scan(&fx.svc, &PB, &r, meta)?;
        let resp = hbase::ScanResponse::decode(reply.param).expect("decodes");
        let rows = resp
            .results
            .iter()
            .map(|r| convert::cells_from_hbase(r)[0].row.to_vec())
            .collect();
        Ok((resp, rows))
    };
    let regions_of_m = hbase::Scan {
        start_row: Some(b("m,,")),
        stop_row: Some(b("m-")),
        column: vec![hbase::Column {
            family: b("info"),
            qualifier: Vec::new(),
        }],
        ..Default::default()
    };
    let (resp, all) = call(open(regions_of_m.clone(), 0, 0)).expect("whole meta scan");
    assert_eq!(
        all.len(),
        5,
        "one row per region of m: {:?}",
        all.iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect::<Vec<_>>()
    );
    assert_eq!(resp.more_results_in_region, Some(false));

    let (resp, first) = call(open(regions_of_m, 2, 0)).expect("open");
    assert_eq!(first, all[..2], "the first two rows");
    assert_eq!(resp.more_results_in_region, Some(true), "more to come");
    let id = resp.scanner_id.expect("a scanner id");
    let numbered = |seq: u64| hbase::ScanRequest {
        next_call_seq: Some(seq),
        ..next(id, 2)
    };
    let (resp, second) = call(numbered(0)).expect("next 0");
    assert_eq!(second, all[2..4]);
    assert_eq!(resp.more_results_in_region, Some(true));
    assert_eq!(
        call(numbered(0)).expect_err("next 0 again").class,
        OUT_OF_ORDER_SCANNER_NEXT
    );
    let (resp, last) = call(numbered(1)).expect("next 1");
    assert_eq!(last, all[4..]);
    assert_eq!(resp.more_results_in_region, Some(false), "meta is done");
    assert_eq!(
        call(numbered(2)).expect_err("closed at the end").class,
        UNKNOWN_SCANNER
    );
}

#[test]
fn wide_rows_come_in_batches_flagged_partial() {
    let fx = fixture();
    for q in ["a", "b", "c"] {
        fx.put("w", q, q, 1);
    }
    let s = hbase::Scan {
        batch_size: Some(2),
        ..Default::default()
    };
    for ctx in [PB, BLOCKS] {
        let (_, res) = fx.scan_call(&ctx, open(s.clone(), 10, 0)).expect("open");
        assert_eq!(
            res.iter().map(|(c, p)| (c.len(), *p)).collect::<Vec<_>>(),
            vec![(2, true), (1, false)]
        );
    }
    // A filter with an unknown class is refused by name at open.
    let s = hbase::Scan {
        filter: Some(hbase::Filter {
            name: "com.example.MyFilter".into(),
            serialized_filter: None,
        }),
        ..Default::default()
    };
    let e = fx
        .scan_call(&PB, open(s, 10, 0))
        .expect_err("unknown filter");
    assert!(e.message.contains("com.example.MyFilter"), "{}", e.message);
    // A known filter runs.
    let s = hbase::Scan {
        filter: Some(hbase::Filter {
            name: "org.apache.hadoop.hbase.filter.ColumnPrefixFilter".into(),
            serialized_filter: Some(
                hbase::ColumnPrefixFilter { prefix: b("b") }
                    .encode_to_vec()
                    .into(),
            ),
        }),
        ..Default::default()
    };
    let (_, res) = fx.scan_call(&PB, open(s, 10, 0)).expect("filtered");
    assert_eq!(res.len(), 1);
    assert_eq!(&res[0].0[0].qualifier[..], b"b");
}

/// With track_scan_metrics each answer carries HBase's server-side ROWS_SCANNED and
/// ROWS_FILTERED of its call; summed over the calls they count every row read (a deleted
/// one included) and those the client did not get.
#[test]
fn scan_metrics_count_rows_scanned_and_filtered_per_call() {
    let fx = fixture();
    for r in ["r0", "r1", "r2", "r3", "r4", "r5"] {
        fx.put(r, "a", r, 1);
    }
    fx.put("r1", "b", "b1", 1);
    fx.put("r3", "b", "b3", 1);
    fx.mutate(
        &PB,
        req(
            del("r5", "cf", "a", DeleteType::DeleteMultipleVersions, 2),
            None,
        ),
        Bytes::new(),
    )
    .expect("delete");
    let metrics = |resp: &hbase::ScanResponse| {
        let m = resp.scan_metrics.as_ref().expect("scan metrics");
        let get = |name: &str| {
            m.metrics
                .iter()
                .find(|p| p.name.as_deref() == Some(name))
                .and_then(|p| p.value)
                .expect("metric")
        };
        (get("ROWS_SCANNED"), get("ROWS_FILTERED"))
    };
    // Two rows a call; the sums are what the client reports.
    let total = |scan: hbase::Scan| {
        let mut req = open(scan, 2, 0);
        req.track_scan_metrics = Some(true);
        let (resp, mut res) = fx.scan_call(&PB, req).expect("open");
        let (mut scanned, mut filtered) = metrics(&resp);
        let mut more = resp.more_results_in_region == Some(true);
        while more {
            let mut req = next(resp.scanner_id.expect("id"), 2);
            req.track_scan_metrics = Some(true);
            let (resp, r) = fx.scan_call(&PB, req).expect("next");
            let (s, f) = metrics(&resp);
            scanned += s;
            filtered += f;
            res.extend(r);
            more = resp.more_results_in_region == Some(true);
        }
        (rows(&res), scanned, filtered)
    };
    assert_eq!(
        total(hbase::Scan::default()),
        (
            vec![
                "r0".to_string(),
                "r1".into(),
                "r2".into(),
                "r3".into(),
                "r4".into()
            ],
            6,
            1
        ),
        "the deleted row is read and filtered"
    );
    let only_b = hbase::Scan {
        filter: Some(hbase::Filter {
            name: "org.apache.hadoop.hbase.filter.ColumnPrefixFilter".into(),
            serialized_filter: Some(
                hbase::ColumnPrefixFilter { prefix: b("b") }
                    .encode_to_vec()
                    .into(),
            ),
        }),
        ..Default::default()
    };
    assert_eq!(total(only_b), (vec!["r1".to_string(), "r3".into()], 6, 4));
    // Not asked: none.
    let (resp, _) = fx
        .scan_call(&PB, open(hbase::Scan::default(), 10, 0))
        .expect("open");
    assert_eq!(resp.scan_metrics, None);
}

/// Each result's row and value.
fn row_values(results: &[(Vec<Cell>, bool)]) -> Vec<(String, String)> {
    results
        .iter()
        .flat_map(|(cells, _)| cells)
        .map(|c| {
            (
                String::from_utf8_lossy(&c.row).into_owned(),
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect()
}

#[test]
fn a_scan_reopened_with_its_read_point_reads_the_writes_its_first_open_saw() {
    let fx = fixture();
    fx.put("r1", "a", "old", 1);
    fx.put("r2", "a", "old", 1);
    let (resp, res) = fx
        .scan_call(&PB, open(hbase::Scan::default(), 1, 0))
        .expect("open");
    assert_eq!(rows(&res), vec!["r1"]);
    let point = resp
        .mvcc_read_point
        .expect("a region's open answers its read point");
    assert!(point > 0);
    let id = resp.scanner_id.expect("id");
    let (resp, _) = fx.scan_call(&PB, next(id, 1)).expect("next");
    assert_eq!(
        resp.mvcc_read_point, None,
        "only the open answers it, as HBase"
    );
    // An open that also closes answers its rows and leaves no scanner behind, as in HBase.
    let closing = hbase::ScanRequest {
        close_scanner: Some(true),
        ..open(hbase::Scan::default(), 1, 0)
    };
    let (resp, res) = fx.scan_call(&PB, closing).expect("open and close");
    assert_eq!(rows(&res), vec!["r1"]);
    assert!(resp.mvcc_read_point.is_some());
    let closed = resp.scanner_id.expect("id");
    assert_eq!(
        fx.scan_call(&PB, next(closed, 1))
            .expect_err("closed")
            .class,
        UNKNOWN_SCANNER
    );
    // Written after the open: a newer version of r2 and a new row.
    fx.put("r2", "a", "new", 2);
    fx.put("r3", "a", "new", 2);
    // The client reopens after r1 (say the region moved), sending the point back.
    let after_r1 = hbase::Scan {
        start_row: Some(b("r1")),
        include_start_row: Some(false),
        ..Default::default()
    };
    let reopened = hbase::Scan {
        mvcc_read_point: Some(point),
        ..after_r1.clone()
    };
    let (resp, res) = fx
        .scan_call(&PB, open(reopened.clone(), 10, 0))
        .expect("reopen");
    assert_eq!(row_values(&res), [("r2".into(), "old".into())]);
    assert_eq!(
        resp.mvcc_read_point,
        Some(point),
        "the reopened scan keeps it"
    );
    // The same after a flush: store files keep each cell's sequence id.
    fx.flush();
    let (_, res) = fx
        .scan_call(&BLOCKS, open(reopened, 10, 0))
        .expect("reopen");
    assert_eq!(row_values(&res), [("r2".into(), "old".into())]);
    // A new scan reads what is committed now; a point above that shows nothing more.
    let (resp, res) = fx
        .scan_call(&PB, open(after_r1.clone(), 10, 0))
        .expect("new scan");
    let now = [("r2".into(), "new".into()), ("r3".into(), "new".into())];
    assert_eq!(row_values(&res), now);
    assert!(resp.mvcc_read_point.is_some_and(|p| p > point));
    let beyond = hbase::Scan {
        mvcc_read_point: Some(u64::MAX),
        ..after_r1
    };
    let (resp, res) = fx.scan_call(&PB, open(beyond, 10, 0)).expect("beyond");
    assert_eq!(row_values(&res), now);
    assert!(resp.mvcc_read_point.is_some_and(|p| p < u64::MAX));
}

#[test]
fn a_scan_with_query_metrics_reports_each_results_block_bytes_in_its_open() {
    let fx = fixture();
    for r in ["r1", "r2", "r3"] {
        fx.put(r, "a", r, 1);
    }
    let asked = hbase::Scan {
        query_metrics_enabled: Some(true),
        ..Default::default()
    };
    // From the memstore: one entry per result, each 0.
    let (resp, res) = fx.scan_call(&PB, open(asked.clone(), 2, 0)).expect("open");
    assert_eq!(res.len(), 2);
    let zero = |n: u64| hbase::QueryMetrics {
        block_bytes_scanned: Some(n),
    };
    assert_eq!(resp.query_metrics, [zero(0), zero(0)]);
    fx.flush();
    for ctx in [&PB, &BLOCKS] {
        let (resp, res) = fx.scan_call(ctx, open(asked.clone(), 2, 0)).expect("open");
        assert_eq!(res.len(), 2);
        assert_eq!(resp.query_metrics.len(), 2, "one per result, in order");
        let first = resp.query_metrics[0].block_bytes_scanned.expect("bytes");
        assert!(first > 0, "the first row read the file's block");
        // The next call carries no Scan: no metrics, as from HBase 2.6.4.
        let id = resp.scanner_id.expect("id");
        let (resp, res) = fx.scan_call(ctx, next(id, 2)).expect("next");
        assert_eq!(rows(&res), vec!["r3"]);
        assert!(resp.query_metrics.is_empty());
    }
    let (resp, _) = fx
        .scan_call(&PB, open(hbase::Scan::default(), 2, 0))
        .expect("open");
    assert!(resp.query_metrics.is_empty(), "not asked, none");
}
