//! A model-agnostic Langevin ensemble over a flat parameter vector, and the run loop of the
//! architectures that are not FCNs (CNN, softmax attention; spec 02 "Models").
//!
//! The dynamics are those of [`super::sampler`] (paper App. A.1): U(θ) = |f(X) − y|²/(2κ) +
//! Σ_g |θ_g|²/(2 v_g), θ ← θ − η∇U(θ) + √(2ηT)·ξ. Each chain owns its parameters and its
//! ChaCha8 stream (seed, k) ([`super::sampler::chain_rng`]); it draws its initial state group
//! by group from the prior and its noise group by group, entry by entry, in the same order as
//! the FCN sampler, so a CNN with one patch retraces the FCN chain exactly. Chains are
//! advanced in parallel with rayon (one task per chain) and every reduction runs in chain
//! order, so the numbers do not depend on the thread count.
//!
//! Divergence (spec 02 "Robust"): a chain whose energy becomes non-finite or exceeds the
//! same threshold as the FCN sampler's is stopped and left out of every result.

use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::attention::AttentionModel;
use super::cnn::CnnModel;
use super::config::{ExperimentConfig, ModelKind};
use super::observables::{
    finite, integrated_autocorrelation_time, mean_and_error, ChainAccumulator, GroupStats,
    Measurement, HIST_BINS,
};
use super::real::Real;
use super::run::{ChainRow, Diagnostics, DivergedChain, Histogram, RunResult, Summary, TraceRow};
use super::sampler::{chain_rng, Divergence, Dynamics};
use crate::error::{Error, Result};

/// η·λ_max targeted by `sampler.adapt_step` (as for the FCN engine).
const ADAPT_FRACTION: f64 = 0.1;

/// One parameter group of a flat parameter vector (a layer, the attention matrices, …).
#[derive(Debug, Clone, PartialEq)]
pub struct ParamGroup {
    /// Name in the diagnostics ("layer1", "readout", "attention", "value").
    pub name: String,
    /// Number of entries.
    pub len: usize,
    /// Prior variance v of one entry: θ ~ 𝒩(0, v).
    pub prior_var: f64,
    /// Held at its initial value (not sampled).
    pub frozen: bool,
}

/// A network whose parameters are one flat vector (groups stored one after the other) and
/// whose data-term gradient is computed per chain.
pub trait FlatModel<T: Real>: Sync {
    /// Work buffers of one chain's evaluation (one per rayon task).
    type Scratch: Default + Send;

    /// The parameter groups, in storage order.
    fn groups(&self) -> &[ParamGroup];

    /// Floats per input sample (d for a vector, L·d for a token sequence).
    fn sample_len(&self) -> usize;

    /// f(x_μ) for the `n` inputs in `x` (n × `sample_len`), into `f`.
    fn predict(&self, theta: &[T], x: &[T], n: usize, f: &mut [T], scratch: &mut Self::Scratch);

    /// Writes ∇_θ |f(X) − y|²/(2κ) = Σ_μ r_μ ∇_θ f(x_μ), r_μ = (f(x_μ) − y_μ)/κ, into `grad`
    /// (overwriting it) and returns Σ_μ (f(x_μ) − y_μ)².
    #[allow(clippy::too_many_arguments)]
    fn data_gradient(
        &self,
        theta: &[T],
        x: &[T],
        y: &[T],
        n: usize,
        inv_kappa: T,
        grad: &mut [T],
        scratch: &mut Self::Scratch,
    ) -> f64;

    /// The per-unit overlaps ρ with the teacher structure that the outlier count, R = E[ρ²]
    /// and the histogram are built from (filters for the CNN, heads for attention).
    fn overlaps(&self, theta: &[T], teacher: &[f64]) -> Vec<f64>;

    /// The prior (GP) standard deviation of one overlap ρ; outliers lie beyond 3 of them.
    fn overlap_scale(&self) -> f64;

    /// Rows whose second-moment matrix's leading eigenvector is compared with the teacher
    /// (the CNN's filters), as (rows, row length); None where that has no meaning.
    fn filters<'a>(&self, theta: &'a [T]) -> Option<(&'a [T], usize)>;

    /// Total number of parameters.
    fn n_params(&self) -> usize {
        self.groups().iter().map(|g| g.len).sum()
    }
}

