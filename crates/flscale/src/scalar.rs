//! One-dimensional optimisation and root finding on a bracket: golden-section search,
//! bisection and Brent's method.
//!
//! * **Golden section** ([`golden_min`]; Press et al., *Numerical Recipes*, 3rd ed., 2007,
//!   §10.2; Kiefer 1953): the bracket [lo, hi] shrinks by 1/φ per function evaluation, keeping
//!   the two interior points x₁ = hi − (hi − lo)/φ and x₂ = lo + (hi − lo)/φ and reusing one
//!   of them each step. Converges to a local minimum of any function unimodal on the bracket.
//! * **Bisection** ([`bisect`]; Numerical Recipes §9.1): halves a bracket across which a
//!   predicate switches from false to true; needs no continuity, only the switch.
//! * **Brent's method** ([`brent_root`]; R. P. Brent, *Algorithms for Minimization without
//!   Derivatives*, 1973, ch. 4, `zeroin`; Numerical Recipes §9.3): inverse quadratic
//!   interpolation with bisection as a safeguard, so the bracket shrinks at least
//!   geometrically and convergence is guaranteed for any continuous function with a sign
//!   change.
//!
//! Every function takes its tolerance and iteration cap from the caller: the callers' results
//! depend on them to the last bit.

use crate::error::{Error, Result};

/// The end state of a golden-section search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GoldenMin {
    /// The better of the two interior points.
    pub x: f64,
    /// f(x).
    pub value: f64,
    /// The final bracket (lo, hi).
    pub bracket: (f64, f64),
    /// Evaluations of f (2 + the iterations run).
    pub evals: usize,
}

impl GoldenMin {
    /// The midpoint of the final bracket.
    pub fn midpoint(&self) -> f64 {
        0.5 * (self.bracket.0 + self.bracket.1)
    }
}

/// Golden-section minimisation of `f` on [lo, hi] (module docs): stops when
/// hi − lo ≤ `tol`·(|x₁| + |x₂|) (Numerical Recipes' relative test) or after `max_iter`
/// iterations; `tol` = 0 runs all `max_iter`. Ties go to x₂.
pub fn golden_min(
    mut f: impl FnMut(f64) -> f64,
    mut lo: f64,
    mut hi: f64,
    tol: f64,
    max_iter: usize,
) -> GoldenMin {
    let inv_phi = (5f64.sqrt() - 1.0) / 2.0;
    let mut x1 = hi - inv_phi * (hi - lo);
    let mut x2 = lo + inv_phi * (hi - lo);
    let (mut f1, mut f2) = (f(x1), f(x2));
    let mut evals = 2;
    for _ in 0..max_iter {
        if tol > 0.0 && (hi - lo) <= tol * (x1.abs() + x2.abs()).max(1e-300) {
            break;
        }
        if f1 < f2 {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - inv_phi * (hi - lo);
            f1 = f(x1);
        } else {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + inv_phi * (hi - lo);
            f2 = f(x2);
        }
        evals += 1;
    }
    let (x, value) = if f1 < f2 { (x1, f1) } else { (x2, f2) };
    GoldenMin {
        x,
        value,
        bracket: (lo, hi),
        evals,
    }
}

