//! Bayesian networks sampled by Langevin dynamics (spec 02; paper App. A.1, F.0.1, F.1; blog
//! "A Bayesian description of learning").
//!
//! Module map (one folder per role):
//!
//! * [`config`]: the experiment TOML (`[model]`, `[data]`, `[target]`, `[sampler]`, `[priors]`);
//!   the types in `config/mod.rs`, parsing and the cross-field checks in `config/validate.rs`.
//! * [`data`]: Gaussian / power-law inputs, teacher, Hermite and parity targets.
//! * [`num`]: the working precision [`num::Real`] (f32/f64), the one run-time ISA dispatch
//!   ([`num::simd`]), the f32 erf/exp/softmax loops ([`num::f32math`]), the small Cholesky and
//!   its solves ([`num::linalg`]).
//! * [`model`]: the one model interface [`model::Model`] ([`model::interface`]: parameter
//!   groups, the data term of a block of chains, predictions, the linear readout's features,
//!   an optional per-unit preconditioner); activations, likelihoods and the Gaussian prior
//!   term ([`model::prior`]); the FCN of any depth with analytic gradients and blocked GEMMs
//!   ([`model::fcn`], a `Model` in [`model::fcn_model`]); the per-chain interface
//!   ([`model::flat`]) of the CNN with non-overlapping patches ([`model::cnn`], App. E.1.2)
//!   and the softmax attention layer ([`model::attention`], App. E.3), made `Model`s by the
//!   adapter in [`model::chainwise`]; the collapsed posterior, readout integrated out, of any `Model`
//!   ([`model::collapsed`]).
//! * [`chains`]: the one chain layout ([`chains::ChainBlock`]: per parameter group, a block's
//!   chains one after the other), per-chain RNG streams, block sizes and divergence records.
//! * [`langevin`]: the typed choice of proposal ([`langevin::Proposal`]: ULA, MALA, HMC), the
//!   Langevin move, the MALA ratio and HMC's jittered step and ratio — the formulas every
//!   transition and the ensemble's fused step share.
//! * [`ensemble`]: the ensemble of any model and its fused unadjusted Langevin step
//!   ([`ensemble::fcn`]).
//! * [`kernel`]: MALA ([`kernel::mala`]) and HMC ([`kernel::hmc`]) on the plain or
//!   the collapsed posterior of any model, with an optional preconditioner
//!   ([`kernel::metric`]); replica exchange's swap moves, statistics and ladder
//!   ([`kernel::tempering`]); which of the fused unadjusted step and the cached-gradient
//!   kernel moves a run's chains ([`kernel::transition`]).
//! * [`adapt`]: burn-in step-size adaptation (η·λ_max target, acceptance steering).
//! * [`driver`]: one experiment from configuration to summary — the entry point [`Run`]
//!   ([`driver::run`]), a front end's observer of a run and how a run ends
//!   ([`driver::outcome`]), the one sampling loop ([`driver::engine`]: burn-in, adaptation,
//!   the transition, replica exchange, a measurement every `thin` steps through the model
//!   family's recorder), the FCN's and the CNN/attention models' ensembles, starts and
//!   measurements ([`driver::fcn`], [`driver::flat`]), cold/hot starts, the summary and the
//!   result types, the replicas of a tempered run ([`driver::tempered`]).
//! * [`observe`]: alignment, MSE, overlaps, outliers, R, histograms, autocorrelation times
//!   ([`observe::observables`]); deeper-layer overlaps with Φ* and Ĥe3(Φ*), parity directions,
//!   test accuracy ([`observe::overlaps`]).
//! * [`bench`]: the Fig. 2 speed benchmark of `flscale bench` ([`bench::speed`]) and effective
//!   samples per second of `flscale bench --sampling` ([`bench::sampling`]).
//!
//! Dependencies run one way at file level: no file of `sim/` imports, through non-test
//! code, a file that imports it back (checked by resolving every `crate::sim::…`/`super::…`
//! path to its file and searching the graph for cycles, `scripts/sim_import_cycles.py`).
//! `mod.rs` files only declare and re-export. The activation a config names is the
//! crate-level [`crate::activation::Activation`], shared with `kernels/` and `patterns/`;
//! `model::activation` adds the engine's matrix evaluation of it.
//!
//! One engine: every model runs on the same chain layout, ensemble, kernels, collapsed
//! posterior, replica exchange and loop; a model is a [`model::Model`], whose evaluations take
//! the training set as a [`model::interface::DataTerm`]. The FCN implements it on its blocked
//! GEMMs (BENCHMARKS.md, "One engine"); the CNN and attention models keep their per-chain
//! code ([`model::flat::FlatModel`]) behind an adapter that gathers each chain's groups and
//! scatters its gradient, two passes over the parameters against the P-fold work of an
//! evaluation. `adapt` is one file (two small items); `observe` has no trait, each model
//! family's recorder in the loop is the seam; the preconditioner needs a model's per-unit
//! curvature
//! ([`model::interface::Model::unit_curvature`]): the FCN's neurons, the CNN's filters and
//! attention's heads each give theirs.
//!
//! How to add a proposal, a model or an observable, with the places each touches and the
//! tests each needs: docs/langevin.md, "Extending the engine".
//!
//! Reproducibility: chain k draws everything from ChaCha8 stream (seed, k) and chains are
//! blocked independently of the thread count, so results are bit-identical for any
//! `RAYON_NUM_THREADS`.

pub mod adapt;
pub mod bench;
pub mod chains;
pub mod config;
pub mod data;
pub mod driver;
pub mod ensemble;
pub mod kernel;
pub mod langevin;
pub mod memory;
pub mod model;
pub mod num;
pub mod observe;
pub mod order;
pub mod restraint;

#[cfg(test)]
mod tests;

pub use config::ExperimentConfig;
pub use driver::run::{Run, RunResult, Summary};
