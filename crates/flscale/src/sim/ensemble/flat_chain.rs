//! One chain of the flat-parameter models (CNN, softmax attention) and what a step does to
//! it: the block evaluation of U, ∇U, the training error and the virials of several chains at
//! once, the unadjusted Langevin move and the MALA test ([`FlatChain::metropolis`]), and the
//! save/restore of a proposal's starting point that MALA and HMC
//! ([`crate::sim::kernel::flat_hmc`]) share. The ensemble and its step loop are in
//! [`crate::sim::ensemble::flat`] (module doc: dynamics, blocking, collapsed posterior).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::sim::ensemble::chains::Divergence;
use crate::sim::ensemble::fcn::Dynamics;
use crate::sim::kernel::langevin::{
    add_proposal_norms, langevin_move, mala_log_alpha, metropolis_accepts, Proposal,
};
use crate::sim::model::collapsed_flat::{self, CollapsedWork};
use crate::sim::model::flat::{FlatModel, ParamGroup};
use crate::sim::model::prior::add_gaussian_prior;
use crate::sim::num::real::Real;

/// One chain: its parameters, gradient, stream and status.
#[derive(Debug, Clone)]
pub struct FlatChain<T> {
    /// Parameters, groups one after the other.
    pub theta: Vec<T>,
    pub(crate) grad: Vec<T>,
    pub(crate) rng: ChaCha8Rng,
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
    pub(crate) failure: Option<String>,
    /// Collapsed: E[readout | hidden weights] at the last draw (Rao–Blackwellised predictions).
    pub(crate) readout_mean: Option<Vec<T>>,
    /// MALA, HMC: whether `grad`, `energy`, … hold the values at the current θ.
    pub(crate) evaluated: bool,
    /// MALA, HMC: the current point while a proposal is judged.
    saved: Option<SavedPoint<T>>,
    /// HMC: the momentum u of the current trajectory (f64, the layout of `theta`; only the
    /// moved groups' entries are used); empty until the first HMC proposal.
    pub(crate) momentum: Vec<f64>,
    /// MALA, HMC: proposals made and accepted.
    pub(crate) proposed: u64,
    pub(crate) accepted: u64,
}

/// The index ranges of the groups that Langevin moves: not frozen, and not the readout (the
/// last group) when `collapsed`.
pub(crate) fn sampled_ranges(
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
pub(crate) struct StepContext<'a, T> {
    pub(crate) x: &'a [T],
    pub(crate) y: &'a [T],
    pub(crate) p: usize,
    pub(crate) dynamics: Dynamics,
    pub(crate) threshold: f64,
    pub(crate) proposal: Proposal,
    pub(crate) collapsed: bool,
}

/// A chain's state at its current point, kept while a MALA or HMC proposal is evaluated.
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
pub(crate) struct BlockWork<T, S> {
    pub(crate) scratch: S,
    pub(crate) collapsed: CollapsedWork<T>,
    sq: Vec<f64>,
    data_energy: Vec<f64>,
    failure: Vec<Option<String>>,
}

/// The data term of U — |f − y|²/(2κ), or collapsed the non-prior part of U_c — and its
/// gradient for the chains `thetas` of a block, together: gradients into `grads`, and into
/// `work` the data energies, the training errors Σ(f − y)² and the failures.
pub(crate) fn data_term_gradients<T: Real, M: FlatModel<T>>(
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
pub(crate) fn evaluate_block<T: Real, M: FlatModel<T>>(
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

/// MALA, HMC: U and ∇U of a chain's current point are cached between proposals; evaluates the
/// live chains of `block` that have none yet (the first proposal, a new start) together, and
/// stops those whose energy cannot be evaluated or is beyond the divergence threshold.
pub(crate) fn ensure_evaluated<T: Real, M: FlatModel<T>>(
    model: &M,
    at: &StepContext<'_, T>,
    block: &mut [FlatChain<T>],
    global_step: usize,
    work: &mut BlockWork<T, M::Scratch>,
) {
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
}

impl<T: Real> FlatChain<T> {
    /// A chain at `theta` (groups one after the other) with its stream, nothing evaluated.
    pub(crate) fn new(theta: Vec<T>, n_groups: usize, rng: ChaCha8Rng) -> Self {
        FlatChain {
            grad: vec![T::zero(); theta.len()],
            theta,
            rng,
            diverged: None,
            energy: 0.0,
            sq_error: 0.0,
            virial: vec![0.0; n_groups],
            failure: None,
            readout_mean: None,
            evaluated: false,
            saved: None,
            momentum: Vec::new(),
            proposed: 0,
            accepted: 0,
        }
    }

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
    pub(crate) fn check(&mut self, threshold: f64, global_step: usize) -> bool {
        let failure = self.failure.take();
        self.diverged = Divergence::check(self.energy, failure.as_deref(), threshold, global_step);
        self.diverged.is_some()
    }

    /// θ ← θ − η∇U(θ) + √(2ηT)·ξ on the sampled groups (paper App. A.1), the noise drawn group
    /// by group, entry by entry, from the chain's stream.
    pub(crate) fn move_by_langevin<M: FlatModel<T>>(&mut self, model: &M, at: &StepContext<'_, T>) {
        let dynamics = at.dynamics;
        let eta = T::of(dynamics.step);
        let noise = T::of((2.0 * dynamics.step * dynamics.temperature).sqrt());
        for range in sampled_ranges(model.groups(), at.collapsed) {
            let (theta, grad) = (&mut self.theta[range.clone()], &self.grad[range]);
            langevin_move(theta, grad, eta, noise, &mut self.rng);
        }
    }

    /// MALA, HMC: keeps the current point while a proposal is evaluated.
    pub(crate) fn save(&mut self) {
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
    pub(crate) fn metropolis<M: FlatModel<T>>(&mut self, model: &M, at: &StepContext<'_, T>) {
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
        self.restore();
    }

    /// MALA, HMC: returns to the point kept by [`Self::save`], with its U, ∇U, training error
    /// and virials.
    pub(crate) fn restore(&mut self) {
        let saved = self.saved.as_ref().expect("saved before the proposal");
        self.theta.copy_from_slice(&saved.theta);
        self.grad.copy_from_slice(&saved.grad);
        self.energy = saved.energy;
        self.sq_error = saved.sq_error;
        self.virial.copy_from_slice(&saved.virial);
    }

    /// MALA, HMC: U at the point kept by [`Self::save`].
    pub(crate) fn saved_energy(&self) -> f64 {
        self.saved
            .as_ref()
            .expect("saved before the proposal")
            .energy
    }
}
