//! `flscale cavity` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale cavity`.
#[derive(Debug, clap::Args)]
pub struct CavityArgs {}

/// Runs `flscale cavity`.
pub fn run(_args: CavityArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime(
        "this subcommand is not available in this build yet",
    ))
}
