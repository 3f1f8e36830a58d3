//! A model-agnostic Langevin ensemble over a flat parameter vector, and the run loop of the
//! architectures that are not FCNs (CNN, softmax attention; spec 02 "Models").
//!
//! The dynamics are those of [`crate::sim::ensemble::fcn`] (paper App. A.1): U(θ) = |f(X) − y|²/(2κ) +
//! Σ_g |θ_g|²/(2 v_g), θ ← θ − η∇U(θ) + √(2ηT)·ξ. Each chain owns its parameters and its
//! ChaCha8 stream (seed, k) ([`crate::sim::ensemble::fcn::chain_rng`]); it draws its initial state group
//! by group from the prior and its noise group by group, entry by entry, in the same order as
//! the FCN sampler, so a CNN with one patch retraces the FCN chain exactly.
//!
//! Chains are advanced in blocks of consecutive chains ([`block_size_for`], fixed by the
//! problem size and E), blocks in parallel with rayon. The data terms of a block's chains are
//! evaluated together ([`FlatModel::data_gradient_block`]): the CNN's first layer reads the
//! same patch matrix for every chain, so the block's filters side by side make one GEMM, as
//! the FCN engine does with its first layer ([`crate::sim::model::fcn`]). Everything random is drawn per
//! chain, and every reduction runs in chain order, so the numbers do not depend on the thread
//! count or on the blocking.
//!
//! Collapsed posterior (`sampler.method = "collapsed"`, spec 02 (b)): both models are linear
//! in their last group, so it is integrated out exactly ([`crate::sim::model::collapsed_flat`]);
//! Langevin then moves the other groups only, and the readout is drawn from its conditional
//! before every measurement ([`FlatEnsemble::draw_readouts`]).
//!
//! Divergence (spec 02 "Robust"): a chain whose energy becomes non-finite or exceeds the
//! same threshold as the FCN sampler's is stopped and left out of every result.
//!
//! As for the FCN: cold, hot ([`FlatModel::hot_start`]) or compared starts
//! ([`crate::sim::driver::starts::run_starts`]), optional Metropolis adjustment (MALA, spec 02 (c)),
//! `adapt_step`, and the summary of [`crate::sim::driver::summary::finish`].
//!
//! One chain, its block evaluation and its MALA test are in [`crate::sim::ensemble::flat_chain`],
//! the HMC proposal in [`crate::sim::kernel::flat_hmc`].

use rayon::prelude::*;

use crate::sim::ensemble::chains::block_size_for;
use crate::sim::ensemble::chains::chain_rng;
use crate::sim::ensemble::fcn::Dynamics;
pub use crate::sim::ensemble::flat_chain::FlatChain;
use crate::sim::ensemble::flat_chain::{
    data_term_gradients, ensure_evaluated, evaluate_block, sampled_ranges, BlockWork, StepContext,
};
use crate::sim::kernel::flat_hmc::hmc_step_block;
use crate::sim::kernel::langevin::Proposal;
use crate::sim::model::collapsed_flat;
use crate::sim::model::flat::FlatModel;
use crate::sim::num::power::largest_positive_eigenvalues;
use crate::sim::num::real::Real;

/// E chains of one flat model on one training set.
#[derive(Debug)]
pub struct FlatEnsemble<T: Real, M> {
    /// The model.
    pub model: M,
    /// Training inputs.
    pub x: Vec<T>,
    /// Training targets.
    pub y: Vec<T>,
    /// P.
    pub p: usize,
    /// The chains, in chain order.
    pub chains: Vec<FlatChain<T>>,
    /// Chains evaluated together (consecutive chains; [`block_size_for`] unless set). Each
    /// chain's numbers do not depend on it (test `cnn_blocks_do_not_change_the_chains`).
    pub block: usize,
    /// κ, η, T.
    pub dynamics: Dynamics,
    /// Steps taken so far.
    pub steps_done: usize,
    /// Energy above which a chain is declared diverged.
    pub divergence_threshold: f64,
    /// The proposal of every step: unadjusted Langevin (default), MALA or HMC
    /// (`sampler.mala`, `sampler.hmc_steps`; [`Proposal::from_sampler`]).
    pub proposal: Proposal,
    /// The collapsed posterior (`sampler.method = "collapsed"`): the readout integrated out
    /// ([`crate::sim::model::collapsed_flat`]), Langevin on the other groups, readouts drawn exactly by
    /// [`FlatEnsemble::draw_readouts`].
    pub collapsed: bool,
}

