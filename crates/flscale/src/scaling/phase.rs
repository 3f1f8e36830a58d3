//! Phase boundaries.
