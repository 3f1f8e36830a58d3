//! One experiment from configuration to summary: data, ensemble, sampling loop, observables,
//! diagnostics (spec 02). The CLI's `flscale sample` is a thin wrapper around [`run_experiment`].

use serde::Serialize;

use super::config::{ExperimentConfig, ModelKind, Precision, Preconditioner, SamplerMethod, Start};
use super::data::Dataset;
use super::generic::ParamGroup;
use super::mala::Kernel;
use super::model::FcnModel;
use super::observables::{
    finite, hist_range, integrated_autocorrelation_time, mean_and_error, ChainAccumulator,
    ChainSnapshot, GroupStats, Measurement, HIST_BINS,
};
use super::overlaps::{
    summarise, ChainProbe, NamedHistogram, Probe, ProbeAccumulator, ProbeSummary,
};
use super::real::Real;
use super::sampler::{Divergence, Dynamics, Ensemble};
use crate::error::{Error, Result};

/// η·λ_max targeted by `adapt_step`: well inside the stability limit 2, with a bias of
/// about 5 % in the stiffest direction (variance inflation 1/(1 − ηλ/2)).
const ADAPT_FRACTION: f64 = 0.1;

/// η·λ_max from which `adapt_step` with `mala` starts: the Metropolis test removes the step's
/// bias (mala.rs), so only the stability of the stiffest direction (ηλ < 2) and the
/// acceptance rate limit the step. The fraction is then scaled during burn-in towards
/// [`MALA_TARGET_ACCEPTANCE`], since the 10-iteration λ_max estimate can miss the stiffest
/// direction (then a fixed ηλ = 1 freezes every chain by rejection).
const MALA_ADAPT_FRACTION: f64 = 1.0;

/// The acceptance rate that `adapt_step` with `mala` steers to: 0.574 optimises MALA's
/// efficiency for product-form targets in high dimension (Roberts & Rosenthal, J. R. Stat.
/// Soc. B 60 (1998) 255).
const MALA_TARGET_ACCEPTANCE: f64 = 0.574;

/// The acceptance rate that `adapt_step` steers HMC (`hmc_steps`) to: the high-dimensional
/// optimum of the leapfrog integrator is 0.651 (Beskos, Pillai, Roberts, Sanz-Serna & Stuart,
/// Bernoulli 19 (2013) 1501; Neal 2011, sec. 5.4.4). 0.7 by measurement in the blog setting
/// (BENCHMARKS.md, "Sampling efficiency": 0.6 and 0.7 within the run-to-run spread, 0.85
/// twice the autocorrelation time at P = 80).
const HMC_TARGET_ACCEPTANCE: f64 = 0.7;

/// At most about this many burn-in adaptations (λ_max by 10 power iterations, and the
/// collapsed sampler's preconditioner): each costs tens of gradient evaluations, so with a
/// small `thin` (an HMC run measured every proposal) adapting at every measurement would cost
/// several times the burn-in's own steps (BENCHMARKS.md, "Sampling efficiency"). 200 leaves
/// the acceptance steering and the preconditioner's average as many updates as they use.
const MAX_ADAPTATIONS: usize = 200;

/// Steps between two burn-in adaptations: every measurement (`thin` steps) unless that would
/// exceed [`MAX_ADAPTATIONS`] over the burn-in, then the smallest multiple of `thin` that
/// does not. Shared by the FCN and the flat (CNN, attention) engines.
pub(crate) fn adaptation_interval(thin: usize, burn_in: usize) -> usize {
    let thin = thin.max(1);
    thin * burn_in.div_ceil(MAX_ADAPTATIONS * thin).max(1)
}

/// `adapt_step`'s target for η·λ_max, shared by the FCN and the flat (CNN, attention) engines:
/// [`ADAPT_FRACTION`] unadjusted; with MALA/HMC it starts at [`MALA_ADAPT_FRACTION`] and is
/// scaled at each burn-in adaptation towards the target acceptance rate.
#[derive(Debug)]
pub(crate) struct StepSteering {
    mala: bool,
    target_acceptance: f64,
    /// Scale of `MALA_ADAPT_FRACTION`.
    scale: f64,
    /// (accepted, proposed) at the previous adaptation.
    counts_then: (u64, u64),
}

impl StepSteering {
    pub(crate) fn new(mala: bool, hmc: bool) -> Self {
        let target_acceptance = if hmc {
            HMC_TARGET_ACCEPTANCE
        } else {
            MALA_TARGET_ACCEPTANCE
        };
        StepSteering {
            mala,
            target_acceptance,
            scale: 1.0,
            counts_then: (0, 0),
        }
    }

