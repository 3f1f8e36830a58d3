//! Tests of the large-deviation computation against independent values: Gauss–Hermite and
//! Simpson quadratures of the same integrals, a brute-force Monte Carlo of E[e^{tA_f}] over
//! the network prior, the closed-form large-d constants and the spec's reference numbers.

use super::*;
use crate::hermite::GaussHermite;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

fn model(d: f64, n: f64, perp: Perp) -> LdtModel {
    LdtModel {
        d,
        n,
        sigma1_sq: 1.0,
        sigma2_sq: 1.0,
        perp,
    }
}

#[test]
fn closed_form_overlap_matches_two_dimensional_quadrature() {
    // h(w) = E[Ĥe₃(z*) erf(β z* + |w_⊥| z_⊥)] by a tensor Gauss–Hermite rule, independent of
    // the Stein-lemma closed form.
    let gh = GaussHermite::new(120).unwrap();
    for &(beta, r) in &[(0.3, 0.9), (1.2, 0.5), (-0.7, 2.0), (2.5, 0.1)] {
        let perp = f64::sqrt(r);
        let mut total = 0.0;
        for (&z1, &w1) in gh.nodes().iter().zip(gh.weights()) {
            let he3 = (z1 * z1 * z1 - 3.0 * z1) / 6f64.sqrt();
            let inner: f64 = gh
                .nodes()
                .iter()
                .zip(gh.weights())
                .map(|(&z2, &w2)| w2 * libm::erf(beta * z1 + perp * z2))
                .sum();
            total += w1 * he3 * inner;
        }
        let closed = h_overlap(beta, beta * beta + r);
        assert!(
            (total - closed).abs() < 1e-8,
            "{beta} {r}: {total} vs {closed}"
        );
        assert!((closed * closed - h_squared(beta, beta * beta + r)).abs() < 1e-15);
    }
}

#[test]
fn z_is_one_at_zero_tilt() {
    for perp in [Perp::Prior, Perp::Exact] {
        for d in [2.0, 7.0, 40.0, 500.0] {
            let v = model(d, d, perp).mgf(0.0).unwrap();
            assert!(v.log_z.abs() < 1e-11, "{perp:?} d={d}: {}", v.log_z);
        }
    }
}

#[test]
fn one_dimensional_integral_matches_gauss_hermite() {
    // Z(t) = E_z exp(k h(σ₁z/√d)²) with a 150-point Gauss–Hermite rule: a different rule on
    // the same integral; moderate tilts keep the integrand polynomial-like in z.
    let gh = GaussHermite::new(150).unwrap();
    for &(d, n, t) in &[(10.0, 10.0, 20.0), (5.0, 3.0, 8.0), (40.0, 40.0, 150.0)] {
        let m = model(d, n, Perp::Prior);
        let k = m.tilt(t);
        let z_gh = gh.expect(|z| {
            let b = z / f64::sqrt(d);
            (k * h_squared(b, 1.0 + b * b)).exp()
        });
        let ours = m.mgf(t).unwrap().log_z;
        assert!(
            (ours - z_gh.ln()).abs() < 1e-10 * z_gh.ln().abs().max(1.0),
            "d={d} t={t}: {ours} vs {}",
            z_gh.ln()
        );
    }
}

#[test]
fn two_dimensional_integral_matches_gauss_hermite_times_simpson() {
    // Exact treatment: β by Gauss–Hermite, ln ρ by composite Simpson (ρ ∼ Gamma(a, 1/a)).
    let gh = GaussHermite::new(100).unwrap();
    let (d, n, t) = (5.0f64, 4.0, 10.0);
    let m = model(d, n, Perp::Exact);
    let k = m.tilt(t);
    let a = 0.5 * (d - 1.0);
    let mean_r = (d - 1.0) / d;
    let (u0, u1, steps) = (-14.0f64, 3.0f64, 8000usize);
    let hstep = (u1 - u0) / steps as f64;
    let inner = |beta: f64| -> f64 {
        let mut s = 0.0;
        for i in 0..=steps {
            let u = u0 + hstep * i as f64;
            let rho = u.exp();
            let dens = (a * u - a * rho + a * a.ln() - libm::lgamma(a)).exp();
            let f = dens * (k * h_squared(beta, beta * beta + mean_r * rho)).exp();
            let wgt = if i == 0 || i == steps {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            };
            s += wgt * f;
        }
        s * hstep / 3.0
    };
    let z = gh.expect(|z| inner(z / d.sqrt()));
    let ours = m.mgf(t).unwrap().log_z;
    assert!((ours - z.ln()).abs() < 1e-8, "{ours} vs {}", z.ln());
}

