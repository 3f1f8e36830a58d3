//! Fully connected networks of any depth with exact analytic gradients, evaluated for a
//! *block* of chains at once (spec 02, "Models"; paper eq. 1).
//!
//! f(x) = Σ_i w^L_i σ(h^{L−1}_i(x)), h^l_i = Σ_j W^l_ij σ(h^{l−1}_j), h^1_j = W^1_j·x.
//!
//! Optional layer normalisation (`model.layernorm`, paper App. C.5 / Fig. 6: "layer
//! normalization between the two activated layers"): the input of every hidden layer l ≥ 2 is
//! LN(σ(h^{l−1})) instead of σ(h^{l−1}), where, per input x and per chain, over the N_{l−1}
//! neurons of the layer, LN(a)_j = (a_j − ā)/√(mean_j (a_j − ā)² + ε), ε = 10⁻⁶ — no learned
//! gain or bias, the same normalisation as `flscale kernel propagate --layernorm`. The
//! readout sees the un-normalised σ(h^{L−1}). It keeps K_l(x, x) from fluctuating with |x|.
//!
//! Energy (negative log posterior, App. A.1, with temperature handled by the sampler):
//! U(θ) = |f(X) − y|²/(2κ) + Σ_l |W^l|²/(2 v_l), where v_l is the prior variance of one
//! entry of layer l: v_1 = σ1²/d, v_l = σ_l²/N_{l−1}, readout v_L = σ_L²/N_{L−1} (standard)
//! or σ_L²/N_{L−1}² (mean-field).
//!
//! Layout and speed: the parameters of one group (one layer) of a block of B chains are
//! stored contiguously, chain-major. The first layer of all B chains is therefore a single
//! (B·N_1) × d matrix, so the forward pass of the block is *one* GEMM H = X·W₁ᵀ (P × B·N_1)
//! and the first-layer gradient is one GEMM G = Δ₁ᵀ·X — the blocking that the benchmark
//! README (`shared/bench/README.md`) found to keep activations in L2. Deeper layers differ per
//! chain and are one GEMM per chain. All GEMMs are faer's, sequential (`Par::Seq`): the
//! parallelism is over blocks of chains (rayon), which makes results independent of the
//! thread count.

use crate::sim::num::gemm::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use crate::activation::Activation;
use crate::sim::chains::ChainBlock;
use crate::sim::config::{ExperimentConfig, Parametrization};
use crate::sim::model::interface::DataTerm;
use crate::sim::num::real::Real;

/// The architecture and prior of an FCN (no weights: those live in the sampler's blocks).
#[derive(Debug, Clone, PartialEq)]
pub struct FcnModel {
    /// Input dimension d.
    pub d: usize,
    /// Hidden widths N_1 … N_{L−1}.
    pub widths: Vec<usize>,
    /// Hidden activation σ.
    pub activation: Activation,
    /// Prior variance of one entry of each parameter group (layers 1 … L, readout last).
    pub prior_var: Vec<f64>,
    /// Groups held fixed at their initial values.
    pub frozen: Vec<bool>,
    /// Layer normalisation of the input of every hidden layer l ≥ 2 (module docs).
    pub layernorm: bool,
}

/// ε of the layer normalisation (module docs): keeps LN finite when all N_{l−1} activations
/// of an input coincide (e.g. all ReLUs off).
pub const LAYERNORM_EPS: f64 = 1e-6;

impl FcnModel {
    /// The model of a validated experiment.
    pub fn from_config(cfg: &ExperimentConfig) -> FcnModel {
        let d = cfg.data.d;
        let widths = cfg.model.widths.clone();
        let sigma2 = cfg.sigma2();
        let layers = widths.len() + 1;
        let prior_var = (0..layers)
            .map(|l| {
                let fan_in = if l == 0 { d } else { widths[l - 1] } as f64;
                if l + 1 == layers && cfg.model.parametrization == Parametrization::MeanField {
                    sigma2[l] / (fan_in * fan_in)
                } else {
                    sigma2[l] / fan_in
                }
            })
            .collect();
        let frozen = (1..=layers)
            .map(|l| cfg.sampler.frozen_layers.contains(&l))
            .collect();
        FcnModel {
            d,
            widths,
            activation: cfg.model.activation,
            prior_var,
            frozen,
            layernorm: cfg.model.layernorm,
        }
    }

