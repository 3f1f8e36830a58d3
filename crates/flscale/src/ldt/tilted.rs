//! The tilted distribution of first-layer overlaps p_t(β) ∝ p₀(β)·E_r[e^{k h²}] at t = t\*
//! (paper App. B.3, the paragraph after eq. (39): the t\*-dependent non-Gaussian law whose
//! normalisation is the Chernoff integral, "the required weight configuration for achieving
//! good alignment"; overlaid on the posterior histogram in Fig. 2(a)).
//!
//! Its local maxima are the predicted feature-learning pattern: a GP bulk at β = 0 and, once
//! t is past the transition, symmetric specialisation peaks at ±β\*. The mass beyond the
//! minimum between them, times N, is the predicted number of specialised neurons.

use super::mgf::{scan_maxima, LdtModel};
use super::quad::integrate;
use crate::error::{Error, Result};

/// One local maximum of p_t on β ≥ 0.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Peak {
    /// Position β (≥ 0; the law is even, so −β is a peak too).
    pub beta: f64,
    /// log p_t(β) (a normalised density).
    pub log_density: f64,
}

/// The tilted law at one t.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TiltedDistribution {
    /// The tilt t.
    pub t: f64,
    /// log Z(t).
    pub log_z: f64,
    /// Local maxima of the density on β ≥ 0, ascending in β.
    pub peaks: Vec<Peak>,
    /// Whether there are specialisation peaks at ±β\* ≠ 0 (the law is then multimodal:
    /// bimodal in |β|).
    pub bimodal: bool,
    /// Position of the outermost peak, β\* (0 when the law is unimodal).
    pub beta_star: f64,
    /// Probability that |β| exceeds the density minimum between the central and the
    /// outermost peak (0 when unimodal).
    pub side_mass: f64,
    /// N·side_mass: the predicted number of specialised neurons.
    pub specialised_neurons: f64,
    /// (β, p_t(β)) on a symmetric grid, for plotting.
    pub density: Vec<(f64, f64)>,
}

impl LdtModel {
    /// The tilted distribution p_t(β) at tilt `t` ≥ 0, tabulated on `grid_points` points
    /// of [−beta_max, beta_max].
    pub fn tilted(&self, t: f64, beta_max: f64, grid_points: usize) -> Result<TiltedDistribution> {
        let mgf = self.mgf(t)?;
        if !(beta_max.is_finite() && beta_max > 0.0 && beta_max <= 100.0) {
            return Err(Error::invalid(format!(
                "beta_max = {beta_max} is not allowed; it must be in (0, 100]"
            )));
        }
        if !(3..=100_000).contains(&grid_points) {
            return Err(Error::invalid(format!(
                "grid points = {grid_points} is not allowed; use 3 to 100000"
            )));
        }
        let k = self.tilt(t);
        let mut err: Option<Error> = None;
        let mut log_p = |b: f64| -> f64 {
            match self.log_integrand(b, k) {
                Ok((l, _, _)) => l - mgf.log_z,
                Err(e) => {
                    err.get_or_insert(e);
                    f64::NEG_INFINITY
                }
            }
        };
        // Peaks within the region that carries the mass: ±(a few prior widths past the
        // largest β where the tilt can still win), capped by the plot window's double.
        let search_hi = beta_max.max(4.0 * self.sigma1_sq.sqrt());
        let n_scan = match self.perp {
            super::mgf::Perp::Prior => 4000,
            super::mgf::Perp::Exact => 400,
        };
        let (peak_pos, _, _) = scan_maxima(&mut log_p, 0.0, search_hi, n_scan);
        let mut peaks: Vec<Peak> = peak_pos
            .iter()
            .map(|&b| Peak {
                beta: b,
                log_density: log_p(b),
            })
            .collect();
        peaks.sort_by(|a, b| a.beta.total_cmp(&b.beta));
        // A peak counts as a specialisation peak if it sits away from 0 by more than one
        // prior standard deviation (σ₁/√d): the GP bulk itself may be slightly flattened.
        let width = (self.sigma1_sq / self.d).sqrt();
        let outer = peaks.last().copied().filter(|p| p.beta > width);
        let (bimodal, beta_star, side_mass) = match outer {
            None => (false, 0.0, 0.0),
            Some(p) => {
                // Minimum between 0 and β*: the lowest log p on a grid in between.
                let n = 400;
                let (mut b_min, mut v_min) = (0.0, f64::INFINITY);
                for i in 0..=n {
                    let b = p.beta * i as f64 / n as f64;
                    let v = log_p(b);
                    if v < v_min {
                        v_min = v;
                        b_min = b;
                    }
                }
                if b_min <= 0.0 {
                    (false, 0.0, 0.0)
                } else {
                    let upper = search_hi.max(p.beta * 3.0);
                    let q = integrate(
                        |b| [log_p(b).exp()],
                        &[b_min, p.beta, upper],
                        1e-10,
                        1e-300,
                        4000,
                    )?;
                    (true, p.beta, (2.0 * q.value[0]).min(1.0))
                }
            }
        };
        let density: Vec<(f64, f64)> = (0..grid_points)
            .map(|i| {
                let b = -beta_max + 2.0 * beta_max * i as f64 / (grid_points - 1) as f64;
                (b, log_p(b.abs()).exp())
            })
            .collect();
        if let Some(e) = err {
            return Err(e);
        }
        Ok(TiltedDistribution {
            t,
            log_z: mgf.log_z,
            peaks,
            bimodal,
            beta_star,
            side_mass,
            specialised_neurons: self.n * side_mass,
            density,
        })
    }
}
