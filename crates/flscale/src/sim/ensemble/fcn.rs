//! The ensemble Langevin sampler (spec 02, "Sampler"; paper App. A.1).
//!
//! Unadjusted Langevin on U(θ) = L(f(X), y) + Σ_l |W^l|²/(2 v_l), L = |f(X) − y|²/(2κ) or the
//! cross-entropy of [`crate::sim::model::likelihood`]:
//! θ ← θ − η∇U(θ) + √(2ηT)·ξ, ξ ~ 𝒩(0, I), whose stationary law (as η → 0) is
//! π ∝ exp(−U/T); T = 1 is the Bayesian posterior.
//!
//! The E chains are split into fixed blocks of B consecutive chains (B depends only on the
//! problem size and E, never on the thread count; [`block_size`]); rayon runs blocks in parallel and each block is
//! advanced with sequential GEMMs. Chain k draws its initial weights and all its noise from
//! its own ChaCha8 stream (seed, k), so every number is identical for any thread count.
//!
//! Divergence (spec 02, "Robust"): a chain whose energy becomes non-finite or exceeds
//! [`Ensemble::divergence_threshold`] is stopped at that step, its weights are zeroed (so the
//! block's shared GEMMs stay finite and fast) and it is excluded from every result.

use std::sync::Mutex;

use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

pub use crate::sim::chains::{block_size_for, chain_rng, ChainBlock, Divergence};
use crate::sim::config::Likelihood;
use crate::sim::langevin::langevin_move;
use crate::sim::model::fcn::FcnModel;
use crate::sim::model::interface::{DataTerm, Model};
use crate::sim::model::prior::add_gaussian_prior;
use crate::sim::num::power::largest_positive_eigenvalues;
use crate::sim::num::real::Real;

/// Settings of the dynamics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dynamics {
    /// Ridge κ.
    pub kappa: f64,
    /// Step η.
    pub step: f64,
    /// Temperature T.
    pub temperature: f64,
}

/// The whole ensemble: model, training data in the working precision, and the blocks.
#[derive(Debug)]
pub struct Ensemble<T: Real, M: Model<T> = FcnModel> {
    /// The network.
    pub model: M,
    /// Training inputs P × d.
    pub x: Vec<T>,
    /// Training targets.
    pub y: Vec<T>,
    /// Number of training samples P.
    pub p: usize,
    /// The blocks of chains.
    pub blocks: Vec<ChainBlock<T>>,
    /// κ, η, T.
    pub dynamics: Dynamics,
    /// Steps taken so far.
    pub steps_done: usize,
    /// Energy above which a chain is declared diverged.
    pub divergence_threshold: f64,
    /// The data term (Gaussian unless set after construction).
    pub likelihood: Likelihood,
    /// Work buffers kept between [`Ensemble::advance`] calls (and the cached kernel's,
    /// [`Ensemble::split_blocks_pooled`]): a fresh `Scratch` per rayon task would allocate a
    /// few MiB per call and fault and zero them in page by page.
    scratch_pool: Mutex<Vec<M::Scratch>>,
}

/// A model's scratch borrowed from the ensemble's pool for one rayon task, returned on drop.
pub(crate) struct PooledScratch<'a, S: Default> {
    pool: &'a Mutex<Vec<S>>,
    pub(crate) scratch: S,
}

impl<'a, S: Default> PooledScratch<'a, S> {
    pub(crate) fn take(pool: &'a Mutex<Vec<S>>) -> Self {
        let scratch = pool
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_default();
        PooledScratch { pool, scratch }
    }
}

impl<S: Default> Drop for PooledScratch<'_, S> {
    fn drop(&mut self) {
        if let Ok(mut p) = self.pool.lock() {
            p.push(std::mem::take(&mut self.scratch));
        }
    }
}

/// The data term of training inputs `x`, targets `y` (P of them), ridge κ and `likelihood`.
fn data_term<'a, T>(
    x: &'a [T],
    y: &'a [T],
    p: usize,
    kappa: f64,
    likelihood: Likelihood,
) -> DataTerm<'a, T> {
    DataTerm {
        x,
        y,
        p,
        kappa,
        likelihood,
    }
}

/// Chains per block: the rule of [`block_size_for`] with the model's per-chain share of the
/// block's buffers ([`Model::chain_bytes`]; the FCN's first-layer activations, P × N₁ floats).
pub fn block_size<T: Real, M: Model<T>>(
    model: &M,
    p: usize,
    bytes_per_float: usize,
    chains: usize,
) -> usize {
    block_size_for(model.chain_bytes(p, bytes_per_float), chains)
}

