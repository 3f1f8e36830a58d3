//! The one sampling loop of every model: burn-in with step-size and preconditioner
//! adaptation, the replica ladder, advancing the chains with the transition the sampler
//! settings ask for, a measurement every `thin` steps, progress and interruption. What a
//! measurement records is the model's [`Recorder`] (the FCN's in [`super::fcn`], the CNN's and
//! attention's in [`super::flat`]); progress goes to the front end's [`RunObserver`].

use crate::sim::adapt::{adaptation_interval, MetricWindows, StepSteering};
use crate::sim::config::{MetricKind, Preconditioner, SamplerConfig, SamplerMethod};
use crate::sim::ensemble::fcn::{Dynamics, Ensemble};
use crate::sim::kernel::mala::Kernel;
use crate::sim::kernel::transition::Transition;
use crate::sim::model::interface::Model;
use crate::sim::num::real::Real;
use crate::sim::observe::observables::{finite, ChainAccumulator, Measurement};
use crate::sim::restraint::Restraint;

use super::coupling::{records_sketches, sketch, ParameterSketches};
use super::outcome::{Outcome, RunObserver};
use super::result::{RestrainedChain, RunResult};
use super::tempered::{slot_seed, Replicas, TemperingDiagnostics};

/// What a run may change besides its configuration: a bias on the chains and the seed of their
/// noise streams.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RunOptions<'a> {
    /// [`super::run::Run::restrain`].
    pub restraint: Option<&'a Restraint>,
    /// [`super::run::Run::noise_streams`].
    pub streams: Option<u64>,
}

impl RunOptions<'_> {
    /// The seed the chains' noise streams derive from: [`super::run::Run::noise_streams`]'s, else
    /// `sampler.seed`.
    pub fn streams(&self, s: &SamplerConfig) -> u64 {
        self.streams.unwrap_or(s.seed)
    }
}

/// A measurement time: the step, and whether burn-in is over.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MeasurementTime {
    /// Steps taken.
    pub t: usize,
    /// After burn-in: the measurement enters the averages.
    pub sampling: bool,
}

/// What a run records at every measurement time.
pub(crate) trait Recorder<T: Real, M: Model<T>> {
    /// Records the chains of `ens` at `at`; `transition` is the run's, for the collapsed
    /// posterior's readout draws and conditional means.
    fn record(
        &mut self,
        ens: &mut Ensemble<T, M>,
        transition: &mut Transition<T>,
        at: MeasurementTime,
    );
}

/// A finished loop: the β = 1 ensemble and its transition, and what the summary reports of
/// them.
pub(crate) struct Sampled<T: Real, M: Model<T>> {
    pub ens: Ensemble<T, M>,
    pub transition: Transition<T>,
    /// The largest λ_max over the chains at the end.
    pub lambda: f64,
    /// Replica exchange's diagnostics (`sampler.tempering`).
    pub tempering: Option<TemperingDiagnostics>,
    /// Wall time of the whole loop and of its part after burn-in.
    pub seconds: f64,
    pub sampling_seconds: f64,
    /// The seed of the chains' noise streams (`s.seed` of [`sample`]).
    pub seed: u64,
    /// Coupled starts: every chain's parameter sketch at every measurement.
    pub sketches: ParameterSketches,
    /// Restrained runs: the order parameter s of every chain (None once stopped) at every
    /// measurement after burn-in, the times the recorder's sampling measurements are taken.
    pub order_trace: Vec<Vec<Option<f64>>>,
}

