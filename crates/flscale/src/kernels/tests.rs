//! Tests of the kernels against independent values: Gauss–Hermite expectations and Hermite
//! coefficients for the closed forms, Monte Carlo widths for the empirical kernels, the dense
//! eigendecomposition for the low-rank route, an explicit least-squares solve for â.

use super::*;
use crate::activation::NngpActivation;
use crate::hermite::{factorial, GaussHermite};
use crate::linalg::{max_eigen_residual, sym_eigen};
use faer::{Mat, Par};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// Tolerance of the quick run against the infinite-width prediction: finite N₁ = 400 and
/// N₂ = 200 perturb ⟨f, K₃, f⟩ by O(1/√N) relative.
const QUICK_RATIO_TOL: f64 = 0.25;

const ACTS: [NngpActivation; 3] = [
    NngpActivation::Erf,
    NngpActivation::Relu,
    NngpActivation::Poly,
];

fn random_points(p: usize, d: usize, seed: u64) -> Points {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x = (0..p * d)
        .map(|_| rng.sample::<f64, _>(StandardNormal))
        .collect();
    Points::new(p, d, x).unwrap()
}

/// E[ReLU(u)ReLU(v)] by adaptive quadrature over z₁ ≥ 0 (u = √s₁₁z₁) of the inner Gaussian
/// expectation in closed form, E[ReLU(m + σz)] = mΦ(m/σ) + σφ(m/σ): the kink is at the
/// boundary of the domain, so no polynomial rule straddles it.
fn relu_pair_expectation(s11: f64, s22: f64, rho: f64) -> f64 {
    let inv_sqrt_2pi = 1.0 / (2.0 * std::f64::consts::PI).sqrt();
    let sig = (s22 * (1.0 - rho * rho)).sqrt();
    let q = crate::ldt::quad::integrate(
        |z1| {
            let m = s22.sqrt() * rho * z1;
            let r = m / sig;
            let inner = m * 0.5 * libm::erfc(-r / std::f64::consts::SQRT_2)
                + sig * inv_sqrt_2pi * (-0.5 * r * r).exp();
            [s11.sqrt() * z1 * inner * inv_sqrt_2pi * (-0.5 * z1 * z1).exp()]
        },
        &[0.0, 1.0, 40.0],
        1e-13,
        0.0,
        2000,
    )
    .unwrap();
    q.value[0]
}

/// Hermite coefficients of z ↦ ReLU(√s z) by adaptive quadrature on [0, 40].
fn relu_hermite_coefficients(s: f64, kmax: usize) -> Vec<f64> {
    (0..=kmax)
        .map(|k| {
            let q = crate::ldt::quad::integrate(
                |z| {
                    [
                        s.sqrt() * z * crate::hermite::he(k, z) * (-0.5 * z * z).exp()
                            / (2.0 * std::f64::consts::PI).sqrt(),
                    ]
                },
                &[0.0, 2.0, 6.0, 40.0],
                1e-13,
                1e-16,
                4000,
            )
            .unwrap();
            q.value[0] / factorial(k)
        })
        .collect()
}

#[test]
fn closed_forms_match_gauss_hermite_expectations() {
    let gh = GaussHermite::new(150).unwrap();
    for act in ACTS {
        for &(s11, s22, rho) in &[(1.0, 1.0, 0.3), (0.5, 2.0, -0.6), (1.3, 0.7, 0.95)] {
            let s12 = rho * f64::sqrt(s11 * s22);
            let quad = if act == NngpActivation::Relu {
                relu_pair_expectation(s11, s22, rho)
            } else {
                gh.expect_pair(
                    rho,
                    |u| act.value_f64(s11.sqrt() * u),
                    |v| act.value_f64(s22.sqrt() * v),
                )
            };
            let closed = act.kernel_from_cov(s11, s22, s12);
            let tol = 1e-9;
            assert!(
                (quad - closed).abs() < tol * closed.abs().max(1.0),
                "{act:?} {s11} {s22} {rho}: {quad} vs {closed}"
            );
        }
    }
}

