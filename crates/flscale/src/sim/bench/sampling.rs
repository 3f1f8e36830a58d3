//! Sampling efficiency of `flscale bench --sampling` (spec 02, "Performance bar": "the figure
//! users feel is time to an equilibrated answer"): effective samples per second of the
//! hidden-weight observables — alignment, R = E[ρ²], outlier count — for the plain and the
//! collapsed sampler at the blog setting: two-layer erf network, D = N = 20 (`d`),
//! y = He1 + 0.3·He3, κ = T_blog = 0.05, σ1² = σ2² = 1 (readout variance 1/N), f32, each with
//! `adapt_step` (its own stable step from λ_max), same seed and chains.
//!
//! Protocol (both samplers measured in equilibrium, over windows of the same length):
//! 1. The collapsed sampler runs from the prior (cold) for `steps` gradient evaluations, the
//!    first half burn-in; its second half is its measurement window. With HMC
//!    (`collapsed_hmc_steps = L`) that is `steps / L` proposals, measured every `thin / L`
//!    or every `collapsed_thin` proposals.
//! 2. The plain sampler starts from the collapsed run's final state — every chain's hidden
//!    weights and the readout drawn exactly from its Gaussian conditional, i.e. a draw of the
//!    joint posterior once the collapsed chains have equilibrated — and runs `steps / 2` steps
//!    (as many gradient evaluations as the collapsed window) without burn-in (its step adapted once, at the start). So the plain sampler pays no
//!    burn-in and has no burn-in bias; from a cold start it may not reach the posterior at
//!    all at P ≥ 8d (BENCHMARKS.md). With `plain_mala` the plain sampler is
//!    Metropolis-adjusted (`mala = true`) and first runs `steps / 10` steps of burn-in, outside
//!    its window, in which its step is steered to MALA's target acceptance.
//! 3. `samplers_agree` checks that the two windows agree on the alignment and on R within 3
//!    combined standard errors; otherwise at least one sampler was not in equilibrium and the
//!    ratios are not comparisons of equals.
//!
//! ESS = chains × samples / τ with τ the integrated autocorrelation time of the per-chain
//! series ([`crate::sim::observe::observables::integrated_autocorrelation_time`]; reported in gradient
//! evaluations, i.e. steps × L); ESS/s divides by the
//! wall-clock seconds of the measurement window. The collapsed sampler's alignment is
//! Rao–Blackwellised (the readout's conditional mean instead of its draw; `run.rs`), which
//! lowers its variance but not always its τ.
//!
//! τ subtracts each chain's own mean, so it cannot see chains that sit in different
//! metastable states; the bench therefore also reports the *precision per second*
//! 1/(SE²·seconds), SE the standard error of the ensemble mean from the spread of the chains'
//! means (the summary's `*_err`), which does see them: for two samplers of the same
//! posterior observable, SE² = s²/ESS, so the ratio of their precisions per second is the
//! ratio of their ESS/s (Geyer, *Practical Markov chain Monte Carlo*, Stat. Sci. 7 (1992)
//! 473, sec. 3), and for the Rao–Blackwellised alignment it also counts the variance the
//! conditional mean removes. With few chains SE² is itself uncertain (relative error
//! √(2/(chains − 1))).

use serde::Serialize;

use crate::error::Result;
use crate::sim::config::{ExperimentConfig, Preconditioner, SamplerMethod, Start, TemperingConfig};
use crate::sim::driver::run::{Run, RunResult};
use crate::sim::driver::tempered::TemperingDiagnostics;

/// Leapfrog steps per HMC proposal of the collapsed sampler by default (chosen by measurement,
/// BENCHMARKS.md, "Sampling efficiency").
pub const DEFAULT_HMC_STEPS: usize = 10;

/// The collapsed run's measurement interval in proposals by default (with HMC at
/// [`DEFAULT_HMC_STEPS`], every proposal = 10 gradient evaluations; chosen by measurement,
/// BENCHMARKS.md).
pub const DEFAULT_COLLAPSED_THIN: usize = 1;

