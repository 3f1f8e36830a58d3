//! HMC on the flat-parameter models (CNN, softmax attention; the one engine's kernel, [`crate::sim::kernel::hmc`])
//! against exact answers: at P = 0 it draws the prior tempered by T, on the plain and the
//! collapsed posterior, from an overdispersed start; one proposal moves a stationary chain by
//! the mean squared displacement of the leapfrog map of the Gaussian written out; with the
//! filters frozen the readout follows the Bayesian linear regression posterior; on the
//! two-parameter CNN it matches quadrature; a run is bit-identical on one and two threads; and
//! the acceptance rate is sane and steerable (Neal, "MCMC using Hamiltonian dynamics", 2011).

use crate::sim::config::{ExperimentConfig, ModelKind};
use crate::sim::driver::run::Run;
use crate::sim::ensemble::fcn::Dynamics;
use crate::sim::langevin::Proposal;
use crate::sim::model::attention::AttentionModel;
use crate::sim::model::cnn::CnnModel;
use crate::sim::model::collapsed::{cholesky, cholesky_solve};
use crate::sim::model::flat::FlatModel;
use crate::sim::model::interface::Model;
use crate::sim::tests::chains::Chains;
use crate::sim::tests::flat::{features_direct, FeatureDefinition};

fn config(text: &str) -> ExperimentConfig {
    ExperimentConfig::from_toml(text, "test.toml").unwrap()
}

/// A CNN (d = 6, patch 2, N = 3) or an attention layer (d = 3, L = 3, H = 2) with `p` training
/// samples, and `extra` appended to its `[sampler]`.
fn flat_toml(kind: ModelKind, p: usize, extra: &str) -> String {
    let model = match kind {
        ModelKind::Cnn => {
            "kind = \"cnn\"\nactivation = \"erf\"\nwidths = [3]\npatch = 2\n[data]\nd = 6"
        }
        _ => "kind = \"attention\"\nheads = 2\n[data]\nd = 3\ntokens = 3",
    };
    let target = if kind == ModelKind::Cnn {
        "hermite = 3"
    } else {
        "cubic_tokens = true"
    };
    format!(
        "[model]\n{model}\np = {p}\nn_test = 40\n[target]\n{target}\n[sampler]\nkappa = 0.3\nstep = 1e-3\nsteps = 200\nburn_in = 100\nthin = 10\nchains = 6\nseed = 4\nprecision = \"f64\"\n{extra}\n"
    )
}

