//! The experiment file of `flscale sample` (spec 02; the same tables are reused by sweeps,
//! spec 03): typed, `deny_unknown_fields`, every field documented, validated with messages
//! that name the field, the bad value and what is allowed.
//!
//! ```toml
//! [model]
//! kind = "fcn"              # fcn | cnn | attention
//! activation = "erf"        # erf | relu | tanh | linear | poly (default erf; not used by attention)
//! widths = [40]             # hidden widths N_1 … N_{L−1} (cnn: [N] channels; attention: omit)
//! parametrization = "standard"   # or "mean-field"
//! # patch = 5              # cnn only: patch size S (d = N_w·S, N_w non-overlapping patches)
//! # heads = 2              # attention only: number of heads H
//! [data]
//! d = 40
//! p = 1600
//! n_test = 4000
//! # tokens = 16             # attention only: context length L (each input is L × d)
//! [target]
//! hermite = 3               # or terms = [[1, 1.0], [3, 0.3]], or parity = 2,
//!                           # or cubic_tokens = true (attention; see [`TargetConfig`])
//! [sampler]
//! kappa = 1.0
//! step = 1e-4
//! steps = 20000
//! burn_in = 10000
//! thin = 100
//! chains = 30
//! seed = 1
//! method = "plain"          # or "collapsed" (readout integrated out); optional
//! mala = true               # Metropolis-adjusted steps (default); false: unadjusted Langevin
//! adapt_step = true         # step adapted during burn-in (default); `step` is its maximum
//! # hmc_steps = 10          # with mala: HMC, L leapfrog steps per proposal
//! # preconditioner = "block" # collapsed + adapt_step only: none | neuron | block (default)
//! # metric = "diag"         # with adapt_step: identity (default) | diag (adapted mass matrix)
//! # start = "both"          # cold | hot | both (compared)
//! # starts_coupling = "independent"  # or "coupled": the hot start on the cold one's streams
//! [priors]                  # optional; σ_l² of every layer, readout last; default all 1
//! sigma2 = [1.0, 1.0]
//! ```

use serde::{Deserialize, Serialize};

use crate::activation::Activation;
use crate::error::{Error, Result};

/// A whole experiment: model, data, target, sampler settings and priors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    /// The network whose posterior is sampled.
    pub model: ModelConfig,
    /// Inputs: dimension, train and test sizes, input covariance, teacher.
    pub data: DataConfig,
    /// The target function of the teacher feature Φ* = w*·x.
    pub target: TargetConfig,
    /// Langevin settings: ridge κ, step, lengths, ensemble size, seed.
    pub sampler: SamplerConfig,
    /// Prior variances σ_l² (optional table; every σ_l² defaults to 1).
    #[serde(default)]
    pub priors: PriorsConfig,
}

/// Which architecture (`model.kind`), without its settings ([`NetworkVariant`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Fully connected network of any depth (paper eq. 1).
    Fcn,
    /// CNN with non-overlapping patches (paper App. E.1.2; [`crate::sim::model::cnn`]).
    Cnn,
    /// Softmax attention layer with H heads over L tokens (paper App. E.3;
    /// [`crate::sim::model::attention`]).
    Attention,
}

impl ModelKind {
    /// The name in the experiment file.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Fcn => "fcn",
            ModelKind::Cnn => "cnn",
            ModelKind::Attention => "attention",
        }
    }
}

/// Readout prior scaling (spec 00).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Parametrization {
    /// Readout prior variance σ_L²/N_{L−1}.
    Standard,
    /// Readout prior variance σ_L²/N_{L−1}².
    MeanField,
}

/// `[model]`, read and written through `RawModelConfig` (config/raw.rs), the fields of the
/// file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "raw::RawModelConfig", into = "raw::RawModelConfig")]
pub struct ModelConfig {
    /// The architecture with the settings only it has, written `kind`, `patch` and `heads` in
    /// the file.
    pub architecture: NetworkVariant,
    /// Hidden-layer activation: erf | relu | tanh | linear | poly (σ = 1 + h + h²); default
    /// erf. The attention model has no such activation (its non-linearity is the softmax).
    pub activation: Activation,
    /// Hidden widths N_1 … N_{L−1}; `[40]` is a two-layer network with 40 hidden neurons.
    /// CNN: exactly one entry, the number of channels N. Attention: leave it out.
    pub widths: Vec<usize>,
    /// "standard" (default) or "mean-field" readout scaling.
    pub parametrization: Parametrization,
    /// Layer normalisation of the input of every hidden layer l ≥ 2 (paper App. C.5, Fig. 6):
    /// per input, over the N_{l−1} neurons, LN(a) = (a − mean)/√(variance + 10⁻⁶), no learned
    /// gain or bias; the readout sees the un-normalised activations (default false).
    pub layernorm: bool,
}

