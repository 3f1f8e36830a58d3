//! The wells of the potential the model page draws, at the page's own parameters: where the
//! minima lie, the barrier between them, the posterior mass beyond it and R = E[ρ²] in each
//! well — for the mean-field Ũ_u at the current u (not only at coexistence) and for the
//! finite-size U(ρ; b, c), whose phase is read from its own minima rather than from the
//! mean-field thresholds.
//!
//! The minima, the barrier and the side mass are [`flscale::cavity::phase_at::wells`] (the
//! library's scan and golden-section refinement, the same as `flscale cavity sweep`); the
//! posterior whose masses and moments are taken is p(ρ) ∝ e^{−U(ρ)} with U the finite-size
//! potential (blog §"Reduce the hidden weight posterior to one overlap") or D·Ũ_u (blog §"The
//! sample scale for alignment"; as `flscale cavity phase` takes its moments at coexistence).

use flscale::cavity::phase_at::{self, label_name, wells, PhaseLabel, Wells};
use flscale::cavity::{FiniteModel, MeanField};
use flscale::Result;
use serde_json::{json, Value};

/// What the page shows of the wells of one potential.
#[derive(Debug, Clone)]
pub struct WellView {
    /// Minima, barrier and side mass (the library's [`Wells`]).
    pub wells: Wells,
    /// R = E[ρ²] over the central well (|ρ| below the barrier); `None` without a centre.
    pub r_centre: Option<f64>,
    /// R over the side wells (|ρ| beyond the barrier); `None` without side wells.
    pub r_side: Option<f64>,
    /// R over the whole posterior.
    pub r_total: f64,
    /// The end of the integration range: beyond it U exceeds its minimum by more than 60.
    pub rho_end: f64,
}

impl WellView {
    /// The outermost minimum ρ ≥ 0 (0 with the centre only).
    pub fn outermost(&self) -> f64 {
        self.wells.minima.iter().map(|m| m.rho).fold(0.0, f64::max)
    }

    /// The object the API answers: `minima: [{rho, depth, curvature}]` (ρ ≥ 0; depth is
    /// U(ρ) − U(0), in the units of the posterior's exponent), `barrier`, `side_mass`,
    /// `r_centre`, `r_side`, `r_total` and `rho_end` (where the integrals stop).
    pub fn to_json(&self) -> Value {
        json!({
            "minima": self.wells.minima,
            "barrier": self.wells.barrier,
            "side_mass": self.wells.side_mass,
            "r_centre": self.r_centre,
            "r_side": self.r_side,
            "r_total": self.r_total,
            "rho_end": self.rho_end,
        })
    }
}

/// Most steps of a tenth of the well width taken beyond the outermost minimum to find where
/// the posterior ends (the page's ordinary points need a few hundred); past it the request is
/// refused rather than integrated for seconds.
const MAX_WALK: f64 = 1e6;

/// Composite Simpson sums of e^{−(U − shift)} and ρ²e^{−(U − shift)} over [a, b] with steps of
/// at most `h`.
fn simpson_moments(u: &impl Fn(f64) -> f64, a: f64, b: f64, h: f64, shift: f64) -> (f64, f64) {
    if b <= a {
        return (0.0, 0.0);
    }
    let n = 2 * ((b - a) / h / 2.0).ceil().max(1.0) as usize;
    let step = (b - a) / n as f64;
    let (mut m0, mut m2) = (0.0, 0.0);
    for i in 0..=n {
        let r = a + i as f64 * step;
        let weight = if i == 0 || i == n {
            1.0
        } else if i % 2 == 1 {
            4.0
        } else {
            2.0
        };
        let w = weight * (-(u(r) - shift)).exp();
        m0 += w;
        m2 += w * r * r;
    }
    (m0 * step / 3.0, m2 * step / 3.0)
}

/// The wells of the even potential `u` (the exponent of the posterior, ρ ≥ 0) and the moments
/// of e^{−u} in each; `scale` is the narrowest well width expected (σ_w/√D), `rho_max` a ρ
/// beyond which u exceeds its minimum by more than 60.
pub fn well_view(u: impl Fn(f64) -> f64, scale: f64, rho_max: f64) -> Result<WellView> {
    let w = wells(&u, scale, rho_max)?;
    let h = scale / 10.0;
    let u_min = w.minima.iter().map(|m| m.depth).fold(0.0, f64::min) + u(0.0);
    // Walk out from the outermost minimum until the integrand is below e^{−60} of its peak
    // (at most to rho_max, where that holds by construction).
    let outer = w.minima.iter().map(|m| m.rho).fold(0.0, f64::max);
    let limit = rho_max.min(outer + MAX_WALK * h);
    let mut rho_end = outer;
    while rho_end < limit && u(rho_end) - u_min <= 60.0 {
        rho_end = (rho_end + h).min(limit);
    }
    if rho_end < rho_max && u(rho_end) - u_min <= 60.0 {
        return Err(flscale::Error::invalid(format!(
            "the posterior still holds mass at ρ = {rho_end:.4}, {:.0e} well widths beyond its outermost minimum; this point is too extreme for the page: lower u (or P) or D",
            MAX_WALK / 10.0
        )));
    }
    let cut = match w.barrier {
        Some(b) if b > 0.0 => b,
        Some(_) => 0.0,
        None => rho_end,
    };
    let step = h / 4.0;
    let (c0, c2) = simpson_moments(&u, 0.0, cut, step, u_min);
    let (s0, s2) = simpson_moments(&u, cut, rho_end, step, u_min);
    let centre_is_min = w.minima.first().is_some_and(|m| m.rho == 0.0);
    let has_side = w.minima.iter().any(|m| m.rho > 0.0);
    Ok(WellView {
        r_centre: (centre_is_min && c0 > 0.0).then(|| c2 / c0),
        r_side: (has_side && s0 > 0.0).then(|| s2 / s0),
        r_total: (c2 + s2) / (c0 + s0),
        rho_end,
        wells: w,
    })
}

