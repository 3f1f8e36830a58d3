//! HMC on the collapsed FCN posterior against exact answers: the leapfrog map is reversible and
//! volume-preserving, its energy error is second order in the step, and at P = 0 the sampler
//! draws the prior (Neal, "MCMC using Hamiltonian dynamics", 2011, sec. 5.2.3.3, 5.3.2).

use crate::activation::Activation;
use crate::sim::config::SamplerMethod;
use crate::sim::ensemble::fcn::{Dynamics, Ensemble};
use crate::sim::kernel::mala::Kernel;
use crate::sim::langevin::Proposal;
use crate::sim::model::fcn::FcnModel;
use crate::sim::tests::collapsed::mean_err;

/// A two-layer erf network (d inputs, N hidden) in f64 on the data of [`super::collapsed`]'s `blog_like`'s
/// target-free kind: inputs on a deterministic grid, y = erf of a fixed direction; and an
/// ensemble of it on the collapsed posterior with `chains` chains in one block.
fn small_collapsed_ensemble(d: usize, n: usize, p: usize, chains: usize) -> Ensemble<f64> {
    let model = FcnModel {
        d,
        widths: vec![n],
        activation: Activation::Erf,
        prior_var: vec![1.0 / d as f64, 1.0 / n as f64],
        frozen: vec![false, false],
        layernorm: false,
    };
    let x: Vec<f64> = (0..p * d)
        .map(|i| ((i * 7919 % 113) as f64 / 113.0 - 0.5) * 3.0)
        .collect();
    let y: Vec<f64> = (0..p)
        .map(|mu| libm::erf(x[mu * d] - 0.5 * x[mu * d + 1]))
        .collect();
    let dynamics = Dynamics {
        kappa: 0.1,
        step: 1e-3,
        temperature: 0.8,
    };
    Ensemble::<f64>::new(model, &x, &y, chains, 11, dynamics, Some(chains))
}

/// Standard normal momenta u (per group, the block's layout; zero on the collapsed readout).
fn random_momentum(ens: &Ensemble<f64>, seed: u64) -> Vec<Vec<f64>> {
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let readout = ens.model.widths.len();
    ens.blocks[0]
        .params
        .iter()
        .enumerate()
        .map(|(g, p)| {
            p.iter()
                .map(|_| {
                    if g == readout {
                        0.0
                    } else {
                        StandardNormal.sample(&mut rng)
                    }
                })
                .collect()
        })
        .collect()
}

