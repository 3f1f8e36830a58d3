//! Feature overlaps beyond the first layer's teacher overlap ρ (spec 02 "Observables"):
//!
//! * **Deeper layers** (paper App. F.1, Fig. 8): for every hidden layer l ≥ 2 and neuron i,
//!   the overlaps of its pre-activation h^l_i with the unit-variance features g = Φ\* and
//!   g = Ĥe3(Φ\*) = He3(Φ\*)/√6 on the test set, o_i = (1/n) Σ_μ h^l_i(x_μ) g(x_μ) — the
//!   analogue of ρ_i = w_i·w\* = ⟨h^1_i, Φ\*⟩ one layer up. A neuron is an outlier when
//!   |o_i| > 3·s_l, s_l the NNGP standard deviation of o_i.
//! * **Parity directions** (App. E.2, Fig. 7): first-layer overlaps ρ^u_i = w_i·u with the
//!   feature directions of y_k = sign Π_{j≤k} x_j, u_s = Σ_{j≤k} s_j e_j/√k for the 2^{k−1}
//!   sign patterns s with s_1 = +1 (k = 2: w_{∗,1+2} = (e1 + e2)/√2 and w_{∗,1−2} =
//!   (e1 − e2)/√2, the directions of y_2 = sign((x1 + x2)²/2 − x1² − x2²)/… of App. E.2; for
//!   k > 2 this is our generalisation, the paper only treats k = 2). Specialising neurons are
//!   those with |ρ^u_i| > 3σ1/√d (the first-layer rule of App. F.0.1; w·u has GP standard
//!   deviation σ1/√d for any unit u), and the μ-specialisation magnitude along u is the mean
//!   |ρ^u_i| of the specialising neurons (Fig. 7(b); App. E.2 predicts μ ∝ (N/d)^{1/4}).
//! * **Classification**: test accuracy, the fraction of test points with sign f = y.
//!
//! **NNGP standard deviation** (App. F.1 "3 times the NNGP standard deviation"). Under the
//! NNGP prior h^l is a Gaussian process with covariance K_l (paper Sec. 5.1, the GP pattern
//! h^l_i ~ 𝒩(0, K_{l−1}) in the paper's indexing), so o = gᵀh/n is Gaussian with variance
//! s_l² = gᵀK_l g/n² on the very test set used — exact for the measured quantity, including
//! its finite-n terms. The covariance follows the layer recursion element-wise:
//! K_1(x, x′) = σ1² x·x′/d and, for l ≥ 2, K_l = σ_l² E[σ(u)σ(v)] with (u, v) Gaussian of
//! covariance K_{l−1} on (x, x′) — the arcsine kernel for erf, the arc-cosine kernel for ReLU,
//! Wick's theorem for poly ([`crate::kernels::nngp`]), K_{l−1} itself for linear. With layer
//! normalisation the infinite-width LN subtracts the mean m(x) = E[σ(u)] and divides by the
//! standard deviation, K_l = σ_l² (E[σ(u)σ(v)] − m(x)m(x′))/√(v(x)v(x′)), v = E[σ²] − m²,
//! with m = 0 (erf, linear), √(K/(2π)) (ReLU), 1 + K (poly). tanh has no closed form: its
//! deeper overlaps are reported without outliers. For l = 2 without layer normalisation the
//! variance is exact at any width N_1 (h^1 is exactly Gaussian, so the empirical kernel's mean
//! is K_2); the overlap's law is then a Gaussian scale mixture that tends to the Gaussian as
//! N_1 grows.

use rayon::prelude::*;
use serde::Serialize;

use crate::kernels::nngp::Activation as KernelActivation;
use crate::sim::data::Dataset;
use crate::sim::ensemble::fcn::Ensemble;
use crate::sim::model::activation::Activation;
use crate::sim::model::fcn::{forward, FcnModel, Scratch};
use crate::sim::num::real::Real;
use crate::sim::observe::observables::{finite, mean_and_error};

/// Bins of the deeper-layer and parity-direction histograms.
pub const OVERLAP_HIST_BINS: usize = 200;

/// The features of the deeper-layer overlaps, in the order of every per-feature array.
pub const FEATURES: [&str; 2] = ["phi", "he3"];

/// Largest parity order whose 2^{k−1} directions are measured.
pub const MAX_PARITY_DIRECTIONS_K: usize = 8;

/// E[σ(u)σ(v)] for (u, v) Gaussian with variances s11, s22 and covariance s12 (None: no
/// closed form).
fn pair_moment(act: Activation, s11: f64, s22: f64, s12: f64) -> Option<f64> {
    match act {
        Activation::Erf => Some(KernelActivation::Erf.kernel_from_cov(s11, s22, s12)),
        Activation::Relu => Some(KernelActivation::Relu.kernel_from_cov(s11, s22, s12)),
        Activation::Poly => Some(KernelActivation::Poly.kernel_from_cov(s11, s22, s12)),
        Activation::Linear => Some(s12),
        Activation::Tanh => None,
    }
}

