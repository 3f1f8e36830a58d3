//! The cubic kernel power λ3 and the sample scales it implies, for fixed (prior) features and
//! for adaptive (aligned) features.
//!
//! Source: blog §"Direction learning reduces the sample count" and its calculation box
//! §"Derive the cubic sample scale"; spec 04 last item. For one erf feature
//! h3(w) = E[erf(w·x)·H3(z)] = −4ρ³/(√π(1+2q)^{3/2}); the kernel power along the unit-norm
//! cubic H3/√6 is λ3 = (N s_a²/6)·E_w[h3(w)²]; the cubic becomes learnable when P·λ3 ≈ T.

use serde::Serialize;

use super::closed_forms::erf_h3;
use super::phase::coexistence_closed_form;
use super::potential::MeanField;
use super::{finite, positive};
use crate::error::{Error, Result};
use crate::hermite::GaussHermite;

/// Scales reported by `flscale cavity cubic`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CubicScales {
    /// Input dimension D.
    pub d: f64,
    /// Width N.
    pub n: f64,
    /// Likelihood variance T.
    pub t: f64,
    /// Readout prior variance s_a².
    pub s_a2: f64,
    /// Hidden prior scale σ_w².
    pub sigma_w2: f64,
    /// λ3 under the prior, ρ ∼ 𝒩(0, σ_w²/D), q = σ_w² + ρ² (Gauss–Hermite quadrature).
    pub lambda3_fixed: f64,
    /// Its leading large-D form (N s_a²/6)(16/π)·15σ_w⁶/(D³(1+2σ_w²)³) = O(D⁻³).
    pub lambda3_fixed_leading: f64,
    /// P_fixed = T/λ3_fixed: the fixed-kernel sample scale, O(D³).
    pub p_fixed: f64,
    /// The aligned overlap used for the adaptive estimate (mean-field ρ* at coexistence).
    pub rho_aligned: f64,
    /// λ3 of a population aligned at ±ρ*: (N s_a²/6)·h3(ρ*)² = O(1).
    pub lambda3_aligned: f64,
    /// T/λ3_aligned: the cubic scale once aligned, O(1).
    pub p_cubic_aligned: f64,
    /// P at which alignment sets in, from u = P²s_a²/(T²D) = u_c: T·√(u_c·D/s_a²) = O(√(ND)).
    pub p_align: f64,
    /// max(P_align, T/λ3_aligned): the adaptive sample scale, O(D) when N = O(D).
    pub p_adaptive: f64,
    /// The mean-field coexistence u_c used for P_align.
    pub u_coexist: f64,
}

