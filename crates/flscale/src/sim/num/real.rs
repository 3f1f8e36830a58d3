//! The floating-point type the sampler runs in: `f32` (default, twice the GEMM throughput) or
//! `f64` (`sampler.precision = "f64"`, for exactness tests and very small steps).
//!
//! Everything that depends on the width of the float — GEMM, the vectorised erf, Gaussian
//! noise — goes through this trait so that the model, the sampler and the observables are
//! written once (spec 02, "f32 by default, f64 selectable").

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

/// A real scalar the Langevin engine can run in.
pub trait Real:
    num_traits::Float
    + faer::traits::ComplexField
    + std::ops::AddAssign
    + std::ops::SubAssign
    + std::ops::MulAssign
    + Default
    + Send
    + Sync
    + std::fmt::Debug
    + 'static
{
    /// "f32" or "f64", as written in the experiment file.
    const NAME: &'static str;

    /// Conversion from f64 (rounding for f32).
    fn of(x: f64) -> Self;

    /// Conversion to f64 (exact).
    fn f64(self) -> f64;

    /// One draw of 𝒩(0, 1) in this precision.
    fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> Self;

    /// erf(x) and its derivative (2/√π)·e^{−x²}, element-wise, sharing one exponential.
    fn erf_and_derivative(x: &[Self], value: &mut [Self], derivative: &mut [Self]);
    /// The softmax of every row of length `l` of `scores`, in place (rows shifted by their
    /// maximum; a non-finite score makes its row NaN).
    fn softmax_rows(scores: &mut [Self], l: usize);
}

impl Real for f32 {
    const NAME: &'static str = "f32";
    #[inline]
    fn of(x: f64) -> Self {
        x as f32
    }
    #[inline]
    fn f64(self) -> f64 {
        self as f64
    }
    #[inline]
    fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> Self {
        StandardNormal.sample(rng)
    }
    fn erf_and_derivative(x: &[Self], value: &mut [Self], derivative: &mut [Self]) {
        super::f32math::erf_with_derivative_f32(x, value, derivative)
    }
    fn softmax_rows(scores: &mut [Self], l: usize) {
        super::f32math::softmax_rows_f32(scores, l)
    }
}

impl Real for f64 {
    const NAME: &'static str = "f64";
    #[inline]
    fn of(x: f64) -> Self {
        x
    }
    #[inline]
    fn f64(self) -> f64 {
        self
    }
    #[inline]
    fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> Self {
        StandardNormal.sample(rng)
    }
    fn erf_and_derivative(x: &[Self], value: &mut [Self], derivative: &mut [Self]) {
        // f64 is the precision of the exactness tests: use libm's correctly rounded-ish erf
        // rather than the 1.5e-7-accurate rational approximation of the f32 path.
        const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;
        for ((&h, v), g) in x.iter().zip(value.iter_mut()).zip(derivative.iter_mut()) {
            *v = libm::erf(h);
            *g = TWO_OVER_SQRT_PI * (-h * h).exp();
        }
    }
    fn softmax_rows(scores: &mut [Self], l: usize) {
        // f64: the library exponential (the precision of the exactness tests).
        if l == 0 {
            return;
        }
        for row in scores.chunks_exact_mut(l) {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
            let mut z = 0.0;
            for s in row.iter_mut() {
                *s = (*s - m).exp();
                z += *s;
            }
            let inv = 1.0 / z;
            row.iter_mut().for_each(|s| *s *= inv);
        }
    }
}
