//! Exact tests of the free-energy statistics.