/// λ3 and the fixed vs adaptive sample scales for residual coefficients (b, c), which set ρ*
/// and u_c through the mean-field potential.
#[allow(clippy::too_many_arguments)]
pub fn cubic_scales(
    d: f64,
    n: f64,
    t: f64,
    s_a2: f64,
    sigma_w2: f64,
    b: f64,
    c: f64,
) -> Result<CubicScales> {
    positive("D (input dimension)", d)?;
    positive("N (width)", n)?;
    positive("T (likelihood variance)", t)?;
    positive("s_a² (readout prior variance)", s_a2)?;
    positive("σ_w² (hidden prior variance)", sigma_w2)?;
    finite("b", b)?;
    finite("c", c)?;
    let ns = n * s_a2;
    let gh = GaussHermite::new(80)?;
    let sd = (sigma_w2 / d).sqrt();
    let lambda3_fixed = ns / 6.0
        * gh.expect(|x| {
            let rho = sd * x;
            erf_h3(rho, sigma_w2 + rho * rho).powi(2)
        });
    let lambda3_fixed_leading = ns / 6.0 * 16.0 / std::f64::consts::PI * 15.0 * sigma_w2.powi(3)
        / (d.powi(3) * (1.0 + 2.0 * sigma_w2).powi(3));
    let mf = MeanField::new(sigma_w2, b, c)?;
    let (u_coexist, rho_star) = coexistence_closed_form(&mf).ok_or_else(|| {
        Error::invalid(format!(
            "b = {b}, c = {c} give no alignment transition; choose a residual with b ≠ 0 or c ≠ 0"
        ))
    })?;
    // A continuous transition has ρ* = 0 at u_c; the aligned overlap then grows past it, and
    // the scale is read at the prior-to-O(1) crossover ρ = σ_w (the prior's full norm).
    let rho_aligned = if rho_star > 0.0 {
        rho_star
    } else {
        sigma_w2.sqrt()
    };
    let lambda3_aligned = ns / 6.0 * erf_h3(rho_aligned, sigma_w2 + rho_aligned.powi(2)).powi(2);
    let p_fixed = t / lambda3_fixed;
    let p_cubic_aligned = t / lambda3_aligned;
    let p_align = t * (u_coexist * d / s_a2).sqrt();
    let all = [
        lambda3_fixed,
        lambda3_aligned,
        p_fixed,
        p_cubic_aligned,
        p_align,
    ];
    if all.iter().any(|v| !v.is_finite()) || lambda3_fixed <= 0.0 || lambda3_aligned <= 0.0 {
        return Err(Error::invalid(format!(
            "D = {d}, N = {n}, T = {t}, s_a² = {s_a2}, σ_w² = {sigma_w2} are too extreme for finite sample scales in double precision; use moderate values"
        )));
    }
    Ok(CubicScales {
        d,
        n,
        t,
        s_a2,
        sigma_w2,
        lambda3_fixed,
        lambda3_fixed_leading,
        p_fixed,
        rho_aligned,
        lambda3_aligned,
        p_cubic_aligned,
        p_align,
        p_adaptive: p_align.max(p_cubic_aligned),
        u_coexist,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rand_distr::StandardNormal;

    #[test]
    fn fixed_lambda3_matches_monte_carlo_and_leading_order() {
        let (d, n, t, s_a2, s2) = (20.0, 20.0, 0.05, 0.05, 1.0);
        let r = cubic_scales(d, n, t, s_a2, s2, 0.3, -0.3).unwrap();
        // Monte Carlo over ρ ∼ 𝒩(0, σ_w²/D), 10⁶ samples.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let m = 1_000_000;
        let (mut s1, mut sq) = (0.0, 0.0);
        for _ in 0..m {
            let rho = (s2 / d).sqrt() * rng.sample::<f64, _>(StandardNormal);
            let v = n * s_a2 / 6.0 * erf_h3(rho, s2 + rho * rho).powi(2);
            s1 += v;
            sq += v * v;
        }
        let mean = s1 / m as f64;
        let se = ((sq / m as f64 - mean * mean) / m as f64).sqrt();
        assert!(
            (mean - r.lambda3_fixed).abs() < 3.0 * se,
            "{mean} ± {se} vs {}",
            r.lambda3_fixed
        );
        // The leading form drops the ρ² in q: relative correction −6·E[ρ⁸]/((1+2σ_w²)E[ρ⁶])
        // = −42σ_w²/(D(1+2σ_w²)) at first order (E[ρ⁸]/E[ρ⁶] = 7σ_w²/D).
        for d in [200.0, 2000.0] {
            let r = cubic_scales(d, n, t, s_a2, s2, 0.3, -0.3).unwrap();
            let rel = r.lambda3_fixed / r.lambda3_fixed_leading - 1.0;
            let first_order = -42.0 * s2 / (d * (1.0 + 2.0 * s2));
            assert!(
                (rel - first_order).abs() < 10.0 * first_order.powi(2),
                "D={d}: {rel} vs {first_order}"
            );
        }
    }

    #[test]
    fn fixed_scale_grows_as_d_cubed_and_adaptive_as_sqrt_nd() {
        let at = |d: f64| cubic_scales(d, d, 0.05, 1.0 / d, 1.0, 0.3, -0.3).unwrap();
        let (a, b) = (at(400.0), at(800.0));
        let fixed_exp = (b.p_fixed / a.p_fixed).log2();
        let align_exp = (b.p_align / a.p_align).log2();
        // O(1/D) corrections (see above) shift the local exponent by ~0.03 at D = 400.
        assert!((fixed_exp - 3.0).abs() < 0.05, "{fixed_exp}");
        assert!((align_exp - 1.0).abs() < 1e-9, "{align_exp}");
        assert!(a.p_adaptive < a.p_fixed);
    }

    #[test]
    fn rejects_bad_parameters() {
        // Found by proptest: representable inputs whose scales overflow.
        assert!(cubic_scales(1e-300, 1e-300, 1e-300, 300.0, 1e300, 0.0, 515.7).is_err());
        assert!(cubic_scales(20.0, 20.0, 0.0, 0.05, 1.0, 0.3, -0.3).is_err());
        assert!(cubic_scales(20.0, 20.0, 0.05, 0.05, 1.0, 0.0, 0.0).is_err());
    }
}
