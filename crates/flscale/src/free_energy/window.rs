//! Umbrella windows as runs of the sampler, and their analysis (spec 07, "Method").
//!
//! A [`FreeEnergyPlan`] is an experiment and its `[free_energy]` table, checked against each
//! other: the order parameter on the model's weight rows, the K windows V_k(s) = ½κ(s − s_k)²,
//! the profile's bins. Window k is the experiment run under [`Restraint`] k
//! ([`crate::sim::driver::run::Run::restrain`]) with every kernel the sampler settings choose;
//! all windows share the training set (`sampler.seed`) and draw independent noise
//! ([`FreeEnergyPlan::noise_seed`]), so that they are independent samples of their biased
//! densities, which MBAR's errors assume (Shirts & Chodera 2008, §III). A window keeps every
//! chain's series after burn-in ([`WindowRun`]); [`FreeEnergyPlan::analyse`] pools a window's
//! chains into one series, chain after chain, each chain subsampled at its autocorrelation time
//! ([`WindowRun::decorrelation_stride`]; the junctions between chains cost the autocorrelation
//! estimate one lag per chain), and calls [`super::analyse`].

use serde::{Deserialize, Serialize};

use super::agreement::{split_rhat, RHAT_WARNING};
use super::analysis::{analyse, AnalysisOptions, FreeEnergyReport, WindowSeries};
use super::autocorr::integrated_time;
use super::config::{weight_rows, FreeEnergyConfig};
use super::flatten::{flattening_bias, WindowMoments, PILOT_SHARE};
use super::profile::Bins;
use super::umbrella::Umbrella;
use crate::error::{Error, Result};
use crate::sim::config::{ExperimentConfig, ModelKind, Preconditioner, Start};
use crate::sim::data::Dataset;
use crate::sim::driver::coupling::derived_seed;
use crate::sim::driver::outcome::{Outcome, RunObserver};
use crate::sim::driver::result::RestrainedChain;
use crate::sim::driver::run::Run;
use crate::sim::model::cnn::CnnModel;
use crate::sim::order::OrderParameter;
use crate::sim::restraint::{Restraint, TabulatedBias};

/// The observables every window keeps beside s, in this order: the reweighted averages of
/// [`FreeEnergyReport::observables`] and of each basin follow it.
pub const OBSERVABLES: [&str; 3] = ["alignment", "test_mse", "outliers"];

/// Mixed into `sampler.seed` with the window index to derive a window's noise streams.
const WINDOW_STREAM_TAG: u64 = 0x7769_6E64_6F77_0000;

/// The same for a pilot window ([`FreeEnergyPlan::pilot`]): the windows MBAR joins must not
/// reuse the noise their flattening bias was estimated from.
const PILOT_STREAM_TAG: u64 = 0x7069_6C6F_7400_0000;

/// Which stage of a run a plan's windows belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Stiff windows whose mean forces estimate the flattening bias ([`super::flatten`]).
    Pilot,
    /// The windows MBAR joins.
    Umbrella,
}

impl Stage {
    /// "pilot" or "umbrella".
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Pilot => "pilot",
            Stage::Umbrella => "umbrella",
        }
    }
}

/// One window's run: its restraint, seed and every surviving chain's series after burn-in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRun {
    /// The window's index k.
    pub window: usize,
    /// Its centre s_k.
    pub centre: f64,
    /// Its stiffness κ.
    pub kappa: f64,
    /// The seed its noise streams came from ([`FreeEnergyPlan::noise_seed`]).
    pub noise_seed: u64,
    /// Every chain that survived, with its series.
    pub chains: Vec<RestrainedChain>,
    /// Chains stopped by a divergence.
    pub diverged: usize,
    /// The step after burn-in and the acceptance rate (null without a Metropolis test).
    pub step: f64,
    pub acceptance_rate: Option<f64>,
    /// The run's warnings ([`crate::sim::driver::result::Summary::warnings`]).
    pub warnings: Vec<String>,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// The flattening term B(s) the window carried ([`super::flatten`]), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flattening: Option<TabulatedBias>,
}

impl WindowRun {
    /// The stride that leaves about one sample per autocorrelation time: ⌈τ⌉, τ the largest of
    /// the chains' integrated times of s and of the alignment ([`integrated_time`]). MBAR's
    /// Newton step costs N·K² for N samples in K windows, so the analysis keeps the
    /// decorrelated samples (Chodera et al., J. Chem. Theory Comput. 3, 26 (2007), §2.4, the
    /// subsampling pymbar's users apply) rather than every correlated one, which would cost
    /// τ× more and add little information.
    pub fn decorrelation_stride(&self) -> usize {
        let tau = self
            .chains
            .iter()
            .flat_map(|c| [integrated_time(&c.s), integrated_time(&c.alignment)])
            .flatten()
            .fold(1.0f64, f64::max);
        (tau.ceil() as usize).max(1)
    }