/// The architecture (`model.kind`) with its own settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkVariant {
    /// Fully connected network of any depth (paper eq. 1); `kind = "fcn"`.
    Fcn,
    /// CNN with non-overlapping patches (paper App. E.1.2; [`crate::sim::model::cnn`]);
    /// `kind = "cnn"`.
    Cnn {
        /// The patch size S (`model.patch`): the input x ∈ R^d is cut into N_w = d/S
        /// non-overlapping patches x_i of S consecutive coordinates (S must divide d).
        patch: usize,
    },
    /// Softmax attention layer with H heads over L tokens (paper App. E.3;
    /// [`crate::sim::model::attention`]); `kind = "attention"`. L is `data.tokens`.
    Attention {
        /// The number of heads H (`model.heads`).
        heads: usize,
    },
}

impl ModelConfig {
    /// The architecture without its settings.
    pub fn kind(&self) -> ModelKind {
        match self.architecture {
            NetworkVariant::Fcn => ModelKind::Fcn,
            NetworkVariant::Cnn { .. } => ModelKind::Cnn,
            NetworkVariant::Attention { .. } => ModelKind::Attention,
        }
    }

    /// The CNN's patch size S (`None` for the other architectures).
    pub fn patch(&self) -> Option<usize> {
        match self.architecture {
            NetworkVariant::Cnn { patch } => Some(patch),
            _ => None,
        }
    }

    /// The attention model's number of heads H (`None` for the other architectures).
    pub fn heads(&self) -> Option<usize> {
        match self.architecture {
            NetworkVariant::Attention { heads } => Some(heads),
            _ => None,
        }
    }
}

fn default_activation() -> Activation {
    Activation::Erf
}

fn default_parametrization() -> Parametrization {
    Parametrization::Standard
}

/// Input distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Covariance {
    /// x ~ 𝒩(0, I_d).
    Isotropic,
    /// x ~ 𝒩(0, Σ), Σ = diag(k^{−a}), k = 1 … d, a = `power_law_exponent` (paper uses 1.1);
    /// for the CNN k = 1 … S within every patch, for attention k = 1 … d within every token.
    PowerLaw,
}

/// How the teacher direction w* is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Teacher {
    /// A uniformly random unit vector drawn from the seed.
    Random,
    /// w* = e_1.
    E1,
}

/// `[data]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// Input dimension d.
    pub d: usize,
    /// Training-set size P (0 samples the prior).
    pub p: usize,
    /// Size of the independent test set on which alignment and test MSE are measured
    /// (default 2000).
    #[serde(default = "default_n_test")]
    pub n_test: usize,
    /// "isotropic" (default) or "power-law".
    #[serde(default = "default_covariance")]
    pub covariance: Covariance,
    /// Exponent a of the power-law spectrum k^{−a} (default 1.1, the paper's value).
    #[serde(default = "default_power_law_exponent")]
    pub power_law_exponent: f64,
    /// "random" (default) or "e1".
    #[serde(default = "default_teacher")]
    pub teacher: Teacher,
    /// Attention only: the context length L. Each input is a sequence X of L tokens
    /// x^a ~ 𝒩(0, I_d), stored as L × d.
    #[serde(default)]
    pub tokens: Option<usize>,
}

fn default_n_test() -> usize {
    2000
}
fn default_covariance() -> Covariance {
    Covariance::Isotropic
}
fn default_power_law_exponent() -> f64 {
    1.1
}
fn default_teacher() -> Teacher {
    Teacher::Random
}

