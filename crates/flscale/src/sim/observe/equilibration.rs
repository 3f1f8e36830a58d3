//! Hot and cold starts compared on every observable that a fit, a P\* or a figure uses
//! (spec 02 "hot/cold starts").
//!
//! A first-order transition shows hysteresis: an ensemble started from the prior (cold) and
//! one started aligned with the teacher (hot) stay in different states for longer than the run
//! (paper §4 and App. F; the blog's "metastability"). The two starts estimate the same
//! posterior expectation only when both have equilibrated, so every fitted observable is
//! compared: the verdict of one observable is |cold − hot| ≤ 3·√(err_c² + err_h²) with its
//! z-score, and the run is equilibrated only when every compared observable agrees. Comparing
//! the alignment and R alone passed runs whose outlier counts differed by 20 % (the fig2c audit:
//! 2.77 cold vs 3.32 hot).

use serde::{Deserialize, Serialize};

/// How many combined standard errors two starts may differ by and still agree.
pub const AGREEMENT_Z: f64 = 3.0;

/// One observable's value with its standard error over chains.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NamedEstimate {
    /// The observable's name as in the results table (`alignment`, `outliers_layer1`, …).
    pub name: String,
    /// Its ensemble mean.
    pub value: Option<f64>,
    /// Its standard error over chains.
    pub err: Option<f64>,
}

/// A named estimate (the observables' list is built by the driver from its summary,
/// `sim::driver::starts::fitted_observables`).
pub fn named(name: impl Into<String>, value: Option<f64>, err: Option<f64>) -> NamedEstimate {
    NamedEstimate {
        name: name.into(),
        value,
        err,
    }
}

/// The cold/hot comparison of one observable.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ObservableVerdict {
    /// The observable.
    pub name: String,
    /// Cold-start value.
    pub cold: Option<f64>,
    /// Its standard error.
    pub cold_err: Option<f64>,
    /// Hot-start value.
    pub hot: Option<f64>,
    /// Its standard error.
    pub hot_err: Option<f64>,
    /// (cold − hot)/√(err_c² + err_h²); 0 for identical values without spread, null when it
    /// cannot be formed.
    pub z: Option<f64>,
    /// |z| ≤ [`AGREEMENT_Z`]; null when a value or an error is missing.
    pub agree: Option<bool>,
}

/// The hot/cold verdict of a run over all of its fitted observables.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Equilibration {
    /// Every compared observable.
    pub observables: Vec<ObservableVerdict>,
    /// How many observables could be compared (value and error in both starts).
    pub compared: usize,
    /// The observables whose starts disagree.
    pub disagree: Vec<String>,
    /// The largest |z| over the compared observables.
    pub max_abs_z: Option<f64>,
    /// True when every compared observable agrees, false when one does not, null when none
    /// could be compared.
    pub equilibrated: Option<bool>,
}

fn verdict(cold: &NamedEstimate, hot: &NamedEstimate) -> ObservableVerdict {
    let (z, agree) = match (cold.value, cold.err, hot.value, hot.err) {
        (Some(a), Some(ea), Some(b), Some(eb)) => {
            let s = (ea * ea + eb * eb).sqrt();
            if s > 0.0 {
                let z = (a - b) / s;
                (Some(z), Some(z.abs() <= AGREEMENT_Z))
            } else {
                // No spread in either start (e.g. no outlier in any chain): they agree only
                // when they are equal.
                (if a == b { Some(0.0) } else { None }, Some(a == b))
            }
        }
        _ => (None, None),
    };
    ObservableVerdict {
        name: cold.name.clone(),
        cold: cold.value,
        cold_err: cold.err,
        hot: hot.value,
        hot_err: hot.err,
        z,
        agree,
    }
}

/// Compares the cold and the hot ensembles' estimates of the same observables (matched by
/// name; one missing in the hot list is not judged).
pub fn compare_estimates(cold: &[NamedEstimate], hot_obs: &[NamedEstimate]) -> Equilibration {
    let observables: Vec<ObservableVerdict> = cold
        .iter()
        .map(|c| {
            let h = hot_obs
                .iter()
                .find(|h| h.name == c.name)
                .cloned()
                .unwrap_or_else(|| named(c.name.clone(), None, None));
            verdict(c, &h)
        })
        .collect();
    let compared = observables.iter().filter(|o| o.agree.is_some()).count();
    let disagree: Vec<String> = observables
        .iter()
        .filter(|o| o.agree == Some(false))
        .map(|o| o.name.clone())
        .collect();
    let max_abs_z = observables
        .iter()
        .filter_map(|o| o.z.map(f64::abs))
        .reduce(f64::max);
    Equilibration {
        equilibrated: (compared > 0).then_some(disagree.is_empty()),
        observables,
        compared,
        disagree,
        max_abs_z,
    }
}
