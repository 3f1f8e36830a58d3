//! Fixed points x = G(x) of a map of the plane: the damped iteration and a safeguarded Newton
//! method on F(x) = G(x) − x.
//!
//! Why Newton: in the mixed phase (Rubin, Seroussi & Ringel 2024, §2.4.1 "droplets"; §3.1
//! Claim IV) the side-well mass of the overlap law reacts steeply to (b, c), so ∂G has
//! eigenvalues of −30 to −200. The damped step x ← x + η(G(x) − x) multiplies an error along an
//! eigenvector of eigenvalue λ by 1 + η(λ − 1): it contracts only for η < 2/(1 − λ) (< 0.01 at
//! λ = −200) and then needs ~1/(η(1 − λ)) ≫ 100 steps along the other directions. Newton's
//! step solves the linearised equation (∂G − I)δ = −F, whose rate does not depend on λ.
//!
//! Safeguards: the Jacobian by forward differences; the step capped at `max_step` (max norm);
//! backtracking (halving, Armijo factor 1e-4) on |F|₂; where no Newton step lowers |F|₂, damped
//! steps with η = ½, ¼, … ; the run stops, unconverged, when neither lowers it. Convergence:
//! max|G(x) − x| < `tol`, tested on the returned x.

use serde::Serialize;

use crate::error::Result;

/// Settings of [`newton_fixed_point`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NewtonOptions {
    /// Stop when max|G(x) − x| < tol.
    pub tol: f64,
    /// Newton iterations at most.
    pub max_iter: usize,
    /// Relative forward-difference step of the Jacobian (times max(1, |x_i|)).
    pub fd_step: f64,
    /// Largest step per iteration (max norm).
    pub max_step: f64,
}

impl Default for NewtonOptions {
    fn default() -> Self {
        NewtonOptions {
            tol: 1e-10,
            max_iter: 60,
            fd_step: 1e-7,
            max_step: 0.5,
        }
    }
}

/// Which method produced a fixed point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// x ← x + η(G(x) − x).
    Damped,
    /// Safeguarded Newton on G(x) − x.
    Newton,
}

/// The record of one fixed-point run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FixedPointRun {
    /// The last iterate.
    pub x: (f64, f64),
    /// max|G(x) − x| at `x`.
    pub residual: f64,
    /// Iterations used (steps taken).
    pub iterations: usize,
    /// Evaluations of G.
    pub evaluations: usize,
    /// Whether `residual` < tol.
    pub converged: bool,
    /// The method of the last stage.
    pub method: Method,
}

fn max_abs(v: (f64, f64)) -> f64 {
    v.0.abs().max(v.1.abs())
}

fn norm2(v: (f64, f64)) -> f64 {
    (v.0 * v.0 + v.1 * v.1).sqrt()
}

/// F(x) = G(x) − x.
fn residual_of<G>(g: &G, x: (f64, f64), evals: &mut usize) -> Result<(f64, f64)>
where
    G: Fn((f64, f64)) -> Result<(f64, f64)>,
{
    *evals += 1;
    let gx = g(x)?;
    Ok((gx.0 - x.0, gx.1 - x.1))
}

/// The damped iteration x ← x + η(G(x) − x) from `start`; η starts at `damping` and shrinks by
/// 0.7 (to at least 0.02) whenever a step fails to shrink by 5 % (the schedule of `solve`
/// before this module). Stops at max|G(x) − x| < `tol` or after `max_iter` steps.
pub fn damped_fixed_point<G>(
    g: &G,
    start: (f64, f64),
    damping: f64,
    max_iter: usize,
    tol: f64,
) -> Result<FixedPointRun>
where
    G: Fn((f64, f64)) -> Result<(f64, f64)>,
{
    let mut x = start;
    let mut evals = 0;
    let mut eta = damping;
    let mut last = f64::INFINITY;
    let mut f = residual_of(g, x, &mut evals)?;
    for it in 0..max_iter {
        let r = max_abs(f);
        if r < tol {
            return Ok(run(x, r, it, evals, true, Method::Damped));
        }
        if r > 0.95 * last {
            eta = (eta * 0.7).max(0.02);
        }
        last = r;
        x = (x.0 + eta * f.0, x.1 + eta * f.1);
        f = residual_of(g, x, &mut evals)?;
        if !(f.0.is_finite() && f.1.is_finite()) {
            break;
        }
    }
    let r = max_abs(f);
    Ok(run(x, r, max_iter, evals, r < tol, Method::Damped))
}

fn run(
    x: (f64, f64),
    residual: f64,
    iterations: usize,
    evaluations: usize,
    converged: bool,
    method: Method,
) -> FixedPointRun {
    FixedPointRun {
        x,
        residual,
        iterations,
        evaluations,
        converged,
        method,
    }
}

/// ∂F by forward differences at x (F(x) = `fx` given).
fn jacobian<G>(
    g: &G,
    x: (f64, f64),
    fx: (f64, f64),
    rel: f64,
    evals: &mut usize,
) -> Result<[[f64; 2]; 2]>
where
    G: Fn((f64, f64)) -> Result<(f64, f64)>,
{
    let h0 = rel * x.0.abs().max(1.0);
    let h1 = rel * x.1.abs().max(1.0);
    let f0 = residual_of(g, (x.0 + h0, x.1), evals)?;
    let f1 = residual_of(g, (x.0, x.1 + h1), evals)?;
    Ok([
        [(f0.0 - fx.0) / h0, (f1.0 - fx.0) / h1],
        [(f0.1 - fx.1) / h0, (f1.1 - fx.1) / h1],
    ])
}