impl<T: Real, M: FlatModel<T>> FlatEnsemble<T, M> {
    /// E chains started from the prior, chain k from stream (seed, k).
    pub fn new(
        model: M,
        x: &[f64],
        y: &[f64],
        chains: usize,
        seed: u64,
        dynamics: Dynamics,
    ) -> Self {
        let groups = model.groups().to_vec();
        let n = model.n_params();
        let block = block_size_for(model.chain_bytes(y.len(), std::mem::size_of::<T>()), chains);
        let chains = (0..chains)
            .map(|k| {
                let mut rng = chain_rng(seed, k);
                let mut theta = Vec::with_capacity(n);
                for g in &groups {
                    let sd = T::of(g.prior_var.sqrt());
                    for _ in 0..g.len {
                        theta.push(sd * T::standard_normal(&mut rng));
                    }
                }
                FlatChain::new(theta, groups.len(), rng)
            })
            .collect();
        let p = y.len();
        // The FCN sampler's rule (sampler.rs): 10⁴ × the scale of the starting energy.
        let scale = n as f64
            + p as f64 / dynamics.kappa
            + y.iter().map(|v| v * v).sum::<f64>() / dynamics.kappa;
        FlatEnsemble {
            model,
            x: x.iter().map(|&v| T::of(v)).collect(),
            y: y.iter().map(|&v| T::of(v)).collect(),
            p,
            chains,
            block,
            dynamics,
            steps_done: 0,
            divergence_threshold: 1e4 * scale,
            proposal: Proposal::Langevin,
            collapsed: false,
        }
    }

    /// Turns every chain's prior draw into the model's hot start ([`FlatModel::hot_start`]).
    /// Call before the first step.
    pub fn hot_start(&mut self, teacher: &[f64]) {
        for chain in &mut self.chains {
            self.model.hot_start(&mut chain.theta, teacher);
        }
    }

    /// MALA, HMC: accepted / proposed over the chains that did not diverge (`None` for
    /// unadjusted Langevin or before the first step).
    pub fn acceptance_rate(&self) -> Option<f64> {
        let (acc, prop) = self.acceptance_counts()?;
        (prop > 0).then(|| acc as f64 / prop as f64)
    }

    /// MALA, HMC: (accepted, proposed) summed over the chains that did not diverge (`None`
    /// for unadjusted Langevin).
    pub fn acceptance_counts(&self) -> Option<(u64, u64)> {
        if !self.proposal.is_metropolis() {
            return None;
        }
        let live = self.chains.iter().filter(|c| c.diverged.is_none());
        Some(live.fold((0, 0), |(a, p), c| (a + c.accepted, p + c.proposed)))
    }

