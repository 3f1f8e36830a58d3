//! The summary of one ensemble from its chains' accumulators (spec 02 "Observables"), the
//! same for every model.

use crate::sim::config::{ExperimentConfig, SamplerConfig, SamplerMethod};
use crate::sim::ensemble::fcn::Divergence;
use crate::sim::model::flat::ParamGroup;
use crate::sim::num::real::Real;
use crate::sim::observe::leading_direction::PooledSecondMoment;
use crate::sim::observe::observables::{
    finite, integrated_autocorrelation_time, mean_and_error, ChainAccumulator, GroupStats,
    Measurement, HIST_BINS,
};
use crate::sim::observe::overlaps::ProbeSummary;

use super::result::{
    ChainRow, Diagnostics, DivergedChain, Histogram, RunResult, Summary, TraceRow,
};

/// η·λ_max above which an unadjusted Langevin run (`mala = false`) is warned about. Along a
/// direction of curvature λ the unadjusted chain's stationary variance is T/λ·1/(1 − ηλ/2)
/// instead of T/λ (the exact discretisation of the Ornstein–Uhlenbeck process; Roberts &
/// Tweedie, Bernoulli 2 (1996) 341), so at 0.05 the stiffest direction is inflated by 2.6 %;
/// the measured bias of the observables can be much larger (docs/langevin.md, "Step-size
/// bias": the adapted ULA step η·λ_max = 0.1 left a small three-layer network's test MSE
/// 35 % above the Metropolis-adjusted value).
pub const ULA_BIAS_THRESHOLD: f64 = 0.05;

/// The summary's warnings ([`Summary::warnings`]) from the sampler settings and the measured
/// η·λ_max.
pub(crate) fn step_warnings(s: &SamplerConfig, dg: &Diagnostics) -> Vec<String> {
    let mut out = Vec::new();
    let Some(h) = dg.step_times_lambda_max else {
        return out;
    };
    if s.proposal.is_metropolis() || h <= ULA_BIAS_THRESHOLD {
        return out;
    }
    let inflation = if h < 2.0 {
        format!(
            "the variance along the stiffest direction is inflated by {:.0} % (1/(1 − ηλ/2))",
            100.0 * (1.0 / (1.0 - h / 2.0) - 1.0)
        )
    } else {
        "the stiffest direction is unstable (ηλ ≥ 2)".to_string()
    };
    out.push(format!(
        "unadjusted Langevin (mala = false) at η·λ_max = {h:.3}, above {ULA_BIAS_THRESHOLD}: every average carries an O(η) bias and {inflation}; set mala = true (the default) for numbers that are exact in the limit of long runs, or lower sampler.step"
    ));
    out
}

/// What the summary needs to know about an ensemble besides its chains' accumulators — the
/// same for every model.
#[derive(Debug)]
pub(crate) struct EnsembleOutcome<'a> {
    /// Per chain (chain order): why and when it was stopped, `None` if it survived.
    pub divergences: Vec<Option<Divergence>>,
    /// The parameter groups, in the order of the accumulators' moments.
    pub groups: Vec<ParamGroup>,
    /// Training-set size P.
    pub p: usize,
    /// Test targets.
    pub y_test: &'a [f64],
    /// The direction the leading eigenvector of the filters' second moment is compared with.
    pub teacher: &'a [f64],
    /// The filters' second moment pooled over chains and samples (disabled where there are no
    /// filters or they are too long; then no leading direction).
    pub second_moment: PooledSecondMoment,
    /// Steps taken.
    pub steps_done: usize,
}

/// The chains that survived, in chain order, and the reductions over them that every part of
/// the summary shares: time averages per chain, the mean and standard error over chains.
struct Survivors<'a> {
    acc: &'a [ChainAccumulator],
    alive: Vec<usize>,
    /// Samples per chain after burn-in (the same for every surviving chain).
    samples: usize,
}

impl<'a> Survivors<'a> {
    fn new(acc: &'a [ChainAccumulator], divergences: &[Option<Divergence>]) -> Self {
        let alive: Vec<usize> = (0..acc.len())
            .filter(|&k| divergences[k].is_none())
            .collect();
        let samples = alive.first().map(|&k| acc[k].samples).unwrap_or(0);
        Survivors {
            acc,
            alive,
            samples,
        }
    }

    fn is_empty(&self) -> bool {
        self.alive.is_empty()
    }

