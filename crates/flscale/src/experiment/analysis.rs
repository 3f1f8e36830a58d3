//! Power-law fits and the bootstrap (spec 03 "Analysis"; paper App. F.0.1); P\* itself, its
//! bracket and its combined uncertainty are in [`super::pstar`] (re-exported here).
//!
//! * **P\***: the sample size at which the ensemble alignment A_f crosses a threshold (the
//!   paper uses A_f = 0.1, App. F.0.1), found by linear interpolation of A_f in log P between
//!   the two measured sizes that bracket the threshold, reported with that bracket.
//! * **Exponents**: ordinary least squares of log y on log x (e.g. log P\* on log d, Fig. 2b;
//!   log outliers on log N, Fig. 2c).
//! * **Uncertainty**: a non-parametric bootstrap over seeds and chains. Every (group, x) cell
//!   holds the per-chain time averages of all runs at that point, run by run; each replicate
//!   resamples the runs (seeds) of every cell with replacement and then the chains inside each
//!   drawn run (a two-stage bootstrap, Davison & Hinkley 1997 §3.8: chains of one seed share
//!   its data set and teacher, so pooling them as independent understates the error), and
//!   recomputes the means, the crossings and the fit. A cell of one run resamples its chains
//!   only, exactly as a one-stage bootstrap. The reported error is the replicates' standard deviation, the interval their
//!   2.5–97.5 % percentiles. The resampling stream is ChaCha8 with a fixed seed and runs
//!   sequentially, so the numbers do not depend on the thread count.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::store::{RunData, StoreData, CHAIN_OBSERVABLES};
use super::sweep::PredictSpec;
use crate::error::{Error, Result};
use crate::patterns::Architecture;

pub use super::pstar::{
    crossing_with_bracket, fit_pstar, pstar, threshold_crossing, threshold_crossing_falling,
    Bracket, PstarQuery, PstarRow, PstarTable,
};

/// A straight-line fit y = intercept + slope·x.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearFit {
    /// Slope (the exponent, for a log-log fit).
    pub slope: f64,
    /// Intercept (log of the prefactor, for a log-log fit).
    pub intercept: f64,
    /// Number of points used.
    pub n: usize,
}

/// Least-squares line through `points`; None with fewer than two distinct x.
pub fn linear_fit(points: &[(f64, f64)]) -> Option<LinearFit> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    let n = pts.len();
    if n < 2 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some(LinearFit {
        slope,
        intercept: my - slope * mx,
        n,
    })
}

/// Least-squares line of ln y against ln x (points with x ≤ 0 or y ≤ 0 are left out): the
/// slope is the power-law exponent of y ∝ x^slope.
pub fn loglog_fit(points: &[(f64, f64)]) -> Option<LinearFit> {
    let logs: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    linear_fit(&logs)
}

/// A seeded resampling stream.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    rng: ChaCha8Rng,
    /// Number of replicates.
    pub replicates: usize,
}

impl Bootstrap {
    /// `replicates` resamples from ChaCha8 stream `seed`.
    pub fn new(seed: u64, replicates: usize) -> Self {
        Bootstrap {
            rng: ChaCha8Rng::seed_from_u64(seed),
            replicates,
        }
    }

    /// The mean of a resample (with replacement, same size) of `values`.
    pub fn resample_mean(&mut self, values: &[f64]) -> f64 {
        let n = values.len();
        if n == 0 {
            return f64::NAN;
        }
        let mut s = 0.0;
        for _ in 0..n {
            s += values[self.rng.random_range(0..n)];
        }
        s / n as f64
    }

    /// The mean of a two-stage resample of `cell` (module doc): its runs with replacement,
    /// then the chains inside each drawn run. With one run, [`Bootstrap::resample_mean`].
    pub fn resample_cell(&mut self, cell: &Cell) -> f64 {
        if cell.run_sizes.len() <= 1 {
            return self.resample_mean(&cell.values);
        }
        let starts: Vec<usize> = cell
            .run_sizes
            .iter()
            .scan(0, |acc, &n| {
                let s = *acc;
                *acc += n;
                Some(s)
            })
            .collect();
        let (mut sum, mut count) = (0.0, 0usize);
        for _ in 0..cell.run_sizes.len() {
            let k = self.rng.random_range(0..cell.run_sizes.len());
            let (s, n) = (starts[k], cell.run_sizes[k]);
            for _ in 0..n {
                sum += cell.values[s + self.rng.random_range(0..n)];
            }
            count += n;
        }
        if count == 0 {
            f64::NAN
        } else {
            sum / count as f64
        }
    }

