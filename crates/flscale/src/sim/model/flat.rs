//! The per-chain model interface of the CNN and attention models: parameters as one vector
//! of groups stored one after the other, the data term and its gradient per chain or per
//! block of chains (spec 02 "Models"), and the data they are trained on. The engine sees
//! these models as [`crate::sim::model::Model`]s through the adapter in
//! [`crate::sim::model::chainwise`].

use crate::sim::config::ExperimentConfig;
use crate::sim::data::{data_stream, draw_inputs};
use crate::sim::model::interface::{DataTerm, PreconditionedUnits};
use crate::sim::num::real::Real;

/// One parameter group of a flat parameter vector (a layer, the attention matrices, …).
#[derive(Debug, Clone, PartialEq)]
pub struct ParamGroup {
    /// Name in the diagnostics ("layer1", "readout", "attention", "value").
    pub name: String,
    /// Number of entries.
    pub len: usize,
    /// Prior variance v of one entry: θ ~ 𝒩(0, v).
    pub prior_var: f64,
    /// Held at its initial value (not sampled).
    pub frozen: bool,
}

/// A network whose parameters are one flat vector (groups stored one after the other) and
/// whose data-term gradient is computed per chain.
pub trait FlatModel<T: Real>: Sync {
    /// Work buffers of one chain's evaluation (one per rayon task).
    type Scratch: Default + Send + std::fmt::Debug;

    /// The parameter groups, in storage order.
    fn groups(&self) -> &[ParamGroup];

    /// Floats per input sample (d for a vector, L·d for a token sequence).
    fn sample_len(&self) -> usize;

    /// f(x_μ) for the `n` inputs in `x` (n × `sample_len`), into `f`.
    fn predict(&self, theta: &[T], x: &[T], n: usize, f: &mut [T], scratch: &mut Self::Scratch);

    /// Writes ∇_θ |f(X) − y|²/(2κ) = Σ_μ r_μ ∇_θ f(x_μ), r_μ = (f(x_μ) − y_μ)/κ, into `grad`
    /// (overwriting it) and returns Σ_μ (f(x_μ) − y_μ)².
    fn data_gradient(
        &self,
        theta: &[T],
        data: &DataTerm<'_, T>,
        grad: &mut [T],
        scratch: &mut Self::Scratch,
    ) -> f64;

    /// The per-unit overlaps ρ with the teacher structure that the outlier count, R = E[ρ²]
    /// and the histogram are built from (filters for the CNN, heads for attention).
    fn overlaps(&self, theta: &[T], teacher: &[f64]) -> Vec<f64>;

    /// The prior (GP) standard deviation of one overlap ρ; outliers lie beyond 3 of them.
    fn overlap_scale(&self) -> f64;

    /// Rows whose second-moment matrix's leading eigenvector is compared with the teacher
    /// (the CNN's filters), as (rows, row length); None where that has no meaning.
    fn filters<'a>(&self, theta: &'a [T]) -> Option<(&'a [T], usize)>;

    /// Turns a prior draw into the model's "hot" (teacher-aligned) initial state (spec 02), in
    /// place; `teacher` is [`FlatData::teacher`].
    fn hot_start(&self, theta: &mut [T], teacher: &[f64]);

    /// The units of a per-unit preconditioner (the engine's
    /// [`crate::sim::model::Model::preconditioned_units`]); `None` (the default): the model
    /// has no curvature estimate and samples with M = I (its kind's `validate_kind` should
    /// then refuse `sampler.preconditioner`).
    fn preconditioned_units(&self) -> Option<PreconditionedUnits> {
        None
    }

    /// Per chain of a block and unit of [`FlatModel::preconditioned_units`] (chain-major, then
    /// unit-major; fan_in × fan_in, row-major): the collapsed posterior's Gauss–Newton block
    /// v·G_u at the readout `means[c]` (its conditional mean; `None`: a stopped chain, which
    /// gets the identity). See the CNN's for the formula.
    fn unit_curvature_blocks(
        &self,
        _thetas: &[&[T]],
        _means: &[Option<Vec<f64>>],
        _x: &[T],
        _n: usize,
        _kappa: f64,
        _scratch: &mut Self::Scratch,
    ) -> Option<Vec<f64>> {
        None
    }

    /// Bytes of one chain's share of a chain block's work buffers on `p` inputs, which sizes
    /// the blocks ([`crate::sim::chains::block_size_for`]); 0 where the model evaluates its chains one at a time
    /// (one chain per block).
    fn chain_bytes(&self, _p: usize, _bytes_per_float: usize) -> usize {
        0
    }

    /// [`FlatModel::data_gradient`] of the chains of a block at once: `thetas[c]` in,
    /// `grads[c]` and `sq[c]` out. The default evaluates them one after the other; a model
    /// whose first layer reads the shared input batches it over the chains (the CNN).
    fn data_gradient_block(
        &self,
        thetas: &[&[T]],
        data: &DataTerm<'_, T>,
        grads: &mut [&mut [T]],
        sq: &mut [f64],
        scratch: &mut Self::Scratch,
    ) {
        for ((theta, grad), s) in thetas.iter().zip(grads.iter_mut()).zip(sq.iter_mut()) {
            *s = self.data_gradient(theta, data, grad, scratch);
        }
    }

    /// The model is linear in its last group (the readout a, K = its length) given the
    /// others: f(x) = Σ_k φ_k(x; θ_hidden)·a_k. Writes every chain's feature matrix Φ
    /// (`n` × K, row-major) into `phis[c]` (resized), for the collapsed sampler
    /// ([`crate::sim::model::collapsed`], through [`crate::sim::model::chainwise`]).
    fn features_block(
        &self,
        thetas: &[&[T]],
        x: &[T],
        n: usize,
        phis: &mut [Vec<T>],
        scratch: &mut Self::Scratch,
    );

    /// Given D_c = ∂E/∂Φ_c (`n` × K, row-major) per chain, writes the gradient of E through
    /// the features, Σ_{μ,k} (D_c)_{μk} ∇_θ (Φ_c)_{μk}, into the hidden groups of `grads[c]`
    /// and zeroes its readout. Call right after [`FlatModel::features_block`] with the same
    /// `thetas`, `x` and `scratch`.
    fn feature_backward_block(
        &self,
        thetas: &[&[T]],
        x: &[T],
        n: usize,
        dphis: &[Vec<T>],
        grads: &mut [&mut [T]],
        scratch: &mut Self::Scratch,
    );

    /// Total number of parameters.
    fn n_params(&self) -> usize {
        self.groups().iter().map(|g| g.len).sum()
    }
}

