//! Cold, hot or compared starts (spec 02): the one- or two-ensemble run of every model.

use crate::sim::config::{SamplerConfig, Start, StartsCoupling};

use crate::sim::observe::equilibration::{compare_estimates, named, Equilibration, NamedEstimate};

use super::coupling::{
    sketched_relative_distance, start_seed, ChainMeeting, CouplingCertificate, MEETING_TOLERANCE,
};
use super::outcome::{Offset, Outcome, RunObserver};
use super::result::{RunResult, StartResults, Summary};

/// Runs one ensemble: `(hot, seed, observer)` → how it ended, from a hot start when `hot`, with
/// `seed` as the seed of its chains' noise streams and initial draws (the data's stays
/// `sampler.seed`).
pub(crate) type RunOneStart<'a> = dyn FnMut(bool, u64, &mut dyn RunObserver) -> Outcome + 'a;

/// Runs the ensemble(s) that `s.start` asks for — `run_one(hot, seed, observer)` runs one
/// from a cold or a hot start, on the streams of [`start_seed`] — and, for "both", reports the
/// hot one beside the cold one: with independent starts with the "not equilibrated" verdict
/// of the two-sample z-test (spec 02: hysteresis of a first-order transition is reported, not
/// averaged away), with coupled starts with the coupling certificate instead
/// ([`super::coupling`]). Shared by every model.
pub(crate) fn run_starts(
    s: &SamplerConfig,
    streams: u64,
    observer: &mut dyn RunObserver,
    run_one: &mut RunOneStart<'_>,
) -> Outcome {
    let steps = s.steps;
    let seed = |hot: bool| start_seed(streams, hot, s.starts_coupling);
    match s.start {
        Start::Cold => run_one(false, seed(false), observer),
        Start::Hot => run_one(true, seed(true), observer),
        Start::Both => {
            let total = 2 * steps;
            let mut first = Offset {
                inner: &mut *observer,
                offset: 0,
                total,
            };
            let mut cold = match run_one(false, seed(false), &mut first) {
                Outcome::Completed(cold) => cold,
                interrupted => return interrupted,
            };
            let mut second = Offset {
                inner: observer,
                offset: steps,
                total,
            };
            let hot = match run_one(true, seed(true), &mut second) {
                Outcome::Completed(hot) => hot,
                interrupted => return interrupted,
            };
            cold.summary.hot_start = Some(StartResults::of(&hot.summary));
            cold.summary.start_seeds.hot = hot.summary.start_seeds.hot;
            match s.starts_coupling {
                StartsCoupling::Independent => {
                    let verdict = compare_starts(&cold.summary, &hot.summary);
                    cold.summary.equilibrated = verdict.equilibrated;
                    cold.summary.equilibration = Some(verdict);
                }
                StartsCoupling::Coupled => {
                    cold.summary.coupling = Some(certificate(&cold, &hot));
                }
            }
            cold.parameter_sketches = Default::default();
            cold.seconds += hot.seconds;
            cold.steps += hot.steps;
            Outcome::Completed(cold)
        }
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

/// Compares the cold and the hot ensembles' summaries on every fitted observable
/// ([`crate::sim::observe::equilibration`]): a two-sample z-test, valid for independent starts.
pub fn compare_starts(cold: &Summary, hot: &Summary) -> Equilibration {
    compare_estimates(&fitted_observables(cold), &fitted_observables(hot))
}

/// The certificate of the coupled runs `cold` and `hot` (same seed, same chains).
pub(crate) fn certificate(cold: &RunResult, hot: &RunResult) -> CouplingCertificate {
    let (sc, sh) = (&cold.parameter_sketches, &hot.parameter_sketches);
    let chains: Vec<ChainMeeting> = (0..cold.chains.len())
        .map(|k| {
            let running = |r: &RunResult| r.chains.get(k).is_some_and(|c| c.status == "ok");
            if !running(cold) || !running(hot) {
                return ChainMeeting {
                    chain: k,
                    status: "diverged".into(),
                    meeting_step: None,
                    stayed_met: None,
                    final_relative_distance: None,
                };
            }
            let within: Vec<(usize, bool)> = sc
                .steps
                .iter()
                .zip(sc.chains.iter().zip(&sh.chains))
                .filter_map(|(&t, (c, h))| match (&c[k], &h[k]) {
                    (Some(c), Some(h)) => {
                        Some((t, sketched_relative_distance(h, c) <= MEETING_TOLERANCE))
                    }
                    _ => None,
                })
                .collect();
            let first = within.iter().position(|&(_, met)| met);
            ChainMeeting {
                chain: k,
                status: if first.is_some() { "met" } else { "not met" }.into(),
                meeting_step: first.map(|i| within[i].0),
                stayed_met: first.map(|i| within[i..].iter().all(|&(_, met)| met)),
                final_relative_distance: final_relative_distance(cold, hot, k),
            }
        })
        .collect();
    let met: Vec<usize> = chains.iter().filter_map(|c| c.meeting_step).collect();
    CouplingCertificate {
        tolerance: MEETING_TOLERANCE,
        met: met.len(),
        compared: chains.iter().filter(|c| c.status != "diverged").count(),
        last_meeting_step: met.into_iter().max(),
        chains,
    }
}

/// ‖θ_hot − θ_cold‖/‖θ_cold‖ of chain k's final states.
fn final_relative_distance(cold: &RunResult, hot: &RunResult, k: usize) -> Option<f64> {
    let flat = |r: &RunResult| -> Option<Vec<f64>> { r.final_state.get(k).map(|g| g.concat()) };
    let (c, h) = (flat(cold)?, flat(hot)?);
    let diff: f64 = h.iter().zip(&c).map(|(a, b)| (a - b).powi(2)).sum();
    let norm: f64 = c.iter().map(|b| b * b).sum();
    (norm > 0.0).then(|| (diff / norm).sqrt())
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
