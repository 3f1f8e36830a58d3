//! The one container of chains: the chain layout, RNG streams, the block-size rule and the
//! divergence record ([`chains`]); the ensemble of any model and its fused unadjusted step
//! ([`fcn`]).

pub mod chains;
pub mod fcn;
