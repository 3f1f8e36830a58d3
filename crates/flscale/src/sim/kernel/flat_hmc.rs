//! HMC on the flat-parameter models (CNN, softmax attention), on the plain or the collapsed
//! posterior: the FCN kernel's proposal ([`crate::sim::kernel::mala`] module doc; Neal, "MCMC
//! using Hamiltonian dynamics", *Handbook of Markov Chain Monte Carlo* (2011) ch. 5) with the
//! identity metric.
//!
//! Per proposal and chain: ε = √(2η) jittered uniformly in [0.8ε, 1.2ε] from the chain's stream
//! ([`leapfrog_step_size`]), then the momentum u ~ 𝒩(0, T·I) on the moved groups (drawn group
//! by group, entry by entry, from the same stream), L leapfrog steps on H = U(θ) + ½|u|²,
//!
//! u ← u − (ε/2)∇U(θ),  θ ← θ + εu,  u ← u − (ε/2)∇U(θ)
//!
//! (Neal sec. 5.2.3.3), and the Metropolis test min(1, exp(−(H′ − H)/T)) with a uniform drawn
//! after the trajectory (Neal sec. 5.3.2.2, [`hmc_log_alpha`]). The map is volume-preserving and
//! reversible under u → −u, so exp(−U/T) is exactly invariant for any ε; the jitter does not
//! depend on the state, so the mixture over ε is too. A chain whose energy cannot be evaluated
//! (the collapsed energy's Cholesky fails) or is not finite somewhere on the trajectory is put
//! back at its start at once and its proposal rejected. The chains of a block take their
//! leapfrog steps together, so each step's data terms are one block evaluation, as for ULA and
//! MALA ([`crate::sim::ensemble::flat_chain::evaluate_block`]).

use rand::Rng;

use crate::sim::ensemble::flat_chain::{
    ensure_evaluated, evaluate_block, sampled_ranges, BlockWork, FlatChain, StepContext,
};
use crate::sim::kernel::langevin::{hmc_log_alpha, leapfrog_step_size, metropolis_accepts};
use crate::sim::model::flat::FlatModel;
use crate::sim::num::real::Real;

/// The trajectory's per-chain state that is not in [`FlatChain`]: step size, whether it is
/// still moving, and the kinetic energy ½|u|² at its start.
struct Trajectories {
    eps: Vec<f64>,
    moving: Vec<bool>,
    kinetic: Vec<f64>,
}

/// One HMC proposal of `leapfrog_steps` leapfrog steps and its Metropolis test for every live
/// chain of `block` (module doc). A chain's U and ∇U at its current point are cached between
/// proposals, so a proposal costs `leapfrog_steps` block evaluations.
pub(crate) fn hmc_step_block<T: Real, M: FlatModel<T>>(
    model: &M,
    at: &StepContext<'_, T>,
    block: &mut [FlatChain<T>],
    leapfrog_steps: usize,
    global_step: usize,
    work: &mut BlockWork<T, M::Scratch>,
) {
    ensure_evaluated(model, at, block, global_step, work);
    let ranges: Vec<_> = sampled_ranges(model.groups(), at.collapsed).collect();
    let mut traj = start_trajectories(model, at, block, &ranges);
    kick(block, &traj, &ranges, 0.5);
    for l in 0..leapfrog_steps {
        for (chain, (&e, _)) in block
            .iter_mut()
            .zip(traj.eps.iter().zip(&traj.moving))
            .filter(|(_, (_, &m))| m)
        {
            for range in &ranges {
                let (theta, u) = (
                    &mut chain.theta[range.clone()],
                    &chain.momentum[range.clone()],
                );
                for (t, &ui) in theta.iter_mut().zip(u) {
                    *t = T::of(t.f64() + e * ui);
                }
            }
        }
        evaluate_block(model, at, block, &traj.moving, work);
        for (chain, moving) in block.iter_mut().zip(traj.moving.iter_mut()) {
            let evaluated = chain.failure.take().is_none() && chain.energy.is_finite();
            if *moving && !evaluated {
                *moving = false;
                chain.restore();
            }
        }
        let scale = if l + 1 == leapfrog_steps { 0.5 } else { 1.0 };
        kick(block, &traj, &ranges, scale);
    }
    let temperature = at.dynamics.temperature;
    for (c, chain) in block.iter_mut().enumerate() {
        if chain.diverged.is_some() {
            continue;
        }
        let kinetic_new = kinetic_energy(&chain.momentum, &ranges);
        let saved_energy = chain.saved_energy();
        let log_alpha = hmc_log_alpha(
            chain.energy,
            kinetic_new,
            saved_energy,
            traj.kinetic[c],
            temperature,
        );
        let u: f64 = chain.rng.random();
        chain.proposed += 1;
        if traj.moving[c] && metropolis_accepts(log_alpha, u) {
            chain.accepted += 1;
        } else if traj.moving[c] {
            chain.restore();
        }
    }
}

/// Saves every live chain's point and draws its jittered step and momentum u ~ 𝒩(0, T·I) on
/// the moved `ranges`, in that order from the chain's stream (the FCN kernel's order).
fn start_trajectories<T: Real, M: FlatModel<T>>(
    model: &M,
    at: &StepContext<'_, T>,
    block: &mut [FlatChain<T>],
    ranges: &[std::ops::Range<usize>],
) -> Trajectories {
    let b = block.len();
    let mut traj = Trajectories {
        eps: vec![0.0; b],
        moving: vec![false; b],
        kinetic: vec![0.0; b],
    };
    let sqrt_t = at.dynamics.temperature.sqrt();
    for (c, chain) in block.iter_mut().enumerate() {
        if chain.diverged.is_some() {
            continue;
        }
        chain.save();
        traj.moving[c] = true;
        let jitter: f64 = chain.rng.random();
        traj.eps[c] = leapfrog_step_size(at.dynamics.step, jitter);
        chain.momentum.resize(model.n_params(), 0.0);
        for range in ranges {
            for u in &mut chain.momentum[range.clone()] {
                *u = sqrt_t * T::standard_normal(&mut chain.rng).f64();
            }
        }
        traj.kinetic[c] = kinetic_energy(&chain.momentum, ranges);
    }
    traj
}

/// u ← u − scale·ε_c·∇U(θ) on the moved `ranges` of every chain still moving.
fn kick<T: Real>(
    block: &mut [FlatChain<T>],
    traj: &Trajectories,
    ranges: &[std::ops::Range<usize>],
    scale: f64,
) {
    for (chain, (&e, _)) in block
        .iter_mut()
        .zip(traj.eps.iter().zip(&traj.moving))
        .filter(|(_, (_, &m))| m)
    {
        for range in ranges {
            let (u, grad) = (
                &mut chain.momentum[range.clone()],
                &chain.grad[range.clone()],
            );
            for (ui, g) in u.iter_mut().zip(grad) {
                *ui -= scale * e * g.f64();
            }
        }
    }
}

/// ½|u|² over the moved `ranges`, in f64.
fn kinetic_energy(momentum: &[f64], ranges: &[std::ops::Range<usize>]) -> f64 {
    ranges
        .iter()
        .map(|r| 0.5 * momentum[r.clone()].iter().map(|u| u * u).sum::<f64>())
        .sum()
}