/// Monte Carlo of log E[e^{tA_f}] over the full prior (a ∈ ℝᴺ, W ∈ ℝ^{N×d}) with its standard
/// error; `paper_q` replaces |w|² by σ₁² + β² (the paper's model) instead of the exact norm.
fn mc_log_mgf(d: usize, n: usize, ts: &[f64], samples: usize, paper_q: bool) -> Vec<(f64, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(20251204);
    let mut sums = vec![0.0f64; ts.len()];
    let mut sq = vec![0.0f64; ts.len()];
    for _ in 0..samples {
        let mut a_f = 0.0;
        for _ in 0..n {
            let a: f64 = rng.sample::<f64, _>(StandardNormal) / (n as f64).sqrt();
            let mut norm2 = 0.0;
            let mut beta = 0.0;
            for j in 0..d {
                let w: f64 = rng.sample::<f64, _>(StandardNormal) / (d as f64).sqrt();
                if j == 0 {
                    beta = w;
                }
                norm2 += w * w;
            }
            let q = if paper_q { 1.0 + beta * beta } else { norm2 };
            a_f += a * h_overlap(beta, q);
        }
        for (i, &t) in ts.iter().enumerate() {
            let e = (t * a_f).exp();
            sums[i] += e;
            sq[i] += e * e;
        }
    }
    let m = samples as f64;
    sums.iter()
        .zip(&sq)
        .map(|(&s, &s2)| {
            let mean = s / m;
            let var = (s2 / m - mean * mean).max(0.0);
            (mean.ln(), (var / m).sqrt() / mean)
        })
        .collect()
}

#[test]
fn mgf_and_rate_agree_with_brute_force_monte_carlo() {
    let (d, n) = (3usize, 2usize);
    let ts = [2.0, 5.0, 8.0];
    for (perp, paper_q) in [(Perp::Prior, true), (Perp::Exact, false)] {
        let m = model(d as f64, n as f64, perp);
        let mc = mc_log_mgf(d, n, &ts, 400_000, paper_q);
        for (&t, &(log_mc, se)) in ts.iter().zip(&mc) {
            let ours = m.log_mgf(t).unwrap();
            assert!(
                (ours - log_mc).abs() < 4.0 * se + 1e-12,
                "{perp:?} t={t}: integral {ours} vs MC {log_mc} ± {se}"
            );
            assert!(se < 0.02, "MC error too large to be a test: {se}");
        }
        // E(α) with t* ≈ 5: the MC rate is tα − log m̂(t) at the integral's t*, whose error
        // is the MC error of log m̂ at t* (envelope theorem).
        let alpha = 5.0 * m.mgf(5.0).unwrap().mean_h2; // g'(5) = 0 ⇔ α = 5⟨h²⟩₅
        let r = m.rate(alpha, 1.0).unwrap();
        assert!((r.t_star - 5.0).abs() < 1e-6, "{}", r.t_star);
        let (log_mc, se) = mc_log_mgf(d, n, &[r.t_star], 400_000, paper_q)[0];
        let e_mc = r.t_star * alpha - log_mc;
        assert!(
            (r.rate - e_mc).abs() < 4.0 * se,
            "{perp:?}: E = {} vs MC {e_mc} ± {se}",
            r.rate
        );
    }
}

