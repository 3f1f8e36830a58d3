//! The run of the per-chain models (CNN, softmax attention) on the one sampling loop
//! ([`super::engine::sample`]): their ensemble and hot start, their observer (observables at
//! every `thin` steps), the summary shared with the FCN ([`super::summary::finish`]) and the
//! cold/hot starts ([`super::starts::run_starts`]).

use crate::error::{Error, Result};
use crate::sim::config::{ExperimentConfig, ModelKind, SamplerConfig};
use crate::sim::ensemble::fcn::{predict, Ensemble};
use crate::sim::kernel::transition::Transition;
use crate::sim::model::attention::AttentionModel;
use crate::sim::model::cnn::CnnModel;
use crate::sim::model::flat::{FlatData, FlatModel};
use crate::sim::model::interface::Model;
use crate::sim::num::real::Real;
use crate::sim::observe::leading_direction::PooledSecondMoment;
use crate::sim::observe::observables::{ChainAccumulator, ChainSnapshot};

use super::engine::{
    final_state, new_ensemble, record_health, restrained_chains, sample, MeasurementTime, Recorder,
    RunOptions,
};
use super::outcome::{Outcome, RunObserver};
use super::starts::run_starts;
use super::summary::{finish, EnsembleOutcome};
use crate::sim::restraint::Restraint;

/// Runs a validated CNN or attention experiment in precision T (the dispatch of
/// [`crate::sim::driver::run::Run`] for `model.kind` other than "fcn").
pub(crate) fn run_model<T: Real>(
    cfg: &ExperimentConfig,
    opts: RunOptions<'_>,
    observer: &mut dyn RunObserver,
) -> Result<Outcome> {
    match cfg.model.kind() {
        ModelKind::Cnn => {
            let model = CnnModel::from_config(cfg);
            let data = model.dataset(cfg);
            Ok(run_flat::<T, _>(cfg, model, &data, opts, observer))
        }
        ModelKind::Attention => {
            let model = AttentionModel::from_config(cfg);
            let data = model.dataset(cfg);
            Ok(run_flat::<T, _>(cfg, model, &data, opts, observer))
        }
        ModelKind::Fcn => Err(Error::runtime(
            "driver::flat runs the cnn and attention models; fcn runs in driver::fcn",
        )),
    }
}

/// Runs a flat model's experiment: the ensemble(s) of `sampler.start` (cold, hot, or both
/// compared, as for the FCN: [`run_starts`]), each with the sampling loop, observables at
/// every `thin` steps and the summary of an FCN run (same keys; fields that do not apply are
/// null).
pub(crate) fn run_flat<T: Real, M: FlatModel<T> + Model<T> + Clone>(
    cfg: &ExperimentConfig,
    model: M,
    data: &FlatData,
    opts: RunOptions<'_>,
    observer: &mut dyn RunObserver,
) -> Outcome {
    let s = &cfg.sampler;
    run_starts(s, opts.streams(s), observer, &mut |hot, seed, observer| {
        run_flat_once::<T, M>(
            cfg,
            model.clone(),
            data,
            hot,
            seed,
            opts.restraint,
            observer,
        )
    })
}