/// Inputs and targets of a generic run (f64; converted to the working precision once).
#[derive(Debug, Clone)]
pub struct FlatData {
    /// Training inputs, P × sample_len.
    pub x_train: Vec<f64>,
    /// Training targets.
    pub y_train: Vec<f64>,
    /// Test inputs, n_test × sample_len.
    pub x_test: Vec<f64>,
    /// Test targets.
    pub y_test: Vec<f64>,
    /// The teacher vector the overlaps are measured against (model-specific meaning).
    pub teacher: Vec<f64>,
}

/// One chain: its parameters, gradient, stream and status.
#[derive(Debug, Clone)]
pub struct FlatChain<T> {
    /// Parameters, groups one after the other.
    pub theta: Vec<T>,
    grad: Vec<T>,
    rng: ChaCha8Rng,
    /// `Some` once the chain has diverged.
    pub diverged: Option<Divergence>,
    /// U at the last gradient evaluation.
    pub energy: f64,
    /// Σ_μ (f − y)² on the training set at the last gradient evaluation.
    pub sq_error: f64,
    /// θ_g·∇_g U per group at the last gradient evaluation.
    pub virial: Vec<f64>,
}

/// E chains of one flat model on one training set.
#[derive(Debug)]
pub struct FlatEnsemble<T: Real, M> {
    /// The model.
    pub model: M,
    /// Training inputs.
    pub x: Vec<T>,
    /// Training targets.
    pub y: Vec<T>,
    /// P.
    pub p: usize,
    /// The chains, in chain order.
    pub chains: Vec<FlatChain<T>>,
    /// κ, η, T.
    pub dynamics: Dynamics,
    /// Steps taken so far.
    pub steps_done: usize,
    /// Energy above which a chain is declared diverged.
    pub divergence_threshold: f64,
}

impl<T: Real, M: FlatModel<T>> FlatEnsemble<T, M> {
    /// E chains started from the prior, chain k from stream (seed, k).
    pub fn new(
        model: M,
        x: &[f64],
        y: &[f64],
        chains: usize,
        seed: u64,
        dynamics: Dynamics,
    ) -> Self {
        let groups = model.groups().to_vec();
        let n = model.n_params();
        let chains = (0..chains)
            .map(|k| {
                let mut rng = chain_rng(seed, k);
                let mut theta = Vec::with_capacity(n);
                for g in &groups {
                    let sd = T::of(g.prior_var.sqrt());
                    for _ in 0..g.len {
                        theta.push(sd * T::standard_normal(&mut rng));
                    }
                }
                FlatChain {
                    theta,
                    grad: vec![T::zero(); n],
                    rng,
                    diverged: None,
                    energy: 0.0,
                    sq_error: 0.0,
                    virial: vec![0.0; groups.len()],
                }
            })
            .collect();
        let p = y.len();
        // The FCN sampler's rule (sampler.rs): 10⁴ × the scale of the starting energy.
        let scale = n as f64
            + p as f64 / dynamics.kappa
            + y.iter().map(|v| v * v).sum::<f64>() / dynamics.kappa;
        FlatEnsemble {
            model,
            x: x.iter().map(|&v| T::of(v)).collect(),
            y: y.iter().map(|&v| T::of(v)).collect(),
            p,
            chains,
            dynamics,
            steps_done: 0,
            divergence_threshold: 1e4 * scale,
        }
    }

    /// Advances every live chain by `n` steps, chains in parallel.
    pub fn advance(&mut self, n: usize) {
        let model = &self.model;
        let (x, y, p) = (&self.x[..], &self.y[..], self.p);
        let dynamics = self.dynamics;
        let threshold = self.divergence_threshold;
        let start = self.steps_done;
        self.chains
            .par_iter_mut()
            .for_each_init(M::Scratch::default, |scratch, chain| {
                for s in 0..n {
                    if chain.diverged.is_some() {
                        break;
                    }
                    chain.step(model, x, y, p, dynamics, threshold, start + s + 1, scratch);
                }
            });
        self.steps_done += n;
    }

