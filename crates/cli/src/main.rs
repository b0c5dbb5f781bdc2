//! The `cellar` binary.
//!
//! Today: `cellar verify`, which checks a region directory's files (descriptor, every store
//! file block, references, WAL) without changing anything. The server (`cellar standalone`),
//! the shell and `cellar bench` arrive with their own issues.

mod verify;

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
    /// Check a region directory: descriptor, every block of every store file (checksums),
    /// references and WAL segments. Read-only; exits non-zero on the first damaged file.
    Verify {
        /// The region directory (the one holding `.regioninfo`).
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Verify { dir } => verify::run(&dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