impl<T: Real, M: Model<T>> Ensemble<T, M> {
    /// Builds E chains with weights drawn from the prior (a "cold" start).
    pub fn new(
        model: M,
        x: &[f64],
        y: &[f64],
        chains: usize,
        seed: u64,
        dynamics: Dynamics,
        block: Option<usize>,
    ) -> Ensemble<T, M> {
        let p = y.len();
        let b = block.unwrap_or_else(|| block_size(&model, p, std::mem::size_of::<T>(), chains));
        let n_groups = model.n_groups();
        let mut blocks = Vec::new();
        let mut first = 0;
        while first < chains {
            let len = b.min(chains - first);
            let mut rngs: Vec<ChaCha8Rng> =
                (first..first + len).map(|k| chain_rng(seed, k)).collect();
            let mut params: Vec<Vec<T>> = (0..n_groups)
                .map(|g| vec![T::zero(); len * model.group_len(g)])
                .collect();
            // Each chain draws its whole initial state from its own stream, group by group.
            for (c, rng) in rngs.iter_mut().enumerate() {
                for (g, group) in params.iter_mut().enumerate() {
                    let n = model.group_len(g);
                    let sd = model.prior_var(g).sqrt();
                    for v in &mut group[c * n..(c + 1) * n] {
                        *v = T::of(sd) * T::standard_normal(rng);
                    }
                }
            }
            blocks.push(ChainBlock {
                first,
                len,
                grads: params.iter().map(|g| vec![T::zero(); g.len()]).collect(),
                params,
                residual: vec![T::zero(); p * len],
                rngs,
                diverged: vec![None; len],
                energy: vec![0.0; len],
                sq_error: vec![0.0; len],
                data_loss: vec![0.0; len],
                virial: vec![vec![0.0; n_groups]; len],
            });
            first += len;
        }
        // Equilibrium U is about #params/2 + P·MSE/(2κ); a chain 10⁴× above the scale of
        // its starting point has left the basin — f32 would overflow a few steps later.
        let scale = model.n_params() as f64
            + p as f64 / dynamics.kappa
            + y.iter().map(|v| v * v).sum::<f64>() / dynamics.kappa;
        Ensemble {
            model,
            x: x.iter().map(|&v| T::of(v)).collect(),
            y: y.iter().map(|&v| T::of(v)).collect(),
            p,
            blocks,
            dynamics,
            steps_done: 0,
            divergence_threshold: 1e4 * scale,
            likelihood: Likelihood::Gaussian,
            scratch_pool: Mutex::new(Vec::new()),
        }
    }

    /// Largest Hessian eigenvalue of U per chain (chain order; 0 for diverged chains), by
    /// `iters` power iterations on finite-difference Hessian–vector products.
    pub fn lambda_max(&mut self, iters: usize) -> Vec<f64> {
        let model = &self.model;
        let data = data_term(
            &self.x,
            &self.y,
            self.p,
            self.dynamics.kappa,
            self.likelihood,
        );
        let per_block: Vec<Vec<f64>> = self
            .blocks
            .par_iter_mut()
            .map_init(M::Scratch::default, |scratch, block| {
                block.lambda_max(model, &data, iters, scratch)
            })
            .collect();
        per_block.into_iter().flatten().collect()
    }

    /// Number of chains E.
    pub fn chains(&self) -> usize {
        self.blocks.iter().map(|b| b.len).sum()
    }

    /// Advances every chain by `n` steps, blocks in parallel.
    pub fn advance(&mut self, n: usize) {
        let model = &self.model;
        let dynamics = self.dynamics;
        let data = data_term(&self.x, &self.y, self.p, dynamics.kappa, self.likelihood);
        let threshold = self.divergence_threshold;
        let start = self.steps_done;
        let pool = &self.scratch_pool;
        self.blocks.par_iter_mut().for_each_init(
            || PooledScratch::take(pool),
            |pooled, block| {
                let scratch = &mut pooled.scratch;
                for s in 0..n {
                    block.step(model, &data, dynamics, threshold, start + s + 1, scratch);
                }
            },
        );
        self.steps_done += n;
    }