    /// Chain `k`'s measurements after burn-in.
    fn sampled(&self, k: usize) -> Vec<&'a Measurement> {
        self.acc[k]
            .series
            .iter()
            .filter(|(s, _)| *s)
            .map(|(_, m)| m)
            .collect()
    }

    /// Chain `k`'s time average of `f`.
    fn chain_mean(&self, k: usize, f: &dyn Fn(&Measurement) -> f64) -> f64 {
        let ms = self.sampled(k);
        ms.iter().map(|m| f(m)).sum::<f64>() / ms.len().max(1) as f64
    }

    /// Mean and standard error over the surviving chains of the time averages of `f`.
    fn stat(&self, f: &dyn Fn(&Measurement) -> f64) -> (Option<f64>, Option<f64>) {
        if self.is_empty() {
            return (None, None);
        }
        let v: Vec<f64> = self.alive.iter().map(|&k| self.chain_mean(k, f)).collect();
        let (m, e) = mean_and_error(&v);
        (finite(m), e.and_then(finite))
    }

    /// The mean energy over the first (or second) half of the samples, a drift check.
    fn half_energy(&self, first: bool) -> Option<f64> {
        if self.is_empty() || self.samples < 2 {
            return None;
        }
        let h = self.samples / 2;
        let v: Vec<f64> = self
            .alive
            .iter()
            .map(|&k| {
                let ms = self.sampled(k);
                let part = if first { &ms[..h] } else { &ms[h..] };
                part.iter().map(|m| m.energy).sum::<f64>() / part.len() as f64
            })
            .collect();
        finite(v.iter().sum::<f64>() / v.len() as f64)
    }

    /// Per surviving chain, the sampled series of `f` (for autocorrelation times).
    fn series_of(&self, f: &dyn Fn(&Measurement) -> f64) -> Vec<Vec<f64>> {
        self.alive
            .iter()
            .map(|&k| self.sampled(k).iter().map(|m| f(m)).collect())
            .collect()
    }

    /// The ensemble's mean test prediction, over chains and samples.
    fn mean_predictor(&self, n_test: usize) -> Vec<f64> {
        let mut mean_pred = vec![0.0; if self.is_empty() { 0 } else { n_test }];
        for &k in &self.alive {
            for (m, s) in mean_pred.iter_mut().zip(&self.acc[k].f_test_sum) {
                *m += s;
            }
        }
        let denom = (self.alive.len() * self.samples).max(1) as f64;
        for m in &mut mean_pred {
            *m /= denom;
        }
        mean_pred
    }

    /// Per parameter group: moments and the configurational temperature (virial).
    fn group_stats(&self, groups: &[ParamGroup]) -> Vec<GroupStats> {
        groups
            .iter()
            .enumerate()
            .map(|(g, grp)| {
                let entries = (grp.len * self.alive.len() * self.samples) as f64;
                let sum = |j: usize| {
                    self.alive
                        .iter()
                        .map(|&k| self.acc[k].moments[g][j])
                        .sum::<f64>()
                };
                let vir = self
                    .alive
                    .iter()
                    .map(|&k| self.acc[k].virial_sum[g])
                    .sum::<f64>();
                let ok = entries > 0.0;
                // Each chain's time average (every chain has `samples` samples), whose spread
                // gives the error bar; their mean is vir / entries.
                let per_chain: Vec<f64> = self
                    .alive
                    .iter()
                    .map(|&k| self.acc[k].virial_sum[g] / (grp.len * self.samples) as f64)
                    .collect();
                GroupStats {
                    group: grp.name.clone(),
                    prior_variance: finite(grp.prior_var),
                    mean: ok.then(|| sum(0) / entries).and_then(finite),
                    second_moment: ok.then(|| sum(1) / entries).and_then(finite),
                    fourth_moment: ok.then(|| sum(2) / entries).and_then(finite),
                    temperature: ok.then(|| vir / entries).and_then(finite),
                    temperature_err: ok
                        .then(|| mean_and_error(&per_chain).1)
                        .flatten()
                        .and_then(finite),
                    frozen: grp.frozen,
                }
            })
            .collect()
    }

    /// The first-layer overlap histogram pooled over the surviving chains, on [−range, range].
    fn histogram(&self, range: f64) -> Histogram {
        let mut counts = vec![0u64; HIST_BINS];
        let mut outside = 0;
        for &k in &self.alive {
            for (c, h) in counts.iter_mut().zip(&self.acc[k].hist) {
                *c += h;
            }
            outside += self.acc[k].hist_outside;
        }
        let edges = (0..=HIST_BINS)
            .map(|i| -range + 2.0 * range * i as f64 / HIST_BINS as f64)
            .collect();
        Histogram {
            edges,
            counts,
            outside,
        }
    }

    /// Traces: every sampling time of the surviving chains, burn-in included, averaged over
    /// chains.
    fn traces(&self, has_train: bool) -> Vec<TraceRow> {
        let n_rows = self
            .alive
            .first()
            .map(|&k| self.acc[k].series.len())
            .unwrap_or(0);
        (0..n_rows)
            .map(|i| {
                let rows: Vec<&(bool, Measurement)> =
                    self.alive.iter().map(|&k| &self.acc[k].series[i]).collect();
                let n = rows.len() as f64;
                let mean = |f: &dyn Fn(&Measurement) -> f64| {
                    rows.iter().map(|(_, m)| f(m)).sum::<f64>() / n
                };
                TraceRow {
                    step: rows[0].1.step,
                    burn_in: !rows[0].0,
                    energy: mean(&|m| m.energy),
                    alignment: mean(&|m| m.alignment),
                    test_mse: mean(&|m| m.test_mse),
                    train_mse: has_train.then(|| mean(&|m| m.train_mse.unwrap_or(0.0))),
                    r_overlap2: mean(&|m| m.r_overlap2),
                    outliers: mean(&|m| m.outliers as f64),
                }
            })
            .collect()
    }

    /// One row per chain, diverged ones included (status "diverged", no values).
    fn chain_rows(&self, divergences: &[Option<Divergence>]) -> Vec<ChainRow> {
        (0..self.acc.len())
            .map(|k| {
                let ok = divergences[k].is_none();
                let v = |f: &dyn Fn(&Measurement) -> f64| {
                    ok.then(|| self.chain_mean(k, f)).and_then(finite)
                };
                ChainRow {
                    chain: k,
                    status: if ok { "ok" } else { "diverged" }.to_string(),
                    alignment: v(&|m| m.alignment),
                    test_mse: v(&|m| m.test_mse),
                    r_overlap2: v(&|m| m.r_overlap2),
                    outliers: v(&|m| m.outliers as f64),
                    mu: None,
                }
            })
            .collect()
    }

    /// Energy drift, autocorrelation times and effective sample sizes, per-group moments;
    /// λ_max and the acceptance rate are left for the caller.
    fn diagnostics(&self, cfg: &ExperimentConfig, groups: &[ParamGroup]) -> Diagnostics {
        let (energy_mean, _) = self.stat(&|m| m.energy);
        let iat_alignment = integrated_autocorrelation_time(&self.series_of(&|m| m.alignment));
        let iat_r = integrated_autocorrelation_time(&self.series_of(&|m| m.r_overlap2));
        let iat_outliers = integrated_autocorrelation_time(&self.series_of(&|m| m.outliers as f64));
        let total_samples = (self.alive.len() * self.samples) as f64;
        Diagnostics {
            energy_mean,
            energy_first_half: self.half_energy(true),
            energy_second_half: self.half_energy(false),
            iat_alignment,
            ess_alignment: iat_alignment.map(|t| total_samples / t),
            iat_r_overlap2: iat_r,
            ess_r_overlap2: iat_r.map(|t| total_samples / t),
            iat_outliers,
            ess_outliers: iat_outliers.map(|t| total_samples / t),
            lambda_max: None,
            step: cfg.sampler.step,
            step_times_lambda_max: None,
            groups: self.group_stats(groups),
            method: match cfg.sampler.method {
                SamplerMethod::Plain => "plain",
                SamplerMethod::Collapsed => "collapsed",
            }
            .to_string(),
            acceptance_rate: None,
            metric: Default::default(),
        }
    }
}

