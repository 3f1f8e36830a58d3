//! The pieces of a step that every engine shares: which proposal a step makes ([`Proposal`]),
//! the unadjusted Langevin move, the Metropolis adjustment of MALA (spec 02 "Sampler" and
//! (c)), and the jittered leapfrog step and the Metropolis ratio of HMC.
//!
//! The move θ ← θ − η∇U(θ) + √(2ηT)·ξ (paper App. A.1) with a constant scalar metric m
//! becomes θ ← θ − ηm∇U + √(2ηTm)·ξ. MALA accepts the move θ → θ′ with probability
//! min(1, α),
//!
//! log α = −(U(θ′) − U(θ))/T − (|θ − θ′ + ηm∇U(θ′)|²/m − |θ′ − θ + ηm∇U(θ)|²/m)/(4ηT)
//!
//! (Roberts & Tweedie 1996, Bernoulli 2:341, eq. 2.2, with the Gaussian proposal
//! q(θ′|θ) = 𝒩(θ − ηm∇U(θ), 2ηTm·I); the norms run over every moved weight).

//!
//! HMC (Neal, "MCMC using Hamiltonian dynamics", *Handbook of Markov Chain Monte Carlo* (2011)
//! ch. 5; the FCN kernel's module doc, [`crate::sim::kernel::mala`], has the whole derivation):
//! one leapfrog step of size ε is the MALA proposal with η = ε²/2, so ε = √(2η), jittered per
//! proposal ([`leapfrog_step_size`]); a trajectory from (θ, u) to (θ′, u′) is accepted with
//! probability min(1, exp(−(H′ − H)/T)), H = U + ½|u|² ([`hmc_log_alpha`]).

use rand::Rng;

pub use crate::sim::config::Proposal;
use crate::sim::num::real::Real;

/// HMC's leapfrog step for Langevin step `eta`: ε = √(2η) (module doc), jittered uniformly in
/// [0.8ε, 1.2ε] by `uniform` ∈ [0, 1) from the chain's stream, against the periodic
/// trajectories a fixed εL can return on (Neal sec. 5.4.2.3; the jitter does not depend on
/// the state, so the mixture over ε stays reversible). The FCN kernel's expression, to the bit.
#[inline(always)]
pub fn leapfrog_step_size(eta: f64, uniform: f64) -> f64 {
    (2.0 * eta).sqrt() * (0.8 + 0.4 * uniform)
}

/// log α of HMC: −(H′ − H)/T with H = U + ½|u|² at the end and at the start of the trajectory
/// (Neal sec. 5.3.2.2), for [`metropolis_accepts`].
#[inline(always)]
pub fn hmc_log_alpha(
    energy_new: f64,
    kinetic_new: f64,
    energy_old: f64,
    kinetic_old: f64,
    temperature: f64,
) -> f64 {
    -(energy_new + kinetic_new - energy_old - kinetic_old) / temperature
}

/// θ ← θ − drift·∇U + noise·ξ entry by entry, ξ standard normal drawn in order from `rng`;
/// `drift` = ηm and `noise` = √(2ηTm) in the working precision.
#[inline(always)]
pub fn langevin_move<T: Real, R: Rng + ?Sized>(
    theta: &mut [T],
    grad: &[T],
    drift: T,
    noise: T,
    rng: &mut R,
) {
    for (ti, &gi) in theta.iter_mut().zip(grad) {
        *ti = *ti - drift * gi + noise * T::standard_normal(rng);
    }
}

/// Adds one run of weights with the same scalar metric `m` to the squared norms of the MALA
/// ratio (module doc): `forward` += |θ′ − θ + ηm∇U(θ)|²/m, `backward` += |θ − θ′ + ηm∇U(θ′)|²/m,
/// in f64.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn add_proposal_norms<T: Real>(
    old: &[T],
    new: &[T],
    old_grad: &[T],
    new_grad: &[T],
    eta: f64,
    m: f64,
    forward: &mut f64,
    backward: &mut f64,
) {
    let eta_m = eta * m;
    for i in 0..old.len() {
        let (o, w) = (old[i].f64(), new[i].f64());
        let f = w - o + eta_m * old_grad[i].f64();
        let r = o - w + eta_m * new_grad[i].f64();
        *forward += f * f / m;
        *backward += r * r / m;
    }
}