    /// The data term of the training set at the ensemble's κ and likelihood.
    pub fn data(&self) -> DataTerm<'_, T> {
        data_term(
            &self.x,
            &self.y,
            self.p,
            self.dynamics.kappa,
            self.likelihood,
        )
    }

    /// The model and the data term beside the blocks, borrowed apart so that the blocks can
    /// be moved while both are read.
    pub(crate) fn split_blocks(&mut self) -> (&M, DataTerm<'_, T>, &mut [ChainBlock<T>]) {
        let data = data_term(
            &self.x,
            &self.y,
            self.p,
            self.dynamics.kappa,
            self.likelihood,
        );
        (&self.model, data, &mut self.blocks)
    }

    /// [`Ensemble::split_blocks`] and the pool of work buffers that [`Ensemble::advance`] keeps
    /// between calls, for a transition that steps the blocks itself
    /// ([`PooledScratch::take`] per rayon task).
    pub(crate) fn split_blocks_pooled(
        &mut self,
    ) -> (
        &M,
        DataTerm<'_, T>,
        &mut [ChainBlock<T>],
        &Mutex<Vec<M::Scratch>>,
    ) {
        let data = data_term(
            &self.x,
            &self.y,
            self.p,
            self.dynamics.kappa,
            self.likelihood,
        );
        (&self.model, data, &mut self.blocks, &self.scratch_pool)
    }

    /// Whether chain k is still running.
    pub fn alive(&self, k: usize) -> bool {
        let b = self.block_of(k);
        self.blocks[b].diverged[k - self.blocks[b].first].is_none()
    }

    fn block_of(&self, k: usize) -> usize {
        self.blocks
            .iter()
            .position(|b| k >= b.first && k < b.first + b.len)
            .expect("chain index within the ensemble")
    }

    /// Parameters of group g of chain k (copied to f64).
    pub fn chain_group(&self, k: usize, g: usize) -> Vec<f64> {
        let b = &self.blocks[self.block_of(k)];
        let n = self.model.group_len(g);
        let c = k - b.first;
        b.params[g][c * n..(c + 1) * n]
            .iter()
            .map(|v| v.f64())
            .collect()
    }

    /// Chain k's parameters as one vector, groups one after the other (the layout of the
    /// per-chain models, [`crate::sim::model::flat::FlatModel`]).
    pub fn chain_params(&self, k: usize) -> Vec<T> {
        let b = &self.blocks[self.block_of(k)];
        let c = k - b.first;
        let mut theta = Vec::with_capacity(self.model.n_params());
        for (g, group) in b.params.iter().enumerate() {
            let n = self.model.group_len(g);
            theta.extend_from_slice(&group[c * n..(c + 1) * n]);
        }
        theta
    }

    /// Sets chain k's parameters from one vector laid out as [`Ensemble::chain_params`].
    pub fn set_chain_params(&mut self, k: usize, theta: &[T]) {
        let bi = self.block_of(k);
        let b = &mut self.blocks[bi];
        let c = k - b.first;
        let mut start = 0;
        for (g, group) in b.params.iter_mut().enumerate() {
            let n = self.model.group_len(g);
            group[c * n..(c + 1) * n].copy_from_slice(&theta[start..start + n]);
            start += n;
        }
    }

    /// Chain k's block and its index within it.
    pub fn chain_block(&self, k: usize) -> (&ChainBlock<T>, usize) {
        let b = &self.blocks[self.block_of(k)];
        (b, k - b.first)
    }

    /// Divergence records of every chain, in chain order.
    pub fn divergences(&self) -> Vec<Option<Divergence>> {
        self.blocks
            .iter()
            .flat_map(|b| b.diverged.iter().cloned())
            .collect()
    }
}

impl<T: Real> Ensemble<T, FcnModel> {
    /// Turns the initial state into a "hot" one (spec 02): every first-layer neuron's
    /// component along the teacher w* (unit vector) is replaced by ±`magnitude`, signs
    /// alternating over neurons; the orthogonal components and the other layers keep their
    /// prior draws. Call before the first step.
    pub fn hot_start(&mut self, teacher: &[f64], magnitude: f64) {
        let d = self.model.d;
        let n1 = self.model.widths[0];
        for block in &mut self.blocks {
            for c in 0..block.len {
                let w1 = &mut block.params[0][c * n1 * d..(c + 1) * n1 * d];
                for (i, row) in w1.chunks_exact_mut(d).enumerate() {
                    let rho: f64 = row.iter().zip(teacher).map(|(w, t)| w.f64() * t).sum();
                    let target = if i % 2 == 0 { magnitude } else { -magnitude };
                    for (w, t) in row.iter_mut().zip(teacher) {
                        *w = T::of(w.f64() + (target - rho) * t);
                    }
                }
            }
        }
    }
}

