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

pub mod activation;
pub mod attention;
pub mod bench;
pub mod cnn;
pub mod collapsed;
pub mod collapsed_generic;
pub mod config;
pub mod data;
pub mod equilibration;
pub mod generic;
pub mod likelihood;
pub mod mala;
pub mod model;
pub mod observables;
pub mod overlaps;
pub mod real;
pub mod run;
pub mod sampler;
pub mod sampling_bench;
pub mod side_peak;
pub mod simd;

#[cfg(test)]
mod collapsed_tests;
#[cfg(test)]
mod flat_tests;
#[cfg(test)]
mod tests;

pub use config::ExperimentConfig;
pub use run::{run_experiment, RunResult, Summary};
