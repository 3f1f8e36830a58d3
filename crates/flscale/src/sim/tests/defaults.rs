//! The default sampler gives right numbers whatever `step` says: an experiment
//! file that sets only a far too large `step` runs Metropolis-adjusted Langevin with its step
//! adapted during burn-in, and its averages agree with the closed form of a posterior that
//! has one. The case is a frozen first layer: the readout's posterior is then Bayesian linear
//! regression on each chain's own random features (Bishop, *Pattern Recognition and Machine
//! Learning*, eq. 3.53–3.54), so the expected test MSE and alignment of every chain are known
//! exactly. The same case under explicit unadjusted Langevin at a large step carries the
//! step-size warning.

use crate::sim::config::{ExperimentConfig, Proposal};
use crate::sim::data::Dataset;
use crate::sim::driver::run::{Run, RunResult};
use crate::sim::num::linalg;
use crate::sim::tests::exact::{linear_readout_posterior, top_eigenvalue};

const WIDTH: usize = 6;

pub(crate) fn frozen_first_layer(sampler_extra: &str, step: f64) -> ExperimentConfig {
    let text = format!(
        "[model]\nkind = \"fcn\"\nwidths = [{WIDTH}]\n[data]\nd = 4\np = 40\nn_test = 300\n\
         [target]\nhermite = 1\n[sampler]\nkappa = 0.05\nstep = {step}\nsteps = 6000\n\
         burn_in = 2000\nthin = 10\nchains = 24\nseed = 3\nfrozen_layers = [1]\n{sampler_extra}"
    );
    ExperimentConfig::from_toml(&text, "frozen.toml").unwrap()
}

/// Per chain: the exact posterior expectations of (alignment, test MSE) given its frozen
/// first layer, and the largest eigenvalue of its readout precision Λ.
pub(crate) fn exact_per_chain(cfg: &ExperimentConfig, result: &RunResult) -> Vec<(f64, f64, f64)> {
    exact_posteriors(cfg, result)
        .into_iter()
        .map(|(exact, _)| exact)
        .collect()
}

/// Per chain: [`exact_per_chain`]'s triple and the readout's marginal posterior variances,
/// the diagonal of Λ⁻¹ = L⁻ᵀL⁻¹ (entry i: |L⁻¹e_i|²).
pub(crate) fn exact_posteriors(
    cfg: &ExperimentConfig,
    result: &RunResult,
) -> Vec<((f64, f64, f64), Vec<f64>)> {
    let data = Dataset::generate(&cfg.data, &cfg.target, cfg.sampler.seed);
    let d = cfg.data.d;
    let features = |w1: &[f64], x: &[f64]| -> Vec<f64> {
        x.chunks(d)
            .flat_map(|row| {
                (0..WIDTH)
                    .map(move |i| libm::erf((0..d).map(|j| w1[i * d + j] * row[j]).sum::<f64>()))
            })
            .collect()
    };
    let y_norm2: f64 = data.y_test.iter().map(|y| y * y).sum();
    result
        .final_state
        .iter()
        .map(|chain| {
            let w1 = &chain[0];
            let phi = features(w1, &data.x_train);
            // Standard readout prior 𝒩(0, σ²/N) with σ² = 1.
            let (l, m) = linear_readout_posterior(
                &phi,
                &data.y_train,
                cfg.sampler.kappa,
                1.0 / WIDTH as f64,
            );
            let phi_test = features(w1, &data.x_test);
            let (mut fy, mut mse) = (0.0, 0.0);
            for (row, y) in phi_test.chunks(WIDTH).zip(&data.y_test) {
                let mean: f64 = row.iter().zip(&m).map(|(a, b)| a * b).sum();
                // Var f(x) = φᵀΛ⁻¹φ = |L⁻¹φ|².
                let mut z = row.to_vec();
                linalg::solve_lower(&l, &mut z, WIDTH);
                let var: f64 = z.iter().map(|v| v * v).sum();
                fy += mean * y;
                mse += (mean - y).powi(2) + var;
            }
            let marginal = (0..WIDTH)
                .map(|i| {
                    let mut e = vec![0.0; WIDTH];
                    e[i] = 1.0;
                    linalg::solve_lower(&l, &mut e, WIDTH);
                    e.iter().map(|v| v * v).sum::<f64>()
                })
                .collect();
            (
                (
                    fy / y_norm2,
                    mse / data.y_test.len() as f64,
                    top_eigenvalue(&l, WIDTH, 200),
                ),
                marginal,
            )
        })
        .collect()
}