    /// The split R̂ of s over the window's chains, each decorrelated by
    /// [`Self::decorrelation_stride`] ([`split_rhat`]).
    pub fn chain_rhat(&self) -> Option<f64> {
        let stride = self.decorrelation_stride();
        let chains: Vec<Vec<f64>> = self
            .chains
            .iter()
            .map(|c| c.s.iter().copied().step_by(stride).collect())
            .collect();
        let refs: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
        split_rhat(&refs)
    }

    /// Samples in the window (over its chains).
    pub fn samples(&self) -> usize {
        self.chains.iter().map(|c| c.s.len()).sum()
    }

    /// The chains pooled into one series, each chain kept every `stride`-th sample (module
    /// docs).
    fn pooled(&self, stride: usize) -> WindowSeries {
        let cat = |f: fn(&RestrainedChain) -> &Vec<f64>| -> Vec<f64> {
            self.chains
                .iter()
                .flat_map(|c| f(c).iter().copied().step_by(stride))
                .collect()
        };
        WindowSeries {
            s: cat(|c| &c.s),
            observables: vec![
                cat(|c| &c.alignment),
                cat(|c| &c.test_mse),
                cat(|c| &c.outliers),
            ],
        }
    }
}

/// An experiment with its `[free_energy]` table, checked (module docs).
#[derive(Debug, Clone)]
pub struct FreeEnergyPlan {
    /// The experiment every window runs.
    pub config: ExperimentConfig,
    /// Its `[free_energy]` table.
    pub table: FreeEnergyConfig,
    /// The order parameter s the windows restrain.
    pub order: OrderParameter,
    /// The windows.
    pub umbrella: Umbrella,
    /// The profile's bins.
    pub bins: Bins,
    /// Which stage the windows belong to.
    pub stage: Stage,
    /// What runs a window: [`run_experiment`] (the experiment's network). The exact tests put a
    /// model with a known posterior there, so that it goes through the same windows, runner
    /// and analysis.
    pub(crate) sampler: WindowSampler,
}

/// Runs one window: the experiment (with the collapsed preconditioner off,
/// [`FreeEnergyPlan::run_window`]), the window's restraint, its noise seed and the observer.
pub(crate) type WindowSampler =
    fn(&ExperimentConfig, &Restraint, u64, &mut dyn RunObserver) -> Result<Outcome>;

/// The sampler of every plan [`FreeEnergyPlan::new`] makes: the experiment's own model, through
/// [`Run`].
fn run_experiment(
    config: &ExperimentConfig,
    restraint: &Restraint,
    noise_seed: u64,
    observer: &mut dyn RunObserver,
) -> Result<Outcome> {
    Run::new(config)
        .restrain(restraint)
        .noise_streams(noise_seed)
        .observe(observer)
        .run()
}

impl FreeEnergyPlan {
    /// Checks `table` against `config` (a validated experiment): the order parameter's rows and
    /// teacher, one start (a window's series must come from one stationary run: compare hot and
    /// cold by running the plan once with each), and a first layer that moves.
    pub fn new(config: ExperimentConfig, table: FreeEnergyConfig) -> Result<FreeEnergyPlan> {
        config.validate()?;
        let rows = weight_rows(&config)?;
        if config.sampler.start == Start::Both {
            return Err(Error::invalid(
                "sampler.start = \"both\" is not allowed with [free_energy]; run the free energy once with start = \"cold\" and once with start = \"hot\" and compare their basin weights",
            ));
        }
        if config.sampler.frozen_layers.contains(&(rows.group + 1)) {
            return Err(Error::invalid(format!(
                "sampler.frozen_layers = {:?} freezes layer {}, which the order parameter reads; unfreeze it or remove [free_energy]",
                config.sampler.frozen_layers,
                rows.group + 1
            )));
        }
        let order = if config.model.kind() == ModelKind::Fcn {
            let data = Dataset::generate(&config.data, &config.target, config.sampler.seed);
            let training = (
                data.x_train.as_slice(),
                data.y_train.as_slice(),
                config.model.activation,
            );
            table.order_parameter_on(rows, &data.teacher, Some(training))?
        } else {
            table.order_parameter(rows, &teacher_direction(&config))?
        };
        let umbrella = table.umbrella(&rows, config.sampler.temperature)?;
        let bins = table.profile_bins(&rows)?;
        Ok(FreeEnergyPlan {
            config,
            table,
            order,
            umbrella,
            bins,
            stage: Stage::Umbrella,
            sampler: run_experiment,
        })
    }