/// The Langevin move with a diagonal metric M = diag(m), θ_i ← θ_i − η·m_i·∂_iU +
/// √(2ηT)·√m_i·ξ_i (`sqrt_m` = √m), one standard normal per weight in order, as
/// [`langevin_move`] draws them.
#[inline(always)]
pub fn langevin_move_diagonal<T: Real, R: Rng + ?Sized>(
    theta: &mut [T],
    grad: &[T],
    m: &[f64],
    sqrt_m: &[f64],
    eta: f64,
    noise_scale: f64,
    rng: &mut R,
) {
    for (((ti, &gi), &mi), &si) in theta.iter_mut().zip(grad).zip(m).zip(sqrt_m) {
        let xi = T::standard_normal(rng).f64();
        *ti = T::of(ti.f64() - eta * mi * gi.f64() + noise_scale * si * xi);
    }
}

/// [`add_proposal_norms`] with one metric entry per weight (M = diag(m)): `forward` +=
/// Σ_i (θ′_i − θ_i + ηm_i∂_iU(θ))²/m_i, `backward` likewise from θ′ (module doc).
#[inline(always)]
pub fn add_proposal_norms_diagonal<T: Real>(
    old: &[T],
    new: &[T],
    old_grad: &[T],
    new_grad: &[T],
    eta: f64,
    m: &[f64],
    norms: (&mut f64, &mut f64),
) {
    let (forward, backward) = norms;
    for i in 0..old.len() {
        let (o, w, eta_m) = (old[i].f64(), new[i].f64(), eta * m[i]);
        let f = w - o + eta_m * old_grad[i].f64();
        let r = o - w + eta_m * new_grad[i].f64();
        *forward += f * f / m[i];
        *backward += r * r / m[i];
    }
}

/// log α of MALA (module doc) from the energies and the squared norms of
/// [`add_proposal_norms`].
#[inline(always)]
pub fn mala_log_alpha(
    energy_new: f64,
    energy_old: f64,
    forward_sq: f64,
    backward_sq: f64,
    eta: f64,
    temperature: f64,
) -> f64 {
    -(energy_new - energy_old) / temperature
        - (backward_sq - forward_sq) / (4.0 * eta * temperature)
}

/// The Metropolis–Hastings test: accept when log u < log α for a uniform u ∈ [0, 1); a
/// non-finite log α (a proposal whose energy could not be evaluated) is rejected.
#[inline(always)]
pub fn metropolis_accepts(log_alpha: f64, uniform: f64) -> bool {
    log_alpha.is_finite() && uniform.ln() < log_alpha
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One weight, U = θ²/2 (T = 1): the MALA ratio against the Gaussian proposal densities
    /// written out, log α = −ΔU + log q(θ|θ′) − log q(θ′|θ) with q(b|a) = 𝒩(a − ηa, 2η).
    #[test]
    fn mala_ratio_matches_the_proposal_densities() {
        let (theta, proposal, eta) = (0.7f64, -0.4f64, 0.3);
        let log_q = |to: f64, from: f64| -(to - from + eta * from).powi(2) / (4.0 * eta);
        let want = -(proposal * proposal - theta * theta) / 2.0 + log_q(theta, proposal)
            - log_q(proposal, theta);
        let (mut forward, mut backward) = (0.0, 0.0);
        add_proposal_norms(
            &[theta],
            &[proposal],
            &[theta],
            &[proposal],
            eta,
            1.0,
            &mut forward,
            &mut backward,
        );
        let got = mala_log_alpha(
            proposal * proposal / 2.0,
            theta * theta / 2.0,
            forward,
            backward,
            eta,
            1.0,
        );
        assert!((got - want).abs() < 1e-14, "{got} vs {want}");
        assert!(metropolis_accepts(0.0, 0.5));
        assert!(!metropolis_accepts(-1.0, 0.5));
        assert!(!metropolis_accepts(f64::NAN, 0.0));
    }

    /// The proposal's Metropolis flag and leapfrog count, and the jitter's range.
    #[test]
    fn proposal_flags_and_the_jittered_step() {
        let hmc = Proposal::Hmc { leapfrog_steps: 3 };
        assert_eq!(hmc.leapfrog_steps(), Some(3));
        assert!(hmc.is_metropolis() && Proposal::MetropolisLangevin.is_metropolis());
        assert!(!Proposal::Langevin.is_metropolis());
        assert_eq!(Proposal::MetropolisLangevin.leapfrog_steps(), None);
        let eps = (2.0f64 * 0.02).sqrt();
        assert!((leapfrog_step_size(0.02, 0.0) - 0.8 * eps).abs() < 1e-15);
        assert!((leapfrog_step_size(0.02, 0.5) - eps).abs() < 1e-15);
        assert!((leapfrog_step_size(0.02, 1.0) - 1.2 * eps).abs() < 1e-15);
        // H' − H = 0.3 at T = 0.5.
        assert!((hmc_log_alpha(1.2, 0.4, 1.0, 0.3, 0.5) + 0.6).abs() < 1e-14);
    }
}
