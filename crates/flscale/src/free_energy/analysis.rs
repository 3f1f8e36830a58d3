//! The whole analysis of a set of biased windows: MBAR, the overlap refusal, the profile, the
//! basins, the barrier and reweighted observables, each with a block-bootstrap standard error.
//!
//! Errors: each window's series is resampled in moving blocks of ⌈c·τ_k⌉ samples (τ_k Geyer's
//! integrated time of that window, the largest over s and the observables; c =
//! [`AnalysisOptions::block_factor`]), MBAR is re-solved on the resampled set and every output
//! recomputed; the standard error is the spread over replicates (Künsch, Ann. Stat. 17, 1217
//! (1989); the windows are independent runs, so they are resampled independently). Replicate r
//! draws from its own ChaCha stream (seed, r), so the numbers do not depend on the thread
//! count. These are within-run errors: a slow mode orthogonal to s that outlives the run is
//! not in them (spec 07), which only repeats with other seeds and starts can show.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;

use super::autocorr::{block_length, integrated_time, moving_blocks};
use super::mbar::{kish_ess_of, Mbar, MbarOptions, ReducedEnergies};
use super::overlap::{
    check_neighbours, neighbour_overlaps, order_by_centre, DEFAULT_OVERLAP_THRESHOLD,
};
use super::profile::{barrier, deepest_pair, split_basins, BasinBins, Bins, Tally};
use super::umbrella::Umbrella;
use super::FreeEnergyError;

/// One window's kept samples, in time order (every sample: no thinning).
#[derive(Debug, Clone, PartialEq)]
pub struct WindowSeries {
    /// The order parameter s of each sample.
    pub s: Vec<f64>,
    /// `observables[j][t]`: observable j (A_f, test MSE, …) at sample t; the same observables,
    /// in the same order, in every window.
    pub observables: Vec<Vec<f64>>,
}

/// Smallest barrier (in kT) that splits two basins, before the noise term: see
/// [`AnalysisOptions::prominence`].
pub const DEFAULT_PROMINENCE: f64 = 0.5;

/// Settings of [`analyse`].
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisOptions {
    /// 1/kT of the runs: the reduced bias is β V_k(s).
    pub beta: f64,
    /// Bins of the profile.
    pub bins: Bins,
    /// A barrier top splits two basins only if it rises above the higher of their minima by at
    /// least max(prominence, 2·√(σ_top² + σ_min²)) (σ the bootstrap errors of F at those bins),
    /// so neither a small wiggle nor noise splits a basin.
    pub prominence: f64,
    /// Neighbouring windows must overlap at least this much ([`DEFAULT_OVERLAP_THRESHOLD`]).
    pub overlap_threshold: f64,
    /// Bootstrap replicates (0: point estimates only, every error None).
    pub replicates: usize,
    /// Block length in units of each window's τ; ≳ 2 (see [`block_length`]).
    pub block_factor: f64,
    /// Seed of the bootstrap.
    pub seed: u64,
    /// MBAR solver settings.
    pub mbar: MbarOptions,
}

impl AnalysisOptions {
    /// The defaults: β = 1, prominence 0.5 kT, overlap threshold 0.03, 200 replicates, blocks of
    /// 3τ.
    pub fn new(bins: Bins, seed: u64) -> AnalysisOptions {
        AnalysisOptions {
            beta: 1.0,
            bins,
            prominence: DEFAULT_PROMINENCE,
            overlap_threshold: DEFAULT_OVERLAP_THRESHOLD,
            replicates: 200,
            block_factor: 3.0,
            seed,
            mbar: MbarOptions::default(),
        }
    }
}

/// A value with its standard error (None when the bootstrap could not give one).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// Point estimate.
    pub value: f64,
    /// Standard error.
    pub err: Option<f64>,
}

/// F(s) on the bins' centres; None where no sample fell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    /// Bin centres.
    pub s: Vec<f64>,
    /// F(s) = −ln p(s), p the unbiased probability density of s.
    #[serde(rename = "F")]
    pub f: Vec<Option<f64>>,
    /// Standard error of F.
    #[serde(rename = "F_err")]
    pub f_err: Vec<Option<f64>>,
}

/// One basin of F, in order of s.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Basin {
    /// Lower end in s (the profile's lo for the first basin; its weight also holds the
    /// samples below).
    pub lo: f64,
    /// Upper end in s (the profile's hi for the last basin, which also holds the samples above).
    pub hi: f64,
    /// s at the basin's minimum of F.
    pub min_s: f64,
    /// Probability of the basin.
    pub weight: f64,
    /// Its standard error.
    pub weight_err: Option<f64>,
    /// Each observable's reweighted average within the basin.
    pub observables: Vec<Estimate>,
}

