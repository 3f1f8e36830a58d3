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
//! mala = false              # Metropolis-adjusted steps; optional
//! # hmc_steps = 10          # fcn + mala only: HMC, L leapfrog steps per proposal
//! # preconditioner = "block" # collapsed + adapt_step only: none | neuron | block (default)
//! [priors]                  # optional; σ_l² of every layer, readout last; default all 1
//! sigma2 = [1.0, 1.0]
//! ```

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::sim::model::activation::Activation;

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

/// Which architecture.
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

/// Readout prior scaling (spec 00).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Parametrization {
    /// Readout prior variance σ_L²/N_{L−1}.
    Standard,
    /// Readout prior variance σ_L²/N_{L−1}².
    MeanField,
}

/// `[model]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Architecture: "fcn", "cnn" (non-overlapping patches, App. E.1.2) or "attention"
    /// (softmax attention, App. E.3).
    pub kind: ModelKind,
    /// Hidden-layer activation: erf | relu | tanh | linear | poly (σ = 1 + h + h²); default
    /// erf. The attention model has no such activation (its non-linearity is the softmax).
    #[serde(default = "default_activation")]
    pub activation: Activation,
    /// Hidden widths N_1 … N_{L−1}; `[40]` is a two-layer network with 40 hidden neurons.
    /// CNN: exactly one entry, the number of channels N. Attention: leave it out.
    #[serde(default)]
    pub widths: Vec<usize>,
    /// "standard" (default) or "mean-field" readout scaling.
    #[serde(default = "default_parametrization")]
    pub parametrization: Parametrization,
    /// Layer normalisation of the input of every hidden layer l ≥ 2 (paper App. C.5, Fig. 6):
    /// per input, over the N_{l−1} neurons, LN(a) = (a − mean)/√(variance + 10⁻⁶), no learned
    /// gain or bias; the readout sees the un-normalised activations (default false).
    #[serde(default)]
    pub layernorm: bool,
    /// CNN only: the patch size S. The input x ∈ R^d is cut into N_w = d/S non-overlapping
    /// patches x_i of S consecutive coordinates (S must divide d).
    #[serde(default)]
    pub patch: Option<usize>,
    /// Attention only: the number of heads H.
    #[serde(default)]
    pub heads: Option<usize>,
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