    /// A two-layer erf network with unit prior variances per entry (for tests).
    #[cfg(test)]
    pub fn test_two_layer(d: usize, n: usize) -> FcnModel {
        FcnModel {
            d,
            widths: vec![n],
            activation: Activation::Erf,
            prior_var: vec![1.0, 1.0],
            frozen: vec![false, false],
            layernorm: false,
        }
    }

    /// Number of parameter groups L (hidden layers + readout).
    pub fn n_groups(&self) -> usize {
        self.widths.len() + 1
    }

    /// Fan-in of group g (d for the first layer).
    pub fn fan_in(&self, g: usize) -> usize {
        if g == 0 {
            self.d
        } else {
            self.widths[g - 1]
        }
    }

    /// Number of parameters of group g for one network.
    pub fn group_len(&self, g: usize) -> usize {
        if g < self.widths.len() {
            self.widths[g] * self.fan_in(g)
        } else {
            self.fan_in(g)
        }
    }

    /// Total number of parameters of one network.
    pub fn n_params(&self) -> usize {
        (0..self.n_groups()).map(|g| self.group_len(g)).sum()
    }

    /// "layer1", "layer2", …, "readout".
    pub fn group_name(&self, g: usize) -> String {
        if g + 1 == self.n_groups() {
            "readout".to_string()
        } else {
            format!("layer{}", g + 1)
        }
    }

    /// Multiply–adds of the data term's forward and backward pass per network and sample
    /// (for GFLOP/s: 6PdN + 6PN in the two-layer case, spec 02 "Performance bar").
    pub fn flops_per_sample(&self) -> f64 {
        let mut flops = 0.0;
        for g in 0..self.n_groups() {
            flops += 6.0 * self.group_len(g) as f64;
        }
        flops
    }
}

/// Work buffers for evaluating one block on `rows` inputs. Owned by a rayon task, reused
/// across steps (no allocation in the inner loop).
#[derive(Debug, Default)]
pub struct Scratch<T> {
    rows: usize,
    block: usize,
    /// Pre-activations per hidden layer, rows × (B·N_l) row-major (later reused as a temporary).
    pub h: Vec<Vec<T>>,
    /// σ(h) per hidden layer.
    pub act: Vec<Vec<T>>,
    /// σ′(h) per hidden layer, overwritten by the back-propagated δ in the backward pass.
    pub der: Vec<Vec<T>>,
    /// Outputs f, rows × B row-major.
    pub f: Vec<T>,
    /// With layer normalisation: LN(σ(h^l)) per hidden layer but the last (the input of
    /// layer l + 1), same layout as `act`.
    pub normed: Vec<Vec<T>>,
    /// With layer normalisation: 1/√(var + ε) per input row and chain, rows × B.
    pub inv_std: Vec<Vec<T>>,
    /// The fused two-layer path's first-layer gradient, (B·N₁) × d column-major.
    first_layer_grad_colmajor: Vec<T>,
}

impl<T> Scratch<T> {
    /// No buffers yet (they are sized by [`Scratch::ensure`]).
    pub const fn empty() -> Scratch<T> {
        Scratch {
            rows: 0,
            block: 0,
            h: Vec::new(),
            act: Vec::new(),
            der: Vec::new(),
            f: Vec::new(),
            normed: Vec::new(),
            inv_std: Vec::new(),
            first_layer_grad_colmajor: Vec::new(),
        }
    }
}

impl<T: Real> Scratch<T> {
    /// Makes sure the buffers fit `rows` inputs and `block` chains.
    pub fn ensure(&mut self, model: &FcnModel, rows: usize, block: usize) {
        let ln_layers = if model.layernorm {
            model.widths.len() - 1
        } else {
            0
        };
        if self.rows == rows
            && self.block == block
            && self.h.len() == model.widths.len()
            && self.normed.len() == ln_layers
        {
            return;
        }
        self.rows = rows;
        self.block = block;
        let sizes: Vec<usize> = model.widths.iter().map(|n| rows * block * n).collect();
        self.h = sizes.iter().map(|&s| vec![T::zero(); s]).collect();
        self.act = sizes.iter().map(|&s| vec![T::zero(); s]).collect();
        self.der = sizes.iter().map(|&s| vec![T::zero(); s]).collect();
        self.f = vec![T::zero(); rows * block];
        self.normed = sizes[..ln_layers]
            .iter()
            .map(|&s| vec![T::zero(); s])
            .collect();
        self.inv_std = (0..ln_layers)
            .map(|_| vec![T::zero(); rows * block])
            .collect();
    }
}

