//! The largest positive eigenvalue of symmetric operators by power iteration — the λ_max
//! probe of step-size adaptation (spec 02, "Stiffness is the enemy"), one copy for every
//! engine.

/// Per chain, the largest positive eigenvalue of a symmetric operator given as products
/// `hv(vs)` (one vector per chain in, one product per chain out, so that an engine can
/// evaluate its chains together), by `iters` power iterations from `start` (0 where none is
/// found or the estimate is not finite).
///
/// Power iteration converges to the eigenvalue of largest magnitude (Golub & Van Loan,
/// *Matrix Computations*, 4th ed., sec. 8.2.1); where that is negative (a non-convex energy,
/// e.g. the collapsed one away from a minimum) a second round on H − λI from the same start
/// finds the largest positive eigenvalue, the one that limits a Langevin step. The second
/// round runs every chain through `hv` again but keeps the first round's value where no
/// shift was needed. A chain's estimate depends only on its own products.
pub fn largest_positive_eigenvalues(
    mut hv: impl FnMut(&[Vec<f64>]) -> Vec<Vec<f64>>,
    start: &[Vec<f64>],
    iters: usize,
) -> Vec<f64> {
    let mut power = |shift: &[f64]| -> Vec<f64> {
        let mut vs = start.to_vec();
        let mut lambda = vec![0.0; vs.len()];
        for _ in 0..iters {
            for v in &mut vs {
                let norm = v.iter().map(|a| a * a).sum::<f64>().sqrt().max(1e-300);
                v.iter_mut().for_each(|a| *a /= norm);
            }
            let mut ws = hv(&vs);
            for (c, (w, v)) in ws.iter_mut().zip(&vs).enumerate() {
                if shift[c] != 0.0 {
                    for (wi, vi) in w.iter_mut().zip(v) {
                        *wi -= shift[c] * vi;
                    }
                }
                lambda[c] = v.iter().zip(w.iter()).map(|(a, b)| a * b).sum::<f64>() + shift[c];
            }
            vs = ws;
        }
        lambda
    };
    let mut lambda = power(&vec![0.0; start.len()]);
    let shift: Vec<f64> = lambda
        .iter()
        .map(|&l| if l.is_finite() && l < 0.0 { l } else { 0.0 })
        .collect();
    if shift.iter().any(|&s| s != 0.0) {
        let shifted = power(&shift);
        for ((l, s), &sh) in lambda.iter_mut().zip(shifted).zip(&shift) {
            if sh != 0.0 {
                *l = s;
            }
        }
    }
    lambda
        .into_iter()
        .map(|l| if l.is_finite() { l.max(0.0) } else { 0.0 })
        .collect()
}

#[cfg(test)]
mod tests {
    /// Q·diag(eigenvalues)·Qᵀ with Q a fixed rotation mixing all three axes.
    fn symmetric_with_eigenvalues(eigenvalues: [f64; 3]) -> [[f64; 3]; 3] {
        let (c1, s1) = (0.3f64.cos(), 0.3f64.sin());
        let (c2, s2) = (1.1f64.cos(), 1.1f64.sin());
        let rx = [[1.0, 0.0, 0.0], [0.0, c1, -s1], [0.0, s1, c1]];
        let rz = [[c2, -s2, 0.0], [s2, c2, 0.0], [0.0, 0.0, 1.0]];
        let mut q = [[0.0; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                q[i][j] = (0..3).map(|k| rz[i][k] * rx[k][j]).sum();
            }
        }
        let mut h = [[0.0; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                h[i][j] = (0..3).map(|k| q[i][k] * eigenvalues[k] * q[j][k]).sum();
            }
        }
        h
    }

    /// Three chains in one batch, each a symmetric 3 × 3 matrix with known eigenvalues: the
    /// largest positive one, also under a dominant negative one, and 0 when all are negative.
    #[test]
    fn largest_positive_eigenvalue_survives_a_dominant_negative_one() {
        let cases = [
            ([-10.0, 3.0, 1.0], 3.0),
            ([5.0, 2.0, -1.0], 5.0),
            ([-4.0, -2.0, -1.0], 0.0),
        ];
        let hs: Vec<_> = cases
            .iter()
            .map(|(e, _)| symmetric_with_eigenvalues(*e))
            .collect();
        let hv = |vs: &[Vec<f64>]| -> Vec<Vec<f64>> {
            vs.iter()
                .zip(&hs)
                .map(|(v, h)| {
                    (0..3)
                        .map(|i| (0..3).map(|j| h[i][j] * v[j]).sum())
                        .collect()
                })
                .collect()
        };
        let start = vec![vec![1.0, -0.7, 1.0]; cases.len()];
        let lambda = super::largest_positive_eigenvalues(hv, &start, 300);
        for ((eigenvalues, expected), got) in cases.iter().zip(lambda) {
            assert!(
                (got - expected).abs() < 1e-9,
                "eigenvalues {eigenvalues:?}: got {got}, expected {expected}"
            );
        }
    }
}
