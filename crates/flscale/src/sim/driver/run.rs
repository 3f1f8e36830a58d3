//! One experiment from configuration to summary (spec 02). The CLI's `flscale sample` is a
//! thin wrapper around [`run_experiment`], which hands the FCN to [`super::fcn`] and the CNN
//! and attention models to [`super::flat`].

use crate::error::{Error, Result};
use crate::sim::config::{ExperimentConfig, ModelKind, Precision, Start};
use crate::sim::data::Dataset;
use crate::sim::model::fcn::FcnModel;

pub use super::result::{
    ChainRow, Diagnostics, DivergedChain, Histogram, RunResult, StartResults, Summary, TraceRow,
};

/// Runs an experiment. `progress(done, total)` is called after every block of steps.
pub fn run_experiment(
    cfg: &ExperimentConfig,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RunResult> {
    run_experiment_interruptible(cfg, progress, &|| false)
}

/// [`run_experiment`] for an FCN whose chains start from `initial` (per chain and parameter
/// group, the layout of [`RunResult::final_state`]) instead of the prior draw — e.g. from the
/// equilibrated state of another run, so that a sampler can be measured without burn-in
/// bias (`sampling_bench`). `sampler.start` must be "cold" (the hot start would overwrite it).
pub fn run_experiment_from(
    cfg: &ExperimentConfig,
    initial: &[Vec<Vec<f64>>],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RunResult> {
    cfg.validate()?;
    let model = FcnModel::from_config(cfg);
    let shape_ok = cfg.model.kind == ModelKind::Fcn
        && cfg.sampler.start == Start::Cold
        && initial.len() == cfg.sampler.chains
        && initial.iter().all(|chain| {
            chain.len() == model.n_groups()
                && chain
                    .iter()
                    .enumerate()
                    .all(|(g, v)| v.len() == model.group_len(g) && v.iter().all(|a| a.is_finite()))
        });
    if !shape_ok {
        return Err(Error::invalid(format!(
            "an initial state must be given for an FCN run with start = \"cold\", as {} chains of {} finite parameter groups of the model's sizes",
            cfg.sampler.chains,
            model.n_groups()
        )));
    }
    let s = &cfg.sampler;
    let data = Dataset::generate(&cfg.data, &cfg.target, s.seed);
    let never = || false;
    let mut progress = |d: usize, _: usize| progress(d, s.steps);
    let result = match s.precision {
        Precision::F32 => super::fcn::run_once::<f32>(
            cfg,
            &data,
            false,
            s.seed,
            Some(initial),
            &mut progress,
            &never,
        ),
        Precision::F64 => super::fcn::run_once::<f64>(
            cfg,
            &data,
            false,
            s.seed,
            Some(initial),
            &mut progress,
            &never,
        ),
    };
    result.map(|r| with_warnings(cfg, r))
}

/// The run's [`Summary::warnings`].
fn with_warnings(cfg: &ExperimentConfig, mut result: RunResult) -> RunResult {
    result.summary.warnings =
        super::summary::step_warnings(&cfg.sampler, &result.summary.diagnostics);
    result
}

/// [`run_experiment`] that asks `interrupted()` after every block of steps and stops with a
/// runtime error ("interrupted") when it answers true — how the Python bindings honour
/// Ctrl-C during a long run.
pub fn run_experiment_interruptible(
    cfg: &ExperimentConfig,
    progress: &mut dyn FnMut(usize, usize),
    interrupted: &dyn Fn() -> bool,
) -> Result<RunResult> {
    cfg.validate()?;
    let result = match (cfg.model.kind, cfg.sampler.precision) {
        (ModelKind::Fcn, Precision::F32) => {
            super::fcn::run_typed::<f32>(cfg, progress, interrupted)
        }
        (ModelKind::Fcn, Precision::F64) => {
            super::fcn::run_typed::<f64>(cfg, progress, interrupted)
        }
        (_, Precision::F32) => super::flat::run_model::<f32>(cfg, progress, interrupted),
        (_, Precision::F64) => super::flat::run_model::<f64>(cfg, progress, interrupted),
    };
    result.map(|r| with_warnings(cfg, r))
}
