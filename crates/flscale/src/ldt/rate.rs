//! The Chernoff rate E(α) = sup_{t>0} [tα − N log Z(t)] and its maximiser t\*
//! (paper App. A.3 eq. for Pr[A_f ≥ α] ≤ e^{−E(α)}, App. B.3; spec 05 A).
//!
//! g(t) = tα − N log Z(t) is concave: N log Z(t) = log E[e^{tA_f}] is a cumulant generating
//! function. Its derivative g′(t) = α − tσ₂²⟨h²⟩_t (see [`super::mgf`]) equals α > 0 at t = 0
//! and tends to −∞ (⟨h²⟩_t → sup h² = 1/(3π) > 0), so the maximiser is the unique root of g′,
//! found by bracketing: t\* ≥ 3πα/σ₂² (because ⟨h²⟩_t ≤ 1/(3π)), the upper end by doubling
//! until g′ < 0, then Brent's method ([`crate::scalar::brent_root`]). At large d, g′ drops
//! steeply across the first-order transition of the tilted law (the specialisation peaks
//! take over), which is why a safeguarded bracketing method is used rather than Newton.

use super::mgf::{LdtModel, H2_SUP};
use crate::error::{Error, Result};
use crate::scalar::{brent_root, golden_min};

/// E(α) with everything needed to interpret it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RatePoint {
    /// The alignment threshold α.
    pub alpha: f64,
    /// The Chernoff rate E(α) (Pr_prior[A_f ≥ α] ≤ e^{−E}).
    pub rate: f64,
    /// The maximising tilt t\*.
    pub t_star: f64,
    /// N log Z(t\*) = log E[e^{t\* A_f}].
    pub log_mgf: f64,
    /// The sample-complexity estimate P\* ∝ 2κE(α) (paper App. B.3) at the given κ.
    pub p_star: f64,
}

/// Relative tolerance on t\*.
const T_REL_TOL: f64 = 1e-12;

impl LdtModel {
    /// N log Z(t) = log E_prior[e^{tA_f}].
    pub fn log_mgf(&self, t: f64) -> Result<f64> {
        Ok(self.n * self.mgf(t)?.log_z)
    }

    /// g′(t) = α − tσ₂²⟨h²⟩_t.
    fn rate_slope(&self, alpha: f64, t: f64) -> Result<f64> {
        Ok(alpha - t * self.sigma2_sq * self.mgf(t)?.mean_h2)
    }

    /// E(α), t\* and P\* = 2κE(α) for alignment threshold `alpha` > 0 and ridge `kappa` > 0.
    pub fn rate(&self, alpha: f64, kappa: f64) -> Result<RatePoint> {
        self.validate()?;
        if !(alpha.is_finite() && alpha > 0.0 && alpha <= 1e3) {
            return Err(Error::invalid(format!(
                "alpha = {alpha} is not allowed; the alignment threshold must be in (0, 1000]"
            )));
        }
        crate::error::require_positive("kappa", kappa)?;
        let alpha_max = self.max_alpha()?;
        if alpha > alpha_max {
            return Err(Error::invalid(format!(
                "alpha = {alpha} is out of reach at d = {}, N = {}, sigma1_sq = {}, sigma2_sq = {}: it must be in (0, {alpha_max:.6e}], beyond which t* needs a log-integrand above {:.0} nats that f64 quadrature cannot resolve to 1e-10; lower alpha or d",
                self.d, self.n, self.sigma1_sq, self.sigma2_sq, self.max_exponent()
            )));
        }
        // Lower end: g′(t) ≥ α − tσ₂²/(3π) > 0 below 3πα/σ₂².
        // Upper end: doubling, capped at t_max, where g′ ≤ 0 because α ≤ α_max.
        let t_max = self.max_tilt();
        let mut lo = (alpha / (self.sigma2_sq * H2_SUP)).min(t_max);
        let mut hi = (2.0 * lo).min(t_max);
        let mut doublings = 0;
        while hi < t_max && self.rate_slope(alpha, hi)? > 0.0 {
            lo = hi;
            hi = (2.0 * hi).min(t_max);
            doublings += 1;
            if doublings > 80 {
                return Err(Error::runtime(format!(
                    "no maximiser of tα − N log Z(t) found below t = {hi:e} (alpha = {alpha})"
                )));
            }
        }
        let t_star = brent_root(|t| self.rate_slope(alpha, t), lo, hi, T_REL_TOL * hi, 300)?;
        let log_mgf = self.log_mgf(t_star)?;
        let rate = t_star * alpha - log_mgf;
        if !rate.is_finite() {
            return Err(Error::runtime(format!(
                "E(alpha) is not finite at alpha = {alpha}"
            )));
        }
        Ok(RatePoint {
            alpha,
            rate,
            t_star,
            log_mgf,
            p_star: 2.0 * kappa * rate,
        })
    }

