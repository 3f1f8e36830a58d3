//! Closed-form NNGP kernels, their dot-product (Hermite) expansions, and the empirical
//! finite-width kernels that converge to them (paper App. C.3 eq. for K_l: the kernel is the
//! expectation over the layer's weights of σ(h(x))σ(h(x′))).
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

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use crate::error::{Error, Result};
use crate::hermite::{factorial, he};

/// The activations of the kernel computations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// erf(z).
    Erf,
    /// max(z, 0).
    Relu,
    /// 1 + z + z² (paper App. C.5, Fig. 6 bottom panels).
    Poly,
}

impl std::str::FromStr for Activation {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "erf" => Ok(Activation::Erf),
            "relu" => Ok(Activation::Relu),
            "poly" => Ok(Activation::Poly),
            other => Err(Error::invalid(format!(
                "activation = \"{other}\" is not allowed; use erf, relu or poly"
            ))),
        }
    }
}

impl Activation {
    /// σ(z).
    #[inline]
    pub fn apply(self, z: f64) -> f64 {
        match self {
            Activation::Erf => libm::erf(z),
            Activation::Relu => z.max(0.0),
            Activation::Poly => 1.0 + z + z * z,
        }
    }

    /// K = E[σ(u)σ(v)] for (u, v) Gaussian with variances s11, s22 and covariance s12.
    pub fn kernel_from_cov(self, s11: f64, s22: f64, s12: f64) -> f64 {
        match self {
            Activation::Erf => {
                let arg = 2.0 * s12 / ((1.0 + 2.0 * s11) * (1.0 + 2.0 * s22)).sqrt();
                std::f64::consts::FRAC_2_PI * arg.clamp(-1.0, 1.0).asin()
            }
            Activation::Relu => {
                let norm = (s11 * s22).sqrt();
                if norm == 0.0 {
                    return 0.0;
                }
                let rho = (s12 / norm).clamp(-1.0, 1.0);
                let theta = rho.acos();
                norm / (2.0 * std::f64::consts::PI)
                    * (theta.sin() + (std::f64::consts::PI - theta) * rho)
            }
            Activation::Poly => 1.0 + s11 + s22 + s11 * s22 + s12 + 2.0 * s12 * s12,
        }
    }

    /// Closed-form dot-product coefficients b_0 … b_kmax of K(c) = Σ b_k c^k at equal input
    /// variance s (module docs).
    pub fn dot_product_coefficients(self, s: f64, kmax: usize) -> Vec<f64> {
        let mut b = vec![0.0; kmax + 1];
        match self {
            Activation::Erf => {
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
            Activation::Relu => {
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
            Activation::Poly => {
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

/// Row-major P×d data.
#[derive(Debug, Clone, PartialEq)]
pub struct Points {
    /// Number of points.
    pub p: usize,
    /// Dimension.
    pub d: usize,
    /// Row-major coordinates.
    pub x: Vec<f64>,
}

impl Points {
    /// Builds from row-major data, checking the shape and finiteness.
    pub fn new(p: usize, d: usize, x: Vec<f64>) -> Result<Self> {
        if p == 0 || d == 0 || x.len() != p * d {
            return Err(Error::invalid(format!(
                "data of {} numbers cannot be {p} points in dimension {d}; need p, d ≥ 1 and p·d numbers",
                x.len()
            )));
        }
        if x.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid(
                "data contain a non-finite coordinate; all must be finite",
            ));
        }
        Ok(Points { p, d, x })
    }

    /// `p` standard Gaussian points in dimension `d` (ChaCha8 stream 0 of `seed`, row-major
    /// draw order).
    pub fn gaussian(p: usize, d: usize, seed: u64) -> Result<Self> {
        if p == 0 || d == 0 || p.saturating_mul(d) > 100_000_000 {
            return Err(Error::invalid(format!(
                "{p} points in dimension {d} are not allowed; need p, d ≥ 1 and p·d ≤ 1e8"
            )));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let x = (0..p * d)
            .map(|_| rng.sample::<f64, _>(StandardNormal))
            .collect();
        Points::new(p, d, x)
    }

    fn row(&self, i: usize) -> &[f64] {
        &self.x[i * self.d..(i + 1) * self.d]
    }
}

/// The closed-form NNGP kernel matrix (row-major P×P) of one layer with weight variance
/// σ_w²/d.
pub fn nngp_kernel(act: Activation, pts: &Points, sigma_w2: f64) -> Result<Vec<f64>> {
    crate::error::require_positive("sigma_w2", sigma_w2)?;
    let (p, d) = (pts.p, pts.d);
    let dot = |i: usize, j: usize| -> f64 {
        pts.row(i)
            .iter()
            .zip(pts.row(j))
            .map(|(a, b)| a * b)
            .sum::<f64>()
            * sigma_w2
            / d as f64
    };
    let diag: Vec<f64> = (0..p).map(|i| dot(i, i)).collect();
    let mut k = vec![0.0; p * p];
    for i in 0..p {
        for j in 0..=i {
            let v = act.kernel_from_cov(diag[i], diag[j], dot(i, j));
            k[i * p + j] = v;
            k[j * p + i] = v;
        }
    }
    Ok(k)
}

/// The empirical kernel φφᵀ/width of one random layer of `width` neurons with weights
/// 𝒩(0, σ_w²/d) (row-major P×P). Neuron i's weights come from ChaCha8 stream i of `seed`, so
/// the result does not depend on evaluation order.
pub fn empirical_kernel(
    act: Activation,
    pts: &Points,
    sigma_w2: f64,
    width: usize,
    seed: u64,
) -> Result<Vec<f64>> {
    crate::error::require_positive("sigma_w2", sigma_w2)?;
    if width == 0 {
        return Err(Error::invalid(
            "width = 0 is not allowed; it must be at least 1",
        ));
    }
    let (p, d) = (pts.p, pts.d);
    let scale = (sigma_w2 / d as f64).sqrt();
    let mut k = vec![0.0; p * p];
    let mut phi = vec![0.0; p];
    let mut w = vec![0.0; d];
    for i in 0..width {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(i as u64);
        for wj in w.iter_mut() {
            *wj = rng.sample::<f64, _>(StandardNormal) * scale;
        }
        for (a, ph) in phi.iter_mut().enumerate() {
            let h: f64 = pts.row(a).iter().zip(&w).map(|(x, w)| x * w).sum();
            *ph = act.apply(h);
        }
        for a in 0..p {
            for b in 0..=a {
                k[a * p + b] += phi[a] * phi[b];
            }
        }
    }
    for a in 0..p {
        for b in 0..=a {
            let v = k[a * p + b] / width as f64;
            k[a * p + b] = v;
            k[b * p + a] = v;
        }
    }
    Ok(k)
}
