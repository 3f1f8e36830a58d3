//! The input of the thresholds: one [`CellSummary`] per (d, P) cell, read off its free-energy
//! report — the lowest-s (lazy) and highest-s (specialised) basin with their weights and depths,
//! or its single basin.

use serde::Serialize;

use super::super::analysis::{Estimate, FreeEnergyReport};
use super::error::CoexistenceError;

/// One basin of a cell as the thresholds need it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Side {
    /// s at the basin's minimum of F.
    pub min_s: f64,
    /// The basin's weight with its error.
    pub weight: Estimate,
    /// F_top − F_min in kT: the depth of the basin's minimum below the barrier top between it and
    /// its neighbouring basin (+∞ when a bin between them has no weight).
    pub depth: Estimate,
}

/// The basins of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CellBasins {
    /// Two or more basins: the lowest-s (lazy) and the highest-s (specialised) one.
    Two {
        /// The lowest-s basin.
        lazy: Side,
        /// The highest-s basin.
        spec: Side,
    },
    /// One basin, with its minimum at `min_s`.
    One {
        /// s at the minimum of F.
        min_s: f64,
    },
}

/// What the thresholds need of one cell's free-energy report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CellSummary {
    /// The input dimension.
    pub d: f64,
    /// The number of samples.
    #[serde(rename = "P")]
    pub p: f64,
    /// Its basins.
    pub basins: CellBasins,
}

impl CellSummary {
    /// The summary of `report`, measured at (d, P): its lowest-s and highest-s basins with
    /// their weights and depths, or its single basin. The depth of a basin is F at the highest
    /// bin between its minimum and its neighbour's minus F at its own minimum; with two basins
    /// its error is the report's bootstrap error of the barrier (which sees the correlation of
    /// the two bins), otherwise √(σ_top² + σ_min²) of the profile's errors.
    pub fn from_report(
        d: f64,
        p: f64,
        report: &FreeEnergyReport,
    ) -> Result<CellSummary, CoexistenceError> {
        let b = &report.basins;
        let basins = match b.len() {
            0 => {
                return Err(CoexistenceError::InvalidInput(format!(
                    "the free-energy report at d = {d}, P = {p} has no basin (its profile has no finite bin)"
                )))
            }
            1 => CellBasins::One { min_s: b[0].min_s },
            n => {
                let side = |i: usize, j: usize| Side {
                    min_s: b[i].min_s,
                    weight: Estimate {
                        value: b[i].weight,
                        err: b[i].weight_err,
                    },
                    depth: depth(report, i, j),
                };
                CellBasins::Two {
                    lazy: side(0, 1),
                    spec: side(n - 1, n - 2),
                }
            }
        };
        let cell = CellSummary { d, p, basins };
        cell.check()?;
        Ok(cell)
    }

    pub(super) fn check(&self) -> Result<(), CoexistenceError> {
        let (d, p) = (self.d, self.p);
        let bad = |m: String| Err(CoexistenceError::InvalidInput(m));
        if !(d.is_finite() && d > 0.0 && p.is_finite() && p > 0.0) {
            return bad(format!(
                "a cell at d = {d}, P = {p} is not allowed; d and P must be finite and positive"
            ));
        }
        let sides = match &self.basins {
            CellBasins::One { min_s } if !min_s.is_finite() => {
                return bad(format!(
                "the basin at d = {d}, P = {p} has its minimum at s = {min_s}, which is not finite"
            ))
            }
            CellBasins::One { .. } => return Ok(()),
            CellBasins::Two { lazy, spec } => [("lazy", lazy), ("specialised", spec)],
        };
        for (name, s) in sides {
            let w = s.weight.value;
            let errs_ok = [s.weight.err, s.depth.err]
                .iter()
                .all(|e| e.is_none_or(|e| e.is_finite() && e >= 0.0));
            if !(w > 0.0 && w <= 1.0 && s.min_s.is_finite() && !s.depth.value.is_nan() && errs_ok) {
                return bad(format!(
                    "the {name} basin at d = {d}, P = {p} (weight {w}, minimum at s = {}, depth {}) is not allowed; a weight lies in (0, 1], errors are finite and ≥ 0",
                    s.min_s, s.depth.value
                ));
            }
        }
        Ok(())
    }
}

/// The depth of basin i below the barrier top between it and basin j (see
/// [`CellSummary::from_report`]).
fn depth(report: &FreeEnergyReport, i: usize, j: usize) -> Estimate {
    let prof = &report.profile;
    let bin = |s: f64| {
        (0..prof.s.len())
            .min_by(|&a, &b| (prof.s[a] - s).abs().total_cmp(&(prof.s[b] - s).abs()))
            .unwrap_or(0)
    };
    let f = |k: usize| prof.f.get(k).copied().flatten().unwrap_or(f64::INFINITY);
    let (a, b) = (bin(report.basins[i].min_s), bin(report.basins[j].min_s));
    let top = (a.min(b)..=a.max(b))
        .max_by(|&x, &y| f(x).total_cmp(&f(y)).then(y.cmp(&x)))
        .unwrap_or(a);
    let value = f(top) - f(a);
    let barrier_err = report.barrier.as_ref().and_then(|bar| {
        if report.basins.len() != 2 || bar.basins != (0, 1) {
            return None;
        }
        if f(a) <= f(b) {
            bar.height.err
        } else {
            bar.height_from_shallower.err
        }
    });
    let profile_err = || {
        let e = |k: usize| prof.f_err.get(k).copied().flatten();
        Some((e(top)?.powi(2) + e(a)?.powi(2)).sqrt())
    };
    Estimate {
        value,
        err: barrier_err.or_else(profile_err),
    }
}
