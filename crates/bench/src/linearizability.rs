//! `cellar bench linearizability`: a workload of concurrent puts, gets, check-and-mutates and
//! increments on a few rows, recorded as a history, and a checker that decides whether the
//! history is linearizable — whether every answer the clients got is one some order of the
//! operations, each taking effect between its call and its answer, would have given. Meant
//! to run while the server is killed and restarted (`scripts/chaos.sh`); it starts nothing
//! itself.
//!
//! - [`history`]: operations, outcomes, the JSON-lines file.
//! - [`model`]: the register's sequential specification.
//! - [`checker`]: the search (Wing–Gong with Lowe's memoisation, per key).
//! - [`minimize`]: a small witness from a violating history.
//! - [`workload`]: the clients.

pub mod checker;
pub mod history;
pub mod minimize;
pub mod model;
pub mod workload;

use checker::{Budget, KeyReport, Verdict};
use history::{Call, Op, Outcome, Ret};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Command-line options of `cellar bench linearizability`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run the workload against a server for --duration, record the history, check it.
    /// Exits non-zero when a key's history is not linearizable or could not be decided.
    Run(RunArgs),
    /// Check a history file written by `run --history`.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The server: cellar://HOST:PORT.
    #[arg(long, default_value = "cellar://127.0.0.1:16200")]
    pub db: String,
    /// The table holding the registers (created when missing; one family, `f`).
    #[arg(long, default_value = "chaos_registers")]
    pub table: String,
    /// Concurrent clients, each with its own connection.
    #[arg(long, default_value_t = 8)]
    pub clients: u32,
    /// Registers (rows) in use at a time.
    #[arg(long, default_value_t = 5)]
    pub keys: u32,
    /// Which calls go to which registers: `separate` keeps increments on registers of their
    /// own (every other slot), `mixed` sends all four kinds to every register.
    #[arg(long, value_enum, default_value = "mixed")]
    pub mix: workload::Mix,
    /// Operations on one row before its slot moves to a fresh row (keeps each row's history
    /// small enough to check exactly).
    #[arg(long, default_value_t = 1000)]
    pub ops_per_key: u64,
    /// Writes of unknown outcome on one row before its slot moves to a fresh row (each one
    /// widens the checker's search).
    #[arg(long, default_value_t = 8)]
    pub unknown_per_key: u64,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Operations per second over all clients (0: as fast as they go).
    #[arg(long, default_value_t = 1000)]
    pub rate: u64,
    /// Each call's timeout in milliseconds: a killed server gives "unknown" outcomes this fast.
    #[arg(long, default_value_t = 1000)]
    pub rpc_timeout_ms: u64,
    /// Write the history here (JSON lines, streamed as the run goes).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Seed for the clients' choices (default: random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// A status line this often, in seconds.
    #[arg(long, default_value_t = 10)]
    pub status_interval: u64,
    #[command(flatten)]
    pub check: CheckOptions,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The history (JSON lines).
    pub history: PathBuf,
    #[command(flatten)]
    pub check: CheckOptions,
}

#[derive(Debug, Clone, clap::Args)]
pub struct CheckOptions {
    /// Time allowed to the whole check, in seconds; keys left are reported undecided.
    #[arg(long, default_value_t = 300)]
    pub check_seconds: u64,
    /// Search steps allowed per key before it is reported undecided.
    #[arg(long, default_value_t = 50_000_000)]
    pub check_steps: u64,
    /// Write a shrunk witness of each violation here (JSON lines) [default: HISTORY.witness.jsonl
    /// when there is a history file].
    #[arg(long)]
    pub witness: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), String> {
    match args.command {
        Command::Run(a) => run_workload(a),
        Command::Check(a) => {
            let ops = history::read_file(&a.history)?;
            eprintln!(
                "linearizability: checking {} operations from {}",
                ops.len(),
                a.history.display()
            );
            let witness = a
                .check
                .witness
                .clone()
                .unwrap_or_else(|| witness_path(&a.history));
            check_and_report(&ops, &a.check, Some(&witness))
        }
    }
}

