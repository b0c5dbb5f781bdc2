//! `cellar bench`: the subcommands, each run by `cellar_bench`.

use clap::Subcommand;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// YCSB load phase: `-P workloads/workloada [-p NAME=VALUE]... [-threads N] [-target OPS]
    /// [--db cellar://HOST:PORT | --db embedded:DIR]`.
    #[command(disable_help_flag = true)]
    Load {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// YCSB run phase (transactions); same options as `load`.
    #[command(disable_help_flag = true)]
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The Bigtable paper's §7 suite: sequential/random write, random read (from disk and
    /// from memory), scan, at several value sizes.
    Bigtable(cellar_bench::bigtable::Args),
    /// Per-stage latency of Get and Put (client serialization, wire, server queue, server
    /// processing, ...), as seed 000 Figure 7.
    Breakdown(cellar_bench::breakdown::Args),
    /// Charts (PNG and SVG) from benchmark JSON results.
    Report(cellar_bench::report::Args),
    /// Loss detector: `generate` writes circular linked lists of random rows (resending
    /// until acknowledged), `verify` scans them and counts nodes pointed at but missing.
    Linkedlist(cellar_bench::linkedlist::Args),
    /// Linearizability: `run` records a history of concurrent put/get/check-and-mutate/
    /// increment calls on a few rows and checks it; `check` checks a saved history.
    Linearizability(cellar_bench::linearizability::Args),
    /// Region availability: one probe per region writes every few ms; gaps between
    /// acknowledged writes are outages (run it while a chaos script kills servers).
    Availability(cellar_bench::availability::Args),
}

pub fn run(args: Args) -> Result<(), String> {
    match args.command {
        BenchCommand::Load { args } => cellar_bench::ycsb::main("load", args),
        BenchCommand::Run { args } => cellar_bench::ycsb::main("run", args),
        BenchCommand::Bigtable(a) => cellar_bench::bigtable::run(a),
        BenchCommand::Breakdown(a) => cellar_bench::breakdown::run(a),
        BenchCommand::Report(a) => cellar_bench::report::run(a),
        BenchCommand::Linkedlist(a) => cellar_bench::linkedlist::run(a),
        BenchCommand::Linearizability(a) => cellar_bench::linearizability::run(a),
        BenchCommand::Availability(a) => cellar_bench::availability::run(a),
    }
}
