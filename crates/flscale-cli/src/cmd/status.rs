//! `flscale status DIR`: where a sweep stands.

use std::path::PathBuf;

use flscale::experiment::status::{self, Phase, Status};
use flscale::{Error, Result};

use super::{out, out_json, Ctx};

/// Arguments of `flscale status`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  flscale status runs/fig2b\n  flscale status runs/fig2b --runs     # one line per run that is not done\n\n\
Each run of the grid is done (finished, checksums verified), running (a live process holds its\n\
claim), failed (damaged files, or interrupted: its process died) or missing (not started). Counts\n\
are per shard (the array tasks of --emit-slurm). The run time so far is the sum of the finished\n\
runs' wall times; what remains is estimated from them, scaled by each run's size\n\
(steps x chains x P x weights). The last line is the command that computes only what is\n\
missing or failed: `sbatch --array=<tasks> DIR/sweep.sbatch` for a job array, else the sweep\n\
itself (finished runs are skipped). Exits 2 when a run is damaged (--skip-damaged: 0)."
)]
pub struct StatusArgs {
    /// A results directory of `flscale sweep` (or of `--emit-slurm`).
    pub dir: PathBuf,
    /// List every run that is not done, with the reason.
    #[arg(long)]
    pub runs: bool,
    /// Report damaged runs without failing.
    #[arg(long)]
    pub skip_damaged: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn hours(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.2} h", s / 3600.0)
    }
}

fn text(st: &Status, dir: &std::path::Path, all_runs: bool) -> String {
    let count = |p: Phase| st.runs.iter().filter(|r| r.phase == p).count();
    let mut s = format!(
        "{}: {} runs in the grid: {} done, {} running, {} failed, {} missing\n",
        dir.display(),
        st.grid_runs,
        count(Phase::Done),
        count(Phase::Running),
        count(Phase::Failed),
        count(Phase::Missing)
    );
    if st.shards > 1 {
        s += &format!(
            "{:>6}  {:>5}  {:>7}  {:>6}  {:>7}\n",
            "shard", "done", "running", "failed", "missing"
        );
        for sh in &st.per_shard {
            s += &format!(
                "{:>6}  {:>5}  {:>7}  {:>6}  {:>7}\n",
                sh.shard, sh.done, sh.running, sh.failed, sh.missing
            );
        }
    }
    s += &format!(
        "run time so far: {} (wall clock of the finished runs)",
        hours(st.seconds_done)
    );
    if !st.untimed.is_empty() {
        s += &format!(
            "; {} finished run(s) have no readable timing.json",
            st.untimed.len()
        );
    }
    s += "\n";
    match st.seconds_remaining {
        Some(r) if count(Phase::Done) < st.grid_runs => {
            s += &format!(
                "estimated remaining: {} of run time (from the finished runs, scaled by size)\n",
                hours(r)
            )
        }
        None if count(Phase::Done) < st.grid_runs => {
            s += "estimated remaining: unknown until a run has finished\n"
        }
        _ => {}
    }
    for r in &st.runs {
        let show = match r.phase {
            Phase::Done => false,
            Phase::Failed | Phase::Running => true,
            Phase::Missing => all_runs,
        };
        if show {
            s += &format!(
                "  {}  shard {}  {}{}\n",
                r.id,
                r.shard,
                r.phase.name(),
                r.detail
                    .as_ref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            );
        }
    }
    match &st.resubmit {
        Some(c) => s += &format!("to compute what is missing: {c}\n"),
        None if count(Phase::Done) == st.grid_runs => {
            s += &format!("complete; tables: flscale merge {}\n", dir.display())
        }
        None => s += "nothing to resubmit: the remaining runs are running\n",
    }
    s
}

/// Runs `flscale status`.
pub fn run(args: StatusArgs, _ctx: &Ctx) -> Result<()> {
    let st = status::status(&args.dir)?;
    if args.json {
        out_json(
            &serde_json::to_value(&st)
                .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?,
        )?;
    } else {
        out(&text(&st, &args.dir, args.runs))?;
    }
    let damaged: Vec<String> = st
        .runs
        .iter()
        .filter(|r| r.damaged)
        .map(|r| format!("{} ({})", r.id, r.detail.clone().unwrap_or_default()))
        .collect();
    if !damaged.is_empty() && !args.skip_damaged {
        return Err(Error::invalid(format!(
            "{} has {} damaged run(s): {}; run the same flscale sweep again to recompute them",
            args.dir.display(),
            damaged.len(),
            damaged.join(", ")
        )));
    }
    Ok(())
}
