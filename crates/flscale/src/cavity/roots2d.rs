//! Every root of a smooth map g: ℝ² → ℝ² in a rectangle: sign changes on a grid, then Newton.
//!
//! Used by [`super::fixed_points`] with g(x) = G(x) − x for the adaptive-kernel map G, and kept
//! free of the physics so that it can be tested on maps with known roots.
//!
//! Method (a standard bracketing-then-polishing scheme, e.g. Press et al., *Numerical Recipes*
//! 3rd ed., §9.6–9.7):
//! 1. g on an n × n grid of nodes (evaluated in parallel, collected in node order, so the
//!    result does not depend on the thread count);
//! 2. a cell is a candidate when each component of g takes both signs (or zero) on its four
//!    corners: a simple root lies in a cell where both zero curves g₁ = 0 and g₂ = 0 pass, so
//!    every root farther than a cell from another root is bracketed by at least one candidate;
//! 3. Newton with a forward-difference Jacobian and backtracking on |g|₂ (Levenberg–Marquardt
//!    steps where that fails) from each candidate's centre, to max|g| < tol;
//! 4. roots closer than `same` (max norm) are one root.
//!
//! Each root is returned with its central-difference Jacobian and its index sign det ∂g: by the
//! Poincaré–Hopf/Brouwer degree, the indices of the roots inside a region sum to the degree of
//! g on its boundary, which gives a completeness check (see [`super::fixed_points`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{Error, Result};

/// A closed rectangle [x.0, x.1] × [y.0, y.1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rect {
    /// Range of the first coordinate.
    pub x: (f64, f64),
    /// Range of the second coordinate.
    pub y: (f64, f64),
}

impl Rect {
    /// Whether `p` lies in the rectangle enlarged by `margin` of its size on every side.
    fn contains_with_margin(&self, p: (f64, f64), margin: f64) -> bool {
        let (wx, wy) = (self.x.1 - self.x.0, self.y.1 - self.y.0);
        p.0 >= self.x.0 - margin * wx
            && p.0 <= self.x.1 + margin * wx
            && p.1 >= self.y.0 - margin * wy
            && p.1 <= self.y.1 + margin * wy
    }
}

/// Settings of [`find_roots`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RootSettings {
    /// Grid nodes per axis (≥ 2; (n − 1)² cells).
    pub grid: usize,
    /// A root is accepted when max(|g₁|, |g₂|) < tol.
    pub tol: f64,
    /// Newton iterations per candidate.
    pub max_newton: usize,
    /// Forward-difference step of the Newton Jacobian (absolute); the reported Jacobian uses
    /// central differences with ten times this step.
    pub fd_step: f64,
    /// Roots closer than this (max norm) are merged.
    pub same: f64,
}

/// One root.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Root {
    /// The root (x, y).
    pub x: (f64, f64),
    /// max(|g₁|, |g₂|) there.
    pub residual: f64,
    /// ∂g/∂x by central differences, rows = components of g.
    pub jacobian: [[f64; 2]; 2],
    /// sign det ∂g (+1, −1, or 0 when |det| < 1e-12·‖∂g‖²).
    pub index: i32,
    /// Newton iterations of the first candidate that reached it.
    pub newton_steps: usize,
    /// Number of candidate cells whose Newton run ended here.
    pub cells: usize,
}

/// A candidate whose Newton run did not reach max|g| < tol.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unresolved {
    /// The centre of the candidate cell.
    pub start: (f64, f64),
    /// Where Newton stopped.
    pub at: (f64, f64),
    /// max|g| there.
    pub residual: f64,
    /// Why it stopped.
    pub reason: String,
}

/// Result of [`find_roots`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RootSearch {
    /// The distinct roots, in the order their first candidate cell appears (row-major, x fastest).
    pub roots: Vec<Root>,
    /// Candidate cells (both components change sign).
    pub candidate_cells: usize,
    /// Candidates whose Newton run failed.
    pub unresolved: Vec<Unresolved>,
    /// Evaluations of g, grid and Newton together.
    pub evaluations: usize,
}

fn max_abs(v: (f64, f64)) -> f64 {
    v.0.abs().max(v.1.abs())
}

