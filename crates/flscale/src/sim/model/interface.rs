//! The one model interface of the sampling engine: what the ensemble, every
//! kernel (ULA, MALA, HMC, replica exchange) and the collapsed posterior need from a network,
//! on the one chain layout ([`ChainBlock`]: per parameter group, the block's chains one after
//! the other).
//!
//! A model is a list of parameter groups (each with its Gaussian prior variance, paper App.
//! A.1) and three evaluations on a block of chains:
//!
//! * [`Model::data_gradient`]: the data term L of U (Gaussian |f − y|²/(2κ) or cross-entropy,
//!   [`crate::sim::model::likelihood`]) and ∇L for every chain of the block;
//! * [`Model::predict`]: f on a test set;
//! * the linear readout (the last group a): f(x) = Σ_k φ_k(x; θ_hidden)·a_k. The collapsed
//!   posterior ([`crate::sim::model::collapsed`]) integrates a out of any model through
//!   [`Model::features_forward`], [`Model::features`] and [`Model::feature_backward`].
//!
//! Optional: a per-unit preconditioner ([`Model::preconditioned_units`],
//! [`Model::unit_curvature`]) where the model has a Gauss–Newton estimate of each unit's
//! curvature (the FCN's last hidden layer).
//!
//! The FCN implements the interface on its blocked GEMMs ([`crate::sim::model::fcn`]); the CNN
//! and attention models, which evaluate per chain ([`crate::sim::model::flat::FlatModel`]),
//! through the adapter in [`crate::sim::model::chainwise`], which gathers a chain's groups into
//! one vector and scatters its gradient back.

use faer::MatRef;

use crate::sim::chains::ChainBlock;
use crate::sim::config::{Likelihood, Preconditioner};
use crate::sim::num::real::Real;

/// Chain c's feature matrix Φ (P × K, rows contiguous, `row_stride` apart) in a model's
/// scratch, after [`Model::features_forward`].
#[derive(Clone, Copy)]
pub struct Features<'a, T> {
    /// Row μ of Φ starts at μ·`row_stride`.
    pub data: &'a [T],
    /// P.
    pub rows: usize,
    /// K (the readout's length).
    pub cols: usize,
    /// Distance between consecutive rows.
    pub row_stride: usize,
}

impl<'a, T: Real> Features<'a, T> {
    /// Row μ of Φ: the K features of input μ.
    #[inline(always)]
    pub fn row(&self, mu: usize) -> &'a [T] {
        &self.data[mu * self.row_stride..mu * self.row_stride + self.cols]
    }

    /// Φ as a strided matrix view (for the GEMMs).
    #[inline(always)]
    pub fn mat(&self) -> MatRef<'a, T> {
        if self.rows == 0 {
            return MatRef::from_row_major_slice(&self.data[..0], 0, self.cols);
        }
        MatRef::from_row_major_slice_with_stride(self.data, self.rows, self.cols, self.row_stride)
    }
}

/// The data term of the energy that a model evaluates: the training set and the likelihood
/// L(f(X), y) at ridge κ ([`crate::sim::model::likelihood`]), borrowed from the ensemble.
#[derive(Clone, Copy, Debug)]
pub struct DataTerm<'a, T> {
    /// Training inputs, P × (floats per input).
    pub x: &'a [T],
    /// Training targets (P).
    pub y: &'a [T],
    /// Number of training samples P.
    pub p: usize,
    /// Ridge κ: L is divided by it.
    pub kappa: f64,
    /// Gaussian or cross-entropy.
    pub likelihood: Likelihood,
}

/// The group a per-unit preconditioner acts on: `units` consecutive rows of `fan_in` weights
/// per chain (the FCN's last hidden layer: one row per neuron).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreconditionedUnits {
    /// The parameter group.
    pub group: usize,
    /// Units (rows) per chain.
    pub units: usize,
    /// Weights per unit.
    pub fan_in: usize,
}

/// A network whose posterior the engine samples, evaluated on blocks of chains (module doc).
pub trait Model<T: Real>: Sync {
    /// Work buffers of one rayon task (reused across steps).
    type Scratch: Default + Send + std::fmt::Debug;

    /// Whether the engine runs this model's steps in the CPU's vector build
    /// ([`crate::sim::num::simd::vectorized`]): true for the FCN, whose element-wise passes
    /// are written for it; the CNN's and attention's per-chain code ran 11–13 % slower there
    /// (BENCHMARKS.md, "Sampling efficiency", the reverted vector dispatch), so they keep
    /// the baseline build.
    const VECTOR_BUILD: bool = true;

