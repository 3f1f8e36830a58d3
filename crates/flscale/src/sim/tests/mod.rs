//! Whole-run tests of the samplers against exact answers.

pub(crate) mod chains;
mod collapsed;
mod defaults;
mod double_well;
mod engine;
pub(crate) mod exact;
mod fcn;
mod flat;
mod flat_hmc;
mod hmc;
mod metric;
mod starts;
mod tempering;
