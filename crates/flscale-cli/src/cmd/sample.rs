//! `flscale sample` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale sample`.
#[derive(Debug, clap::Args)]
pub struct SampleArgs {}

/// Runs `flscale sample`.
pub fn run(_args: SampleArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime(
        "this subcommand is not available in this build yet",
    ))
}