/// The settings of one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SamplingSetting {
    /// Input dimension d = hidden width N.
    pub d: usize,
    /// Training-set size P.
    pub p: usize,
    /// Steps of the collapsed run (burn-in is half); the plain run takes the other half.
    pub steps: usize,
    /// Measurement interval.
    pub thin: usize,
    /// Ensemble size.
    pub chains: usize,
    /// The collapsed sampler's preconditioner (`sampler.preconditioner`).
    pub preconditioner: Preconditioner,
    /// Whether the collapsed sampler is Metropolis-adjusted (`sampler.mala`; its adaptive
    /// step then targets η·λ_max ≈ 1 instead of 0.1, run.rs).
    pub collapsed_mala: bool,
    /// Whether the plain sampler is Metropolis-adjusted (MALA, `sampler.mala`; module doc)
    /// instead of the default unadjusted fused step that spec 02's comparison is about.
    pub plain_mala: bool,
    /// With `collapsed_mala`: HMC with this many leapfrog steps per proposal
    /// (`sampler.hmc_steps`) instead of MALA. The collapsed run then makes `steps / L`
    /// proposals measured every `thin / L` (rounded, at least 1), so that both samplers spend
    /// the same number of gradient evaluations per window and per measurement.
    pub collapsed_hmc_steps: Option<usize>,
    /// The collapsed run's measurement interval in its own steps (proposals), when it should
    /// differ from the default `thin / L`: a sampler whose τ is shorter than the measurement
    /// interval gives at most one effective sample per measurement, so its ESS/s is capped by
    /// the measurement rate, not by its mixing (BENCHMARKS.md, "Sampling efficiency").
    /// Measurements cost window time too (a readout draw and two predictions on the test
    /// set per chain), so finer is not free.
    pub collapsed_thin: Option<usize>,
    /// Seed of the data, the teacher and the chains (`sampler.seed`): the comparison's
    /// autocorrelation times vary from seed to seed by tens of per cent, so a ratio near a
    /// target is worth checking on several.
    pub seed: u64,
}

impl Default for SamplingSetting {
    fn default() -> Self {
        SamplingSetting {
            d: 20,
            p: 160,
            steps: 40_000,
            thin: 50,
            chains: 8,
            preconditioner: Preconditioner::Block,
            collapsed_mala: true,
            collapsed_hmc_steps: Some(DEFAULT_HMC_STEPS),
            collapsed_thin: Some(DEFAULT_COLLAPSED_THIN),
            plain_mala: false,
            seed: 1,
        }
    }
}

/// One sampler's measured efficiency over its measurement window.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SamplerEfficiency {
    /// "plain" or "collapsed".
    pub method: String,
    /// The step η after adaptation.
    pub step: f64,
    /// Gradient evaluations per proposal: 1 for a Langevin or MALA step, L for HMC.
    pub gradient_evaluations_per_step: usize,
    /// Gradient evaluations per second of wall-clock time in the window (all chains
    /// advanced once; a Langevin step or one leapfrog step).
    pub steps_per_second: f64,
    /// Alignment and its standard error.
    pub alignment: Option<f64>,
    /// See `alignment`.
    pub alignment_err: Option<f64>,
    /// R = E[ρ²] and its standard error.
    pub r_overlap2: Option<f64>,
    /// See `r_overlap2`.
    pub r_overlap2_err: Option<f64>,
    /// Outliers per network and its standard error.
    pub outliers: Option<f64>,
    /// See `outliers`.
    pub outliers_err: Option<f64>,
    /// Integrated autocorrelation time of the alignment, in gradient evaluations (steps ×
    /// `gradient_evaluations_per_step`).
    pub iat_alignment_steps: Option<f64>,
    /// Integrated autocorrelation time of R, in gradient evaluations.
    pub iat_r_overlap2_steps: Option<f64>,
    /// Integrated autocorrelation time of the outlier count, in gradient evaluations.
    pub iat_outliers_steps: Option<f64>,
    /// Effective samples of the alignment per second.
    pub ess_per_second_alignment: Option<f64>,
    /// Effective samples of R per second.
    pub ess_per_second_r_overlap2: Option<f64>,
    /// Effective samples of the outlier count per second.
    pub ess_per_second_outliers: Option<f64>,
    /// 1/(SE²·seconds) of the alignment, SE = `alignment_err` (module doc).
    pub precision_per_second_alignment: Option<f64>,
    /// 1/(SE²·seconds) of R, SE = `r_overlap2_err`.
    pub precision_per_second_r_overlap2: Option<f64>,
    /// Accepted fraction of the Metropolis proposals over the whole run (MALA or HMC; `None`
    /// for the unadjusted samplers).
    pub acceptance_rate: Option<f64>,
    /// Wall-clock seconds of the measurement window.
    pub window_seconds: f64,
    /// Wall-clock seconds of the whole run (burn-in included).
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
    /// collapsed / plain ESS per second of the outlier count.
    pub speedup_outliers: Option<f64>,
    /// collapsed / plain precision per second of the alignment (module doc).
    pub precision_speedup_alignment: Option<f64>,
    /// collapsed / plain precision per second of R.
    pub precision_speedup_r_overlap2: Option<f64>,
    /// Whether the two samplers agree on the alignment and on R within 3 combined standard
    /// errors; false means at least one has not equilibrated and the ratios are not
    /// comparisons of equals.
    pub samplers_agree: Option<bool>,
}

