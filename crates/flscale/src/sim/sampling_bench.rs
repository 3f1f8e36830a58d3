//! Sampling efficiency of `flscale bench --sampling` (spec 02, "Performance bar": "the figure
//! users feel is time to an equilibrated answer"): effective samples per second of the
//! alignment and of R = E[ρ²] for the plain and the collapsed sampler at the blog setting —
//! two-layer erf network, D = N = 20, y = He1 + 0.3·He3, κ = T_blog = 0.05, σ1² = σ2² = 1
//! (readout variance 1/N), f32 — each with `adapt_step` (its own stable step from λ_max
//! during burn-in), same seed, chains and lengths.
//!
//! ESS = chains × samples / τ with τ the integrated autocorrelation time of the per-chain
//! series ([`super::observables::integrated_autocorrelation_time`]); ESS/s divides by the
//! wall-clock seconds of the sampling loop (burn-in included, since every user pays it).
//!
//! τ subtracts each chain's own mean, so it cannot see chains that sit in different
//! metastable states (neurons specialised or not) and overstates the ESS of a sampler that
//! has not mixed. The bench therefore also reports the *precision per second*
//! 1/(SE²·seconds), SE the standard error of the ensemble mean from the spread of the chains'
//! means (the summary's `*_err`), which does see them: for two samplers of the same
//! posterior the per-sample variance s² is the same and SE² = s²/ESS, so the ratio of their
//! precisions per second is the ratio of their ESS/s (Geyer, *Practical Markov chain Monte
//! Carlo*, Stat. Sci. 7 (1992) 473, sec. 3: the variance of independent chains' means). With
//! few chains SE² is itself uncertain (relative error √(2/(chains − 1))), and the ratio means
//! something only where the two samplers agree on the value (`samplers_agree`).

use serde::Serialize;

use super::config::{ExperimentConfig, Preconditioner, SamplerMethod};
use super::run::run_experiment;
use crate::error::Result;

/// The settings of one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SamplingSetting {
    /// Training-set size P.
    pub p: usize,
    /// Total steps per chain (burn-in is half).
    pub steps: usize,
    /// Measurement interval.
    pub thin: usize,
    /// Ensemble size.
    pub chains: usize,
    /// The collapsed sampler's preconditioner (`sampler.preconditioner`).
    pub preconditioner: Preconditioner,
}

impl Default for SamplingSetting {
    fn default() -> Self {
        SamplingSetting {
            p: 160,
            steps: 40_000,
            thin: 100,
            chains: 8,
            preconditioner: Preconditioner::Block,
        }
    }
}

/// One sampler's measured efficiency.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SamplerEfficiency {
    /// "plain" or "collapsed".
    pub method: String,
    /// The step η after burn-in adaptation.
    pub step: f64,
    /// Steps per second of wall-clock time (all chains advanced once).
    pub steps_per_second: f64,
    /// Alignment and its standard error.
    pub alignment: Option<f64>,
    /// See `alignment`.
    pub alignment_err: Option<f64>,
    /// R = E[ρ²] and its standard error.
    pub r_overlap2: Option<f64>,
    /// See `r_overlap2`.
    pub r_overlap2_err: Option<f64>,
    /// Integrated autocorrelation time of the alignment, in steps.
    pub iat_alignment_steps: Option<f64>,
    /// Integrated autocorrelation time of R, in steps.
    pub iat_r_overlap2_steps: Option<f64>,
    /// Effective samples of the alignment per second.
    pub ess_per_second_alignment: Option<f64>,
    /// Effective samples of R per second.
    pub ess_per_second_r_overlap2: Option<f64>,
    /// 1/(SE²·seconds) of the alignment, SE = `alignment_err` (module doc).
    pub precision_per_second_alignment: Option<f64>,
    /// 1/(SE²·seconds) of R, SE = `r_overlap2_err`.
    pub precision_per_second_r_overlap2: Option<f64>,
    /// Wall-clock seconds of the run (burn-in included).
    pub seconds: f64,
    /// Chains that diverged.
    pub diverged_chains: usize,
}

/// Plain vs collapsed at one setting.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SamplingComparison {
    /// The setting.
    pub setting: SamplingSetting,
    /// The plain sampler.
    pub plain: SamplerEfficiency,
    /// The collapsed sampler.
    pub collapsed: SamplerEfficiency,
    /// collapsed / plain ESS per second of the alignment.
    pub speedup_alignment: Option<f64>,
    /// collapsed / plain ESS per second of R.
    pub speedup_r_overlap2: Option<f64>,
    /// collapsed / plain precision per second of the alignment (module doc).
    pub precision_speedup_alignment: Option<f64>,
    /// collapsed / plain precision per second of R.
    pub precision_speedup_r_overlap2: Option<f64>,
    /// Whether the two samplers agree on the alignment and on R within 3 combined standard
    /// errors; false means at least one has not equilibrated and the ratios are not
    /// comparisons of equals.
    pub samplers_agree: Option<bool>,
}

