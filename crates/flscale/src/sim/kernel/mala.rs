//! Langevin steps with the gradient cached between steps, on either posterior — the plain one
//! (every weight) or the collapsed one (hidden weights, readout integrated out; [`collapsed`])
//! — and the optional Metropolis adjustment (MALA; spec 02 (c)).
//!
//! A step proposes θ′ = θ − η∇U(θ) + √(2ηT)ξ for the sampled groups and evaluates U and ∇U at
//! θ′ (that gradient is the next step's drift, so an unadjusted step still costs one
//! evaluation). With `mala`, θ′ is accepted with probability min(1, α),
//!
//! log α = −(U(θ′) − U(θ))/T − (|θ − θ′ + η∇U(θ′)|² − |θ′ − θ + η∇U(θ)|²)/(4ηT)
//!
//! (Roberts & Tweedie 1996, Bernoulli 2:341, eq. 2.2 with the Gaussian proposal
//! q(θ′|θ) = 𝒩(θ − η∇U(θ), 2ηT·I); with a constant preconditioner M every η becomes ηM and
//! every squared norm is taken in the metric M⁻¹), from a uniform of the chain's own stream; otherwise the
//! chain stays at θ. The chain then leaves exp(−U/T) exactly invariant for any η, and a
//! non-finite proposal is simply rejected. Without `mala` a non-finite or exploding energy
//! stops the chain (divergence, as in the plain sampler).
//!
//! With `hmc_steps = L` a proposal is instead a Hamiltonian trajectory (HMC; Neal, "MCMC
//! using Hamiltonian dynamics", *Handbook of Markov Chain Monte Carlo* (2011) ch. 5: sec. 5.3.2
//! for the algorithm, 5.4.1 for the mass matrix): with the metric M = KKᵀ as inverse mass
//! matrix, momentum p ~ 𝒩(0, T·M⁻¹) and H = U(θ) + ½pᵀMp, written in u = Kᵀp ~ 𝒩(0, T·I) so
//! that only K and Kᵀ are applied (H = U + ½|u|²). L leapfrog steps of size ε,
//!
//! u ← u − (ε/2)·Kᵀ∇U(θ),  θ ← θ + ε·Ku,  u ← u − (ε/2)·Kᵀ∇U(θ),
//!
//! (Neal sec. 5.2.3.3, the leapfrog method) are volume-preserving and reversible under u → −u,
//! so accepting with min(1, exp(−(H′ − H)/T)) leaves exp(−U/T) exactly invariant (Neal
//! sec. 5.3.2.2). One leapfrog step is the MALA proposal with η = ε²/2:
//! θ′ = θ − (ε²/2)M∇U + ε√T·Kξ; so ε = √(2η) and the step adaptation carries over. ε is
//! jittered per proposal and chain, uniformly in [0.8ε, 1.2ε] from the chain's stream, against
//! the periodic trajectories a fixed εL can return on (Neal sec. 5.4.2.3); the jitter does not
//! depend on the state, so the kernel for each ε is reversible and so is their mixture. A
//! proposal costs L gradient evaluations; a chain whose energy cannot be evaluated along the
//! trajectory is put back at its start at once and its proposal rejected.
//!
//! The HMC trajectory and its test are in [`crate::sim::kernel::hmc`], the preconditioner in
//! [`crate::sim::kernel::metric`], the move and the MALA ratio shared with the other engine in
//! [`crate::sim::langevin`].
//!
//! The plain posterior without MALA keeps the sampler's own fused step
//! ([`Ensemble::advance`]); this module is used when `sampler.method = "collapsed"` or
//! `sampler.mala = true`.
//!
//! [`collapsed`]: crate::sim::model::collapsed

use rand::Rng;
use rayon::prelude::*;

use crate::sim::config::{MetricKind, Preconditioner, SamplerMethod};
use crate::sim::ensemble::fcn::{ChainBlock, Divergence, Dynamics, Ensemble, PooledScratch};
use crate::sim::kernel::metric::{
    lower_times_by_columns, lower_transposed_times, Metric, MetricLayout, VarianceWindow,
};
use crate::sim::langevin::{
    add_proposal_norms, add_proposal_norms_diagonal, langevin_move, langevin_move_diagonal,
    mala_log_alpha, metropolis_accepts, Proposal,
};
use crate::sim::model::collapsed::{self, CollapsedWork};
use crate::sim::model::interface::{DataTerm, Model};
use crate::sim::model::prior::add_gaussian_prior;
use crate::sim::num::real::Real;
use crate::sim::restraint::Restraint;

