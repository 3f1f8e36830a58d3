//! A harmonic restraint on an order parameter: the bias of one umbrella window (spec 07,
//! "Method"; Torrie & Valleau, J. Comput. Phys. 23, 187 (1977)).
//!
//! The window's chains sample exp(−(U(θ) + V(s(θ)))/T) with V(s) = ½κ(s − s₀)². The kernels add
//! V to the energy their Metropolis tests compare (MALA, HMC) and V′(s)·∇_θ s to the force
//! (every kernel, plain and collapsed), so a restrained run is exact for the biased density and
//! MBAR can remove the bias afterwards. V is not scaled by a tempered replica's β: like the
//! prior it belongs to every replica's density.
//!
//! A window may carry a second, common term B(s) ([`TabulatedBias`]): a flattening bias
//! B ≈ −F̂ from a pilot estimate F̂ of the free energy (adaptive umbrella sampling; Mezei,
//! J. Comput. Phys. 68, 237 (1987)), so that V(s) = ½κ(s − s₀)² + B(s). Where F has a barrier
//! of hundreds of kT, harmonic windows alone slide into the basins; with B the biased profile
//! F + B is nearly flat and soft windows overlap. B is an exact, known part of each window's
//! energy, so MBAR removes it like the harmonic term.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::sim::num::real::Real;
use crate::sim::order::OrderParameter;

/// A bias B(s) tabulated at evenly spaced points of [lo, hi] and interpolated by cubic Hermite
/// segments whose slopes are the central differences of the table (Catmull–Rom; Fritsch &
/// Carlson, SIAM J. Numer. Anal. 17, 238 (1980), eq. 2.1), so that B and B′ are continuous and
/// the kernels' Metropolis energies and forces agree. The end slopes are zero and B is constant
/// outside [lo, hi]: B′ stays continuous there too, and the bias never pushes a chain out of
/// the stretch the table was estimated on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TabulatedBias {
    /// The table's first point.
    pub lo: f64,
    /// Its last point.
    pub hi: f64,
    /// B at lo + i·(hi − lo)/(n − 1), energy units (those of U).
    pub values: Vec<f64>,
}

impl TabulatedBias {
    /// A table of at least two finite values over a finite lo < hi.
    pub fn new(lo: f64, hi: f64, values: Vec<f64>) -> Result<TabulatedBias> {
        if !(lo.is_finite() && hi.is_finite() && lo < hi)
            || values.len() < 2
            || values.iter().any(|v| !v.is_finite())
        {
            return Err(Error::invalid(format!(
                "a tabulated bias needs finite lo < hi and at least two finite values, got [{lo}, {hi}] with {} values",
                values.len()
            )));
        }
        Ok(TabulatedBias { lo, hi, values })
    }

    fn spacing(&self) -> f64 {
        (self.hi - self.lo) / (self.values.len() - 1) as f64
    }

    /// The table's slope at point i: central differences inside, zero at the ends.
    fn slope(&self, i: usize) -> f64 {
        let n = self.values.len();
        if i == 0 || i + 1 == n {
            0.0
        } else {
            (self.values[i + 1] - self.values[i - 1]) / (2.0 * self.spacing())
        }
    }

    /// (B(s), B′(s)).
    pub fn value_and_derivative(&self, s: f64) -> (f64, f64) {
        let n = self.values.len();
        if s <= self.lo {
            return (self.values[0], 0.0);
        }
        if s >= self.hi {
            return (self.values[n - 1], 0.0);
        }
        let h = self.spacing();
        let x = (s - self.lo) / h;
        let i = (x.floor() as usize).min(n - 2);
        let t = x - i as f64;
        let (y0, y1) = (self.values[i], self.values[i + 1]);
        let (m0, m1) = (self.slope(i) * h, self.slope(i + 1) * h);
        // Cubic Hermite basis on [0, 1] (t in units of h, slopes scaled by h).
        let (t2, t3) = (t * t, t * t * t);
        let value = (2.0 * t3 - 3.0 * t2 + 1.0) * y0
            + (t3 - 2.0 * t2 + t) * m0
            + (-2.0 * t3 + 3.0 * t2) * y1
            + (t3 - t2) * m1;
        let dt = (6.0 * t2 - 6.0 * t) * y0
            + (3.0 * t2 - 4.0 * t + 1.0) * m0
            + (-6.0 * t2 + 6.0 * t) * y1
            + (3.0 * t2 - 2.0 * t) * m1;
        (value, dt / h)
    }

    /// B(s).
    pub fn value(&self, s: f64) -> f64 {
        self.value_and_derivative(s).0
    }
}

