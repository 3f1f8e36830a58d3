//! Gaussian correlations of one erf feature with the target's Hermite components.
//!
//! Source: blog §"Reduce the hidden weight posterior to one overlap" and its calculation
//! box §"Derive the Gaussian Hermite identity"; spec 04 "Closed forms". For a hidden weight w
//! write g = w·x, q = |w|², ρ = w·e; then (z, g) are jointly Gaussian with Var z = 1,
//! Var g = q, Cov(z, g) = ρ, i.e. g = ρz + √(q − ρ²)·ξ with ξ ⊥ z.
//!
//! H_k are the probabilists' Hermite polynomials (H1 = z, H3 = z³ − 3z, [`crate::hermite::he`]).

use std::f64::consts::PI;

/// k-th derivative of erf at 0: erf⁽ᵏ⁾(0) = (2/√π)·(−1)^{k−1}·H^{phys}_{k−1}(0) for k ≥ 1
/// (erf' = (2/√π)e^{−x²} and d^j/dx^j e^{−x²} = (−1)^j H^{phys}_j(x) e^{−x²}).
pub fn erf_derivative_at_zero(k: usize) -> f64 {
    if k == 0 {
        return 0.0;
    }
    let j = k - 1;
    // Physicists' Hermite at 0: H_j(0) = 0 for odd j, (−1)^{j/2} j!/(j/2)! for even j.
    if j % 2 == 1 {
        return 0.0;
    }
    let half = j / 2;
    let mut h = 1.0;
    for i in (half + 1)..=j {
        h *= i as f64;
    }
    // (−1)^{k−1} = +1 here because j = k − 1 is even.
    let h = if half % 2 == 0 { h } else { -h };
    2.0 / PI.sqrt() * h
}

/// E[erf⁽ᵏ⁾(g)] for g ∼ 𝒩(0, q): E[erf(m + g)] = erf(m/√(1+2q)), so differentiating k times in
/// m at m = 0 gives (1+2q)^{−k/2}·erf⁽ᵏ⁾(0). For k = 1, 3 this is the blog's
/// E[F'(g)] = (2/√π)/√(1+2q) and E[F'''(g)] = −(4/√π)/(1+2q)^{3/2}
/// (§"Derive the Gaussian Hermite identity").
pub fn erf_derivative_mean(k: usize, q: f64) -> f64 {
    if k == 0 {
        return 0.0; // erf is odd and g symmetric.
    }
    (1.0 + 2.0 * q).powf(-(k as f64) / 2.0) * erf_derivative_at_zero(k)
}

/// The Stein/Hermite identity E[erf(g)·H_k(z)] = ρ^k·E[erf⁽ᵏ⁾(g)] (blog eq. "higher order
/// form" of Stein's identity; spec 04 "Closed forms").
pub fn erf_hermite_correlation(k: usize, rho: f64, q: f64) -> f64 {
    rho.powi(k as i32) * erf_derivative_mean(k, q)
}

/// E[erf(g)·H1(z)] = 2ρ/√(π(1+2q)) (blog §"Reduce the hidden weight posterior…").
pub fn erf_h1(rho: f64, q: f64) -> f64 {
    2.0 * rho / (PI * (1.0 + 2.0 * q)).sqrt()
}

/// E[erf(g)·H3(z)] = −4ρ³/(√π·(1+2q)^{3/2}) (blog §"Reduce the hidden weight posterior…").
pub fn erf_h3(rho: f64, q: f64) -> f64 {
    -4.0 * rho.powi(3) / (PI.sqrt() * (1.0 + 2.0 * q).powf(1.5))
}

/// m(ρ, q) = E[r(x)·erf(g)] for the residual r = b·H1 + c·H3:
/// m = (2/√π)·ρ/√(1+2q)·(b − 2cρ²/(1+2q)) (blog, the equation defining m(ρ, q)).
pub fn residual_correlation(rho: f64, q: f64, b: f64, c: f64) -> f64 {
    let a = 1.0 + 2.0 * q;
    2.0 / PI.sqrt() * rho / a.sqrt() * (b - 2.0 * c * rho * rho / a)
}

/// v(q) = E[erf(g)²] = (2/π)·arcsin(2q/(1+2q)) (blog, the equation defining v(q)).
pub fn feature_variance(q: f64) -> f64 {
    2.0 / PI * (2.0 * q / (1.0 + 2.0 * q)).asin()
}

