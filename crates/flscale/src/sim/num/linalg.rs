//! Small dense linear algebra on row-major f64 matrices: Cholesky factor, triangular solves
//! and the inverse from the factor, one matrix at a time and [`LANES`] matrices at once (one
//! per vector lane). Used by the collapsed posterior (the K × K readout precision of
//! [`crate::sim::model::collapsed`]) and by the block preconditioner of
//! [`crate::sim::kernel::metric`].

/// Cholesky A = LLᵀ of a symmetric n × n matrix (row-major; the lower triangle of `l` is
/// written, the upper zeroed). False when A is not numerically positive definite.
///
/// Right-looking (outer-product) form on Lᵀ (Golub & Van Loan, *Matrix Computations*, 4th ed.,
/// Alg. 4.2.2): after row j of Lᵀ is scaled, the trailing rows are updated by contiguous
/// axpys, which vectorise; the dot-product form's inner loops are sequential reductions,
/// latency-bound at the small n of a readout (N ≲ 100). Lᵀ is then transposed in place.
#[inline(always)]
pub fn cholesky(a: &[f64], l: &mut [f64], n: usize) -> bool {
    let l = &mut l[..n * n];
    l.copy_from_slice(&a[..n * n]);
    for j in 0..n {
        let (top, rest) = l.split_at_mut((j + 1) * n);
        let row_j = &mut top[j * n..];
        let pivot = row_j[j];
        if !(pivot > 0.0 && pivot.is_finite()) {
            return false;
        }
        let pivot = pivot.sqrt();
        row_j[j] = pivot;
        for v in &mut row_j[j + 1..] {
            *v /= pivot;
        }
        let row_j = &top[j * n..];
        for (i, row_i) in (j + 1..n).zip(rest.chunks_exact_mut(n)) {
            let f = row_j[i];
            for (v, u) in row_i[i..].iter_mut().zip(&row_j[i..]) {
                *v -= f * u;
            }
        }
    }
    for i in 0..n {
        for j in 0..i {
            l[i * n + j] = l[j * n + i];
            l[j * n + i] = 0.0;
        }
    }
    true
}

/// Solves LLᵀ x = b in place (forward then backward substitution).
#[inline(always)]
pub fn cholesky_solve(l: &[f64], b: &mut [f64], n: usize) {
    solve_lower(l, b, n);
    solve_upper_transposed(l, b, n);
}

/// A⁻¹ = L⁻ᵀL⁻¹ for A = LLᵀ (row-major n × n into `inverse`). V = L⁻¹ row by row from
/// LV = I, row i = (e_i − Σ_{k<i} L_ik·(row k of V))/L_ii, then A⁻¹ = VᵀV as Σ_k (row k of
/// V)ᵀ(row k of V): both as sums of contiguous rows (vectorised axpys, module doc of
/// [`cholesky`]). A⁻¹ comes out exactly symmetric (each entry sums the same products in the
/// same order as its mirror).
#[inline(always)]
pub fn inverse_from_cholesky(l: &[f64], inverse: &mut [f64], n: usize) {
    let mut v = vec![0.0; n * n];
    for i in 0..n {
        let (done, rest) = v.split_at_mut(i * n);
        let row_i = &mut rest[..n];
        row_i[i] = 1.0;
        for k in 0..i {
            let f = l[i * n + k];
            for (r, vk) in row_i[..=k].iter_mut().zip(&done[k * n..k * n + k + 1]) {
                *r -= f * vk;
            }
        }
        let d = l[i * n + i];
        for r in &mut row_i[..=i] {
            *r /= d;
        }
    }
    let inverse = &mut inverse[..n * n];
    inverse.fill(0.0);
    for k in 0..n {
        let row_k = &v[k * n..k * n + k + 1];
        for (i, &vki) in row_k.iter().enumerate() {
            for (dst, vkj) in inverse[i * n..i * n + k + 1].iter_mut().zip(row_k) {
                *dst += vki * vkj;
            }
        }
    }
}

