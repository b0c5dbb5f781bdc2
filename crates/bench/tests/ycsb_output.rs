//! YCSB output: a real multi-threaded run through the runner and the measuring wrapper, its
//! text and JSON parsed back, and the counts checked against each other.

use bytes::Bytes;
use cellar_bench::ycsb::db::{Db, Fields, Measurements, Status};
use cellar_bench::ycsb::measure::{Measure, MeasuredDb};
use cellar_bench::ycsb::output::{self, PhaseResult, RunInfo, YcsbJson};
use cellar_bench::ycsb::runner::{run_phase, Phase, RunnerConfig, Workload};
use std::collections::BTreeMap;

/// Keys whose number is divisible by 7 are missing; updates of multiples of 11 fail.
struct Patchy;

fn num(key: &str) -> u64 {
    key.trim_start_matches("user").parse().unwrap_or(0)
}

impl Db for Patchy {
    fn read(&self, _: &str, key: &str, _: Option<&[String]>) -> (Status, Fields) {
        if num(key).is_multiple_of(7) {
            (Status::NotFound, Vec::new())
        } else {
            (
                Status::Ok,
                vec![("field0".into(), Bytes::from_static(b"v"))],
            )
        }
    }
    fn scan(&self, _: &str, _: &str, _: usize, _: Option<&[String]>) -> (Status, Vec<Fields>) {
        (Status::Ok, Vec::new())
    }
    fn update(&self, _: &str, key: &str, _: &Fields) -> Status {
        if num(key).is_multiple_of(11) {
            Status::Error("region busy".into())
        } else {
            Status::Ok
        }
    }
    fn insert(&self, _: &str, _: &str, _: &Fields) -> Status {
        Status::Ok
    }
    fn delete(&self, _: &str, _: &str) -> Status {
        Status::Ok
    }
}

/// Alternates reads and updates over a per-thread key counter.
struct Alternating;

impl Workload for Alternating {
    type State = u64;
    fn thread_state(&self, id: usize, _: usize) -> u64 {
        id as u64 * 1_000
    }
    fn do_insert(&self, db: &dyn Db, n: &mut u64) -> bool {
        *n += 1;
        db.insert("usertable", &format!("user{n}"), &Vec::new())
            .is_ok()
    }
    fn do_transaction(&self, db: &dyn Db, n: &mut u64, _: &dyn Measurements) -> bool {
        *n += 1;
        let key = format!("user{n}");
        if n.is_multiple_of(2) {
            db.read("usertable", &key, None);
        } else {
            db.update("usertable", &key, &Vec::new());
        }
        true
    }
}

const OPS: u64 = 1000;

fn run() -> (PhaseResult, RunInfo) {
    let meas = Measure::new();
    let db = MeasuredDb::new(&Patchy, &meas);
    let cfg = RunnerConfig {
        phase: Phase::Run,
        threads: 4,
        op_count: OPS,
        target_ops: 0,
        max_execution: None,
        status_interval: None,
        progress_line: false,
    };
    let out = run_phase(&Alternating, &db, &meas, &cfg);
    let result = PhaseResult {
        runtime_ms: out.runtime.as_millis() as u64,
        ops_done: out.ops_done,
        operations: meas.summaries(),
    };
    let info = RunInfo {
        phase: "run".into(),
        workload: "workloada".into(),
        db: "test://patchy".into(),
        threads: 4,
        target: 0,
        record_count: 4000,
        operation_count: OPS,
    };
    (result, info)
}

fn num_at(map: &BTreeMap<(String, String), String>, op: &str, measure: &str) -> f64 {
    map.get(&(op.to_string(), measure.to_string()))
        .unwrap_or_else(|| panic!("[{op}], {measure} missing"))
        .parse()
        .unwrap_or_else(|e| panic!("[{op}], {measure}: {e}"))
}