/// `[sampler]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplerConfig {
    /// Ridge κ: the likelihood variance, π ∝ exp(−|f(X) − y|²/(2κ))·prior (App. A.1). With
    /// `likelihood = "cross-entropy"` it divides the cross-entropy instead,
    /// π ∝ exp(−Σ_μ log(1 + e^{−y_μ f(x_μ)})/κ)·prior: κ = 1 is the Bayesian posterior of the
    /// logistic likelihood, κ < 1 weighs the data more (a temperature of the data term alone).
    pub kappa: f64,
    /// "gaussian" (default; the regression posterior of App. A.1) or "cross-entropy" (the
    /// two-class cross-entropy of App. A.2 with labels y = ±1, i.e. softmax over the logits
    /// (f/2, −f/2); needs a `target.parity` label).
    #[serde(default = "default_likelihood")]
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
    #[serde(default = "default_temperature")]
    pub temperature: f64,
    /// "f32" (default) or "f64".
    #[serde(default = "default_precision")]
    pub precision: Precision,
    /// Layers held at their initial (prior) values, numbered 1 … L (L = readout); e.g. `[1]`
    /// freezes the first layer, which turns the readout posterior into Bayesian linear
    /// regression on random features.
    #[serde(default)]
    pub frozen_layers: Vec<usize>,
    /// Initial state: "cold" (default; weights drawn from the prior), "hot" (teacher-aligned:
    /// every first-layer neuron's component along w* set to ±σ1, alternating signs, the rest
    /// from the prior; the CNN's filters likewise, attention heads as in [`crate::sim::model::attention`]),
    /// or "both" (two ensembles of `chains` chains each, from the same
    /// streams; the summary reports the hot one beside the cold one and flags them "not
    /// equilibrated" when they disagree beyond their errors — spec 02, "First-order
    /// transitions cause hysteresis").
    #[serde(default = "default_start")]
    pub start: Start,
    /// Step-size control (spec 02 (a)): during burn-in, at every measurement (every `thin`
    /// steps, but at most about 200 times over the burn-in), estimate λ_max of the Hessian of U by power iteration on Hessian–vector
    /// products (max over chains) and set η = min(`step`, 0.1/λ_max) — with `mala` (every
    /// model) η = min(`step`, s/λ_max) with s starting at 1 and steered towards an acceptance
    /// of 0.574, 0.7 with `hmc_steps` (docs/langevin.md, "MALA"); frozen after burn-in so that the sampled chain is a fixed
    /// Markov kernel. Default false (η = `step` throughout).
    #[serde(default)]
    pub adapt_step: bool,
    /// "plain" (default): Langevin on every weight. "collapsed" (spec 02 (b)): the readout
    /// is integrated out exactly (its posterior given the hidden features is Gaussian),
    /// Langevin runs on the hidden weights only and readouts are drawn exactly from their
    /// conditional at every measurement; much less stiff when P/κ is large (docs/langevin.md).
    /// For the CNN the readout W² and for attention the value vectors w_h are integrated out.
    #[serde(default = "default_method")]
    pub method: SamplerMethod,
    /// Metropolis-adjusted Langevin (MALA, spec 02 (c)): every step is a proposal accepted
    /// with the Metropolis–Hastings probability, which removes the O(η) bias of the
    /// unadjusted chain; the acceptance rate is reported in the diagnostics. Default false.
    #[serde(default)]
    pub mala: bool,
    /// FCN with `mala = true` only: Hamiltonian Monte Carlo instead of MALA (docs/langevin.md,
    /// "HMC"): every step is one proposal made of L = `hmc_steps` leapfrog steps of size
    /// ε = √(2η) with the sampler's metric (the collapsed preconditioner) as inverse mass
    /// matrix, then one Metropolis test; a step therefore costs L gradient evaluations
    /// (`steps`, `burn_in` and `thin` count proposals). L = 1 is MALA. With `adapt_step` the
    /// acceptance is steered to 0.7 instead of 0.574. An integer ≥ 1; absent (default): MALA.
    #[serde(default)]
    pub hmc_steps: Option<usize>,
    /// Collapsed sampler with `adapt_step` only: the constant preconditioner M of the last
    /// hidden layer's weights, θ ← θ − ηM∇U + √(2ηT·M)ξ, set during burn-in (averaged over
    /// its second half) and frozen after it (docs/langevin.md, "Preconditioner").
    /// "block" (default): one n_in × n_in matrix per neuron, the inverse of its Gauss–Newton
    /// block. "neuron": one scalar per neuron, its mean Gauss–Newton curvature (the default
    /// before the block existed; mixes worse, BENCHMARKS.md). "none": M = I.
    #[serde(default)]
    pub preconditioner: Option<Preconditioner>,
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

/// The largest sizes accepted, to turn typos (an extra zero or three) into an error instead
/// of an out-of-memory abort.
const MAX_DIM: usize = 1 << 20;
const MAX_ELEMENTS: usize = 1 << 31;

impl ExperimentConfig {
    /// Parses and validates an experiment file's text. `source` names the file in errors.
    pub fn from_toml(text: &str, source: &str) -> Result<Self> {
        let cfg: ExperimentConfig =
            toml::from_str(text).map_err(|e| crate::error::toml_error(source, text, &e))?;
        cfg.validate().map_err(|e| e.context(source))?;
        Ok(cfg)
    }

