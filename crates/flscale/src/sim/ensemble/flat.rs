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

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::sim::ensemble::chains::{block_size_for, chain_rng, Divergence};
use crate::sim::ensemble::fcn::Dynamics;
use crate::sim::kernel::langevin::{
    add_proposal_norms, langevin_move, mala_log_alpha, metropolis_accepts,
};
use crate::sim::model::collapsed_flat::{self, CollapsedWork};
use crate::sim::model::flat::{FlatModel, ParamGroup};
use crate::sim::model::prior::add_gaussian_prior;
use crate::sim::num::power::largest_positive_eigenvalues;
use crate::sim::num::real::Real;

/// One chain: its parameters, gradient, stream and status.
#[derive(Debug, Clone)]
pub struct FlatChain<T> {
    /// Parameters, groups one after the other.
    pub theta: Vec<T>,
    grad: Vec<T>,
    rng: ChaCha8Rng,
    /// `Some` once the chain has diverged.
    pub diverged: Option<Divergence>,
    /// U at the last gradient evaluation.
    pub energy: f64,
    /// Σ_μ (f − y)² on the training set at the last gradient evaluation (collapsed: at the
    /// readout drawn for the last measurement).
    pub sq_error: f64,
    /// θ_g·∇_g U per group at the last gradient evaluation (collapsed readout: at its last
    /// draw).
    pub virial: Vec<f64>,
    /// Why the last evaluation failed (the collapsed energy's Cholesky), if it did.
    failure: Option<String>,
    /// Collapsed: E[readout | hidden weights] at the last draw (Rao–Blackwellised predictions).
    readout_mean: Option<Vec<T>>,
    /// MALA: whether `grad`, `energy`, … hold the values at the current θ.
    evaluated: bool,
    /// MALA: the current point while a proposal is judged.
    saved: Option<SavedPoint<T>>,
    /// MALA proposals made and accepted.
    proposed: u64,
    accepted: u64,
}

/// The index ranges of the groups that Langevin moves: not frozen, and not the readout (the
/// last group) when `collapsed`.
fn sampled_ranges(
    groups: &[ParamGroup],
    collapsed: bool,
) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let last = groups.len().saturating_sub(1);
    groups
        .iter()
        .enumerate()
        .scan(0, move |start, (g, grp)| {
            let range = *start..*start + grp.len;
            *start += grp.len;
            let integrated_out = collapsed && g == last;
            Some((!grp.frozen && !integrated_out).then_some(range))
        })
        .flatten()
}

/// What every step of every chain reads: the training set, the dynamics, the divergence
/// threshold and the variant of the sampler.
struct StepContext<'a, T> {
    x: &'a [T],
    y: &'a [T],
    p: usize,
    dynamics: Dynamics,
    threshold: f64,
    mala: bool,
    collapsed: bool,
}

/// A chain's state at its current point, kept while a MALA proposal is evaluated.
#[derive(Debug, Clone)]
struct SavedPoint<T> {
    theta: Vec<T>,
    grad: Vec<T>,
    energy: f64,
    sq_error: f64,
    virial: Vec<f64>,
}

