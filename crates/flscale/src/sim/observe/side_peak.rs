//! The specialised neurons as a side peak of the overlap distribution (paper Fig. 7 and
//! App. E.2: the "red" neurons whose overlap with a parity direction is O(μ) rather than the
//! prior's O(σ₁/√d)).
//!
//! A fixed cut |ρ| > 3σ₁/√d lets in the prior's tail and weakly aligned neurons, whose number
//! grows with N and drags the mean magnitude down (the fig7 audit: μ exponent −0.07 against the
//! predicted 1/4). Here the magnitudes x = |ρ| are modelled as a two-component mixture
//!
//!   p(x) = (1 − π)·2φ(x/σ₀)/σ₀ + π·φ((x − μ)/s)/s,   x ≥ 0,
//!
//! a half-normal bulk (the Gaussian prior/NNGP overlap of an unspecialised neuron, folded) and
//! a normal side peak at μ, fitted by expectation–maximisation (Dempster, Laird & Rubin 1977;
//! McLachlan & Peel, *Finite Mixture Models* 2000, §2.8) on weighted values (a histogram's bin
//! centres and counts work as well as raw samples). The side peak is kept only when the
//! Bayesian information criterion (Schwarz 1978) prefers the mixture to the bulk alone and the
//! peak sits clear of the bulk (μ − 2s > 3σ₀); a neuron is specialised when its posterior
//! membership in the peak exceeds ½. The count M = π·(neurons) and the magnitude μ are
//! reported separately, so that M·μ² (which the engine pins) and μ (which the ReLU patterns
//! leave free) can be tested apart.

/// The fitted mixture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SidePeak {
    /// Weight π of the side peak (0 when there is none).
    pub fraction: f64,
    /// Its centre μ (None when there is no peak).
    pub mu: Option<f64>,
    /// Its standard deviation s.
    pub spread: Option<f64>,
    /// The bulk's half-normal scale σ₀.
    pub bulk_scale: f64,
    /// The magnitude above which a value is more likely in the peak than in the bulk.
    pub threshold: Option<f64>,
    /// EM iterations used.
    pub iterations: usize,
}

impl SidePeak {
    /// Whether a magnitude `x` belongs to the side peak (posterior membership > ½).
    pub fn is_specialised(&self, x: f64) -> bool {
        self.threshold.is_some_and(|t| x.abs() > t)
    }
}

const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

fn ln_half_normal(x: f64, s: f64) -> f64 {
    std::f64::consts::LN_2 - LN_SQRT_2PI - s.ln() - 0.5 * (x / s).powi(2)
}

fn ln_normal(x: f64, m: f64, s: f64) -> f64 {
    -LN_SQRT_2PI - s.ln() - 0.5 * ((x - m) / s).powi(2)
}

fn weighted_rms(v: &[(f64, f64)]) -> f64 {
    let (s2, w) = v
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, w)| (a + w * x * x, b + w));
    (s2 / w.max(f64::MIN_POSITIVE)).sqrt()
}

