//! `flscale merge` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {}

/// Runs `flscale merge`.
pub fn run(_args: MergeArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime("this subcommand is not available in this build yet"))
}