#[test]
fn rate_is_the_legendre_supremum() {
    for perp in [Perp::Prior, Perp::Exact] {
        let m = model(12.0, 8.0, perp);
        let alpha = 0.7;
        let r = m.rate(alpha, 0.5).unwrap();
        assert!((r.p_star - 2.0 * 0.5 * r.rate).abs() < 1e-12);
        for f in [0.5, 0.9, 0.99, 1.01, 1.1, 2.0] {
            let t = r.t_star * f;
            let g = t * alpha - m.log_mgf(t).unwrap();
            assert!(
                g <= r.rate + 1e-9 * r.rate.abs(),
                "{perp:?} t={t}: {g} > {}",
                r.rate
            );
        }
    }
}

#[test]
fn large_d_constants_match_closed_forms_and_finite_d_approaches_them() {
    let prior = model(40.0, 40.0, Perp::Prior);
    let c = prior.large_d_constant();
    let closed = (243.0 * std::f64::consts::PI / 8.0).sqrt();
    assert!((c - closed).abs() < 1e-8, "{c} vs {closed}");
    let exact = model(40.0, 40.0, Perp::Exact).large_d_constant();
    assert!((exact - 8.03).abs() < 0.01, "{exact}");
    // E/(αd) at N = d increases towards the constant.
    let ratios: Vec<f64> = [50.0, 400.0, 3000.0]
        .iter()
        .map(|&d| model(d, d, Perp::Prior).rate(1.0, 1.0).unwrap().rate / d)
        .collect();
    assert!(ratios[0] < ratios[1] && ratios[1] < ratios[2] && ratios[2] < closed);
    assert!((ratios[2] / closed - 1.0).abs() < 3e-3, "{ratios:?}");
}

#[test]
fn rate_scales_linearly_in_d_at_n_equals_d() {
    let ds = [20.0, 40.0, 80.0, 160.0, 320.0];
    let fit = scaling_fit(&ds, 1.0, 1.0, 1.0, 1.0, Perp::Prior).unwrap();
    assert!((fit.exponent - 1.0).abs() < 0.1, "{}", fit.exponent);
    // N = d^1.5: the heuristic's √(Nd) = d^1.25.
    let fit = scaling_fit(&ds, 1.5, 1.0, 1.0, 1.0, Perp::Prior).unwrap();
    assert!((fit.exponent - 1.25).abs() < 0.1, "{}", fit.exponent);
    // Exact perpendicular treatment: same exponent, ~19 % lower rate.
    let ds = [20.0, 80.0, 320.0];
    let ex = scaling_fit(&ds, 1.0, 1.0, 1.0, 1.0, Perp::Exact).unwrap();
    let pr = scaling_fit(&ds, 1.0, 1.0, 1.0, 1.0, Perp::Prior).unwrap();
    assert!((ex.exponent - 1.0).abs() < 0.1, "{}", ex.exponent);
    let drop = 1.0 - ex.points[2].rate.rate / pr.points[2].rate.rate;
    assert!((0.15..0.22).contains(&drop), "{drop}");
}

#[test]
fn tilted_law_is_bimodal_at_the_fig2a_setting() {
    // Spec 05 A: side peaks at |β| ≈ 1.6 (paper's q) and ≈ 1.40 (exact perpendicular norm).
    for (perp, lo, hi) in [(Perp::Prior, 1.5, 1.75), (Perp::Exact, 1.3, 1.5)] {
        let m = fig2a_model(perp);
        let r = m.rate(1.0, 1.0).unwrap();
        let td = m.tilted(r.t_star, 3.0, 121).unwrap();
        assert!(td.bimodal, "{perp:?}: {:?}", td.peaks);
        assert!(
            td.peaks[0].beta.abs() < 1e-6,
            "GP bulk at 0: {:?}",
            td.peaks
        );
        assert!(
            (lo..hi).contains(&td.beta_star),
            "{perp:?}: {}",
            td.beta_star
        );
        assert!(td.side_mass > 0.0 && td.side_mass < 0.5);
        // The tabulated density is normalised (trapezoid over a window holding the mass).
        let h = td.density[1].0 - td.density[0].0;
        let total: f64 = td.density.iter().map(|p| p.1).sum::<f64>() * h;
        assert!((total - 1.0).abs() < 2e-2, "{total}");
        // Below the transition the law is unimodal.
        let low = m.tilted(0.5 * r.t_star, 3.0, 31).unwrap();
        assert!(!low.bimodal, "{:?}", low.peaks);
    }
}