/// Work buffers of one rayon task: the model's scratch, the collapsed evaluation's, and the
/// per-chain outputs of a block evaluation.
#[derive(Debug, Default)]
struct BlockWork<T, S> {
    scratch: S,
    collapsed: CollapsedWork<T>,
    sq: Vec<f64>,
    data_energy: Vec<f64>,
    failure: Vec<Option<String>>,
}

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
    /// Metropolis-adjusted steps (MALA, `sampler.mala`).
    pub mala: bool,
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
                FlatChain {
                    theta,
                    grad: vec![T::zero(); n],
                    rng,
                    diverged: None,
                    energy: 0.0,
                    sq_error: 0.0,
                    virial: vec![0.0; groups.len()],
                    failure: None,
                    readout_mean: None,
                    evaluated: false,
                    saved: None,
                    proposed: 0,
                    accepted: 0,
                }
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
            mala: false,
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

    /// MALA: accepted / proposed over the chains that did not diverge (`None` without MALA or
    /// before the first step).
    pub fn acceptance_rate(&self) -> Option<f64> {
        let (acc, prop) = self.acceptance_counts()?;
        (prop > 0).then(|| acc as f64 / prop as f64)
    }

    /// MALA: (accepted, proposed) summed over the chains that did not diverge (`None` without
    /// MALA).
    pub fn acceptance_counts(&self) -> Option<(u64, u64)> {
        if !self.mala {
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
            mala: self.mala,
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
            mala: self.mala,
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

/// The data term of U — |f − y|²/(2κ), or collapsed the non-prior part of U_c — and its
/// gradient for the chains `thetas` of a block, together: gradients into `grads`, and into
/// `work` the data energies, the training errors Σ(f − y)² and the failures.
fn data_term_gradients<T: Real, M: FlatModel<T>>(
    model: &M,
    at: &StepContext<'_, T>,
    thetas: &[&[T]],
    grads: &mut [&mut [T]],
    work: &mut BlockWork<T, M::Scratch>,
) {
    let b = thetas.len();
    work.sq.resize(b, 0.0);
    work.data_energy.resize(b, 0.0);
    work.failure.clear();
    work.failure.resize(b, None);
    let kappa = at.dynamics.kappa;
    if at.collapsed {
        collapsed_flat::data_gradient_block(
            model,
            thetas,
            at.x,
            at.y,
            at.p,
            kappa,
            at.dynamics.temperature,
            grads,
            &mut work.data_energy,
            &mut work.sq,
            &mut work.failure,
            &mut work.scratch,
            &mut work.collapsed,
        );
    } else {
        let inv_kappa = T::of(1.0 / kappa);
        model.data_gradient_block(
            thetas,
            at.x,
            at.y,
            at.p,
            inv_kappa,
            grads,
            &mut work.sq,
            &mut work.scratch,
        );
        for (e, s) in work.data_energy.iter_mut().zip(&work.sq) {
            *e = s / (2.0 * kappa);
        }
    }
}

/// Evaluates ∇U, U, the training error and the per-group virials of the chains of `block`
/// with `mask[c]`, their data terms together ([`data_term_gradients`]).
fn evaluate_block<T: Real, M: FlatModel<T>>(
    model: &M,
    at: &StepContext<'_, T>,
    block: &mut [FlatChain<T>],
    mask: &[bool],
    work: &mut BlockWork<T, M::Scratch>,
) {
    let (thetas, mut grads): (Vec<&[T]>, Vec<&mut [T]>) = block
        .iter_mut()
        .zip(mask)
        .filter(|(_, m)| **m)
        .map(|(c, _)| (&c.theta[..], &mut c.grad[..]))
        .unzip();
    if thetas.is_empty() {
        return;
    }
    data_term_gradients(model, at, &thetas, &mut grads, work);
    let chains = block.iter_mut().zip(mask).filter(|(_, m)| **m);
    for (i, (chain, _)) in chains.enumerate() {
        chain.sq_error = work.sq[i];
        chain.failure = work.failure[i].take();
        chain.add_prior(model, work.data_energy[i], at.collapsed);
    }
}

/// One step of every live chain of a block: unadjusted Langevin (spec 02 "Sampler"), or with
/// `at.mala` Metropolis-adjusted (spec 02 (c); [`FlatChain::metropolis`]). The chains' data
/// terms are evaluated together; everything random is drawn per chain from its own stream, in
/// the order of a chain stepped alone, so no chain's numbers depend on the block.
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
    if !at.mala {
        let mask = live(block);
        evaluate_block(model, at, block, &mask, work);
        for (chain, &m) in block.iter_mut().zip(&mask) {
            if m && !chain.check(at.threshold, global_step) {
                chain.move_by_langevin(model, at);
            }
        }
        return;
    }
    // MALA caches U and ∇U of the current point: evaluate only chains that have none yet.
    let fresh: Vec<bool> = block
        .iter()
        .map(|c| c.diverged.is_none() && !c.evaluated)
        .collect();
    evaluate_block(model, at, block, &fresh, work);
    for (chain, &f) in block.iter_mut().zip(&fresh) {
        if f {
            chain.evaluated = true;
            chain.check(at.threshold, global_step);
        }
    }
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

impl<T: Real> FlatChain<T> {
    /// Completes an evaluation whose data term (`data_energy`, gradient in `grad`) is done:
    /// adds the prior's gradient θ/v and energy |θ|²/(2v) and sets the per-group virials
    /// θ_g·∇_g U — for every group but the collapsed readout, which is not in U_c.
    fn add_prior<M: FlatModel<T>>(&mut self, model: &M, data_energy: f64, collapsed: bool) {
        let mut energy = data_energy;
        let mut start = 0;
        let last = model.groups().len() - 1;
        for (g, grp) in model.groups().iter().enumerate() {
            let range = start..start + grp.len;
            start += grp.len;
            if collapsed && g == last {
                continue;
            }
            let (theta, grad) = (&self.theta[range.clone()], &mut self.grad[range]);
            let (prior, virial) = add_gaussian_prior(theta, grad, grp.prior_var);
            energy += prior;
            self.virial[g] = virial;
        }
        self.energy = energy;
    }

    /// Stops the chain if its evaluation failed or its energy is non-finite or beyond
    /// `threshold`; true if stopped.
    fn check(&mut self, threshold: f64, global_step: usize) -> bool {
        let failure = self.failure.take();
        self.diverged = Divergence::check(self.energy, failure.as_deref(), threshold, global_step);
        self.diverged.is_some()
    }

    /// θ ← θ − η∇U(θ) + √(2ηT)·ξ on the sampled groups (paper App. A.1), the noise drawn group
    /// by group, entry by entry, from the chain's stream.
    fn move_by_langevin<M: FlatModel<T>>(&mut self, model: &M, at: &StepContext<'_, T>) {
        let dynamics = at.dynamics;
        let eta = T::of(dynamics.step);
        let noise = T::of((2.0 * dynamics.step * dynamics.temperature).sqrt());
        for range in sampled_ranges(model.groups(), at.collapsed) {
            let (theta, grad) = (&mut self.theta[range.clone()], &self.grad[range]);
            langevin_move(theta, grad, eta, noise, &mut self.rng);
        }
    }

    /// MALA: keeps the current point while a proposal is evaluated.
    fn save(&mut self) {
        let saved = self.saved.get_or_insert_with(|| SavedPoint {
            theta: Vec::new(),
            grad: Vec::new(),
            energy: 0.0,
            sq_error: 0.0,
            virial: Vec::new(),
        });
        saved.theta.clone_from(&self.theta);
        saved.grad.clone_from(&self.grad);
        saved.energy = self.energy;
        saved.sq_error = self.sq_error;
        saved.virial.clone_from(&self.virial);
    }

    /// MALA (spec 02 (c)): the Langevin proposal θ′ of [`Self::move_by_langevin`], evaluated,
    /// is accepted with probability min(1, α),
    ///
    /// log α = −(U(θ′) − U(θ))/T − (|θ − θ′ + η∇U(θ′)|² − |θ′ − θ + η∇U(θ)|²)/(4ηT)
    ///
    /// (Roberts & Tweedie 1996, Bernoulli 2:341, eq. 2.2; the norms over the sampled groups),
    /// with a uniform from the chain's stream drawn after the proposal's noise; otherwise the
    /// chain returns to θ. exp(−U/T) is then exactly invariant for any η. U and ∇U of the
    /// current point are cached, so a step costs one evaluation, as an unadjusted one; a
    /// non-finite proposal is rejected, and only a non-finite or exploding starting point
    /// stops the chain.
    fn metropolis<M: FlatModel<T>>(&mut self, model: &M, at: &StepContext<'_, T>) {
        let saved = self.saved.as_ref().expect("saved before the proposal");
        let eta = at.dynamics.step;
        let (mut forward_sq, mut backward_sq) = (0.0, 0.0);
        for range in sampled_ranges(model.groups(), at.collapsed) {
            add_proposal_norms(
                &saved.theta[range.clone()],
                &self.theta[range.clone()],
                &saved.grad[range.clone()],
                &self.grad[range],
                eta,
                1.0,
                &mut forward_sq,
                &mut backward_sq,
            );
        }
        let temperature = at.dynamics.temperature;
        let log_alpha = mala_log_alpha(
            self.energy,
            saved.energy,
            forward_sq,
            backward_sq,
            eta,
            temperature,
        );
        let u: f64 = self.rng.random();
        self.proposed += 1;
        let evaluated = self.failure.take().is_none() && self.energy.is_finite();
        if evaluated && metropolis_accepts(log_alpha, u) {
            self.accepted += 1;
            return;
        }
        self.theta.copy_from_slice(&saved.theta);
        self.grad.copy_from_slice(&saved.grad);
        self.energy = saved.energy;
        self.sq_error = saved.sq_error;
        self.virial.copy_from_slice(&saved.virial);
    }
}
