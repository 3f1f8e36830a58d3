//! The phase of one self-consistent solution: the wells of the single-neuron potential, the
//! mass in its side wells, the distance to coexistence and spinodal, and the label GFL /
//! GMFL-I / GMFL-II.
//!
//! Sources: Rubin, Seroussi & Ringel (ICLR 2024, arXiv 2310.03789) §2.4.1 (the mixed,
//! "droplet" phase: a fraction of neurons sits in the teacher-aware minimum while the others
//! stay at the centre), §2.4.2 last paragraph and Fig. 1 (GFL: one saddle at Φ = 0; GMFL-I: a
//! weighted average of the zero saddle and |Φ| > 0 saddles; GMFL-II: only |Φ| > 0 saddles
//! dominate), §3.1 Claim IV (side saddles near Φ = ±1 degenerate with the centre over a range
//! of u); the blog (seed 001) §"The first-order transition" for the closed forms of the
//! coexistence and spinodal ([`super::phase`]).
//!
//! ## The label rule
//! With m_side the posterior mass beyond the barrier (the first local maximum of U on ρ > 0):
//! * **GFL** — U has no side minimum, or m_side < `side_mass_floor`;
//! * **GMFL-I** — a side minimum exists and `side_mass_floor` ≤ m_side ≤ ½ (centre and side
//!   wells both carry mass);
//! * **GMFL-II** — m_side > ½ (the side wells dominate; also when ρ = 0 is not a minimum).
//!
//! For a network of N neurons `side_mass_floor` = 1/N: GMFL-I needs at least one expected
//! neuron in the side wells. m_side is the exact 1-D average of the law e^{−U}/Z (composite
//! Simpson quadrature on each side of the barrier), not a Gaussian approximation of the wells.

use serde::Serialize;

use super::phase::{coexistence_closed_form, spinodal_closed_form};
use super::potential::{FiniteModel, MeanField};
use crate::error::{Error, Result};

/// A local minimum of U on ρ ≥ 0 (U is even in ρ; each side minimum stands for ±ρ).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Minimum {
    /// Position ρ.
    pub rho: f64,
    /// U(ρ) − U(0): negative where the well is deeper than the centre.
    pub depth: f64,
    /// U''(ρ) (central second difference).
    pub curvature: f64,
}

/// The phase label (module docs for the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PhaseLabel {
    /// Gaussian feature learning: the centre only.
    #[serde(rename = "GFL")]
    Gfl,
    /// Mixed phase: centre and side wells both carry mass.
    #[serde(rename = "GMFL-I")]
    GmflI,
    /// The side wells dominate.
    #[serde(rename = "GMFL-II")]
    GmflII,
}

/// The label's name as the JSON writes it.
pub fn label_name(label: PhaseLabel) -> &'static str {
    match label {
        PhaseLabel::Gfl => "GFL",
        PhaseLabel::GmflI => "GMFL-I",
        PhaseLabel::GmflII => "GMFL-II",
    }
}

/// The wells of an even 1-D potential and the mass beyond its barrier.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wells {
    /// Local minima on ρ ≥ 0, ascending in ρ (the centre first when ρ = 0 is a minimum).
    pub minima: Vec<Minimum>,
    /// The first local maximum of U on ρ > 0 when ρ = 0 is a minimum and a side minimum
    /// exists; 0 when ρ = 0 is not a minimum; `None` with the centre only.
    pub barrier: Option<f64>,
    /// P(|ρ| > barrier) under e^{−U}/Z (0 without a barrier).
    pub side_mass: f64,
}

/// U on a grid of step `scale`/10 (a tenth of the narrowest expected well width) from 0 to at
/// least `rho_max` (beyond which U is known to exceed its minimum by more than 60), and on
/// until U exceeds its running minimum by 60 and rises.
fn scan(u: &impl Fn(f64) -> f64, scale: f64, rho_max: f64) -> Result<Vec<f64>> {
    let h = scale / 10.0;
    let mut vals = vec![u(0.0)];
    let mut umin = vals[0];
    loop {
        let r = h * vals.len() as f64;
        let v = u(r);
        if !v.is_finite() {
            return Err(Error::runtime(format!(
                "the overlap potential is not finite at ρ = {r}"
            )));
        }
        umin = umin.min(v);
        let rising = v > vals[vals.len() - 1];
        vals.push(v);
        if (r >= rho_max && rising && v - umin > 60.0) || vals.len() > 4_000_000 {
            return Ok(vals);
        }
    }
}

