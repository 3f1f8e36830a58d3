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
//! The plain posterior without MALA keeps the sampler's own fused step
//! ([`Ensemble::advance`]); this module is used when `sampler.method = "collapsed"` or
//! `sampler.mala = true`.
//!
//! [`collapsed`]: crate::sim::model::collapsed

use rand::Rng;
use rayon::prelude::*;

use crate::sim::config::{Likelihood, Preconditioner, SamplerMethod};
use crate::sim::ensemble::fcn::{ChainBlock, Divergence, Dynamics, Ensemble};
use crate::sim::kernel::langevin::{
    add_proposal_norms, langevin_move, mala_log_alpha, metropolis_accepts,
};
use crate::sim::model::collapsed::{self, CollapsedWork};
use crate::sim::model::fcn::{FcnModel, Scratch};
use crate::sim::model::prior::add_gaussian_prior;
use crate::sim::num::real::Real;

/// Per-block state: the saved current point while a proposal is judged, acceptance counts.
#[derive(Debug)]
struct BlockState<T> {
    evaluated: bool,
    saved_params: Vec<Vec<T>>,
    saved_grads: Vec<Vec<T>>,
    saved_energy: Vec<f64>,
    saved_sq_error: Vec<f64>,
    saved_virial: Vec<Vec<f64>>,
    proposed: Vec<u64>,
    accepted: Vec<u64>,
    work: CollapsedWork<T>,
    /// The preconditioner of the last hidden layer.
    metric: Metric,
    /// Sum over the averaged adaptations of the curvature estimates (b·N scalars g_i or
    /// b·N blocks v·G_i, as [`collapsed::neuron_curvature`] and
    /// [`collapsed::neuron_curvature_blocks`] return them) and their number.
    curvature_sum: Vec<f64>,
    curvature_count: usize,
    /// HMC: the momentum u = Kᵀp per group (f64, the layout of `params`) and a work vector of
    /// the same shape; empty until the first HMC step.
    momentum: Vec<Vec<f64>>,
    kick: Vec<Vec<f64>>,
}

/// The constant preconditioner M of one block's last hidden layer (identity elsewhere and
/// while its fields are empty). See [`Kernel::adapt_preconditioner`].
#[derive(Debug, Default)]
struct Metric {
    /// `Preconditioner::Neuron`: M_i per chain and neuron (b·N, chain-major).
    scalar: Vec<f64>,
    /// `Preconditioner::Block`: per chain and neuron (b·N blocks of n_in × n_in, row-major,
    /// lower triangular) the Cholesky factor L of M_i⁻¹ = v·G_i = LLᵀ, for
    /// |r|²_{M_i⁻¹} = |Lᵀr|². Empty unless blockwise.
    factor: Vec<f64>,
    /// L⁻¹ (same layout): M_i = L⁻ᵀL⁻¹, so the drift is M_i∇U = L⁻ᵀ(L⁻¹∇U) and the noise
    /// L⁻ᵀξ has covariance M_i — two triangular products per neuron, no M_i formed.
    inv_factor: Vec<f64>,
    /// (L⁻¹)ᵀ (same layout): the columns of L⁻¹ as contiguous rows, so that L⁻¹x is a sum of
    /// scaled rows, which vectorises (a row-by-row dot product is a sequential reduction).
    inv_factor_transposed: Vec<f64>,
    /// L⁻¹ of every neuron of the block interleaved for [`Metric::apply`]: for each entry
    /// (a, b), b ≤ a, of the lower triangle (row by row), the b·N neurons' values side by
    /// side, so that one entry's product runs across all neurons at once (contiguous, full
    /// vector width) instead of along a row of length ≤ n_in.
    inv_factor_lanes: Vec<f64>,
}

/// y = Lx for a lower-triangular n × n L given as `lt` = Lᵀ (row-major, upper triangular),
/// as Σ_j x_j·(column j of L) = Σ_j x_j·(row j of Lᵀ): contiguous rows, no reduction.
#[inline(always)]
fn lower_times_by_columns(lt: &[f64], x: &[f64], y: &mut [f64]) {
    let n = x.len();
    y.fill(0.0);
    for (j, &xj) in x.iter().enumerate() {
        for (yi, lji) in y[j..].iter_mut().zip(&lt[j * n + j..(j + 1) * n]) {
            *yi += xj * lji;
        }
    }
}

