//! The Langevin engine's measured R(P), read from a sweep's results store, for the overlay
//! with the adaptive-kernel prediction (spec 04 `sweep-p`: "side by side with the Langevin
//! engine's measurement on the same D, N, T, s_a², σ_w²").
//!
//! Any results store written by `flscale sweep` / `flscale reproduce` (layout in
//! [`crate::experiment::store`]) is accepted, whichever sampler filled it: each finished run's
//! `experiment.toml` says what was simulated and its `summary.json` holds `r_overlap2` (R =
//! E[ρ²] over first-layer neurons, ρ = w·e) with `r_overlap2_err`, and with
//! `sampler.start = "both"` the hot-start ensemble's `hot_start.r_overlap2`. Only runs that
//! simulate the cavity model's setting are used: a one-hidden-layer erf network on
//! y = He1 + ε·He3 with the same D, N, T (= κ of the Gaussian likelihood, at sampler
//! temperature 1, no frozen layer), σ_w² = σ1² and s_a² (σ_L²/N standard, σ_L²/N² mean-field).

use std::path::Path;

use serde::Serialize;
use serde_json::Value as Json;

use super::adaptive::AdaptiveParams;
use crate::activation::Activation;
use crate::error::{Error, Result};
use crate::experiment::store::{Store, StoreData};
use crate::sim::config::{ExperimentConfig, Likelihood, ModelKind, Parametrization};

/// One Langevin run's R.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LangevinPoint {
    /// The run directory name.
    pub run: String,
    /// Number of training samples P.
    pub p: usize,
    /// R = E[ρ²] of the run's main (cold, or only) start.
    pub r: f64,
    /// Its standard error over chains (`None` without one).
    pub r_err: Option<f64>,
    /// R of the hot-start ensemble (`sampler.start = "both"`), if measured.
    pub r_hot: Option<f64>,
    /// Its standard error.
    pub r_hot_err: Option<f64>,
    /// Neurons per network with |ρ| > 3σ1/√d (`outliers_layer1`), main start.
    pub outliers: Option<f64>,
    /// The same for the hot start.
    pub outliers_hot: Option<f64>,
}

/// R(P) measured by the Langevin engine for one cavity setting, ascending in P.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LangevinCurve {
    /// The results directory it was read from.
    pub dir: String,
    /// The matching runs, ascending in P (ties keep grid order).
    pub points: Vec<LangevinPoint>,
    /// Finished runs skipped because they simulate another setting, with the reason.
    pub skipped: Vec<String>,
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

/// Why the run's configuration is not the cavity setting `prm` (None when it is).
pub(crate) fn mismatch(cfg: &ExperimentConfig, prm: &AdaptiveParams) -> Option<String> {
    let m = &cfg.model;
    if m.kind() != ModelKind::Fcn {
        return Some("its model.kind is not \"fcn\"".into());
    }
    if m.activation != Activation::Erf {
        return Some("its activation is not erf".into());
    }
    if m.widths.len() != 1 {
        return Some(format!("it has {} hidden layers, not 1", m.widths.len()));
    }
    if m.widths[0] != prm.n {
        return Some(format!("its width is {}, not N = {}", m.widths[0], prm.n));
    }
    if cfg.data.d != prm.d {
        return Some(format!("its d is {}, not D = {}", cfg.data.d, prm.d));
    }
    if !close(cfg.sampler.kappa, prm.t) {
        return Some(format!(
            "its kappa is {}, not T = {}",
            cfg.sampler.kappa, prm.t
        ));
    }
    if cfg.sampler.likelihood != Likelihood::Gaussian {
        return Some("its likelihood is not Gaussian".into());
    }
    if !cfg.sampler.frozen_layers.is_empty() {
        return Some("it freezes layers (not the full posterior)".into());
    }
    if !close(cfg.sampler.temperature, 1.0) {
        return Some(format!(
            "its sampler temperature is {}, not 1 (the Bayesian posterior)",
            cfg.sampler.temperature
        ));
    }
    let s2 = cfg.sigma2();
    if !close(s2[0], prm.sigma_w2) {
        return Some(format!("its σ1² is {}, not σ_w² = {}", s2[0], prm.sigma_w2));
    }
    let n = prm.n as f64;
    let readout = match m.parametrization {
        Parametrization::Standard => s2[1] / n,
        Parametrization::MeanField => s2[1] / (n * n),
    };
    if !close(readout, prm.s_a2) {
        return Some(format!(
            "its readout variance is {readout}, not s_a² = {}",
            prm.s_a2
        ));
    }
    let t = &cfg.target;
    let mut terms = t.terms.clone().unwrap_or_default();
    terms.retain(|&(_, c)| c != 0.0);
    terms.sort_by_key(|&(m, _)| m);
    let want_terms = if prm.eps == 0.0 {
        vec![(1, 1.0)]
    } else {
        vec![(1, 1.0), (3, prm.eps)]
    };
    let same_target = t.hermite.is_none()
        && t.parity.is_none()
        && !t.normalize
        && terms.len() == want_terms.len()
        && terms
            .iter()
            .zip(&want_terms)
            .all(|(a, b)| a.0 == b.0 && close(a.1, b.1));
    if !same_target {
        return Some(format!(
            "its target is not y = He1 + {}·He3 (target.terms = [[1, 1.0], [3, {}]])",
            prm.eps, prm.eps
        ));
    }
    None
}

