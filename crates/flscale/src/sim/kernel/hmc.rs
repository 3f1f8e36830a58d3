//! HMC proposals of the FCN kernel (module doc of [`crate::sim::kernel::mala`]; Neal, "MCMC
//! using Hamiltonian dynamics", *Handbook of Markov Chain Monte Carlo* (2011) ch. 5): the
//! momentum kick and position drift in the metric M = KKᵀ, the leapfrog trajectory and the
//! Metropolis test on H = U + ½|u|²; the integrator alone on one block for its tests
//! ([`Kernel::leapfrog_first_block`]).

use rand::Rng;

use crate::sim::chains::ChainBlock;
use crate::sim::ensemble::fcn::Ensemble;
use crate::sim::kernel::mala::{BlockState, Context, Kernel};
use crate::sim::kernel::metric::Metric;
use crate::sim::langevin::metropolis_accepts;
use crate::sim::model::interface::Model;
use crate::sim::num::real::Real;

/// A leapfrog trajectory: per chain its step size ε_c, and the number of steps.
#[derive(Clone, Copy)]
pub(super) struct Trajectory<'a> {
    pub(super) eps: &'a [f64],
    pub(super) steps: usize,
}

impl<T: Real, M: Model<T>> Context<'_, T, M> {
    /// u ← u − scale·ε_c·Kᵀ∇U for the sampled groups of every chain in `moving` (module doc).
    #[inline(always)]
    pub(super) fn kick(
        &self,
        block: &ChainBlock<T>,
        state: &mut BlockState<T>,
        metric: &Metric,
        eps: &[f64],
        scale: f64,
        moving: &[bool],
    ) {
        for (g, kick) in state.kick.iter_mut().enumerate() {
            for (k, gv) in kick.iter_mut().zip(&block.grads[g]) {
                *k = gv.f64();
            }
        }
        metric.apply(self.model.preconditioned_units(), &mut state.kick, true);
        self.for_each_moving(&mut state.momentum, &state.kick, eps, moving, |u, k, e| {
            *u -= scale * e * k;
        });
    }

    /// θ ← θ + ε_c·Ku for the sampled groups of every chain in `moving` (module doc).
    #[inline(always)]
    pub(super) fn drift(
        &self,
        block: &mut ChainBlock<T>,
        state: &mut BlockState<T>,
        metric: &Metric,
        eps: &[f64],
        moving: &[bool],
    ) {
        for (kick, u) in state.kick.iter_mut().zip(&state.momentum) {
            kick.copy_from_slice(u);
        }
        metric.apply(self.model.preconditioned_units(), &mut state.kick, false);
        let model = self.model;
        for g in 0..model.n_groups() {
            if !self.sampled[g] {
                continue;
            }
            let n = model.group_len(g);
            for (c, &e) in eps.iter().enumerate() {
                if !moving[c] {
                    continue;
                }
                let range = c * n..(c + 1) * n;
                for (t, k) in block.params[g][range.clone()]
                    .iter_mut()
                    .zip(&state.kick[g][range])
                {
                    *t = T::of(t.f64() + e * k);
                }
            }
        }
    }

    /// Applies `f(x, y, ε_c)` to the entries of the sampled groups of every chain in `moving`.
    #[inline(always)]
    pub(super) fn for_each_moving(
        &self,
        xs: &mut [Vec<f64>],
        ys: &[Vec<f64>],
        eps: &[f64],
        moving: &[bool],
        mut f: impl FnMut(&mut f64, f64, f64),
    ) {
        for g in 0..self.model.n_groups() {
            if !self.sampled[g] {
                continue;
            }
            let n = self.model.group_len(g);
            for (c, &e) in eps.iter().enumerate() {
                if !moving[c] {
                    continue;
                }
                let range = c * n..(c + 1) * n;
                for (x, &y) in xs[g][range.clone()].iter_mut().zip(&ys[g][range]) {
                    f(x, y, e);
                }
            }
        }
    }

    /// `steps` leapfrog steps of per-chain size ε_c from the current point and
    /// `state.momentum` (module doc), for the chains in `moving`; a chain whose energy cannot
    /// be evaluated or is not finite is put back at its saved point and dropped from
    /// `moving` (its proposal is then rejected). Needs the gradient at the current point.
    #[inline(always)]
    pub(super) fn leapfrog(
        &self,
        block: &mut ChainBlock<T>,
        state: &mut BlockState<T>,
        metric: &Metric,
        path: Trajectory<'_>,
        moving: &mut [bool],
        scratch: &mut M::Scratch,
    ) {
        let (eps, steps) = (path.eps, path.steps);
        self.kick(block, state, metric, eps, 0.5, moving);
        for l in 0..steps {
            self.drift(block, state, metric, eps, moving);
            self.evaluate(block, scratch, &mut state.work);
            for c in 0..block.len {
                let ok = state.work.failure[c].is_none() && block.energy[c].is_finite();
                if moving[c] && !ok {
                    moving[c] = false;
                    self.restore(block, state, c);
                }
            }
            let scale = if l + 1 == steps { 0.5 } else { 1.0 };
            self.kick(block, state, metric, eps, scale, moving);
        }
    }

    /// One HMC proposal of `steps` leapfrog steps per chain and its Metropolis test (module
    /// doc).
    #[inline(always)]
    pub(super) fn hmc_step(
        &self,
        block: &mut ChainBlock<T>,
        state: &mut BlockState<T>,
        metric: &Metric,
        steps: usize,
        global_step: usize,
        scratch: &mut M::Scratch,
    ) {
        let model = self.model;
        let b = block.len;
        self.ensure_evaluated(block, state, scratch, global_step);
        self.save(block, state);
        if state.momentum.len() != model.n_groups() {
            state.momentum = block.params.iter().map(|g| vec![0.0; g.len()]).collect();
            state.kick = state.momentum.clone();
        }
        let temperature = self.dynamics.temperature;
        let base = (2.0 * self.dynamics.step).sqrt();
        let sqrt_t = temperature.sqrt();
        let mut eps = vec![0.0; b];
        let mut moving = vec![false; b];
        let mut kinetic = vec![0.0; b];
        for c in 0..b {
            if block.diverged[c].is_some() {
                continue;
            }
            moving[c] = true;
            let rng = &mut block.rngs[c];
            let jitter: f64 = rng.random();
            eps[c] = base * (0.8 + 0.4 * jitter);
            for g in 0..model.n_groups() {
                let n = model.group_len(g);
                let u = &mut state.momentum[g][c * n..(c + 1) * n];
                if !self.sampled[g] {
                    u.fill(0.0);
                    continue;
                }
                for ui in u {
                    *ui = sqrt_t * T::standard_normal(rng).f64();
                    kinetic[c] += 0.5 * *ui * *ui;
                }
            }
        }
        let path = Trajectory { eps: &eps, steps };
        self.leapfrog(block, state, metric, path, &mut moving, scratch);
        for c in 0..b {
            if block.diverged[c].is_some() {
                continue;
            }
            let mut kinetic_new = 0.0;
            for g in 0..model.n_groups() {
                let n = model.group_len(g);
                kinetic_new += 0.5
                    * state.momentum[g][c * n..(c + 1) * n]
                        .iter()
                        .map(|u| u * u)
                        .sum::<f64>();
            }
            let log_alpha =
                -(block.energy[c] + kinetic_new - state.saved_energy[c] - kinetic[c]) / temperature;
            let u: f64 = block.rngs[c].random();
            state.proposed[c] += 1;
            if moving[c] && metropolis_accepts(log_alpha, u) {
                state.accepted[c] += 1;
            } else if moving[c] {
                self.restore(block, state, c);
            }
        }
    }
}

