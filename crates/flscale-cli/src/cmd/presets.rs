//! `flscale presets` and `flscale preset show`.

use flscale::{Error, Result};

use super::Ctx;

/// Arguments of `flscale presets`.
#[derive(Debug, clap::Args)]
pub struct PresetsArgs {}

/// Arguments of `flscale preset`.
#[derive(Debug, clap::Args)]
pub struct PresetArgs {}

/// Lists presets.
pub fn run_list(_args: PresetsArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime(
        "this subcommand is not available in this build yet",
    ))
}

/// Shows one preset.
pub fn run_show(_args: PresetArgs, _ctx: &Ctx) -> Result<()> {
    Err(Error::runtime(
        "this subcommand is not available in this build yet",
    ))
}
