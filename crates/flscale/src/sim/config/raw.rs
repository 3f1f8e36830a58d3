//! The tables as the experiment file writes them, one field per key, and their conversion to
//! the typed configuration, where a setting that only some variants have (`patch` of the CNN,
//! `heads` of attention, `hmc_steps` of HMC) is part of its variant. Serde reads and writes
//! [`ModelConfig`] and [`SamplerConfig`] through [`RawModelConfig`] and [`RawSamplerConfig`],
//! so the file's format, the sweeps' dotted paths ([`crate::experiment::fields`]) and the
//! written configuration stay those of these fields.

use super::*;

/// `[model]` as written. The container name is the typed one, as for [`RawSamplerConfig`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "ModelConfig", deny_unknown_fields)]
pub(super) struct RawModelConfig {
    kind: ModelKind,
    #[serde(default = "default_activation")]
    activation: Activation,
    #[serde(default, deserialize_with = "validate::widths")]
    widths: Vec<usize>,
    #[serde(default = "default_parametrization")]
    parametrization: Parametrization,
    #[serde(default)]
    layernorm: bool,
    #[serde(default)]
    patch: Option<usize>,
    #[serde(default)]
    heads: Option<usize>,
}

impl RawModelConfig {
    /// The architecture that `kind` names with its setting: `patch` belongs to the CNN and
    /// `heads` to attention, each needed there and refused elsewhere.
    fn architecture(&self) -> Result<NetworkVariant> {
        let kind = self.kind.name();
        let only = |field: &str, value: usize, owner: &str| {
            Error::invalid(format!(
                "{field} = {value} is not allowed with model.kind = \"{kind}\"; it belongs to model.kind = \"{owner}\" only"
            ))
        };
        match (self.kind, self.patch, self.heads) {
            (ModelKind::Fcn | ModelKind::Attention, Some(v), _) => Err(only("model.patch", v, "cnn")),
            (ModelKind::Fcn | ModelKind::Cnn, _, Some(v)) => Err(only("model.heads", v, "attention")),
            (ModelKind::Fcn, None, None) => Ok(NetworkVariant::Fcn),
            (ModelKind::Cnn, Some(patch), None) => Ok(NetworkVariant::Cnn { patch }),
            (ModelKind::Cnn, None, None) => Err(Error::invalid(
                "model.patch is missing; model.kind = \"cnn\" needs the patch size S (d = N_w·S), e.g. patch = 5",
            )),
            (ModelKind::Attention, None, Some(heads)) => Ok(NetworkVariant::Attention { heads }),
            (ModelKind::Attention, None, None) => Err(Error::invalid(
                "model.heads is missing; model.kind = \"attention\" needs the number of heads H, e.g. heads = 2",
            )),
        }
    }
}

impl TryFrom<RawModelConfig> for ModelConfig {
    type Error = Error;

    fn try_from(r: RawModelConfig) -> Result<Self> {
        Ok(ModelConfig {
            architecture: r.architecture()?,
            activation: r.activation,
            widths: r.widths,
            parametrization: r.parametrization,
            layernorm: r.layernorm,
        })
    }
}

impl From<ModelConfig> for RawModelConfig {
    fn from(m: ModelConfig) -> Self {
        RawModelConfig {
            kind: m.kind(),
            patch: m.patch(),
            heads: m.heads(),
            activation: m.activation,
            widths: m.widths,
            parametrization: m.parametrization,
            layernorm: m.layernorm,
        }
    }
}

/// `[sampler]` as written. The container name is the typed one so that serde's messages
/// ("expected struct SamplerConfig") name what the user sees documented.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "SamplerConfig", deny_unknown_fields)]
pub(super) struct RawSamplerConfig {
    kappa: f64,
    #[serde(default = "default_likelihood")]
    likelihood: Likelihood,
    step: f64,
    steps: usize,
    burn_in: usize,
    thin: usize,
    chains: usize,
    seed: u64,
    #[serde(default = "default_temperature")]
    temperature: f64,
    #[serde(default = "default_precision")]
    precision: Precision,
    #[serde(default)]
    frozen_layers: Vec<usize>,
    #[serde(default = "default_start")]
    start: Start,
    #[serde(default, skip_serializing_if = "StartsCoupling::is_independent")]
    starts_coupling: StartsCoupling,
    #[serde(default = "default_true")]
    adapt_step: bool,
    #[serde(default = "default_method")]
    method: SamplerMethod,
    #[serde(default = "default_true")]
    mala: bool,
    #[serde(default)]
    hmc_steps: Option<usize>,
    #[serde(default)]
    preconditioner: Option<Preconditioner>,
    /// [`MetricKind`] by name; left out of a written file when it is the identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    metric: Option<String>,
    #[serde(default, skip_serializing_if = "TemperingConfig::is_off")]
    tempering: TemperingConfig,
}