fn witness_path(history: &Path) -> PathBuf {
    let mut s = history.as_os_str().to_owned();
    s.push(".witness.jsonl");
    PathBuf::from(s)
}

fn run_workload(a: RunArgs) -> Result<(), String> {
    let addr = match a.db.strip_prefix("cellar://") {
        Some(x) if !x.trim_end_matches('/').is_empty() => x.trim_end_matches('/').to_string(),
        _ => {
            return Err(format!(
                "--db {}: the workload needs a server, cellar://HOST:PORT",
                a.db
            ))
        }
    };
    if a.rpc_timeout_ms == 0 || a.duration == 0 {
        return Err("--rpc-timeout-ms and --duration must be at least 1".into());
    }
    let settings = workload::Settings {
        mix: a.mix,
        addr,
        table: a.table.clone(),
        clients: a.clients,
        keys: a.keys,
        ops_per_key: a.ops_per_key,
        unknown_per_key: a.unknown_per_key,
        duration: Duration::from_secs(a.duration),
        rate: a.rate,
        rpc_timeout: Duration::from_millis(a.rpc_timeout_ms),
        history: a.history.clone(),
        seed: a.seed.unwrap_or_else(rand::random),
        status_interval: Duration::from_secs(a.status_interval.max(1)),
    };
    eprintln!(
        "linearizability: {} clients on {} registers ({:?} calls) of table '{}' at {} for {} s ({} ops/s, call timeout {} ms)",
        a.clients,
        a.keys,
        a.mix,
        a.table,
        a.db,
        a.duration,
        if a.rate == 0 { "unthrottled".to_string() } else { a.rate.to_string() },
        a.rpc_timeout_ms
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let started = Instant::now();
    let (ops, tally) = runtime.block_on(workload::run(settings))?;
    drop(runtime);
    print!(
        "{}",
        tally_text(&tally, a.clients, started.elapsed().as_secs_f64())
    );
    let witness = a
        .check
        .witness
        .clone()
        .or_else(|| a.history.as_deref().map(witness_path));
    let checked = check_and_report(&ops, &a.check, witness.as_deref());
    if tally.malformed > 0 {
        return Err(format!(
            "{} reads returned a value no client wrote (not 8 bytes)",
            tally.malformed
        ));
    }
    checked
}

fn tally_text(t: &workload::Tally, clients: u32, seconds: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "operations={} clients={clients} registers={} seconds={seconds:.1}",
        t.total(),
        t.registers
    );
    let _ = writeln!(s, "ok={} fail={} unknown={}", t.ok, t.fail, t.unknown);
    for (name, [ok, fail, unknown]) in workload::KINDS.iter().zip(t.by_kind) {
        let _ = write!(s, "  {name:<5} ok={ok} fail={fail} unknown={unknown}");
        if *name == "cas" {
            let _ = write!(s, " applied={}", t.cas_applied);
        }
        s.push('\n');
    }
    s
}

