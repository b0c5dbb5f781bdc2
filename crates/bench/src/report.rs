//! `cellar bench report`: charts, as PNG and SVG, from the JSON results of `cellar bench run`
//! (YCSB), `breakdown` and `bigtable`. Drawn with `plotters` (pure Rust); text uses DejaVu
//! Sans embedded from the `dejavu` crate, so no system font or fontconfig is needed.
//!
//! Charts: YCSB throughput against client threads (one line per workload, phase and db),
//! YCSB latency percentiles per operation (bars, one chart per result), the per-stage
//! breakdown of Get and Put (stacked bars), and Bigtable ops/s per test and value size.

mod charts;
mod inputs;

use std::path::PathBuf;

/// Command-line options of `cellar bench report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// JSON result files, or directories whose `*.json` files are read.
    #[arg(long, num_args = 1.., required = true)]
    pub input: Vec<PathBuf>,
    /// Directory the charts are written to (created if missing).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: Args) -> Result<(), String> {
    let results = inputs::load(&args.input)?;
    if results.is_empty() {
        return Err("no benchmark results found in the --input files".into());
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let written = charts::write_all(&results, &args.out)?;
    for path in &written {
        println!("{}", path.display());
    }
    Ok(())
}
