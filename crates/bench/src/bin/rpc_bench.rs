//! `rpc_bench`: Cellar Get/Put over loopback TCP beside a bare tokio ping-pong (the floor).
//! See `cellar_bench::rpc_bench` and `docs/benchmarks.md`.

use cellar_bench::rpc_bench::{self, Options, Placement};
use cellar_bench::{conn_memory, transport_bench};
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
    /// Internal: the sized echo behind `transports`' floors (prints `listening echo=ADDR`).
    SizedEcho {
        /// Echo over UCX (addresses swapped on the TCP connection) instead of TCP.
        #[arg(long)]
        ucx: bool,
    },
    /// Get and Put over TCP, UCX shared memory and UCX over TCP, each beside a floor on the
    /// same transport (a sized echo: the same request and answer sizes, one shared connection,
    /// rounds interleaved, the order of transports rotated from pass to pass).
    Transports {
        /// Transports to measure: tcp, ucx-sm, ucx-tcp.
        #[arg(long, value_delimiter = ',', default_value = "tcp,ucx-sm,ucx-tcp")]
        transports: Vec<String>,
        /// Value sizes in bytes.
        #[arg(long, value_delimiter = ',', default_value = "1024,16384,262144")]
        sizes: Vec<usize>,
        /// Passes over every transport.
        #[arg(long, default_value_t = 3)]
        passes: usize,
    },
    /// What one connection costs the server over TCP and over UCX shared memory: its
    /// resident memory and threads with no client and with --connections open, per
    /// connection (a fresh server for each transport).
    UcxMemory {
        /// Connections to open on each transport.
        #[arg(long, default_value_t = 32)]
        connections: usize,
    },
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
    if let Some(Mode::SizedEcho { ucx }) = args.mode {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        return rt.block_on(transport_bench::sized_echo(ucx));
    }
    let self_exe = std::env::current_exe().map_err(|e| e.to_string())?;
    if let Some(Mode::Transports {
        transports,
        sizes,
        passes,
    }) = &args.mode
    {
        let ways = transports
            .iter()
            .map(|t| transport_bench::Way::parse(t))
            .collect::<Result<Vec<_>, _>>()?;
        if sizes.is_empty() || sizes.contains(&0) || *passes == 0 || args.concurrency == 0 {
            return Err("--sizes, --passes and --concurrency must be positive".into());
        }
        let opts = transport_bench::Options {
            cellar_bin: cellar_bin(args.cellar_bin.clone(), &self_exe)?,
            self_exe: self_exe.clone(),
            ways,
            sizes: sizes.clone(),
            ops: args.ops,
            passes: *passes,
            concurrency: args.concurrency,
        };
        let rows = transport_bench::run(&opts)?;
        transport_bench::print(&rows, args.concurrency);
        if let Some(path) = args.json {
            let text = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        return Ok(());
    }
    if let Some(Mode::UcxMemory { connections }) = &args.mode {
        if *connections == 0 {
            return Err("--connections must be positive".into());
        }
        let bin = cellar_bin(args.cellar_bin.clone(), &self_exe)?;
        let rows = [transport_bench::Way::Tcp, transport_bench::Way::UcxSm]
            .into_iter()
            .map(|way| conn_memory::measure(&bin, way, *connections))
            .collect::<Result<Vec<_>, _>>()?;
        conn_memory::print(&rows);
        if let Some(path) = args.json {
            let text = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        return Ok(());
    }
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
    let cellar_bin = cellar_bin(args.cellar_bin, &self_exe)?;
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

/// The `cellar` binary to start: `--cellar-bin`, else the one next to this binary.
fn cellar_bin(given: Option<PathBuf>, self_exe: &std::path::Path) -> Result<PathBuf, String> {
    let bin = given.unwrap_or_else(|| self_exe.with_file_name("cellar"));
    if !bin.exists() {
        return Err(format!(
            "{} not found: build it with `cargo build --release -p cellar-cli` or pass --cellar-bin",
            bin.display()
        ));
    }
    Ok(bin)
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
