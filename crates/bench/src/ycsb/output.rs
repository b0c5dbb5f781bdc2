//! The results: YCSB's text exporter format (`[OP], Measure, value` lines), and the JSON
//! document `cellar bench report` reads. Both parse back, for tests and tools.

use super::measure::OpSummary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What a finished phase measured.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseResult {
    /// Wall time from the first operation's start to the last thread's end.
    pub runtime_ms: u64,
    /// Operations the client threads completed (failed ones included), as YCSB counts them.
    pub ops_done: u64,
    /// Per operation name (`READ`, `READ-FAILED`, ...).
    pub operations: BTreeMap<String, OpSummary>,
}

impl PhaseResult {
    /// YCSB's overall throughput: operations done per second of runtime.
    pub fn throughput(&self) -> f64 {
        if self.runtime_ms == 0 {
            0.0
        } else {
            self.ops_done as f64 * 1000.0 / self.runtime_ms as f64
        }
    }
}

/// A number as Java's `Double.toString` prints it for the magnitudes seen here, so the text
/// matches YCSB's (`12.0`, `523.4121`).
fn java_double(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "NaN".into()
        } else if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let a = x.abs();
    if a != 0.0 && !(1e-3..1e7).contains(&a) {
        // Java switches to scientific notation: 1.2345E7.
        let s = format!("{x:E}");
        return match s.split_once('E') {
            Some((m, e)) if !m.contains('.') => format!("{m}.0E{e}"),
            _ => s,
        };
    }
    if x.fract() == 0.0 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// YCSB's text output: `[OVERALL]` runtime and throughput, then per operation (by name) its
/// count, average, min, max, 95th and 99th percentile latencies, then this tool's 50th and
/// 99.9th (named as YCSB names extra percentiles), then the `Return=` counts.
pub fn text(result: &PhaseResult) -> String {
    let mut out = String::new();
    let mut line = |op: &str, measure: &str, value: String| {
        let _ = writeln!(out, "[{op}], {measure}, {value}");
    };
    line("OVERALL", "RunTime(ms)", result.runtime_ms.to_string());
    line(
        "OVERALL",
        "Throughput(ops/sec)",
        java_double(result.throughput()),
    );
    for (op, s) in &result.operations {
        line(op, "Operations", s.count.to_string());
        line(op, "AverageLatency(us)", java_double(s.avg_us));
        line(op, "MinLatency(us)", s.min_us.to_string());
        line(op, "MaxLatency(us)", s.max_us.to_string());
        line(op, "95thPercentileLatency(us)", s.p95_us.to_string());
        line(op, "99thPercentileLatency(us)", s.p99_us.to_string());
        line(op, "50thPercentileLatency(us)", s.p50_us.to_string());
        line(op, "99.9PercentileLatency(us)", s.p999_us.to_string());
        for (status, n) in &s.returns {
            line(op, &format!("Return={status}"), n.to_string());
        }
    }
    out
}

/// The text output as a map from (`OP`, `Measure`) to the value's text. Lines that do not
/// start with `[` are skipped (banners, blank lines); a bracketed line that is not
/// `[OP], Measure, value`, or a repeated (op, measure), is an error naming the line.
pub fn parse_text(text: &str) -> Result<BTreeMap<(String, String), String>, String> {
    let mut out = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim();
        if !l.starts_with('[') {
            continue;
        }
        let bad = || format!("line {}: expected '[OP], Measure, value', got '{l}'", i + 1);
        let (op, rest) = l[1..].split_once("], ").ok_or_else(bad)?;
        let (measure, value) = rest.rsplit_once(", ").ok_or_else(bad)?;
        if op.is_empty() || measure.is_empty() || value.is_empty() {
            return Err(bad());
        }
        let key = (op.to_string(), measure.to_string());
        if out.insert(key, value.to_string()).is_some() {
            return Err(format!("line {}: [{op}], {measure} appears twice", i + 1));
        }
    }
    Ok(out)
}

/// The JSON document (`--json FILE`). Field names are a contract with `cellar bench report`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct YcsbJson {
    /// Always `cellar-bench`.
    pub tool: String,
    /// Always `ycsb`.
    pub kind: String,
    /// `load` or `run`.
    pub phase: String,
    /// The first `-P` file's name without directory or extension (`workloada`).
    pub workload: String,
    /// The `--db` URL.
    pub db: String,
    pub threads: u64,
    /// Total operations per second asked for; 0: unthrottled.
    pub target: u64,
    pub record_count: u64,
    pub operation_count: u64,
    pub runtime_ms: u64,
    /// Operations per second.
    pub throughput: f64,
    pub operations: BTreeMap<String, OpJson>,
}

/// One operation's results in [`YcsbJson`]; latencies in µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpJson {
    pub count: u64,
    pub avg_us: f64,
    pub min_us: u64,
    pub max_us: u64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    /// Counts by YCSB status name (`OK`, `NOT_FOUND`, `ERROR`, ...).
    #[serde(rename = "return")]
    pub returns: BTreeMap<String, u64>,
}

impl From<&OpSummary> for OpJson {
    fn from(s: &OpSummary) -> OpJson {
        OpJson {
            count: s.count,
            avg_us: s.avg_us,
            min_us: s.min_us,
            max_us: s.max_us,
            p50_us: s.p50_us,
            p95_us: s.p95_us,
            p99_us: s.p99_us,
            p999_us: s.p999_us,
            returns: s.returns.clone(),
        }
    }
}

/// What the JSON says about the run besides the measurements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    pub phase: String,
    pub workload: String,
    pub db: String,
    pub threads: u64,
    pub target: u64,
    pub record_count: u64,
    pub operation_count: u64,
}

/// The JSON document for a finished phase.
pub fn json(info: &RunInfo, result: &PhaseResult) -> YcsbJson {
    YcsbJson {
        tool: "cellar-bench".into(),
        kind: "ycsb".into(),
        phase: info.phase.clone(),
        workload: info.workload.clone(),
        db: info.db.clone(),
        threads: info.threads,
        target: info.target,
        record_count: info.record_count,
        operation_count: info.operation_count,
        runtime_ms: result.runtime_ms,
        throughput: result.throughput(),
        operations: result
            .operations
            .iter()
            .map(|(k, v)| (k.clone(), OpJson::from(v)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_java_does() {
        assert_eq!(java_double(12.0), "12.0");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(523.25), "523.25");
        assert_eq!(java_double(12_345_678.0), "1.2345678E7");
        assert_eq!(java_double(10_000_000.0), "1.0E7");
    }

    #[test]
    fn parse_rejects_malformed_and_repeated_lines() {
        assert!(parse_text("[READ] Operations 3").is_err());
        assert!(parse_text("[READ], Operations, 3\n[READ], Operations, 4").is_err());
        let ok = parse_text("Loading workload...\n\n[READ], Operations, 3\n").expect("parses");
        assert_eq!(ok[&("READ".into(), "Operations".into())], "3");
    }
}
