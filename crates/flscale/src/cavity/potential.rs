//! The overlap potentials: the finite-size cavity potential U(ρ; b, c) and the mean-field
//! limit Ũ_u(ρ).
//!
//! Source: blog §"Reduce the hidden weight posterior to one overlap" (U), its calculation box
//! §"Expand the potential near zero overlap" (U''(0)), and §"The sample scale for alignment"
//! (Ũ_u, with u = P²s_a²/(T²D)); spec 04 "Single-neuron (cavity) posterior" and "Mean-field
//! limit potential". The residual is r = b·H1 + c·H3, and q ≈ σ_w² + ρ² (the perpendicular
//! norm held at its prior value, blog §"Check the perpendicular norm approximation").

use std::f64::consts::PI;

use serde::Serialize;

use super::closed_forms::{feature_variance, residual_correlation};
use super::{finite, positive};
use crate::error::Result;

/// Parameters of the finite-size scalar potential U(ρ; b, c).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FiniteModel {
    /// Input dimension D.
    pub d: f64,
    /// Number of training samples P.
    pub p: f64,
    /// Likelihood variance T (the ridge κ).
    pub t: f64,
    /// Readout prior variance s_a².
    pub s_a2: f64,
    /// Hidden-weight prior scale σ_w² (w ∼ 𝒩(0, σ_w²/D·I)).
    pub sigma_w2: f64,
}

impl FiniteModel {
    /// Validates every parameter (all finite and > 0).
    pub fn new(d: f64, p: f64, t: f64, s_a2: f64, sigma_w2: f64) -> Result<Self> {
        Ok(FiniteModel {
            d: positive("D (input dimension)", d)?,
            p: positive("P (number of samples)", p)?,
            t: positive("T (likelihood variance)", t)?,
            s_a2: positive("s_a² (readout prior variance)", s_a2)?,
            sigma_w2: positive("σ_w² (hidden prior variance)", sigma_w2)?,
        })
    }

    /// The mean-field interaction strength u = P²s_a²/(T²D) (blog §"The sample scale for
    /// alignment").
    pub fn u(&self) -> f64 {
        self.p * self.p * self.s_a2 / (self.t * self.t * self.d)
    }

    /// L(ρ) = 1 + (s_a²P/T)·v(σ_w² + ρ²), the readout-integration factor.
    pub fn readout_factor(&self, rho: f64) -> f64 {
        1.0 + self.s_a2 * self.p / self.t * feature_variance(self.sigma_w2 + rho * rho)
    }

    /// U(ρ; b, c) = Dρ²/(2σ_w²) + ½·log L(ρ) − s_a²P²m(ρ)²/(2T²L(ρ)), the negative log
    /// overlap posterior up to a constant (blog, the equation defining U).
    pub fn potential(&self, rho: f64, b: f64, c: f64) -> f64 {
        let l = self.readout_factor(rho);
        let m = residual_correlation(rho, self.sigma_w2 + rho * rho, b, c);
        self.d * rho * rho / (2.0 * self.sigma_w2) + 0.5 * l.ln()
            - self.s_a2 * self.p * self.p * m * m / (2.0 * self.t * self.t * l)
    }

    /// U''(0) = D/σ_w² + ℓ/L0 − s_a²P²α²/(T²L0) with m = αρ + O(ρ³), L = L0 + ℓρ² + O(ρ⁴)
    /// (blog §"Expand the potential near zero overlap"). Here α = (2/√π)·b/√(1+2σ_w²) and
    /// ℓ = (s_a²P/T)·v'(σ_w²), v'(q) = (4/π)/((1+2q)·√(1+4q)) (derivative of the arcsine).
    pub fn curvature_at_zero(&self, b: f64) -> f64 {
        let q = self.sigma_w2;
        let l0 = self.readout_factor(0.0);
        let dv = 4.0 / PI / ((1.0 + 2.0 * q) * (1.0 + 4.0 * q).sqrt());
        let ell = self.s_a2 * self.p / self.t * dv;
        let alpha = 2.0 / PI.sqrt() * b / (1.0 + 2.0 * q).sqrt();
        self.d / q + ell / l0 - self.s_a2 * self.p * self.p * alpha * alpha / (self.t * self.t * l0)
    }