    /// η·λ_max for the next stretch, given the run's acceptance counts so far (`None`
    /// without a Metropolis test).
    pub(crate) fn fraction(&mut self, counts: Option<(u64, u64)>) -> f64 {
        if let Some((accepted, proposed)) = counts {
            if proposed > self.counts_then.1 {
                // Multiplicative Robbins–Monro step on log(scale): up when the acceptance
                // since the last adaptation is above target, down below.
                let rate =
                    (accepted - self.counts_then.0) as f64 / (proposed - self.counts_then.1) as f64;
                self.scale =
                    (self.scale * (2.0 * (rate - self.target_acceptance)).exp()).clamp(1e-3, 2.0);
            }
            self.counts_then = (accepted, proposed);
        }
        if self.mala {
            MALA_ADAPT_FRACTION * self.scale
        } else {
            ADAPT_FRACTION
        }
    }
}

/// A stopped chain, as reported to the user.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DivergedChain {
    /// Chain index k (its RNG stream).
    pub chain: usize,
    /// Step at which it was stopped.
    pub step: usize,
    /// Why.
    pub reason: String,
}

/// Equilibration diagnostics.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Diagnostics {
    /// Mean energy U after burn-in (per chain, averaged).
    pub energy_mean: Option<f64>,
    /// Mean energy over the first and the second half of the sampling window: a drift
    /// between them beyond the noise means the burn-in was too short.
    pub energy_first_half: Option<f64>,
    /// See `energy_first_half`.
    pub energy_second_half: Option<f64>,
    /// Integrated autocorrelation time of the per-chain alignment, in samples (× thin steps).
    pub iat_alignment: Option<f64>,
    /// Effective number of independent alignment samples: chains × samples / τ.
    pub ess_alignment: Option<f64>,
    /// Integrated autocorrelation time of the per-chain R = mean ρ², in samples.
    pub iat_r_overlap2: Option<f64>,
    /// Effective sample size of R.
    pub ess_r_overlap2: Option<f64>,
    /// Integrated autocorrelation time of the per-chain outlier count, in samples.
    pub iat_outliers: Option<f64>,
    /// Effective sample size of the outlier count.
    pub ess_outliers: Option<f64>,
    /// Largest Hessian eigenvalue of U at the end of the run (max over chains; 20 power
    /// iterations on finite-difference Hessian–vector products).
    pub lambda_max: Option<f64>,
    /// The step η used after burn-in (differs from `sampler.step` with `adapt_step`).
    pub step: f64,
    /// η·λ_max: Langevin is unstable beyond 2 and biased by about ηλ/2 in the stiffest
    /// direction; ≲ 0.2 is comfortable.
    pub step_times_lambda_max: Option<f64>,
    /// Per parameter group: moments and the configurational temperature ⟨θ·∇U⟩/#entries.
    pub groups: Vec<GroupStats>,
    /// "plain" or "collapsed" (`sampler.method`).
    pub method: String,
    /// With `sampler.mala`: the fraction of accepted Metropolis proposals over all steps of
    /// the surviving chains (burn-in included); null without MALA.
    pub acceptance_rate: Option<f64>,
}

/// The deterministic summary of a run (what `--json` prints): identical for any thread count.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Summary {
    /// Alignment A_f of the ensemble-mean predictor on the test set (= mean of the per-chain,
    /// per-sample alignments, since A_f is linear in f).
    pub alignment: Option<f64>,
    /// Standard error of `alignment` from the spread of the chains' time averages.
    pub alignment_err: Option<f64>,
    /// Test MSE of one posterior sample, averaged over chains and samples.
    pub test_mse: Option<f64>,
    /// Standard error of `test_mse` over chains.
    pub test_mse_err: Option<f64>,
    /// Test MSE of the ensemble-mean (posterior-mean) predictor.
    pub test_mse_mean_predictor: Option<f64>,
    /// (1 − A_f)²·⟨y, y⟩: every predictor's test MSE is at least this (Cauchy–Schwarz; paper
    /// App. F.2).
    pub mse_lower_bound: Option<f64>,
    /// Training MSE of one posterior sample (null when P = 0).
    pub train_mse: Option<f64>,
    /// Mean number of first-layer neurons per network with |ρ_i| > 3σ1/√d (App. F.0.1).
    pub outliers_layer1: Option<f64>,
    /// Standard error of `outliers_layer1` over chains.
    pub outliers_layer1_err: Option<f64>,
    /// The outlier threshold 3σ1/√d.
    pub outlier_threshold: f64,
    /// R = E[ρ²] over neurons, chains and samples (blog; GP value σ1²/d).
    pub r_overlap2: Option<f64>,
    /// Standard error of R over chains.
    pub r_overlap2_err: Option<f64>,
    /// |v·w*| for v the leading eigenvector of E[w wᵀ] over first-layer neurons.
    pub leading_direction_overlap: Option<f64>,
    /// Chains that were stopped, with step and reason.
    pub diverged_chains: Vec<DivergedChain>,
    /// A step size likely to be stable when some chains diverged (η/10), else null.
    pub suggested_step: Option<f64>,
    /// Chains that contributed to the results.
    pub chains_used: usize,
    /// Samples per chain after burn-in.
    pub samples_per_chain: usize,
    /// Precision the sampler ran in.
    pub precision: String,
    /// Equilibration diagnostics.
    pub diagnostics: Diagnostics,
    /// "cold" or "hot": the start of the chains these results come from.
    pub start: String,
    /// With `sampler.start = "both"`: the hot-start ensemble's main observables.
    pub hot_start: Option<StartResults>,
    /// With `sampler.start = "both"`: false when the cold and hot ensembles disagree by more
    /// than 3 combined standard errors on any fitted observable ("not equilibrated": a
    /// first-order transition's hysteresis, spec 02); null otherwise or without error bars.
    pub equilibrated: Option<bool>,
    /// With `sampler.start = "both"`: the verdict per observable, with both starts' values,
    /// errors and z-scores ([`super::equilibration`]).
    pub equilibration: Option<super::equilibration::Equilibration>,
    /// Wall-clock speed: filled in only when the caller asks for timing (it is not
    /// reproducible, so it stays out of the deterministic output by default).
    pub steps_per_second: Option<f64>,
    /// Deeper-layer overlaps, parity directions and μ, test accuracy ([`super::overlaps`]).
    #[serde(flatten)]
    pub probe: ProbeSummary,
}

