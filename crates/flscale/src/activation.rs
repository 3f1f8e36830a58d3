//! The activation functions σ of every network in the crate, and which of them have a
//! closed-form NNGP kernel.
//!
//! [`Activation`] is what an experiment file, an architecture file and the Langevin engine name
//! (`erf | relu | tanh | linear | poly`); the engine's matrix evaluation of σ and σ′ lives with
//! the engine (`sim/model/activation.rs`). [`NngpActivation`] is the subset whose kernel
//! K = E[σ(u)σ(v)] over jointly Gaussian (u, v) is known in closed form, obtained from
//! [`Activation::nngp`]; the kernel computations accept only it.
//!
//! For one layer with weights w ∼ 𝒩(0, σ_w²/d·I) the pre-activations (u, v) = (w·x, w·x′) are
//! jointly Gaussian with Σ₁₁ = σ_w²|x|²/d, Σ₂₂ = σ_w²|x′|²/d, Σ₁₂ = σ_w² x·x′/d, and
//! K(x, x′) = E[σ(u)σ(v)]:
//!
//! * **erf — arcsine kernel** (Williams 1998, "Computation with infinite neural networks"):
//!   K = (2/π) arcsin(2Σ₁₂ / √((1 + 2Σ₁₁)(1 + 2Σ₂₂))).
//! * **ReLU — arc-cosine kernel of order 1** (Cho & Saul 2009): with ρ = Σ₁₂/√(Σ₁₁Σ₂₂),
//!   θ = arccos ρ, K = √(Σ₁₁Σ₂₂)/(2π)·(sin θ + (π − θ) cos θ).
//! * **poly σ(z) = 1 + z + z²** (the Fig. 6 activation, paper App. C.5): by Wick's theorem
//!   K = 1 + Σ₁₁ + Σ₂₂ + Σ₁₁Σ₂₂ + Σ₁₂ + 2Σ₁₂².
//!
//! **Dot-product expansion.** On inputs of equal variance s = Σ₁₁ = Σ₂₂ the kernel is a power
//! series in c = Σ₁₂: K = Σ_k b_k c^k with b_k = k!·a_k²/s^k, a_k the Hermite coefficients of
//! z ↦ σ(√s z) (σ(√s z) = Σ a_k He_k(z), Mehler's formula E[He_j(u)He_k(v)] = k!ρ^k δ_jk).
//! In closed form: erf — the arcsine series, b_{2j+1} = (2/π)(2/(1+2s))^{2j+1}(2j)!/(4^j(j!)²(2j+1));
//! ReLU — a₀ = √s/√(2π), a₁ = √s/2, a_k = √s He_{k−2}(0)/(√(2π) k!) for k ≥ 2 (Stein's lemma:
//! E[ReLU(z)He_k(z)] = E[δ^{(k−2)}(z)] = He_{k−2}(0)φ(0)); poly — b₀ = (1+s)², b₁ = 1, b₂ = 2.
//! These are the "Taylor expansion of the kernel" terms of paper Sec. 5.2 Claim (ii).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hermite::{factorial, he};

/// The element-wise non-linearity of a hidden layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activation {
    /// σ(h) = erf(h) (the paper's main activation, odd).
    Erf,
    /// σ(h) = max(0, h).
    Relu,
    /// σ(h) = tanh(h).
    Tanh,
    /// σ(h) = h (deep linear network).
    Linear,
    /// σ(h) = 1 + h + h² (paper App. C.5, Fig. 6).
    Poly,
}

impl Activation {
    /// σ(x) in f64.
    #[inline]
    pub fn value_f64(self, x: f64) -> f64 {
        match self {
            Activation::Erf => libm::erf(x),
            Activation::Relu => x.max(0.0),
            Activation::Tanh => x.tanh(),
            Activation::Linear => x,
            Activation::Poly => 1.0 + x + x * x,
        }
    }

    /// The name as written in experiment files.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Erf => "erf",
            Activation::Relu => "relu",
            Activation::Tanh => "tanh",
            Activation::Linear => "linear",
            Activation::Poly => "poly",
        }
    }

    /// The same activation as one with a closed-form NNGP kernel, or None (tanh, linear).
    pub fn nngp(self) -> Option<NngpActivation> {
        match self {
            Activation::Erf => Some(NngpActivation::Erf),
            Activation::Relu => Some(NngpActivation::Relu),
            Activation::Poly => Some(NngpActivation::Poly),
            Activation::Tanh | Activation::Linear => None,
        }
    }
}

/// An [`Activation`] whose NNGP kernel has a closed form (module docs): the activations of
/// the kernel computations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NngpActivation {
    /// erf(z).
    Erf,
    /// max(z, 0).
    Relu,
    /// 1 + z + z² (paper App. C.5, Fig. 6 bottom panels).
    Poly,
}

impl std::str::FromStr for NngpActivation {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "erf" => Ok(NngpActivation::Erf),
            "relu" => Ok(NngpActivation::Relu),
            "poly" => Ok(NngpActivation::Poly),
            other => Err(Error::invalid(format!(
                "activation = \"{other}\" is not allowed; use erf, relu or poly"
            ))),
        }
    }
}