/// The barrier between the two deepest basins (see [`super::profile::barrier`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Barrier {
    /// The two basins (indices into the basins, in order of s).
    pub basins: (usize, usize),
    /// s at the barrier top.
    pub top_s: f64,
    /// F_top − min(F_a, F_b), in kT.
    pub height: Estimate,
    /// F_top − max(F_a, F_b), in kT.
    pub height_from_shallower: Estimate,
}

/// What a user checks first (spec 07): MBAR's free energies, the overlap between windows,
/// effective sample sizes and autocorrelation times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostics {
    /// f_k in kT, gauge f_0 = 0.
    pub f_k: Vec<f64>,
    /// Standard errors of f_k.
    pub f_k_err: Vec<Option<f64>>,
    /// The overlap matrix, row-major.
    pub overlap: Vec<Vec<f64>>,
    /// The windows in order of s (of their centres for umbrella windows).
    pub order: Vec<usize>,
    /// min(O[a][b], O[b][a]) of consecutive windows in `order`.
    pub neighbour_overlap: Vec<f64>,
    /// Kish effective sample size of each window's reweighted state.
    pub kish_ess: Vec<f64>,
    /// Kish effective sample size of the unbiased state.
    pub unbiased_kish_ess: f64,
    /// Each window's integrated autocorrelation time (largest over s and the observables).
    pub tau: Vec<f64>,
    /// N_k/τ_k: each window's number of effectively independent samples.
    pub ess: Vec<f64>,
    /// Bootstrap block length of each window.
    pub block_length: Vec<usize>,
    /// Bootstrap replicates whose MBAR solve succeeded.
    pub replicates_used: usize,
    /// Each window's split R̂ of s over its chains ([`crate::free_energy::agreement`]); None
    /// where it is undefined (one chain, too few samples) or not computed (pooled series only).
    pub chain_rhat: Vec<Option<f64>>,
}

/// Everything [`analyse`] measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreeEnergyReport {
    /// F(s) with errors.
    pub profile: Profile,
    /// Basins in order of s.
    pub basins: Vec<Basin>,
    /// Barrier between the two deepest basins; None with a single basin.
    pub barrier: Option<Barrier>,
    /// Each observable's reweighted (unbiased) average.
    pub observables: Vec<Estimate>,
    /// Diagnostics.
    pub diagnostics: Diagnostics,
    /// What limits the numbers above, each one sentence (empty when nothing was found).
    pub notes: Vec<String>,
}

/// Analyses umbrella windows: `windows[k]` ran under `umbrella`'s window k at inverse
/// temperature `opts.beta`.
pub fn analyse(
    umbrella: &Umbrella,
    windows: &[WindowSeries],
    opts: &AnalysisOptions,
) -> Result<FreeEnergyReport, FreeEnergyError> {
    let s: Vec<&[f64]> = windows.iter().map(|w| w.s.as_slice()).collect();
    let e = umbrella.reduced_energies(&s, opts.beta)?;
    analyse_energies(&e, windows, &order_by_centre(&umbrella.centres), opts)
}

/// Analyses any biased windows given their reduced energies relative to the unbiased state
/// (`e`'s samples are `windows`' samples, window by window) and the windows' order along s.
pub fn analyse_energies(
    e: &ReducedEnergies,
    windows: &[WindowSeries],
    order: &[usize],
    opts: &AnalysisOptions,
) -> Result<FreeEnergyReport, FreeEnergyError> {
    validate(e, windows, order, opts)?;
    let mbar = Mbar::solve(e, &opts.mbar)?;
    let overlap = mbar.overlap_matrix(e);
    check_neighbours(&overlap, order, opts.overlap_threshold)?;
    let data = Pooled::new(windows);
    let log_w = mbar.unbiased_log_weights();
    let point = Tally::new(&opts.bins, &data.s, &log_w, &data.obs);
    let tau: Vec<f64> = windows.iter().map(window_tau).collect();
    let blocks: Vec<usize> = windows
        .iter()
        .zip(&tau)
        .map(|(w, &t)| block_length(t, opts.block_factor, w.s.len()))
        .collect();
    let reps = bootstrap(e, &data, &blocks, &mbar.f, opts);
    let diagnostics = Diagnostics {
        f_k_err: (0..mbar.f.len())
            .map(|k| spread(reps.iter().map(|r| r.f[k]), reps.len()))
            .collect(),
        f_k: mbar.f.clone(),
        neighbour_overlap: neighbour_overlaps(&overlap, order),
        overlap,
        order: order.to_vec(),
        kish_ess: mbar.kish_ess(e),
        unbiased_kish_ess: kish_ess_of(&log_w),
        ess: windows
            .iter()
            .zip(&tau)
            .map(|(w, t)| w.s.len() as f64 / t)
            .collect(),
        tau,
        block_length: blocks,
        replicates_used: reps.len(),
        chain_rhat: vec![None; windows.len()],
    };
    Ok(summarise(&point, &reps, opts, diagnostics))
}