/// Fits the bulk-plus-side-peak mixture to weighted magnitudes `(x, weight)` (x is folded to
/// |x|; non-finite values and non-positive weights are ignored).
pub fn fit_side_peak(values: &[(f64, f64)]) -> SidePeak {
    let v: Vec<(f64, f64)> = values
        .iter()
        .filter(|(x, w)| x.is_finite() && w.is_finite() && *w > 0.0)
        .map(|&(x, w)| (x.abs(), w))
        .collect();
    let total: f64 = v.iter().map(|p| p.1).sum();
    let bulk_only = |bulk_scale: f64| SidePeak {
        fraction: 0.0,
        mu: None,
        spread: None,
        bulk_scale,
        threshold: None,
        iterations: 0,
    };
    let s_all = weighted_rms(&v);
    if total <= 0.0 || s_all <= 0.0 {
        return bulk_only(s_all);
    }
    // Start: the bulk from the weighted median (half-normal median = 0.6745 σ₀), the peak
    // from the values beyond 3σ₀ of that bulk.
    let mut sorted = v.clone();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut acc = 0.0;
    let median = sorted
        .iter()
        .find(|p| {
            acc += p.1;
            acc >= 0.5 * total
        })
        .map(|p| p.0)
        .unwrap_or(0.0);
    let mut s0 = (median / 0.674_489_750_196_081_7).max(1e-12 * s_all);
    let tail: Vec<(f64, f64)> = v.iter().copied().filter(|p| p.0 > 3.0 * s0).collect();
    let tail_w: f64 = tail.iter().map(|p| p.1).sum();
    if tail_w <= 0.0 {
        return bulk_only(weighted_rms(&v));
    }
    let mut mu = tail.iter().map(|p| p.0 * p.1).sum::<f64>() / tail_w;
    let mut s1 = (tail.iter().map(|p| p.1 * (p.0 - mu).powi(2)).sum::<f64>() / tail_w)
        .sqrt()
        .max(0.1 * s0);
    let mut pi = (tail_w / total).clamp(1e-6, 0.5);
    let mut ll_old = f64::NEG_INFINITY;
    let mut iterations = 0;
    let mut ll = f64::NEG_INFINITY;
    for it in 0..500 {
        iterations = it + 1;
        let (mut w1, mut m1, mut q1, mut w0, mut q0) = (0.0, 0.0, 0.0, 0.0, 0.0);
        ll = 0.0;
        for &(x, w) in &v {
            let a = (1.0 - pi).ln() + ln_half_normal(x, s0);
            let b = pi.ln() + ln_normal(x, mu, s1);
            let m = a.max(b);
            let lse = m + ((a - m).exp() + (b - m).exp()).ln();
            ll += w * lse;
            let r = (b - lse).exp();
            w1 += w * r;
            m1 += w * r * x;
            q1 += w * r * x * x;
            w0 += w * (1.0 - r);
            q0 += w * (1.0 - r) * x * x;
        }
        if w1 <= 1e-12 * total || w0 <= 1e-12 * total {
            return bulk_only(s_all);
        }
        pi = w1 / total;
        mu = m1 / w1;
        s1 = (q1 / w1 - mu * mu).max(1e-24).sqrt().max(1e-6 * s_all);
        s0 = (q0 / w0).sqrt().max(1e-12 * s_all);
        if (ll - ll_old).abs() <= 1e-10 * ll.abs().max(1.0) {
            break;
        }
        ll_old = ll;
    }
    // BIC with n = total weight: the mixture has 3 more parameters than the bulk alone.
    let ll_bulk: f64 = {
        let s = s_all;
        v.iter().map(|&(x, w)| w * ln_half_normal(x, s)).sum()
    };
    let bic_gain = 2.0 * (ll - ll_bulk) - 3.0 * total.ln();
    if bic_gain <= 0.0 || mu - 2.0 * s1 <= 3.0 * s0 {
        return SidePeak {
            iterations,
            ..bulk_only(s_all)
        };
    }
    SidePeak {
        fraction: pi,
        mu: Some(mu),
        spread: Some(s1),
        bulk_scale: s0,
        threshold: membership_threshold(pi, s0, mu, s1),
        iterations,
    }
}

