//! `flscale bench` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Runs `flscale bench`.
pub fn run(_args: BenchArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime(
        "this subcommand is not available in this build yet",
    ))
}
