//! `flscale merge DIR [SHARD_DIR …]`: combine the results directories of sweep shards
//! (spec 03 "Scale out"). Idempotent: merging again changes nothing.

use std::path::PathBuf;

use flscale::experiment::{merge, ResultsFormat};
use flscale::Result;

use super::{out, out_json, Ctx};

/// Arguments of `flscale merge`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
flscale sweep presets/experiments/fig2b.toml --quick --shard 0/2 --out runs/shard-0   # two shards,\n  \
flscale sweep presets/experiments/fig2b.toml --quick --shard 1/2 --out runs/shard-1   # each in its own directory\n  \
flscale merge runs/fig2b runs/shard-0 runs/shard-1   # copy both shards into runs/fig2b\n  \
flscale merge runs/fig2b                             # shards that shared one directory\n\n\
Every input must hold the same experiment and grid (manifest.json). Runs are copied once; a run\n\
present in two inputs must have identical files. The tables results, chains and histograms are\n\
rebuilt in grid order (in --format, else the format OUT or the first input already has), so two\n\
merged shards equal the unsharded sweep byte for byte. Every run is verified against its\n\
checksums.json first: a damaged one is refused by id (--skip-damaged leaves it out, listed).")]
pub struct MergeArgs {
    /// The merged results directory (created if missing).
    pub out: PathBuf,
    /// Shard directories to merge into it; none: re-aggregate OUT in place.
    pub inputs: Vec<PathBuf>,
    /// File format of the rebuilt tables: parquet or csv (default: the one already there).
    #[arg(long, value_parser = super::sweep::parse_format)]
    pub format: Option<ResultsFormat>,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// Merge without damaged runs (listed on stderr) instead of refusing.
    #[arg(long)]
    pub skip_damaged: bool,
}

/// Runs `flscale merge`.
pub fn run(args: MergeArgs, ctx: &Ctx) -> Result<()> {
    let (copied, finished, total, notes) =
        merge::merge_checked(&args.out, &args.inputs, args.format, args.skip_damaged)?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    if args.json {
        return out_json(&serde_json::json!({
            "dir": args.out.display().to_string(),
            "copied": copied,
            "finished": finished,
            "grid_runs": total,
        }));
    }
    if finished < total && !ctx.quiet {
        eprintln!(
            "note: {} of {total} runs are still missing; merge again when the other shards finish",
            total - finished
        );
    }
    out(&format!(
        "merged {} input(s) into {}: {copied} runs copied, {finished}/{total} runs finished\n",
        args.inputs.len(),
        args.out.display()
    ))
}
