//! Phases of the mean-field overlap potential Ũ_u(ρ): where side minima appear (fold), where
//! they reach the depth of the central minimum (equal-depth coexistence, the first-order
//! transition) and where the centre loses stability (spinodal, U''(0) = 0).
//!
//! Source: blog §"The sample scale for alignment" (fold → coexistence → spinodal, Fig. 4.1)
//! and §"Expand the potential near zero overlap"; spec 04 "What the tool computes".
//!
//! ## Closed forms (derived here)
//!
//! With a = 1 + 2σ_w², t = ρ² and s = t/(a + 2t) ∈ [0, ½) (so 1 + 2q = a/(1 − 2s)), the
//! mean-field potential is Ũ_u/D = t/(2σ_w²) − u·G(t) with G = (2/π)·s·(b − 2cs)². Then
//!
//! * G(t)/t = (2/(πa))·h(s), h(s) = (1 − 2s)(b − 2cs)²;
//! * G'(t) = (2/(πa))·k(s), k(s) = (1 − 2s)²(b − 2cs)(b − 6cs) (ds/dt = (1 − 2s)²/a).
//!
//! Spinodal: Ũ''(0) = 0 ⇔ u_s = πa/(4σ_w²b²) (k(0) = b²).
//! Coexistence: a side minimum at depth 0 needs u = t/(2σ_w²G(t)) there, and the first u for
//! which this happens is u_c = πa/(4σ_w²·max_s h). h'(s) = −2(b − 2cs)(b + 2c − 6cs), so the
//! interior candidate is s_c = (b + 2c)/(6c) with h(s_c) = 4(c − b)³/(27c); ρ* = √(a s_c/(1 − 2s_c)).
//! Fold: side stationary points solve u·G'(t) = 1/(2σ_w²); the first appears at
//! u_f = πa/(4σ_w²·max_s k). k'(s) = 0 in (0, ½) ⇔ 24c²s² − (12bc + 6c²)s + b² + 2bc = 0,
//! s = (2b + c)/(8c) ± √(3(4b² − 4bc + 3c²))/(24|c|).
//! The transition is first order iff max h > h(0) = b² (then u_f < u_c < u_s); otherwise it is
//! continuous and all three coincide at u_s.
//!
//! The numerical path ([`phase`]) never uses these formulas: it minimises functions of the
//! potential itself (golden-section search on a grid in s, Richardson-extrapolated
//! derivatives), and tests compare the two to 1e-9 and both to brute-force grid minimisation.

use std::f64::consts::PI;

use serde::Serialize;

use super::potential::MeanField;
use super::{at_least, positive};
use crate::error::{Error, Result};

/// Relative tolerance of the golden-section searches (in the variable s ∈ [0, ½)).
pub const SEARCH_TOL: f64 = 1e-13;

/// The accuracy this module states for its numerical u values (relative): the searched minima
/// are flat, so a 1e-13 location error moves the value by far less; the Richardson
/// derivatives used for the fold and spinodal are good to ~1e-12.
pub const STATED_REL_TOL: f64 = 1e-10;

/// Stated absolute accuracy of the located overlaps ρ (a flat minimum is located to ~√ε).
pub const RHO_TOL: f64 = 1e-6;

/// One located point of the phase analysis.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Located {
    /// The numerical value of u (from the potential itself).
    pub u: f64,
    /// The closed form of u derived in this module's docs.
    pub u_closed_form: f64,
    /// |numerical − closed form| / closed form.
    pub rel_diff: f64,
    /// The overlap of the side extremum at that u (0 for a continuous transition).
    pub rho: f64,
}