    /// Test predictions of every chain (None for diverged ones), in chain order.
    pub fn predict(&self, x_test: &[T], n: usize) -> Vec<Option<Vec<T>>> {
        let model = &self.model;
        self.chains
            .par_iter()
            .map_init(M::Scratch::default, |scratch, chain| {
                chain.diverged.is_none().then(|| {
                    let mut f = vec![T::zero(); n];
                    model.predict(&chain.theta, x_test, n, &mut f, scratch);
                    f
                })
            })
            .collect()
    }

    /// Largest Hessian eigenvalue of U per chain (0 for diverged chains), by `iters` power
    /// iterations on Hessian–vector products: the data term's is a central difference of
    /// analytic gradients with ε = 10⁻³·(‖θ‖ + 10⁻³), the prior's is exact (the FCN
    /// sampler's estimator, spec 02 "Stiffness is the enemy"). Frozen groups are left out.
    pub fn lambda_max(&self, iters: usize) -> Vec<f64> {
        let model = &self.model;
        let (x, y, p) = (&self.x[..], &self.y[..], self.p);
        let inv_kappa = T::of(1.0 / self.dynamics.kappa);
        let groups = model.groups();
        self.chains
            .par_iter()
            .map_init(M::Scratch::default, |scratch, chain| {
                if chain.diverged.is_some() {
                    return 0.0;
                }
                let n = chain.theta.len();
                let mut group_of = Vec::with_capacity(n);
                for (g, grp) in groups.iter().enumerate() {
                    group_of.extend(std::iter::repeat_n(g, grp.len));
                }
                let mut v: Vec<f64> = (0..n)
                    .map(|i| {
                        if groups[group_of[i]].frozen {
                            0.0
                        } else if i % 2 == 0 {
                            1.0
                        } else {
                            -0.7
                        }
                    })
                    .collect();
                let norm_theta = chain
                    .theta
                    .iter()
                    .map(|t| t.f64().powi(2))
                    .sum::<f64>()
                    .sqrt();
                let eps = 1e-3 * (norm_theta + 1e-3);
                let mut shifted = chain.theta.clone();
                let mut grad = vec![T::zero(); n];
                let mut lambda = 0.0;
                for _ in 0..iters {
                    let nv = v.iter().map(|a| a * a).sum::<f64>().sqrt().max(1e-300);
                    v.iter_mut().for_each(|a| *a /= nv);
                    let mut grad_at = |sign: f64| -> Vec<f64> {
                        for ((s, t), vi) in shifted.iter_mut().zip(&chain.theta).zip(&v) {
                            *s = T::of(t.f64() + sign * eps * vi);
                        }
                        model.data_gradient(&shifted, x, y, p, inv_kappa, &mut grad, scratch);
                        grad.iter().map(|g| g.f64()).collect()
                    };
                    let plus = grad_at(1.0);
                    let minus = grad_at(-1.0);
                    let hv: Vec<f64> = (0..n)
                        .map(|i| {
                            let g = &groups[group_of[i]];
                            if g.frozen {
                                0.0
                            } else {
                                (plus[i] - minus[i]) / (2.0 * eps) + v[i] / g.prior_var
                            }
                        })
                        .collect();
                    lambda = v.iter().zip(&hv).map(|(a, b)| a * b).sum();
                    v = hv;
                }
                if lambda.is_finite() {
                    lambda
                } else {
                    0.0
                }
            })
            .collect()
    }
}