/// Bisection (module docs) of [lo, hi] where `above` is false at lo and true at hi: halves
/// the bracket, keeping the switch inside, until hi − lo < `x_tol` or after `max_iter`
/// halvings, and returns the midpoint of the last bracket. The caller checks the ends.
pub fn bisect(
    mut above: impl FnMut(f64) -> bool,
    mut lo: f64,
    mut hi: f64,
    x_tol: f64,
    max_iter: usize,
) -> f64 {
    for _ in 0..max_iter {
        let mid = 0.5 * (lo + hi);
        if above(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo < x_tol {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Brent's root finder on a bracket [a, b] with f(a)·f(b) ≤ 0; stops when the bracket is
/// below `x_tol` (absolute) or f vanishes. Errors if the bracket does not change sign.
pub fn brent_root(
    mut f: impl FnMut(f64) -> Result<f64>,
    mut a: f64,
    mut b: f64,
    x_tol: f64,
    max_iter: usize,
) -> Result<f64> {
    let mut fa = f(a)?;
    let mut fb = f(b)?;
    if fa == 0.0 {
        return Ok(a);
    }
    if fb == 0.0 {
        return Ok(b);
    }
    if fa.signum() == fb.signum() {
        return Err(Error::runtime(format!(
            "root bracket [{a}, {b}] does not change sign (f = {fa}, {fb})"
        )));
    }
    let (mut c, mut fc) = (a, fa);
    let mut d = b - a;
    let mut e = d;
    for _ in 0..max_iter {
        if fb.signum() == fc.signum() {
            c = a;
            fc = fa;
            d = b - a;
            e = d;
        }
        if fc.abs() < fb.abs() {
            a = b;
            b = c;
            c = a;
            fa = fb;
            fb = fc;
            fc = fa;
        }
        let tol = 2.0 * f64::EPSILON * b.abs() + 0.5 * x_tol;
        let m = 0.5 * (c - b);
        if m.abs() <= tol || fb == 0.0 {
            return Ok(b);
        }
        if e.abs() >= tol && fa.abs() > fb.abs() {
            // Inverse quadratic interpolation (secant when only two points are distinct).
            let s = fb / fa;
            let (mut p, mut q);
            if a == c {
                p = 2.0 * m * s;
                q = 1.0 - s;
            } else {
                let qa = fa / fc;
                let r = fb / fc;
                p = s * (2.0 * m * qa * (qa - r) - (b - a) * (r - 1.0));
                q = (qa - 1.0) * (r - 1.0) * (s - 1.0);
            }
            if p > 0.0 {
                q = -q;
            } else {
                p = -p;
            }
            if 2.0 * p < (3.0 * m * q - (tol * q).abs()).min((e * q).abs()) {
                e = d;
                d = p / q;
            } else {
                d = m;
                e = m;
            }
        } else {
            d = m;
            e = m;
        }
        a = b;
        fa = fb;
        b += if d.abs() > tol { d } else { tol.copysign(m) };
        fb = f(b)?;
    }
    Err(Error::runtime(format!(
        "Brent's method did not converge in {max_iter} iterations"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_section_finds_closed_form_minima() {
        // (x − 0.3)² + 1 on [−2, 5]: minimum 1 at 0.3; cosh(x − 1.7) on [0, 10]: 1 at 1.7.
        let m = golden_min(|x| (x - 0.3) * (x - 0.3) + 1.0, -2.0, 5.0, 1e-12, 300);
        assert!((m.x - 0.3).abs() < 1e-7, "{m:?}");
        assert!((m.value - 1.0).abs() < 1e-14, "{m:?}");
        let c = golden_min(|x| (x - 1.7).cosh(), 0.0, 10.0, 1e-12, 300);
        assert!((c.x - 1.7).abs() < 1e-7, "{c:?}");
        // Without a tolerance it runs every iteration: the bracket after n steps is 1/φⁿ of
        // the first (one evaluation each, two to start).
        let fixed = golden_min(|x| (x - 0.3).powi(2), -2.0, 5.0, 0.0, 30);
        assert_eq!(fixed.evals, 32);
        let inv_phi = (5f64.sqrt() - 1.0) / 2.0;
        let width = fixed.bracket.1 - fixed.bracket.0;
        assert!(
            (width / (7.0 * inv_phi.powi(30)) - 1.0).abs() < 1e-6,
            "{width}"
        );
        assert!((fixed.midpoint() - 0.3).abs() < width);
        // The relative stop ends early: far fewer than 300 iterations.
        assert!(m.evals < 100, "{}", m.evals);
    }

    #[test]
    fn bisection_finds_the_switch() {
        // √2 as the switch of x² > 2 on [0, 2]; 60 halvings reach the last bits.
        let r = bisect(|x| x * x > 2.0, 0.0, 2.0, 0.0, 60);
        assert!((r - std::f64::consts::SQRT_2).abs() < 1e-15, "{r}");
        // x_tol ends it after ⌈log₂(2/1e-3)⌉ = 11 halvings: within 1e-3 of the switch.
        let mut calls = 0;
        let r = bisect(
            |x| {
                calls += 1;
                x > 0.7
            },
            0.0,
            2.0,
            1e-3,
            200,
        );
        assert_eq!(calls, 11);
        assert!((r - 0.7).abs() < 1e-3, "{r}");
    }

    #[test]
    fn brent_finds_roots_and_rejects_bad_brackets() {
        let r = brent_root(|x| Ok(x * x * x - 2.0), 0.0, 2.0, 1e-14, 100).unwrap();
        assert!((r - 2f64.cbrt()).abs() < 1e-13);
        // A step-like function (what g'(t) looks like at large d) still converges.
        let r = brent_root(|x| Ok((200.0 * (x - 0.7)).tanh()), 0.0, 1.0, 1e-14, 200).unwrap();
        assert!((r - 0.7).abs() < 1e-12);
        assert!(brent_root(|x| Ok(x * x + 1.0), -1.0, 1.0, 1e-12, 50).is_err());
    }
}
