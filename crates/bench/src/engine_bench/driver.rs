//! The parent: starts one child process per engine, alternates the workloads between them,
//! collects their results, prints the table and writes the JSON.
//!
//! Children rather than threads so that each engine's peak RSS and IO counters are its own,
//! and neither engine's caches or allocator state leak into the other's numbers.

use crate::engine_bench::args::{Args, EngineChoice, EngineKind, Workload};
use crate::engine_bench::cgroup::MemoryGroup;
use crate::engine_bench::child::Reply;
use crate::engine_bench::engines::{self, EngineConfig};
use crate::engine_bench::error::{BenchError, Context, Result};
use crate::engine_bench::report::{self, RunReport, WorkloadResult};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Lines of other output a child may print before its answer.
const MAX_STRAY_LINES: usize = 100_000;

/// A running child and its pipes.
struct ChildProc {
    kind: EngineKind,
    process: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Its memory cgroup (`--read-memory`); dropped after the process.
    memory: Option<MemoryGroup>,
}

impl ChildProc {
    fn spawn(exe: &Path, args: &Args, kind: EngineKind, dir: &Path) -> Result<ChildProc> {
        let mut process = Command::new(exe)
            .args(args.child_command_line(kind, dir))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context(format!("starting the {kind} child ({})", exe.display()))?;
        let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
            return Err(BenchError::new("child pipes missing"));
        };
        let mut child = ChildProc {
            kind,
            process,
            stdin,
            stdout: BufReader::new(stdout),
            memory: None,
        };
        if args.read_memory > 0 {
            // Before its first command: everything the engine does is charged to the group.
            let name = format!("cellar-engine-bench-{}-{kind}", std::process::id());
            let group = MemoryGroup::create(&name)?;
            group.add(child.process.id())?;
            child.memory = Some(group);
        }
        Ok(child)
    }

    /// Caps the child's memory (`--read-memory`), if it has a group.
    fn cap_memory(&self, bytes: u64) -> Result<()> {
        let Some(group) = &self.memory else {
            return Ok(());
        };
        let before = group.usage();
        group.limit(bytes)?;
        eprintln!(
            "{}: memory capped at {} (was using {}, now {}) in {}",
            self.kind,
            report::mib(bytes),
            before.map_or("?".into(), report::mib),
            group.usage().map_or("?".into(), report::mib),
            group.path().display()
        );
        Ok(())
    }

    /// Runs one workload in the child and returns its result.
    fn run(&mut self, w: Workload) -> Result<WorkloadResult> {
        let kind = self.kind;
        writeln!(self.stdin, "run {w}")
            .and_then(|()| self.stdin.flush())
            .context(format!("sending {w} to the {kind} child"))?;
        // Anything else an engine library prints to stdout is passed on, not parsed.
        for _ in 0..MAX_STRAY_LINES {
            let mut line = String::new();
            let n = self
                .stdout
                .read_line(&mut line)
                .context(format!("reading the {kind} child's answer"))?;
            if n == 0 {
                let status = self.process.wait().context("waiting for the child")?;
                return Err(BenchError::new(format!(
                    "the {kind} child exited ({status}) during {w}; see its output above"
                )));
            }
            if !line.starts_with('{') {
                eprint!("[{kind} stdout] {line}");
                continue;
            }
            return match serde_json::from_str::<Reply>(&line).context(format!(
                "parsing the {kind} child's answer '{}'",
                line.trim()
            ))? {
                Reply::Ok(r) => Ok(*r),
                Reply::Error(e) => Err(BenchError::new(format!("{kind}, {w}: {e}"))),
            };
        }
        Err(BenchError::new(format!(
            "the {kind} child printed {MAX_STRAY_LINES} lines without answering {w}"
        )))
    }

    /// Asks the child to close its engine and waits for it.
    fn finish(mut self) -> Result<()> {
        let kind = self.kind;
        writeln!(self.stdin, "quit").context(format!("stopping the {kind} child"))?;
        let status = self
            .process
            .wait()
            .context(format!("waiting for the {kind} child"))?;
        if !status.success() {
            return Err(BenchError::new(format!(
                "the {kind} child exited with {status}"
            )));
        }
        Ok(())
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        // After `finish` the process is reaped and this is a no-op; on an error path it stops a
        // child that would otherwise outlive the run.
        if let Ok(None) = self.process.try_wait() {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
        // Removable only once its process is gone.
        self.memory.take();
    }
}