/// E[σ(u)] for u ~ 𝒩(0, s).
fn mean_moment(act: Activation, s: f64) -> Option<f64> {
    match act {
        Activation::Erf | Activation::Linear => Some(0.0),
        Activation::Relu => Some((s / (2.0 * std::f64::consts::PI)).sqrt()),
        Activation::Poly => Some(1.0 + s),
        Activation::Tanh => None,
    }
}

/// NNGP covariance of layer g + 1 (0-based group g ≥ 1) from that of layer g on one pair of
/// inputs (module docs).
fn next_kernel(model: &FcnModel, g: usize, s11: f64, s22: f64, s12: f64) -> Option<f64> {
    let sigma2 = model.prior_var[g] * model.fan_in(g) as f64;
    let e = pair_moment(model.activation, s11, s22, s12)?;
    if !model.layernorm {
        return Some(sigma2 * e);
    }
    let (m1, m2) = (
        mean_moment(model.activation, s11)?,
        mean_moment(model.activation, s22)?,
    );
    let v1 = pair_moment(model.activation, s11, s11, s11)? - m1 * m1;
    let v2 = pair_moment(model.activation, s22, s22, s22)? - m2 * m2;
    if v1 <= 0.0 || v2 <= 0.0 {
        return None;
    }
    Some(sigma2 * (e - m1 * m2) / (v1 * v2).sqrt())
}

/// NNGP variances of the overlaps o = gᵀh^l/n of every hidden layer l ≥ 2 with each feature
/// in `features` (module docs), and the mean NNGP variance of h^l itself (for histogram
/// ranges): result[l − 2] = (per-feature variances, mean K_l(x, x)). None where the activation
/// has no closed form. `x` is n × d row-major.
pub fn nngp_overlap_variances(
    model: &FcnModel,
    x: &[f64],
    n: usize,
    features: &[Vec<f64>],
) -> Vec<Option<(Vec<f64>, f64)>> {
    let hidden = model.widths.len();
    if hidden < 2 || n == 0 {
        return vec![None; hidden.saturating_sub(1)];
    }
    let d = model.d;
    let v1 = model.prior_var[0];
    let dot = |i: usize, j: usize| -> f64 {
        x[i * d..(i + 1) * d]
            .iter()
            .zip(&x[j * d..(j + 1) * d])
            .map(|(a, b)| a * b)
            .sum::<f64>()
            * v1
    };
    // Diagonals K_l(x, x) of every layer.
    let mut diag: Vec<Vec<f64>> = vec![(0..n).map(|i| dot(i, i)).collect()];
    for g in 1..hidden {
        let prev = &diag[g - 1];
        let next: Option<Vec<f64>> = prev
            .iter()
            .map(|&s| next_kernel(model, g, s, s, s))
            .collect();
        match next {
            Some(v) => diag.push(v),
            None => return vec![None; hidden - 1],
        }
    }
    // Σ_ij g_i g_j K_l(i, j) per layer and feature, one row i per task, summed in row order.
    let nf = features.len();
    let rows: Vec<Vec<f64>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut acc = vec![0.0; (hidden - 1) * nf];
            for j in 0..n {
                let mut k = dot(i, j);
                for g in 1..hidden {
                    k = next_kernel(model, g, diag[g - 1][i], diag[g - 1][j], k).unwrap_or(0.0);
                    for (f, feat) in features.iter().enumerate() {
                        acc[(g - 1) * nf + f] += feat[i] * feat[j] * k;
                    }
                }
            }
            acc
        })
        .collect();
    let n2 = (n * n) as f64;
    (1..hidden)
        .map(|g| {
            let vars = (0..nf)
                .map(|f| rows.iter().map(|r| r[(g - 1) * nf + f]).sum::<f64>() / n2)
                .collect();
            let mean_diag = diag[g].iter().sum::<f64>() / n as f64;
            Some((vars, mean_diag))
        })
        .collect()
}

/// One chain's test outputs and probe sample (None for a diverged chain).
pub type ChainProbe<T> = Option<(Vec<T>, ProbeSample)>;

/// One chain's [`ChainProbe`] and its test outputs with other readouts
/// ([`Probe::predict_with_readouts`]).
type ChainProbeWithOther<T> = (ChainProbe<T>, Option<Vec<T>>);

