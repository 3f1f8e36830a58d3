//! `flscale presets` and `flscale preset show NAME`.

use flscale::patterns::arch::{preset_text, PRESETS};
use flscale::Result;
use serde_json::json;

use super::{out, out_json, Ctx};

/// Arguments of `flscale presets`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  flscale presets\n  flscale preset show fcn3-erf-he3 > my-net.toml"
)]
pub struct PresetsArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `flscale preset`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  flscale preset show fcn3-erf-he3 > my-net.toml   # then edit and run: flscale predict my-net.toml"
)]
pub struct PresetArgs {
    #[command(subcommand)]
    pub action: PresetAction,
}

/// What to do with a preset.
#[derive(Debug, clap::Subcommand)]
pub enum PresetAction {
    /// Print the preset's TOML.
    Show {
        /// Preset name (see `flscale presets`).
        name: String,
    },
}

/// Lists presets.
pub fn run_list(args: PresetsArgs, _ctx: &Ctx) -> Result<()> {
    if args.json {
        let list: Vec<_> = PRESETS.iter().map(|(n, s, _)| json!({"name": n, "summary": s, "command": format!("flscale predict --preset {n}")})).collect();
        return out_json(&json!({ "presets": list }));
    }
    let width = PRESETS.iter().map(|p| p.0.len()).max().unwrap_or(0);
    let mut text = String::from(
        "Architecture presets (flscale predict --preset NAME; flscale preset show NAME):\n\n",
    );
    for (name, summary, _) in PRESETS {
        text.push_str(&format!("  {name:<width$}  {summary}\n"));
    }
    out(&text)
}

/// Shows one preset.
pub fn run_show(args: PresetArgs, _ctx: &Ctx) -> Result<()> {
    match args.action {
        PresetAction::Show { name } => out(preset_text(&name)?),
    }
}