/// Combines the per-chain accumulators of the chains that survived into the run's results:
/// means and standard errors over chains of the time-averaged observables, the mean
/// predictor, autocorrelation times, per-group moments and temperatures, the leading
/// direction, histogram, traces and per-chain rows (spec 02 "Observables"). Every reduction
/// runs in chain order. `start`, λ_max and the acceptance rate are left for the caller.
pub(crate) fn finish<T: Real>(
    cfg: &ExperimentConfig,
    ens: EnsembleOutcome<'_>,
    acc: Vec<ChainAccumulator>,
    threshold: f64,
    range: f64,
    seconds: f64,
) -> RunResult {
    let divergences = &ens.divergences;
    let diverged_chains: Vec<DivergedChain> = divergences
        .iter()
        .enumerate()
        .filter_map(|(k, d)| {
            d.as_ref().map(|d| DivergedChain {
                chain: k,
                step: d.step,
                reason: d.reason.clone(),
            })
        })
        .collect();
    let surv = Survivors::new(&acc, divergences);
    let (alignment, alignment_err) = surv.stat(&|m| m.alignment);
    let (test_mse, test_mse_err) = surv.stat(&|m| m.test_mse);
    let (r_overlap2, r_overlap2_err) = surv.stat(&|m| m.r_overlap2);
    let (outliers, outliers_err) = surv.stat(&|m| m.outliers as f64);
    let train_mse = if ens.p > 0 {
        surv.stat(&|m| m.train_mse.unwrap_or(0.0)).0
    } else {
        None
    };
    let n_test = ens.y_test.len();
    let mean_pred = surv.mean_predictor(n_test);
    let test_mse_mean_predictor = (!surv.is_empty()).then(|| {
        mean_pred
            .iter()
            .zip(ens.y_test)
            .map(|(f, y)| (f - y).powi(2))
            .sum::<f64>()
            / n_test as f64
    });
    let y_msq = ens.y_test.iter().map(|v| v * v).sum::<f64>() / n_test as f64;
    let mse_lower_bound = alignment.map(|a| (1.0 - a).powi(2) * y_msq);
    let leading_direction_overlap = if surv.is_empty() || surv.samples == 0 {
        None
    } else {
        ens.second_moment.leading_direction_overlap(ens.teacher)
    };
    let summary = Summary {
        alignment,
        alignment_err,
        test_mse,
        test_mse_err,
        test_mse_mean_predictor: test_mse_mean_predictor.and_then(finite),
        mse_lower_bound: mse_lower_bound.and_then(finite),
        train_mse,
        outliers_layer1: outliers,
        outliers_layer1_err: outliers_err,
        outlier_threshold: threshold,
        r_overlap2,
        r_overlap2_err,
        leading_direction_overlap,
        suggested_step: (!diverged_chains.is_empty()).then(|| cfg.sampler.step / 10.0),
        diverged_chains,
        chains_used: surv.alive.len(),
        samples_per_chain: surv.samples,
        precision: T::NAME.to_string(),
        diagnostics: surv.diagnostics(cfg, &ens.groups),
        start: String::new(),
        hot_start: None,
        start_seeds: Default::default(),
        coupling: None,
        equilibrated: None,
        equilibration: None,
        mean_predictor_hermite: None,
        tempering: None,
        warnings: Vec::new(),
        steps_per_second: None,
        probe: ProbeSummary::default(),
    };
    RunResult {
        summary,
        traces: surv.traces(ens.p > 0),
        chains: surv.chain_rows(divergences),
        histogram: surv.histogram(range),
        probe_histograms: Vec::new(),
        mean_test_prediction: mean_pred,
        seconds,
        sampling_seconds: 0.0,
        steps: ens.steps_done,
        final_state: Vec::new(),
        parameter_sketches: Default::default(),
        restrained: Vec::new(),
        metric_diagonal: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-group temperature is the pooled ⟨θ·∇U⟩ per entry and its error the standard
    /// error of the surviving chains' time averages; a diverged chain counts in neither.
    #[test]
    fn group_temperature_has_the_standard_error_over_surviving_chains() {
        let groups = vec![ParamGroup {
            name: "readout".to_string(),
            len: 2,
            prior_var: 0.5,
            frozen: false,
        }];
        // Three chains of 4 samples with time-averaged temperatures 1, 2 and −3 (virial sums
        // = temperature × 2 entries × 4 samples), and a fourth that diverged.
        let acc: Vec<ChainAccumulator> = [1.0, 2.0, -3.0, 100.0]
            .iter()
            .map(|&t| {
                let mut a = ChainAccumulator::new(0, 1);
                a.samples = 4;
                a.virial_sum[0] = t * 8.0;
                a
            })
            .collect();
        let mut divergences = vec![None, None, None];
        divergences.push(Some(Divergence {
            step: 3,
            reason: "non-finite energy".to_string(),
        }));
        let stats = Survivors::new(&acc, &divergences).group_stats(&groups);
        let t = stats[0].temperature.unwrap();
        assert!((t - 0.0).abs() < 1e-12, "{t}");
        // Sample variance of (1, 2, −3) is 7, so the error is √(7/3).
        let e = stats[0].temperature_err.unwrap();
        assert!((e - (7.0f64 / 3.0).sqrt()).abs() < 1e-12, "{e}");
        // One surviving chain: a value, no error bar.
        let one = Survivors::new(&acc[..1], &divergences[..1]).group_stats(&groups);
        assert_eq!(one[0].temperature, Some(1.0));
        assert_eq!(one[0].temperature_err, None);
    }
}
