//! The networks whose posteriors are sampled: activations, likelihoods, the FCN of any depth,
//! the CNN with non-overlapping patches, the softmax attention layer, and the collapsed
//! posterior (the linear readout integrated out) of the FCN and of the flat-parameter models.

pub mod activation;
pub mod attention;
pub mod cnn;
pub mod collapsed;
pub mod collapsed_flat;
pub mod fcn;
pub mod flat;
pub mod likelihood;
pub mod prior;

pub use fcn::FcnModel;