/// Per-block state: the saved current point while a proposal is judged, acceptance counts.
#[derive(Debug)]
pub(super) struct BlockState<T> {
    pub(super) evaluated: bool,
    pub(super) saved_params: Vec<Vec<T>>,
    pub(super) saved_grads: Vec<Vec<T>>,
    pub(super) saved_energy: Vec<f64>,
    pub(super) saved_sq_error: Vec<f64>,
    pub(super) saved_data_loss: Vec<f64>,
    pub(super) saved_virial: Vec<Vec<f64>>,
    pub(super) proposed: Vec<u64>,
    pub(super) accepted: Vec<u64>,
    pub(super) work: CollapsedWork<T>,
    /// The preconditioner of the last hidden layer.
    pub(super) metric: Metric,
    /// Sum over the averaged adaptations of the curvature estimates (b·N scalars g_i or
    /// b·N blocks v·G_i, as [`collapsed::neuron_curvature`] and
    /// [`collapsed::neuron_curvature_blocks`] return them) and their number.
    pub(super) curvature_sum: Vec<f64>,
    pub(super) curvature_count: usize,
    /// `sampler.metric = "diag"`: the draws of the current burn-in window.
    pub(super) variance: VarianceWindow,
    /// HMC: the momentum u = Kᵀp per group (f64, the layout of `params`) and a work vector of
    /// the same shape; empty until the first HMC step.
    pub(super) momentum: Vec<Vec<f64>>,
    pub(super) kick: Vec<Vec<f64>>,
    /// The MALA step's work vectors, kept so that a step allocates nothing.
    pub(super) moves: MoveWork,
}

/// Work vectors of one MALA step ([`Context::propose`], [`Context::accept_or_reject`]).
#[derive(Debug, Default)]
pub(super) struct MoveWork {
    /// Per chain |ξ|² of the blockwise group's noise (its forward MALA term).
    xi_sq: Vec<f64>,
    /// n_in-vectors of the blockwise metric: the operand and the two products of a neuron's
    /// factors.
    tmp: Vec<f64>,
    drift: Vec<f64>,
    noise: Vec<f64>,
}

impl MoveWork {
    /// Sizes the vectors for `b` chains and `n_in` inputs per neuron; `xi_sq` starts at zero.
    fn reset(&mut self, b: usize, n_in: usize) {
        self.xi_sq.clear();
        self.xi_sq.resize(b, 0.0);
        for v in [&mut self.tmp, &mut self.drift, &mut self.noise] {
            v.resize(n_in, 0.0);
        }
    }
}

/// The cached-gradient Langevin kernel of an ensemble (see the module doc).
#[derive(Debug)]
pub struct Kernel<T> {
    /// Plain or collapsed posterior.
    pub method: SamplerMethod,
    /// ULA, MALA or HMC ([`Proposal`], from `sampler.mala` and `sampler.hmc_steps`).
    pub proposal: Proposal,
    /// Which preconditioner [`Kernel::adapt_preconditioner`] sets (collapsed only; default
    /// `Block`).
    pub preconditioner: Preconditioner,
    /// `sampler.metric`: with `Diag`, the diagonal metric set at the end of every window of
    /// the burn-in ([`Kernel::end_metric_window`]) in place of the preconditioner.
    pub metric: MetricKind,
    /// Whether every step's draw goes into the current window ([`Kernel::gather_variances`]).
    pub(super) gathering: bool,
    /// The inverse temperature β of the data term (replica exchange, [`crate::sim::kernel::tempering`]):
    /// the kernel samples exp(−(β·D(θ) + prior(θ))/T), D the data term of the posterior
    /// it runs on — L for the plain posterior, the collapsed data term −T·log ∫p(a)e^{−L/T}da
    /// for the collapsed one. 1 (default) is the posterior itself, and then no arithmetic
    /// changes.
    pub data_scale: f64,
    /// An umbrella window's bias V(s(θ)) ([`Restraint`]): in the energy the Metropolis tests
    /// compare and, as V′(s)·∇s, in the force, unscaled by `data_scale` (it belongs to every
    /// replica's density, as the prior does). λ_max, and so the adapted step, is that of U: the
    /// restraint's curvature κ|∇s|² is a small part of the stiffness at the window widths
    /// [`crate::free_energy`] uses. Where U has no positive curvature — a barrier top, where
    /// λ_max of U is ≤ 0 and the step stayed at its bound `sampler.step` with acceptances of
    /// 0.05–0.2 — it is that of U + ½κ(s − s₀)². The flattening term B(s) stays out: B ≈ −F̂
    /// is concave where F is convex, and with B (and the harmonic part) in every window's
    /// λ_max the sign example's edge windows (c → ±1) got steps at the bound, chains with
    /// τ = 220–310 samples and P(c < 0) = 0.14 and 0.90 at seeds 5 and 6, both refused by
    /// the overlap check (RESULTS.md, "Free energy: the sign-symmetry case").
    pub restraint: Option<Restraint>,
    pub(super) states: Vec<BlockState<T>>,
}