/// Finds every root of `g` in `rect` that the grid brackets (module docs).
pub fn find_roots<F>(g: &F, rect: Rect, settings: &RootSettings) -> Result<RootSearch>
where
    F: Fn((f64, f64)) -> Result<(f64, f64)> + Sync,
{
    let n = settings.grid;
    if n < 2 {
        return Err(Error::invalid(format!(
            "grid = {n} is not allowed; it must be an integer ≥ 2"
        )));
    }
    let finite = [rect.x.0, rect.x.1, rect.y.0, rect.y.1]
        .iter()
        .all(|v| v.is_finite());
    if !(finite && rect.x.0 < rect.x.1 && rect.y.0 < rect.y.1) {
        return Err(Error::invalid(format!(
            "the ranges {:?} × {:?} are not allowed; each must be finite with lo < hi",
            rect.x, rect.y
        )));
    }
    let evaluations = AtomicUsize::new(0);
    let eval = |p: (f64, f64)| -> Result<(f64, f64)> {
        evaluations.fetch_add(1, Ordering::Relaxed);
        let v = g(p)?;
        if v.0.is_finite() && v.1.is_finite() {
            Ok(v)
        } else {
            Err(Error::runtime(format!(
                "the map is not finite at ({}, {})",
                p.0, p.1
            )))
        }
    };
    let node = |i: usize, j: usize| {
        let fx = i as f64 / (n - 1) as f64;
        let fy = j as f64 / (n - 1) as f64;
        (
            rect.x.0 + fx * (rect.x.1 - rect.x.0),
            rect.y.0 + fy * (rect.y.1 - rect.y.0),
        )
    };
    // values[j * n + i] = g(node(i, j)).
    let values: Vec<(f64, f64)> = (0..n * n)
        .into_par_iter()
        .map(|k| eval(node(k % n, k / n)))
        .collect::<Result<_>>()?;
    let straddles = |vals: [f64; 4]| {
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        lo <= 0.0 && hi >= 0.0
    };
    let mut starts = Vec::new();
    for j in 0..n - 1 {
        for i in 0..n - 1 {
            let corners = [
                values[j * n + i],
                values[j * n + i + 1],
                values[(j + 1) * n + i],
                values[(j + 1) * n + i + 1],
            ];
            if straddles(corners.map(|v| v.0)) && straddles(corners.map(|v| v.1)) {
                let (a, b) = (node(i, j), node(i + 1, j + 1));
                starts.push((0.5 * (a.0 + b.0), 0.5 * (a.1 + b.1)));
            }
        }
    }
    let runs: Vec<std::result::Result<(Root, usize), Unresolved>> = starts
        .par_iter()
        .map(|&s| newton(&eval, s, rect, settings))
        .collect::<Result<_>>()?;
    let mut roots: Vec<Root> = Vec::new();
    let mut unresolved = Vec::new();
    for run in runs {
        match run {
            Ok((root, _)) => {
                if let Some(known) = roots
                    .iter_mut()
                    .find(|r| max_abs((r.x.0 - root.x.0, r.x.1 - root.x.1)) < settings.same)
                {
                    known.cells += 1;
                } else {
                    roots.push(root);
                }
            }
            Err(u) => unresolved.push(u),
        }
    }
    Ok(RootSearch {
        roots,
        candidate_cells: starts.len(),
        unresolved,
        evaluations: evaluations.into_inner(),
    })
}

/// ∂g at `x` by forward differences from the known value `gx`.
fn jacobian_forward<E>(eval: &E, x: (f64, f64), gx: (f64, f64), h: f64) -> Result<[[f64; 2]; 2]>
where
    E: Fn((f64, f64)) -> Result<(f64, f64)>,
{
    let gb = eval((x.0 + h, x.1))?;
    let gc = eval((x.0, x.1 + h))?;
    Ok([
        [(gb.0 - gx.0) / h, (gc.0 - gx.0) / h],
        [(gb.1 - gx.1) / h, (gc.1 - gx.1) / h],
    ])
}

/// ∂g at `x` by central differences.
pub fn jacobian_central<E>(eval: &E, x: (f64, f64), h: f64) -> Result<[[f64; 2]; 2]>
where
    E: Fn((f64, f64)) -> Result<(f64, f64)>,
{
    let (bp, bm) = (eval((x.0 + h, x.1))?, eval((x.0 - h, x.1))?);
    let (cp, cm) = (eval((x.0, x.1 + h))?, eval((x.0, x.1 - h))?);
    let d = 2.0 * h;
    Ok([
        [(bp.0 - bm.0) / d, (cp.0 - cm.0) / d],
        [(bp.1 - bm.1) / d, (cp.1 - cm.1) / d],
    ])
}

/// An accepted step: the new point and g there.
type Accepted = ((f64, f64), (f64, f64));

/// |g|₂².
fn norm2(v: (f64, f64)) -> f64 {
    v.0 * v.0 + v.1 * v.1
}

