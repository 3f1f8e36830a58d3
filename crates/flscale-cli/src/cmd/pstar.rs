//! `flscale pstar` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale pstar`.
#[derive(Debug, clap::Args)]
pub struct PstarArgs {}

/// Runs `flscale pstar`.
pub fn run(_args: PstarArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime("this subcommand is not available in this build yet"))
}
