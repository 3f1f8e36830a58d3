//! `flscale energy`.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale energy`.
#[derive(Debug, clap::Args)]
pub struct EnergyArgs {}

/// Runs `flscale energy`.
pub fn run(_args: EnergyArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime(
        "this subcommand is not available in this build yet",
    ))
}
