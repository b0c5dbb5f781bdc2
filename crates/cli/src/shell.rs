//! `cellar shell` (being written).

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<(), String> {
    Err("cellar shell is not built yet".into())
}
