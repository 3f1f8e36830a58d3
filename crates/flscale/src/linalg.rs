//! Dense linear algebra on faer shared by the kernel computations and the tests of the
//! sampler: the symmetric eigendecomposition (faer's self-adjoint EVD: Householder
//! tridiagonalisation, then divide and conquer; Golub & Van Loan, Matrix Computations, ch. 8),
//! its residual, and the two Gram products.

use std::mem::MaybeUninit;

use faer::dyn_stack::MemStack;
use faer::linalg::evd::{self, ComputeEigenvectors};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};

use crate::error::{Error, Result};

/// A symmetric eigendecomposition with eigenvalues in ascending order.
#[derive(Debug, Clone)]
pub struct SymEigen {
    /// Eigenvalues, ascending.
    pub values: Vec<f64>,
    /// Orthonormal eigenvectors as columns, in the order of `values`.
    pub vectors: Mat<f64>,
}

/// Eigendecomposition of the symmetric matrix `a` (its lower triangle is read).
pub fn sym_eigen(a: MatRef<'_, f64>, par: Par) -> Result<SymEigen> {
    let n = a.nrows();
    if n != a.ncols() {
        return Err(Error::runtime(format!(
            "eigendecomposition of a non-square {}×{} matrix",
            n,
            a.ncols()
        )));
    }
    let mut u = Mat::<f64>::zeros(n, n);
    let mut s = faer::diag::Diag::<f64>::zeros(n);
    let req =
        evd::self_adjoint_evd_scratch::<f64>(n, ComputeEigenvectors::Yes, par, Default::default());
    let mut buf = vec![MaybeUninit::<u8>::uninit(); req.unaligned_bytes_required()];
    evd::self_adjoint_evd(
        a,
        s.as_mut(),
        Some(u.as_mut()),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .map_err(|e| Error::runtime(format!("symmetric eigendecomposition failed: {e:?}")))?;
    let values: Vec<f64> = (0..n).map(|i| s[i]).collect();
    if values.iter().any(|v| !v.is_finite()) {
        return Err(Error::runtime(
            "symmetric eigendecomposition returned a non-finite eigenvalue",
        ));
    }
    Ok(SymEigen { values, vectors: u })
}

/// Largest eigen-residual max_k ‖A v_k − λ_k v_k‖ relative to max |λ|.
pub fn max_eigen_residual(a: MatRef<'_, f64>, eig: &SymEigen, par: Par) -> f64 {
    let n = a.nrows();
    let mut av = Mat::<f64>::zeros(n, n);
    matmul(
        av.as_mut(),
        Accum::Replace,
        a,
        eig.vectors.as_ref(),
        1.0,
        par,
    );
    let scale = eig
        .values
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(1e-300);
    (0..n)
        .map(|k| {
            let lam = eig.values[k];
            (0..n)
                .map(|i| {
                    let r = av[(i, k)] - lam * eig.vectors[(i, k)];
                    r * r
                })
                .sum::<f64>()
                .sqrt()
        })
        .fold(0.0, f64::max)
        / scale
}

/// φᵀφ·scale (the N×N Gram matrix of the columns of φ).
pub fn gram(phi: MatRef<'_, f64>, scale: f64, par: Par) -> Mat<f64> {
    let n = phi.ncols();
    let mut g = Mat::<f64>::zeros(n, n);
    matmul(g.as_mut(), Accum::Replace, phi.transpose(), phi, scale, par);
    g
}

/// φφᵀ·scale (the P×P kernel matrix of the rows of φ).
pub fn outer(phi: MatRef<'_, f64>, scale: f64, par: Par) -> Mat<f64> {
    let p = phi.nrows();
    let mut k = Mat::<f64>::zeros(p, p);
    matmul(k.as_mut(), Accum::Replace, phi, phi.transpose(), scale, par);
    k
}