/// LN over the n neurons of each (row, chain) of `act` (rows × B·n): writes the normalised
/// values and 1/√(var + ε) (module docs).
fn layer_norm_forward<T: Real>(act: &[T], normed: &mut [T], inv_std: &mut [T], n: usize) {
    let eps = T::of(LAYERNORM_EPS);
    let inv_n = T::of(1.0 / n as f64);
    for ((a, out), s) in act
        .chunks_exact(n)
        .zip(normed.chunks_exact_mut(n))
        .zip(inv_std.iter_mut())
    {
        let mut mean = T::zero();
        for &v in a {
            mean += v;
        }
        mean *= inv_n;
        let mut var = T::zero();
        for &v in a {
            var += (v - mean) * (v - mean);
        }
        let inv = T::one() / (var * inv_n + eps).sqrt();
        *s = inv;
        for (o, &v) in out.iter_mut().zip(a) {
            *o = (v - mean) * inv;
        }
    }
}

/// Back-propagation through LN: on entry `g` holds ∂U/∂â (â = LN(a)), on exit ∂U/∂a =
/// s⁻¹·(g − mean(g) − â·mean(g∘â)) per (row, chain) (the derivative of (a − ā)/√(var + ε)).
fn layer_norm_backward<T: Real>(g: &mut [T], normed: &[T], inv_std: &[T], n: usize) {
    let inv_n = T::of(1.0 / n as f64);
    for ((gr, a), &s) in g
        .chunks_exact_mut(n)
        .zip(normed.chunks_exact(n))
        .zip(inv_std)
    {
        let mut mg = T::zero();
        let mut mga = T::zero();
        for (&gi, &ai) in gr.iter().zip(a) {
            mg += gi;
            mga += gi * ai;
        }
        mg *= inv_n;
        mga *= inv_n;
        for (gi, &ai) in gr.iter_mut().zip(a) {
            *gi = (*gi - mg - ai * mga) * s;
        }
    }
}

/// Forward pass of `block` chains on `rows` inputs `x` (rows × d row-major). `params[g]`
/// holds group g of the block's chains, chain-major. Fills `scratch.h/act/der/f`.
/// (Inlined so that the sampler's vector builds cover its loops.)
#[inline(always)]
pub fn forward<T: Real>(
    model: &FcnModel,
    params: &[Vec<T>],
    block: usize,
    x: &[T],
    rows: usize,
    scratch: &mut Scratch<T>,
) {
    scratch.ensure(model, rows, block);
    let d = model.d;
    let hidden = model.widths.len();
    let n1 = model.widths[0];
    if rows > 0 {
        // H₁ = X·W₁ᵀ for the whole block in one GEMM.
        let xm = MatRef::from_row_major_slice(x, rows, d);
        let w1 = MatRef::from_row_major_slice(&params[0][..block * n1 * d], block * n1, d);
        let h1 = MatMut::from_row_major_slice_mut(&mut scratch.h[0][..], rows, block * n1);
        matmul(h1, Accum::Replace, xm, w1.transpose(), T::one(), Par::Seq);
    }
    if hidden > 1 {
        let (h, act, der) = (&scratch.h[0], &mut scratch.act[0], &mut scratch.der[0]);
        model.activation.apply(h, act, der);
    }
    for l in 1..hidden {
        let (n_prev, n_l) = (model.widths[l - 1], model.widths[l]);
        if model.layernorm {
            layer_norm_forward(
                &scratch.act[l - 1],
                &mut scratch.normed[l - 1],
                &mut scratch.inv_std[l - 1],
                n_prev,
            );
        }
        if rows > 0 {
            for c in 0..block {
                let input = if model.layernorm {
                    &scratch.normed[l - 1]
                } else {
                    &scratch.act[l - 1]
                };
                let a_prev = MatRef::from_row_major_slice_with_stride(
                    &input[c * n_prev..],
                    rows,
                    n_prev,
                    block * n_prev,
                );
                let w = MatRef::from_row_major_slice(
                    &params[l][c * n_l * n_prev..(c + 1) * n_l * n_prev],
                    n_l,
                    n_prev,
                );
                let h = row_major_strided_mut(&mut scratch.h[l][c * n_l..], rows, n_l, block * n_l);
                matmul(h, Accum::Replace, a_prev, w.transpose(), T::one(), Par::Seq);
            }
        }
        if l + 1 < hidden {
            let (h, act, der) = (&scratch.h[l], &mut scratch.act[l], &mut scratch.der[l]);
            model.activation.apply(h, act, der);
        }
    }
    // Last hidden layer, one input row at a time so that σ, σ′ and the readout sum
    // f[μ, c] = Σ_i σ(h^{L−1}_{μ,c,i}) w^L_{c,i} touch the row while it is in L1.
    let last = hidden - 1;
    let n_last = model.widths[last];
    let width = block * n_last;
    let readout = &params[hidden];
    let (h, act, der) = (
        &scratch.h[last],
        &mut scratch.act[last],
        &mut scratch.der[last],
    );
    for mu in 0..rows {
        let range = mu * width..(mu + 1) * width;
        let (a_row, d_row) = (&mut act[range.clone()], &mut der[range.clone()]);
        model.activation.apply(&h[range], a_row, d_row);
        for c in 0..block {
            let a = &a_row[c * n_last..(c + 1) * n_last];
            let w = &readout[c * n_last..(c + 1) * n_last];
            scratch.f[mu * block + c] = dot(a, w);
        }
    }
}