/// Runs `s.steps` steps of the ensemble `start(seed)` (every replica of a tempered run is
/// `start` with its own noise streams, [`slot_seed`]), with `recorder` called every `thin`
/// steps, progress reported to `observer` after every block of steps and the run stopped where
/// it asks. With a `restraint` every chain samples the biased density exp(−(U + V)/T)
/// ([`Restraint`]) and its order parameter is kept at every measurement after burn-in.
pub(crate) fn sample<T: Real, M: Model<T>>(
    s: &SamplerConfig,
    start: impl Fn(u64) -> Ensemble<T, M>,
    restraint: Option<&Restraint>,
    recorder: &mut dyn Recorder<T, M>,
    observer: &mut dyn RunObserver,
) -> Outcome<Sampled<T, M>> {
    let mut ens = start(s.seed);
    // The collapsed posterior, MALA, replica exchange, a restraint and the diagonal metric
    // run on the cached-gradient kernel; plain ULA keeps the ensemble's fused step.
    let tempered = s.tempering().is_some();
    let cached = s.method == SamplerMethod::Collapsed
        || s.proposal.is_metropolis()
        || tempered
        || restraint.is_some()
        || s.metric == MetricKind::Diag;
    let mut transition = if cached {
        Transition::Cached(new_kernel(&ens, s, restraint))
    } else {
        Transition::FusedUla
    };
    let mut replicas = s.tempering().map(|t| {
        Replicas::new(
            t,
            s,
            s.chains,
            move |slot| start(slot_seed(s.seed, slot)),
            |ens: &Ensemble<T, M>| new_kernel(ens, s, restraint),
        )
    });
    let mut steering = StepSteering::new(
        s.proposal.is_metropolis(),
        s.proposal.leapfrog_steps().is_some(),
    );
    let mut sketches = ParameterSketches::default();
    let mut order_trace = Vec::new();
    let sketching = records_sketches(s.start, s.starts_coupling);
    let started = std::time::Instant::now();
    let mut window_start = (s.burn_in == 0).then_some(started);
    let mut t = 0;
    let adapt_every = adaptation_interval(s.thin, s.burn_in);
    observer.progress(0, s.steps);
    while t < s.steps {
        if t <= s.burn_in && t % adapt_every == 0 {
            adapt_in_burn_in(
                &mut ens,
                &mut transition,
                &mut replicas,
                &mut steering,
                s,
                t,
            );
        }
        if let Some(r) = restraint {
            ramp_restraint(&mut transition, &mut replicas, r, t, s.burn_in);
        }
        let before = t;
        t = advance_block(&mut ens, &mut transition, &mut replicas, s, t);
        if let (Some(r), true) = (&mut replicas, before < s.burn_in && t >= s.burn_in) {
            r.start_window();
        }
        if t % s.thin == 0 {
            let at = MeasurementTime {
                t,
                sampling: t > s.burn_in,
            };
            recorder.record(&mut ens, &mut transition, at);
            if let (Some(r), true) = (restraint, at.sampling) {
                order_trace.push(chain_order_values(&ens, r));
            }
            if sketching {
                sketches.steps.push(t);
                sketches.chains.push(chain_sketches(&ens));
            }
        }
        if t >= s.burn_in && window_start.is_none() {
            window_start = Some(std::time::Instant::now());
        }
        observer.progress(t, s.steps);
        if observer.should_stop() {
            return Outcome::Interrupted {
                at: t,
                steps: s.steps,
            };
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let sampling_seconds = window_start.map_or(0.0, |w| w.elapsed().as_secs_f64());
    let lambda = max_lambda(&mut ens, &mut transition, 20);
    let tempering = replicas.as_ref().map(|r| r.finish(&mut ens));
    Outcome::Completed(Sampled {
        ens,
        transition,
        lambda,
        tempering,
        seconds,
        sampling_seconds,
        seed: s.seed,
        sketches,
        order_trace,
    })
}

/// Every chain that survived a restrained run, with its order parameter from `order_trace`
/// ([`Sampled::order_trace`]) beside the observables its accumulator kept at the same
/// measurements.
pub(crate) fn restrained_chains(
    order_trace: &[Vec<Option<f64>>],
    acc: &[ChainAccumulator],
) -> Vec<RestrainedChain> {
    if order_trace.is_empty() {
        return Vec::new();
    }
    (0..acc.len())
        .filter_map(|k| {
            let s: Option<Vec<f64>> = order_trace
                .iter()
                .map(|at| at.get(k).copied().flatten())
                .collect();
            let kept: Vec<&Measurement> = acc[k]
                .series
                .iter()
                .filter(|(sampling, _)| *sampling)
                .map(|(_, m)| m)
                .collect();
            let s = s.filter(|s| s.len() == kept.len())?;
            Some(RestrainedChain {
                chain: k,
                s,
                alignment: kept.iter().map(|m| m.alignment).collect(),
                test_mse: kept.iter().map(|m| m.test_mse).collect(),
                outliers: kept.iter().map(|m| m.outliers as f64).collect(),
            })
        })
        .collect()
}

/// Every chain's order parameter s ([`Restraint::order_value`]); None for a stopped chain.
fn chain_order_values<T: Real, M: Model<T>>(
    ens: &Ensemble<T, M>,
    r: &Restraint,
) -> Vec<Option<f64>> {
    (0..ens.chains())
        .map(|k| {
            ens.alive(k)
                .then(|| r.order_value(&ens.chain_group(k, r.group())))
        })
        .collect()
}

/// Every chain's sketch ([`sketch`]) over all its parameter groups; None for a stopped chain.
fn chain_sketches<T: Real, M: Model<T>>(
    ens: &Ensemble<T, M>,
) -> Vec<Option<[f64; super::coupling::SKETCH_ROWS]>> {
    (0..ens.chains())
        .map(|k| {
            ens.alive(k).then(|| {
                let groups: Vec<Vec<f64>> = (0..ens.model.n_groups())
                    .map(|g| ens.chain_group(k, g))
                    .collect();
                sketch(groups.iter().flatten().copied())
            })
        })
        .collect()
}

/// The ensemble of `model` on the training set (`x`, `y`) that the sampler settings ask for:
/// E chains from the prior, noise streams of `seed`, κ, η, T and the likelihood of `s`.
pub(crate) fn new_ensemble<T: Real, M: Model<T>>(
    s: &SamplerConfig,
    model: M,
    x: &[f64],
    y: &[f64],
    seed: u64,
) -> Ensemble<T, M> {
    let dynamics = Dynamics {
        kappa: s.kappa,
        step: s.step,
        temperature: s.temperature,
    };
    let mut ens = Ensemble::new(model, x, y, s.chains, seed, dynamics, None);
    ens.likelihood = s.likelihood;
    ens
}

/// Every chain's parameters per group (f64), the layout of [`RunResult::final_state`].
pub(crate) fn final_state<T: Real, M: Model<T>>(ens: &Ensemble<T, M>) -> Vec<Vec<Vec<f64>>> {
    (0..ens.chains())
        .map(|k| {
            (0..ens.model.n_groups())
                .map(|g| ens.chain_group(k, g))
                .collect()
        })
        .collect()
}

/// The cached-gradient kernel the sampler settings ask for, under `restraint` if any.
fn new_kernel<T: Real, M: Model<T>>(
    ens: &Ensemble<T, M>,
    s: &SamplerConfig,
    restraint: Option<&Restraint>,
) -> Kernel<T> {
    let mut k = Kernel::new(ens, s.method, s.proposal);
    k.preconditioner = s.preconditioner.unwrap_or(Preconditioner::Block);
    k.metric = s.metric;
    k.restraint = restraint.cloned();
    k
}

/// Moves every chain from step `t` to the next measurement time (or, under replica exchange,
/// swap round); returns the new step.
fn advance_block<T: Real, M: Model<T>>(
    ens: &mut Ensemble<T, M>,
    transition: &mut Transition<T>,
    replicas: &mut Option<Replicas<T, M>>,
    s: &SamplerConfig,
    t: usize,
) -> usize {
    let mut next = ((t / s.thin + 1) * s.thin).min(s.steps);
    match (transition, replicas) {
        (Transition::Cached(k), Some(r)) => {
            // Swap rounds fall on multiples of swap_every.
            let every = s.tempering().map_or(1, |c| c.swap_every);
            next = next.min((t / every + 1) * every);
            r.advance(ens, k, next - t, next, t >= s.burn_in);
        }
        (transition, _) => transition.advance(ens, next - t),
    }
    next
}

/// The restraint's strength at step t of a burn-in of `burn_in` steps: λ = 2t/burn_in over the
/// first half, 1 from then on (and without burn-in).
pub(crate) fn restraint_ramp(t: usize, burn_in: usize) -> f64 {
    if burn_in == 0 {
        1.0
    } else {
        (2.0 * t as f64 / burn_in as f64).min(1.0)
    }
}

/// Sets the kernels' restraint to λV at step t ([`restraint_ramp`]) while λ < 1, and to V at the
/// first block where λ reaches 1. Chains start from the unbiased initial state, often far from
/// the window's centre; switched on at full strength, the restraint's force there is so large
/// that MALA's proposals overshoot and every one is rejected — a chain started in the tails of
/// a steep potential stays where it is (MALA is not geometrically ergodic there; Roberts &
/// Tweedie, Bernoulli 2, 341 (1996), sec. 4.2), which froze whole chains of stiff windows. Grown
/// over the first half of burn-in, the restraint pulls every chain to its centre while the
/// step adapts; from then on the bias is constant, so the kept samples are exact for it. The
/// kernels' cached energies and gradients are forgotten at every change.
fn ramp_restraint<T: Real, M: Model<T>>(
    transition: &mut Transition<T>,
    replicas: &mut Option<Replicas<T, M>>,
    restraint: &Restraint,
    t: usize,
    burn_in: usize,
) {
    let lambda = restraint_ramp(t, burn_in);
    let previous = if t == 0 {
        0.0
    } else {
        restraint_ramp(t.saturating_sub(1), burn_in)
    };
    if previous >= 1.0 && t > 0 {
        return;
    }
    let scaled = restraint.scaled(lambda);
    if let Transition::Cached(k) = transition {
        k.restraint = Some(scaled.clone());
        k.invalidate();
    }
    if let Some(r) = replicas {
        r.set_restraint(&scaled);
    }
}

/// Burn-in step `t` at an adaptation time: the step size (and the collapsed sampler's
/// preconditioner) from the stiffest chain where `adapt_step` is set, and the replica ladder.
fn adapt_in_burn_in<T: Real, M: Model<T>>(
    ens: &mut Ensemble<T, M>,
    transition: &mut Transition<T>,
    replicas: &mut Option<Replicas<T, M>>,
    steering: &mut StepSteering,
    s: &SamplerConfig,
    t: usize,
) {
    if s.adapt_step {
        adapt_step_size(ens, transition, steering, s, t);
        if let Some(r) = replicas {
            r.adapt(ens, t, s.burn_in, |e, k, st| {
                adapt_step_size(e, k, st, s, t)
            });
        }
    } else if let Some(r) = replicas {
        r.adapt(ens, t, s.burn_in, |_, _, _| {});
    }
}

/// The largest λ_max over the chains, of the energy the transition samples.
fn max_lambda<T: Real, M: Model<T>>(
    ens: &mut Ensemble<T, M>,
    transition: &mut Transition<T>,
    iters: usize,
) -> f64 {
    let per_chain = transition.lambda_max(ens, iters);
    per_chain.into_iter().fold(0.0, f64::max)
}

/// Spec 02 (a): adapt during burn-in only, from the stiffest chain (for the collapsed sampler
/// after its per-unit preconditioner, also frozen afterwards). With the diagonal metric, a
/// window ending at `t` sets the metric first ([`MetricWindows`]) and restarts the step's
/// dual averaging, so that η is fitted to the new metric; the next window's gathering starts.
fn adapt_step_size<T: Real, M: Model<T>>(
    ens: &mut Ensemble<T, M>,
    transition: &mut Transition<T>,
    steering: &mut StepSteering,
    s: &SamplerConfig,
    t: usize,
) {
    let counts = transition.acceptance(ens);
    if let Some(k) = transition.kernel_mut() {
        k.adapt_preconditioner(ens, 2 * t >= s.burn_in);
        if s.metric == MetricKind::Diag {
            let windows = MetricWindows::new(s.burn_in, adaptation_interval(s.thin, s.burn_in));
            if windows.ends_at(t) && k.end_metric_window(ens) {
                steering.restart(counts);
            }
            k.gather_variances(windows.gathering(t));
        }
    }
    let lambda = max_lambda(ens, transition, 10);
    if lambda > 0.0 {
        let counts = transition.acceptance(ens);
        let last = t + adaptation_interval(s.thin, s.burn_in) > s.burn_in;
        // `step` bounds η in the units of M = I; once a diagonal metric is set, η is in the
        // metric's units (the move is ηM∇U), where only η·λ_max of KᵀHK and the acceptance
        // steering mean anything.
        let bound = match transition.kernel() {
            Some(k) if k.has_diagonal_metric() => f64::INFINITY,
            _ => s.step,
        };
        ens.dynamics.step = bound.min(steering.fraction(counts, last) / lambda);
    }
}

/// The sampler's health at the end: the step, λ_max and η·λ_max, the acceptance rate; the
/// start and the replica ladder.
pub(crate) fn record_health<T: Real, M: Model<T>>(
    result: &mut RunResult,
    sampled: &Sampled<T, M>,
    hot: bool,
) {
    let (ens, lambda) = (&sampled.ens, sampled.lambda);
    let dg = &mut result.summary.diagnostics;
    dg.step = ens.dynamics.step;
    dg.lambda_max = (lambda > 0.0).then_some(lambda).and_then(finite);
    dg.step_times_lambda_max = dg.lambda_max.map(|l| l * ens.dynamics.step);
    dg.acceptance_rate = sampled.transition.acceptance_rate(ens).and_then(finite);
    if let Some(k) = sampled.transition.kernel() {
        dg.metric = k.metric_record(ens);
        result.metric_diagonal = k.metric_diagonal(ens);
    } else {
        dg.metric.kind = MetricKind::Identity.name().to_string();
    }
    result.summary.start = if hot { "hot" } else { "cold" }.to_string();
    let seeds = &mut result.summary.start_seeds;
    *(if hot { &mut seeds.hot } else { &mut seeds.cold }) = Some(sampled.seed);
    result.parameter_sketches = sampled.sketches.clone();
    result.summary.tempering = sampled.tempering.clone();
    result.sampling_seconds = sampled.sampling_seconds;
}
