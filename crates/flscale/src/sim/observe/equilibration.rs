//! Hot and cold starts compared on every observable that a fit, a P\* or a figure uses
//! (spec 02 "hot/cold starts"; issue 15 item 1).
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

use crate::sim::driver::result::Summary;

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

fn named(name: impl Into<String>, value: Option<f64>, err: Option<f64>) -> NamedEstimate {
    NamedEstimate {
        name: name.into(),
        value,
        err,
    }
}

/// Every observable of `s` that a fit, a P\* or a figure reads, with its error: alignment, test
/// MSE, R, first-layer outliers, test accuracy, μ and the specialised count along every parity
/// direction, and the deeper layers' outlier counts along each feature.
pub fn fitted_observables(s: &Summary) -> Vec<NamedEstimate> {
    let p = &s.probe;
    let mut v = vec![
        named("alignment", s.alignment, s.alignment_err),
        named("test_mse", s.test_mse, s.test_mse_err),
        named("r_overlap2", s.r_overlap2, s.r_overlap2_err),
        named("outliers_layer1", s.outliers_layer1, s.outliers_layer1_err),
    ];
    if p.test_accuracy.is_some() {
        v.push(named("test_accuracy", p.test_accuracy, p.test_accuracy_err));
    }
    for d in &p.parity_directions {
        v.push(named(format!("mu_{}", d.direction), d.mu, d.mu_err));
        v.push(named(
            format!("specialising_{}", d.direction),
            d.specialising,
            d.specialising_err,
        ));
    }
    for l in &p.deeper_layers {
        for f in &l.features {
            v.push(named(
                format!("outliers_layer{}_{}", l.layer, f.feature),
                f.outliers,
                f.outliers_err,
            ));
        }
    }
    v
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

/// Compares the cold and the hot ensembles' summaries on every fitted observable.
pub fn compare_starts(cold: &Summary, hot: &Summary) -> Equilibration {
    let hot_obs = fitted_observables(hot);
    let observables: Vec<ObservableVerdict> = fitted_observables(cold)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(alignment: f64, r: f64, outliers: f64, err: f64) -> Summary {
        Summary {
            alignment: Some(alignment),
            alignment_err: Some(err),
            test_mse: Some(1.0 - alignment),
            test_mse_err: Some(err),
            r_overlap2: Some(r),
            r_overlap2_err: Some(err),
            outliers_layer1: Some(outliers),
            outliers_layer1_err: Some(0.1),
            ..Default::default()
        }
    }

    /// The fig2c audit's run: alignment and R agree, the outlier counts 2.77 vs 3.32 (errors
    /// 0.1) do not; the old check said "equilibrated".
    #[test]
    fn a_disagreement_in_the_outliers_alone_fails_the_run() {
        let cold = summary(0.40, 0.05, 2.77, 0.01);
        let hot = summary(0.41, 0.05, 3.32, 0.01);
        let e = compare_starts(&cold, &hot);
        assert_eq!(e.equilibrated, Some(false));
        assert_eq!(e.disagree, vec!["outliers_layer1".to_string()]);
        let o = e
            .observables
            .iter()
            .find(|o| o.name == "outliers_layer1")
            .unwrap();
        // (2.77 − 3.32)/√(0.1² + 0.1²) = −3.89.
        assert!(
            (o.z.unwrap() + 0.55 / 0.02f64.sqrt()).abs() < 1e-12,
            "{o:?}"
        );
        let a = e
            .observables
            .iter()
            .find(|o| o.name == "alignment")
            .unwrap();
        assert_eq!(a.agree, Some(true));
        assert_eq!(e.compared, 4);
        assert!((e.max_abs_z.unwrap() - 3.889).abs() < 1e-3);
        let same = compare_starts(&cold, &cold);
        assert_eq!(same.equilibrated, Some(true));
        assert_eq!(same.max_abs_z, Some(0.0));
    }

    #[test]
    fn observables_without_errors_are_not_judged_and_spreadless_ones_must_be_equal() {
        let mut cold = summary(0.4, 0.05, 0.0, 0.01);
        let mut hot = cold.clone();
        cold.outliers_layer1_err = Some(0.0);
        hot.outliers_layer1_err = Some(0.0);
        hot.outliers_layer1 = Some(1.0);
        cold.alignment_err = None;
        let e = compare_starts(&cold, &hot);
        let a = e
            .observables
            .iter()
            .find(|o| o.name == "alignment")
            .unwrap();
        assert_eq!(a.agree, None);
        let o = e
            .observables
            .iter()
            .find(|o| o.name == "outliers_layer1")
            .unwrap();
        assert_eq!((o.z, o.agree), (None, Some(false)));
        assert_eq!(e.equilibrated, Some(false));
        let none = compare_starts(&Summary::default(), &Summary::default());
        assert_eq!((none.compared, none.equilibrated), (0, None));
    }
}
