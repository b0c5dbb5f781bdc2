//! Results of the Bigtable suite: the printed table and the JSON document.

use std::fmt::Write;
use std::path::Path;

/// One test at one value size.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestResult {
    pub test: &'static str,
    pub value_size: usize,
    pub rows: u64,
    pub threads: usize,
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    /// Value bytes moved, in 10^6 bytes per second.
    pub mb_per_sec: f64,
    /// How random reads picked rows (random-read tests only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distribution: Option<&'static str>,
}

impl TestResult {
    pub fn new(
        test: &'static str,
        value_size: usize,
        rows: u64,
        threads: usize,
        ops: u64,
        value_bytes: u64,
        seconds: f64,
    ) -> TestResult {
        let per_sec = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
        TestResult {
            test,
            value_size,
            rows,
            threads,
            ops,
            seconds,
            ops_per_sec: per_sec(ops as f64),
            mb_per_sec: per_sec(value_bytes as f64) / 1e6,
            distribution: None,
        }
    }
}

pub fn table(results: &[TestResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<20} {:>10} {:>10} {:>8} {:>12} {:>10}",
        "test", "value", "ops", "threads", "ops/s", "MB/s"
    );
    for r in results {
        let _ = writeln!(
            out,
            "{:<20} {:>10} {:>10} {:>8} {:>12.0} {:>10.2}",
            r.test, r.value_size, r.ops, r.threads, r.ops_per_sec, r.mb_per_sec
        );
    }
    out
}

pub fn write_json(path: &Path, db: &str, results: &[TestResult]) -> Result<(), String> {
    let doc = serde_json::json!({
        "tool": "cellar-bench",
        "kind": "bigtable",
        "db": db,
        "results": results,
    });
    let text = serde_json::to_string_pretty(&doc)
        .map_err(|e| format!("cannot encode the JSON result: {e}"))?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}