    /// Number of parameter groups; the last is the linear readout.
    fn n_groups(&self) -> usize;

    /// Entries of group g per chain.
    fn group_len(&self, g: usize) -> usize;

    /// Prior variance v of one entry of group g: θ ~ 𝒩(0, v).
    fn prior_var(&self, g: usize) -> f64;

    /// Whether group g is held at its initial value.
    fn is_frozen(&self, g: usize) -> bool;

    /// The group's name in the diagnostics ("layer1", "readout", "attention", …).
    fn group_name(&self, g: usize) -> String;

    /// Parameters of one chain.
    fn n_params(&self) -> usize {
        (0..self.n_groups()).map(|g| self.group_len(g)).sum()
    }

    /// Bytes of one chain's share of a block's work buffers on `p` inputs, which sizes the
    /// blocks ([`crate::sim::chains::block_size_for`]; 0: one chain per block).
    fn chain_bytes(&self, p: usize, bytes_per_float: usize) -> usize;

    /// The data term of every chain of the block at its parameters: ∇L into `block.grads`
    /// (overwritten, every group), L into `block.data_loss`, Σ_μ (f − y)² into
    /// `block.sq_error`.
    fn data_gradient(
        &self,
        block: &mut ChainBlock<T>,
        data: &DataTerm<'_, T>,
        scratch: &mut Self::Scratch,
    );

    /// [`Model::data_gradient`] for the unadjusted step, which may fuse passes; the numbers
    /// are the same bit for bit.
    #[inline(always)]
    fn data_gradient_fused(
        &self,
        block: &mut ChainBlock<T>,
        data: &DataTerm<'_, T>,
        scratch: &mut Self::Scratch,
    ) {
        self.data_gradient(block, data, scratch);
    }

    /// f of every chain of a block of `b` chains (`params` in the block layout) on the `n`
    /// inputs `x`, into `out` (n × b, row-major: input-major).
    fn predict(
        &self,
        params: &[Vec<T>],
        b: usize,
        x: &[T],
        n: usize,
        out: &mut [T],
        scratch: &mut Self::Scratch,
    );

    /// The forward pass up to the readout's features Φ of every chain of the block on the
    /// `p` inputs `x`, kept in `scratch` for [`Model::features`] and
    /// [`Model::feature_backward`].
    fn features_forward(
        &self,
        params: &[Vec<T>],
        b: usize,
        x: &[T],
        p: usize,
        scratch: &mut Self::Scratch,
    );

    /// Chain c's Φ (P × K) from the last [`Model::features_forward`].
    fn features<'a>(
        &self,
        scratch: &'a Self::Scratch,
        b: usize,
        c: usize,
        p: usize,
    ) -> Features<'a, T>;

    /// Given D = ∂E/∂Φ of every chain (`dphi`: p × (b·K), row μ holding the b chains' K
    /// entries one after the other, the layout of the FCN's activations) after
    /// [`Model::features_forward`] with the block's `params`, the inputs of `data` and the
    /// same `scratch`: writes Σ_{μ,k} D_{μk} ∇_θ Φ_{μk} into the hidden groups of
    /// `block.grads` (overwritten; the readout group is not touched). Chains with `zero[c]`
    /// get a zero gradient.
    fn feature_backward(
        &self,
        block: &mut ChainBlock<T>,
        data: &DataTerm<'_, T>,
        dphi: &[T],
        zero: &[bool],
        scratch: &mut Self::Scratch,
    );

    /// Where a per-unit preconditioner acts (`None`: the model has no curvature estimate
    /// for one, so M = I).
    fn preconditioned_units(&self) -> Option<PreconditionedUnits> {
        None
    }

    /// The collapsed posterior's curvature estimate per chain and unit of
    /// [`Model::preconditioned_units`] — `Neuron`: one scalar g_i per unit; `Block`: one
    /// fan_in × fan_in block v·G_i per unit — or `None` where there is none.
    fn unit_curvature(
        &self,
        _kind: Preconditioner,
        _block: &ChainBlock<T>,
        _data: &DataTerm<'_, T>,
        _scratch: &mut Self::Scratch,
    ) -> Option<Vec<f64>> {
        None
    }
}