#[test]
fn dot_product_expansions_match_hermite_coefficients_and_sum_to_the_kernel() {
    let gh = GaussHermite::new(150).unwrap();
    for act in ACTS {
        for s in [0.5, 1.0, 1.7] {
            let kmax = 8;
            let b = act.dot_product_coefficients(s, kmax);
            let a = if act == NngpActivation::Relu {
                relu_hermite_coefficients(s, kmax)
            } else {
                gh.hermite_coefficients(|z| act.value_f64(s.sqrt() * z), kmax)
            };
            for k in 0..=kmax {
                let want = factorial(k) * a[k] * a[k] / s.powi(k as i32);
                let tol = 1e-9;
                assert!(
                    (b[k] - want).abs() < tol * want.abs().max(1e-3),
                    "{act:?} s={s} k={k}: {} vs {want}",
                    b[k]
                );
            }
            // Σ b_k c^k converges to the closed form inside |c| < s.
            let b = act.dot_product_coefficients(s, 120);
            let c = 0.4 * s;
            let series: f64 = b
                .iter()
                .enumerate()
                .map(|(k, bk)| bk * c.powi(k as i32))
                .sum();
            let closed = act.kernel_from_cov(s, s, c);
            assert!(
                (series - closed).abs() < 1e-10,
                "{act:?} {series} vs {closed}"
            );
        }
    }
}

#[test]
fn empirical_kernels_converge_at_the_monte_carlo_rate() {
    // Each entry is a mean of `width` i.i.d. products σ(u)σ(v); its standard deviation is at
    // most √(E σ(u)²σ(v)²)/√width ≤ (E σ⁴(u) E σ⁴(v))^{1/4}/√width, bounded here by the
    // closed-form fourth moments: erf ≤ 1; ReLU E[ReLU(u)⁴] = 3s²/2; poly by Gauss–Hermite.
    let pts = random_points(10, 6, 3);
    let gh = GaussHermite::new(60).unwrap();
    for act in ACTS {
        let k = nngp_kernel(act, &pts, 1.0).unwrap();
        let fourth = |s: f64| match act {
            NngpActivation::Erf => 1.0,
            NngpActivation::Relu => 1.5 * s * s,
            NngpActivation::Poly => gh.expect(|z| act.value_f64(s.sqrt() * z).powi(4)),
        };
        let diag_s: Vec<f64> = (0..pts.p)
            .map(|i| {
                (0..pts.d)
                    .map(|j| pts.x[i * pts.d + j].powi(2))
                    .sum::<f64>()
                    / pts.d as f64
            })
            .collect();
        let mut errs = Vec::new();
        for width in [500usize, 8000] {
            let e = empirical_kernel(act, &pts, 1.0, width, 11).unwrap();
            let mut worst = 0.0f64;
            for i in 0..pts.p {
                for j in 0..pts.p {
                    let sd =
                        (fourth(diag_s[i]) * fourth(diag_s[j])).powf(0.25) / (width as f64).sqrt();
                    let z = (e[i * pts.p + j] - k[i * pts.p + j]).abs() / sd;
                    worst = worst.max(z);
                }
            }
            // 100 entries, 5 standard deviations: a false alarm has probability < 1e-4.
            assert!(worst < 5.0, "{act:?} width {width}: {worst} sd");
            let max_abs = e
                .iter()
                .zip(&k)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            errs.push(max_abs);
        }
        // 16× the width: the error shrinks (≈ 4× expected).
        assert!(errs[1] < errs[0], "{act:?}: {errs:?}");
    }
}

fn erf_kernel_mat(p: usize) -> Mat<f64> {
    let pts = random_points(p, 40, 5);
    let k = nngp_kernel(NngpActivation::Erf, &pts, 1.0).unwrap();
    Mat::from_fn(p, p, |i, j| k[i * p + j])
}