    /// The centre drive X(b) = [s_a²P²α²/(T²L0)] / [D/σ_w² + ℓ/L0]: the fit reward's curvature
    /// at ρ = 0 over the stabilising curvature of the prior and of log L, so that
    /// U''(0) = (D/σ_w² + ℓ/L0)·(1 − X) (the terms of [`Self::curvature_at_zero`], blog
    /// §"Expand the potential near zero overlap"). X < 1: the unaligned centre is locally
    /// stable; X ≥ 1: past the spinodal, it is not.
    pub fn centre_drive(&self, b: f64) -> f64 {
        let q = self.sigma_w2;
        let l0 = self.readout_factor(0.0);
        let dv = 4.0 / PI / ((1.0 + 2.0 * q) * (1.0 + 4.0 * q).sqrt());
        let ell = self.s_a2 * self.p / self.t * dv;
        let alpha = 2.0 / PI.sqrt() * b / (1.0 + 2.0 * q).sqrt();
        let reward = self.s_a2 * self.p * self.p * alpha * alpha / (self.t * self.t * l0);
        reward / (self.d / q + ell / l0)
    }

    /// The centre drive at the population residual of the unaligned branch (derived here):
    /// X([`Self::population_residual`]) for width `n`.
    pub fn population_centre_drive(&self, n: f64) -> f64 {
        self.centre_drive(self.population_residual(n))
    }

    /// The linear residual left on the training set by the adaptive kernel at the prior
    /// (derived here): b = T/(T + λ1P), λ1 = N s_a²·(4/π)·(σ_w²/D)/(1 + 2σ_w²).
    ///
    /// λ1 is the kernel's power along H1: K = N s_a²E_w[φφᵀ] contains N s_a²E_w[h1(w)²]·zzᵀ with
    /// h1 = E[erf(g)H1] = 2ρ/√(π(1+2q)) (blog §"Reduce the hidden weight posterior to one
    /// overlap"), taken at the prior ρ² = σ_w²/D, q ≈ σ_w². For a unit H1 target, writing
    /// K = λ1zzᵀ + K₋ with K₋ ⪰ 0 and G = (K₋ + T·I)⁻¹ ⪯ I/T, Sherman–Morrison gives the
    /// projection of r̄ = T(K + T·I)⁻¹z on z as T·zᵀGz/(|z|²(1 + λ1zᵀGz)) ≤ T/(T + λ1|z|²), with
    /// |z|² ≈ P: a PSD remainder of the kernel only lowers b. The blog's self-consistency
    /// (§"Match the residual to the network's prediction") thus makes b fall like 1/P once
    /// λ1P > T, while L0 grows like P: the reward s_a²P²α²/(T²L0) ∝ P²b²/L0 then decays.
    pub fn population_residual(&self, n: f64) -> f64 {
        let q = self.sigma_w2;
        let lambda1 = n * self.s_a2 * 4.0 / PI * (q / self.d) / (1.0 + 2.0 * q);
        self.t / (self.t + lambda1 * self.p)
    }
}

/// The largest [`FiniteModel::population_centre_drive`] over all P > 0 for the given D, N, T,
/// s_a², σ_w², and the P where it is reached: (P_max, X_max). X_max < 1 says that, at the
/// population level (b from the prior kernel's H1 power alone), the unaligned centre never
/// loses local stability at any P; finite-P fixed points can deviate either way. At fixed D, N, σ_w², X is 1/s_a² times a function of s_a²P/T, so
/// X_max ∝ 1/s_a² and is independent of T (tested).
pub fn population_centre_drive_max(
    d: f64,
    n: f64,
    t: f64,
    s_a2: f64,
    sigma_w2: f64,
) -> Result<(f64, f64)> {
    let at = |log_p: f64| -> Result<f64> {
        Ok(FiniteModel::new(d, log_p.exp(), t, s_a2, sigma_w2)?.population_centre_drive(n))
    };
    positive("N (width)", n)?;
    // X → 0 as P → 0 (∝ P²) and as P → ∞ (∝ 1/P); it rises and falls once, so a scan in log P
    // brackets the maximum and a golden-section search refines it.
    let (lo, hi, steps) = (-20.0f64, 40.0f64, 1200usize);
    let h = (hi - lo) / steps as f64;
    let mut best = (lo, at(lo)?);
    for i in 1..=steps {
        let x = lo + i as f64 * h;
        let v = at(x)?;
        if v > best.1 {
            best = (x, v);
        }
    }
    let (mut a, mut b) = (best.0 - h, best.0 + h);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    while b - a > 1e-10 {
        let (c1, c2) = (b - g * (b - a), a + g * (b - a));
        if at(c1)? < at(c2)? {
            a = c1;
        } else {
            b = c2;
        }
    }
    let x = 0.5 * (a + b);
    Ok((x.exp(), at(x)?))
}