    /// Whether the windows wait for a pilot stage: the table flattens and this plan carries
    /// no flattening yet.
    pub fn needs_pilot(&self) -> bool {
        self.stage == Stage::Umbrella && self.table.flatten() && self.umbrella.flattening.is_none()
    }

    /// The pilot stage ([`super::flatten`]): [`FreeEnergyConfig::pilot_windows`] windows over
    /// the same range at the pilot stiffness, without flattening, each sampling 1/[`PILOT_SHARE`] of the run's steps after the same burn-in,
    /// on noise streams of their own.
    pub fn pilot(&self) -> Result<FreeEnergyPlan> {
        let mut config = self.config.clone();
        let s = &mut config.sampler;
        let sampling = (s.steps - s.burn_in) / PILOT_SHARE;
        // Keep a whole number of thinning intervals and at least two measurements.
        let sampling = (sampling / s.thin).max(2) * s.thin;
        s.steps = s.burn_in + sampling;
        let mut table = self.table.clone();
        table.kappa = Some(self.table.pilot_kappa(self.config.sampler.temperature));
        table.windows = self.table.pilot_windows();
        table.flatten = Some(false);
        table.pilot_kappa = None;
        table.pilot_windows = None;
        let mut plan = FreeEnergyPlan::new(config, table)?;
        plan.stage = Stage::Pilot;
        plan.sampler = self.sampler;
        Ok(plan)
    }

    /// This plan with the flattening bias estimated from `pilot`'s windows (`runs`, one per
    /// window of the pilot, in any order).
    pub fn flattened(&self, pilot: &FreeEnergyPlan, runs: &[WindowRun]) -> Result<FreeEnergyPlan> {
        let mut ordered: Vec<Option<&WindowRun>> = vec![None; pilot.windows()];
        for run in runs {
            pilot.check_run(run)?;
            ordered[run.window] = Some(run);
        }
        let missing: Vec<usize> = (0..ordered.len())
            .filter(|&k| ordered[k].is_none())
            .collect();
        if !missing.is_empty() {
            return Err(Error::invalid(format!(
                "pilot windows {missing:?} have not run; run them before the umbrella windows"
            )));
        }
        let mut moments = Vec::new();
        for run in ordered.into_iter().flatten() {
            let series: Vec<&[f64]> = run.chains.iter().map(|c| c.s.as_slice()).collect();
            let chains = WindowMoments::of_chains(
                run.centre,
                run.kappa,
                &series,
                run.decorrelation_stride(),
            );
            if chains.is_empty() {
                return Err(Error::runtime(format!(
                    "no chain of pilot window {} (s₀ = {:.4}) moved, so its mean force is undefined; lower sampler.step or free_energy.pilot_kappa",
                    run.window, run.centre
                )));
            }
            moments.extend(chains);
        }
        let bias = flattening_bias(&moments, self.config.sampler.temperature)?;
        let mut plan = self.clone();
        plan.umbrella = plan.umbrella.with_flattening(bias);
        Ok(plan)
    }

    /// Number of windows K.
    pub fn windows(&self) -> usize {
        self.umbrella.windows()
    }

    /// Window k's restraint.
    pub fn restraint(&self, k: usize) -> Restraint {
        Restraint {
            order: self.order.clone(),
            centre: self.umbrella.centres[k],
            kappa: self.umbrella.kappa,
            flattening: self.umbrella.flattening.clone(),
        }
    }

    /// Window k's noise seed: derived from `sampler.seed` and k, so that windows are
    /// independent and a window's numbers depend on nothing but the experiment and k.
    pub fn noise_seed(&self, k: usize) -> u64 {
        let tag = match self.stage {
            Stage::Pilot => PILOT_STREAM_TAG,
            Stage::Umbrella => WINDOW_STREAM_TAG,
        };
        derived_seed(self.config.sampler.seed, tag.wrapping_add(k as u64))
    }

    /// The experiment a window runs: the plan's, with the collapsed sampler's preconditioner
    /// off. The preconditioner is a per-chain metric fitted to the data term's curvature during
    /// burn-in and blind to the restraint's; measured on one erf neuron (ridge 0.1, windows of
    /// κ = 5600 kT), the block metric froze 3 of 64 pilot chains for the whole run (every
    /// proposal rejected, s constant to 10⁻⁴) while the identity metric froze none.
    fn window_config(&self) -> ExperimentConfig {
        let mut config = self.config.clone();
        config.sampler.preconditioner = Some(Preconditioner::None);
        config
    }

