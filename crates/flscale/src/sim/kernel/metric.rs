//! The constant preconditioner (metric) of the kernel, on the units a model names
//! ([`Model::preconditioned_units`]: the FCN's last hidden layer), set during burn-in by
//! [`crate::sim::kernel::mala::Kernel::adapt_preconditioner`] and frozen after it
//! (docs/langevin.md, "Preconditioner"): per unit a scalar M_i, or an n_in × n_in block
//! M_i = (v·G_i)⁻¹ kept as Cholesky factors, applied as the factor K of M = KKᵀ.
//!
//!
//! Or, with `sampler.metric = "diag"`, a diagonal M over every sampled weight ([`Metric::diagonal`]):
//! per chain and weight the regularised variance of the chain's own draws in a window of the
//! burn-in ([`VarianceWindow`]), Stan's `diag_e` metric (Stan Reference Manual, "HMC algorithm
//! parameters"). M approximating the posterior covariance is the scale that makes every
//! direction equally easy to move in: the Hamiltonian flow (and the Langevin move, its one-step
//! limit) is then as if run on a posterior of unit scale in every coordinate, so one step size
//! suits all (Betancourt 2017, "A conceptual introduction to Hamiltonian Monte Carlo",
//! arXiv:1701.02434, sec. 4.2, "Tuning the kinetic energy": the Euclidean–Gaussian kinetic
//! energy with the inverse metric set to the posterior covariance; its diagonal where the full
//! matrix is too costly). A stiff hidden layer (variance ~10⁻⁶) beside a soft readout then no
//! longer forces the readout to move in steps of the hidden layer's size.
//!
//! [`Model::preconditioned_units`]: crate::sim::model::interface::Model::preconditioned_units

use crate::sim::model::interface::PreconditionedUnits;
use crate::sim::num::linalg::{cholesky, solve_lower};
use crate::sim::num::real::Real;

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
    /// `sampler.metric = "diag"`: per group, in the layout of the block's `params` (b·n,
    /// chain-major), the variance m_i of every weight, M = diag(m); empty for a group Langevin
    /// does not move, and no groups at all while the metric is not diagonal.
    pub(super) diagonal: Vec<Vec<f64>>,
    /// √m_i, the layout of `diagonal` (K = diag(√m)).
    pub(super) diagonal_sqrt: Vec<Vec<f64>>,
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
    diagonal: bool,
}

impl MetricLayout {
    pub(super) fn of(units: Option<PreconditionedUnits>, metric: &Metric) -> Self {
        let Some(units) = units else {
            // No preconditioned group: M = I everywhere.
            return MetricLayout {
                g_pc: usize::MAX,
                n_in: 0,
                n_pc: 0,
                scalar: false,
                blockwise: false,
                diagonal: !metric.diagonal.is_empty(),
            };
        };
        MetricLayout {
            g_pc: units.group,
            n_in: units.fan_in,
            n_pc: units.units,
            scalar: !metric.scalar.is_empty(),
            blockwise: !metric.factor.is_empty(),
            diagonal: !metric.diagonal.is_empty(),
        }
    }

    /// Whether group `g` carries the diagonal metric (then neither the scalar nor the
    /// blockwise one is set).
    #[inline(always)]
    pub(super) fn diagonal(&self, metric: &Metric, g: usize) -> bool {
        self.diagonal && !metric.diagonal[g].is_empty()
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
    /// The blockwise metric M_i = (v·G_i)⁻¹ from the mean curvature blocks v·G_i (b·N blocks
    /// of n_in × n_in, [`crate::sim::model::collapsed::neuron_curvature_blocks`]): the Cholesky
    /// factor L of each, L⁻¹, (L⁻¹)ᵀ and L⁻¹ interleaved across the units (see the fields).
    pub(super) fn from_curvature_blocks(mean: &[f64], n_in: usize) -> Metric {
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
            // v·G_i = I + PSD, so this fails only on non-finite input; that unit then keeps
            // M_i = I.
            if !cholesky(a, l, n_in) {
                l.fill(0.0);
                for j in 0..n_in {
                    l[j * n_in + j] = 1.0;
                }
            }
            for j in 0..n_in {
                column.fill(0.0);
                column[j] = 1.0;
                solve_lower(l, &mut column, n_in);
                for (i, c) in column.iter().enumerate() {
                    inv[i * n_in + j] = *c;
                }
                inv_t[j * n_in..(j + 1) * n_in].copy_from_slice(&column);
            }
        }
        let units = mean.len() / nn.max(1);
        let mut inv_factor_lanes = Vec::with_capacity(units * nn);
        for a in 0..n_in {
            for b in 0..=a {
                inv_factor_lanes.extend(inv_factor.chunks_exact(nn).map(|inv| inv[a * n_in + b]));
            }
        }
        Metric {
            scalar: Vec::new(),
            factor,
            inv_factor,
            inv_factor_transposed,
            inv_factor_lanes,
            ..Metric::default()
        }
    }

