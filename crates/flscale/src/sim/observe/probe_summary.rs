//! Per-chain running sums of the probe ([`crate::sim::observe::overlaps`]) and their
//! combination over chains into the run's [`ProbeSummary`] and named histograms.

use crate::sim::model::fcn::FcnModel;
use crate::sim::num::real::Real;
use crate::sim::observe::observables::{finite, mean_and_error};
use crate::sim::observe::overlaps::{
    DirectionOverlaps, FeatureOverlaps, LayerOverlaps, NamedHistogram, Probe, ProbeSample,
    ProbeSummary, FEATURES, OVERLAP_HIST_BINS,
};

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
    pub(crate) fn new(range: f64) -> Hist {
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
    use crate::sim::model::fcn::FcnModel;
    use crate::sim::observe::overlaps::parity_directions;
    use crate::sim::{run_experiment, ExperimentConfig};

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
