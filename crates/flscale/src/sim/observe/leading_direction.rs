//! The leading direction of the first-layer weights' second moment E[w wᵀ] and its overlap
//! with the teacher (spec 02 "Observables", `leading_direction_overlap`; paper §3: a
//! specialised layer has a leading eigenvector along w*).
//!
//! One d × d sum is kept for the whole ensemble, not one per chain (a per-chain
//! matrix would be 12.8 GB at d = 4000 with 100 chains). Rows are buffered and added by a
//! GEMM, Σ += BᵀB, in chain order and on one thread, so the sum does not depend on the thread
//! count. Unlike the other observables, which are combined at the end over the chains that
//! survived, a chain contributes here until the step at which it diverged (its earlier,
//! finite samples stay in the pooled sum); a run with diverged chains is flagged anyway
//! (`diverged_chains`, `suggested_step`).
//!
//! The leading eigenvector is found by Lanczos iteration with full reorthogonalisation from a
//! fixed start (Golub & Van Loan, *Matrix Computations*, 4th ed., §10.1), which needs tens of
//! d² matrix–vector products where power iteration needs up to thousands on a flat spectrum.

use faer::{Accum, Mat, Par};

use crate::sim::num::gemm::matmul;
use crate::sim::num::real::Real;

/// Largest filter length for which the pooled d × d sum is kept: 16384² f64 = 2.1 GB. Above
/// it the leading direction is not computed (`leading_direction_overlap` is absent) and the
/// run needs memory proportional to its parameters only.
pub const MAX_LEADING_DIRECTION_DIM: usize = 16_384;

/// Rows buffered before they are added to the sum (a GEMM of this depth is efficient, and the
/// buffer stays at 1024·d·8 bytes).
const FLUSH_ROWS: usize = 1024;

/// Largest Krylov dimension of the Lanczos iteration.
const MAX_LANCZOS_STEPS: usize = 300;

/// Σ over sampling times, chains and first-layer rows of w wᵀ (module doc).
#[derive(Debug, Clone)]
pub struct PooledSecondMoment {
    dim: usize,
    sum: Option<Mat<f64>>,
    buffer: Vec<f64>,
    rows_added: usize,
}

impl PooledSecondMoment {
    /// An empty sum for filters of length `dim`; disabled (it records nothing) when `dim` is 0
    /// or above [`MAX_LEADING_DIRECTION_DIM`].
    pub fn new(dim: usize) -> Self {
        let enabled = Self::enabled_for(dim);
        PooledSecondMoment {
            dim,
            sum: enabled.then(|| Mat::zeros(dim, dim)),
            buffer: Vec::new(),
            rows_added: 0,
        }
    }

    /// Whether a run with filters of length `dim` keeps the pooled sum (its memory,
    /// `dim`²·8 bytes, enters [`crate::sim::memory::sample`] only then).
    pub fn enabled_for(dim: usize) -> bool {
        dim > 0 && dim <= MAX_LEADING_DIRECTION_DIM
    }

    /// Adds the rows of one chain at one sampling time (`rows.len()` a multiple of the
    /// filter length).
    pub fn add_rows<T: Real>(&mut self, rows: &[T]) {
        if self.sum.is_none() {
            return;
        }
        self.buffer.extend(rows.iter().map(|v| v.f64()));
        if self.buffer.len() >= FLUSH_ROWS * self.dim {
            self.flush();
        }
    }

    /// Σ += BᵀB for the buffered rows B.
    fn flush(&mut self) {
        let (Some(sum), d) = (self.sum.as_mut(), self.dim) else {
            return;
        };
        let n = self.buffer.len() / d;
        if n == 0 {
            return;
        }
        let rows = faer::MatRef::from_row_major_slice(&self.buffer[..n * d], n, d);
        matmul(
            sum.as_mut(),
            Accum::Add,
            rows.transpose(),
            rows,
            1.0,
            Par::Seq,
        );
        self.rows_added += n;
        self.buffer.clear();
    }