impl<T: Real> Kernel<T> {
    /// `steps` leapfrog steps of size `eps` (module doc) on every chain of the first block,
    /// without the Metropolis test, from its current point and the momentum u = `momentum`
    /// (per group, the block's `params` layout), which is overwritten with the final one.
    /// Returns the block's energies U at the end (NaN-free chains only move). For the tests
    /// of the integrator (reversibility, energy error).
    pub fn leapfrog_first_block<M: Model<T>>(
        &mut self,
        ens: &mut Ensemble<T, M>,
        momentum: &mut Vec<Vec<f64>>,
        eps: f64,
        steps: usize,
    ) -> Vec<f64> {
        let sampled = self.sampled(&ens.model);
        let (dynamics, threshold) = (ens.dynamics, ens.divergence_threshold);
        let (model, data, blocks) = ens.split_blocks();
        let ctx = Context {
            model,
            data,
            dynamics,
            method: self.method,
            sampled: &sampled,
            data_scale: self.data_scale,
            threshold,
            restraint: self.restraint.as_ref(),
        };
        let block = &mut blocks[0];
        let state = &mut self.states[0];
        let metric = std::mem::take(&mut state.metric);
        let mut scratch = M::Scratch::default();
        ctx.evaluate(block, &mut scratch, &mut state.work);
        state.evaluated = true;
        ctx.save(block, state);
        state.momentum = std::mem::take(momentum);
        state.kick = state.momentum.clone();
        let eps = vec![eps; block.len];
        let mut moving: Vec<bool> = block.diverged.iter().map(Option::is_none).collect();
        let path = Trajectory { eps: &eps, steps };
        ctx.leapfrog(block, state, &metric, path, &mut moving, &mut scratch);
        *momentum = std::mem::take(&mut state.momentum);
        state.metric = metric;
        block.energy.clone()
    }
}
