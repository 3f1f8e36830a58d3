//! Two thresholds from the free energies of a sweep: the coexistence P\*\_coex and the spinodals
//! of the lazy and the specialised basin, per d, each with an error (spec 07, "Outputs").
//!
//! The input is one [`CellSummary`] per (d, P) cell — the lowest-s ("lazy") and highest-s
//! ("specialised") basin of its [`FreeEnergyReport`], or its single basin — and the output one
//! [`CoexistenceRow`] per d.
//!
//! * **Coexistence** is the P at which the two basins have equal weight, ΔF(P) = 0 with
//!   ΔF = −ln(w_spec/w_lazy) (the equal-weight rule for a first-order transition: Binder, Rep.
//!   Prog. Phys. 50, 783 (1987), §3; Borgs & Kotecký, J. Stat. Phys. 61, 79 (1990)). ΔF is
//!   smooth through the transition, so the root is found by *linear interpolation of ΔF in
//!   ln P between the two cells that bracket its first sign change*. Not a fit over more cells:
//!   ΔF is not linear in ln P over a wide range (near the transition ΔF ≈ P·Δf, linear in P),
//!   and a line through distant cells trades a small interpolation error for a bias that does
//!   not shrink as the grid is refined; between neighbouring cells ln P and P agree to first
//!   order. The error is a parametric bootstrap over cells: every replicate draws each cell's
//!   ΔF from N(ΔF, σ²) and finds the root again (Efron & Tibshirani, *An Introduction to the
//!   Bootstrap*, 1993, §6.5).
//! * **ΔF's error** is the delta method applied to the basin weights' bootstrap errors:
//!   σ_ΔF = σ_spec/w_spec + σ_lazy/w_lazy, the sum rather than the root of the sum of squares
//!   because the weights are anticorrelated (with two basins w_spec = 1 − w_lazy exactly, and
//!   then the sum is the exact first-order error); for three or more basins it is an upper bound.
//! * **A single basin** means one minimum has vanished. The cell's basin is the lazy one when its
//!   minimum lies nearer the lazy minimum than the specialised one of the nearest two-basin
//!   cell (in ln P) at the same d; when no cell at that d has two basins, when it lies in the
//!   lower half of the range of minima seen at that d. Its ΔF is +∞ (lazy only) or −∞
//!   (specialised only): it fixes the sign but no value, so a sign change next to such a cell is
//!   only bracketed.
//! * **Spinodals** are the P at which a basin stops being a local minimum of F (a fold, or
//!   saddle-node bifurcation, of the metastable minimum). Near a fold the depth D of the
//!   minimum below its barrier vanishes as D ∝ (P_sp − P)^{3/2}: the normal form V = x³/3 − εx
//!   has the barrier (4/3)ε^{3/2} (Gilmore, *Catastrophe Theory for Scientists and Engineers*,
//!   1981, ch. 5; the "3/2 law" of Garg, Phys. Rev. B 51, 15592 (1995)). D^{2/3} is therefore
//!   linear in the control parameter near the fold; the two cells nearest the fold where the
//!   minimum exists give a line of D^{2/3} against ln P, and its zero is the spinodal. Two cells
//!   rather than more because the law is asymptotic: the cells nearest the fold follow it best.
//!   The cells where the minimum exists and the first where it does not bracket the fold; the
//!   extrapolation is *resolved* when it lands inside that bracket, *extrapolated* when the
//!   minimum exists at every measured P, and the bracket alone is reported when the line misses
//!   it. A basin shallower than the profile analysis's prominence (0.5 kT, or twice the noise)
//!   is merged into its neighbour, so "absent" means a depth below that, which D^{2/3} reaches
//!   only just before the fold. The lazy minimum folds on the side where ΔF < 0 (where it is the
//!   less stable one), the specialised one on the other.
//! * **Repeats** at the same (d, P) (other seeds, hot and cold starts) are averaged before
//!   anything else: each ΔF and depth is the repeats' mean, with the larger of the within-run
//!   error of the mean and the spread between repeats, since errors from one run are a lower
//!   bound when a slow mode outlives it (spec 07). Repeats that disagree on which minima exist
//!   are refused.
//! * **Only bracketed** values are the bracket's geometric midpoint, and their replicates are
//!   uniform in ln P across the bracket (the rule of [`crate::experiment::pstar`]), so an
//!   exponent fitted through replicates carries the bracket's width.
//!
//! Replicates of row g draw from ChaCha8 stream (seed, g) sequentially: the same seed gives the
//! same numbers on any thread count.