/// The blog-setting experiment for `method`.
pub fn blog_config(setting: SamplingSetting, method: SamplerMethod) -> Result<ExperimentConfig> {
    let (method, preconditioner) = match method {
        SamplerMethod::Plain => ("plain", String::new()),
        SamplerMethod::Collapsed => (
            "collapsed",
            format!(
                "preconditioner = \"{}\"",
                match setting.preconditioner {
                    Preconditioner::None => "none",
                    Preconditioner::Neuron => "neuron",
                    Preconditioner::Block => "block",
                }
            ),
        ),
    };
    let text = format!(
        r#"
[model]
kind = "fcn"
activation = "erf"
widths = [20]
parametrization = "standard"
[data]
d = 20
p = {p}
n_test = 500
[target]
terms = [[1, 1.0], [3, 0.3]]
[sampler]
kappa = 0.05
step = 1.0
steps = {steps}
burn_in = {burn_in}
thin = {thin}
chains = {chains}
seed = 1
adapt_step = true
method = "{method}"
{preconditioner}
[priors]
sigma2 = [1.0, 1.0]
"#,
        p = setting.p,
        steps = setting.steps,
        burn_in = setting.steps / 2,
        thin = setting.thin,
        chains = setting.chains,
    );
    ExperimentConfig::from_toml(&text, "bench --sampling")
}

/// Runs one sampler and measures its efficiency.
pub fn measure(setting: SamplingSetting, method: SamplerMethod) -> Result<SamplerEfficiency> {
    let cfg = blog_config(setting, method)?;
    let r = run_experiment(&cfg, &mut |_, _| {})?;
    let s = &r.summary;
    let dg = &s.diagnostics;
    let per_second = |ess: Option<f64>| ess.map(|e| e / r.seconds.max(1e-9));
    let precision = |err: Option<f64>| {
        err.filter(|e| *e > 0.0)
            .map(|e| 1.0 / (e * e * r.seconds.max(1e-9)))
    };
    let thin = setting.thin as f64;
    Ok(SamplerEfficiency {
        method: dg.method.clone(),
        step: dg.step,
        steps_per_second: r.steps as f64 / r.seconds.max(1e-9),
        alignment: s.alignment,
        alignment_err: s.alignment_err,
        r_overlap2: s.r_overlap2,
        r_overlap2_err: s.r_overlap2_err,
        iat_alignment_steps: dg.iat_alignment.map(|t| t * thin),
        iat_r_overlap2_steps: dg.iat_r_overlap2.map(|t| t * thin),
        ess_per_second_alignment: per_second(dg.ess_alignment),
        ess_per_second_r_overlap2: per_second(dg.ess_r_overlap2),
        precision_per_second_alignment: precision(s.alignment_err),
        precision_per_second_r_overlap2: precision(s.r_overlap2_err),
        seconds: r.seconds,
        diverged_chains: s.diverged_chains.len(),
    })
}

/// Plain and collapsed at the same setting.
pub fn compare(setting: SamplingSetting) -> Result<SamplingComparison> {
    let plain = measure(setting, SamplerMethod::Plain)?;
    let collapsed = measure(setting, SamplerMethod::Collapsed)?;
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?).filter(|r| r.is_finite());
    let agree = |a: Option<f64>, ea: Option<f64>, b: Option<f64>, eb: Option<f64>| {
        Some((a? - b?).abs() <= 3.0 * (ea? * ea? + eb? * eb?).sqrt())
    };
    let samplers_agree = agree(
        plain.alignment,
        plain.alignment_err,
        collapsed.alignment,
        collapsed.alignment_err,
    )
    .zip(agree(
        plain.r_overlap2,
        plain.r_overlap2_err,
        collapsed.r_overlap2,
        collapsed.r_overlap2_err,
    ))
    .map(|(a, r)| a && r);
    Ok(SamplingComparison {
        setting,
        precision_speedup_alignment: ratio(
            collapsed.precision_per_second_alignment,
            plain.precision_per_second_alignment,
        ),
        precision_speedup_r_overlap2: ratio(
            collapsed.precision_per_second_r_overlap2,
            plain.precision_per_second_r_overlap2,
        ),
        samplers_agree,
        speedup_alignment: ratio(
            collapsed.ess_per_second_alignment,
            plain.ess_per_second_alignment,
        ),
        speedup_r_overlap2: ratio(
            collapsed.ess_per_second_r_overlap2,
            plain.ess_per_second_r_overlap2,
        ),
        plain,
        collapsed,
    })
}
