//! The run of an FCN experiment: data, ensemble, optional MALA/HMC kernel, burn-in
//! adaptation, the sampling loop and its measurements (spec 02).

use crate::error::{Error, Result};
use crate::sim::adapt::{adaptation_interval, StepSteering};
use crate::sim::config::{ExperimentConfig, Preconditioner, SamplerConfig, SamplerMethod};
use crate::sim::data::Dataset;
use crate::sim::ensemble::fcn::{Dynamics, Ensemble};
use crate::sim::kernel::langevin::Proposal;
use crate::sim::kernel::mala::Kernel;
use crate::sim::model::fcn::FcnModel;
use crate::sim::model::flat::ParamGroup;
use crate::sim::num::real::Real;
use crate::sim::observe::hermite_components::hermite_components;
use crate::sim::observe::leading_direction::PooledSecondMoment;
use crate::sim::observe::observables::{finite, hist_range, ChainAccumulator, ChainSnapshot};
use crate::sim::observe::overlaps::{ChainProbe, Probe};
use crate::sim::observe::probe_summary::{summarise, ProbeAccumulator};

use super::result::RunResult;
use super::starts::run_starts;
use super::summary::{finish, EnsembleOutcome};
use super::tempered::{slot_seed, Replicas};

pub(crate) fn run_typed<T: Real>(
    cfg: &ExperimentConfig,
    progress: &mut dyn FnMut(usize, usize),
    interrupted: &dyn Fn() -> bool,
) -> Result<RunResult> {
    let s = &cfg.sampler;
    let data = Dataset::generate(&cfg.data, &cfg.target, s.seed);
    run_starts(s.start, s.steps, progress, &mut |hot, progress| {
        run_once::<T>(cfg, &data, hot, None, progress, interrupted)
    })
}