#[test]
fn figures_draw() {
    let dir = tempfile::tempdir().unwrap();
    let m = fig2a_model(Perp::Prior);
    let r = m.rate(1.0, 1.0).unwrap();
    let td = m.tilted(r.t_star, 3.0, 61).unwrap();
    let path = dir.path().join("t.svg");
    crate::plot::write_figure(&path, 640, 480, &tilted_chart(&[("prior".into(), &td)])).unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
}

/// At t = 0 the tilted law is the prior 𝒩(0, σ₁²/d): its mass beyond the paper's outlier
/// threshold 3σ₁/√d is erfc(3/√2); a histogram of prior draws binned like the sampler's gives
/// the same within its Monte Carlo error, and its density integrates to 1.
#[test]
fn overlay_helpers_reproduce_the_prior_at_zero_tilt() {
    let m = fig2a_model(Perp::Prior);
    let sd = (m.sigma1_sq / m.d).sqrt();
    let dist = m.tilted(0.0, 3.0, 4001).unwrap();
    let exact = libm::erfc(3.0 / std::f64::consts::SQRT_2);
    assert!((tilted_tail_fraction(&dist, 3.0 * sd) / exact - 1.0).abs() < 0.02);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let edges: Vec<f64> = (0..=120).map(|i| -3.0 + 0.05 * i as f64).collect();
    let mut counts = vec![0u64; 120];
    let n = 400_000;
    for _ in 0..n {
        let b = sd * rng.sample::<f64, _>(StandardNormal);
        counts[((b + 3.0) / 0.05).floor() as usize] += 1;
    }
    let bins: Vec<(f64, f64, u64)> = (0..120)
        .map(|i| (edges[i], edges[i + 1], counts[i]))
        .collect();
    let sampled = histogram_tail_fraction(&bins, 3.0 * sd);
    let se = (exact * (1.0 - exact) / n as f64).sqrt();
    // The threshold 0.474 falls inside a bin: the flat-bin share adds a small bias.
    assert!(
        (sampled - exact).abs() < 4.0 * se + 5e-4,
        "{sampled} vs {exact}"
    );
    let density = histogram_density(&bins).unwrap();
    let mass: f64 = density.iter().map(|(_, p)| p * 0.05).sum();
    assert!((mass - 1.0).abs() < 1e-12);
    // Near the centre the sampled −log density is the prior's.
    let centre = density.iter().find(|(b, _)| b.abs() < 0.03).unwrap();
    let prior = (-(centre.0 / sd).powi(2) / 2.0).exp() / (sd * (2.0 * std::f64::consts::PI).sqrt());
    assert!((centre.1 / prior - 1.0).abs() < 0.03, "{centre:?} {prior}");
    assert!(histogram_density(&[(0.0, 1.0, 0)]).is_err());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overlay.svg");
    let chart = tilted_overlay_chart(&dist, "prior", &density, "draws");
    crate::plot::write_figure(&path, 640, 480, &chart).unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
}

mod validation {
    use super::*;
    use proptest::prelude::*;

