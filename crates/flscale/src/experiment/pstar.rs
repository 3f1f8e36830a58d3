//! P\*: the threshold crossing of an observable in log P, with what the grid can and cannot say
//! about it (spec 03 "Analysis"; paper App. F.0.1).
//!
//! * **The crossing** is found by linear interpolation of the observable in ln x between the
//!   two measured sizes that bracket the threshold (paper App. F.0.1: "inverting this
//!   correspondence to find the value of P for which A_f = 0.1").
//! * **The bracket.** Interpolation is exact only for a response that is linear in ln x between
//!   the two sizes. Where A_f jumps (fig3a: from ≈ 0.03 to ≈ 0.5 within a factor 1.4 in P), the
//!   interpolated point says nothing about where inside the bracket the jump lies. Every row
//!   therefore carries its bracket [x_lo, x_hi] and the bracket's factor x_hi/x_lo; a crossing
//!   is *resolved* when that factor is at most [`super::sweep::DEFAULT_RESOLUTION`] (or `[analysis]
//!   pstar_resolution`), else it is only bracketed.
//! * **The uncertainty** combines the bootstrap over chains and seeds (the hierarchical
//!   resampling of [`Bootstrap::resample_cell`]) with the bracket: the position inside the
//!   bracket is taken as uniform in ln x, which adds a variance (ln(x_hi/x_lo))²/12 in ln P\*.
//!   Each bootstrap replicate is shifted by an independent uniform draw of that width, so the
//!   percentile interval of P\* — and of the exponent fitted through the replicates — contains
//!   both. For a resolved crossing at factor 1.1 the shift's standard deviation is 2.8 % of P\*.

use rand::Rng;

use super::stats::{cells, estimate, loglog_fit, Bootstrap, Estimate, ExponentFit};
use super::store::StoreData;
use crate::error::{Error, Result};

/// The two measured values of the crossing variable between which a threshold is crossed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bracket {
    /// The smaller x of the two.
    pub lo: f64,
    /// The larger x of the two.
    pub hi: f64,
}

impl Bracket {
    /// x_hi / x_lo.
    pub fn factor(&self) -> f64 {
        self.hi / self.lo
    }

    /// ln(x_hi / x_lo).
    pub fn ln_width(&self) -> f64 {
        (self.hi / self.lo).ln()
    }

    /// The geometric midpoint √(x_lo·x_hi): the bisection point in log x.
    pub fn log_midpoint(&self) -> f64 {
        (self.lo * self.hi).sqrt()
    }
}

/// Where the curve through `points` first crosses `threshold` (upwards, or downwards when
/// `falling`), by linear interpolation of y in ln x between the bracketing points, and the
/// bracket itself. Points with x ≤ 0 or non-finite values are left out. A first point already
/// past the threshold has no bracket: None.
pub fn crossing_with_bracket(
    points: &[(f64, f64)],
    threshold: f64,
    falling: bool,
) -> Option<(f64, Bracket)> {
    let mut pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| *x > 0.0 && x.is_finite() && y.is_finite())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    if falling {
        // A downward crossing in x is an upward one in 1/x, and ln(1/x) = −ln x keeps the
        // interpolation linear in ln x.
        pts.reverse();
    }
    for w in pts.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if y0 < threshold && y1 >= threshold {
            let t = (threshold - y0) / (y1 - y0);
            let x = (x0.ln() + t * (x1.ln() - x0.ln())).exp();
            let bracket = Bracket {
                lo: x0.min(x1),
                hi: x0.max(x1),
            };
            return Some((x, bracket));
        }
    }
    None
}

/// The x > 0 at which the curve through `points` first crosses `threshold` upwards
/// ([`crossing_with_bracket`] without the bracket).
pub fn threshold_crossing(points: &[(f64, f64)], threshold: f64) -> Option<f64> {
    crossing_with_bracket(points, threshold, false).map(|c| c.0)
}

/// The x > 0 at which the curve through `points` first crosses `threshold` downwards (for an
/// observable that falls as x grows, e.g. A_f against √(L·d³)/P in paper Fig. 3(b)).
pub fn threshold_crossing_falling(points: &[(f64, f64)], threshold: f64) -> Option<f64> {
    crossing_with_bracket(points, threshold, true).map(|c| c.0)
}