/// One step that lowers |g|₂: the Newton step with backtracking (20 halvings), else
/// Levenberg–Marquardt steps −(JᵀJ + μI)⁻¹Jᵀg with μ growing tenfold from 1e-4·tr(JᵀJ) (for
/// large μ this is a short gradient step of ½|g|², a descent direction wherever Jᵀg ≠ 0).
/// Where G has a cliff (a bimodal overlap posterior whose weights switch within a narrow band
/// of (b, c), as at D = N = 20, P ≥ 320) the linear model holds only on a tiny scale and the
/// Newton step alone stalls. `None` when neither lowers |g|.
fn descent_step<E>(
    eval: &E,
    x: (f64, f64),
    gx: (f64, f64),
    j: [[f64; 2]; 2],
    rect: Rect,
) -> Result<Option<Accepted>>
where
    E: Fn((f64, f64)) -> Result<(f64, f64)>,
{
    let try_at = |d: (f64, f64)| -> Result<Option<Accepted>> {
        let trial = (x.0 + d.0, x.1 + d.1);
        if !(trial.0.is_finite() && trial.1.is_finite() && rect.contains_with_margin(trial, 0.5)) {
            return Ok(None);
        }
        let gt = eval(trial)?;
        Ok((norm2(gt) < norm2(gx)).then_some((trial, gt)))
    };
    let det = j[0][0] * j[1][1] - j[0][1] * j[1][0];
    if det != 0.0 && det.is_finite() {
        let step = (
            -(j[1][1] * gx.0 - j[0][1] * gx.1) / det,
            -(-j[1][0] * gx.0 + j[0][0] * gx.1) / det,
        );
        let mut t = 1.0;
        for _ in 0..20 {
            if let Some(hit) = try_at((t * step.0, t * step.1))? {
                return Ok(Some(hit));
            }
            t *= 0.5;
        }
    }
    // JᵀJ and Jᵀg.
    let a11 = j[0][0] * j[0][0] + j[1][0] * j[1][0];
    let a12 = j[0][0] * j[0][1] + j[1][0] * j[1][1];
    let a22 = j[0][1] * j[0][1] + j[1][1] * j[1][1];
    let r1 = j[0][0] * gx.0 + j[1][0] * gx.1;
    let r2 = j[0][1] * gx.0 + j[1][1] * gx.1;
    let mut mu = 1e-4 * (a11 + a22);
    for _ in 0..16 {
        let (m11, m22) = (a11 + mu, a22 + mu);
        let d = m11 * m22 - a12 * a12;
        if d > 0.0 && d.is_finite() {
            let step = (-(m22 * r1 - a12 * r2) / d, -(m11 * r2 - a12 * r1) / d);
            if let Some(hit) = try_at(step)? {
                return Ok(Some(hit));
            }
        }
        mu *= 10.0;
    }
    Ok(None)
}