/// The leapfrog map of HMC (mala.rs) on the collapsed posterior with the block preconditioner
/// as inverse mass matrix is reversible — L steps forward, momentum negated, L steps back
/// return to the start to 1e-10 — and volume-preserving: the Jacobian of (θ, u) ↦ (θ′, u′) of
/// one chain (d = 2, N = 2: 4 hidden weights and 4 momenta), by central differences, has
/// determinant 1 to 1e-6. A full instead of a half kick at the end of the trajectory (or a
/// kick from a stale gradient) breaks reversibility; a state-dependent metric would break
/// both.
#[test]
fn hmc_leapfrog_is_reversible_and_volume_preserving() {
    let mut ens = small_collapsed_ensemble(3, 4, 12, 4);
    let mut kernel = Kernel::new(&ens, SamplerMethod::Collapsed, Proposal::MetropolisLangevin);
    ens.dynamics.step = 1e-3;
    kernel.advance(&mut ens, 50);
    kernel.adapt_preconditioner(&mut ens, false);
    let start = ens.blocks[0].params.clone();
    let mut momentum = random_momentum(&ens, 5);
    let (eps, steps) = (0.05, 25);
    kernel.leapfrog_first_block(&mut ens, &mut momentum, eps, steps);
    let moved: f64 = (ens.blocks[0].params[0].iter().zip(&start[0]))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(moved > 0.05, "the trajectory barely moved ({moved})");
    for u in momentum.iter_mut().flatten() {
        *u = -*u;
    }
    kernel.leapfrog_first_block(&mut ens, &mut momentum, eps, steps);
    for (g, (now, then)) in ens.blocks[0].params.iter().zip(&start).enumerate() {
        if g == ens.model.widths.len() {
            continue;
        }
        for (a, b) in now.iter().zip(then) {
            assert!((a - b).abs() < 1e-10, "group {g}: {a} vs start {b}");
        }
    }

    // Volume: chain 0 of a d = 2, N = 2 network.
    let mut ens = small_collapsed_ensemble(2, 2, 10, 2);
    let mut kernel = Kernel::new(&ens, SamplerMethod::Collapsed, Proposal::MetropolisLangevin);
    kernel.advance(&mut ens, 50);
    kernel.adapt_preconditioner(&mut ens, false);
    let theta0 = ens.blocks[0].params.clone();
    let u0 = random_momentum(&ens, 6);
    let dim = 4;
    let mut flow = |dtheta: &[f64], du: &[f64]| -> Vec<f64> {
        let mut params = theta0.clone();
        let mut u = u0.clone();
        for i in 0..dim {
            params[0][i] += dtheta[i];
            u[0][i] += du[i];
        }
        ens.blocks[0].params = params;
        kernel.leapfrog_first_block(&mut ens, &mut u, 0.1, 10);
        let mut out = ens.blocks[0].params[0][..dim].to_vec();
        out.extend_from_slice(&u[0][..dim]);
        out
    };
    let h = 1e-5;
    let mut jacobian = vec![vec![0.0; 2 * dim]; 2 * dim];
    for j in 0..2 * dim {
        let mut plus = (vec![0.0; dim], vec![0.0; dim]);
        let mut minus = plus.clone();
        if j < dim {
            plus.0[j] = h;
            minus.0[j] = -h;
        } else {
            plus.1[j - dim] = h;
            minus.1[j - dim] = -h;
        }
        let (a, b) = (flow(&plus.0, &plus.1), flow(&minus.0, &minus.1));
        for i in 0..2 * dim {
            jacobian[i][j] = (a[i] - b[i]) / (2.0 * h);
        }
    }
    let det = determinant(jacobian.clone());
    assert!(
        (det - 1.0).abs() < 1e-6,
        "det of the leapfrog Jacobian {det}"
    );
    // The map is not trivially the identity (which would also have det 1).
    assert!((jacobian[0][0] - 1.0).abs() > 1e-3 || jacobian[0][1].abs() > 1e-3);
}

/// Determinant by Gaussian elimination with partial pivoting.
fn determinant(mut a: Vec<Vec<f64>>) -> f64 {
    let n = a.len();
    let mut det = 1.0;
    for k in 0..n {
        let pivot = (k..n)
            .max_by(|&i, &j| a[i][k].abs().total_cmp(&a[j][k].abs()))
            .unwrap();
        if pivot != k {
            a.swap(pivot, k);
            det = -det;
        }
        det *= a[k][k];
        for i in k + 1..n {
            let f = a[i][k] / a[k][k];
            for j in k..n {
                a[i][j] -= f * a[k][j];
            }
        }
    }
    det
}