/// The main observables of one start, for the cold/hot comparison.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StartResults {
    /// Alignment A_f.
    pub alignment: Option<f64>,
    /// Its standard error.
    pub alignment_err: Option<f64>,
    /// R = E[ρ²].
    pub r_overlap2: Option<f64>,
    /// Its standard error.
    pub r_overlap2_err: Option<f64>,
    /// Outliers per network.
    pub outliers_layer1: Option<f64>,
    /// Its standard error.
    pub outliers_layer1_err: Option<f64>,
    /// Test MSE.
    pub test_mse: Option<f64>,
    /// Its standard error.
    pub test_mse_err: Option<f64>,
    /// Chains stopped in this ensemble.
    pub diverged_chains: usize,
    /// The sampler's health in this ensemble: η·λ_max at the end (Langevin is biased by about
    /// ηλ/2 in the stiffest direction and unstable beyond 2).
    pub step_times_lambda_max: Option<f64>,
    /// MALA/HMC acceptance over the run (null for unadjusted Langevin).
    pub acceptance_rate: Option<f64>,
    /// Per parameter group (as in `diagnostics.groups`), the configurational temperature
    /// ⟨θ·∇U⟩/#entries, ≈ T at equilibrium (Rugh 1997; Butler et al. 1998).
    pub configurational_temperature: Vec<Option<f64>>,
}

impl StartResults {
    fn of(s: &Summary) -> StartResults {
        StartResults {
            alignment: s.alignment,
            alignment_err: s.alignment_err,
            r_overlap2: s.r_overlap2,
            r_overlap2_err: s.r_overlap2_err,
            outliers_layer1: s.outliers_layer1,
            outliers_layer1_err: s.outliers_layer1_err,
            test_mse: s.test_mse,
            test_mse_err: s.test_mse_err,
            diverged_chains: s.diverged_chains.len(),
            step_times_lambda_max: s.diagnostics.step_times_lambda_max,
            acceptance_rate: s.diagnostics.acceptance_rate,
            configurational_temperature: s
                .diagnostics
                .groups
                .iter()
                .map(|g| g.temperature)
                .collect(),
        }
    }
}

/// One row of the trace file (means over the surviving chains at one sampling time).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TraceRow {
    /// Global step.
    pub step: usize,
    /// Whether the step is within the burn-in.
    pub burn_in: bool,
    /// Mean U.
    pub energy: f64,
    /// Mean alignment.
    pub alignment: f64,
    /// Mean test MSE.
    pub test_mse: f64,
    /// Mean training MSE (null when P = 0).
    pub train_mse: Option<f64>,
    /// Mean R.
    pub r_overlap2: f64,
    /// Mean outlier count.
    pub outliers: f64,
}

/// Per-chain results (the chains file).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChainRow {
    /// Chain index.
    pub chain: usize,
    /// "ok" or "diverged".
    pub status: String,
    /// Time-averaged alignment (null for diverged chains).
    pub alignment: Option<f64>,
    /// Time-averaged test MSE.
    pub test_mse: Option<f64>,
    /// Time-averaged R.
    pub r_overlap2: Option<f64>,
    /// Time-averaged outlier count.
    pub outliers: Option<f64>,
    /// μ along the first parity direction (null without specialising neurons or parity
    /// target).
    pub mu: Option<f64>,
}

/// Histogram of the first-layer overlaps ρ_i over neurons, chains and samples.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Histogram {
    /// Bin edges (HIST_BINS + 1).
    pub edges: Vec<f64>,
    /// Counts per bin.
    pub counts: Vec<u64>,
    /// Overlaps outside the range.
    pub outside: u64,
}

