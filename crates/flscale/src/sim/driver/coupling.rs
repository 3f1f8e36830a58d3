//! The noise streams of the cold and the hot start, and the coupling certificate of coupled
//! starts.
//!
//! By default the two starts are independent: the cold ensemble runs on the streams of
//! `sampler.seed` (chain k on stream k, as a single-start run always has), the hot one on those
//! of a seed derived from it ([`start_seed`]). Their estimates are then independent and the
//! cold/hot z-test, (cold − hot)/√(err_cold² + err_hot²), has the null distribution it
//! assumes. With `sampler.starts_coupling = "coupled"` both run on the streams of
//! `sampler.seed`: a synchronous coupling, under which the two estimates are positively
//! correlated and that z-test passes too easily. What a coupling does certify is meeting: a
//! chain whose hot and cold copies meet has forgotten its start (Jacob, O'Leary & Atchadé 2020,
//! "Unbiased Markov chain Monte Carlo methods with couplings", JRSS B 82(3), 543–600, §2: the
//! meeting time bounds the distance to stationarity). The certificate ([`CouplingCertificate`])
//! reports, per chain, the first measured step at which they met, or that they did not.

use serde::Serialize;

use crate::sim::config::{Start, StartsCoupling};

/// Derived seeds stay below 2⁵³ so that JSON readers and the results store's float columns
/// hold them exactly.
const SEED_MASK: u64 = (1 << 53) - 1;

/// Mixed into the run's seed to derive the hot start's ("hot" in ASCII).
const HOT_STREAM_TAG: u64 = 0x0068_6F74;

/// Mixed into a parameter's index to draw its signs in the sketch.
const SKETCH_TAG: u64 = 0x0000_736B_6574_6368;

/// Rows of the random projection that sketches a chain's parameters.
pub const SKETCH_ROWS: usize = 16;

/// Relative distance ‖θ_hot − θ_cold‖/‖θ_cold‖ below which a coupled chain's two copies
/// count as met: four significant digits, the agreement that coalescing copies reach long
/// before their f32 rounding.
pub const MEETING_TOLERANCE: f64 = 1e-4;

/// SplitMix64's output function (Steele, Lea & Flood 2014, "Fast splittable pseudorandom
/// number generators", OOPSLA; the finaliser of Stafford's variant 13): a bijection of u64
/// whose outputs for neighbouring inputs are uncorrelated.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of the noise streams (chain k uses stream k of it) and initial draws of one start:
/// `seed` for the cold start and for every start of a coupled run; for an independent hot start
/// splitmix64(seed ⊕ "hot") mod 2⁵³, a seed whose ChaCha key is unrelated to `seed`'s. The data
/// and the teacher always come from `seed`: both starts see the same training set.
pub fn start_seed(seed: u64, hot: bool, coupling: StartsCoupling) -> u64 {
    match (hot, coupling) {
        (false, _) | (true, StartsCoupling::Coupled) => seed,
        (true, StartsCoupling::Independent) => derived_seed(seed, HOT_STREAM_TAG),
    }
}

/// A seed derived from `seed` and a `tag` that names its use (splitmix64(seed ⊕ tag) mod 2⁵³),
/// its ChaCha key unrelated to `seed`'s: the hot start's streams, an umbrella window's.
pub fn derived_seed(seed: u64, tag: u64) -> u64 {
    splitmix64(seed ^ tag) & SEED_MASK
}

/// Whether a run records the parameter sketches of [`certificate`]: both starts, coupled.
pub(crate) fn records_sketches(start: Start, coupling: StartsCoupling) -> bool {
    start == Start::Both && coupling == StartsCoupling::Coupled
}

/// Every chain's parameter sketch at every measurement of a coupled run (empty otherwise).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParameterSketches {
    /// The measured steps.
    pub steps: Vec<usize>,
    /// Per measurement, per chain: the sketch, None for a stopped chain.
    pub chains: Vec<Vec<Option<[f64; SKETCH_ROWS]>>>,
}

