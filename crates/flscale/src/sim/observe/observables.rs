//! Observables measured on the fly and the equilibration diagnostics (spec 02,
//! "Observables"; paper §3, App. F.0.1; blog "R = E[ρ²]").
//!
//! Everything is accumulated *per chain* and combined only at the end over the chains that
//! did not diverge, so a chain that blows up late contributes nothing, and the combination
//! order (chain index) is fixed — the results do not depend on the thread count.

use serde::Serialize;

use crate::sim::num::real::Real;

/// Bins of the first-layer overlap histogram.
pub const HIST_BINS: usize = 120;

/// One chain's measurements at one sampling time.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// Global step.
    pub step: usize,
    /// A_f = ⟨f, y⟩/⟨y, y⟩ on the test set (paper §3).
    pub alignment: f64,
    /// mean (f − y)² on the test set.
    pub test_mse: f64,
    /// mean (f − y)² on the training set (at the last gradient evaluation); NaN-free: None
    /// when P = 0.
    pub train_mse: Option<f64>,
    /// U at the last gradient evaluation.
    pub energy: f64,
    /// Mean ρ_i² over first-layer neurons (R of the blog).
    pub r_overlap2: f64,
    /// Number of first-layer neurons with |ρ_i| > 3σ1/√d (App. F.0.1).
    pub outliers: usize,
}

/// Per-chain running sums.
#[derive(Debug, Clone)]
pub struct ChainAccumulator {
    /// Time series of the measurements after burn-in (and before, for traces).
    pub series: Vec<(bool, Measurement)>,
    /// Σ over samples of the test predictions.
    pub f_test_sum: Vec<f64>,
    /// Histogram of ρ_i over [−range, range].
    pub hist: Vec<u64>,
    /// Overlaps outside the histogram range.
    pub hist_outside: u64,
    /// Σ over samples of θ_g·∇_g U.
    pub virial_sum: Vec<f64>,
    /// Σ over samples and entries of θ, θ², θ⁴ per group.
    pub moments: Vec<[f64; 3]>,
    /// Number of samples after burn-in.
    pub samples: usize,
}

impl ChainAccumulator {
    /// Empty accumulator for `n_test` test points and `groups` parameter groups. Its size does
    /// not grow with d: the first-layer second moment is pooled over chains
    /// ([`crate::sim::observe::leading_direction`]).
    pub fn new(n_test: usize, groups: usize) -> Self {
        ChainAccumulator {
            series: Vec::new(),
            f_test_sum: vec![0.0; n_test],
            hist: vec![0; HIST_BINS],
            hist_outside: 0,
            virial_sum: vec![0.0; groups],
            moments: vec![[0.0; 3]; groups],
            samples: 0,
        }
    }
}

/// One chain's state at a sampling time, as [`ChainAccumulator::record`] reads it.
#[derive(Debug)]
pub struct ChainSnapshot<'a, T> {
    /// Test-set predictions f(x_μ).
    pub f_test: &'a [T],
    /// Overlaps ρ of the first-layer units with the teacher.
    pub rhos: &'a [f64],
    /// Per parameter group: its entries and the virial θ_g·∇_g U.
    pub groups: Vec<(&'a [T], f64)>,
    /// U at the last gradient evaluation.
    pub energy: f64,
    /// Training MSE at the last gradient evaluation (None when P = 0).
    pub train_mse: Option<f64>,
}

