//! `cellar bench bigtable` (being written).

/// Command-line options of `cellar bench bigtable`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<(), String> {
    Err("cellar bench bigtable is not built yet".into())
}
