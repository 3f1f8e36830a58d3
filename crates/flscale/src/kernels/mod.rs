//! NNGP kernels and kernel feature propagation (paper Sec. 5.2, App. C.3, C.5; spec 05 B).
//!
//! * [`nngp`]: kernel matrices of one layer, in closed form (the kernels of
//!   [`crate::activation::NngpActivation`]: erf arcsine, ReLU arc-cosine of order 1,
//!   1 + z + z²) and empirical at finite width.
//! * [`spectral`]: dense and low-rank (Gram / thin-SVD) spectra of K = φφᵀ/N on faer.
//! * [`population`]: the same procedure at N₁, N₂ → ∞ from the closed forms, with and
//!   without finite-P sampling noise — what the paper's procedure predicts at finite d.
//! * [`propagate`]: the Fig. 5 / Fig. 6 experiment — the RKHS norm of Φ\*² in the next
//!   layer's kernel falls as D^{−2} when Φ\*'s eigenvalue is amplified by D (Claim (ii)).

pub mod nngp;
pub mod population;
pub mod propagate;
pub mod spectral;

#[cfg(test)]
mod tests;

pub use nngp::{empirical_kernel, nngp_kernel, Points};
pub use population::{population_propagation, PopulationPoint, PopulationResult};
pub use propagate::{
    default_amplifications, propagate, propagate_chart, propagate_with, DataKind, PropagateConfig,
    PropagatePoint, PropagateResult, PropagateTiming,
};
pub use spectral::{default_par, eigh_benchmark, EighBench, FeatureKernel, SpectralMethod};
