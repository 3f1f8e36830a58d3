//! The FCN as the engine's [`Model`]: its blocked forward and backward passes
//! ([`crate::sim::model::fcn`]) on the one chain layout, the last hidden layer's activations as
//! the readout's features (the collapsed posterior, [`crate::sim::model::collapsed`]) and the
//! Gauss–Newton curvature of its neurons (the preconditioner, [`crate::sim::kernel::metric`]).

use crate::sim::chains::ChainBlock;
use crate::sim::config::{Likelihood, Preconditioner};
use crate::sim::model::collapsed::{neuron_curvature, neuron_curvature_blocks, CollapsedWork};
use crate::sim::model::fcn::{
    backward, backward_from_last_delta, forward, two_layer_gaussian_gradient, FcnModel, Scratch,
};
use crate::sim::model::interface::{DataTerm, Features, Model, PreconditionedUnits};
use crate::sim::model::likelihood::residuals;
use crate::sim::num::real::Real;

impl<T: Real> Model<T> for FcnModel {
    type Scratch = Scratch<T>;

    fn n_groups(&self) -> usize {
        FcnModel::n_groups(self)
    }

    fn group_len(&self, g: usize) -> usize {
        FcnModel::group_len(self, g)
    }

    fn prior_var(&self, g: usize) -> f64 {
        self.prior_var[g]
    }

    fn is_frozen(&self, g: usize) -> bool {
        self.frozen[g]
    }

    fn group_name(&self, g: usize) -> String {
        FcnModel::group_name(self, g)
    }

    /// The block's first-layer activations, P × N₁ floats per chain.
    fn chain_bytes(&self, p: usize, bytes_per_float: usize) -> usize {
        p.max(1) * self.widths[0] * bytes_per_float
    }

    #[inline(always)]
    fn data_gradient(
        &self,
        block: &mut ChainBlock<T>,
        data: &DataTerm<'_, T>,
        scratch: &mut Scratch<T>,
    ) {
        let (b, p) = (block.len, data.p);
        forward(self, &block.params, b, data.x, p, scratch);
        residuals(
            data,
            &scratch.f[..p * b],
            b,
            &mut block.residual,
            &mut block.sq_error,
            &mut block.data_loss,
        );
        backward(
            self,
            &block.params,
            b,
            data,
            &block.residual,
            scratch,
            &mut block.grads,
        );
    }

    /// The two-layer Gaussian case in one pass per row ([`two_layer_gaussian_gradient`], bit
    /// for bit the separate passes).
    #[inline(always)]
    fn data_gradient_fused(
        &self,
        block: &mut ChainBlock<T>,
        data: &DataTerm<'_, T>,
        scratch: &mut Scratch<T>,
    ) {
        if self.widths.len() == 1 && data.likelihood == Likelihood::Gaussian {
            two_layer_gaussian_gradient(self, block, data, scratch);
        } else {
            Model::<T>::data_gradient(self, block, data, scratch);
        }
    }

    fn predict(
        &self,
        params: &[Vec<T>],
        b: usize,
        x: &[T],
        n: usize,
        out: &mut [T],
        scratch: &mut Scratch<T>,
    ) {
        forward(self, params, b, x, n, scratch);
        out[..n * b].copy_from_slice(&scratch.f[..n * b]);
    }

    #[inline(always)]
    fn features_forward(
        &self,
        params: &[Vec<T>],
        b: usize,
        x: &[T],
        p: usize,
        scratch: &mut Scratch<T>,
    ) {
        forward(self, params, b, x, p, scratch);
    }

    /// A strided view into the last hidden layer's activations (P × B·N, chain c's N columns).
    #[inline(always)]
    fn features<'a>(
        &self,
        scratch: &'a Scratch<T>,
        b: usize,
        c: usize,
        p: usize,
    ) -> Features<'a, T> {
        let n = *self.widths.last().expect("an FCN has a hidden layer");
        let act = &scratch.act[self.widths.len() - 1];
        Features {
            // No data (the prior): 0 × N, whatever the activations buffer holds.
            data: if p == 0 { &act[..0] } else { &act[c * n..] },
            rows: p,
            cols: n,
            row_stride: b * n,
        }
    }

    /// δ^{L−1} = D ∘ σ′ (σ′ is in `scratch.der`, where the backward pass keeps δ), then the
    /// plain sampler's back-propagation from it ([`backward_from_last_delta`]).
    #[inline(always)]
    fn feature_backward(
        &self,
        block: &mut ChainBlock<T>,
        data: &DataTerm<'_, T>,
        dphi: &[T],
        zero: &[bool],
        scratch: &mut Scratch<T>,
    ) {
        let (b, p) = (block.len, data.p);
        let hidden = self.widths.len();
        let n = self.widths[hidden - 1];
        let der = &mut scratch.der[hidden - 1];
        for mu in 0..p {
            for c in 0..b {
                let range = mu * b * n + c * n..mu * b * n + (c + 1) * n;
                if zero[c] {
                    der[range].fill(T::zero());
                } else {
                    for (dl, &v) in der[range.clone()].iter_mut().zip(&dphi[range]) {
                        *dl *= v;
                    }
                }
            }
        }
        backward_from_last_delta(self, &block.params, b, data.x, p, scratch, &mut block.grads);
    }

    /// The last hidden layer, one unit per neuron.
    fn preconditioned_units(&self) -> Option<PreconditionedUnits> {
        let group = self.widths.len() - 1;
        Some(PreconditionedUnits {
            group,
            units: self.widths[group],
            fan_in: self.fan_in(group),
        })
    }

    fn unit_curvature(
        &self,
        kind: Preconditioner,
        block: &ChainBlock<T>,
        data: &DataTerm<'_, T>,
        scratch: &mut Scratch<T>,
    ) -> Option<Vec<f64>> {
        let mut work = CollapsedWork::default();
        match kind {
            Preconditioner::None => None,
            Preconditioner::Neuron => Some(neuron_curvature(block, self, data, scratch, &mut work)),
            Preconditioner::Block => Some(crate::sim::num::simd::vectorized(
                #[inline(always)]
                || neuron_curvature_blocks(block, self, data, scratch, &mut work),
            )),
        }
    }
}
