//! The pilot stage of a flattened free-energy run: a first estimate F̂(s) from stiff windows by
//! umbrella integration, turned into the common bias B = −F̂ of the windows MBAR joins.
//!
//! Harmonic windows of the overlap stiffness kT/Δ² slide into the basins when F falls by
//! hundreds of kT across the range (a window then sits where κ(s_k − s) balances F′(s), and
//! where −F″ > κ it is bimodal): every window ends in a basin, the barrier stays unsampled and
//! MBAR has nothing to join. Stiff windows do not slide far and stay unimodal, but overlap too
//! little for MBAR. Umbrella integration (Kästner & Thiel, J. Chem. Phys. 123, 144104 (2005))
//! needs no overlap: each window's mean m_k and variance σ_k² of s give the mean force
//!
//!   dF/ds ≈ kT (s − m_k)/σ_k² − κ (s − s_k)        (their eq. 6, a Gaussian biased density),
//!
//! and the windows' forces are averaged with the weights n_k N(s; m_k, σ_k²) / Σ_j (eq. 7, 8),
//! then integrated (here every chain of a window is a component of its own,
//! [`WindowMoments::of_chains`]). The second stage runs the windows with V_k(s) = ½κ(s − s_k)² + B(s),
//! B = −F̂ (adaptive umbrella sampling; Mezei, J. Comput. Phys. 68, 237 (1987)): their profile
//! F + B is nearly flat, so soft windows overlap, and B is a known part of every window's
//! energy, so MBAR's answer is exact whatever errors F̂ has; a poor F̂ costs overlap, which the
//! overlap check reports, not bias.

use crate::error::{Error, Result};
use crate::sim::restraint::TabulatedBias;

/// Points of the flattening table B(s) (spacing ~1 % of the pilot windows' span).
pub const TABLE_POINTS: usize = 201;

/// The share of the run's sampling steps a pilot window takes: its job is a mean and a
/// variance of s, not a profile.
pub const PILOT_SHARE: usize = 4;

/// What umbrella integration needs of one pilot window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowMoments {
    /// The window's centre s_k.
    pub centre: f64,
    /// Its stiffness κ.
    pub kappa: f64,
    /// Mean m_k of s over every chain's samples.
    pub mean: f64,
    /// Variance σ_k² of s about m_k.
    pub var: f64,
    /// Effective samples n_k: samples over the decorrelation stride.
    pub effective: f64,
}

impl WindowMoments {
    /// The moments of each chain of a pilot window (centre s_k, stiffness κ; each chain's
    /// series of s after burn-in, and the window's decorrelation stride) that moved. Each chain
    /// is a component of its own: near a barrier top a window can be bimodal (chains on either
    /// side of the centre, measured at ±0.06 about s = 0 for one erf neuron at ridge 0.1), and
    /// pooling the chains would put one wide Gaussian across both modes, whose mean force is
    /// wrong at either; each chain's Gaussian is right about its own mode. A chain whose s did
    /// not vary (every proposal rejected) carries no mean force and is left out.
    pub fn of_chains(
        centre: f64,
        kappa: f64,
        chains: &[&[f64]],
        stride: usize,
    ) -> Vec<WindowMoments> {
        let stride = stride.max(1) as f64;
        chains
            .iter()
            .filter_map(|s| {
                let n = s.len() as f64;
                if s.len() < 2 {
                    return None;
                }
                let mean = s.iter().sum::<f64>() / n;
                let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
                (var.is_finite() && var > 0.0).then_some(WindowMoments {
                    centre,
                    kappa,
                    mean,
                    var,
                    effective: n / stride,
                })
            })
            .collect()
    }

    /// ln of this window's weight n_k N(s; m_k, σ_k²) in the average (up to a common constant).
    fn log_weight(&self, s: f64) -> f64 {
        self.effective.ln() - 0.5 * self.var.ln() - 0.5 * (s - self.mean).powi(2) / self.var
    }

    /// This window's estimate of dF/ds at s (module docs), energy units.
    fn force(&self, s: f64, temperature: f64) -> f64 {
        temperature * (s - self.mean) / self.var - self.kappa * (s - self.centre)
    }
}