/// What is measured at every sampling time besides the engine's first-layer observables.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Φ\*(x_μ) and Ĥe3(Φ\*(x_μ)) on the test set.
    pub features: Vec<Vec<f64>>,
    /// Per hidden layer l ≥ 2: NNGP standard deviation of the overlap with each feature.
    pub nngp_std: Vec<Vec<Option<f64>>>,
    /// Per hidden layer l ≥ 2 and feature: histogram half-range (None: no histogram).
    pub ranges: Vec<Vec<Option<f64>>>,
    /// Parity feature directions (name, unit vector).
    pub directions: Vec<(String, Vec<f64>)>,
    /// 3σ1/√d: the first-layer specialisation threshold along any unit direction.
    pub direction_threshold: f64,
    /// Histogram half-range of the overlaps along the parity directions.
    pub direction_range: f64,
    /// Labels ±1: test accuracy is measured.
    pub classification: bool,
}

impl Probe {
    /// The probe of a run: features from the test set, NNGP standard deviations, parity
    /// directions when the target is a parity label.
    pub fn new(model: &FcnModel, data: &Dataset, parity: Option<usize>) -> Probe {
        let d = data.d;
        let phi: Vec<f64> = data
            .x_test
            .chunks_exact(d.max(1))
            .map(|row| {
                row.iter()
                    .zip(&data.teacher)
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
                    / data.teacher_scale
            })
            .collect();
        // Ĥe3 = He3/√3! (unit variance under Φ* ~ 𝒩(0, 1)).
        let he3: Vec<f64> = phi
            .iter()
            .map(|&z| crate::hermite::he(3, z) / 6f64.sqrt())
            .collect();
        let features = vec![phi, he3];
        let n = data.n_test();
        let vars = nngp_overlap_variances(model, &data.x_test, n, &features);
        let mut nngp_std = Vec::new();
        let mut ranges = Vec::new();
        for v in &vars {
            match v {
                Some((fv, mean_diag)) => {
                    let stds: Vec<Option<f64>> = fv.iter().map(|&v| finite(v.sqrt())).collect();
                    // Cauchy–Schwarz bounds |o| by √(mean h²) (≈ √K(x, x)); 25 standard
                    // deviations keep ≥ 4 bins per σ for the GP bulk.
                    let rms = mean_diag.sqrt();
                    ranges.push(
                        stds.iter()
                            .map(|s| s.map(|s| (25.0 * s).min(3.0 * rms).max(4.0 * s)))
                            .collect(),
                    );
                    nngp_std.push(stds);
                }
                None => {
                    nngp_std.push(vec![None; FEATURES.len()]);
                    ranges.push(vec![None; FEATURES.len()]);
                }
            }
        }
        let directions = match parity {
            Some(k) if k <= MAX_PARITY_DIRECTIONS_K && k <= d => parity_directions(k, d),
            _ => Vec::new(),
        };
        let sigma1 = (model.prior_var[0] * d as f64).sqrt();
        Probe {
            features,
            nngp_std,
            ranges,
            directions,
            direction_threshold: 3.0 * sigma1 / (d as f64).sqrt(),
            direction_range: crate::sim::observe::observables::hist_range(sigma1 * sigma1, d),
            classification: parity.is_some(),
        }
    }

    /// Test-set forward pass of every live chain (chain order; None for diverged chains):
    /// its outputs and its probe measurements.
    pub fn predict<T: Real>(
        &self,
        ens: &Ensemble<T>,
        x_test: &[T],
        n: usize,
    ) -> Vec<ChainProbe<T>> {
        self.predict_with_readouts(ens, x_test, n, None).0
    }

    /// [`Probe::predict`], and with `other_readouts` (per block, in the layout of its readout
    /// group) also every live chain's test outputs with those readouts in place of its own,
    /// from the same forward pass (the hidden features do not depend on the readout): the
    /// collapsed sampler's Rao–Blackwellised predictions E[f | W] at the cost of a dot product.
    pub fn predict_with_readouts<T: Real>(
        &self,
        ens: &Ensemble<T>,
        x_test: &[T],
        n: usize,
        other_readouts: Option<&[&[T]]>,
    ) -> (Vec<ChainProbe<T>>, Vec<Option<Vec<T>>>) {
        let model = &ens.model;
        let d = model.d;
        let n1 = model.widths[0];
        let hidden = model.widths.len();
        let n_last = model.widths[hidden - 1];
        let per_block: Vec<Vec<ChainProbeWithOther<T>>> = ens
            .blocks
            .par_iter()
            .enumerate()
            .map_init(Scratch::<T>::default, |scratch, (k, block)| {
                forward(model, &block.params, block.len, x_test, n, scratch);
                let b = block.len;
                (0..b)
                    .map(|c| {
                        if block.diverged[c].is_some() {
                            return (None, None);
                        }
                        let f: Vec<T> = (0..n).map(|mu| scratch.f[mu * b + c]).collect();
                        let f_other = other_readouts.map(|r| {
                            let w = &r[k][c * n_last..(c + 1) * n_last];
                            let act = &scratch.act[hidden - 1];
                            (0..n)
                                .map(|mu| {
                                    let row = mu * b * n_last + c * n_last;
                                    crate::sim::model::fcn::dot(&act[row..row + n_last], w)
                                })
                                .collect()
                        });
                        let layers = (1..model.widths.len())
                            .map(|l| {
                                let nl = model.widths[l];
                                let h = &scratch.h[l];
                                self.features
                                    .iter()
                                    .map(|g| {
                                        let mut o = vec![0.0; nl];
                                        for (mu, &gv) in g.iter().enumerate() {
                                            let row = &h[mu * b * nl + c * nl..][..nl];
                                            for (oi, hv) in o.iter_mut().zip(row) {
                                                *oi += hv.f64() * gv;
                                            }
                                        }
                                        for oi in &mut o {
                                            *oi /= n as f64;
                                        }
                                        o
                                    })
                                    .collect()
                            })
                            .collect();
                        let w1 = &block.params[0][c * n1 * d..(c + 1) * n1 * d];
                        let directions = self
                            .directions
                            .iter()
                            .map(|(_, u)| {
                                w1.chunks_exact(d)
                                    .map(|row| {
                                        row.iter().zip(u).map(|(w, u)| w.f64() * u).sum::<f64>()
                                    })
                                    .collect()
                            })
                            .collect();
                        (Some((f, ProbeSample { layers, directions })), f_other)
                    })
                    .collect()
            })
            .collect();
        per_block.into_iter().flatten().unzip()
    }
}

