//! What is measured on the chains: first-layer observables and their reducers, deeper-layer
//! overlaps and probes.

pub mod equilibration;
pub mod hermite_components;
pub mod leading_direction;
pub mod nngp_overlap;
pub mod observables;
pub mod overlaps;
pub mod probe_summary;
pub mod side_peak;
