//! The `cellar` binary: `standalone`, `master` and `regionserver` (the servers), `shell`,
//! `bench`, `cert` and `verify`.

mod backup;
mod bench;
mod cert;
mod export_snapshot;
mod hfile;
mod import_hbase;
mod shell;
mod standalone;
mod thrift;
mod tls_args;
mod verify;
mod verify_against;

use cellar_server::node::NodeRole;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cellar",
    version,
    about = "Cellar: an HBase-compatible wide-column database"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run master + region server + local storage in one process.
    Standalone(standalone::Args),
    /// Run a cluster's master: elected through ZooKeeper (others wait as backups), serves
    /// hbase:meta and table administration, assigns regions to region servers and recovers
    /// the regions of servers that die.
    Master(standalone::Args),
    /// Run a cluster's region server: registers in ZooKeeper and serves the regions the
    /// master opens on it, with its own WAL under the root.
    Regionserver(standalone::Args),
    /// Benchmarks: YCSB workloads (load, run), the Bigtable paper's suite, the per-stage
    /// latency breakdown, charts (report), and the chaos workloads (linkedlist,
    /// linearizability).
    Bench(bench::Args),
    /// A development CA and TLS certificates for servers and users (`cellar cert create`).
    Cert(cert::Args),
    /// HBase's Thrift (version 1) gateway for a running server or cluster, for happybase
    /// and other Thrift clients (`cellar standalone --thrift-listen` runs one in the server).
    Thrift(thrift::Args),
    /// HBase-shell-like console; `-e "CMD; CMD"` runs commands and exits.
    Shell(shell::Args),
    /// Copy a table (schema, region boundaries, every version of every cell) to one file,
    /// from a running server or cluster; `cellar import` loads it back (docs/operations.md).
    Export(backup::ExportArgs),
    /// Load a `cellar export` file into a running server or cluster: creates the table with
    /// the export's schema and regions (or writes into one with --into-existing).
    Import(backup::ImportArgs),
    /// Check a region directory: descriptor, every block of every store file (checksums),
    /// references and WAL segments. Read-only; exits non-zero on the first damaged file.
    Verify {
        /// The region directory (the one holding `.regioninfo`).
        dir: PathBuf,
    },
    /// Read HBase store files (HFile v3): check every block, count the cells, and print the
    /// trailer and file info (--meta) or the cells (--cells), as `hbase hfile -m -p` does.
    Hfile(hfile::Args),
    /// Bring an HBase table in from one of its snapshots: creates the table with the
    /// snapshot's families and region boundaries and bulk loads HBase's store files into it,
    /// never through the write path (the server must be started with --bulk-load-dir on the
    /// HBase root; docs/migration.md).
    ImportHbase(import_hbase::Args),
    /// Copy a snapshot and the store files it names to another root (local or HDFS), where
    /// that server or cluster lists it and can clone it (HBase's ExportSnapshot;
    /// docs/snapshots.md). Either side may be serving.
    ExportSnapshot(export_snapshot::Args),
    /// Compare a table on an HBase cluster with the same table on Cellar (or any two
    /// clusters speaking HBase's protocol), range by range with digests, naming the rows
    /// that differ; exits non-zero when any does (docs/migration.md).
    VerifyAgainst(verify_against::Args),
}

fn main() -> ExitCode {
    // Before any thread exists: it sets environment variables UCX reads later.
    cellar_ucx::set_process_defaults();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(cellar_server::logs::Tee)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Standalone(args) => standalone::run(args, NodeRole::Standalone),
        Command::Master(args) => standalone::run(args, NodeRole::Master),
        Command::Regionserver(args) => standalone::run(args, NodeRole::RegionServer),
        Command::Shell(args) => shell::run(args),
        Command::Export(args) => backup::export(args),
        Command::Import(args) => backup::import(args),
        Command::Thrift(args) => thrift::run(args),
        Command::Cert(args) => cert::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Verify { dir } => verify::run(&dir).map_err(|e| e.to_string()),
        Command::Hfile(args) => hfile::run(args),
        Command::ImportHbase(args) => import_hbase::run(args),
        Command::ExportSnapshot(args) => export_snapshot::run(args),
        Command::VerifyAgainst(args) => verify_against::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