impl<T: Real> Kernel<T> {
    /// A kernel for `ens`'s blocks.
    pub fn new<M: Model<T>>(
        ens: &Ensemble<T, M>,
        method: SamplerMethod,
        proposal: Proposal,
    ) -> Kernel<T> {
        let states = ens
            .blocks
            .iter()
            .map(|b| BlockState {
                evaluated: false,
                saved_params: b.params.clone(),
                saved_grads: b.params.iter().map(|g| vec![T::zero(); g.len()]).collect(),
                saved_energy: vec![0.0; b.len],
                saved_sq_error: vec![0.0; b.len],
                saved_data_loss: vec![0.0; b.len],
                saved_virial: b.virial.clone(),
                proposed: vec![0; b.len],
                accepted: vec![0; b.len],
                work: CollapsedWork::default(),
                metric: Metric::default(),
                curvature_sum: Vec::new(),
                curvature_count: 0,
                variance: VarianceWindow::default(),
                momentum: Vec::new(),
                kick: Vec::new(),
                moves: MoveWork::default(),
            })
            .collect();
        Kernel {
            method,
            proposal,
            preconditioner: Preconditioner::Block,
            metric: MetricKind::Identity,
            gathering: false,
            data_scale: 1.0,
            restraint: None,
            states,
        }
    }

    /// Which groups Langevin moves: not frozen, and not the readout when it is collapsed.
    pub(super) fn sampled<M: Model<T>>(&self, model: &M) -> Vec<bool> {
        (0..model.n_groups())
            .map(|g| {
                let collapsed_readout =
                    self.method == SamplerMethod::Collapsed && g + 1 == model.n_groups();
                !(model.is_frozen(g) || collapsed_readout)
            })
            .collect()
    }

    /// Advances every chain by `n` steps, blocks in parallel.
    pub fn advance<M: Model<T>>(&mut self, ens: &mut Ensemble<T, M>, n: usize) {
        let (dynamics, threshold) = (ens.dynamics, ens.divergence_threshold);
        let start = ens.steps_done;
        let (model, data, blocks, pool) = ens.split_blocks_pooled();
        let sampled = self.sampled(model);
        let (method, proposal) = (self.method, self.proposal);
        let data_scale = self.data_scale;
        let restraint = self.restraint.as_ref();
        let gathering = self.gathering;
        blocks
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .for_each_init(
                || PooledScratch::take(pool),
                |pooled, (block, state)| {
                    let scratch = &mut pooled.scratch;
                    let ctx = Context {
                        model,
                        data,
                        dynamics,
                        method,
                        sampled: &sampled,
                        data_scale,
                        threshold,
                        restraint,
                    };
                    let metric = std::mem::take(&mut state.metric);
                    // The whole step in the CPU's vector build (simd.rs), as the plain sampler's.
                    crate::sim::num::simd::vectorized_if(
                        M::VECTOR_BUILD,
                        #[inline(always)]
                        || {
                            for s in 0..n {
                                let step = start + s + 1;
                                match proposal {
                                    Proposal::Hmc { leapfrog_steps } => ctx.hmc_step(
                                        block,
                                        state,
                                        &metric,
                                        leapfrog_steps,
                                        step,
                                        scratch,
                                    ),
                                    Proposal::MetropolisLangevin | Proposal::Langevin => ctx.step(
                                        block,
                                        state,
                                        &metric,
                                        proposal.is_metropolis(),
                                        step,
                                        scratch,
                                    ),
                                }
                                if gathering {
                                    state.variance.add(&block.params, &sampled);
                                }
                            }
                        },
                    );
                    state.metric = metric;
                },
            );
        ens.steps_done += n;
    }

    /// Forgets the cached energies and gradients, so that the next step evaluates them at the
    /// current parameters (after the parameters or `data_scale` were changed from outside,
    /// e.g. by a replica swap).
    pub fn invalidate(&mut self) {
        for state in &mut self.states {
            state.evaluated = false;
        }
    }

    /// Evaluates U, ∇U, the training error and the virial of every chain at its current
    /// parameters now (after an outside change of them, so that a measurement sees their
    /// values), with the divergence check.
    pub fn refresh<M: Model<T>>(&mut self, ens: &mut Ensemble<T, M>) {
        self.invalidate();
        let dynamics = ens.dynamics;
        let (threshold, step) = (ens.divergence_threshold, ens.steps_done);
        let (model, data, blocks, pool) = ens.split_blocks_pooled();
        let sampled = self.sampled(model);
        let (method, data_scale) = (self.method, self.data_scale);
        let restraint = self.restraint.as_ref();
        blocks
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .for_each_init(
                || PooledScratch::take(pool),
                |pooled, (block, state)| {
                    let scratch = &mut pooled.scratch;
                    let ctx = Context {
                        model,
                        data,
                        dynamics,
                        method,
                        sampled: &sampled,
                        data_scale,
                        threshold,
                        restraint,
                    };
                    ctx.ensure_evaluated(block, state, scratch, step);
                },
            );
    }

