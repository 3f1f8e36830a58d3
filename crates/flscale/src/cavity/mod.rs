//! The solvable two-layer model: cavity potential, phases and the self-consistent adaptive
//! kernel (spec 04; blog text, seed 001, which re-derives Rubin, Seroussi & Ringel 2024 and
//! Rubin et al. 2025 one neuron at a time).
//!
//! Setting (blog §"A simple setting for feature learning"): x ∼ 𝒩(0, I_D), unit teacher e,
//! z = e·x, target y = H1(z) + ε·H3(z); student f(x) = Σ_{i≤N} a_i erf(w_i·x) with priors
//! w_i ∼ 𝒩(0, σ_w²/D·I), a_i ∼ 𝒩(0, s_a²); Gaussian likelihood of variance T on P samples.
//! Overlap ρ = w·e, squared norm q = |w|².
//!
//! * [`closed_forms`]: the Gaussian/Hermite correlations of one erf feature (blog §"Reduce the
//!   hidden weight posterior to one overlap").
//! * [`potential`]: the finite-size overlap potential U(ρ; b, c) and the mean-field Ũ_u(ρ).
//! * [`phase`]: fold, equal-depth coexistence and spinodal of Ũ_u, numerically and in closed
//!   form; R = E[ρ²] on each side; the (u, c) phase diagram.
//! * [`adaptive`]: the self-consistent adaptive-kernel fixed point on a sampled data set
//!   (blog §"Match the residual to the network's prediction"), both branches, sweeps over P.
//! * [`cubic`]: the cubic kernel power λ3 and the fixed-kernel vs adaptive sample scales
//!   (blog §"Direction learning reduces the sample count").
//! * [`figures`]: the potential (blog Fig. 4.1 shape), phase diagram and R(P) figures.

pub mod adaptive;
pub mod closed_forms;
pub mod cubic;
pub mod figures;
pub mod phase;
pub mod potential;

pub use adaptive::{solve, sweep_p, AdaptiveParams, Branch, BranchSolution, SolveReport, SweepReport};
pub use closed_forms::{erf_h1, erf_h3, feature_variance, residual_correlation};
pub use cubic::{cubic_scales, CubicScales};
pub use phase::{phase, phase_diagram, PhaseReport};
pub use potential::{FiniteModel, MeanField};

use crate::error::{Error, Result};

/// Checks that a named parameter is finite and strictly positive, naming it in the error.
pub(crate) fn positive(name: &str, value: f64) -> Result<f64> {
    crate::error::require_positive(name, value)
}

/// Checks that a named parameter is finite, naming it in the error.
pub(crate) fn finite(name: &str, value: f64) -> Result<f64> {
    crate::error::require_finite(name, value)
}

/// Checks that an integer size is at least `min`.
pub(crate) fn at_least(name: &str, value: usize, min: usize) -> Result<usize> {
    if value >= min {
        Ok(value)
    } else {
        Err(Error::invalid(format!(
            "{name} = {value} is not allowed; it must be an integer ≥ {min}"
        )))
    }
}