/// Golden-section refinement of an extremum of `f` bracketed by [a, b] (`sign` = 1 for a
/// minimum, −1 for a maximum).
fn refine(f: &impl Fn(f64) -> f64, a: f64, b: f64, sign: f64) -> f64 {
    crate::scalar::golden_min(|x| sign * f(x), a, b, 0.0, 80).midpoint()
}

/// The composite Simpson weight of node i of 0..=n (n even): 1, 4, 2, 4, …, 4, 1.
pub(crate) fn simpson_weight(i: usize, n: usize) -> f64 {
    if i == 0 || i == n {
        1.0
    } else if i % 2 == 1 {
        4.0
    } else {
        2.0
    }
}

/// Composite Simpson integral of e^{−(U − shift)} on [a, b] with steps of at most `h`.
fn simpson_mass(u: &impl Fn(f64) -> f64, a: f64, b: f64, h: f64, shift: f64) -> f64 {
    if b <= a {
        return 0.0;
    }
    let n = 2 * ((b - a) / h / 2.0).ceil().max(1.0) as usize;
    let step = (b - a) / n as f64;
    let sum: f64 = (0..=n)
        .map(|i| simpson_weight(i, n) * (-(u(a + i as f64 * step) - shift)).exp())
        .sum();
    sum * step / 3.0
}

/// The wells of the even potential `u` (ρ ≥ 0) and its side mass; `scale` is the narrowest
/// well width expected (σ_w/√D for the overlap potentials), `rho_max` a ρ beyond which U
/// exceeds its minimum by more than 60 (the scan goes at least that far, so that no well
/// behind a high barrier is missed).
pub fn wells(u: impl Fn(f64) -> f64, scale: f64, rho_max: f64) -> Result<Wells> {
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(Error::invalid(format!(
            "well scale = {scale} is not allowed; it must be finite and > 0"
        )));
    }
    let vals = scan(&u, scale, rho_max)?;
    let h = scale / 10.0;
    let u0 = vals[0];
    let mut minima = Vec::new();
    let mut maxima = Vec::new();
    // ρ = 0 is a minimum when U rises on both sides (U is even).
    if vals[1] >= vals[0] {
        minima.push(0.0);
    }
    for j in 1..vals.len() - 1 {
        let (l, m, r) = (vals[j - 1], vals[j], vals[j + 1]);
        let at = |k: usize| k as f64 * h;
        if m < l && m <= r {
            minima.push(refine(&u, at(j - 1), at(j + 1), 1.0));
        } else if m > l && m >= r {
            maxima.push(refine(&u, at(j - 1), at(j + 1), -1.0));
        }
    }
    let fd = (scale * 1e-3).max(1e-7);
    let minima: Vec<Minimum> = minima
        .into_iter()
        .map(|rho| {
            let (um, uc, up) = (u((rho - fd).abs()), u(rho), u(rho + fd));
            Minimum {
                rho,
                depth: uc - u0,
                curvature: (um - 2.0 * uc + up) / (fd * fd),
            }
        })
        .collect();
    let centre_is_min = minima.first().is_some_and(|m| m.rho == 0.0);
    let has_side = minima.iter().any(|m| m.rho > 0.0);
    let barrier = match (centre_is_min, has_side) {
        (false, _) => Some(0.0),
        (true, true) => maxima.first().copied(),
        (true, false) => None,
    };
    let rho_end = h * (vals.len() - 1) as f64;
    let shift = minima.iter().map(|m| m.depth + u0).fold(u0, f64::min);
    let side_mass = match barrier {
        None => 0.0,
        Some(0.0) => 1.0,
        Some(cut) => {
            let step = h / 4.0;
            let inner = simpson_mass(&u, 0.0, cut, step, shift);
            let outer = simpson_mass(&u, cut, rho_end, step, shift);
            outer / (inner + outer)
        }
    };
    Ok(Wells {
        minima,
        barrier,
        side_mass,
    })
}

/// The label for a side mass (module docs for the rule).
pub fn label(w: &Wells, side_mass_floor: f64) -> PhaseLabel {
    if w.barrier.is_none() || w.side_mass < side_mass_floor {
        PhaseLabel::Gfl
    } else if w.side_mass > 0.5 {
        PhaseLabel::GmflII
    } else {
        PhaseLabel::GmflI
    }
}

