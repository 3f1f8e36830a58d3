//! `flscale status DIR`: where a sweep stands — every run done, running,
//! failed or missing, per shard; the run time so far and an estimate of what remains; and the
//! command that resubmits only what is missing.
//!
//! * done: finished and intact ([`super::integrity`]);
//! * running: a live process holds its claim ([`super::claim`]);
//! * failed: its directory is damaged, or a claim or partial directory of a process that died
//!   is left (the run was interrupted: killed, cancelled, a node lost);
//! * missing: never started.
//!
//! The estimate of a run's time is the measured seconds per unit of work of the finished runs
//! times its own work, with work = steps × chains × max(P, 1) × (d·N₁ + Σ Nᵢ·Nᵢ₊₁): the
//! sampler's cost per step is one pass of every chain over the training set through the
//! network's weights (docs/langevin.md). It is an estimate, printed as such.

use std::path::Path;

use serde::Serialize;
use serde_json::Value as Json;

use super::claim;
use super::integrity::{self, RunState};
use super::store::Store;
use super::sweep::{RunPlan, Sweep};
use crate::error::{Error, Result};

/// The array file `--emit-slurm` writes beside the script: how many tasks it has.
pub const SLURM_JSON: &str = "slurm.json";

/// State of one run in the status view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Finished and intact.
    Done,
    /// A live process computes it.
    Running,
    /// Damaged, or interrupted.
    Failed,
    /// Not started.
    Missing,
}

impl Phase {
    /// The word the status view prints.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Done => "done",
            Phase::Running => "running",
            Phase::Failed => "failed",
            Phase::Missing => "missing",
        }
    }
}

/// One run's line of the status.
#[derive(Debug, Clone, Serialize)]
pub struct RunStatus {
    /// Run id.
    pub id: String,
    /// Grid index.
    pub index: usize,
    /// Shard (array task) it belongs to.
    pub shard: usize,
    /// State.
    pub phase: Phase,
    /// Why it failed, or who runs it.
    pub detail: Option<String>,
    /// Failed because its files are damaged (not merely interrupted).
    pub damaged: bool,
    /// Wall seconds of the finished run (its timing.json).
    pub seconds: Option<f64>,
    /// Estimated seconds (runs not done).
    pub estimate: Option<f64>,
}

/// Counts of one shard.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ShardStatus {
    /// Shard index.
    pub shard: usize,
    /// Runs done.
    pub done: usize,
    /// Runs running.
    pub running: usize,
    /// Runs failed.
    pub failed: usize,
    /// Runs missing.
    pub missing: usize,
}

/// The status of a results directory.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Runs in the grid.
    pub grid_runs: usize,
    /// Shards (the array tasks of `--emit-slurm`, else 1).
    pub shards: usize,
    /// Per-shard counts.
    pub per_shard: Vec<ShardStatus>,
    /// Every run.
    pub runs: Vec<RunStatus>,
    /// Sum of the finished runs' wall seconds.
    pub seconds_done: f64,
    /// Finished runs without a readable timing.json (not in `seconds_done`).
    pub untimed: Vec<String>,
    /// Estimated wall seconds of the runs not done (None without a timed finished run).
    pub seconds_remaining: Option<f64>,
    /// The command that computes only what is missing or failed (None when all is done or
    /// running).
    pub resubmit: Option<String>,
}

/// Relative cost of a run (see the module documentation).
fn work(plan: &RunPlan) -> f64 {
    let c = &plan.config;
    let mut sizes = vec![c.data.d as f64];
    sizes.extend(c.model.widths.iter().map(|&w| w as f64));
    let weights: f64 = sizes.windows(2).map(|w| w[0] * w[1]).sum::<f64>().max(1.0);
    c.sampler.steps as f64 * c.sampler.chains as f64 * (c.data.p.max(1) as f64) * weights
}

fn run_seconds(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("timing.json")).ok()?;
    let v: Json = serde_json::from_str(&text).ok()?;
    v.get("seconds")
        .and_then(Json::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0)
}

/// Shards of the emitted job array, from `DIR/slurm.json` (1 without one).
pub fn array_tasks(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join(SLURM_JSON))
        .ok()
        .and_then(|t| serde_json::from_str::<Json>(&t).ok())
        .and_then(|v| v.get("array_tasks").and_then(Json::as_u64))
        .filter(|&n| n >= 1)
        .map_or(1, |n| n as usize)
}

