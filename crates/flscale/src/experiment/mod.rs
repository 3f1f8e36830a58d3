//! Sweeps, the results store, P* and exponent fits, and the paper's figures (being built).
