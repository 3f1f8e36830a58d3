//! Transition kernels: the Langevin move and MALA ratio every engine uses ([`langevin`]); MALA
//! ([`mala`]) and HMC ([`hmc`]) on the plain or the collapsed FCN posterior, with an optional
//! preconditioner ([`metric`]); replica exchange over any of them ([`tempering`]).

pub mod hmc;
pub mod langevin;
pub mod mala;
pub mod metric;
pub mod tempering;
