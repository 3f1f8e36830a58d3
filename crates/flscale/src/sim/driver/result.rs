//! What a run produces: the deterministic summary (`--json`), diagnostics, traces, per-chain
//! rows, histograms, and the run result that carries them.

use serde::Serialize;

pub use crate::sim::kernel::diagonal::{MetricRecord, MetricSpread};
use crate::sim::observe::observables::GroupStats;
use crate::sim::observe::overlaps::{NamedHistogram, ProbeSummary};

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
    /// The metric the run sampled with after burn-in (`sampler.metric`, or the collapsed
    /// sampler's preconditioner) and, for a diagonal one, the min/median/max of its entries
    /// per moved group ([`MetricRecord`]).
    pub metric: MetricRecord,
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
    /// The seed of every start's noise streams and initial draws
    /// ([`crate::sim::driver::coupling::start_seed`]); null for a start that did not run.
    pub start_seeds: StartSeeds,
    /// With `sampler.start = "both"` and `starts_coupling = "coupled"`: per chain, whether and
    /// when the hot and cold copies met ([`crate::sim::driver::coupling`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coupling: Option<crate::sim::driver::coupling::CouplingCertificate>,
    /// With `sampler.start = "both"` and independent starts (`starts_coupling`): false when
    /// the cold and hot ensembles disagree by more than 3 combined standard errors on any
    /// fitted observable ("not equilibrated": a first-order transition's hysteresis, spec 02);
    /// null otherwise (coupled starts are no independent evidence; see `coupling`) or without
    /// error bars.
    pub equilibrated: Option<bool>,
    /// With `sampler.start = "both"` and independent starts: the verdict per observable, with
    /// both starts' values,
    /// errors and z-scores ([`crate::sim::observe::equilibration`]).
    pub equilibration: Option<crate::sim::observe::equilibration::Equilibration>,
    /// FCN with a `hermite` or `terms` target: the ensemble-mean test predictor's coefficients
    /// on He_0 … He_3(Φ*), least squares over the test set
    /// ([`crate::sim::observe::hermite_components`]); the target's own are `target.terms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_predictor_hermite: Option<Vec<f64>>,
    /// With `sampler.tempering`: the ladder, swap acceptance per pair, barrier Λ and round
    /// trips ([`crate::sim::driver::tempered::TemperingDiagnostics`]); every other field is of
    /// the β = 1 replicas only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tempering: Option<crate::sim::driver::tempered::TemperingDiagnostics>,
    /// Sentences about numbers that may be wrong although the run finished: an unadjusted
    /// Langevin run (`mala = false`) whose η·λ_max exceeds
    /// [`crate::sim::driver::summary::ULA_BIAS_THRESHOLD`], with the bias it implies. Empty when
    /// nothing is wrong.
    pub warnings: Vec<String>,
    /// Wall-clock speed: filled in only when the caller asks for timing (it is not
    /// reproducible, so it stays out of the deterministic output by default).
    pub steps_per_second: Option<f64>,
    /// Deeper-layer overlaps, parity directions and μ, test accuracy ([`crate::sim::observe::overlaps`]).
    #[serde(flatten)]
    pub probe: ProbeSummary,
}

/// The seed of each start's chains (chain k runs on stream k of it).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
pub struct StartSeeds {
    /// The cold start's: `sampler.seed`.
    pub cold: Option<u64>,
    /// The hot start's: derived from `sampler.seed` unless the starts are coupled.
    pub hot: Option<u64>,
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
    pub(crate) fn of(s: &Summary) -> StartResults {
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
    /// Deeper-layer and parity-direction histograms ([`crate::sim::observe::overlaps`]).
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
    /// [`super::run::Run::start_from`] can continue from; empty for the other models.
    pub final_state: Vec<Vec<Vec<f64>>>,
    /// Coupled starts ([`crate::sim::driver::coupling`]): every chain's parameter sketch at
    /// every measurement, from which the coupling certificate places the meetings.
    pub parameter_sketches: crate::sim::driver::coupling::ParameterSketches,
    /// Restrained runs ([`crate::sim::driver::run::Run::restrain`]): every surviving chain's
    /// order parameter and observables at every measurement after burn-in; empty otherwise.
    pub restrained: Vec<RestrainedChain>,
    /// `sampler.metric = "diag"`: every chain's diagonal metric m after burn-in, per chain and
    /// group as `final_state` (an empty group where Langevin does not move it); empty
    /// otherwise.
    pub metric_diagonal: Vec<Vec<Vec<f64>>>,
}

/// One chain of a restrained run: its series after burn-in, one entry per measurement (every
/// `thin` steps), in time order.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RestrainedChain {
    /// Chain index k (its noise stream).
    pub chain: usize,
    /// The restrained order parameter s.
    pub s: Vec<f64>,
    /// A_f of the chain's predictor on the test set.
    pub alignment: Vec<f64>,
    /// Its test MSE.
    pub test_mse: Vec<f64>,
    /// Its number of first-layer outliers |ρ_i| > 3σ1/√d.
    pub outliers: Vec<f64>,
}

impl RunResult {
    /// True when every chain diverged (the CLI then exits with code 1).
    pub fn all_diverged(&self) -> bool {
        self.summary.chains_used == 0
    }
}
