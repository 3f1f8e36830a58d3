//! Cold, hot or compared starts (spec 02): the one- or two-ensemble run of both engines.

use crate::error::Result;
use crate::sim::config::Start;

use super::result::{RunResult, StartResults};

/// Runs one ensemble: `(hot, progress)` → its results, from a hot start when `hot`.
pub(crate) type RunOneStart<'a> =
    dyn FnMut(bool, &mut dyn FnMut(usize, usize)) -> Result<RunResult> + 'a;

/// Runs the ensemble(s) that `sampler.start` asks for — `run_one(hot, progress)` runs one
/// from a cold or a hot start — and, for "both", reports the hot one beside the cold one with
/// the "not equilibrated" verdict (spec 02: hysteresis of a first-order transition is
/// reported, not averaged away). Shared by the FCN and the flat-parameter engines.
pub(crate) fn run_starts(
    start: Start,
    steps: usize,
    progress: &mut dyn FnMut(usize, usize),
    run_one: &mut RunOneStart<'_>,
) -> Result<RunResult> {
    match start {
        Start::Cold => run_one(false, &mut |d, _| progress(d, steps)),
        Start::Hot => run_one(true, &mut |d, _| progress(d, steps)),
        Start::Both => {
            let total = 2 * steps;
            let mut cold = run_one(false, &mut |d, _| progress(d, total))?;
            let hot = run_one(true, &mut |d, _| progress(steps + d, total))?;
            let verdict =
                crate::sim::observe::equilibration::compare_starts(&cold.summary, &hot.summary);
            cold.summary.hot_start = Some(StartResults::of(&hot.summary));
            cold.summary.equilibrated = verdict.equilibrated;
            cold.summary.equilibration = Some(verdict);
            cold.seconds += hot.seconds;
            cold.steps += hot.steps;
            Ok(cold)
        }
    }
}
