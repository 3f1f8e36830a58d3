//! Harmonic umbrella restraints on an order parameter (Torrie & Valleau, J. Comput. Phys. 23,
//! 187 (1977)): window k adds V_k(s) = ½ κ (s − s_k)² + B(s) to the energy, B an optional
//! flattening bias common to every window ([`TabulatedBias`], [`super::flatten`]).

use super::mbar::ReducedEnergies;
use super::FreeEnergyError;
use crate::sim::restraint::TabulatedBias;

/// Harmonic windows with centres s_k and one stiffness κ (energy units per unit s²).
#[derive(Debug, Clone, PartialEq)]
pub struct Umbrella {
    /// Window centres s_k, in the order of the windows.
    pub centres: Vec<f64>,
    /// Stiffness κ > 0.
    pub kappa: f64,
    /// The flattening term B(s) every window carries, if any.
    pub flattening: Option<TabulatedBias>,
}

impl Umbrella {
    /// `windows` centres spread evenly over [lo, hi], both ends included (one window sits at
    /// the midpoint).
    pub fn spread(
        lo: f64,
        hi: f64,
        windows: usize,
        kappa: f64,
    ) -> Result<Umbrella, FreeEnergyError> {
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            return Err(FreeEnergyError::InvalidInput(format!(
                "window range [{lo}, {hi}] must be finite with lo < hi"
            )));
        }
        if windows == 0 {
            return Err(FreeEnergyError::InvalidInput(
                "windows must be at least 1, got 0".into(),
            ));
        }
        let centres = if windows == 1 {
            vec![0.5 * (lo + hi)]
        } else {
            (0..windows)
                .map(|k| lo + (hi - lo) * k as f64 / (windows - 1) as f64)
                .collect()
        };
        Umbrella::new(centres, kappa)
    }

    /// Windows at the given centres (finite) with stiffness κ (finite, > 0).
    pub fn new(centres: Vec<f64>, kappa: f64) -> Result<Umbrella, FreeEnergyError> {
        if !(kappa.is_finite() && kappa > 0.0) {
            return Err(FreeEnergyError::InvalidInput(format!(
                "umbrella kappa must be finite and > 0, got {kappa}"
            )));
        }
        if centres.is_empty() || centres.iter().any(|c| !c.is_finite()) {
            return Err(FreeEnergyError::InvalidInput(
                "umbrella centres must be a non-empty list of finite numbers".into(),
            ));
        }
        Ok(Umbrella {
            centres,
            kappa,
            flattening: None,
        })
    }

    /// The same windows with the common term B(s) added to each.
    pub fn with_flattening(mut self, flattening: TabulatedBias) -> Umbrella {
        self.flattening = Some(flattening);
        self
    }

    /// Number of windows K.
    pub fn windows(&self) -> usize {
        self.centres.len()
    }

    /// V_k(s) = ½ κ (s − s_k)² + B(s).
    pub fn bias(&self, k: usize, s: f64) -> f64 {
        let d = s - self.centres[k];
        0.5 * self.kappa * d * d + self.flattening.as_ref().map_or(0.0, |b| b.value(s))
    }

    /// V_k′(s) = κ (s − s_k) + B′(s): the sampler adds V_k′(s) ∇_θ s to the gradient of the
    /// energy.
    pub fn bias_derivative(&self, k: usize, s: f64) -> f64 {
        self.kappa * (s - self.centres[k])
            + self
                .flattening
                .as_ref()
                .map_or(0.0, |b| b.value_and_derivative(s).1)
    }

    /// The reduced-energy matrix u_k(x_n) = β V_k(s_n) of every sample of every window
    /// (`s_by_window[j]` holds window j's samples of s), relative to the unbiased state, whose
    /// reduced energy is then 0. β = 1/kT of the runs.
    pub fn reduced_energies(
        &self,
        s_by_window: &[&[f64]],
        beta: f64,
    ) -> Result<ReducedEnergies, FreeEnergyError> {
        if s_by_window.len() != self.windows() {
            return Err(FreeEnergyError::InvalidInput(format!(
                "{} windows of samples for {} umbrella windows",
                s_by_window.len(),
                self.windows()
            )));
        }
        if !(beta.is_finite() && beta > 0.0) {
            return Err(FreeEnergyError::InvalidInput(format!(
                "beta must be finite and > 0, got {beta}"
            )));
        }
        let counts: Vec<usize> = s_by_window.iter().map(|s| s.len()).collect();
        let mut u = Vec::with_capacity(counts.iter().sum::<usize>() * self.windows());
        for (j, series) in s_by_window.iter().enumerate() {
            for (t, &s) in series.iter().enumerate() {
                if !s.is_finite() {
                    return Err(FreeEnergyError::InvalidInput(format!(
                        "window {j}, sample {t}: the order parameter is {s}"
                    )));
                }
                u.extend((0..self.windows()).map(|k| beta * self.bias(k, s)));
            }
        }
        ReducedEnergies::new(counts, u)
    }
}
