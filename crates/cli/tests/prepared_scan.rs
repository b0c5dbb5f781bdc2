//! Prepared scans against a real `cellar standalone`: every execution returns exactly what the
//! same scan returns (across regions, reversed, filtered, limited, compressed), handles live
//! and die with their connection, are bounded per connection, and are prepared again when
//! the server forgot them.

mod support;

use bytes::Bytes;
use cellar_client::{
    Client, Comparator, CompareOp, FamilySchema, Filter, Row, RowMutation, Scan, TableSchema,
};
use std::time::Duration;
use support::Server;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Every cell of every row, to compare exactly.
fn flat(rows: &[Row]) -> Vec<(Bytes, Bytes, Bytes, u64, Bytes)> {
    rows.iter()
        .flat_map(|r| {
            r.cells.iter().map(|c| {
                (
                    c.row.clone(),
                    c.family.clone(),
                    c.qualifier.clone(),
                    c.timestamp,
                    c.value.clone(),
                )
            })
        })
        .collect()
}

/// Table `t`: families cf and other, split at r100, rows r000..r199 with cf:q1, cf:q2 (two
/// versions), cf:x and other:o on some rows.
async fn fixture(client: &Client) {
    let mut cf = FamilySchema::new("cf");
    cf.max_versions = 3;
    client
        .admin()
        .create_table(
            TableSchema::new("t", vec![cf, FamilySchema::new("other")]),
            vec![b("r100")],
        )
        .await
        .expect("create");
    let t = client.table("t");
    for i in 0..200u32 {
        let row = format!("r{i:03}");
        let mut m = RowMutation::new(b(&row))
            .put(b"cf", b"q1", 10, b(&format!("a{i}")))
            .put(b"cf", b"q2", 10, b(&format!("b{i}")))
            .put(b"cf", b"q2", 20, b(&format!("B{i}")));
        if i % 3 == 0 {
            m = m.put(b"cf", b"x", 5, b("extra"));
        }
        if i % 5 == 0 {
            m = m.put(b"other", b"o", 7, Bytes::from(vec![b'o'; 300]));
        }
        t.put(m).await.expect("put");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executions_return_what_the_same_scan_returns() {
    let server = Server::start();
    let client = support::connect_client(&server.native).await;
    fixture(&client).await;
    let t = client.table("t");
    let shapes = vec![
        (
            "two columns",
            Scan::new().column(b"cf", b"q1").column(b"cf", b"q2"),
        ),
        (
            "a column and a whole family",
            Scan::new().column(b"cf", b"q2").family(b"other"),
        ),
        ("whole rows, all versions", Scan::new().versions(3)),
        ("reversed", Scan::new().column(b"cf", b"q1").reversed()),
        (
            "filtered",
            Scan::new().filter(Filter::Value(
                CompareOp::Equal,
                Comparator::Binary(b("a42")),
            )),
        ),
    ];
    for (what, shape) in shapes {
        for compress in [false, true] {
            let prepared = t.prepare_scan(shape.clone(), compress);
            for (start, stop, limit, caching) in [
                ("", "", 0, 7),
                ("r050", "r150", 0, 1000),
                ("r095", "", 12, 5),
                ("r199", "r000", 0, 3),
            ] {
                let mut plain = shape.clone();
                plain.start_row = b(start);
                plain.stop_row = b(stop);
                plain.limit = limit;
                plain.caching = caching;
                plain.compress = compress;
                let want = t.scan(plain).collect().await.expect("scan");
                let got = prepared
                    .execute(b(start), b(stop), limit, caching)
                    .collect()
                    .await
                    .expect("execute");
                let case = format!("{what}, compress {compress}, [{start}, {stop}) limit {limit}");
                assert_eq!(flat(&got), flat(&want), "{case}");
                if !shape.reversed && stop.is_empty() && limit == 0 && start.is_empty() {
                    assert!(!want.is_empty(), "{case}: the fixture has rows");
                }
            }
            prepared.close().await;
        }
    }
    assert!(server.metric("cellar_prepared_scan_executions_total") >= 40);
    assert_eq!(server.metric("cellar_prepared_scan_open"), 0, "all closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_are_per_connection_bounded_and_prepared_again_when_forgotten() {
    let server =
        Server::start_with_config("[scanner]\nlease_ms = 300\nmax_prepared_per_connection = 2\n");
    let client = support::connect_client(&server.native).await;
    fixture(&client).await;
    let t = client.table("t");
    let one = t.prepare_scan(Scan::new().column(b"cf", b"q1"), false);
    let two = t.prepare_scan(Scan::new().column(b"cf", b"q2"), false);
    let three = t.prepare_scan(Scan::new().family(b"other"), false);
    let count = |p: &cellar_client::PreparedScan| {
        let s = p.execute(b("r000"), b("r010"), 0, 100);
        async move { s.collect().await.map(|r| r.len()) }
    };
    assert_eq!(count(&one).await.expect("one"), 10);
    assert_eq!(count(&two).await.expect("two"), 10);
    assert_eq!(server.metric("cellar_prepared_scan_open"), 2);
    let e = count(&three).await.expect_err("a third on one connection");
    assert!(e.to_string().contains("max_prepared_per_connection"), "{e}");
    two.close().await;
    assert_eq!(count(&three).await.expect("room again"), 2);

    // Unused past the lease: the server forgets the handle, the client prepares again.
    let before = server.metric("cellar_prepared_scan_prepared_total");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        server.metric("cellar_prepared_scan_open"),
        0,
        "leases ran out"
    );
    assert_eq!(count(&one).await.expect("prepared again"), 10);
    assert_eq!(
        server.metric("cellar_prepared_scan_prepared_total"),
        before + 1
    );

    // The connection's end releases its handles.
    drop(one);
    drop(three);
    drop(t);
    drop(client);
    let released = support::wait_for(Duration::from_secs(10), || {
        (server.metric("cellar_prepared_scan_open") == 0).then_some(())
    });
    assert!(released.is_some(), "handles outlived their connection");
}

#[test]
fn the_shell_runs_a_scan_prepared_and_compressed() {
    let server = Server::start();
    let shell = |script: &str| server.shell(script);
    shell("create 's', 'cf'; put 's', 'r1', 'cf:a', 'v1'; put 's', 'r2', 'cf:b', 'v2'; put 's', 'r3', 'cf:a', 'v3'");
    let plain = shell("scan 's', {COLUMNS => ['cf:a']}");
    assert!(
        plain.contains("r3") && plain.contains("2 row(s)"),
        "{plain}"
    );
    assert_eq!(
        shell("scan 's', {COLUMNS => ['cf:a'], PREPARED => true}"),
        plain
    );
    assert_eq!(
        shell("scan 's', {COLUMNS => ['cf:a'], PREPARED => true, COMPRESS => true}"),
        plain
    );
    assert_eq!(
        shell("scan 's', {COLUMNS => ['cf:a'], COMPRESS => true}"),
        plain
    );
}