/// What to find: the crossing of `observable` through `threshold` in `x`, one per `group`.
#[derive(Debug, Clone, PartialEq)]
pub struct PstarQuery {
    /// Crossing variable (e.g. p).
    pub x: String,
    /// Grouping variable (e.g. d).
    pub group: String,
    /// Observable (e.g. alignment).
    pub observable: String,
    /// Threshold.
    pub threshold: f64,
    /// The observable falls as x grows (`[analysis] falling`).
    pub falling: bool,
    /// Bracket factor at or below which a crossing is resolved.
    pub resolution: f64,
}

impl PstarQuery {
    /// The query that `[analysis]` of a store describes.
    pub fn from_analysis(data: &StoreData) -> PstarQuery {
        let a = &data.analysis;
        PstarQuery {
            x: a.x.clone(),
            group: a.group.clone(),
            observable: a.observable.clone(),
            threshold: a.threshold,
            falling: a.falling,
            resolution: a.pstar_resolution,
        }
    }
}

/// P\* of one group.
#[derive(Debug, Clone, PartialEq)]
pub struct PstarRow {
    /// The group's value (e.g. d).
    pub group: f64,
    /// (x, mean observable) of every cell.
    pub curve: Vec<(f64, f64)>,
    /// The crossing with its bootstrap error over chains and seeds (None when the measured
    /// curve never crosses).
    pub pstar: Option<Estimate>,
    /// The two grid values that bracket the crossing.
    pub bracket: Option<Bracket>,
    /// The crossing's value with the bootstrap and the bracket combined (module doc).
    pub combined: Option<Estimate>,
    /// The bracket factor is at most the query's resolution.
    pub resolved: bool,
    /// Every replicate's crossing (NaN when a replicate did not cross).
    pub replicates: Vec<f64>,
    /// Every replicate's crossing shifted uniformly in ln x within the bracket's width.
    pub combined_replicates: Vec<f64>,
}

/// P\* for every group.
#[derive(Debug, Clone, PartialEq)]
pub struct PstarTable {
    /// Crossing variable.
    pub x: String,
    /// Grouping variable.
    pub group: String,
    /// Observable.
    pub observable: String,
    /// Threshold.
    pub threshold: f64,
    /// Bracket factor at or below which a crossing is resolved.
    pub resolution: f64,
    /// One row per group.
    pub rows: Vec<PstarRow>,
}

impl PstarTable {
    /// The groups whose crossing is only bracketed (crossed, bracket factor above the
    /// resolution), with their brackets.
    pub fn unresolved(&self) -> Vec<(f64, Bracket)> {
        self.rows
            .iter()
            .filter(|r| !r.resolved)
            .filter_map(|r| r.bracket.map(|b| (r.group, b)))
            .collect()
    }
}

/// The threshold crossing of `q.observable` in log `q.x`, per value of `q.group`, with the
/// hierarchical bootstrap over seeds and chains and the bracket (module doc).
pub fn pstar(data: &StoreData, q: &PstarQuery, boot: &mut Bootstrap) -> Result<PstarTable> {
    if !(q.resolution.is_finite() && q.resolution > 1.0) {
        return Err(Error::invalid(format!(
            "the P* resolution {} is not allowed; give a bracket factor above 1, e.g. 1.1",
            q.resolution
        )));
    }
    let groups = cells(data, Some(&q.group), &q.x, &q.observable)?;
    let mut rows = Vec::new();
    for (g, cs) in groups {
        let curve: Vec<(f64, f64)> = cs.iter().map(|c| (c.x, c.mean())).collect();
        let found = crossing_with_bracket(&curve, q.threshold, q.falling);
        let mut replicates = Vec::with_capacity(boot.replicates);
        let mut combined_replicates = Vec::with_capacity(boot.replicates);
        for _ in 0..boot.replicates {
            let rc: Vec<(f64, f64)> = cs.iter().map(|c| (c.x, boot.resample_cell(c))).collect();
            let rep = crossing_with_bracket(&rc, q.threshold, q.falling)
                .map(|c| c.0)
                .unwrap_or(f64::NAN);
            replicates.push(rep);
            let width = found.map(|f| f.1.ln_width()).unwrap_or(0.0);
            let shift: f64 = boot.rng().random::<f64>() - 0.5;
            combined_replicates.push(rep * (width * shift).exp());
        }
        rows.push(PstarRow {
            group: g,
            curve,
            pstar: found.map(|f| estimate(f.0, &replicates)),
            bracket: found.map(|f| f.1),
            combined: found.map(|f| estimate(f.0, &combined_replicates)),
            resolved: found.is_some_and(|f| f.1.factor() <= q.resolution),
            replicates,
            combined_replicates,
        });
    }
    Ok(PstarTable {
        x: q.x.clone(),
        group: q.group.clone(),
        observable: q.observable.clone(),
        threshold: q.threshold,
        resolution: q.resolution,
        rows,
    })
}

