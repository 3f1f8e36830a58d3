//! MBAR against closed forms (Gaussian windows), against pymbar on a fixed data set, and its
//! refusals.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::free_energy::analysis::{analyse, AnalysisOptions, WindowSeries};
use crate::free_energy::mbar::{Mbar, MbarOptions, ReducedEnergies};
use crate::free_energy::profile::Bins;
use crate::free_energy::{FreeEnergyError, Umbrella};

/// Unbiased N(μ0, σ0²) under window k's bias ½κ(s − c_k)² (β = 1) is Gaussian with precision
/// λ = 1/σ0² + κ and mean (μ0/σ0² + κ c_k)/λ; its free energy relative to the unbiased state is
/// f_k = ½ ln(1 + κσ0²) + κ(c_k − μ0)²/(2(1 + κσ0²)).
struct GaussianWindows {
    mu0: f64,
    sd0: f64,
    umbrella: Umbrella,
}

impl GaussianWindows {
    fn draws(&self, n: usize, seed: u64) -> Vec<WindowSeries> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let lambda = 1.0 / self.sd0.powi(2) + self.umbrella.kappa;
        self.umbrella
            .centres
            .iter()
            .map(|c| {
                let m = (self.mu0 / self.sd0.powi(2) + self.umbrella.kappa * c) / lambda;
                let s: Vec<f64> = (0..n)
                    .map(|_| {
                        let z: f64 = StandardNormal.sample(&mut rng);
                        m + z / lambda.sqrt()
                    })
                    .collect();
                WindowSeries {
                    observables: vec![s.clone()],
                    s,
                }
            })
            .collect()
    }

    fn exact_f(&self, c: f64) -> f64 {
        let a = 1.0 + self.umbrella.kappa * self.sd0.powi(2);
        0.5 * a.ln() + self.umbrella.kappa * (c - self.mu0).powi(2) / (2.0 * a)
    }
}

#[test]
fn gaussian_windows_give_closed_form_free_energies_and_profile_within_errors() {
    let g = GaussianWindows {
        mu0: 0.3,
        sd0: 0.8,
        umbrella: Umbrella::spread(-2.0, 2.0, 9, 6.0).unwrap(),
    };
    let windows = g.draws(1500, 11);
    let mut opts = AnalysisOptions::new(Bins::new(-2.0, 2.0, 20).unwrap(), 3);
    opts.replicates = 100;
    let r = analyse(&g.umbrella, &windows, &opts).unwrap();
    let f0 = g.exact_f(g.umbrella.centres[0]);
    for (k, &c) in g.umbrella.centres.iter().enumerate().skip(1) {
        let want = g.exact_f(c) - f0;
        let (got, err) = (r.diagnostics.f_k[k], r.diagnostics.f_k_err[k].unwrap());
        assert!(
            (got - want).abs() < 4.0 * err,
            "f_{k}: {got} ± {err}, exact {want}"
        );
        assert!(
            err < 0.1,
            "f_{k} error {err} is too large for 1500 exact samples a window"
        );
    }
    // F(s) = −ln of the N(μ0, σ0²) density averaged over each bin.
    let bins = opts.bins;
    let mut z2 = Vec::new();
    for (i, (f, e)) in r.profile.f.iter().zip(&r.profile.f_err).enumerate() {
        let (lo, hi) = (
            bins.lo + i as f64 * bins.width(),
            bins.lo + (i + 1) as f64 * bins.width(),
        );
        let cdf = |x: f64| 0.5 * libm::erfc(-(x - g.mu0) / (g.sd0 * 2f64.sqrt()));
        let want = -((cdf(hi) - cdf(lo)) / bins.width()).ln();
        let (f, e) = (f.unwrap(), e.unwrap());
        z2.push(((f - want) / e).powi(2));
        assert!(
            (f - want).abs() < 4.0 * e,
            "bin {i}: F = {f} ± {e}, exact {want}"
        );
    }
    let rms = (z2.iter().sum::<f64>() / z2.len() as f64).sqrt();
    assert!(
        rms > 0.4 && rms < 1.6,
        "rms z-score of F over the bins {rms}: errors mis-sized"
    );
    assert_eq!(r.basins.len(), 1, "{:?}", r.basins);
    let mean = r.observables[0];
    assert!(
        (mean.value - g.mu0).abs() < 4.0 * mean.err.unwrap(),
        "{mean:?}"
    );
    assert!(r.diagnostics.neighbour_overlap.iter().all(|&o| o > 0.03));
}

