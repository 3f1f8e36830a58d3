//! Free energy along an order parameter: umbrella windows, MBAR, the profile F(s), basin weights,
//! the barrier and reweighted observables, with errors that account for autocorrelation.
//!
//! Near P\* the posterior of a network has two basins (lazy and specialised) separated by a
//! barrier that no unbiased sampler crosses in the time we have. This module owns the
//! statistics that turn *biased* runs into unbiased answers (spec 07):
//!
//! * [`umbrella`]: harmonic restraints V_k(s) = ½κ(s − s_k)² on an order parameter s, their
//!   derivative V′(s) (the force term a sampler multiplies by ∇s), and the reduced-energy matrix
//!   u_k(x_n) of every kept sample in every window.
//! * [`mbar`]: the multistate Bennett acceptance ratio (Shirts & Chodera 2008): the windows'
//!   free energies f_k, the unbiased weight of every sample, the overlap matrix and each
//!   window's Kish effective sample size.
//! * [`overlap`]: the neighbour-overlap diagnostic and its refusal below a documented threshold.
//! * [`autocorr`]: Geyer's initial-sequence integrated autocorrelation time and the moving-block
//!   resampling of one window's time series.
//! * [`profile`]: F(s) = −ln p(s) on bins, basins split at the barrier tops of F, the barrier
//!   height and reweighted averages (point estimates).
//! * [`agreement`]: whether one window's chains sample the same s (split R̂): a hidden barrier
//!   orthogonal to s shows up there first.
//! * [`analysis`]: the whole pipeline with block-bootstrap standard errors of every output.
//! * [`order`]: the order parameters s(θ) of a chain's first-layer weights (one neuron's
//!   overlap with the teacher, the aligned fraction Q, its projector form) and their gradients.
//! * [`config`]: the `[free_energy]` table of an experiment file, its validation against the
//!   model, and the windows, bins and order parameter it describes.
//! * [`window`]: the umbrella windows as restrained runs of the sampler, and their analysis.
//! * [`flatten`]: the pilot stage — stiff windows, umbrella integration of their mean forces,
//!   and the flattening bias B = −F̂ the umbrella windows then carry.
//! * [`runner`]: the windows of both stages run in turn, each kept in a file (resume, shards).
//! * [`coexistence`]: the thresholds of a sweep's cells — P\*\_coex where the basins weigh the
//!   same, and the two spinodals where a basin's minimum disappears — per d.
//! * [`output`]: the report as CSV, JSON and a figure, and the files finished windows are kept
//!   in so that a rerun resumes.
//!
//! The statistics are pure computation on typed inputs; [`window`] runs the sampler and
//! [`output`] writes files (no printing anywhere). The bias force V′(s)∇s lives in the driver
//! (for every kernel); the `flscale free-energy` command and `flscale.free_energy` run the
//! windows, keep each one's file, and write the report.

pub mod agreement;
pub mod analysis;
pub mod autocorr;
pub mod coexistence;
pub mod config;
pub mod flatten;
pub mod mbar;
pub mod output;
pub mod overlap;
pub mod profile;
pub mod runner;
pub mod umbrella;
pub mod window;

/// The order parameters, defined in the sampler (which applies their bias force) and re-exported
/// here beside the statistics that use them.
pub use crate::sim::order;

#[cfg(test)]
mod tests;

use std::fmt;

pub use analysis::{analyse, analyse_energies, AnalysisOptions, FreeEnergyReport, WindowSeries};
pub use mbar::{Mbar, MbarOptions, ReducedEnergies};
pub use umbrella::Umbrella;

/// Why a free-energy computation refused or failed. Bad input maps to exit code 2, the rest
/// (the data cannot support an answer) to exit code 1, through `From<FreeEnergyError>` for
/// [`crate::Error`].
#[derive(Debug, Clone, PartialEq)]
pub enum FreeEnergyError {
    /// The input is malformed; the message names the field and what is allowed.
    InvalidInput(String),
    /// Groups of windows that share no samples at all: their relative free energy is
    /// undetermined by the data.
    Disconnected {
        /// Each group's window indices (ascending); at least two groups.
        groups: Vec<Vec<usize>>,
    },
    /// Neighbouring windows whose overlap-matrix element is below the threshold.
    PoorOverlap {
        /// (k, k + 1, min(O[k][k+1], O[k+1][k])) of every pair below the threshold.
        pairs: Vec<(usize, usize, f64)>,
        /// The threshold the pairs failed.
        threshold: f64,
    },
    /// The MBAR equations did not converge.
    NotConverged {
        /// Iterations run.
        iterations: usize,
        /// Largest |Σ_n W_nk − 1| at the end (each state's weights must sum to one).
        residual: f64,
    },
}

impl fmt::Display for FreeEnergyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FreeEnergyError::InvalidInput(m) => f.write_str(m),
            FreeEnergyError::Disconnected { groups } => {
                let names: Vec<String> = groups.iter().map(|g| format!("{g:?}")).collect();
                write!(
                    f,
                    "windows {} share no samples, so their relative free energy is undetermined: \
                     add windows between them or widen the restraints (smaller kappa)",
                    names.join(" and ")
                )
            }
            FreeEnergyError::PoorOverlap { pairs, threshold } => {
                let names: Vec<String> = pairs
                    .iter()
                    .map(|(a, b, o)| format!("{a}–{b} ({o:.3})"))
                    .collect();
                write!(
                    f,
                    "neighbouring windows overlap less than {threshold} (windows {}), so the profile \
                     between them is not trustworthy: add windows there or widen the restraints",
                    names.join(", ")
                )
            }
            FreeEnergyError::NotConverged {
                iterations,
                residual,
            } => write!(
                f,
                "the MBAR equations did not converge in {iterations} iterations (weight \
                 normalisation off by {residual:.2e})"
            ),
        }
    }
}

impl std::error::Error for FreeEnergyError {}

impl From<FreeEnergyError> for crate::Error {
    fn from(e: FreeEnergyError) -> Self {
        match e {
            FreeEnergyError::InvalidInput(m) => crate::Error::invalid(m),
            other => crate::Error::runtime(other.to_string()),
        }
    }
}

/// ln Σ_i exp(a_i), stable for any finite or −∞ entries; −∞ for an empty or all −∞ input.
pub(crate) fn log_sum_exp(a: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = a.clone().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY || m.is_nan() {
        return m;
    }
    m + a.map(|x| (x - m).exp()).sum::<f64>().ln()
}
