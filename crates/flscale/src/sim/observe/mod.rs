//! What is measured on the chains: first-layer observables and their reducers, deeper-layer
//! overlaps and probes.

pub mod equilibration;
pub mod leading_direction;
pub mod observables;
pub mod overlaps;
pub mod side_peak;
