//! `cellar standalone --root hdfs://...`: a real server process on a real HDFS (MiniDFS, three
//! DataNodes, on 127.0.0.1). Tables, meta and the WAL live on HDFS; acknowledged writes
//! survive `kill -9` (the restarted server takes the dead one's lock and WAL over), and a
//! clean restart keeps everything too.

mod support;

use bytes::Bytes;
use cellar_client::blocking::Client;
use cellar_client::{FamilySchema, Get, RowMutation, Scan, TableSchema, LATEST_TIMESTAMP};
use cellar_storage::fs::{FileSystem, HdfsFs};
use cellar_testing::MiniDfs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::Server;

const ROWS: u32 = 1500;

fn row(i: u32) -> Bytes {
    Bytes::from(format!("row{i:06}"))
}

fn write_rows(client: &Client, from: u32, to: u32) {
    let t = client.table("t");
    for i in from..to {
        t.put(RowMutation::new(row(i)).put(b"f", b"q", LATEST_TIMESTAMP, row(i)))
            .expect("put acknowledged");
    }
}

fn count_rows(client: &Client) -> u32 {
    let mut scanner = client.table("t").scan(Scan::new());
    let mut n = 0u32;
    while let Some(r) = scanner.next_row().expect("scan") {
        assert_eq!(r.value(b"f", b"q"), Some(&row(n)), "row {n}");
        n += 1;
    }
    n
}

#[test]
fn standalone_keeps_every_acknowledged_write_on_hdfs_across_kill_9() {
    let dfs = MiniDfs::start(3).expect("start MiniDFS");
    let root = format!("{}/cellar", dfs.url);
    let tmp = tempfile::tempdir().expect("tempdir");
    let args = ["--root", root.as_str()];
    let addrs = ["127.0.0.1:0"; 3];
    let mut server = Server::start_with(tmp.path(), None, addrs, &args);
    // Printed after the listening lines the start waits for.
    let seen = support::wait_for(Duration::from_secs(30), || {
        server
            .output()
            .contains(&format!("data_dir={root}"))
            .then_some(())
    });
    assert!(seen.is_some(), "{}", server.output());

    let client = Client::connect(&server.native).expect("connect");
    client
        .admin()
        .create_table(
            TableSchema::new("t", vec![FamilySchema::new("f")]),
            vec![row(ROWS / 2)],
        )
        .expect("create");
    write_rows(&client, 0, ROWS / 2);
    client
        .admin()
        .flush("t")
        .expect("flush to store files on HDFS");
    write_rows(&client, ROWS / 2, ROWS);
    drop(client);

    // Everything is on HDFS, nothing on local disk.
    let hdfs = HdfsFs::connect(&dfs.url).expect("connect to HDFS");
    let top = hdfs.list(Path::new("/cellar")).expect("list root");
    for name in ["LOCK", "cluster_id", "data", "meta", "wal"] {
        assert!(top.iter().any(|n| n == name), "{name} missing from {top:?}");
    }
    assert!(
        std::fs::read_dir(tmp.path()).expect("tmp").next().is_none(),
        "wrote to local disk"
    );

    // kill -9: the second half was acknowledged and only in the WAL.
    server.kill9();
    let restarted = Server::start_with(tmp.path(), None, addrs, &args);
    let client = Client::connect(&restarted.native).expect("connect again");
    assert_eq!(count_rows(&client), ROWS, "rows after kill -9");
    let got = client.table("t").get(Get::new(row(ROWS - 1))).expect("get");
    assert_eq!(got.value(b"f", b"q"), Some(&row(ROWS - 1)));

    // A clean stop and start keeps them too.
    write_rows(&client, ROWS, ROWS + 100);
    drop(client);
    let mut restarted = restarted;
    assert!(restarted.terminate().success(), "{}", restarted.output());
    let again = Server::start_with(tmp.path(), None, addrs, &args);
    let client = Client::connect(&again.native).expect("connect");
    assert_eq!(
        count_rows(&client),
        ROWS + 100,
        "rows after a clean restart"
    );
}

#[test]
fn bad_roots_are_refused_naming_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (root, expect) in [
        (
            "hdfs://127.0.0.1:1/cellar",
            "cannot use HDFS at hdfs://127.0.0.1:1",
        ),
        ("hdfs://127.0.0.1:9000", "needs a directory"),
        ("s3://bucket/cellar", "unknown scheme"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
            .args([
                "standalone",
                "--listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
            ])
            .args(["--hbase-listen", "127.0.0.1:0", "--root", root])
            .current_dir(tmp.path())
            .output()
            .expect("cellar runs");
        assert!(!out.status.success(), "{root} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{root}: {err}");
    }
}
