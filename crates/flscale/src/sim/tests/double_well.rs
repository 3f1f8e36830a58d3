//! The tilted double well p(s) ∝ exp(−b(s² − 1)² + h s) of one weight
//! ([`crate::sim::model::double_well`]) on the sampler: an unrestrained chain keeps its basin,
//! and a restrained replica-exchange run samples the biased density exactly (spec 07, "Exact
//! tests").

use crate::sim::config::ExperimentConfig;
use crate::sim::driver::outcome::{Outcome, Unobserved};
use crate::sim::driver::result::RunResult;
use crate::sim::model::double_well::{run, DoubleWell};
use crate::sim::order::{OrderKind, OrderParameter, WeightRows};
use crate::sim::restraint::Restraint;

/// b = 16 (ridge κ = 1/32), h = ½: barriers of 15.5 kT from the upper basin (s ≈ −1) and
/// 16.5 kT from the lower one; the upper basin holds about 27 % of the weight.
const WELL: DoubleWell = DoubleWell { b: 16.0, h: 0.5 };

/// The sampler settings: the experiment is a vehicle for `[sampler]` (its `[model]` is not
/// run; [`run`] runs the double well). MALA with the adapted step, the defaults.
const SAMPLER: &str = r#"
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
precision = "f64"
"#;

fn config(sampler: &str) -> ExperimentConfig {
    let text = format!("{SAMPLER}{sampler}");
    ExperimentConfig::from_toml(&text, "double_well.toml").unwrap()
}

/// s = θ: the projection of the one weight on the teacher u = +1.
fn order() -> OrderParameter {
    OrderParameter::new(
        OrderKind::NeuronProjection {
            neuron: 0,
            direction: vec![1.0],
        },
        WeightRows::fcn_first_layer(1, 1),
    )
    .unwrap()
}

/// [`WELL`] with teacher u = +1 under `restraint`, on `cfg`'s noise streams.
fn run_restrained(cfg: &ExperimentConfig, restraint: &Restraint) -> RunResult {
    completed(run(cfg, &WELL, 1.0, Some(restraint), None, &mut Unobserved))
}

fn completed(outcome: Outcome) -> RunResult {
    match outcome {
        Outcome::Completed(r) => r,
        Outcome::Interrupted { .. } => unreachable!("nothing stops the run"),
    }
}

/// Kramers' rate over a 15.5 kT barrier, √(U″_min |U″_top|)/(2π)·e^{−ΔU} ≈ 3·10⁻⁶ per unit
/// time (Kramers, Physica 7, 284 (1940), overdamped limit), gives at most 0.02 expected
/// crossings over the 16 chains' ≤ 400 time units each (40000 steps of η ≤ 0.01, the time of a
/// Langevin step being η): no chain changes sign. Run under a restraint of stiffness 0,
/// whose bias and force are zero, so that s is recorded at every measurement; cold starts put
/// chains in both basins, so the share of chains in each is where they started, not the
/// weight.
#[test]
fn an_unrestrained_chain_never_crosses_the_barrier() {
    let cfg =
        config("step = 0.01\nsteps = 40000\nburn_in = 2000\nthin = 20\nchains = 16\nseed = 3\n");
    let free = Restraint::new(order(), 0.0, 0.0).unwrap();
    let result = completed(run(&cfg, &WELL, 1.0, Some(&free), None, &mut Unobserved));
    assert_eq!(result.restrained.len(), 16);
    let mut positive_chains = 0;
    for chain in &result.restrained {
        assert_eq!(chain.s.len(), 1900);
        let positive = chain.s.iter().filter(|&&s| s > 0.0).count();
        assert!(
            positive == 0 || positive == chain.s.len(),
            "chain {} changed sign: {positive} of {} samples positive",
            chain.chain,
            chain.s.len()
        );
        // Deep in its basin: the well's standard deviation is 1/√(8b) ≈ 0.09.
        assert!(chain.s.iter().all(|s| (s.abs() - 1.0).abs() < 0.5));
        positive_chains += usize::from(positive > 0);
    }
    // Both basins are held by some chain: the run shows the barrier, not a one-sided start.
    assert!(
        positive_chains > 0 && positive_chains < 16,
        "{positive_chains} of 16 chains in the lower basin"
    );
    // The step was adapted to the wells' curvature 8b = 128 (MALA's η ≈ 1/λ_max), not left
    // tiny: the chains had the time to cross.
    let step = result.summary.diagnostics.step;
    assert!(step > 2e-3 && step <= 0.01, "step {step}");
}

/// Bins of the histogram test.
const BINS: usize = 16;
const LO: f64 = -1.6;
const HI: f64 = 1.6;