    fn weird() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.0),
            Just(-1.0),
            Just(1e300),
            -1e9..1e9f64,
        ]
    }

    fn check_extreme(m: &LdtModel, alpha: f64) -> Result<(), TestCaseError> {
        match m.rate(alpha, 1.0) {
            Ok(r) => {
                prop_assert!(
                    r.rate.is_finite() && r.rate >= 0.0 && r.t_star > 0.0,
                    "{r:?}"
                );
                prop_assert!(r.t_star <= m.max_tilt() * (1.0 + 1e-9));
            }
            Err(e) => prop_assert_eq!(e.exit_code(), 2, "{:?} alpha {}: {}", m, alpha, e),
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        #[test]
        fn extreme_valid_inputs_of_the_exact_treatment_compute_or_are_rejected(
            ld in 0.5..5.0f64, ln in 0.0..5.0f64, ls1 in -1.0..1.0f64, la in -3.0..3.0f64,
        ) {
            let m = LdtModel { d: 10f64.powf(ld), n: 10f64.powf(ln), sigma1_sq: 10f64.powf(ls1),
                sigma2_sq: 1.0, perp: Perp::Exact };
            check_extreme(&m, 10f64.powf(la))?;
        }
    }

    /// The limits the validation names are where f64 runs out, not arbitrary: α just below
    /// α_max computes (with t* at most t_max), just above is bad input; at N = d and α = 1 the
    /// largest feasible d is about 22 000 (L ≈ 5.1·d nats against L_max ≈ 1.1·10⁵), about
    /// 2000 for the exact treatment (L ≈ 3.4·d against 7000).
    #[test]
    fn alpha_limit_is_sharp_and_d_limit_is_as_documented() {
        let m = fig2a_model(Perp::Prior);
        let a_max = m.max_alpha().unwrap();
        let r = m.rate(a_max * 0.999, 1.0).unwrap();
        assert!(r.t_star < m.max_tilt() && r.rate.is_finite());
        assert_eq!(m.rate(a_max * 1.001, 1.0).unwrap_err().exit_code(), 2);
        let at = |d: f64, perp: Perp| model(d, d, perp).rate(1.0, 1.0);
        assert!(at(20_000.0, Perp::Prior).is_ok());
        assert_eq!(at(25_000.0, Perp::Prior).unwrap_err().exit_code(), 2);
        assert_eq!(at(2500.0, Perp::Exact).unwrap_err().exit_code(), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn bad_parameters_are_invalid_input_never_panics(
            d in weird(), n in weird(), s1 in weird(), s2 in weird(), alpha in weird(),
            exact in any::<bool>(),
        ) {
            let m = LdtModel { d, n, sigma1_sq: s1, sigma2_sq: s2,
                perp: if exact { Perp::Exact } else { Perp::Prior } };
            let valid_model = m.validate().is_ok();
            match m.rate(alpha, 1.0) {
                Ok(r) => {
                    prop_assert!(valid_model);
                    prop_assert!(r.rate.is_finite() && r.rate >= 0.0 && r.t_star > 0.0);
                }
                Err(e) => {
                    // Either the input was rejected, or a valid extreme input could not be
                    // computed — never a panic, never NaN.
                    let alpha_ok = alpha.is_finite() && alpha > 0.0 && alpha <= 1e3;
                    if !valid_model || !alpha_ok {
                        prop_assert_eq!(e.exit_code(), 2, "{}", e);
                    }
                }
            }
        }

        /// Every valid model and threshold, however extreme, either gives a finite rate or
        /// is rejected as bad input (exit 2) up front — never a quadrature failure (exit 1).
        #[test]
        fn extreme_valid_inputs_compute_or_are_rejected_as_bad_input(
            ld in 0.0..7.0f64, ln in 0.0..7.0f64, ls1 in -3.0..3.0f64, ls2 in -3.0..3.0f64,
            la in -4.0..3.0f64,
        ) {
            let m = LdtModel { d: 10f64.powf(ld), n: 10f64.powf(ln), sigma1_sq: 10f64.powf(ls1),
                sigma2_sq: 10f64.powf(ls2), perp: Perp::Prior };
            check_extreme(&m, 10f64.powf(la))?;
        }

        #[test]
        fn valid_small_models_give_finite_rates(
            d in 2.0..60.0f64, n in 1.0..60.0f64, s1 in 0.2..3.0f64, s2 in 0.2..3.0f64,
            alpha in 0.01..3.0f64,
        ) {
            let m = LdtModel { d, n, sigma1_sq: s1, sigma2_sq: s2, perp: Perp::Prior };
            let r = m.rate(alpha, 1.0).unwrap();
            prop_assert!(r.rate.is_finite() && r.rate > 0.0);
            prop_assert!(r.t_star >= alpha / (s2 * mgf::H2_SUP) * (1.0 - 1e-12));
        }
    }
}
