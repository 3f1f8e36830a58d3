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
//!   (blog §"Match the residual to the network's prediction"), both branches; its kernel on
//!   the sampled points ([`sampled_kernel`]), the overlap law p(ρ | b, c)
//!   ([`overlap_posterior`]) and the continuation in P ([`sweep_p`]).
//! * [`fixed_points`]: every fixed point of the adaptive-kernel map at one P, by a grid of
//!   sign changes and Newton ([`roots2d`]), with the Jacobian's eigenvalues (stability).
//! * [`phase_at`]: the phase at one solution (wells, side-well mass, u/u_coexist, the label
//!   GFL / GMFL-I / GMFL-II of Rubin, Seroussi & Ringel 2024).
//! * [`solver`]: the damped iteration and safeguarded Newton for fixed points of the map.
//! * [`continuum`]: the equivalent-kernel self-consistency at finite D and at D → ∞ (fixed
//!   invariants u, κ), the mixed phase and its onset along a path.
//! * [`cubic`]: the cubic kernel power λ3 and the fixed-kernel vs adaptive sample scales
//!   (blog §"Direction learning reduces the sample count").
//! * [`langevin`]: the Langevin engine's R(P) read from a results store, for the overlay.
//! * [`overlay`]: the `flscale sample` experiment that simulates one cavity setting (the
//!   Langevin overlay of the mixed phase).
//! * [`figures`]: the potential (blog Fig. 4.1 shape), phase diagram and R(P) figures.

pub mod adaptive;
pub mod closed_forms;
pub mod continuum;
pub mod cubic;
pub mod figures;
pub mod fixed_points;
pub mod langevin;
pub mod overlap_posterior;
pub mod overlay;
pub mod phase;
pub mod phase_at;
pub mod potential;
pub mod roots2d;
pub mod sampled_kernel;
pub mod solver;
pub mod sweep_over;
pub mod sweep_p;

pub use adaptive::{solve, AdaptiveParams, Branch, BranchSolution, SolveReport};
pub use closed_forms::{erf_h1, erf_h3, feature_variance, residual_correlation};
pub use cubic::{cubic_scales, CubicScales};
pub use phase::{phase, phase_diagram, PhaseReport};
pub use potential::{FiniteModel, MeanField};
pub use sweep_p::{sweep_p, sweep_p_observed, SweepReport};

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

#[cfg(test)]
mod no_panic_tests {
    use super::*;
    use proptest::prelude::*;

    /// Any f64, including the non-finite and extreme values a user might type.
    fn any_value() -> impl Strategy<Value = f64> {
        prop_oneof![
            -1e3..1e3f64,
            -2.0..2.0f64,
            Just(0.0),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(1e-300),
            Just(1e300),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        #[test]
        fn phase_and_potentials_never_panic_nor_return_nan(
            s2 in any_value(), b in any_value(), c in any_value(), d in 0usize..200,
        ) {
            if let Ok(rep) = phase(s2, b, c, d) {
                prop_assert!(rep.u_fold.u.is_finite() && rep.u_coexist.u.is_finite());
                prop_assert!(rep.u_fold.u <= rep.u_coexist.u * (1.0 + 1e-9));
                prop_assert!(rep.rho_star.is_finite());
            }
            if let Ok(mf) = MeanField::new(s2, b, c) {
                for rho in [0.0, 0.3, 2.0] {
                    prop_assert!(!mf.potential(10.0, rho).is_nan());
                }
            }
            let _ = phase_diagram(s2, b, c, c + 1.0, 5);
        }

        #[test]
        fn finite_potential_and_cubic_never_panic(
            d in any_value(), p in any_value(), t in any_value(), s_a2 in any_value(), s2 in any_value(),
            b in any_value(), c in any_value(),
        ) {
            if let Ok(m) = FiniteModel::new(d, p, t, s_a2, s2) {
                let _ = m.potential(0.5, b, c);
                let _ = m.curvature_at_zero(b);
            }
            if let Ok(r) = cubic_scales(d, d, t, s_a2, s2, b, c) {
                prop_assert!(!r.lambda3_fixed.is_nan() && !r.p_fixed.is_nan());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        #[test]
        fn solve_never_panics(
            d in 0usize..6, p in 0usize..14, t in any_value(), s2 in any_value(), eps in any_value(),
            damping in any_value(), seed in 0u64..1000,
        ) {
            let prm = AdaptiveParams {
                d, n: 4, p, t, s_a2: 0.25, sigma_w2: s2, eps, seed, p_test: 8, damping,
                max_iter: 30, tol: 1e-6,
            };
            if let Ok(rep) = solve(&prm) {
                for s in [&rep.unaligned, &rep.aligned] {
                    prop_assert!(!s.r.is_nan() && !s.b.is_nan() && !s.test_mse.is_nan());
                }
            }
        }
    }
}
