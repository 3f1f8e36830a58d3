//! Feature-learning patterns: the FCN rule engine, the catalog of data-file architectures,
//! architecture files, presets, the comparison and its report (spec 01 §2–§6).

pub mod activation;
pub mod arch;
pub mod fcn;
pub mod phase;
pub mod predict;
pub mod report;

pub use arch::{Architecture, PRESETS};
pub use fcn::{enumerate_patterns, FcnSpec, LayerKind, Parametrization, PatternSpec};
pub use predict::{compare, PatternResult, Prediction};