fn number(summary: &Json, path: &[&str]) -> Option<f64> {
    let mut v = summary;
    for k in path {
        v = v.get(k)?;
    }
    v.as_f64().filter(|x| x.is_finite())
}

/// Reads R(P) from the results store `dir`, keeping the runs that simulate `prm`'s setting
/// (P is taken from each run; `prm.p` is ignored). Errors (invalid input) when `dir` is not a
/// results store or none of its finished runs matches.
pub fn load_langevin_r(dir: &Path, prm: &AdaptiveParams) -> Result<LangevinCurve> {
    let data = StoreData::load(dir)?;
    let store = Store::open(dir)?;
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    for run in &data.runs {
        let path = store.run_dir(&run.id).join("experiment.toml");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::read(&path, e))?;
        let cfg = ExperimentConfig::from_toml(&text, &path.display().to_string())?;
        if let Some(why) = mismatch(&cfg, prm) {
            skipped.push(format!("{}: {why}", run.id));
            continue;
        }
        let Some(r) = number(&run.summary, &["r_overlap2"]) else {
            skipped.push(format!("{}: its summary has no finite r_overlap2", run.id));
            continue;
        };
        points.push(LangevinPoint {
            run: run.id.clone(),
            p: cfg.data.p,
            r,
            r_err: number(&run.summary, &["r_overlap2_err"]),
            r_hot: number(&run.summary, &["hot_start", "r_overlap2"]),
            r_hot_err: number(&run.summary, &["hot_start", "r_overlap2_err"]),
            outliers: number(&run.summary, &["outliers_layer1"]),
            outliers_hot: number(&run.summary, &["hot_start", "outliers_layer1"]),
        });
    }
    if points.is_empty() {
        let why = skipped
            .first()
            .map_or("it has no finished runs".to_string(), |s| {
                format!("e.g. {s}")
            });
        return Err(Error::invalid(format!(
            "{}: no finished run simulates the cavity setting (erf, D = {}, N = {}, T = {}, s_a² = {}, σ_w² = {}, ε = {}); {why}",
            dir.display(),
            prm.d,
            prm.n,
            prm.t,
            prm.s_a2,
            prm.sigma_w2,
            prm.eps
        )));
    }
    points.sort_by_key(|p| p.p);
    Ok(LangevinCurve {
        dir: dir.display().to_string(),
        points,
        skipped,
    })
}

/// The Langevin measurement next to the adaptive-kernel prediction at the same P.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverlayRow {
    /// Number of training samples P.
    pub p: usize,
    /// Langevin R (main start) and its standard error.
    pub r_langevin: f64,
    /// Its standard error.
    pub r_langevin_err: Option<f64>,
    /// Langevin R of the hot start, if measured.
    pub r_langevin_hot: Option<f64>,
    /// Adaptive-kernel R on the branch from small alignment at this P (linear in log P
    /// between the sweep's P values; `None` outside their range).
    pub r_unaligned: Option<f64>,
    /// The same on the branch from large alignment.
    pub r_aligned: Option<f64>,
    /// Langevin neurons per network with |ρ| > 3σ1/√d, main and hot start.
    pub outliers_langevin: Option<f64>,
    /// The hot start's.
    pub outliers_langevin_hot: Option<f64>,
    /// Predicted N·P(|ρ| > 3σ_w/√D) on the branch from small alignment (interpolated as R).
    pub outliers_unaligned: Option<f64>,
    /// The same on the branch from large alignment.
    pub outliers_aligned: Option<f64>,
}

/// y at `x` from points ascending in x, linear in log x; `None` outside their range.
fn interpolate_log(points: &[(f64, f64)], x: f64) -> Option<f64> {
    let first = points.first()?;
    if points.len() == 1 {
        return close(first.0, x).then_some(first.1);
    }
    points.windows(2).find_map(|w| {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        (x >= x0 && x <= x1).then(|| {
            let f = (x.ln() - x0.ln()) / (x1.ln() - x0.ln());
            y0 + f * (y1 - y0)
        })
    })
}

/// Each Langevin point with the two predicted branches at its P.
pub fn overlay_rows(curve: &LangevinCurve, sweep: &super::sweep_p::SweepReport) -> Vec<OverlayRow> {
    use super::adaptive::BranchSolution;
    let branch = |v: &[BranchSolution], f: fn(&BranchSolution) -> f64| {
        v.iter().map(|s| (s.p as f64, f(s))).collect::<Vec<_>>()
    };
    let (cold, hot) = (
        branch(&sweep.unaligned, |s| s.r),
        branch(&sweep.aligned, |s| s.r),
    );
    let (cold_out, hot_out) = (
        branch(&sweep.unaligned, |s| s.outliers),
        branch(&sweep.aligned, |s| s.outliers),
    );
    curve
        .points
        .iter()
        .map(|pt| OverlayRow {
            p: pt.p,
            r_langevin: pt.r,
            r_langevin_err: pt.r_err,
            r_langevin_hot: pt.r_hot,
            r_unaligned: interpolate_log(&cold, pt.p as f64),
            r_aligned: interpolate_log(&hot, pt.p as f64),
            outliers_langevin: pt.outliers,
            outliers_langevin_hot: pt.outliers_hot,
            outliers_unaligned: interpolate_log(&cold_out, pt.p as f64),
            outliers_aligned: interpolate_log(&hot_out, pt.p as f64),
        })
        .collect()
}