use std::fmt;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use serde::Serialize;

use super::analysis::{Estimate, FreeEnergyReport};

/// Replicates of the parametric bootstrap unless told otherwise.
pub const DEFAULT_REPLICATES: usize = 1000;

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

/// Why the thresholds could not be computed. Every variant is bad input (the cells or the grid
/// cannot give an answer), exit code 2 through `From<CoexistenceError>` for [`crate::Error`].
#[derive(Debug, Clone, PartialEq)]
pub enum CoexistenceError {
    /// A malformed cell; the message names it.
    InvalidInput(String),
    /// A d with fewer than two sizes P.
    TooFewSizes {
        /// The d.
        d: f64,
        /// Its number of distinct P.
        sizes: usize,
    },
    /// ΔF keeps one sign over every measured P at a d.
    NoSignChange {
        /// The d.
        d: f64,
        /// ΔF > 0 everywhere (the lazy basin always the heavier).
        positive: bool,
        /// The smallest and largest measured P.
        p_range: (f64, f64),
    },
}

impl fmt::Display for CoexistenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoexistenceError::InvalidInput(m) => f.write_str(m),
            CoexistenceError::TooFewSizes { d, sizes } => write!(
                f,
                "d = {d} has free energies at {sizes} value(s) of P, but coexistence needs at least two to bracket ΔF = 0; add sizes P at d = {d}"
            ),
            CoexistenceError::NoSignChange {
                d,
                positive,
                p_range: (lo, hi),
            } => {
                let (sign, heavier, extend) = if *positive {
                    ("positive", "lazy", format!("above P = {hi}"))
                } else {
                    ("negative", "specialised", format!("below P = {lo}"))
                };
                write!(
                    f,
                    "ΔF = −ln(w_spec/w_lazy) is {sign} at every measured P at d = {d} (P = {lo} to {hi}: the {heavier} basin is always the heavier), so no pair of cells brackets coexistence; extend the grid {extend}"
                )
            }
        }
    }
}

impl std::error::Error for CoexistenceError {}

impl From<CoexistenceError> for crate::Error {
    fn from(e: CoexistenceError) -> Self {
        crate::Error::invalid(e.to_string())
    }
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

    fn check(&self) -> Result<(), CoexistenceError> {
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

/// Settings of [`coexistence_table`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoexistenceOptions {
    /// Parametric-bootstrap replicates (every threshold of every row has this many).
    pub replicates: usize,
    /// Seed of the replicates' ChaCha8 streams.
    pub seed: u64,
}

impl Default for CoexistenceOptions {
    fn default() -> Self {
        CoexistenceOptions {
            replicates: DEFAULT_REPLICATES,
            seed: 0,
        }
    }
}

/// How far a threshold is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Interpolated between the cells that bracket it.
    Resolved,
    /// A spinodal extrapolated beyond every measured P (the minimum exists at all of them).
    Extrapolated,
    /// Only the two cells between which it lies are known.
    Bracketed,
    /// The cells say nothing about it.
    Unresolved,
}

/// One threshold of one d.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Threshold {
    /// P at the threshold (the bracket's geometric midpoint when only bracketed); None when
    /// unresolved.
    #[serde(rename = "P")]
    pub value: Option<f64>,
    /// Standard deviation of the replicates.
    pub err: Option<f64>,
    /// The 2.5–97.5 % percentiles of the replicates.
    pub interval: Option<(f64, f64)>,
    /// The two measured P between which it lies, when known.
    pub bracket: Option<(f64, f64)>,
    /// How far it is known.
    pub resolution: Resolution,
    /// One sentence: where the value comes from, or why there is none.
    pub why: String,
    /// Every replicate's P (NaN where a replicate found none): what an exponent fit resamples.
    #[serde(skip)]
    pub replicates: Vec<f64>,
}

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

