//! Sampler correctness against exact answers: the prior at P = 0,
//! Bayesian linear regression with a frozen first layer, the arcsine-kernel GP limit of a
//! wide erf network, and the lazy/specialised contrast of a two-layer erf network on He3.
//! Sizes are small so that the whole file runs in seconds; tolerances are stated with the
//! Monte Carlo error they allow.

use crate::activation::Activation;
use crate::sim::config::ExperimentConfig;
use crate::sim::driver::run::Run;
use crate::sim::ensemble::fcn::{Dynamics, Ensemble};
use crate::sim::model::fcn::FcnModel;
use crate::sim::num::linalg;
use crate::sim::tests::exact::{linear_readout_posterior, top_eigenvalue};

fn config(text: &str) -> ExperimentConfig {
    ExperimentConfig::from_toml(text, "test.toml").unwrap()
}

/// (i) With P = 0 the posterior is the prior: every group's mean, second and fourth moments
/// match 𝒩(0, v_g) — for a three-layer network, standard and mean-field readouts.
#[test]
fn p_zero_recovers_the_prior_moments() {
    for param in ["standard", "mean-field"] {
        let cfg = config(&format!(
            r#"
[model]
kind = "fcn"
activation = "erf"
widths = [4, 3]
parametrization = "{param}"
[data]
d = 3
p = 0
n_test = 20
[target]
hermite = 1
[sampler]
kappa = 1.0
step = 0.002
steps = 6000
burn_in = 1000
thin = 25
chains = 48
seed = 11
precision = "f64"
[priors]
sigma2 = [1.0, 0.5, 2.0]
"#
        ));
        let r = Run::new(&cfg).run().unwrap();
        let model = FcnModel::from_config(&cfg);
        for (g, stats) in r.summary.diagnostics.groups.iter().enumerate() {
            let v = model.prior_var[g];
            assert_eq!(stats.prior_variance, Some(v));
            // ESS ≈ chains × entries × steps·η/v ≥ 48·3·(5000·0.002/v)/2 ≳ 2000 per group:
            // relative MC error of ⟨θ²⟩ ≈ √(2/2000) ≈ 3 %; ULA bias η/(2v) ≤ 0.7 %.
            let m2 = stats.second_moment.unwrap() / v;
            let m4 = stats.fourth_moment.unwrap() / (3.0 * v * v);
            let mean = stats.mean.unwrap() / v.sqrt();
            assert!(
                (m2 - 1.0).abs() < 0.1,
                "{param} {}: ⟨θ²⟩/v = {m2}",
                stats.group
            );
            assert!(
                (m4 - 1.0).abs() < 0.25,
                "{param} {}: ⟨θ⁴⟩/3v² = {m4}",
                stats.group
            );
            assert!(mean.abs() < 0.1, "{param} {}: ⟨θ⟩/√v = {mean}", stats.group);
            let t = stats.temperature.unwrap();
            assert!(
                (t - 1.0).abs() < 0.1,
                "{param} {}: temperature {t}",
                stats.group
            );
        }
        // R = E[ρ²] = σ1²/d under the prior.
        let r2 = r.summary.r_overlap2.unwrap() * 3.0;
        assert!((r2 - 1.0).abs() < 0.12, "{param}: R·d/σ1² = {r2}");
        assert_eq!(r.summary.train_mse, None);
        assert!(r.summary.diverged_chains.is_empty());
    }
}

/// Cholesky factor L (lower, row-major) of a small SPD matrix ([`linalg::cholesky`]).
fn cholesky(a: &[f64], n: usize) -> Vec<f64> {
    let mut l = vec![0.0; n * n];
    assert!(linalg::cholesky(a, &mut l, n), "not positive definite");
    l
}

/// Solves L z = b (forward substitution, [`linalg::solve_lower`]).
fn solve_lower(l: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut z = b.to_vec();
    linalg::solve_lower(l, &mut z, n);
    z
}

