//! Per-chain running sums of the probe ([`crate::sim::observe::overlaps`]) and their
//! combination over chains into the run's [`ProbeSummary`] and named histograms.
//!
//! **Specialised neurons along a parity direction** (paper App. E.2, Fig. 7: "neurons classified
//! as specializing appearing in red"; μ-specialisation, μ ∝ (N/d)^{1/4}). Every chain keeps a
//! fine histogram of |ρ^u| (counts and Σ|ρ^u| per bin, [`SIDE_PEAK_BINS`] bins on
//! [0, direction_range], values beyond in one overflow cell). The chains' histograms are pooled
//! and the bulk-plus-side-peak mixture of [`crate::sim::observe::side_peak`] is fitted to them;
//! when it resolves a side peak, a neuron is specialised when |ρ^u| lies above the mixture's
//! membership threshold (rounded to the nearest bin edge, the threshold reported), M is their
//! number per network and μ their mean |ρ^u| (per chain, pooled over its samples, then averaged
//! over the chains that have any). When the BIC prefers the bulk alone (no side peak), the
//! first-layer rule of App. F.0.1, |ρ^u| > 3σ1/√d, is the documented fallback. The rule used is
//! reported per direction (`classifier`: "side_peak" or "cut_3sigma", with its `threshold`). The
//! fixed cut lets in the prior's tail and weakly aligned neurons whose number grows with N and
//! drags μ down (as the fig7 runs show); the side peak does not.

use crate::sim::model::fcn::FcnModel;
use crate::sim::num::real::Real;
use crate::sim::observe::observables::{finite, mean_and_error};
use crate::sim::observe::overlaps::{
    DirectionOverlaps, FeatureOverlaps, LayerOverlaps, NamedHistogram, Probe, ProbeSample,
    ProbeSummary, FEATURES, OVERLAP_HIST_BINS,
};
use crate::sim::observe::side_peak::fit_side_peak;

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

/// Bins of the per-chain |ρ^u| histograms fitted by the side-peak classifier (module docs).
pub const SIDE_PEAK_BINS: usize = 400;

/// "side_peak": the specialised neurons are the side peak of the |ρ^u| distribution.
pub const CLASSIFIER_SIDE_PEAK: &str = "side_peak";
/// "cut_3sigma": no side peak resolved; the fallback |ρ^u| > 3σ1/√d.
pub const CLASSIFIER_CUT: &str = "cut_3sigma";

/// A histogram of magnitudes on [0, range] with the sum of the values per bin, so that the
/// count and mean magnitude above any bin edge are exact.
#[derive(Debug, Clone, PartialEq)]
struct MagnitudeHist {
    width: f64,
    counts: Vec<f64>,
    sums: Vec<f64>,
    /// Count and Σ of the values beyond the range.
    overflow: [f64; 2],
}

impl MagnitudeHist {
    fn new(range: f64) -> MagnitudeHist {
        MagnitudeHist {
            width: range / SIDE_PEAK_BINS as f64,
            counts: vec![0.0; SIDE_PEAK_BINS],
            sums: vec![0.0; SIDE_PEAK_BINS],
            overflow: [0.0; 2],
        }
    }

    fn add(&mut self, x: f64) {
        let x = x.abs();
        if !x.is_finite() {
            return;
        }
        let k = (x / self.width) as usize;
        if k < SIDE_PEAK_BINS {
            self.counts[k] += 1.0;
            self.sums[k] += x;
        } else {
            self.overflow[0] += 1.0;
            self.overflow[1] += x;
        }
    }

    /// Count and Σ|ρ| of the values in bins `first..` and the overflow.
    fn above(&self, first: usize) -> (f64, f64) {
        let first = first.min(SIDE_PEAK_BINS);
        (
            self.counts[first..].iter().sum::<f64>() + self.overflow[0],
            self.sums[first..].iter().sum::<f64>() + self.overflow[1],
        )
    }
}

