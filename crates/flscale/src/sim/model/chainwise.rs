//! The adapter that makes every per-chain model ([`FlatModel`]: the CNN, attention) an
//! engine [`Model`] on the one chain layout ([`ChainBlock`]): a block's chains are gathered
//! into one vector each, evaluated by the model, and their gradients scattered back. The
//! copies cost two passes over the parameters per evaluation, against the P-fold work of the
//! evaluation itself.

use crate::sim::chains::ChainBlock;
use crate::sim::config::{Likelihood, Preconditioner};
use crate::sim::model::attention::AttentionModel;
use crate::sim::model::cnn::CnnModel;
use crate::sim::model::collapsed::conditional_readout_means;
use crate::sim::model::flat::FlatModel;
use crate::sim::model::interface::{DataTerm, Features, Model, PreconditionedUnits};
use crate::sim::num::real::Real;

/// Work buffers of a flat model on a block: the model's own, and the block's chains gathered
/// one vector each (parameters, gradients, features and their gradients).
#[derive(Debug, Default)]
pub struct FlatScratch<T, S> {
    model: S,
    thetas: Vec<Vec<T>>,
    grads: Vec<Vec<T>>,
    sq: Vec<f64>,
    phis: Vec<Vec<T>>,
    dphis: Vec<Vec<T>>,
    f: Vec<T>,
}

/// Chain c's groups from the block layout into one vector, groups one after the other.
fn gather<T: Real>(
    params: &[Vec<T>],
    lens: impl Iterator<Item = usize>,
    c: usize,
    out: &mut Vec<T>,
) {
    out.clear();
    for (group, n) in params.iter().zip(lens) {
        out.extend_from_slice(&group[c * n..(c + 1) * n]);
    }
}

impl<T: Real, S> FlatScratch<T, S> {
    /// Gathers every chain of a block of `b` into `self.thetas`.
    fn gather_block<M: FlatModel<T>>(&mut self, model: &M, params: &[Vec<T>], b: usize) {
        if self.thetas.len() < b {
            self.thetas.resize_with(b, Vec::new);
            self.grads.resize_with(b, Vec::new);
            self.phis.resize_with(b, Vec::new);
            self.dphis.resize_with(b, Vec::new);
        }
        for c in 0..b {
            gather(
                params,
                model.groups().iter().map(|g| g.len),
                c,
                &mut self.thetas[c],
            );
            self.grads[c].resize(model.n_params(), T::zero());
        }
        self.sq.resize(b, 0.0);
    }

    /// Scatters the gathered gradients of the groups `g < groups` back into the block layout.
    fn scatter_grads<M: FlatModel<T>>(
        &self,
        model: &M,
        b: usize,
        groups: usize,
        out: &mut [Vec<T>],
    ) {
        for c in 0..b {
            let mut start = 0;
            for (g, grp) in model.groups().iter().enumerate().take(groups) {
                let n = grp.len;
                out[g][c * n..(c + 1) * n].copy_from_slice(&self.grads[c][start..start + n]);
                start += n;
            }
        }
    }
}