/// The mean-field potential Ũ_u(ρ)/D for fixed σ_w², b, c (L → 1 in U; spec 04 "Mean-field
/// limit potential").
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanField {
    /// Hidden-weight prior scale σ_w².
    pub sigma_w2: f64,
    /// Linear residual coefficient b.
    pub b: f64,
    /// Cubic residual coefficient c.
    pub c: f64,
}

impl MeanField {
    /// Validates σ_w² > 0 and finite b, c.
    pub fn new(sigma_w2: f64, b: f64, c: f64) -> Result<Self> {
        Ok(MeanField {
            sigma_w2: positive("σ_w² (hidden prior variance)", sigma_w2)?,
            b: finite("b (linear residual coefficient)", b)?,
            c: finite("c (cubic residual coefficient)", c)?,
        })
    }

    /// The fit reward per unit u: g(ρ) = (2/π)·ρ²/(1+2q)·(b − 2cρ²/(1+2q))², q = σ_w² + ρ².
    pub fn reward(&self, rho: f64) -> f64 {
        let a = 1.0 + 2.0 * (self.sigma_w2 + rho * rho);
        let inner = self.b - 2.0 * self.c * rho * rho / a;
        2.0 / PI * rho * rho / a * inner * inner
    }

    /// Ũ_u(ρ)/D = ρ²/(2σ_w²) − u·g(ρ) (blog §"The sample scale for alignment").
    pub fn potential(&self, u: f64, rho: f64) -> f64 {
        rho * rho / (2.0 * self.sigma_w2) - u * self.reward(rho)
    }
}