/// Newton with backtracking from `start`; `Ok(Err(..))` when it does not converge.
fn newton<E>(
    eval: &E,
    start: (f64, f64),
    rect: Rect,
    s: &RootSettings,
) -> Result<std::result::Result<(Root, usize), Unresolved>>
where
    E: Fn((f64, f64)) -> Result<(f64, f64)>,
{
    let mut x = start;
    let mut gx = eval(x)?;
    let fail = |x: (f64, f64), gx: (f64, f64), reason: &str| {
        Ok(Err(Unresolved {
            start,
            at: x,
            residual: max_abs(gx),
            reason: reason.to_string(),
        }))
    };
    for it in 0..=s.max_newton {
        if max_abs(gx) < s.tol {
            let jacobian = jacobian_central(eval, x, 10.0 * s.fd_step)?;
            let det = jacobian[0][0] * jacobian[1][1] - jacobian[0][1] * jacobian[1][0];
            let scale = jacobian.iter().flatten().map(|v| v * v).sum::<f64>();
            let index = if det.abs() <= 1e-12 * scale {
                0
            } else if det > 0.0 {
                1
            } else {
                -1
            };
            return Ok(Ok((
                Root {
                    x,
                    residual: max_abs(gx),
                    jacobian,
                    index,
                    newton_steps: it,
                    cells: 1,
                },
                it,
            )));
        }
        if it == s.max_newton {
            break;
        }
        let j = jacobian_forward(eval, x, gx, s.fd_step)?;
        match descent_step(eval, x, gx, j, rect)? {
            Some((xn, gn)) => {
                x = xn;
                gx = gn;
            }
            None => {
                return fail(
                    x,
                    gx,
                    "no decrease of |g| along the Newton or Levenberg–Marquardt directions",
                )
            }
        }
    }
    fail(x, gx, "Newton iteration cap reached")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(grid: usize) -> RootSettings {
        RootSettings {
            grid,
            tol: 1e-12,
            max_newton: 50,
            fd_step: 1e-7,
            same: 1e-6,
        }
    }

    /// g(x, y) = (x³ − x, y(1 + 0.3x)): roots (−1, 0), (0, 0), (1, 0); det ∂g =
    /// (3x² − 1)(1 + 0.3x) gives indices +1, −1, +1 (the middle one is a saddle, as between the
    /// two wells of V = x⁴/4 − x²/2).
    #[test]
    fn finds_the_three_roots_of_a_double_well_gradient_with_their_indices() {
        let g = |(x, y): (f64, f64)| Ok((x * x * x - x, y + 0.3 * x * y));
        let rect = Rect {
            x: (-2.0, 2.3),
            y: (-1.7, 1.9),
        };
        let found = find_roots(&g, rect, &settings(23)).unwrap();
        let mut roots: Vec<_> = found.roots.iter().map(|r| (r.x, r.index)).collect();
        roots.sort_by(|a, b| a.0 .0.partial_cmp(&b.0 .0).unwrap());
        assert_eq!(roots.len(), 3, "{found:?}");
        for (got, want) in roots.iter().zip([(-1.0, 1), (0.0, -1), (1.0, 1)]) {
            assert!((got.0 .0 - want.0).abs() < 1e-10 && got.0 .1.abs() < 1e-10);
            assert_eq!(got.1, want.1);
        }
        assert!(found.unresolved.is_empty());
        assert_eq!(roots.iter().map(|r| r.1).sum::<i32>(), 1);
    }

    /// g = (x² + y² − 4, x·y − 1): x² + 1/x² = 4 gives four roots (a, 1/a), a = ±√(2 ± √3).
    #[test]
    fn finds_the_four_intersections_of_a_circle_and_a_hyperbola() {
        let g = |(x, y): (f64, f64)| Ok((x * x + y * y - 4.0, x * y - 1.0));
        let found = find_roots(
            &g,
            Rect {
                x: (-3.0, 3.1),
                y: (-3.05, 3.0),
            },
            &settings(31),
        )
        .unwrap();
        assert_eq!(found.roots.len(), 4, "{found:?}");
        let a_big = (2.0 + 3f64.sqrt()).sqrt();
        let a_small = (2.0 - 3f64.sqrt()).sqrt();
        for want in [
            (a_big, 1.0 / a_big),
            (a_small, 1.0 / a_small),
            (-a_big, -1.0 / a_big),
            (-a_small, -1.0 / a_small),
        ] {
            assert!(
                found
                    .roots
                    .iter()
                    .any(|r| (r.x.0 - want.0).abs() < 1e-10 && (r.x.1 - want.1).abs() < 1e-10),
                "{want:?} missing from {found:?}"
            );
        }
        // det ∂g = 2x² − 2y²: +1 at |x| > |y|, −1 otherwise; the degree on a large box is 0.
        assert_eq!(found.roots.iter().map(|r| r.index).sum::<i32>(), 0);
    }

    #[test]
    fn a_map_without_roots_gives_none_and_results_do_not_depend_on_threads() {
        let g = |(x, y): (f64, f64)| Ok((x * x + 1.0, y));
        let rect = Rect {
            x: (-1.0, 1.0),
            y: (-1.0, 1.0),
        };
        assert!(find_roots(&g, rect, &settings(11))
            .unwrap()
            .roots
            .is_empty());
        let h = |(x, y): (f64, f64)| Ok(((3.0 * x).sin() - 0.5 * y, x * x + y - 0.5));
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| find_roots(&h, rect, &settings(17)).unwrap());
        let four = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap()
            .install(|| find_roots(&h, rect, &settings(17)).unwrap());
        assert_eq!(one, four);
        assert!(!one.roots.is_empty());
    }

    #[test]
    fn rejects_bad_grids_and_ranges() {
        let g = |(x, y): (f64, f64)| Ok((x, y));
        let rect = Rect {
            x: (0.0, 1.0),
            y: (0.0, 1.0),
        };
        assert!(find_roots(&g, rect, &settings(1)).is_err());
        let flipped = Rect {
            x: (1.0, 0.0),
            y: (0.0, 1.0),
        };
        assert!(find_roots(&g, flipped, &settings(5)).is_err());
    }
}