fn validate(
    e: &ReducedEnergies,
    windows: &[WindowSeries],
    order: &[usize],
    opts: &AnalysisOptions,
) -> Result<(), FreeEnergyError> {
    let bad = |m: String| Err(FreeEnergyError::InvalidInput(m));
    let counts: Vec<usize> = windows.iter().map(|w| w.s.len()).collect();
    if counts != e.counts() {
        return bad(format!(
            "window sample counts {counts:?} differ from the energies' {:?}",
            e.counts()
        ));
    }
    let mut sorted = order.to_vec();
    sorted.sort_unstable();
    if sorted != (0..windows.len()).collect::<Vec<_>>() {
        return bad(format!(
            "the window order {order:?} is not a permutation of 0..{}",
            windows.len()
        ));
    }
    let n_obs = windows[0].observables.len();
    for (k, w) in windows.iter().enumerate() {
        if w.observables.len() != n_obs || w.observables.iter().any(|o| o.len() != w.s.len()) {
            return bad(format!(
                "window {k}: every window needs the same {n_obs} observables, one value per sample"
            ));
        }
        if w.observables.iter().flatten().any(|v| !v.is_finite()) {
            return bad(format!("window {k}: an observable is not finite"));
        }
    }
    if !(opts.block_factor.is_finite() && opts.block_factor > 0.0 && opts.prominence >= 0.0) {
        return bad(format!(
            "block_factor must be > 0 and prominence ≥ 0, got {} and {}",
            opts.block_factor, opts.prominence
        ));
    }
    Ok(())
}

/// The windows' samples pooled window by window, with each window's first index.
struct Pooled {
    s: Vec<f64>,
    obs: Vec<Vec<f64>>,
    starts: Vec<usize>,
    counts: Vec<usize>,
}

impl Pooled {
    fn new(windows: &[WindowSeries]) -> Pooled {
        let n_obs = windows[0].observables.len();
        let counts: Vec<usize> = windows.iter().map(|w| w.s.len()).collect();
        let starts = counts
            .iter()
            .scan(0, |acc, &c| {
                let s = *acc;
                *acc += c;
                Some(s)
            })
            .collect();
        let s = windows.iter().flat_map(|w| w.s.iter().copied()).collect();
        let obs = (0..n_obs)
            .map(|j| {
                windows
                    .iter()
                    .flat_map(|w| w.observables[j].iter().copied())
                    .collect()
            })
            .collect();
        Pooled {
            s,
            obs,
            starts,
            counts,
        }
    }
}

/// The largest integrated time over s and the observables (1 for a constant window).
fn window_tau(w: &WindowSeries) -> f64 {
    std::iter::once(&w.s)
        .chain(&w.observables)
        .filter_map(|x| integrated_time(x))
        .fold(1.0, f64::max)
}

struct Replicate {
    f: Vec<f64>,
    tally: Tally,
}

/// The block-bootstrap replicates whose MBAR solve succeeded, in replicate order.
fn bootstrap(
    e: &ReducedEnergies,
    data: &Pooled,
    blocks: &[usize],
    f: &[f64],
    opts: &AnalysisOptions,
) -> Vec<Replicate> {
    let mut mbar_opts = opts.mbar.clone();
    mbar_opts.initial = Some(f.to_vec());
    mbar_opts.self_consistent_iterations = 0;
    let one = |r: usize| -> Option<Replicate> {
        let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
        rng.set_stream(r as u64);
        let mut idx = Vec::with_capacity(data.s.len());
        for ((&start, &n), &b) in data.starts.iter().zip(&data.counts).zip(blocks) {
            idx.extend(moving_blocks(n, b, &mut rng).into_iter().map(|i| start + i));
        }
        let er = e.gather(data.counts.clone(), &idx);
        let mbar = Mbar::solve(&er, &mbar_opts).ok()?;
        let s: Vec<f64> = idx.iter().map(|&i| data.s[i]).collect();
        let obs: Vec<Vec<f64>> = data
            .obs
            .iter()
            .map(|o| idx.iter().map(|&i| o[i]).collect())
            .collect();
        let tally = Tally::new(&opts.bins, &s, &mbar.unbiased_log_weights(), &obs);
        Some(Replicate { f: mbar.f, tally })
    };
    let out: Vec<Option<Replicate>> = (0..opts.replicates).into_par_iter().map(one).collect();
    out.into_iter().flatten().collect()
}

