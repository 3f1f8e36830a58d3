//! # flscale
//!
//! Predict, and then measure, when and how neural networks learn features.
//!
//! * [`scaling`]: exact power-law algebra and the rational LP that minimises a pattern's
//!   variational energy (paper §4–5, arXiv 2512.04165).
//! * [`patterns`]: the feature-propagation rule engine for FCNs of any depth (paper §5.2,
//!   App. C.3–C.5, E.1) and the catalog of data-file architectures (App. E.1.2, E.2, E.3).
//! * [`activation`]: the activation functions σ and which have a closed-form NNGP kernel.
//! * [`scalar`]: golden-section search, bisection and Brent's root finder on a bracket.
//! * [`linalg`]: the dense symmetric eigendecomposition and Gram products on faer.
//! * [`hermite`]: Hermite polynomials and Gauss–Hermite quadrature under the standard
//!   Gaussian measure, used by every module that needs Gaussian expectations.
//! * [`cavity`]: the solvable two-layer model (blog text, seed 001).
//! * [`ldt`]: the large-deviation (Chernoff) computation of App. B.3.
//! * [`kernels`]: closed-form NNGP kernels and kernel feature propagation (App. C.5).
//! * [`sim`]: Bayesian networks sampled by Langevin dynamics (App. A.1, F).
//! * [`experiment`]: sweeps, the results store, P\* extraction, exponent fits, paper figures.
//! * [`limits`]: resource estimates (memory, work) and the caps on search spaces.
//! * [`plot`]: figures (SVG/PNG) with a font the crate carries.
//!
//! ## Notation (paper §2, spec 00)
//!
//! | symbol | meaning |
//! | --- | --- |
//! | d | input dimension |
//! | N_l | width of hidden layer l |
//! | P | number of training samples |
//! | κ | ridge (likelihood variance; "T" in the blog) |
//! | Φ\* = w\*·x | the teacher's linear feature |
//! | He_m | probabilists' Hermite polynomial; Ĥe_m = He_m/√(m!) |
//! | A_f | alignment ⟨f, y⟩/⟨y, y⟩ |
//! | Ẽ_q | variational energy of pattern q; P\*/κ ∝ min_q Ẽ_q |

pub mod activation;
pub mod cavity;
pub mod error;
pub mod experiment;
pub mod free_energy;
pub mod hermite;
pub mod kernels;
pub mod ldt;
pub mod limits;
pub mod linalg;
pub mod patterns;
pub mod plot;
pub mod scalar;
pub mod scaling;
pub mod sim;

pub use error::{Error, ErrorKind, Result};