/// `[target]`: exactly one of `hermite`, `terms`, `parity`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// y = Ĥe_m(Φ*) = He_m(Φ*)/√(m!) (unit variance).
    #[serde(default)]
    pub hermite: Option<usize>,
    /// y = Σ c_m He_m(Φ*) for pairs [m, c_m], with the probabilists' He_m as the blog writes
    /// them (He1 + 0.3·He3 is `[[1, 1.0], [3, 0.3]]`).
    #[serde(default)]
    pub terms: Option<Vec<(usize, f64)>>,
    /// y = sign(Π_{j≤k} x_j) (paper App. E.2), labels ±1.
    #[serde(default)]
    pub parity: Option<usize>,
    /// The attention model's cubic token target (paper App. E.3; the only target of
    /// `model.kind = "attention"`): y(X) = (1/L)·(Σ_a x^a_1)·(Σ_b x^b_2 x^b_3), unit variance
    /// for Gaussian tokens. It is the term that one attention entry (A_h)_12 together with
    /// a readout spike (w_h)_3 produces in the expansion of the softmax around uniform
    /// attention (App. E.3, the specialising pattern q_sp.); see [`crate::sim::model::attention`].
    #[serde(default)]
    pub cubic_tokens: bool,
    /// Rescale y to unit variance under the data measure (default false; `hermite` targets
    /// already have unit variance).
    #[serde(default)]
    pub normalize: bool,
}

/// Floating-point precision of the sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    /// Single precision (default; twice the throughput).
    F32,
    /// Double precision.
    F64,
}