/// (ii) With the first layer frozen the readout posterior is Bayesian linear regression on
/// the features Φ = σ(XW₁ᵀ): precision Λ = ΦᵀΦ/κ + I/v, mean Λ⁻¹Φᵀy/κ (T = 1). Each chain
/// has its own frozen W₁, so samples are whitened per chain, z = Lᵀ(a − m) with Λ = LLᵀ, and
/// pooled: z must have mean 0 and identity covariance.
/// The frozen-first-layer problem of (ii), shared with the tempered version
/// (tempering.rs): d = 3, N = 4, P = 12, κ = 0.5, readout variance 1/N, deterministic inputs
/// and y = sin(x₁ − x₂/2).
pub(super) fn frozen_first_layer_problem() -> (FcnModel, Vec<f64>, Vec<f64>, f64) {
    let (d, n, p, kappa) = (3, 4, 12, 0.5);
    let model = FcnModel {
        d,
        widths: vec![n],
        activation: Activation::Erf,
        prior_var: vec![1.0 / d as f64, 1.0 / n as f64],
        frozen: vec![true, false],
        layernorm: false,
    };
    let x: Vec<f64> = (0..p * d)
        .map(|i| ((i * 7919 % 113) as f64 / 113.0 - 0.5) * 3.0)
        .collect();
    let y: Vec<f64> = (0..p)
        .map(|mu| (x[mu * d] - 0.5 * x[mu * d + 1]).sin())
        .collect();
    (model, x, y, kappa)
}

/// The readout posterior of the frozen-first-layer network with first layer `w1` (N × d):
/// Bayesian linear regression on Φ = erf(XW₁ᵀ), precision Λ = ΦᵀΦ/κ + I/v and mean
/// Λ⁻¹Φᵀy/κ (T = 1); returns (the Cholesky factor of Λ, the mean).
pub(super) fn readout_posterior(
    w1: &[f64],
    x: &[f64],
    y: &[f64],
    kappa: f64,
    v_readout: f64,
    n: usize,
) -> (Vec<f64>, Vec<f64>) {
    let p = y.len();
    let d = x.len() / p;
    let phi: Vec<f64> = (0..p)
        .flat_map(|mu| {
            let row = &x[mu * d..(mu + 1) * d];
            (0..n).map(move |i| libm::erf((0..d).map(|j| w1[i * d + j] * row[j]).sum()))
        })
        .collect();
    linear_readout_posterior(&phi, y, kappa, v_readout)
}

#[test]
fn frozen_first_layer_gives_bayesian_linear_regression() {
    let (model, x, y, kappa) = frozen_first_layer_problem();
    let n = model.widths[0];
    let v_readout = model.prior_var[1];
    let chains = 24;
    let eta = 2e-4;
    let dynamics = Dynamics {
        kappa,
        step: eta,
        temperature: 1.0,
    };
    let mut ens = Ensemble::<f64>::new(model, &x, &y, chains, 3, dynamics, None);
    // Exact posterior of each chain.
    let exact: Vec<(Vec<f64>, Vec<f64>)> = (0..chains)
        .map(|k| readout_posterior(&ens.chain_group(k, 0), &x, &y, kappa, v_readout, n))
        .collect();
    // λ_max of a quadratic U is the top eigenvalue of Λ (power iteration on the exact Λ).
    let lambdas = ens.lambda_max(60);
    for (k, (l, _)) in exact.iter().enumerate() {
        let top = top_eigenvalue(l, n, 500);
        assert!(
            (lambdas[k] / top - 1.0).abs() < 0.02,
            "chain {k}: λ_max {} vs exact {top}",
            lambdas[k]
        );
    }
    ens.advance(5000);
    let mut sum = vec![0.0; n];
    let mut cov = vec![0.0; n * n];
    let mut count = 0.0;
    for _ in 0..300 {
        ens.advance(100);
        for (k, (l, m)) in exact.iter().enumerate() {
            let a = ens.chain_group(k, 1);
            // z = Lᵀ (a − m).
            let z: Vec<f64> = (0..n)
                .map(|i| (i..n).map(|r| l[r * n + i] * (a[r] - m[r])).sum())
                .collect();
            for i in 0..n {
                sum[i] += z[i];
                for j in 0..n {
                    cov[i * n + j] += z[i] * z[j];
                }
            }
            count += 1.0;
        }
    }
    // 7200 draws, autocorrelation time ≲ 1/(η λ_min(Λ)) / 100 ≈ 13 samples: ESS ≳ 500,
    // so the mean's MC error is ≲ 0.045 and a covariance entry's ≲ 0.065. ULA bias on the
    // covariance is ηλ_max/2 ≈ 1 %.
    for i in 0..n {
        let mean = sum[i] / count;
        assert!(mean.abs() < 0.2, "whitened mean {i}: {mean}");
        for j in 0..n {
            let c = cov[i * n + j] / count - (sum[i] / count) * (sum[j] / count);
            let expected = if i == j { 1.0 } else { 0.0 };
            assert!(
                (c - expected).abs() < 0.25,
                "whitened covariance ({i},{j}): {c}"
            );
        }
    }
    // The first layer did not move.
    let before = Ensemble::<f64>::new(ens.model.clone(), &x, &y, chains, 3, dynamics, None);
    assert_eq!(before.chain_group(5, 0), ens.chain_group(5, 0));
}

