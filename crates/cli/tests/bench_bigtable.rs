//! `cellar bench bigtable` end to end: embedded regions and a real `cellar standalone`.

mod support;

use std::path::Path;
use std::process::Command;
use support::Server;

const TESTS: [&str; 5] = [
    "sequential-write",
    "random-write",
    "random-read",
    "random-read-memory",
    "scan",
];

/// Runs the suite against `db`; the parsed JSON document.
fn run_suite(db: &str, sizes: &str, rows: u64, extra: &[&str], json: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["bench", "bigtable", "--db", db, "--value-sizes", sizes])
        .args(["--rows", &rows.to_string(), "--threads", "2"])
        .args(extra)
        .arg("--json")
        .arg(json)
        .output()
        .expect("run cellar bench bigtable");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("random-read-memory"), "{stdout}");
    serde_json::from_str(&std::fs::read_to_string(json).expect("read json")).expect("json")
}

fn check(doc: &serde_json::Value, sizes: &[u64], rows: u64) {
    assert_eq!(doc["kind"], "bigtable");
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), sizes.len() * TESTS.len(), "{doc}");
    for (r, (size, test)) in results.iter().zip(
        sizes
            .iter()
            .flat_map(|s| TESTS.iter().map(move |t| (*s, *t))),
    ) {
        assert_eq!(r["test"], test, "{r}");
        assert_eq!(r["value_size"], size, "{r}");
        assert_eq!(r["ops"], rows, "{r}");
        assert!(r["ops_per_sec"].as_f64().expect("ops_per_sec") > 0.0, "{r}");
        let mb = r["mb_per_sec"].as_f64().expect("mb_per_sec");
        let expected = r["ops_per_sec"].as_f64().expect("ops/s") * size as f64 / 1e6;
        assert!((mb - expected).abs() <= expected * 1e-6 + 1e-9, "{r}");
    }
}

#[test]
fn embedded_suite_runs_every_test_at_every_size() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("bigtable.json");
    let db = format!("embedded:{}", dir.path().join("data").display());
    let doc = run_suite(
        &db,
        "10,1000",
        300,
        &["--read-distribution", "zipfian"],
        &json,
    );
    check(&doc, &[10, 1000], 300);
    assert!(dir.path().join("data/bigtable_mem_v10").is_dir());
}

#[test]
fn server_suite_runs_every_test() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("bigtable.json");
    let doc = run_suite(
        &format!("cellar://{}", server.native),
        "100",
        200,
        &[],
        &json,
    );
    check(&doc, &[100], 200);
}

#[test]
fn bad_targets_and_sizes_are_named() {
    for (args, says) in [
        (
            vec!["--db", "mysql://x"],
            "cellar://HOST:PORT or embedded:DIR",
        ),
        (
            vec!["--db", "embedded:/tmp/x", "--value-sizes", "0"],
            "--value-sizes",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
            .args(["bench", "bigtable"])
            .args(&args)
            .output()
            .expect("run cellar bench bigtable");
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
