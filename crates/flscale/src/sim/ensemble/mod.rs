//! The containers of chains: the FCN's blocks of chains ([`fcn`]), the flat-parameter
//! ensemble of the CNN and attention models ([`flat`]) and its chains ([`flat_chain`]), and what both share ([`chains`]: RNG
//! streams, the block-size rule, the divergence record).

pub mod chains;
pub mod fcn;
pub mod flat;
pub mod flat_chain;
