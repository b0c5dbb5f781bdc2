//! `rpc_bench`: Cellar Get/Put over loopback TCP beside a bare tokio ping-pong (the floor).
//! See `cellar_bench::rpc_bench` and `docs/benchmarks.md`.

use cellar_bench::rpc_bench::{self, Options, Placement};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    about = "Cellar Get/Put latency and throughput over loopback TCP, beside a tokio ping-pong floor"
)]
struct Args {
    /// The `cellar` binary to start (default: next to this one).
    #[arg(long)]
    cellar_bin: Option<PathBuf>,
    /// Operations per measurement.
    #[arg(long, default_value_t = 20_000)]
    ops: u64,
    /// Value (and ping-pong message) size in bytes.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Concurrent client tasks for the throughput runs.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// same: server and client on CPU 0; split: server on CPU 1, client on CPU 0; both.
    #[arg(long, default_value = "both")]
    placement: String,
    /// A `cellar.toml` for the server (e.g. `[rpc] inline_gets = false` to compare).
    #[arg(long)]
    server_config: Option<PathBuf>,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(subcommand)]
    mode: Option<Mode>,
}

#[derive(clap::Subcommand)]
enum Mode {
    /// Internal: the ping-pong echo server (prints `listening echo=ADDR`).
    EchoServer,
    /// The kernel's floor for one call on this machine: the server CPU a bare echo server
    /// spends per sequential ping-pong of --value-size bytes (--ops calls, one connection),
    /// and the round trips' p50/p99/p99.9; first on any CPU, then with both on CPU 0.
    FloorCpu,
}

fn run(args: Args) -> Result<(), String> {
    if let Some(Mode::EchoServer) = args.mode {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        return rt.block_on(rpc_bench::echo_server());
    }
    let self_exe = std::env::current_exe().map_err(|e| e.to_string())?;
    if let Some(Mode::FloorCpu) = args.mode {
        let floor = rpc_bench::floor_cpu(&self_exe, args.ops, args.value_size)?;
        println!(
            "floor ({} sequential {} B ping-pongs, one connection), server CPU per call and round trip p50 / p99 / p99.9:",
            floor.ops, floor.value_size
        );
        for (placement, run) in [
            ("any CPU", &floor.any_cpu),
            ("both on CPU 0", &floor.one_cpu),
        ] {
            println!(
                "  {placement:<14} {:.1} µs; {:.0} / {:.0} / {:.0} µs",
                run.server_cpu_us_per_call, run.p50_us, run.p99_us, run.p999_us
            );
        }
        if let Some(path) = args.json {
            let text = serde_json::to_string_pretty(&floor).map_err(|e| e.to_string())?;
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        return Ok(());
    }
    let cellar_bin = match args.cellar_bin {
        Some(p) => p,
        None => self_exe.with_file_name("cellar"),
    };
    if !cellar_bin.exists() {
        return Err(format!(
            "{} not found: build it with `cargo build --release -p cellar-cli` or pass --cellar-bin",
            cellar_bin.display()
        ));
    }
    let placements = match args.placement.as_str() {
        "same" => vec![Placement::Same],
        "split" => vec![Placement::Split],
        "both" => vec![Placement::Same, Placement::Split],
        other => return Err(format!("--placement {other}: expected same, split or both")),
    };
    if args.concurrency == 0 || args.ops < args.concurrency as u64 {
        return Err("--ops must be at least --concurrency, which must be positive".into());
    }
    let opts = Options {
        cellar_bin,
        ops: args.ops,
        value_size: args.value_size,
        concurrency: args.concurrency,
        placements,
        server_config: args.server_config,
    };
    let mut results = Vec::new();
    for p in &opts.placements {
        let r = rpc_bench::run_placement(*p, &opts, &self_exe)?;
        rpc_bench::print(&r, &opts);
        results.push(r);
    }
    if let Some(path) = args.json {
        let text = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
