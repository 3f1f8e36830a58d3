//! The exact linear program behind every minimisation (spec 01 §1).
//!
//! With every scale a power of d and free parameters p_j = d^{x_j}, each monomial of an
//! energy is d^{a_i·x + b_i}, and the energy scales as d^{max_i (a_i·x + b_i)}. Minimising
//! it subject to monomial constraints (linear inequalities c·x ≤ e in log-space) is the LP
//!
//! ```text
//! minimise t  subject to  a_i·x − t ≤ −b_i (each term),  c_j·x ≤ e_j (each constraint).
//! ```
//!
//! Sizes are tiny (a few variables, a dozen rows), so it is solved exactly in rationals by
//! vertex enumeration inside a large box |x_j| ≤ B: every (k+1)-subset of rows is solved as
//! equalities, feasible vertices are kept, and the optimal face is the convex hull of the
//! optimal vertices. An optimum that moves with B means the energy is unbounded below.

use num_traits::{One, Zero};

use super::monomial::Q;

/// One inequality g·(x, t) ≤ h.
#[derive(Debug, Clone)]
pub struct Row {
    /// Coefficients on x (length k) followed by the coefficient on t.
    pub g: Vec<Q>,
    /// Right-hand side.
    pub h: Q,
}

/// The exact optimum of the LP.
#[derive(Debug, Clone)]
pub struct LpSolution {
    /// The optimal t.
    pub value: Q,
    /// The optimal vertices (x, t), deduplicated.
    pub vertices: Vec<Vec<Q>>,
}

/// Solves A z = b exactly by Gaussian elimination; `None` when A is singular.
pub fn solve_square(a: &[Vec<Q>], b: &[Q]) -> Option<Vec<Q>> {
    let n = b.len();
    let mut m: Vec<Vec<Q>> = a
        .iter()
        .zip(b)
        .map(|(row, rhs)| {
            let mut r = row.clone();
            r.push(*rhs);
            r
        })
        .collect();
    for col in 0..n {
        let piv = (col..n).find(|&r| !m[r][col].is_zero())?;
        m.swap(col, piv);
        let p = m[col][col];
        for v in m[col].iter_mut() {
            *v /= p;
        }
        for r in 0..n {
            if r != col && !m[r][col].is_zero() {
                let f = m[r][col];
                for c in col..=n {
                    let sub = f * m[col][c];
                    m[r][c] -= sub;
                }
            }
        }
    }
    Some(m.into_iter().map(|r| r[n]).collect())
}

fn combinations(n: usize, k: usize, mut f: impl FnMut(&[usize])) {
    if k > n {
        return;
    }
    let mut idx: Vec<usize> = (0..k).collect();
    loop {
        f(&idx);
        let mut i = k;
        loop {
            if i == 0 {
                return;
            }
            i -= 1;
            if idx[i] != i + n - k {
                break;
            }
        }
        idx[i] += 1;
        for j in i + 1..k {
            idx[j] = idx[j - 1] + 1;
        }
    }
}

/// Minimises t over the polyhedron `rows` in k + 1 variables (x₁…x_k, t), with the box
/// |x_j| ≤ `bound` added. Returns `None` when the polyhedron is empty.
pub fn minimise_t(rows: &[Row], k: usize, bound: Q) -> Option<LpSolution> {
    let mut all = rows.to_vec();
    for j in 0..k {
        for sign in [Q::one(), -Q::one()] {
            let mut g = vec![Q::zero(); k + 1];
            g[j] = sign;
            all.push(Row { g, h: bound });
        }
    }
    let n = k + 1;
    let mut best: Option<Q> = None;
    let mut verts: Vec<Vec<Q>> = Vec::new();
    combinations(all.len(), n, |sel| {
        let a: Vec<Vec<Q>> = sel.iter().map(|&i| all[i].g.clone()).collect();
        let b: Vec<Q> = sel.iter().map(|&i| all[i].h).collect();
        let Some(z) = solve_square(&a, &b) else {
            return;
        };
        let feasible = all.iter().all(|r| {
            r.g.iter()
                .zip(&z)
                .map(|(g, v)| g * v)
                .fold(Q::zero(), |s, x| s + x)
                <= r.h
        });
        if !feasible {
            return;
        }
        let t = z[k];
        match best {
            Some(b) if t > b => {}
            Some(b) if t == b => {
                if !verts.contains(&z) {
                    verts.push(z);
                }
            }
            _ => {
                best = Some(t);
                verts = vec![z];
            }
        }
    });
    best.map(|value| LpSolution {
        value,
        vertices: verts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(n: i64) -> Q {
        Q::from_integer(n)
    }

    #[test]
    fn balances_two_terms() {
        // t ≥ x + 1, t ≥ −x + 2 → x = 1/2, t = 3/2.
        let rows = vec![
            Row {
                g: vec![q(1), q(-1)],
                h: q(-1),
            },
            Row {
                g: vec![q(-1), q(-1)],
                h: q(-2),
            },
        ];
        let s = minimise_t(&rows, 1, q(1000)).unwrap();
        assert_eq!(s.value, Q::new(3, 2));
        assert_eq!(s.vertices, vec![vec![Q::new(1, 2), Q::new(3, 2)]]);
    }

    #[test]
    fn infeasible_is_none() {
        let rows = vec![
            Row {
                g: vec![q(1), q(0)],
                h: q(-1),
            },
            Row {
                g: vec![q(-1), q(0)],
                h: q(-1),
            },
            Row {
                g: vec![q(0), q(-1)],
                h: q(0),
            },
        ];
        assert!(minimise_t(&rows, 1, q(1000)).is_none());
    }

    proptest! {
        // Weak duality check by brute force: the LP optimum of min_x max_i(a_i x + b_i) in one
        // variable is never above a fine grid search, and is attained at the reported vertex.
        #[test]
        fn one_dimensional_lp_matches_grid(terms in proptest::collection::vec((-3i64..=3, -5i64..=5), 1..5)) {
            let rows: Vec<Row> = terms.iter().map(|&(a, b)| Row { g: vec![q(a), q(-1)], h: q(-b) }).collect();
            let s = minimise_t(&rows, 1, q(100)).unwrap();
            let f = |x: f64| terms.iter().map(|&(a, b)| a as f64 * x + b as f64).fold(f64::NEG_INFINITY, f64::max);
            let grid_min = (-100_000..=100_000).map(|i| f(i as f64 / 1000.0)).fold(f64::INFINITY, f64::min);
            let v = *s.value.numer() as f64 / *s.value.denom() as f64;
            prop_assert!(v <= grid_min + 1e-9);
            for z in &s.vertices {
                let x = *z[0].numer() as f64 / *z[0].denom() as f64;
                prop_assert!((f(x) - v).abs() < 1e-9);
            }
        }
    }
}