    /// Runs window k, reporting progress to `observer` (which may stop it).
    pub fn run_window(
        &self,
        k: usize,
        observer: &mut dyn RunObserver,
    ) -> Result<Outcome<WindowRun>> {
        if self.needs_pilot() {
            return Err(Error::invalid(
                "the umbrella windows of a flattened plan wait for its pilot stage (FreeEnergyPlan::pilot, then FreeEnergyPlan::flattened)",
            ));
        }
        if k >= self.windows() {
            return Err(Error::invalid(format!(
                "window {k} does not exist; the plan has windows 0 to {}",
                self.windows() - 1
            )));
        }
        let restraint = self.restraint(k);
        let noise_seed = self.noise_seed(k);
        let config = self.window_config();
        let outcome = (self.sampler)(&config, &restraint, noise_seed, observer)?;
        let result = match outcome {
            Outcome::Completed(result) => result,
            Outcome::Interrupted { at, steps } => return Ok(Outcome::Interrupted { at, steps }),
        };
        if result.restrained.is_empty() {
            return Err(Error::runtime(format!(
                "every chain of window {k} (s₀ = {:.4}) diverged or kept no sample after burn-in; lower sampler.step or raise sampler.steps",
                restraint.centre
            )));
        }
        let diagnostics = &result.summary.diagnostics;
        Ok(Outcome::Completed(WindowRun {
            window: k,
            centre: restraint.centre,
            kappa: restraint.kappa,
            noise_seed,
            diverged: self.config.sampler.chains - result.restrained.len(),
            step: diagnostics.step,
            acceptance_rate: diagnostics.acceptance_rate,
            warnings: result.summary.warnings.clone(),
            seconds: result.seconds,
            chains: result.restrained,
            flattening: restraint.flattening,
        }))
    }

    /// The analysis of every window's run (`runs[k]` window k's, in any order) with
    /// `replicates` bootstrap replicates and the bootstrap's `seed`.
    pub fn analyse(
        &self,
        runs: &[WindowRun],
        replicates: usize,
        seed: u64,
    ) -> Result<FreeEnergyReport> {
        let mut series: Vec<Option<WindowSeries>> = vec![None; self.windows()];
        for run in runs {
            self.check_run(run)?;
            series[run.window] = Some(run.pooled(run.decorrelation_stride()));
        }
        let missing: Vec<usize> = (0..series.len()).filter(|&k| series[k].is_none()).collect();
        if !missing.is_empty() {
            return Err(Error::invalid(format!(
                "windows {missing:?} have not run; run them before the analysis"
            )));
        }
        let series: Vec<WindowSeries> = series.into_iter().flatten().collect();
        let mut opts = AnalysisOptions::new(self.bins, seed);
        opts.beta = 1.0 / self.config.sampler.temperature;
        opts.replicates = replicates;
        let mut report = analyse(&self.umbrella, &series, &opts)?;
        self.check_coverage(&report, runs)?;
        for run in runs {
            report.diagnostics.chain_rhat[run.window] = run.chain_rhat();
        }
        report
            .notes
            .extend(self.disagreement_note(&report.diagnostics.chain_rhat, runs));
        Ok(report)
    }

    /// One sentence when some windows' chains disagree on s (R̂ above [`RHAT_WARNING`]): a
    /// coordinate orthogonal to s with a barrier of its own keeps them apart, and the errors of
    /// the basin weights are then lower bounds.
    fn disagreement_note(&self, rhat: &[Option<f64>], runs: &[WindowRun]) -> Option<String> {
        let bad: Vec<usize> = (0..rhat.len())
            .filter(|&k| rhat[k].is_some_and(|r| r > RHAT_WARNING))
            .collect();
        let worst = *bad
            .iter()
            .max_by(|&&a, &&b| rhat[a].unwrap_or(1.0).total_cmp(&rhat[b].unwrap_or(1.0)))?;
        let run = runs.iter().find(|r| r.window == worst)?;
        let means: Vec<String> = run
            .chains
            .iter()
            .map(|c| format!("{:.3}", c.s.iter().sum::<f64>() / c.s.len().max(1) as f64))
            .collect();
        Some(format!(
            "the chains of {} of {} windows disagree on s (split R̂ > {RHAT_WARNING}; worst window {worst} at s₀ = {:.3}, R̂ = {:.2}, chain means {}): a coordinate orthogonal to s has a barrier of its own and each chain stays where its burn-in left it, so the basin weights' errors are lower bounds; tempering the data term in every window (sampler.tempering, docs/free-energy.md \"Hidden barriers\") lets the chains cross it, at the cost of the replicas",
            bad.len(),
            rhat.len(),
            run.centre,
            rhat[worst].unwrap_or(f64::NAN),
            means.join(", ")
        ))
    }

