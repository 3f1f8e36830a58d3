//! The constant preconditioner (metric) of the FCN kernel's last hidden layer, set during
//! burn-in by [`crate::sim::kernel::mala::Kernel::adapt_preconditioner`] and frozen after it
//! (docs/langevin.md, "Preconditioner"): per neuron a scalar M_i, or an n_in × n_in block
//! M_i = (v·G_i)⁻¹ kept as Cholesky factors, applied as the factor K of M = KKᵀ.

use crate::sim::model::fcn::FcnModel;

/// The constant preconditioner M of one block's last hidden layer (identity elsewhere and
/// while its fields are empty). See [`crate::sim::kernel::mala::Kernel::adapt_preconditioner`].
#[derive(Debug, Default)]
pub(super) struct Metric {
    /// `Preconditioner::Neuron`: M_i per chain and neuron (b·N, chain-major).
    pub(super) scalar: Vec<f64>,
    /// `Preconditioner::Block`: per chain and neuron (b·N blocks of n_in × n_in, row-major,
    /// lower triangular) the Cholesky factor L of M_i⁻¹ = v·G_i = LLᵀ, for
    /// |r|²_{M_i⁻¹} = |Lᵀr|². Empty unless blockwise.
    pub(super) factor: Vec<f64>,
    /// L⁻¹ (same layout): M_i = L⁻ᵀL⁻¹, so the drift is M_i∇U = L⁻ᵀ(L⁻¹∇U) and the noise
    /// L⁻ᵀξ has covariance M_i — two triangular products per neuron, no M_i formed.
    pub(super) inv_factor: Vec<f64>,
    /// (L⁻¹)ᵀ (same layout): the columns of L⁻¹ as contiguous rows, so that L⁻¹x is a sum of
    /// scaled rows, which vectorises (a row-by-row dot product is a sequential reduction).
    pub(super) inv_factor_transposed: Vec<f64>,
    /// L⁻¹ of every neuron of the block interleaved for [`Metric::apply`]: for each entry
    /// (a, b), b ≤ a, of the lower triangle (row by row), the b·N neurons' values side by
    /// side, so that one entry's product runs across all neurons at once (contiguous, full
    /// vector width) instead of along a row of length ≤ n_in.
    pub(super) inv_factor_lanes: Vec<f64>,
}

/// Where the metric acts in a block's parameters: the preconditioned group g_pc (the last
/// hidden layer, one M_i per neuron, a row of n_in weights) and whether it is scalar or
/// blockwise; every other group has M = 1.
pub(super) struct MetricLayout {
    g_pc: usize,
    pub(super) n_in: usize,
    pub(super) n_pc: usize,
    scalar: bool,
    blockwise: bool,
}

impl MetricLayout {
    pub(super) fn of(model: &FcnModel, metric: &Metric) -> Self {
        let g_pc = model.widths.len() - 1;
        MetricLayout {
            g_pc,
            n_in: model.fan_in(g_pc),
            n_pc: model.widths[g_pc],
            scalar: !metric.scalar.is_empty(),
            blockwise: !metric.factor.is_empty(),
        }
    }

    /// The scalar M of weight `i` of chain `c`'s group `g` (1 outside the scalar metric).
    #[inline(always)]
    pub(super) fn scalar(&self, metric: &Metric, g: usize, c: usize, i: usize) -> f64 {
        if g == self.g_pc && self.scalar {
            metric.scalar[c * self.n_pc + i / self.n_in]
        } else {
            1.0
        }
    }

    /// Whether group `g` carries the blockwise metric.
    #[inline(always)]
    pub(super) fn blockwise(&self, g: usize) -> bool {
        g == self.g_pc && self.blockwise
    }

    /// Chain `c`'s neuron `i`'s n_in × n_in block in [`Metric`]'s factor arrays.
    #[inline(always)]
    pub(super) fn part(&self, c: usize, i: usize) -> std::ops::Range<usize> {
        let nn = self.n_in * self.n_in;
        (c * self.n_pc + i) * nn..(c * self.n_pc + i + 1) * nn
    }

    /// Consecutive weights of group `g` (of n per chain) that share one scalar M: a neuron's
    /// fan-in in the preconditioned group, the whole group elsewhere.
    #[inline(always)]
    pub(super) fn same_metric_run(&self, g: usize, n: usize) -> usize {
        if g == self.g_pc && self.scalar {
            self.n_in.max(1)
        } else {
            n.max(1)
        }
    }
}

/// y = Lx for a lower-triangular n × n L given as `lt` = Lᵀ (row-major, upper triangular),
/// as Σ_j x_j·(column j of L) = Σ_j x_j·(row j of Lᵀ): contiguous rows, no reduction.
#[inline(always)]
pub(super) fn lower_times_by_columns(lt: &[f64], x: &[f64], y: &mut [f64]) {
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
pub(super) fn lower_transposed_times(l: &[f64], x: &[f64], y: &mut [f64]) {
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
    pub(super) fn apply(&self, model: &FcnModel, v: &mut [Vec<f64>], transpose: bool) {
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
