//! Parsing an experiment file and the checks across its fields: sizes, the target, the
//! sampler's settings, and what belongs to one model kind only.

use super::*;

/// The shortest burn-in over which `sampler.metric = "diag"` is adapted: Stan adapts no
/// metric below 20 warm-up iterations (Stan Reference Manual, "HMC algorithm parameters",
/// automatic parameter tuning).
const MIN_METRIC_BURN_IN: usize = 20;

/// The largest sizes accepted, to turn typos (an extra zero or three) into an error instead
/// of an out-of-memory abort.
const MAX_DIM: usize = 1 << 20;
const MAX_ELEMENTS: usize = 1 << 31;

/// `model.widths` read as integers first, so that a negative entry gets the allowed range
/// (as `[0]` does in [`ExperimentConfig::validate`]) instead of serde's "expected usize".
pub(super) fn widths<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Vec<usize>, D::Error> {
    let raw: Vec<i64> = Vec::deserialize(deserializer)?;
    raw.iter()
        .enumerate()
        .map(|(i, &w)| {
            usize::try_from(w).map_err(|_| {
                serde::de::Error::custom(format!(
                    "model.widths[{i}] = {w} is not allowed; it must be between 1 and {MAX_DIM}"
                ))
            })
        })
        .collect()
}

impl ExperimentConfig {
    /// Parses and validates an experiment file's text. `source` names the file in errors.
    pub fn from_toml(text: &str, source: &str) -> Result<Self> {
        let raw: raw::RawExperimentConfig =
            toml::from_str(text).map_err(|e| crate::error::toml_error(source, text, &e))?;
        Self::checked(raw).map_err(|e| e.context(source))
    }

    /// As [`ExperimentConfig::from_toml`] for text the program generated from the user's
    /// file (a sweep's grid point): a syntax or type error quotes the offending line rather
    /// than a line number in text the user never saw. `where_` names the file and grid point.
    pub fn from_generated_toml(text: &str, where_: &str) -> Result<Self> {
        let raw: raw::RawExperimentConfig = toml::from_str(text)
            .map_err(|e| crate::error::generated_toml_error(where_, text, &e))?;
        Self::checked(raw).map_err(|e| e.context(where_))
    }