/// The arcsine kernel of a two-layer erf network with W₁ ~ 𝒩(0, σ1²/d), readout variance
/// σ2²/N (standard scaling): K(x, x') = σ2²·(2/π)·arcsin(2σ1² x·x'/d / √((1 + 2σ1²|x|²/d)(1 + 2σ1²|x'|²/d)))
/// (Williams 1997; the NNGP of the paper's App. C).
fn arcsine_kernel(a: &[f64], b: &[f64], d: usize) -> f64 {
    let dot = |u: &[f64], v: &[f64]| u.iter().zip(v).map(|(x, y)| x * y).sum::<f64>() / d as f64;
    let num = 2.0 * dot(a, b);
    let den = ((1.0 + 2.0 * dot(a, a)) * (1.0 + 2.0 * dot(b, b))).sqrt();
    2.0 / std::f64::consts::PI * (num / den).asin()
}

/// (iii) As N grows, the ensemble-mean predictor of a two-layer erf network (standard
/// scaling) approaches the GP posterior mean k*ᵀ(K + κI)⁻¹y with the arcsine kernel.
#[test]
fn wide_erf_network_approaches_the_arcsine_gp_posterior_mean() {
    let gp_error = |width: usize, steps: usize| -> (f64, f64) {
        let cfg = config(&format!(
            r#"
[model]
kind = "fcn"
activation = "erf"
widths = [{width}]
[data]
d = 4
p = 6
n_test = 40
[target]
hermite = 1
[sampler]
kappa = 0.5
step = 4e-4
steps = {steps}
burn_in = 1000
thin = 50
chains = 32
seed = 5
precision = "f64"
"#
        ));
        let r = Run::new(&cfg).run().unwrap();
        let data = crate::sim::data::Dataset::generate(&cfg.data, &cfg.target, cfg.sampler.seed);
        let (d, p) = (4, 6);
        let mut k = vec![0.0; p * p];
        for i in 0..p {
            for j in 0..p {
                k[i * p + j] = arcsine_kernel(
                    &data.x_train[i * d..(i + 1) * d],
                    &data.x_train[j * d..(j + 1) * d],
                    d,
                );
            }
            k[i * p + i] += cfg.sampler.kappa;
        }
        let l = cholesky(&k, p);
        let u = solve_lower(&l, &data.y_train, p);
        let mut alpha = vec![0.0; p];
        for i in (0..p).rev() {
            let s: f64 = (i + 1..p).map(|q| l[q * p + i] * alpha[q]).sum();
            alpha[i] = (u[i] - s) / l[i * p + i];
        }
        let mut err2 = 0.0;
        let mut scale2 = 0.0;
        for (t, f) in r.mean_test_prediction.iter().enumerate() {
            let xt = &data.x_test[t * d..(t + 1) * d];
            let gp: f64 = (0..p)
                .map(|i| arcsine_kernel(xt, &data.x_train[i * d..(i + 1) * d], d) * alpha[i])
                .sum();
            err2 += (f - gp).powi(2);
            scale2 += gp * gp;
        }
        ((err2 / scale2).sqrt(), scale2)
    };
    let (narrow, _) = gp_error(2, 8000);
    let (wide, scale) = gp_error(128, 8000);
    assert!(scale > 0.1, "GP mean is not trivially zero");
    // Finite-width corrections are O(1/N); the MC error of the ensemble mean is a few %.
    assert!(
        wide < 0.1,
        "N = 128: relative distance to the GP mean {wide}"
    );
    assert!(wide < 0.7 * narrow, "N = 2: {narrow}, N = 128: {wide}");
}