/// The wells of D·Ũ_u at this u (the mean-field posterior at input dimension D).
/// Ũ_u/D = ρ²/(2σ_w²) − u·g(ρ) with g ≤ (|b| + |c|)²/π (g = (2/π)·s·(b − 2cs)², s = ρ²/(1 + 2q)
/// < ½), and Ũ_u(0) = 0: past ρ_max = √(2σ_w²(u(|b| + |c|)²/π + 60/D)), D·Ũ_u > 60 ≥ its
/// minimum + 60.
pub fn mean_field_wells(mf: &MeanField, u: f64, d: f64) -> Result<WellView> {
    let reward_bound = (mf.b.abs() + mf.c.abs()).powi(2) / std::f64::consts::PI;
    let rho_max = (2.0 * mf.sigma_w2 * (u.max(0.0) * reward_bound + 60.0 / d)).sqrt();
    well_view(
        |r| d * mf.potential(u, r),
        (mf.sigma_w2 / d).sqrt(),
        rho_max,
    )
}

/// The wells of the finite-size U(ρ; b, c) and its phase label: [`phase_at::label`] with the
/// side-mass floor 1/N, the rule `flscale cavity sweep` applies to each self-consistent
/// solution ([`phase_at::phase_at_fixed_point`], whose bound on ρ is used here:
/// U ≥ Dρ²/(2σ_w²) − s_a²P²(|b| + |c|)²/(πT²) with L ≥ 1 and m² ≤ (2/π)(|b| + |c|)²).
pub fn finite_wells(model: &FiniteModel, b: f64, c: f64, n: f64) -> Result<(WellView, PhaseLabel)> {
    let reward_bound = model.s_a2 * model.p * model.p / std::f64::consts::PI
        * (b.abs() + c.abs()).powi(2)
        / (model.t * model.t);
    let rho_max = (2.0 * model.sigma_w2 * (reward_bound + model.potential(0.0, b, c) + 60.0)
        / model.d)
        .sqrt();
    let view = well_view(
        |r| model.potential(r, b, c),
        (model.sigma_w2 / model.d).sqrt(),
        rho_max,
    )?;
    let floor = 1.0 / n.round().max(1.0);
    let label = phase_at::label(&view.wells, floor);
    Ok((view, label))
}

