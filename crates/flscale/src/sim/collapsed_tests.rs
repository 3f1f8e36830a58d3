//! The collapsed sampler and MALA against exact answers (issue 3 acceptance): quadrature of a
//! one-neuron collapsed posterior, Bayesian linear regression at a large step, agreement of
//! the collapsed and plain samplers, and the blog setting at P = 32·d from cold and hot
//! starts. Tolerances are stated with the Monte Carlo error they allow.

use super::activation::Activation;
use super::config::{ExperimentConfig, SamplerMethod};
use super::mala::Kernel;
use super::model::FcnModel;
use super::run::run_experiment;
use super::sampler::{Dynamics, Ensemble};

fn config(text: &str) -> ExperimentConfig {
    ExperimentConfig::from_toml(text, "test.toml").unwrap()
}

/// Mean and standard error over chains of per-chain time averages.
fn mean_err(per_chain: &[f64]) -> (f64, f64) {
    let n = per_chain.len() as f64;
    let m = per_chain.iter().sum::<f64>() / n;
    let var = per_chain.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0);
    (m, (var / n).sqrt())
}

/// A two-layer erf network with one input and one hidden neuron, so that the collapsed
/// posterior of its single weight w can be integrated by quadrature: with φ_μ = erf(w x_μ),
/// S = |φ|², q = φ·y, Sherman–Morrison gives
/// U_c(w) = (|y|² − v q²/(κ + vS))/(2κ) + (T/2)·log(1 + vS/κ) + w²/2 and
/// E[a² | w] = m² + κT/A, A = S + κ/v, m = q/A. MALA at a step where ULA is off by ~2× must
/// reproduce E[w²] and E[a²]; ULA at the same step must not.
#[test]
fn collapsed_mala_matches_quadrature_where_ula_is_biased() {
    let x = [-1.5, -0.8, -0.2, 0.4, 1.1, 1.7];
    let y = [-0.9, -0.6, -0.1, 0.3, 0.7, 0.8];
    let (kappa, v) = (0.3, 1.0);
    for temperature in [1.0, 0.4] {
        // Quadrature on [−6, 6] (the prior alone puts e^{−18} beyond).
        let (mut z, mut w2, mut a2) = (0.0, 0.0, 0.0);
        let u_of = |w: f64| {
            let phi: Vec<f64> = x.iter().map(|xi| libm::erf(w * xi)).collect();
            let s: f64 = phi.iter().map(|p| p * p).sum();
            let q: f64 = phi.iter().zip(&y).map(|(p, y)| p * y).sum();
            let yy: f64 = y.iter().map(|y| y * y).sum();
            let u = (yy - v * q * q / (kappa + v * s)) / (2.0 * kappa)
                + 0.5 * temperature * (1.0 + v * s / kappa).ln()
                + 0.5 * w * w;
            let a = s + kappa / v;
            (u, (q / a).powi(2) + kappa * temperature / a)
        };
        let u0 = u_of(0.0).0;
        for i in 0..=120_000 {
            let w = -6.0 + 12.0 * i as f64 / 120_000.0;
            let (u, ea2) = u_of(w);
            let p = (-(u - u0) / temperature).exp();
            z += p;
            w2 += p * w * w;
            a2 += p * ea2;
        }
        let (exact_w2, exact_a2) = (w2 / z, a2 / z);
        let model = FcnModel {
            d: 1,
            widths: vec![1],
            activation: Activation::Erf,
            prior_var: vec![1.0, v],
            frozen: vec![false, false],
            layernorm: false,
        };
        let dynamics = Dynamics {
            kappa,
            step: 0.2,
            temperature,
        };
        let chains = 32;
        let mut estimates = Vec::new();
        for mala in [true, false] {
            let mut ens = Ensemble::<f64>::new(model.clone(), &x, &y, chains, 5, dynamics, None);
            let mut kernel = Kernel::new(&ens, SamplerMethod::Collapsed, mala);
            kernel.advance(&mut ens, 200);
            let (mut sw, mut sa) = (vec![0.0; chains], vec![0.0; chains]);
            let samples = 2000;
            for _ in 0..samples {
                kernel.advance(&mut ens, 2);
                kernel.prepare_measurement(&mut ens);
                for k in 0..chains {
                    sw[k] += ens.chain_group(k, 0)[0].powi(2) / samples as f64;
                    sa[k] += ens.chain_group(k, 1)[0].powi(2) / samples as f64;
                }
            }
            assert!(ens.divergences().iter().all(Option::is_none));
            estimates.push((mean_err(&sw), mean_err(&sa), kernel.acceptance_rate(&ens)));
        }
        let ((mw, ew), (ma, ea), acceptance) = estimates[0];
        let acceptance = acceptance.unwrap();
        assert!(
            acceptance > 0.2 && acceptance < 1.0,
            "T = {temperature}: acceptance {acceptance}"
        );
        assert!(
            (mw - exact_w2).abs() < 4.0 * ew + 0.01,
            "T = {temperature}: MALA E[w²] = {mw} ± {ew}, quadrature {exact_w2}"
        );
        assert!(
            (ma - exact_a2).abs() < 4.0 * ea + 0.01,
            "T = {temperature}: MALA E[a²] = {ma} ± {ea}, quadrature {exact_a2}"
        );
        let ((uw, uew), _, none) = estimates[1];
        assert_eq!(none, None);
        assert!(
            uw - exact_w2 > 0.2 * exact_w2 && uw - exact_w2 > 6.0 * uew,
            "T = {temperature}: ULA E[w²] = {uw} ± {uew} should be visibly above {exact_w2}"
        );
    }
}

