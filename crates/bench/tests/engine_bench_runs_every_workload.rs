//! The `engine_bench` binary runs every workload against Cellar in a child process and
//! reports each one in the table and the JSON.

use std::process::Command;

#[test]
fn engine_bench_runs_every_workload_on_cellar() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let out = Command::new(env!("CARGO_BIN_EXE_engine_bench"))
        .args([
            "--engine",
            "cellar",
            "--num",
            "3000",
            "--value-size",
            "200",
            "--reads",
            "500",
            "--seeks",
            "50",
            "--scan-length",
            "20",
            "--cache-bytes",
            "1M",
            "--memstore-bytes",
            "1M",
            "--threads",
            "2",
            "--benchmarks",
            "fillseq,fillrandom,overwrite,readrandom,readrandom-hot,seekrandom,readmissing,readmixed",
            "--db-dir",
        ])
        .arg(dir.path().join("db"))
        .arg("--json")
        .arg(&json)
        .output()
        .expect("runs engine_bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "engine_bench failed:\n{stderr}");
    let table = String::from_utf8_lossy(&out.stdout);
    for w in [
        "fillseq",
        "fillrandom",
        "overwrite",
        "readrandom",
        "readrandom-hot",
        "seekrandom",
        "readmissing",
        "readmixed",
    ] {
        assert!(
            table.lines().any(|l| l.starts_with(&format!("| {w} |"))),
            "{w} missing from\n{table}"
        );
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 8);
    for r in results {
        assert!(r["ops_per_sec"].as_f64().expect("ops/s") > 0.0, "{r}");
        assert!(r["peak_rss_bytes"].as_u64().expect("rss") > 0, "{r}");
    }
    let read = results
        .iter()
        .find(|r| r["workload"] == "readrandom")
        .expect("readrandom result");
    assert_eq!(read["found"], 500, "every key read was written");
    let found = |w: &str| {
        results
            .iter()
            .find(|r| r["workload"] == w)
            .and_then(|r| r["found"].as_u64())
            .unwrap_or_else(|| panic!("{w} result"))
    };
    assert_eq!(found("readmissing"), 0, "no absent key was found");
    let mixed = found("readmixed");
    assert!(
        (150..350).contains(&mixed),
        "about half of 500 found: {mixed}"
    );
    let fill = results
        .iter()
        .find(|r| r["workload"] == "fillrandom")
        .expect("fillrandom result");
    assert!(
        fill["write_amp"].as_f64().expect("write amp") >= 1.0,
        "{fill}"
    );
    // The databases were under --db-dir and are removed without --keep-db.
    assert!(!dir.path().join("db/cellar").exists());
}
