//! Spectra of kernel matrices, dense and low-rank, on top of faer's self-adjoint
//! eigendecomposition (tridiagonalisation + divide and conquer).
//!
//! **Low rank (spec 05 B, end).** A finite-width kernel K = φφᵀ/N (φ ∈ ℝ^{P×N}) has rank
//! ≤ N. Its non-zero eigenpairs follow from the N×N Gram matrix G = φᵀφ/N = VΛVᵀ: the same
//! eigenvalues, with eigenvectors u_k = φv_k/√(Nλ_k) (the thin SVD of φ/√N). Hence, for
//! f ∈ ℝᴾ,
//!
//! * fᵀKf = |φᵀf|²/N,
//! * fᵀK⁺f = Σ_{λ_k > tol} (u_kᵀf)²/λ_k = Σ_{λ_k > tol} (v_kᵀφᵀf)²/(Nλ_k²),
//!
//! which costs P·N² (forming G) + O(N³) (its eigendecomposition) instead of O(P³). The
//! pseudo-inverse drops eigenvalues at or below tol = λ_max·max(P, N)·ε — the "zero to machine
//! precision" rule of paper App. C.5 and numpy's `matrix_rank` default; the P − N exact zeros
//! of K (P > N) are the ones a dense solver must drop, and never enter the Gram route.
//!
//! **Dense.** When N ≥ P nothing is gained, and K itself is decomposed.
//!
//! **Determinism.** faer's matrix products partition the output by blocks, so they do not
//! depend on the rayon pool size; its parallel eigendecomposition does (last bits), so
//! [`FeatureKernel`] decomposes sequentially and the propagation sweep runs its independent
//! D points concurrently instead (a test compares 1 and 2 threads bit for bit).

use faer::{Mat, Par};

use crate::error::{Error, Result};
use crate::linalg::{gram, max_eigen_residual, outer, sym_eigen, SymEigen};

/// The parallelism used for every dense kernel: the whole rayon pool.
pub fn default_par() -> Par {
    Par::rayon(0)
}

/// Which route a [`FeatureKernel`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpectralMethod {
    /// Gram when N < P, dense otherwise.
    Auto,
    /// The N×N Gram matrix in feature space.
    Gram,
    /// The P×P kernel matrix.
    Dense,
}

impl std::str::FromStr for SpectralMethod {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(SpectralMethod::Auto),
            "gram" => Ok(SpectralMethod::Gram),
            "dense" => Ok(SpectralMethod::Dense),
            other => Err(Error::invalid(format!(
                "method = \"{other}\" is not allowed; use auto, gram or dense"
            ))),
        }
    }
}

/// The spectrum of K = φφᵀ/N, by either route, with the forms the propagation needs.
#[derive(Debug, Clone)]
pub struct FeatureKernel {
    method: SpectralMethod,
    /// Number of points P.
    p: usize,
    /// Number of features N.
    n: usize,
    eig: SymEigen,
    tol: f64,
    phi: Mat<f64>,
}

impl FeatureKernel {
    /// Decomposes K = φφᵀ/N for the features φ (P×N), by `method` (Auto: Gram iff N < P).
    pub fn new(phi: Mat<f64>, method: SpectralMethod, par: Par) -> Result<Self> {
        let (p, n) = (phi.nrows(), phi.ncols());
        let method = match method {
            SpectralMethod::Auto if n < p => SpectralMethod::Gram,
            SpectralMethod::Auto => SpectralMethod::Dense,
            m => m,
        };
        let inv_n = 1.0 / n as f64;
        // The products use `par` (faer's matmul assigns output blocks to threads, so its
        // result does not depend on the thread count); the eigendecomposition runs
        // sequentially because faer's parallel tridiagonalisation changes the last bits with
        // the pool size. Callers parallelise across independent kernels instead.
        let eig = match method {
            SpectralMethod::Gram => sym_eigen(gram(phi.as_ref(), inv_n, par).as_ref(), Par::Seq)?,
            _ => sym_eigen(outer(phi.as_ref(), inv_n, par).as_ref(), Par::Seq)?,
        };
        let lam_max = eig.values.last().copied().unwrap_or(0.0);
        if lam_max.is_nan() || lam_max <= 0.0 {
            return Err(Error::runtime(
                "the kernel matrix is zero (every feature vanished on the data)",
            ));
        }
        let tol = lam_max * p.max(n) as f64 * f64::EPSILON;
        Ok(FeatureKernel {
            method,
            p,
            n,
            eig,
            tol,
            phi,
        })
    }

    /// Gives back the features φ.
    pub fn into_features(self) -> Mat<f64> {
        self.phi
    }

    /// The route taken.
    pub fn method(&self) -> SpectralMethod {
        self.method
    }

    /// Eigenvalues above the cutoff, descending.
    pub fn kept_eigenvalues(&self) -> Vec<f64> {
        self.eig
            .values
            .iter()
            .rev()
            .copied()
            .filter(|&l| l > self.tol)
            .collect()
    }

