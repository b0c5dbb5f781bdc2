//! `conn_bench`: resident memory per idle and per stalled connection of a real
//! `cellar standalone`. See `cellar_bench::conn_bench` and `docs/reliability.md`.

use cellar_bench::conn_bench::{self, Options};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "Server memory per idle and per half-frame connection, native and HBase ports")]
struct Args {
    /// The `cellar` binary to start (default: next to this one).
    #[arg(long)]
    cellar_bin: Option<PathBuf>,
    /// Idle connections per protocol.
    #[arg(long, default_value_t = 2000)]
    connections: usize,
    /// Connections stalled in the middle of a frame, per protocol.
    #[arg(long, default_value_t = 1000)]
    stalled: usize,
    /// Body length a stalled connection announces (below rpc.max_request_bytes).
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    stall_announced: u32,
    /// Bytes of that body it sends before going silent.
    #[arg(long, default_value_t = 16 * 1024)]
    stall_sent: usize,
    /// Milliseconds the server is left to settle before each reading.
    #[arg(long, default_value_t = 1000)]
    settle_ms: u64,
    /// A `cellar.toml` for the server.
    #[arg(long)]
    server_config: Option<PathBuf>,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn run(args: Args) -> Result<(), String> {
    let cellar_bin = match args.cellar_bin {
        Some(p) => p,
        None => {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            exe.with_file_name("cellar")
        }
    };
    if !cellar_bin.exists() {
        return Err(format!(
            "{} not found: build it with `cargo build --release -p cellar-cli` or pass --cellar-bin",
            cellar_bin.display()
        ));
    }
    let opts = Options {
        cellar_bin,
        connections: args.connections,
        stalled: args.stalled,
        stall_announced: args.stall_announced,
        stall_sent: args.stall_sent,
        settle: Duration::from_millis(args.settle_ms),
        server_config: args.server_config,
    };
    let report = conn_bench::run(&opts)?;
    conn_bench::print(&report, &opts);
    if let Some(path) = args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conn_bench: {e}");
            ExitCode::FAILURE
        }
    }
}