/// `[sampler]`, read and written through `RawSamplerConfig` (config/raw.rs), the fields of
/// the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "raw::RawSamplerConfig", into = "raw::RawSamplerConfig")]
pub struct SamplerConfig {
    /// Ridge κ: the likelihood variance, π ∝ exp(−|f(X) − y|²/(2κ))·prior (App. A.1). With
    /// `likelihood = "cross-entropy"` it divides the cross-entropy instead,
    /// π ∝ exp(−Σ_μ log(1 + e^{−y_μ f(x_μ)})/κ)·prior: κ = 1 is the Bayesian posterior of the
    /// logistic likelihood, κ < 1 weighs the data more (a temperature of the data term alone).
    pub kappa: f64,
    /// "gaussian" (default; the regression posterior of App. A.1) or "cross-entropy" (the
    /// two-class cross-entropy of App. A.2 with labels y = ±1, i.e. softmax over the logits
    /// (f/2, −f/2); needs a `target.parity` label).
    pub likelihood: Likelihood,
    /// Langevin step η in θ ← θ − η∇U + √(2ηT)ξ.
    pub step: f64,
    /// Total number of steps, burn-in included.
    pub steps: usize,
    /// Steps discarded before observables are accumulated (must be < steps).
    pub burn_in: usize,
    /// Observables are measured every `thin` steps.
    pub thin: usize,
    /// Ensemble size E (independent chains: own initial weights and noise, same data).
    pub chains: usize,
    /// Seed of the data and of every chain's stream (chain k uses stream (seed, k)).
    pub seed: u64,
    /// Temperature T (default 1, which samples the Bayesian posterior).
    pub temperature: f64,
    /// "f32" (default) or "f64".
    pub precision: Precision,
    /// Layers held at their initial (prior) values, numbered 1 … L (L = readout); e.g. `[1]`
    /// freezes the first layer, which turns the readout posterior into Bayesian linear
    /// regression on random features.
    pub frozen_layers: Vec<usize>,
    /// Initial state: "cold" (default; weights drawn from the prior), "hot" (teacher-aligned:
    /// every first-layer neuron's component along w* set to ±σ1, alternating signs, the rest
    /// from the prior; the CNN's filters likewise, attention heads as in [`crate::sim::model::attention`]),
    /// or "both" (two ensembles of `chains` chains each; the summary reports the hot one beside
    /// the cold one and flags them "not equilibrated" when they disagree beyond their errors —
    /// spec 02, "First-order transitions cause hysteresis"). Which noise streams the hot start
    /// runs on is `starts_coupling`.
    pub start: Start,
    /// The hot start's noise streams. "independent" (default): the hot ensemble runs on
    /// streams of its own seed, derived from `seed` ([`crate::sim::driver::coupling::start_seed`]),
    /// so that the cold/hot z-test compares two independent estimates; the cold start keeps
    /// the streams of `seed`. "coupled": both starts run on the streams of `seed` (only the
    /// initial state differs), a synchronous coupling whose meeting times the summary reports
    /// as a coupling certificate instead of a verdict (`coupling`; docs/langevin.md, "Starts").
    /// "coupled" needs `start` = "hot" or "both".
    pub starts_coupling: StartsCoupling,
    /// Step-size control (spec 02 (a)): during burn-in, at every measurement (every `thin`
    /// steps, but at most about 200 times over the burn-in), estimate λ_max of the Hessian of U by power iteration on Hessian–vector
    /// products (max over chains) and set η = min(`step`, 0.1/λ_max) — with `mala` (every
    /// model) η = min(`step`, s/λ_max) with s starting at 1 and steered towards an acceptance
    /// of 0.574, 0.7 with `hmc_steps`, by dual averaging (docs/langevin.md, "MALA"); frozen after burn-in so that the sampled chain is a fixed
    /// Markov kernel. Default true: `step` is then the largest step allowed, and with the
    /// default `mala = true` the numbers are exact in the limit of long runs whatever `step`
    /// is. `adapt_step = false` keeps η = `step` throughout.
    pub adapt_step: bool,
    /// "plain" (default): Langevin on every weight. "collapsed" (spec 02 (b)): the readout
    /// is integrated out exactly (its posterior given the hidden features is Gaussian),
    /// Langevin runs on the hidden weights only and readouts are drawn exactly from their
    /// conditional at every measurement; much less stiff when P/κ is large (docs/langevin.md).
    /// For the CNN the readout W² and for attention the value vectors w_h are integrated out.
    pub method: SamplerMethod,
    /// The transition of every step, written `mala` and `hmc_steps` in the file.
    ///
    /// `mala = true` (the default): Metropolis-adjusted Langevin (MALA, spec 02 (c)), every
    /// step a proposal accepted with the Metropolis–Hastings probability, which removes the
    /// O(η) bias of the unadjusted chain; the acceptance rate is reported in the diagnostics.
    /// `mala = false` runs unadjusted Langevin (the paper's dynamics), whose averages carry an
    /// O(η) bias: the summary, `--json` and the results store then warn when η·λ_max exceeds
    /// [`crate::sim::driver::summary::ULA_BIAS_THRESHOLD`] (docs/langevin.md, "Step-size bias").
    ///
    /// `hmc_steps = L` with `mala = true` (every model): Hamiltonian Monte Carlo instead of
    /// MALA (docs/langevin.md, "HMC"): every step is one proposal made of L leapfrog steps of
    /// size ε = √(2η) with the sampler's metric (the collapsed preconditioner; the identity
    /// otherwise) as inverse mass matrix, then one Metropolis test; a step therefore costs L
    /// gradient evaluations (`steps`, `burn_in` and `thin` count proposals). L = 1 is MALA.
    /// With `adapt_step` the acceptance is steered to 0.7 instead of 0.574. An integer
    /// between 1 and 10000; absent (default): MALA. With `mala = false` it is refused, HMC
    /// being exact only through its Metropolis test.
    pub proposal: Proposal,
    /// Collapsed sampler with `adapt_step` only: the constant preconditioner M of the last
    /// hidden layer's weights (the CNN: its filters; attention: its matrices A_h, per head),
    /// θ ← θ − ηM∇U + √(2ηT·M)ξ, set during burn-in (averaged over its second half) and
    /// frozen after it (docs/langevin.md, "Preconditioner").
    /// "block" (default): one n_in × n_in matrix per neuron, the inverse of its Gauss–Newton
    /// block. "neuron": one scalar per neuron, its mean Gauss–Newton curvature (the default
    /// before the block existed; mixes worse, BENCHMARKS.md). "none": M = I.
    pub preconditioner: Option<Preconditioner>,
    /// The constant metric M (inverse mass matrix) of every step, written `metric` in the
    /// file (docs/langevin.md, "Diagonal metric"). "identity" (default): M = I (the collapsed
    /// sampler keeps its `preconditioner`). "diag": one variance per parameter and chain, the
    /// regularised sample variance of the chain's own draws in Stan's windows of the burn-in,
    /// frozen after it, θ ← θ − ηM∇U + √(2ηT·M)ξ (MALA and ULA) or HMC with M as inverse
    /// mass matrix; the step is re-adapted after every window, and from the first window on
    /// `step` no longer bounds it (η is then in the metric's units, the move being ηM∇U).
    /// Needs `adapt_step = true` (the
    /// stable step changes with the metric) and `burn_in` ≥ 20; on the collapsed sampler it
    /// replaces the preconditioner, which must then be left unset. Every model.
    pub metric: MetricKind,
    /// Replica exchange on the data term (`tempering = { replicas = 8 }`; docs/langevin.md,
    /// "Replica exchange"): R copies of every chain at inverse temperatures
    /// 1 = β_0 > … > β_{R−1} of the data term, advanced by the sampler above, with
    /// non-reversible even/odd swaps between neighbours; only β = 1 is observed. Every model.
    /// Off by default (`replicas = 1`); every field is sweepable (`sampler.tempering.replicas`).
    pub tempering: TemperingConfig,
}

