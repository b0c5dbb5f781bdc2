//! A child process: one engine, driven by the parent one workload at a time.
//!
//! Protocol (one line each way per workload): the parent writes `run <workload>\n` to the
//! child's stdin; the child answers on stdout with one JSON line, `{"ok": <WorkloadResult>}`
//! or `{"error": "<message>"}` (after which it exits). `quit` or end of input closes the
//! engine and exits. Progress and notes go to stderr, which the parent passes through.
//!
//! The child keeps its store between workloads, so the read workloads read what the
//! preceding fill (and overwrite) left; a read workload with no fill before it in this child
//! loads the store first with an unmeasured fillrandom.

use crate::engine_bench::args::{Args, EngineChoice, EngineKind, Workload};
use crate::engine_bench::engines::{self, Engine, EngineConfig};
use crate::engine_bench::error::{BenchError, Context, Result};
use crate::engine_bench::report::WorkloadResult;
use crate::engine_bench::workload::{self, Bench};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Commands a child accepts before it refuses more (a run has at most a few dozen).
const MAX_COMMANDS: usize = 10_000;

/// A child's answer to one command.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reply {
    Ok(Box<WorkloadResult>),
    Error(String),
}

/// The engine and whether it holds the loaded data set.
struct State {
    kind: EngineKind,
    dir: PathBuf,
    config: EngineConfig,
    engine: Option<Box<dyn Engine>>,
    loaded: bool,
}

impl State {
    /// Closes the engine (if open) and deletes its files.
    fn wipe(&mut self) -> Result<()> {
        if let Some(e) = self.engine.take() {
            e.close()?;
        }
        self.loaded = false;
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(BenchError::new(format!(
                "removing {}: {e}",
                self.dir.display()
            ))),
        }
    }

    fn engine(&mut self) -> Result<&dyn Engine> {
        if self.engine.is_none() {
            self.engine = Some(engines::open(self.kind, &self.dir, &self.config)?);
        }
        self.engine
            .as_deref()
            .ok_or_else(|| BenchError::new("engine failed to open"))
    }

    fn run(&mut self, bench: &Bench, w: Workload) -> Result<WorkloadResult> {
        if w.starts_empty() {
            self.wipe()?;
        } else if !self.loaded {
            eprintln!(
                "[{}] {w} needs data: loading {} entries with an unmeasured fillrandom",
                self.kind, bench.args.num
            );
            let engine = self.engine()?;
            workload::fill_random(engine, bench, "load (fillrandom, unmeasured)")?;
            engine.flush()?;
            engine.wait_for_background()?;
            self.loaded = true;
        }
        let dir = self.dir.clone();
        let engine = self.engine()?;
        let result = workload::measure(engine, bench, w, &dir)?;
        // Both fills write every key, so the read workloads can follow either.
        self.loaded = true;
        Ok(result)
    }
}

/// Runs the child side of the protocol until `quit` or end of input.
pub fn run(args: Args) -> Result<()> {
    let kind = match args.engine {
        EngineChoice::Cellar => EngineKind::Cellar,
        EngineChoice::Rocksdb => EngineKind::Rocksdb,
        EngineChoice::Both => return Err(BenchError::new("a child runs one engine, not both")),
    };
    let dir = args
        .db_dir
        .clone()
        .ok_or_else(|| BenchError::new("a child needs --db-dir"))?;
    let mut state = State {
        kind,
        dir,
        config: EngineConfig::from_args(&args),
        engine: None,
        loaded: false,
    };
    let existing = args.use_existing_db;
    let bench = Bench::new(args, kind.name())?;
    if existing {
        // Loaded by the earlier run that kept it.
        state.loaded = true;
    } else {
        // Whatever a previous run left in the directory is not this run's data.
        state.wipe()?;
    }
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines().take(MAX_COMMANDS) {
        let line = line.context("reading a command from the parent")?;
        let command = line.trim();
        if command == "quit" {
            break;
        }
        let outcome = match command.strip_prefix("run ") {
            Some(name) => Workload::parse(name).and_then(|w| state.run(&bench, w)),
            None => Err(BenchError::new(format!("unknown command '{command}'"))),
        };
        let (reply, failed) = match outcome {
            Ok(r) => (Reply::Ok(Box::new(r)), None),
            Err(e) => (Reply::Error(e.0.clone()), Some(e)),
        };
        let text = serde_json::to_string(&reply)?;
        writeln!(stdout, "{text}").context("answering the parent")?;
        stdout.flush().context("answering the parent")?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    if let Some(e) = state.engine.take() {
        e.close()?;
    }
    Ok(())
}
