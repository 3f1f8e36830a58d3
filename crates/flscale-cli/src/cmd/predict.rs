//! `flscale predict`.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale predict`.
#[derive(Debug, clap::Args)]
pub struct PredictArgs {}

/// Runs `flscale predict`.
pub fn run(_args: PredictArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime(
        "this subcommand is not available in this build yet",
    ))
}
