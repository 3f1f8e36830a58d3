//! P\*\_coex: the first sign change of ΔF, interpolated linearly in ln P between the two cells
//! that bracket it, with a parametric bootstrap over the cells.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::rows::CellRow;
use super::threshold::{normal, threshold, Resolution, Threshold};

/// Where ΔF (in order of P) first reaches zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Root {
    /// ΔF is exactly zero at cell i.
    At(usize),
    /// ΔF changes sign between cells i and i + 1, both finite.
    Between(usize),
    /// ΔF changes sign between cells i and i + 1, one of them a single basin (±∞).
    Bracket(usize),
}

pub(super) fn find_root(df: &[f64]) -> Option<Root> {
    for i in 0..df.len() {
        if df[i] == 0.0 {
            return Some(Root::At(i));
        }
        if i + 1 < df.len() && df[i] * df[i + 1] < 0.0 {
            let finite = df[i].is_finite() && df[i + 1].is_finite();
            return Some(if finite {
                Root::Between(i)
            } else {
                Root::Bracket(i)
            });
        }
    }
    None
}

/// ln P of a root: interpolated linearly in ln P, or uniform within a bracket (`u` ∈ [0, 1)).
fn root_ln_p(root: Root, df: &[f64], ln_p: &[f64], u: f64) -> f64 {
    match root {
        Root::At(i) => ln_p[i],
        Root::Between(i) => {
            let t = df[i] / (df[i] - df[i + 1]);
            ln_p[i] + t * (ln_p[i + 1] - ln_p[i])
        }
        Root::Bracket(i) => ln_p[i] + u * (ln_p[i + 1] - ln_p[i]),
    }
}

/// P\*\_coex: the first zero of ΔF (module docs).
pub(super) fn coexistence_threshold(
    rows: &[CellRow],
    replicates: usize,
    rng: &mut ChaCha8Rng,
) -> Threshold {
    let df: Vec<f64> = rows.iter().map(|r| r.delta_f.value).collect();
    let ln_p: Vec<f64> = rows.iter().map(|r| r.p.ln()).collect();
    let root = find_root(&df).expect("the caller checked the sign change");
    let reps: Vec<f64> = (0..replicates)
        .map(|_| {
            let drawn: Vec<f64> = rows
                .iter()
                .map(|r| {
                    let e = r.delta_f;
                    e.value + e.err.unwrap_or(0.0) * normal(rng)
                })
                .collect();
            let u: f64 = rng.random();
            find_root(&drawn).map_or(f64::NAN, |r| root_ln_p(r, &drawn, &ln_p, u).exp())
        })
        .collect();
    let show = |i: usize| {
        let e = rows[i].delta_f;
        match (e.value.is_finite(), e.err) {
            (true, Some(err)) => format!("ΔF = {:.3} ± {err:.3} at P = {}", e.value, rows[i].p),
            (true, None) => format!("ΔF = {:.3} at P = {}", e.value, rows[i].p),
            (false, _) => format!("a single basin at P = {}", rows[i].p),
        }
    };
    let no_err = rows
        .iter()
        .any(|r| r.delta_f.value.is_finite() && r.delta_f.err.is_none());
    let caveat = if no_err {
        "; a cell has no weight error (its report had no bootstrap replicates), so no error is given"
    } else {
        ""
    };
    let (value, resolution, bracket, why) = match root {
        Root::At(i) => (
            rows[i].p,
            Resolution::Resolved,
            None,
            format!("ΔF = 0 at the measured P = {}{caveat}", rows[i].p),
        ),
        Root::Between(i) => (
            root_ln_p(root, &df, &ln_p, 0.5).exp(),
            Resolution::Resolved,
            Some((rows[i].p, rows[i + 1].p)),
            format!(
                "ΔF changes sign between {} and {}, interpolated linearly in ln P{caveat}",
                show(i),
                show(i + 1)
            ),
        ),
        Root::Bracket(i) => (
            (ln_p[i] * 0.5 + ln_p[i + 1] * 0.5).exp(),
            Resolution::Bracketed,
            Some((rows[i].p, rows[i + 1].p)),
            format!(
                "ΔF changes sign between {} and {}, where ΔF has no value, so only the bracket is known; add sizes P between them",
                show(i),
                show(i + 1)
            ),
        ),
    };
    let mut t = threshold(Some(value), reps, resolution, bracket, why);
    if no_err && resolution == Resolution::Resolved {
        t.err = None;
        t.interval = None;
    }
    t
}