/// Back-propagation of the data term. On entry `residual` (rows × B) holds ∂U/∂f =
/// (f − y)/κ and `scratch` holds the forward pass. Writes the data-term gradient of every
/// group into `grads` (same layout as the parameters; overwritten). The inputs are those of
/// `data` (P rows).
#[inline(always)]
pub fn backward<T: Real>(
    model: &FcnModel,
    params: &[Vec<T>],
    block: usize,
    data: &DataTerm<'_, T>,
    residual: &[T],
    scratch: &mut Scratch<T>,
    grads: &mut [Vec<T>],
) {
    let (x, rows) = (data.x, data.p);
    let hidden = model.widths.len();
    let n_last = model.widths[hidden - 1];
    for g in grads.iter_mut() {
        g.fill(T::zero());
    }
    if rows == 0 {
        return;
    }
    // Readout: ∂U/∂w^L_{c,i} = Σ_μ r_{μ,c} σ(h^{L−1}_{μ,c,i}); and
    // δ^{L−1}_{μ,c,i} = r_{μ,c} w^L_{c,i} σ′(h^{L−1}_{μ,c,i}), stored over σ′.
    {
        let readout = &params[hidden];
        let g_readout = &mut grads[hidden];
        let act = &scratch.act[hidden - 1];
        let der = &mut scratch.der[hidden - 1];
        for mu in 0..rows {
            let base = mu * block * n_last;
            for c in 0..block {
                let r = residual[mu * block + c];
                let a = &act[base + c * n_last..base + (c + 1) * n_last];
                let g = &mut g_readout[c * n_last..(c + 1) * n_last];
                for (gi, &ai) in g.iter_mut().zip(a) {
                    *gi += r * ai;
                }
                let w = &readout[c * n_last..(c + 1) * n_last];
                let dl = &mut der[base + c * n_last..base + (c + 1) * n_last];
                for (di, &wi) in dl.iter_mut().zip(w) {
                    *di *= r * wi;
                }
            }
        }
    }
    backward_from_last_delta(model, params, block, x, rows, scratch, grads);
}