    /// |v₁·teacher| for the unit leading eigenvector v₁ of the pooled sum; None when disabled,
    /// empty, or not finite.
    pub fn leading_direction_overlap(mut self, teacher: &[f64]) -> Option<f64> {
        self.flush();
        let sum = self.sum.take()?;
        if self.rows_added == 0 || teacher.len() != self.dim {
            return None;
        }
        let v = leading_eigenvector(&sum)?;
        let overlap = v.iter().zip(teacher).map(|(a, b)| a * b).sum::<f64>().abs();
        overlap.is_finite().then_some(overlap)
    }
}

/// y = M x for a symmetric M, in row order on one thread.
fn symmetric_product(m: &Mat<f64>, x: &[f64], y: &mut [f64]) {
    for (i, yi) in y.iter_mut().enumerate() {
        *yi = m.row(i).iter().zip(x).map(|(a, b)| a * b).sum();
    }
}

/// Unit leading eigenvector of a symmetric positive semi-definite matrix by Lanczos iteration
/// with full reorthogonalisation (Golub & Van Loan §10.1) from the fixed start
/// (1 + 0.01 i)_i, stopped when the Ritz residual β_k |s_k| of the top Ritz pair is below
/// 1e-12 of its value (checked every 10 steps), at an invariant subspace, or after
/// [`MAX_LANCZOS_STEPS`] steps.
pub fn leading_eigenvector(m: &Mat<f64>) -> Option<Vec<f64>> {
    let d = m.nrows();
    let mut q: Vec<f64> = (0..d).map(|i| 1.0 + 0.01 * i as f64).collect();
    let norm = q.iter().map(|x| x * x).sum::<f64>().sqrt();
    q.iter_mut().for_each(|x| *x /= norm);
    let mut basis: Vec<Vec<f64>> = vec![q];
    let (mut alpha, mut beta) = (Vec::<f64>::new(), Vec::<f64>::new());
    let mut w = vec![0.0; d];
    let steps = d.min(MAX_LANCZOS_STEPS);
    loop {
        let k = basis.len() - 1;
        symmetric_product(m, &basis[k], &mut w);
        let a: f64 = w.iter().zip(&basis[k]).map(|(x, y)| x * y).sum();
        alpha.push(a);
        // Full reorthogonalisation, twice ("twice is enough", Parlett), against every
        // basis vector.
        for _ in 0..2 {
            for b in &basis {
                let c: f64 = w.iter().zip(b).map(|(x, y)| x * y).sum();
                w.iter_mut().zip(b).for_each(|(x, y)| *x -= c * y);
            }
        }
        let b_next = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        if !b_next.is_finite() || !a.is_finite() {
            return None;
        }
        // The Ritz pair (an O(k³) solve) is looked at every 10 steps and at the end.
        let scale = alpha.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let last = basis.len() == steps || b_next <= 1e-13 * scale;
        if last || basis.len() % 10 == 0 {
            let (theta, s) = top_ritz_pair(&alpha, &beta)?;
            let converged = b_next * s[k].abs() <= 1e-12 * theta.abs().max(f64::MIN_POSITIVE);
            if !(converged || last) {
                beta.push(b_next);
                basis.push(w.iter().map(|x| x / b_next).collect());
                continue;
            }
            let mut v = vec![0.0; d];
            for (coef, b) in s.iter().zip(&basis) {
                v.iter_mut().zip(b).for_each(|(x, y)| *x += coef * y);
            }
            let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            return (n > 0.0 && n.is_finite()).then(|| v.iter().map(|x| x / n).collect());
        }
        beta.push(b_next);
        basis.push(w.iter().map(|x| x / b_next).collect());
    }
}

