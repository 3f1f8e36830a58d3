//! The run of an FCN experiment: data, ensemble, optional MALA/HMC kernel, burn-in
//! adaptation, the sampling loop and its measurements (spec 02).

use crate::sim::config::{ExperimentConfig, SamplerConfig};
use crate::sim::data::Dataset;
use crate::sim::ensemble::fcn::Ensemble;
use crate::sim::kernel::transition::Transition;
use crate::sim::model::fcn::FcnModel;
use crate::sim::model::flat::ParamGroup;
use crate::sim::num::real::Real;
use crate::sim::observe::hermite_components::hermite_components;
use crate::sim::observe::leading_direction::PooledSecondMoment;
use crate::sim::observe::observables::{finite, hist_range, ChainAccumulator, ChainSnapshot};
use crate::sim::observe::overlaps::{ChainProbe, Probe};
use crate::sim::observe::probe_summary::{summarise, ProbeAccumulator};

use super::engine::{
    final_state, new_ensemble, record_health, restrained_chains, sample, MeasurementTime, Recorder,
    RunOptions,
};
use super::outcome::{Outcome, RunObserver};
use super::result::RunResult;
use super::starts::run_starts;
use super::summary::{finish, EnsembleOutcome};
use crate::sim::restraint::Restraint;

/// Runs a validated FCN experiment in precision T: the ensemble(s) of `sampler.start`.
pub(crate) fn run_typed<T: Real>(
    cfg: &ExperimentConfig,
    opts: RunOptions<'_>,
    observer: &mut dyn RunObserver,
) -> Outcome {
    let s = &cfg.sampler;
    let data = Dataset::generate(&cfg.data, &cfg.target, s.seed);
    run_starts(s, opts.streams(s), observer, &mut |hot, seed, observer| {
        run_once::<T>(cfg, &data, hot, seed, None, opts.restraint, observer)
    })
}

/// One ensemble from a cold (prior) or hot (teacher-aligned) start, or from `initial`
/// ([`super::run::Run::start_from`]), its chains on the noise streams of `seed`.
pub(crate) fn run_once<T: Real>(
    cfg: &ExperimentConfig,
    data: &Dataset,
    hot: bool,
    seed: u64,
    initial: Option<&[Vec<Vec<f64>>]>,
    restraint: Option<&Restraint>,
    observer: &mut dyn RunObserver,
) -> Outcome {
    let sampler = SamplerConfig {
        seed,
        ..cfg.sampler.clone()
    };
    let s = &sampler;
    let model = FcnModel::from_config(cfg);
    let d = model.d;
    let n_groups = model.n_groups();
    let isotropic = cfg.data.covariance == crate::sim::config::Covariance::Isotropic;
    let probe = Probe::new(&model, data, cfg.target.parity, isotropic);
    let n_test = data.n_test();
    let sigma1 = cfg.sigma2()[0];
    let mut recorder = FcnRecorder {
        probe_acc: (0..s.chains)
            .map(|_| ProbeAccumulator::new(&probe))
            .collect(),
        probe: &probe,
        x_test: data.x_test.iter().map(|&v| T::of(v)).collect(),
        n_test,
        y_test: &data.y_test,
        y_norm2: data.y_test.iter().map(|v| v * v).sum(),
        teacher: &data.teacher,
        threshold: 3.0 * sigma1.sqrt() / (d as f64).sqrt(),
        range: hist_range(sigma1, d),
        acc: (0..s.chains)
            .map(|_| ChainAccumulator::new(n_test, n_groups))
            .collect(),
        second_moment: PooledSecondMoment::new(d),
    };
    let start = |seed: u64| start_ensemble::<T>(cfg, &model, data, seed, hot, initial);
    let sampled = match sample(s, start, restraint, &mut recorder, observer) {
        Outcome::Completed(sampled) => sampled,
        Outcome::Interrupted { at, steps } => return Outcome::Interrupted { at, steps },
    };
    let FcnRecorder {
        acc,
        second_moment,
        probe_acc,
        threshold,
        range,
        ..
    } = recorder;
    let ens = &sampled.ens;
    let restrained = restrained_chains(&sampled.order_trace, &acc);
    let outcome = ensemble_outcome(&model, ens, data, second_moment);
    let mut result = finish::<T>(cfg, outcome, acc, threshold, range, sampled.seconds);
    result.restrained = restrained;
    if cfg.target.hermite.is_some() || cfg.target.terms.is_some() {
        result.summary.mean_predictor_hermite = mean_predictor_hermite(data, &result);
    }
    result.final_state = final_state(ens);
    attach_probe(&mut result, &probe, &model, &probe_acc, ens, data);
    record_health(&mut result, &sampled, hot);
    Outcome::Completed(result)
}

