//! The tilted double well p(s) ∝ exp(−b(s² − 1)² + h s) through the whole `flscale
//! free-energy` path: a plan from an experiment and its `[free_energy]` table, its windows run by
//! [`run_free_energy`] on the sampler (the kernels, the restraint and its burn-in ramp), analysed
//! by [`FreeEnergyPlan::analyse`] (MBAR, the profile, the basins), against quadrature (spec 07,
//! "Exact tests": "a 1-D double well with known weights through the same code path").
//!
//! The experiment is a one-neuron, one-input FCN, so that its `neuron_projection` order
//! parameter reads the only weight of group 0; the windows run the double-well model
//! ([`crate::sim::model::double_well`]) in the network's place, with the experiment's sampler
//! settings. b = 1/(2κ) = 16 at ridge κ = 1/32 and h = [`TILT`] = ½: barriers of 15.5 and
//! 16.5 kT, which an unrestrained chain never crosses
//! (`sim::tests::double_well::an_unrestrained_chain_never_crosses_the_barrier`).

use crate::free_energy::analysis::FreeEnergyReport;
use crate::free_energy::config::FreeEnergyConfig;
use crate::free_energy::runner::{run_free_energy, Progress};
use crate::free_energy::window::{FreeEnergyPlan, WindowRun};
use crate::sim::config::ExperimentConfig;
use crate::sim::driver::outcome::Unobserved;
use crate::sim::model::double_well::{run_window, DoubleWell, TILT};
use crate::sim::order::OrderKind;

/// The experiment and its table; `sampler` and `table` are appended to those sections.
///
/// `step = 0.01` bounds η. It was chosen while the step adaptation sized η by λ_max of U alone:
/// on the barrier top U is concave, λ_max ≤ 0, and η stayed at `sampler.step` there (measured
/// with `step = 0.05`: acceptance 0.05–0.2, decorrelation strides of 30–300 in the windows of
/// |s₀| ≤ 0.3, against 2 elsewhere). Where λ_max of U is ≤ 0 it is now that of U + ½κ(s − s₀)²
/// ([`crate::sim::kernel::mala::Kernel::lambda_max`];
/// `sim::tests::double_well::the_step_is_adapted_to_the_restrained_energy_on_a_barrier_top`).
fn plan(sampler: &str, table: &str) -> FreeEnergyPlan {
    let experiment = format!(
        r#"
[model]
kind = "fcn"
widths = [1]
[data]
d = 1
p = 2
n_test = 1
[target]
hermite = 1
[sampler]
kappa = 0.03125
step = 0.01
{sampler}
"#
    );
    let cfg = ExperimentConfig::from_toml(&experiment, "double_well.toml").unwrap();
    let table = format!(
        r#"
[free_energy]
order_parameter = "neuron_projection"
neuron = 0
range = [-1.6, 1.6]
{table}
"#
    );
    let table = FreeEnergyConfig::from_toml(&table, "double_well.toml")
        .unwrap()
        .unwrap();
    let mut plan = FreeEnergyPlan::new(cfg, table).unwrap();
    plan.sampler = run_window;
    plan
}

/// The well the plan's windows sample, in s: the plan's ridge, the windows' tilt.
fn well(plan: &FreeEnergyPlan) -> DoubleWell {
    DoubleWell::at_ridge(plan.config.sampler.kappa, TILT)
}

/// Every window of every stage, in memory.
fn run_all(plan: &FreeEnergyPlan) -> (FreeEnergyPlan, Vec<WindowRun>) {
    match run_free_energy(plan, None, None, &mut Unobserved).unwrap() {
        Progress::Complete { plan, runs, .. } => (*plan, runs),
        other => unreachable!("every window runs and nothing stops them: {other:?}"),
    }
}