/// Checks `ops`, prints one line per key that is not linearizable (and per key when there
/// are few) and a summary; writes shrunk witnesses of violations to `witness`.
fn check_and_report(ops: &[Op], opts: &CheckOptions, witness: Option<&Path>) -> Result<(), String> {
    let started = Instant::now();
    let budget = Budget {
        steps_per_key: opts.check_steps,
        deadline: Some(started + Duration::from_secs(opts.check_seconds)),
        ..Budget::default()
    };
    let reports = checker::check(ops, &budget);
    let seconds = started.elapsed().as_secs_f64();
    let few = reports.len() <= 20;
    let (mut good, mut bad, mut undecided) = (0usize, 0usize, 0usize);
    let mut witnesses: Vec<Op> = Vec::new();
    for r in &reports {
        match &r.verdict {
            Verdict::Linearizable => {
                good += 1;
                if few {
                    println!(
                        "key {}: linearizable ({} operations checked)",
                        r.key, r.relevant
                    );
                }
            }
            Verdict::Undecided(why) => {
                undecided += 1;
                println!(
                    "key {}: UNDECIDED ({} operations checked): {why}",
                    r.key, r.relevant
                );
            }
            Verdict::Violation(_) => {
                bad += 1;
                print!("{}", describe_violation(r));
                let left = budget
                    .deadline
                    .map_or(Duration::from_secs(30), |d| {
                        d.saturating_duration_since(Instant::now())
                    })
                    .max(Duration::from_secs(5))
                    .min(Duration::from_secs(60));
                let small = minimize::minimize(&r.ops, left);
                println!(
                    "key {}: a witness of {} operations (from {}):",
                    r.key,
                    small.len(),
                    r.ops.len()
                );
                for op in &small {
                    println!("    {}", op_line(op));
                }
                witnesses.extend(small);
            }
        }
    }
    println!(
        "check: keys={} linearizable={good} violations={bad} undecided={undecided} operations={} seconds={seconds:.1}",
        reports.len(),
        ops.len()
    );
    if let (Some(path), false) = (witness, witnesses.is_empty()) {
        history::write_file(path, &witnesses)?;
        println!("check: witnesses written to {}", path.display());
    }
    if bad > 0 {
        return Err(format!(
            "{bad} of {} keys have a history that is not linearizable",
            reports.len()
        ));
    }
    if undecided > 0 {
        return Err(format!(
            "{undecided} of {} keys could not be decided within the check's budget",
            reports.len()
        ));
    }
    Ok(())
}

/// Where the search got stuck, in words.
fn describe_violation(r: &KeyReport) -> String {
    let Verdict::Violation(v) = &r.verdict else {
        return String::new();
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "key {}: NOT LINEARIZABLE ({} operations checked): at best {} operations could be placed, leaving the register at {}; then this one could not be:",
        r.key,
        r.relevant,
        v.longest_len,
        show_state(v.state)
    );
    if let Some(op) = r.ops.get(v.stuck) {
        let _ = writeln!(s, "    {}", op_line(op));
    }
    let tail = v.longest.len().saturating_sub(5);
    if let Some(last) = v.longest.get(tail..) {
        let _ = writeln!(s, "  the last operations placed before it:");
        for &i in last {
            if let Some(op) = r.ops.get(i) {
                let _ = writeln!(s, "    {}", op_line(op));
            }
        }
    }
    s
}

fn show_state(s: Option<i64>) -> String {
    s.map_or_else(|| "nothing".into(), |v| v.to_string())
}

/// One operation, for people: `client 3 [1.234567 s, 1.240001 s] cas(5 -> 9) = applied`.
pub fn op_line(op: &Op) -> String {
    let secs = |ns: u64| ns as f64 / 1e9;
    let call = match op.call {
        Call::Put { value } => format!("put({value})"),
        Call::Get => "get()".to_string(),
        Call::Cas { expected, new } => format!("cas({} -> {new})", show_state(expected)),
        Call::Incr { delta } => format!("incr({delta})"),
    };
    let ret = match (op.outcome, op.ret) {
        (Outcome::Ok, Some(Ret::Written)) => "ok".to_string(),
        (Outcome::Ok, Some(Ret::Read(v))) => show_state(v),
        (Outcome::Ok, Some(Ret::Applied(a))) => if a { "applied" } else { "not applied" }.into(),
        (Outcome::Ok, Some(Ret::Counter(n))) => n.to_string(),
        (Outcome::Ok, None) => "ok".to_string(),
        (Outcome::Fail, _) => "FAIL".to_string(),
        (Outcome::Unknown, _) => "UNKNOWN".to_string(),
    };
    let end = match op.outcome {
        Outcome::Unknown => "never".to_string(),
        _ => format!("{:.6} s", secs(op.end_ns)),
    };
    format!(
        "client {} [{:.6} s, {end}] {call} = {ret}",
        op.client,
        secs(op.invoke_ns)
    )
}
