//! Results: one [`WorkloadResult`] per engine and workload, the JSON a child sends and
//! `--json` writes, and the Markdown table the parent prints.

use crate::engine_bench::args::{Args, EngineKind, Workload};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What one engine did in one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadResult {
    pub engine: EngineKind,
    pub workload: Workload,
    /// Operations timed (a seek with its scan is one operation).
    pub ops: u64,
    /// Wall time of the timed operations (not of the flush and compaction drain after).
    pub seconds: f64,
    pub ops_per_sec: f64,
    /// Key plus value bytes written or returned per second, in 10^6 bytes.
    pub mb_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Key plus value bytes the workload put (0 for reads).
    pub user_bytes_written: u64,
    /// `wchar` delta from the first operation to the end of the drain: WAL, flushes,
    /// compactions.
    pub file_bytes_written: u64,
    /// `file_bytes_written / user_bytes_written`, for write workloads.
    pub write_amp: Option<f64>,
    /// `write_bytes` delta of `/proc/self/io`: what reached the block layer during the workload
    /// (late writeback may fall outside it).
    pub device_bytes_written: u64,
    /// `rchar` delta per operation: bytes read from files (page cache included), the measure of
    /// how much a read workload missed the block cache.
    pub file_bytes_read_per_op: f64,
    /// `read_bytes` delta per operation: what the page cache did not have and the disk
    /// supplied (readahead the engine asked for included).
    #[serde(default)]
    pub device_bytes_read_per_op: f64,
    /// CPU time (user and system, every thread of the engine's process: client, flushes,
    /// compactions) per operation over the timed operations, in microseconds.
    #[serde(default)]
    pub cpu_us_per_op: f64,
    /// Seconds spent after the timed loop in flush and waiting for background work.
    pub drain_seconds: f64,
    /// Gets that found their key, entries returned by scans.
    pub found: u64,
    /// Block-cache hit rate over the timed operations, if the engine counts it.
    pub cache_hit_rate: Option<f64>,
    /// Peak RSS during the workload (or since process start if it could not be reset).
    pub peak_rss_bytes: u64,
    pub peak_rss_is_per_workload: bool,
    /// Size of the database directory after the workload.
    pub db_bytes: u64,
    /// The engine's own counters after the workload ([`crate::engine_bench::Engine::stats`]).
    #[serde(default)]
    pub engine_stats: BTreeMap<String, u64>,
}

/// What `--json` writes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    pub config: Args,
    /// The memstore flush size / write buffer size the engines used.
    pub memstore_bytes: u64,
    pub cpus: usize,
    pub results: Vec<WorkloadResult>,
}

/// A whole number with thousands separators: `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in MiB with one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// Microseconds, to two significant places below 10 and as whole numbers above.
pub fn micros(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

fn find(results: &[WorkloadResult], e: EngineKind, w: Workload) -> Option<&WorkloadResult> {
    results.iter().find(|r| r.engine == e && r.workload == w)
}

/// The Markdown table: one row per workload, the engines' columns side by side, and the
/// cellar/rocksdb throughput ratio when both ran.
pub fn markdown_table(results: &[WorkloadResult], engines: &[EngineKind]) -> String {
    let mut workloads: Vec<Workload> = Vec::new();
    for r in results {
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload);
        }
    }
    let both = engines.contains(&EngineKind::Cellar) && engines.contains(&EngineKind::Rocksdb);
    let mut header = vec!["workload".to_string()];
    for e in engines {
        header.push(format!("{e} ops/s"));
    }
    if both {
        header.push("ratio (cellar/rocksdb)".into());
    }
    for e in engines {
        header.push(format!("{e} p50/p99 µs"));
    }
    for e in engines {
        header.push(format!("{e} write-amp"));
    }
    for e in engines {
        header.push(format!("{e} peak RSS"));
    }
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
            .collect::<String>()
    );
    for w in workloads {
        let cells: Vec<Option<&WorkloadResult>> =
            engines.iter().map(|&e| find(results, e, w)).collect();
        let mut row = vec![w.name().to_string()];
        for c in &cells {
            row.push(c.map_or("-".into(), |r| thousands(r.ops_per_sec.round() as u64)));
        }
        if both {
            let ratio = match (
                find(results, EngineKind::Cellar, w),
                find(results, EngineKind::Rocksdb, w),
            ) {
                (Some(c), Some(r)) if r.ops_per_sec > 0.0 => {
                    format!("{:.2}", c.ops_per_sec / r.ops_per_sec)
                }
                _ => "-".into(),
            };
            row.push(ratio);
        }
        for c in &cells {
            row.push(c.map_or("-".into(), |r| {
                format!("{} / {}", micros(r.p50_us), micros(r.p99_us))
            }));
        }
        for c in &cells {
            row.push(match c.and_then(|r| r.write_amp) {
                Some(a) => format!("{a:.2}"),
                None => "-".into(),
            });
        }
        for c in &cells {
            row.push(c.map_or("-".into(), |r| mib(r.peak_rss_bytes)));
        }
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// A second Markdown table with what the first leaves out, one row per engine and workload:
/// MB/s, p99.9, CPU per operation, bytes read from files and from the disk per operation, the
/// drain after writes, the store's size.
pub fn details_table(results: &[WorkloadResult]) -> String {
    let mut out = String::from(
        "| workload | engine | MB/s | p99.9 µs | CPU µs/op | file reads KiB/op | disk reads KiB/op | drain s | db size |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let drain = if r.workload.writes() {
            format!("{:.1}", r.drain_seconds)
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {} | {} | {:.1} | {:.1} | {drain} | {} |",
            r.workload,
            r.engine,
            r.mb_per_sec,
            micros(r.p999_us),
            micros(r.cpu_us_per_op),
            r.file_bytes_read_per_op / 1024.0,
            r.device_bytes_read_per_op / 1024.0,
            mib(r.db_bytes)
        );
    }
    out
}