/// The thresholds of one d.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoexistenceRow {
    /// The d.
    pub d: f64,
    /// Its cells in order of P.
    pub cells: Vec<CellRow>,
    /// ΔF(P) = 0.
    pub coexistence: Threshold,
    /// Where the lazy minimum disappears.
    pub spinodal_lazy: Threshold,
    /// Where the specialised minimum disappears.
    pub spinodal_spec: Threshold,
}

/// The thresholds of every d, in order of d.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoexistenceTable {
    /// One row per d.
    pub rows: Vec<CoexistenceRow>,
    /// Replicates per threshold.
    pub replicates: usize,
}

/// The thresholds of every d from the cells of a sweep (module docs). Cells need not be in
/// order; repeats at one (d, P) are averaged. Refused in one sentence: a malformed cell,
/// repeats that disagree on which minima exist, a d with fewer than two P, a d whose ΔF never
/// changes sign.
pub fn coexistence_table(
    cells: &[CellSummary],
    opts: &CoexistenceOptions,
) -> Result<CoexistenceTable, CoexistenceError> {
    if cells.is_empty() {
        return Err(CoexistenceError::InvalidInput(
            "no free-energy cell was given; coexistence needs cells at two or more P per d".into(),
        ));
    }
    for c in cells {
        c.check()?;
    }
    let mut sorted: Vec<CellSummary> = cells.to_vec();
    sorted.sort_by(|a, b| a.d.total_cmp(&b.d).then(a.p.total_cmp(&b.p)));
    let mut rows = Vec::new();
    for (g, group) in sorted.chunk_by(|a, b| a.d == b.d).enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
        rng.set_stream(g as u64);
        rows.push(coexistence_row(group, opts.replicates, &mut rng)?);
    }
    Ok(CoexistenceTable {
        rows,
        replicates: opts.replicates,
    })
}

/// The thresholds of one d; `cells` in order of P.
fn coexistence_row(
    cells: &[CellSummary],
    replicates: usize,
    rng: &mut ChaCha8Rng,
) -> Result<CoexistenceRow, CoexistenceError> {
    let d = cells[0].d;
    let sizes = cells.chunk_by(|a, b| a.p == b.p).count();
    if sizes < 2 {
        return Err(CoexistenceError::TooFewSizes { d, sizes });
    }
    let rows = merge_repeats(cell_rows(cells), d)?;
    let df: Vec<f64> = rows.iter().map(|r| r.delta_f.value).collect();
    let Some(first) = df.iter().copied().find(|&x| x != 0.0) else {
        return Err(CoexistenceError::InvalidInput(format!(
            "ΔF is exactly 0 at every P at d = {d}, which no pair of basins gives; check the cells"
        )));
    };
    if find_root(&df).is_none() {
        return Err(CoexistenceError::NoSignChange {
            d,
            positive: first > 0.0,
            p_range: (cells[0].p, cells[cells.len() - 1].p),
        });
    }
    let coexistence = coexistence_threshold(&rows, replicates, rng);
    // The lazy minimum folds where it is the less stable one: above coexistence when ΔF starts
    // positive (lazy heavier at small P).
    let lazy_up = first > 0.0;
    let spinodal_lazy = spinodal(&rows, Basin::Lazy, lazy_up, replicates, rng);
    let spinodal_spec = spinodal(&rows, Basin::Spec, !lazy_up, replicates, rng);
    Ok(CoexistenceRow {
        d,
        cells: rows,
        coexistence,
        spinodal_lazy,
        spinodal_spec,
    })
}