/// One ensemble from a cold (prior) or hot (teacher-aligned) start, or from `initial`
/// ([`super::run::run_experiment_from`]).
pub(crate) fn run_once<T: Real>(
    cfg: &ExperimentConfig,
    data: &Dataset,
    hot: bool,
    initial: Option<&[Vec<Vec<f64>>]>,
    progress: &mut dyn FnMut(usize, usize),
    interrupted: &dyn Fn() -> bool,
) -> Result<RunResult> {
    let s = &cfg.sampler;
    let model = FcnModel::from_config(cfg);
    let d = model.d;
    let n_groups = model.n_groups();
    let start_ensemble = |seed: u64| start_ensemble::<T>(cfg, &model, data, seed, hot, initial);
    let mut ens = start_ensemble(s.seed);
    let isotropic = cfg.data.covariance == crate::sim::config::Covariance::Isotropic;
    let probe = Probe::new(&model, data, cfg.target.parity, isotropic);
    let mut probe_acc: Vec<ProbeAccumulator> = (0..s.chains)
        .map(|_| ProbeAccumulator::new(&probe))
        .collect();
    // The collapsed posterior, MALA and replica exchange run on the cached-gradient kernel;
    // plain ULA keeps the sampler's fused step.
    let new_kernel = |ens: &Ensemble<T>| new_kernel(ens, s);
    let tempered = s.tempering().is_some();
    let mut kernel =
        (s.method == SamplerMethod::Collapsed || s.mala || tempered).then(|| new_kernel(&ens));
    let mut replicas = s.tempering().map(|t| {
        Replicas::new(
            t,
            s,
            s.chains,
            |slot| start_ensemble(slot_seed(s.seed, slot)),
            new_kernel,
        )
    });
    let mut steering = StepSteering::new(s.mala, s.hmc_steps.is_some());
    let n_test = data.n_test();
    let x_test: Vec<T> = data.x_test.iter().map(|&v| T::of(v)).collect();
    let y_test = &data.y_test;
    let y_norm2: f64 = y_test.iter().map(|v| v * v).sum();
    let sigma1 = cfg.sigma2()[0];
    let threshold = 3.0 * sigma1.sqrt() / (d as f64).sqrt();
    let range = hist_range(sigma1, d);
    let mut acc: Vec<ChainAccumulator> = (0..s.chains)
        .map(|_| ChainAccumulator::new(n_test, n_groups))
        .collect();
    let mut second_moment = PooledSecondMoment::new(d);
    let start = std::time::Instant::now();
    let mut window_start = (s.burn_in == 0).then_some(start);
    let mut t = 0;
    let adapt_every = adaptation_interval(s.thin, s.burn_in);
    progress(0, s.steps);
    while t < s.steps {
        if t <= s.burn_in && t % adapt_every == 0 {
            adapt_in_burn_in(&mut ens, &mut kernel, &mut replicas, &mut steering, s, t);
        }
        let before = t;
        t = advance_block(&mut ens, &mut kernel, &mut replicas, s, t);
        if let (Some(r), true) = (&mut replicas, before < s.burn_in && t >= s.burn_in) {
            r.start_window();
        }
        if t % s.thin == 0 {
            // Collapsed: predictions also with the readouts' conditional means (Rao–
            // Blackwellised alignment and mean predictor; observables.rs).
            if let Some(k) = &mut kernel {
                k.prepare_measurement(&mut ens);
            }
            let means = kernel.as_ref().and_then(|k| k.conditional_means(&ens));
            let (preds, mean_preds) =
                probe.predict_with_readouts(&ens, &x_test, n_test, means.as_deref());
            measure(
                &preds,
                &ens,
                y_test,
                y_norm2,
                &data.teacher,
                threshold,
                range,
                t > s.burn_in,
                t,
                &mut acc,
                &mut second_moment,
                &probe,
                &mut probe_acc,
                means.is_some().then_some(&mean_preds[..]),
            );
        }
        if t >= s.burn_in && window_start.is_none() {
            window_start = Some(std::time::Instant::now());
        }
        progress(t, s.steps);
        if interrupted() {
            return Err(Error::runtime(format!(
                "interrupted at step {t} of {}",
                s.steps
            )));
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let sampling_seconds = window_start.map_or(0.0, |w| w.elapsed().as_secs_f64());
    let lambda = max_lambda(&mut ens, &mut kernel, 20);
    let tempering = replicas.as_ref().map(|r| r.finish(&mut ens));
    let outcome = ensemble_outcome(&model, &ens, data, second_moment);
    let mut result = finish::<T>(cfg, outcome, acc, threshold, range, seconds);
    result.sampling_seconds = sampling_seconds;
    if cfg.target.hermite.is_some() || cfg.target.terms.is_some() {
        result.summary.mean_predictor_hermite = mean_predictor_hermite(data, &result);
    }
    result.final_state = (0..s.chains)
        .map(|k| (0..n_groups).map(|g| ens.chain_group(k, g)).collect())
        .collect();
    attach_probe(&mut result, &probe, &model, &probe_acc, &ens, data);
    record_health(&mut result, &ens, &kernel, lambda);
    result.summary.start = if hot { "hot" } else { "cold" }.to_string();
    result.summary.tempering = tempering;
    Ok(result)
}

/// The cached-gradient kernel the sampler settings ask for.
fn new_kernel<T: Real>(ens: &Ensemble<T>, s: &SamplerConfig) -> Kernel<T> {
    let mut k = Kernel::new(ens, s.method, Proposal::from_sampler(s.mala, s.hmc_steps));
    k.preconditioner = s.preconditioner.unwrap_or(Preconditioner::Block);
    k
}

/// Moves every chain from step `t` to the next measurement time (or, under replica exchange,
/// swap round), with the kernel where there is one; returns the new step.
fn advance_block<T: Real>(
    ens: &mut Ensemble<T>,
    kernel: &mut Option<Kernel<T>>,
    replicas: &mut Option<Replicas<T>>,
    s: &SamplerConfig,
    t: usize,
) -> usize {
    let mut next = ((t / s.thin + 1) * s.thin).min(s.steps);
    match (kernel, replicas) {
        (Some(k), Some(r)) => {
            // Swap rounds fall on multiples of swap_every.
            let every = s.tempering().map_or(1, |c| c.swap_every);
            next = next.min((t / every + 1) * every);
            r.advance(ens, k, next - t, next, t >= s.burn_in);
        }
        (Some(k), None) => k.advance(ens, next - t),
        _ => ens.advance(next - t),
    }
    next
}

/// Burn-in step `t` at an adaptation time: the step size (and the collapsed sampler's
/// preconditioner) from the stiffest chain where `adapt_step` is set, and the replica ladder.
fn adapt_in_burn_in<T: Real>(
    ens: &mut Ensemble<T>,
    kernel: &mut Option<Kernel<T>>,
    replicas: &mut Option<Replicas<T>>,
    steering: &mut StepSteering,
    s: &SamplerConfig,
    t: usize,
) {
    if s.adapt_step {
        adapt_step_size(ens, kernel, steering, s, t);
        if let Some(r) = replicas {
            r.adapt(ens, t, s.burn_in, |e, k, st| {
                adapt_step_size(e, k, st, s, t)
            });
        }
    } else if let Some(r) = replicas {
        r.adapt(ens, t, s.burn_in, |_, _, _| {});
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

/// The sampler's health at the end: the step, λ_max and η·λ_max, the acceptance rate.
fn record_health<T: Real>(
    result: &mut RunResult,
    ens: &Ensemble<T>,
    kernel: &Option<Kernel<T>>,
    lambda: f64,
) {
    let dg = &mut result.summary.diagnostics;
    dg.step = ens.dynamics.step;
    dg.lambda_max = (lambda > 0.0).then_some(lambda).and_then(finite);
    dg.step_times_lambda_max = dg.lambda_max.map(|l| l * ens.dynamics.step);
    dg.acceptance_rate = kernel
        .as_ref()
        .and_then(|k| k.acceptance_rate(ens))
        .and_then(finite);
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
    let dynamics = Dynamics {
        kappa: s.kappa,
        step: s.step,
        temperature: s.temperature,
    };
    let mut ens = Ensemble::<T>::new(
        model.clone(),
        &data.x_train,
        &data.y_train,
        s.chains,
        seed,
        dynamics,
        None,
    );
    ens.likelihood = s.likelihood;
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

/// The largest λ_max over the chains, of the kernel's energy (the fused plain step's without
/// a kernel).
fn max_lambda<T: Real>(ens: &mut Ensemble<T>, kernel: &mut Option<Kernel<T>>, iters: usize) -> f64 {
    let per_chain = match kernel {
        Some(k) => k.lambda_max(ens, iters),
        None => ens.lambda_max(iters),
    };
    per_chain.into_iter().fold(0.0, f64::max)
}

/// Spec 02 (a): adapt during burn-in only, from the stiffest chain (for the collapsed sampler
/// after its per-neuron preconditioner, also frozen afterwards).
fn adapt_step_size<T: Real>(
    ens: &mut Ensemble<T>,
    kernel: &mut Option<Kernel<T>>,
    steering: &mut StepSteering,
    s: &SamplerConfig,
    t: usize,
) {
    if let Some(k) = kernel.as_mut() {
        k.adapt_preconditioner(ens, 2 * t >= s.burn_in);
    }
    let lambda = max_lambda(ens, kernel, 10);
    if lambda > 0.0 {
        let counts = kernel.as_ref().and_then(|k| k.acceptance_counts(ens));
        ens.dynamics.step = s.step.min(steering.fraction(counts) / lambda);
    }
}

/// Measures every live chain at step `t`.
#[allow(clippy::too_many_arguments)]
fn measure<T: Real>(
    preds: &[ChainProbe<T>],
    ens: &Ensemble<T>,
    y_test: &[f64],
    y_norm2: f64,
    teacher: &[f64],
    threshold: f64,
    range: f64,
    sampling: bool,
    t: usize,
    acc: &mut [ChainAccumulator],
    second_moment: &mut PooledSecondMoment,
    probe: &Probe,
    probe_acc: &mut [ProbeAccumulator],
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
                .map(|row| row.iter().zip(teacher).map(|(w, t)| w.f64() * t).sum())
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
            acc[chain].record(snapshot, y_test, y_norm2, threshold, range, sampling, t);
            if sampling {
                second_moment.add_rows(w1);
            }
            if let Some(Some(f_mean)) = mean_preds.map(|m| &m[chain]) {
                acc[chain].use_conditional_mean(f, f_mean, y_test, y_norm2);
            }
            if sampling {
                probe_acc[chain].add(probe, f, y_test, probe_sample);
            }
        }
    }
}