/// dF/ds at s: the windows' estimates averaged with their Gaussian weights (module docs).
pub fn mean_force(windows: &[WindowMoments], temperature: f64, s: f64) -> f64 {
    let logw: Vec<f64> = windows.iter().map(|w| w.log_weight(s)).collect();
    let top = logw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (mut num, mut den) = (0.0, 0.0);
    for (w, lw) in windows.iter().zip(&logw) {
        let p = (lw - top).exp();
        num += p * w.force(s, temperature);
        den += p;
    }
    num / den
}

/// F̂ on [lo, hi] = the span of the windows' means, `points` evenly spaced values (F̂(lo) = 0,
/// energy units), by the trapezoid rule on [`mean_force`].
pub fn integrated_profile(
    windows: &[WindowMoments],
    temperature: f64,
    points: usize,
) -> Result<(f64, f64, Vec<f64>)> {
    let lo = windows.iter().map(|w| w.mean).fold(f64::INFINITY, f64::min);
    let hi = windows
        .iter()
        .map(|w| w.mean)
        .fold(f64::NEG_INFINITY, f64::max);
    if windows.len() < 2 || !(lo < hi) || points < 2 {
        return Err(Error::runtime(format!(
            "the pilot windows' mean order parameters span [{lo:.4}, {hi:.4}], so they cannot estimate a profile; widen free_energy.range or raise free_energy.pilot_kappa"
        )));
    }
    let h = (hi - lo) / (points - 1) as f64;
    let force: Vec<f64> = (0..points)
        .map(|i| mean_force(windows, temperature, lo + i as f64 * h))
        .collect();
    let mut f = vec![0.0; points];
    for i in 1..points {
        f[i] = f[i - 1] + 0.5 * h * (force[i - 1] + force[i]);
    }
    if f.iter().any(|v| !v.is_finite()) {
        return Err(Error::runtime(
            "the pilot windows' mean force is not finite; lower sampler.step or free_energy.pilot_kappa",
        ));
    }
    Ok((lo, hi, f))
}

/// The flattening bias B = −F̂ from the chains of every pilot window (module docs,
/// [`WindowMoments::of_chains`]).
pub fn flattening_bias(moments: &[WindowMoments], temperature: f64) -> Result<TabulatedBias> {
    let (lo, hi, f) = integrated_profile(moments, temperature, TABLE_POINTS)?;
    TabulatedBias::new(lo, hi, f.into_iter().map(|v| -v).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// For a harmonic F(s) = ½a(s − μ)² every window's biased density is exactly Gaussian, with
    /// mean (aμ + κ s_k)/(a + κ) and variance kT/(a + κ): umbrella integration returns F′
    /// exactly, whatever the weights, and the integrated profile is F up to a constant.
    #[test]
    fn umbrella_integration_is_exact_for_a_harmonic_profile() {
        let (a, mu, kappa, t) = (-30.0, 0.2, 80.0, 1.5);
        let windows: Vec<WindowMoments> = (0..7)
            .map(|k| {
                let c = -1.0 + k as f64 / 3.0;
                WindowMoments {
                    centre: c,
                    kappa,
                    mean: (a * mu + kappa * c) / (a + kappa),
                    var: t / (a + kappa),
                    effective: 100.0 + 10.0 * k as f64,
                }
            })
            .collect();
        for s in [-0.9, -0.3, 0.0, 0.41, 0.95] {
            let f = mean_force(&windows, t, s);
            assert!((f - a * (s - mu)).abs() < 1e-9, "s = {s}: {f}");
        }
        let (lo, hi, f) = integrated_profile(&windows, t, 101).unwrap();
        let exact = |s: f64| 0.5 * a * (s - mu).powi(2);
        for (i, v) in f.iter().enumerate() {
            let s = lo + (hi - lo) * i as f64 / 100.0;
            assert!((v - (exact(s) - exact(lo))).abs() < 1e-9, "s = {s}");
        }
    }

    /// A window far from s hardly counts: the average is the nearest window's force.
    #[test]
    fn the_nearest_window_dominates_the_average() {
        let w = |c: f64, force_offset: f64| WindowMoments {
            centre: c,
            kappa: 100.0,
            mean: c + force_offset / 100.0,
            var: 0.0001,
            effective: 50.0,
        };
        let windows = [w(-0.5, 10.0), w(0.5, -20.0)];
        // At a window's mean its force is κ(s_k − m_k).
        assert!((mean_force(&windows, 1.0, windows[0].mean) + 10.0).abs() < 1e-6);
        assert!((mean_force(&windows, 1.0, windows[1].mean) - 20.0).abs() < 1e-6);
    }
}