    /// Prepares the chains for a measurement: with the collapsed posterior, draws every
    /// chain's readout exactly from its conditional (so that predictions, training error and
    /// the readout's statistics are those of a posterior sample).
    pub fn prepare_measurement<M: Model<T>>(&mut self, ens: &mut Ensemble<T, M>) {
        if self.method != SamplerMethod::Collapsed {
            return;
        }
        let dynamics = ens.dynamics;
        let (model, data, blocks, pool) = ens.split_blocks_pooled();
        blocks
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .for_each_init(
                || PooledScratch::take(pool),
                |pooled, (block, state)| {
                    let scratch = &mut pooled.scratch;
                    crate::sim::num::simd::vectorized_if(
                        M::VECTOR_BUILD,
                        #[inline(always)]
                        || {
                            collapsed::draw_readouts(
                                block,
                                model,
                                &data,
                                dynamics.temperature,
                                scratch,
                                &mut state.work,
                            )
                        },
                    );
                },
            );
    }

    /// Collapsed posterior only (`None` otherwise, and before the first
    /// [`Kernel::prepare_measurement`]): per block, in the layout of its readout group, every
    /// chain's conditional mean m = E[a | W] at the last draw — the readouts of the
    /// Rao–Blackwellised predictions E[f | W] (`collapsed` module doc;
    /// [`crate::sim::observe::overlaps::Probe::predict_with_readouts`]).
    pub fn conditional_means<'a, M: Model<T>>(
        &'a self,
        ens: &Ensemble<T, M>,
    ) -> Option<Vec<&'a [T]>> {
        if self.method != SamplerMethod::Collapsed {
            return None;
        }
        let readout = ens.model.n_groups() - 1;
        let ready = ens
            .blocks
            .iter()
            .zip(&self.states)
            .all(|(b, s)| s.work.conditional_means.len() == b.params[readout].len());
        ready.then(|| {
            self.states
                .iter()
                .map(|s| &s.work.conditional_means[..])
                .collect()
        })
    }

    /// Largest Hessian eigenvalue of the sampled energy per chain (chain order; 0 for
    /// diverged chains), by power iteration on finite-difference Hessian–vector products of
    /// the sampled groups ([`ChainBlock::lambda_max_of`]). In a restrained window, of U alone
    /// where that is positive, and of U + ½κ(s − s₀)² for the chains where it is not
    /// ([`Kernel::restraint`]).
    pub fn lambda_max<M: Model<T>>(&mut self, ens: &mut Ensemble<T, M>, iters: usize) -> Vec<f64> {
        let mut lambda = self.lambda_max_with(ens, iters, None);
        let stuck = |l: &f64| !(*l > 0.0);
        if let (Some(r), true) = (&self.restraint, lambda.iter().any(stuck)) {
            let harmonic = Restraint {
                flattening: None,
                ..r.clone()
            };
            let restrained = self.lambda_max_with(ens, iters, Some(&harmonic));
            for (l, with) in lambda.iter_mut().zip(restrained) {
                if stuck(l) {
                    *l = with;
                }
            }
        }
        lambda
    }

    /// [`Kernel::lambda_max`] of U, plus `restraint` when given.
    fn lambda_max_with<M: Model<T>>(
        &mut self,
        ens: &mut Ensemble<T, M>,
        iters: usize,
        restraint: Option<&Restraint>,
    ) -> Vec<f64> {
        // The probes overwrite the cached gradients and energies.
        for state in &mut self.states {
            state.evaluated = false;
        }
        let diagonal = self.metric == MetricKind::Diag;
        if self.method == SamplerMethod::Plain && !diagonal && restraint.is_none() {
            // Every likelihood's data term is L/κ (model/likelihood.rs), so β·L at κ is L at κ/β.
            let kappa = ens.dynamics.kappa;
            ens.dynamics.kappa = kappa / self.data_scale;
            let lambda = ens.lambda_max(iters);
            ens.dynamics.kappa = kappa;
            return lambda;
        }
        let (tempered, beta) = (self.data_scale != 1.0, T::of(self.data_scale));
        let (dynamics, method) = (ens.dynamics, self.method);
        let (model, data, blocks, pool) = ens.split_blocks_pooled();
        let skip: Vec<bool> = self.sampled(model).iter().map(|s| !s).collect();
        let per_block: Vec<Vec<f64>> = blocks
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .map_init(
                || PooledScratch::take(pool),
                |pooled, (block, state)| {
                    let scratch = &mut pooled.scratch;
                    let metric = std::mem::take(&mut state.metric);
                    let units = model.preconditioned_units();
                    let apply =
                        |v: &mut [Vec<f64>], transpose: bool| metric.apply(units, v, transpose);
                    let lambda = crate::sim::num::simd::vectorized_if(
                        M::VECTOR_BUILD,
                        #[inline(always)]
                        || {
                            block.lambda_max_of(model, iters, &skip, Some(&apply), &mut |b| {
                                match method {
                                    SamplerMethod::Plain => b.data_gradient(model, &data, scratch),
                                    SamplerMethod::Collapsed => collapsed::data_gradient(
                                        b,
                                        model,
                                        &data,
                                        dynamics.temperature,
                                        scratch,
                                        &mut state.work,
                                    ),
                                }
                                if tempered {
                                    for grads in &mut b.grads {
                                        for v in grads.iter_mut() {
                                            *v *= beta;
                                        }
                                    }
                                }
                                if let Some(r) = restraint {
                                    add_restraint(r, model, b);
                                }
                            })
                        },
                    );
                    state.metric = metric;
                    lambda
                },
            )
            .collect();
        per_block.into_iter().flatten().collect()
    }

    /// Collapsed posterior only: sets the preconditioner M of the last hidden layer
    /// ([`Kernel::preconditioner`]) from the current state so that every neuron's incoming
    /// weights see about the prior's curvature 1/v:
    /// `Neuron`: M_i = (1/v)/g_i, g_i of [`collapsed::neuron_curvature`] (one scalar per
    /// neuron); `Block`: M_i = (v·G_i)⁻¹, G_i of [`collapsed::neuron_curvature_blocks`] (its
    /// Gauss–Newton block, so also the soft directions of a specialised neuron get a large
    /// step); `None`: M = I. With `average`, the curvature estimate is the mean over this and
    /// every earlier averaged call (the run averages over the second half of burn-in, which
    /// smooths the estimate over the states the chain visits); otherwise the average restarts
    /// from this state. Called during burn-in only (with `adapt_step`, before the λ_max
    /// estimate that sets η) and then frozen: preconditioned Langevin with a constant M,
    /// θ ← θ − ηM∇U + √(2ηT·M)ξ, keeps exp(−U/T) as its stationary law (Roberts & Stramer
    /// 2002, Methodol. Comput. Appl. Probab. 4:337, with constant metric), and MALA's
    /// acceptance uses the same M.
    pub fn adapt_preconditioner<M: Model<T>>(&mut self, ens: &mut Ensemble<T, M>, average: bool) {
        if self.method != SamplerMethod::Collapsed || self.metric == MetricKind::Diag {
            return;
        }
        let kind = self.preconditioner;
        let (model, data, blocks, pool) = ens.split_blocks_pooled();
        let Some(units) = model.preconditioned_units() else {
            return;
        };
        let n_in = units.fan_in;
        let inv_v = 1.0 / model.prior_var(units.group);
        blocks
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .for_each_init(
                || PooledScratch::take(pool),
                |pooled, (block, state)| {
                    let scratch = &mut pooled.scratch;
                    let Some(curvature) = model.unit_curvature(kind, block, &data, scratch) else {
                        state.metric = Metric::default();
                        return;
                    };
                    if !average || state.curvature_sum.len() != curvature.len() {
                        state.curvature_sum = vec![0.0; curvature.len()];
                        state.curvature_count = 0;
                    }
                    for (s, c) in state.curvature_sum.iter_mut().zip(&curvature) {
                        *s += c;
                    }
                    state.curvature_count += 1;
                    let count = state.curvature_count as f64;
                    let mean: Vec<f64> = state.curvature_sum.iter().map(|s| s / count).collect();
                    state.metric = match kind {
                        Preconditioner::None => Metric::default(),
                        Preconditioner::Neuron => Metric {
                            scalar: mean.iter().map(|c| inv_v / c).collect(),
                            ..Metric::default()
                        },
                        Preconditioner::Block => Metric::from_curvature_blocks(&mean, n_in),
                    };
                },
            );
    }

    /// Accepted / proposed over the chains that did not diverge (`None` without MALA or
    /// before the first step).
    pub fn acceptance_rate<M: Model<T>>(&self, ens: &Ensemble<T, M>) -> Option<f64> {
        let (acc, prop) = self.acceptance_counts(ens)?;
        (prop > 0).then(|| acc as f64 / prop as f64)
    }

    /// Accepted and proposed Metropolis steps so far, summed over the chains that did not
    /// diverge (`None` without MALA).
    pub fn acceptance_counts<M: Model<T>>(&self, ens: &Ensemble<T, M>) -> Option<(u64, u64)> {
        if !self.proposal.is_metropolis() {
            return None;
        }
        let (mut acc, mut prop) = (0u64, 0u64);
        for (block, state) in ens.blocks.iter().zip(&self.states) {
            for c in 0..block.len {
                if block.diverged[c].is_none() {
                    acc += state.accepted[c];
                    prop += state.proposed[c];
                }
            }
        }
        Some((acc, prop))
    }

    /// The per-chain acceptance rates (chain order; `None` without MALA).
    pub fn chain_acceptance(&self) -> Option<Vec<f64>> {
        self.proposal.is_metropolis().then(|| {
            self.states
                .iter()
                .flat_map(|s| {
                    s.accepted.iter().zip(&s.proposed).map(|(&a, &p)| {
                        if p > 0 {
                            a as f64 / p as f64
                        } else {
                            0.0
                        }
                    })
                })
                .collect()
        })
    }
}