/// Everything a run produces.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The deterministic summary.
    pub summary: Summary,
    /// Trace rows (every `thin` steps, burn-in included).
    pub traces: Vec<TraceRow>,
    /// Per-chain rows.
    pub chains: Vec<ChainRow>,
    /// ρ histogram.
    pub histogram: Histogram,
    /// Deeper-layer and parity-direction histograms ([`super::overlaps`]).
    pub probe_histograms: Vec<NamedHistogram>,
    /// Ensemble-mean predictor on the test set (empty if every chain diverged).
    pub mean_test_prediction: Vec<f64>,
    /// Wall-clock seconds of the sampling loop.
    pub seconds: f64,
    /// FCN runs: the part of `seconds` spent after burn-in (the measurement window); 0 for
    /// the other models.
    pub sampling_seconds: f64,
    /// Total steps taken.
    pub steps: usize,
    /// FCN runs: every chain's parameters at the end, per chain and group (f64), the state
    /// [`run_experiment_from`] can continue from; empty for the other models.
    pub final_state: Vec<Vec<Vec<f64>>>,
}

impl RunResult {
    /// True when every chain diverged (the CLI then exits with code 1).
    pub fn all_diverged(&self) -> bool {
        self.summary.chains_used == 0
    }
}

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
    match s.precision {
        Precision::F32 => run_once::<f32>(cfg, &data, false, Some(initial), &mut progress, &never),
        Precision::F64 => run_once::<f64>(cfg, &data, false, Some(initial), &mut progress, &never),
    }
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
    if cfg.model.kind != ModelKind::Fcn {
        return match cfg.sampler.precision {
            Precision::F32 => super::generic::run_model::<f32>(cfg, progress, interrupted),
            Precision::F64 => super::generic::run_model::<f64>(cfg, progress, interrupted),
        };
    }
    match cfg.sampler.precision {
        Precision::F32 => run_typed::<f32>(cfg, progress, interrupted),
        Precision::F64 => run_typed::<f64>(cfg, progress, interrupted),
    }
}

fn run_typed<T: Real>(
    cfg: &ExperimentConfig,
    progress: &mut dyn FnMut(usize, usize),
    interrupted: &dyn Fn() -> bool,
) -> Result<RunResult> {
    let s = &cfg.sampler;
    let data = Dataset::generate(&cfg.data, &cfg.target, s.seed);
    run_starts(s.start, s.steps, progress, &mut |hot, progress| {
        run_once::<T>(cfg, &data, hot, None, progress, interrupted)
    })
}

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
            let verdict = super::equilibration::compare_starts(&cold.summary, &hot.summary);
            cold.summary.hot_start = Some(StartResults::of(&hot.summary));
            cold.summary.equilibrated = verdict.equilibrated;
            cold.summary.equilibration = Some(verdict);
            cold.seconds += hot.seconds;
            cold.steps += hot.steps;
            Ok(cold)
        }
    }
}