/// Result of `flscale cavity phase`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseReport {
    /// The potential's parameters.
    pub sigma_w2: f64,
    /// Linear residual coefficient.
    pub b: f64,
    /// Cubic residual coefficient.
    pub c: f64,
    /// Input dimension used for the finite-D posterior moments.
    pub d: usize,
    /// "first-order" or "continuous".
    pub kind: String,
    /// Side minima first appear (ρ: where they appear).
    pub u_fold: Located,
    /// Equal-depth coexistence (ρ: the side minimum ρ*).
    pub u_coexist: Located,
    /// U''(0) = 0; absent when b = 0 (the centre never loses stability).
    pub u_spinodal: Option<Located>,
    /// ρ* of the side minimum at coexistence.
    pub rho_star: f64,
    /// Leading-order R = E[ρ²] just below u_c: σ_w²/(D(1 − u_c/u_s)) (Gaussian central well);
    /// absent for a continuous transition, where it diverges at u_c = u_s.
    pub r_unaligned_leading: Option<f64>,
    /// Leading-order R just above u_c: ρ*².
    pub r_aligned_leading: f64,
    /// R in the central well at u_c for this D (exact integral of e^{−D·Ũ}).
    pub r_unaligned_at_d: f64,
    /// R in the side well at u_c for this D; absent without a side well.
    pub r_aligned_at_d: Option<f64>,
    /// Posterior mass of the side wells at u_c for this D.
    pub side_weight_at_d: f64,
    /// Stated relative accuracy of the numerical u values.
    pub tolerance: f64,
    /// Stated absolute accuracy of the located overlaps ρ.
    pub rho_tolerance: f64,
}

fn param_a(mf: &MeanField) -> f64 {
    1.0 + 2.0 * mf.sigma_w2
}

fn rho_of_s(a: f64, s: f64) -> f64 {
    (a * s / (1.0 - 2.0 * s)).sqrt()
}

fn h_of_s(mf: &MeanField, s: f64) -> f64 {
    (1.0 - 2.0 * s) * (mf.b - 2.0 * mf.c * s).powi(2)
}

fn k_of_s(mf: &MeanField, s: f64) -> f64 {
    (1.0 - 2.0 * s).powi(2) * (mf.b - 2.0 * mf.c * s) * (mf.b - 6.0 * mf.c * s)
}

fn u_from_slope(mf: &MeanField, slope: f64) -> f64 {
    PI * param_a(mf) / (4.0 * mf.sigma_w2 * slope)
}

/// Closed-form spinodal u_s = π(1 + 2σ_w²)/(4σ_w²b²); `None` when b = 0.
pub fn spinodal_closed_form(mf: &MeanField) -> Option<f64> {
    (mf.b != 0.0).then(|| u_from_slope(mf, mf.b * mf.b))
}

/// Closed-form coexistence (u_c, ρ*); ρ* = 0 for a continuous transition.
pub fn coexistence_closed_form(mf: &MeanField) -> Option<(f64, f64)> {
    let mut best = (h_of_s(mf, 0.0), 0.0);
    if mf.c != 0.0 {
        let s = (mf.b + 2.0 * mf.c) / (6.0 * mf.c);
        if s > 0.0 && s < 0.5 {
            let h = 4.0 * (mf.c - mf.b).powi(3) / (27.0 * mf.c);
            if h > best.0 {
                best = (h, s);
            }
        }
    }
    (best.0 > 0.0).then(|| (u_from_slope(mf, best.0), rho_of_s(param_a(mf), best.1)))
}

/// Closed-form fold (u_f, ρ_f); ρ_f = 0 when side minima first appear at the spinodal.
pub fn fold_closed_form(mf: &MeanField) -> Option<(f64, f64)> {
    let mut best = (k_of_s(mf, 0.0), 0.0);
    if mf.c != 0.0 {
        let (b, c) = (mf.b, mf.c);
        let centre = (2.0 * b + c) / (8.0 * c);
        let half_width =
            (3.0 * (4.0 * b * b - 4.0 * b * c + 3.0 * c * c)).sqrt() / (24.0 * c.abs());
        for s in [centre - half_width, centre + half_width] {
            if s > 0.0 && s < 0.5 {
                let k = k_of_s(mf, s);
                if k > best.0 {
                    best = (k, s);
                }
            }
        }
    }
    (best.0 > 0.0).then(|| (u_from_slope(mf, best.0), rho_of_s(param_a(mf), best.1)))
}

