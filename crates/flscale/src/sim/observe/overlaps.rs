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
//! The NNGP standard deviations s_l are computed in [`crate::sim::observe::nngp_overlap`];
//! the per-chain sums and their summary in [`crate::sim::observe::probe_summary`].

use rayon::prelude::*;
use serde::Serialize;

use crate::hermite::GaussHermite;
use crate::sim::data::Dataset;
use crate::sim::ensemble::fcn::Ensemble;
use crate::sim::model::fcn::{forward, FcnModel, Scratch};
use crate::sim::num::real::Real;
use crate::sim::observe::nngp_overlap::{
    nngp_overlap_variances, population_layer2_overlaps, population_layer2_std, FEATURE_ORDERS,
};
use crate::sim::observe::observables::finite;

/// Bins of the deeper-layer and parity-direction histograms.
pub const OVERLAP_HIST_BINS: usize = 200;

/// The features of the deeper-layer overlaps, in the order of every per-feature array.
pub const FEATURES: [&str; 2] = ["phi", "he3"];

/// Largest parity order whose 2^{k−1} directions are measured.
pub const MAX_PARITY_DIRECTIONS_K: usize = 8;

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
    /// Layer 2's overlaps are taken under the Gaussian data measure in closed form
    /// ([`crate::sim::observe::nngp_overlap`]): the quadrature rule and the unit teacher w\*.
    /// None: on the test set.
    pub layer2_population: Option<(GaussHermite, Vec<f64>)>,
}

impl Probe {
    /// The probe of a run: features from the test set, NNGP standard deviations, parity
    /// directions when the target is a parity label. `isotropic`: the inputs are 𝒩(0, I_d),
    /// so layer 2's overlaps and their NNGP deviation are taken under the data measure
    /// (module docs of [`crate::sim::observe::nngp_overlap`]).
    pub fn new(model: &FcnModel, data: &Dataset, parity: Option<usize>, isotropic: bool) -> Probe {
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
        let mut ranges: Vec<Vec<Option<f64>>> = Vec::new();
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
        let population = isotropic
            .then(|| GaussHermite::new(120).ok())
            .flatten()
            .and_then(|gh| population_layer2_std(model, &FEATURE_ORDERS, &gh).map(|s| (gh, s)));
        let layer2_population = population.map(|(gh, stds)| {
            let rms = vars[0].as_ref().map(|v| v.1.sqrt());
            // A zero deviation (ReLU's c_3 = 0: the Ĥe3 overlap vanishes identically) has no
            // outliers and no histogram.
            let stds: Vec<Option<f64>> = stds
                .iter()
                .map(|&s| finite(s).filter(|&s| s > 0.0))
                .collect();
            ranges[0] = stds
                .iter()
                .map(|s| {
                    s.map(|s| {
                        rms.map_or(25.0 * s, |r| (25.0 * s).min(3.0 * r))
                            .max(4.0 * s)
                    })
                })
                .collect();
            nngp_std[0] = stds;
            (gh, data.teacher.clone())
        });
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
            layer2_population,
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
                        let w1 = &block.params[0][c * n1 * d..(c + 1) * n1 * d];
                        let layers = (1..model.widths.len())
                            .map(|l| {
                                if let (1, Some((gh, teacher))) = (l, &self.layer2_population) {
                                    let n2 = model.widths[1];
                                    let w2 = &block.params[1][c * n2 * n1..(c + 1) * n2 * n1];
                                    return population_layer2_overlaps(
                                        model.activation,
                                        w1,
                                        w2,
                                        d,
                                        teacher,
                                        &FEATURE_ORDERS,
                                        gh,
                                    );
                                }
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

/// Overlaps of one deeper layer with one feature.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FeatureOverlaps {
    /// "phi" (Φ\*) or "he3" (Ĥe3(Φ\*)).
    pub feature: String,
    /// Where the overlap is taken: "gaussian" (under the data measure, in closed form; layer 2
    /// with isotropic inputs and no layer normalisation) or "test_set".
    pub measure: String,
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
    /// Mean number M of specialised neurons per network (by `classifier`).
    pub specialising: Option<f64>,
    /// Its standard error over chains.
    pub specialising_err: Option<f64>,
    /// μ: mean |w_i·u| of the specialised neurons (over chains that have any).
    pub mu: Option<f64>,
    /// Its standard error over those chains.
    pub mu_err: Option<f64>,
    /// Chains with at least one specialising neuron along u.
    pub chains_with_specialists: usize,
    /// How the specialised neurons were identified: "side_peak" (the side peak of the |w·u|
    /// distribution, [`crate::sim::observe::probe_summary`]) or "cut_3sigma" (no side peak
    /// resolved: |w·u| > 3σ1/√d).
    pub classifier: String,
    /// The |w·u| above which a neuron counted as specialised.
    pub threshold: Option<f64>,
    /// The side peak's weight in the pooled |w·u| distribution (null without a side peak).
    pub side_peak_fraction: Option<f64>,
    /// The fitted bulk's half-normal scale (null without a side peak).
    pub bulk_scale: Option<f64>,
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
    /// How they were identified along w_{∗,1+2}: "side_peak" or "cut_3sigma"
    /// ([`DirectionOverlaps::classifier`]).
    pub mu_classifier: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