impl<T: Real> FlatChain<T> {
    /// One unadjusted Langevin step (spec 02 "Sampler").
    #[allow(clippy::too_many_arguments)]
    fn step<M: FlatModel<T>>(
        &mut self,
        model: &M,
        x: &[T],
        y: &[T],
        p: usize,
        dynamics: Dynamics,
        threshold: f64,
        global_step: usize,
        scratch: &mut M::Scratch,
    ) {
        let inv_kappa = T::of(1.0 / dynamics.kappa);
        self.sq_error =
            model.data_gradient(&self.theta, x, y, p, inv_kappa, &mut self.grad, scratch);
        let mut energy = self.sq_error / (2.0 * dynamics.kappa);
        let mut start = 0;
        for (g, grp) in model.groups().iter().enumerate() {
            let inv_v = 1.0 / grp.prior_var;
            let inv_v_t = T::of(inv_v);
            let range = start..start + grp.len;
            start += grp.len;
            let mut sq = 0.0;
            let mut vir = 0.0;
            for (gi, &ti) in self.grad[range.clone()].iter_mut().zip(&self.theta[range]) {
                *gi += ti * inv_v_t;
                sq += (ti * ti).f64();
                vir += (ti * *gi).f64();
            }
            energy += 0.5 * sq * inv_v;
            self.virial[g] = vir;
        }
        self.energy = energy;
        if !energy.is_finite() || energy > threshold {
            let reason = if energy.is_finite() {
                format!("energy exploded (U = {energy:.3e})")
            } else {
                "non-finite energy".to_string()
            };
            self.diverged = Some(Divergence {
                step: global_step,
                reason,
            });
            return;
        }
        let eta = T::of(dynamics.step);
        let noise = T::of((2.0 * dynamics.step * dynamics.temperature).sqrt());
        let mut start = 0;
        for grp in model.groups() {
            let range = start..start + grp.len;
            start += grp.len;
            if grp.frozen {
                continue;
            }
            for (ti, &gi) in self.theta[range.clone()].iter_mut().zip(&self.grad[range]) {
                *ti = *ti - eta * gi + noise * T::standard_normal(&mut self.rng);
            }
        }
    }
}

/// Runs a validated CNN or attention experiment in precision T (the dispatch of
/// [`super::run::run_experiment`] for `model.kind` other than "fcn").
pub fn run_model<T: Real>(
    cfg: &ExperimentConfig,
    progress: &mut dyn FnMut(usize, usize),
    interrupted: &dyn Fn() -> bool,
) -> Result<RunResult> {
    match cfg.model.kind {
        ModelKind::Cnn => {
            let model = CnnModel::from_config(cfg);
            let data = model.dataset(cfg);
            run_flat::<T, _>(cfg, model, &data, progress, interrupted)
        }
        ModelKind::Attention => {
            let model = AttentionModel::from_config(cfg);
            let data = model.dataset(cfg);
            run_flat::<T, _>(cfg, model, &data, progress, interrupted)
        }
        ModelKind::Fcn => Err(Error::runtime(
            "the flat-parameter engine runs the cnn and attention models; fcn runs in sim::run",
        )),
    }
}