    /// The typed configuration of a parsed file, validated.
    fn checked(raw: raw::RawExperimentConfig) -> Result<Self> {
        let cfg = ExperimentConfig::try_from(raw)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks every field against what the engine supports.
    pub fn validate(&self) -> Result<()> {
        self.validate_kind()?;
        self.validate_sizes()?;
        self.validate_target()?;
        self.validate_sampler()?;
        self.validate_tempering(&self.sampler.tempering)?;
        self.validate_priors()
    }

    /// Widths and data sizes: positive, and below the limits that catch typos.
    fn validate_sizes(&self) -> Result<()> {
        let m = &self.model;
        if m.widths.is_empty() && m.kind() != ModelKind::Attention {
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
        Ok(())
    }

    /// The sampler's numbers and the combinations of its settings that are refused, each for
    /// its mathematical reason.
    fn validate_sampler(&self) -> Result<()> {
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
        if let Some(pc) = s.preconditioner {
            let name = pc.name();
            if s.method != SamplerMethod::Collapsed || !s.adapt_step {
                return Err(Error::invalid(format!(
                    "sampler.preconditioner = \"{name}\" is not allowed here; it is set during burn-in by the collapsed sampler only: it needs method = \"collapsed\" and adapt_step = true"
                )));
            }
        }
        self.validate_metric()?;
        if s.starts_coupling == StartsCoupling::Coupled && s.start == Start::Cold {
            return Err(Error::invalid(
                "sampler.starts_coupling = \"coupled\" is not allowed with start = \"cold\"; it puts a hot start on the cold start's noise streams: set start = \"hot\" or \"both\"",
            ));
        }
        Ok(())
    }

    /// `sampler.metric = "diag"`: adapted in windows of the burn-in, with the step re-adapted
    /// after each, and in place of the collapsed preconditioner.
    fn validate_metric(&self) -> Result<()> {
        let s = &self.sampler;
        if s.metric != MetricKind::Diag {
            return Ok(());
        }
        if !s.adapt_step {
            return Err(Error::invalid(
                "sampler.metric = \"diag\" is not allowed with adapt_step = false; the stable step changes by orders of magnitude with the metric, so it is re-adapted after every window: set adapt_step = true",
            ));
        }
        if s.burn_in < MIN_METRIC_BURN_IN {
            return Err(Error::invalid(format!(
                "sampler.metric = \"diag\" is not allowed with burn_in = {}; the metric is adapted in windows of the burn-in, which needs at least {MIN_METRIC_BURN_IN} steps",
                s.burn_in
            )));
        }
        if let Some(pc) = s.preconditioner {
            return Err(Error::invalid(format!(
                "sampler.metric = \"diag\" with sampler.preconditioner = \"{}\" is not allowed; the diagonal metric replaces the collapsed sampler's preconditioner: leave preconditioner unset",
                pc.name()
            )));
        }
        Ok(())
    }

    /// `priors.sigma2`: one positive variance per layer.
    fn validate_priors(&self) -> Result<()> {
        let layers = self.n_groups();
        if let Some(s2) = &self.priors.sigma2 {
            if s2.len() != layers {
                return Err(Error::invalid(format!(
                    "priors.sigma2 has {} entries, which is not allowed; it needs one per layer, readout last ({layers} for widths = {:?})",
                    s2.len(),
                    self.model.widths
                )));
            }
            for (i, &v) in s2.iter().enumerate() {
                crate::error::require_positive(&format!("priors.sigma2[{i}]"), v)?;
            }
        }
        Ok(())
    }

    /// `sampler.tempering`: sizes, and what replica exchange needs from the rest.
    fn validate_tempering(&self, t: &TemperingConfig) -> Result<()> {
        if !(1..=64).contains(&t.replicas) {
            return Err(Error::invalid(format!(
                "sampler.tempering.replicas = {} is not allowed; it is the number of replicas per chain including the observed β = 1 one, an integer between 1 (no tempering) and 64",
                t.replicas
            )));
        }
        if !(t.beta_min > 0.0 && t.beta_min < 1.0) {
            return Err(Error::invalid(format!(
                "sampler.tempering.beta_min = {} is not allowed; it is the hottest replica's inverse temperature of the data term, strictly between 0 and 1 (default 0.01)",
                t.beta_min
            )));
        }
        if t.swap_every == 0 || t.swap_every > 1_000_000 {
            return Err(Error::invalid(format!(
                "sampler.tempering.swap_every = {} is not allowed; it is the number of steps between swap rounds, an integer between 1 and 1000000",
                t.swap_every
            )));
        }
        if let Some(max) = t.max_replicas {
            if !(2..=64).contains(&max) {
                return Err(Error::invalid(format!(
                    "sampler.tempering.max_replicas = {max} is not allowed; it is the most replicas per chain that the adapted ladder may use, an integer between 2 and 64"
                )));
            }
            if t.replicas < 2 || !t.adapt {
                return Err(Error::invalid(format!(
                    "sampler.tempering.max_replicas = {max} is not allowed with replicas = {} and adapt = {}; R is chosen from the barrier while the ladder adapts: set replicas ≥ 2 (the starting R) and adapt = true, or leave max_replicas out",
                    t.replicas, t.adapt
                )));
            }
        }
        if t.replicas == 1 {
            return Ok(());
        }
        if t.adapt && self.sampler.burn_in == 0 {
            return Err(Error::invalid(
                "sampler.tempering.adapt = true is not allowed with burn_in = 0; the ladder is adapted during burn-in: set burn_in > 0 or adapt = false",
            ));
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
        let attention = self.model.kind() == ModelKind::Attention;
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
        match self.model.kind() {
            ModelKind::Fcn => self.model.widths.len() + 1,
            ModelKind::Cnn | ModelKind::Attention => 2,
        }
    }

    /// `data.tokens`, which belongs to attention only, the shapes each architecture needs,
    /// and the settings that apply to the FCN only, each refused for the others with its
    /// reason. (`model.patch` and `model.heads` are part of [`NetworkVariant`].)
    fn validate_kind(&self) -> Result<()> {
        let (m, d, s) = (&self.model, &self.data, &self.sampler);
        let kind = m.kind().name();
        if m.kind() != ModelKind::Attention {
            if let Some(v) = d.tokens {
                return Err(Error::invalid(format!(
                    "data.tokens = {v} is not allowed with model.kind = \"{kind}\"; it belongs to model.kind = \"attention\" only"
                )));
            }
        }
        if m.kind() != ModelKind::Fcn {
            if m.layernorm {
                return Err(Error::invalid(format!(
                    "model.layernorm = true is not allowed with model.kind = \"{kind}\"; layer normalisation exists for \"fcn\" only"
                )));
            }
            // Every kernel (ULA, MALA, HMC), the collapsed posterior, replica exchange and the
            // preconditioner (the inverse Gauss–Newton curvature of each unit a model names,
            // `Model::preconditioned_units`: the FCN's last-layer neurons, the CNN's filters,
            // the attention matrices A_h; kernel/metric.rs) run on every model (one engine).
            if s.likelihood != Likelihood::Gaussian {
                return Err(Error::invalid(format!(
                    "sampler.likelihood = \"cross-entropy\" is not allowed with model.kind = \"{kind}\"; the cross-entropy likelihood is that of ±1 labels (target.parity, App. E.2), and the {kind} targets are real-valued (target.parity is for \"fcn\"): use \"gaussian\""
                )));
            }
        }
        match m.architecture {
            NetworkVariant::Fcn => Ok(()),
            NetworkVariant::Cnn { patch } => self.validate_cnn(patch),
            NetworkVariant::Attention { heads } => self.validate_attention(heads),
        }
    }

    /// The CNN's one width, its patch size against `data.d`, and its targets.
    fn validate_cnn(&self, patch: usize) -> Result<()> {
        let m = &self.model;
        if m.widths.len() != 1 {
            return Err(Error::invalid(format!(
                "model.widths = {:?} is not allowed with model.kind = \"cnn\"; give one entry, the number of channels N, e.g. [20]",
                m.widths
            )));
        }
        if patch == 0 || self.data.d % patch != 0 {
            return Err(Error::invalid(format!(
                "model.patch = {patch} is not allowed; it must be at least 1 and divide data.d = {}",
                self.data.d
            )));
        }
        if let Some(k) = self.target.parity {
            return Err(Error::invalid(format!(
                "target.parity = {k} is not allowed with model.kind = \"cnn\"; its target is a sum over patches of hermite or terms"
            )));
        }
        Ok(())
    }

    /// The attention model's sizes (no widths; heads and tokens in range) and its priors.
    fn validate_attention(&self, heads: usize) -> Result<()> {
        let m = &self.model;
        if !m.widths.is_empty() {
            return Err(Error::invalid(format!(
                "model.widths = {:?} is not allowed with model.kind = \"attention\"; leave it out and set model.heads",
                m.widths
            )));
        }
        if heads == 0 || heads > MAX_DIM {
            return Err(Error::invalid(format!(
                "model.heads = {heads} is not allowed; it must be between 1 and {MAX_DIM}"
            )));
        }
        match self.data.tokens {
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
        Ok(())
    }
}
