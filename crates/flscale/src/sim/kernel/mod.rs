//! Transition kernels over the moves and ratios of [`crate::sim::langevin`]: MALA ([`mala`]) and HMC ([`hmc`]) on the
//! plain or the collapsed posterior of any model, with an optional preconditioner
//! ([`metric`]) or an adapted diagonal metric ([`diagonal`]); replica exchange over any of them ([`tempering`]); which of the fused
//! unadjusted step and the cached-gradient kernel moves a run's chains ([`transition`]).

pub mod diagonal;
pub mod hmc;
pub mod mala;
pub mod metric;
pub mod tempering;
pub mod transition;