/// The largest eigenvalue of the Lanczos tridiagonal matrix T (diagonal `alpha`, off-diagonal
/// `beta`) and its unit eigenvector.
///
/// θ by bisection on Sturm counts (the number of negative pivots of the LDLᵀ factorisation of
/// T − xI is the number of eigenvalues below x; Golub & Van Loan §8.4.1) inside the
/// Gershgorin interval, to the last bit; the vector by two steps of inverse iteration with the
/// shift σ = θ + δ, δ = 10⁻¹⁰·‖T‖, where σI − T is positive definite, so its LDLᵀ needs no
/// pivoting (G&VL §8.2.2). Done here rather than with a dense eigensolver because faer's
/// reserves a machine-dependent packing buffer per thread (see [`crate::sim::num::gemm`]).
fn top_ritz_pair(alpha: &[f64], beta: &[f64]) -> Option<(f64, Vec<f64>)> {
    let k = alpha.len();
    let off = |i: usize| if i < beta.len() { beta[i].abs() } else { 0.0 };
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for i in 0..k {
        let radius = off(i) + if i > 0 { off(i - 1) } else { 0.0 };
        lo = lo.min(alpha[i] - radius);
        hi = hi.max(alpha[i] + radius);
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return None;
    }
    let below = |x: f64| -> usize {
        let mut count = 0;
        let mut pivot = 1.0;
        for i in 0..k {
            let coupling = if i > 0 {
                beta[i - 1] * beta[i - 1]
            } else {
                0.0
            };
            pivot = alpha[i] - x - coupling / pivot;
            if pivot == 0.0 {
                pivot = -f64::MIN_POSITIVE;
            }
            if pivot < 0.0 {
                count += 1;
            }
        }
        count
    };
    // Invariant: fewer than k eigenvalues lie below hi, all k below hi's successor.
    hi += f64::EPSILON * hi.abs().max(1.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if below(mid) == k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let theta = hi;
    let scale = alpha
        .iter()
        .chain(beta)
        .fold(0.0f64, |m, x| m.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    let sigma = theta + 1e-10 * scale;
    let mut v = vec![1.0; k];
    for _ in 0..3 {
        solve_shifted_tridiagonal(alpha, beta, sigma, &mut v)?;
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if !(norm > 0.0 && norm.is_finite()) {
            return None;
        }
        v.iter_mut().for_each(|x| *x /= norm);
    }
    Some((theta, v))
}

/// Solves (σI − T)x = b in place for the symmetric tridiagonal T (diagonal `alpha`,
/// off-diagonal `beta`) and σ above its spectrum (a positive definite system: LDLᵀ without
/// pivoting, the Thomas algorithm). None when a pivot is not positive.
fn solve_shifted_tridiagonal(alpha: &[f64], beta: &[f64], sigma: f64, b: &mut [f64]) -> Option<()> {
    let k = alpha.len();
    // d_i = (σ − α_i) − β_{i−1}²/d_{i−1}; forward: y_i = b_i + β_{i−1} y_{i−1}/d_{i−1}.
    let mut d = vec![0.0; k];
    for i in 0..k {
        let mut di = sigma - alpha[i];
        if i > 0 {
            di -= beta[i - 1] * beta[i - 1] / d[i - 1];
            b[i] += beta[i - 1] * b[i - 1] / d[i - 1];
        }
        if !(di > 0.0) {
            return None;
        }
        d[i] = di;
    }
    // Backward: x_i = (y_i + β_i x_{i+1})/d_i.
    for i in (0..k).rev() {
        let next = if i + 1 < k { beta[i] * b[i + 1] } else { 0.0 };
        b[i] = (b[i] + next) / d[i];
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::sym_eigen;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    #[test]
    fn lanczos_finds_the_top_direction_of_a_spiked_matrix() {
        // M = I + 3 u uᵀ with u = (0, 0.6, 0.8).
        let u = [0.0, 0.6, 0.8];
        let m = Mat::<f64>::from_fn(3, 3, |i, j| (i == j) as u8 as f64 + 3.0 * u[i] * u[j]);
        let v = leading_eigenvector(&m).unwrap();
        let overlap: f64 = v.iter().zip(&u).map(|(a, b)| a * b).sum();
        assert!((overlap.abs() - 1.0).abs() < 1e-9, "{v:?}");
    }

    #[test]
    fn top_ritz_pair_matches_a_dense_eigensolver_on_random_tridiagonals() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        for k in [1usize, 2, 5, 40, 300] {
            let alpha: Vec<f64> = (0..k).map(|_| StandardNormal.sample(&mut rng)).collect();
            let beta: Vec<f64> = (1..k).map(|_| StandardNormal.sample(&mut rng)).collect();
            let t = Mat::<f64>::from_fn(k, k, |i, j| match i.abs_diff(j) {
                0 => alpha[i],
                1 => beta[i.min(j)],
                _ => 0.0,
            });
            let dense = sym_eigen(t.as_ref(), Par::Seq).unwrap();
            let (theta, v) = top_ritz_pair(&alpha, &beta).unwrap();
            assert!(
                (theta - dense.values[k - 1]).abs() < 1e-12 * theta.abs().max(1.0),
                "k = {k}"
            );
            let overlap: f64 = (0..k).map(|i| v[i] * dense.vectors[(i, k - 1)]).sum();
            assert!((overlap.abs() - 1.0).abs() < 1e-9, "k = {k}: {overlap}");
        }
    }

    #[test]
    fn lanczos_agrees_with_a_dense_eigensolver_on_a_random_gram_matrix() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let (n, d) = (40, 120);
        let a = Mat::<f64>::from_fn(n, d, |_, _| StandardNormal.sample(&mut rng));
        let m = Mat::<f64>::from_fn(d, d, |i, j| (0..n).map(|r| a[(r, i)] * a[(r, j)]).sum());
        let dense = sym_eigen(m.as_ref(), Par::Seq).unwrap();
        let top: Vec<f64> = (0..d).map(|i| dense.vectors[(i, d - 1)]).collect();
        let v = leading_eigenvector(&m).unwrap();
        let overlap: f64 = v.iter().zip(&top).map(|(a, b)| a * b).sum();
        assert!((overlap.abs() - 1.0).abs() < 1e-9, "{overlap}");
    }

    #[test]
    fn pooled_sum_equals_the_sum_of_per_row_outer_products() {
        // Rows w = z + 2.5 g e₀ (g, z standard normal): E[w wᵀ] = I + 6.25 e₀e₀ᵀ, leading
        // direction e₀; the pooled sum over 3000 rows is compared with the explicit Σ w wᵀ.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let d = 12;
        let mut pooled = PooledSecondMoment::new(d);
        let mut explicit = Mat::<f64>::zeros(d, d);
        for _ in 0..3000 {
            let g: f64 = StandardNormal.sample(&mut rng);
            let row: Vec<f64> = (0..d)
                .map(|i| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    z + if i == 0 { 2.5 * g } else { 0.0 }
                })
                .collect();
            for i in 0..d {
                for j in 0..d {
                    explicit[(i, j)] += row[i] * row[j];
                }
            }
            pooled.add_rows(&row);
        }
        let mut check = pooled.clone();
        check.flush();
        let sum = check.sum.unwrap();
        for i in 0..d {
            for j in 0..d {
                assert!((sum[(i, j)] - explicit[(i, j)]).abs() < 1e-9 * explicit[(i, i)].abs());
            }
        }
        let e0: Vec<f64> = (0..d).map(|i| (i == 0) as u8 as f64).collect();
        let overlap = pooled.leading_direction_overlap(&e0).unwrap();
        assert!(overlap > 0.99, "{overlap}");
    }

    #[test]
    fn disabled_sum_reports_nothing() {
        let mut none = PooledSecondMoment::new(0);
        none.add_rows(&[1.0f64]);
        assert_eq!(none.leading_direction_overlap(&[]), None);
        assert!(!PooledSecondMoment::enabled_for(
            MAX_LEADING_DIRECTION_DIM + 1
        ));
        let empty = PooledSecondMoment::new(3);
        assert_eq!(empty.leading_direction_overlap(&[1.0, 0.0, 0.0]), None);
    }
}