/// Per-group (mean, standard error) over chains of a per-chain time average: the chains are
/// independent, so the spread of their averages measures the error whatever the
/// autocorrelation.
fn across_chains(per_chain: &[f64]) -> (f64, f64) {
    let n = per_chain.len() as f64;
    let mean = per_chain.iter().sum::<f64>() / n;
    let var = per_chain.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// An ensemble of `model` at P = 0 with HMC of `leapfrog` steps at step η = `step_factor`·v_min
/// (ε·ω_max = √(2·step_factor) for the stiffest prior curvature 1/v_min).
fn prior_ensemble<M: FlatModel<f64> + Model<f64>>(
    model: M,
    chains: usize,
    temperature: f64,
    step_factor: f64,
    leapfrog: usize,
    collapsed: bool,
) -> Chains<f64, M> {
    let v_min = model
        .groups()
        .iter()
        .map(|g| g.prior_var)
        .fold(f64::INFINITY, f64::min);
    let dynamics = Dynamics {
        kappa: 0.3,
        step: step_factor * v_min,
        temperature,
    };
    let hmc = Proposal::Hmc {
        leapfrog_steps: leapfrog,
    };
    Chains::new(model, &[], &[], chains, 9, dynamics, None, hmc, collapsed)
}

/// P = 0: U is the prior, so every weight of group g has mean 0 and variance T·v_g under
/// exp(−U/T). From a start 2.5× the prior's scale (so a chain that does not move, or ignores
/// T, is far off), 16 chains × 300 proposals after 60 of burn-in match it for every group
/// within 4 standard errors (≈ 1 % on a variance), plain and collapsed (the readout drawn from
/// its conditional, here the tempered prior), for the CNN and for attention.
#[test]
fn hmc_draws_the_tempered_prior_at_p0() {
    fn check<M: FlatModel<f64> + Model<f64>>(model: M, collapsed: bool, what: &str) {
        let (temperature, chains, burn_in, draws) = (0.6, 16, 60, 300);
        let mut ens = prior_ensemble(model, chains, temperature, 0.3, 8, collapsed);
        ens.scale_params(2.5);
        ens.advance(burn_in);
        let groups = FlatModel::<f64>::groups(&ens.ens.model).to_vec();
        let mut first = vec![vec![0.0; chains]; groups.len()];
        let mut second = first.clone();
        for _ in 0..draws {
            ens.advance(1);
            if collapsed {
                ens.draw_readouts();
            }
            for (c, chain) in ens.views().iter().enumerate() {
                let mut start = 0;
                for (g, grp) in groups.iter().enumerate() {
                    let w = &chain.theta[start..start + grp.len];
                    start += grp.len;
                    first[g][c] += w.iter().sum::<f64>() / (grp.len * draws) as f64;
                    second[g][c] += w.iter().map(|x| x * x).sum::<f64>() / (grp.len * draws) as f64;
                }
            }
        }
        assert!(ens.views().iter().all(|c| c.diverged.is_none()), "{what}");
        for (g, grp) in groups.iter().enumerate() {
            let want = temperature * grp.prior_var;
            let (mean, mean_err) = across_chains(&first[g]);
            let (var, var_err) = across_chains(&second[g]);
            assert!(
                mean.abs() < 4.0 * mean_err,
                "{what} {}: mean {mean} ± {mean_err}",
                grp.name
            );
            assert!(
                var_err < 0.03 * want,
                "{what} {}: error {var_err}",
                grp.name
            );
            assert!(
                (var - want).abs() < 4.0 * var_err,
                "{what} {}: variance {var} ± {var_err}, want {want}",
                grp.name
            );
        }
        let rate = ens.acceptance_rate().unwrap();
        assert!(rate > 0.8 && rate <= 1.0, "{what}: acceptance {rate}");
    }
    let cnn = CnnModel::from_config(&config(&flat_toml(ModelKind::Cnn, 0, "")));
    let attention = AttentionModel::from_config(&config(&flat_toml(ModelKind::Attention, 0, "")));
    for collapsed in [false, true] {
        check(
            cnn.clone(),
            collapsed,
            &format!("cnn, collapsed {collapsed}"),
        );
        check(
            attention.clone(),
            collapsed,
            &format!("attention, collapsed {collapsed}"),
        );
    }
}

/// The mean squared displacement of one HMC proposal from a stationary chain, against the
/// leapfrog map written out. At P = 0, T = 1 (the prior start is then stationary) each weight
/// of prior variance v is a harmonic oscillator of ω² = 1/v, and one leapfrog step of size ε is
/// the linear map (θ, u) ↦ Λ(θ, u) with Λ = [[1 − ε²ω²/2, ε], [−εω²(1 − ε²ω²/4), 1 − ε²ω²/2]]
/// (Neal sec. 5.2.3.3). After L steps θ′ = aθ + bu with (a, b) the first row of Λᴸ, so
/// E(θ′ − θ)² = (a − 1)²v + b² for θ ~ 𝒩(0, v), u ~ 𝒩(0, 1), averaged over the jitter
/// ε ~ U[0.8, 1.2]·√(2η) by a midpoint sum. At εω ≤ 0.1 practically every proposal is
/// accepted (≥ 0.99; the rare rejections, of the longest moves, lower the value by ≈ 1 %), so
/// the measured value (256 chains × 20 proposals, every weight; standard error ≈ 0.7 %)
/// matches within 4 % for L = 1 and L = 12 (measured: −1.4 % and −1.9 % at worst, on the
/// readout); skipping the trajectory, or taking one step of it, is off by about L².
#[test]
fn one_hmc_proposal_moves_a_stationary_chain_as_the_leapfrog_map() {
    let model = CnnModel::from_config(&config(&flat_toml(ModelKind::Cnn, 0, "")));
    for leapfrog in [1, 12] {
        let mut ens = prior_ensemble(model.clone(), 256, 1.0, 0.005, leapfrog, false);
        let groups = FlatModel::<f64>::groups(&ens.ens.model).to_vec();
        let proposals = 20;
        let mut measured = vec![0.0; groups.len()];
        for _ in 0..proposals {
            let before: Vec<Vec<f64>> = ens.views().iter().map(|c| c.theta.clone()).collect();
            ens.advance(1);
            for (chain, old) in ens.views().iter().zip(&before) {
                let mut start = 0;
                for (g, grp) in groups.iter().enumerate() {
                    measured[g] += (start..start + grp.len)
                        .map(|i| (chain.theta[i] - old[i]).powi(2))
                        .sum::<f64>()
                        / (grp.len * proposals * 256) as f64;
                    start += grp.len;
                }
            }
        }
        let eps0 = (2.0 * ens.ens.dynamics.step).sqrt();
        for (g, grp) in groups.iter().enumerate() {
            let v = grp.prior_var;
            let w2 = 1.0 / v;
            let midpoints = 2000;
            let exact = (0..midpoints)
                .map(|i| {
                    let eps = eps0 * (0.8 + 0.4 * (i as f64 + 0.5) / midpoints as f64);
                    let c = 1.0 - eps * eps * w2 / 2.0;
                    let step = [[c, eps], [-eps * w2 * (1.0 - eps * eps * w2 / 4.0), c]];
                    let mut m = [[1.0, 0.0], [0.0, 1.0]];
                    for _ in 0..leapfrog {
                        m = [
                            [
                                m[0][0] * step[0][0] + m[0][1] * step[1][0],
                                m[0][0] * step[0][1] + m[0][1] * step[1][1],
                            ],
                            [
                                m[1][0] * step[0][0] + m[1][1] * step[1][0],
                                m[1][0] * step[0][1] + m[1][1] * step[1][1],
                            ],
                        ];
                    }
                    (m[0][0] - 1.0).powi(2) * v + m[0][1].powi(2)
                })
                .sum::<f64>()
                / midpoints as f64;
            let got = measured[g];
            assert!(
                (got / exact - 1.0).abs() < 0.04,
                "L = {leapfrog}, {}: E(Δθ)² = {got}, leapfrog map {exact}",
                grp.name
            );
        }
        let rate = ens.acceptance_rate().unwrap();
        assert!(rate > 0.99, "L = {leapfrog}: acceptance {rate}");
    }
}

/// Bayesian linear regression (Bishop eq. 3.53–3.54): with the CNN's filters frozen, U is
/// quadratic in the readout a, whose law under exp(−U/T) is 𝒩(m, κT·A⁻¹) with
/// A = ΦᵀΦ + (κ/v)I, m = A⁻¹Φᵀy (Φ by its definition, [`features_direct`]). HMC on the plain
/// posterior (η = 0.4/λ_max, L = 6) makes z = Lᵀ(a − m)/√(κT) (A = LLᵀ) standard normal: over
/// 24 chains × 400 proposals every mean and covariance entry of z is within 4.5 standard errors
/// (from the spread of the chains' averages) of 0 or the identity, and the errors are small
/// (< 0.06).
#[test]
fn hmc_with_frozen_filters_is_bayesian_linear_regression() {
    let cfg = config(&flat_toml(ModelKind::Cnn, 12, ""));
    let mut model = CnnModel::from_config(&cfg);
    let data = model.dataset(&cfg);
    model.groups[0].frozen = true;
    let (kappa, temperature) = (0.4, 0.6);
    let (v, k) = (model.groups[1].prior_var, model.groups[1].len);
    let (chains, burn_in, draws) = (24, 100, 400);
    let dynamics = Dynamics {
        kappa,
        step: 1e-3,
        temperature,
    };
    let mut ens = Chains::new(
        model.clone(),
        &data.x_train,
        &data.y_train,
        chains,
        3,
        dynamics,
        None,
        Proposal::Hmc { leapfrog_steps: 6 },
        false,
    );
    let lambda = ens.lambda_max(30).into_iter().fold(0.0, f64::max);
    ens.ens.dynamics.step = 0.4 / lambda;
    ens.advance(burn_in);
    // Every chain shares the frozen filters' value only if it drew the same ones: the filters
    // are per chain, so A and m are per chain.
    let whitening: Vec<(Vec<f64>, Vec<f64>)> = ens
        .views()
        .iter()
        .map(|chain| {
            let phi = features_direct(
                &model as &dyn FeatureDefinition,
                &chain.theta,
                &data.x_train,
            );
            let mut a = vec![0.0; k * k];
            let mut m = vec![0.0; k];
            for (row, &y) in phi.iter().zip(&data.y_train) {
                for i in 0..k {
                    m[i] += row[i] * y;
                    for j in 0..k {
                        a[i * k + j] += row[i] * row[j];
                    }
                }
            }
            for i in 0..k {
                a[i * k + i] += kappa / v;
            }
            let mut l = vec![0.0; k * k];
            assert!(cholesky(&a, &mut l, k));
            cholesky_solve(&l, &mut m, k);
            (l, m)
        })
        .collect();
    let n = FlatModel::<f64>::n_params(&ens.ens.model);
    let mut first = vec![vec![0.0; chains]; k];
    let mut second = vec![vec![0.0; chains]; k * k];
    for _ in 0..draws {
        ens.advance(1);
        for (c, chain) in ens.views().iter().enumerate() {
            let (l, m) = &whitening[c];
            let a = &chain.theta[n - k..];
            let z: Vec<f64> = (0..k)
                .map(|i| {
                    (i..k).map(|j| l[j * k + i] * (a[j] - m[j])).sum::<f64>()
                        / (kappa * temperature).sqrt()
                })
                .collect();
            for i in 0..k {
                first[i][c] += z[i] / draws as f64;
                for j in 0..k {
                    second[i * k + j][c] += z[i] * z[j] / draws as f64;
                }
            }
        }
    }
    for i in 0..k {
        let (mean, err) = across_chains(&first[i]);
        assert!(
            err < 0.06 && mean.abs() < 4.5 * err,
            "z_{i}: {mean} ± {err}"
        );
        for j in 0..k {
            let (c, err) = across_chains(&second[i * k + j]);
            let want = if i == j { 1.0 } else { 0.0 };
            assert!(
                err < 0.06 && (c - want).abs() < 4.5 * err,
                "E z_{i} z_{j}: {c} ± {err}"
            );
        }
    }
    let rate = ens.acceptance_rate().unwrap();
    assert!(rate > 0.5 && rate < 1.0, "acceptance {rate}");
}

/// Same file and seed → identical summary, traces and per-chain rows on one and on two
/// threads (spec 02 "Reproducible") with HMC, f32, plain and collapsed, CNN and attention; the
/// acceptance rate is reported and sane at this small step.
#[test]
fn hmc_results_do_not_depend_on_the_thread_count() {
    for kind in [ModelKind::Cnn, ModelKind::Attention] {
        for method in ["plain", "collapsed"] {
            let extra = format!("mala = true\nhmc_steps = 4\nmethod = \"{method}\"");
            let text = flat_toml(kind, 20, &extra).replace("precision = \"f64\"", "");
            let cfg = config(&text);
            let run = |threads: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| Run::new(&cfg).run().unwrap())
            };
            let (a, b) = (run(1), run(2));
            assert_eq!(a.summary, b.summary);
            assert_eq!(a.traces, b.traces);
            assert_eq!(a.chains, b.chains);
            assert_eq!(a.histogram, b.histogram);
            assert_eq!(a.summary.precision, "f32");
            assert!(a.summary.diverged_chains.is_empty());
            let rate = a.summary.diagnostics.acceptance_rate.unwrap();
            assert!(
                rate > 0.5 && rate <= 1.0,
                "{kind:?} {method}: acceptance {rate}"
            );
        }
    }
}