/// A factor K of a constant preconditioner M = KKᵀ, applied in place to a direction in the
/// layout of a block's `params`: K when the flag is false, Kᵀ when true
/// ([`ChainBlock::lambda_max_of`]).
pub(crate) type MetricFactor<'a> = dyn Fn(&mut [Vec<f64>], bool) + 'a;

impl<T: Real> ChainBlock<T> {
    /// Data-term gradient ∇L of every chain of the block into `self.grads`; L and the training
    /// squared error go to `self.data_loss` and `self.sq_error` ([`Model::data_gradient`]).
    #[inline(always)]
    pub(crate) fn data_gradient<M: Model<T>>(
        &mut self,
        model: &M,
        data: &DataTerm<'_, T>,
        scratch: &mut M::Scratch,
    ) {
        model.data_gradient(self, data, scratch);
    }

    /// Largest Hessian eigenvalue of U per chain (spec 02, "Stiffness is the enemy"), by
    /// `iters` power iterations on Hessian–vector products. The data term's product is a
    /// central finite difference of analytic gradients, H v ≈ (∇U(θ + εv) − ∇U(θ − εv))/(2ε)
    /// with ε = 10⁻³·(‖θ‖ + 10⁻³) (v unit); the prior's is exact, v_g/v_prior. Frozen groups
    /// are left out (they are not sampled). The parameters are restored exactly afterwards.
    /// Diverged chains get 0.
    fn lambda_max<M: Model<T>>(
        &mut self,
        model: &M,
        data: &DataTerm<'_, T>,
        iters: usize,
        scratch: &mut M::Scratch,
    ) -> Vec<f64> {
        let frozen: Vec<bool> = (0..model.n_groups()).map(|g| model.is_frozen(g)).collect();
        self.lambda_max_of(model, iters, &frozen, None, &mut |block| {
            block.data_gradient(model, data, scratch)
        })
    }

    /// Power iteration of [`ChainBlock::lambda_max`] for any energy whose non-prior part's
    /// gradient `data_gradient` writes into `self.grads`; groups with `skip[g]` are left out.
    /// With `metric` (a factor K of a constant preconditioner M = KKᵀ, applied in place to a
    /// direction in the layout of `params`: K when its flag is false, Kᵀ when true) it is the
    /// top eigenvalue of KᵀHK — similar to MH, so the curvature that limits the step of
    /// preconditioned Langevin. Shared by the plain and the collapsed sampler.
    pub(crate) fn lambda_max_of<M: Model<T>>(
        &mut self,
        model: &M,
        iters: usize,
        skip: &[bool],
        metric: Option<&MetricFactor<'_>>,
        data_gradient: &mut dyn FnMut(&mut Self),
    ) -> Vec<f64> {
        let b = self.len;
        let groups = model.n_groups();
        let saved = self.params.clone();
        // Chain c's parameters as one vector, groups in order (the per-chain models' layout):
        // group g's entry i sits at offsets[g] + i.
        let offsets: Vec<usize> = (0..groups)
            .scan(0, |at, g| {
                let here = *at;
                *at += model.group_len(g);
                Some(here)
            })
            .collect();
        let per_chain: usize = (0..groups).map(|g| model.group_len(g)).sum();
        // Start vector: alternating signs over the chain's vector, zero in skipped groups.
        let start: Vec<f64> = (0..groups)
            .flat_map(|g| {
                let offset = offsets[g];
                (0..model.group_len(g)).map(move |i| {
                    if skip[g] {
                        0.0
                    } else if (offset + i) % 2 == 0 {
                        1.0
                    } else {
                        -0.7
                    }
                })
            })
            .collect();
        // ε per chain from |θ| over all its parameters.
        let eps: Vec<f64> = (0..b)
            .map(|c| {
                let norm_sq = (0..groups)
                    .flat_map(|g| {
                        let n = model.group_len(g);
                        saved[g][c * n..(c + 1) * n].iter()
                    })
                    .map(|a| a.f64().powi(2))
                    .sum::<f64>();
                1e-3 * (norm_sq.sqrt() + 1e-3)
            })
            .collect();
        let hessian_times = |vs: &[Vec<f64>]| -> Vec<Vec<f64>> {
            // u = Kv, in the block's layout, is the direction in parameter space.
            let mut u: Vec<Vec<f64>> = (0..groups)
                .map(|g| {
                    let n = model.group_len(g);
                    (0..b * n).map(|j| vs[j / n][offsets[g] + j % n]).collect()
                })
                .collect();
            if let Some(k) = metric {
                k(&mut u, false);
            }
            let mut grad_at = |sign: f64| -> Vec<Vec<f64>> {
                for g in 0..groups {
                    let n = model.group_len(g);
                    for (i, t) in self.params[g].iter_mut().enumerate() {
                        *t = T::of(saved[g][i].f64() + sign * eps[i / n.max(1)] * u[g][i]);
                    }
                }
                data_gradient(self);
                self.grads
                    .iter()
                    .map(|g| g.iter().map(|a| a.f64()).collect())
                    .collect()
            };
            let plus = grad_at(1.0);
            let minus = grad_at(-1.0);
            // Hu (data by finite differences, prior exactly), then Kᵀ(Hu).
            for g in 0..groups {
                let n = model.group_len(g);
                for (i, h) in u[g].iter_mut().enumerate() {
                    *h = (plus[g][i] - minus[g][i]) / (2.0 * eps[i / n.max(1)])
                        + *h / model.prior_var(g);
                }
            }
            if let Some(k) = metric {
                k(&mut u, true);
            }
            (0..b)
                .map(|c| {
                    let mut hv = vec![0.0; per_chain];
                    for g in (0..groups).filter(|&g| !skip[g]) {
                        let n = model.group_len(g);
                        hv[offsets[g]..offsets[g] + n].copy_from_slice(&u[g][c * n..(c + 1) * n]);
                    }
                    hv
                })
                .collect()
        };
        let mut lambda = largest_positive_eigenvalues(hessian_times, &vec![start; b], iters);
        self.params = saved;
        for (c, l) in lambda.iter_mut().enumerate() {
            if self.diverged[c].is_some() {
                *l = 0.0;
            }
        }
        lambda
    }

