//! `flscale reproduce` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale reproduce`.
#[derive(Debug, clap::Args)]
pub struct ReproduceArgs {}

/// Runs `flscale reproduce`.
pub fn run(_args: ReproduceArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime("this subcommand is not available in this build yet"))
}
