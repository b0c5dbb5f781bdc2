//! A short chaos run with real processes: `cellar bench linkedlist generate` and
//! `cellar bench linearizability run` work against a `cellar standalone` that is killed with
//! SIGKILL three times and restarted on the same data directory and ports. Afterwards no
//! linked-list node may be missing (UNDEFINED=0, counts agreeing with what generate was
//! acknowledged) and the register history must be linearizable. `scripts/chaos.sh` is the
//! long version.

mod support;

use cellar_testing::{Log, Process};
use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};
use support::{free_ports, Server};

/// How long the workloads run; the kills happen inside it.
const WORKLOAD_SECONDS: u64 = 20;
/// When the kills happen, in seconds from the start of the workloads.
const KILLS_AT: [u64; 3] = [4, 9, 14];

/// `cellar bench ARGS...`, its output in `dir/NAME.out` and `dir/NAME.err`; stopped by PID
/// if the test ends before it does.
fn workload(name: &str, args: &[&str], dir: &Path) -> Process {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cellar"));
    cmd.args(args).env("RUST_LOG", "warn");
    let log = Log::Split {
        stdout: dir.join(format!("{name}.out")),
        stderr: dir.join(format!("{name}.err")),
    };
    Process::spawn(cmd, log).unwrap_or_else(|e| panic!("spawn cellar bench: {e}"))
}

/// Waits for workload `name` to end, at most `timeout`.
fn wait(workload: &mut Process, name: &str, timeout: Duration) -> ExitStatus {
    workload
        .wait_exit(timeout)
        .unwrap_or_else(|e| panic!("{name} did not finish: {e}"))
}

fn read(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

/// The number after `name=` in `text` (first occurrence at a word start).
fn number(text: &str, name: &str) -> Option<u64> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
}

#[test]
fn no_acknowledged_write_is_lost_and_registers_stay_linearizable_across_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let [native, http, hbase] = free_ports::<3>().map(|p| format!("127.0.0.1:{p}"));
    let addrs = [native.as_str(), http.as_str(), hbase.as_str()];
    let db = format!("cellar://{native}");
    let mut server = Server::start_at(&data, None, addrs);

    let duration = WORKLOAD_SECONDS.to_string();
    let summary = dir.path().join("generate.json");
    let history = dir.path().join("history.jsonl");
    let summary_arg = summary.to_str().expect("utf-8 path");
    let history_arg = history.to_str().expect("utf-8 path");
    let mut generate = workload(
        "generate",
        &[
            "bench",
            "linkedlist",
            "generate",
            "--db",
            &db,
            "--create",
            "--regions",
            "4",
            "--writers",
            "2",
            "--width",
            "50",
            "--wrap",
            "8",
            "--duration",
            &duration,
            "--grace",
            "60",
            "--summary",
            summary_arg,
        ],
        dir.path(),
    );
    let mut registers = workload(
        "linearizability",
        &[
            "bench",
            "linearizability",
            "run",
            "--db",
            &db,
            "--clients",
            "4",
            "--keys",
            "4",
            "--rate",
            "400",
            "--rpc-timeout-ms",
            "1000",
            "--duration",
            &duration,
            "--history",
            history_arg,
            "--check-seconds",
            "30",
        ],
        dir.path(),
    );

    let started = Instant::now();
    for (round, at) in KILLS_AT.iter().enumerate() {
        let when = started + Duration::from_secs(*at);
        std::thread::sleep(when.saturating_duration_since(Instant::now()));
        let pid = server.pid();
        server.kill9();
        eprintln!(
            "kill {} of pid {pid} at {:.1} s",
            round + 1,
            started.elapsed().as_secs_f64()
        );
        drop(server);
        server = Server::start_at(&data, None, addrs);
    }

    let generated = wait(&mut generate, "generate", Duration::from_secs(120));
    let checked = wait(&mut registers, "linearizability", Duration::from_secs(120));
    let generate_out = read(&dir.path().join("generate.out"));
    let registers_out = read(&dir.path().join("linearizability.out"));
    let context = format!(
        "generate ({generated}):\n{generate_out}{}\nlinearizability ({checked}):\n{registers_out}{}",
        read(&dir.path().join("generate.err")),
        read(&dir.path().join("linearizability.err"))
    );
    assert!(generated.success(), "{context}");
    assert!(checked.success(), "{context}");

    let verify = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args([
            "bench",
            "linkedlist",
            "verify",
            "--db",
            &db,
            "--expect",
            summary_arg,
        ])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run verify");
    let verify_out = String::from_utf8_lossy(&verify.stdout).into_owned();
    let context = format!(
        "{context}\nverify ({}):\n{verify_out}{}",
        verify.status,
        String::from_utf8_lossy(&verify.stderr)
    );
    eprintln!("{context}");

    // The lists: written under the kills, none lost.
    let acknowledged = number(&generate_out, "acknowledged").expect("acknowledged count");
    assert!(acknowledged > 0, "{context}");
    assert_eq!(number(&verify_out, "UNDEFINED"), Some(0), "{context}");
    assert!(verify.status.success(), "{context}");

    // The registers: the kills interrupted calls, and the history is linearizable.
    let interrupted = number(&registers_out, "fail").unwrap_or(0)
        + number(&registers_out, "unknown").unwrap_or(0);
    assert!(interrupted > 0, "no call saw a kill: {context}");
    assert!(
        number(&registers_out, "keys").is_some_and(|k| k > 0),
        "{context}"
    );
    assert_eq!(number(&registers_out, "violations"), Some(0), "{context}");
    assert_eq!(number(&registers_out, "undecided"), Some(0), "{context}");
    assert!(std::fs::metadata(&history).is_ok_and(|m| m.len() > 0));
}