/// Sample standard deviation of the finite values; None if fewer than 2 or fewer than half of
/// `of` are finite (then the quantity is undefined too often for a spread to mean anything).
fn spread(values: impl Iterator<Item = f64>, of: usize) -> Option<f64> {
    let v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    if v.len() < 2 || 2 * v.len() < of {
        return None;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    Some((v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt())
}

fn estimate(value: f64, reps: &[Replicate], of: impl Fn(&Replicate) -> f64) -> Estimate {
    Estimate {
        value,
        err: spread(reps.iter().map(of), reps.len()),
    }
}

fn summarise(
    point: &Tally,
    reps: &[Replicate],
    opts: &AnalysisOptions,
    diagnostics: Diagnostics,
) -> FreeEnergyReport {
    let bins = &opts.bins;
    let f = point.profile(bins);
    let rep_f: Vec<Vec<f64>> = reps.iter().map(|r| r.tally.profile(bins)).collect();
    let f_err: Vec<Option<f64>> = (0..bins.count)
        .map(|i| spread(rep_f.iter().map(|x| x[i]), reps.len()))
        .collect();
    let sigma = |i: usize| f_err[i].unwrap_or(0.0);
    let threshold = |top: usize, a: usize, b: usize| {
        let higher = if f[a] >= f[b] { a } else { b };
        opts.prominence
            .max(2.0 * (sigma(top).powi(2) + sigma(higher).powi(2)).sqrt())
    };
    let split = split_basins(&f, &threshold);
    let n_obs = point.sums.len();
    let weights = point.basin_weights(&split);
    let rep_weights: Vec<Vec<f64>> = reps.iter().map(|r| r.tally.basin_weights(&split)).collect();
    let basin_obs: Vec<Vec<f64>> = (0..n_obs).map(|j| point.basin_means(j, &split)).collect();
    let rep_basin_obs: Vec<Vec<Vec<f64>>> = reps
        .iter()
        .map(|r| (0..n_obs).map(|j| r.tally.basin_means(j, &split)).collect())
        .collect();
    let basins = split
        .iter()
        .enumerate()
        .map(|(i, b)| Basin {
            lo: if i == 0 {
                bins.lo
            } else {
                bins.centre(b.first)
            },
            hi: if i + 1 == split.len() {
                bins.hi
            } else {
                bins.centre(b.last)
            },
            min_s: bins.centre(b.min),
            weight: weights[i],
            weight_err: spread(rep_weights.iter().map(|w| w[i]), reps.len()),
            observables: (0..n_obs)
                .map(|j| Estimate {
                    value: basin_obs[j][i],
                    err: spread(rep_basin_obs.iter().map(|o| o[j][i]), reps.len()),
                })
                .collect(),
        })
        .collect();
    FreeEnergyReport {
        profile: Profile {
            s: (0..bins.count).map(|i| bins.centre(i)).collect(),
            f: f.iter().map(|x| x.is_finite().then_some(*x)).collect(),
            f_err,
        },
        barrier: barrier_estimate(&f, &rep_f, &split, bins, reps),
        basins,
        observables: (0..n_obs)
            .map(|j| estimate(point.mean(j), reps, |r| r.tally.mean(j)))
            .collect(),
        diagnostics,
        notes: Vec::new(),
    }
}

fn barrier_estimate(
    f: &[f64],
    rep_f: &[Vec<f64>],
    split: &[BasinBins],
    bins: &Bins,
    reps: &[Replicate],
) -> Option<Barrier> {
    let pair = deepest_pair(f, split)?;
    let (top, h, hs) = barrier(f, split, pair);
    let rep: Vec<(usize, f64, f64)> = rep_f.iter().map(|x| barrier(x, split, pair)).collect();
    Some(Barrier {
        basins: pair,
        top_s: bins.centre(top),
        height: Estimate {
            value: h,
            err: spread(rep.iter().map(|r| r.1), reps.len()),
        },
        height_from_shallower: Estimate {
            value: hs,
            err: spread(rep.iter().map(|r| r.2), reps.len()),
        },
    })
}
