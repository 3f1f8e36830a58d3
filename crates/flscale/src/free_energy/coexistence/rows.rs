//! The cells of one d as the thresholds read them: which minima exist, ΔF = −ln(w_spec/w_lazy)
//! with its delta-method error, the depths, and repeats at one P averaged.

use serde::Serialize;

use super::super::analysis::Estimate;
use super::cells::{CellBasins, CellSummary, Side};
use super::error::CoexistenceError;

/// Which basins a cell has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phases {
    /// Both minima.
    Both,
    /// Only the lazy minimum.
    Lazy,
    /// Only the specialised minimum.
    Spec,
}

/// One cell of a row, as the thresholds read it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CellRow {
    /// The number of samples.
    #[serde(rename = "P")]
    pub p: f64,
    /// Which minima exist.
    pub phases: Phases,
    /// ΔF = −ln(w_spec/w_lazy) with its error; ±∞ (null in JSON) with one basin.
    pub delta_f: Estimate,
    /// Depth of the lazy minimum, when it has a barrier.
    pub depth_lazy: Option<Estimate>,
    /// Depth of the specialised minimum, when it has a barrier.
    pub depth_spec: Option<Estimate>,
}

/// Each cell's phases, ΔF and depths (single basins classified as in the module docs).
pub(super) fn cell_rows(cells: &[CellSummary]) -> Vec<CellRow> {
    let twos: Vec<(usize, f64, f64)> = cells
        .iter()
        .enumerate()
        .filter_map(|(k, c)| match c.basins {
            CellBasins::Two { lazy, spec } => Some((k, lazy.min_s, spec.min_s)),
            CellBasins::One { .. } => None,
        })
        .collect();
    let minima: Vec<f64> = cells
        .iter()
        .map(|c| match c.basins {
            CellBasins::Two { lazy, .. } => lazy.min_s,
            CellBasins::One { min_s } => min_s,
        })
        .chain(cells.iter().filter_map(|c| match c.basins {
            CellBasins::Two { spec, .. } => Some(spec.min_s),
            CellBasins::One { .. } => None,
        }))
        .collect();
    let mid = (minima.iter().copied().fold(f64::INFINITY, f64::min)
        + minima.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        / 2.0;
    let is_lazy = |k: usize, min_s: f64| -> bool {
        let ln_p = cells[k].p.ln();
        let nearest = twos.iter().min_by(|a, b| {
            let da = (cells[a.0].p.ln() - ln_p).abs();
            let db = (cells[b.0].p.ln() - ln_p).abs();
            da.total_cmp(&db)
        });
        match nearest {
            Some(&(_, lazy, spec)) => (min_s - lazy).abs() <= (min_s - spec).abs(),
            None => min_s <= mid,
        }
    };
    cells
        .iter()
        .enumerate()
        .map(|(k, c)| match c.basins {
            CellBasins::Two { lazy, spec } => CellRow {
                p: c.p,
                phases: Phases::Both,
                delta_f: delta_f(&lazy, &spec),
                depth_lazy: Some(lazy.depth),
                depth_spec: Some(spec.depth),
            },
            CellBasins::One { min_s } => {
                let lazy = is_lazy(k, min_s);
                CellRow {
                    p: c.p,
                    phases: if lazy { Phases::Lazy } else { Phases::Spec },
                    delta_f: Estimate {
                        value: if lazy {
                            f64::INFINITY
                        } else {
                            f64::NEG_INFINITY
                        },
                        err: None,
                    },
                    depth_lazy: None,
                    depth_spec: None,
                }
            }
        })
        .collect()
}

/// One row per P: repeats at the same P (other seeds, other starts) averaged, each value's
/// error the larger of the within-run error of the mean and the spread between repeats (module
/// docs). Repeats that disagree on which minima exist are refused: the cell's phase is then not
/// known.
pub(super) fn merge_repeats(rows: Vec<CellRow>, d: f64) -> Result<Vec<CellRow>, CoexistenceError> {
    let mut out = Vec::new();
    for group in rows.chunk_by(|a, b| a.p == b.p) {
        let first = group[0];
        if group.iter().any(|r| r.phases != first.phases) {
            let phases: Vec<String> = group.iter().map(|r| format!("{:?}", r.phases)).collect();
            return Err(CoexistenceError::InvalidInput(format!(
                "the {} repeats at d = {d}, P = {} disagree on which minima exist ({}), so the cell's phase is unknown; run them longer or drop the odd one",
                group.len(),
                first.p,
                phases.join(", ").to_lowercase()
            )));
        }
        let depth = |pick: fn(&CellRow) -> Option<Estimate>| -> Option<Estimate> {
            let all: Option<Vec<Estimate>> = group.iter().map(pick).collect();
            all.map(|v| mean_of_repeats(&v))
        };
        out.push(CellRow {
            p: first.p,
            phases: first.phases,
            delta_f: mean_of_repeats(&group.iter().map(|r| r.delta_f).collect::<Vec<_>>()),
            depth_lazy: depth(|r| r.depth_lazy),
            depth_spec: depth(|r| r.depth_spec),
        });
    }
    Ok(out)
}

/// The mean of repeated estimates, with the larger of √(Σσ²)/n (the within-run errors; taken as
/// 0 where missing) and s/√n (the spread between repeats): errors from one run are a lower bound
/// when a slow mode outlives it (spec 07), so the larger is quoted. A non-finite value (a single
/// basin's ΔF, a depth over an empty bin) is kept as it is.
fn mean_of_repeats(v: &[Estimate]) -> Estimate {
    let n = v.len() as f64;
    if v.len() == 1 || v.iter().any(|e| !e.value.is_finite()) {
        return v[0];
    }
    let m = v.iter().map(|e| e.value).sum::<f64>() / n;
    let within = v
        .iter()
        .map(|e| e.err.unwrap_or(0.0).powi(2))
        .sum::<f64>()
        .sqrt()
        / n;
    let between =
        (v.iter().map(|e| (e.value - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() / n.sqrt();
    Estimate {
        value: m,
        err: Some(within.max(between)),
    }
}

/// ΔF = −ln(w_spec/w_lazy) with the delta-method error of the module docs.
fn delta_f(lazy: &Side, spec: &Side) -> Estimate {
    let (wl, ws) = (lazy.weight.value, spec.weight.value);
    Estimate {
        value: -(ws / wl).ln(),
        err: match (lazy.weight.err, spec.weight.err) {
            (Some(el), Some(es)) => Some(es / ws + el / wl),
            _ => None,
        },
    }
}