/// One ensemble from a cold (prior) or hot ([`FlatModel::hot_start`]) start, its chains on
/// the noise streams of `seed`, on the one sampling loop ([`sample`]).
fn run_flat_once<T: Real, M: FlatModel<T> + Model<T> + Clone>(
    cfg: &ExperimentConfig,
    model: M,
    data: &FlatData,
    hot: bool,
    seed: u64,
    restraint: Option<&Restraint>,
    observer: &mut dyn RunObserver,
) -> Outcome {
    let sampler = SamplerConfig {
        seed,
        ..cfg.sampler.clone()
    };
    let s = &sampler;
    let n_groups = model.groups().len();
    let n_test = data.y_test.len();
    let scale = model.overlap_scale();
    let start = |seed: u64| {
        let mut ens: Ensemble<T, M> =
            new_ensemble(s, model.clone(), &data.x_train, &data.y_train, seed);
        if hot {
            for k in 0..s.chains {
                let mut theta = ens.chain_params(k);
                ens.model.hot_start(&mut theta, &data.teacher);
                ens.set_chain_params(k, &theta);
            }
        }
        ens
    };
    let theta0: Vec<T> = vec![T::zero(); Model::<T>::n_params(&model)];
    let filter_dim = model.filters(&theta0).map(|(_, k)| k).unwrap_or(0);
    let mut recorder = FlatRecorder {
        data,
        x_test: data.x_test.iter().map(|&v| T::of(v)).collect(),
        n_test,
        y_norm2: data.y_test.iter().map(|v| v * v).sum(),
        threshold: 3.0 * scale,
        // ±8 prior standard deviations: the GP bulk and specialised units.
        range: 8.0 * scale,
        acc: (0..s.chains)
            .map(|_| ChainAccumulator::new(n_test, n_groups))
            .collect(),
        second_moment: PooledSecondMoment::new(filter_dim),
    };
    let sampled = match sample(s, start, restraint, &mut recorder, observer) {
        Outcome::Completed(sampled) => sampled,
        Outcome::Interrupted { at, steps } => return Outcome::Interrupted { at, steps },
    };
    let FlatRecorder {
        acc,
        second_moment,
        threshold,
        range,
        ..
    } = recorder;
    let ens = &sampled.ens;
    let outcome = EnsembleOutcome {
        divergences: ens.divergences(),
        groups: ens.model.groups().to_vec(),
        p: ens.p,
        y_test: &data.y_test,
        teacher: &data.teacher,
        second_moment,
        steps_done: ens.steps_done,
    };
    let restrained = restrained_chains(&sampled.order_trace, &acc);
    let mut result = finish::<T>(cfg, outcome, acc, threshold, range, sampled.seconds);
    result.restrained = restrained;
    result.final_state = final_state(ens);
    record_health(&mut result, &sampled, hot);
    Outcome::Completed(result)
}

/// The test set and cuts every measurement of a flat run uses, and what it accumulates.
struct FlatRecorder<'a, T> {
    data: &'a FlatData,
    x_test: Vec<T>,
    n_test: usize,
    y_norm2: f64,
    threshold: f64,
    range: f64,
    acc: Vec<ChainAccumulator>,
    second_moment: PooledSecondMoment,
}

impl<T: Real, M: FlatModel<T> + Model<T>> Recorder<T, M> for FlatRecorder<'_, T> {
    /// Measures every live chain; collapsed runs also with the readouts' conditional means
    /// (Rao–Blackwellised alignment and mean predictor, as for the FCN; observables.rs).
    fn record(
        &mut self,
        ens: &mut Ensemble<T, M>,
        transition: &mut Transition<T>,
        at: MeasurementTime,
    ) {
        if let Some(k) = transition.kernel_mut() {
            k.prepare_measurement(ens);
        }
        let mean_preds = transition
            .kernel()
            .and_then(|k| k.conditional_means(ens))
            .map(|means| means.iter().map(|m| m.to_vec()).collect::<Vec<_>>())
            .map(|mut means| {
                let readout = Model::<T>::n_groups(&ens.model) - 1;
                let swap = |ens: &mut Ensemble<T, M>, means: &mut [Vec<T>]| {
                    for (block, m) in ens.blocks.iter_mut().zip(means.iter_mut()) {
                        block.params[readout].swap_with_slice(m);
                    }
                };
                swap(ens, &mut means);
                let preds = predict(ens, &self.x_test, self.n_test);
                swap(ens, &mut means);
                preds
            });
        let preds = predict(ens, &self.x_test, self.n_test);
        for (k, f) in preds.iter().enumerate() {
            let Some(f) = f else { continue };
            let theta = ens.chain_params(k);
            self.measure_chain(ens, k, &theta, f, at);
            if at.sampling {
                if let Some((rows, _)) = ens.model.filters(&theta) {
                    self.second_moment.add_rows(rows);
                }
            }
            if let Some(Some(f_mean)) = mean_preds.as_ref().map(|m| &m[k]) {
                self.acc[k].use_conditional_mean(f, f_mean, &self.data.y_test, self.y_norm2);
            }
        }
    }
}

