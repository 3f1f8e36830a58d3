//! A harness for tests that drive the one engine directly: an ensemble of any model with the
//! kernel its proposal and posterior ask for (what the run loop, [`crate::sim::driver::engine`],
//! builds), and per-chain views of its blocks.

use crate::sim::chains::Divergence;
use crate::sim::config::SamplerMethod;
use crate::sim::ensemble::fcn::{Dynamics, Ensemble};
use crate::sim::kernel::mala::Kernel;
use crate::sim::langevin::Proposal;
use crate::sim::model::collapsed::{self, CollapsedWork};
use crate::sim::model::interface::Model;
use crate::sim::num::real::Real;

/// An ensemble and its kernel (`None`: the fused unadjusted step).
pub(crate) struct Chains<T: Real, M: Model<T>> {
    pub ens: Ensemble<T, M>,
    pub kernel: Option<Kernel<T>>,
}

impl<T: Real, M: Model<T>> Chains<T, M> {
    /// `chains` chains of `model` from the prior (streams of `seed`), in blocks of `block`
    /// (the engine's rule when `None`), moved by `proposal` on the plain or the collapsed
    /// posterior.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        model: M,
        x: &[f64],
        y: &[f64],
        chains: usize,
        seed: u64,
        dynamics: Dynamics,
        block: Option<usize>,
        proposal: Proposal,
        collapsed: bool,
    ) -> Self {
        let ens = Ensemble::new(model, x, y, chains, seed, dynamics, block);
        let method = if collapsed {
            SamplerMethod::Collapsed
        } else {
            SamplerMethod::Plain
        };
        let kernel =
            (collapsed || proposal.is_metropolis()).then(|| Kernel::new(&ens, method, proposal));
        Chains { ens, kernel }
    }

    /// `n` steps of every chain.
    pub(crate) fn advance(&mut self, n: usize) {
        match &mut self.kernel {
            Some(k) => k.advance(&mut self.ens, n),
            None => self.ens.advance(n),
        }
    }

    /// Collapsed: every chain's readout drawn from its conditional (a measurement's draw).
    pub(crate) fn draw_readouts(&mut self) {
        if let Some(k) = &mut self.kernel {
            k.prepare_measurement(&mut self.ens);
        }
    }

    /// Chain k's parameters, groups one after the other.
    pub(crate) fn theta(&self, k: usize) -> Vec<T> {
        self.ens.chain_params(k)
    }

    /// Chain k's energy and training error at its last evaluation.
    pub(crate) fn energy(&self, k: usize) -> (f64, f64) {
        let (block, c) = self.ens.chain_block(k);
        (block.energy[c], block.sq_error[c])
    }

    /// Whether no chain diverged.
    pub(crate) fn all_alive(&self) -> bool {
        (0..self.ens.chains()).all(|k| self.ens.alive(k))
    }

    /// Every chain's parameters and divergence, in chain order.
    pub(crate) fn views(&self) -> Vec<ChainView<T>> {
        (0..self.ens.chains())
            .map(|k| {
                let (block, c) = self.ens.chain_block(k);
                ChainView {
                    theta: self.theta(k),
                    diverged: block.diverged[c].clone(),
                }
            })
            .collect()
    }

    /// Multiplies every parameter of every chain by `factor` (an overdispersed start; before
    /// the first step).
    pub(crate) fn scale_params(&mut self, factor: f64) {
        for block in &mut self.ens.blocks {
            for group in &mut block.params {
                group.iter_mut().for_each(|t| *t = T::of(t.f64() * factor));
            }
        }
    }

    /// Accepted / proposed over the live chains (`None` without a Metropolis test).
    pub(crate) fn acceptance_rate(&self) -> Option<f64> {
        self.kernel.as_ref()?.acceptance_rate(&self.ens)
    }

    /// λ_max of the sampled energy per chain.
    pub(crate) fn lambda_max(&mut self, iters: usize) -> Vec<f64> {
        match &mut self.kernel {
            Some(k) => k.lambda_max(&mut self.ens, iters),
            None => self.ens.lambda_max(iters),
        }
    }
}

/// One chain of [`Chains::views`].
pub(crate) struct ChainView<T> {
    pub theta: Vec<T>,
    pub diverged: Option<Divergence>,
}

/// The non-prior part of the collapsed energy U_c and its gradient (readout group zero) of
/// the chains `thetas` of `model` (each one vector, groups one after the other), evaluated
/// together as one block ([`collapsed::data_gradient`]).
pub(crate) fn collapsed_energy<M: Model<f64> + Clone>(
    model: &M,
    thetas: &[Vec<f64>],
    x: &[f64],
    y: &[f64],
    kappa: f64,
    temperature: f64,
) -> (Vec<f64>, Vec<Vec<f64>>) {
    let b = thetas.len();
    let dynamics = Dynamics {
        kappa,
        step: 0.0,
        temperature,
    };
    let mut ens = Ensemble::<f64, M>::new(model.clone(), x, y, b, 1, dynamics, Some(b));
    for (k, theta) in thetas.iter().enumerate() {
        ens.set_chain_params(k, theta);
    }
    let mut work = CollapsedWork::default();
    let (_, data, blocks) = ens.split_blocks();
    let block = &mut blocks[0];
    collapsed::data_gradient(
        block,
        model,
        &data,
        temperature,
        &mut M::Scratch::default(),
        &mut work,
    );
    assert!(work.failure.iter().all(Option::is_none));
    let grads = (0..b)
        .map(|c| {
            (0..model.n_groups())
                .flat_map(|g| {
                    let n = model.group_len(g);
                    block.grads[g][c * n..(c + 1) * n].to_vec()
                })
                .collect()
        })
        .collect();
    (block.energy.clone(), grads)
}
