//! Exact power-law algebra.
