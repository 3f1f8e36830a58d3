//! The run of one experiment, from configuration to summary: the entry points ([`run`]), the
//! FCN's and the flat models' sampling loops ([`fcn`], [`flat`]), the cold/hot starts
//! ([`starts`]) and their noise streams and coupling certificate ([`coupling`]), the summary of an ensemble ([`summary`]), what a run returns ([`result`]) and the replicas
//! of a tempered run ([`tempered`]).

pub mod coupling;
pub mod engine;
pub mod fcn;
pub mod flat;
pub mod result;
pub mod run;
pub mod starts;
pub mod summary;
pub mod tempered;