    /// The unit eigenvector of K (a P-vector) with the `rank`-th largest eigenvalue
    /// (1-based), and that eigenvalue.
    pub fn eigenvector(&self, rank: usize) -> Result<(Vec<f64>, f64)> {
        let kept = self.kept_eigenvalues().len();
        if rank == 0 || rank > kept {
            return Err(Error::invalid(format!(
                "eigenvector rank {rank} is not available; the kernel has {kept} non-zero eigenvalues"
            )));
        }
        let col = self.eig.values.len() - rank;
        let lam = self.eig.values[col];
        let v = self.eig.vectors.col(col);
        let u = match self.method {
            SpectralMethod::Gram => {
                // u = φv/√(Nλ).
                let c = 1.0 / (self.n as f64 * lam).sqrt();
                (0..self.p)
                    .map(|i| (0..self.n).map(|j| self.phi[(i, j)] * v[j]).sum::<f64>() * c)
                    .collect()
            }
            _ => (0..self.p).map(|i| v[i]).collect(),
        };
        Ok((u, lam))
    }

    /// φᵀf (an N-vector).
    pub fn project(&self, f: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; self.n];
        for (j, o) in out.iter_mut().enumerate() {
            let col = self.phi.col(j);
            *o = (0..self.p).map(|i| col[i] * f[i]).sum();
        }
        out
    }

    /// fᵀKf = |φᵀf|²/N.
    pub fn quadratic_form(&self, f: &[f64]) -> f64 {
        self.project(f).iter().map(|g| g * g).sum::<f64>() / self.n as f64
    }

    /// fᵀK⁺f with eigenvalues ≤ tol dropped.
    pub fn pinv_quadratic_form(&self, f: &[f64]) -> f64 {
        let m = self.eig.values.len();
        match self.method {
            SpectralMethod::Gram => {
                let g = self.project(f);
                (0..m)
                    .filter(|&k| self.eig.values[k] > self.tol)
                    .map(|k| {
                        let v = self.eig.vectors.col(k);
                        let c: f64 = (0..self.n).map(|j| v[j] * g[j]).sum();
                        let lam = self.eig.values[k];
                        c * c / (self.n as f64 * lam * lam)
                    })
                    .sum()
            }
            _ => (0..m)
                .filter(|&k| self.eig.values[k] > self.tol)
                .map(|k| {
                    let v = self.eig.vectors.col(k);
                    let c: f64 = (0..self.p).map(|i| v[i] * f[i]).sum();
                    c * c / self.eig.values[k]
                })
                .sum(),
        }
    }
}

/// Timing of the dense eigendecomposition on the workload of `shared/bench/eigh.py`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EighBench {
    /// Matrix size.
    pub n: usize,
    /// Wall-clock seconds of each repetition.
    pub times_s: Vec<f64>,
    /// Median of `times_s`.
    pub median_s: f64,
    /// max_k ‖Kv_k − λ_kv_k‖ / max|λ|.
    pub max_relative_residual: f64,
    /// Largest eigenvalue.
    pub lam_max: f64,
    /// Sum of the eigenvalues (the trace).
    pub sum: f64,
    /// Threads of the rayon pool.
    pub threads: usize,
}

/// Times faer's parallel self-adjoint eigendecomposition (values and vectors) of the erf NNGP
/// kernel matrix of n Gaussian points in d = 40, K_ij = (2/π)arcsin(2G_ij/√((1+2G_ii)(1+2G_jj))),
/// G = XXᵀ/d — the matrix of `shared/bench/eigh.py` (other random numbers, same law).
pub fn eigh_benchmark(n: usize, reps: usize) -> Result<EighBench> {
    if !(2..=20_000).contains(&n) || !(1..=50).contains(&reps) {
        return Err(Error::invalid(format!(
            "n = {n} / reps = {reps} are not allowed; use n in 2–20000 and 1–50 repetitions"
        )));
    }
    let pts = super::nngp::Points::gaussian(n, 40, 5)?;
    let k = super::nngp::nngp_kernel(crate::activation::NngpActivation::Erf, &pts, 1.0)?;
    let mat = Mat::from_fn(n, n, |i, j| k[i * n + j]);
    drop(k);
    let par = default_par();
    let mut times = Vec::with_capacity(reps);
    let mut last = None;
    for _ in 0..reps {
        let t0 = std::time::Instant::now();
        last = Some(sym_eigen(mat.as_ref(), par)?);
        times.push(t0.elapsed().as_secs_f64());
    }
    let eig = last.ok_or_else(|| Error::runtime("no repetition ran"))?;
    let max_relative_residual = max_eigen_residual(mat.as_ref(), &eig, par);
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(EighBench {
        n,
        median_s: sorted[sorted.len() / 2],
        times_s: times,
        max_relative_residual,
        lam_max: eig.values.last().copied().unwrap_or(0.0),
        sum: eig.values.iter().sum(),
        threads: rayon::current_num_threads(),
    })
}