/// The page's word for a finite-size label and one sentence on the wells behind it.
pub fn describe_finite(view: &WellView, label: PhaseLabel, n: f64) -> (&'static str, String) {
    let side: Vec<f64> = view
        .wells
        .minima
        .iter()
        .filter(|m| m.rho > 0.0)
        .map(|m| m.rho)
        .collect();
    let name = label_name(label);
    let mass = view.wells.side_mass;
    let wells_text = if side.is_empty() {
        "U has one well, at ρ = 0".to_string()
    } else {
        let at: Vec<String> = side.iter().map(|r| format!("±{r:.4}")).collect();
        let centre = if view.wells.barrier == Some(0.0) {
            "no central well"
        } else {
            "a central well"
        };
        format!(
            "side wells at ρ = {} and {centre}; the side wells hold {:.3} of the mass (1/N = {:.3})",
            at.join(", "),
            mass,
            1.0 / n
        )
    };
    match label {
        PhaseLabel::Gfl => ("unaligned", format!("{name}: {wells_text}")),
        PhaseLabel::GmflI => ("mixed", format!("{name}: {wells_text}")),
        PhaseLabel::GmflII => ("aligned", format!("{name}: {wells_text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dense trapezoid reference of the mass and E[ρ²] of e^{−u} on [a, b].
    fn dense(u: impl Fn(f64) -> f64, a: f64, b: f64, shift: f64) -> (f64, f64) {
        let n = 400_000;
        let h = (b - a) / n as f64;
        let (mut m0, mut m2) = (0.0, 0.0);
        for i in 0..=n {
            let r = a + i as f64 * h;
            let w = if i == 0 || i == n { 0.5 } else { 1.0 } * (-(u(r) - shift)).exp();
            m0 += w * h;
            m2 += w * h * r * r;
        }
        (m0, m2)
    }

    /// The minima follow u: below the fold the centre only; past coexistence the side minimum
    /// is deepest and moves outward as u grows; the moments match a dense quadrature.
    #[test]
    fn mean_field_wells_follow_u_and_match_dense_quadrature() {
        let (s, b, c, d) = (0.5, 0.3, -0.3, 20.0);
        let mf = MeanField::new(s, b, c).unwrap();
        let rep = flscale::cavity::phase(s, b, c, 20).unwrap();
        let below = mean_field_wells(&mf, 0.9 * rep.u_fold.u, d).unwrap();
        assert!(
            below.wells.minima.iter().all(|m| m.rho == 0.0),
            "{:?}",
            below.wells
        );
        let at = mean_field_wells(&mf, rep.u_coexist.u, d).unwrap();
        let side = at.wells.minima.iter().find(|m| m.rho > 0.0).unwrap();
        assert!(
            (side.rho - rep.rho_star).abs() < 1e-6,
            "{} vs {}",
            side.rho,
            rep.rho_star
        );
        assert!(side.depth.abs() < 1e-6, "{}", side.depth);
        let r_side = at.r_side.unwrap();
        assert!(
            (r_side - rep.r_aligned_at_d.unwrap()).abs() < 1e-3 * r_side,
            "{r_side} vs {:?}",
            rep.r_aligned_at_d
        );
        let past = mean_field_wells(&mf, 1.1 * rep.u_coexist.u, d).unwrap();
        let side_past = past.wells.minima.iter().find(|m| m.rho > 0.0).unwrap();
        assert!(side_past.rho > side.rho && side_past.depth < 0.0);
        let u = |r: f64| d * mf.potential(1.1 * rep.u_coexist.u, r);
        let shift = side_past.depth;
        let cut = past.wells.barrier.unwrap();
        let (c0, c2) = dense(u, 0.0, cut, shift);
        let (s0, s2) = dense(u, cut, past.rho_end, shift);
        assert!((past.r_side.unwrap() - s2 / s0).abs() < 1e-6 * s2 / s0);
        assert!((past.r_centre.unwrap() - c2 / c0).abs() < 1e-6 * c2 / c0);
        assert!((past.wells.side_mass - s0 / (c0 + s0)).abs() < 1e-6);
    }

    /// A point whose posterior reaches far beyond what the page resolves is refused at once
    /// with one sentence, not integrated for seconds.
    #[test]
    fn extreme_points_are_refused_quickly() {
        let mf = MeanField::new(0.5, 0.3, -0.3).unwrap();
        let t = std::time::Instant::now();
        let e = mean_field_wells(&mf, 1e12, 1e6).unwrap_err();
        assert!(e.to_string().contains("too extreme for the page"), "{e}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
    }

    /// The finite-size phase comes from U's own minima: at P = 10 (u = 100, far past the
    /// mean-field coexistence) U has a single well at ρ = 0, and the label says unaligned.
    #[test]
    fn finite_phase_is_read_from_its_own_minima() {
        let (d, n, t) = (20.0, 20.0, 0.05);
        let small = FiniteModel::new(d, 10.0, t, 1.0 / n, 0.5).unwrap();
        assert!(
            small.u()
                > 3.0
                    * flscale::cavity::phase(0.5, 0.3, -0.3, 20)
                        .unwrap()
                        .u_coexist
                        .u
        );
        let (view, label) = finite_wells(&small, 0.3, -0.3, n).unwrap();
        let (word, text) = describe_finite(&view, label, n);
        assert_eq!((word, label), ("unaligned", PhaseLabel::Gfl), "{text}");
        // A brute-force scan of U finds no minimum but ρ = 0.
        let u = |r: f64| small.potential(r, 0.3, -0.3);
        let grid: Vec<f64> = (0..20_000).map(|i| u(i as f64 * 1e-4)).collect();
        assert!(grid.windows(2).all(|w| w[1] >= w[0]));
        let big = FiniteModel::new(d, 600.0, t, 1.0 / n, 0.5).unwrap();
        let (view, label) = finite_wells(&big, 0.3, -0.3, n).unwrap();
        let side = view.outermost();
        assert!(side > 0.0 && label != PhaseLabel::Gfl, "{:?}", view.wells);
        // The label is the one `cavity sweep` gives the same (b, c).
        for m in [&small, &big] {
            let lib = phase_at::phase_at_fixed_point(m, (0.3, -0.3), 0.0, 20).unwrap();
            assert_eq!(finite_wells(m, 0.3, -0.3, n).unwrap().1, lib.label);
        }
        let scan_min = (1..400_000)
            .map(|i| i as f64 * 2e-5)
            .min_by(|a, b| {
                big.potential(*a, 0.3, -0.3)
                    .total_cmp(&big.potential(*b, 0.3, -0.3))
            })
            .unwrap();
        assert!((scan_min - side).abs() < 4e-5, "{scan_min} vs {side}");
    }
}