/// y = Lᵀx for a lower-triangular n × n row-major L, as Σ_j x_j·(row j of L) (contiguous
/// rows).
#[inline(always)]
fn lower_transposed_times(l: &[f64], x: &[f64], y: &mut [f64]) {
    let n = x.len();
    y.fill(0.0);
    for (j, &xj) in x.iter().enumerate() {
        for (yi, lij) in y[..=j].iter_mut().zip(&l[j * n..j * n + j + 1]) {
            *yi += xj * lij;
        }
    }
}

impl Metric {
    /// Applies K (`transpose` false) or Kᵀ (true) in place to a direction in the layout of a
    /// block's `params`, with M = KKᵀ: K = diag(√M_i) for scalars, K = L⁻ᵀ for blocks.
    #[inline(always)]
    fn apply(&self, model: &FcnModel, v: &mut [Vec<f64>], transpose: bool) {
        let g = model.widths.len() - 1;
        let n_in = model.fan_in(g);
        if !self.scalar.is_empty() {
            for (i, a) in v[g].iter_mut().enumerate() {
                *a *= self.scalar[i / n_in].sqrt();
            }
        } else if !self.inv_factor_lanes.is_empty() {
            // y_k = Kᵀx_k = L_k⁻¹x_k or y_k = Kx_k = L_k⁻ᵀx_k for every neuron k of the block,
            // entry by entry of L⁻¹ across the neurons (x and y transposed to n_in × K). Each
            // y entry sums its products in the same order as a row-by-row product would.
            let neurons = v[g].len() / n_in;
            let mut xt = vec![0.0; n_in * neurons];
            let mut yt = vec![0.0; n_in * neurons];
            for (k, row) in v[g].chunks_exact(n_in).enumerate() {
                for (j, &x) in row.iter().enumerate() {
                    xt[j * neurons + k] = x;
                }
            }
            let mut lanes = self.inv_factor_lanes.chunks_exact(neurons);
            for a in 0..n_in {
                for b in 0..=a {
                    let m = lanes.next().expect("one lane row per lower-triangle entry");
                    // Kᵀ: y_a += (L⁻¹)_ab x_b. K: y_b += (L⁻¹)_ab x_a.
                    let (dst, src) = if transpose { (a, b) } else { (b, a) };
                    let x = &xt[src * neurons..(src + 1) * neurons];
                    for ((y, &mv), &xv) in yt[dst * neurons..(dst + 1) * neurons]
                        .iter_mut()
                        .zip(m)
                        .zip(x)
                    {
                        *y += mv * xv;
                    }
                }
            }
            for (k, row) in v[g].chunks_exact_mut(n_in).enumerate() {
                for (j, r) in row.iter_mut().enumerate() {
                    *r = yt[j * neurons + k];
                }
            }
        }
    }
}

/// The cached-gradient Langevin kernel of an ensemble (see the module doc).
#[derive(Debug)]
pub struct Kernel<T> {
    /// Plain or collapsed posterior.
    pub method: SamplerMethod,
    /// Whether steps are Metropolis-adjusted.
    pub mala: bool,
    /// Which preconditioner [`Kernel::adapt_preconditioner`] sets (collapsed only; default
    /// `Block`).
    pub preconditioner: Preconditioner,
    /// With `mala`: `Some(L)` makes every step an HMC proposal of L leapfrog steps (module
    /// doc); `None` is MALA.
    pub hmc_steps: Option<usize>,
    states: Vec<BlockState<T>>,
}

impl<T: Real> Kernel<T> {
    /// A kernel for `ens`'s blocks.
    pub fn new(ens: &Ensemble<T>, method: SamplerMethod, mala: bool) -> Kernel<T> {
        let states = ens
            .blocks
            .iter()
            .map(|b| BlockState {
                evaluated: false,
                saved_params: b.params.clone(),
                saved_grads: b.params.iter().map(|g| vec![T::zero(); g.len()]).collect(),
                saved_energy: vec![0.0; b.len],
                saved_sq_error: vec![0.0; b.len],
                saved_virial: b.virial.clone(),
                proposed: vec![0; b.len],
                accepted: vec![0; b.len],
                work: CollapsedWork::default(),
                metric: Metric::default(),
                curvature_sum: Vec::new(),
                curvature_count: 0,
                momentum: Vec::new(),
                kick: Vec::new(),
            })
            .collect();
        Kernel {
            method,
            mala,
            preconditioner: Preconditioner::Block,
            hmc_steps: None,
            states,
        }
    }