#[test]
fn text_output_parses_back_and_adds_up() {
    let (result, _) = run();
    assert_eq!(result.ops_done, OPS);
    let text = output::text(&result);
    let map = output::parse_text(&text).expect("own output parses");
    assert!(text.starts_with("[OVERALL], RunTime(ms), "), "{text}");
    assert_eq!(
        num_at(&map, "OVERALL", "RunTime(ms)") as u64,
        result.runtime_ms
    );
    num_at(&map, "OVERALL", "Throughput(ops/sec)");

    // Every transaction is timed once: under its op, or under <OP>-FAILED.
    let timed: f64 = ["READ", "UPDATE", "READ-FAILED", "UPDATE-FAILED"]
        .iter()
        .map(|op| num_at(&map, op, "Operations"))
        .sum();
    assert_eq!(timed as u64, OPS);
    assert!(num_at(&map, "READ-FAILED", "Operations") > 0.0);
    assert!(num_at(&map, "UPDATE-FAILED", "Operations") > 0.0);

    // Return counts sum to the op's measured plus failed operations.
    for op in ["READ", "UPDATE"] {
        let returns: f64 = map
            .iter()
            .filter(|((o, m), _)| o == op && m.starts_with("Return="))
            .map(|(_, v)| v.parse::<f64>().expect("count"))
            .sum();
        let ops =
            num_at(&map, op, "Operations") + num_at(&map, &format!("{op}-FAILED"), "Operations");
        assert_eq!(returns, ops, "{op}");
        assert_eq!(
            num_at(&map, op, "Return=OK"),
            num_at(&map, op, "Operations")
        );
    }
    assert!(num_at(&map, "READ", "Return=NOT_FOUND") > 0.0);
    assert!(num_at(&map, "UPDATE", "Return=ERROR") > 0.0);

    // The latency lines are ordered.
    for op in ["READ", "UPDATE"] {
        let min = num_at(&map, op, "MinLatency(us)");
        let p50 = num_at(&map, op, "50thPercentileLatency(us)");
        let p95 = num_at(&map, op, "95thPercentileLatency(us)");
        let p99 = num_at(&map, op, "99thPercentileLatency(us)");
        let p999 = num_at(&map, op, "99.9PercentileLatency(us)");
        let max = num_at(&map, op, "MaxLatency(us)");
        assert!(
            min <= p50 && p50 <= p95 && p95 <= p99 && p99 <= p999,
            "{op}"
        );
        assert!(p999 <= max * 1.001 + 1.0, "{op}");
    }
}

#[test]
fn json_output_round_trips_with_the_same_numbers() {
    let (result, info) = run();
    let doc = output::json(&info, &result);
    let text = serde_json::to_string_pretty(&doc).expect("serializes");
    let back: YcsbJson = serde_json::from_str(&text).expect("parses");
    assert_eq!(back, doc);

    // The schema other tools read, by field name.
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["tool"], "cellar-bench");
    assert_eq!(v["kind"], "ycsb");
    assert_eq!(v["phase"], "run");
    assert_eq!(v["workload"], "workloada");
    assert_eq!(v["threads"], 4);
    assert_eq!(v["operation_count"], OPS);
    let read = &v["operations"]["READ"];
    for field in [
        "count", "avg_us", "min_us", "max_us", "p50_us", "p95_us", "p99_us", "p999_us",
    ] {
        assert!(read[field].is_number(), "READ.{field}: {read}");
    }
    let returns: u64 = read["return"]
        .as_object()
        .expect("return map")
        .values()
        .map(|n| n.as_u64().expect("count"))
        .sum();
    let failed = v["operations"]["READ-FAILED"]["count"]
        .as_u64()
        .expect("failed");
    assert_eq!(returns, read["count"].as_u64().expect("count") + failed);
    let total: u64 = back
        .operations
        .iter()
        .filter(|(op, _)| !op.ends_with("-FAILED"))
        .flat_map(|(_, o)| o.returns.values())
        .sum();
    assert_eq!(total, OPS);
}
