//! The spinodals: where a basin's minimum disappears, from the 3/2 law of the fold (the depth
//! D^{2/3} linear in ln P near it) and the bracket of cells where the minimum stops existing.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::super::analysis::Estimate;
use super::rows::{CellRow, Phases};
use super::threshold::{normal, threshold, Resolution, Threshold};

/// Which basin a spinodal is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Basin {
    Lazy,
    Spec,
}

impl Basin {
    fn name(self) -> &'static str {
        match self {
            Basin::Lazy => "lazy",
            Basin::Spec => "specialised",
        }
    }

    fn exists(self, r: &CellRow) -> bool {
        matches!(
            (self, r.phases),
            (_, Phases::Both) | (Basin::Lazy, Phases::Lazy) | (Basin::Spec, Phases::Spec)
        )
    }

    fn depth(self, r: &CellRow) -> Option<Estimate> {
        match self {
            Basin::Lazy => r.depth_lazy,
            Basin::Spec => r.depth_spec,
        }
        .filter(|e| e.value.is_finite())
    }
}

/// The P at which `basin`'s minimum disappears, walking the cells towards larger P when `up`
/// (module docs). Works in t = ±ln P, so that the fold lies at larger t.
pub(super) fn spinodal(
    rows: &[CellRow],
    basin: Basin,
    up: bool,
    replicates: usize,
    rng: &mut ChaCha8Rng,
) -> Threshold {
    let name = basin.name();
    let sgn = if up { 1.0 } else { -1.0 };
    let order: Vec<&CellRow> = if up {
        rows.iter().collect()
    } else {
        rows.iter().rev().collect()
    };
    let t = |r: &CellRow| sgn * r.p.ln();
    let p_of = |t: f64| (sgn * t).exp();
    let Some(first) = order.iter().position(|r| basin.exists(r)) else {
        return threshold(
            None,
            vec![f64::NAN; replicates],
            Resolution::Unresolved,
            None,
            format!("the {name} minimum exists at no measured P"),
        );
    };
    let gone = (first + 1..order.len()).find(|&j| !basin.exists(order[j]));
    let last = gone.map_or(order.len() - 1, |j| j - 1);
    let bracket = gone.map(|j| (t(order[last]), t(order[j])));
    let bracket_p = gone.map(|j| {
        let (x, y) = (order[last].p, order[j].p);
        (x.min(y), x.max(y))
    });
    let with_depth: Vec<&CellRow> = order[first..=last]
        .iter()
        .copied()
        .filter(|r| basin.depth(r).is_some())
        .collect();
    let near_rows = &with_depth[with_depth.len().saturating_sub(2)..];
    let near: Vec<(f64, Estimate)> = near_rows
        .iter()
        .filter_map(|r| basin.depth(r).map(|e| (t(r), e)))
        .collect();
    let near = near.as_slice();
    let fold = (near.len() == 2)
        .then(|| fold_root(near[0].0, near[0].1.value, near[1].0, near[1].1.value))
        .flatten();
    let depths = || {
        near.iter()
            .zip(near_rows)
            .map(|((_, e), r)| match e.err {
                Some(err) => format!("{:.3} ± {err:.3} kT at P = {}", e.value, r.p),
                None => format!("{:.3} kT at P = {}", e.value, r.p),
            })
            .collect::<Vec<_>>()
            .join(" and ")
    };
    match (fold, bracket) {
        (Some(t0), Some((a, b))) if t0 >= a && t0 <= b => {
            let reps = fold_replicates(near, (a, b), replicates, rng)
                .into_iter()
                .map(p_of)
                .collect();
            let (lo, hi) = bracket_p.expect("a bracket");
            let why = format!(
                "the depth of the {name} minimum ({}), extrapolated as depth^(2/3) linear in ln P, vanishes inside the bracket P = {lo} to {hi} where the minimum disappears",
                depths()
            );
            let mut th = threshold(Some(p_of(t0)), reps, Resolution::Resolved, bracket_p, why);
            drop_err_without_depth_errors(&mut th, near);
            th
        }
        (_, Some((a, b))) => {
            let reps = (0..replicates)
                .map(|_| p_of(a + rng.random::<f64>() * (b - a)))
                .collect();
            let (lo, hi) = bracket_p.expect("a bracket");
            let why = match fold {
                Some(t0) => format!(
                    "the {name} minimum disappears between P = {lo} and {hi}; its depth ({}) extrapolates to zero at P = {:.4}, outside that bracket, so only the bracket is known",
                    depths(),
                    p_of(t0)
                ),
                None => format!(
                    "the {name} minimum disappears between P = {lo} and {hi}; fewer than two cells before it give a depth that falls towards the fold, so only the bracket is known"
                ),
            };
            threshold(Some(p_of(0.5 * (a + b))), reps, Resolution::Bracketed, bracket_p, why)
        }
        (Some(t0), None) if t0 - t(order[last]) > MAX_EXTRAPOLATION.ln() => threshold(
            None,
            vec![f64::NAN; replicates],
            Resolution::Unresolved,
            None,
            format!(
                "the {name} minimum exists at every measured P; its depth ({}) extrapolates to zero only at P = {:.4}, more than {MAX_EXTRAPOLATION}× beyond the last cell, where the fold's 3/2 law no longer holds; extend the grid {} P = {}",
                depths(),
                p_of(t0),
                if up { "above" } else { "below" },
                order[last].p
            ),
        ),
        (Some(t0), None) => {
            let cap = t(order[last]) + MAX_EXTRAPOLATION.ln();
            let reps = fold_replicates(near, (t(order[last]), f64::INFINITY), replicates, rng)
                .into_iter()
                .map(|x| if x <= cap { p_of(x) } else { f64::NAN })
                .collect();
            let why = format!(
                "the {name} minimum exists at every measured P from the first where it appears; its depth ({}) extrapolates to zero at P = {:.4}, beyond the grid",
                depths(),
                p_of(t0)
            );
            let mut th = threshold(Some(p_of(t0)), reps, Resolution::Extrapolated, None, why);
            drop_err_without_depth_errors(&mut th, near);
            th
        }
        (None, None) => threshold(
            None,
            vec![f64::NAN; replicates],
            Resolution::Unresolved,
            None,
            format!(
                "the {name} minimum exists at every measured P and its depth does not fall towards a fold over the two nearest cells; extend the grid {} P = {}",
                if up { "above" } else { "below" },
                order[last].p
            ),
        ),
    }
}

