//! The Gaussian prior of every weight group, W ~ 𝒩(0, v·I) (paper App. A.1: the energy's
//! Σ_l |W^l|²/(2 v_l)), as one group's contribution to U, ∇U and the virial.

use crate::sim::num::real::Real;

/// Adds the prior's gradient θ/v to `grad` (which holds the data term's gradient of the same
/// group) and returns the prior energy |θ|²/(2v) and the group's virial θ·∇U with the prior
/// included (the equipartition check of the diagnostics), both accumulated in f64.
#[inline(always)]
pub fn add_gaussian_prior<T: Real>(theta: &[T], grad: &mut [T], prior_var: f64) -> (f64, f64) {
    let inv_v = 1.0 / prior_var;
    let inv_v_t = T::of(inv_v);
    let (mut sq, mut virial) = (0.0, 0.0);
    for (gi, &ti) in grad.iter_mut().zip(theta) {
        *gi += ti * inv_v_t;
        sq += (ti * ti).f64();
        virial += (ti * *gi).f64();
    }
    (0.5 * sq * inv_v, virial)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the definitions: ∇(|θ|²/(2v)) = θ/v added to the data gradient, and the
    /// virial θ·(g + θ/v).
    #[test]
    fn prior_energy_gradient_and_virial_match_their_definitions() {
        let theta = [0.5f64, -1.5, 2.0];
        let mut grad = [1.0f64, 0.25, -0.5];
        let (energy, virial) = add_gaussian_prior(&theta, &mut grad, 0.5);
        assert_eq!(energy, (0.25 + 2.25 + 4.0) / (2.0 * 0.5));
        assert_eq!(grad, [2.0, -2.75, 3.5]);
        assert_eq!(virial, 0.5 * 2.0 + 1.5 * 2.75 + 2.0 * 3.5);
    }
}