/// What an FCN run records at every measurement: the first-layer observables
/// ([`ChainAccumulator`]), the pooled second moment of the first-layer rows, and the
/// deeper-layer probes ([`Probe`]).
struct FcnRecorder<'a, T> {
    probe: &'a Probe,
    probe_acc: Vec<ProbeAccumulator>,
    x_test: Vec<T>,
    n_test: usize,
    y_test: &'a [f64],
    y_norm2: f64,
    teacher: &'a [f64],
    threshold: f64,
    range: f64,
    acc: Vec<ChainAccumulator>,
    second_moment: PooledSecondMoment,
}

impl<T: Real> Recorder<T, FcnModel> for FcnRecorder<'_, T> {
    fn record(
        &mut self,
        ens: &mut Ensemble<T>,
        transition: &mut Transition<T>,
        at: MeasurementTime,
    ) {
        // Collapsed: predictions also with the readouts' conditional means (Rao–
        // Blackwellised alignment and mean predictor; observables.rs).
        if let Some(k) = transition.kernel_mut() {
            k.prepare_measurement(ens);
        }
        let means = transition.kernel().and_then(|k| k.conditional_means(ens));
        let (preds, mean_preds) =
            self.probe
                .predict_with_readouts(ens, &self.x_test, self.n_test, means.as_deref());
        self.measure(&preds, ens, at, means.is_some().then_some(&mean_preds[..]));
    }
}

/// What [`finish`] needs of the ensemble besides its accumulators.
fn ensemble_outcome<'a, T: Real>(
    model: &FcnModel,
    ens: &Ensemble<T>,
    data: &'a Dataset,
    second_moment: PooledSecondMoment,
) -> EnsembleOutcome<'a> {
    EnsembleOutcome {
        divergences: ens.divergences(),
        groups: (0..model.n_groups())
            .map(|g| ParamGroup {
                name: model.group_name(g),
                len: model.group_len(g),
                prior_var: model.prior_var[g],
                frozen: model.frozen[g],
            })
            .collect(),
        p: ens.p,
        y_test: &data.y_test,
        teacher: &data.teacher,
        second_moment,
        steps_done: ens.steps_done,
    }
}

/// The mean predictor's Hermite components along Φ* = w*·x / √(w*ᵀΣw*) of every test input
/// (sim/data.rs).
fn mean_predictor_hermite(data: &Dataset, result: &RunResult) -> Option<Vec<f64>> {
    let d = data.teacher.len();
    let phi: Vec<f64> = data
        .x_test
        .chunks_exact(d)
        .map(|x| x.iter().zip(&data.teacher).map(|(a, b)| a * b).sum::<f64>() / data.teacher_scale)
        .collect();
    hermite_components(&result.mean_test_prediction, &phi, 3)
}