/// What a block step needs besides the block.
pub(super) struct Context<'a, T, M> {
    pub(super) model: &'a M,
    /// The training set, κ and the likelihood.
    pub(super) data: DataTerm<'a, T>,
    pub(super) dynamics: Dynamics,
    pub(super) method: SamplerMethod,
    pub(super) sampled: &'a [bool],
    /// β of [`Kernel::data_scale`].
    pub(super) data_scale: f64,
    /// The energy above which a chain is stopped ([`Ensemble::divergence_threshold`]).
    pub(super) threshold: f64,
    /// [`Kernel::restraint`].
    pub(super) restraint: Option<&'a Restraint>,
}

impl<T: Real, M: Model<T>> Context<'_, T, M> {
    /// U, ∇U (prior included), training error and virial of every chain of the block at its
    /// current parameters. Returns per chain why U could not be evaluated.
    #[inline(always)]
    pub(super) fn evaluate(
        &self,
        block: &mut ChainBlock<T>,
        scratch: &mut M::Scratch,
        work: &mut CollapsedWork<T>,
    ) {
        let model = self.model;
        let b = block.len;
        match self.method {
            SamplerMethod::Plain => {
                block.data_gradient(model, &self.data, scratch);
                work.failure.resize(b, None);
                for c in 0..b {
                    work.failure[c] = None;
                    block.energy[c] = block.data_loss[c];
                }
            }
            SamplerMethod::Collapsed => collapsed::data_gradient(
                block,
                model,
                &self.data,
                self.dynamics.temperature,
                scratch,
                work,
            ),
        }
        if self.method == SamplerMethod::Collapsed {
            block.data_loss[..b].copy_from_slice(&block.energy[..b]);
        }
        if self.data_scale != 1.0 {
            self.temper_data_term(block);
        }
        // Prior: ∇ = θ/v, energy |θ|²/(2v), virial θ·∇U, for every group Langevin moves
        // (the collapsed readout's virial is set when it is drawn).
        for c in 0..b {
            for g in 0..model.n_groups() {
                if self.method == SamplerMethod::Collapsed && g + 1 == model.n_groups() {
                    continue;
                }
                let n = model.group_len(g);
                let theta = &block.params[g][c * n..(c + 1) * n];
                let grad = &mut block.grads[g][c * n..(c + 1) * n];
                let (prior, virial) = add_gaussian_prior(theta, grad, model.prior_var(g));
                block.energy[c] += prior;
                block.virial[c][g] = virial;
            }
        }
        if let Some(r) = self.restraint {
            add_restraint(r, model, block);
        }
    }

    /// Scales the data term's energy and gradient of every chain by β (`data_scale`); the
    /// untempered data term stays in `block.data_loss` for the swap moves.
    fn temper_data_term(&self, block: &mut ChainBlock<T>) {
        let beta = self.data_scale;
        let scale = T::of(beta);
        for e in &mut block.energy {
            *e *= beta;
        }
        for (g, grads) in block.grads.iter_mut().enumerate() {
            if self.sampled[g] {
                for v in grads.iter_mut() {
                    *v *= scale;
                }
            }
        }
    }

    /// Stops chain `c`: records why, zeroes its weights so that the block's GEMMs stay finite.
    #[inline(always)]
    pub(super) fn stop(&self, block: &mut ChainBlock<T>, c: usize, step: usize, reason: String) {
        block.diverged[c] = Some(Divergence { step, reason });
        for g in 0..self.model.n_groups() {
            let n = self.model.group_len(g);
            block.params[g][c * n..(c + 1) * n].fill(T::zero());
        }
    }

    /// Divergence check after an unadjusted evaluation.
    #[inline(always)]
    pub(super) fn check(&self, block: &mut ChainBlock<T>, work: &CollapsedWork<T>, step: usize) {
        let threshold = self.threshold;
        for c in 0..block.len {
            if block.diverged[c].is_some() {
                continue;
            }
            let failure = work.failure[c].as_deref();
            if let Some(divergence) = Divergence::check(block.energy[c], failure, threshold, step) {
                self.stop(block, c, step, divergence.reason);
            }
        }
    }

    /// Evaluates U, ∇U and the divergence check at the block's current point unless `state`
    /// already holds them (the first proposal after a start or an outside change of the
    /// parameters); MALA and HMC then reuse the accepted point's values.
    #[inline(always)]
    pub(super) fn ensure_evaluated(
        &self,
        block: &mut ChainBlock<T>,
        state: &mut BlockState<T>,
        scratch: &mut M::Scratch,
        global_step: usize,
    ) {
        if !state.evaluated {
            self.evaluate(block, scratch, &mut state.work);
            self.check(block, &state.work, global_step);
            state.evaluated = true;
        }
    }

    /// Saves every chain's current point (parameters, gradients, energy, training error,
    /// virial) for the Metropolis test to restore.
    #[inline(always)]
    pub(super) fn save(&self, block: &ChainBlock<T>, state: &mut BlockState<T>) {
        for g in 0..self.model.n_groups() {
            state.saved_params[g].copy_from_slice(&block.params[g]);
            state.saved_grads[g].copy_from_slice(&block.grads[g]);
        }
        state.saved_energy.copy_from_slice(&block.energy);
        state.saved_sq_error.copy_from_slice(&block.sq_error);
        state.saved_data_loss.copy_from_slice(&block.data_loss);
        for c in 0..block.len {
            state.saved_virial[c].copy_from_slice(&block.virial[c]);
        }
    }

    /// Puts chain `c` back at its saved point (a rejected proposal).
    #[inline(always)]
    pub(super) fn restore(&self, block: &mut ChainBlock<T>, state: &BlockState<T>, c: usize) {
        for g in 0..self.model.n_groups() {
            let n = self.model.group_len(g);
            let range = c * n..(c + 1) * n;
            block.params[g][range.clone()].copy_from_slice(&state.saved_params[g][range.clone()]);
            block.grads[g][range.clone()].copy_from_slice(&state.saved_grads[g][range]);
        }
        block.energy[c] = state.saved_energy[c];
        block.sq_error[c] = state.saved_sq_error[c];
        block.data_loss[c] = state.saved_data_loss[c];
        block.virial[c].copy_from_slice(&state.saved_virial[c]);
    }

    /// One ULA or MALA step of the block's chains: move, new energy, (MALA) Metropolis test.
    #[inline(always)]
    fn step(
        &self,
        block: &mut ChainBlock<T>,
        state: &mut BlockState<T>,
        metric: &Metric,
        mala: bool,
        global_step: usize,
        scratch: &mut M::Scratch,
    ) {
        self.ensure_evaluated(block, state, scratch, global_step);
        if mala {
            self.save(block, state);
        }
        let layout = MetricLayout::of(self.model.preconditioned_units(), metric);
        let mut moves = std::mem::take(&mut state.moves);
        moves.reset(block.len, layout.n_in);
        self.propose(block, metric, &layout, &mut moves);
        self.evaluate(block, scratch, &mut state.work);
        if mala {
            self.accept_or_reject(block, state, metric, &layout, &mut moves);
        } else {
            self.check(block, &state.work, global_step);
        }
        state.moves = moves;
    }

    /// The Langevin move θ ← θ − η·M∇U + √(2ηT)·K·ξ of every live chain's sampled groups.
    /// Leaves per chain |ξ|² of the blockwise group's noise, its forward MALA term, in
    /// `moves.xi_sq` (zero on entry, [`MoveWork::reset`]).
    #[inline(always)]
    fn propose(
        &self,
        block: &mut ChainBlock<T>,
        metric: &Metric,
        layout: &MetricLayout,
        moves: &mut MoveWork,
    ) {
        let model = self.model;
        let eta = self.dynamics.step;
        let temperature = self.dynamics.temperature;
        let n_in = layout.n_in;
        let MoveWork {
            xi_sq: block_xi_sq,
            tmp,
            drift: drift_v,
            noise: noise_v,
        } = moves;
        let noise_scale = (2.0 * eta * temperature).sqrt();
        for c in 0..block.len {
            if block.diverged[c].is_some() {
                continue;
            }
            let rng = &mut block.rngs[c];
            for g in 0..model.n_groups() {
                if !self.sampled[g] {
                    continue;
                }
                let n = model.group_len(g);
                let theta = &mut block.params[g][c * n..(c + 1) * n];
                let grad = &block.grads[g][c * n..(c + 1) * n];
                if layout.diagonal(metric, g) {
                    let range = c * n..(c + 1) * n;
                    let m = &metric.diagonal[g][range.clone()];
                    let sqrt_m = &metric.diagonal_sqrt[g][range];
                    langevin_move_diagonal(theta, grad, m, sqrt_m, eta, noise_scale, rng);
                    continue;
                }
                if layout.blockwise(g) {
                    // θ_i ← θ_i − η·M_i∇_iU + √(2ηT)·L⁻ᵀξ = θ_i − L⁻ᵀ(η·L⁻¹∇_iU − √(2ηT)·ξ)
                    // (Metric).
                    for (i, (ti, gi)) in theta.chunks_mut(n_in).zip(grad.chunks(n_in)).enumerate() {
                        let inv = &metric.inv_factor[layout.part(c, i)];
                        for (d, &gv) in tmp.iter_mut().zip(gi) {
                            *d = gv.f64();
                        }
                        let inv_t = &metric.inv_factor_transposed[layout.part(c, i)];
                        lower_times_by_columns(inv_t, tmp, drift_v);
                        for (d, u) in tmp.iter_mut().zip(drift_v.iter()) {
                            let xi = T::standard_normal(rng).f64();
                            block_xi_sq[c] += xi * xi;
                            *d = eta * u - noise_scale * xi;
                        }
                        lower_transposed_times(inv, tmp, noise_v);
                        for (t, z) in ti.iter_mut().zip(noise_v.iter()) {
                            *t = T::of(t.f64() - z);
                        }
                    }
                    continue;
                }
                let run = layout.same_metric_run(g, n);
                for (i, (ti, gi)) in theta.chunks_mut(run).zip(grad.chunks(run)).enumerate() {
                    let m = layout.scalar(metric, g, c, i * run);
                    let drift = T::of(eta * m);
                    let noise = T::of((2.0 * eta * temperature * m).sqrt());
                    langevin_move(ti, gi, drift, noise, rng);
                }
            }
        }
    }

    /// MALA's test of each live chain's proposal (log α of the module doc, in f64).
    #[inline(always)]
    fn accept_or_reject(
        &self,
        block: &mut ChainBlock<T>,
        state: &mut BlockState<T>,
        metric: &Metric,
        layout: &MetricLayout,
        moves: &mut MoveWork,
    ) {
        let model = self.model;
        let eta = self.dynamics.step;
        let temperature = self.dynamics.temperature;
        let n_in = layout.n_in;
        let MoveWork {
            xi_sq: block_xi_sq,
            tmp,
            drift: drift_v,
            noise: noise_v,
        } = moves;
        for c in 0..block.len {
            if block.diverged[c].is_some() {
                continue;
            }
            let mut forward_sq = 0.0;
            let mut backward_sq = 0.0;
            for g in 0..model.n_groups() {
                if !self.sampled[g] {
                    continue;
                }
                let n = model.group_len(g);
                let range = c * n..(c + 1) * n;
                let old = &state.saved_params[g][range.clone()];
                let new = &block.params[g][range.clone()];
                let old_grad = &state.saved_grads[g][range.clone()];
                let new_grad = &block.grads[g][range.clone()];
                if layout.diagonal(metric, g) {
                    add_proposal_norms_diagonal(
                        old,
                        new,
                        old_grad,
                        new_grad,
                        eta,
                        &metric.diagonal[g][range],
                        (&mut forward_sq, &mut backward_sq),
                    );
                    continue;
                }
                if layout.blockwise(g) {
                    // |r|²_{M_i⁻¹} = |Lᵀr|² (Metric). Forward, r = θ′ − θ + η·M_i∇U(θ) is the
                    // noise √(2ηT)·L⁻ᵀξ, so |Lᵀr|² = 2ηT·|ξ|². Backward,
                    // r = θ − θ′ + η·M_i∇U(θ′) and Lᵀr = Lᵀ(θ − θ′) + η·L⁻¹∇U(θ′).
                    forward_sq += 2.0 * eta * temperature * block_xi_sq[c];
                    for i in 0..layout.n_pc {
                        let range = layout.part(c, i);
                        let rows = i * n_in..(i + 1) * n_in;
                        for (d, gv) in tmp.iter_mut().zip(&new_grad[rows.clone()]) {
                            *d = gv.f64();
                        }
                        lower_times_by_columns(
                            &metric.inv_factor_transposed[range.clone()],
                            tmp,
                            drift_v,
                        );
                        for (d, (o, w)) in
                            tmp.iter_mut().zip(old[rows.clone()].iter().zip(&new[rows]))
                        {
                            *d = o.f64() - w.f64();
                        }
                        lower_transposed_times(&metric.factor[range], tmp, noise_v);
                        backward_sq += noise_v
                            .iter()
                            .zip(drift_v.iter())
                            .map(|(a, u)| (a + eta * u).powi(2))
                            .sum::<f64>();
                    }
                    continue;
                }
                let run = layout.same_metric_run(g, n);
                for start in (0..n).step_by(run) {
                    let r = start..(start + run).min(n);
                    add_proposal_norms(
                        &old[r.clone()],
                        &new[r.clone()],
                        &old_grad[r.clone()],
                        &new_grad[r],
                        eta,
                        layout.scalar(metric, g, c, start),
                        &mut forward_sq,
                        &mut backward_sq,
                    );
                }
            }
            let energy = block.energy[c];
            let log_alpha = mala_log_alpha(
                energy,
                state.saved_energy[c],
                forward_sq,
                backward_sq,
                eta,
                temperature,
            );
            let u: f64 = block.rngs[c].random();
            state.proposed[c] += 1;
            let finite = state.work.failure[c].is_none() && energy.is_finite();
            if finite && metropolis_accepts(log_alpha, u) {
                state.accepted[c] += 1;
                continue;
            }
            self.restore(block, state, c);
        }
    }
}

/// Adds every chain's restraint V(s) to its energy and the force V′(s)·∇s to its gradient (the
/// group the restraint reads): in [`Context::evaluate`], and (its harmonic part) in the
/// Hessian–vector products of [`Kernel::lambda_max`].
fn add_restraint<T: Real, M: Model<T>>(r: &Restraint, model: &M, block: &mut ChainBlock<T>) {
    let (g, n) = (r.group(), model.group_len(r.group()));
    let (params, grads) = (&block.params[g], &mut block.grads[g]);
    for c in 0..block.len {
        let (bias, _) = r.add_force(&params[c * n..(c + 1) * n], &mut grads[c * n..(c + 1) * n]);
        block.energy[c] += bias;
    }
}