/// The rule that classifies the neurons along one direction as specialised (module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
enum SpecialisedRule {
    /// |ρ| in bins from this index on (the side peak's threshold on the bin grid).
    SidePeak(usize),
    /// |ρ| > 3σ1/√d.
    Cut,
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
    /// [direction]: |ρ| histogram for the side-peak classifier.
    direction_magnitudes: Vec<MagnitudeHist>,
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
            direction_magnitudes: vec![
                MagnitudeHist::new(probe.direction_range);
                probe.directions.len()
            ],
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
            let magnitudes = &mut self.direction_magnitudes[u];
            for &r in rho {
                if r.abs() > probe.direction_threshold {
                    sums[1] += 1.0;
                    sums[2] += r.abs();
                }
                magnitudes.add(r);
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

    /// This chain's specialised neurons along direction `u` under `rule`: their number summed
    /// over samples and Σ|ρ^u|.
    fn specialised(&self, u: usize, rule: SpecialisedRule) -> (f64, f64) {
        match rule {
            SpecialisedRule::SidePeak(first) => self.direction_magnitudes[u].above(first),
            SpecialisedRule::Cut => (self.direction_sums[u][1], self.direction_sums[u][2]),
        }
    }

    /// μ of this chain along direction `u` under the run's classification `dir` (from
    /// [`summarise`]): mean |ρ^u| of its specialised neurons over all samples (None when it
    /// has none).
    pub fn mu(&self, u: usize, dir: &DirectionOverlaps) -> Option<f64> {
        if u >= self.direction_sums.len() {
            return None;
        }
        let (count, sum) = self.specialised(u, rule_of(dir, &self.direction_magnitudes[u]));
        (count > 0.0).then(|| sum / count)
    }
}

fn chain_stat(values: &[f64]) -> (Option<f64>, Option<f64>) {
    if values.is_empty() {
        return (None, None);
    }
    let (m, e) = mean_and_error(values);
    (finite(m), e.and_then(finite))
}

/// The rule of a direction's reported classification, on the bin grid of `h`.
fn rule_of(dir: &DirectionOverlaps, h: &MagnitudeHist) -> SpecialisedRule {
    match (dir.classifier.as_str(), dir.threshold) {
        (CLASSIFIER_SIDE_PEAK, Some(t)) => {
            SpecialisedRule::SidePeak((t / h.width).round() as usize)
        }
        _ => SpecialisedRule::Cut,
    }
}

/// Classifies the neurons along direction `u` by the side peak of the chains' pooled |ρ^u|
/// histogram, or by the 3σ1/√d cut when there is none (module docs), and reduces M, μ and
/// R^u over the chains `used`.
fn direction_overlaps(
    probe: &Probe,
    used: &[&ProbeAccumulator],
    u: usize,
    name: &str,
) -> DirectionOverlaps {
    let per_chain = |f: &dyn Fn(&ProbeAccumulator) -> f64| -> Vec<f64> {
        used.iter().map(|a| f(a) / a.samples as f64).collect()
    };
    let (r2, _) = chain_stat(&per_chain(&|a| a.direction_sums[u][0]));
    let mut pooled = MagnitudeHist::new(probe.direction_range);
    for a in used {
        let h = &a.direction_magnitudes[u];
        for k in 0..SIDE_PEAK_BINS {
            pooled.counts[k] += h.counts[k];
            pooled.sums[k] += h.sums[k];
        }
        pooled.overflow[0] += h.overflow[0];
        pooled.overflow[1] += h.overflow[1];
    }
    // Bin centres with their counts, the overflow as one point at its mean.
    let mut values: Vec<(f64, f64)> = (0..SIDE_PEAK_BINS)
        .map(|k| ((k as f64 + 0.5) * pooled.width, pooled.counts[k]))
        .collect();
    if pooled.overflow[0] > 0.0 {
        values.push((pooled.overflow[1] / pooled.overflow[0], pooled.overflow[0]));
    }
    let peak = fit_side_peak(&values);
    let (rule, classifier, threshold) = match peak.threshold {
        Some(t) => {
            let first = (t / pooled.width).round() as usize;
            let edge = first as f64 * pooled.width;
            (SpecialisedRule::SidePeak(first), CLASSIFIER_SIDE_PEAK, edge)
        }
        None => (
            SpecialisedRule::Cut,
            CLASSIFIER_CUT,
            probe.direction_threshold,
        ),
    };
    let (sp, sp_err) = chain_stat(&per_chain(&|a| a.specialised(u, rule).0));
    let mus: Vec<f64> = used
        .iter()
        .filter_map(|a| {
            let (count, sum) = a.specialised(u, rule);
            (count > 0.0).then(|| sum / count)
        })
        .collect();
    let (mu, mu_err) = chain_stat(&mus);
    DirectionOverlaps {
        direction: name.to_string(),
        r_overlap2: r2,
        specialising: sp,
        specialising_err: sp_err,
        mu,
        mu_err,
        chains_with_specialists: mus.len(),
        classifier: classifier.to_string(),
        threshold: finite(threshold),
        side_peak_fraction: peak.mu.map(|_| peak.fraction).and_then(finite),
        bulk_scale: peak.mu.map(|_| peak.bulk_scale).and_then(finite),
    }
}

/// Per layer ≥ 2 and feature (Φ*, Ĥe3(Φ*)): the mean squared overlap, the outliers beyond
/// 3 analytic NNGP standard deviations (App. F.1), and the pooled histogram (added to `hists`).
fn deeper_layer_overlaps(
    probe: &Probe,
    model: &FcnModel,
    used: &[&ProbeAccumulator],
    hists: &mut Vec<NamedHistogram>,
) -> Vec<LayerOverlaps> {
    let per_chain = |f: &dyn Fn(&ProbeAccumulator) -> f64| -> Vec<f64> {
        used.iter().map(|a| f(a) / a.samples as f64).collect()
    };
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
                    measure: if l == 0 && probe.layer2_population.is_some() {
                        "gaussian"
                    } else {
                        "test_set"
                    }
                    .to_string(),
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
    deeper_layers
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
    let deeper_layers = deeper_layer_overlaps(probe, model, &used, &mut hists);
    let parity_directions: Vec<DirectionOverlaps> = probe
        .directions
        .iter()
        .enumerate()
        .map(|(u, (name, _))| direction_overlaps(probe, &used, u, name))
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
        mu_classifier: first_dir.map(|d| d.classifier.clone()),
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
    use crate::sim::{ExperimentConfig, Run};

    /// Without a resolved side peak (six values) μ is the mean |w·u| of the neurons beyond the
    /// fallback cut 3σ1/√d, pooled over a chain's samples.
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
            layer2_population: None,
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
        let (s, hists) = summarise(
            &probe,
            &FcnModel::test_two_layer(2, 3),
            std::slice::from_ref(&acc),
            &[0],
            &[],
            &y,
        );
        let dir = &s.parity_directions[0];
        assert_eq!(dir.classifier, CLASSIFIER_CUT, "{dir:?}");
        assert_eq!(s.mu_classifier.as_deref(), Some(CLASSIFIER_CUT));
        assert_eq!(dir.threshold, Some(0.5));
        assert_eq!(acc.mu(0, dir), Some(2.0)); // (2 + 1 + 3)/3
        assert_eq!(acc.mu(1, &s.parity_directions[1]), None);
        assert_eq!(s.mu, Some(2.0));
        assert_eq!(s.specialising, Some(1.5));
        // Accuracy: 3/4 then 3/4.
        assert_eq!(s.test_accuracy, Some(0.75));
        assert_eq!(s.parity_directions[1].chains_with_specialists, 0);
        assert_eq!(hists[0].name, "rho_e1+e2");
    }

