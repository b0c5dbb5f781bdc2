//! A full disk: writes, flushes and compactions fail with an error naming the problem, the
//! server says why in `/status` and `/metrics`, nothing acknowledged is lost, and once space
//! returns the server recovers by itself (no restart), then survives a restart with exactly
//! the acknowledged writes.

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{ClientConfig, FamilySchema, Get, RowMutation, Scan, TableSchema};
use cellar_server::config::ServerConfig;
use cellar_server::standalone::Standalone;
use cellar_storage::fs::{FaultFs, FsRef};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn start(fs: &FaultFs, data: &Path) -> Standalone {
    let config = ServerConfig {
        data_dir: data.to_path_buf(),
        listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
        hbase_listen: String::new(),
        ..ServerConfig::default()
    };
    Standalone::start_on(config, Arc::new(fs.clone()) as FsRef).expect("start")
}

fn http_get(server: &Standalone, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(server.http_addr()).expect("connect http");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("read");
    body
}

fn client(server: &Standalone) -> Client {
    let config = ClientConfig {
        retries: 1,
        retry_backoff: Duration::from_millis(10),
        ..ClientConfig::default()
    };
    Client::connect_with(&server.native_addr().to_string(), config).expect("connect")
}

fn put(c: &Client, row: &str) -> cellar_client::Result<()> {
    c.table("full")
        .put(RowMutation::new(Bytes::from(row.to_string())).put(b"cf", b"q", 1, format!("v-{row}")))
}

fn rows(c: &Client) -> Vec<String> {
    c.table("full")
        .scan(Scan::new())
        .collect::<cellar_client::Result<Vec<_>>>()
        .expect("scan")
        .iter()
        .map(|r| String::from_utf8_lossy(&r.row).into_owned())
        .collect()
}

#[test]
fn a_full_disk_refuses_writes_with_the_reason_and_heals_by_itself() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let fs = FaultFs::new();
    let server = start(&fs, &data);
    let c = client(&server);
    c.admin()
        .create_table(
            TableSchema::new("full", vec![FamilySchema::new("cf")]),
            vec![],
        )
        .expect("create");
    for i in 0..20 {
        put(&c, &format!("a{i:02}")).expect("put before the disk fills");
    }
    c.admin()
        .flush("full")
        .expect("a store file for the compaction to rewrite");

    fs.set_free_space(Some(0));
    let err = put(&c, "lost").expect_err("the disk is full").to_string();
    assert!(err.contains("No space left on device"), "{err}");
    let err = c
        .admin()
        .flush("full")
        .expect_err("no room for a store file");
    assert!(err.to_string().contains("No space left on device"), "{err}");
    let err = c
        .admin()
        .compact("full", true)
        .expect_err("no room to compact");
    assert!(err.to_string().contains("No space left on device"), "{err}");
    // Reads go on, and show only acknowledged writes.
    assert_eq!(rows(&c).len(), 20);
    assert!(c
        .table("full")
        .get(Get::new(Bytes::from_static(b"lost")))
        .expect("get")
        .is_empty());
    let status = http_get(&server, "/status");
    assert!(status.contains("\"state\":\"stalled\""), "{status}");
    assert!(status.contains("No space left on device"), "{status}");
    let metrics = http_get(&server, "/metrics");
    assert!(metrics.contains("\ncellar_wal_healthy 0\n"), "{metrics}");

    fs.set_free_space(None);
    let deadline = Instant::now() + Duration::from_secs(60);
    while put(&c, "b00").is_err() {
        assert!(Instant::now() < deadline, "the server never recovered");
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in 1..20 {
        put(&c, &format!("b{i:02}")).expect("put after recovery");
    }
    c.admin().flush("full").expect("flush once space is back");
    c.admin()
        .compact("full", true)
        .expect("compact once space is back");
    let status = http_get(&server, "/status");
    assert!(status.contains("\"state\":\"ok\""), "{status}");
    assert!(status.contains("\"recoveries\":1"), "{status}");
    assert!(http_get(&server, "/metrics").contains("\ncellar_wal_healthy 1\n"));
    drop(c);
    server.shutdown().expect("shutdown");

    let server = start(&fs, &data);
    let c = client(&server);
    let mut expected: Vec<String> = (0..20).map(|i| format!("a{i:02}")).collect();
    expected.extend((0..20).map(|i| format!("b{i:02}")));
    assert_eq!(rows(&c), expected, "exactly the acknowledged writes");
    drop(c);
    server.shutdown().expect("shutdown");
}
