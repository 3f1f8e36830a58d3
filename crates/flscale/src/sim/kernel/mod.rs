//! Transition kernels beyond the unadjusted Langevin step of the ensembles: MALA and HMC on
//! the plain or the collapsed FCN posterior, with an optional preconditioner.

pub mod langevin;
pub mod mala;
