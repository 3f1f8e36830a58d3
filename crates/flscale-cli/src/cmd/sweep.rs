//! `flscale sweep` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {}

/// Runs `flscale sweep`.
pub fn run(_args: SweepArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime("this subcommand is not available in this build yet"))
}
