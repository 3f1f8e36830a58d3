//! One experiment from configuration to summary (spec 02): the one entry point [`Run`], which
//! hands the FCN to [`super::fcn`] and the CNN and attention models to [`super::flat`]. The
//! CLI's `flscale sample`, the sweeps and the Python bindings are thin wrappers around it.

use crate::error::{Error, Result};
use crate::sim::config::{ExperimentConfig, ModelKind, Precision, Start};
use crate::sim::data::Dataset;
use crate::sim::model::fcn::FcnModel;
use crate::sim::restraint::Restraint;

use super::engine::RunOptions;
pub use super::outcome::{Outcome, RunObserver, Unobserved};
pub use super::result::{
    ChainRow, Diagnostics, DivergedChain, Histogram, RunResult, StartResults, Summary, TraceRow,
};

/// An experiment to run: `Run::new(&cfg)`, optionally `.start_from(state)`,
/// `.restrain(&restraint)`, `.noise_streams(seed)` and `.observe(&mut observer)`, then `.run()`.
/// Without an observer nothing can stop the run and `run` returns its result; with one it
/// returns an [`Outcome`].
pub struct Run<'a, O = Unobserved> {
    cfg: &'a ExperimentConfig,
    initial: Option<&'a [Vec<Vec<f64>>]>,
    opts: RunOptions<'a>,
    observer: O,
}

impl<'a> Run<'a> {
    /// The experiment `cfg`, its chains drawn from the start `sampler.start` asks for.
    pub fn new(cfg: &'a ExperimentConfig) -> Self {
        Run {
            cfg,
            initial: None,
            opts: RunOptions::default(),
            observer: Unobserved,
        }
    }

    /// Reports progress to `observer` after every block of steps and stops when it asks.
    pub fn observe<'o>(
        self,
        observer: &'o mut dyn RunObserver,
    ) -> Run<'a, &'o mut dyn RunObserver> {
        Run {
            cfg: self.cfg,
            initial: self.initial,
            opts: self.opts,
            observer,
        }
    }

    /// Runs the experiment to the end.
    pub fn run(self) -> Result<RunResult> {
        let mut observer = Unobserved;
        execute(self.cfg, self.initial, self.opts, &mut observer)?.into_result()
    }
}

impl<'a, O> Run<'a, O> {
    /// Starts an FCN's chains from `initial` (per chain and parameter group, the layout of
    /// [`RunResult::final_state`]) instead of the prior draw — e.g. from the equilibrated
    /// state of another run, so that a sampler can be measured without burn-in bias
    /// (`sampling_bench`). `sampler.start` must be "cold" (the hot start would overwrite it).
    pub fn start_from(self, initial: &'a [Vec<Vec<f64>>]) -> Self {
        Run {
            initial: Some(initial),
            ..self
        }
    }

    /// Samples exp(−(U + V)/T) with the bias V of `restraint` (an umbrella window), with every
    /// kernel; the result's [`RunResult::restrained`] holds each chain's order parameter and
    /// observables after burn-in.
    pub fn restrain(self, restraint: &'a Restraint) -> Self {
        Run {
            opts: RunOptions {
                restraint: Some(restraint),
                ..self.opts
            },
            ..self
        }
    }

    /// Draws the chains' noise streams (and the hot start's, through
    /// [`crate::sim::driver::coupling::start_seed`]) from `seed` instead of `sampler.seed`;
    /// the data and the teacher still come from `sampler.seed`. Umbrella windows use it so that
    /// every window sees the same training set with independent noise.
    pub fn noise_streams(self, seed: u64) -> Self {
        Run {
            opts: RunOptions {
                streams: Some(seed),
                ..self.opts
            },
            ..self
        }
    }
}

impl Run<'_, &mut dyn RunObserver> {
    /// Runs the experiment until its last step or until the observer asks to stop.
    pub fn run(self) -> Result<Outcome> {
        execute(self.cfg, self.initial, self.opts, self.observer)
    }
}

/// Validates `cfg` and runs it in its model's driver and precision.
fn execute(
    cfg: &ExperimentConfig,
    initial: Option<&[Vec<Vec<f64>>]>,
    opts: RunOptions<'_>,
    observer: &mut dyn RunObserver,
) -> Result<Outcome> {
    cfg.validate()?;
    let outcome = match initial {
        Some(initial) => run_from(cfg, initial, opts, observer)?,
        None => match (cfg.model.kind(), cfg.sampler.precision) {
            (ModelKind::Fcn, Precision::F32) => super::fcn::run_typed::<f32>(cfg, opts, observer),
            (ModelKind::Fcn, Precision::F64) => super::fcn::run_typed::<f64>(cfg, opts, observer),
            (_, Precision::F32) => super::flat::run_model::<f32>(cfg, opts, observer)?,
            (_, Precision::F64) => super::flat::run_model::<f64>(cfg, opts, observer)?,
        },
    };
    Ok(match outcome {
        Outcome::Completed(result) => Outcome::Completed(with_warnings(cfg, result)),
        interrupted => interrupted,
    })
}

/// An FCN run from `initial` ([`Run::start_from`]), after checking its shape.
fn run_from(
    cfg: &ExperimentConfig,
    initial: &[Vec<Vec<f64>>],
    opts: RunOptions<'_>,
    observer: &mut dyn RunObserver,
) -> Result<Outcome> {
    let model = FcnModel::from_config(cfg);
    let shape_ok = cfg.model.kind() == ModelKind::Fcn
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
    let (seed, restraint) = (opts.streams(s), opts.restraint);
    Ok(match s.precision {
        Precision::F32 => {
            super::fcn::run_once::<f32>(cfg, &data, false, seed, Some(initial), restraint, observer)
        }
        Precision::F64 => {
            super::fcn::run_once::<f64>(cfg, &data, false, seed, Some(initial), restraint, observer)
        }
    })
}

/// The run's [`Summary::warnings`].
fn with_warnings(cfg: &ExperimentConfig, mut result: RunResult) -> RunResult {
    result.summary.warnings =
        super::summary::step_warnings(&cfg.sampler, &result.summary.diagnostics);
    result
}