    /// One Langevin step of every live chain of the block. The element-wise loops around the
    /// GEMMs (readout sums, residuals, back-propagated δ, prior gradient, update) are a third
    /// of the time, so the step is compiled a second time with AVX-512F/AVX2+FMA and picked at
    /// run time; without `-C target-cpu=native` the baseline build only has SSE2. No fast-math:
    /// the vector builds perform the same operations in the same order, so the numbers do not
    /// depend on which one runs.
    fn step<M: Model<T>>(
        &mut self,
        model: &M,
        data: &DataTerm<'_, T>,
        dynamics: Dynamics,
        threshold: f64,
        global_step: usize,
        scratch: &mut M::Scratch,
    ) {
        // The closure must be inlined into the target-feature function, or LLVM compiles it
        // (and the whole step body) outside it in the baseline build, as it did until 5 Dec:
        // `flscale bench` ran 5 % slower so (BENCHMARKS.md, "One engine").
        crate::sim::num::simd::vectorized_if(
            M::VECTOR_BUILD,
            #[inline(always)]
            || self.step_body(model, data, dynamics, threshold, global_step, scratch),
        )
    }

    #[inline(always)]
    fn step_body<M: Model<T>>(
        &mut self,
        model: &M,
        data: &DataTerm<'_, T>,
        dynamics: Dynamics,
        threshold: f64,
        global_step: usize,
        scratch: &mut M::Scratch,
    ) {
        let b = self.len;
        model.data_gradient_fused(self, data, scratch);
        let eta = T::of(dynamics.step);
        let noise = T::of((2.0 * dynamics.step * dynamics.temperature).sqrt());
        for c in 0..b {
            if self.diverged[c].is_some() {
                continue;
            }
            // Prior gradient θ/v, energy and virial, in f64 accumulators.
            let mut energy = self.data_loss[c];
            for g in 0..model.n_groups() {
                let n = model.group_len(g);
                let theta = &self.params[g][c * n..(c + 1) * n];
                let grad = &mut self.grads[g][c * n..(c + 1) * n];
                let (prior, virial) = add_gaussian_prior(theta, grad, model.prior_var(g));
                energy += prior;
                self.virial[c][g] = virial;
            }
            self.energy[c] = energy;
            if let Some(divergence) = Divergence::check(energy, None, threshold, global_step) {
                self.diverged[c] = Some(divergence);
                for g in 0..model.n_groups() {
                    let n = model.group_len(g);
                    self.params[g][c * n..(c + 1) * n].fill(T::zero());
                }
                continue;
            }
            let rng = &mut self.rngs[c];
            for g in 0..model.n_groups() {
                if model.is_frozen(g) {
                    continue;
                }
                let n = model.group_len(g);
                let theta = &mut self.params[g][c * n..(c + 1) * n];
                let grad = &self.grads[g][c * n..(c + 1) * n];
                langevin_move(theta, grad, eta, noise, rng);
            }
        }
    }
}

