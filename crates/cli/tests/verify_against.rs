//! `cellar verify-against` on a real `cellar standalone`, reading two tables over its HBase
//! port as it reads an HBase cluster and Cellar in a migration: equal tables (with different
//! region boundaries) are equal; a changed value, a missing row, an extra row and an extra
//! version are each named; a difference that heals while the tool waits is not reported; a
//! missing table is an error, not "different"; and `hbase:meta` found through ZooKeeper.
//! Apache HBase as the other side is scripts/hbase-move-in.sh's.

mod support;

use cellar_testing::ZooKeeper;
use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::Server;

fn verify(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cellar"))
        .arg("verify-against")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run cellar verify-against")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Tables `a` (regions split at r3, r6) and `b` (split at r5), each with rows r0..r9: two
/// versions of f:a, a g:b cell, a binary row `\x00\xff` with a large value.
fn two_equal_tables(server: &Server) {
    let mut script = String::from(
        "create 'a', {NAME => 'f', VERSIONS => 3}, 'g', SPLITS => ['r3', 'r6']; \
         create 'b', {NAME => 'f', VERSIONS => 3}, 'g', SPLITS => ['r5']",
    );
    for t in ["a", "b"] {
        for i in 0..10 {
            script.push_str(&format!(
                "; put '{t}', 'r{i}', 'f:a', 'old{i}', 100; put '{t}', 'r{i}', 'f:a', 'new{i}', 200; \
                 put '{t}', 'r{i}', 'g:b', 'w{i}', 300"
            ));
        }
        script.push_str(&format!(
            "; put '{t}', \"\\x00\\xff\", 'f:big', '{}', 400",
            "x".repeat(20_000)
        ));
    }
    server.shell(&script);
}

#[test]
fn equal_tables_are_equal_and_every_kind_of_difference_is_named() {
    let server = Server::start();
    two_equal_tables(&server);
    let h = server.hbase.as_str();
    let base = [
        "--hbase",
        h,
        "--cellar",
        h,
        "--table",
        "a",
        "--cellar-table",
        "b",
    ];
    let out = verify(&[&base[..], &["--rows-per-range", "4", "--recheck", "0"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("verify-against: equal: 11 rows, 31 cells in 3 ranges"),
        "{}",
        text(&out)
    );
    // One version: the old ones are not read.
    let out = verify(&[&base[..], &["--versions", "1", "--recheck", "0"]].concat());
    assert!(
        text(&out).contains("verify-against: equal: 11 rows, 21 cells in 1 ranges"),
        "{}",
        text(&out)
    );

    server.shell(
        "put 'b', 'r2', 'f:a', 'changed', 200; deleteall 'b', 'r5'; put 'a', 'r77', 'f:a', 'extra'; \
         put 'a', 'r8', 'f:a', 'older', 50",
    );
    let out = verify(&[&base[..], &["--recheck", "0"]].concat());
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("verify-against: DIFFERENT: 4 rows differ in 1 of 1 ranges"),
        "{said}"
    );
    assert!(said.contains("first differing row 'r2'"), "{said}");
    assert!(
        said.contains("row 'r2': f:a @200 Put: source 'new2', target 'changed'"),
        "{said}"
    );
    assert!(
        said.contains("row 'r5': missing on the target (3 cells on the source)"),
        "{said}"
    );
    assert!(said.contains("row 'r77': missing on the target"), "{said}");
    assert!(
        said.contains("row 'r8': only the source has f:a @50 Put 'older'"),
        "{said}"
    );
    // Limited to what differs: a family both agree on is equal.
    let out = verify(
        &[
            &base[..],
            &["--families", "g", "--stop-row", "r5", "--recheck", "0"],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_difference_that_heals_while_the_tool_waits_is_not_reported() {
    let server = Server::start();
    two_equal_tables(&server);
    // A row on the source only: as if its edit were still on its way.
    server.shell("put 'a', 'r45', 'f:a', 'late', 500");
    let h = server.hbase.as_str();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args([
            "verify-against",
            "--hbase",
            h,
            "--cellar",
            h,
            "--table",
            "a",
            "--cellar-table",
            "b",
            "--recheck",
            "3",
            "--recheck-pause",
            "3",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Wait for the first pass to find r45 missing, then bring it (as replication would).
    let mut stderr = child.stderr.take().expect("stderr");
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut buf = [0u8; 512];
    while !seen.contains("(1/3)\n") && Instant::now() < deadline {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
    assert!(seen.contains("reading it again in 3.0 s (1/3)"), "{seen}");
    server.shell("put 'b', 'r45', 'f:a', 'late', 500");
    let out = child.wait_with_output().expect("wait");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{seen}");
    assert!(said.contains("verify-against: equal: 12 rows"), "{said}");
}

#[test]
fn a_missing_table_is_an_error_naming_it() {
    let server = Server::start();
    server.shell("create 'a', 'f'");
    let h = server.hbase.as_str();
    let out = verify(&[
        "--hbase",
        h,
        "--cellar",
        h,
        "--table",
        "a",
        "--cellar-table",
        "nope",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("cellar: table 'nope' has no regions in hbase:meta"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("DIFFERENT"), "{}", text(&out));
    let out = verify(&["--hbase", "127.0.0.1", "--table", "a"]);
    assert!(
        text(&out).contains("--hbase: '127.0.0.1' is not HOST:PORT"),
        "{}",
        text(&out)
    );
}

#[test]
fn meta_is_found_through_zookeeper_as_with_an_hbase_cluster_key() {
    let zk = ZooKeeper::start(200).expect("start ZooKeeper");
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(
        &tmp.path().join("data"),
        None,
        ["127.0.0.1:0"; 3],
        &["--zk", &zk.addr],
    );
    two_equal_tables(&server);
    let key = format!("{}:/hbase", zk.addr);
    let out = verify(&[
        "--hbase",
        &key,
        "--cellar",
        &server.hbase,
        "--table",
        "a",
        "--cellar-table",
        "b",
        "--recheck",
        "0",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("verify-against: equal: 11 rows"),
        "{}",
        text(&out)
    );
}