impl SamplerConfig {
    /// The replica-exchange settings when tempering is on (`tempering.replicas` ≥ 2).
    pub fn tempering(&self) -> Option<&TemperingConfig> {
        (self.tempering.replicas >= 2).then_some(&self.tempering)
    }
}

/// The proposal a sampler makes at every step ([`SamplerConfig::proposal`]; the moves and
/// their acceptance ratios are in [`crate::sim::langevin`]).
///
/// The cached-gradient kernel of every model dispatches on it once per step
/// ([`crate::sim::kernel::mala::Kernel::proposal`]) with an exhaustive match, so a new
/// proposal (a new variant) does not build until the kernel handles it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proposal {
    /// Unadjusted Langevin (ULA, paper App. A.1): every move is taken, O(η) bias.
    Langevin,
    /// MALA (spec 02 (c)): the Langevin move accepted with the Metropolis–Hastings
    /// probability of [`crate::sim::langevin`]; exact for any η.
    MetropolisLangevin,
    /// HMC: one proposal is `leapfrog_steps` leapfrog steps of size √(2η) (jittered) and one
    /// Metropolis test on H ([`crate::sim::langevin`]); a step costs `leapfrog_steps` gradient evaluations.
    Hmc {
        /// L ≥ 1; L = 1 proposes as MALA does (same law, different draws).
        leapfrog_steps: usize,
    },
}

impl Proposal {
    /// Whether every step is accepted or rejected by a Metropolis test (MALA, HMC), so that
    /// acceptance is counted and the step size is steered by it ([`crate::sim::adapt`]).
    pub fn is_metropolis(self) -> bool {
        self != Proposal::Langevin
    }

    /// HMC's L (`None` for the Langevin proposals).
    pub fn leapfrog_steps(self) -> Option<usize> {
        match self {
            Proposal::Hmc { leapfrog_steps } => Some(leapfrog_steps),
            _ => None,
        }
    }
}

/// `sampler.tempering` (see [`SamplerConfig::tempering`] and [`crate::sim::kernel::tempering`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemperingConfig {
    /// R, the number of replicas per chain including the observed β = 1 one: 2 … 64 (1, the
    /// default: no tempering). Every replica costs as much as a chain.
    #[serde(default = "default_replicas")]
    pub replicas: usize,
    /// Adapt the ladder during burn-in (default true): its β's are moved to equal swap
    /// rejection between neighbours (Syed et al. 2022, §5) at every step-size adaptation of
    /// the first half of burn-in, then frozen; the summary reports the barrier Λ and the
    /// R ≈ 2Λ + 1 it suggests. Needs `burn_in` > 0.
    #[serde(default = "default_true")]
    pub adapt: bool,
    /// β of the hottest replica, in (0, 1) (default 0.01; β = 0 would be the prior alone).
    #[serde(default = "default_beta_min")]
    pub beta_min: f64,
    /// Steps (proposals with HMC) between swap rounds (default 10). A round after which a
    /// replica changed state re-evaluates its gradient once.
    #[serde(default = "default_swap_every")]
    pub swap_every: usize,
    /// With `adapt = true`: let R itself follow the barrier, ⌈2Λ⌉ + 1 slots (Syed et al. 2022,
    /// §5.3), chosen in the second quarter of burn-in and at most this many (2 … 64); `replicas`
    /// is then the starting R. Unset (the default): R stays `replicas`. Every slot costs as
    /// much as a chain, so this bounds the run's cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<usize>,
}

impl Default for TemperingConfig {
    fn default() -> Self {
        TemperingConfig {
            replicas: default_replicas(),
            adapt: true,
            beta_min: default_beta_min(),
            swap_every: default_swap_every(),
            max_replicas: None,
        }
    }
}