/// The state of a run that is not intact.
fn phase_of(store: &Store, id: &str, state: &RunState) -> (Phase, Option<String>) {
    let runs = store.dir.join("runs");
    if let RunState::Damaged(reason) = state {
        return (Phase::Failed, Some(reason.clone()));
    }
    if let Some(o) = claim::owner(&runs, id) {
        let who = format!(
            "pid {} on {}{}",
            o.pid,
            o.host,
            o.slurm_job
                .as_ref()
                .map(|j| format!(", Slurm job {j}"))
                .unwrap_or_default()
        );
        return if o.alive() {
            (Phase::Running, Some(who))
        } else {
            (Phase::Failed, Some(format!("interrupted ({who} is gone)")))
        };
    }
    let partial = std::fs::read_dir(&runs).ok().and_then(|e| {
        e.flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .find(|n| n.starts_with(&format!(".partial-{id}-")))
    });
    match partial {
        Some(p) => (
            Phase::Failed,
            Some(format!("interrupted while writing ({p})")),
        ),
        None => (Phase::Missing, None),
    }
}

/// The status of `dir`; `experiment` is the path to print in a local resubmit command.
pub fn status(dir: &Path) -> Result<Status> {
    let store = Store::open(dir)?;
    let manifest = store.manifest()?;
    let text = manifest
        .get("experiment")
        .and_then(Json::as_str)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{}/manifest.json has no experiment text",
                dir.display()
            ))
        })?;
    let source = manifest
        .get("source")
        .and_then(Json::as_str)
        .unwrap_or("EXP.toml");
    let quick = manifest
        .pointer("/grid/quick")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    let sweep = Sweep::from_toml(text, source, quick)?;
    let survey = integrity::survey(dir, &manifest)?;
    let shards = array_tasks(dir);
    let mut runs = Vec::new();
    for (plan, (id, state)) in sweep.runs.iter().zip(&survey.runs) {
        let (phase, detail) = match state {
            RunState::Intact { .. } => (Phase::Done, None),
            s => phase_of(&store, id, s),
        };
        let seconds = (phase == Phase::Done)
            .then(|| run_seconds(&store.run_dir(id)))
            .flatten();
        runs.push(RunStatus {
            id: id.clone(),
            index: plan.index,
            shard: plan.index % shards,
            phase,
            detail,
            damaged: matches!(state, RunState::Damaged(_)),
            seconds,
            estimate: None,
        });
    }
    let timed: Vec<(f64, f64)> = sweep
        .runs
        .iter()
        .zip(&runs)
        .filter_map(|(p, r)| r.seconds.map(|s| (s, work(p))))
        .collect();
    let rate = (!timed.is_empty())
        .then(|| timed.iter().map(|t| t.0).sum::<f64>() / timed.iter().map(|t| t.1).sum::<f64>());
    for (p, r) in sweep.runs.iter().zip(runs.iter_mut()) {
        if r.phase != Phase::Done {
            r.estimate = rate.map(|k| k * work(p));
        }
    }
    let mut per_shard: Vec<ShardStatus> = (0..shards)
        .map(|shard| ShardStatus {
            shard,
            ..ShardStatus::default()
        })
        .collect();
    for r in &runs {
        let s = &mut per_shard[r.shard];
        match r.phase {
            Phase::Done => s.done += 1,
            Phase::Running => s.running += 1,
            Phase::Failed => s.failed += 1,
            Phase::Missing => s.missing += 1,
        }
    }
    let untimed = runs
        .iter()
        .filter(|r| r.phase == Phase::Done && r.seconds.is_none())
        .map(|r| r.id.clone())
        .collect();
    let seconds_done = runs.iter().filter_map(|r| r.seconds).sum();
    let remaining: Vec<&RunStatus> = runs.iter().filter(|r| r.phase != Phase::Done).collect();
    let seconds_remaining = rate.map(|_| remaining.iter().filter_map(|r| r.estimate).sum());
    let resubmit = resubmit_command(dir, source, quick, &per_shard, shards);
    Ok(Status {
        grid_runs: runs.len(),
        shards,
        per_shard,
        runs,
        seconds_done,
        untimed,
        seconds_remaining,
        resubmit,
    })
}

/// `sbatch --array=<shards with failed or missing runs> DIR/sweep.sbatch` for an emitted job
/// array (a task whose shard is done exits at once, but need not be queued); else the local
/// sweep command, which skips what is done.
fn resubmit_command(
    dir: &Path,
    source: &str,
    quick: bool,
    per_shard: &[ShardStatus],
    shards: usize,
) -> Option<String> {
    let todo: Vec<String> = per_shard
        .iter()
        .filter(|s| s.failed + s.missing > 0)
        .map(|s| s.shard.to_string())
        .collect();
    if todo.is_empty() {
        return None;
    }
    let script = dir.join("sweep.sbatch");
    if shards > 1 || script.exists() {
        Some(format!(
            "sbatch --array={} {}",
            todo.join(","),
            script.display()
        ))
    } else {
        Some(format!(
            "flscale sweep {source} --out {}{}",
            dir.display(),
            if quick { " --quick" } else { "" }
        ))
    }
}