    /// As [`ExperimentConfig::from_toml`] for text the program generated from the user's
    /// file (a sweep's grid point): a syntax or type error quotes the offending line rather
    /// than a line number in text the user never saw. `where_` names the file and grid point.
    pub fn from_generated_toml(text: &str, where_: &str) -> Result<Self> {
        let cfg: ExperimentConfig = toml::from_str(text)
            .map_err(|e| crate::error::generated_toml_error(where_, text, &e))?;
        cfg.validate().map_err(|e| e.context(where_))?;
        Ok(cfg)
    }

    /// Checks every field against what the engine supports.
    pub fn validate(&self) -> Result<()> {
        let m = &self.model;
        self.validate_kind()?;
        if m.widths.is_empty() && m.kind != ModelKind::Attention {
            return Err(Error::invalid(
                "model.widths = [] is not allowed; give at least one hidden width, e.g. [40]",
            ));
        }
        for (i, &w) in m.widths.iter().enumerate() {
            if w == 0 || w > MAX_DIM {
                return Err(Error::invalid(format!(
                    "model.widths[{i}] = {w} is not allowed; it must be between 1 and {MAX_DIM}"
                )));
            }
        }
        let d = &self.data;
        if d.d == 0 || d.d > MAX_DIM {
            return Err(Error::invalid(format!(
                "data.d = {} is not allowed; it must be between 1 and {MAX_DIM}",
                d.d
            )));
        }
        if d.n_test == 0 {
            return Err(Error::invalid(
                "data.n_test = 0 is not allowed; it must be at least 1",
            ));
        }
        for (name, rows) in [("data.p", d.p), ("data.n_test", d.n_test)] {
            let widest =
                m.widths.iter().copied().max().unwrap_or(1).max(d.d) * d.tokens.unwrap_or(1).max(1);
            if rows.saturating_mul(widest) > MAX_ELEMENTS {
                return Err(Error::invalid(format!(
                    "{name} = {rows} is not allowed; {name} × max(d, widths) must stay below {MAX_ELEMENTS}"
                )));
            }
        }
        if !(d.power_law_exponent.is_finite() && d.power_law_exponent >= 0.0) {
            return Err(Error::invalid(format!(
                "data.power_law_exponent = {} is not allowed; it must be a finite number >= 0",
                d.power_law_exponent
            )));
        }
        self.validate_target()?;
        let s = &self.sampler;
        crate::error::require_positive("sampler.kappa", s.kappa)?;
        crate::error::require_positive("sampler.step", s.step)?;
        crate::error::require_positive("sampler.temperature", s.temperature)?;
        if s.steps == 0 {
            return Err(Error::invalid(
                "sampler.steps = 0 is not allowed; it must be at least 1",
            ));
        }
        if s.thin == 0 {
            return Err(Error::invalid(
                "sampler.thin = 0 is not allowed; it must be at least 1",
            ));
        }
        if s.burn_in >= s.steps {
            return Err(Error::invalid(format!(
                "sampler.burn_in = {} is not allowed; it must be smaller than sampler.steps = {}",
                s.burn_in, s.steps
            )));
        }
        if s.steps - s.burn_in < s.thin {
            return Err(Error::invalid(format!(
                "sampler.thin = {} is not allowed; it must be at most sampler.steps − sampler.burn_in = {} so that at least one sample is taken",
                s.thin,
                s.steps - s.burn_in
            )));
        }
        if s.chains == 0 || s.chains > 1_000_000 {
            return Err(Error::invalid(format!(
                "sampler.chains = {} is not allowed; it must be between 1 and 1000000",
                s.chains
            )));
        }
        if s.likelihood == Likelihood::CrossEntropy && self.target.parity.is_none() {
            return Err(Error::invalid(
                "sampler.likelihood = \"cross-entropy\" is not allowed with this [target]; it needs ±1 labels: set target.parity = k (App. E.2)",
            ));
        }
        let layers = self.n_groups();
        for (i, &l) in s.frozen_layers.iter().enumerate() {
            if l == 0 || l > layers {
                return Err(Error::invalid(format!(
                    "sampler.frozen_layers[{i}] = {l} is not allowed; layers are numbered 1 … {layers} (readout = {layers})"
                )));
            }
        }
        if s.method == SamplerMethod::Collapsed {
            if s.likelihood != Likelihood::Gaussian {
                return Err(Error::invalid(
                    "sampler.method = \"collapsed\" with sampler.likelihood = \"cross-entropy\" is not allowed; integrating the readout out exactly needs the Gaussian likelihood (the readout posterior is then Gaussian): use method = \"plain\"",
                ));
            }
            if s.frozen_layers.contains(&layers) {
                return Err(Error::invalid(format!(
                    "sampler.method = \"collapsed\" with the readout (layer {layers}) in sampler.frozen_layers is not allowed; the collapsed sampler integrates the readout out, so it cannot be held fixed: use method = \"plain\" or unfreeze layer {layers}"
                )));
            }
        }
        if let Some(l) = s.hmc_steps {
            if l == 0 || l > 10_000 {
                return Err(Error::invalid(format!(
                    "sampler.hmc_steps = {l} is not allowed; it is the number of leapfrog steps per HMC proposal, an integer between 1 and 10000"
                )));
            }
            if !s.mala {
                return Err(Error::invalid(format!(
                    "sampler.hmc_steps = {l} is not allowed with mala = false; HMC is exact only through its Metropolis test: set mala = true"
                )));
            }
        }
        if let Some(pc) = s.preconditioner {
            let name = pc.name();
            if s.method != SamplerMethod::Collapsed || !s.adapt_step {
                return Err(Error::invalid(format!(
                    "sampler.preconditioner = \"{name}\" is not allowed here; it is set during burn-in by the collapsed sampler only: it needs method = \"collapsed\" and adapt_step = true"
                )));
            }
        }
        if let Some(s2) = &self.priors.sigma2 {
            if s2.len() != layers {
                return Err(Error::invalid(format!(
                    "priors.sigma2 has {} entries, which is not allowed; it needs one per layer, readout last ({layers} for widths = {:?})",
                    s2.len(),
                    m.widths
                )));
            }
            for (i, &v) in s2.iter().enumerate() {
                crate::error::require_positive(&format!("priors.sigma2[{i}]"), v)?;
            }
        }
        Ok(())
    }

