//! NNGP kernel matrices of one layer: the closed form (the kernels of
//! [`crate::activation::NngpActivation`], Williams 1998; Cho & Saul 2009; paper App. C.5) and
//! the empirical finite-width kernels that converge to it (paper App. C.3 eq. for K_l: the
//! kernel is the expectation over the layer's weights of σ(h(x))σ(h(x′))).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use crate::activation::NngpActivation;
use crate::error::{Error, Result};

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
pub fn nngp_kernel(act: NngpActivation, pts: &Points, sigma_w2: f64) -> Result<Vec<f64>> {
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
    act: NngpActivation,
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
            *ph = act.value_f64(h);
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