/// The x in (0, μ) where the two weighted densities are equal (posterior ½), by bisection: the
/// bulk dominates at 0 and the peak at μ once the peak sits clear of the bulk.
fn membership_threshold(pi: f64, s0: f64, mu: f64, s1: f64) -> Option<f64> {
    let diff =
        |x: f64| (pi.ln() + ln_normal(x, mu, s1)) - ((1.0 - pi).ln() + ln_half_normal(x, s0));
    let (lo, hi) = (0.0, mu);
    if !(diff(lo) < 0.0 && diff(hi) > 0.0) {
        return None;
    }
    Some(crate::scalar::bisect(|m| diff(m) > 0.0, lo, hi, 0.0, 200))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, Normal};

    fn population(bulk: usize, s0: f64, peak: usize, mu: f64, s1: f64) -> Vec<(f64, bool)> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n0 = Normal::new(0.0, s0).unwrap();
        let n1 = Normal::new(mu, s1).unwrap();
        let mut v: Vec<(f64, bool)> = (0..bulk).map(|_| (n0.sample(&mut rng), false)).collect();
        // Signs of the specialised overlaps are random (±w*), as in the network.
        v.extend((0..peak).map(|k| {
            let x: f64 = n1.sample(&mut rng);
            (if k % 2 == 0 { x } else { -x }, true)
        }));
        v
    }

    #[test]
    fn a_separated_side_peak_recovers_the_known_membership() {
        let pop = population(4000, 0.2, 80, 1.5, 0.15);
        let values: Vec<(f64, f64)> = pop.iter().map(|p| (p.0, 1.0)).collect();
        let fit = fit_side_peak(&values);
        let wrong = pop
            .iter()
            .filter(|(x, member)| fit.is_specialised(*x) != *member)
            .count();
        assert_eq!(wrong, 0, "{fit:?}");
        assert!((fit.fraction * 4080.0 - 80.0).abs() < 2.0, "{fit:?}");
        assert!((fit.mu.unwrap() / 1.5 - 1.0).abs() < 0.03, "{fit:?}");
        assert!((fit.bulk_scale / 0.2 - 1.0).abs() < 0.05, "{fit:?}");
    }

    #[test]
    fn the_prior_alone_has_no_side_peak() {
        // 20 000 Gaussian overlaps: ≈ 54 of them beyond the 3σ cut, none specialised.
        let pop = population(20000, 0.2, 0, 1.0, 0.1);
        let beyond_cut = pop.iter().filter(|p| p.0.abs() > 0.6).count();
        assert!(beyond_cut > 20, "{beyond_cut}");
        let fit = fit_side_peak(&pop.iter().map(|p| (p.0, 1.0)).collect::<Vec<_>>());
        assert_eq!(fit.fraction, 0.0, "{fit:?}");
        assert!(fit.mu.is_none());
        assert!(!fit.is_specialised(0.9));
    }

    /// The fig7 failure of the fixed cut: as the bulk grows (N up at fixed peak), the 3σ cut's
    /// mean magnitude falls while the side peak's μ stays put.
    #[test]
    fn the_peak_magnitude_does_not_drift_with_the_bulk_like_the_cut_does() {
        let mut cut_mu = Vec::new();
        for bulk in [2000usize, 8000, 32000] {
            let pop = population(bulk, 0.2, 40, 1.2, 0.12);
            let fit = fit_side_peak(&pop.iter().map(|p| (p.0, 1.0)).collect::<Vec<_>>());
            assert!(
                (fit.mu.unwrap() / 1.2 - 1.0).abs() < 0.04,
                "{bulk}: {fit:?}"
            );
            assert!(
                (fit.fraction * (bulk + 40) as f64 - 40.0).abs() < 3.0,
                "{fit:?}"
            );
            let cut: Vec<f64> = pop.iter().map(|p| p.0.abs()).filter(|&x| x > 0.6).collect();
            cut_mu.push(cut.iter().sum::<f64>() / cut.len() as f64);
        }
        assert!(cut_mu[2] < 0.8 * cut_mu[0], "{cut_mu:?}");
    }

    #[test]
    fn binned_values_give_the_same_peak_as_raw_ones() {
        let pop = population(4000, 0.2, 80, 1.5, 0.15);
        let raw = fit_side_peak(&pop.iter().map(|p| (p.0, 1.0)).collect::<Vec<_>>());
        let width = 0.01;
        let mut bins = vec![0.0; 300];
        for p in &pop {
            let k = ((p.0.abs() / width) as usize).min(299);
            bins[k] += 1.0;
        }
        let binned: Vec<(f64, f64)> = bins
            .iter()
            .enumerate()
            .map(|(k, &c)| ((k as f64 + 0.5) * width, c))
            .collect();
        let b = fit_side_peak(&binned);
        assert!(
            (b.mu.unwrap() - raw.mu.unwrap()).abs() < 0.01,
            "{b:?} {raw:?}"
        );
        assert!((b.fraction - raw.fraction).abs() < 1e-3, "{b:?} {raw:?}");
        // Garbage in: nothing, no NaN.
        let g = fit_side_peak(&[(f64::NAN, 1.0), (1.0, -2.0)]);
        assert_eq!(g.fraction, 0.0);
        assert!(g.mu.is_none());
    }
}