/// The hidden layers' part of [`backward`]: from δ^{L−1} = ∂U/∂h^{L−1} in
/// `scratch.der[L−1]` (rows × B·N_{L−1}), the gradients of every hidden group into `grads`
/// (overwritten; the readout group is not touched). The collapsed sampler enters here with its
/// own δ^{L−1} (`collapsed::data_gradient`).
#[inline(always)]
pub fn backward_from_last_delta<T: Real>(
    model: &FcnModel,
    params: &[Vec<T>],
    block: usize,
    x: &[T],
    rows: usize,
    scratch: &mut Scratch<T>,
    grads: &mut [Vec<T>],
) {
    let d = model.d;
    let hidden = model.widths.len();
    if rows == 0 {
        for g in &mut grads[..hidden] {
            g.fill(T::zero());
        }
        return;
    }
    // Hidden layers l ≥ 2 (0-based l ≥ 1): ∂U/∂W^l = δ^lᵀ a^{l−1} with a^{l−1} the layer's
    // input σ(h^{l−1}) or LN(σ(h^{l−1})); δ^{l−1} = (δ^l W^l, through LN) ∘ σ′(h^{l−1}).
    for l in (1..hidden).rev() {
        let (n_prev, n_l) = (model.widths[l - 1], model.widths[l]);
        for c in 0..block {
            let delta = MatRef::from_row_major_slice_with_stride(
                &scratch.der[l][c * n_l..],
                rows,
                n_l,
                block * n_l,
            );
            let input = if model.layernorm {
                &scratch.normed[l - 1]
            } else {
                &scratch.act[l - 1]
            };
            let a_prev = MatRef::from_row_major_slice_with_stride(
                &input[c * n_prev..],
                rows,
                n_prev,
                block * n_prev,
            );
            let g = MatMut::from_row_major_slice_mut(
                &mut grads[l][c * n_l * n_prev..(c + 1) * n_l * n_prev],
                n_l,
                n_prev,
            );
            matmul(
                g,
                Accum::Replace,
                delta.transpose(),
                a_prev,
                T::one(),
                Par::Seq,
            );
            let w = MatRef::from_row_major_slice(
                &params[l][c * n_l * n_prev..(c + 1) * n_l * n_prev],
                n_l,
                n_prev,
            );
            // δ^l W^l into the (no longer needed) pre-activation buffer of layer l−1.
            let tmp = row_major_strided_mut(
                &mut scratch.h[l - 1][c * n_prev..],
                rows,
                n_prev,
                block * n_prev,
            );
            matmul(tmp, Accum::Replace, delta, w, T::one(), Par::Seq);
        }
        if model.layernorm {
            layer_norm_backward(
                &mut scratch.h[l - 1],
                &scratch.normed[l - 1],
                &scratch.inv_std[l - 1],
                n_prev,
            );
        }
        let (tmp, der) = (&scratch.h[l - 1], &mut scratch.der[l - 1]);
        for (di, &ti) in der.iter_mut().zip(tmp.iter()) {
            *di *= ti;
        }
    }
    // First layer for the whole block in one GEMM: G₁ = Δ₁ᵀ·X, (B·N₁) × d.
    let n1 = model.widths[0];
    let delta = MatRef::from_row_major_slice(&scratch.der[0][..], rows, block * n1);
    let xm = MatRef::from_row_major_slice(x, rows, d);
    let g1 = MatMut::from_row_major_slice_mut(&mut grads[0][..block * n1 * d], block * n1, d);
    matmul(
        g1,
        Accum::Replace,
        delta.transpose(),
        xm,
        T::one(),
        Par::Seq,
    );
}