/// Plain MALA on a Gaussian posterior: with the first layer frozen the readout posterior is
/// Bayesian linear regression, a ~ 𝒩(m, κT·A⁻¹), A = ΦᵀΦ + (κ/v)·I (Bishop eq. 3.53–3.54).
/// Whitened, z = Lᵀ(a − m)/√(κT) with A = LLᵀ has E|z|²/N = 1. At η = 1/λ_max (η·λ = 1)
/// ULA inflates the variance along the stiffest direction by 1/(1 − ηλ/2) = 2; MALA is exact.
#[test]
fn plain_mala_removes_the_ula_bias_of_bayesian_linear_regression() {
    let (d, n, p, kappa, temperature) = (3, 4, 12, 0.5, 0.8);
    let v = 1.0 / n as f64;
    let model = FcnModel {
        d,
        widths: vec![n],
        activation: Activation::Erf,
        prior_var: vec![1.0 / d as f64, v],
        frozen: vec![true, false],
        layernorm: false,
    };
    let x: Vec<f64> = (0..p * d)
        .map(|i| ((i * 7919 % 113) as f64 / 113.0 - 0.5) * 3.0)
        .collect();
    let y: Vec<f64> = (0..p)
        .map(|mu| (x[mu * d] - 0.5 * x[mu * d + 1]).sin())
        .collect();
    let chains = 16;
    let probe = Ensemble::<f64>::new(
        model.clone(),
        &x,
        &y,
        chains,
        3,
        Dynamics {
            kappa,
            step: 1.0,
            temperature,
        },
        None,
    );
    // Exact conditional of every chain (its own frozen features), and the stiffest
    // curvature over chains, λ = max eig(A)/κ.
    let mut exact = Vec::new();
    let mut lambda_top: f64 = 0.0;
    for k in 0..chains {
        let b = probe
            .blocks
            .iter()
            .find(|b| k >= b.first && k < b.first + b.len)
            .unwrap();
        let cond = super::collapsed::readout_conditional(
            b,
            &model,
            &probe.x,
            &probe.y,
            p,
            kappa,
            k - b.first,
        )
        .unwrap();
        let l = &cond.chol;
        let a: Vec<f64> = (0..n * n)
            .map(|ij| {
                (0..n)
                    .map(|r| l[(ij / n) * n + r] * l[(ij % n) * n + r])
                    .sum()
            })
            .collect();
        let mut u = vec![1.0; n];
        let mut top = 0.0;
        for _ in 0..300 {
            let w: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| a[i * n + j] * u[j]).sum())
                .collect();
            top = w.iter().map(|c| c * c).sum::<f64>().sqrt();
            u = w.iter().map(|c| c / top).collect();
        }
        lambda_top = lambda_top.max(top / kappa);
        exact.push(cond);
    }
    let step = 1.0 / lambda_top;
    let mut whitened = Vec::new();
    for mala in [true, false] {
        let dynamics = Dynamics {
            kappa,
            step,
            temperature,
        };
        let mut ens = Ensemble::<f64>::new(model.clone(), &x, &y, chains, 3, dynamics, None);
        let mut kernel = Kernel::new(&ens, SamplerMethod::Plain, mala);
        kernel.advance(&mut ens, 500);
        let mut per_chain = vec![0.0; chains];
        let samples = 2000;
        for _ in 0..samples {
            kernel.advance(&mut ens, 5);
            for (k, cond) in exact.iter().enumerate() {
                let a = ens.chain_group(k, 1);
                let l = &cond.chol;
                let z2: f64 = (0..n)
                    .map(|i| {
                        (i..n)
                            .map(|r| l[r * n + i] * (a[r] - cond.mean[r]))
                            .sum::<f64>()
                            .powi(2)
                    })
                    .sum();
                per_chain[k] += z2 / (kappa * temperature * n as f64) / samples as f64;
            }
        }
        whitened.push((mean_err(&per_chain), kernel.acceptance_rate(&ens)));
    }
    let ((m, e), acceptance) = whitened[0];
    assert!(acceptance.unwrap() > 0.3, "acceptance {acceptance:?}");
    assert!(
        (m - 1.0).abs() < 4.0 * e + 0.01,
        "MALA E|z|²/N = {m} ± {e}, exact 1"
    );
    let ((m, e), _) = whitened[1];
    assert!(
        m > 1.1 && m - 1.0 > 6.0 * e,
        "ULA E|z|²/N = {m} ± {e} should be visibly above 1"
    );
}