/// The report against quadrature (each check within max(kσ, floor), σ the report's bootstrap
/// error):
/// * two basins split near the barrier top s ≈ −h/(4b) (F stays within 1 kT of the top over
///   ±1/√(2b) ≈ ±0.18, U″ = −4b there, so noise moves the split about that far);
/// * the weight of each, P(s < split) by quadrature, within max(3σ, 0.02);
/// * F on every bin of |s| < 1.3 with an error, against −ln(P(bin)/width) by quadrature
///   (both normalised over the whole line, so no constant is fitted; the windows at ±1.6
///   slide to |s| < 1.3 against the wall, so the bins beyond are sampled thinly), within
///   max(4σ, 0.05): over ~26 bins a 3σ deviation is expected now and then;
/// * the reweighted alignment (f = s on the test input, so A_f = s) against E[s] within
///   max(4σ, 0.02).
fn assert_exact(plan: &FreeEnergyPlan, report: &FreeEnergyReport) {
    let well = well(plan);
    assert_eq!(report.basins.len(), 2, "{:?}", report.basins);
    let (lower, upper) = (&report.basins[0], &report.basins[1]);
    let split = lower.hi;
    let top = -well.h / (4.0 * well.b);
    assert!((split - top).abs() < 0.2, "basins split at {split}");
    assert!((lower.weight + upper.weight - 1.0).abs() < 1e-9);
    let exact = well.probability(-4.0, split, |_| 0.0);
    let err = lower.weight_err.unwrap();
    assert!(err < 0.05, "weight error {err}");
    assert!(
        (lower.weight - exact).abs() < (3.0 * err).max(0.02),
        "P(s < {split}) = {} ± {err}, exact {exact}",
        lower.weight
    );
    let bins = plan.bins;
    let mut compared = 0;
    for i in 0..bins.count {
        let s = bins.centre(i);
        let (Some(f), Some(e)) = (report.profile.f[i], report.profile.f_err[i]) else {
            continue;
        };
        if s.abs() > 1.3 {
            continue;
        }
        let lo = s - 0.5 * bins.width();
        let exact = -(well.probability(lo, lo + bins.width(), |_| 0.0) / bins.width()).ln();
        assert!(
            (f - exact).abs() < (4.0 * e).max(0.05),
            "F({s:.3}) = {f} ± {e}, exact {exact}"
        );
        compared += 1;
    }
    assert!(
        compared >= 24,
        "only {compared} bins of |s| < 1.3 have F with an error"
    );
    let alignment = report.observables[0];
    let exact = well.mean(|s| s);
    assert!(
        (alignment.value - exact).abs() < (4.0 * alignment.err.unwrap()).max(0.02),
        "A_f = {alignment:?}, exact E[s] = {exact}"
    );
}

/// The order parameter is the one weight's projection on the teacher u = ±1 of the data set.
fn assert_reads_the_weight(plan: &FreeEnergyPlan) {
    let OrderKind::NeuronProjection { neuron, direction } = plan.order.kind() else {
        unreachable!("the table names neuron_projection")
    };
    assert_eq!((*neuron, direction.len()), (0, 1));
    assert_eq!(direction[0].abs(), 1.0);
}

/// 17 harmonic windows of κ = 100 without flattening: κ is above the barrier's curvature
/// |U″(0)| = 4b = 64, so no window's biased density has two modes, and at spacing 0.2 the
/// quadrature of the biased densities gives neighbour overlaps (equal samples per window) of
/// 0.11 at the barrier top and above 0.19 elsewhere. MALA with the adapted step (the defaults).
#[test]
fn harmonic_windows_recover_the_double_well_with_mala() {
    let plan = plan(
        "steps = 2500\nburn_in = 500\nthin = 2\nchains = 4\nseed = 21\n",
        HARMONIC,
    );
    assert_reads_the_weight(&plan);
    let (plan, runs) = run_all(&plan);
    assert!(runs.iter().all(|r| r.diverged == 0 && r.chains.len() == 4));
    assert!(
        runs.iter().all(|r| r.acceptance_rate.is_some()),
        "MALA reports its acceptance"
    );
    let report = plan.analyse(&runs, 20, 3).unwrap();
    assert_exact(&plan, &report);
}

/// The windows of the harmonic tests (their docs).
const HARMONIC: &str = "windows = 17\nkappa = 100.0\nbins = 32\nflatten = false\n";

/// The same windows sampled by HMC (4 leapfrog steps per proposal).
#[test]
fn harmonic_windows_recover_the_double_well_with_hmc() {
    let plan = plan(
        "steps = 1500\nburn_in = 300\nthin = 1\nchains = 4\nseed = 22\nhmc_steps = 4\n",
        HARMONIC,
    );
    let (plan, runs) = run_all(&plan);
    assert!(runs.iter().all(|r| r.diverged == 0 && r.chains.len() == 4));
    let report = plan.analyse(&runs, 20, 4).unwrap();
    assert_exact(&plan, &report);
}

/// The default table: a pilot stage of stiff windows estimates F, and 9 soft windows
/// (κ = kT/Δ², Δ = 0.4) carrying the flattening bias B = −F̂ span the 27 kT of the profile.
#[test]
fn flattened_windows_recover_the_double_well() {
    let plan = plan(
        "steps = 2000\nburn_in = 500\nthin = 2\nchains = 4\nseed = 23\n",
        "windows = 9\nbins = 32\n",
    );
    assert!(plan.needs_pilot());
    let (plan, runs) = run_all(&plan);
    assert!(plan.umbrella.flattening.is_some());
    let report = plan.analyse(&runs, 20, 5).unwrap();
    assert_exact(&plan, &report);
}