/// One line for stderr as each result arrives.
pub fn summary_line(r: &WorkloadResult) -> String {
    let mut s = format!(
        "{:<8} {:<15} {:>12} ops/s {:>9.1} MB/s  p50 {:>7} µs  p99 {:>7} µs",
        r.engine.name(),
        r.workload.name(),
        thousands(r.ops_per_sec.round() as u64),
        r.mb_per_sec,
        micros(r.p50_us),
        micros(r.p99_us),
    );
    if let Some(a) = r.write_amp {
        let _ = write!(s, "  write-amp {a:.2} (drain {:.1} s)", r.drain_seconds);
    } else {
        let _ = write!(
            s,
            "  file reads {:.1} KiB/op  disk reads {:.1} KiB/op",
            r.file_bytes_read_per_op / 1024.0,
            r.device_bytes_read_per_op / 1024.0
        );
    }
    if let Some(h) = r.cache_hit_rate.filter(|_| !r.workload.writes()) {
        let _ = write!(s, "  cache hits {:.1}%", h * 100.0);
    }
    let _ = write!(
        s,
        "  CPU {} µs/op  peak RSS {}  db {}",
        micros(r.cpu_us_per_op),
        mib(r.peak_rss_bytes),
        mib(r.db_bytes)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(engine: EngineKind, workload: Workload, ops_per_sec: f64) -> WorkloadResult {
        WorkloadResult {
            engine,
            workload,
            ops: 1000,
            seconds: 1.0,
            ops_per_sec,
            mb_per_sec: 1.04,
            p50_us: 3.25,
            p99_us: 120.4,
            p999_us: 300.0,
            max_us: 900.0,
            user_bytes_written: 1_040_000,
            file_bytes_written: 2_080_000,
            write_amp: workload.writes().then_some(2.0),
            device_bytes_written: 0,
            file_bytes_read_per_op: 0.0,
            device_bytes_read_per_op: 0.0,
            cpu_us_per_op: 12.5,
            drain_seconds: 0.5,
            found: 1000,
            cache_hit_rate: None,
            peak_rss_bytes: 100 << 20,
            peak_rss_is_per_workload: true,
            db_bytes: 0,
            engine_stats: BTreeMap::new(),
        }
    }

    #[test]
    fn numbers_are_formatted_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(mib(3 << 19), "1.5 MiB");
        assert_eq!(micros(3.25), "3.2");
        assert_eq!(micros(120.4), "120");
    }

    #[test]
    fn the_table_puts_engines_side_by_side() {
        let results = vec![
            result(EngineKind::Cellar, Workload::Fillseq, 200_000.0),
            result(EngineKind::Rocksdb, Workload::Fillseq, 100_000.0),
            result(EngineKind::Cellar, Workload::Readrandom, 50_000.0),
        ];
        let t = markdown_table(&results, &[EngineKind::Cellar, EngineKind::Rocksdb]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].starts_with("| workload | cellar ops/s | rocksdb ops/s | ratio"));
        assert_eq!(lines[1].matches('|').count(), lines[0].matches('|').count());
        assert_eq!(
            lines[2],
            "| fillseq | 200,000 | 100,000 | 2.00 | 3.2 / 120 | 3.2 / 120 | 2.00 | 2.00 | \
             100.0 MiB | 100.0 MiB |"
        );
        assert!(
            lines[3].starts_with("| readrandom | 50,000 | - | - |"),
            "{}",
            lines[3]
        );
        let details = details_table(&results);
        assert_eq!(details.lines().count(), 5, "{details}");
        assert!(
            details.contains("| fillseq | cellar | 1.0 | 300 | 12 | 0.0 | 0.0 | 0.5 | 0.0 MiB |"),
            "{details}"
        );
        assert!(details.contains("| readrandom | cellar | 1.0 | 300 | 12 | 0.0 | 0.0 | - |"));
        let single = markdown_table(&results[..1], &[EngineKind::Cellar]);
        assert!(!single.contains("ratio"));
    }

    #[test]
    fn results_round_trip_through_json() {
        let r = result(EngineKind::Rocksdb, Workload::ReadrandomHot, 1.0);
        let text = serde_json::to_string(&r).expect("serialize");
        assert!(text.contains("\"workload\":\"readrandom-hot\""), "{text}");
        let back: WorkloadResult = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, r);
        assert!(summary_line(&r).contains("file reads"));
    }
}
