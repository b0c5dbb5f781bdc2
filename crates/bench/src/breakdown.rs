//! `cellar bench breakdown` (being written).

/// Command-line options of `cellar bench breakdown`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<(), String> {
    Err("cellar bench breakdown is not built yet".into())
}