#[test]
fn eigendecomposition_has_small_residuals_and_orthonormal_vectors() {
    let n = 300;
    let a = erf_kernel_mat(n);
    let eig = sym_eigen(a.as_ref(), default_par()).unwrap();
    let res = max_eigen_residual(a.as_ref(), &eig, default_par());
    assert!(res < 1e-13 * n as f64, "residual {res}");
    assert!(eig.values.windows(2).all(|w| w[0] <= w[1]));
    // VᵀV = I.
    let mut worst = 0.0f64;
    for i in 0..20 {
        for j in 0..20 {
            let dot: f64 = (0..n)
                .map(|r| eig.vectors[(r, i * 7)] * eig.vectors[(r, j * 7)])
                .sum();
            let want = if i == j { 1.0 } else { 0.0 };
            worst = worst.max((dot - want).abs());
        }
    }
    assert!(worst < 1e-12, "{worst}");
    // Trace is preserved.
    let tr: f64 = (0..n).map(|i| a[(i, i)]).sum();
    let sum: f64 = eig.values.iter().sum();
    assert!((tr - sum).abs() < 1e-10 * tr);
}

#[test]
fn low_rank_route_matches_dense_route() {
    let (p, n) = (240, 60);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let phi = Mat::from_fn(p, n, |_, _| rng.sample::<f64, _>(StandardNormal).max(0.0));
    let f: Vec<f64> = (0..p).map(|i| ((i as f64) * 0.37).sin()).collect();
    let gram = FeatureKernel::new(phi.clone(), SpectralMethod::Gram, Par::Seq).unwrap();
    let dense = FeatureKernel::new(phi, SpectralMethod::Dense, Par::Seq).unwrap();
    assert_eq!(gram.kept_eigenvalues().len(), n);
    // The dense route must drop exactly the P − N zero eigenvalues.
    assert_eq!(dense.kept_eigenvalues().len(), n);
    for (a, b) in gram.kept_eigenvalues().iter().zip(dense.kept_eigenvalues()) {
        assert!((a - b).abs() < 1e-10 * a, "{a} {b}");
    }
    let (r_g, r_d) = (gram.pinv_quadratic_form(&f), dense.pinv_quadratic_form(&f));
    assert!((r_g / r_d - 1.0).abs() < 1e-8, "{r_g} {r_d}");
    let (q_g, q_d) = (gram.quadratic_form(&f), dense.quadratic_form(&f));
    assert!((q_g / q_d - 1.0).abs() < 1e-12);
    for rank in [1, 7, 30] {
        let (u_g, l_g) = gram.eigenvector(rank).unwrap();
        let (u_d, l_d) = dense.eigenvector(rank).unwrap();
        assert!((l_g / l_d - 1.0).abs() < 1e-10);
        let dot: f64 = u_g.iter().zip(&u_d).map(|(a, b)| a * b).sum();
        assert!((dot.abs() - 1.0).abs() < 1e-8, "rank {rank}: {dot}");
    }
    assert!(gram.eigenvector(n + 1).is_err());
}

#[test]
fn readout_direction_is_the_least_squares_solution() {
    // â ∝ φ₁ᵀu* (module docs of `propagate`) against an explicit QR least-squares solve.
    let cfg = PropagateConfig {
        d: 10,
        n1: 40,
        n2: 20,
        p: 120,
        feature_rank: 5,
        ..PropagateConfig::quick()
    };
    let x = propagate::sample_data(&cfg);
    let phi = propagate::first_layer(&cfg, &x, Par::Seq).unwrap();
    let k2 = FeatureKernel::new(phi.clone(), SpectralMethod::Auto, Par::Seq).unwrap();
    let (u, _) = k2.eigenvector(cfg.feature_rank).unwrap();
    let a_fast = k2.project(&u);
    let rhs = Mat::from_fn(cfg.p, 1, |i, _| u[i]);
    use faer::linalg::solvers::SolveLstsq;
    let a_ls = phi.qr().solve_lstsq(&rhs);
    let norm = |v: &mut dyn Iterator<Item = f64>| -> Vec<f64> {
        let v: Vec<f64> = v.collect();
        let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        v.iter().map(|x| x / n).collect()
    };
    let a1 = norm(&mut a_fast.iter().copied());
    let a2 = norm(&mut (0..cfg.n1).map(|i| a_ls[(i, 0)]));
    let dot: f64 = a1.iter().zip(&a2).map(|(a, b)| a * b).sum();
    assert!((dot.abs() - 1.0).abs() < 1e-9, "{dot}");
}