    /// The stream itself, for draws that belong to a replicate (the bracket shift of P\*).
    pub(super) fn rng(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
    }
}

/// A value with its bootstrap standard deviation and 95 % percentile interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Point estimate from the full data.
    pub value: f64,
    /// Standard deviation of the replicates.
    pub err: Option<f64>,
    /// 2.5 % percentile.
    pub lo: Option<f64>,
    /// 97.5 % percentile.
    pub hi: Option<f64>,
    /// Replicates that produced a value.
    pub replicates_ok: usize,
}

/// Quantile with linear interpolation between order statistics (Hyndman–Fan type 7).
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q;
    let i = h.floor() as usize;
    let j = (i + 1).min(sorted.len() - 1);
    Some(sorted[i] + (h - i as f64) * (sorted[j] - sorted[i]))
}

pub(super) fn estimate(value: f64, reps: &[f64]) -> Estimate {
    let mut r: Vec<f64> = reps.iter().copied().filter(|v| v.is_finite()).collect();
    r.sort_by(f64::total_cmp);
    let n = r.len();
    let err = (n >= 2).then(|| {
        let m = r.iter().sum::<f64>() / n as f64;
        (r.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    });
    Estimate {
        value,
        err,
        lo: (n >= 2).then(|| quantile(&r, 0.025)).flatten(),
        hi: (n >= 2).then(|| quantile(&r, 0.975)).flatten(),
        replicates_ok: n,
    }
}

/// The per-chain values at one x, of all runs at that point, run after run.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The x coordinate (e.g. P).
    pub x: f64,
    /// Per-chain time averages of the observable (diverged chains excluded), run after run.
    pub values: Vec<f64>,
    /// How many of `values` each run (seed) contributed, in order.
    pub run_sizes: Vec<usize>,
}

impl Cell {
    /// Mean over chains.
    pub fn mean(&self) -> f64 {
        self.values.iter().sum::<f64>() / self.values.len().max(1) as f64
    }

    /// Standard error of [`Cell::mean`] over the chains (independent networks): s/√n, NaN with
    /// fewer than two chains. The error bars of the figures.
    pub fn sem(&self) -> f64 {
        let n = self.values.len();
        if n < 2 {
            return f64::NAN;
        }
        let m = self.mean();
        let var = self.values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64;
        (var / n as f64).sqrt()
    }
}

/// The coordinate `name` of a run: short names (d, p, p_over_d, n1, kappa, seed) or swept
/// field paths; `data.d` and `data.p` map to the short names, `model.width(s)` to n1.
pub fn coordinate(run: &RunData, name: &str) -> Option<f64> {
    let alias = match name {
        "data.d" => "d",
        "data.p" => "p",
        "data.p_over_d" => "p_over_d",
        "model.widths" | "model.width" | "n" | "N" => "n1",
        "sampler.kappa" => "kappa",
        "sampler.seed" => "seed",
        other => other,
    };
    run.coords.get(alias).copied()
}

fn check_observable(observable: &str) -> Result<()> {
    if CHAIN_OBSERVABLES.contains(&observable) || observable == "outliers_layer1" {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "observable `{observable}` has no per-chain values to bootstrap; allowed: {}",
            CHAIN_OBSERVABLES.join(", ")
        )))
    }
}

fn check_coordinate(data: &StoreData, name: &str) -> Result<()> {
    if data.runs.iter().all(|r| coordinate(r, name).is_some()) {
        Ok(())
    } else {
        let mut names: Vec<String> = data
            .runs
            .first()
            .map(|r| r.coords.keys().cloned().collect())
            .unwrap_or_default();
        names.dedup();
        Err(Error::invalid(format!(
            "variable `{name}` is not a coordinate of these runs; available: {}",
            names.join(", ")
        )))
    }
}

