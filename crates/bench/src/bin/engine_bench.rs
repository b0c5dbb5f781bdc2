//! `engine_bench`: Cellar's storage engine against RocksDB, db_bench-style.
//! `engine_bench --help` lists the flags; `docs/engine-bench.md` explains the measurements.

use cellar_bench::engine_bench::{args::Args, child, driver};
use clap::Parser;

fn main() {
    let args = Args::parse();
    let is_child = args.child;
    let outcome = if is_child {
        child::run(args)
    } else {
        driver::run(args)
    };
    if let Err(e) = outcome {
        let role = if is_child { " (child)" } else { "" };
        eprintln!("engine_bench{role}: error: {e}");
        std::process::exit(1);
    }
}