/// The data-term gradient of a network with one hidden layer under the Gaussian likelihood
/// (paper eq. 1 with L = 2; the energy of App. A.1), fused: the same arithmetic as
/// [`forward`], `likelihood::residuals` (Gaussian) and [`backward`] in the same order, so the
/// numbers are bit for bit those of the three separate passes. What changes is the memory
/// traffic: row μ's σ(h), f, residual r = (f − y)/κ, readout gradient Σ_μ r σ(h) and
/// δ = r w σ′(h) are all produced while the row is in L1, so σ(h) is never stored and
/// σ′(h) is written once (as δ) instead of being written, re-read and rewritten.
/// On return the block's `residual` (rows × B), `sq_error` = Σ_μ (f − y)² and `data_loss` =
/// sq_error/(2κ) hold per chain, and `grads` the data-term gradient (overwritten).
#[inline(always)]
pub fn two_layer_gaussian_gradient<T: Real>(
    model: &FcnModel,
    chains: &mut ChainBlock<T>,
    data: &DataTerm<'_, T>,
    scratch: &mut Scratch<T>,
) {
    debug_assert_eq!(model.widths.len(), 1);
    let block = chains.len;
    let ChainBlock {
        params,
        residual,
        sq_error,
        data_loss: loss,
        grads,
        ..
    } = chains;
    let (x, y, kappa) = (data.x, data.y, data.kappa);
    let rows = y.len();
    scratch.ensure(model, rows, block);
    let d = model.d;
    let n = model.widths[0];
    let width = block * n;
    let inv_kappa = T::of(1.0 / kappa);
    sq_error[..block].fill(0.0);
    let (readout, g_readout) = (&params[1], &mut grads[1]);
    g_readout.fill(T::zero());
    if rows == 0 {
        loss[..block].fill(0.0);
        grads[0].fill(T::zero());
        return;
    }
    // H₁ = X·W₁ᵀ for the whole block in one GEMM.
    let xm = MatRef::from_row_major_slice(x, rows, d);
    let w1 = MatRef::from_row_major_slice(&params[0][..width * d], width, d);
    let h1 = MatMut::from_row_major_slice_mut(&mut scratch.h[0][..], rows, width);
    matmul(h1, Accum::Replace, xm, w1.transpose(), T::one(), Par::Seq);
    // σ(h) of one row lives in the first `width` entries of `act`.
    let (h, act, der) = (&scratch.h[0], &mut scratch.act[0], &mut scratch.der[0]);
    let a_row = &mut act[..width];
    for (mu, &yv) in y.iter().enumerate() {
        let range = mu * width..(mu + 1) * width;
        let d_row = &mut der[range.clone()];
        model.activation.apply(&h[range], a_row, d_row);
        for c in 0..block {
            let a = &a_row[c * n..(c + 1) * n];
            let w = &readout[c * n..(c + 1) * n];
            let err = dot(a, w) - yv;
            let r = err * inv_kappa;
            residual[mu * block + c] = r;
            sq_error[c] += (err * err).f64();
            for (gi, &ai) in g_readout[c * n..(c + 1) * n].iter_mut().zip(a) {
                *gi += r * ai;
            }
            for (di, &wi) in d_row[c * n..(c + 1) * n].iter_mut().zip(w) {
                *di *= r * wi;
            }
        }
    }
    for c in 0..block {
        loss[c] = sq_error[c] / (2.0 * kappa);
    }
    // G₁ = Δ₁ᵀ·X, (B·N₁) × d, one GEMM into a column-major buffer, then transposed into the
    // row-major parameter layout. Written row-major directly, the GEMM's output dimension
    // would be d = 40, which faer's 48-row AVX-512 micro-kernels pad by 20 %; column-major it
    // is B·N₁ (160 here), which they tile exactly.
    let delta = MatRef::from_row_major_slice(&der[..], rows, width);
    let buf = &mut scratch.first_layer_grad_colmajor;
    buf.resize(width * d, T::zero());
    let g1 = MatMut::from_column_major_slice_mut(&mut buf[..], width, d);
    matmul(
        g1,
        Accum::Replace,
        delta.transpose(),
        xm,
        T::one(),
        Par::Seq,
    );
    for (i, g_row) in grads[0][..width * d].chunks_exact_mut(d).enumerate() {
        for (j, g) in g_row.iter_mut().enumerate() {
            *g = buf[j * width + i];
        }
    }
}

/// A row-major strided mutable view. faer 0.24.4's `MatMut::from_row_major_slice_with_stride_mut`
/// builds a *column*-major view (row stride 1, column stride `row_stride`; the immutable
/// `MatRef` version is correct), so the view is built as the transpose of a column-major one.
fn row_major_strided_mut<T>(
    slice: &mut [T],
    rows: usize,
    cols: usize,
    row_stride: usize,
) -> MatMut<'_, T> {
    MatMut::from_column_major_slice_with_stride_mut(slice, cols, rows, row_stride).transpose_mut()
}