/// Inputs and targets of a generic run (f64; converted to the working precision once).
#[derive(Debug, Clone)]
pub struct FlatData {
    /// Training inputs, P × sample_len.
    pub x_train: Vec<f64>,
    /// Training targets.
    pub y_train: Vec<f64>,
    /// Test inputs, n_test × sample_len.
    pub x_test: Vec<f64>,
    /// Test targets.
    pub y_test: Vec<f64>,
    /// The teacher vector the overlaps are measured against (model-specific meaning).
    pub teacher: Vec<f64>,
}

impl FlatData {
    /// Train (P) and test (n_test) sets whose every input is `repeats` independent units
    /// (the CNN's patches, attention's tokens) of `unit_std_devs.len()` coordinates with those
    /// standard deviations (the experiment's covariance, [`crate::sim::data`]), drawn from the data
    /// streams 1 and 2 of [`crate::sim::data::Dataset::generate`] (so the test set does not change
    /// with P, and a CNN with one patch gets the FCN's inputs), each labelled by `label`.
    pub fn draw(
        cfg: &ExperimentConfig,
        unit_std_devs: &[f64],
        repeats: usize,
        teacher: Vec<f64>,
        label: impl Fn(&[f64]) -> f64,
    ) -> FlatData {
        let row_std_devs = unit_std_devs.repeat(repeats);
        let seed = cfg.sampler.seed;
        let draw = |n: usize, k: u64| draw_inputs(n, &row_std_devs, &mut data_stream(seed, k));
        let labels =
            |x: &[f64]| -> Vec<f64> { x.chunks_exact(row_std_devs.len()).map(&label).collect() };
        let x_train = draw(cfg.data.p, 1);
        let x_test = draw(cfg.data.n_test, 2);
        FlatData {
            y_train: labels(&x_train),
            y_test: labels(&x_test),
            x_train,
            x_test,
            teacher,
        }
    }
}

/// Sets the component of `v` along the unit vector `direction` to `target`, keeping the
/// orthogonal part: v ← v + (target − v·u)·u. The hot starts (spec 02) of the flat models.
pub(crate) fn set_component<T: Real>(v: &mut [T], direction: &[f64], target: f64) {
    let along: f64 = v.iter().zip(direction).map(|(w, t)| w.f64() * t).sum();
    for (w, t) in v.iter_mut().zip(direction) {
        *w = T::of(w.f64() + (target - along) * t);
    }
}

/// Central finite-difference check of a flat model's data gradient (used by the models'
/// tests): returns the largest |analytic − numeric| / (|numeric| + `floor`) over the entries.
#[cfg(test)]
pub(crate) fn gradient_error<M: FlatModel<f64>>(
    model: &M,
    theta: &[f64],
    x: &[f64],
    y: &[f64],
    floor: f64,
) -> f64 {
    let n = y.len();
    let mut scratch = M::Scratch::default();
    let mut grad = vec![0.0; theta.len()];
    let data = DataTerm {
        x,
        y,
        p: n,
        kappa: 1.0,
        likelihood: crate::sim::config::Likelihood::Gaussian,
    };
    model.data_gradient(theta, &data, &mut grad, &mut scratch);
    let loss = |t: &[f64], scratch: &mut M::Scratch| -> f64 {
        let mut f = vec![0.0; n];
        model.predict(t, x, n, &mut f, scratch);
        f.iter().zip(y).map(|(a, b)| (a - b).powi(2)).sum::<f64>() / 2.0
    };
    let h = 1e-6;
    let mut worst: f64 = 0.0;
    let mut t = theta.to_vec();
    for i in 0..theta.len() {
        t[i] = theta[i] + h;
        let up = loss(&t, &mut scratch);
        t[i] = theta[i] - h;
        let down = loss(&t, &mut scratch);
        t[i] = theta[i];
        let numeric = (up - down) / (2.0 * h);
        worst = worst.max((grad[i] - numeric).abs() / (numeric.abs() + floor));
    }
    worst
}