/// Minimises `f(s)` over s ∈ (0, ½) by a grid scan and golden-section refinement; returns the
/// interior minimiser and value, or `None` when the smallest grid value sits at the first node
/// (the infimum is then the limit s → 0).
fn interior_min_in_s(f: impl Fn(f64) -> f64) -> Option<(f64, f64)> {
    let m = 4000;
    let s_of = |j: usize| 0.5 * j as f64 / m as f64;
    let mut best_j = 1;
    let mut best = f64::INFINITY;
    for j in 1..m {
        let v = f(s_of(j));
        if v < best {
            best = v;
            best_j = j;
        }
    }
    if !best.is_finite() || best_j == 1 {
        return None;
    }
    let m = crate::scalar::golden_min(&f, s_of(best_j - 1), s_of(best_j + 1), SEARCH_TOL, 300);
    let (s, v) = (m.x, m.value);
    Some((s, v))
}

/// Richardson extrapolation of estimates computed with steps h, h/2, h/4, … whose error is a
/// series in h² (central differences of a smooth function).
fn richardson(mut table: Vec<f64>) -> f64 {
    let levels = table.len();
    for k in 1..levels {
        let factor = 4f64.powi(k as i32);
        for i in (k..levels).rev() {
            table[i] = (factor * table[i] - table[i - 1]) / (factor - 1.0);
        }
    }
    table[levels - 1]
}

/// Richardson-extrapolated central difference f'(x) (steps h, h/2, h/4, h/8).
fn derivative(f: impl Fn(f64) -> f64, x: f64, h: f64) -> f64 {
    richardson(
        (0..4)
            .map(|i| {
                let hi = h / 2f64.powi(i);
                (f(x + hi) - f(x - hi)) / (2.0 * hi)
            })
            .collect(),
    )
}

/// Ũ_u''(0)/D as A − u·B from the potential alone: A, B by Richardson extrapolation of
/// 2Ũ(h)/h² (Ũ(0) = 0, Ũ even), using Ũ_0 and Ũ_0 − Ũ_1 = g.
fn spinodal_numeric(mf: &MeanField) -> Option<f64> {
    let curvature = |f: &dyn Fn(f64) -> f64| {
        richardson(
            (0..6)
                .map(|i| {
                    let h = 0.05 / 2f64.powi(i);
                    2.0 * (f(h) - f(0.0)) / (h * h)
                })
                .collect(),
        )
    };
    let a = curvature(&|r| mf.potential(0.0, r));
    let b = curvature(&|r| mf.potential(0.0, r) - mf.potential(1.0, r));
    (b > 1e-14 * a).then(|| a / b)
}

