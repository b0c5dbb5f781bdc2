//! `cellar bench linkedlist generate|verify`: a loss detector in the manner of HBase's
//! IntegrationTestBigLinkedList. `generate` writes circular linked lists of random rows
//! while the server may be killed and restarted under it; `verify` scans the table and
//! finds every node that is pointed at but missing — an acknowledged write that was lost.
//!
//! - [`node`]: the row layout.
//! - [`generate`]: the writers and how lists are built and closed.
//! - [`verify`]: the scan and the counts.

pub mod generate;
pub mod node;
pub mod verify;

use std::path::PathBuf;
use std::time::Duration;

/// What generate did, as it prints it and as `verify --expect` reads it (JSON).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub table: String,
    pub writers: u32,
    /// Nodes whose write was acknowledged.
    pub acknowledged: u64,
    /// Nodes written but never acknowledged before the run ended: each may or may not exist.
    pub unsettled: u64,
    /// Nodes nothing was made to point at: the last nodes of lists whose circle was not
    /// closed when the run ended.
    pub open_heads: u64,
    pub circles_closed: u64,
    /// Node writes sent again after a failure or an unknown outcome.
    pub resent: u64,
    pub seconds: f64,
}

/// Command-line options of `cellar bench linkedlist`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Write circular linked lists of random rows until --nodes are written or --duration
    /// has passed; resend what fails until it is acknowledged. Prints (and with --summary
    /// writes) what was acknowledged.
    Generate(GenerateArgs),
    /// Scan the table and count REFERENCED, UNREFERENCED and UNDEFINED nodes; exits non-zero
    /// when a node is missing (UNDEFINED > 0) or the counts disagree with --expect.
    Verify(VerifyArgs),
}

#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// The server: cellar://HOST:PORT.
    #[arg(long, default_value = "cellar://127.0.0.1:16200")]
    pub db: String,
    /// The table of nodes (family `node`).
    #[arg(long, default_value = "chaos_linkedlist")]
    pub table: String,
    /// Create the table first, pre-split into --regions regions (it must not exist).
    #[arg(long)]
    pub create: bool,
    /// Regions of a table made by --create, split evenly over the key space.
    #[arg(long, default_value_t = 8)]
    pub regions: u32,
    /// Concurrent writers, each with its own connection and lists.
    #[arg(long, default_value_t = 4)]
    pub writers: u32,
    /// Nodes to write in all (0: no limit; then --duration ends the run).
    #[arg(long, default_value_t = 0)]
    pub nodes: u64,
    /// Seconds to write new nodes for (0: until --nodes are written).
    #[arg(long, default_value_t = 0)]
    pub duration: u64,
    /// Lists a writer builds side by side: nodes per batch.
    #[arg(long, default_value_t = 200)]
    pub width: u32,
    /// Batches per circle: after this many the lists are closed into one circle.
    #[arg(long, default_value_t = 20)]
    pub wrap: u32,
    /// New nodes per second over all writers (0: as fast as the server acknowledges). A
    /// lower rate keeps the WAL a killed server must replay short, so a run has more kills.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Seconds after the run during which unacknowledged writes are still resent.
    #[arg(long, default_value_t = 120)]
    pub grace: u64,
    /// Also write the summary here (JSON), for `verify --expect`.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// A progress line this often, in seconds.
    #[arg(long, default_value_t = 10)]
    pub status_interval: u64,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The server: cellar://HOST:PORT.
    #[arg(long, default_value = "cellar://127.0.0.1:16200")]
    pub db: String,
    /// The table of nodes.
    #[arg(long, default_value = "chaos_linkedlist")]
    pub table: String,
    /// Summaries written by `generate --summary` (repeatable: the runs' counts add up); the
    /// node counts must agree with them.
    #[arg(long)]
    pub expect: Vec<PathBuf>,
    /// A progress line this often, in seconds.
    #[arg(long, default_value_t = 10)]
    pub status_interval: u64,
}

fn server_address(db: &str) -> Result<String, String> {
    match db
        .strip_prefix("cellar://")
        .map(|a| a.trim_end_matches('/'))
    {
        Some(a) if !a.is_empty() => Ok(a.to_string()),
        _ => Err(format!(
            "--db {db}: the linked-list test needs a server, cellar://HOST:PORT"
        )),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

pub fn run(args: Args) -> Result<(), String> {
    match args.command {
        Command::Generate(a) => run_generate(a),
        Command::Verify(a) => run_verify(a),
    }
}

fn run_generate(a: GenerateArgs) -> Result<(), String> {
    let settings = generate::Settings {
        addr: server_address(&a.db)?,
        table: a.table.clone(),
        writers: a.writers,
        nodes: a.nodes,
        duration: (a.duration > 0).then(|| Duration::from_secs(a.duration)),
        width: a.width,
        wrap: a.wrap,
        rate: a.rate,
        create: a.create,
        regions: a.regions,
        grace: Duration::from_secs(a.grace),
        status_interval: Duration::from_secs(a.status_interval.max(1)),
    };
    eprintln!(
        "linkedlist generate: {} writers, {} lists each, circles of {} batches, table '{}' at {}",
        a.writers, a.width, a.wrap, a.table, a.db
    );
    let summary = runtime()?.block_on(generate::run(settings))?;
    println!(
        "acknowledged={} unsettled={} open_heads={} circles_closed={} resent={} seconds={:.1}",
        summary.acknowledged,
        summary.unsettled,
        summary.open_heads,
        summary.circles_closed,
        summary.resent,
        summary.seconds
    );
    if let Some(path) = &a.summary {
        let text = serde_json::to_string_pretty(&summary)
            .map_err(|e| format!("cannot encode the summary: {e}"))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

fn run_verify(a: VerifyArgs) -> Result<(), String> {
    let addr = server_address(&a.db)?;
    let mut expected: Option<Summary> = None;
    for path in &a.expect {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--expect {}: {e}", path.display()))?;
        let s: Summary = serde_json::from_str(&text)
            .map_err(|e| format!("--expect {}: not a generate summary: {e}", path.display()))?;
        if s.table != a.table {
            return Err(format!(
                "--expect {}: the summary is of table '{}', not '{}'",
                path.display(),
                s.table,
                a.table
            ));
        }
        let e = expected.get_or_insert_with(Summary::default);
        e.acknowledged += s.acknowledged;
        e.unsettled += s.unsettled;
        e.open_heads += s.open_heads;
    }
    let interval = Duration::from_secs(a.status_interval.max(1));
    let counts = runtime()?.block_on(verify::scan(&addr, &a.table, interval))?;
    let (report, problems) = verify::judge(&counts, expected.as_ref());
    print!("{report}");
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