/// Makes flat models engine models (module doc; a macro rather than a blanket impl, which
/// coherence would not allow beside the FCN's own). Only the Gaussian likelihood: the flat
/// models' targets are not ±1 labels (the configuration refuses cross-entropy for them).
macro_rules! flat_models_are_engine_models {
    ($($model:ty),*) => {$(
impl<T: Real> Model<T> for $model {
    type Scratch = FlatScratch<T, <$model as FlatModel<T>>::Scratch>;

    const VECTOR_BUILD: bool = false;

    fn n_groups(&self) -> usize {
        <$model as FlatModel<T>>::groups(self).len()
    }

    fn group_len(&self, g: usize) -> usize {
        <$model as FlatModel<T>>::groups(self)[g].len
    }

    fn prior_var(&self, g: usize) -> f64 {
        <$model as FlatModel<T>>::groups(self)[g].prior_var
    }

    fn is_frozen(&self, g: usize) -> bool {
        <$model as FlatModel<T>>::groups(self)[g].frozen
    }

    fn group_name(&self, g: usize) -> String {
        <$model as FlatModel<T>>::groups(self)[g].name.clone()
    }

    fn chain_bytes(&self, p: usize, bytes_per_float: usize) -> usize {
        <$model as FlatModel<T>>::chain_bytes(self, p, bytes_per_float)
    }

    fn data_gradient(
        &self,
        block: &mut ChainBlock<T>,
        data: &DataTerm<'_, T>,
        scratch: &mut Self::Scratch,
    ) {
        debug_assert_eq!(data.likelihood, Likelihood::Gaussian);
        let kappa = data.kappa;
        let b = block.len;
        scratch.gather_block(self, &block.params, b);
        let thetas: Vec<&[T]> = scratch.thetas[..b].iter().map(|t| &t[..]).collect();
        let mut grads: Vec<&mut [T]> = scratch.grads[..b].iter_mut().map(|g| &mut g[..]).collect();
        self.data_gradient_block(&thetas, data, &mut grads, &mut scratch.sq[..b], &mut scratch.model);
        scratch.scatter_grads(self, b, <$model as FlatModel<T>>::groups(self).len(), &mut block.grads);
        for c in 0..b {
            block.sq_error[c] = scratch.sq[c];
            block.data_loss[c] = scratch.sq[c] / (2.0 * kappa);
        }
    }

    fn predict(
        &self,
        params: &[Vec<T>],
        b: usize,
        x: &[T],
        n: usize,
        out: &mut [T],
        scratch: &mut Self::Scratch,
    ) {
        scratch.f.resize(n, T::zero());
        let mut theta = std::mem::take(&mut scratch.thetas);
        theta.resize_with(1, Vec::new);
        for c in 0..b {
            gather(params, <$model as FlatModel<T>>::groups(self).iter().map(|g| g.len), c, &mut theta[0]);
            <$model as FlatModel<T>>::predict(self, &theta[0], x, n, &mut scratch.f, &mut scratch.model);
            for (mu, &f) in scratch.f.iter().enumerate() {
                out[mu * b + c] = f;
            }
        }
        scratch.thetas = theta;
    }

    fn features_forward(
        &self,
        params: &[Vec<T>],
        b: usize,
        x: &[T],
        p: usize,
        scratch: &mut Self::Scratch,
    ) {
        scratch.gather_block(self, params, b);
        let thetas: Vec<&[T]> = scratch.thetas[..b].iter().map(|t| &t[..]).collect();
        self.features_block(&thetas, x, p, &mut scratch.phis[..b], &mut scratch.model);
    }

    fn features<'a>(
        &self,
        scratch: &'a Self::Scratch,
        _b: usize,
        c: usize,
        p: usize,
    ) -> Features<'a, T> {
        let k = <$model as FlatModel<T>>::groups(self).last().map_or(0, |g| g.len);
        Features {
            data: &scratch.phis[c][..p * k],
            rows: p,
            cols: k,
            row_stride: k,
        }
    }

    fn preconditioned_units(&self) -> Option<PreconditionedUnits> {
        <$model as FlatModel<T>>::preconditioned_units(self)
    }

    /// The model's Gauss–Newton blocks at every chain's conditional readout mean
    /// ([`FlatModel::unit_curvature_blocks`]); `Neuron`: each block's mean diagonal over v,
    /// g_u = tr(v·G_u)/(v·fan_in), as the FCN's scalar.
    fn unit_curvature(
        &self,
        kind: Preconditioner,
        block: &ChainBlock<T>,
        data: &DataTerm<'_, T>,
        scratch: &mut Self::Scratch,
    ) -> Option<Vec<f64>> {
        let (x, p, kappa) = (data.x, data.p, data.kappa);
        let units = Model::<T>::preconditioned_units(self)?;
        if kind == Preconditioner::None {
            return None;
        }
        let b = block.len;
        Model::<T>::features_forward(self, &block.params, b, x, p, scratch);
        let means = conditional_readout_means(block, self, data, scratch);
        let thetas: Vec<&[T]> = scratch.thetas[..b].iter().map(|t| &t[..]).collect();
        let blocks =
            self.unit_curvature_blocks(&thetas, &means, x, p, kappa, &mut scratch.model)?;
        if kind == Preconditioner::Block {
            return Some(blocks);
        }
        let n_in = units.fan_in;
        let scale = 1.0 / (Model::<T>::prior_var(self, units.group) * n_in as f64);
        Some(
            blocks
                .chunks(n_in * n_in)
                .map(|blk| (0..n_in).map(|j| blk[j * n_in + j]).sum::<f64>() * scale)
                .collect(),
        )
    }

    fn feature_backward(
        &self,
        block: &mut ChainBlock<T>,
        data: &DataTerm<'_, T>,
        dphi: &[T],
        zero: &[bool],
        scratch: &mut Self::Scratch,
    ) {
        let (b, x, p) = (block.len, data.x, data.p);
        let k = <$model as FlatModel<T>>::groups(self).last().map_or(0, |g| g.len);
        for c in 0..b {
            let d = &mut scratch.dphis[c];
            d.resize(p * k, T::zero());
            if zero[c] {
                d.fill(T::zero());
                continue;
            }
            for mu in 0..p {
                let from = mu * b * k + c * k;
                d[mu * k..(mu + 1) * k].copy_from_slice(&dphi[from..from + k]);
            }
        }
        let thetas: Vec<&[T]> = scratch.thetas[..b].iter().map(|t| &t[..]).collect();
        let mut gs: Vec<&mut [T]> = scratch.grads[..b].iter_mut().map(|g| &mut g[..]).collect();
        self.feature_backward_block(&thetas, x, p, &scratch.dphis[..b], &mut gs, &mut scratch.model);
        let hidden = <$model as FlatModel<T>>::groups(self).len() - 1;
        scratch.scatter_grads(self, b, hidden, &mut block.grads);
    }
}
    )*};
}

flat_models_are_engine_models!(CnnModel, AttentionModel);
#[cfg(test)]
flat_models_are_engine_models!(crate::sim::model::double_well::DoubleWellModel);
