//! `cellar bench report` (being written).

/// Command-line options of `cellar bench report`.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<(), String> {
    Err("cellar bench report is not built yet".into())
}
