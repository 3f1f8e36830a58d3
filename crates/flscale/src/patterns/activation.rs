//! Activations and the Hermite structure the propagation rules need (paper §5.2, spec 01 §2).
//!
//! Which features a layer can carry is decided by Hermite overlaps, computed here by
//! Gauss–Hermite quadrature rather than typed in: the lazy rule needs the coefficients
//! ĉ_k = E[σ(z) Ĥe_k(z)], and the specialisation rule needs the overlaps
//! E[σ(Ĥe_j(z)) Ĥe_k(z)] of a specialised neuron's post-activation σ(F), F = Ĥe_j(Φ\*), with
//! each feature He_k(Φ\*).

use crate::error::{Error, Result};
use crate::hermite::{he_normalized, GaussHermite};

/// Pointwise activation σ: the same type the Langevin engine samples with, so that a
/// prediction and a measurement cannot disagree about what "erf" or "poly" means.
pub use crate::sim::model::activation::Activation;

/// Parses `erf | relu | tanh | linear | poly`.
pub fn parse_activation(s: &str) -> Result<Activation> {
    match s {
        "erf" => Ok(Activation::Erf),
        "relu" => Ok(Activation::Relu),
        "tanh" => Ok(Activation::Tanh),
        "linear" => Ok(Activation::Linear),
        "poly" => Ok(Activation::Poly),
        other => Err(Error::invalid(format!(
            "activation \"{other}\" is not known; allowed are erf, relu, tanh, linear, poly"
        ))),
    }
}

/// Relative size below which a Hermite overlap counts as zero. Exact zeros (parity) come out
/// at rounding level (~1e-16) because the Gauss–Hermite nodes are symmetric; genuine
/// overlaps of the supported activations up to degree 12 are above 1e-4.
const ZERO_OVERLAP: f64 = 1e-9;

/// Hermite overlaps of an activation up to degree `max_degree`.
#[derive(Debug, Clone)]
pub struct HermiteStructure {
    /// ĉ_k = E[σ(z) Ĥe_k(z)], k = 0..=max_degree.
    pub coefficients: Vec<f64>,
    /// overlap[j][k] = E[σ(Ĥe_j(z)) Ĥe_k(z)], j, k = 0..=max_degree.
    pub spike_overlap: Vec<Vec<f64>>,
}

impl HermiteStructure {
    /// Computes the overlaps with a 150-point Gauss–Hermite rule.
    pub fn new(act: Activation, max_degree: usize) -> Result<Self> {
        if max_degree > 12 {
            return Err(Error::invalid(format!(
                "target degree {max_degree} is not supported; it must be between 1 and 12"
            )));
        }
        let gh = GaussHermite::new(crate::hermite::MAX_ORDER)?;
        let coefficients = (0..=max_degree)
            .map(|k| gh.expect(|z| act.value_f64(z) * he_normalized(k, z)))
            .collect();
        let spike_overlap = (0..=max_degree)
            .map(|j| {
                (0..=max_degree)
                    .map(|k| {
                        gh.expect(|z| act.value_f64(he_normalized(j, z)) * he_normalized(k, z))
                    })
                    .collect()
            })
            .collect();
        Ok(HermiteStructure {
            coefficients,
            spike_overlap,
        })
    }

    fn scale(&self) -> f64 {
        self.coefficients
            .iter()
            .fold(0.0f64, |m, c| m.max(c.abs()))
            .max(1e-300)
    }

    /// Whether σ has a non-zero Hermite coefficient of order k (σ carries Φ^k, rule iii).
    pub fn has_coefficient(&self, k: usize) -> bool {
        self.coefficients
            .get(k)
            .is_some_and(|c| c.abs() > ZERO_OVERLAP * self.scale())
    }

    /// Whether σ(Ĥe_j) overlaps He_k (the spike of neurons specialised on He_j reaches He_k).
    pub fn spike_reaches(&self, j: usize, k: usize) -> bool {
        self.spike_overlap
            .get(j)
            .and_then(|r| r.get(k))
            .is_some_and(|c| c.abs() > ZERO_OVERLAP * self.scale())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parities_follow_the_activation() {
        let erf = HermiteStructure::new(Activation::Erf, 6).unwrap();
        assert!(erf.has_coefficient(1) && erf.has_coefficient(3) && erf.has_coefficient(5));
        assert!(!erf.has_coefficient(2) && !erf.has_coefficient(4) && !erf.has_coefficient(0));
        let relu = HermiteStructure::new(Activation::Relu, 6).unwrap();
        assert!(relu.has_coefficient(1) && relu.has_coefficient(2) && relu.has_coefficient(4));
        assert!(!relu.has_coefficient(3) && !relu.has_coefficient(5));
        let poly = HermiteStructure::new(Activation::Poly, 4).unwrap();
        assert!(poly.has_coefficient(1) && poly.has_coefficient(2) && !poly.has_coefficient(3));
        let lin = HermiteStructure::new(Activation::Linear, 3).unwrap();
        assert!(lin.has_coefficient(1) && !lin.has_coefficient(2) && !lin.has_coefficient(3));
        // Closed form: E[erf(z) z] = 2/√(3π).
        let c1 = 2.0 / (3.0 * std::f64::consts::PI).sqrt();
        assert!((erf.coefficients[1] - c1).abs() < 1e-12);
        // ReLU: E[relu(z)(z² − 1)]/√2 = (2φ(0) − φ(0))/√2 = φ(0)/√2. Gauss–Hermite converges
        // only algebraically across the kink, hence the looser tolerance (zero detection is
        // unaffected: odd orders vanish exactly by the symmetry of the nodes).
        let want = 1.0 / (2.0 * std::f64::consts::PI).sqrt() / 2f64.sqrt();
        assert!(
            (relu.coefficients[2] - want).abs() < 2e-3,
            "{}",
            relu.coefficients[2]
        );
    }

    #[test]
    fn spikes_reach_the_right_features() {
        let erf = HermiteStructure::new(Activation::Erf, 3).unwrap();
        // erf(Φ) contains He1 and He3 (spec 01 §2).
        assert!(erf.spike_reaches(1, 1) && erf.spike_reaches(1, 3) && !erf.spike_reaches(1, 2));
        // erf(Ĥe3(Φ)) is odd in Φ: it reaches He1 and He3, not He2.
        assert!(erf.spike_reaches(3, 3) && erf.spike_reaches(3, 1) && !erf.spike_reaches(3, 2));
        let relu = HermiteStructure::new(Activation::Relu, 4).unwrap();
        assert!(relu.spike_reaches(1, 1) && relu.spike_reaches(1, 2) && !relu.spike_reaches(1, 3));
    }
}