/// The 2^{k−1} unit directions Σ_{j≤k} s_j e_j/√k, s_1 = +1 (module docs), named like
/// "e1+e2", "e1-e2".
pub fn parity_directions(k: usize, d: usize) -> Vec<(String, Vec<f64>)> {
    (0..1usize << (k - 1))
        .map(|mask| {
            let mut u = vec![0.0; d];
            let mut name = String::from("e1");
            u[0] = 1.0 / (k as f64).sqrt();
            for j in 1..k {
                let minus = mask >> (j - 1) & 1 == 1;
                u[j] = if minus { -u[0] } else { u[0] };
                name += &format!("{}e{}", if minus { "-" } else { "+" }, j + 1);
            }
            (name, u)
        })
        .collect()
}

/// One chain's probe measurements at one sampling time.
#[derive(Debug, Clone)]
pub struct ProbeSample {
    /// [layer l ≥ 2][feature][neuron] overlaps o_i.
    pub layers: Vec<Vec<Vec<f64>>>,
    /// [direction][neuron] first-layer overlaps w_i·u.
    pub directions: Vec<Vec<f64>>,
}

/// A histogram over [−range, range].
#[derive(Debug, Clone, PartialEq)]
pub struct Hist {
    /// Half-range.
    pub range: f64,
    /// Counts per bin.
    pub counts: Vec<u64>,
    /// Values outside the range.
    pub outside: u64,
}

impl Hist {
    fn new(range: f64) -> Hist {
        Hist {
            range,
            counts: vec![0; OVERLAP_HIST_BINS],
            outside: 0,
        }
    }

    fn add(&mut self, v: f64) {
        let bin = ((v + self.range) / (2.0 * self.range) * OVERLAP_HIST_BINS as f64).floor();
        if bin >= 0.0 && bin < OVERLAP_HIST_BINS as f64 {
            self.counts[bin as usize] += 1;
        } else {
            self.outside += 1;
        }
    }

    fn merge(&mut self, other: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.outside += other.outside;
    }

    /// Bin edges.
    pub fn edges(&self) -> Vec<f64> {
        (0..=OVERLAP_HIST_BINS)
            .map(|i| -self.range + 2.0 * self.range * i as f64 / OVERLAP_HIST_BINS as f64)
            .collect()
    }
}

/// Per-chain running sums of the probe (after burn-in).
#[derive(Debug, Clone)]
pub struct ProbeAccumulator {
    samples: usize,
    /// [layer][feature]: Σ o², Σ outliers, number of neurons summed.
    layer_sums: Vec<Vec<[f64; 2]>>,
    layer_hist: Vec<Vec<Option<Hist>>>,
    /// [direction]: Σ ρ², Σ outliers, Σ |ρ| of outliers.
    direction_sums: Vec<[f64; 3]>,
    direction_hist: Option<Hist>,
    accuracy_sum: f64,
}

impl ProbeAccumulator {
    /// Empty sums for `probe`.
    pub fn new(probe: &Probe) -> ProbeAccumulator {
        ProbeAccumulator {
            samples: 0,
            layer_sums: probe
                .ranges
                .iter()
                .map(|r| vec![[0.0; 2]; r.len()])
                .collect(),
            layer_hist: probe
                .ranges
                .iter()
                .map(|r| r.iter().map(|r| r.map(Hist::new)).collect())
                .collect(),
            direction_sums: vec![[0.0; 3]; probe.directions.len()],
            direction_hist: (!probe.directions.is_empty())
                .then(|| Hist::new(probe.direction_range)),
            accuracy_sum: 0.0,
        }
    }

