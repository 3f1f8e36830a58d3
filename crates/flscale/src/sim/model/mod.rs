//! The networks whose posteriors are sampled: activations, likelihoods, the FCN of any depth,
//! the CNN with non-overlapping patches, the softmax attention layer, and the collapsed
//! posterior (the linear readout integrated out) of the FCN and of the flat-parameter models.

pub mod activation;
pub mod attention;
pub mod chainwise;
pub mod cnn;
pub mod collapsed;
#[cfg(test)]
pub(crate) mod double_well;
pub mod fcn;
pub mod fcn_model;
pub mod flat;
pub mod interface;
pub mod likelihood;
pub mod prior;

pub use fcn::FcnModel;
pub use interface::Model;
