//! The statistics under every fit (spec 03 "Analysis"; paper App. F.0.1): least squares in
//! log-log, the bootstrap over seeds and chains, and the cells of per-chain values it resamples.
//!
//! * **Exponents**: ordinary least squares of log y on log x (e.g. log P\* on log d, Fig. 2b;
//!   log outliers on log N, Fig. 2c).
//! * **Uncertainty**: a non-parametric bootstrap over seeds and chains. Every (group, x) cell
//!   holds the per-chain time averages of all runs at that point, run by run; each replicate
//!   resamples the runs (seeds) of every cell with replacement and then the chains inside each
//!   drawn run (a two-stage bootstrap, Davison & Hinkley 1997 §3.8: chains of one seed share
//!   its data set and teacher, so pooling them as independent understates the error), and
//!   recomputes the means, the crossings and the fit. A cell of one run resamples its chains
//!   only, exactly as a one-stage bootstrap. The reported error is the replicates' standard
//!   deviation, the interval their 2.5–97.5 % percentiles. The resampling stream is ChaCha8
//!   with a fixed seed and runs sequentially, so the numbers do not depend on the thread count.
//!
//! The cells pool only the runs the analysis uses ([`StoreData::analysed_runs_for`], the
//! hot/cold verdicts of [`super::starts`]).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::store::{RunData, StoreData, CHAIN_OBSERVABLES};
use crate::error::{Error, Result};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