/// Numerical phase analysis of Ũ_u for the given (σ_w², b, c), with the closed forms alongside
/// and the finite-D moments R at coexistence.
pub fn phase(sigma_w2: f64, b: f64, c: f64, d: usize) -> Result<PhaseReport> {
    let mf = MeanField::new(sigma_w2, b, c)?;
    let d = at_least("D (input dimension)", d, 1)?;
    positive("D (input dimension)", d as f64)?;
    if b == 0.0 && c == 0.0 {
        return Err(Error::invalid(
            "b = 0 and c = 0 together are not allowed; with no residual the potential has no fit reward and no transition",
        ));
    }
    let a = param_a(&mf);
    let reward = |r: f64| mf.potential(0.0, r) - mf.potential(1.0, r);

    let u_s_num = spinodal_numeric(&mf);
    let u_s_closed = spinodal_closed_form(&mf);

    // Coexistence: Ũ_u(ρ) = 0 at ρ > 0 ⇔ u = ρ²/(2σ_w²·g(ρ)); the first such u is the minimum.
    let u_zero_depth = |s: f64| {
        let r = rho_of_s(a, s);
        let g = reward(r);
        if g > 0.0 {
            r * r / (2.0 * sigma_w2 * g)
        } else {
            f64::INFINITY
        }
    };
    // Fold: Ũ_u'(ρ) = 0 at ρ > 0 ⇔ u = ρ/(σ_w²·g'(ρ)); the first such u is the minimum.
    let u_stationary = |s: f64| {
        let r = rho_of_s(a, s);
        let dg = derivative(reward, r, 1e-3 * r.max(1e-3));
        if dg > 0.0 {
            r / (sigma_w2 * dg)
        } else {
            f64::INFINITY
        }
    };
    let boundary = u_s_num.unwrap_or(f64::INFINITY);
    let pick = |found: Option<(f64, f64)>| match found {
        Some((s, v)) if v < boundary * (1.0 - 1e-12) => (v, rho_of_s(a, s)),
        _ => (boundary, 0.0),
    };
    let (u_c_num, rho_star) = pick(interior_min_in_s(u_zero_depth));
    let (u_f_num, rho_fold) = pick(interior_min_in_s(u_stationary));
    if !u_c_num.is_finite() || !u_f_num.is_finite() {
        return Err(Error::runtime(format!(
            "no transition found for σ_w² = {sigma_w2}, b = {b}, c = {c}: the fit reward never beats the prior"
        )));
    }
    let (u_c_closed, _) = coexistence_closed_form(&mf).ok_or_else(|| {
        Error::runtime("the closed-form coexistence does not exist for these parameters")
    })?;
    let (u_f_closed, _) = fold_closed_form(&mf).ok_or_else(|| {
        Error::runtime("the closed-form fold does not exist for these parameters")
    })?;
    let located = |u: f64, closed: f64, rho: f64| Located {
        u,
        u_closed_form: closed,
        rel_diff: (u - closed).abs() / closed.abs(),
        rho,
    };
    let first_order = rho_star > 0.0;
    let u_spinodal = match (u_s_num, u_s_closed) {
        (Some(num), Some(closed)) => {
            // Where the centre destabilises in a first-order transition, the side minimum
            // already exists; its location is reported.
            let side = if first_order {
                interior_min_in_s(|s| mf.potential(num, rho_of_s(a, s)))
                    .map(|(s, _)| rho_of_s(a, s))
                    .unwrap_or(0.0)
            } else {
                0.0
            };
            Some(located(num, closed, side))
        }
        _ => None,
    };
    let moments = well_moments(&mf, u_c_num, rho_star, d as f64);
    if !(moments.0.is_finite() && moments.2.is_finite()) {
        return Err(Error::invalid(format!(
            "σ_w² = {sigma_w2}, b = {b}, c = {c}, D = {d} are too extreme for the posterior moments in double precision; use moderate values"
        )));
    }
    let r_unaligned_leading = match u_s_num {
        Some(us) if first_order => Some(sigma_w2 / (d as f64 * (1.0 - u_c_num / us))),
        Some(_) => None,
        None => Some(sigma_w2 / d as f64),
    };
    Ok(PhaseReport {
        sigma_w2,
        b,
        c,
        d,
        kind: if first_order {
            "first-order"
        } else {
            "continuous"
        }
        .into(),
        u_fold: located(u_f_num, u_f_closed, rho_fold),
        u_coexist: located(u_c_num, u_c_closed, rho_star),
        u_spinodal,
        rho_star,
        r_unaligned_leading,
        r_aligned_leading: rho_star * rho_star,
        r_unaligned_at_d: moments.0,
        r_aligned_at_d: moments.1.is_finite().then_some(moments.1),
        side_weight_at_d: moments.2,
        tolerance: STATED_REL_TOL,
        rho_tolerance: RHO_TOL,
    })
}