/// The exponent of P\* against the grouping variable, bootstrapped jointly with the
/// crossings (replicate b of the fit uses replicate b of every group's crossing, shifted
/// within its bracket, so the interval carries the grid's resolution too). Rows whose
/// crossing is only bracketed are used and named in `skipped`-style notes of the result's
/// `unresolved` list by the callers ([`PstarTable::unresolved`]).
pub fn fit_pstar(table: &PstarTable) -> Result<ExponentFit> {
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    for r in &table.rows {
        match &r.pstar {
            Some(e) => points.push((r.group, e.value)),
            None => skipped.push(format!(
                "{} = {}: {} never crosses {} in the measured range of {}",
                table.group, r.group, table.observable, table.threshold, table.x
            )),
        }
    }
    let fit = loglog_fit(&points).ok_or_else(|| {
        Error::runtime(format!(
            "P* is known for {} value(s) of {}; a fit needs at least two{}",
            points.len(),
            table.group,
            if skipped.is_empty() {
                String::new()
            } else {
                format!(" ({})", skipped.join("; "))
            }
        ))
    })?;
    let n_rep = table
        .rows
        .first()
        .map(|r| r.combined_replicates.len())
        .unwrap_or(0);
    let slopes_of = |pick: &dyn Fn(&PstarRow, usize) -> f64| {
        let mut slopes = Vec::with_capacity(n_rep);
        for b in 0..n_rep {
            let pts: Vec<(f64, f64)> = table
                .rows
                .iter()
                .filter(|r| r.pstar.is_some())
                .map(|r| (r.group, pick(r, b)))
                .filter(|p| p.1.is_finite())
                .collect();
            if pts.len() == points.len() {
                if let Some(f) = loglog_fit(&pts) {
                    slopes.push(f.slope);
                }
            }
        }
        slopes
    };
    let combined = slopes_of(&|r, b| r.combined_replicates[b]);
    let plain = slopes_of(&|r, b| r.replicates[b]);
    Ok(ExponentFit {
        what: format!("P* vs {}", table.group),
        exponent: estimate(fit.slope, &combined),
        without_bracket: Some(estimate(fit.slope, &plain)),
        points,
        fit,
        skipped,
    })
}

/// One line per group whose crossing is only bracketed, for reports: the bracket, its factor
/// and the command that resolves it.
pub fn unresolved_notes(table: &PstarTable) -> Vec<String> {
    table
        .unresolved()
        .iter()
        .map(|(g, b)| {
            format!(
                "{} = {g}: P* is only bracketed in {} ∈ [{}, {}] (factor {:.2} > {}); refine with `flscale sweep EXP --out DIR --refine-pstar`",
                table.group,
                table.x,
                b.lo,
                b.hi,
                b.factor(),
                table.resolution
            )
        })
        .collect()
}

/// Resolved P\* values an exponent needs. Two points fix a line and test nothing; three leave
/// one degree of freedom to see whether ln P\* is linear in ln d (the paper fits P\* against d
/// over its whole grid, App. F.0.1 and Fig. 2(b)).
pub const MIN_RESOLVED_FOR_FIT: usize = 3;

