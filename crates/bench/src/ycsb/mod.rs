//! YCSB, re-implemented faithfully: its property files and names, its generators and
//! constants, its core workload, its load/run phases and its output format.
//! `cellar bench load|run` (see [`main`]).
//!
//! - [`properties`]: `-P` files and `-p` overrides.
//! - [`generator`]: YCSB's number generators (counter, uniform, zipfian, scrambled zipfian,
//!   skewed latest, hotspot, discrete, ...).
//! - [`workload`]: YCSB's `CoreWorkload`: key names, field values, operation choice.
//! - [`db`]: the interface a target implements, and the measurement sink.
//! - [`cli`], [`runner`], [`measure`], [`output`], [`targets`]: the command line, the client
//!   threads, the histograms, the text/JSON results, and the targets (a Cellar server over
//!   the native client, the embedded engine).

pub mod cli;
pub mod db;
pub mod generator;
pub mod measure;
pub mod output;
pub mod properties;
pub mod runner;
pub mod targets;
pub mod workload;

use db::{Db, Measurements};
use measure::{Measure, MeasuredDb};
use output::{PhaseResult, RunInfo};
use properties::Properties;
use runner::{Phase, RunnerConfig};
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;
use targets::TargetOptions;
use workload::{CoreWorkload, ThreadState};

impl runner::Workload for CoreWorkload {
    type State = ThreadState;

    fn thread_state(&self, thread_id: usize, thread_count: usize) -> ThreadState {
        CoreWorkload::thread_state(self, thread_id, thread_count)
    }

    fn do_insert(&self, db: &dyn Db, state: &mut ThreadState) -> bool {
        CoreWorkload::do_insert(self, db, state)
    }

    fn do_transaction(
        &self,
        db: &dyn Db,
        state: &mut ThreadState,
        meas: &dyn Measurements,
    ) -> bool {
        CoreWorkload::do_transaction(self, db, state, meas)
    }
}

/// Runs `cellar bench load` (`phase` = "load") or `cellar bench run` with YCSB-style arguments
/// (`-P FILE`, `-p NAME=VALUE`, `-threads N`, `-target OPS`, `-s`, `--db URL`, `--json FILE`):
/// the results go to stdout in YCSB's text format, progress and status to stderr.
pub fn main(phase: &str, args: Vec<String>) -> Result<(), String> {
    let kind = match phase {
        "load" => Phase::Load,
        "run" => Phase::Run,
        other => {
            return Err(format!(
                "unknown YCSB phase '{other}' (expected load or run)"
            ))
        }
    };
    let cli = cli::parse(&args)?;
    if cli.help {
        print!("{}", cli::help_text(phase));
        return Ok(());
    }
    let mut props = Properties::new();
    for file in &cli.property_files {
        props.load_file(file)?;
    }
    for (name, value) in &cli.overrides {
        props.set(name, value);
    }
    if props.get("workload").is_none() {
        // As YCSB's client: without a workload it would run defaults nobody chose.
        return Err(format!(
            "`cellar bench {phase}` needs a workload: -P workloads/workloada (YCSB's A to F are in \
             workloads/), or -p workload=site.ycsb.workloads.CoreWorkload for the core \
             workload's defaults"
        ));
    }
    if let Some(dir) = cli.json.as_deref().and_then(Path::parent) {
        // Made before the phase runs, so that a long run does not end in "cannot write".
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("--json: cannot create {}: {e}", dir.display()))?;
        }
    }
    let threads = props.get_u64("threadcount", 1)?;
    if threads == 0 {
        return Err("threadcount must be at least 1".into());
    }
    let target = props.get_u64("target", 0)?;
    let max_execution = props.get_u64("maxexecutiontime", 0)?;
    let status_interval = props.get_u64("status.interval", 10)?.max(1);
    let presplit = props.get_u64("presplit", 0)?;
    let family = props.get_str("columnfamily", "family");
    let workload = CoreWorkload::new(&props)?;
    let op_count = match kind {
        Phase::Load => workload.insert_count(),
        Phase::Run => workload.operation_count(),
    };

    let db = targets::open(
        &cli.db,
        &TargetOptions {
            table: workload.table().to_string(),
            family,
            create: kind == Phase::Load,
            presplit,
            durability: targets::parse_durability(&props.get_str("durability", "USE_DEFAULT"))?,
            query_cache: props.get_bool("querycache", false)?,
            prepared_scan: props.get_bool("preparedscan", false)?,
            scan_compress: props.get_bool("scancompress", false)?,
            scan_caching: u32::try_from(props.get_u64("scancaching", 0)?)
                .map_err(|_| "property scancaching is too large".to_string())?,
            tls: tls_config(&props)?,
            user: Some(props.get_str("user", "")).filter(|u| !u.is_empty()),
        },
    )?;
    eprintln!(
        "cellar bench {phase}: {op_count} operations, {threads} threads, target {}, table '{}' on {}",
        if target == 0 { "unthrottled".to_string() } else { format!("{target} ops/s") },
        workload.table(),
        cli.db
    );
    let cfg = RunnerConfig {
        phase: kind,
        threads: usize::try_from(threads)
            .map_err(|_| format!("threadcount {threads} is too large"))?,
        op_count,
        target_ops: target,
        max_execution: (max_execution > 0).then(|| Duration::from_secs(max_execution)),
        status_interval: cli.status.then(|| Duration::from_secs(status_interval)),
        progress_line: std::io::stderr().is_terminal(),
    };
    let meas = Measure::new();
    let outcome = {
        let measured = MeasuredDb::new(&*db, &meas);
        runner::run_phase(&workload, &measured, &meas, &cfg)
    };
    let closed = db.finish();
    let result = PhaseResult {
        runtime_ms: u64::try_from(outcome.runtime.as_millis()).unwrap_or(u64::MAX),
        ops_done: outcome.ops_done,
        operations: meas.summaries(),
    };
    print!("{}", output::text(&result));
    if let Some(path) = &cli.json {
        let info = RunInfo {
            phase: phase.to_string(),
            workload: cli
                .property_files
                .first()
                .and_then(|p| p.file_stem())
                .map_or_else(|| "core".to_string(), |s| s.to_string_lossy().into_owned()),
            db: cli.db.clone(),
            threads,
            target,
            record_count: workload.record_count(),
            operation_count: workload.operation_count(),
        };
        let doc = serde_json::to_string_pretty(&output::json(&info, &result))
            .map_err(|e| format!("--json {}: {e}", path.display()))?;
        std::fs::write(path, doc + "\n")
            .map_err(|e| format!("--json {}: cannot write: {e}", path.display()))?;
    }
    closed
}

/// The client's TLS from the properties `tls.ca` (turns TLS on), `tls.cert` and `tls.key`.
fn tls_config(props: &Properties) -> Result<Option<cellar_client::TlsClientConfig>, String> {
    let ca = props.get_str("tls.ca", "");
    if ca.is_empty() {
        return Ok(None);
    }
    let cert = props.get_str("tls.cert", "");
    let key = props.get_str("tls.key", "");
    let path = |s: &str| (!s.is_empty()).then(|| std::path::PathBuf::from(s));
    let (cert, key) = (path(&cert), path(&key));
    cellar_client::TlsClientConfig::from_files(
        std::path::Path::new(&ca),
        cert.as_deref(),
        key.as_deref(),
    )
    .map(Some)
    .map_err(|e| format!("properties tls.ca/tls.cert/tls.key: {e}"))
}
