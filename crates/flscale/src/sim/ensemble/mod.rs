//! The one container of chains: the ensemble of any model and its fused unadjusted step
//! ([`fcn`]), over the chain layout of [`crate::sim::chains`].

pub mod fcn;