/// S·θ for the SKETCH_ROWS × n matrix S of independent ±1 entries, a fixed function of the
/// parameter's index: E‖S·x‖²/SKETCH_ROWS = ‖x‖² for every x (Achlioptas 2003,
/// "Database-friendly random projections", JCSS 66, 671–687), so the distance of two chains
/// is estimated from their sketches, with a relative spread of about √(2/SKETCH_ROWS) = 0.35 —
/// enough to place a meeting, since coupled copies approach each other geometrically. Equal
/// parameters give equal sketches.
pub(crate) fn sketch(params: impl Iterator<Item = f64>) -> [f64; SKETCH_ROWS] {
    let mut s = [0.0; SKETCH_ROWS];
    for (i, v) in params.enumerate() {
        let signs = splitmix64(i as u64 ^ SKETCH_TAG);
        for (j, sj) in s.iter_mut().enumerate() {
            if (signs >> j) & 1 == 1 {
                *sj += v;
            } else {
                *sj -= v;
            }
        }
    }
    s
}

/// ‖a − b‖/‖b‖ of two sketches (0 when both vanish).
pub(crate) fn sketched_relative_distance(a: &[f64; SKETCH_ROWS], b: &[f64; SKETCH_ROWS]) -> f64 {
    let diff: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let norm: f64 = b.iter().map(|y| y * y).sum();
    if diff == 0.0 {
        0.0
    } else {
        (diff / norm).sqrt()
    }
}

/// Where one chain's hot and cold copies met.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChainMeeting {
    /// Chain index k (its noise stream).
    pub chain: usize,
    /// "met", "not met", or "diverged" (either copy was stopped).
    pub status: String,
    /// The first measured step at which the copies' relative distance, estimated from their
    /// sketches, was at most the tolerance; null when they never were.
    pub meeting_step: Option<usize>,
    /// Whether they stayed within the tolerance at every later measurement.
    pub stayed_met: Option<bool>,
    /// ‖θ_hot − θ_cold‖/‖θ_cold‖ over every parameter at the end, computed exactly.
    pub final_relative_distance: Option<f64>,
}

/// The coupling certificate of a coupled run with both starts: per chain, whether and when the
/// copies started cold and hot on the same noise stream met (see the module doc). It is not an
/// equilibration verdict: the two starts' estimates are not independent evidence.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CouplingCertificate {
    /// The relative distance that counts as met ([`MEETING_TOLERANCE`]).
    pub tolerance: f64,
    /// Chains whose copies met.
    pub met: usize,
    /// Chains compared (those of which neither copy diverged).
    pub compared: usize,
    /// The latest meeting step over the chains that met (null when none did): after it every
    /// such chain had forgotten its start.
    pub last_meeting_step: Option<usize>,
    /// Per chain.
    pub chains: Vec<ChainMeeting>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cold_start_keeps_the_run_seed_and_an_independent_hot_start_gets_its_own() {
        for seed in [0, 1, 2, 3, 1 << 40, u64::MAX >> 1] {
            assert_eq!(start_seed(seed, false, StartsCoupling::Independent), seed);
            assert_eq!(start_seed(seed, false, StartsCoupling::Coupled), seed);
            assert_eq!(start_seed(seed, true, StartsCoupling::Coupled), seed);
            let hot = start_seed(seed, true, StartsCoupling::Independent);
            assert_ne!(hot, seed);
            assert!(hot < 1 << 53);
        }
        // Neighbouring run seeds give hot seeds that are not neighbours.
        let (a, b) = (
            start_seed(1, true, StartsCoupling::Independent),
            start_seed(2, true, StartsCoupling::Independent),
        );
        assert!(a.abs_diff(b) > 1 << 20, "{a} {b}");
        // SplitMix64's first output from state 0 (the reference implementation's test vector).
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn sketches_estimate_distances_and_are_equal_for_equal_parameters() {
        let x: Vec<f64> = (0..500)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) / 10.0)
            .collect();
        let y: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, v)| v + if i % 2 == 0 { 1e-3 } else { -1e-3 })
            .collect();
        let (sx, sy) = (sketch(x.iter().copied()), sketch(y.iter().copied()));
        assert_eq!(sketch(x.iter().copied()), sx);
        assert_eq!(sketched_relative_distance(&sx, &sx), 0.0);
        let exact = (500.0 * 1e-6f64).sqrt() / x.iter().map(|v| v * v).sum::<f64>().sqrt();
        let estimate = sketched_relative_distance(&sy, &sx);
        assert!(
            estimate > exact / 3.0 && estimate < exact * 3.0,
            "{estimate} vs {exact}"
        );
    }
}