/// ρ values −ρ_max … ρ_max on `points` equally spaced nodes (at least 2).
pub fn symmetric_grid(rho_max: f64, points: usize) -> Vec<f64> {
    let n = points.max(2);
    (0..n)
        .map(|i| -rho_max + 2.0 * rho_max * i as f64 / (n - 1) as f64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Second derivative at 0 of an even function by Richardson extrapolation of
    /// 2(f(h) − f(0))/h², an expansion in h².
    fn curvature_richardson(f: impl Fn(f64) -> f64) -> f64 {
        let f0 = f(0.0);
        let levels = 6;
        let mut table: Vec<f64> = (0..levels)
            .map(|i| {
                let h = 0.05 / 2f64.powi(i as i32);
                2.0 * (f(h) - f0) / (h * h)
            })
            .collect();
        for k in 1..levels {
            let factor = 4f64.powi(k as i32);
            for i in (k..levels).rev() {
                table[i] = (factor * table[i] - table[i - 1]) / (factor - 1.0);
            }
        }
        table[levels - 1]
    }

    #[test]
    fn curvature_at_zero_matches_numerical_second_derivative() {
        let model = FiniteModel::new(20.0, 150.0, 0.05, 0.05, 1.0).unwrap();
        for (b, c) in [(0.3, -0.3), (0.05, 0.3), (1.0, 0.0)] {
            let numeric = curvature_richardson(|r| model.potential(r, b, c));
            let closed = model.curvature_at_zero(b);
            assert!(
                (numeric - closed).abs() < 1e-6 * closed.abs().max(1.0),
                "b={b}: {numeric} vs {closed}"
            );
        }
    }

    #[test]
    fn centre_drive_is_one_exactly_where_the_numerical_curvature_vanishes() {
        // U''(0) is linear in b² through the reward only, so X(b) = X(1)·b² and X(b*) = 1 at
        // b* = 1/√X(1); the curvature there is checked by Richardson differences of U itself.
        let model = FiniteModel::new(30.0, 90.0, 0.05, 1.0 / 30.0, 1.0).unwrap();
        let b_star = 1.0 / model.centre_drive(1.0).sqrt();
        let scale = curvature_richardson(|r| model.potential(r, 0.0, 0.0));
        for (b, stable) in [(0.9 * b_star, true), (1.1 * b_star, false)] {
            let numeric = curvature_richardson(|r| model.potential(r, b, 0.2));
            assert_eq!(numeric > 0.0, stable, "b = {b}: U''(0) = {numeric}");
            let want = scale * (1.0 - model.centre_drive(b));
            assert!((numeric - want).abs() < 1e-6 * scale, "{numeric} vs {want}");
        }
        let at_star = curvature_richardson(|r| model.potential(r, b_star, -0.4));
        assert!(at_star.abs() < 1e-6 * scale, "U''(0) at X = 1: {at_star}");
    }

    #[test]
    fn population_drive_maximum_is_a_maximum_and_scales_as_derived() {
        let (p1, x1) = population_centre_drive_max(20.0, 20.0, 0.05, 0.05, 1.0).unwrap();
        let drive = |p: f64| {
            FiniteModel::new(20.0, p, 0.05, 0.05, 1.0)
                .unwrap()
                .population_centre_drive(20.0)
        };
        assert!((drive(p1) - x1).abs() < 1e-15);
        // A dense independent scan never exceeds it.
        let scan = (0..20_000)
            .map(|i| drive(10f64.powf(-2.0 + 8.0 * i as f64 / 20_000.0)))
            .fold(0.0, f64::max);
        assert!(
            scan <= x1 * (1.0 + 1e-12) && scan > x1 * (1.0 - 1e-6),
            "{scan} vs {x1}"
        );
        // X = F(s_a²P/T)/s_a² at fixed D, N, σ_w²: halving s_a² and raising T tenfold doubles
        // X_max and moves its P by 20.
        let (p2, x2) = population_centre_drive_max(20.0, 20.0, 0.5, 0.025, 1.0).unwrap();
        assert!((x2 / x1 - 2.0).abs() < 1e-9, "{x2} / {x1}");
        assert!((p2 / p1 - 20.0).abs() < 1e-3, "{p2} / {p1}");
    }

    #[test]
    fn finite_potential_tends_to_mean_field_when_readout_factor_tends_to_one() {
        // s_a²P/T → 0 at fixed u makes L → 1; then U/D → Ũ_u/D.
        let (d, t, s_a2, u): (f64, f64, f64, f64) = (10.0, 1.0, 1e-14, 20.0);
        let p = (u * t * t * d / s_a2).sqrt();
        let model = FiniteModel::new(d, p, t, s_a2, 0.5).unwrap();
        assert!((model.u() - u).abs() < 1e-9 * u);
        let mf = MeanField::new(0.5, 0.3, -0.3).unwrap();
        for rho in [0.0, 0.2, 0.5, 0.9, 1.4] {
            let finite = model.potential(rho, 0.3, -0.3) / d;
            let mean_field = mf.potential(u, rho);
            assert!(
                (finite - mean_field).abs() < 1e-5,
                "ρ={rho}: {finite} vs {mean_field}"
            );
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(FiniteModel::new(20.0, 100.0, 0.0, 0.05, 1.0).is_err());
        assert!(FiniteModel::new(20.0, 100.0, 0.05, 0.05, -1.0).is_err());
        assert!(FiniteModel::new(f64::NAN, 100.0, 0.05, 0.05, 1.0).is_err());
        assert!(MeanField::new(0.0, 0.3, 0.3).is_err());
        assert!(MeanField::new(1.0, f64::INFINITY, 0.3).is_err());
    }
}
