//! The tilted 1-D double well p(s) ∝ exp(−b(s² − 1)² + h s), whose profile, basin weights and
//! barrier follow by quadrature: through exact draws in each window and through a correlated
//! (Metropolis) chain in each window.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{double_well, rejection_draws, simpson};
use crate::free_energy::analysis::{analyse, AnalysisOptions, FreeEnergyReport, WindowSeries};
use crate::free_energy::profile::{barrier, BasinBins, Bins};
use crate::free_energy::Umbrella;

const B: f64 = 3.0;
const H: f64 = 0.5;

fn umbrella() -> Umbrella {
    Umbrella::spread(-1.6, 1.6, 13, 30.0).unwrap()
}

fn bins() -> Bins {
    Bins::new(-1.6, 1.6, 32).unwrap()
}

/// Quadrature: P(a < s < c) under the unbiased double well.
fn probability(a: f64, c: f64) -> f64 {
    let g = double_well(B, H);
    simpson(g, a.max(-4.0), c.min(4.0), 8000) / simpson(g, -4.0, 4.0, 8000)
}

/// Quadrature F of every bin: −ln(P(bin)/width).
fn exact_profile(bins: &Bins) -> Vec<f64> {
    (0..bins.count)
        .map(|i| {
            let lo = bins.lo + i as f64 * bins.width();
            -(probability(lo, lo + bins.width()) / bins.width()).ln()
        })
        .collect()
}

/// The report's basins as bins (their boundaries are bin centres), to put the quadrature F
/// through the same barrier definition.
fn basin_bins(r: &FreeEnergyReport, bins: &Bins) -> Vec<BasinBins> {
    let bin_of = |s: f64| ((s - bins.lo) / bins.width() - 0.5).round() as usize;
    let n = r.basins.len();
    r.basins
        .iter()
        .enumerate()
        .map(|(i, b)| BasinBins {
            first: if i == 0 { 0 } else { bin_of(b.lo) },
            last: if i + 1 == n {
                bins.count - 1
            } else {
                bin_of(b.hi)
            },
            min: bin_of(b.min_s),
        })
        .collect()
}

/// z-scores of the first basin's weight, the barrier and F on the bins of [−1.4, 1.4]
/// (outside, the windows rarely reach), after checking the basins' shape.
fn z_scores(r: &FreeEnergyReport) -> (f64, f64, Vec<f64>) {
    let bins = bins();
    assert_eq!(r.basins.len(), 2, "{:?}", r.basins);
    let split = r.basins[0].hi;
    // g′(s) = −12 s (s² − 1) + 0.5 = 0 near s = 0.042: the barrier top, where F is flat to
    // within 0.4 kT over ±0.25 (g″ = 12 there), so noise moves the split that far.
    assert!((split - 0.042).abs() < 0.25, "basins split at {split}");
    assert!((r.basins[0].weight + r.basins[1].weight - 1.0).abs() < 1e-12);
    let exact_w = probability(-4.0, split);
    let w = &r.basins[0];
    let z_w = (w.weight - exact_w) / w.weight_err.unwrap();
    let exact_f = exact_profile(&bins);
    let (_, exact_h, _) = barrier(&exact_f, &basin_bins(r, &bins), (0, 1));
    let h = r.barrier.as_ref().unwrap().height;
    let z_h = (h.value - exact_h) / h.err.unwrap();
    let z_f = (0..bins.count)
        .filter(|&i| bins.centre(i).abs() < 1.4)
        .map(|i| (r.profile.f[i].unwrap() - exact_f[i]) / r.profile.f_err[i].unwrap())
        .collect();
    (z_w, z_h, z_f)
}

#[test]
fn exact_draws_recover_the_quadrature_profile_weights_and_barrier_within_their_errors() {
    let g = double_well(B, H);
    let u = umbrella();
    let mut opts = AnalysisOptions::new(bins(), 0);
    opts.replicates = 100;
    let (mut zw, mut zh, mut zf) = (Vec::new(), Vec::new(), Vec::new());
    for seed in 0..4 {
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        let windows: Vec<WindowSeries> = u
            .centres
            .iter()
            .map(|&c| {
                let s = rejection_draws(g, c, u.kappa, 2000, &mut rng);
                WindowSeries {
                    observables: vec![s.iter().map(|x| f64::from(*x > 0.0)).collect()],
                    s,
                }
            })
            .collect();
        opts.seed = seed;
        let r = analyse(&u, &windows, &opts).unwrap();
        let (w, h, f) = z_scores(&r);
        assert!(r.basins[0].weight_err.unwrap() < 0.03, "{:?}", r.basins);
        // The observable 1[s > 0] averages to P(s > 0).
        let p = r.observables[0];
        assert!(
            (p.value - probability(0.0, 4.0)).abs() < 4.0 * p.err.unwrap(),
            "{p:?}"
        );
        zw.push(w);
        zh.push(h);
        zf.extend(f);
    }
    let rms = |z: &[f64]| (z.iter().map(|x| x * x).sum::<f64>() / z.len() as f64).sqrt();
    assert!(
        zw.iter().chain(&zh).all(|z| z.abs() < 3.5),
        "weight z {zw:?}, barrier z {zh:?}"
    );
    assert!(zf.iter().all(|z| z.abs() < 4.5), "F z-scores {zf:?}");
    // Errors neither too small nor absurdly large: over 4 seeds × 28 bins the rms z-score of F
    // is ≈ 1, and that of the weight and barrier stays O(1).
    assert!(rms(&zf) > 0.6 && rms(&zf) < 1.5, "rms z of F {}", rms(&zf));
    assert!(
        rms(&zw) > 0.15 && rms(&zw) < 2.0 && rms(&zh) < 2.0,
        "{zw:?} {zh:?}"
    );
}

/// A random-walk Metropolis chain on exp(g(s) − ½κ(s − c)²), one kept sample per step.
fn metropolis(c: f64, kappa: f64, n: usize, rng: &mut impl Rng) -> Vec<f64> {
    let g = double_well(B, H);
    let log_p = |s: f64| g(s) - 0.5 * kappa * (s - c) * (s - c);
    let mut s = c;
    let mut lp = log_p(s);
    let mut out = Vec::with_capacity(n);
    for t in 0..n + 1000 {
        let proposal = s + 0.2 * (2.0 * rng.random::<f64>() - 1.0);
        let lq = log_p(proposal);
        if rng.random::<f64>().ln() < lq - lp {
            s = proposal;
            lp = lq;
        }
        if t >= 1000 {
            out.push(s);
        }
    }
    out
}

#[test]
fn correlated_chains_recover_the_quadrature_weights_within_three_sigma() {
    let u = umbrella();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let windows: Vec<WindowSeries> = u
        .centres
        .iter()
        .map(|&c| WindowSeries {
            s: metropolis(c, u.kappa, 12_000, &mut rng),
            observables: vec![],
        })
        .collect();
    let mut opts = AnalysisOptions::new(bins(), 1);
    opts.replicates = 100;
    let r = analyse(&u, &windows, &opts).unwrap();
    assert!(
        r.diagnostics.tau.iter().all(|&t| t > 2.0),
        "the chains should be correlated: τ = {:?}",
        r.diagnostics.tau
    );
    let (zw, zh, _) = z_scores(&r);
    assert!(
        zw.abs() < 3.0 && zh.abs() < 3.0,
        "weight z {zw}, barrier z {zh}: {:?}",
        r.basins
    );
    assert!(
        r.basins[0].weight_err.unwrap() < 0.05,
        "{:?}, τ = {:?}",
        r.basins,
        r.diagnostics.tau
    );
}
