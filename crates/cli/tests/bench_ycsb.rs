//! `cellar bench load|run` end to end: YCSB's workload A against a real `cellar standalone`
//! over 127.0.0.1, and against the embedded engine in a temporary directory. Checks exit
//! status, the YCSB text output and the JSON file; never speed.

mod support;

use cellar_bench::ycsb::output::{parse_text, YcsbJson};
use cellar_testing::{Log, Process};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::Server;

/// Generous: a loaded 2-core machine, a debug build.
const PHASE_TIMEOUT: Duration = Duration::from_secs(300);

fn workload_a() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/workloada")
}

/// Runs `cellar bench ARGS...` to completion (killed after [`PHASE_TIMEOUT`]); its stdout.
fn bench(dir: &Path, args: &[&str]) -> String {
    let name = args.join(" ").replace(['/', ' ', ':'], "_");
    let out_path = dir.join(format!("{}.stdout", &name[..name.len().min(60)]));
    let err_path = out_path.with_extension("stderr");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cellar"));
    cmd.arg("bench").args(args);
    let log = Log::Split {
        stdout: out_path.clone(),
        stderr: err_path.clone(),
    };
    let mut child = Process::spawn(cmd, log).expect("spawn cellar bench");
    // Past the bound, the panic drops the child, which stops it.
    let status = child
        .wait_exit(PHASE_TIMEOUT)
        .unwrap_or_else(|e| panic!("cellar bench {args:?} did not finish: {e}"));
    let stdout = std::fs::read_to_string(&out_path).expect("read stdout");
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(
        status.success(),
        "cellar bench {args:?} failed ({status}):\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

fn count(map: &BTreeMap<(String, String), String>, op: &str, measure: &str) -> u64 {
    map.get(&(op.to_string(), measure.to_string()))
        .map_or(0, |v| {
            v.parse()
                .unwrap_or_else(|e| panic!("[{op}], {measure} = {v}: {e}"))
        })
}

fn read_json(path: &Path) -> YcsbJson {
    let text = std::fs::read_to_string(path).expect("json file written");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// Load 500 records, then 1000 workload-A transactions on 4 threads, against `db`.
fn load_and_run(db: &str) {
    let tmp = tempfile::tempdir().expect("tmp");
    let wl = workload_a();
    let wl = wl.to_str().expect("utf-8 path");
    let load_json = tmp.path().join("load.json");
    let run_json = tmp.path().join("run.json");

    let text = bench(
        tmp.path(),
        &[
            "load",
            "-P",
            wl,
            "-p",
            "recordcount=500",
            "--db",
            db,
            "--json",
            load_json.to_str().expect("utf-8"),
        ],
    );
    let map = parse_text(&text).expect("load output parses");
    assert!(
        map.contains_key(&("OVERALL".into(), "RunTime(ms)".into())),
        "{text}"
    );
    assert!(
        map.contains_key(&("OVERALL".into(), "Throughput(ops/sec)".into())),
        "{text}"
    );
    assert_eq!(count(&map, "INSERT", "Operations"), 500, "{text}");
    assert_eq!(count(&map, "INSERT", "Return=OK"), 500, "{text}");
    let load = read_json(&load_json);
    assert_eq!(
        (load.tool.as_str(), load.kind.as_str()),
        ("cellar-bench", "ycsb")
    );
    assert_eq!(load.phase, "load");
    assert_eq!(load.workload, "workloada");
    assert_eq!(load.db, db);
    assert_eq!(load.record_count, 500);
    assert_eq!(load.operations["INSERT"].count, 500);

    let text = bench(
        tmp.path(),
        &[
            "run",
            "-P",
            wl,
            "-p",
            "recordcount=500",
            "-p",
            "operationcount=1000",
            "-threads",
            "4",
            "--db",
            db,
            "--json",
            run_json.to_str().expect("utf-8"),
        ],
    );
    let map = parse_text(&text).expect("run output parses");
    assert!(
        map.contains_key(&("OVERALL".into(), "RunTime(ms)".into())),
        "{text}"
    );
    // Every record was loaded, so every read and update succeeds.
    let reads = count(&map, "READ", "Operations");
    let updates = count(&map, "UPDATE", "Operations");
    assert!(reads > 0 && updates > 0, "{text}");
    assert_eq!(reads + updates, 1000, "{text}");
    assert_eq!(count(&map, "READ", "Return=OK"), reads, "{text}");
    assert_eq!(count(&map, "UPDATE", "Return=OK"), updates, "{text}");
    assert!(!text.contains("-FAILED"), "{text}");
    let run = read_json(&run_json);
    assert_eq!(run.phase, "run");
    assert_eq!(run.threads, 4);
    assert_eq!(run.operation_count, 1000);
    assert_eq!(run.operations["READ"].count, reads);
    assert_eq!(run.operations["UPDATE"].count, updates);
    assert_eq!(run.operations["READ"].returns["OK"], reads);
}

#[test]
fn ycsb_workload_a_against_a_server() {
    let server = Server::start();
    load_and_run(&format!("cellar://{}", server.native));
}

#[test]
fn ycsb_workload_a_against_the_embedded_engine() {
    let data = tempfile::tempdir().expect("tmp");
    load_and_run(&format!("embedded:{}", data.path().display()));
}

#[test]
fn bad_arguments_fail_naming_the_argument() {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["bench", "run", "-threads", "many"])
        .stdin(Stdio::null())
        .output()
        .expect("run cellar bench");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-threads many"), "{err}");

    let help = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["bench", "load", "--help"])
        .stdin(Stdio::null())
        .output()
        .expect("run cellar bench --help");
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("-P FILE"));
}

