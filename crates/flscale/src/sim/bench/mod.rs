//! Benchmarks: the speed of the Langevin step ([`speed`], `flscale bench`) and the sampling
//! efficiency of the samplers ([`sampling`], `flscale bench --sampling`).

pub mod sampling;
pub mod speed;

pub use speed::{bench_case, gemm_peak, BenchCase, BenchSize, GemmPeak};