/// The Newton step −J⁻¹F capped at `cap` (max norm); `None` for a singular J.
fn newton_step(j: [[f64; 2]; 2], f: (f64, f64), cap: f64) -> Option<(f64, f64)> {
    let det = j[0][0] * j[1][1] - j[0][1] * j[1][0];
    let scale = j.iter().flatten().map(|v| v.abs()).fold(0.0, f64::max);
    if !(det.is_finite() && det.abs() > 1e-14 * scale * scale) {
        return None;
    }
    let d = (
        -(j[1][1] * f.0 - j[0][1] * f.1) / det,
        -(-j[1][0] * f.0 + j[0][0] * f.1) / det,
    );
    let m = max_abs(d);
    Some(if m > cap {
        (d.0 * cap / m, d.1 * cap / m)
    } else {
        d
    })
}

/// An accepted point (b, c) and the residual F there.
type PointAndResidual = ((f64, f64), (f64, f64));

/// The first of the steps t·d (t = 1, ½, … , 2⁻¹²) that lowers |F|₂ by the Armijo factor.
fn backtrack<G>(
    g: &G,
    x: (f64, f64),
    fx: (f64, f64),
    d: (f64, f64),
    evals: &mut usize,
) -> Result<Option<PointAndResidual>>
where
    G: Fn((f64, f64)) -> Result<(f64, f64)>,
{
    let n0 = norm2(fx);
    let mut t = 1.0;
    for _ in 0..13 {
        let trial = (x.0 + t * d.0, x.1 + t * d.1);
        // A trial point where G cannot be evaluated counts as a failed step.
        if let Ok(ft) = residual_of(g, trial, evals) {
            if norm2(ft) < (1.0 - 1e-4 * t) * n0 {
                return Ok(Some((trial, ft)));
            }
        }
        t *= 0.5;
    }
    Ok(None)
}

/// Safeguarded Newton on G(x) − x from `start` (module docs).
pub fn newton_fixed_point<G>(
    g: &G,
    start: (f64, f64),
    opts: &NewtonOptions,
) -> Result<FixedPointRun>
where
    G: Fn((f64, f64)) -> Result<(f64, f64)>,
{
    let mut evals = 0;
    let mut x = start;
    let mut f = residual_of(g, x, &mut evals)?;
    for it in 0..opts.max_iter {
        if max_abs(f) < opts.tol {
            return Ok(run(x, max_abs(f), it, evals, true, Method::Newton));
        }
        let j = jacobian(g, x, f, opts.fd_step, &mut evals)?;
        let mut next = None;
        if let Some(d) = newton_step(j, f, opts.max_step) {
            next = backtrack(g, x, f, d, &mut evals)?;
        }
        if next.is_none() {
            // The fixed-point direction F itself, damped.
            next = backtrack(g, x, f, (0.5 * f.0, 0.5 * f.1), &mut evals)?;
        }
        match next {
            Some((xn, fnext)) => {
                x = xn;
                f = fnext;
            }
            None => return Ok(run(x, max_abs(f), it, evals, false, Method::Newton)),
        }
    }
    let r = max_abs(f);
    Ok(run(
        x,
        r,
        opts.max_iter,
        evals,
        r < opts.tol,
        Method::Newton,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G(x) = x* + A(x − x*) + a quadratic term, with ∂G(x*) = A = diag-like with eigenvalues
    /// −60 and −150 (rotated), as in the mixed phase.
    fn stiff_map(x: (f64, f64)) -> Result<(f64, f64)> {
        let (xs, ys) = (0.3, -0.2);
        let (dx, dy) = (x.0 - xs, x.1 - ys);
        // A = R·diag(−60, −150)·Rᵀ, R a rotation by 0.4 rad.
        let (c, s) = (0.4f64.cos(), 0.4f64.sin());
        let (l1, l2) = (-60.0, -150.0);
        let a11 = l1 * c * c + l2 * s * s;
        let a12 = (l1 - l2) * c * s;
        let a22 = l1 * s * s + l2 * c * c;
        Ok((
            xs + a11 * dx + a12 * dy + 3.0 * dx * dx,
            ys + a12 * dx + a22 * dy - 2.0 * dx * dy,
        ))
    }

    #[test]
    fn newton_converges_where_damping_fails() {
        let start = (0.25, -0.1);
        let damped = damped_fixed_point(&stiff_map, start, 0.5, 400, 1e-10).unwrap();
        assert!(!damped.converged, "{damped:?}");
        let opts = NewtonOptions::default();
        let newton = newton_fixed_point(&stiff_map, start, &opts).unwrap();
        assert!(newton.converged, "{newton:?}");
        assert!(newton.residual <= 1e-10);
        assert!((newton.x.0 - 0.3).abs() < 1e-11 && (newton.x.1 + 0.2).abs() < 1e-11);
        assert!(newton.iterations < 15, "{newton:?}");
    }

    #[test]
    fn damped_converges_on_a_contraction_and_agrees_with_newton() {
        let g = |x: (f64, f64)| Ok((0.5 * x.1.cos(), 0.3 * x.0.sin() + 0.1));
        let d = damped_fixed_point(&g, (0.0, 0.0), 0.5, 400, 1e-12).unwrap();
        let n = newton_fixed_point(&g, (0.0, 0.0), &NewtonOptions::default()).unwrap();
        assert!(d.converged && n.converged);
        assert!((d.x.0 - n.x.0).abs() < 1e-11 && (d.x.1 - n.x.1).abs() < 1e-11);
    }

    #[test]
    fn no_fixed_point_stops_unconverged() {
        // G(x) = x + (1, 1 + x₀²): F never vanishes.
        let g = |x: (f64, f64)| Ok((x.0 + 1.0, x.1 + 1.0 + x.0 * x.0));
        let n = newton_fixed_point(&g, (0.0, 0.0), &NewtonOptions::default()).unwrap();
        assert!(!n.converged && n.residual.is_finite());
    }
}