    fn context(&self) -> StepContext<'_, T> {
        StepContext {
            x: &self.x,
            y: &self.y,
            p: self.p,
            dynamics: self.dynamics,
            threshold: self.divergence_threshold,
            proposal: self.proposal,
            collapsed: self.collapsed,
        }
    }

    /// Advances every live chain by `n` steps: blocks of [`FlatEnsemble::block`] chains in
    /// parallel, the chains of a block evaluated together.
    pub fn advance(&mut self, n: usize) {
        let at = StepContext {
            x: &self.x,
            y: &self.y,
            p: self.p,
            dynamics: self.dynamics,
            threshold: self.divergence_threshold,
            proposal: self.proposal,
            collapsed: self.collapsed,
        };
        let model = &self.model;
        let start = self.steps_done;
        self.chains.par_chunks_mut(self.block.max(1)).for_each_init(
            BlockWork::<T, M::Scratch>::default,
            |work, block| {
                for s in 0..n {
                    step_block(model, &at, block, start + s + 1, work);
                }
            },
        );
        self.steps_done += n;
    }

    /// Collapsed posterior: draws every live chain's readout exactly from its conditional
    /// given the chain's other groups ([`collapsed_flat::draw_readout`]), from the chain's
    /// stream, and sets its training error and readout virial — what a measurement needs.
    pub fn draw_readouts(&mut self) {
        let model = &self.model;
        let (x, y, p) = (&self.x[..], &self.y[..], self.p);
        let (kappa, temperature) = (self.dynamics.kappa, self.dynamics.temperature);
        let readout = model
            .groups()
            .last()
            .expect("a flat model has a readout group");
        let (k, prior_var, len) = (readout.len, readout.prior_var, model.n_params());
        self.chains.par_chunks_mut(self.block.max(1)).for_each_init(
            BlockWork::<T, M::Scratch>::default,
            |work, block| {
                let live: Vec<usize> = (0..block.len())
                    .filter(|&c| block[c].diverged.is_none())
                    .collect();
                let thetas: Vec<&[T]> = live.iter().map(|&c| &block[c].theta[..]).collect();
                let phis = &mut work.collapsed.phis;
                if phis.len() < thetas.len() {
                    phis.resize_with(thetas.len(), Vec::new);
                }
                model.features_block(&thetas, x, p, &mut phis[..thetas.len()], &mut work.scratch);
                for (i, &c) in live.iter().enumerate() {
                    let chain = &mut block[c];
                    // Left to the next step's evaluation to report a failure; the chain
                    // keeps its previous readout.
                    let Some(draw) = collapsed_flat::draw_readout(
                        &mut work.collapsed,
                        i,
                        y,
                        p,
                        k,
                        kappa,
                        temperature,
                        prior_var,
                        &mut chain.rng,
                    ) else {
                        continue;
                    };
                    for (t, &a) in chain.theta[len - k..].iter_mut().zip(&draw.readout) {
                        *t = T::of(a);
                    }
                    chain.sq_error = draw.sq_error;
                    *chain.virial.last_mut().expect("a readout group") = draw.virial;
                    chain.readout_mean = Some(draw.mean.iter().map(|&m| T::of(m)).collect());
                }
            },
        );
    }

    /// Collapsed: exchanges every live chain's readout with its conditional mean from the last
    /// [`FlatEnsemble::draw_readouts`] (calling it twice restores the draws). False, and nothing
    /// exchanged, unless every live chain has one.
    pub fn swap_readout_means(&mut self) -> bool {
        let len = self.model.n_params();
        let k = self.model.groups().last().map_or(0, |g| g.len);
        let live = || self.chains.iter().filter(|c| c.diverged.is_none());
        if k == 0 || !live().all(|c| c.readout_mean.as_ref().is_some_and(|m| m.len() == k)) {
            return false;
        }
        for chain in self.chains.iter_mut().filter(|c| c.diverged.is_none()) {
            if let Some(mean) = chain.readout_mean.as_mut() {
                chain.theta[len - k..].swap_with_slice(mean);
            }
        }
        true
    }

    /// Test predictions of every chain (None for diverged ones), in chain order.
    pub fn predict(&self, x_test: &[T], n: usize) -> Vec<Option<Vec<T>>> {
        let model = &self.model;
        self.chains
            .par_iter()
            .map_init(M::Scratch::default, |scratch, chain| {
                chain.diverged.is_none().then(|| {
                    let mut f = vec![T::zero(); n];
                    model.predict(&chain.theta, x_test, n, &mut f, scratch);
                    f
                })
            })
            .collect()
    }

    /// Largest Hessian eigenvalue of the sampled energy per chain (0 for diverged chains), by
    /// `iters` power iterations on Hessian–vector products: the data term's is a central
    /// difference of analytic gradients with ε = 10⁻³·(‖θ‖ + 10⁻³), the prior's is exact (the
    /// FCN sampler's estimator, spec 02 "Stiffness is the enemy"). Groups Langevin does not
    /// move (frozen, the collapsed readout) are left out; collapsed, the data term is U_c's.
    pub fn lambda_max(&self, iters: usize) -> Vec<f64> {
        let model = &self.model;
        let at = self.context();
        let groups = model.groups();
        let n = model.n_params();
        let mut moved = vec![false; n];
        for range in sampled_ranges(groups, at.collapsed) {
            moved[range].fill(true);
        }
        let mut prior_var = Vec::with_capacity(n);
        for grp in groups {
            prior_var.extend(std::iter::repeat_n(grp.prior_var, grp.len));
        }
        self.chains
            .par_iter()
            .map_init(BlockWork::<T, M::Scratch>::default, |work, chain| {
                if chain.diverged.is_some() {
                    return 0.0;
                }
                let v: Vec<f64> = (0..n)
                    .map(|i| {
                        if !moved[i] {
                            0.0
                        } else if i % 2 == 0 {
                            1.0
                        } else {
                            -0.7
                        }
                    })
                    .collect();
                let norm_theta = chain
                    .theta
                    .iter()
                    .map(|t| t.f64().powi(2))
                    .sum::<f64>()
                    .sqrt();
                let eps = 1e-3 * (norm_theta + 1e-3);
                let mut shifted = chain.theta.clone();
                let mut grad = vec![T::zero(); n];
                let mut hessian_times = |v: &[f64]| -> Vec<f64> {
                    let mut grad_at = |sign: f64| -> Vec<f64> {
                        for ((s, t), vi) in shifted.iter_mut().zip(&chain.theta).zip(v) {
                            *s = T::of(t.f64() + sign * eps * vi);
                        }
                        data_term_gradients(
                            model,
                            &at,
                            &[&shifted[..]],
                            &mut [&mut grad[..]],
                            work,
                        );
                        grad.iter().map(|g| g.f64()).collect()
                    };
                    let plus = grad_at(1.0);
                    let minus = grad_at(-1.0);
                    (0..n)
                        .map(|i| {
                            if moved[i] {
                                (plus[i] - minus[i]) / (2.0 * eps) + v[i] / prior_var[i]
                            } else {
                                0.0
                            }
                        })
                        .collect()
                };
                let hessian_times = |vs: &[Vec<f64>]| vec![hessian_times(&vs[0])];
                largest_positive_eigenvalues(hessian_times, &[v], iters)[0]
            })
            .collect()
    }
}