    /// A synthetic ensemble along one direction (d = 20, σ1 = 1, so the bulk is 𝒩(0, 1/20)):
    /// `chains` networks of `width` neurons, `samples` sampling times, of which `m` neurons
    /// per sample have |ρ| ~ 𝒩(μ, s²) with random signs.
    fn synthetic(
        chains: usize,
        samples: usize,
        width: usize,
        m: usize,
        mu: f64,
        s: f64,
    ) -> (Probe, Vec<ProbeAccumulator>) {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let d = 20;
        let sigma0 = 1.0 / (d as f64).sqrt();
        let probe = Probe {
            features: Vec::new(),
            nngp_std: Vec::new(),
            ranges: Vec::new(),
            directions: parity_directions(1, d),
            direction_threshold: 3.0 * sigma0,
            direction_range: crate::sim::observe::observables::hist_range(1.0, d),
            classification: false,
            layer2_population: None,
        };
        let bulk = Normal::new(0.0, sigma0).unwrap();
        let peak = Normal::new(mu, s).unwrap();
        let accs = (0..chains)
            .map(|c| {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(100 + c as u64);
                let mut acc = ProbeAccumulator::new(&probe);
                for _ in 0..samples {
                    let rho: Vec<f64> = (0..width)
                        .map(|i| {
                            if i < m {
                                let x: f64 = peak.sample(&mut rng);
                                if i % 2 == 0 {
                                    x
                                } else {
                                    -x
                                }
                            } else {
                                bulk.sample(&mut rng)
                            }
                        })
                        .collect();
                    let sample = ProbeSample {
                        layers: Vec::new(),
                        directions: vec![rho],
                    };
                    acc.add::<f64>(&probe, &[], &[], &sample);
                }
                acc
            })
            .collect();
        (probe, accs)
    }