    fn validate_target(&self) -> Result<()> {
        let t = &self.target;
        let given = [
            t.hermite.is_some(),
            t.terms.is_some(),
            t.parity.is_some(),
            t.cubic_tokens,
        ]
        .iter()
        .filter(|&&b| b)
        .count();
        if given != 1 {
            return Err(Error::invalid(format!(
                "[target] sets {given} of hermite, terms, parity, cubic_tokens, which is not allowed; set exactly one (e.g. hermite = 3)"
            )));
        }
        let attention = self.model.kind == ModelKind::Attention;
        if attention && !t.cubic_tokens {
            return Err(Error::invalid(
                "[target] of model.kind = \"attention\" must be cubic_tokens = true (paper App. E.3); hermite, terms and parity are targets of single inputs",
            ));
        }
        if !attention && t.cubic_tokens {
            return Err(Error::invalid(
                "target.cubic_tokens = true is not allowed here; it is the target of model.kind = \"attention\" only",
            ));
        }
        if attention && self.data.d < 3 {
            return Err(Error::invalid(format!(
                "data.d = {} is not allowed with target.cubic_tokens; the target uses token coordinates 1, 2, 3, so d must be at least 3",
                self.data.d
            )));
        }
        const MAX_DEGREE: usize = 20;
        if let Some(m) = t.hermite {
            if m > MAX_DEGREE {
                return Err(Error::invalid(format!(
                    "target.hermite = {m} is not allowed; it must be between 0 and {MAX_DEGREE}"
                )));
            }
        }
        if let Some(terms) = &t.terms {
            if terms.is_empty() {
                return Err(Error::invalid(
                    "target.terms = [] is not allowed; give at least one [degree, coefficient] pair",
                ));
            }
            for (i, &(m, c)) in terms.iter().enumerate() {
                if m > MAX_DEGREE {
                    return Err(Error::invalid(format!(
                        "target.terms[{i}] has degree {m}, which is not allowed; degrees must be between 0 and {MAX_DEGREE}"
                    )));
                }
                crate::error::require_finite(&format!("target.terms[{i}] coefficient"), c)?;
            }
        }
        if let Some(k) = t.parity {
            if k == 0 || k > self.data.d {
                return Err(Error::invalid(format!(
                    "target.parity = {k} is not allowed; it must be between 1 and data.d = {}",
                    self.data.d
                )));
            }
        }
        Ok(())
    }

