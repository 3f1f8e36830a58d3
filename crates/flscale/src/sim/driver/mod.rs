//! The run of one experiment, from configuration to summary: the entry point ([`run`]), what
//! a front end sees of a run and how it ends ([`outcome`]), the one sampling loop
//! ([`engine`]), the FCN's and the flat models' ensembles and measurements ([`fcn`],
//! [`flat`]), the cold/hot starts ([`starts`]) and their noise streams and coupling
//! certificate ([`coupling`]), the summary of an ensemble ([`summary`]), what a run returns
//! ([`result`]) and the replicas of a tempered run ([`tempered`]).

pub mod coupling;
pub mod engine;
pub mod fcn;
pub mod flat;
pub mod outcome;
pub mod result;
pub mod run;
pub mod starts;
pub mod summary;
pub mod tempered;