fn blog_like(p: usize, d: usize, method: &str, extra: &str) -> ExperimentConfig {
    config(&format!(
        r#"
[model]
kind = "fcn"
activation = "erf"
widths = [{d}]
[data]
d = {d}
p = {p}
n_test = 500
[target]
terms = [[1, 1.0], [3, 0.3]]
[sampler]
kappa = 0.2
step = 1.0
seed = 3
method = "{method}"
adapt_step = true
{extra}
"#
    ))
}

/// Where both equilibrate (d = N = 8, P = 4d, κ = 0.2), the collapsed and the plain sampler
/// agree on the hidden-weight observables R = E[ρ²], outliers and alignment within 4
/// combined standard errors (errors from the spread of 16 chains).
#[test]
fn collapsed_and_plain_samplers_agree_where_both_equilibrate() {
    let runs: Vec<_> = ["plain", "collapsed"]
        .iter()
        .map(|m| {
            let cfg = blog_like(
                32,
                8,
                m,
                "steps = 24000\nburn_in = 4000\nthin = 100\nchains = 16\nprecision = \"f64\"",
            );
            run_experiment(&cfg, &mut |_, _| {}).unwrap().summary
        })
        .collect();
    let (plain, collapsed) = (&runs[0], &runs[1]);
    for s in &runs {
        assert!(s.diverged_chains.is_empty(), "{:?}", s.diverged_chains);
    }
    for (name, a, ea, b, eb) in [
        (
            "R",
            plain.r_overlap2,
            plain.r_overlap2_err,
            collapsed.r_overlap2,
            collapsed.r_overlap2_err,
        ),
        (
            "alignment",
            plain.alignment,
            plain.alignment_err,
            collapsed.alignment,
            collapsed.alignment_err,
        ),
        (
            "outliers",
            plain.outliers_layer1,
            plain.outliers_layer1_err,
            collapsed.outliers_layer1,
            collapsed.outliers_layer1_err,
        ),
    ] {
        let (a, ea, b, eb) = (a.unwrap(), ea.unwrap(), b.unwrap(), eb.unwrap());
        assert!(
            (a - b).abs() <= 4.0 * (ea * ea + eb * eb).sqrt() + 1e-3,
            "{name}: plain {a} ± {ea}, collapsed {b} ± {eb}"
        );
    }
    // The configurational temperature of the hidden weights and of the drawn readouts is T.
    for g in &collapsed.diagnostics.groups {
        let t = g.temperature.unwrap();
        assert!((t - 1.0).abs() < 0.15, "{}: temperature {t}", g.group);
    }
    assert_eq!(collapsed.diagnostics.method, "collapsed");
}

/// Same seed, same numbers for one and two threads.
#[test]
fn collapsed_mala_results_do_not_depend_on_the_thread_count() {
    let cfg = blog_like(
        40,
        6,
        "collapsed",
        "steps = 400\nburn_in = 200\nthin = 50\nchains = 5\nmala = true",
    );
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| run_experiment(&cfg, &mut |_, _| {}).unwrap().summary)
    };
    let one = run(1);
    assert!(one.diagnostics.acceptance_rate.is_some());
    assert_eq!(one, run(2));
}

#[test]
fn collapsed_with_a_frozen_readout_is_rejected() {
    let text = r#"
[model]
kind = "fcn"
activation = "erf"
widths = [4]
[data]
d = 3
p = 10
[target]
hermite = 1
[sampler]
kappa = 1.0
step = 1e-3
steps = 10
burn_in = 5
thin = 5
chains = 2
seed = 1
method = "collapsed"
frozen_layers = [2]
"#;
    let e = ExperimentConfig::from_toml(text, "exp.toml").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let msg = e.to_string();
    assert!(
        msg.contains("sampler.method = \"collapsed\"") && msg.contains("frozen_layers"),
        "{msg}"
    );
}
