//! The scaling of E(α) with d at N = d^ν (paper App. E.1.1 and Fig. 2(b): the heuristic
//! predicts P\* ∝ Ẽ ∝ √(N·d), i.e. E ∝ d at N = d and E ∝ d^{(1+ν)/2} at N = d^ν).
//!
//! The exponent is the least-squares slope of ln E against ln d. The leading large-d
//! behaviour E ≈ α·√(Nd)·√(2c_th)/σ₂ (see [`LdtModel::large_d_constant`]) makes the
//! prediction exact asymptotically; finite-d corrections bend the curve slightly, which the
//! fit's residual shows.

use super::mgf::{LdtModel, Perp};
use super::rate::RatePoint;
use crate::error::{Error, Result};

/// One point of the d-sweep.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ScalingPoint {
    /// Input dimension.
    pub d: f64,
    /// Width N = d^ν.
    pub n: f64,
    /// The rate and its maximiser at this size.
    pub rate: RatePoint,
    /// E/(α√(Nd)), which tends to the large-d constant.
    pub rate_per_sqrt_nd: f64,
}

/// The fitted exponent of E against d.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScalingFit {
    /// N = d^ν.
    pub nu: f64,
    /// Alignment threshold.
    pub alpha: f64,
    /// Treatment of |w_⊥|².
    pub perp: Perp,
    /// The sweep.
    pub points: Vec<ScalingPoint>,
    /// Least-squares slope of ln E vs ln d.
    pub exponent: f64,
    /// Intercept of the fit (ln E at d = 1).
    pub intercept: f64,
    /// Largest |residual| of the fit in ln E.
    pub max_residual: f64,
    /// The heuristic's prediction (1 + ν)/2.
    pub predicted_exponent: f64,
    /// lim E/(α√(Nd)) at large d.
    pub large_d_constant: f64,
}

/// Least-squares line y = a + b x; returns (b, a, max |residual|).
pub fn fit_line(xs: &[f64], ys: &[f64]) -> Result<(f64, f64, f64)> {
    let n = xs.len();
    if n < 2 || ys.len() != n {
        return Err(Error::invalid(format!(
            "a line fit needs at least 2 points with matching lengths (got {n} x, {} y)",
            ys.len()
        )));
    }
    let mx = xs.iter().sum::<f64>() / n as f64;
    let my = ys.iter().sum::<f64>() / n as f64;
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx <= 0.0 {
        return Err(Error::invalid(
            "a line fit needs at least two distinct x values",
        ));
    }
    let b = sxy / sxx;
    let a = my - b * mx;
    let max_res = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - a - b * x).abs())
        .fold(0.0, f64::max);
    Ok((b, a, max_res))
}

/// E(α) over `ds` at N = d^ν, and the fitted exponent.
pub fn scaling_fit(
    ds: &[f64],
    nu: f64,
    alpha: f64,
    sigma1_sq: f64,
    sigma2_sq: f64,
    perp: Perp,
) -> Result<ScalingFit> {
    if !(nu.is_finite() && (0.25..=3.0).contains(&nu)) {
        return Err(Error::invalid(format!(
            "nu = {nu} is not allowed; the width exponent (N = d^nu) must be in [0.25, 3]"
        )));
    }
    if ds.len() < 2 {
        return Err(Error::invalid(format!(
            "d grid has {} values; the fit needs at least 2 distinct dimensions",
            ds.len()
        )));
    }
    let mut points = Vec::with_capacity(ds.len());
    for &d in ds {
        let model = LdtModel {
            d,
            n: d.powf(nu),
            sigma1_sq,
            sigma2_sq,
            perp,
        };
        model.validate()?;
        let rate = model.rate(alpha, 1.0)?;
        points.push(ScalingPoint {
            d,
            n: model.n,
            rate,
            rate_per_sqrt_nd: rate.rate / (alpha * (model.n * d).sqrt()),
        });
    }
    let xs: Vec<f64> = points.iter().map(|p| p.d.ln()).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.rate.rate.ln()).collect();
    let (exponent, intercept, max_residual) = fit_line(&xs, &ys)?;
    let model = LdtModel {
        d: ds[0],
        n: ds[0],
        sigma1_sq,
        sigma2_sq,
        perp,
    };
    Ok(ScalingFit {
        nu,
        alpha,
        perp,
        points,
        exponent,
        intercept,
        max_residual,
        predicted_exponent: 0.5 * (1.0 + nu),
        large_d_constant: model.large_d_constant(),
    })
}
