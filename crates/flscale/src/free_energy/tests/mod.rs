//! Exact tests of the free-energy statistics: samples drawn exactly (or by a seeded Metropolis
//! chain) from known densities, checked against closed forms and quadrature.

mod autocorrelation;
mod double_well;
mod gaussian;
mod sampled;
mod sampled_double_well;

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

/// The reduced log density g(s) = −b(s² − 1)² + h s of the tilted double well.
pub(super) fn double_well(b: f64, h: f64) -> impl Fn(f64) -> f64 + Copy {
    move |s: f64| -b * (s * s - 1.0).powi(2) + h * s
}

/// ∫ exp(g) over [a, c] by composite Simpson with `n` (even) intervals.
pub(super) fn simpson(g: impl Fn(f64) -> f64, a: f64, c: f64, n: usize) -> f64 {
    let h = (c - a) / n as f64;
    let mut sum = g(a).exp() + g(c).exp();
    for i in 1..n {
        sum += if i % 2 == 1 { 4.0 } else { 2.0 } * g(a + i as f64 * h).exp();
    }
    sum * h / 3.0
}

/// Exact draws from exp(g(s) − ½κ(s − c)²) by rejection from N(c, 1/κ): accept with
/// probability exp(g(s) − g_max). g_max is the maximum of g on a grid of step 1e−4 over
/// [−3, 3] plus 1e−6, which bounds g everywhere for the double wells used here (|g″| ≈ 8b ≤ 30
/// at the maximum near s = ±1, so the grid misses it by < 1e−7; beyond |s| = 1/√3 g is concave).
pub(super) fn rejection_draws(
    g: impl Fn(f64) -> f64,
    centre: f64,
    kappa: f64,
    n: usize,
    rng: &mut impl Rng,
) -> Vec<f64> {
    let g_max = (0..=60_000)
        .map(|i| g(-3.0 + i as f64 * 1e-4))
        .fold(f64::NEG_INFINITY, f64::max)
        + 1e-6;
    let sd = 1.0 / kappa.sqrt();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let z: f64 = StandardNormal.sample(rng);
        let s = centre + sd * z;
        let accept: f64 = rng.random();
        if accept < (g(s) - g_max).exp() {
            out.push(s);
        }
    }
    out
}
