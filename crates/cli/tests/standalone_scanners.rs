//! Server-side scanners: a scanner idle past its lease is gone (the next call fails), and a
//! client process that dies mid-scan does not leave its scanner open.

mod support;

use bytes::Bytes;
use cellar_client::{
    Client, ErrorCode, FamilySchema, RowMutation, Scan, TableSchema, LATEST_TIMESTAMP,
};
use cellar_testing::{Log, Process};
use std::process::Command;
use std::time::Duration;
use support::{wait_for, Server};

const LEASE_MS: u64 = 1_000;

async fn table_with_rows(client: &Client, n: usize) {
    client
        .admin()
        .create_table(TableSchema::new("s", vec![FamilySchema::new("cf")]), vec![])
        .await
        .expect("create");
    client
        .table("s")
        .put_all(
            (0..n)
                .map(|i| {
                    RowMutation::new(Bytes::from(format!("r{i:03}"))).put(
                        b"cf",
                        b"q",
                        LATEST_TIMESTAMP,
                        Bytes::from_static(b"v"),
                    )
                })
                .collect(),
        )
        .await
        .expect("put_all");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scanner_idle_past_its_lease_fails() {
    let server = Server::start_with_config(&format!("[scanner]\nlease_ms = {LEASE_MS}\n"));
    let client = support::connect_client(&server.native).await;
    table_with_rows(&client, 20).await;
    let t = client.table("s");
    // A scanner used within its lease runs to the end.
    let mut s = t.scan(Scan::new().caching(2));
    let mut n = 0;
    while let Some(_r) = s.next().await.expect("next") {
        n += 1;
        if n == 5 {
            tokio::time::sleep(Duration::from_millis(LEASE_MS / 4)).await;
        }
    }
    assert_eq!(n, 20);
    // One left idle for three leases does not.
    let mut s = t.scan(Scan::new().caching(2));
    s.next().await.expect("next").expect("row");
    s.next().await.expect("next").expect("row");
    tokio::time::sleep(Duration::from_millis(3 * LEASE_MS)).await;
    let e = s.next().await.expect_err("the lease expired");
    assert_eq!(e.code(), Some(ErrorCode::UnknownScanner), "{e}");
}

/// The `open scanners` gauge of `/metrics`.
fn open_scanners(server: &Server) -> Option<u64> {
    let body = server.http_get("/metrics");
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with("cellar_open_scanners"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .map(|v| v as u64)
}

const HELPER_ENV: &str = "CELLAR_TEST_SCAN_AND_HANG_ADDR";

/// Not a test on its own: run as a child process by
/// `a_client_that_dies_mid_scan_leaves_no_scanner` (this binary with `--ignored --exact
/// helper_scan_and_hang`), it opens a scan, says so, and waits to be killed. Ignored, so a
/// plain test run neither runs it nor counts it.
#[test]
#[ignore = "child process of a_client_that_dies_mid_scan_leaves_no_scanner"]
fn helper_scan_and_hang() {
    let Ok(addr) = std::env::var(HELPER_ENV) else {
        eprintln!(
            "helper_scan_and_hang runs only as the child of a_client_that_dies_mid_scan_leaves_no_scanner"
        );
        return;
    };
    let client = support::connect_blocking(&addr);
    let mut s = client.table("s").scan(Scan::new().caching(1));
    s.next_row().expect("helper next").expect("helper row");
    println!("SCANNING");
    std::thread::sleep(Duration::from_secs(120));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_dies_mid_scan_leaves_no_scanner() {
    let server = Server::start();
    let client = support::connect_client(&server.native).await;
    table_with_rows(&client, 20).await;
    assert_eq!(
        open_scanners(&server),
        Some(0),
        "metrics:\n{}",
        server.http_get("/metrics")
    );

    let exe = std::env::current_exe().expect("test executable");
    let mut helper = Command::new(exe);
    helper
        .args([
            "--ignored",
            "--exact",
            "helper_scan_and_hang",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, &server.native);
    let mut child = Process::spawn(helper, Log::Temp).expect("spawn the scanning client");
    let (mut child, said) = tokio::task::spawn_blocking(move || {
        let said = child.wait_for_line(Duration::from_secs(120), "SCANNING", |l| {
            l.contains("SCANNING").then_some(())
        });
        (child, said.is_ok())
    })
    .await
    .expect("wait for the scanning client");
    let open_while_alive = open_scanners(&server);
    child.kill9();
    assert!(said, "the scanning client did not start its scan");
    assert_eq!(
        open_while_alive,
        Some(1),
        "its scanner is open while it lives"
    );
    let freed = tokio::task::spawn_blocking(move || {
        let n = wait_for(Duration::from_secs(30), || {
            (open_scanners(&server) == Some(0)).then_some(())
        });
        (n, server)
    })
    .await
    .expect("poll");
    assert!(freed.0.is_some(), "the dead client's scanner is still open");
}
