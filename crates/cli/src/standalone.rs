//! `cellar standalone` (being written).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<(), String> {
    Err("cellar standalone is not built yet".into())
}
