//! The client's transport, location cache, retries, batches and scanners against a fake
//! server speaking the native frame format over 127.0.0.1.

mod fake;

use bytes::Bytes;
use cellar_client::{
    BatchOp, BatchOutcome, Client, ClientConfig, Error, ErrorCode, Get, Row, RowMutation, Scan,
    LATEST_TIMESTAMP,
};
use cellar_proto::pb::Method;
use fake::{Fake, Fault, TABLE};
use std::time::{Duration, Instant};

fn rows(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("r{i:02}")).collect()
}

async fn fake_with(n: usize, splits: &[&str]) -> Fake {
    let rows = rows(n);
    let refs: Vec<&str> = rows.iter().map(|s| s.as_str()).collect();
    Fake::start(&refs, splits).await
}

fn quick() -> ClientConfig {
    ClientConfig {
        retries: 3,
        retry_backoff: Duration::from_millis(1),
        rpc_timeout: Duration::from_secs(20),
        ..ClientConfig::default()
    }
}

fn keys(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|r| String::from_utf8_lossy(&r.row).into_owned())
        .collect()
}

fn value(r: &Row) -> Option<String> {
    r.value(b"cf", b"q")
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

#[tokio::test]
async fn reads_go_through_the_location_cache() {
    let fake = fake_with(10, &["r05"]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    client.ping().await.expect("ping");
    let t = client.table(TABLE);
    for (row, expect) in [("r01", "v-r01"), ("r07", "v-r07"), ("r02", "v-r02")] {
        let r = t.get(Get::new(row.to_string())).await.expect("get");
        assert_eq!(value(&r).as_deref(), Some(expect));
    }
    let missing = t.get(Get::new("r01x")).await.expect("get missing");
    assert!(missing.is_empty());
    assert_eq!(&missing.row[..], b"r01x");
    let s = fake.state();
    assert_eq!(s.count(Method::LocateRegion), 2, "one lookup per region");
    assert_eq!(s.connections, 1);
}

#[tokio::test]
async fn a_rejected_preamble_reports_the_server_message() {
    let fake = fake_with(1, &[]).await;
    fake.state().reject_preamble = Some("protocol version 1 is not spoken here".into());
    match Client::connect_with(&fake.addr, quick()).await {
        Err(Error::Rpc { message, .. }) => {
            assert_eq!(message, "protocol version 1 is not spoken here")
        }
        other => panic!("expected the server's refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn many_calls_in_flight_are_matched_to_their_callers() {
    let fake = fake_with(40, &[]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let t = client.table(TABLE);
    t.get(Get::new("r00")).await.expect("warm the cache");
    // The first answers come last.
    for ms in [400, 300, 200, 100] {
        fake.inject(Method::Get, 1, Fault::Delay(Duration::from_millis(ms)));
    }
    let mut tasks = Vec::new();
    for row in rows(40) {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let r = t.get(Get::new(row.clone())).await.expect("get");
            (row, value(&r))
        }));
    }
    for task in tasks {
        let (row, v) = task.await.expect("task");
        assert_eq!(v, Some(format!("v-{row}")));
    }
    assert_eq!(
        fake.state().connections,
        1,
        "one connection carries every call"
    );
}

#[tokio::test]
async fn an_unanswered_call_times_out_and_the_connection_stays_usable() {
    let fake = fake_with(3, &[]).await;
    let config = ClientConfig {
        rpc_timeout: Duration::from_millis(500),
        ..quick()
    };
    let client = Client::connect_with(&fake.addr, config)
        .await
        .expect("connect");
    let t = client.table(TABLE);
    t.get(Get::new("r00")).await.expect("warm the cache");
    fake.inject(Method::Get, 1, Fault::Hang);
    match t.get(Get::new("r01")).await {
        Err(Error::Timeout(d)) => assert_eq!(d, Duration::from_millis(500)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    let r = t.get(Get::new("r02")).await.expect("next call");
    assert_eq!(value(&r).as_deref(), Some("v-r02"));
    assert_eq!(fake.state().connections, 1);
}

#[tokio::test]
async fn a_dropped_connection_fails_over_to_a_new_one() {
    let fake = fake_with(3, &[]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let t = client.table(TABLE);
    fake.inject(Method::Get, 1, Fault::Close);
    let r = t.get(Get::new("r01")).await.expect("retried");
    assert_eq!(value(&r).as_deref(), Some("v-r01"));
    let s = fake.state();
    assert_eq!(s.connections, 2);
    assert_eq!(s.count(Method::Get), 2);
}

#[tokio::test]
async fn a_split_region_is_looked_up_again() {
    let fake = fake_with(20, &["r10"]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let t = client.table(TABLE);
    t.get(Get::new("r12")).await.expect("caches region 2");
    fake.split("r15");
    let r = t.get(Get::new("r17")).await.expect("relocated");
    assert_eq!(value(&r).as_deref(), Some("v-r17"));
    let s = fake.state();
    assert_eq!(s.count(Method::LocateRegion), 2);
    assert_eq!(s.count(Method::Get), 3, "one stale attempt, one retry");
}

#[tokio::test]
async fn errors_retrying_cannot_fix_reach_the_caller_at_once() {
    let fake = fake_with(3, &[]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    match client.table("nope").get(Get::new("a")).await {
        Err(e @ Error::Rpc { .. }) => {
            assert_eq!(e.code(), Some(ErrorCode::TableNotFound));
            assert!(e.to_string().contains("table 'nope' not found"), "{e}");
        }
        other => panic!("expected TABLE_NOT_FOUND, got {other:?}"),
    }
    let t = client.table(TABLE);
    t.get(Get::new("r00")).await.expect("warm the cache");
    fake.inject(
        Method::Get,
        1,
        Fault::Error(
            ErrorCode::NoSuchFamily,
            "table 't' has no family 'zz'".into(),
        ),
    );
    let e = t
        .get(Get::new("r00").family(b"zz"))
        .await
        .expect_err("no family");
    assert_eq!(e.code(), Some(ErrorCode::NoSuchFamily));
    assert!(e.to_string().contains("no family 'zz'"), "{e}");
    let s = fake.state();
    assert_eq!(s.count(Method::LocateRegion), 2);
    assert_eq!(s.count(Method::Get), 2);
}

#[tokio::test]
async fn busy_servers_are_retried_until_the_retries_run_out() {
    let fake = fake_with(3, &[]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let t = client.table(TABLE);
    t.get(Get::new("r00")).await.expect("warm the cache");
    fake.inject(
        Method::Get,
        2,
        Fault::Error(ErrorCode::ServerBusy, "call queue full".into()),
    );
    t.get(Get::new("r01"))
        .await
        .expect("third attempt succeeds");
    fake.inject(
        Method::Get,
        10,
        Fault::Error(ErrorCode::ServerBusy, "call queue full".into()),
    );
    match t.get(Get::new("r01")).await {
        Err(Error::RetriesExhausted { attempts, last }) => {
            assert_eq!(attempts, 4, "one attempt and three retries");
            assert_eq!(last.code(), Some(ErrorCode::ServerBusy));
        }
        other => panic!("expected exhaustion, got {other:?}"),
    }
}

#[tokio::test]
async fn batches_send_one_multi_per_server_and_retry_only_failed_actions() {
    let fake = fake_with(30, &["r10", "r20"]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let t = client.table(TABLE);
    let ops = vec![
        BatchOp::Get(Get::new("r01")),
        BatchOp::Mutate(RowMutation::new("r15").put(b"cf", b"q", LATEST_TIMESTAMP, "new15")),
        BatchOp::Get(Get::new("r25")),
        BatchOp::Get(Get::new("r99")),
    ];
    let out = t.batch(ops.clone()).await.expect("batch");
    let got: Vec<Option<String>> = out
        .iter()
        .map(|o| match o {
            Ok(BatchOutcome::Row(r)) => value(r),
            Ok(BatchOutcome::Done) => Some("done".into()),
            Err(e) => panic!("operation failed: {e}"),
        })
        .collect();
    assert_eq!(
        got,
        vec![
            Some("v-r01".into()),
            Some("done".into()),
            Some("v-r25".into()),
            None
        ]
    );
    assert_eq!(fake.state().count(Method::Multi), 1);
    // Region 2 splits: its actions fail once and are retried; the others are not resent.
    fake.split("r15");
    let out = t.batch(ops).await.expect("batch after split");
    assert!(out.iter().all(|o| o.is_ok()), "{out:?}");
    {
        let s = fake.state();
        assert_eq!(s.count(Method::Multi), 3);
        assert_eq!(
            s.rows.get(&Bytes::from_static(b"r15")).map(|v| &v[..]),
            Some(&b"new15"[..])
        );
    }
    t.put_all(
        (0..5)
            .map(|i| RowMutation::new(format!("p{i}")).put(b"cf", b"q", LATEST_TIMESTAMP, "x"))
            .collect(),
    )
    .await
    .expect("put_all");
    assert_eq!(fake.state().rows.len(), 35);
}

async fn scan_all(client: &Client, scan: Scan) -> Vec<String> {
    keys(
        &client
            .table(TABLE)
            .scan(scan)
            .collect()
            .await
            .expect("scan"),
    )
}

fn range(from: usize, to: usize) -> Vec<String> {
    (from..to).map(|i| format!("r{i:02}")).collect()
}

#[tokio::test]
async fn scans_cross_regions_both_ways_and_honour_bounds_and_limits() {
    let fake = fake_with(30, &["r10", "r20"]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let c = |s: Scan| s.caching(4);
    assert_eq!(scan_all(&client, c(Scan::new())).await, range(0, 30));
    assert_eq!(
        scan_all(&client, c(Scan::new().range(b"r05", b"r25"))).await,
        range(5, 25)
    );
    assert_eq!(
        scan_all(&client, c(Scan::new().range(b"r10", b"r20"))).await,
        range(10, 20),
        "exactly one region"
    );
    let mut down = range(0, 30);
    down.reverse();
    assert_eq!(scan_all(&client, c(Scan::new().reversed())).await, down);
    let mut down = range(6, 26);
    down.reverse();
    assert_eq!(
        scan_all(&client, c(Scan::new().range(b"r25", b"r05").reversed())).await,
        down
    );
    assert_eq!(
        scan_all(&client, c(Scan::new().range(b"r08", b"").limit(7))).await,
        range(8, 15)
    );
    assert_eq!(
        scan_all(&client, c(Scan::new().reversed().limit(12))).await,
        range(18, 30).into_iter().rev().collect::<Vec<_>>()
    );
    assert_eq!(
        scan_all(&client, c(Scan::new().prefix(b"r1"))).await,
        range(10, 20)
    );
    assert_eq!(
        scan_all(&client, c(Scan::new().range(b"s", b""))).await,
        Vec::<String>::new()
    );
    // Scanners that ran to the end or hit their limit are all closed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.state().open_scanners() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fake.state().open_scanners(), 0);
}

#[tokio::test]
async fn a_split_under_a_scanner_neither_loses_nor_repeats_rows() {
    let fake = fake_with(30, &["r10", "r20"]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let t = client.table(TABLE);
    let mut s = t.scan(Scan::new().caching(3));
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(s.next().await.expect("next").expect("row"));
    }
    fake.split("r07");
    while let Some(r) = s.next().await.expect("next after split") {
        got.push(r);
    }
    assert_eq!(keys(&got), range(0, 30));
    let reopened = fake.state().scan_opens.clone();
    assert!(
        // Two fetches of 3 rows: r05 was the last row handed out before the split.
        reopened.contains(&Bytes::from_static(b"r05\0")),
        "reopened just after the last row: {reopened:?}"
    );

    let mut s = t.scan(Scan::new().caching(3).reversed());
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(s.next().await.expect("next").expect("row"));
    }
    fake.split("r23");
    while let Some(r) = s.next().await.expect("next after split") {
        got.push(r);
    }
    assert_eq!(
        keys(&got),
        range(0, 30).into_iter().rev().collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_scanner_on_a_dropped_connection_resumes_on_a_new_one() {
    let fake = fake_with(12, &[]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let mut s = client.table(TABLE).scan(Scan::new().caching(2));
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(s.next().await.expect("next").expect("row"));
    }
    fake.inject(Method::ScanNext, 1, Fault::Close);
    while let Some(r) = s.next().await.expect("next") {
        got.push(r);
    }
    assert_eq!(keys(&got), range(0, 12));
    assert_eq!(fake.state().connections, 2);
}

#[tokio::test]
async fn a_dropped_scanner_is_closed_on_the_server() {
    let fake = fake_with(10, &[]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let mut s = client.table(TABLE).scan(Scan::new().caching(2));
    s.next().await.expect("next").expect("row");
    assert_eq!(fake.state().open_scanners(), 1);
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.state().open_scanners() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let st = fake.state();
    assert_eq!(st.open_scanners(), 0);
    assert_eq!(st.scanners_closed, 1);
}

#[test]
fn the_blocking_client_reads_and_scans() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime for the fake");
    let fake = rt.block_on(fake_with(15, &["r07"]));
    let client = cellar_client::blocking::Client::connect(&fake.addr).expect("connect");
    let t = client.table(TABLE);
    let r = t.get(Get::new("r03")).expect("get");
    assert_eq!(value(&r).as_deref(), Some("v-r03"));
    let rows: Vec<Row> = t
        .scan(Scan::new().caching(4))
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(keys(&rows), range(0, 15));
    client.ping().expect("ping");
}

#[tokio::test]
async fn an_unknown_scanner_reopens_within_its_lease_and_fails_after_it() {
    let fake = fake_with(10, &[]).await;
    fake.state().lease_ms = 300;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let t = client.table(TABLE);
    let mut s = t.scan(Scan::new().caching(2));
    let mut got = vec![s.next().await.expect("next").expect("row")];
    got.push(s.next().await.expect("next").expect("row"));
    let forgot = Fault::Error(ErrorCode::UnknownScanner, "scanner 1 is unknown".into());
    fake.inject(Method::ScanNext, 1, forgot.clone());
    while let Some(r) = s.next().await.expect("reopened within the lease") {
        got.push(r);
    }
    assert_eq!(keys(&got), range(0, 10));

    let mut s = t.scan(Scan::new().caching(2));
    s.next().await.expect("next").expect("row");
    s.next().await.expect("next").expect("row");
    tokio::time::sleep(Duration::from_millis(600)).await;
    fake.inject(Method::ScanNext, 1, forgot);
    let e = s.next().await.expect_err("lease expired");
    assert_eq!(e.code(), Some(ErrorCode::UnknownScanner), "{e}");
    assert!(s.next().await.expect("ended").is_none());
}

#[tokio::test]
async fn a_broken_connection_resends_puts_but_not_increments() {
    let fake = fake_with(3, &[]).await;
    let client = Client::connect_with(&fake.addr, quick())
        .await
        .expect("connect");
    let t = client.table(TABLE);
    assert_eq!(t.increment(b"c", b"cf", b"q", 5).await.expect("incr"), 5);
    fake.inject(Method::Mutate, 1, Fault::Close);
    let e = t
        .increment(b"c", b"cf", b"q", 1)
        .await
        .expect_err("an increment that may have been applied is not resent");
    assert!(matches!(e, Error::Closed | Error::Io(_)), "{e:?}");
    fake.inject(Method::Mutate, 1, Fault::Close);
    t.put(RowMutation::new("p").put(b"cf", b"q", LATEST_TIMESTAMP, "v"))
        .await
        .expect("a put is resent");
    let s = fake.state();
    assert_eq!(
        s.rows.get(&Bytes::from_static(b"p")).map(|v| &v[..]),
        Some(&b"v"[..])
    );
    assert_eq!(s.count(Method::Mutate), 4);
}