/// Each chain's share of samples in every bin of [LO, HI] (those outside counted in neither).
fn chain_histograms(result: &RunResult) -> Vec<Vec<f64>> {
    let width = (HI - LO) / BINS as f64;
    result
        .restrained
        .iter()
        .map(|c| {
            let mut h = vec![0.0; BINS];
            for &s in &c.s {
                let i = ((s - LO) / width).floor();
                if i >= 0.0 && (i as usize) < BINS {
                    h[i as usize] += 1.0 / c.s.len() as f64;
                }
            }
            h
        })
        .collect()
}

/// Mean over chains and its standard error (the chains are independent runs).
fn mean_and_error(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// Replica exchange on the data term with the restraint V(s) = ½κ(s − s₀)² in every replica
/// (κ = 4, s₀ = −0.2, which makes the upper basin s ≈ −1 the heavier one, P(s > 0) ≈ 0.35):
/// the hot replicas (β → 0.01: the prior plus the restraint, no barrier) carry states across,
/// so the observed β = 1 chains visit both basins, and their histogram is the exact biased
/// density exp(−b(s² − 1)² + h s − V(s)) by quadrature, bin by bin within max(4σ, 0.01) and
/// P(s > 0) within max(3σ, 0.02), σ the standard error over the 16 independent chains.
#[test]
fn a_restrained_tempered_run_samples_the_biased_double_well() {
    let cfg = config(
        "step = 0.05\nsteps = 6000\nburn_in = 1000\nthin = 5\nchains = 16\nseed = 9\ntempering = { replicas = 6 }\n",
    );
    let restraint = Restraint::new(order(), -0.2, 4.0).unwrap();
    let bias = |s: f64| restraint.bias(s);
    let result = run_restrained(&cfg, &restraint);
    assert_eq!(result.restrained.len(), 16);
    let tempering = result.summary.tempering.as_ref().unwrap();
    assert!(tempering.round_trips > 0, "{tempering:?}");
    // Most chains see both basins: the swaps cross the barrier a plain chain never crosses.
    let crossing = result
        .restrained
        .iter()
        .filter(|c| c.s.iter().any(|&s| s > 0.0) && c.s.iter().any(|&s| s < 0.0))
        .count();
    assert!(
        crossing >= 12,
        "{crossing} of 16 chains visited both basins"
    );

    let positive: Vec<f64> = result
        .restrained
        .iter()
        .map(|c| c.s.iter().filter(|&&s| s > 0.0).count() as f64 / c.s.len() as f64)
        .collect();
    let (p, p_err) = mean_and_error(&positive);
    let exact = WELL.probability(0.0, 4.0, bias);
    assert!(
        (p - exact).abs() < (3.0 * p_err).max(0.02),
        "P(s > 0) = {p} ± {p_err}, exact {exact}"
    );
    let hists = chain_histograms(&result);
    let width = (HI - LO) / BINS as f64;
    for i in 0..BINS {
        let share: Vec<f64> = hists.iter().map(|h| h[i]).collect();
        let (m, e) = mean_and_error(&share);
        let lo = LO + i as f64 * width;
        let exact = WELL.probability(lo, lo + width, bias);
        assert!(
            (m - exact).abs() < (4.0 * e).max(0.01),
            "bin [{lo:.2}, {:.2}): {m} ± {e}, exact {exact}",
            lo + width
        );
    }
}

/// A window on the barrier top (s₀ = 0, κ = 200): U″ = b(12s² − 4) ≈ −64 there, so U alone has
/// no positive curvature along s, and a λ_max of U left the step at its bound `sampler.step`
/// with an acceptance of 0.05–0.2. The adaptation then sizes the step to U + V, whose curvature is
/// κ + U″ ≈ 136 near s = 0 (≤ 160 within 0.3 of it): λ_max in [110, 200] and MALA's acceptance
/// near its target 0.574.
#[test]
fn the_step_is_adapted_to_the_restrained_energy_on_a_barrier_top() {
    let cfg = config("step = 0.5\nsteps = 3000\nburn_in = 1500\nthin = 10\nchains = 8\nseed = 4\n");
    let restraint = Restraint::new(order(), 0.0, 200.0).unwrap();
    let result = run_restrained(&cfg, &restraint);
    let dg = &result.summary.diagnostics;
    let lambda = dg.lambda_max.expect("a positive λ_max of U + V");
    assert!((110.0..200.0).contains(&lambda), "λ_max {lambda}");
    assert!(dg.step < 0.05, "step {}", dg.step);
    let acceptance = dg.acceptance_rate.unwrap();
    assert!((0.4..0.8).contains(&acceptance), "acceptance {acceptance}");
}