    /// The diagonal metric M = diag(m) of per-group variances `diagonal` ([`Metric::diagonal`]).
    pub(super) fn from_diagonal(diagonal: Vec<Vec<f64>>) -> Metric {
        let diagonal_sqrt = diagonal
            .iter()
            .map(|g| g.iter().map(|m| m.sqrt()).collect())
            .collect();
        Metric {
            diagonal,
            diagonal_sqrt,
            ..Metric::default()
        }
    }

    /// Applies K (`transpose` false) or Kᵀ (true) in place to a direction in the layout of a
    /// block's `params`, with M = KKᵀ: K = diag(√M_i) for scalars, K = L⁻ᵀ for blocks.
    #[inline(always)]
    pub(super) fn apply(
        &self,
        units: Option<PreconditionedUnits>,
        v: &mut [Vec<f64>],
        transpose: bool,
    ) {
        if !self.diagonal_sqrt.is_empty() {
            // K = Kᵀ = diag(√m).
            for (vg, sg) in v.iter_mut().zip(&self.diagonal_sqrt) {
                if !sg.is_empty() {
                    vg.iter_mut().zip(sg).for_each(|(a, s)| *a *= s);
                }
            }
            return;
        }
        let Some(units) = units else {
            return;
        };
        let (g, n_in) = (units.group, units.fan_in);
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

/// Stan's shrinkage of a window's sample variance s² of n draws towards 10⁻³ with the weight
/// of 5 draws, (n/(n + 5))·s² + 10⁻³·5/(n + 5) (Stan Reference Manual, "HMC algorithm
/// parameters", Euclidean metric; `stan/mcmc/var_adaptation.hpp`), which keeps a short window
/// from setting a variance of zero. Stan's 10⁻³ is in the units of its unconstrained
/// parameters, which are of order one; a weight here is of order its prior variance v
/// (σ²/fan-in: 10⁻⁴ for a fan-in of 10⁴), so the target is 10⁻³ in units of `unit` = v,
/// which leaves the shrinkage as weak, relative to the variance, as Stan's.
pub(super) fn regularised_variance(sample_variance: f64, n: u64, unit: f64) -> f64 {
    let n = n as f64;
    n / (n + 5.0) * sample_variance + 1e-3 * unit * 5.0 / (n + 5.0)
}

/// The draws of one window of the burn-in, per chain and weight of the moved groups: their
/// number, running mean and sum of squared deviations (Welford 1962, Technometrics 4:419),
/// in f64 whatever the working precision, from which [`VarianceWindow::metric`] takes the
/// diagonal metric.
#[derive(Debug, Default)]
pub(super) struct VarianceWindow {
    count: u64,
    mean: Vec<Vec<f64>>,
    m2: Vec<Vec<f64>>,
}

impl VarianceWindow {
    /// Adds the current draw `params` (a block's groups) of the groups with `sampled[g]`.
    #[inline(always)]
    pub(super) fn add<T: Real>(&mut self, params: &[Vec<T>], sampled: &[bool]) {
        if self.mean.len() != params.len() {
            let zeros = |g: usize| vec![0.0; if sampled[g] { params[g].len() } else { 0 }];
            self.mean = (0..params.len()).map(zeros).collect();
            self.m2 = (0..params.len()).map(zeros).collect();
            self.count = 0;
        }
        self.count += 1;
        let w = 1.0 / self.count as f64;
        for ((theta, mean), m2) in params.iter().zip(&mut self.mean).zip(&mut self.m2) {
            for ((t, mu), s) in theta.iter().zip(mean.iter_mut()).zip(m2.iter_mut()) {
                let x = t.f64();
                let delta = x - *mu;
                *mu += w * delta;
                *s += delta * (x - *mu);
            }
        }
    }

    /// The draws gathered so far.
    pub(super) fn count(&self) -> u64 {
        self.count
    }

    /// The metric of the window: per group g and weight the [`regularised_variance`] of its
    /// draws (sample variance, n − 1 in the denominator) in units of `prior_var[g]`; `None`
    /// with fewer than two draws.
    pub(super) fn metric(&self, prior_var: &[f64]) -> Option<Metric> {
        if self.count < 2 {
            return None;
        }
        let n = self.count;
        let diagonal = self
            .m2
            .iter()
            .zip(prior_var)
            .map(|(g, &v)| {
                g.iter()
                    .map(|s| regularised_variance(s / (n - 1) as f64, n, v))
                    .collect()
            })
            .collect();
        Some(Metric::from_diagonal(diagonal))
    }

    /// Forgets the window's draws (a new window starts).
    pub(super) fn clear(&mut self) {
        *self = VarianceWindow::default();
    }
}