/// `adapt_step` with HMC steers the acceptance towards 0.7 (`StepSteering::new(mala, hmc)`, as
/// for the FCN): from an absurd η = 1 the CNN and attention runs survive with an acceptance
/// between 0.45 and 0.9 and a step far below 1.
#[test]
fn adapt_step_with_hmc_steers_the_acceptance() {
    for kind in [ModelKind::Cnn, ModelKind::Attention] {
        let text = flat_toml(kind, 20, "mala = true\nhmc_steps = 5\nadapt_step = true")
            .replace("step = 1e-3", "step = 1.0")
            .replace("steps = 200", "steps = 600")
            .replace("burn_in = 100", "burn_in = 400");
        let r = Run::new(&config(&text)).run().unwrap().summary;
        assert!(r.diverged_chains.is_empty(), "{:?}", r.diverged_chains);
        let dg = &r.diagnostics;
        let rate = dg.acceptance_rate.unwrap();
        assert!((0.45..0.9).contains(&rate), "{kind:?}: acceptance {rate}");
        assert!(dg.step < 0.5, "{kind:?}: step {}", dg.step);
    }
}

/// HMC's stationary law is exact on a non-Gaussian target: on the two-parameter CNN
/// d = S = N = 1, f(x) = w² erf(w¹x), P = 4, the sampled E[(w¹)²] and E[(w²)²] equal the
/// quadrature of exp(−U/T) over the plane (Riemann sum on [−8, 8]², spacing 0.02) within 5 %
/// at T = 1 and T = 0.5, with L = 5 leapfrog steps at a step (η = 0.4) where unadjusted
/// Langevin is off by more than 15 % (driver/flat.rs, `mala_matches_quadrature_where_ula_is_biased`).
#[test]
fn hmc_matches_quadrature_on_the_two_parameter_cnn() {
    let text = |temperature: f64| {
        format!(
            "[model]\nkind = \"cnn\"\nactivation = \"erf\"\nwidths = [1]\npatch = 1\n[data]\nd = 1\np = 4\nn_test = 10\n[target]\nhermite = 3\n[sampler]\nkappa = 0.5\nstep = 0.4\nsteps = 8000\nburn_in = 500\nthin = 2\nchains = 32\nseed = 11\nprecision = \"f64\"\ntemperature = {temperature}\nmala = true\nhmc_steps = 5\n"
        )
    };
    for temperature in [1.0, 0.5] {
        let cfg = config(&text(temperature));
        let model = CnnModel::from_config(&cfg);
        let data = model.dataset(&cfg);
        let (v1, v2) = (model.groups[0].prior_var, model.groups[1].prior_var);
        let kappa = cfg.sampler.kappa;
        let energy = |w1: f64, w2: f64| -> f64 {
            let data_term: f64 = data
                .x_train
                .iter()
                .zip(&data.y_train)
                .map(|(x, y)| (w2 * libm::erf(w1 * x) - y).powi(2))
                .sum();
            data_term / (2.0 * kappa) + w1 * w1 / (2.0 * v1) + w2 * w2 / (2.0 * v2)
        };
        let h = 0.02;
        let grid: Vec<f64> = (0..=800).map(|i| -8.0 + h * i as f64).collect();
        let u_min = grid
            .iter()
            .flat_map(|&a| grid.iter().map(move |&b| energy(a, b)))
            .fold(f64::INFINITY, f64::min);
        let (mut z, mut m1, mut m2) = (0.0, 0.0, 0.0);
        for &w1 in &grid {
            for &w2 in &grid {
                let p = (-(energy(w1, w2) - u_min) / temperature).exp();
                z += p;
                m1 += p * w1 * w1;
                m2 += p * w2 * w2;
            }
        }
        let exact = [m1 / z, m2 / z];
        let r = Run::new(&cfg).run().unwrap().summary;
        assert!(r.diverged_chains.is_empty(), "{:?}", r.diverged_chains);
        let rate = r.diagnostics.acceptance_rate.unwrap();
        assert!(
            rate > 0.2 && rate < 0.99,
            "T = {temperature}: acceptance {rate}"
        );
        for (g, want) in exact.iter().enumerate() {
            let got = r.diagnostics.groups[g].second_moment.unwrap();
            assert!(
                (got / want - 1.0).abs() < 0.05,
                "T = {temperature}, group {g}: HMC {got} vs quadrature {want}"
            );
        }
    }
}