/// Grid points a crossing needs on each side of its bracket, the bracket's end included: with
/// only one the measured curve has no slope there, and the crossing at the grid's edge may lie
/// in a different regime (or the curve may already start past the threshold).
pub const MIN_POINTS_PER_SIDE: usize = 2;

/// What keeps the P\* table from carrying an exponent, one sentence per problem, each saying
/// what to run (`dir` is the results directory, `EXP` the experiment file); empty when the fit
/// stands on at least [`MIN_RESOLVED_FOR_FIT`] resolved crossings, each with
/// [`MIN_POINTS_PER_SIDE`] grid points on either side.
pub fn fit_readiness(table: &PstarTable, dir: &str) -> Vec<String> {
    let (g, x) = (&table.group, &table.x);
    let mut notes = Vec::new();
    let mut sound = 0;
    for r in &table.rows {
        let Some(b) = r.bracket else { continue };
        let (below, above) = grid_points_beside(r, b);
        let (min_x, max_x) = r
            .curve
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, c), p| {
                (a.min(p.0), c.max(p.0))
            });
        if below < MIN_POINTS_PER_SIDE {
            notes.push(format!(
                "{g} = {}: the crossing in {x} ∈ [{}, {}] has {below} grid point(s) below it (needs {MIN_POINTS_PER_SIDE}); add {x} = {} (below {min_x}) to the sweep in EXP and rerun `flscale sweep EXP --out {dir}`",
                r.group, b.lo, b.hi, fmt_grid(min_x / 2.0)
            ));
        } else if above < MIN_POINTS_PER_SIDE {
            notes.push(format!(
                "{g} = {}: the crossing in {x} ∈ [{}, {}] has {above} grid point(s) above it (needs {MIN_POINTS_PER_SIDE}); add {x} = {} (above {max_x}) to the sweep in EXP and rerun `flscale sweep EXP --out {dir}`",
                r.group, b.lo, b.hi, fmt_grid(max_x * 2.0)
            ));
        } else if r.resolved {
            sound += 1;
        }
    }
    if sound >= MIN_RESOLVED_FOR_FIT {
        return notes;
    }
    let bracketed: Vec<String> = table
        .unresolved()
        .iter()
        .map(|(v, b)| format!("{g} = {v} in [{}, {}]", b.lo, b.hi))
        .collect();
    let mut todo = Vec::new();
    if !bracketed.is_empty() {
        todo.push(format!(
            "run `flscale sweep EXP --out {dir} --refine-pstar {}` to resolve {}",
            table.resolution,
            bracketed.join(", ")
        ));
    }
    for r in table.rows.iter().filter(|r| r.bracket.is_none()) {
        let max_x = r
            .curve
            .iter()
            .map(|p| p.0)
            .fold(f64::NEG_INFINITY, f64::max);
        todo.push(format!(
            "{g} = {}: {} never crosses {} up to {x} = {max_x}; extend the {x} grid beyond it",
            r.group, table.observable, table.threshold
        ));
    }
    let crossing = table.rows.iter().filter(|r| r.bracket.is_some()).count();
    if crossing < MIN_RESOLVED_FOR_FIT {
        let groups = table.rows.len();
        if groups < MIN_RESOLVED_FOR_FIT {
            todo.push(format!(
                "add {} value(s) of {g} to the sweep in EXP (it has {groups})",
                MIN_RESOLVED_FOR_FIT - groups
            ));
        }
    }
    notes.push(format!(
        "the exponent rests on {sound} resolved P* value(s) of {g} with {MIN_POINTS_PER_SIDE} grid points on each side (needs {MIN_RESOLVED_FOR_FIT}){}{}",
        if todo.is_empty() { "" } else { ": " },
        todo.join("; ")
    ));
    notes
}

/// Grid points of a row's curve at or below the bracket's lower end, and at or above its upper.
fn grid_points_beside(r: &PstarRow, b: Bracket) -> (usize, usize) {
    let below = r.curve.iter().filter(|p| p.0 <= b.lo).count();
    let above = r.curve.iter().filter(|p| p.0 >= b.hi).count();
    (below, above)
}

