//! Numerical building blocks shared by every model and kernel: the working precision
//! ([`Real`]) and the run-time instruction-set dispatch ([`simd::vectorized`]).

pub mod f32math;
pub mod real;
pub mod simd;

pub use real::Real;
