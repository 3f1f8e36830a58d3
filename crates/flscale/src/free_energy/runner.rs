//! Running a plan's windows stage by stage, keeping every finished window in a directory so
//! that a rerun resumes and shards (a subset of windows per invocation) add up: the loop the
//! `flscale free-energy` command and `flscale.free_energy` share.
//!
//! A flattened plan ([`FreeEnergyPlan::needs_pilot`]) runs its pilot windows first (kept in
//! `DIR/pilot/`), estimates the flattening bias from them ([`super::flatten`]) and then runs the
//! umbrella windows (kept in `DIR/windows/`); a plan without flattening runs the umbrella
//! windows only. Each window is read back from its file after it is written, so that a resumed
//! run and an uninterrupted one analyse the same numbers.

use std::path::{Path, PathBuf};

use super::output::{read_window, write_window};
use super::window::{FreeEnergyPlan, Stage, WindowRun};
use crate::error::Result;
use crate::sim::driver::outcome::{Outcome, RunObserver};

/// The directory of a stage's window files under the output directory.
pub fn stage_dir(out: &Path, stage: Stage) -> PathBuf {
    out.join(match stage {
        Stage::Pilot => "pilot",
        Stage::Umbrella => "windows",
    })
}

/// A front end's view of the windows: the run observer of each window plus its start and end.
pub trait WindowObserver: RunObserver {
    /// Window `k` of `stage` starts, the `index`-th (from 0) of the `count` this call runs.
    fn window_started(&mut self, _stage: Stage, _k: usize, _index: usize, _count: usize) {}

    /// A window finished (before it is written).
    fn window_finished(&mut self, _plan: &FreeEnergyPlan, _run: &WindowRun) {}
}

/// What one stage did with the windows it was asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct StageProgress {
    /// The stage.
    pub stage: Stage,
    /// Windows run by this call.
    pub run: Vec<usize>,
    /// Windows asked for that were already kept.
    pub kept: Vec<usize>,
    /// Windows of the stage that are still missing.
    pub missing: Vec<usize>,
}

/// How a call ended.
#[derive(Debug, Clone)]
pub enum Progress {
    /// Every window of the last stage is there: the plan (flattened if it was to be) and its
    /// windows, ready for [`FreeEnergyPlan::analyse`].
    Complete {
        plan: Box<FreeEnergyPlan>,
        runs: Vec<WindowRun>,
        stages: Vec<StageProgress>,
    },
    /// Some windows of a stage are missing (a shard ran its subset); the last entry of
    /// `stages` names them.
    Waiting { stages: Vec<StageProgress> },
    /// The observer stopped window `window` of `stage`; finished windows are kept.
    Interrupted {
        stage: Stage,
        window: usize,
        stages: Vec<StageProgress>,
    },
}

/// Runs the windows `which` (all when None) of every stage of `plan` that `out` does not hold
/// yet (module docs); without `out` every window runs in memory.
pub fn run_free_energy<O: WindowObserver>(
    plan: &FreeEnergyPlan,
    out: Option<&Path>,
    which: Option<&[usize]>,
    observer: &mut O,
) -> Result<Progress> {
    let mut stages = Vec::new();
    let plan = if plan.needs_pilot() {
        let pilot = plan.pilot()?;
        let dir = out.map(|o| stage_dir(o, Stage::Pilot));
        let (runs, progress) = match run_stage(&pilot, dir.as_deref(), which, observer)? {
            StageOutcome::Done(runs, progress) => (runs, progress),
            StageOutcome::Interrupted(window, progress) => {
                stages.push(progress);
                return Ok(Progress::Interrupted {
                    stage: Stage::Pilot,
                    window,
                    stages,
                });
            }
        };
        let waiting = !progress.missing.is_empty();
        stages.push(progress);
        if waiting {
            return Ok(Progress::Waiting { stages });
        }
        plan.flattened(&pilot, &runs)?
    } else {
        plan.clone()
    };
    let dir = out.map(|o| stage_dir(o, Stage::Umbrella));
    match run_stage(&plan, dir.as_deref(), which, observer)? {
        StageOutcome::Done(runs, progress) => {
            let waiting = !progress.missing.is_empty();
            stages.push(progress);
            Ok(if waiting {
                Progress::Waiting { stages }
            } else {
                Progress::Complete {
                    plan: Box::new(plan),
                    runs,
                    stages,
                }
            })
        }
        StageOutcome::Interrupted(window, progress) => {
            stages.push(progress);
            Ok(Progress::Interrupted {
                stage: Stage::Umbrella,
                window,
                stages,
            })
        }
    }
}

enum StageOutcome {
    /// The stage's windows that exist now (all of them when `missing` is empty).
    Done(Vec<WindowRun>, StageProgress),
    Interrupted(usize, StageProgress),
}

/// One stage: reads the kept windows, runs those of `which` that are missing, writes each.
fn run_stage<O: WindowObserver>(
    plan: &FreeEnergyPlan,
    dir: Option<&Path>,
    which: Option<&[usize]>,
    observer: &mut O,
) -> Result<StageOutcome> {
    let k = plan.windows();
    // Every kept file is checked before anything runs: a directory of another plan is refused
    // at once, not after the first window.
    let mut runs: Vec<Option<WindowRun>> = Vec::with_capacity(k);
    for w in 0..k {
        runs.push(match dir {
            Some(d) => read_window(d, plan, w)?,
            None => None,
        });
    }
    let asked: Vec<usize> = match which {
        Some(list) => list.iter().copied().filter(|&w| w < k).collect(),
        None => (0..k).collect(),
    };
    let (kept, todo): (Vec<usize>, Vec<usize>) = asked.iter().partition(|&&w| runs[w].is_some());
    let mut progress = StageProgress {
        stage: plan.stage,
        run: Vec::new(),
        kept,
        missing: Vec::new(),
    };
    for (i, &w) in todo.iter().enumerate() {
        observer.window_started(plan.stage, w, i, todo.len());
        let run = match plan.run_window(w, observer)? {
            Outcome::Completed(run) => run,
            Outcome::Interrupted { .. } => {
                progress.missing = (0..k).filter(|&w| runs[w].is_none()).collect();
                return Ok(StageOutcome::Interrupted(w, progress));
            }
        };
        observer.window_finished(plan, &run);
        runs[w] = match dir {
            Some(d) => {
                write_window(d, plan, &run)?;
                read_window(d, plan, w)?
            }
            None => Some(run),
        };
        progress.run.push(w);
    }
    progress.missing = (0..k).filter(|&w| runs[w].is_none()).collect();
    Ok(StageOutcome::Done(
        runs.into_iter().flatten().collect(),
        progress,
    ))
}

impl WindowObserver for crate::sim::driver::outcome::Unobserved {}