/// The He3 network of the test below, sampled with the paper's dynamics (unadjusted
/// Langevin at a fixed step, as the test was calibrated).
fn he3(
    p: usize,
    kappa: f64,
    step: f64,
    steps: usize,
    start: &str,
) -> crate::sim::driver::run::RunResult {
    let cfg = config(&format!(
        r#"
[model]
kind = "fcn"
activation = "erf"
widths = [20]
[data]
d = 20
p = {p}
n_test = 1000
[target]
hermite = 3
[sampler]
kappa = {kappa}
step = {step}
steps = {steps}
burn_in = {}
thin = 100
chains = 8
seed = 1
start = "{start}"
mala = false
adapt_step = false
"#,
        steps / 2
    ));
    Run::new(&cfg).run().unwrap()
}

/// (iv) Two-layer erf, Ĥe3 target, N = d = 20: at P = 2d the network stays lazy (small
/// alignment, outliers at the GP rate 20·P(|z| > 3) ≈ 0.05 per network); at P = 40d with a
/// small ridge it specialises: O(1) alignment and outlier neurons (paper Fig. 2, App. F.0.1).
#[test]
fn he3_is_lazy_at_2d_and_specialised_at_40d() {
    let lazy = he3(40, 0.1, 1e-3, 4000, "both").summary;
    // The lazy posterior is unimodal: a teacher-aligned (hot) start relaxes to the same
    // answer as the prior (cold) start.
    assert_eq!(lazy.equilibrated, Some(true), "{:?}", lazy.hot_start);
    assert!(lazy.hot_start.as_ref().unwrap().alignment.unwrap().abs() < 0.1);
    assert!(
        lazy.alignment.unwrap().abs() < 0.1,
        "P = 2d: alignment {:?}",
        lazy.alignment
    );
    assert!(
        lazy.outliers_layer1.unwrap() < 0.5,
        "P = 2d: outliers {:?}",
        lazy.outliers_layer1
    );
    let rich = he3(800, 0.1, 5e-5, 4000, "cold").summary;
    assert!(rich.diverged_chains.is_empty());
    assert!(
        rich.alignment.unwrap() > 0.3,
        "P = 40d: alignment {:?}",
        rich.alignment
    );
    assert!(
        rich.outliers_layer1.unwrap() >= 0.75,
        "P = 40d: outliers {:?}",
        rich.outliers_layer1
    );
    // MSE ≥ (1 − A)² (Cauchy–Schwarz, App. F.2) holds for the mean predictor.
    assert!(rich.test_mse_mean_predictor.unwrap() >= rich.mse_lower_bound.unwrap() - 1e-12);
}

/// Step-size control: an absurd step (η = 1, about 10³ × the stability limit) with
/// `adapt_step` with unadjusted Langevin is brought down from the λ_max estimate before the
/// first step, no chain diverges, and the frozen step sits near η·λ_max = 0.1.
#[test]
fn adaptive_step_tames_an_absurd_step() {
    let cfg = config(
        r#"
[model]
kind = "fcn"
activation = "erf"
widths = [10]
[data]
d = 10
p = 100
n_test = 200
[target]
hermite = 3
[sampler]
kappa = 0.1
step = 1.0
steps = 2000
burn_in = 1000
thin = 100
chains = 4
seed = 2
adapt_step = true
mala = false
"#,
    );
    let r = Run::new(&cfg).run().unwrap();
    let dg = &r.summary.diagnostics;
    assert!(
        r.summary.diverged_chains.is_empty(),
        "{:?}",
        r.summary.diverged_chains
    );
    assert!(dg.step < 1e-2, "adapted step {}", dg.step);
    let sl = dg.step_times_lambda_max.unwrap();
    assert!(sl > 0.02 && sl < 0.5, "η·λ_max = {sl}");
    // Without adaptation the same step diverges.
    let mut fixed = cfg.clone();
    fixed.sampler.adapt_step = false;
    let r = Run::new(&fixed).run().unwrap();
    assert!(r.all_diverged());
}