/// Solves Lᵀ x = z in place (backward substitution): x = L⁻ᵀz has covariance A⁻¹ when
/// z ~ 𝒩(0, I), which is how readouts are drawn. Column-oriented: once x_k is known it is
/// removed from the earlier entries with row k of L (contiguous).
#[inline(always)]
pub fn solve_upper_transposed(l: &[f64], z: &mut [f64], n: usize) {
    for k in (0..n).rev() {
        z[k] /= l[k * n + k];
        let zk = z[k];
        for (zi, lki) in z[..k].iter_mut().zip(&l[k * n..k * n + k]) {
            *zi -= lki * zk;
        }
    }
}

/// Solves L x = b in place (forward substitution; L lower triangular, row-major).
#[inline(always)]
pub fn solve_lower(l: &[f64], b: &mut [f64], n: usize) {
    for i in 0..n {
        let mut s = b[i];
        for k in 0..i {
            s -= l[i * n + k] * b[k];
        }
        b[i] = s / l[i * n + i];
    }
}

/// Chains whose small dense linear algebra (the N × N Cholesky, solves and inverse of
/// [`crate::sim::model::collapsed::data_gradient`]) is done together, one chain per lane of a `[f64; LANES]`: the same
/// operations in the same order as [`cholesky`], [`cholesky_solve`] and
/// [`inverse_from_cholesky`] per lane (so bit-identical results), but every operation is one
/// vector instruction over the chains instead of a short row of one chain.
pub const LANES: usize = 4;

/// [`cholesky`] of `LANES` matrices stored entry by entry (`l[i·n + j][lane]`), in place
/// (A on entry, L with zeroed upper triangle on return). A lane whose matrix is not
/// numerically positive definite gets `false` (its values are then meaningless).
#[inline(always)]
pub fn cholesky_lanes(l: &mut [[f64; LANES]], n: usize) -> [bool; LANES] {
    let mut ok = [true; LANES];
    for j in 0..n {
        let (top, rest) = l.split_at_mut((j + 1) * n);
        let row_j = &mut top[j * n..];
        let mut pivot = row_j[j];
        for (lane, v) in pivot.iter_mut().enumerate() {
            if !(*v > 0.0 && v.is_finite()) {
                ok[lane] = false;
                *v = 1.0;
            }
            *v = v.sqrt();
        }
        row_j[j] = pivot;
        for v in &mut row_j[j + 1..] {
            for lane in 0..LANES {
                v[lane] /= pivot[lane];
            }
        }
        let row_j = &top[j * n..];
        for (i, row_i) in (j + 1..n).zip(rest.chunks_exact_mut(n)) {
            let f = row_j[i];
            for (v, u) in row_i[i..].iter_mut().zip(&row_j[i..]) {
                for lane in 0..LANES {
                    v[lane] -= f[lane] * u[lane];
                }
            }
        }
    }
    for i in 0..n {
        for j in 0..i {
            l[i * n + j] = l[j * n + i];
            l[j * n + i] = [0.0; LANES];
        }
    }
    ok
}

/// [`cholesky_solve`] per lane: LLᵀx = b for `LANES` factors and right-hand sides.
#[inline(always)]
pub fn cholesky_solve_lanes(l: &[[f64; LANES]], b: &mut [[f64; LANES]], n: usize) {
    for i in 0..n {
        let mut s = b[i];
        for k in 0..i {
            for lane in 0..LANES {
                s[lane] -= l[i * n + k][lane] * b[k][lane];
            }
        }
        for lane in 0..LANES {
            b[i][lane] = s[lane] / l[i * n + i][lane];
        }
    }
    for k in (0..n).rev() {
        for lane in 0..LANES {
            b[k][lane] /= l[k * n + k][lane];
        }
        let bk = b[k];
        for (bi, lki) in b[..k].iter_mut().zip(&l[k * n..k * n + k]) {
            for lane in 0..LANES {
                bi[lane] -= lki[lane] * bk[lane];
            }
        }
    }
}

