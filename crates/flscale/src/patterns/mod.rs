//! Feature-learning patterns.