/// Runs a flat model's experiment: the sampling loop, observables at every `thin` steps
/// and the summary of [`super::run::run_experiment`] (same keys; fields that do not apply
/// are null).
pub fn run_flat<T: Real, M: FlatModel<T>>(
    cfg: &ExperimentConfig,
    model: M,
    data: &FlatData,
    progress: &mut dyn FnMut(usize, usize),
    interrupted: &dyn Fn() -> bool,
) -> Result<RunResult> {
    let s = &cfg.sampler;
    let dynamics = Dynamics {
        kappa: s.kappa,
        step: s.step,
        temperature: s.temperature,
    };
    let n_groups = model.groups().len();
    let mut ens = FlatEnsemble::<T, M>::new(
        model,
        &data.x_train,
        &data.y_train,
        s.chains,
        s.seed,
        dynamics,
    );
    let n_test = data.y_test.len();
    let x_test: Vec<T> = data.x_test.iter().map(|&v| T::of(v)).collect();
    let y_norm2: f64 = data.y_test.iter().map(|v| v * v).sum();
    let scale = ens.model.overlap_scale();
    let threshold = 3.0 * scale;
    // ±8 prior standard deviations: the GP bulk and specialised units.
    let range = 8.0 * scale;
    let filter_dim = ens
        .model
        .filters(&ens.chains[0].theta)
        .map(|(_, k)| k)
        .unwrap_or(0);
    let mut acc: Vec<ChainAccumulator> = (0..s.chains)
        .map(|_| ChainAccumulator::new(n_test, n_groups, filter_dim))
        .collect();
    let start = std::time::Instant::now();
    let mut t = 0;
    progress(0, s.steps);
    while t < s.steps {
        if s.adapt_step && t <= s.burn_in && t % s.thin == 0 {
            let lambda = ens.lambda_max(10).into_iter().fold(0.0, f64::max);
            if lambda > 0.0 {
                ens.dynamics.step = s.step.min(ADAPT_FRACTION / lambda);
            }
        }
        let next = ((t / s.thin + 1) * s.thin).min(s.steps);
        ens.advance(next - t);
        t = next;
        if t % s.thin == 0 {
            let preds = ens.predict(&x_test, n_test);
            for (k, f) in preds.iter().enumerate() {
                let Some(f) = f else { continue };
                measure_chain(
                    &ens,
                    k,
                    f,
                    &data.y_test,
                    y_norm2,
                    &data.teacher,
                    threshold,
                    range,
                    t > s.burn_in,
                    t,
                    &mut acc[k],
                );
            }
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
    let lambda = ens.lambda_max(20).into_iter().fold(0.0, f64::max);
    let mut result = finish(cfg, &ens, data, acc, threshold, range, seconds);
    let dg = &mut result.summary.diagnostics;
    dg.step = ens.dynamics.step;
    dg.lambda_max = (lambda > 0.0).then_some(lambda).and_then(finite);
    dg.step_times_lambda_max = dg.lambda_max.map(|l| l * ens.dynamics.step);
    Ok(result)
}

/// Records chain k's measurement at step t (alignment A_f = ⟨f, y⟩/⟨y, y⟩ on the test set,
/// paper §3; MSEs; overlaps; parameter moments).
#[allow(clippy::too_many_arguments)]
fn measure_chain<T: Real, M: FlatModel<T>>(
    ens: &FlatEnsemble<T, M>,
    k: usize,
    f: &[T],
    y_test: &[f64],
    y_norm2: f64,
    teacher: &[f64],
    threshold: f64,
    range: f64,
    sampling: bool,
    t: usize,
    a: &mut ChainAccumulator,
) {
    let chain = &ens.chains[k];
    let n_test = y_test.len();
    let mut fy = 0.0;
    let mut sq = 0.0;
    for (fv, &yv) in f.iter().zip(y_test) {
        let fv = fv.f64();
        fy += fv * yv;
        sq += (fv - yv).powi(2);
    }
    let rhos = ens.model.overlaps(&chain.theta, teacher);
    let r2 = rhos.iter().map(|r| r * r).sum::<f64>() / rhos.len().max(1) as f64;
    let outliers = rhos.iter().filter(|r| r.abs() > threshold).count();
    let p = ens.p;
    a.series.push((
        sampling,
        Measurement {
            step: t,
            alignment: if y_norm2 > 0.0 { fy / y_norm2 } else { 0.0 },
            test_mse: sq / n_test as f64,
            train_mse: (p > 0).then(|| chain.sq_error / p as f64),
            energy: chain.energy,
            r_overlap2: r2,
            outliers,
        },
    ));
    if !sampling {
        return;
    }
    a.samples += 1;
    for (s, fv) in a.f_test_sum.iter_mut().zip(f) {
        *s += fv.f64();
    }
    for &rho in &rhos {
        let bin = ((rho + range) / (2.0 * range) * HIST_BINS as f64).floor();
        if bin >= 0.0 && bin < HIST_BINS as f64 {
            a.hist[bin as usize] += 1;
        } else {
            a.hist_outside += 1;
        }
    }
    let mut start = 0;
    for (g, grp) in ens.model.groups().iter().enumerate() {
        a.virial_sum[g] += chain.virial[g];
        let mut m = [0.0; 3];
        for v in &chain.theta[start..start + grp.len] {
            let v2 = v.f64() * v.f64();
            m[0] += v.f64();
            m[1] += v2;
            m[2] += v2 * v2;
        }
        start += grp.len;
        for j in 0..3 {
            a.moments[g][j] += m[j];
        }
    }
    if let Some((rows, dim)) = ens.model.filters(&chain.theta) {
        for row in rows.chunks_exact(dim) {
            for i in 0..dim {
                let wi = row[i].f64();
                for j in i..dim {
                    a.second_moment_matrix[i * dim + j] += wi * row[j].f64();
                }
            }
        }
    }
}

/// Combines the chains' accumulators into the run's results (the FCN run's `finish`, over a
/// flat ensemble). The struct updates fill in whatever summary fields other engines add.
#[allow(clippy::needless_update)]
fn finish<T: Real, M: FlatModel<T>>(
    cfg: &ExperimentConfig,
    ens: &FlatEnsemble<T, M>,
    data: &FlatData,
    acc: Vec<ChainAccumulator>,
    threshold: f64,
    range: f64,
    seconds: f64,
) -> RunResult {
    let diverged_chains: Vec<DivergedChain> = ens
        .chains
        .iter()
        .enumerate()
        .filter_map(|(k, c)| {
            c.diverged.as_ref().map(|d| DivergedChain {
                chain: k,
                step: d.step,
                reason: d.reason.clone(),
            })
        })
        .collect();
    let alive: Vec<usize> = (0..acc.len())
        .filter(|&k| ens.chains[k].diverged.is_none())
        .collect();
    let samples = alive.first().map(|&k| acc[k].samples).unwrap_or(0);
    let sampled = |k: usize| -> Vec<&Measurement> {
        acc[k]
            .series
            .iter()
            .filter(|(s, _)| *s)
            .map(|(_, m)| m)
            .collect()
    };
    let chain_mean = |k: usize, f: &dyn Fn(&Measurement) -> f64| -> f64 {
        let ms = sampled(k);
        ms.iter().map(|m| f(m)).sum::<f64>() / ms.len().max(1) as f64
    };
    let stat = |f: &dyn Fn(&Measurement) -> f64| -> (Option<f64>, Option<f64>) {
        if alive.is_empty() {
            return (None, None);
        }
        let v: Vec<f64> = alive.iter().map(|&k| chain_mean(k, f)).collect();
        let (m, e) = mean_and_error(&v);
        (finite(m), e.and_then(finite))
    };
    let (alignment, alignment_err) = stat(&|m| m.alignment);
    let (test_mse, test_mse_err) = stat(&|m| m.test_mse);
    let (r_overlap2, r_overlap2_err) = stat(&|m| m.r_overlap2);
    let (outliers, outliers_err) = stat(&|m| m.outliers as f64);
    let (energy_mean, _) = stat(&|m| m.energy);
    let train_mse = if ens.p > 0 {
        stat(&|m| m.train_mse.unwrap_or(0.0)).0
    } else {
        None
    };
    let half_energy = |first: bool| -> Option<f64> {
        if alive.is_empty() || samples < 2 {
            return None;
        }
        let h = samples / 2;
        let v: Vec<f64> = alive
            .iter()
            .map(|&k| {
                let ms = sampled(k);
                let part = if first { &ms[..h] } else { &ms[h..] };
                part.iter().map(|m| m.energy).sum::<f64>() / part.len() as f64
            })
            .collect();
        finite(v.iter().sum::<f64>() / v.len() as f64)
    };
    let n_test = data.y_test.len();
    let mut mean_pred = vec![0.0; if alive.is_empty() { 0 } else { n_test }];
    for &k in &alive {
        for (m, s) in mean_pred.iter_mut().zip(&acc[k].f_test_sum) {
            *m += s;
        }
    }
    let denom = (alive.len() * samples).max(1) as f64;
    mean_pred.iter_mut().for_each(|m| *m /= denom);
    let test_mse_mean_predictor = (!alive.is_empty()).then(|| {
        mean_pred
            .iter()
            .zip(&data.y_test)
            .map(|(f, y)| (f - y).powi(2))
            .sum::<f64>()
            / n_test as f64
    });
    let y_msq = data.y_test.iter().map(|v| v * v).sum::<f64>() / n_test as f64;
    let mse_lower_bound = alignment.map(|a| (1.0 - a).powi(2) * y_msq);
    let series_of = |f: &dyn Fn(&Measurement) -> f64| -> Vec<Vec<f64>> {
        alive
            .iter()
            .map(|&k| sampled(k).iter().map(|m| f(m)).collect())
            .collect()
    };
    let iat_alignment = integrated_autocorrelation_time(&series_of(&|m| m.alignment));
    let iat_r = integrated_autocorrelation_time(&series_of(&|m| m.r_overlap2));
    let total_samples = (alive.len() * samples) as f64;
    let groups: Vec<GroupStats> = ens
        .model
        .groups()
        .iter()
        .enumerate()
        .map(|(g, grp)| {
            let entries = (grp.len * alive.len() * samples) as f64;
            let sum = |j: usize| alive.iter().map(|&k| acc[k].moments[g][j]).sum::<f64>();
            let vir = alive.iter().map(|&k| acc[k].virial_sum[g]).sum::<f64>();
            let ok = entries > 0.0;
            GroupStats {
                group: grp.name.clone(),
                prior_variance: finite(grp.prior_var),
                mean: ok.then(|| sum(0) / entries).and_then(finite),
                second_moment: ok.then(|| sum(1) / entries).and_then(finite),
                fourth_moment: ok.then(|| sum(2) / entries).and_then(finite),
                temperature: ok.then(|| vir / entries).and_then(finite),
                frozen: grp.frozen,
            }
        })
        .collect();
    let dim = data.teacher.len();
    let has_filters = ens
        .chains
        .first()
        .and_then(|c| ens.model.filters(&c.theta))
        .is_some();
    let leading_direction_overlap = if alive.is_empty() || samples == 0 || !has_filters {
        None
    } else {
        let mut m = vec![0.0; dim * dim];
        for &k in &alive {
            for (a, b) in m.iter_mut().zip(&acc[k].second_moment_matrix) {
                *a += b;
            }
        }
        for i in 0..dim {
            for j in 0..i {
                m[i * dim + j] = m[j * dim + i];
            }
        }
        leading_eigenvector(&m, dim)
            .map(|v| {
                v.iter()
                    .zip(&data.teacher)
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
                    .abs()
            })
            .and_then(finite)
    };
    let mut counts = vec![0u64; HIST_BINS];
    let mut outside = 0;
    for &k in &alive {
        for (c, h) in counts.iter_mut().zip(&acc[k].hist) {
            *c += h;
        }
        outside += acc[k].hist_outside;
    }
    let edges = (0..=HIST_BINS)
        .map(|i| -range + 2.0 * range * i as f64 / HIST_BINS as f64)
        .collect();
    let n_rows = alive.first().map(|&k| acc[k].series.len()).unwrap_or(0);
    let traces = (0..n_rows)
        .map(|i| {
            let rows: Vec<&(bool, Measurement)> =
                alive.iter().map(|&k| &acc[k].series[i]).collect();
            let n = rows.len() as f64;
            let mean =
                |f: &dyn Fn(&Measurement) -> f64| rows.iter().map(|(_, m)| f(m)).sum::<f64>() / n;
            TraceRow {
                step: rows[0].1.step,
                burn_in: !rows[0].0,
                energy: mean(&|m| m.energy),
                alignment: mean(&|m| m.alignment),
                test_mse: mean(&|m| m.test_mse),
                train_mse: (ens.p > 0).then(|| mean(&|m| m.train_mse.unwrap_or(0.0))),
                r_overlap2: mean(&|m| m.r_overlap2),
                outliers: mean(&|m| m.outliers as f64),
            }
        })
        .collect();
    let chains = (0..acc.len())
        .map(|k| {
            let ok = ens.chains[k].diverged.is_none();
            let v = |f: &dyn Fn(&Measurement) -> f64| ok.then(|| chain_mean(k, f)).and_then(finite);
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
        .collect();
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
        chains_used: alive.len(),
        samples_per_chain: samples,
        precision: T::NAME.to_string(),
        diagnostics: Diagnostics {
            energy_mean,
            energy_first_half: half_energy(true),
            energy_second_half: half_energy(false),
            iat_alignment,
            ess_alignment: iat_alignment.map(|t| total_samples / t),
            iat_r_overlap2: iat_r,
            ess_r_overlap2: iat_r.map(|t| total_samples / t),
            lambda_max: None,
            step: cfg.sampler.step,
            step_times_lambda_max: None,
            groups,
            ..Diagnostics::default()
        },
        start: "cold".to_string(),
        hot_start: None,
        equilibrated: None,
        steps_per_second: None,
        ..Summary::default()
    };
    RunResult {
        summary,
        traces,
        chains,
        histogram: Histogram {
            edges,
            counts,
            outside,
        },
        probe_histograms: Vec::new(),
        mean_test_prediction: mean_pred,
        seconds,
        steps: ens.steps_done,
    }
}

/// Leading eigenvector of a symmetric positive semi-definite matrix by power iteration from
/// a fixed start (deterministic).
fn leading_eigenvector(m: &[f64], d: usize) -> Option<Vec<f64>> {
    let mut v: Vec<f64> = (0..d).map(|i| 1.0 + 0.01 * i as f64).collect();
    for _ in 0..2000 {
        let mut w: Vec<f64> = (0..d)
            .map(|i| (0..d).map(|j| m[i * d + j] * v[j]).sum())
            .collect();
        let norm = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        if !(norm > 0.0 && norm.is_finite()) {
            return None;
        }
        w.iter_mut().for_each(|x| *x /= norm);
        let change: f64 = w.iter().zip(&v).map(|(a, b)| (a - b).abs()).sum();
        v = w;
        if change < 1e-12 {
            break;
        }
    }
    Some(v)
}

/// Central finite-difference check of a flat model's data gradient (used by the models'
/// tests): returns the largest |analytic − numeric| / (|numeric| + `floor`) over the entries.
#[cfg(test)]
pub(crate) fn gradient_error<M: FlatModel<f64>>(
    model: &M,
    theta: &[f64],
    x: &[f64],
    y: &[f64],
    floor: f64,
) -> f64 {
    let n = y.len();
    let mut scratch = M::Scratch::default();
    let mut grad = vec![0.0; theta.len()];
    model.data_gradient(theta, x, y, n, 1.0, &mut grad, &mut scratch);
    let loss = |t: &[f64], scratch: &mut M::Scratch| -> f64 {
        let mut f = vec![0.0; n];
        model.predict(t, x, n, &mut f, scratch);
        f.iter().zip(y).map(|(a, b)| (a - b).powi(2)).sum::<f64>() / 2.0
    };
    let h = 1e-6;
    let mut worst: f64 = 0.0;
    let mut t = theta.to_vec();
    for i in 0..theta.len() {
        t[i] = theta[i] + h;
        let up = loss(&t, &mut scratch);
        t[i] = theta[i] - h;
        let down = loss(&t, &mut scratch);
        t[i] = theta[i];
        let numeric = (up - down) / (2.0 * h);
        worst = worst.max((grad[i] - numeric).abs() / (numeric.abs() + floor));
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::super::config::ExperimentConfig;
    use super::super::run::run_experiment;

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
    /// threads (spec 02 "Reproducible"), for both flat models, f32.
    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        for text in [CNN, ATTENTION] {
            let cfg = ExperimentConfig::from_toml(text, "test.toml").unwrap();
            let run = |threads: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| run_experiment(&cfg, &mut |_, _| {}).unwrap())
            };
            let (a, b) = (run(1), run(2));
            assert_eq!(a.summary, b.summary);
            assert_eq!(a.traces, b.traces);
            assert_eq!(a.chains, b.chains);
            assert_eq!(a.histogram, b.histogram);
            assert_eq!(a.summary.precision, "f32");
            assert!(a.summary.alignment.is_some() && a.summary.diverged_chains.is_empty());
        }
    }

    /// An absurd step: every chain is stopped and named, nothing non-finite is reported.
    #[test]
    fn an_absurd_step_diverges_every_chain_without_nan() {
        for text in [CNN, ATTENTION] {
            let bad = text.replace("step = ", "step = 1e3 #");
            let cfg = ExperimentConfig::from_toml(&bad, "test.toml").unwrap();
            let r = run_experiment(&cfg, &mut |_, _| {}).unwrap();
            assert!(r.all_diverged());
            assert_eq!(r.summary.diverged_chains.len(), 7);
            assert_eq!(r.summary.alignment, None);
            assert!(r.summary.suggested_step.is_some());
            let json = serde_json::to_string(&r.summary).unwrap();
            assert!(!json.contains("NaN") && !json.contains("inf"), "{json}");
        }
    }
}