/// V(s) = ½κ(s − centre)² + B(s) on `order`, B the optional flattening bias (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Restraint {
    /// The order parameter s(θ) it restrains.
    pub order: OrderParameter,
    /// The window's centre s₀.
    pub centre: f64,
    /// Its stiffness κ (energy units, the same as U's).
    pub kappa: f64,
    /// The common flattening term B(s), if any.
    pub flattening: Option<TabulatedBias>,
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
            flattening: None,
        })
    }

    /// λV: the restraint with κ and B scaled by λ (the burn-in ramp of
    /// [`crate::sim::driver::engine`]).
    pub fn scaled(&self, lambda: f64) -> Restraint {
        let mut r = self.clone();
        r.kappa *= lambda;
        if let Some(b) = &mut r.flattening {
            b.values.iter_mut().for_each(|v| *v *= lambda);
        }
        r
    }

    /// V(s).
    pub fn bias(&self, s: f64) -> f64 {
        let ds = s - self.centre;
        0.5 * self.kappa * ds * ds + self.flattening.as_ref().map_or(0.0, |b| b.value(s))
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
                let (b, db) = self
                    .flattening
                    .as_ref()
                    .map_or((0.0, 0.0), |b| b.value_and_derivative(s));
                v = 0.5 * self.kappa * ds * ds + b;
                self.kappa * ds + db
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

    /// With a flattening table the force is still −∇V, V = ½κ(s − s₀)² + B(s).
    #[test]
    fn the_force_includes_the_flattening_term() {
        let mut r = restraint();
        let table: Vec<f64> = (0..21).map(|i| 40.0 * (i as f64 * 0.3).sin()).collect();
        r.flattening = Some(TabulatedBias::new(-1.0, 1.0, table).unwrap());
        let theta = [0.4f64, -0.2, 0.9, 0.5, 0.1, -0.7];
        let mut grad = vec![0.0; 6];
        let (v, s) = r.add_force(&theta, &mut grad);
        assert!((v - r.bias(s)).abs() < 1e-12);
        for j in 3..6 {
            let h = 1e-6;
            let mut up = theta;
            let mut down = theta;
            up[j] += h;
            down[j] -= h;
            let fd = (r.bias(r.order_value(&up)) - r.bias(r.order_value(&down))) / (2.0 * h);
            assert!(
                (grad[j] - fd).abs() < 1e-6 * (1.0 + fd.abs()),
                "entry {j}: {} vs {fd}",
                grad[j]
            );
        }
    }

    /// The table: exact at its points, a quadratic reproduced exactly away from the end
    /// segments (central differences are exact there), B′ the derivative of B everywhere
    /// (so B is C¹ across the segment joints), constant outside [lo, hi].
    #[test]
    fn the_tabulated_bias_interpolates_smoothly() {
        let q = |s: f64| 3.0 * s * s - 2.0 * s + 0.5;
        let (lo, hi, n) = (-1.0, 2.0, 13);
        let h = (hi - lo) / (n - 1) as f64;
        let b = TabulatedBias::new(lo, hi, (0..n).map(|i| q(lo + i as f64 * h)).collect()).unwrap();
        for i in 0..n {
            assert!((b.value(lo + i as f64 * h) - q(lo + i as f64 * h)).abs() < 1e-12);
        }
        for k in 0..400 {
            let s = lo + h + (hi - lo - 2.0 * h) * k as f64 / 399.0;
            let (v, dv) = b.value_and_derivative(s);
            assert!((v - q(s)).abs() < 1e-10, "s = {s}: {v} vs {}", q(s));
            assert!((dv - (6.0 * s - 2.0)).abs() < 1e-9, "s = {s}: {dv}");
        }
        for k in 0..1000 {
            let s = lo - 0.2 + (hi - lo + 0.4) * k as f64 / 999.0;
            let e = 1e-7;
            let fd = (b.value(s + e) - b.value(s - e)) / (2.0 * e);
            assert!((b.value_and_derivative(s).1 - fd).abs() < 1e-5, "s = {s}");
        }
        assert_eq!(b.value_and_derivative(hi + 1.0), (q(hi), 0.0));
        assert_eq!(b.value_and_derivative(lo - 1.0), (q(lo), 0.0));
        assert!(TabulatedBias::new(0.0, 1.0, vec![1.0]).is_err());
        assert!(TabulatedBias::new(1.0, 0.0, vec![1.0, 2.0]).is_err());
        assert!(TabulatedBias::new(0.0, 1.0, vec![1.0, f64::NAN]).is_err());
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
