//! The activations σ of [`crate::activation`] and their derivatives σ′, evaluated on whole
//! pre-activation matrices at once in the sampler's precision.
//!
//! The erf path dominates the cost of a Langevin step after the two GEMMs, so in f32 it is a
//! branch-free rational approximation that shares one exponential between erf and its
//! derivative, in the CPU's vector build ([`crate::sim::num::f32math`]).

use crate::activation::Activation;
use crate::sim::num::real::Real;

impl Activation {
    /// Writes σ(h) into `value` and σ′(h) into `derivative`.
    pub fn apply<T: Real>(self, h: &[T], value: &mut [T], derivative: &mut [T]) {
        debug_assert!(h.len() == value.len() && h.len() == derivative.len());
        let one = T::one();
        match self {
            Activation::Erf => T::erf_and_derivative(h, value, derivative),
            Activation::Relu => {
                for ((&x, v), g) in h.iter().zip(value.iter_mut()).zip(derivative.iter_mut()) {
                    let positive = x > T::zero();
                    *v = if positive { x } else { T::zero() };
                    *g = if positive { one } else { T::zero() };
                }
            }
            Activation::Tanh => {
                for ((&x, v), g) in h.iter().zip(value.iter_mut()).zip(derivative.iter_mut()) {
                    let t = x.tanh();
                    *v = t;
                    *g = one - t * t;
                }
            }
            Activation::Linear => {
                value.copy_from_slice(h);
                derivative.fill(one);
            }
            Activation::Poly => {
                let two = one + one;
                for ((&x, v), g) in h.iter().zip(value.iter_mut()).zip(derivative.iter_mut()) {
                    *v = one + x + x * x;
                    *g = one + two * x;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_finite_differences() {
        let h: Vec<f64> = vec![-1.3, -0.2, 0.4, 2.1];
        for act in [
            Activation::Erf,
            Activation::Relu,
            Activation::Tanh,
            Activation::Linear,
            Activation::Poly,
        ] {
            let mut v = vec![0.0; 4];
            let mut g = vec![0.0; 4];
            act.apply(&h, &mut v, &mut g);
            for i in 0..4 {
                let eps = 1e-6;
                let fd = (act.value_f64(h[i] + eps) - act.value_f64(h[i] - eps)) / (2.0 * eps);
                assert!((fd - g[i]).abs() < 1e-6, "{act:?} at {}", h[i]);
                assert!((v[i] - act.value_f64(h[i])).abs() < 1e-12);
            }
        }
    }
}