/// The blog-setting experiment for `method` from `start`: `setting.steps` gradient
/// evaluations, half of them burn-in, adaptive step (and, collapsed, `setting.preconditioner`,
/// `setting.collapsed_mala` and `setting.collapsed_hmc_steps`: `steps / L` HMC proposals,
/// measured every `collapsed_thin` or `thin / L`).
pub fn blog_config(
    setting: SamplingSetting,
    method: SamplerMethod,
    start: Start,
) -> Result<ExperimentConfig> {
    let leapfrog = gradient_evaluations_per_step(setting, method);
    let (method, preconditioner) = match method {
        SamplerMethod::Plain => ("plain", format!("mala = {}", setting.plain_mala)),
        SamplerMethod::Collapsed => (
            "collapsed",
            format!(
                "preconditioner = \"{}\"\nmala = {}\n{}",
                match setting.preconditioner {
                    Preconditioner::None => "none",
                    Preconditioner::Neuron => "neuron",
                    Preconditioner::Block => "block",
                },
                setting.collapsed_mala,
                if leapfrog > 1 {
                    format!("hmc_steps = {leapfrog}")
                } else {
                    String::new()
                }
            ),
        ),
    };
    let steps = (setting.steps / leapfrog).max(2);
    let thin = match (method, setting.collapsed_thin) {
        ("collapsed", Some(t)) => t.max(1),
        _ => (setting.thin as f64 / leapfrog as f64).round().max(1.0) as usize,
    };
    let start = match start {
        Start::Cold => "cold",
        Start::Hot => "hot",
        Start::Both => "both",
    };
    let text = format!(
        r#"
[model]
kind = "fcn"
activation = "erf"
widths = [{d}]
parametrization = "standard"
[data]
d = {d}
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
seed = {seed}
adapt_step = true
start = "{start}"
method = "{method}"
{preconditioner}
[priors]
sigma2 = [1.0, 1.0]
"#,
        d = setting.d,
        p = setting.p,
        burn_in = steps / 2,
        chains = setting.chains,
        seed = setting.seed,
    );
    ExperimentConfig::from_toml(&text, "bench --sampling")
}

/// Gradient evaluations per step of `method` at `setting`: L for the collapsed sampler with
/// HMC, else 1.
pub fn gradient_evaluations_per_step(setting: SamplingSetting, method: SamplerMethod) -> usize {
    match (method, setting.collapsed_mala, setting.collapsed_hmc_steps) {
        (SamplerMethod::Collapsed, true, Some(l)) => l.max(1),
        _ => 1,
    }
}

/// The efficiency of one run over its measurement window (the steps after burn-in), with
/// `leapfrog` gradient evaluations per step.
fn efficiency(r: &RunResult, burn_in: usize, thin: usize, leapfrog: usize) -> SamplerEfficiency {
    efficiency_over_replicas(r, burn_in, thin, leapfrog, 1)
}