impl<T: Real> FlatRecorder<'_, T> {
    /// Records chain k's measurement ([`ChainAccumulator::record`]); `theta` is its parameters.
    fn measure_chain<M: FlatModel<T> + Model<T>>(
        &mut self,
        ens: &Ensemble<T, M>,
        k: usize,
        theta: &[T],
        f: &[T],
        at: MeasurementTime,
    ) {
        let (block, c) = ens.chain_block(k);
        let rhos = ens.model.overlaps(theta, &self.data.teacher);
        let mut start = 0;
        let groups = ens
            .model
            .groups()
            .iter()
            .zip(&block.virial[c])
            .map(|(grp, &virial)| {
                start += grp.len;
                (&theta[start - grp.len..start], virial)
            })
            .collect();
        let snapshot = ChainSnapshot {
            f_test: f,
            rhos: &rhos,
            groups,
            energy: block.energy[c],
            train_mse: (ens.p > 0).then(|| block.sq_error[c] / ens.p as f64),
        };
        let y_test = &self.data.y_test;
        self.acc[k].record(
            snapshot,
            y_test,
            self.y_norm2,
            self.threshold,
            self.range,
            at.sampling,
            at.t,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::config::{ExperimentConfig, ModelKind, Start};
    use crate::sim::driver::run::{Run, Summary};
    use crate::sim::model::cnn::CnnModel;

    const MALA_STEP: f64 = 0.4;
    const MALA_TOLERANCE: f64 = 0.05;
    const ULA_ERROR: f64 = 0.15;

    const CNN: &str = r#"
[model]
kind = "cnn"
activation = "erf"
widths = [5]
patch = 3
[data]
d = 9
p = 40
n_test = 100
[target]
hermite = 3
[sampler]
kappa = 0.5
step = 0.002
steps = 200
burn_in = 100
thin = 20
chains = 7
seed = 3
"#;

    const ATTENTION: &str = r#"
[model]
kind = "attention"
heads = 2
[data]
d = 4
tokens = 6
p = 30
n_test = 50
[target]
cubic_tokens = true
[sampler]
kappa = 0.1
step = 1e-3
steps = 200
burn_in = 100
thin = 20
chains = 7
seed = 3
"#;

    /// Same file and seed → identical summary, traces and per-chain rows on one and on two
    /// threads (spec 02 "Reproducible"), for both flat models, f32, with cold and hot starts
    /// compared (`start = "both"`), with MALA and with the collapsed sampler.
    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let both = |text: &str| text.replace("seed = 3", "seed = 3\nstart = \"both\"");
        let mala = |text: &str| text.replace("seed = 3", "seed = 3\nmala = true");
        let collapsed = |text: &str| {
            text.replace(
                "seed = 3",
                "seed = 3\nmethod = \"collapsed\"\nstart = \"both\"",
            )
        };
        for text in [
            both(CNN),
            both(ATTENTION),
            mala(CNN),
            mala(ATTENTION),
            collapsed(CNN),
            collapsed(ATTENTION),
        ] {
            let cfg = ExperimentConfig::from_toml(&text, "test.toml").unwrap();
            let run = |threads: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| Run::new(&cfg).run().unwrap())
            };
            let (a, b) = (run(1), run(2));
            assert_eq!(a.summary, b.summary);
            assert_eq!(a.traces, b.traces);
            assert_eq!(a.chains, b.chains);
            assert_eq!(a.histogram, b.histogram);
            assert_eq!(a.summary.precision, "f32");
            assert!(a.summary.alignment.is_some() && a.summary.diverged_chains.is_empty());
            assert_eq!(a.summary.start, "cold");
            assert_eq!(
                a.summary.hot_start.is_some(),
                cfg.sampler.start == Start::Both
            );
            let acceptance = a.summary.diagnostics.acceptance_rate;
            assert_eq!(
                acceptance.is_some(),
                cfg.sampler.proposal.is_metropolis(),
                "{acceptance:?}"
            );
        }
    }

    /// `start = "both"`: a hot start that has had no time to relax is flagged "not
    /// equilibrated" (R of the hot ensemble is the aligned value, not the prior's), and one
    /// that has relaxed in the lazy regime agrees with the cold start.
    #[test]
    fn cold_and_hot_starts_are_compared() {
        for text in [CNN, ATTENTION] {
            let base = text
                .replace(
                    "seed = 3",
                    "seed = 3\nstart = \"both\"\nprecision = \"f64\"",
                )
                .replace("chains = 7", "chains = 8");
            // 200 steps of η = 10⁻¹⁰: the chains stay at their starts.
            let frozen = base
                .replace("step = 0.002", "step = 1e-10")
                .replace("step = 1e-3", "step = 1e-10");
            let cfg = ExperimentConfig::from_toml(&frozen, "test.toml").unwrap();
            let r = Run::new(&cfg).run().unwrap().summary;
            let hot = r.hot_start.clone().unwrap();
            // Hot: every unit has |ρ| = σ1 (CNN, σ1² = 1) or d·σ_A (attention, d = 4, σ_A = 1),
            // so R is that squared; cold: the prior value σ1²/S = 1/3, σ_A² = 1.
            let (r_hot, r_cold) = if cfg.model.kind() == ModelKind::Cnn {
                (1.0, 1.0 / 3.0)
            } else {
                (16.0, 1.0)
            };
            let rh = hot.r_overlap2.unwrap();
            assert!((rh - r_hot).abs() < 1e-3 * r_hot, "hot R {rh}");
            let rc = r.r_overlap2.unwrap();
            assert!((rc / r_cold - 1.0).abs() < 0.8, "cold R {rc}");
            assert_eq!(r.equilibrated, Some(false));
            // Relaxed (lazy regime, P = 40 or 30, 3000 steps): the two starts agree.
            let relaxed = base
                .replace("steps = 200", "steps = 3000")
                .replace("burn_in = 100", "burn_in = 1000");
            let cfg = ExperimentConfig::from_toml(&relaxed, "test.toml").unwrap();
            let r = Run::new(&cfg).run().unwrap().summary;
            let hot = r.hot_start.unwrap();
            assert_eq!(r.equilibrated, Some(true), "{:?} vs {hot:?}", r.r_overlap2);
        }
    }

    /// The CNN and attention runs with an absurd η = 1, `adapt_step` and the extra sampler
    /// lines `extra`, each asserted to survive without a diverged chain.
    fn absurd_step_runs(extra: &str) -> Vec<Summary> {
        [CNN, ATTENTION]
            .into_iter()
            .map(|text| {
                let text = text
                    .replace("step = 0.002", "step = 1.0")
                    .replace("step = 1e-3", "step = 1.0")
                    .replace("seed = 3", &format!("seed = 3\nadapt_step = true{extra}"));
                let cfg = ExperimentConfig::from_toml(&text, "test.toml").unwrap();
                let r = Run::new(&cfg).run().unwrap().summary;
                assert!(r.diverged_chains.is_empty(), "{:?}", r.diverged_chains);
                r
            })
            .collect()
    }

    /// `adapt_step` with unadjusted Langevin: an absurd η = 1 is brought down to 0.1/λ_max during burn-in and the run
    /// survives (it diverges without, see the next test).
    #[test]
    fn adapt_step_tames_an_absurd_step() {
        for r in absurd_step_runs("\nmala = false") {
            let dg = &r.diagnostics;
            assert!(dg.step < 1.0, "{}", dg.step);
            let stiffness = dg.step_times_lambda_max.unwrap();
            assert!(stiffness < 0.5, "η·λ_max = {stiffness}");
        }
    }

    /// `adapt_step` with MALA steers the acceptance as for the FCN (run.rs, `StepSteering`):
    /// from an absurd η = 1 the run survives, and the burn-in leaves η·λ_max well above ULA's
    /// 0.1 with an acceptance near the 0.574 target (measured: CNN 1.8 and 0.58, attention 2.8
    /// and 0.53).
    #[test]
    fn adapt_step_with_mala_steers_the_acceptance() {
        for r in absurd_step_runs("\nmala = true") {
            let dg = &r.diagnostics;
            let stiffness = dg.step_times_lambda_max.unwrap();
            let acceptance = dg.acceptance_rate.unwrap();
            // ULA's rule would leave 0.1 (λ_max re-estimated at the end, so not exactly).
            assert!(stiffness > 0.3, "η·λ_max = {stiffness}");
            assert!(
                (0.35..0.85).contains(&acceptance),
                "acceptance {acceptance}"
            );
        }
    }

    /// MALA's stationary law is exact for any η (spec 02 (c)): on the two-parameter CNN
    /// d = S = N = 1, f(x) = w² erf(w¹x), P = 4, the sampled E[(w¹)²] and E[(w²)²] equal the
    /// quadrature of exp(−U/T) over the plane at T = 1 and T = 0.5, at a step where unadjusted
    /// Langevin is off.
    #[test]
    fn mala_matches_quadrature_where_ula_is_biased() {
        let text = |temperature: f64, mala: bool| {
            format!(
                r#"
[model]
kind = "cnn"
activation = "erf"
widths = [1]
patch = 1
[data]
d = 1
p = 4
n_test = 10
[target]
hermite = 3
[sampler]
kappa = 0.5
step = {MALA_STEP}
steps = 30000
burn_in = 2000
thin = 5
chains = 32
seed = 11
precision = "f64"
temperature = {temperature}
mala = {mala}
adapt_step = false
"#
            )
        };
        for temperature in [1.0, 0.5] {
            let cfg = ExperimentConfig::from_toml(&text(temperature, true), "t.toml").unwrap();
            let model = CnnModel::from_config(&cfg);
            let data = model.dataset(&cfg);
            let (v1, v2) = (model.groups[0].prior_var, model.groups[1].prior_var);
            let kappa = cfg.sampler.kappa;
            let energy = |w1: f64, w2: f64| -> f64 {
                let data_term: f64 = data
                    .x_train
                    .iter()
                    .zip(&data.y_train)
                    .map(|(x, y)| (w2 * libm::erf(w1 * x) - y).powi(2))
                    .sum();
                data_term / (2.0 * kappa) + w1 * w1 / (2.0 * v1) + w2 * w2 / (2.0 * v2)
            };
            // Riemann sum on a grid of spacing 0.02 over [−8, 8]²: the integrand is smooth
            // and Gaussian-tailed, so the error is far below the Monte Carlo error.
            let h = 0.02;
            let grid: Vec<f64> = (0..=800).map(|i| -8.0 + h * i as f64).collect();
            let u_min = grid
                .iter()
                .flat_map(|&a| grid.iter().map(move |&b| (a, b)))
                .map(|(a, b)| energy(a, b))
                .fold(f64::INFINITY, f64::min);
            let (mut z, mut m1, mut m2) = (0.0, 0.0, 0.0);
            for &w1 in &grid {
                for &w2 in &grid {
                    let p = (-(energy(w1, w2) - u_min) / temperature).exp();
                    z += p;
                    m1 += p * w1 * w1;
                    m2 += p * w2 * w2;
                }
            }
            let exact = [m1 / z, m2 / z];
            let moments = |mala: bool| -> (Vec<f64>, Option<f64>) {
                let cfg = ExperimentConfig::from_toml(&text(temperature, mala), "t.toml").unwrap();
                let r = Run::new(&cfg).run().unwrap().summary;
                assert!(r.diverged_chains.is_empty(), "{:?}", r.diverged_chains);
                let m = r.diagnostics.groups.iter();
                let m = m.map(|g| g.second_moment.unwrap()).collect();
                (m, r.diagnostics.acceptance_rate)
            };
            let (mala, acceptance) = moments(true);
            let (ula, _) = moments(false);
            let acceptance = acceptance.unwrap();
            assert!(acceptance > 0.3 && acceptance < 0.99, "{acceptance}");
            for g in 0..2 {
                let (m, e) = (mala[g], exact[g]);
                assert!(
                    (m / e - 1.0).abs() < MALA_TOLERANCE,
                    "T = {temperature}, group {g}: MALA {m} vs exact {e}"
                );
            }
            let ula_error = (0..2)
                .map(|g| (ula[g] / exact[g] - 1.0).abs())
                .fold(0.0, f64::max);
            assert!(
                ula_error > ULA_ERROR,
                "T = {temperature}: ULA off by only {ula_error}"
            );
        }
    }
    /// An absurd step: every chain is stopped and named, nothing non-finite is reported.
    #[test]
    fn an_absurd_step_diverges_every_chain_without_nan() {
        for text in [CNN, ATTENTION] {
            // Divergence is unadjusted Langevin's at a fixed step (the default sampler
            // adapts the step and rejects).
            let bad = text.replace("step = ", "mala = false\nadapt_step = false\nstep = 1e3 #");
            let cfg = ExperimentConfig::from_toml(&bad, "test.toml").unwrap();
            let r = Run::new(&cfg).run().unwrap();
            assert!(r.all_diverged());
            assert_eq!(r.summary.diverged_chains.len(), 7);
            assert_eq!(r.summary.alignment, None);
            assert!(r.summary.suggested_step.is_some());
            let json = serde_json::to_string(&r.summary).unwrap();
            assert!(!json.contains("NaN") && !json.contains("inf"), "{json}");
        }
    }
}
