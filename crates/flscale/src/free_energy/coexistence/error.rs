//! Why the thresholds could not be computed: every refusal is bad input, in one sentence.

use std::fmt;

/// Why the thresholds could not be computed. Every variant is bad input (the cells or the grid
/// cannot give an answer), exit code 2 through `From<CoexistenceError>` for [`crate::Error`].
#[derive(Debug, Clone, PartialEq)]
pub enum CoexistenceError {
    /// A malformed cell; the message names it.
    InvalidInput(String),
    /// A d with fewer than two sizes P.
    TooFewSizes {
        /// The d.
        d: f64,
        /// Its number of distinct P.
        sizes: usize,
    },
    /// ΔF keeps one sign over every measured P at a d.
    NoSignChange {
        /// The d.
        d: f64,
        /// ΔF > 0 everywhere (the lazy basin always the heavier).
        positive: bool,
        /// The smallest and largest measured P.
        p_range: (f64, f64),
    },
}

impl fmt::Display for CoexistenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoexistenceError::InvalidInput(m) => f.write_str(m),
            CoexistenceError::TooFewSizes { d, sizes } => write!(
                f,
                "d = {d} has free energies at {sizes} value(s) of P, but coexistence needs at least two to bracket ΔF = 0; add sizes P at d = {d}"
            ),
            CoexistenceError::NoSignChange {
                d,
                positive,
                p_range: (lo, hi),
            } => {
                let (sign, heavier, extend) = if *positive {
                    ("positive", "lazy", format!("above P = {hi}"))
                } else {
                    ("negative", "specialised", format!("below P = {lo}"))
                };
                write!(
                    f,
                    "ΔF = −ln(w_spec/w_lazy) is {sign} at every measured P at d = {d} (P = {lo} to {hi}: the {heavier} basin is always the heavier), so no pair of cells brackets coexistence; extend the grid {extend}"
                )
            }
        }
    }
}

impl std::error::Error for CoexistenceError {}

impl From<CoexistenceError> for crate::Error {
    fn from(e: CoexistenceError) -> Self {
        crate::Error::invalid(e.to_string())
    }
}
