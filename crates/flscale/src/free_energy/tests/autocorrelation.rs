//! Autocorrelation-aware errors against the AR(1) closed forms.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::free_energy::analysis::{analyse, AnalysisOptions, WindowSeries};
use crate::free_energy::autocorr::{block_length, integrated_time, moving_blocks};
use crate::free_energy::profile::Bins;
use crate::free_energy::Umbrella;

/// x_t = ρ x_{t−1} + √(1 − ρ²) ε_t: stationary variance 1, τ = (1 + ρ)/(1 − ρ).
fn ar1(rho: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x: f64 = StandardNormal.sample(&mut rng);
    (0..n)
        .map(|_| {
            let e: f64 = StandardNormal.sample(&mut rng);
            x = rho * x + (1.0 - rho * rho).sqrt() * e;
            x
        })
        .collect()
}

/// Var(mean of n) of the AR(1) chain: (1/n)[τ − 2ρ(1 − ρⁿ)/(n(1 − ρ)²)].
fn ar1_error_of_mean(rho: f64, n: usize) -> f64 {
    let nf = n as f64;
    let tau = (1.0 + rho) / (1.0 - rho);
    ((tau - 2.0 * rho * (1.0 - rho.powi(n as i32)) / (nf * (1.0 - rho).powi(2))) / nf).sqrt()
}

#[test]
fn geyer_time_of_ar1_chains_matches_the_closed_form() {
    for (rho, seed) in [(0.0, 1), (0.5, 2), (0.8, 3), (0.95, 4)] {
        let tau = integrated_time(&ar1(rho, 100_000, seed)).unwrap();
        let want = (1.0 + rho) / (1.0 - rho);
        assert!(
            (tau / want - 1.0).abs() < 0.15,
            "ρ = {rho}: τ = {tau}, exact {want}"
        );
    }
    assert_eq!(integrated_time(&[2.0; 50]), None);
    assert_eq!(integrated_time(&[1.0, 2.0, 3.0]), None);
}

#[test]
fn moving_blocks_cover_the_series_with_whole_blocks() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let idx = moving_blocks(10, 4, &mut rng);
    assert_eq!(idx.len(), 10);
    assert!(idx.iter().all(|&i| i < 10));
    for chunk in idx.chunks(4) {
        assert!(chunk.windows(2).all(|p| p[1] == p[0] + 1), "{idx:?}");
    }
    assert_eq!(block_length(9.0, 3.0, 1000), 27);
    assert_eq!(block_length(9.0, 3.0, 10), 10);
    assert_eq!(block_length(f64::NAN, 3.0, 10), 1);
}

#[test]
fn block_bootstrap_error_of_an_ar1_mean_matches_the_closed_form() {
    let (rho, n) = (0.8, 40_000);
    let x = ar1(rho, n, 9);
    // One window with a negligible bias: the analysis reduces to a plain average whose
    // bootstrap error must be the AR(1) one, not the naive σ/√n (3× smaller).
    let u = Umbrella::new(vec![0.0], 1e-9).unwrap();
    let windows = [WindowSeries {
        s: x.clone(),
        observables: vec![x],
    }];
    let mut opts = AnalysisOptions::new(Bins::new(-4.0, 4.0, 16).unwrap(), 2);
    opts.replicates = 300;
    let r = analyse(&u, &windows, &opts).unwrap();
    let got = r.observables[0].err.unwrap();
    let want = ar1_error_of_mean(rho, n);
    assert!(
        (got / want - 1.0).abs() < 0.25,
        "bootstrap error {got}, AR(1) closed form {want}"
    );
    let tau = r.diagnostics.tau[0];
    assert!((tau / 9.0 - 1.0).abs() < 0.15, "τ = {tau}");
    // Same seed, same numbers.
    assert_eq!(analyse(&u, &windows, &opts).unwrap(), r);
}