/// Test-set evaluation of every live chain: f on `x_test` (n inputs), in chain order; `None`
/// for diverged chains. Runs blocks in parallel.
pub fn predict<T: Real, M: Model<T>>(
    ens: &Ensemble<T, M>,
    x_test: &[T],
    n: usize,
) -> Vec<Option<Vec<T>>> {
    let model = &ens.model;
    let per_block: Vec<Vec<Option<Vec<T>>>> = ens
        .blocks
        .par_iter()
        .map_init(
            || (M::Scratch::default(), Vec::new()),
            |(scratch, f), block| {
                f.resize(n * block.len, T::zero());
                model.predict(&block.params, block.len, x_test, n, f, scratch);
                (0..block.len)
                    .map(|c| {
                        block.diverged[c]
                            .is_none()
                            .then(|| (0..n).map(|mu| f[mu * block.len + c]).collect())
                    })
                    .collect()
            },
        )
        .collect();
    per_block.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Activation;
    use rand::{Rng, SeedableRng};

    fn model(widths: Vec<usize>) -> FcnModel {
        FcnModel {
            d: 6,
            prior_var: vec![1.0 / 6.0; widths.len() + 1],
            frozen: vec![false; widths.len() + 1],
            widths,
            activation: Activation::Erf,
            layernorm: false,
        }
    }

    /// The Fig. 2 size (P·N₁·4 bytes = 256 KiB per chain: cache bound 4) gets equal blocks
    /// in an even number where E allows it, else the cache bound.
    #[test]
    fn block_size_balances_equal_blocks_within_the_cache_bound() {
        let m = FcnModel {
            d: 40,
            ..model(vec![40])
        };
        let b = |chains| block_size::<f32, _>(&m, 1600, 4, chains);
        assert_eq!((b(30), b(300), b(32), b(6), b(7), b(1)), (3, 3, 4, 3, 4, 4));
        // f64 halves the cache bound to 2.
        assert_eq!(block_size::<f32, _>(&m, 1600, 8, 30), 1);
    }

    /// Same seed → the same weights bit for bit on one and two threads and for any block
    /// size, on the fused two-layer path and the general deeper one (spec 02 "Reproducible").
    #[test]
    fn chains_do_not_depend_on_threads_or_blocking() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let p = 50;
        let x: Vec<f64> = (0..p * 6).map(|_| rng.random_range(-1.5..1.5)).collect();
        let y: Vec<f64> = (0..p).map(|_| rng.random_range(-1.0..1.0)).collect();
        let dynamics = Dynamics {
            kappa: 0.5,
            step: 1e-3,
            temperature: 1.0,
        };
        for widths in [vec![8], vec![8, 5]] {
            let run = |threads: usize, block: Option<usize>| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| {
                        let mut ens = Ensemble::<f32>::new(
                            model(widths.clone()),
                            &x,
                            &y,
                            10,
                            9,
                            dynamics,
                            block,
                        );
                        ens.advance(25);
                        let weights: Vec<Vec<u32>> = (0..10)
                            .flat_map(|k| (0..ens.model.n_groups()).map(move |g| (k, g)))
                            .map(|(k, g)| {
                                ens.chain_group(k, g)
                                    .iter()
                                    .map(|v| (*v as f32).to_bits())
                                    .collect()
                            })
                            .collect();
                        let energy: Vec<u64> = ens
                            .blocks
                            .iter()
                            .flat_map(|b| b.energy.iter().map(|e| e.to_bits()))
                            .collect();
                        (weights, energy)
                    })
            };
            let reference = run(1, None);
            assert!(reference.1.iter().all(|&e| f64::from_bits(e).is_finite()));
            assert_eq!(run(2, None), reference, "{widths:?}: 2 threads");
            assert_eq!(run(2, Some(1)), reference, "{widths:?}: blocks of 1");
            assert_eq!(run(1, Some(4)), reference, "{widths:?}: blocks of 4");
        }
    }
}