    /// The largest α whose maximiser t\* is within [`LdtModel::max_tilt`]: t\* solves
    /// α = tσ₂²⟨h²⟩_t and increases with α (E is convex), so α_max = t_maxσ₂²⟨h²⟩_{t_max}.
    pub fn max_alpha(&self) -> Result<f64> {
        self.validate()?;
        let t_max = self.max_tilt();
        Ok(t_max * self.sigma2_sq * self.mgf(t_max)?.mean_h2)
    }

    /// The large-d constant lim E(α)/(α√(Nd)) = √(2c_th)/σ₂ where c_th is the smallest
    /// k/d at which the tilted law's action S(β) = β²/σ₁² − 2(k/d)h² (+ the χ² rate of
    /// ρ = r/E[r] for `Perp::Exact`) first reaches 0 away from β = 0. For the paper's
    /// approximation with σ₁² = 1 this is √(243π/8) ≈ 9.77 (spec 05 A); for the exact
    /// treatment ≈ 8.03. Computed by a 2-D grid search refined by golden sections.
    pub fn large_d_constant(&self) -> f64 {
        let s1 = self.sigma1_sq;
        // For fixed (β, ρ) the threshold c solves β²/σ₁² + rate(ρ) = 2c·h²; c_th is its
        // minimum over the non-trivial saddle points.
        let c_of = |beta: f64, rho: f64| -> f64 {
            let (rate_rho, q) = match self.perp {
                super::mgf::Perp::Prior => (0.0, s1 + beta * beta),
                super::mgf::Perp::Exact => (rho - 1.0 - rho.ln(), beta * beta + s1 * rho),
            };
            (beta * beta / s1 + rate_rho) / (2.0 * super::mgf::h_squared(beta, q))
        };
        let mut best = (f64::INFINITY, 1.0, 1.0);
        for i in 1..=400 {
            let beta = 0.01 * i as f64 * s1.sqrt();
            for j in 1..=200 {
                let rho = match self.perp {
                    super::mgf::Perp::Prior => 1.0,
                    super::mgf::Perp::Exact => 0.01 * j as f64,
                };
                let c = c_of(beta, rho);
                if c < best.0 {
                    best = (c, beta, rho);
                }
                if self.perp == super::mgf::Perp::Prior {
                    break;
                }
            }
        }
        // Coordinate-wise refinement.
        let (mut beta, mut rho) = (best.1, best.2);
        for _ in 0..40 {
            beta = golden_min(|b| c_of(b, rho), beta * 0.9, beta * 1.1, 0.0, 100).midpoint();
            if self.perp == super::mgf::Perp::Exact {
                rho = golden_min(|r| c_of(beta, r), rho * 0.9, rho * 1.1, 0.0, 100).midpoint();
            }
        }
        (2.0 * c_of(beta, rho)).sqrt() / self.sigma2_sq.sqrt()
    }
}

/// E(α) on a grid of thresholds.
pub fn rate_curve(model: &LdtModel, alphas: &[f64], kappa: f64) -> Result<Vec<RatePoint>> {
    if alphas.is_empty() {
        return Err(Error::invalid(
            "alpha grid is empty; give at least one alignment threshold in (0, 1000]",
        ));
    }
    alphas.iter().map(|&a| model.rate(a, kappa)).collect()
}