    /// Adds one sampling time of one chain: its test outputs `f` and probe sample.
    pub fn add<T: Real>(&mut self, probe: &Probe, f: &[T], y_test: &[f64], s: &ProbeSample) {
        self.samples += 1;
        for (l, feats) in s.layers.iter().enumerate() {
            for (k, o) in feats.iter().enumerate() {
                let sums = &mut self.layer_sums[l][k];
                sums[0] += o.iter().map(|v| v * v).sum::<f64>() / o.len() as f64;
                if let Some(sd) = probe.nngp_std[l][k] {
                    sums[1] += o.iter().filter(|v| v.abs() > 3.0 * sd).count() as f64;
                }
                if let Some(h) = &mut self.layer_hist[l][k] {
                    for &v in o {
                        h.add(v);
                    }
                }
            }
        }
        for (u, rho) in s.directions.iter().enumerate() {
            let sums = &mut self.direction_sums[u];
            sums[0] += rho.iter().map(|v| v * v).sum::<f64>() / rho.len() as f64;
            for &r in rho {
                if r.abs() > probe.direction_threshold {
                    sums[1] += 1.0;
                    sums[2] += r.abs();
                }
            }
            if u == 0 {
                if let Some(h) = &mut self.direction_hist {
                    for &r in rho {
                        h.add(r);
                    }
                }
            }
        }
        if probe.classification && !y_test.is_empty() {
            let right = f
                .iter()
                .zip(y_test)
                .filter(|(f, y)| f.f64() * **y > 0.0)
                .count();
            self.accuracy_sum += right as f64 / y_test.len() as f64;
        }
    }

    /// μ of this chain along direction `u`: mean |ρ^u| of its specialising neurons over all
    /// samples (None when it has none).
    pub fn mu(&self, u: usize) -> Option<f64> {
        let s = self.direction_sums.get(u)?;
        (s[1] > 0.0).then(|| s[2] / s[1])
    }
}

/// Overlaps of one deeper layer with one feature.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FeatureOverlaps {
    /// "phi" (Φ\*) or "he3" (Ĥe3(Φ\*)).
    pub feature: String,
    /// NNGP standard deviation s_l of the overlap (null: no closed form).
    pub nngp_std: Option<f64>,
    /// Outlier threshold 3·s_l.
    pub threshold: Option<f64>,
    /// Mean o_i² over neurons, chains and samples (s_l² under the prior).
    pub overlap2: Option<f64>,
    /// Its standard error over chains.
    pub overlap2_err: Option<f64>,
    /// Mean number of outlier neurons (|o_i| > 3 s_l) per network.
    pub outliers: Option<f64>,
    /// Its standard error over chains.
    pub outliers_err: Option<f64>,
    /// Outliers as a fraction of the layer's neurons (≈ 0.0027, the Gaussian 3σ tail, under
    /// the prior).
    pub outlier_fraction: Option<f64>,
}

/// Overlaps of one hidden layer l ≥ 2.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LayerOverlaps {
    /// Layer number l (2 … L − 1).
    pub layer: usize,
    /// Width N_l.
    pub width: usize,
    /// One entry per feature (Φ\*, Ĥe3(Φ\*)).
    pub features: Vec<FeatureOverlaps>,
}

/// First-layer overlaps along one parity direction.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirectionOverlaps {
    /// "e1+e2", "e1-e2", …
    pub direction: String,
    /// Mean (w_i·u)² over neurons, chains and samples (GP value σ1²/d).
    pub r_overlap2: Option<f64>,
    /// Mean number of specialising neurons (|w_i·u| > 3σ1/√d) per network.
    pub specialising: Option<f64>,
    /// Its standard error over chains.
    pub specialising_err: Option<f64>,
    /// μ: mean |w_i·u| of the specialising neurons (over chains that have any).
    pub mu: Option<f64>,
    /// Its standard error over those chains.
    pub mu_err: Option<f64>,
    /// Chains with at least one specialising neuron along u.
    pub chains_with_specialists: usize,
}

