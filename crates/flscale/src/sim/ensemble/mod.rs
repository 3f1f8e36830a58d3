//! The containers of chains: the FCN's blocks of chains ([`fcn`]) and the flat-parameter
//! ensemble of the CNN and attention models ([`flat`]).

pub mod fcn;
pub mod flat;