/// pymbar 4.0.3 on the same data, made by (u_kn, N_k as below):
/// `MBAR(u_kn, N_k, solver_protocol="robust").f_k`, `compute_perturbed_free_energies(
/// vstack([u_kn[0], zeros(N)]))["Delta_f"][0, 1]`, `compute_overlap()["matrix"]` and
/// `compute_effective_sample_number()`.
#[test]
fn free_energies_overlap_and_ess_match_pymbar_on_a_fixed_data_set() {
    let c = [-0.6, -0.2, 0.2, 0.6];
    let kappa = 8.0;
    let counts = vec![20, 25, 30, 15];
    let mut u = Vec::new();
    for (k, &n) in counts.iter().enumerate() {
        for i in 0..n {
            let (i, kf) = (i as f64, k as f64);
            let s = c[k] + 0.4 * (1.7 * i + 0.3 * kf).sin() + 0.1 * (3.1 * i).cos();
            u.extend(c.iter().map(|ck| 0.5 * kappa * (s - ck) * (s - ck)));
        }
    }
    let e = ReducedEnergies::new(counts, u).unwrap();
    let m = Mbar::solve(&e, &MbarOptions::default()).unwrap();
    let f_k = [
        0.0,
        -0.1297474336206217,
        -0.15151827779299376,
        -0.05682172018238596,
    ];
    for (got, want) in m.f.iter().zip(f_k) {
        assert!((got - want).abs() < 1e-8, "{:?} vs pymbar {f_k:?}", m.f);
    }
    // Newton with backtracking alone, from far off, reaches the same solution.
    let far = MbarOptions {
        initial: Some(vec![0.0, 30.0, -30.0, 10.0]),
        self_consistent_iterations: 0,
        ..MbarOptions::default()
    };
    let from_far = Mbar::solve(&e, &far).unwrap();
    for (got, want) in from_far.f.iter().zip(f_k) {
        assert!(
            (got - want).abs() < 1e-8,
            "{:?} vs pymbar {f_k:?}",
            from_far.f
        );
    }
    let (f_unbiased, _) = m.target(&vec![0.0; e.samples()]);
    assert!(
        (f_unbiased - -1.070273097218378).abs() < 1e-8,
        "{f_unbiased}"
    );
    let o = m.overlap_matrix(&e);
    let o_pymbar = [
        [
            0.5207078912971087,
            0.330258306727197,
            0.13427093673442042,
            0.01476286524127392,
        ],
        [
            0.2642066453817576,
            0.361246853125106,
            0.30515447130685514,
            0.06939203018628119,
        ],
        [
            0.08951395782294695,
            0.2542953927557126,
            0.4442785812304859,
            0.2119120681908545,
        ],
        [
            0.01968382032169855,
            0.115653383643802,
            0.423824136381709,
            0.4408386596527906,
        ],
    ];
    for i in 0..4 {
        for j in 0..4 {
            assert!(
                (o[i][j] - o_pymbar[i][j]).abs() < 1e-8,
                "O[{i}][{j}] = {} vs {}",
                o[i][j],
                o_pymbar[i][j]
            );
        }
    }
    let ess = [
        38.409250818494485,
        69.20475509676496,
        67.52519988001941,
        34.02605391236369,
    ];
    for (got, want) in m.kish_ess(&e).iter().zip(ess) {
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }
}

#[test]
fn windows_that_share_no_samples_are_refused_by_name() {
    let g = GaussianWindows {
        mu0: 0.0,
        sd0: 1.0,
        umbrella: Umbrella::new(vec![-4.0, -3.6, 4.0], 200.0).unwrap(),
    };
    let windows = g.draws(300, 1);
    let opts = AnalysisOptions::new(Bins::new(-5.0, 5.0, 20).unwrap(), 1);
    match analyse(&g.umbrella, &windows, &opts) {
        Err(FreeEnergyError::Disconnected { groups }) => {
            assert_eq!(groups, vec![vec![0, 1], vec![2]])
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn neighbours_below_the_overlap_threshold_are_refused_by_name() {
    // Window sd 1/√(κ + 1) ≈ 0.24: windows 0–1 are 0.2 apart (good overlap), 1–2 are 1.4 apart
    // (about 5.4 sd between their means: they share a few samples, far below 0.03).
    let g = GaussianWindows {
        mu0: 0.0,
        sd0: 1.0,
        umbrella: Umbrella::new(vec![-0.6, -0.4, 1.0], 16.0).unwrap(),
    };
    let windows = g.draws(2000, 2);
    let opts = AnalysisOptions::new(Bins::new(-2.0, 2.0, 20).unwrap(), 1);
    let err = analyse(&g.umbrella, &windows, &opts).unwrap_err();
    match &err {
        FreeEnergyError::PoorOverlap { pairs, threshold } => {
            assert_eq!(pairs.len(), 1, "{pairs:?}");
            assert_eq!((pairs[0].0, pairs[0].1), (1, 2));
            assert!(pairs[0].2 < 0.03 && pairs[0].2 > 0.0 && *threshold == 0.03);
        }
        other => panic!("expected PoorOverlap, got {other:?}"),
    }
    assert!(err.to_string().contains("windows 1–2"), "{err}");
    assert_eq!(crate::Error::from(err).exit_code(), 1);
}

#[test]
fn malformed_energies_are_bad_input() {
    assert!(matches!(
        ReducedEnergies::new(vec![1, 0], vec![0.0; 2]),
        Err(FreeEnergyError::InvalidInput(_))
    ));
    assert!(matches!(
        ReducedEnergies::new(vec![2], vec![0.0; 3]),
        Err(FreeEnergyError::InvalidInput(_))
    ));
    assert!(matches!(
        ReducedEnergies::new(vec![1], vec![f64::NAN]),
        Err(FreeEnergyError::InvalidInput(_))
    ));
    assert!(matches!(
        ReducedEnergies::new(vec![1, 1], vec![f64::INFINITY, 0.0, 0.0, 0.0]),
        Err(FreeEnergyError::InvalidInput(_))
    ));
    let e = FreeEnergyError::InvalidInput("x".into());
    assert_eq!(crate::Error::from(e).exit_code(), 2);
}