/// [`inverse_from_cholesky`] per lane; `v` is work space of n² entries.
#[inline(always)]
pub fn inverse_from_cholesky_lanes(
    l: &[[f64; LANES]],
    inverse: &mut [[f64; LANES]],
    v: &mut [[f64; LANES]],
    n: usize,
) {
    let v = &mut v[..n * n];
    v.fill([0.0; LANES]);
    for i in 0..n {
        let (done, rest) = v.split_at_mut(i * n);
        let row_i = &mut rest[..n];
        row_i[i] = [1.0; LANES];
        for k in 0..i {
            let f = l[i * n + k];
            for (r, vk) in row_i[..=k].iter_mut().zip(&done[k * n..k * n + k + 1]) {
                for lane in 0..LANES {
                    r[lane] -= f[lane] * vk[lane];
                }
            }
        }
        let d = l[i * n + i];
        for r in &mut row_i[..=i] {
            for lane in 0..LANES {
                r[lane] /= d[lane];
            }
        }
    }
    let inverse = &mut inverse[..n * n];
    inverse.fill([0.0; LANES]);
    for k in 0..n {
        let row_k = &v[k * n..k * n + k + 1];
        for (i, vki) in row_k.iter().enumerate() {
            for (dst, vkj) in inverse[i * n..i * n + k + 1].iter_mut().zip(row_k) {
                for lane in 0..LANES {
                    dst[lane] += vki[lane] * vkj[lane];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The small dense linear algebra against its definitions on random SPD matrices
    /// A = BBᵀ + 0.1·I (n = 1…24, condition numbers up to ~10³): LLᵀ = A with L lower
    /// triangular, A·A⁻¹ = I, the two triangular solves, and the refusal of a matrix that is
    /// not positive definite (or not finite).
    #[test]
    fn cholesky_inverse_and_solves_match_their_definitions() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for n in [1, 2, 3, 7, 16, 20, 24] {
            let b: Vec<f64> = (0..n * n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mut a = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    a[i * n + j] = (0..n).map(|k| b[i * n + k] * b[j * n + k]).sum::<f64>()
                        + if i == j { 0.1 } else { 0.0 };
                }
            }
            let mut l = vec![f64::NAN; n * n];
            assert!(cholesky(&a, &mut l, n));
            for i in 0..n {
                for j in 0..n {
                    let llt: f64 = (0..n).map(|k| l[i * n + k] * l[j * n + k]).sum();
                    assert!(
                        (llt - a[i * n + j]).abs() < 1e-12 * n as f64,
                        "n {n} ({i}, {j})"
                    );
                    if j > i {
                        assert_eq!(l[i * n + j], 0.0);
                    }
                }
            }
            let mut inv = vec![f64::NAN; n * n];
            inverse_from_cholesky(&l, &mut inv, n);
            for i in 0..n {
                for j in 0..n {
                    let ai: f64 = (0..n).map(|k| a[i * n + k] * inv[k * n + j]).sum();
                    let expected = if i == j { 1.0 } else { 0.0 };
                    assert!(
                        (ai - expected).abs() < 1e-9,
                        "n {n} (A·A⁻¹)[{i}][{j}] = {ai}"
                    );
                    assert_eq!(inv[i * n + j], inv[j * n + i]);
                }
            }
            let rhs: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mut x = rhs.clone();
            cholesky_solve(&l, &mut x, n);
            for i in 0..n {
                let ax: f64 = (0..n).map(|k| a[i * n + k] * x[k]).sum();
                assert!((ax - rhs[i]).abs() < 1e-9, "n {n} (Ax)[{i}]");
            }
            let mut z = rhs.clone();
            solve_upper_transposed(&l, &mut z, n);
            for i in 0..n {
                let ltz: f64 = (0..n).map(|k| l[k * n + i] * z[k]).sum();
                assert!((ltz - rhs[i]).abs() < 1e-9, "n {n} (Lᵀx)[{i}]");
            }
        }
        // Indefinite, and non-finite.
        assert!(!cholesky(&[1.0, 2.0, 2.0, 1.0], &mut [0.0; 4], 2));
        assert!(!cholesky(&[1.0, 0.0, 0.0, f64::NAN], &mut [0.0; 4], 2));
        assert!(!cholesky(
            &[1.0, f64::INFINITY, f64::INFINITY, 4.0],
            &mut [0.0; 4],
            2
        ));
    }
}
