//! `flscale ldt` — being built in its own issue; until then it says so and exits 1.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale ldt`.
#[derive(Debug, clap::Args)]
pub struct LdtArgs {}

/// Runs `flscale ldt`.
pub fn run(_args: LdtArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime(
        "this subcommand is not available in this build yet",
    ))
}
