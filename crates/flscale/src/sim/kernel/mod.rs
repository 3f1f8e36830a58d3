//! Transition kernels: the choice of proposal ([`langevin::Proposal`]), the Langevin move, MALA
//! ratio and HMC step size and test every engine uses ([`langevin`]); MALA ([`mala`]) and HMC
//! ([`hmc`]) on the plain or the collapsed FCN posterior, with an optional preconditioner
//! ([`metric`]); HMC on the flat models, CNN and attention ([`flat_hmc`]); replica exchange
//! over any of them ([`tempering`]).

pub mod flat_hmc;
pub mod hmc;
pub mod langevin;
pub mod mala;
pub mod metric;
pub mod tempering;