/// One ensemble from a cold (prior) or hot (teacher-aligned) start, or from `initial`
/// ([`run_experiment_from`]).
fn run_once<T: Real>(
    cfg: &ExperimentConfig,
    data: &Dataset,
    hot: bool,
    initial: Option<&[Vec<Vec<f64>>]>,
    progress: &mut dyn FnMut(usize, usize),
    interrupted: &dyn Fn() -> bool,
) -> Result<RunResult> {
    let s = &cfg.sampler;
    let model = FcnModel::from_config(cfg);
    let d = model.d;
    let n_groups = model.n_groups();
    let dynamics = Dynamics {
        kappa: s.kappa,
        step: s.step,
        temperature: s.temperature,
    };
    let mut ens = Ensemble::<T>::new(
        model.clone(),
        &data.x_train,
        &data.y_train,
        s.chains,
        s.seed,
        dynamics,
        None,
    );
    ens.likelihood = s.likelihood;
    let probe = Probe::new(&model, data, cfg.target.parity);
    let mut probe_acc: Vec<ProbeAccumulator> = (0..s.chains)
        .map(|_| ProbeAccumulator::new(&probe))
        .collect();
    if hot {
        ens.hot_start(&data.teacher, cfg.sigma2()[0].sqrt());
    }
    if let Some(initial) = initial {
        for block in &mut ens.blocks {
            for c in 0..block.len {
                for (g, values) in initial[block.first + c].iter().enumerate() {
                    let n = values.len();
                    for (dst, &src) in block.params[g][c * n..(c + 1) * n].iter_mut().zip(values) {
                        *dst = T::of(src);
                    }
                }
            }
        }
    }
    // The collapsed posterior and MALA run on the cached-gradient kernel; plain ULA keeps the
    // sampler's fused step.
    let mut kernel = (s.method == SamplerMethod::Collapsed || s.mala).then(|| {
        let mut k = Kernel::new(&ens, s.method, s.mala);
        k.preconditioner = s.preconditioner.unwrap_or(Preconditioner::Block);
        k.hmc_steps = s.hmc_steps;
        k
    });
    let mut steering = StepSteering::new(s.mala, s.hmc_steps.is_some());
    let lambda_max = |ens: &mut Ensemble<T>, kernel: &mut Option<Kernel<T>>, iters| {
        let per_chain = match kernel {
            Some(k) => k.lambda_max(ens, iters),
            None => ens.lambda_max(iters),
        };
        per_chain.into_iter().fold(0.0, f64::max)
    };
    let n_test = data.n_test();
    let x_test: Vec<T> = data.x_test.iter().map(|&v| T::of(v)).collect();
    let y_test = &data.y_test;
    let y_norm2: f64 = y_test.iter().map(|v| v * v).sum();
    let sigma1 = cfg.sigma2()[0];
    let threshold = 3.0 * sigma1.sqrt() / (d as f64).sqrt();
    let range = hist_range(sigma1, d);
    let mut acc: Vec<ChainAccumulator> = (0..s.chains)
        .map(|_| ChainAccumulator::new(n_test, n_groups, d))
        .collect();
    let start = std::time::Instant::now();
    let mut window_start = (s.burn_in == 0).then_some(start);
    let mut t = 0;
    let adapt_every = adaptation_interval(s.thin, s.burn_in);
    progress(0, s.steps);
    while t < s.steps {
        if s.adapt_step && t <= s.burn_in && t % adapt_every == 0 {
            // Spec 02 (a): adapt during burn-in only, from the stiffest chain (for the
            // collapsed sampler after its per-neuron preconditioner, also frozen afterwards).
            if let Some(k) = &mut kernel {
                k.adapt_preconditioner(&mut ens, 2 * t >= s.burn_in);
            }
            let lambda = lambda_max(&mut ens, &mut kernel, 10);
            if lambda > 0.0 {
                let counts = kernel.as_ref().and_then(|k| k.acceptance_counts(&ens));
                ens.dynamics.step = s.step.min(steering.fraction(counts) / lambda);
            }
        }
        let next = ((t / s.thin + 1) * s.thin).min(s.steps);
        match &mut kernel {
            Some(k) => k.advance(&mut ens, next - t),
            None => ens.advance(next - t),
        }
        t = next;
        if t % s.thin == 0 {
            // Collapsed: predictions also with the readouts' conditional means (Rao–
            // Blackwellised alignment and mean predictor; observables.rs).
            if let Some(k) = &mut kernel {
                k.prepare_measurement(&mut ens);
            }
            let means = kernel.as_ref().and_then(|k| k.conditional_means(&ens));
            let (preds, mean_preds) =
                probe.predict_with_readouts(&ens, &x_test, n_test, means.as_deref());
            measure(
                &preds,
                &ens,
                y_test,
                y_norm2,
                &data.teacher,
                threshold,
                range,
                t > s.burn_in,
                t,
                &mut acc,
                &probe,
                &mut probe_acc,
                means.is_some().then_some(&mean_preds[..]),
            );
        }
        if t >= s.burn_in && window_start.is_none() {
            window_start = Some(std::time::Instant::now());
        }
        progress(t, s.steps);
        if interrupted() {
            return Err(Error::runtime(format!(
                "interrupted at step {t} of {}",
                s.steps
            )));
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let sampling_seconds = window_start.map_or(0.0, |w| w.elapsed().as_secs_f64());
    let lambda = lambda_max(&mut ens, &mut kernel, 20);
    let outcome = EnsembleOutcome {
        divergences: ens.divergences(),
        groups: (0..model.n_groups())
            .map(|g| ParamGroup {
                name: model.group_name(g),
                len: model.group_len(g),
                prior_var: model.prior_var[g],
                frozen: model.frozen[g],
            })
            .collect(),
        p: ens.p,
        y_test: &data.y_test,
        teacher: &data.teacher,
        filter_dim: d,
        steps_done: ens.steps_done,
    };
    let mut result = finish::<T>(cfg, outcome, acc, threshold, range, seconds);
    result.sampling_seconds = sampling_seconds;
    result.final_state = (0..s.chains)
        .map(|k| (0..n_groups).map(|g| ens.chain_group(k, g)).collect())
        .collect();
    let alive: Vec<usize> = (0..s.chains).filter(|&k| ens.alive(k)).collect();
    let (probe_summary, probe_histograms) = summarise(
        &probe,
        &model,
        &probe_acc,
        &alive,
        &result.mean_test_prediction,
        &data.y_test,
    );
    result.summary.probe = probe_summary;
    result.probe_histograms = probe_histograms;
    for row in &mut result.chains {
        if row.status == "ok" {
            row.mu = probe_acc[row.chain].mu(0).and_then(finite);
        }
    }
    let dg = &mut result.summary.diagnostics;
    dg.step = ens.dynamics.step;
    dg.lambda_max = (lambda > 0.0).then_some(lambda).and_then(finite);
    dg.step_times_lambda_max = dg.lambda_max.map(|l| l * ens.dynamics.step);
    dg.acceptance_rate = kernel
        .as_ref()
        .and_then(|k| k.acceptance_rate(&ens))
        .and_then(finite);
    result.summary.start = if hot { "hot" } else { "cold" }.to_string();
    Ok(result)
}

/// Measures every live chain at step `t`.
#[allow(clippy::too_many_arguments)]
fn measure<T: Real>(
    preds: &[ChainProbe<T>],
    ens: &Ensemble<T>,
    y_test: &[f64],
    y_norm2: f64,
    teacher: &[f64],
    threshold: f64,
    range: f64,
    sampling: bool,
    t: usize,
    acc: &mut [ChainAccumulator],
    probe: &Probe,
    probe_acc: &mut [ProbeAccumulator],
    mean_preds: Option<&[Option<Vec<T>>]>,
) {
    let model = &ens.model;
    let d = model.d;
    let n1 = model.widths[0];
    let p = ens.p;
    let mut k = 0;
    for block in &ens.blocks {
        for c in 0..block.len {
            let chain = k;
            k += 1;
            let Some((f, probe_sample)) = &preds[chain] else {
                continue;
            };
            let w1 = &block.params[0][c * n1 * d..(c + 1) * n1 * d];
            let rhos: Vec<f64> = w1
                .chunks_exact(d)
                .map(|row| row.iter().zip(teacher).map(|(w, t)| w.f64() * t).sum())
                .collect();
            let groups = (0..model.n_groups())
                .map(|g| {
                    let n = model.group_len(g);
                    (&block.params[g][c * n..(c + 1) * n], block.virial[c][g])
                })
                .collect();
            let snapshot = ChainSnapshot {
                f_test: f,
                rhos: &rhos,
                groups,
                filters: Some((w1, d)),
                energy: block.energy[c],
                train_mse: (p > 0).then(|| block.sq_error[c] / p as f64),
            };
            acc[chain].record(snapshot, y_test, y_norm2, threshold, range, sampling, t);
            if let Some(Some(f_mean)) = mean_preds.map(|m| &m[chain]) {
                acc[chain].use_conditional_mean(f, f_mean, y_test, y_norm2);
            }
            if sampling {
                probe_acc[chain].add(probe, f, y_test, probe_sample);
            }
        }
    }
}

/// What the summary needs to know about an ensemble besides its chains' accumulators — the
/// same for the FCN engine and the flat-parameter one ([`super::generic`]).
#[derive(Debug)]
pub(crate) struct EnsembleOutcome<'a> {
    /// Per chain (chain order): why and when it was stopped, `None` if it survived.
    pub divergences: Vec<Option<Divergence>>,
    /// The parameter groups, in the order of the accumulators' moments.
    pub groups: Vec<ParamGroup>,
    /// Training-set size P.
    pub p: usize,
    /// Test targets.
    pub y_test: &'a [f64],
    /// The direction the leading eigenvector of the filters' second moment is compared with.
    pub teacher: &'a [f64],
    /// Length of one filter (first-layer row); 0 where there are none (no leading direction).
    pub filter_dim: usize,
    /// Steps taken.
    pub steps_done: usize,
}

/// Combines the per-chain accumulators of the chains that survived into the run's results:
/// means and standard errors over chains of the time-averaged observables, the mean
/// predictor, autocorrelation times, per-group moments and temperatures, the leading
/// direction, histogram, traces and per-chain rows (spec 02 "Observables"). Every reduction
/// runs in chain order. `start`, λ_max and the acceptance rate are left for the caller.
pub(crate) fn finish<T: Real>(
    cfg: &ExperimentConfig,
    ens: EnsembleOutcome<'_>,
    acc: Vec<ChainAccumulator>,
    threshold: f64,
    range: f64,
    seconds: f64,
) -> RunResult {
    let divergences = &ens.divergences;
    let diverged_chains: Vec<DivergedChain> = divergences
        .iter()
        .enumerate()
        .filter_map(|(k, d)| {
            d.as_ref().map(|d| DivergedChain {
                chain: k,
                step: d.step,
                reason: d.reason.clone(),
            })
        })
        .collect();
    let alive: Vec<usize> = (0..acc.len())
        .filter(|&k| divergences[k].is_none())
        .collect();
    let samples = alive.first().map(|&k| acc[k].samples).unwrap_or(0);
    let sampled = |k: usize| -> Vec<&Measurement> {
        acc[k]
            .series
            .iter()
            .filter(|(s, _)| *s)
            .map(|(_, m)| m)
            .collect()
    };
    let chain_mean = |k: usize, f: &dyn Fn(&Measurement) -> f64| -> f64 {
        let ms = sampled(k);
        ms.iter().map(|m| f(m)).sum::<f64>() / ms.len().max(1) as f64
    };
    let stat = |f: &dyn Fn(&Measurement) -> f64| -> (Option<f64>, Option<f64>) {
        if alive.is_empty() {
            return (None, None);
        }
        let v: Vec<f64> = alive.iter().map(|&k| chain_mean(k, f)).collect();
        let (m, e) = mean_and_error(&v);
        (finite(m), e.and_then(finite))
    };
    let (alignment, alignment_err) = stat(&|m| m.alignment);
    let (test_mse, test_mse_err) = stat(&|m| m.test_mse);
    let (r_overlap2, r_overlap2_err) = stat(&|m| m.r_overlap2);
    let (outliers, outliers_err) = stat(&|m| m.outliers as f64);
    let (energy_mean, _) = stat(&|m| m.energy);
    let train_mse = if ens.p > 0 {
        stat(&|m| m.train_mse.unwrap_or(0.0)).0
    } else {
        None
    };
    let half_energy = |first: bool| -> Option<f64> {
        if alive.is_empty() || samples < 2 {
            return None;
        }
        let h = samples / 2;
        let v: Vec<f64> = alive
            .iter()
            .map(|&k| {
                let ms = sampled(k);
                let part = if first { &ms[..h] } else { &ms[h..] };
                part.iter().map(|m| m.energy).sum::<f64>() / part.len() as f64
            })
            .collect();
        finite(v.iter().sum::<f64>() / v.len() as f64)
    };
    let n_test = ens.y_test.len();
    let mut mean_pred = vec![0.0; if alive.is_empty() { 0 } else { n_test }];
    for &k in &alive {
        for (m, s) in mean_pred.iter_mut().zip(&acc[k].f_test_sum) {
            *m += s;
        }
    }
    let denom = (alive.len() * samples).max(1) as f64;
    for m in &mut mean_pred {
        *m /= denom;
    }
    let test_mse_mean_predictor = (!alive.is_empty()).then(|| {
        mean_pred
            .iter()
            .zip(ens.y_test)
            .map(|(f, y)| (f - y).powi(2))
            .sum::<f64>()
            / n_test as f64
    });
    let y_msq = ens.y_test.iter().map(|v| v * v).sum::<f64>() / n_test as f64;
    let mse_lower_bound = alignment.map(|a| (1.0 - a).powi(2) * y_msq);
    let series_of = |f: &dyn Fn(&Measurement) -> f64| -> Vec<Vec<f64>> {
        alive
            .iter()
            .map(|&k| sampled(k).iter().map(|m| f(m)).collect())
            .collect()
    };
    let iat_alignment = integrated_autocorrelation_time(&series_of(&|m| m.alignment));
    let iat_r = integrated_autocorrelation_time(&series_of(&|m| m.r_overlap2));
    let iat_outliers = integrated_autocorrelation_time(&series_of(&|m| m.outliers as f64));
    let total_samples = (alive.len() * samples) as f64;
    let groups: Vec<GroupStats> = ens
        .groups
        .iter()
        .enumerate()
        .map(|(g, grp)| {
            let entries = (grp.len * alive.len() * samples) as f64;
            let sum = |j: usize| alive.iter().map(|&k| acc[k].moments[g][j]).sum::<f64>();
            let vir = alive.iter().map(|&k| acc[k].virial_sum[g]).sum::<f64>();
            let ok = entries > 0.0;
            GroupStats {
                group: grp.name.clone(),
                prior_variance: finite(grp.prior_var),
                mean: ok.then(|| sum(0) / entries).and_then(finite),
                second_moment: ok.then(|| sum(1) / entries).and_then(finite),
                fourth_moment: ok.then(|| sum(2) / entries).and_then(finite),
                temperature: ok.then(|| vir / entries).and_then(finite),
                frozen: grp.frozen,
            }
        })
        .collect();
    let leading_direction_overlap = if alive.is_empty() || samples == 0 || ens.filter_dim == 0 {
        None
    } else {
        let d = ens.filter_dim;
        let mut m = vec![0.0; d * d];
        for &k in &alive {
            for (a, b) in m.iter_mut().zip(&acc[k].second_moment_matrix) {
                *a += b;
            }
        }
        for i in 0..d {
            for j in 0..i {
                m[i * d + j] = m[j * d + i];
            }
        }
        leading_eigenvector(&m, d)
            .map(|v| {
                v.iter()
                    .zip(ens.teacher)
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
                    .abs()
            })
            .and_then(finite)
    };
    let mut counts = vec![0u64; HIST_BINS];
    let mut outside = 0;
    for &k in &alive {
        for (c, h) in counts.iter_mut().zip(&acc[k].hist) {
            *c += h;
        }
        outside += acc[k].hist_outside;
    }
    let edges = (0..=HIST_BINS)
        .map(|i| -range + 2.0 * range * i as f64 / HIST_BINS as f64)
        .collect();
    // Traces: every sampling time of the surviving chains, burn-in included.
    let n_rows = alive.first().map(|&k| acc[k].series.len()).unwrap_or(0);
    let traces = (0..n_rows)
        .map(|i| {
            let rows: Vec<&(bool, Measurement)> =
                alive.iter().map(|&k| &acc[k].series[i]).collect();
            let n = rows.len() as f64;
            let mean =
                |f: &dyn Fn(&Measurement) -> f64| rows.iter().map(|(_, m)| f(m)).sum::<f64>() / n;
            TraceRow {
                step: rows[0].1.step,
                burn_in: !rows[0].0,
                energy: mean(&|m| m.energy),
                alignment: mean(&|m| m.alignment),
                test_mse: mean(&|m| m.test_mse),
                train_mse: (ens.p > 0).then(|| mean(&|m| m.train_mse.unwrap_or(0.0))),
                r_overlap2: mean(&|m| m.r_overlap2),
                outliers: mean(&|m| m.outliers as f64),
            }
        })
        .collect();
    let chains = (0..acc.len())
        .map(|k| {
            let ok = divergences[k].is_none();
            let v = |f: &dyn Fn(&Measurement) -> f64| ok.then(|| chain_mean(k, f)).and_then(finite);
            ChainRow {
                chain: k,
                status: if ok { "ok" } else { "diverged" }.to_string(),
                alignment: v(&|m| m.alignment),
                test_mse: v(&|m| m.test_mse),
                r_overlap2: v(&|m| m.r_overlap2),
                outliers: v(&|m| m.outliers as f64),
                mu: None,
            }
        })
        .collect();
    let summary = Summary {
        alignment,
        alignment_err,
        test_mse,
        test_mse_err,
        test_mse_mean_predictor: test_mse_mean_predictor.and_then(finite),
        mse_lower_bound: mse_lower_bound.and_then(finite),
        train_mse,
        outliers_layer1: outliers,
        outliers_layer1_err: outliers_err,
        outlier_threshold: threshold,
        r_overlap2,
        r_overlap2_err,
        leading_direction_overlap,
        suggested_step: (!diverged_chains.is_empty()).then(|| cfg.sampler.step / 10.0),
        diverged_chains,
        chains_used: alive.len(),
        samples_per_chain: samples,
        precision: T::NAME.to_string(),
        diagnostics: Diagnostics {
            energy_mean,
            energy_first_half: half_energy(true),
            energy_second_half: half_energy(false),
            iat_alignment,
            ess_alignment: iat_alignment.map(|t| total_samples / t),
            iat_r_overlap2: iat_r,
            ess_r_overlap2: iat_r.map(|t| total_samples / t),
            iat_outliers,
            ess_outliers: iat_outliers.map(|t| total_samples / t),
            lambda_max: None,
            step: cfg.sampler.step,
            step_times_lambda_max: None,
            groups,
            method: match cfg.sampler.method {
                SamplerMethod::Plain => "plain",
                SamplerMethod::Collapsed => "collapsed",
            }
            .to_string(),
            acceptance_rate: None,
        },
        start: String::new(),
        hot_start: None,
        equilibrated: None,
        equilibration: None,
        steps_per_second: None,
        probe: ProbeSummary::default(),
    };
    RunResult {
        summary,
        traces,
        chains,
        histogram: Histogram {
            edges,
            counts,
            outside,
        },
        probe_histograms: Vec::new(),
        mean_test_prediction: mean_pred,
        seconds,
        sampling_seconds: 0.0,
        steps: ens.steps_done,
        final_state: Vec::new(),
    }
}

/// Leading eigenvector of a symmetric positive semi-definite d × d matrix by power
/// iteration from a fixed start (deterministic).
fn leading_eigenvector(m: &[f64], d: usize) -> Option<Vec<f64>> {
    let mut v: Vec<f64> = (0..d).map(|i| 1.0 + 0.01 * i as f64).collect();
    for _ in 0..2000 {
        let mut w: Vec<f64> = (0..d)
            .map(|i| (0..d).map(|j| m[i * d + j] * v[j]).sum())
            .collect();
        let norm = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        if !(norm > 0.0 && norm.is_finite()) {
            return None;
        }
        for x in &mut w {
            *x /= norm;
        }
        let change: f64 = w.iter().zip(&v).map(|(a, b)| (a - b).abs()).sum();
        v = w;
        if change < 1e-12 {
            break;
        }
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::{adaptation_interval, leading_eigenvector, MAX_ADAPTATIONS};

    #[test]
    fn adaptations_are_at_measurements_and_at_most_max_adaptations() {
        for (thin, burn_in) in [
            (1, 2000),
            (1, 20_000),
            (100, 10_000),
            (7, 5000),
            (1, 50),
            (0, 10),
        ] {
            let every = adaptation_interval(thin, burn_in);
            assert_eq!(every % thin.max(1), 0, "thin {thin}, burn-in {burn_in}");
            let count = burn_in / every + 1;
            assert!(
                count <= MAX_ADAPTATIONS + 1,
                "{count} at thin {thin}, burn-in {burn_in}"
            );
            // Not sparser than needed: halving the interval's multiple would exceed the cap.
            if every > thin.max(1) {
                assert!(burn_in / (every - thin) + 1 > MAX_ADAPTATIONS, "{every}");
            }
        }
        assert_eq!(adaptation_interval(100, 10_000), 100);
        assert_eq!(adaptation_interval(1, 2000), 10);
    }

    #[test]
    fn power_iteration_finds_the_top_direction() {
        // M = I + 3 u uᵀ with u = (0, 0.6, 0.8).
        let u = [0.0, 0.6, 0.8];
        let m: Vec<f64> = (0..9)
            .map(|k| {
                let (i, j) = (k / 3, k % 3);
                (i == j) as u8 as f64 + 3.0 * u[i] * u[j]
            })
            .collect();
        let v = leading_eigenvector(&m, 3).unwrap();
        let overlap: f64 = v.iter().zip(&u).map(|(a, b)| a * b).sum();
        assert!((overlap.abs() - 1.0).abs() < 1e-9, "{v:?}");
    }
}
