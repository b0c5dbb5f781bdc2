//! With the `rocksdb` feature, `engine_bench --engine both` runs both engines on the same
//! workloads and puts them side by side, with a throughput ratio.
#![cfg(feature = "rocksdb")]

use std::process::Command;

#[test]
fn engine_bench_compares_cellar_with_rocksdb() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let out = Command::new(env!("CARGO_BIN_EXE_engine_bench"))
        .args([
            "--engine",
            "both",
            "--benchmarks",
            "fillrandom,readrandom,seekrandom",
            "--num",
            "3000",
            "--value-size",
            "200",
            "--reads",
            "500",
            "--seeks",
            "50",
            "--cache-bytes",
            "1M",
            "--memstore-bytes",
            "1M",
            "--compression",
            "lz4",
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
    assert!(
        table.starts_with("| workload | cellar ops/s | rocksdb ops/s | ratio (cellar/rocksdb) |"),
        "{table}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 6, "3 workloads x 2 engines");
    // Alternating per workload: cellar, then rocksdb.
    let order: Vec<String> = results
        .iter()
        .map(|r| format!("{}/{}", r["workload"], r["engine"]))
        .collect();
    assert_eq!(order[0], "\"fillrandom\"/\"cellar\"");
    assert_eq!(order[1], "\"fillrandom\"/\"rocksdb\"");
    for r in results.iter().filter(|r| r["workload"] == "readrandom") {
        assert_eq!(r["found"], 500, "{r}");
    }
}