/// Mean and standard error over chains of (sampled − exact).
pub(crate) fn paired_difference(sampled: &[f64], exact: &[f64]) -> (f64, f64) {
    let n = sampled.len() as f64;
    let diffs: Vec<f64> = sampled.iter().zip(exact).map(|(s, e)| s - e).collect();
    let mean = diffs.iter().sum::<f64>() / n;
    let var = diffs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// Every chain's time-averaged alignment and test MSE agree with their closed forms
/// ([`exact_per_chain`]): the mean over chains of (sampled − exact) within 3 standard errors
/// (plus 10⁻³ of the value), and the standard error a small fraction of the value.
pub(crate) fn assert_closed_form(cfg: &ExperimentConfig, result: &RunResult, what: &str) {
    let exact = exact_per_chain(cfg, result);
    for (name, pick, exact_pick) in [("alignment", 0usize, 0usize), ("test MSE", 1, 1)] {
        let sampled: Vec<f64> = result
            .chains
            .iter()
            .map(|c| if pick == 0 { c.alignment } else { c.test_mse }.unwrap())
            .collect();
        let want: Vec<f64> = exact
            .iter()
            .map(|e| if exact_pick == 0 { e.0 } else { e.1 })
            .collect();
        let (diff, err) = paired_difference(&sampled, &want);
        let scale = want.iter().sum::<f64>() / want.len() as f64;
        assert!(
            diff.abs() < 3.0 * err + 1e-3 * scale.abs(),
            "{what}, {name}: sampled − exact = {diff:.5} ± {err:.5} (exact ≈ {scale:.4})"
        );
        // The check has teeth: its error bar is a small fraction of the value.
        assert!(
            err < 0.02 * scale.abs(),
            "{what}, {name}: error {err} against {scale}"
        );
    }
}

#[test]
fn defaults_reproduce_the_closed_form_posterior_from_a_far_too_large_step() {
    let cfg = frozen_first_layer("", 1.0);
    assert!(
        cfg.sampler.proposal == Proposal::MetropolisLangevin && cfg.sampler.adapt_step,
        "defaults"
    );
    let result = Run::new(&cfg).run().unwrap();
    assert!(result.summary.diverged_chains.is_empty());
    assert!(
        result.summary.warnings.is_empty(),
        "{:?}",
        result.summary.warnings
    );
    let acceptance = result.summary.diagnostics.acceptance_rate.unwrap();
    assert!((0.4..0.75).contains(&acceptance), "acceptance {acceptance}");
    assert_closed_form(&cfg, &result, "defaults");
}

#[test]
fn explicit_unadjusted_langevin_at_a_large_step_carries_the_warning() {
    // λ_max of the readout precision from a first (default) run on the same frozen features.
    let probe = frozen_first_layer("", 1.0);
    let first = Run::new(&probe).run().unwrap();
    let lambda = exact_per_chain(&probe, &first)
        .iter()
        .fold(0.0f64, |m, e| m.max(e.2));
    let cfg = frozen_first_layer("mala = false\nadapt_step = false\n", 1.0 / lambda);
    let result = Run::new(&cfg).run().unwrap();
    assert!(result.summary.diverged_chains.is_empty());
    let h = result.summary.diagnostics.step_times_lambda_max.unwrap();
    assert!(h > 0.5, "η·λ_max = {h}");
    let w = &result.summary.warnings;
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("unadjusted Langevin") && w[0].contains("mala = true"),
        "{w:?}"
    );
}
