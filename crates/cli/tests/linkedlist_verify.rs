//! `cellar bench linkedlist verify` finds a lost node: lists are generated against a real
//! server, verify passes; one node is deleted behind generate's back, and verify reports it
//! UNDEFINED, names it, and exits non-zero.

mod support;

use cellar_client::{Client, RowMutation, Scan, LATEST_TIMESTAMP};
use std::process::{Command, Output};
use support::Server;

fn cellar(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run cellar")
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_is_reported_undefined() {
    let server = Server::start();
    let db = format!("cellar://{}", server.native);
    let dir = tempfile::tempdir().expect("temp dir");
    let summary = dir.path().join("generate.json");
    let summary_arg = summary.to_str().expect("utf-8 path");

    let generated = cellar(&[
        "bench",
        "linkedlist",
        "generate",
        "--db",
        &db,
        "--create",
        "--regions",
        "3",
        "--writers",
        "2",
        "--width",
        "20",
        "--wrap",
        "5",
        "--nodes",
        "1000",
        "--summary",
        summary_arg,
    ]);
    assert!(generated.status.success(), "{}", text(&generated));
    assert!(
        String::from_utf8_lossy(&generated.stdout).contains("acknowledged=1000 "),
        "{}",
        text(&generated)
    );
    let clean = cellar(&[
        "bench",
        "linkedlist",
        "verify",
        "--db",
        &db,
        "--expect",
        summary_arg,
    ]);
    let out = text(&clean);
    assert!(clean.status.success(), "{out}");
    assert!(out.contains("REFERENCED=1000\n"), "{out}");
    assert!(out.contains("UNREFERENCED=0\n"), "{out}");
    assert!(out.contains("UNDEFINED=0\n"), "{out}");

    // Lose one node: every node of a closed circle is pointed at by another.
    let client = Client::connect(&server.native).await.expect("connect");
    let table = client.table("chaos_linkedlist");
    let victim = table
        .scan(Scan::new().limit(1))
        .next()
        .await
        .expect("scan")
        .expect("a node")
        .row;
    assert_eq!(victim.len(), 16, "node keys are 16 bytes");
    table
        .delete(RowMutation::new(victim.clone()).delete_family(b"node", LATEST_TIMESTAMP))
        .await
        .expect("delete");
    let hex: String = victim.iter().map(|b| format!("{b:02x}")).collect();

    let lossy = cellar(&[
        "bench",
        "linkedlist",
        "verify",
        "--db",
        &db,
        "--expect",
        summary_arg,
    ]);
    let out = text(&lossy);
    assert!(!lossy.status.success(), "{out}");
    assert!(out.contains("UNDEFINED=1\n"), "{out}");
    assert!(out.contains(&format!("missing {hex}")), "{out}");
    assert!(out.contains("acknowledged writes were lost"), "{out}");
    assert!(
        out.contains("999 nodes found, 1000 were acknowledged"),
        "{out}"
    );
}