/// The engines to run, given what this binary was built with.
fn engines_to_run(args: &Args) -> Result<Vec<EngineKind>> {
    if engines::ROCKSDB_BUILT {
        return Ok(args.engines());
    }
    match args.engine {
        EngineChoice::Rocksdb => Err(engines::not_built()),
        EngineChoice::Both => {
            eprintln!(
                "note: built without the `rocksdb` feature, running cellar only \
                 (cargo build --release -p cellar-bench --features rocksdb for both)"
            );
            Ok(vec![EngineKind::Cellar])
        }
        EngineChoice::Cellar => Ok(vec![EngineKind::Cellar]),
    }
}

/// Runs the whole benchmark: children, table, JSON.
pub fn run(args: Args) -> Result<()> {
    args.validate()?;
    let engines = engines_to_run(&args)?;
    let (base, temporary) = match &args.db_dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("cellar-engine-bench-{}", std::process::id())),
            true,
        ),
    };
    let memstore = EngineConfig::from_args(&args).effective_memstore_bytes();
    let data = args.num * args.entry_bytes();
    eprintln!(
        "engine_bench: {} entries of {}+{} bytes ({}), cache {}, memstore {}, block {} B, \
         compression {}, bloom {} bits/key, sync {}, {} thread(s), dbs under {}",
        report::thousands(args.num),
        args.key_size,
        args.value_size,
        report::mib(data),
        report::mib(args.cache_bytes),
        report::mib(memstore),
        args.block_size,
        args.compression.name(),
        args.bloom_bits,
        args.sync.name(),
        args.threads,
        base.display()
    );
    if args.read_memory > 0 {
        eprintln!(
            "memory: each engine's process and page cache capped at {} from the first read workload on (--read-memory)",
            report::mib(args.read_memory)
        );
    }
    if args.benchmarks.contains(&Workload::Readrandom) && data <= args.cache_bytes {
        eprintln!(
            "note: the data ({}) fits in the cache ({}); readrandom will not be cache-missing",
            report::mib(data),
            report::mib(args.cache_bytes)
        );
    }
    let mut order = engines.clone();
    if args.rocksdb_first {
        order.reverse();
    }
    eprintln!(
        "order: {} (each workload runs on each engine in turn)",
        order
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", then ")
    );
    let outcome = run_children(&args, &order, &base);
    if !args.keep_db && !args.use_existing_db {
        let cleanup = if temporary {
            std::fs::remove_dir_all(&base)
        } else {
            // Only what this run created; the directory itself is the user's.
            engines
                .iter()
                .map(|e| std::fs::remove_dir_all(base.join(e.name())))
                .find(|r| r.is_err())
                .unwrap_or(Ok(()))
        };
        if let Err(e) = cleanup {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("note: could not remove {}: {e}", base.display());
            }
        }
    }
    let results = outcome?;
    println!("{}", report::markdown_table(&results, &engines));
    println!("{}", report::details_table(&results));
    if let Some(path) = &args.json {
        let doc = RunReport {
            config: args.clone(),
            memstore_bytes: memstore,
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            results,
        };
        let text = serde_json::to_string_pretty(&doc)?;
        std::fs::write(path, text + "\n").context(format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Starts the children, alternates the workloads between them, and stops them.
fn run_children(args: &Args, engines: &[EngineKind], base: &Path) -> Result<Vec<WorkloadResult>> {
    std::fs::create_dir_all(base).context(format!("creating {}", base.display()))?;
    let exe = std::env::current_exe().context("finding this executable")?;
    let mut children = engines
        .iter()
        .map(|&e| ChildProc::spawn(&exe, args, e, &engine_dir(base, e)))
        .collect::<Result<Vec<_>>>()?;
    let mut results = Vec::new();
    let mut capped = false;
    for &w in &args.benchmarks {
        if !w.writes() && !capped && args.read_memory > 0 {
            for child in &children {
                child.cap_memory(args.read_memory)?;
            }
            capped = true;
        }
        for child in &mut children {
            let r = child.run(w)?;
            eprintln!("{}", report::summary_line(&r));
            results.push(r);
        }
    }
    for child in children {
        child.finish()?;
    }
    Ok(results)
}

/// Where `engine`'s database lives under the run's directory.
pub fn engine_dir(base: &Path, engine: EngineKind) -> PathBuf {
    base.join(engine.name())
}