/// How far beyond the grid (a factor in P) a spinodal is extrapolated. The 3/2 law holds near
/// the fold only (the normal form of a saddle-node bifurcation; Strogatz, *Nonlinear Dynamics
/// and Chaos*, §3.1); a depth that falls slowly over the last two cells puts the root decades
/// away with an error as large, which is no measurement. Beyond this factor the spinodal is
/// unresolved and the grid should be extended; replicates beyond it count as failed.
pub(super) const MAX_EXTRAPOLATION: f64 = 4.0;

fn drop_err_without_depth_errors(th: &mut Threshold, near: &[(f64, Estimate)]) {
    if near.iter().any(|n| n.1.err.is_none()) {
        th.err = None;
        th.interval = None;
        th.why +=
            "; a depth has no error (its report had no bootstrap replicates), so no error is given";
    }
}

/// The zero t₀ ≥ t₂ of the line of D^{2/3} through (t₁, D₁) and (t₂, D₂), t₁ < t₂ (the 3/2
/// law of the module docs); None unless the depth falls from t₁ to t₂.
pub(super) fn fold_root(t1: f64, d1: f64, t2: f64, d2: f64) -> Option<f64> {
    let (y1, y2) = (d1.max(0.0).powf(2.0 / 3.0), d2.max(0.0).powf(2.0 / 3.0));
    if y2 == 0.0 {
        return Some(t2);
    }
    (y2 < y1).then(|| t2 + y2 * (t2 - t1) / (y1 - y2))
}

/// Replicates of the fold: each depth drawn from N(D, σ²), the root clamped into `range`
/// (the fold lies beyond the last cell where the minimum exists, and before the first where
/// it does not). NaN for a replicate whose depth does not fall.
fn fold_replicates(
    near: &[(f64, Estimate)],
    range: (f64, f64),
    replicates: usize,
    rng: &mut ChaCha8Rng,
) -> Vec<f64> {
    let draw = |e: Estimate, rng: &mut ChaCha8Rng| e.value + e.err.unwrap_or(0.0) * normal(rng);
    (0..replicates)
        .map(|_| {
            let d1 = draw(near[0].1, rng);
            let d2 = draw(near[1].1, rng);
            fold_root(near[0].0, d1, near[1].0, d2).map_or(f64::NAN, |t| t.clamp(range.0, range.1))
        })
        .collect()
}