/// One step of every live chain of a block, by `at.proposal`: unadjusted Langevin (spec 02
/// "Sampler"), Metropolis-adjusted (spec 02 (c); [`FlatChain::metropolis`]) or one HMC
/// proposal ([`hmc_step_block`]). The chains' data terms are evaluated together; everything
/// random is drawn per chain from its own stream, in the order of a chain stepped alone, so no
/// chain's numbers depend on the block.
fn step_block<T: Real, M: FlatModel<T>>(
    model: &M,
    at: &StepContext<'_, T>,
    block: &mut [FlatChain<T>],
    global_step: usize,
    work: &mut BlockWork<T, M::Scratch>,
) {
    let live = |block: &[FlatChain<T>]| -> Vec<bool> {
        block.iter().map(|c| c.diverged.is_none()).collect()
    };
    match at.proposal {
        Proposal::Langevin => {
            let mask = live(block);
            evaluate_block(model, at, block, &mask, work);
            for (chain, &m) in block.iter_mut().zip(&mask) {
                if m && !chain.check(at.threshold, global_step) {
                    chain.move_by_langevin(model, at);
                }
            }
        }
        Proposal::MetropolisLangevin => {
            // MALA caches U and ∇U of the current point: evaluate only chains that have none
            // yet.
            ensure_evaluated(model, at, block, global_step, work);
            let mask = live(block);
            for (chain, &m) in block.iter_mut().zip(&mask) {
                if m {
                    chain.save();
                    chain.move_by_langevin(model, at);
                }
            }
            evaluate_block(model, at, block, &mask, work);
            for (chain, &m) in block.iter_mut().zip(&mask) {
                if m {
                    chain.metropolis(model, at);
                }
            }
        }
        Proposal::Hmc { leapfrog_steps } => {
            hmc_step_block(model, at, block, leapfrog_steps, global_step, work);
        }
    }
}