impl From<NngpActivation> for Activation {
    fn from(a: NngpActivation) -> Self {
        match a {
            NngpActivation::Erf => Activation::Erf,
            NngpActivation::Relu => Activation::Relu,
            NngpActivation::Poly => Activation::Poly,
        }
    }
}

impl NngpActivation {
    /// σ(z).
    #[inline]
    pub fn value_f64(self, z: f64) -> f64 {
        Activation::from(self).value_f64(z)
    }

    /// K = E[σ(u)σ(v)] for (u, v) Gaussian with variances s11, s22 and covariance s12.
    pub fn kernel_from_cov(self, s11: f64, s22: f64, s12: f64) -> f64 {
        match self {
            NngpActivation::Erf => {
                let arg = 2.0 * s12 / ((1.0 + 2.0 * s11) * (1.0 + 2.0 * s22)).sqrt();
                std::f64::consts::FRAC_2_PI * arg.clamp(-1.0, 1.0).asin()
            }
            NngpActivation::Relu => {
                let norm = (s11 * s22).sqrt();
                if norm == 0.0 {
                    return 0.0;
                }
                let rho = (s12 / norm).clamp(-1.0, 1.0);
                let theta = rho.acos();
                norm / (2.0 * std::f64::consts::PI)
                    * (theta.sin() + (std::f64::consts::PI - theta) * rho)
            }
            NngpActivation::Poly => 1.0 + s11 + s22 + s11 * s22 + s12 + 2.0 * s12 * s12,
        }
    }

    /// Closed-form dot-product coefficients b_0 … b_kmax of K(c) = Σ b_k c^k at equal input
    /// variance s (module docs).
    pub fn dot_product_coefficients(self, s: f64, kmax: usize) -> Vec<f64> {
        let mut b = vec![0.0; kmax + 1];
        match self {
            NngpActivation::Erf => {
                let g = 2.0 / (1.0 + 2.0 * s);
                // arcsin x = Σ_j (2j)!/(4^j (j!)² (2j+1)) x^{2j+1}.
                let mut coef = 1.0; // (2j)!/(4^j (j!)²) at j = 0
                let mut j = 0usize;
                while 2 * j < kmax {
                    let k = 2 * j + 1;
                    b[k] = std::f64::consts::FRAC_2_PI * g.powi(k as i32) * coef / k as f64;
                    j += 1;
                    coef *= (2 * j - 1) as f64 / (2 * j) as f64;
                }
            }
            NngpActivation::Relu => {
                let inv_sqrt_2pi = 1.0 / (2.0 * std::f64::consts::PI).sqrt();
                for (k, bk) in b.iter_mut().enumerate() {
                    // a_k (Hermite coefficient of ReLU(√s z)) without the √s factor.
                    let e_k = match k {
                        0 => inv_sqrt_2pi,
                        1 => 0.5,
                        _ => he(k - 2, 0.0) * inv_sqrt_2pi,
                    };
                    let a_k = e_k / factorial(k);
                    // b_k = k! a_k² s / s^k.
                    *bk = factorial(k) * a_k * a_k * s / s.powi(k as i32);
                }
            }
            NngpActivation::Poly => {
                b[0] = (1.0 + s) * (1.0 + s);
                if kmax >= 1 {
                    b[1] = 1.0;
                }
                if kmax >= 2 {
                    b[2] = 2.0;
                }
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Activation; 5] = [
        Activation::Erf,
        Activation::Relu,
        Activation::Tanh,
        Activation::Linear,
        Activation::Poly,
    ];

    #[test]
    fn the_nngp_view_keeps_the_function_and_the_name() {
        for act in ALL {
            let parsed = act.name().parse::<NngpActivation>().ok();
            assert_eq!(act.nngp(), parsed, "{act:?}");
            if let Some(k) = act.nngp() {
                assert_eq!(Activation::from(k), act);
                for z in [-2.5, -0.3, 0.0, 0.7, 3.1] {
                    assert_eq!(k.value_f64(z).to_bits(), act.value_f64(z).to_bits());
                }
            }
        }
        assert_eq!(
            "tanh".parse::<NngpActivation>().unwrap_err().to_string(),
            "activation = \"tanh\" is not allowed; use erf, relu or poly"
        );
    }

    #[test]
    fn the_kernel_at_equal_inputs_is_the_second_moment() {
        // K(x, x) = E[σ(u)²] with u ~ N(0, s): erf (2/π) arcsin(2s/(1+2s)), ReLU s/2, poly
        // E[(1 + u + u²)²] = 1 + 3s + 3s² (E[u⁴] = 3s²).
        let s: f64 = 0.8;
        let erf = std::f64::consts::FRAC_2_PI * (2.0 * s / (1.0 + 2.0 * s)).asin();
        assert!((NngpActivation::Erf.kernel_from_cov(s, s, s) - erf).abs() < 1e-15);
        assert!((NngpActivation::Relu.kernel_from_cov(s, s, s) - s / 2.0).abs() < 1e-15);
        let poly = 1.0 + 3.0 * s + 3.0 * s * s;
        assert!((NngpActivation::Poly.kernel_from_cov(s, s, s) - poly).abs() < 1e-14);
    }
}