/// Whether the table carries an exponent: at least [`MIN_RESOLVED_FOR_FIT`] resolved
/// crossings with [`MIN_POINTS_PER_SIDE`] grid points on each side ([`fit_readiness`] says
/// what is missing otherwise).
pub fn carries_exponent(table: &PstarTable) -> bool {
    let sound = table
        .rows
        .iter()
        .filter(|r| {
            r.resolved
                && r.bracket.is_some_and(|b| {
                    let (below, above) = grid_points_beside(r, b);
                    below >= MIN_POINTS_PER_SIDE && above >= MIN_POINTS_PER_SIDE
                })
        })
        .count();
    sound >= MIN_RESOLVED_FOR_FIT
}

/// A grid value as the sweep would hold it: integers for counts.
fn fmt_grid(v: f64) -> String {
    if v >= 1.0 {
        format!("{}", v.round())
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::{ChainValues, RunData};
    use super::super::sweep::DEFAULT_RESOLUTION;
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::collections::BTreeMap;

    #[test]
    fn falling_crossing_is_the_mirror_of_the_rising_one() {
        // y = 1 − ln x on x ∈ {0.5, 1, 2, 4}: crosses 0.5 downwards at x = e^{0.5}.
        let pts: Vec<(f64, f64)> = [0.5f64, 1.0, 2.0, 4.0]
            .iter()
            .map(|&x| (x, 1.0 - x.ln()))
            .collect();
        let x = threshold_crossing_falling(&pts, 0.5).unwrap();
        assert!((x - 0.5f64.exp()).abs() < 1e-12, "{x}");
        assert_eq!(threshold_crossing(&pts, 0.5), None);
        assert_eq!(threshold_crossing_falling(&pts, 5.0), None);
    }

    #[test]
    fn crossing_interpolates_in_log_x() {
        // A = 0.2·log10(P) is linear in log P, so the crossing of 0.1 is exactly P = √10.
        let pts: Vec<(f64, f64)> = [1.0, 3.0, 30.0, 300.0]
            .iter()
            .map(|&p: &f64| (p, 0.2 * p.log10()))
            .collect();
        let c = threshold_crossing(&pts, 0.1).unwrap();
        assert!((c - 10f64.sqrt()).abs() < 1e-12, "{c}");
        // Unsorted input, first upward crossing; none when always above or below.
        let c2 = threshold_crossing(&[(30.0, 0.2954), (1.0, 0.0), (3.0, 0.0954)], 0.1).unwrap();
        assert!(c2 > 3.0 && c2 < 30.0);
        assert!(threshold_crossing(&[(1.0, 0.5), (2.0, 0.6)], 0.1).is_none());
        assert!(threshold_crossing(&[(1.0, 0.0), (2.0, 0.05)], 0.1).is_none());
    }

    /// A store of runs at (d, p) with per-chain alignments `response(d, p)` plus 2 % noise,
    /// `seeds` runs of `chains` chains at every point.
    pub(crate) fn synthetic_store(
        points: &[(f64, f64)],
        seeds: usize,
        chains: usize,
        response: impl Fn(f64, f64) -> f64,
    ) -> StoreData {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut runs = Vec::new();
        for &(d, p) in points {
            for seed in 0..seeds {
                let chains: Vec<ChainValues> = (0..chains)
                    .map(|k| {
                        let a = response(d, p) * (1.0 + 0.02 * (rng.random::<f64>() - 0.5));
                        ChainValues {
                            chain: k,
                            ok: true,
                            alignment: Some(a),
                            test_mse: Some(1.0 - a),
                            r_overlap2: Some(a * a),
                            outliers: Some(1.0),
                            mu: None,
                        }
                    })
                    .collect();
                let coords = BTreeMap::from([
                    ("d".to_string(), d),
                    ("p".to_string(), p),
                    ("seed".to_string(), seed as f64),
                ]);
                runs.push(RunData::synthetic(runs.len(), coords, chains));
            }
        }
        StoreData::of_runs(runs)
    }

    fn query(falling: bool) -> PstarQuery {
        PstarQuery {
            x: "p".into(),
            group: "d".into(),
            observable: "alignment".into(),
            threshold: 0.1,
            falling,
            resolution: DEFAULT_RESOLUTION,
        }
    }

    /// fig3a's situation: A_f jumps from 0.03 to 0.5 at P = 7.3·d, between grid points a
    /// factor 2 apart. The crossing is reported with its bracket, not resolved, and the
    /// combined interval is at least the bracket's uniform spread while the bootstrap alone
    /// claims far less.
    #[test]
    fn a_jump_between_distant_grid_points_reports_the_bracket() {
        let jump = 7.3;
        let response = |d: f64, p: f64| if p / d < jump { 0.03 } else { 0.5 };
        let mut pts = Vec::new();
        for d in [20.0, 40.0] {
            for r in [5.0, 10.0, 20.0, 40.0] {
                pts.push((d, r * d));
            }
        }
        let data = synthetic_store(&pts, 2, 20, response);
        let t = pstar(&data, &query(false), &mut Bootstrap::new(1, 400)).unwrap();
        assert_eq!(t.rows.len(), 2);
        for r in &t.rows {
            let b = r.bracket.unwrap();
            assert_eq!((b.lo, b.hi), (5.0 * r.group, 10.0 * r.group));
            assert!(!r.resolved);
            let boot = r.pstar.unwrap();
            let comb = r.combined.unwrap();
            // The bootstrap sees only the 2 % noise at the bracket's ends.
            let boot_ln_sd = boot.err.unwrap() / boot.value;
            assert!(boot_ln_sd < 0.01, "{boot:?}");
            // ln 2 / √12 = 0.200: the bracket's uniform spread dominates.
            let comb_ln_sd = comb.err.unwrap() / comb.value;
            assert!((comb_ln_sd - 0.2).abs() < 0.03, "{comb:?}");
            let (lo, hi) = (comb.lo.unwrap(), comb.hi.unwrap());
            assert!(hi / lo > 1.7, "{lo} {hi}");
            // The true jump lies inside the combined interval.
            assert!(lo < jump * r.group && jump * r.group < hi, "{lo} {hi}");
        }
        assert_eq!(t.unresolved().len(), 2);
        let notes = unresolved_notes(&t);
        assert!(notes[0].contains("[100, 200]"), "{notes:?}");
        assert!(notes[0].contains("--refine-pstar"), "{notes:?}");
        // A fine grid resolves the same jump.
        let fine: Vec<(f64, f64)> = (0..40)
            .map(|k| (20.0, 20.0 * 5.0 * 1.05f64.powi(k)))
            .collect();
        let data = synthetic_store(&fine, 1, 20, response);
        let t = pstar(&data, &query(false), &mut Bootstrap::new(1, 100)).unwrap();
        assert!(t.rows[0].resolved, "{:?}", t.rows[0].bracket);
        let v = t.rows[0].pstar.unwrap().value;
        assert!((v / (jump * 20.0)).ln().abs() < 1.05f64.ln(), "{v}");
    }

    #[test]
    fn falling_crossings_are_bracketed_like_rising_ones() {
        let pts = [(1.0, 1.0), (1.0, 2.0), (1.0, 4.0), (1.0, 8.0)];
        let curve: Vec<(f64, f64)> = pts.iter().map(|&(_, x)| (x, 1.0 / x)).collect();
        let (x, b) = crossing_with_bracket(&curve, 0.3, true).unwrap();
        assert_eq!((b.lo, b.hi), (2.0, 4.0));
        assert!(x > 2.0 && x < 4.0);
        assert!(crossing_with_bracket(&curve, 0.3, false).is_none());
        assert_eq!(b.log_midpoint(), 8f64.sqrt());
    }

    /// Two seeds whose levels differ: the two-stage bootstrap's spread reflects the
    /// seed-to-seed difference, which pooling the chains would hide.
    #[test]
    fn the_bootstrap_resamples_seeds_before_chains() {
        let cell = super::super::stats::Cell {
            x: 1.0,
            values: [vec![1.0; 50], vec![2.0; 50]].concat(),
            run_sizes: vec![50, 50],
        };
        let mut boot = Bootstrap::new(3, 2000);
        let reps: Vec<f64> = (0..2000).map(|_| boot.resample_cell(&cell)).collect();
        let m = reps.iter().sum::<f64>() / reps.len() as f64;
        let sd = (reps.iter().map(|r| (r - m).powi(2)).sum::<f64>() / 1999.0).sqrt();
        // Two runs drawn with replacement: the mean is 1, 1.5 or 2 with probabilities
        // 1/4, 1/2, 1/4, so sd = 0.5/√2 = 0.354; pooled chains would give 0.5/√100 = 0.05.
        assert!((sd - 0.354).abs() < 0.02, "{sd}");
        assert!((m - 1.5).abs() < 0.02, "{m}");
    }

    /// The minimum-points rule: the fig3a situation (two d values, each crossing only
    /// bracketed, one grid point below the jump) is flagged with the commands that fix it,
    /// and a grid of three d values with fine, two-sided brackets is not.
    #[test]
    fn a_fit_on_too_few_resolved_crossings_is_flagged_with_what_to_run() {
        let jump = 7.3;
        let response = |d: f64, p: f64| if p / d < jump { 0.03 } else { 0.5 };
        let coarse: Vec<(f64, f64)> = [20.0, 40.0]
            .iter()
            .flat_map(|&d| [5.0, 10.0, 20.0, 40.0].map(|r| (d, r * d)))
            .collect();
        let data = synthetic_store(&coarse, 1, 10, response);
        let t = pstar(&data, &query(false), &mut Bootstrap::new(1, 50)).unwrap();
        let notes = fit_readiness(&t, "runs/x");
        assert!(!carries_exponent(&t));
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0]
                .starts_with("d = 20: the crossing in p ∈ [100, 200] has 1 grid point(s) below it"),
            "{notes:?}"
        );
        assert!(notes[0].contains("add p = 50 (below 100)"), "{notes:?}");
        assert!(
            notes[0].contains("`flscale sweep EXP --out runs/x`"),
            "{notes:?}"
        );
        let last = &notes[2];
        assert!(
            last.contains("rests on 0 resolved P* value(s) of d"),
            "{last}"
        );
        assert!(
            last.contains("`flscale sweep EXP --out runs/x --refine-pstar 1.1`"),
            "{last}"
        );
        assert!(
            last.contains("d = 20 in [100, 200], d = 40 in [200, 400]"),
            "{last}"
        );
        assert!(last.contains("add 1 value(s) of d"), "{last}");
        // A group that never crosses is named with the grid to extend.
        let flat = synthetic_store(&coarse, 1, 10, |d, _| if d > 30.0 { 0.01 } else { 0.5 });
        let t = pstar(&flat, &query(false), &mut Bootstrap::new(1, 50)).unwrap();
        let notes = fit_readiness(&t, "runs/x");
        assert!(
            notes.iter().any(|n| n
                .contains("d = 40: alignment never crosses 0.1 up to p = 1600; extend the p grid")),
            "{notes:?}"
        );
        // Three d values, each crossing bracketed within 1.05 with points on both sides.
        let fine: Vec<(f64, f64)> = [10.0, 20.0, 40.0]
            .iter()
            .flat_map(|&d| (0..50).map(move |k| (d, d * 5.0 * 1.05f64.powi(k))))
            .collect();
        let data = synthetic_store(&fine, 1, 10, response);
        let t = pstar(&data, &query(false), &mut Bootstrap::new(1, 50)).unwrap();
        assert!(fit_readiness(&t, "runs/x").is_empty());
        assert!(carries_exponent(&t));
        // Two of them are not enough.
        let two: Vec<(f64, f64)> = fine.iter().copied().filter(|p| p.0 < 30.0).collect();
        let t = pstar(
            &synthetic_store(&two, 1, 10, response),
            &query(false),
            &mut Bootstrap::new(1, 50),
        )
        .unwrap();
        let notes = fit_readiness(&t, "runs/x");
        assert!(!carries_exponent(&t));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("rests on 2 resolved") && notes[0].contains("add 1 value(s) of d"),
            "{notes:?}"
        );
    }
}
