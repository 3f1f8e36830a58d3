//! `flscale fit` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale fit`.
#[derive(Debug, clap::Args)]
pub struct FitArgs {}

/// Runs `flscale fit`.
pub fn run(_args: FitArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime("this subcommand is not available in this build yet"))
}
