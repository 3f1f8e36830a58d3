//! Bayesian networks sampled by Langevin dynamics (spec 02; paper App. A.1, F.0.1, F.1; blog
//! "A Bayesian description of learning").
//!
//! Module map (one folder per role; the issue-16 layout):
//!
//! * [`config`]: the experiment TOML (`[model]`, `[data]`, `[target]`, `[sampler]`, `[priors]`);
//!   the types in `config/mod.rs`, parsing and the cross-field checks in `config/validate.rs`.
//! * [`data`]: Gaussian / power-law inputs, teacher, Hermite and parity targets.
//! * [`num`]: the working precision [`num::Real`] (f32/f64), the one run-time ISA dispatch
//!   ([`num::simd`]), the f32 erf/exp/softmax loops ([`num::f32math`]), the small Cholesky and
//!   its solves ([`num::linalg`]).
//! * [`model`]: activations, likelihoods and the Gaussian prior term ([`model::prior`]); the FCN of any depth with analytic gradients and
//!   blocked GEMMs ([`model::fcn`]); the flat-parameter interface ([`model::flat`]) of the CNN
//!   with non-overlapping patches ([`model::cnn`], App. E.1.2) and the softmax attention layer
//!   ([`model::attention`], App. E.3); the collapsed posterior, readout integrated out, of the
//!   FCN ([`model::collapsed`]) and of the flat models ([`model::collapsed_flat`]).
//! * [`ensemble`]: the chains — the FCN's blocks of chains with their unadjusted Langevin step
//!   ([`ensemble::fcn`]) and the flat models' ensemble ([`ensemble::flat`]) with its chains,
//!   their block evaluation, ULA move and MALA test ([`ensemble::flat_chain`]); per-chain RNG
//!   streams, block sizes and divergence records shared by both ([`ensemble::chains`]).
//! * [`kernel`]: the typed choice of proposal ([`kernel::langevin::Proposal`]: ULA, MALA,
//!   HMC), the Langevin move, the MALA ratio and HMC's jittered step and ratio of every engine
//!   ([`kernel::langevin`]); MALA ([`kernel::mala`]) and HMC ([`kernel::hmc`]) on the plain or
//!   the collapsed FCN posterior, with an optional preconditioner ([`kernel::metric`]); HMC on
//!   the plain or collapsed CNN and attention posteriors ([`kernel::flat_hmc`]); replica
//!   exchange's swap moves, statistics and ladder ([`kernel::tempering`]).
//! * [`adapt`]: burn-in step-size adaptation (η·λ_max target, acceptance steering).
//! * [`driver`]: one experiment from configuration to summary — entry points
//!   ([`driver::run`], [`run_experiment`]), the FCN's and the flat models' loops, cold/hot
//!   starts, the summary and the result types, the replicas of a tempered FCN run
//!   ([`driver::tempered`], `sampler.tempering`).
//! * [`observe`]: alignment, MSE, overlaps, outliers, R, histograms, autocorrelation times
//!   ([`observe::observables`]); deeper-layer overlaps with Φ* and Ĥe3(Φ*), parity directions,
//!   test accuracy ([`observe::overlaps`]).
//! * [`bench`]: the Fig. 2 speed benchmark of `flscale bench` ([`bench::speed`]) and effective
//!   samples per second of `flscale bench --sampling` ([`bench::sampling`]).
//!
//! Dependencies run one way at file level: no file of `sim/` imports, through non-test
//! code, a file that imports it back (checked by resolving every `crate::sim::…`/`super::…`
//! path to its file and searching the graph for cycles, `scripts/sim_import_cycles.py`: 61 files,
//! 161 edges, no cycle; before
//! this layout the graph had two, activation ↔ real and generic ↔ run ↔ cnn/attention/
//! collapsed_generic). `mod.rs` files only declare and re-export. Two folder-level loops
//! remain and are deliberate until the one-engine steps of issue 16: `config` names
//! `model::activation::Activation` (the activation is a config value shared with `kernels/`),
//! and the FCN's collapsed posterior (`model::collapsed`) works on the FCN ensemble's
//! `ChainBlock`.
//!
//! Shape choices against the sketch: `adapt` is one file (two small items); the
//! still-separate FCN and flat engines each have their file in `ensemble/` and `driver/`
//! (step 3 of issue 16 merges them); HMC runs on every model, the FCN's in `kernel/hmc.rs`
//! and the flat models' in `kernel/flat_hmc.rs`, both chosen through
//! [`kernel::langevin::Proposal`] by both engines;
//! the preconditioner stays FCN-only (no curvature estimate for filters or attention
//! matrices yet; M = I is exact).
//!
//! How to add a proposal, a model or an observable, with the places each touches and the
//! tests each needs: docs/langevin.md, "Extending the engine".
//!
//! Reproducibility: chain k draws everything from ChaCha8 stream (seed, k) and chains are
//! blocked independently of the thread count, so results are bit-identical for any
//! `RAYON_NUM_THREADS`.

pub mod adapt;
pub mod bench;
pub mod config;
pub mod data;
pub mod driver;
pub mod ensemble;
pub mod kernel;
pub mod model;
pub mod num;
pub mod observe;

#[cfg(test)]
mod tests;

pub use config::ExperimentConfig;
pub use driver::run::{run_experiment, RunResult, Summary};

// Paths of the flat layout before the role folders, kept for the CLI, the Python bindings,
// `experiment/`, `cavity/`, `patterns/` and the benches.
pub use bench::sampling as sampling_bench;
pub use driver::run;
pub use ensemble::fcn as sampler;
pub use kernel::mala;
pub use model::activation;
pub use observe::observables;
