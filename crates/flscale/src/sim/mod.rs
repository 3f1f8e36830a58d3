//! Bayesian networks sampled by Langevin dynamics (spec 02; paper App. A.1, F.0.1, F.1; blog
//! "A Bayesian description of learning").
//!
//! * [`config`]: the experiment TOML (`[model]`, `[data]`, `[target]`, `[sampler]`, `[priors]`).
//! * [`data`]: Gaussian / power-law inputs, teacher, Hermite and parity targets.
//! * [`activation`], [`model`]: FCNs of any depth with analytic gradients, blocked GEMMs.
//! * [`cnn`], [`attention`]: the CNN with non-overlapping patches (App. E.1.2) and the
//!   softmax attention layer (App. E.3), sampled by the flat-parameter ensemble of
//!   [`generic`].
//! * [`likelihood`]: the data term — Gaussian (regression) or cross-entropy (±1 labels).
//! * [`sampler`]: the ensemble of E chains, unadjusted Langevin, per-chain RNG streams,
//!   divergence detection.
//! * [`collapsed`], [`mala`]: the collapsed posterior (readout integrated out exactly) and
//!   cached-gradient Langevin steps on it or on the plain posterior, optionally
//!   Metropolis-adjusted (spec 02 (b), (c)).
//! * [`overlaps`]: deeper-layer overlaps with Φ* and Ĥe3(Φ*) (NNGP outliers), parity-direction
//!   overlaps and the μ-specialisation magnitude, test accuracy.
//! * [`observables`], [`run`]: alignment, MSE, overlaps, outliers, R, histograms,
//!   autocorrelation times; [`run::run_experiment`] is the whole of `flscale sample`.
//! * [`bench`]: the Fig. 2 speed benchmark of `flscale bench`; [`sampling_bench`]: effective
//!   samples per second, plain vs collapsed, of `flscale bench --sampling`.
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
