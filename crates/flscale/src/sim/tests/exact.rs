//! Exact answers the sampler tests compare with, one copy each: the Bayesian linear
//! regression posterior of a linear readout (Bishop, *Pattern Recognition and Machine
//! Learning*, eq. 3.53–3.54), whitened moments of draws from it, and the top eigenvalue of a
//! precision given by its Cholesky factor.

use crate::sim::num::linalg;

/// The posterior of readout weights a with features Φ (`phi`, P × k row-major), targets y,
/// noise κ and prior 𝒩(0, v·I) at temperature 1: precision Λ = ΦᵀΦ/κ + I/v and mean
/// m = Λ⁻¹Φᵀy/κ (Bishop eq. 3.53–3.54). Returns (L with Λ = LLᵀ, row-major lower; m). At
/// temperature T the posterior is 𝒩(m, T·Λ⁻¹): whiten with scale √T.
pub(crate) fn linear_readout_posterior(
    phi: &[f64],
    y: &[f64],
    kappa: f64,
    v: f64,
) -> (Vec<f64>, Vec<f64>) {
    let k = phi.len() / y.len().max(1);
    let mut lambda = vec![0.0; k * k];
    let mut m = vec![0.0; k];
    for (row, &y) in phi.chunks(k).zip(y) {
        for i in 0..k {
            m[i] += row[i] * y / kappa;
            for j in 0..k {
                lambda[i * k + j] += row[i] * row[j] / kappa;
            }
        }
    }
    for i in 0..k {
        lambda[i * k + i] += 1.0 / v;
    }
    let mut l = vec![0.0; k * k];
    assert!(
        linalg::cholesky(&lambda, &mut l, k),
        "Λ not positive definite"
    );
    linalg::cholesky_solve(&l, &mut m, k);
    (l, m)
}

/// The largest eigenvalue of Λ = LLᵀ (power iteration, `iterations` steps from the ones
/// vector), for step sizes η = c/λ_max of a quadratic energy.
pub(crate) fn top_eigenvalue(l: &[f64], n: usize, iterations: usize) -> f64 {
    let lambda: Vec<f64> = (0..n * n)
        .map(|ij| {
            (0..n)
                .map(|r| l[(ij / n) * n + r] * l[(ij % n) * n + r])
                .sum()
        })
        .collect();
    let mut v = vec![1.0; n];
    let mut top = 0.0;
    for _ in 0..iterations {
        let w: Vec<f64> = (0..n)
            .map(|i| (0..n).map(|j| lambda[i * n + j] * v[j]).sum())
            .collect();
        top = w.iter().map(|a| a * a).sum::<f64>().sqrt();
        v = w.iter().map(|a| a / top).collect();
    }
    top
}

/// Pooled moments of whitened draws z = Lᵀ(a − m)/scale: for exact draws from 𝒩(m, scale²·Λ⁻¹)
/// with Λ = LLᵀ, z has mean 0 and identity covariance.
pub(crate) struct WhitenedMoments {
    k: usize,
    sum: Vec<f64>,
    sum2: Vec<f64>,
    count: f64,
}

impl WhitenedMoments {
    pub(crate) fn new(k: usize) -> Self {
        WhitenedMoments {
            k,
            sum: vec![0.0; k],
            sum2: vec![0.0; k * k],
            count: 0.0,
        }
    }

    /// Adds one draw `a` of the posterior (L, m) of [`linear_readout_posterior`].
    pub(crate) fn add(&mut self, l: &[f64], m: &[f64], a: &[f64], scale: f64) {
        let k = self.k;
        let z: Vec<f64> = (0..k)
            .map(|i| (i..k).map(|j| l[j * k + i] * (a[j] - m[j])).sum::<f64>() / scale)
            .collect();
        for i in 0..k {
            self.sum[i] += z[i];
            for j in 0..k {
                self.sum2[i * k + j] += z[i] * z[j];
            }
        }
        self.count += 1.0;
    }

    /// The variance of z averaged over its k directions (1 for exact draws).
    pub(crate) fn mean_variance(&self) -> f64 {
        let c = self.count;
        (0..self.k)
            .map(|i| self.sum2[i * self.k + i] / c - (self.sum[i] / c).powi(2))
            .sum::<f64>()
            / self.k as f64
    }

    /// Asserts |mean zᵢ| < `mean_tol` and |cov zᵢⱼ − δᵢⱼ| < `cov_tol` for every entry.
    pub(crate) fn assert_standard_normal(&self, mean_tol: f64, cov_tol: f64, what: &str) {
        let (k, c) = (self.k, self.count);
        for i in 0..k {
            let mean = self.sum[i] / c;
            assert!(mean.abs() < mean_tol, "{what}: mean of z_{i} = {mean}");
            for j in 0..k {
                let cov = self.sum2[i * k + j] / c - mean * self.sum[j] / c;
                let want = if i == j { 1.0 } else { 0.0 };
                assert!(
                    (cov - want).abs() < cov_tol,
                    "{what}: cov z[{i}, {j}] = {cov}"
                );
            }
        }
    }
}