impl TemperingConfig {
    /// Whether tempering is off (one replica) and every setting at its default, so that the
    /// table is left out of a written configuration.
    pub fn is_off(&self) -> bool {
        *self == TemperingConfig::default()
    }
}

fn default_replicas() -> usize {
    1
}

fn default_true() -> bool {
    true
}

fn default_beta_min() -> f64 {
    0.01
}

fn default_swap_every() -> usize {
    10
}

/// The constant preconditioner of the collapsed sampler (see
/// [`SamplerConfig::preconditioner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preconditioner {
    /// M = I.
    None,
    /// One scalar per neuron.
    Neuron,
    /// One fan-in × fan-in matrix per neuron.
    Block,
}

impl Preconditioner {
    /// The name in the experiment file.
    pub fn name(self) -> &'static str {
        match self {
            Preconditioner::None => "none",
            Preconditioner::Neuron => "neuron",
            Preconditioner::Block => "block",
        }
    }
}

/// The metric of the sampler (see [`SamplerConfig::metric`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricKind {
    /// M = I.
    #[default]
    Identity,
    /// A diagonal M adapted during burn-in.
    Diag,
}

impl MetricKind {
    /// The name in the experiment file.
    pub fn name(self) -> &'static str {
        match self {
            MetricKind::Identity => "identity",
            MetricKind::Diag => "diag",
        }
    }

    /// The metric a name in the experiment file stands for; a refusal names `sampler.metric`,
    /// the value and what is allowed.
    pub fn parse(name: &str) -> Result<MetricKind> {
        match name {
            "identity" => Ok(MetricKind::Identity),
            "diag" => Ok(MetricKind::Diag),
            other => {
                let shown: String = other.chars().take(60).collect();
                Err(Error::invalid(format!(
                    "sampler.metric = \"{shown}\" is not allowed; it is \"identity\" (the default) or \"diag\" (a diagonal mass matrix adapted during burn-in)"
                )))
            }
        }
    }
}

/// What the Langevin dynamics runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SamplerMethod {
    /// Every weight, readout included.
    Plain,
    /// Hidden weights only; the readout integrated out and drawn exactly.
    Collapsed,
}

fn default_method() -> SamplerMethod {
    SamplerMethod::Plain
}

/// The likelihood of the data term (see [`crate::sim::model::likelihood`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Likelihood {
    /// |f − y|²/(2κ) (App. A.1).
    Gaussian,
    /// Σ log(1 + e^{−y f})/κ with y = ±1 (App. A.2, E.2).
    CrossEntropy,
}

fn default_likelihood() -> Likelihood {
    Likelihood::Gaussian
}

/// Initial state of the chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Start {
    /// From the prior.
    Cold,
    /// Teacher-aligned first layer.
    Hot,
    /// Both, compared.
    Both,
}

fn default_start() -> Start {
    Start::Cold
}

/// Whether the hot start shares the cold start's noise streams (see
/// [`SamplerConfig::starts_coupling`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartsCoupling {
    /// Each start on streams of its own seed.
    #[default]
    Independent,
    /// Both starts on the streams of `sampler.seed`.
    Coupled,
}

impl StartsCoupling {
    /// The name in the experiment file.
    pub fn name(self) -> &'static str {
        match self {
            StartsCoupling::Independent => "independent",
            StartsCoupling::Coupled => "coupled",
        }
    }

    /// Whether this is the default, left out of a written configuration.
    pub fn is_independent(&self) -> bool {
        *self == StartsCoupling::Independent
    }
}

fn default_temperature() -> f64 {
    1.0
}
fn default_precision() -> Precision {
    Precision::F32
}

/// `[priors]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorsConfig {
    /// σ_l² for l = 1 … L (readout last). W^1 ~ 𝒩(0, σ1²/d), W^l ~ 𝒩(0, σ_l²/N_{l−1}),
    /// readout ~ 𝒩(0, σ_L²/N_{L−1}) (standard) or 𝒩(0, σ_L²/N_{L−1}²) (mean-field). Omitted:
    /// every σ_l² = 1.
    #[serde(default)]
    pub sigma2: Option<Vec<f64>>,
}

mod raw;
mod validate;

#[cfg(test)]
pub(crate) mod tests;
