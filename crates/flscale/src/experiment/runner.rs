//! Running a sweep into its results store (spec 03 "Sweeps", "Results store", "Resume"):
//! the loop shared by `flscale sweep`, `flscale reproduce` and the Python `flscale.sweep`.
//! Progress reporting is an observer, so the library stays free of terminal code.

use std::path::Path;

use serde::Serialize;

use super::claim::Claim;
use super::integrity::{self, RunState};
use super::io::{machine, utc_now, write_atomic};
use super::results::rebuild_verified;
use super::store::{self, Store};
use super::sweep::{show_value, RunPlan, Sweep};
use super::table::ResultsFormat;
use crate::error::{Error, Result};
use crate::sim::driver::run::{Outcome, Run, RunObserver};

/// What a sweep did.
#[derive(Debug, Clone, Serialize)]
pub struct SweepOutcome {
    /// Results directory.
    pub dir: String,
    /// Runs in the whole grid.
    pub grid_runs: usize,
    /// Runs of this shard.
    pub shard_runs: usize,
    /// Runs computed now.
    pub computed: usize,
    /// Runs skipped because they had finished before.
    pub skipped: usize,
    /// Finished runs in the directory after the sweep.
    pub finished: usize,
    /// Runs in which every chain diverged.
    pub all_diverged: Vec<String>,
    /// Runs left to another live process that holds their claim (a second sweep into the same
    /// directory); they are not computed twice.
    pub busy: Vec<String>,
    /// Runs whose directory was damaged and that were computed again.
    pub recomputed: Vec<String>,
}

/// Hooks a front end uses to show progress; every method has a silent default.
pub trait SweepObserver {
    /// The sweep will compute `todo` runs (finished ones are skipped).
    fn start(&mut self, _todo: usize) {}
    /// Run number `k` (0-based among those computed now) begins; `label` lists its grid point.
    fn run_started(&mut self, _k: usize, _id: &str, _label: &str) {}
    /// Steps done within the current run.
    fn run_progress(&mut self, _k: usize, _id: &str, _label: &str, _done: usize, _total: usize) {}
    /// Run `id` finished; `all_diverged` when every chain diverged.
    fn run_finished(&mut self, _k: usize, _id: &str, _label: &str, _all_diverged: bool) {}
    /// Asked after every block of steps: true stops the sweep ("interrupted"); finished runs
    /// stay on disk and a re-run resumes.
    fn interrupted(&self) -> bool {
        false
    }
}

/// An observer that shows nothing.
pub struct Silent;

impl SweepObserver for Silent {}

/// What [`run_plans`] did.
#[derive(Debug, Clone, Default)]
pub struct PlansOutcome {
    /// Runs computed now.
    pub computed: usize,
    /// Runs found finished after claiming them (another process wrote them in between).
    pub finished_meanwhile: Vec<String>,
    /// Runs left to another live process that holds their claim.
    pub busy: Vec<String>,
    /// Runs in which every chain diverged.
    pub all_diverged: Vec<String>,
}

/// Computes `todo` one after the other into `store`, each under its claim (so that two
/// processes never compute the same run) and written atomically when it finishes. Shared by
/// the grid ([`run_sweep`]) and the P\* refinement ([`super::refine`]).
pub fn run_plans(
    store: &Store,
    todo: &[&RunPlan],
    observer: &mut dyn SweepObserver,
) -> Result<PlansOutcome> {
    observer.start(todo.len());
    let mut out = PlansOutcome::default();
    let runs_dir = store.dir.join("runs");
    for (k, plan) in todo.iter().enumerate() {
        // The claim makes this process the only one computing the run; a finished run found
        // after claiming was written by another process in between.
        let Some(mut claim) = Claim::acquire(&runs_dir, &plan.id)? else {
            out.busy.push(plan.id.clone());
            continue;
        };
        if integrity::is_intact(&store.run_dir(&plan.id)) {
            out.finished_meanwhile.push(plan.id.clone());
            continue;
        }
        let label = plan
            .point
            .iter()
            .map(|(f, v)| format!("{f}={}", show_value(v)))
            .collect::<Vec<_>>()
            .join(" ");
        observer.run_started(k, &plan.id, &label);
        let mut watch = PlanObserver {
            claim: &mut claim,
            sweep: &mut *observer,
            k,
            id: &plan.id,
            label: &label,
        };
        let result = Run::new(&plan.config)
            .observe(&mut watch)
            .run()
            .and_then(Outcome::into_result)
            .map_err(|e| e.context(format!("{} ({label})", plan.id)))?;
        if result.all_diverged() {
            out.all_diverged.push(plan.id.clone());
        }
        store.write_run(plan, &result)?;
        drop(claim);
        out.computed += 1;
        observer.run_finished(k, &plan.id, &label, result.all_diverged());
    }
    Ok(out)
}