/// Σ a_i b_i with eight partial sums over chunks of eight, reduced in a fixed tree: the order
/// depends only on the length, never on where the slices start, so a chain's numbers do not
/// depend on its position in a block. Eight lanes fill one AVX2 register (f32) and tile the
/// hidden widths used here (40 = 5 × 8) without a tail; with four lanes the compiler emitted
/// two-wide loads and this dot was the hottest loop of the two-layer step.
#[inline]
pub fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [T::zero(); 8];
    let mut a_chunks = a.chunks_exact(8);
    let mut b_chunks = b.chunks_exact(8);
    for (ca, cb) in (&mut a_chunks).zip(&mut b_chunks) {
        for j in 0..8 {
            acc[j] += ca[j] * cb[j];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (&x, &y) in a_chunks.remainder().iter().zip(b_chunks.remainder()) {
        s += x * y;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// U(θ) of chain `c` computed directly in f64 (no blocking, no GEMM): the reference the
    /// analytic gradient is checked against.
    fn energy_reference(
        model: &FcnModel,
        params: &[Vec<f64>],
        c: usize,
        x: &[f64],
        y: &[f64],
        kappa: f64,
    ) -> f64 {
        let d = model.d;
        let mut data = 0.0;
        for (mu, &yv) in y.iter().enumerate() {
            let mut a: Vec<f64> = x[mu * d..(mu + 1) * d].to_vec();
            for (l, &n) in model.widths.iter().enumerate() {
                if model.layernorm && l > 0 {
                    let m = a.iter().sum::<f64>() / a.len() as f64;
                    let v = a.iter().map(|v| (v - m).powi(2)).sum::<f64>() / a.len() as f64;
                    let s = (v + LAYERNORM_EPS).sqrt();
                    a = a.iter().map(|v| (v - m) / s).collect();
                }
                let fan = model.fan_in(l);
                let w = &params[l][c * n * fan..(c + 1) * n * fan];
                a = (0..n)
                    .map(|i| {
                        let h: f64 = (0..fan).map(|j| w[i * fan + j] * a[j]).sum();
                        model.activation.value_f64(h)
                    })
                    .collect();
            }
            let n = *model.widths.last().unwrap();
            let w = &params[model.widths.len()][c * n..(c + 1) * n];
            let f: f64 = a.iter().zip(w).map(|(a, w)| a * w).sum();
            data += (f - yv).powi(2) / (2.0 * kappa);
        }
        data
    }

    /// The fused two-layer path must reproduce forward → residuals → backward bit for bit
    /// (f32, the precision it exists for, and f64), for every activation.
    #[test]
    fn fused_two_layer_gradient_equals_the_separate_passes() {
        fn check<T: Real + std::fmt::Debug>(rng: &mut rand_chacha::ChaCha8Rng) {
            let (d, n, rows, block, kappa) = (7, 9, 23, 3, 0.37);
            for act in [
                Activation::Erf,
                Activation::Tanh,
                Activation::Relu,
                Activation::Poly,
            ] {
                let model = FcnModel {
                    d,
                    widths: vec![n],
                    activation: act,
                    prior_var: vec![1.0, 1.0],
                    frozen: vec![false, false],
                    layernorm: false,
                };
                let x: Vec<T> = (0..rows * d)
                    .map(|_| T::of(rng.random_range(-1.5..1.5)))
                    .collect();
                let y: Vec<T> = (0..rows)
                    .map(|_| T::of(rng.random_range(-1.0..1.0)))
                    .collect();
                let params: Vec<Vec<T>> = (0..2)
                    .map(|g| {
                        (0..block * model.group_len(g))
                            .map(|_| T::of(rng.random_range(-0.9..0.9)))
                            .collect()
                    })
                    .collect();
                let data = DataTerm {
                    x: &x,
                    y: &y,
                    p: rows,
                    kappa,
                    likelihood: crate::sim::config::Likelihood::Gaussian,
                };
                let mut scratch = Scratch::default();
                let mut residual = vec![T::zero(); rows * block];
                let (mut sq, mut loss) = (vec![0.0; block], vec![0.0; block]);
                let mut grads: Vec<Vec<T>> =
                    params.iter().map(|p| vec![T::zero(); p.len()]).collect();
                forward(&model, &params, block, &x, rows, &mut scratch);
                let f = scratch.f.clone();
                crate::sim::model::likelihood::residuals(
                    &data,
                    &f,
                    block,
                    &mut residual,
                    &mut sq,
                    &mut loss,
                );
                backward(
                    &model,
                    &params,
                    block,
                    &data,
                    &residual,
                    &mut scratch,
                    &mut grads,
                );
                let mut fused_scratch = Scratch::default();
                let mut fused = ChainBlock {
                    first: 0,
                    len: block,
                    grads: params.iter().map(|p| vec![T::one(); p.len()]).collect(),
                    params: params.clone(),
                    residual: vec![T::zero(); rows * block],
                    rngs: Vec::new(),
                    diverged: vec![None; block],
                    energy: vec![0.0; block],
                    sq_error: vec![0.0; block],
                    data_loss: vec![0.0; block],
                    virial: vec![vec![0.0; 2]; block],
                };
                two_layer_gaussian_gradient(&model, &mut fused, &data, &mut fused_scratch);
                let (fused_residual, fused_sq, fused_loss, fused_grads) =
                    (fused.residual, fused.sq_error, fused.data_loss, fused.grads);
                let bits = |v: &[T]| v.iter().map(|a| a.f64().to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&fused_residual), bits(&residual), "{act:?} residual");
                assert_eq!(fused_sq, sq, "{act:?} squared error");
                assert_eq!(fused_loss, loss, "{act:?} loss");
                for g in 0..2 {
                    assert_eq!(bits(&fused_grads[g]), bits(&grads[g]), "{act:?} group {g}");
                }
            }
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        check::<f32>(&mut rng);
        check::<f64>(&mut rng);
    }

    #[test]
    fn analytic_gradients_match_finite_differences() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for (widths, act, layernorm) in [
            (vec![5], Activation::Erf, false),
            (vec![5], Activation::Tanh, false),
            (vec![4, 3], Activation::Linear, false),
            (vec![4, 3], Activation::Tanh, false),
            (vec![3, 4, 2], Activation::Erf, false),
            (vec![4, 3], Activation::Poly, false),
            (vec![5, 3], Activation::Relu, false),
            (vec![3], Activation::Linear, false),
            (vec![4, 3], Activation::Erf, true),
            (vec![3, 4, 2], Activation::Tanh, true),
            (vec![5, 3], Activation::Poly, true),
            (vec![6, 4], Activation::Relu, true),
        ] {
            let d = 4;
            let rows = 7;
            let block = 3;
            let kappa = 0.7;
            let model = FcnModel {
                d,
                widths: widths.clone(),
                activation: act,
                prior_var: vec![1.0; widths.len() + 1],
                frozen: vec![false; widths.len() + 1],
                layernorm,
            };
            let x: Vec<f64> = (0..rows * d).map(|_| rng.random_range(-1.5..1.5)).collect();
            let y: Vec<f64> = (0..rows).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mut params: Vec<Vec<f64>> = (0..model.n_groups())
                .map(|g| {
                    (0..block * model.group_len(g))
                        .map(|_| rng.random_range(-0.9..0.9))
                        .collect()
                })
                .collect();
            let mut scratch = Scratch::default();
            forward(&model, &params, block, &x, rows, &mut scratch);
            for c in 0..block {
                let direct: f64 = (0..rows)
                    .map(|mu| (scratch.f[mu * block + c] - y[mu]).powi(2) / (2.0 * kappa))
                    .sum();
                let reference = energy_reference(&model, &params, c, &x, &y, kappa);
                assert!(
                    (direct - reference).abs() < 1e-9 * (1.0 + reference),
                    "{widths:?} chain {c}: forward {direct} vs {reference}"
                );
            }
            let residual: Vec<f64> = (0..rows * block)
                .map(|i| (scratch.f[i] - y[i / block]) / kappa)
                .collect();
            let mut grads: Vec<Vec<f64>> = params.iter().map(|p| vec![0.0; p.len()]).collect();
            let data = DataTerm {
                x: &x,
                y: &y,
                p: rows,
                kappa,
                likelihood: crate::sim::config::Likelihood::Gaussian,
            };
            backward(
                &model,
                &params,
                block,
                &data,
                &residual,
                &mut scratch,
                &mut grads,
            );
            for g in 0..model.n_groups() {
                for idx in 0..params[g].len() {
                    let c = idx / model.group_len(g);
                    let old = params[g][idx];
                    let eps = 1e-6;
                    params[g][idx] = old + eps;
                    let up = energy_reference(&model, &params, c, &x, &y, kappa);
                    params[g][idx] = old - eps;
                    let down = energy_reference(&model, &params, c, &x, &y, kappa);
                    params[g][idx] = old;
                    let fd = (up - down) / (2.0 * eps);
                    let an = grads[g][idx];
                    assert!(
                        (fd - an).abs() <= 1e-6 * (1.0 + fd.abs()),
                        "{widths:?} {act:?} LN {layernorm} group {g} index {idx}: fd {fd} analytic {an}"
                    );
                }
            }
        }
    }
}