    /// Which groups Langevin moves: not frozen, and not the readout when it is collapsed.
    fn sampled(&self, model: &FcnModel) -> Vec<bool> {
        (0..model.n_groups())
            .map(|g| {
                let collapsed_readout =
                    self.method == SamplerMethod::Collapsed && g + 1 == model.n_groups();
                !(model.frozen[g] || collapsed_readout)
            })
            .collect()
    }

    /// Advances every chain by `n` steps, blocks in parallel.
    pub fn advance(&mut self, ens: &mut Ensemble<T>, n: usize) {
        let model = &ens.model;
        let (x, y, p) = (&ens.x[..], &ens.y[..], ens.p);
        let dynamics = ens.dynamics;
        let threshold = ens.divergence_threshold;
        let start = ens.steps_done;
        let sampled = self.sampled(model);
        let (method, mala, hmc_steps) = (self.method, self.mala, self.hmc_steps);
        let likelihood = ens.likelihood;
        ens.blocks
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .for_each_init(Scratch::<T>::default, |scratch, (block, state)| {
                let ctx = Context {
                    model,
                    x,
                    y,
                    p,
                    dynamics,
                    method,
                    likelihood,
                    sampled: &sampled,
                };
                let metric = std::mem::take(&mut state.metric);
                // The whole step in the CPU's vector build (simd.rs), as the plain sampler's.
                crate::sim::num::simd::vectorized(
                    #[inline(always)]
                    || {
                        for s in 0..n {
                            match hmc_steps {
                                Some(leapfrog) if mala => ctx.hmc_step(
                                    block,
                                    state,
                                    &metric,
                                    leapfrog,
                                    threshold,
                                    start + s + 1,
                                    scratch,
                                ),
                                _ => ctx.step(
                                    block,
                                    state,
                                    &metric,
                                    mala,
                                    threshold,
                                    start + s + 1,
                                    scratch,
                                ),
                            }
                        }
                    },
                );
                state.metric = metric;
            });
        ens.steps_done += n;
    }

    /// Prepares the chains for a measurement: with the collapsed posterior, draws every
    /// chain's readout exactly from its conditional (so that predictions, training error and
    /// the readout's statistics are those of a posterior sample).
    pub fn prepare_measurement(&mut self, ens: &mut Ensemble<T>) {
        if self.method != SamplerMethod::Collapsed {
            return;
        }
        let model = &ens.model;
        let (x, y, p) = (&ens.x[..], &ens.y[..], ens.p);
        let dynamics = ens.dynamics;
        ens.blocks
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .for_each_init(Scratch::<T>::default, |scratch, (block, state)| {
                crate::sim::num::simd::vectorized(
                    #[inline(always)]
                    || {
                        collapsed::draw_readouts(
                            block,
                            model,
                            x,
                            y,
                            p,
                            dynamics.kappa,
                            dynamics.temperature,
                            scratch,
                            &mut state.work,
                        )
                    },
                );
            });
    }

