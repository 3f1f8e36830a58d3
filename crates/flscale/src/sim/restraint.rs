//! A harmonic restraint on an order parameter: the bias of one umbrella window (spec 07,
//! "Method"; Torrie & Valleau, J. Comput. Phys. 23, 187 (1977)).
//!
//! The window's chains sample exp(−(U(θ) + V(s(θ)))/T) with V(s) = ½κ(s − s₀)². The kernels add
//! V to the energy their Metropolis tests compare (MALA, HMC) and V′(s)·∇_θ s to the force
//! (every kernel, plain and collapsed), so a restrained run is exact for the biased density and
//! MBAR can remove the bias afterwards. V is not scaled by a tempered replica's β: like the
//! prior it belongs to every replica's density.

use crate::error::{Error, Result};
use crate::sim::num::real::Real;
use crate::sim::order::OrderParameter;

/// V(s) = ½κ(s − centre)² on `order` (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Restraint {
    /// The order parameter s(θ) it restrains.
    pub order: OrderParameter,
    /// The window's centre s₀.
    pub centre: f64,
    /// Its stiffness κ (energy units, the same as U's).
    pub kappa: f64,
}

impl Restraint {
    /// A restraint with a finite centre and a finite κ ≥ 0.
    pub fn new(order: OrderParameter, centre: f64, kappa: f64) -> Result<Restraint> {
        if !centre.is_finite() || !(kappa.is_finite() && kappa >= 0.0) {
            return Err(Error::invalid(format!(
                "a restraint needs a finite centre and a finite stiffness κ ≥ 0, got centre = {centre}, κ = {kappa}"
            )));
        }
        Ok(Restraint {
            order,
            centre,
            kappa,
        })
    }

    /// The parameter group the order parameter reads.
    pub fn group(&self) -> usize {
        self.order.rows().group
    }

    /// s of one chain whose group slice is `theta` (the group's entries of that chain; the
    /// rows start the group, [`crate::sim::order::WeightRows`]).
    pub fn order_value<T: Real>(&self, theta: &[T]) -> f64 {
        self.order.value_rows(&theta[..self.order.rows().len()])
    }

    /// Adds V′(s)·∇s to `grad` (the same group slice as `theta`) and returns (V(s), s).
    pub fn add_force<T: Real>(&self, theta: &[T], grad: &mut [T]) -> (f64, f64) {
        let mut v = 0.0;
        let n = self.order.rows().len();
        let s = self.order.add_scaled_gradient_rows(
            &theta[..n],
            |s| {
                let ds = s - self.centre;
                v = 0.5 * self.kappa * ds * ds;
                self.kappa * ds
            },
            &mut grad[..n],
        );
        (v, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::order::{OrderKind, WeightRows};

    fn restraint() -> Restraint {
        let rows = WeightRows::fcn_first_layer(2, 3);
        let order = OrderParameter::new(
            OrderKind::NeuronOverlap {
                neuron: 1,
                direction: vec![1.0, 2.0, -1.0],
            },
            rows,
        )
        .unwrap();
        Restraint::new(order, 0.3, 7.0).unwrap()
    }

    /// The force is −∇V: each entry of the added gradient against a central difference of V.
    #[test]
    fn the_force_is_the_gradient_of_the_bias() {
        let r = restraint();
        let theta = [0.4f64, -0.2, 0.9, 0.5, 0.1, -0.7];
        let mut grad = vec![0.0; 6];
        let (v, s) = r.add_force(&theta, &mut grad);
        assert!((v - 0.5 * 7.0 * (s - 0.3).powi(2)).abs() < 1e-14);
        let bias = |t: &[f64]| {
            let s = r.order_value(t);
            0.5 * 7.0 * (s - 0.3).powi(2)
        };
        for j in 0..6 {
            let h = 1e-6;
            let mut up = theta;
            let mut down = theta;
            up[j] += h;
            down[j] -= h;
            let fd = (bias(&up) - bias(&down)) / (2.0 * h);
            assert!(
                (grad[j] - fd).abs() < 1e-7,
                "entry {j}: {} vs {fd}",
                grad[j]
            );
        }
        // Row 0 is not read by neuron 1's overlap.
        assert_eq!(&grad[..3], &[0.0; 3]);
    }

    #[test]
    fn a_negative_or_infinite_stiffness_is_refused() {
        let r = restraint();
        for kappa in [-1.0, f64::INFINITY, f64::NAN] {
            assert!(Restraint::new(r.order.clone(), 0.0, kappa).is_err());
        }
        assert!(Restraint::new(r.order.clone(), f64::NAN, 1.0).is_err());
    }
}