#[test]
fn load_without_a_workload_says_one_is_needed() {
    // As YCSB's client ("Missing property: workload"): defaults nobody chose are not run.
    let data = tempfile::tempdir().expect("tmp");
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["bench", "load", "-p", "recordcount=10", "--db"])
        .arg(format!("embedded:{}", data.path().display()))
        .stdin(Stdio::null())
        .output()
        .expect("run cellar bench");
    assert!(!out.status.success(), "loaded without a workload");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs a workload: -P workloads/workloada"),
        "{err}"
    );
}

#[test]
fn run_before_load_says_what_to_do() {
    let data = tempfile::tempdir().expect("tmp");
    let wl = workload_a();
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .arg("bench")
        .arg("run")
        .arg("-P")
        .arg(&wl)
        .arg("--db")
        .arg(format!("embedded:{}", data.path().display()))
        .stdin(Stdio::null())
        .output()
        .expect("run cellar bench");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cellar bench load"), "{err}");
}

#[test]
fn load_presplits_a_new_table_and_spreads_records_over_the_regions() {
    let server = Server::start();
    let tmp = tempfile::tempdir().expect("tmp");
    let wl = workload_a();
    let db = format!("cellar://{}", server.native);
    let text = bench(
        tmp.path(),
        &[
            "load",
            "-P",
            wl.to_str().expect("utf-8"),
            "-p",
            "recordcount=200",
            "-p",
            "presplit=4",
            "-p",
            "table=presplit_t",
            "-threads",
            "2",
            "--db",
            &db,
        ],
    );
    let map = parse_text(&text).expect("load output parses");
    assert_eq!(count(&map, "INSERT", "Return=OK"), 200, "{text}");
    let client = cellar_client::blocking::Client::connect(&server.native).expect("connect");
    let regions = client.admin().list_regions("presplit_t").expect("regions");
    assert_eq!(regions.len(), 4, "{regions:?}");
    // YCSB's hashed keys spread over the guide's split points: every region gets rows.
    let table = client.table("presplit_t");
    let mut total = 0;
    for r in &regions {
        let rows = table
            .scan(cellar_model::Scan::new().range(&r.start_key, &r.end_key))
            .collect::<Result<Vec<_>, _>>()
            .expect("scan rows")
            .len();
        assert!(
            rows > 0,
            "region {:?}..{:?} is empty",
            r.start_key,
            r.end_key
        );
        total += rows;
    }
    assert_eq!(total, 200);
}