/// The most leapfrog steps of one HMC proposal.
const MAX_LEAPFROG_STEPS: usize = 10_000;

impl RawSamplerConfig {
    /// The transition that `mala` and `hmc_steps` name: HMC when both are set, MALA with
    /// `mala` alone, unadjusted Langevin otherwise. `hmc_steps` without `mala` is refused:
    /// HMC is exact only through its Metropolis test.
    fn proposal(&self) -> Result<Proposal> {
        match (self.mala, self.hmc_steps) {
            (_, Some(l)) if l == 0 || l > MAX_LEAPFROG_STEPS => Err(Error::invalid(format!(
                "sampler.hmc_steps = {l} is not allowed; it is the number of leapfrog steps per HMC proposal, an integer between 1 and {MAX_LEAPFROG_STEPS}"
            ))),
            (false, Some(l)) => Err(Error::invalid(format!(
                "sampler.hmc_steps = {l} is not allowed with mala = false; HMC is exact only through its Metropolis test: set mala = true"
            ))),
            (false, None) => Ok(Proposal::Langevin),
            (true, None) => Ok(Proposal::MetropolisLangevin),
            (true, Some(leapfrog_steps)) => Ok(Proposal::Hmc { leapfrog_steps }),
        }
    }
}

impl TryFrom<RawSamplerConfig> for SamplerConfig {
    type Error = Error;

    fn try_from(r: RawSamplerConfig) -> Result<Self> {
        Ok(SamplerConfig {
            proposal: r.proposal()?,
            kappa: r.kappa,
            likelihood: r.likelihood,
            step: r.step,
            steps: r.steps,
            burn_in: r.burn_in,
            thin: r.thin,
            chains: r.chains,
            seed: r.seed,
            temperature: r.temperature,
            precision: r.precision,
            frozen_layers: r.frozen_layers,
            start: r.start,
            starts_coupling: r.starts_coupling,
            adapt_step: r.adapt_step,
            method: r.method,
            preconditioner: r.preconditioner,
            metric: r
                .metric
                .as_deref()
                .map_or(Ok(MetricKind::Identity), MetricKind::parse)?,
            tempering: r.tempering,
        })
    }
}

impl From<SamplerConfig> for RawSamplerConfig {
    fn from(s: SamplerConfig) -> Self {
        RawSamplerConfig {
            mala: s.proposal.is_metropolis(),
            hmc_steps: s.proposal.leapfrog_steps(),
            kappa: s.kappa,
            likelihood: s.likelihood,
            step: s.step,
            steps: s.steps,
            burn_in: s.burn_in,
            thin: s.thin,
            chains: s.chains,
            seed: s.seed,
            temperature: s.temperature,
            precision: s.precision,
            frozen_layers: s.frozen_layers,
            start: s.start,
            starts_coupling: s.starts_coupling,
            adapt_step: s.adapt_step,
            method: s.method,
            preconditioner: s.preconditioner,
            metric: (s.metric != MetricKind::Identity).then(|| s.metric.name().to_string()),
            tempering: s.tempering,
        }
    }
}

/// The whole file as written: the parser of [`ExperimentConfig::from_toml`], which converts
/// the tables itself so that a refused combination reads as a check's sentence after the
/// file's name, like every other check, rather than as a TOML error at a line and column.
#[derive(Deserialize)]
#[serde(rename = "ExperimentConfig", deny_unknown_fields)]
pub(super) struct RawExperimentConfig {
    model: RawModelConfig,
    data: DataConfig,
    target: TargetConfig,
    sampler: RawSamplerConfig,
    #[serde(default)]
    priors: PriorsConfig,
}

impl TryFrom<RawExperimentConfig> for ExperimentConfig {
    type Error = Error;

    fn try_from(r: RawExperimentConfig) -> Result<Self> {
        Ok(ExperimentConfig {
            model: r.model.try_into()?,
            data: r.data,
            target: r.target,
            sampler: r.sampler.try_into()?,
            priors: r.priors,
        })
    }
}