    /// σ_l² for every layer, readout last (defaults filled in).
    pub fn sigma2(&self) -> Vec<f64> {
        self.priors
            .sigma2
            .clone()
            .unwrap_or_else(|| vec![1.0; self.n_groups()])
    }

    /// Number of parameter groups ("layers" of `priors.sigma2` and `sampler.frozen_layers`):
    /// FCN: hidden layers + readout; CNN: filters W¹ and readout W²; attention: the
    /// attention matrices A_h and the value vectors w_h.
    pub fn n_groups(&self) -> usize {
        match self.model.kind {
            ModelKind::Fcn => self.model.widths.len() + 1,
            ModelKind::Cnn | ModelKind::Attention => 2,
        }
    }

    /// The fields that belong to one architecture only (`model.patch`, `model.heads`,
    /// `data.tokens`), the shapes each architecture needs, and the sampler options that only
    /// the FCN engine has.
    fn validate_kind(&self) -> Result<()> {
        let (m, d, s) = (&self.model, &self.data, &self.sampler);
        let kind = match m.kind {
            ModelKind::Fcn => "fcn",
            ModelKind::Cnn => "cnn",
            ModelKind::Attention => "attention",
        };
        let only = |field: &str, value: usize, owner: &str| {
            Error::invalid(format!(
                "{field} = {value} is not allowed with model.kind = \"{kind}\"; it belongs to model.kind = \"{owner}\" only"
            ))
        };
        if m.kind != ModelKind::Cnn {
            if let Some(v) = m.patch {
                return Err(only("model.patch", v, "cnn"));
            }
        }
        if m.kind != ModelKind::Attention {
            if let Some(v) = m.heads {
                return Err(only("model.heads", v, "attention"));
            }
            if let Some(v) = d.tokens {
                return Err(only("data.tokens", v, "attention"));
            }
        }
        if m.kind != ModelKind::Fcn {
            if m.layernorm {
                return Err(Error::invalid(format!(
                    "model.layernorm = true is not allowed with model.kind = \"{kind}\"; layer normalisation exists for \"fcn\" only"
                )));
            }
            if let Some(l) = s.hmc_steps {
                return Err(Error::invalid(format!(
                    "sampler.hmc_steps = {l} is not allowed with model.kind = \"{kind}\"; HMC exists for \"fcn\" only, leave it out"
                )));
            }
            if let Some(pc) = s.preconditioner {
                return Err(Error::invalid(format!(
                    "sampler.preconditioner = \"{}\" is not allowed with model.kind = \"{kind}\"; the per-neuron preconditioner exists for \"fcn\" only, leave it out",
                    pc.name()
                )));
            }
            if s.likelihood != Likelihood::Gaussian {
                return Err(Error::invalid(format!(
                    "sampler.likelihood = \"cross-entropy\" is not allowed with model.kind = \"{kind}\"; use \"gaussian\""
                )));
            }
        }
        match m.kind {
            ModelKind::Fcn => {}
            ModelKind::Cnn => {
                if m.widths.len() != 1 {
                    return Err(Error::invalid(format!(
                        "model.widths = {:?} is not allowed with model.kind = \"cnn\"; give one entry, the number of channels N, e.g. [20]",
                        m.widths
                    )));
                }
                let Some(patch) = m.patch else {
                    return Err(Error::invalid(
                        "model.patch is missing; model.kind = \"cnn\" needs the patch size S (d = N_w·S), e.g. patch = 5",
                    ));
                };
                if patch == 0 || d.d % patch != 0 {
                    return Err(Error::invalid(format!(
                        "model.patch = {patch} is not allowed; it must be at least 1 and divide data.d = {}",
                        d.d
                    )));
                }
                if let Some(k) = self.target.parity {
                    return Err(Error::invalid(format!(
                        "target.parity = {k} is not allowed with model.kind = \"cnn\"; its target is a sum over patches of hermite or terms"
                    )));
                }
            }
            ModelKind::Attention => {
                if !m.widths.is_empty() {
                    return Err(Error::invalid(format!(
                        "model.widths = {:?} is not allowed with model.kind = \"attention\"; leave it out and set model.heads",
                        m.widths
                    )));
                }
                match m.heads {
                    None => {
                        return Err(Error::invalid(
                            "model.heads is missing; model.kind = \"attention\" needs the number of heads H, e.g. heads = 2",
                        ))
                    }
                    Some(h) if h == 0 || h > MAX_DIM => {
                        return Err(Error::invalid(format!(
                            "model.heads = {h} is not allowed; it must be between 1 and {MAX_DIM}"
                        )))
                    }
                    Some(_) => {}
                }
                match d.tokens {
                    None => {
                        return Err(Error::invalid(
                            "data.tokens is missing; model.kind = \"attention\" needs the context length L, e.g. tokens = 16",
                        ))
                    }
                    Some(l) if l == 0 || l > MAX_DIM => {
                        return Err(Error::invalid(format!(
                            "data.tokens = {l} is not allowed; it must be between 1 and {MAX_DIM}"
                        )))
                    }
                    Some(_) => {}
                }
                if m.parametrization != Parametrization::Standard {
                    return Err(Error::invalid(
                        "model.parametrization = \"mean-field\" is not allowed with model.kind = \"attention\"; its priors are fixed by App. E.3, use \"standard\"",
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) const EXAMPLE: &str = r#"
[model]
kind = "fcn"
activation = "erf"
widths = [40]
parametrization = "standard"
[data]
d = 40
p = 1600
n_test = 4000
[target]
hermite = 3
[sampler]
kappa = 1.0
step = 1e-3
steps = 20000
burn_in = 10000
thin = 100
chains = 30
seed = 1
"#;

    #[test]
    fn the_issue_example_parses_with_defaults() {
        let cfg = ExperimentConfig::from_toml(EXAMPLE, "exp.toml").unwrap();
        assert_eq!(cfg.model.widths, vec![40]);
        assert_eq!(cfg.sigma2(), vec![1.0, 1.0]);
        assert_eq!(cfg.sampler.temperature, 1.0);
        assert_eq!(cfg.sampler.precision, Precision::F32);
        assert_eq!(cfg.data.covariance, Covariance::Isotropic);
        let terms = EXAMPLE.replace("hermite = 3", "terms = [[1, 1.0], [3, 0.3]]");
        let cfg = ExperimentConfig::from_toml(&terms, "exp.toml").unwrap();
        assert_eq!(cfg.target.terms, Some(vec![(1, 1.0), (3, 0.3)]));
    }

    #[test]
    fn errors_name_field_value_and_what_is_allowed() {
        let bad = EXAMPLE.replace("step = 1e-3", "step = -1");
        let e = ExperimentConfig::from_toml(&bad, "exp.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "exp.toml: sampler.step = -1 is not allowed; it must be a finite number > 0"
        );
        assert_eq!(e.exit_code(), 2);
        let bad = EXAMPLE.replace("burn_in = 10000", "burn_in = 20000");
        let e = ExperimentConfig::from_toml(&bad, "exp.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sampler.burn_in = 20000") && e.contains("smaller than"),
            "{e}"
        );
        let bad = EXAMPLE.replace("kind = \"fcn\"", "kind = \"cnn\"");
        let e = ExperimentConfig::from_toml(&bad, "exp.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("model.patch is missing"), "{e}");
        let bad = EXAMPLE.replace("activation = \"erf\"", "activation = \"gelu\"");
        let e = ExperimentConfig::from_toml(&bad, "exp.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("gelu") && e.contains("erf"), "{e}");
        let bad = EXAMPLE.replace("seed = 1", "seed = 1\nsped = 2");
        let e = ExperimentConfig::from_toml(&bad, "exp.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sped"), "{e}");
        let bad = EXAMPLE.replace("hermite = 3", "hermite = 3\nparity = 2");
        let e = ExperimentConfig::from_toml(&bad, "exp.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exactly one"), "{e}");
        let bad = format!("{EXAMPLE}\n[priors]\nsigma2 = [1.0]\n");
        let e = ExperimentConfig::from_toml(&bad, "exp.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("priors.sigma2"), "{e}");
    }

    const ATTENTION: &str = r#"
[model]
kind = "attention"
heads = 2
[data]
d = 8
tokens = 16
p = 100
[target]
cubic_tokens = true
[sampler]
kappa = 0.1
step = 1e-4
steps = 100
burn_in = 50
thin = 10
chains = 2
seed = 1
"#;

    #[test]
    fn cnn_and_attention_fields_are_checked_per_architecture() {
        let cfg = ExperimentConfig::from_toml(ATTENTION, "a.toml").unwrap();
        assert_eq!(cfg.n_groups(), 2);
        assert_eq!(cfg.sigma2(), vec![1.0, 1.0]);
        let cnn = EXAMPLE.replace("kind = \"fcn\"", "kind = \"cnn\"\npatch = 8");
        let cfg = ExperimentConfig::from_toml(&cnn, "c.toml").unwrap();
        assert_eq!((cfg.model.patch, cfg.n_groups()), (Some(8), 2));
        let cases = [
            (
                ATTENTION.replace("heads = 2\n", ""),
                "model.heads is missing",
            ),
            (
                ATTENTION.replace("heads = 2", "heads = 0"),
                "model.heads = 0",
            ),
            (
                ATTENTION.replace("tokens = 16\n", ""),
                "data.tokens is missing",
            ),
            (
                ATTENTION.replace("tokens = 16", "tokens = 0"),
                "data.tokens = 0",
            ),
            (
                ATTENTION.replace("cubic_tokens = true", "hermite = 3"),
                "must be cubic_tokens = true",
            ),
            (
                ATTENTION.replace("heads = 2", "heads = 2\nwidths = [4]"),
                "model.widths = [4] is not allowed",
            ),
            (ATTENTION.replace("d = 8", "d = 2"), "data.d = 2"),
            (
                EXAMPLE.replace("hermite = 3", "cubic_tokens = true"),
                "target.cubic_tokens = true is not allowed",
            ),
            (
                EXAMPLE.replace("d = 40", "d = 40\ntokens = 4"),
                "data.tokens = 4 is not allowed with model.kind = \"fcn\"",
            ),
            (
                EXAMPLE.replace("kind = \"fcn\"", "kind = \"fcn\"\nheads = 2"),
                "model.heads = 2",
            ),
            (
                EXAMPLE.replace("kind = \"fcn\"", "kind = \"fcn\"\npatch = 4"),
                "model.patch = 4",
            ),
            (
                cnn.replace("patch = 8", "patch = 7"),
                "model.patch = 7 is not allowed; it must be at least 1 and divide data.d = 40",
            ),
            (cnn.replace("widths = [40]", "widths = [4, 4]"), "one entry"),
            (
                cnn.replace("hermite = 3", "parity = 2"),
                "target.parity = 2",
            ),
            (
                ATTENTION.replace("heads = 2", "heads = 2\nlayernorm = true"),
                "model.layernorm = true is not allowed",
            ),
            (
                cnn.replace("seed = 1", "seed = 1\nlikelihood = \"cross-entropy\""),
                "sampler.likelihood = \"cross-entropy\" is not allowed with model.kind = \"cnn\"",
            ),
            (
                EXAMPLE.replace("seed = 1", "seed = 1\nmala = true\nhmc_steps = 0"),
                "sampler.hmc_steps = 0 is not allowed; it is the number of leapfrog steps",
            ),
            (
                EXAMPLE.replace("seed = 1", "seed = 1\nhmc_steps = 10"),
                "sampler.hmc_steps = 10 is not allowed with mala = false",
            ),
            (
                cnn.replace("seed = 1", "seed = 1\nmala = true\nhmc_steps = 5"),
                "sampler.hmc_steps = 5 is not allowed with model.kind = \"cnn\"",
            ),
            (
                cnn.replace(
                    "seed = 1",
                    "seed = 1\nmethod = \"collapsed\"\nadapt_step = true\npreconditioner = \"block\"",
                ),
                "sampler.preconditioner = \"block\" is not allowed with model.kind = \"cnn\"",
            ),
            (
                ATTENTION.replace("seed = 1", "seed = 1\nmethod = \"collapsed\"\nfrozen_layers = [2]"),
                "sampler.method = \"collapsed\" with the readout (layer 2) in sampler.frozen_layers is not allowed",
            ),
        ];
        // The collapsed sampler exists for every architecture (the readout is linear in
        // features for the CNN and for attention).
        for text in [cnn.clone(), ATTENTION.to_string()] {
            let text = text.replace("seed = 1", "seed = 1\nmethod = \"collapsed\"");
            ExperimentConfig::from_toml(&text, "x.toml").unwrap();
        }
        for (text, want) in cases {
            let e = ExperimentConfig::from_toml(&text, "x.toml").unwrap_err();
            assert_eq!(e.exit_code(), 2, "{want}");
            let msg = e.to_string();
            assert!(msg.contains(want), "want `{want}` in: {msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Arbitrary text never panics the parser.
        #[test]
        fn random_text_never_panics(text in "\\PC{0,400}") {
            let _ = ExperimentConfig::from_toml(&text, "fuzz.toml");
        }

        /// Mutating a valid file (cutting it, replacing a number) never panics.
        #[test]
        fn mutated_example_never_panics(cut in 0usize..400, pick in 0usize..12,
                                        value in prop_oneof![Just("-1".to_string()), Just("0".to_string()),
                                            Just("nan".to_string()), Just("inf".to_string()), Just("1e308".to_string()),
                                            Just("18446744073709551615".to_string()), Just("\"x\"".to_string()),
                                            Just("[]".to_string()), Just("[[0, nan]]".to_string())]) {
            let cut = cut.min(EXAMPLE.len());
            let _ = ExperimentConfig::from_toml(&EXAMPLE[..cut], "fuzz.toml");
            let keys = ["widths", "d", "p", "n_test", "hermite", "kappa", "step", "steps",
                        "burn_in", "thin", "chains", "seed"];
            let key = keys[pick];
            let mutated: String = EXAMPLE.lines().map(|l| {
                if l.split('=').next().map(str::trim) == Some(key) { format!("{key} = {value}") } else { l.to_string() }
            }).collect::<Vec<_>>().join("\n");
            let _ = ExperimentConfig::from_toml(&mutated, "fuzz.toml");
        }
    }
}