/// One run of a sweep as its [`RunObserver`]: progress keeps the run's claim alive and goes
/// to the sweep's observer, which also says when to stop.
struct PlanObserver<'a> {
    claim: &'a mut Claim,
    sweep: &'a mut dyn SweepObserver,
    k: usize,
    id: &'a str,
    label: &'a str,
}

impl RunObserver for PlanObserver<'_> {
    fn progress(&mut self, done: usize, total: usize) {
        self.claim.heartbeat();
        self.sweep
            .run_progress(self.k, self.id, self.label, done, total);
    }

    fn should_stop(&mut self) -> bool {
        self.sweep.interrupted()
    }
}

/// Runs `sweep` (or shard `shard` = (i, n)) into `dir`, writing the aggregate tables in
/// `format`; `text` is the experiment file's text, `git_revision` goes into the manifest,
/// `command` into the timing file.
#[allow(clippy::too_many_arguments)]
pub fn run_sweep(
    sweep: &Sweep,
    text: &str,
    dir: &Path,
    shard: Option<(usize, usize)>,
    format: ResultsFormat,
    git_revision: Option<&str>,
    command: &[String],
    observer: &mut dyn SweepObserver,
) -> Result<SweepOutcome> {
    let manifest = store::manifest(sweep, text, git_revision);
    let store = Store::create(dir, &manifest)?;
    let (i, n) = shard.unwrap_or((0, 1));
    let plans = sweep.shard(i, n);
    let timing_name = match shard {
        Some((i, n)) => format!("timing-shard-{i}-of-{n}.json"),
        None => "timing.json".to_string(),
    };
    // Clock times and the machine go into a timing file of their own, so that every other
    // file of an interrupted-and-resumed sweep equals an uninterrupted one.
    let started = utc_now();
    let timing = |finished: Option<String>, computed: usize| {
        serde_json::json!({
            "started": started,
            "finished": finished,
            "shard": shard.map(|(i, n)| format!("{i}/{n}")),
            "runs_computed": computed,
            "machine": machine(),
            "command": command,
        })
    };
    let write_timing = |v: serde_json::Value| -> Result<()> {
        let text = serde_json::to_string_pretty(&v)
            .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?;
        write_atomic(&dir.join(&timing_name), (text + "\n").as_bytes())
    };
    write_timing(timing(None, 0))?;
    let mut recomputed = Vec::new();
    let states: std::collections::BTreeMap<String, RunState> = integrity::survey(dir, &manifest)?
        .runs
        .into_iter()
        .collect();
    let todo: Vec<&RunPlan> = plans
        .iter()
        .copied()
        .filter(|p| match states.get(&p.id).unwrap_or(&RunState::Missing) {
            RunState::Intact { .. } => false,
            RunState::Damaged(_) => {
                recomputed.push(p.id.clone());
                true
            }
            RunState::Missing => true,
        })
        .collect();
    let done = run_plans(&store, &todo, observer)?;
    let skipped = plans.len() - todo.len() + done.finished_meanwhile.len();
    recomputed.retain(|id| !done.finished_meanwhile.contains(id));
    let (finished, total, _) = rebuild_verified(&store, format, false)?;
    write_timing(timing(Some(utc_now()), done.computed))?;
    Ok(SweepOutcome {
        dir: dir.display().to_string(),
        grid_runs: total,
        shard_runs: plans.len(),
        computed: done.computed,
        skipped,
        finished,
        all_diverged: done.all_diverged,
        busy: done.busy,
        recomputed,
    })
}
