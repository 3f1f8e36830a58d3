//! Numerical building blocks shared by every model and kernel: the working precision
//! ([`Real`]), the run-time instruction-set dispatch ([`simd::vectorized`]) and small dense
//! linear algebra ([`linalg`], products in [`gemm`]) and the λ_max power iteration ([`power`]).

pub mod f32math;
pub mod gemm;
pub mod linalg;
pub mod power;
pub mod real;
pub mod simd;

pub use real::Real;