/// E[erf(u)·erf(v)] for zero-mean jointly Gaussian (u, v) with variances q1, q2 and covariance
/// c: (2/π)·arcsin(2c/√((1+2q1)(1+2q2))) (Williams 1997, the erf NNGP kernel; v(q) is its
/// diagonal). Used as an independent check of the adaptive kernel.
pub fn erf_arcsin_kernel(q1: f64, q2: f64, c: f64) -> f64 {
    let arg = 2.0 * c / ((1.0 + 2.0 * q1) * (1.0 + 2.0 * q2)).sqrt();
    2.0 / PI * arg.clamp(-1.0, 1.0).asin()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hermite::{he, GaussHermite};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rand_distr::StandardNormal;

    /// (ρ, q) pairs with |ρ| ≤ √q, including an aligned and an anti-aligned weight.
    const CASES: [(f64, f64); 4] = [(0.3, 0.5), (0.8, 1.2), (-0.5, 0.6), (0.05, 1.0)];

    /// E[F(z, g)] by the tensor Gauss–Hermite rule: z = z₁, g = √q·(ρ̂ z₁ + √(1−ρ̂²) z₂).
    fn quad(rho: f64, q: f64, f: impl Fn(f64, f64) -> f64) -> f64 {
        let gh = GaussHermite::new(120).unwrap();
        let r = rho / q.sqrt();
        let s = (1.0 - r * r).sqrt();
        let mut total = 0.0;
        for (&z1, &w1) in gh.nodes().iter().zip(gh.weights()) {
            for (&z2, &w2) in gh.nodes().iter().zip(gh.weights()) {
                total += w1 * w2 * f(z1, q.sqrt() * (r * z1 + s * z2));
            }
        }
        total
    }

    /// Monte Carlo mean and standard error of F(z, g) over 10⁶ samples (fixed seed).
    fn monte_carlo(rho: f64, q: f64, seed: u64, f: impl Fn(f64, f64) -> f64) -> (f64, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = 1_000_000;
        let perp = (q - rho * rho).sqrt();
        let (mut s1, mut s2) = (0.0, 0.0);
        for _ in 0..n {
            let z: f64 = rng.sample(StandardNormal);
            let xi: f64 = rng.sample(StandardNormal);
            let v = f(z, rho * z + perp * xi);
            s1 += v;
            s2 += v * v;
        }
        let mean = s1 / n as f64;
        let var = s2 / n as f64 - mean * mean;
        (mean, (var / n as f64).sqrt())
    }

    fn within_3se(name: &str, (mean, se): (f64, f64), want: f64) {
        assert!(
            (mean - want).abs() < 3.0 * se,
            "{name}: Monte Carlo {mean} ± {se} vs closed form {want}"
        );
    }

    #[test]
    fn stein_hermite_identity_matches_quadrature() {
        for &(rho, q) in &CASES {
            for k in 1..=5 {
                let got = quad(rho, q, |z, g| libm::erf(g) * he(k, z));
                let want = erf_hermite_correlation(k, rho, q);
                assert!(
                    (got - want).abs() < 1e-12,
                    "k={k} ρ={rho} q={q}: {got} vs {want}"
                );
            }
        }
        // The named closed forms are the k = 1, 3 cases of the identity.
        for &(rho, q) in &CASES {
            assert!((erf_h1(rho, q) - erf_hermite_correlation(1, rho, q)).abs() < 1e-15);
            assert!((erf_h3(rho, q) - erf_hermite_correlation(3, rho, q)).abs() < 1e-15);
        }
    }

    #[test]
    fn derivative_means_match_quadrature_of_explicit_derivatives() {
        let gh = GaussHermite::new(120).unwrap();
        for q in [0.3, 1.0, 2.5] {
            let s = f64::sqrt(q);
            let d1 = gh.expect(|x| 2.0 / PI.sqrt() * (-(s * x).powi(2)).exp());
            let d3 = gh.expect(|x| {
                let g = s * x;
                2.0 / PI.sqrt() * (4.0 * g * g - 2.0) * (-g * g).exp()
            });
            assert!((d1 - erf_derivative_mean(1, q)).abs() < 1e-12);
            assert!((d3 - erf_derivative_mean(3, q)).abs() < 1e-12);
        }
    }

    #[test]
    fn erf_h1_h3_m_v_match_quadrature() {
        let (b, c) = (0.3, -0.3);
        for &(rho, q) in &CASES {
            let h1 = quad(rho, q, |z, g| libm::erf(g) * z);
            let h3 = quad(rho, q, |z, g| libm::erf(g) * (z * z * z - 3.0 * z));
            let m = quad(rho, q, |z, g| {
                libm::erf(g) * (b * z + c * (z * z * z - 3.0 * z))
            });
            let v = quad(rho, q, |_, g| libm::erf(g).powi(2));
            assert!((h1 - erf_h1(rho, q)).abs() < 1e-12, "{h1}");
            assert!((h3 - erf_h3(rho, q)).abs() < 1e-12, "{h3}");
            assert!(
                (m - residual_correlation(rho, q, b, c)).abs() < 1e-12,
                "{m}"
            );
            assert!((v - feature_variance(q)).abs() < 1e-12, "{v}");
        }
    }

    #[test]
    fn erf_h1_h3_m_v_match_monte_carlo() {
        let (b, c) = (0.3, -0.3);
        for (i, &(rho, q)) in CASES.iter().take(2).enumerate() {
            let seed = 1000 + 10 * i as u64;
            within_3se(
                "E[erf H1]",
                monte_carlo(rho, q, seed, |z, g| libm::erf(g) * z),
                erf_h1(rho, q),
            );
            within_3se(
                "E[erf H3]",
                monte_carlo(rho, q, seed + 1, |z, g| {
                    libm::erf(g) * (z * z * z - 3.0 * z)
                }),
                erf_h3(rho, q),
            );
            within_3se(
                "m",
                monte_carlo(rho, q, seed + 2, |z, g| {
                    libm::erf(g) * (b * z + c * (z * z * z - 3.0 * z))
                }),
                residual_correlation(rho, q, b, c),
            );
            within_3se(
                "v",
                monte_carlo(rho, q, seed + 3, |_, g| libm::erf(g).powi(2)),
                feature_variance(q),
            );
        }
    }

    #[test]
    fn arcsin_kernel_matches_quadrature() {
        let gh = GaussHermite::new(120).unwrap();
        for &(q1, q2, c) in &[(0.5, 1.0, 0.3), (1.0, 1.0, -0.6), (2.0, 0.4, 0.1)] {
            let (s1, s2) = (f64::sqrt(q1), f64::sqrt(q2));
            let r = c / (s1 * s2);
            let got = gh.expect_pair(r, |u| libm::erf(s1 * u), |v| libm::erf(s2 * v));
            assert!((got - erf_arcsin_kernel(q1, q2, c)).abs() < 1e-12, "{got}");
        }
        assert!((erf_arcsin_kernel(0.7, 0.7, 0.7) - feature_variance(0.7)).abs() < 1e-15);
    }
}