    /// Collapsed posterior only (`None` otherwise, and before the first
    /// [`Kernel::prepare_measurement`]): per block, in the layout of its readout group, every
    /// chain's conditional mean m = E[a | W] at the last draw — the readouts of the
    /// Rao–Blackwellised predictions E[f | W] (`collapsed` module doc;
    /// [`crate::sim::observe::overlaps::Probe::predict_with_readouts`]).
    pub fn conditional_means<'a>(&'a self, ens: &Ensemble<T>) -> Option<Vec<&'a [T]>> {
        if self.method != SamplerMethod::Collapsed {
            return None;
        }
        let readout = ens.model.widths.len();
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
    /// the sampled groups ([`ChainBlock::lambda_max_of`]).
    pub fn lambda_max(&mut self, ens: &mut Ensemble<T>, iters: usize) -> Vec<f64> {
        // The probes overwrite the cached gradients and energies.
        for state in &mut self.states {
            state.evaluated = false;
        }
        if self.method == SamplerMethod::Plain {
            return ens.lambda_max(iters);
        }
        let model = &ens.model;
        let (x, y, p) = (&ens.x[..], &ens.y[..], ens.p);
        let dynamics = ens.dynamics;
        let skip: Vec<bool> = self.sampled(model).iter().map(|s| !s).collect();
        let per_block: Vec<Vec<f64>> = ens
            .blocks
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .map_init(Scratch::<T>::default, |scratch, (block, state)| {
                let metric = std::mem::take(&mut state.metric);
                let apply = |v: &mut [Vec<f64>], transpose: bool| metric.apply(model, v, transpose);
                let lambda = crate::sim::num::simd::vectorized(
                    #[inline(always)]
                    || {
                        block.lambda_max_of(model, iters, &skip, Some(&apply), &mut |b| {
                            collapsed::data_gradient(
                                b,
                                model,
                                x,
                                y,
                                p,
                                dynamics.kappa,
                                dynamics.temperature,
                                scratch,
                                &mut state.work,
                            )
                        })
                    },
                );
                state.metric = metric;
                lambda
            })
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
    pub fn adapt_preconditioner(&mut self, ens: &mut Ensemble<T>, average: bool) {
        if self.method != SamplerMethod::Collapsed {
            return;
        }
        let kind = self.preconditioner;
        let model = &ens.model;
        let (x, y, p) = (&ens.x[..], &ens.y[..], ens.p);
        let kappa = ens.dynamics.kappa;
        let g = model.widths.len() - 1;
        let n_in = model.fan_in(g);
        let inv_v = 1.0 / model.prior_var[g];
        ens.blocks
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .for_each_init(Scratch::<T>::default, |scratch, (block, state)| {
                let curvature = match kind {
                    Preconditioner::None => {
                        state.metric = Metric::default();
                        return;
                    }
                    Preconditioner::Neuron => collapsed::neuron_curvature(
                        block,
                        model,
                        x,
                        y,
                        p,
                        kappa,
                        scratch,
                        &mut state.work,
                    ),
                    Preconditioner::Block => crate::sim::num::simd::vectorized(
                        #[inline(always)]
                        || {
                            collapsed::neuron_curvature_blocks(
                                block,
                                model,
                                x,
                                y,
                                p,
                                kappa,
                                scratch,
                                &mut state.work,
                            )
                        },
                    ),
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
                let mean = state.curvature_sum.iter().map(|s| s / count);
                state.metric = match kind {
                    Preconditioner::None => unreachable!("returned above"),
                    Preconditioner::Neuron => Metric {
                        scalar: mean.map(|c| inv_v / c).collect(),
                        ..Metric::default()
                    },
                    Preconditioner::Block => {
                        let mean: Vec<f64> = mean.collect();
                        let nn = n_in * n_in;
                        let mut factor = vec![0.0; mean.len()];
                        let mut inv_factor = vec![0.0; mean.len()];
                        let mut inv_factor_transposed = vec![0.0; mean.len()];
                        let mut column = vec![0.0; n_in];
                        for (((a, l), inv), inv_t) in mean
                            .chunks(nn)
                            .zip(factor.chunks_mut(nn))
                            .zip(inv_factor.chunks_mut(nn))
                            .zip(inv_factor_transposed.chunks_mut(nn))
                        {
                            // v·G_i = I + PSD, so this fails only on non-finite input;
                            // that neuron then keeps M_i = I.
                            if !collapsed::cholesky(a, l, n_in) {
                                l.fill(0.0);
                                for j in 0..n_in {
                                    l[j * n_in + j] = 1.0;
                                }
                            }
                            for j in 0..n_in {
                                column.fill(0.0);
                                column[j] = 1.0;
                                collapsed::solve_lower(l, &mut column, n_in);
                                for (i, c) in column.iter().enumerate() {
                                    inv[i * n_in + j] = *c;
                                }
                                inv_t[j * n_in..(j + 1) * n_in].copy_from_slice(&column);
                            }
                        }
                        let neurons = mean.len() / nn;
                        let mut inv_factor_lanes = Vec::with_capacity(neurons * nn);
                        for a in 0..n_in {
                            for b in 0..=a {
                                inv_factor_lanes.extend(
                                    inv_factor.chunks_exact(nn).map(|inv| inv[a * n_in + b]),
                                );
                            }
                        }
                        Metric {
                            scalar: Vec::new(),
                            factor,
                            inv_factor,
                            inv_factor_transposed,
                            inv_factor_lanes,
                        }
                    }
                };
            });
    }

    /// `steps` leapfrog steps of size `eps` (module doc) on every chain of the first block,
    /// without the Metropolis test, from its current point and the momentum u = `momentum`
    /// (per group, the block's `params` layout), which is overwritten with the final one.
    /// Returns the block's energies U at the end (NaN-free chains only move). For the tests
    /// of the integrator (reversibility, energy error).
    pub fn leapfrog_first_block(
        &mut self,
        ens: &mut Ensemble<T>,
        momentum: &mut Vec<Vec<f64>>,
        eps: f64,
        steps: usize,
    ) -> Vec<f64> {
        let sampled = self.sampled(&ens.model);
        let ctx = Context {
            model: &ens.model,
            x: &ens.x,
            y: &ens.y,
            p: ens.p,
            dynamics: ens.dynamics,
            method: self.method,
            likelihood: ens.likelihood,
            sampled: &sampled,
        };
        let block = &mut ens.blocks[0];
        let state = &mut self.states[0];
        let metric = std::mem::take(&mut state.metric);
        let mut scratch = Scratch::<T>::default();
        ctx.evaluate(block, &mut scratch, &mut state.work);
        state.evaluated = true;
        ctx.save(block, state);
        state.momentum = std::mem::take(momentum);
        state.kick = state.momentum.clone();
        let eps = vec![eps; block.len];
        let mut moving: Vec<bool> = block.diverged.iter().map(Option::is_none).collect();
        ctx.leapfrog(
            block,
            state,
            &metric,
            &eps,
            steps,
            &mut moving,
            &mut scratch,
        );
        *momentum = std::mem::take(&mut state.momentum);
        state.metric = metric;
        block.energy.clone()
    }

    /// Accepted / proposed over the chains that did not diverge (`None` without MALA or
    /// before the first step).
    pub fn acceptance_rate(&self, ens: &Ensemble<T>) -> Option<f64> {
        let (acc, prop) = self.acceptance_counts(ens)?;
        (prop > 0).then(|| acc as f64 / prop as f64)
    }

    /// Accepted and proposed Metropolis steps so far, summed over the chains that did not
    /// diverge (`None` without MALA).
    pub fn acceptance_counts(&self, ens: &Ensemble<T>) -> Option<(u64, u64)> {
        if !self.mala {
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
        self.mala.then(|| {
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
struct Context<'a, T> {
    model: &'a FcnModel,
    x: &'a [T],
    y: &'a [T],
    p: usize,
    dynamics: Dynamics,
    method: SamplerMethod,
    likelihood: Likelihood,
    sampled: &'a [bool],
}

impl<T: Real> Context<'_, T> {
    /// U, ∇U (prior included), training error and virial of every chain of the block at its
    /// current parameters. Returns per chain why U could not be evaluated.
    #[inline(always)]
    fn evaluate(
        &self,
        block: &mut ChainBlock<T>,
        scratch: &mut Scratch<T>,
        work: &mut CollapsedWork<T>,
    ) {
        let (model, kappa) = (self.model, self.dynamics.kappa);
        let b = block.len;
        match self.method {
            SamplerMethod::Plain => {
                block.data_gradient(
                    model,
                    self.x,
                    self.y,
                    self.p,
                    kappa,
                    self.likelihood,
                    scratch,
                );
                work.failure.resize(b, None);
                for c in 0..b {
                    work.failure[c] = None;
                    block.energy[c] = block.data_loss[c];
                }
            }
            SamplerMethod::Collapsed => collapsed::data_gradient(
                block,
                model,
                self.x,
                self.y,
                self.p,
                kappa,
                self.dynamics.temperature,
                scratch,
                work,
            ),
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
                let (prior, virial) = add_gaussian_prior(theta, grad, model.prior_var[g]);
                block.energy[c] += prior;
                block.virial[c][g] = virial;
            }
        }
    }

    /// Stops chain `c`: records why, zeroes its weights so that the block's GEMMs stay finite.
    #[inline(always)]
    fn stop(&self, block: &mut ChainBlock<T>, c: usize, step: usize, reason: String) {
        block.diverged[c] = Some(Divergence { step, reason });
        for g in 0..self.model.n_groups() {
            let n = self.model.group_len(g);
            block.params[g][c * n..(c + 1) * n].fill(T::zero());
        }
    }

    /// Divergence check after an unadjusted evaluation.
    #[inline(always)]
    fn check(
        &self,
        block: &mut ChainBlock<T>,
        work: &CollapsedWork<T>,
        threshold: f64,
        step: usize,
    ) {
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

    /// Saves every chain's current point (parameters, gradients, energy, training error,
    /// virial) for the Metropolis test to restore.
    #[inline(always)]
    fn save(&self, block: &ChainBlock<T>, state: &mut BlockState<T>) {
        for g in 0..self.model.n_groups() {
            state.saved_params[g].copy_from_slice(&block.params[g]);
            state.saved_grads[g].copy_from_slice(&block.grads[g]);
        }
        state.saved_energy.copy_from_slice(&block.energy);
        state.saved_sq_error.copy_from_slice(&block.sq_error);
        for c in 0..block.len {
            state.saved_virial[c].copy_from_slice(&block.virial[c]);
        }
    }

    /// Puts chain `c` back at its saved point (a rejected proposal).
    #[inline(always)]
    fn restore(&self, block: &mut ChainBlock<T>, state: &BlockState<T>, c: usize) {
        for g in 0..self.model.n_groups() {
            let n = self.model.group_len(g);
            let range = c * n..(c + 1) * n;
            block.params[g][range.clone()].copy_from_slice(&state.saved_params[g][range.clone()]);
            block.grads[g][range.clone()].copy_from_slice(&state.saved_grads[g][range]);
        }
        block.energy[c] = state.saved_energy[c];
        block.sq_error[c] = state.saved_sq_error[c];
        block.virial[c].copy_from_slice(&state.saved_virial[c]);
    }

    /// u ← u − scale·ε_c·Kᵀ∇U for the sampled groups of every chain in `moving` (module doc).
    #[inline(always)]
    fn kick(
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
        metric.apply(self.model, &mut state.kick, true);
        self.for_each_moving(&mut state.momentum, &state.kick, eps, moving, |u, k, e| {
            *u -= scale * e * k;
        });
    }

    /// θ ← θ + ε_c·Ku for the sampled groups of every chain in `moving` (module doc).
    #[inline(always)]
    fn drift(
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
        metric.apply(self.model, &mut state.kick, false);
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
    fn for_each_moving(
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
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn leapfrog(
        &self,
        block: &mut ChainBlock<T>,
        state: &mut BlockState<T>,
        metric: &Metric,
        eps: &[f64],
        steps: usize,
        moving: &mut [bool],
        scratch: &mut Scratch<T>,
    ) {
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
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn hmc_step(
        &self,
        block: &mut ChainBlock<T>,
        state: &mut BlockState<T>,
        metric: &Metric,
        steps: usize,
        threshold: f64,
        global_step: usize,
        scratch: &mut Scratch<T>,
    ) {
        let model = self.model;
        let b = block.len;
        if !state.evaluated {
            self.evaluate(block, scratch, &mut state.work);
            self.check(block, &state.work, threshold, global_step);
            state.evaluated = true;
        }
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
        self.leapfrog(block, state, metric, &eps, steps, &mut moving, scratch);
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

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn step(
        &self,
        block: &mut ChainBlock<T>,
        state: &mut BlockState<T>,
        metric: &Metric,
        mala: bool,
        threshold: f64,
        global_step: usize,
        scratch: &mut Scratch<T>,
    ) {
        let model = self.model;
        let b = block.len;
        if !state.evaluated {
            self.evaluate(block, scratch, &mut state.work);
            self.check(block, &state.work, threshold, global_step);
            state.evaluated = true;
        }
        if mala {
            self.save(block, state);
        }
        let eta = self.dynamics.step;
        let temperature = self.dynamics.temperature;
        // Preconditioned group: the last hidden layer, one M per neuron (row of n_in weights).
        let g_pc = model.widths.len() - 1;
        let n_in = model.fan_in(g_pc);
        let n_pc = model.widths[g_pc];
        let precond = &metric.scalar;
        let m_of = |g: usize, c: usize, i: usize| -> f64 {
            if g == g_pc && !precond.is_empty() {
                precond[c * n_pc + i / n_in]
            } else {
                1.0
            }
        };
        let nn = n_in * n_in;
        let part = |c: usize, i: usize| (c * n_pc + i) * nn..(c * n_pc + i + 1) * nn;
        let blockwise = |g: usize| g == g_pc && !metric.factor.is_empty();
        // Consecutive weights of group g (of n per chain) that share one scalar M: a neuron's
        // fan-in in the preconditioned group, the whole group elsewhere.
        let same_metric_run = |g: usize, n: usize| {
            if g == g_pc && !precond.is_empty() {
                n_in.max(1)
            } else {
                n.max(1)
            }
        };
        let mut tmp = vec![0.0; n_in];
        let (mut drift_v, mut noise_v) = (vec![0.0; n_in], vec![0.0; n_in]);
        let noise_scale = (2.0 * eta * temperature).sqrt();
        // Per chain, |ξ|² of the blockwise group's noise: its forward MALA term (below).
        let mut block_xi_sq = vec![0.0; b];
        for c in 0..b {
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
                if blockwise(g) {
                    // θ_i ← θ_i − η·M_i∇_iU + √(2ηT)·L⁻ᵀξ = θ_i − L⁻ᵀ(η·L⁻¹∇_iU − √(2ηT)·ξ)
                    // (Metric).
                    for (i, (ti, gi)) in theta.chunks_mut(n_in).zip(grad.chunks(n_in)).enumerate() {
                        let inv = &metric.inv_factor[part(c, i)];
                        for (d, &gv) in tmp.iter_mut().zip(gi) {
                            *d = gv.f64();
                        }
                        let inv_t = &metric.inv_factor_transposed[part(c, i)];
                        lower_times_by_columns(inv_t, &tmp, &mut drift_v);
                        for (d, u) in tmp.iter_mut().zip(&drift_v) {
                            let xi = T::standard_normal(rng).f64();
                            block_xi_sq[c] += xi * xi;
                            *d = eta * u - noise_scale * xi;
                        }
                        lower_transposed_times(inv, &tmp, &mut noise_v);
                        for (t, z) in ti.iter_mut().zip(&noise_v) {
                            *t = T::of(t.f64() - z);
                        }
                    }
                    continue;
                }
                let run = same_metric_run(g, n);
                for (i, (ti, gi)) in theta.chunks_mut(run).zip(grad.chunks(run)).enumerate() {
                    let m = m_of(g, c, i * run);
                    let drift = T::of(eta * m);
                    let noise = T::of((2.0 * eta * temperature * m).sqrt());
                    langevin_move(ti, gi, drift, noise, rng);
                }
            }
        }
        self.evaluate(block, scratch, &mut state.work);
        if !mala {
            self.check(block, &state.work, threshold, global_step);
            return;
        }
        for c in 0..b {
            if block.diverged[c].is_some() {
                continue;
            }
            // log α of the module doc, accumulated in f64.
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
                let new_grad = &block.grads[g][range];
                if blockwise(g) {
                    // |r|²_{M_i⁻¹} = |Lᵀr|² (Metric). Forward, r = θ′ − θ + η·M_i∇U(θ) is the
                    // noise √(2ηT)·L⁻ᵀξ, so |Lᵀr|² = 2ηT·|ξ|². Backward,
                    // r = θ − θ′ + η·M_i∇U(θ′) and Lᵀr = Lᵀ(θ − θ′) + η·L⁻¹∇U(θ′).
                    forward_sq += 2.0 * eta * temperature * block_xi_sq[c];
                    for i in 0..n_pc {
                        let range = part(c, i);
                        let rows = i * n_in..(i + 1) * n_in;
                        for (d, gv) in tmp.iter_mut().zip(&new_grad[rows.clone()]) {
                            *d = gv.f64();
                        }
                        lower_times_by_columns(
                            &metric.inv_factor_transposed[range.clone()],
                            &tmp,
                            &mut drift_v,
                        );
                        for (d, (o, w)) in
                            tmp.iter_mut().zip(old[rows.clone()].iter().zip(&new[rows]))
                        {
                            *d = o.f64() - w.f64();
                        }
                        lower_transposed_times(&metric.factor[range], &tmp, &mut noise_v);
                        backward_sq += noise_v
                            .iter()
                            .zip(&drift_v)
                            .map(|(a, u)| (a + eta * u).powi(2))
                            .sum::<f64>();
                    }
                    continue;
                }
                let run = same_metric_run(g, n);
                for start in (0..n).step_by(run) {
                    let r = start..(start + run).min(n);
                    add_proposal_norms(
                        &old[r.clone()],
                        &new[r.clone()],
                        &old_grad[r.clone()],
                        &new_grad[r],
                        eta,
                        m_of(g, c, start),
                        &mut forward_sq,
                        &mut backward_sq,
                    );
                }
            }
            let energy = block.energy[c];
            let saved_energy = state.saved_energy[c];
            let log_alpha =
                mala_log_alpha(energy, saved_energy, forward_sq, backward_sq, eta, temperature);
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