    fn summarise_synthetic(probe: &Probe, accs: &[ProbeAccumulator]) -> DirectionOverlaps {
        let alive: Vec<usize> = (0..accs.len()).collect();
        let model = FcnModel::test_two_layer(20, 200);
        let (s, _) = summarise(probe, &model, accs, &alive, &[], &[]);
        s.parity_directions[0].clone()
    }

    /// The side peak of a known population: 4 specialised neurons per network at |ρ| ~
    /// 𝒩(1.2, 0.1²) among 196 bulk neurons 𝒩(0, 1/20). M = 4 and μ = 1.2 are recovered within
    /// their Monte Carlo error (μ: 0.1/√3200 ≈ 0.002 over the 3200 specialised values; M: the
    /// bulk beyond the threshold ≈ 0.9 is 196·P(|z| > 4) ≈ 0.01 per network), where the
    /// 3σ1/√d cut counts ≈ 196·0.0027 ≈ 0.5 prior-tail neurons more and drags μ down.
    #[test]
    fn the_side_peak_recovers_the_known_count_and_magnitude() {
        let (probe, accs) = synthetic(40, 20, 200, 4, 1.2, 0.1);
        let dir = summarise_synthetic(&probe, &accs);
        assert_eq!(dir.classifier, CLASSIFIER_SIDE_PEAK, "{dir:?}");
        let m = dir.specialising.unwrap();
        assert!((m - 4.0).abs() < 0.05, "M {m}: {dir:?}");
        let mu = dir.mu.unwrap();
        assert!((mu - 1.2).abs() < 0.01, "μ {mu}: {dir:?}");
        assert!((dir.side_peak_fraction.unwrap() - 0.02).abs() < 0.001);
        assert!((dir.bulk_scale.unwrap() / (1.0 / 20f64.sqrt()) - 1.0).abs() < 0.02);
        let t = dir.threshold.unwrap();
        assert!(t > probe.direction_threshold && t < 1.2 - 2.0 * 0.1, "{t}");
        assert_eq!(dir.chains_with_specialists, 40);
        // Per chain: the same classification.
        let per_chain: f64 = accs.iter().map(|a| a.mu(0, &dir).unwrap()).sum::<f64>() / 40.0;
        assert!((per_chain - mu).abs() < 1e-12);
        // The fixed cut on the same ensemble: the prior's tail inflates M and lowers μ.
        let cut: f64 = accs.iter().map(|a| a.direction_sums[0][1]).sum::<f64>() / 800.0;
        assert!(cut - 4.0 > 0.3, "cut count {cut}");
    }

    /// A pure bulk has no side peak: the classifier says so and the 3σ1/√d cut is used.
    #[test]
    fn a_pure_bulk_has_no_side_peak_and_falls_back_to_the_cut() {
        let (probe, accs) = synthetic(40, 20, 200, 0, 1.2, 0.1);
        let dir = summarise_synthetic(&probe, &accs);
        assert_eq!(dir.classifier, CLASSIFIER_CUT, "{dir:?}");
        assert_eq!(dir.threshold, Some(probe.direction_threshold));
        assert_eq!(dir.side_peak_fraction, None);
        // The cut's count: 200·P(|z| > 3) = 0.54 per network.
        let m = dir.specialising.unwrap();
        assert!((m - 0.54).abs() < 0.1, "{m}");
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
            Run::new(&cfg).run().unwrap().summary.probe
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
