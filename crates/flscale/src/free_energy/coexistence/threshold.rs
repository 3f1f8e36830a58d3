//! One threshold with its parametric-bootstrap error: the value, the replicates' standard
//! deviation and percentile interval, the bracket and how far it is known.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use serde::Serialize;

/// How far a threshold is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Interpolated between the cells that bracket it.
    Resolved,
    /// A spinodal extrapolated beyond every measured P (the minimum exists at all of them).
    Extrapolated,
    /// Only the two cells between which it lies are known.
    Bracketed,
    /// The cells say nothing about it.
    Unresolved,
}

/// One threshold of one d.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Threshold {
    /// P at the threshold (the bracket's geometric midpoint when only bracketed); None when
    /// unresolved.
    #[serde(rename = "P")]
    pub value: Option<f64>,
    /// Standard deviation of the replicates.
    pub err: Option<f64>,
    /// The 2.5–97.5 % percentiles of the replicates.
    pub interval: Option<(f64, f64)>,
    /// The two measured P between which it lies, when known.
    pub bracket: Option<(f64, f64)>,
    /// How far it is known.
    pub resolution: Resolution,
    /// One sentence: where the value comes from, or why there is none.
    pub why: String,
    /// Every replicate's P (NaN where a replicate found none): what an exponent fit resamples.
    #[serde(skip)]
    pub replicates: Vec<f64>,
}

pub(super) fn normal(rng: &mut ChaCha8Rng) -> f64 {
    rng.sample::<f64, _>(StandardNormal)
}

/// A threshold from its value and replicates: the error is their standard deviation, the
/// interval their 2.5–97.5 % percentiles, when at least half of them found a value.
pub(super) fn threshold(
    value: Option<f64>,
    replicates: Vec<f64>,
    resolution: Resolution,
    bracket: Option<(f64, f64)>,
    why: String,
) -> Threshold {
    let mut ok: Vec<f64> = replicates
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    ok.sort_by(f64::total_cmp);
    let n = ok.len();
    let enough = value.is_some() && n >= 2 && 2 * n >= replicates.len();
    let err = enough.then(|| {
        let m = ok.iter().sum::<f64>() / n as f64;
        (ok.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    });
    let q = |p: f64| {
        let h = (n - 1) as f64 * p;
        let (i, j) = (h.floor() as usize, (h.floor() as usize + 1).min(n - 1));
        ok[i] + (h - i as f64) * (ok[j] - ok[i])
    };
    Threshold {
        value,
        err,
        interval: enough.then(|| (q(0.025), q(0.975))),
        bracket,
        resolution,
        why,
        replicates,
    }
}