/// The probe's part of the run summary (flattened into [`crate::sim::driver::run::Summary`]).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct ProbeSummary {
    /// Fraction of test points with sign f = y, one posterior sample, averaged over chains and
    /// samples (parity targets only).
    pub test_accuracy: Option<f64>,
    /// Its standard error over chains.
    pub test_accuracy_err: Option<f64>,
    /// Test accuracy of the ensemble-mean predictor.
    pub test_accuracy_mean_predictor: Option<f64>,
    /// μ-specialisation magnitude along the first parity direction w_{∗,1+2} (paper Fig. 7(b)).
    pub mu: Option<f64>,
    /// Its standard error over chains.
    pub mu_err: Option<f64>,
    /// Mean number of specialising neurons along w_{∗,1+2} per network.
    pub specialising: Option<f64>,
    /// Outliers of layer 2 along Φ\* per network (paper Fig. 8, second-layer panel).
    pub outliers_layer2_phi: Option<f64>,
    /// Its standard error.
    pub outliers_layer2_phi_err: Option<f64>,
    /// Outliers of layer 2 along Ĥe3(Φ\*) per network.
    pub outliers_layer2_he3: Option<f64>,
    /// Its standard error.
    pub outliers_layer2_he3_err: Option<f64>,
    /// Every hidden layer l ≥ 2.
    pub deeper_layers: Vec<LayerOverlaps>,
    /// Every parity direction.
    pub parity_directions: Vec<DirectionOverlaps>,
}

/// A named histogram of the run (written as `histogram_<name>.csv`).
#[derive(Debug, Clone, PartialEq)]
pub struct NamedHistogram {
    /// e.g. "h2_phi", "h2_he3", "rho_e1+e2".
    pub name: String,
    /// Bin edges.
    pub edges: Vec<f64>,
    /// Counts.
    pub counts: Vec<u64>,
    /// Values outside the range.
    pub outside: u64,
}

fn chain_stat(values: &[f64]) -> (Option<f64>, Option<f64>) {
    if values.is_empty() {
        return (None, None);
    }
    let (m, e) = mean_and_error(values);
    (finite(m), e.and_then(finite))
}