/// At P = 0 the collapsed energy is the hidden weights' Gaussian prior, U = |W|²/(2v) (each
/// weight an oscillator of frequency ω = 1/√v). The leapfrog energy error over a fixed
/// trajectory time εL is O(ε²) (Neal 2011, sec. 5.2.3.4): halving ε (doubling L) divides
/// the mean |ΔH| over 16 chains by 4 within ±20 %.
#[test]
fn hmc_energy_error_is_second_order_in_the_step() {
    let mut ens = small_collapsed_ensemble(4, 3, 0, 16);
    let v = ens.model.prior_var[0];
    let mut kernel = Kernel::new(&ens, SamplerMethod::Collapsed, Proposal::MetropolisLangevin);
    let theta0 = ens.blocks[0].params.clone();
    let u0 = random_momentum(&ens, 8);
    let h0: Vec<f64> = (0..16)
        .map(|c| {
            let n = ens.model.group_len(0);
            let w = &theta0[0][c * n..(c + 1) * n];
            let u = &u0[0][c * n..(c + 1) * n];
            w.iter().map(|x| x * x).sum::<f64>() / (2.0 * v)
                + 0.5 * u.iter().map(|x| x * x).sum::<f64>()
        })
        .collect();
    let mut errors = Vec::new();
    for (eps_over_sqrt_v, steps) in [(0.2, 10), (0.1, 20), (0.05, 40)] {
        ens.blocks[0].params = theta0.clone();
        let mut u = u0.clone();
        let energy =
            kernel.leapfrog_first_block(&mut ens, &mut u, eps_over_sqrt_v * v.sqrt(), steps);
        let n = ens.model.group_len(0);
        let mean: f64 = (0..16)
            .map(|c| {
                let kinetic = 0.5 * u[0][c * n..(c + 1) * n].iter().map(|x| x * x).sum::<f64>();
                (energy[c] + kinetic - h0[c]).abs()
            })
            .sum::<f64>()
            / 16.0;
        errors.push(mean);
    }
    for pair in errors.windows(2) {
        let ratio = pair[0] / pair[1];
        assert!(
            (ratio - 4.0).abs() < 0.8,
            "|ΔH| {errors:?}: ratio {ratio}, expected 4 for a second-order integrator"
        );
    }
    assert!(
        errors[0] > 1e-4,
        "energy errors too small to measure: {errors:?}"
    );
}

/// At P = 0 the collapsed posterior of the hidden weights is the prior at temperature T:
/// HMC (4 leapfrog steps per proposal at ε·ω = 1.2, so not a tiny step) reproduces
/// E[w²] = vT and E[w⁴] = 3(vT)² within 4 standard errors of the chains' means, and the
/// drawn readouts E[a²] = v_a·T. A kinetic energy or momentum draw without the temperature
/// (u ~ 𝒩(0, I)) would give E[w²] = v.
#[test]
fn collapsed_hmc_samples_the_prior_at_p_0() {
    let chains = 16;
    let mut ens = small_collapsed_ensemble(4, 3, 0, chains);
    ens.dynamics.temperature = 0.5;
    let (v, v_a, t) = (ens.model.prior_var[0], ens.model.prior_var[1], 0.5);
    ens.dynamics.step = 0.5 * (1.2 * v.sqrt()).powi(2);
    let mut kernel = Kernel::new(
        &ens,
        SamplerMethod::Collapsed,
        Proposal::Hmc { leapfrog_steps: 4 },
    );
    kernel.advance(&mut ens, 50);
    let samples = 400;
    let mut per_chain = vec![[0.0; 3]; chains];
    for _ in 0..samples {
        kernel.advance(&mut ens, 1);
        kernel.prepare_measurement(&mut ens);
        for (k, acc) in per_chain.iter_mut().enumerate() {
            let w = ens.chain_group(k, 0);
            let a = ens.chain_group(k, 1);
            let norm = (samples * w.len()) as f64;
            acc[0] += w.iter().map(|x| x * x).sum::<f64>() / norm;
            acc[1] += w.iter().map(|x| x.powi(4)).sum::<f64>() / norm;
            acc[2] += a.iter().map(|x| x * x).sum::<f64>() / (samples * a.len()) as f64;
        }
    }
    let acceptance = kernel.acceptance_rate(&ens).unwrap();
    assert!(
        acceptance > 0.5 && acceptance < 1.0,
        "acceptance {acceptance}"
    );
    for (q, (name, exact)) in [
        ("E[w²]", v * t),
        ("E[w⁴]", 3.0 * (v * t).powi(2)),
        ("E[a²]", v_a * t),
    ]
    .into_iter()
    .enumerate()
    {
        let series: Vec<f64> = per_chain.iter().map(|m| m[q]).collect();
        let (m, e) = mean_err(&series);
        assert!(
            (m - exact).abs() < 4.0 * e && e < 0.05 * exact,
            "{name} = {m} ± {e}, exact {exact}"
        );
    }
}