#[test]
fn quick_propagation_gives_a_clearly_negative_slope_independent_of_threads() {
    let cfg = PropagateConfig::quick();
    let seq = propagate_with(&cfg, Par::Seq, |_, _| {}).unwrap();
    assert!(seq.slope_rkhs < -0.5, "RKHS slope {}", seq.slope_rkhs);
    assert!(
        seq.slope_inverse_expectation < -0.9,
        "inverse-expectation slope {}",
        seq.slope_inverse_expectation
    );
    // Amplifying Φ* never makes Φ*² harder to express at large D than at D = 1.
    let first = seq.points[0];
    let last = *seq.points.last().unwrap();
    assert!(
        last.rkhs_norm < first.rkhs_norm && last.inverse_expectation < first.inverse_expectation
    );
    assert!((seq.phi_star_eigenvalue - 0.25 / cfg.d as f64).abs() < 0.5 * 0.25 / cfg.d as f64);
    let par = propagate_with(&cfg, Par::rayon(2), |_, _| {}).unwrap();
    assert_eq!(seq.points, par.points, "results depend on the thread count");
    // The figure draws.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.png");
    crate::plot::write_figure(&path, 640, 480, &propagate_chart(&seq)).unwrap();
    assert_eq!(&std::fs::read(&path).unwrap()[..4], b"\x89PNG");
}

#[test]
fn low_rank_and_dense_propagation_agree() {
    let cfg = PropagateConfig {
        d: 16,
        n1: 80,
        n2: 50,
        p: 200,
        feature_rank: 8,
        amplifications: vec![1.0, 8.0, 64.0],
        fit_window: (1.0, 64.0),
        ..PropagateConfig::quick()
    };
    let gram = propagate(&PropagateConfig {
        method: SpectralMethod::Gram,
        ..cfg.clone()
    })
    .unwrap();
    let dense = propagate(&PropagateConfig {
        method: SpectralMethod::Dense,
        ..cfg
    })
    .unwrap();
    for (g, d) in gram.points.iter().zip(&dense.points) {
        assert!(
            (g.rkhs_norm / d.rkhs_norm - 1.0).abs() < 1e-6,
            "{g:?} {d:?}"
        );
        assert!((g.inverse_expectation / d.inverse_expectation - 1.0).abs() < 1e-9);
    }
}

/// The paper's procedure at infinite width: an independent numpy implementation
/// (`bench/kernel_population_numpy.py`: Gauss–Jacobi in the perpendicular cosine, Wilson–Hilferty
/// Gauss–Hermite in |x_⊥|²) gives at d = 120 the slope −1.6591 over D ∈ [8, 64], the steepest
/// octave −1.727 (8 → 16) and −1.5825 at P = 6000; the D^{−2} of Claim (ii) is reached only as
/// d → ∞.
#[test]
fn infinite_width_slope_is_minus_two_only_asymptotically_in_d() {
    let amps = default_amplifications();
    let at120 =
        population_propagation(NngpActivation::Relu, 120, &amps, Some(6000), (8.0, 64.0)).unwrap();
    // Closed form of the linear eigenvalue: ReLU's first dot-product coefficient is 1/4.
    assert!((at120.phi_star_eigenvalue * 4.0 * 120.0 - 1.0).abs() < 1e-3);
    assert!((at120.slope + 1.6591).abs() < 0.003, "{}", at120.slope);
    assert!((at120.steepest_local_slope + 1.727).abs() < 0.01);
    // The sampling floor at P = 6000 flattens it further.
    let finite = at120.slope_finite_p.unwrap();
    assert!((finite + 1.5825).abs() < 0.003, "{finite}");
    let big =
        population_propagation(NngpActivation::Relu, 100_000, &amps, None, (32.0, 512.0)).unwrap();
    assert!((big.slope + 2.0).abs() < 0.02, "{}", big.slope);
    for q in big
        .points
        .iter()
        .filter(|q| (64.0..=512.0).contains(&q.amplification))
    {
        assert!((q.local_slope.unwrap() + 2.0).abs() < 0.03, "{q:?}");
    }
    // Deterministic for any thread count.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let seq = one.install(|| {
        population_propagation(NngpActivation::Relu, 120, &amps, Some(6000), (8.0, 64.0)).unwrap()
    });
    assert_eq!(seq, at120);
}