/// [`efficiency`] of a run whose every chain is `replicas` chains (replica exchange): its
/// gradient evaluations and autocorrelation times count those of all replicas, so they
/// compare in cost with an untempered run's.
fn efficiency_over_replicas(
    r: &RunResult,
    burn_in: usize,
    thin: usize,
    leapfrog: usize,
    replicas: usize,
) -> SamplerEfficiency {
    let leapfrog = leapfrog * replicas;
    let s = &r.summary;
    let dg = &s.diagnostics;
    let window = r.sampling_seconds.max(1e-9);
    let per_second = |ess: Option<f64>| ess.map(|e| e / window);
    let precision = |err: Option<f64>| err.filter(|e| *e > 0.0).map(|e| 1.0 / (e * e * window));
    let in_steps = |tau: Option<f64>| tau.map(|t| t * (thin * leapfrog) as f64);
    SamplerEfficiency {
        method: dg.method.clone(),
        step: dg.step,
        gradient_evaluations_per_step: leapfrog,
        steps_per_second: (r.steps.saturating_sub(burn_in) * leapfrog) as f64 / window,
        alignment: s.alignment,
        alignment_err: s.alignment_err,
        r_overlap2: s.r_overlap2,
        r_overlap2_err: s.r_overlap2_err,
        outliers: s.outliers_layer1,
        outliers_err: s.outliers_layer1_err,
        iat_alignment_steps: in_steps(dg.iat_alignment),
        iat_r_overlap2_steps: in_steps(dg.iat_r_overlap2),
        iat_outliers_steps: in_steps(dg.iat_outliers),
        ess_per_second_alignment: per_second(dg.ess_alignment),
        ess_per_second_r_overlap2: per_second(dg.ess_r_overlap2),
        ess_per_second_outliers: per_second(dg.ess_outliers),
        precision_per_second_alignment: precision(s.alignment_err),
        precision_per_second_r_overlap2: precision(s.r_overlap2_err),
        acceptance_rate: dg.acceptance_rate,
        window_seconds: r.sampling_seconds,
        seconds: r.seconds,
        diverged_chains: s.diverged_chains.len(),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?).filter(|r| r.is_finite())
}

/// Whether two windows agree on the alignment and on R within 3 combined standard errors.
fn samplers_agree(a: &SamplerEfficiency, b: &SamplerEfficiency) -> Option<bool> {
    let agree = |a: Option<f64>, ea: Option<f64>, b: Option<f64>, eb: Option<f64>| {
        Some((a? - b?).abs() <= 3.0 * (ea? * ea? + eb? * eb?).sqrt())
    };
    agree(a.alignment, a.alignment_err, b.alignment, b.alignment_err)
        .zip(agree(
            a.r_overlap2,
            a.r_overlap2_err,
            b.r_overlap2,
            b.r_overlap2_err,
        ))
        .map(|(x, y)| x && y)
}

/// Replica exchange against the collapsed sampler it is built on, at one setting.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TemperedComparison {
    /// The setting (the collapsed sampler's).
    pub setting: SamplingSetting,
    /// R of the sampling window (the starting R unless `max_replicas` let it change).
    pub replicas: usize,
    /// The collapsed sampler alone.
    pub collapsed: SamplerEfficiency,
    /// The same sampler with R replicas (`sampler.tempering`, ladder adapted during burn-in);
    /// its gradient evaluations and autocorrelation times count all replicas.
    pub tempered: SamplerEfficiency,
    /// Ladder, swap acceptance, barrier, round trips of the tempered run.
    pub tempering: Option<TemperingDiagnostics>,
    /// tempered / collapsed ESS per second of the alignment (all replicas' cost included).
    pub speedup_alignment: Option<f64>,
    /// tempered / collapsed ESS per second of R.
    pub speedup_r_overlap2: Option<f64>,
    /// tempered / collapsed ESS per second of the outlier count.
    pub speedup_outliers: Option<f64>,
    /// tempered / collapsed precision per second of the alignment (module doc).
    pub precision_speedup_alignment: Option<f64>,
    /// tempered / collapsed precision per second of R.
    pub precision_speedup_r_overlap2: Option<f64>,
    /// Whether the two agree on the alignment and on R within 3 combined standard errors.
    pub samplers_agree: Option<bool>,
}

