//! Whole-run tests of the samplers against exact answers.

mod collapsed;
mod fcn;
mod flat;
mod hmc;
mod tempering;
