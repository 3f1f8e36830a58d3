//! `flscale kernel` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale kernel`.
#[derive(Debug, clap::Args)]
pub struct KernelArgs {}

/// Runs `flscale kernel`.
pub fn run(_args: KernelArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime(
        "this subcommand is not available in this build yet",
    ))
}