/// E[ρ²] in the central and in the side wells of p(ρ) ∝ exp(−D·Ũ_u(ρ)), and the side mass,
/// split at the barrier between 0 and ρ* (trapezoid rule on a fine grid, ρ ≥ 0 by symmetry).
fn well_moments(mf: &MeanField, u: f64, rho_star: f64, d: f64) -> (f64, f64, f64) {
    let n = 20_000;
    let rho_hi = (rho_star + 8.0 * (mf.sigma_w2 / d).sqrt()).max(12.0 * (mf.sigma_w2 / d).sqrt());
    let h = rho_hi / n as f64;
    let vals: Vec<f64> = (0..=n).map(|i| d * mf.potential(u, i as f64 * h)).collect();
    let vmin = vals.iter().copied().fold(f64::INFINITY, f64::min);
    // Barrier: the maximum of Ũ between 0 and ρ*; without a side well the split is at ρ_hi.
    let split = if rho_star > 0.0 {
        let j_star = ((rho_star / h).round() as usize).min(n);
        (0..=j_star)
            .max_by(|&i, &j| vals[i].total_cmp(&vals[j]))
            .unwrap_or(n)
    } else {
        n
    };
    let mut sums = [[0.0f64; 2]; 2]; // [well][mass, second moment]
    for (i, v) in vals.iter().enumerate() {
        let r = i as f64 * h;
        let w = if i == 0 || i == n { 0.5 } else { 1.0 } * (-(v - vmin)).exp();
        let well = usize::from(i > split);
        sums[well][0] += w;
        sums[well][1] += w * r * r;
    }
    let centre = if sums[0][0] > 0.0 {
        sums[0][1] / sums[0][0]
    } else {
        f64::NAN
    };
    let side = if sums[1][0] > 0.0 {
        sums[1][1] / sums[1][0]
    } else {
        f64::NAN
    };
    let weight = sums[1][0] / (sums[0][0] + sums[1][0]);
    (centre, side, weight)
}

/// One row of the (u, c) phase diagram, from the closed forms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhaseRow {
    /// Cubic residual coefficient.
    pub c: f64,
    /// Fold (side minima appear); `None` without a transition.
    pub u_fold: Option<f64>,
    /// Equal-depth coexistence.
    pub u_coexist: Option<f64>,
    /// Spinodal; `None` when b = 0.
    pub u_spinodal: Option<f64>,
    /// ρ* at coexistence.
    pub rho_star: Option<f64>,
}