/// Groups the runs by `group` (None: one group) and, inside a group, pools the chains of
/// all runs with the same `x`. Groups and cells are sorted by value.
pub fn cells(
    data: &StoreData,
    group: Option<&str>,
    x: &str,
    observable: &str,
) -> Result<Vec<(f64, Vec<Cell>)>> {
    check_observable(observable)?;
    check_coordinate(data, x)?;
    if let Some(g) = group {
        check_coordinate(data, g)?;
    }
    let mut out: Vec<(f64, Vec<Cell>)> = Vec::new();
    for r in data.analysed_runs_for(observable) {
        let gv = group.and_then(|g| coordinate(r, g)).unwrap_or(0.0);
        let xv = coordinate(r, x).unwrap_or(f64::NAN);
        let vals: Vec<f64> = r
            .chains
            .iter()
            .filter(|c| c.ok)
            .filter_map(|c| c.get(observable))
            .filter(|v| v.is_finite())
            .collect();
        if vals.is_empty() {
            continue;
        }
        let gi = match out.iter().position(|(g, _)| *g == gv) {
            Some(i) => i,
            None => {
                out.push((gv, Vec::new()));
                out.len() - 1
            }
        };
        let cells = &mut out[gi].1;
        match cells.iter_mut().find(|c| c.x == xv) {
            Some(c) => {
                c.run_sizes.push(vals.len());
                c.values.extend(vals);
            }
            None => cells.push(Cell {
                x: xv,
                run_sizes: vec![vals.len()],
                values: vals,
            }),
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (_, c) in &mut out {
        c.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    Ok(out)
}

/// A fitted exponent with its bootstrap uncertainty.
#[derive(Debug, Clone, PartialEq)]
pub struct ExponentFit {
    /// What was fitted, e.g. "P* vs d".
    pub what: String,
    /// The (x, y) points of the fit.
    pub points: Vec<(f64, f64)>,
    /// The least-squares fit in log-log.
    pub fit: LinearFit,
    /// The exponent with its bootstrap error and interval (for P\*, the bootstrap combined
    /// with the crossings' brackets, [`super::pstar`]).
    pub exponent: Estimate,
    /// For P\*: the exponent's bootstrap over seeds and chains alone, without the brackets
    /// (what a grid fine enough to resolve every crossing would leave). None for other fits.
    pub without_bracket: Option<Estimate>,
    /// Points left out (no crossing, y ≤ 0), described.
    pub skipped: Vec<String>,
}

/// The exponent of an observable's ensemble mean against `x` (all other coordinates pooled),
/// bootstrapped over chains.
pub fn fit_observable(
    data: &StoreData,
    x: &str,
    observable: &str,
    boot: &mut Bootstrap,
) -> Result<ExponentFit> {
    let groups = cells(data, None, x, observable)?;
    let cs: Vec<Cell> = groups.into_iter().flat_map(|(_, c)| c).collect();
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    let mut kept = Vec::new();
    for c in &cs {
        let m = c.mean();
        if m > 0.0 && c.x > 0.0 {
            points.push((c.x, m));
            kept.push(c);
        } else {
            skipped.push(format!(
                "{x} = {}: mean {observable} = {m}, which has no logarithm",
                c.x
            ));
        }
    }
    let fit = loglog_fit(&points).ok_or_else(|| {
        let left_out = data
            .runs
            .iter()
            .filter(|r| !data.analyses(r, observable))
            .count();
        let why = if left_out > 0 {
            format!(
                "; {left_out} run(s) were left out because their hot and cold starts disagree on it (rerun them longer, or pass --include-unequilibrated to see them)"
            )
        } else {
            String::new()
        };
        Error::runtime(format!(
            "{observable} is positive at {} value(s) of {x}; a log-log fit needs at least two{why}",
            points.len()
        ))
    })?;
    let mut slopes = Vec::with_capacity(boot.replicates);
    for _ in 0..boot.replicates {
        let pts: Vec<(f64, f64)> = kept.iter().map(|c| (c.x, boot.resample_cell(c))).collect();
        if pts.iter().all(|p| p.1 > 0.0) {
            if let Some(f) = loglog_fit(&pts) {
                slopes.push(f.slope);
            }
        }
    }
    Ok(ExponentFit {
        what: format!("{observable} vs {x}"),
        exponent: estimate(fit.slope, &slopes),
        without_bracket: None,
        points,
        fit,
        skipped,
    })
}

/// What keeps an observable's power-law fit from carrying an exponent, one sentence saying
/// what to run; empty when the fit stands on at least
/// [`super::pstar::MIN_RESOLVED_FOR_FIT`] distinct values of `x`. The rule is P\*'s: two points
/// fix a line and test nothing (issue 15: "refuse to claim an exponent from too few
/// equilibrated points"). Runs left out as unequilibrated are named with their `x`, since
/// rerunning them longer is the cheapest way to a third point.
pub fn observable_fit_readiness(
    fit: &ExponentFit,
    data: &StoreData,
    x: &str,
    y: &str,
    dir: &str,
) -> Vec<String> {
    let need = super::pstar::MIN_RESOLVED_FOR_FIT;
    let mut xs: Vec<f64> = fit.points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if xs.len() >= need {
        return Vec::new();
    }
    let mut left_out: Vec<f64> = if data.include_unequilibrated {
        Vec::new()
    } else {
        data.runs
            .iter()
            .filter(|r| !data.analyses(r, y))
            .filter_map(|r| coordinate(r, x))
            .filter(|v| !xs.contains(v))
            .collect()
    };
    left_out.sort_by(f64::total_cmp);
    left_out.dedup();
    let mut todo = Vec::new();
    if !left_out.is_empty() {
        let list: Vec<String> = left_out.iter().map(|v| format!("{x} = {v}")).collect();
        todo.push(format!(
            "{} left out as unequilibrated: rerun them with longer chains (sampler.steps) into `{dir}`",
            list.join(", ")
        ));
    }
    let missing = need - xs.len();
    if left_out.len() < missing {
        todo.push(format!(
            "add {} value(s) of {x} to the sweep in EXP and rerun `flscale sweep EXP --out {dir}`",
            missing - left_out.len()
        ));
    }
    vec![format!(
        "the exponent of {} rests on {} value(s) of {x} (needs {need}): {}",
        fit.what,
        xs.len(),
        todo.join("; ")
    )]
}

/// The fit's one-line verdict: [`side_by_side`] when the fit has points enough
/// (`carries_exponent`: [`super::pstar::carries_exponent`], or [`observable_fit_readiness`]
/// empty); otherwise no exponent is claimed and the slope through the points is shown as
/// such, beside the prediction.
pub fn claim(fit: &ExponentFit, predicted: Option<&Predicted>, carries_exponent: bool) -> String {
    if carries_exponent {
        return side_by_side(fit, predicted);
    }
    let mut s = format!(
        "{}: no exponent claimed from {} point(s) (see the warning); the slope through them is {:.3}",
        fit.what,
        fit.points.len(),
        fit.exponent.value
    );
    if let Some(err) = fit.exponent.err {
        s += &format!(" ± {err:.3}");
    }
    if let Some(p) = predicted {
        s += &format!(", predicted {} — {}", p.exact, p.description);
    }
    s
}

/// The scaling engine's exponent for the same architecture.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicted {
    /// The exponent.
    pub value: f64,
    /// Its exact rational form, e.g. "1" or "1/2".
    pub exact: String,
    /// What it is, e.g. "P* ∝ d^1 (fcn2-erf-he3, N=d; winner M-Sp)".
    pub description: String,
}

/// Reads the predicted exponent from the scaling engine (`flscale predict`): the exponent
/// of P\*/κ in d (paper eq. 12, P\* ∝ κ·min_q Ẽ_q), or the exponent in `scale` of a free
/// parameter's optimal monomial in the simplest winning pattern (e.g. M ∝ √(N/d) for the
/// two-layer network, App. E.1.1, which gives outliers ∝ N^{1/2} at fixed d).
pub fn predicted_exponent(spec: &PredictSpec) -> Result<Predicted> {
    let arch = Architecture::from_preset(&spec.preset)?;
    let pred = arch.predict(spec.at.as_deref())?;
    let at = spec.at.clone().unwrap_or_else(|| "preset regime".into());
    let winners = pred.winners.join(", ");
    let q2f = |q: crate::scaling::Q| *q.numer() as f64 / *q.denom() as f64;
    let show = |q: crate::scaling::Q| {
        if *q.denom() == 1 {
            format!("{}", q.numer())
        } else {
            format!("{}/{}", q.numer(), q.denom())
        }
    };
    if spec.quantity == "pstar" {
        let q = pred.p_star_exponent.ok_or_else(|| {
            Error::runtime(format!(
                "the scaling engine finds no aligning pattern for {} at {at}",
                spec.preset
            ))
        })?;
        return Ok(Predicted {
            value: q2f(q),
            exact: show(q),
            description: format!(
                "P* ∝ d^{} ({}, {at}; winner {winners})",
                show(q),
                spec.preset
            ),
        });
    }
    for w in pred.simplest_winners() {
        if let Some(m) = w
            .minimum
            .as_ref()
            .and_then(|m| m.argmin_symbolic.get(&spec.quantity))
        {
            let q = m.exponent(&spec.scale);
            return Ok(Predicted {
                value: q2f(q),
                exact: show(q),
                description: format!(
                    "{} ∝ {}^{} ({}, {at}; winner {})",
                    spec.quantity,
                    spec.scale,
                    show(q),
                    spec.preset,
                    w.name
                ),
            });
        }
    }
    Err(Error::runtime(format!(
        "the winning pattern of {} at {at} ({winners}) has no free parameter `{}` with a symbolic optimum",
        spec.preset, spec.quantity
    )))
}

/// Everything `pstar`, `fit`, `plot` and `reproduce` print and draw, computed from the
/// results directory and its `[analysis]` table.
#[derive(Debug, Clone)]
pub struct Analysed {
    /// P\* per group (when the crossing variable takes at least two values).
    pub pstar: Option<PstarTable>,
    /// The default fit of `[analysis] fit` (P\* vs the group variable unless stated).
    pub fit: Option<ExponentFit>,
    /// The scaling engine's exponent for the same quantity.
    pub predicted: Option<Predicted>,
    /// Why something could not be computed, one sentence each.
    pub notes: Vec<String>,
}

/// Runs the analysis that `data.analysis` describes with `replicates` bootstrap resamples
/// from stream `seed`.
pub fn analyse(data: &StoreData, replicates: usize, seed: u64) -> Analysed {
    let a = &data.analysis;
    let mut boot = Bootstrap::new(seed, replicates);
    let mut notes = vec![data.equilibration_note()];
    notes.extend(data.mu_rule_note());
    let fit_spec = a.fit.clone().unwrap_or(super::sweep::FitSpec {
        y: "pstar".into(),
        x: a.group.clone(),
    });
    let xs_vary = {
        let mut v: Vec<f64> = data
            .runs
            .iter()
            .filter_map(|r| coordinate(r, &a.x))
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v.len() >= 2
    };
    let pstar_table = if xs_vary {
        match pstar(data, &PstarQuery::from_analysis(data), &mut boot) {
            Ok(t) => {
                notes.extend(super::pstar::unresolved_notes(&t));
                Some(t)
            }
            Err(e) => {
                notes.push(format!("P* not computed: {e}"));
                None
            }
        }
    } else {
        None
    };
    let fit = if fit_spec.y == "pstar" {
        match &pstar_table {
            Some(t) => match fit_pstar(t) {
                Ok(f) => Some(f),
                Err(e) => {
                    notes.push(format!("no exponent: {e}"));
                    None
                }
            },
            None => None,
        }
    } else {
        match fit_observable(data, &fit_spec.x, &fit_spec.y, &mut boot) {
            Ok(f) => Some(f),
            Err(e) => {
                notes.push(format!("no exponent: {e}"));
                None
            }
        }
    };
    // A prediction is only paired with the fit of the quantity it is about.
    let predicted = match &a.predict {
        Some(p) if (p.quantity == "pstar") != (fit_spec.y == "pstar") => {
            notes.push(format!(
                "[analysis] predict is about {}, the fit about {}; not paired",
                p.quantity, fit_spec.y
            ));
            None
        }
        Some(p) => match predicted_exponent(p) {
            Ok(p) => Some(p),
            Err(e) => {
                notes.push(format!("no prediction: {e}"));
                None
            }
        },
        None => None,
    };
    Analysed {
        pstar: pstar_table,
        fit,
        predicted,
        notes,
    }
}

/// "measured 1.03 ± 0.08 (95 % CI 0.91 … 1.19), predicted 1" — the line every report prints.
pub fn side_by_side(fit: &ExponentFit, predicted: Option<&Predicted>) -> String {
    let e = &fit.exponent;
    let mut s = format!("{}: measured exponent {:.3}", fit.what, e.value);
    if let Some(err) = e.err {
        s += &format!(" ± {err:.3}");
    }
    if let (Some(lo), Some(hi)) = (e.lo, e.hi) {
        s += &format!(" (95 % CI {lo:.3} … {hi:.3})");
    }
    if let Some(b) = &fit.without_bracket {
        if let (Some(err), Some(lo), Some(hi)) = (b.err, b.lo, b.hi) {
            s += &format!(
                " [the grid's brackets included; seeds and chains alone ± {err:.3}, {lo:.3} … {hi:.3}]"
            );
        }
    }
    match predicted {
        Some(p) => s += &format!(", predicted {} — {}", p.exact, p.description),
        None => s += ", no prediction configured",
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::store::{ChainValues, RunData};
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn loglog_fit_recovers_a_known_exponent() {
        let pts: Vec<(f64, f64)> = [2.0, 5.0, 11.0, 40.0]
            .iter()
            .map(|&x: &f64| (x, 3.0 * x.powf(1.5)))
            .collect();
        let f = loglog_fit(&pts).unwrap();
        assert!((f.slope - 1.5).abs() < 1e-12, "{f:?}");
        assert!((f.intercept - 3f64.ln()).abs() < 1e-12);
        assert!(loglog_fit(&[(1.0, 1.0)]).is_none());
        assert!(loglog_fit(&[(1.0, 1.0), (1.0, 2.0)]).is_none());
    }

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

    #[test]
    fn bootstrap_error_of_a_mean_matches_s_over_sqrt_n() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let v: Vec<f64> = (0..400).map(|_| rng.random::<f64>()).collect();
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let s = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let mut b = Bootstrap::new(1, 2000);
        let reps: Vec<f64> = (0..b.replicates).map(|_| b.resample_mean(&v)).collect();
        let e = estimate(m, &reps);
        let want = s / n.sqrt();
        assert!(
            (e.err.unwrap() / want - 1.0).abs() < 0.08,
            "{e:?} vs {want}"
        );
        assert!(e.lo.unwrap() < m && m < e.hi.unwrap());
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
    }

    /// Synthetic sweep: A_f(P, d) = 0.05·(P/d)^0.7 per chain, times 1 + 10 % noise, so
    /// P*(d) = d·2^{1/0.7} ∝ d¹ exactly in expectation.
    fn synthetic(ds: &[f64], ratios: &[f64], chains: usize) -> StoreData {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut runs = Vec::new();
        for &d in ds {
            for &r in ratios {
                let p = r * d;
                let chains: Vec<ChainValues> = (0..chains)
                    .map(|k| {
                        let a = 0.05 * r.powf(0.7) * (1.0 + 0.1 * (rng.random::<f64>() - 0.5));
                        ChainValues {
                            chain: k,
                            ok: true,
                            alignment: Some(a),
                            test_mse: Some(1.0 - a),
                            r_overlap2: Some(a * a),
                            outliers: Some(d.sqrt() * (1.0 + 0.05 * rng.random::<f64>())),
                            mu: None,
                        }
                    })
                    .collect();
                let mut coords = BTreeMap::new();
                coords.insert("d".to_string(), d);
                coords.insert("p".to_string(), p);
                coords.insert("n1".to_string(), d);
                runs.push(RunData::synthetic(runs.len(), coords, chains));
            }
        }
        StoreData::of_runs(runs)
    }

    fn query(x: &str, group: &str) -> PstarQuery {
        PstarQuery {
            x: x.into(),
            group: group.into(),
            observable: "alignment".into(),
            threshold: 0.1,
            falling: false,
            resolution: super::super::pstar::DEFAULT_RESOLUTION,
        }
    }

    #[test]
    fn pstar_and_its_exponent_on_synthetic_data() {
        let data = synthetic(&[10.0, 20.0, 40.0, 80.0], &[1.0, 2.0, 4.0, 8.0, 16.0], 30);
        let mut boot = Bootstrap::new(0, 300);
        let t = pstar(&data, &query("p", "d"), &mut boot).unwrap();
        assert_eq!(t.rows.len(), 4);
        for r in &t.rows {
            let e = r.pstar.unwrap();
            let exact = r.group * 2f64.powf(1.0 / 0.7);
            // Interpolation in log P of a power law is exact up to the noise.
            assert!((e.value / exact - 1.0).abs() < 0.05, "{e:?} vs {exact}");
            assert!(e.err.unwrap() > 0.0);
        }
        let f = fit_pstar(&t).unwrap();
        assert!((f.exponent.value - 1.0).abs() < 0.03, "{f:?}");
        let (lo, hi) = (f.exponent.lo.unwrap(), f.exponent.hi.unwrap());
        // The grid's factor-2 brackets dominate the interval (each crossing ± ln 2/√12 = 20 %
        // in P*): 1 inside, and far wider than the bootstrap over chains alone.
        assert!(lo < 1.0 && hi > 1.0 && hi - lo > 0.3, "{lo} {hi}");
        let b = f.without_bracket.unwrap();
        let (blo, bhi) = (b.lo.unwrap(), b.hi.unwrap());
        assert!(
            blo < 1.0 + 0.03 && bhi > 1.0 - 0.03 && bhi - blo < 0.2,
            "{blo} {bhi}"
        );
        // Same seed, same numbers.
        let mut boot2 = Bootstrap::new(0, 300);
        let t2 = pstar(&data, &query("p", "d"), &mut boot2).unwrap();
        assert_eq!(t, t2);
        // Outliers ∝ √d (here √N): exponent 1/2.
        let mut boot = Bootstrap::new(0, 200);
        let g = fit_observable(&data, "n1", "outliers", &mut boot).unwrap();
        assert!((g.exponent.value - 0.5).abs() < 0.02, "{g:?}");
        let e = fit_observable(&data, "n1", "energy", &mut boot).unwrap_err();
        assert!(e.to_string().contains("energy"), "{e}");
        let e = pstar(&data, &query("q", "d"), &mut boot).unwrap_err();
        assert!(e.to_string().contains("`q`"), "{e}");
    }

    /// fig2c's situation (session 13): of three widths one run's starts disagree, so the
    /// outlier exponent would rest on two points. No exponent is claimed; the warning names
    /// the left-out width and what to run. With the third width equilibrated it is claimed.
    #[test]
    fn an_observable_fit_on_two_equilibrated_points_claims_no_exponent() {
        let mut data = synthetic(&[20.0, 40.0, 80.0], &[4.0], 8);
        data.runs[2].equilibrated = Some(false);
        let mut boot = Bootstrap::new(0, 100);
        let f = fit_observable(&data, "n1", "outliers", &mut boot).unwrap();
        assert_eq!(f.points.len(), 2, "{f:?}");
        let w = observable_fit_readiness(&f, &data, "n1", "outliers", "runs/fig2c");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("rests on 2 value(s) of n1 (needs 3)")
                && w[0].contains("n1 = 80 left out as unequilibrated")
                && w[0].contains("runs/fig2c")
                && !w[0].contains("add "),
            "{w:?}"
        );
        let line = claim(&f, None, w.is_empty());
        assert!(
            line.contains("no exponent claimed from 2 point(s)") && !line.contains("measured"),
            "{line}"
        );
        // A width that was never run is asked for as a new grid value.
        let two = synthetic(&[20.0, 40.0], &[4.0], 8);
        let f2 = fit_observable(&two, "n1", "outliers", &mut boot).unwrap();
        let w2 = observable_fit_readiness(&f2, &two, "n1", "outliers", "runs/x");
        assert!(w2[0].contains("add 1 value(s) of n1"), "{w2:?}");
        data.runs[2].equilibrated = Some(true);
        let f3 = fit_observable(&data, "n1", "outliers", &mut boot).unwrap();
        assert!(observable_fit_readiness(&f3, &data, "n1", "outliers", "runs/fig2c").is_empty());
        assert!(claim(&f3, None, true).contains("measured exponent"));
        // With one equilibrated width left the fit refuses, and says why.
        data.runs[1].equilibrated = Some(false);
        data.runs[2].equilibrated = Some(false);
        let e = fit_observable(&data, "n1", "outliers", &mut boot)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("at 1 value(s) of n1") && e.contains("2 run(s) were left out"),
            "{e}"
        );
    }

    #[test]
    fn the_engine_predicts_pstar_linear_in_d_and_m_as_sqrt_n() {
        let p = predicted_exponent(&PredictSpec {
            preset: "fcn2-erf-he3".into(),
            at: Some("N=d".into()),
            quantity: "pstar".into(),
            scale: "d".into(),
        })
        .unwrap();
        assert_eq!(p.value, 1.0, "{p:?}");
        let m = predicted_exponent(&PredictSpec {
            preset: "fcn2-erf-he3".into(),
            at: Some("N=d".into()),
            quantity: "M".into(),
            scale: "N".into(),
        })
        .unwrap();
        assert_eq!(m.value, 0.5, "{m:?}");
    }
}