/// Each cell's phases, ΔF and depths (single basins classified as in the module docs).
fn cell_rows(cells: &[CellSummary]) -> Vec<CellRow> {
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
fn merge_repeats(rows: Vec<CellRow>, d: f64) -> Result<Vec<CellRow>, CoexistenceError> {
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

/// Where ΔF (in order of P) first reaches zero.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Root {
    /// ΔF is exactly zero at cell i.
    At(usize),
    /// ΔF changes sign between cells i and i + 1, both finite.
    Between(usize),
    /// ΔF changes sign between cells i and i + 1, one of them a single basin (±∞).
    Bracket(usize),
}

fn find_root(df: &[f64]) -> Option<Root> {
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

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    rng.sample::<f64, _>(StandardNormal)
}

/// P\*\_coex: the first zero of ΔF (module docs).
fn coexistence_threshold(rows: &[CellRow], replicates: usize, rng: &mut ChaCha8Rng) -> Threshold {
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

/// Which basin a spinodal is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Basin {
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
fn spinodal(
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
        (Some(t0), None) => {
            let reps = fold_replicates(near, (t(order[last]), f64::INFINITY), replicates, rng)
                .into_iter()
                .map(p_of)
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
fn fold_root(t1: f64, d1: f64, t2: f64, d2: f64) -> Option<f64> {
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

/// A threshold from its value and replicates: the error is their standard deviation, the
/// interval their 2.5–97.5 % percentiles, when at least half of them found a value.
fn threshold(
    value: Option<f64>,
    replicates: Vec<f64>,
    resolution: Resolution,
    bracket: Option<(f64, f64)>,
    why: String,
) -> Threshold {
    let mut ok: Vec<f64> = replicates
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    ok.sort_by(f64::total_cmp);
    let n = ok.len();
    let enough = value.is_some() && n >= 2 && 2 * n >= replicates.len();
    let err = enough.then(|| {
        let m = ok.iter().sum::<f64>() / n as f64;
        (ok.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    });
    let q = |p: f64| {
        let h = (n - 1) as f64 * p;
        let (i, j) = (h.floor() as usize, (h.floor() as usize + 1).min(n - 1));
        ok[i] + (h - i as f64) * (ok[j] - ok[i])
    };
    Threshold {
        value,
        err,
        interval: enough.then(|| (q(0.025), q(0.975))),
        bracket,
        resolution,
        why,
        replicates,
    }
}

#[cfg(test)]
mod tests {
    use super::super::analysis::{Barrier, Basin as ReportBasin, Diagnostics, Profile};
    use super::*;

    /// A two-basin cell with ΔF = `df` ± `err`: w_lazy = 1/(1 + e^{−ΔF}), w_spec = 1 − w_lazy,
    /// and weight errors σ_w = err·w_lazy·w_spec, which the delta method turns back into `err`.
    fn two(d: f64, p: f64, df: f64, err: f64) -> CellSummary {
        let wl = 1.0 / (1.0 + (-df).exp());
        let ws = 1.0 - wl;
        let side = |min_s: f64, w: f64| Side {
            min_s,
            weight: Estimate {
                value: w,
                err: Some(err * wl * ws),
            },
            depth: Estimate {
                value: 3.0,
                err: Some(0.1),
            },
        };
        CellSummary {
            d,
            p,
            basins: CellBasins::Two {
                lazy: side(0.05, wl),
                spec: side(0.8, ws),
            },
        }
    }

    fn gaussian(rng: &mut ChaCha8Rng) -> f64 {
        rng.sample::<f64, _>(StandardNormal)
    }

    /// ΔF(P) = a·ln(P0/P) per d with P0 = c·d^α, measured with noise σ = 0.1 on a grid that
    /// never hits P0: P\*_coex recovers P0 within its errors, the errors are what σ/a gives, and
    /// ln P\* against ln d has slope α.
    #[test]
    fn coexistence_recovers_a_known_root_and_its_exponent() {
        let (a, c, alpha, sigma) = (2.0, 3.0, 1.5, 0.1);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let ds = [8.0, 16.0, 32.0, 64.0];
        let mut cells = Vec::new();
        for &d in &ds {
            let p0: f64 = c * f64::powf(d, alpha);
            for k in -2..=2 {
                let p = p0 * 1.2 * 1.5f64.powi(k);
                let df = a * (p0 / p).ln() + sigma * gaussian(&mut rng);
                cells.push(two(d, p, df, sigma));
            }
        }
        cells.reverse();
        let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
        assert_eq!(t.rows.len(), 4);
        let mut pts = Vec::new();
        for r in &t.rows {
            let p0 = c * r.d.powf(alpha);
            let x = &r.coexistence;
            assert_eq!(x.resolution, Resolution::Resolved, "{}", x.why);
            let (v, e) = (x.value.unwrap(), x.err.unwrap());
            // Linear interpolation of a·ln(P0/P) in ln P is exact, so only the noise is left:
            // σ_lnP ≈ σ/a·(interpolation weights) ∈ [0.035, 0.05].
            assert!((v - p0).abs() < 4.0 * e, "{v} ± {e} vs {p0}");
            assert!(e / v > 0.02 && e / v < 0.08, "{e} {v}");
            let (lo, hi) = x.interval.unwrap();
            assert!(lo < p0 && p0 < hi, "{lo} {hi} {p0}");
            let (blo, bhi) = x.bracket.unwrap();
            assert!(
                (blo / (0.8 * p0) - 1.0).abs() < 1e-12 && (bhi / (1.2 * p0) - 1.0).abs() < 1e-12
            );
            assert!(x.why.contains("interpolated linearly in ln P"), "{}", x.why);
            pts.push((r.d.ln(), v.ln()));
        }
        let n = pts.len() as f64;
        let (mx, my) = (
            pts.iter().map(|p| p.0).sum::<f64>() / n,
            pts.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>()
            / pts.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
        assert!((slope - alpha).abs() < 0.05, "{slope}");
        // The same seed gives the same table (compared as text: unresolved spinodals hold NaN
        // replicates); another seed other replicates.
        let again = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
        assert!(format!("{t:?}") == format!("{again:?}"));
        let other = CoexistenceOptions {
            seed: 9,
            ..CoexistenceOptions::default()
        };
        let other = coexistence_table(&cells, &other).unwrap();
        assert_ne!(
            t.rows[0].coexistence.replicates,
            other.rows[0].coexistence.replicates
        );
    }

    /// F(s) = A·(s⁴/4 − s²/2 − h·s) on 400 bins of [−2, 2] as a report: basins at the interior
    /// local minima, split at the highest bin between them (half its weight to each side),
    /// weights by summing e^{−F}, F errors `f_err`.
    fn double_well_report(h: f64, amplitude: f64, f_err: f64) -> FreeEnergyReport {
        let n = 400;
        let s: Vec<f64> = (0..n)
            .map(|i| -2.0 + (i as f64 + 0.5) * 4.0 / n as f64)
            .collect();
        let raw: Vec<f64> = s
            .iter()
            .map(|&x| amplitude * (x.powi(4) / 4.0 - x * x / 2.0 - h * x))
            .collect();
        let fmin = raw.iter().copied().fold(f64::INFINITY, f64::min);
        let f: Vec<f64> = raw.iter().map(|x| x - fmin).collect();
        let mins: Vec<usize> = (1..n - 1)
            .filter(|&i| f[i] <= f[i - 1] && f[i] < f[i + 1])
            .collect();
        let tops: Vec<usize> = mins
            .windows(2)
            .map(|w| {
                (w[0]..=w[1])
                    .max_by(|&a, &b| f[a].total_cmp(&f[b]))
                    .unwrap()
            })
            .collect();
        let z: f64 = f.iter().map(|x| (-x).exp()).sum();
        let mass = |a: usize, b: usize| -> f64 {
            (a..=b)
                .map(|i| {
                    let half = (i == a && a != 0) || (i == b && b != n - 1);
                    (-f[i]).exp() * if half { 0.5 } else { 1.0 }
                })
                .sum::<f64>()
                / z
        };
        let mut edges = vec![0];
        edges.extend(&tops);
        edges.push(n - 1);
        let basins: Vec<ReportBasin> = mins
            .iter()
            .enumerate()
            .map(|(k, &m)| ReportBasin {
                lo: s[edges[k]],
                hi: s[edges[k + 1]],
                min_s: s[m],
                weight: mass(edges[k], edges[k + 1]),
                weight_err: Some(0.01),
                observables: Vec::new(),
            })
            .collect();
        let barrier = (basins.len() == 2).then(|| {
            let top = tops[0];
            let (fa, fb) = (f[mins[0]], f[mins[1]]);
            let e = Some(f_err * 2f64.sqrt());
            Barrier {
                basins: (0, 1),
                top_s: s[top],
                height: Estimate {
                    value: f[top] - fa.min(fb),
                    err: e,
                },
                height_from_shallower: Estimate {
                    value: f[top] - fa.max(fb),
                    err: e,
                },
            }
        });
        FreeEnergyReport {
            profile: Profile {
                s: s.clone(),
                f: f.iter().map(|&x| Some(x)).collect(),
                f_err: vec![Some(f_err); n],
            },
            basins,
            barrier,
            observables: Vec::new(),
            diagnostics: Diagnostics {
                f_k: Vec::new(),
                f_k_err: Vec::new(),
                overlap: Vec::new(),
                order: Vec::new(),
                neighbour_overlap: Vec::new(),
                kish_ess: Vec::new(),
                unbiased_kish_ess: 0.0,
                tau: Vec::new(),
                ess: Vec::new(),
                block_length: Vec::new(),
                replicates_used: 0,
                chain_rhat: Vec::new(),
            },
            notes: Vec::new(),
        }
    }

    /// The double-well family F_P(s) = A·(s⁴/4 − s²/2 − h(P)·s), h = b·ln(P/P0): the left
    /// (lazy) minimum disappears at h = +2/(3√3), the right one at h = −2/(3√3) (F′ = s³ − s − h
    /// and F″ = 3s² − 1 vanish together at s = ∓1/√3), and the two have equal weight at h = 0 by
    /// the symmetry s → −s. Those exact folds are the independent values the spinodals must hit.
    #[test]
    fn spinodals_of_a_double_well_family_hit_its_exact_folds() {
        let (amplitude, b, p0, d) = (20.0, 0.5, 100.0, 10.0);
        let h_c = 2.0 / (3.0 * 3f64.sqrt());
        let cells: Vec<CellSummary> = (0..12)
            .map(|k| {
                let h = -0.55 + 0.1 * k as f64;
                let p = p0 * (h / b).exp();
                CellSummary::from_report(d, p, &double_well_report(h, amplitude, 0.05)).unwrap()
            })
            .collect();
        // Beyond ±h_c one basin is left.
        assert!(matches!(cells[0].basins, CellBasins::One { .. }));
        assert!(matches!(cells[11].basins, CellBasins::One { .. }));
        assert!(matches!(cells[2].basins, CellBasins::Two { .. }));
        let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
        let r = &t.rows[0];
        assert_eq!(r.cells[0].phases, Phases::Lazy);
        assert_eq!(r.cells[11].phases, Phases::Spec);
        // Coexistence: the grid is symmetric about h = 0, so the interpolated root is P0.
        let coex = r.coexistence.value.unwrap();
        assert!((coex / p0 - 1.0).abs() < 1e-9, "{coex}");
        assert_eq!(r.coexistence.resolution, Resolution::Resolved);
        let exact_lazy = p0 * (h_c / b).exp();
        let exact_spec = p0 * (-h_c / b).exp();
        for (th, exact) in [
            (&r.spinodal_lazy, exact_lazy),
            (&r.spinodal_spec, exact_spec),
        ] {
            assert_eq!(th.resolution, Resolution::Resolved, "{}", th.why);
            let v = th.value.unwrap();
            // The 3/2 law through the two cells nearest the fold (h = 0.25, 0.35): within 0.003
            // of h_c, i.e. 0.6 % in P at b = 0.5.
            assert!((v / exact).ln().abs() < 0.008, "{v} vs {exact}: {}", th.why);
            let (lo, hi) = th.interval.unwrap();
            assert!(lo <= exact && exact <= hi, "{lo} {hi} {exact}");
            let (blo, bhi) = th.bracket.unwrap();
            assert!(blo < exact && exact < bhi, "{blo} {bhi}");
            assert!(th.why.contains("inside the bracket"), "{}", th.why);
        }
        assert!(exact_spec < coex && coex < exact_lazy);
    }

    /// A sign change next to a single-basin cell is only bracketed, and so is a spinodal with
    /// one measured depth before it; a minimum that never disappears and has one depth says
    /// nothing.
    #[test]
    fn single_basin_cells_count_and_bracket() {
        let spec_only = CellSummary {
            d: 8.0,
            p: 20.0,
            basins: CellBasins::One { min_s: 0.85 },
        };
        let cells = [two(8.0, 10.0, 1.0, 0.1), spec_only];
        let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
        let r = &t.rows[0];
        assert_eq!(r.cells[1].phases, Phases::Spec);
        assert_eq!(r.cells[1].delta_f.value, f64::NEG_INFINITY);
        let c = &r.coexistence;
        assert_eq!(c.resolution, Resolution::Bracketed);
        assert_eq!(c.bracket, Some((10.0, 20.0)));
        assert!((c.value.unwrap() - 200f64.sqrt()).abs() < 1e-9);
        // Uniform in ln P over the bracket: sd of ln P* = ln 2/√12.
        let sd_ln = (c.err.unwrap() / c.value.unwrap()).abs();
        assert!((sd_ln - 2f64.ln() / 12f64.sqrt()).abs() < 0.02, "{sd_ln}");
        assert!(c
            .replicates
            .iter()
            .all(|&x| x > 10.0 - 1e-9 && x < 20.0 + 1e-9));
        assert!(c.why.contains("a single basin at P = 20"), "{}", c.why);
        let l = &r.spinodal_lazy;
        assert_eq!(l.resolution, Resolution::Bracketed, "{}", l.why);
        assert_eq!(l.bracket, Some((10.0, 20.0)));
        let s = &r.spinodal_spec;
        assert_eq!(s.resolution, Resolution::Unresolved, "{}", s.why);
        assert_eq!(s.value, None);
        assert!(s.why.contains("extend the grid below P = 10"), "{}", s.why);
        assert!(s.replicates.iter().all(|x| x.is_nan()));
    }

    /// A lazy minimum that exists at every P but grows shallower is extrapolated beyond the
    /// grid along depth^(2/3); cells without weight errors give values without errors.
    #[test]
    fn a_fold_beyond_the_grid_is_extrapolated_and_missing_errors_stay_missing() {
        let with_depth = |p: f64, df: f64, lazy_depth: f64| {
            let mut c = two(8.0, p, df, 0.1);
            if let CellBasins::Two { lazy, .. } = &mut c.basins {
                lazy.depth = Estimate {
                    value: lazy_depth,
                    err: Some(0.01),
                };
            }
            c
        };
        let cells = [
            with_depth(10.0, 1.0, 3.0),
            with_depth(20.0, -0.5, 2.0),
            with_depth(40.0, -1.0, 1.0),
        ];
        let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
        let l = &t.rows[0].spinodal_lazy;
        assert_eq!(l.resolution, Resolution::Extrapolated, "{}", l.why);
        // D^{2/3} = 2^{2/3} at P = 20 and 1 at P = 40: zero at ln P = ln 40 + ln 2/(2^{2/3} − 1).
        let want = 40.0 * 2f64.powf(1.0 / (2f64.powf(2.0 / 3.0) - 1.0));
        assert!((l.value.unwrap() / want - 1.0).abs() < 1e-12, "{l:?}");
        assert!(l.replicates.iter().all(|&x| x >= 40.0 * (1.0 - 1e-12)));
        assert!(l.err.unwrap() > 0.0 && l.bracket.is_none());
        assert!(l.why.contains("beyond the grid"), "{}", l.why);
        let mut bare = cells;
        for c in &mut bare {
            if let CellBasins::Two { lazy, spec } = &mut c.basins {
                lazy.weight.err = None;
                spec.weight.err = None;
            }
        }
        let t = coexistence_table(&bare, &CoexistenceOptions::default()).unwrap();
        let c = &t.rows[0].coexistence;
        assert_eq!(c.resolution, Resolution::Resolved);
        assert!(c.value.is_some() && c.err.is_none() && c.interval.is_none());
        assert!(c.why.contains("no weight error"), "{}", c.why);
    }

    /// Repeats at one P are averaged; their error is the spread between them when that is
    /// larger than the within-run errors, and the within-run error of the mean otherwise.
    #[test]
    fn repeats_are_averaged_with_the_larger_error() {
        let cells = [
            two(8.0, 10.0, 0.6, 0.01),
            two(8.0, 10.0, 1.0, 0.01),
            two(8.0, 10.0, 1.4, 0.01),
            two(8.0, 20.0, -1.0, 0.3),
            two(8.0, 20.0, -1.0, 0.3),
        ];
        let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
        let r = &t.rows[0];
        assert_eq!(r.cells.len(), 2);
        let (a, b) = (r.cells[0].delta_f, r.cells[1].delta_f);
        assert!((a.value - 1.0).abs() < 1e-9 && (b.value + 1.0).abs() < 1e-9);
        // Spread 0.4 between three repeats: 0.4/√3 > √3·0.01/3.
        assert!((a.err.unwrap() - 0.4 / 3f64.sqrt()).abs() < 1e-9, "{a:?}");
        // Identical repeats: the within-run error of the mean, 0.3/√2.
        assert!((b.err.unwrap() - 0.3 / 2f64.sqrt()).abs() < 1e-9, "{b:?}");
        // ΔF is linear in ln P between them: the root is the geometric midpoint.
        let v = r.coexistence.value.unwrap();
        assert!((v - 200f64.sqrt()).abs() < 1e-9, "{v}");
    }

    #[test]
    fn bad_cells_and_grids_are_refused_in_one_sentence() {
        let opts = CoexistenceOptions::default();
        let check = |cells: &[CellSummary], want: &str| {
            let e = coexistence_table(cells, &opts).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(want) && !msg.contains('\n'), "{msg}");
            assert_eq!(crate::Error::from(e).exit_code(), 2);
        };
        check(
            &[two(8.0, 10.0, 1.0, 0.1), two(16.0, 10.0, 1.0, 0.1)],
            "d = 8 has free energies at 1 value(s) of P",
        );
        check(
            &[two(8.0, 10.0, 1.0, 0.1), two(8.0, 20.0, 0.5, 0.1)],
            "is positive at every measured P at d = 8 (P = 10 to 20",
        );
        check(
            &[two(8.0, 10.0, -1.0, 0.1), two(8.0, 20.0, -0.5, 0.1)],
            "extend the grid below P = 10",
        );
        check(
            &[two(8.0, 10.0, 1.0, 0.1), two(8.0, 10.0, -1.0, 0.1)],
            "d = 8 has free energies at 1 value(s) of P",
        );
        let lazy_only = CellSummary {
            d: 8.0,
            p: 20.0,
            basins: CellBasins::One { min_s: 0.05 },
        };
        check(
            &[
                two(8.0, 10.0, 1.0, 0.1),
                two(8.0, 20.0, -1.0, 0.1),
                lazy_only,
            ],
            "the 2 repeats at d = 8, P = 20 disagree on which minima exist (both, lazy)",
        );
        check(&[], "no free-energy cell");
        check(&[two(8.0, -1.0, 1.0, 0.1)], "d and P must be finite");
        let mut zero = two(8.0, 10.0, 1.0, 0.1);
        if let CellBasins::Two { lazy, .. } = &mut zero.basins {
            lazy.weight.value = 0.0;
        }
        check(
            &[zero, two(8.0, 20.0, -1.0, 0.1)],
            "the lazy basin at d = 8, P = 10",
        );
        let mut empty = double_well_report(0.0, 20.0, 0.05);
        empty.basins.clear();
        let e = CellSummary::from_report(8.0, 10.0, &empty).unwrap_err();
        assert!(e.to_string().contains("has no basin"), "{e}");
    }

    /// The 3/2 law is exact for the fold's normal form, so two cells anywhere before the fold
    /// give it exactly; a depth that rises towards the grid's end gives no fold.
    #[test]
    fn the_fold_of_the_normal_form_is_exact() {
        let depth = |t: f64| 4.0 / 3.0 * (0.7 - t).powf(1.5);
        let t0 = fold_root(0.1, depth(0.1), 0.4, depth(0.4)).unwrap();
        assert!((t0 - 0.7).abs() < 1e-12, "{t0}");
        assert_eq!(fold_root(0.1, 1.0, 0.4, 2.0), None);
        assert_eq!(fold_root(0.1, 1.0, 0.4, 0.0), Some(0.4));
    }
}