impl ChainAccumulator {
    /// Records a chain's measurement at step t — A_f = ⟨f, y⟩/⟨y, y⟩ (paper §3, `y_norm2` =
    /// ⟨y, y⟩), test MSE, R = mean ρ², outliers |ρ| > `threshold` (App. F.0.1) — and, after
    /// burn-in (`sampling`), the sums of the predictions, the ρ histogram over ±`range` and the
    /// per-group moments and virials.
    #[allow(clippy::too_many_arguments)]
    pub fn record<T: Real>(
        &mut self,
        chain: ChainSnapshot<'_, T>,
        y_test: &[f64],
        y_norm2: f64,
        threshold: f64,
        range: f64,
        sampling: bool,
        t: usize,
    ) {
        let (mut fy, mut sq) = (0.0, 0.0);
        for (fv, &yv) in chain.f_test.iter().zip(y_test) {
            let fv = fv.f64();
            fy += fv * yv;
            sq += (fv - yv).powi(2);
        }
        let rhos = chain.rhos;
        let r2 = rhos.iter().map(|r| r * r).sum::<f64>() / rhos.len().max(1) as f64;
        let outliers = rhos.iter().filter(|r| r.abs() > threshold).count();
        let m = Measurement {
            step: t,
            alignment: if y_norm2 > 0.0 { fy / y_norm2 } else { 0.0 },
            test_mse: sq / y_test.len() as f64,
            train_mse: chain.train_mse,
            energy: chain.energy,
            r_overlap2: r2,
            outliers,
        };
        self.series.push((sampling, m));
        if !sampling {
            return;
        }
        self.samples += 1;
        for (s, fv) in self.f_test_sum.iter_mut().zip(chain.f_test) {
            *s += fv.f64();
        }
        for &rho in rhos {
            let bin = ((rho + range) / (2.0 * range) * HIST_BINS as f64).floor();
            if bin >= 0.0 && bin < HIST_BINS as f64 {
                self.hist[bin as usize] += 1;
            } else {
                self.hist_outside += 1;
            }
        }
        for (g, (theta, virial)) in chain.groups.iter().enumerate() {
            self.virial_sum[g] += virial;
            let mut m = [0.0; 3];
            for v in theta.iter() {
                let v = v.f64();
                let v2 = v * v;
                m[0] += v;
                m[1] += v2;
                m[2] += v2 * v2;
            }
            for j in 0..3 {
                self.moments[g][j] += m[j];
            }
        }
    }
}

impl ChainAccumulator {
    /// Rao–Blackwellisation of the last [`ChainAccumulator::record`]: its alignment and (after
    /// burn-in) its contribution to the prediction sum are taken from `f_mean` = E[f | hidden
    /// weights] instead of the drawn predictions `f_drawn` it recorded. Both are linear in f,
    /// so their expectations are unchanged and their variance can only fall (Rao–Blackwell;
    /// Casella & Robert, *Rao–Blackwellisation of sampling schemes*, Biometrika 83 (1996) 81).
    /// The test MSE of one sample is not linear in f and stays with the draw.
    pub fn use_conditional_mean<T: Real>(
        &mut self,
        f_drawn: &[T],
        f_mean: &[T],
        y_test: &[f64],
        y_norm2: f64,
    ) {
        let Some((sampling, last)) = self.series.last_mut() else {
            return;
        };
        let fy: f64 = f_mean.iter().zip(y_test).map(|(f, y)| f.f64() * y).sum();
        last.alignment = if y_norm2 > 0.0 { fy / y_norm2 } else { 0.0 };
        if *sampling {
            for ((s, d), m) in self.f_test_sum.iter_mut().zip(f_drawn).zip(f_mean) {
                *s += m.f64() - d.f64();
            }
        }
    }
}

/// Histogram range for ρ: ±max(3σ₁, 8σ₁/√d) covers both the GP bulk (σ₁/√d) and specialised
/// neurons (|ρ| up to a few σ₁).
pub fn hist_range(sigma1: f64, d: usize) -> f64 {
    (3.0 * sigma1.sqrt()).max(8.0 * sigma1.sqrt() / (d as f64).sqrt())
}

/// Mean and standard error over chains of per-chain values.
pub fn mean_and_error(values: &[f64]) -> (f64, Option<f64>) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, None);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, Some((var / n).sqrt()))
}

