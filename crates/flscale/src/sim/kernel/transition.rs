//! Which transition moves a run's chains: the ensemble's fused unadjusted Langevin step, or the
//! cached-gradient kernel ([`Kernel`]: MALA, HMC, the collapsed posterior, replica exchange's
//! slots), with what the loop asks of either — a block of steps, the stiffness λ_max, the
//! acceptance counts.

use crate::sim::ensemble::fcn::Ensemble;
use crate::sim::kernel::mala::Kernel;
use crate::sim::model::interface::Model;
use crate::sim::num::real::Real;

/// The transition of a run.
#[derive(Debug)]
pub enum Transition<T> {
    /// Plain unadjusted Langevin on the ensemble's fused step ([`Ensemble::advance`]), which
    /// keeps no state of its own.
    FusedUla,
    /// The cached-gradient kernel.
    Cached(Kernel<T>),
}

impl<T: Real> Transition<T> {
    /// The kernel, where the transition has one.
    pub fn kernel(&self) -> Option<&Kernel<T>> {
        match self {
            Transition::FusedUla => None,
            Transition::Cached(k) => Some(k),
        }
    }

    /// The kernel, mutably, where the transition has one.
    pub fn kernel_mut(&mut self) -> Option<&mut Kernel<T>> {
        match self {
            Transition::FusedUla => None,
            Transition::Cached(k) => Some(k),
        }
    }

    /// Advances every chain of `ens` by `n` steps.
    pub fn advance<M: Model<T>>(&mut self, ens: &mut Ensemble<T, M>, n: usize) {
        match self {
            Transition::FusedUla => ens.advance(n),
            Transition::Cached(k) => k.advance(ens, n),
        }
    }

    /// The largest Hessian eigenvalue per chain of the energy the transition samples, by
    /// `iters` power iterations ([`Ensemble::lambda_max`], [`Kernel::lambda_max`]).
    pub fn lambda_max<M: Model<T>>(&mut self, ens: &mut Ensemble<T, M>, iters: usize) -> Vec<f64> {
        match self {
            Transition::FusedUla => ens.lambda_max(iters),
            Transition::Cached(k) => k.lambda_max(ens, iters),
        }
    }

    /// Accepted and proposed Metropolis steps so far over the live chains (`None` for an
    /// unadjusted transition: it has no test).
    pub fn acceptance<M: Model<T>>(&self, ens: &Ensemble<T, M>) -> Option<(u64, u64)> {
        self.kernel().and_then(|k| k.acceptance_counts(ens))
    }

    /// Accepted / proposed over the live chains ([`Transition::acceptance`]; `None` before the
    /// first proposal).
    pub fn acceptance_rate<M: Model<T>>(&self, ens: &Ensemble<T, M>) -> Option<f64> {
        self.kernel().and_then(|k| k.acceptance_rate(ens))
    }
}