/// The collapsed sampler of `setting` (from the prior, `steps` gradient evaluations of
/// which half burn-in) and the same with replica exchange `tempering` (R replicas per chain),
/// measured over the same number of proposals: the tempered run costs about R times as much
/// per proposal and its ESS/s says whether that is repaid.
pub fn compare_tempered(
    setting: SamplingSetting,
    tempering: TemperingConfig,
) -> Result<TemperedComparison> {
    let replicas = tempering.replicas;
    let leapfrog = gradient_evaluations_per_step(setting, SamplerMethod::Collapsed);
    let collapsed_cfg = blog_config(setting, SamplerMethod::Collapsed, Start::Cold)?;
    let (burn_in, thin) = (collapsed_cfg.sampler.burn_in, collapsed_cfg.sampler.thin);
    let collapsed_run = Run::new(&collapsed_cfg).run()?;
    let collapsed = efficiency(&collapsed_run, burn_in, thin, leapfrog);
    let mut tempered_cfg = collapsed_cfg.clone();
    tempered_cfg.sampler.tempering = tempering;
    tempered_cfg.validate()?;
    let tempered_run = Run::new(&tempered_cfg).run()?;
    // R of the sampling window: the adapted one where `max_replicas` let it change.
    let replicas = tempered_run
        .summary
        .tempering
        .as_ref()
        .map_or(replicas, |t| t.replicas);
    let tempered = efficiency_over_replicas(&tempered_run, burn_in, thin, leapfrog, replicas);
    Ok(TemperedComparison {
        setting,
        replicas,
        tempering: tempered_run.summary.tempering.clone(),
        speedup_alignment: ratio(
            tempered.ess_per_second_alignment,
            collapsed.ess_per_second_alignment,
        ),
        speedup_r_overlap2: ratio(
            tempered.ess_per_second_r_overlap2,
            collapsed.ess_per_second_r_overlap2,
        ),
        speedup_outliers: ratio(
            tempered.ess_per_second_outliers,
            collapsed.ess_per_second_outliers,
        ),
        precision_speedup_alignment: ratio(
            tempered.precision_per_second_alignment,
            collapsed.precision_per_second_alignment,
        ),
        precision_speedup_r_overlap2: ratio(
            tempered.precision_per_second_r_overlap2,
            collapsed.precision_per_second_r_overlap2,
        ),
        samplers_agree: samplers_agree(&collapsed, &tempered),
        collapsed,
        tempered,
    })
}

/// Plain and collapsed at the same setting, by the protocol of the module doc.
pub fn compare(setting: SamplingSetting) -> Result<SamplingComparison> {
    let collapsed_cfg = blog_config(setting, SamplerMethod::Collapsed, Start::Cold)?;
    let collapsed_run = Run::new(&collapsed_cfg).run()?;
    let collapsed = efficiency(
        &collapsed_run,
        collapsed_cfg.sampler.burn_in,
        collapsed_cfg.sampler.thin,
        gradient_evaluations_per_step(setting, SamplerMethod::Collapsed),
    );
    let mut plain_cfg = blog_config(setting, SamplerMethod::Plain, Start::Cold)?;
    let window = plain_cfg.sampler.steps - plain_cfg.sampler.burn_in;
    // MALA steers its step during a burn-in (module doc); the unadjusted step needs none.
    let plain_burn_in = if setting.plain_mala {
        (setting.steps / 10 / setting.thin).max(1) * setting.thin
    } else {
        0
    };
    plain_cfg.sampler.steps = plain_burn_in + window;
    plain_cfg.sampler.burn_in = plain_burn_in;
    let plain_run = Run::new(&plain_cfg)
        .start_from(&collapsed_run.final_state)
        .run()?;
    let plain = efficiency(&plain_run, plain_burn_in, setting.thin, 1);
    let samplers_agree = samplers_agree(&plain, &collapsed);
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
        speedup_outliers: ratio(
            collapsed.ess_per_second_outliers,
            plain.ess_per_second_outliers,
        ),
        plain,
        collapsed,
    })
}