/// Integrated autocorrelation time (in samples) of a set of equally long chains' series,
/// with Sokal's automatic window (stop at the first M ≥ 5τ(M)); each chain's mean is
/// subtracted and the autocovariances are averaged over chains. None if too short or
/// constant.
pub fn integrated_autocorrelation_time(series: &[Vec<f64>]) -> Option<f64> {
    let n = series.iter().map(Vec::len).min()?;
    if n < 4 || series.is_empty() {
        return None;
    }
    let centred: Vec<Vec<f64>> = series
        .iter()
        .map(|s| {
            let m = s[..n].iter().sum::<f64>() / n as f64;
            s[..n].iter().map(|v| v - m).collect()
        })
        .collect();
    let autocov = |lag: usize| -> f64 {
        centred
            .iter()
            .map(|s| (0..n - lag).map(|t| s[t] * s[t + lag]).sum::<f64>() / n as f64)
            .sum::<f64>()
            / centred.len() as f64
    };
    let c0 = autocov(0);
    if c0 <= 1e-300 {
        return None;
    }
    let mut tau = 1.0;
    for lag in 1..n {
        tau += 2.0 * autocov(lag) / c0;
        if lag as f64 >= 5.0 * tau {
            break;
        }
    }
    Some(tau.max(1.0).min(n as f64))
}

/// Turns a float into a JSON-safe value: None for NaN or ±∞, so that no results file ever
/// contains NaN (spec 02, "never write NaN").
pub fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Statistics of a parameter group over chains and samples.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroupStats {
    /// "layer1", …, "readout".
    pub group: String,
    /// Prior variance of one entry.
    pub prior_variance: Option<f64>,
    /// Mean of the entries.
    pub mean: Option<f64>,
    /// Mean of the squared entries (= the prior variance when P = 0).
    pub second_moment: Option<f64>,
    /// Mean of the fourth powers (3·variance² for the Gaussian prior).
    pub fourth_moment: Option<f64>,
    /// ⟨θ·∇U⟩/(#entries): the configurational temperature, ≈ T at equilibrium. Its expected
    /// value along the chain is T + η⟨|∇U|²⟩/(2·#entries) − Δ⟨|θ|²⟩/(2η·#entries) per step, so
    /// above T means step bias and below T (even negative) a group whose norm still grows;
    /// its per-sample noise is large where the data term is (docs/langevin.md, "The summary,
    /// field by field").
    pub temperature: Option<f64>,
    /// Standard error of `temperature`: the spread of the surviving chains' time averages
    /// over √chains (null with fewer than two chains).
    pub temperature_err: Option<f64>,
    /// Whether the group was frozen.
    pub frozen: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    #[test]
    fn iat_of_white_noise_is_one_and_of_ar1_matches_theory() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let white: Vec<Vec<f64>> = (0..8)
            .map(|_| (0..2000).map(|_| StandardNormal.sample(&mut rng)).collect())
            .collect();
        let tau = integrated_autocorrelation_time(&white).unwrap();
        assert!((tau - 1.0).abs() < 0.15, "{tau}");
        // AR(1) with coefficient a: τ = (1 + a)/(1 − a) = 9 for a = 0.8.
        let a: f64 = 0.8;
        let ar: Vec<Vec<f64>> = (0..8)
            .map(|_| {
                let mut v = 0.0;
                (0..4000)
                    .map(|_| {
                        let z: f64 = StandardNormal.sample(&mut rng);
                        v = a * v + (1.0 - a * a).sqrt() * z;
                        v
                    })
                    .collect()
            })
            .collect();
        let tau = integrated_autocorrelation_time(&ar).unwrap();
        assert!((tau - 9.0).abs() < 1.5, "{tau}");
        assert_eq!(integrated_autocorrelation_time(&[vec![1.0; 10]]), None);
    }

    #[test]
    fn finite_filters_nan_and_infinity() {
        assert_eq!(finite(f64::NAN), None);
        assert_eq!(finite(f64::INFINITY), None);
        assert_eq!(finite(1.5), Some(1.5));
        let (m, e) = mean_and_error(&[1.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((e.unwrap() - 1.0).abs() < 1e-12);
    }
}