/// The probe's summary and histograms over the surviving chains, and each chain's μ along the
/// first parity direction.
fn attach_probe<T: Real>(
    result: &mut RunResult,
    probe: &Probe,
    model: &FcnModel,
    probe_acc: &[ProbeAccumulator],
    ens: &Ensemble<T>,
    data: &Dataset,
) {
    let alive: Vec<usize> = (0..probe_acc.len()).filter(|&k| ens.alive(k)).collect();
    let (probe_summary, probe_histograms) = summarise(
        probe,
        model,
        probe_acc,
        &alive,
        &result.mean_test_prediction,
        &data.y_test,
    );
    result.summary.probe = probe_summary;
    result.probe_histograms = probe_histograms;
    let first_direction = result.summary.probe.parity_directions.first().cloned();
    for row in &mut result.chains {
        if let (true, Some(dir)) = (row.status == "ok", &first_direction) {
            row.mu = probe_acc[row.chain].mu(0, dir).and_then(finite);
        }
    }
}

/// Slot `seed`'s ensemble of a run: chains from the prior (cold), teacher-aligned (hot) or
/// `initial`.
fn start_ensemble<T: Real>(
    cfg: &ExperimentConfig,
    model: &FcnModel,
    data: &Dataset,
    seed: u64,
    hot: bool,
    initial: Option<&[Vec<Vec<f64>>]>,
) -> Ensemble<T> {
    let s = &cfg.sampler;
    let mut ens: Ensemble<T> = new_ensemble(s, model.clone(), &data.x_train, &data.y_train, seed);
    if hot {
        ens.hot_start(&data.teacher, cfg.sigma2()[0].sqrt());
    }
    if let Some(initial) = initial {
        for block in &mut ens.blocks {
            for c in 0..block.len {
                for (g, values) in initial[block.first + c].iter().enumerate() {
                    let n = values.len();
                    for (dst, &src) in block.params[g][c * n..(c + 1) * n].iter_mut().zip(values) {
                        *dst = T::of(src);
                    }
                }
            }
        }
    }
    ens
}

impl<T: Real> FcnRecorder<'_, T> {
    /// Measures every live chain at `at`.
    fn measure(
        &mut self,
        preds: &[ChainProbe<T>],
        ens: &Ensemble<T>,
        at: MeasurementTime,
        mean_preds: Option<&[Option<Vec<T>>]>,
    ) {
        let model = &ens.model;
        let d = model.d;
        let n1 = model.widths[0];
        let p = ens.p;
        let mut k = 0;
        for block in &ens.blocks {
            for c in 0..block.len {
                let chain = k;
                k += 1;
                let Some((f, probe_sample)) = &preds[chain] else {
                    continue;
                };
                let w1 = &block.params[0][c * n1 * d..(c + 1) * n1 * d];
                let rhos: Vec<f64> = w1
                    .chunks_exact(d)
                    .map(|row| row.iter().zip(self.teacher).map(|(w, t)| w.f64() * t).sum())
                    .collect();
                let groups = (0..model.n_groups())
                    .map(|g| {
                        let n = model.group_len(g);
                        (&block.params[g][c * n..(c + 1) * n], block.virial[c][g])
                    })
                    .collect();
                let snapshot = ChainSnapshot {
                    f_test: f,
                    rhos: &rhos,
                    groups,
                    energy: block.energy[c],
                    train_mse: (p > 0).then(|| block.sq_error[c] / p as f64),
                };
                let (y_test, y_norm2) = (self.y_test, self.y_norm2);
                let acc = &mut self.acc[chain];
                acc.record(
                    snapshot,
                    y_test,
                    y_norm2,
                    self.threshold,
                    self.range,
                    at.sampling,
                    at.t,
                );
                if at.sampling {
                    self.second_moment.add_rows(w1);
                }
                if let Some(Some(f_mean)) = mean_preds.map(|m| &m[chain]) {
                    acc.use_conditional_mean(f, f_mean, y_test, y_norm2);
                }
                if at.sampling {
                    self.probe_acc[chain].add(self.probe, f, y_test, probe_sample);
                }
            }
        }
    }
}
