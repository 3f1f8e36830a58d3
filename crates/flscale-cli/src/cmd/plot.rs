//! `flscale plot` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale plot`.
#[derive(Debug, clap::Args)]
pub struct PlotArgs {}

/// Runs `flscale plot`.
pub fn run(_args: PlotArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime("this subcommand is not available in this build yet"))
}
