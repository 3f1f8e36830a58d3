//! Exact power-law algebra (spec 01 §1).
//!
//! * [`monomial`]: monomials with rational exponents and the paper's way of printing them.
//! * [`expr`]: the expression language for energies and constraints, with column errors.
//! * [`lp`]: the exact rational linear program behind every minimisation.
//! * [`energy`]: regimes, labelled energies, exact minimisation, active set, binding
//!   constraints and the symbolic optimum.
//! * [`report`]: the calculator's request and its JSON answer.

pub mod energy;
pub mod expr;
pub mod lp;
pub mod monomial;
pub mod report;

pub use energy::{minimise, ArgRange, Minimum, Regime, Term};
pub use expr::{parse_constraints, parse_monomial, parse_posynomial, Constraint};
pub use monomial::{fmt_q, Monomial, Q};