/// The phase diagram over c ∈ [c_min, c_max] (`points` values) at fixed σ_w², b.
pub fn phase_diagram(
    sigma_w2: f64,
    b: f64,
    c_min: f64,
    c_max: f64,
    points: usize,
) -> Result<Vec<PhaseRow>> {
    positive("σ_w² (hidden prior variance)", sigma_w2)?;
    super::finite("b (linear residual coefficient)", b)?;
    super::finite("c-min", c_min)?;
    super::finite("c-max", c_max)?;
    if c_max <= c_min {
        return Err(Error::invalid(format!(
            "c range [{c_min}, {c_max}] is not allowed; c-max must be larger than c-min"
        )));
    }
    let points = at_least("points", points, 2)?;
    (0..points)
        .map(|i| {
            let c = c_min + (c_max - c_min) * i as f64 / (points - 1) as f64;
            let mf = MeanField::new(sigma_w2, b, c)?;
            let coex = coexistence_closed_form(&mf);
            Ok(PhaseRow {
                c,
                u_fold: fold_closed_form(&mf).map(|x| x.0),
                u_coexist: coex.map(|x| x.0),
                u_spinodal: spinodal_closed_form(&mf),
                rho_star: coex.map(|x| x.1),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CASES: [(f64, f64, f64); 6] = [
        (1.0, 0.3, -0.3),
        (0.5, 0.3, -0.3),
        (0.5, 0.1, 0.6),
        (2.0, 0.2, -0.05),
        (1.0, 0.0, 0.5),
        (0.5, 0.3, 0.0),
    ];

    #[test]
    fn numerics_match_closed_forms_to_1e9() {
        for &(s, b, c) in &CASES {
            let r = phase(s, b, c, 20).unwrap();
            for (name, l) in [("fold", r.u_fold), ("coexist", r.u_coexist)] {
                assert!(l.rel_diff < 1e-9, "{name} σ²={s} b={b} c={c}: {l:?}");
            }
            if let Some(l) = r.u_spinodal {
                assert!(l.rel_diff < 1e-9, "spinodal σ²={s} b={b} c={c}: {l:?}");
            }
            let (_, rho_closed) =
                coexistence_closed_form(&MeanField::new(s, b, c).unwrap()).unwrap();
            // The minimiser of a flat minimum is located to ~√ε relative.
            assert!(
                (r.rho_star - rho_closed).abs() < RHO_TOL,
                "{} vs {rho_closed}",
                r.rho_star
            );
            assert!(r.u_fold.u <= r.u_coexist.u * (1.0 + 1e-12));
            if let Some(sp) = r.u_spinodal {
                assert!(r.u_coexist.u <= sp.u * (1.0 + 1e-12));
            }
        }
    }

    /// Brute force: the global minimiser of Ũ_u on a fine ρ grid, bisected in u.
    fn brute_force(mf: &MeanField) -> (f64, f64, f64) {
        let n = 40_000;
        let rho_max = 4.0;
        let grid: Vec<f64> = (0..=n).map(|i| rho_max * i as f64 / n as f64).collect();
        let side_is_deeper = |u: f64| {
            let vals: Vec<f64> = grid.iter().map(|&r| mf.potential(u, r)).collect();
            vals[1..].iter().any(|&v| v < vals[0])
        };
        let has_side_minimum = |u: f64| {
            let vals: Vec<f64> = grid.iter().map(|&r| mf.potential(u, r)).collect();
            (2..n).any(|i| vals[i] < vals[i - 1] && vals[i] <= vals[i + 1])
        };
        let centre_unstable = |u: f64| mf.potential(u, grid[1]) < 0.0;
        let bisect = |pred: &dyn Fn(f64) -> bool| {
            let (mut lo, mut hi): (f64, f64) = (1e-3, 1e4);
            for _ in 0..60 {
                let mid = (lo * hi).sqrt();
                if pred(mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            hi
        };
        (
            bisect(&has_side_minimum),
            bisect(&side_is_deeper),
            bisect(&centre_unstable),
        )
    }

    #[test]
    fn phase_matches_brute_force_grid_minimisation() {
        for &(s, b, c) in &CASES[..4] {
            let mf = MeanField::new(s, b, c).unwrap();
            let r = phase(s, b, c, 20).unwrap();
            let (fold, coexist, spinodal) = brute_force(&mf);
            let sp = r.u_spinodal.unwrap().u;
            assert!(
                (r.u_fold.u - fold).abs() / fold < 1e-4,
                "fold {} vs {fold}",
                r.u_fold.u
            );
            assert!(
                (r.u_coexist.u - coexist).abs() / coexist < 1e-4,
                "coexist {} vs {coexist}",
                r.u_coexist.u
            );
            assert!(
                (sp - spinodal).abs() / spinodal < 1e-4,
                "spinodal {sp} vs {spinodal}"
            );
        }
    }

    #[test]
    fn blog_figure_parameters_are_first_order() {
        // Blog Fig. 4.1: σ_w² = 0.5, b = 0.3, c = −0.3 shows equal-depth coexistence.
        let r = phase(0.5, 0.3, -0.3, 20).unwrap();
        assert_eq!(r.kind, "first-order");
        assert!(r.u_fold.u < r.u_coexist.u && r.u_coexist.u < r.u_spinodal.unwrap().u);
        // At coexistence the side well is at depth 0 = Ũ(0).
        let mf = MeanField::new(0.5, 0.3, -0.3).unwrap();
        assert!(mf.potential(r.u_coexist.u, r.rho_star).abs() < 1e-12);
        // Leading-order moments: R jumps from O(1/D) to ρ*².
        assert!(r.r_unaligned_leading.unwrap() < 0.2 && r.r_aligned_leading > 0.3);
        assert!(r.r_aligned_at_d.unwrap() > 5.0 * r.r_unaligned_at_d);
    }

    #[test]
    fn continuous_case_collapses_to_spinodal() {
        let r = phase(0.5, 0.3, 0.0, 20).unwrap();
        assert_eq!(r.kind, "continuous");
        let sp = r.u_spinodal.unwrap().u;
        assert!((r.u_coexist.u - sp).abs() < 1e-12 * sp && (r.u_fold.u - sp).abs() < 1e-12 * sp);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(phase(0.0, 0.3, -0.3, 20).is_err());
        assert!(phase(1.0, f64::NAN, -0.3, 20).is_err());
        assert!(phase(1.0, 0.0, 0.0, 20).is_err());
        assert!(phase(1.0, 0.3, -0.3, 0).is_err());
        assert!(phase_diagram(1.0, 0.3, 1.0, -1.0, 10).is_err());
    }
}