    /// Refuses a run of another plan: another window count, centre, stiffness or flattening.
    fn check_run(&self, run: &WindowRun) -> Result<()> {
        let Some(&expected) = self.umbrella.centres.get(run.window) else {
            return Err(Error::invalid(format!(
                "window {} is not one of this plan's {} windows",
                run.window,
                self.windows()
            )));
        };
        if (run.centre - expected).abs() > 1e-12 * (1.0 + expected.abs())
            || (run.kappa - self.umbrella.kappa).abs() > 1e-12 * self.umbrella.kappa
            || !same_flattening(run.flattening.as_ref(), self.umbrella.flattening.as_ref())
        {
            return Err(Error::invalid(format!(
                "window {} ran at s₀ = {}, κ = {}{}, but the plan has s₀ = {expected}, κ = {}{}; the [free_energy] table or the pilot changed since it ran: use a new output directory",
                run.window,
                run.centre,
                run.kappa,
                if run.flattening.is_some() { " with a flattening bias" } else { "" },
                self.umbrella.kappa,
                if self.umbrella.flattening.is_some() { " with a flattening bias" } else { "" },
            )));
        }
        Ok(())
    }

    /// Refuses a profile with a hole: bins without samples between bins with samples. The
    /// windows then overlap only because they fell into the same basins (a restraint too weak
    /// for the free-energy slope lets every window slide into one), and a basin's weight would
    /// be the share of chains that started on its side, not an equilibrium weight.
    fn check_coverage(&self, report: &FreeEnergyReport, runs: &[WindowRun]) -> Result<()> {
        let f = &report.profile.f;
        let (Some(first), Some(last)) = (
            f.iter().position(Option::is_some),
            f.iter().rposition(Option::is_some),
        ) else {
            return Ok(());
        };
        let holes = (first..=last).filter(|&i| f[i].is_none()).count();
        if holes == 0 {
            return Ok(());
        }
        let s = &report.profile.s;
        let gap_lo = (first..=last)
            .find(|&i| f[i].is_none())
            .map_or(s[first], |i| s[i]);
        let gap_hi = (first..=last)
            .rev()
            .find(|&i| f[i].is_none())
            .map_or(s[last], |i| s[i]);
        // The window that slid furthest from its centre shows the slope that pushed it.
        let slid = runs
            .iter()
            .map(|r| {
                let n = r.samples().max(1) as f64;
                let mean = r.chains.iter().flat_map(|c| c.s.iter()).sum::<f64>() / n;
                (r, mean)
            })
            .max_by(|a, b| {
                (a.1 - a.0.centre)
                    .abs()
                    .total_cmp(&(b.1 - b.0.centre).abs())
            });
        let example = slid.map_or(String::new(), |(r, mean)| {
            format!(
                " (window {} centred at s = {:.3} sampled a mean s = {:.3}: a mean force of {:.0} kT per unit s)",
                r.window,
                r.centre,
                mean,
                r.kappa * (r.centre - mean).abs() / self.config.sampler.temperature
            )
        });
        Err(Error::runtime(format!(
            "the windows left s between {gap_lo:.3} and {gap_hi:.3} unsampled ({holes} empty bins between sampled ones), so the basin weights would reflect where the chains started rather than equilibrium: the restraint kappa = {:.4} is too weak for the free-energy slope{example}; raise kappa above that slope divided by the window spacing and add windows so that the spacing stays near 1/sqrt(kappa)",
            self.umbrella.kappa
        )))
    }
}

/// Whether two flattening tables are the same up to the last bits a JSON round trip may change
/// (serde_json's float parsing is not exact to the last bit).
fn same_flattening(a: Option<&TabulatedBias>, b: Option<&TabulatedBias>) -> bool {
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * (1.0 + x.abs().max(y.abs()));
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            close(a.lo, b.lo)
                && close(a.hi, b.hi)
                && a.values.len() == b.values.len()
                && a.values.iter().zip(&b.values).all(|(&x, &y)| close(x, y))
        }
        _ => false,
    }
}

/// The teacher direction the order parameters compare the rows with: w\* of the FCN's data
/// set, the CNN's teacher filter.
fn teacher_direction(config: &ExperimentConfig) -> Vec<f64> {
    match config.model.kind() {
        ModelKind::Cnn => CnnModel::from_config(config).dataset(config).teacher,
        _ => Dataset::generate(&config.data, &config.target, config.sampler.seed).teacher,
    }
}
