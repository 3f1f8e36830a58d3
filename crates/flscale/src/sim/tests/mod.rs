//! Whole-run tests of the samplers against exact answers.

mod collapsed;
pub(crate) mod exact;
mod fcn;
mod flat;
mod flat_hmc;
mod hmc;
mod tempering;