/// The phase of one self-consistent solution (b, c) of the finite-size model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseAtFixedPoint {
    /// The wells of U(ρ; b, c) and the side mass.
    #[serde(flatten)]
    pub wells: Wells,
    /// Expected neurons per network in the side wells, N·m_side.
    pub side_neurons: f64,
    /// The mass floor used by the label (1/N).
    pub side_mass_floor: f64,
    /// u = P²s_a²/(T²D).
    pub u: f64,
    /// u / u_coexist(b, c), the mean-field closed form ([`coexistence_closed_form`], L → 1);
    /// `None` when Ũ has no coexistence for this (b, c).
    pub u_over_coexist: Option<f64>,
    /// u / u_spinodal(b, c) = 4σ_w²b²u/(π(1 + 2σ_w²)); `None` at b = 0.
    pub u_over_spinodal: Option<f64>,
    /// The learned cubic fraction 1 − c/ε (`None` at ε = 0).
    pub cubic_fraction: Option<f64>,
    /// GFL, GMFL-I or GMFL-II.
    pub label: PhaseLabel,
}

/// The phase at (b, c) for the finite-size potential of `model`, a network of `n` neurons and
/// target strength `eps`.
pub fn phase_at_fixed_point(
    model: &FiniteModel,
    (b, c): (f64, f64),
    eps: f64,
    n: usize,
) -> Result<PhaseAtFixedPoint> {
    let scale = (model.sigma_w2 / model.d).sqrt();
    // U ≥ Dρ²/(2σ_w²) − s_a²P²m_max²/(2T²) with m² ≤ (2/π)(|b| + |c|)² (erf² ≤ 1, L ≥ 1), and
    // U(0) ≥ U_min: past ρ_max, U > U_min + 60.
    let reward_bound = model.s_a2 * model.p * model.p / std::f64::consts::PI
        * (b.abs() + c.abs()).powi(2)
        / (model.t * model.t);
    let rho_max = (2.0 * model.sigma_w2 * (reward_bound + model.potential(0.0, b, c) + 60.0)
        / model.d)
        .sqrt();
    let w = wells(|r| model.potential(r, b, c), scale, rho_max)?;
    let floor = 1.0 / n.max(1) as f64;
    let u = model.u();
    let mf = MeanField::new(model.sigma_w2, b, c)?;
    let lab = label(&w, floor);
    Ok(PhaseAtFixedPoint {
        side_neurons: n as f64 * w.side_mass,
        side_mass_floor: floor,
        u,
        u_over_coexist: coexistence_closed_form(&mf).map(|(uc, _)| u / uc),
        u_over_spinodal: spinodal_closed_form(&mf).map(|us| u / us),
        cubic_fraction: (eps != 0.0).then(|| 1.0 - c / eps),
        label: lab,
        wells: w,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dense trapezoid reference of P(|ρ| > cut) under e^{−U} on [0, end].
    fn dense_side_mass(u: impl Fn(f64) -> f64, cut: f64, end: f64) -> f64 {
        let n = 2_000_000;
        let h = end / n as f64;
        let (mut inner, mut outer) = (0.0, 0.0);
        let u0 = u(0.0);
        for i in 0..=n {
            let r = i as f64 * h;
            let w = if i == 0 || i == n { 0.5 } else { 1.0 } * (-(u(r) - u0)).exp();
            if r < cut {
                inner += w;
            } else {
                outer += w;
            }
        }
        outer / (inner + outer)
    }

    #[test]
    fn one_well_is_gfl() {
        let w = wells(|r| 50.0 * r * r, 0.1, 3.0).unwrap();
        assert_eq!(w.minima.len(), 1);
        assert_eq!(w.minima[0].rho, 0.0);
        assert!((w.minima[0].curvature - 100.0).abs() < 1e-4);
        assert_eq!(w.barrier, None);
        assert_eq!(label(&w, 1e-3), PhaseLabel::Gfl);
    }

    /// U = A·ρ²(ρ² − 1)² + tilt·ρ²: minima at 0 and near 1 (at tilt 0 exactly 1, with
    /// U''(0) = 2A, U''(1) = 8A), the barrier at ρ = 1/√3.
    fn triple(a: f64, tilt: f64) -> impl Fn(f64) -> f64 {
        move |r: f64| a * r * r * (r * r - 1.0).powi(2) + tilt * r * r
    }

    #[test]
    fn three_wells_minima_curvatures_and_mass_match_dense_quadrature() {
        let a = 40.0;
        let w = wells(triple(a, 0.0), 0.05, 3.0).unwrap();
        assert_eq!(w.minima.len(), 2);
        assert!((w.minima[1].rho - 1.0).abs() < 1e-6, "{:?}", w.minima);
        assert!(w.minima[1].depth.abs() < 1e-9);
        assert!((w.minima[0].curvature - 2.0 * a).abs() < 1e-3);
        assert!((w.minima[1].curvature - 8.0 * a).abs() < 1e-2);
        let cut = w.barrier.unwrap();
        assert!((cut - 1.0 / 3f64.sqrt()).abs() < 1e-6);
        let reference = dense_side_mass(triple(a, 0.0), cut, 3.0);
        assert!(
            (w.side_mass - reference).abs() < 1e-7,
            "{} vs {reference}",
            w.side_mass
        );
        // Laplace: on ρ ≥ 0 the centre is a half-Gaussian of curvature 2A, ½·√(2π/2A), the
        // side well a whole one of curvature 8A, √(2π/8A) — the same weight, so mass ½
        // (dense quadrature: 0.50003 at A = 40).
        assert!((w.side_mass - 0.5).abs() < 0.01, "{}", w.side_mass);
        // Degenerate wells sit on the GMFL-I/II boundary (mass ½); a small tilt of the side
        // well (+0.5: mass ≈ e^{−0.5}/(1 + e^{−0.5}) ≈ 0.38) is the mixed phase proper.
        let mixed = wells(triple(a, 0.5), 0.05, 3.0).unwrap();
        assert!(
            mixed.side_mass > 0.3 && mixed.side_mass < 0.45,
            "{}",
            mixed.side_mass
        );
        assert_eq!(label(&mixed, 1e-3), PhaseLabel::GmflI);
        // A tilted version: the side well rises, its mass drops below the floor.
        let tilted = wells(triple(a, 12.0), 0.05, 3.0).unwrap();
        assert_eq!(tilted.minima.len(), 2);
        assert!(tilted.minima[1].depth > 10.0);
        let reference = dense_side_mass(triple(a, 12.0), tilted.barrier.unwrap(), 3.0);
        assert!((tilted.side_mass - reference).abs() < 1e-9);
        assert_eq!(label(&tilted, 1e-3), PhaseLabel::Gfl);
    }

    #[test]
    fn side_dominated_potential_is_gmfl_ii() {
        let u = triple(40.0, -4.0);
        let w = wells(&u, 0.05, 3.0).unwrap();
        assert!(w.minima[1].depth < -3.0);
        let reference = dense_side_mass(&u, w.barrier.unwrap(), 3.0);
        assert!((w.side_mass - reference).abs() < 1e-7);
        assert!(w.side_mass > 0.9);
        assert_eq!(label(&w, 1e-3), PhaseLabel::GmflII);
        // ρ = 0 a maximum: everything is side mass.
        let w = wells(|r: f64| (r * r - 1.0).powi(2) * 20.0, 0.05, 3.0).unwrap();
        assert_eq!(w.barrier, Some(0.0));
        assert_eq!(label(&w, 1e-3), PhaseLabel::GmflII);
    }

    #[test]
    fn finite_model_side_mass_matches_dense_quadrature() {
        // App. D setting at N = 700 (u ≈ 15), with a residual near coexistence.
        let model = FiniteModel::new(150.0, 600.0, 0.05, 0.011 / 700.0, 0.5).unwrap();
        let (b, c) = (0.32, -0.62);
        let ph = phase_at_fixed_point(&model, (b, c), -1.2, 700).unwrap();
        let u = |r: f64| model.potential(r, b, c);
        if let Some(cut) = ph.wells.barrier.filter(|&x| x > 0.0) {
            let reference = dense_side_mass(u, cut, 3.0);
            assert!(
                (ph.wells.side_mass - reference).abs() < 1e-7 * reference.max(1e-30) + 1e-12,
                "{} vs {reference}",
                ph.wells.side_mass
            );
        }
        assert!((ph.u - 600.0f64.powi(2) * 0.011 / 700.0 / (0.0025 * 150.0)).abs() < 1e-9);
        assert!((ph.cubic_fraction.unwrap() - (1.0 - c / -1.2)).abs() < 1e-15);
        let us = std::f64::consts::PI * 2.0 / (4.0 * 0.5 * b * b);
        assert!((ph.u_over_spinodal.unwrap() - ph.u / us).abs() < 1e-12);
    }
}