/// Combines the accumulators of the surviving chains (`alive`, chain order).
pub fn summarise(
    probe: &Probe,
    model: &FcnModel,
    acc: &[ProbeAccumulator],
    alive: &[usize],
    mean_prediction: &[f64],
    y_test: &[f64],
) -> (ProbeSummary, Vec<NamedHistogram>) {
    let used: Vec<&ProbeAccumulator> = alive
        .iter()
        .map(|&k| &acc[k])
        .filter(|a| a.samples > 0)
        .collect();
    let per_chain = |f: &dyn Fn(&ProbeAccumulator) -> f64| -> Vec<f64> {
        used.iter().map(|a| f(a) / a.samples as f64).collect()
    };
    let mut hists = Vec::new();
    let mut deeper_layers = Vec::new();
    for l in 0..probe.ranges.len() {
        let width = model.widths[l + 1];
        let features = (0..FEATURES.len())
            .map(|k| {
                let (overlap2, overlap2_err) = chain_stat(&per_chain(&|a| a.layer_sums[l][k][0]));
                let sd = probe.nngp_std[l][k];
                let (outliers, outliers_err) = if sd.is_some() {
                    chain_stat(&per_chain(&|a| a.layer_sums[l][k][1]))
                } else {
                    (None, None)
                };
                if probe.ranges[l][k].is_some() && !used.is_empty() {
                    let mut h = used[0].layer_hist[l][k].clone().expect("range set");
                    for a in &used[1..] {
                        h.merge(a.layer_hist[l][k].as_ref().expect("range set"));
                    }
                    hists.push(NamedHistogram {
                        name: format!("h{}_{}", l + 2, FEATURES[k]),
                        edges: h.edges(),
                        counts: h.counts,
                        outside: h.outside,
                    });
                }
                FeatureOverlaps {
                    feature: FEATURES[k].to_string(),
                    nngp_std: sd,
                    threshold: sd.map(|s| 3.0 * s),
                    overlap2,
                    overlap2_err,
                    outliers,
                    outliers_err,
                    outlier_fraction: outliers.map(|o| o / width as f64),
                }
            })
            .collect();
        deeper_layers.push(LayerOverlaps {
            layer: l + 2,
            width,
            features,
        });
    }
    let parity_directions: Vec<DirectionOverlaps> = probe
        .directions
        .iter()
        .enumerate()
        .map(|(u, (name, _))| {
            let (r2, _) = chain_stat(&per_chain(&|a| a.direction_sums[u][0]));
            let (sp, sp_err) = chain_stat(&per_chain(&|a| a.direction_sums[u][1]));
            let mus: Vec<f64> = used.iter().filter_map(|a| a.mu(u)).collect();
            let (mu, mu_err) = chain_stat(&mus);
            DirectionOverlaps {
                direction: name.clone(),
                r_overlap2: r2,
                specialising: sp,
                specialising_err: sp_err,
                mu,
                mu_err,
                chains_with_specialists: mus.len(),
            }
        })
        .collect();
    if let (Some((name, _)), false) = (probe.directions.first(), used.is_empty()) {
        let mut h = used[0].direction_hist.clone().expect("directions set");
        for a in &used[1..] {
            h.merge(a.direction_hist.as_ref().expect("directions set"));
        }
        hists.push(NamedHistogram {
            name: format!("rho_{name}"),
            edges: h.edges(),
            counts: h.counts,
            outside: h.outside,
        });
    }
    let (test_accuracy, test_accuracy_err) = if probe.classification {
        chain_stat(&per_chain(&|a| a.accuracy_sum))
    } else {
        (None, None)
    };
    let test_accuracy_mean_predictor = (probe.classification
        && !mean_prediction.is_empty()
        && mean_prediction.len() == y_test.len())
    .then(|| {
        mean_prediction
            .iter()
            .zip(y_test)
            .filter(|(f, y)| **f * **y > 0.0)
            .count() as f64
            / y_test.len() as f64
    });
    let layer2 = |k: usize| {
        deeper_layers
            .first()
            .map(|l: &LayerOverlaps| (l.features[k].outliers, l.features[k].outliers_err))
            .unwrap_or((None, None))
    };
    let first_dir = parity_directions.first();
    let summary = ProbeSummary {
        test_accuracy,
        test_accuracy_err,
        test_accuracy_mean_predictor,
        mu: first_dir.and_then(|d| d.mu),
        mu_err: first_dir.and_then(|d| d.mu_err),
        specialising: first_dir.and_then(|d| d.specialising),
        outliers_layer2_phi: layer2(0).0,
        outliers_layer2_phi_err: layer2(0).1,
        outliers_layer2_he3: layer2(1).0,
        outliers_layer2_he3_err: layer2(1).1,
        deeper_layers,
        parity_directions,
    };
    (summary, hists)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{run_experiment, ExperimentConfig};

    fn prior_run(activation: &str, layernorm: bool, widths: &str) -> crate::sim::RunResult {
        let text = format!(
            r#"
[model]
kind = "fcn"
activation = "{activation}"
widths = {widths}
layernorm = {layernorm}
[data]
d = 8
p = 0
n_test = 300
[target]
hermite = 3
[sampler]
kappa = 1.0
step = 1e-5
steps = 20
burn_in = 10
thin = 10
chains = 240
seed = 3
precision = "f64"
"#
        );
        let cfg = ExperimentConfig::from_toml(&text, "prior.toml").unwrap();
        run_experiment(&cfg, &mut |_, _| {}).unwrap()
    }

    /// At P = 0 the chains are prior draws (the start is exact and 20 steps of 10⁻⁵ barely
    /// move it), so the measured second moment of the layer-2 overlaps must equal the NNGP
    /// variance gᵀK₂g/n² (exact at any N₁ without layer normalisation) within Monte Carlo error,
    /// and the outlier fraction must be close to the Gaussian 3σ tail 0.0027.
    #[test]
    fn prior_deeper_overlaps_match_the_nngp_prediction() {
        for (act, ln, tol) in [
            ("erf", false, 0.06),
            ("relu", false, 0.06),
            ("relu", true, 0.1),
        ] {
            let r = prior_run(act, ln, "[64, 48]");
            let layer = &r.summary.probe.deeper_layers[0];
            assert_eq!((layer.layer, layer.width), (2, 48));
            let mut outliers = 0.0;
            for f in &layer.features {
                let sd = f.nngp_std.unwrap();
                let m2 = f.overlap2.unwrap();
                // 240 chains × 48 neurons, correlated within a chain through W¹: a few %.
                assert!(
                    (m2 / (sd * sd) - 1.0).abs() < tol,
                    "{act} LN {ln} {}: measured ⟨o²⟩ {m2} vs NNGP {}",
                    f.feature,
                    sd * sd
                );
                eprintln!(
                    "{act} LN {ln} {}: ⟨o²⟩ {m2:.5e}, NNGP {:.5e}, outlier fraction {:.4}",
                    f.feature,
                    sd * sd,
                    f.outlier_fraction.unwrap()
                );
                outliers += f.outlier_fraction.unwrap();
            }
            // 2 × 11520 overlaps: 62 ± 8 expected beyond 3σ for a Gaussian. At N₁ = 64 the
            // overlaps are a sum of 64 non-Gaussian terms (heavier tails), and the 48 neurons of
            // one chain share W¹, so the count scatters more than Poisson: the upper end allows
            // 2.2× the Gaussian tail. A wrong NNGP scale fails it by far (σ 10 % too small puts
            // the cut at 2.7σ: fraction 0.007).
            let fraction = outliers / 2.0;
            assert!(
                (0.0014..0.006).contains(&fraction),
                "{act} LN {ln}: outlier fraction {fraction}"
            );
            let h = r
                .probe_histograms
                .iter()
                .find(|h| h.name == "h2_he3")
                .unwrap();
            let total: u64 = h.counts.iter().sum::<u64>() + h.outside;
            assert_eq!(total, 240 * 48);
            assert!(r.summary.probe.parity_directions.is_empty());
            assert_eq!(r.summary.probe.test_accuracy, None);
        }
        // A two-layer network has no deeper layers.
        let r = prior_run("erf", false, "[16]");
        assert!(r.summary.probe.deeper_layers.is_empty());
        assert_eq!(r.summary.probe.outliers_layer2_phi, None);
    }

    #[test]
    fn parity_directions_are_the_signed_unit_diagonals() {
        let dirs = parity_directions(2, 4);
        let s = 1.0 / 2f64.sqrt();
        assert_eq!(dirs[0], ("e1+e2".to_string(), vec![s, s, 0.0, 0.0]));
        assert_eq!(dirs[1], ("e1-e2".to_string(), vec![s, -s, 0.0, 0.0]));
        let dirs = parity_directions(3, 3);
        assert_eq!(dirs.len(), 4);
        for (i, (_, u)) in dirs.iter().enumerate() {
            for (j, (_, v)) in dirs.iter().enumerate() {
                let dot: f64 = u.iter().zip(v).map(|(a, b)| a * b).sum();
                let want = if i == j { 1.0 } else { dot };
                assert!((dot - want).abs() < 1e-12);
            }
        }
        assert_eq!(
            parity_directions(1, 2),
            vec![("e1".to_string(), vec![1.0, 0.0])]
        );
    }

    /// μ is the mean |w·u| of the neurons beyond 3σ1/√d, pooled over a chain's samples.
    #[test]
    fn mu_is_the_mean_magnitude_of_the_specialising_neurons() {
        let probe = Probe {
            features: Vec::new(),
            nngp_std: Vec::new(),
            ranges: Vec::new(),
            directions: parity_directions(2, 2),
            direction_threshold: 0.5,
            direction_range: 3.0,
            classification: true,
        };
        let mut acc = ProbeAccumulator::new(&probe);
        let sample = |a: Vec<f64>, b: Vec<f64>| ProbeSample {
            layers: Vec::new(),
            directions: vec![a, b],
        };
        let y = [1.0, -1.0, 1.0, 1.0];
        acc.add(
            &probe,
            &[0.3f64, -2.0, -1.0, 4.0],
            &y,
            &sample(vec![0.1, 2.0, -1.0], vec![0.0; 3]),
        );
        acc.add(
            &probe,
            &[1.0f64, 1.0, 1.0, 1.0],
            &y,
            &sample(vec![0.2, -0.4, 3.0], vec![0.0; 3]),
        );
        assert_eq!(acc.mu(0), Some(2.0)); // (2 + 1 + 3)/3
        assert_eq!(acc.mu(1), None);
        let (s, hists) = summarise(
            &probe,
            &FcnModel::test_two_layer(2, 3),
            &[acc],
            &[0],
            &[],
            &y,
        );
        assert_eq!(s.mu, Some(2.0));
        assert_eq!(s.specialising, Some(1.5));
        // Accuracy: 3/4 then 3/4.
        assert_eq!(s.test_accuracy, Some(0.75));
        assert_eq!(s.parity_directions[1].chains_with_specialists, 0);
        assert_eq!(hists[0].name, "rho_e1+e2");
    }

    /// The two-layer ReLU classifier of App. E.2 with the cross-entropy likelihood learns
    /// y = sign(x1·x2): well above chance on the test set, with neurons specialising along
    /// both parity directions (e1 ± e2)/√2 far above the GP rate N·P(|z| > 3) ≈ 0.05 per
    /// network, which the prior (P = 0) reproduces.
    #[test]
    fn cross_entropy_relu_classifier_learns_parity_and_specialises() {
        let run = |p: usize| {
            let text = format!(
                r#"
[model]
kind = "fcn"
activation = "relu"
widths = [20]
[data]
d = 6
p = {p}
n_test = 500
[target]
parity = 2
[sampler]
likelihood = "cross-entropy"
kappa = 0.25
step = 3e-4
steps = 4000
burn_in = 2000
thin = 100
chains = 8
seed = 2
"#
            );
            let cfg = ExperimentConfig::from_toml(&text, "parity.toml").unwrap();
            run_experiment(&cfg, &mut |_, _| {}).unwrap().summary.probe
        };
        let learnt = run(300);
        let acc = learnt.test_accuracy.unwrap();
        assert!(acc > 0.85, "accuracy {acc}");
        for dir in &learnt.parity_directions {
            assert!(dir.specialising.unwrap() > 1.0, "{dir:?}");
            let mu = dir.mu.unwrap();
            assert!(mu > 3.0 / 6f64.sqrt(), "{dir:?}");
        }
        let prior = run(0);
        let acc = prior.test_accuracy.unwrap();
        assert!((acc - 0.5).abs() < 0.1, "prior accuracy {acc}");
        for dir in &prior.parity_directions {
            assert!(dir.specialising.unwrap() < 0.3, "{dir:?}");
        }
    }
}