/// The finite-width run agrees with the infinite-width prediction at its own P: the Rust
/// procedure is the paper's, and what keeps it from −2 is d (and P), not an implementation slip.
#[test]
fn quick_run_matches_the_infinite_width_prediction_at_its_p() {
    let cfg = PropagateConfig::quick();
    let run = propagate_with(&cfg, Par::Seq, |_, _| {}).unwrap();
    let pop = population_propagation(
        cfg.activation,
        cfg.d,
        &cfg.amplifications,
        Some(cfg.p),
        cfg.fit_window,
    )
    .unwrap();
    for (e, q) in run.points.iter().zip(&pop.points) {
        let ratio = e.inverse_expectation / q.inverse_expectation_finite_p.unwrap();
        assert!(
            (ratio - 1.0).abs() < QUICK_RATIO_TOL,
            "D = {}: ratio {ratio}",
            e.amplification
        );
    }
    assert!((run.slope_inverse_expectation - pop.slope_finite_p.unwrap()).abs() < 0.15);
}

mod validation {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn bad_configs_are_rejected_without_panicking(
            d in 0usize..300_000, n1 in 0usize..100_000, n2 in 0usize..100_000,
            p in 0usize..100_000, rank in 0usize..5000,
            amps in proptest::collection::vec(prop_oneof![Just(f64::NAN), Just(0.5), -5.0..1e9f64], 0..6),
            lo in -10.0..100.0f64, hi in -10.0..1e4f64,
        ) {
            let cfg = PropagateConfig { d, n1, n2, p, feature_rank: rank,
                amplifications: amps, fit_window: (lo, hi), ..PropagateConfig::quick() };
            if let Err(e) = cfg.validate() {
                prop_assert_eq!(e.exit_code(), 2);
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn population_inputs_are_checked_without_panicking(
            d in 0usize..20_000_000, p in proptest::option::of(0usize..10),
            amps in proptest::collection::vec(prop_oneof![Just(f64::NAN), Just(0.5), -5.0..1e9f64], 0..4),
            lo in -10.0..100.0f64, hi in -10.0..1e4f64, act in 0usize..3,
        ) {
            let act = ACTS[act];
            // Only inputs that fail validation: a valid one would run the full quadrature.
            let bad = act == NngpActivation::Erf || !(8..=10_000_000).contains(&d)
                || p.is_some_and(|p| p < 2) || amps.len() < 2 || amps.iter().any(|a| !(1.0..=1e8).contains(a));
            if bad {
                let e = population_propagation(act, d, &amps, p, (lo, hi)).unwrap_err();
                prop_assert_eq!(e.exit_code(), 2);
            }
        }
    }

    #[test]
    fn parsers_reject_unknown_names() {
        assert!("tanh".parse::<NngpActivation>().is_err());
        assert!("uniform".parse::<DataKind>().is_err());
        assert!("svd".parse::<SpectralMethod>().is_err());
        assert_eq!(
            "relu".parse::<NngpActivation>().unwrap(),
            NngpActivation::Relu
        );
    }
}

#[test]
fn kernel_bytes_match_the_propagate_formula() {
    // Fig. 5 sizes: d = 120, N1 = 2000, N2 = 1000, P = 6000.
    let doubles = 6000 * (2000 + 2000 + 120) + 2000 * 1000 + 4 * (2000 * 2000 + 1000 * 1000);
    assert_eq!(
        propagate::propagate_bytes(120, 2000, 1000, 6000),
        doubles as f64 * 8.0
    );
}
