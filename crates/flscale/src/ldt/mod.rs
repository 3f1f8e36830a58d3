//! Large deviations of the prior alignment: the Chernoff computation of paper App. A.3, B.2,
//! B.3 for a two-layer erf network learning Ĥe₃ (spec 05 A).
//!
//! * [`mgf`]: Z(t) = E_w exp(t²σ₂²h(w)²/(2N)) as a 1-D integral over β = w·w\* (the paper's
//!   q ≈ σ₁² + β²) or a 2-D one ([`Perp::Exact`]), adaptive Gauss–Kronrod to 1e-12 relative.
//! * [`rate`]: E(α) = sup_t [tα − N log Z(t)], t\* by bracketing + Brent, P\* ∝ 2κE(α).
//! * [`tilted`]: the tilted overlap law p_{t\*}(β) — its peaks are the predicted
//!   specialisation pattern (Fig. 2(a)).
//! * [`scaling`]: the exponent of E in d at N = d^ν (prediction (1+ν)/2, App. E.1.1).
//!
//! ```
//! use flscale::ldt::{LdtModel, Perp};
//! let m = LdtModel { d: 40.0, n: 40.0, sigma1_sq: 1.0, sigma2_sq: 1.0, perp: Perp::Prior };
//! let r = m.rate(1.0, 1.0).unwrap();
//! assert!(r.rate > 0.0 && r.t_star > 0.0);
//! ```

pub mod mgf;
pub mod quad;
pub mod rate;
pub mod scaling;
pub mod tilted;

#[cfg(test)]
mod tests;

pub use mgf::{h_overlap, h_squared, LdtModel, MgfValue, Perp};
pub use rate::{rate_curve, RatePoint};
pub use scaling::{fit_line, scaling_fit, ScalingFit, ScalingPoint};
pub use tilted::{Peak, TiltedDistribution};

use crate::plot::{LineChart, Mark, Series};

/// The paper's Fig. 2(a) setting: N = d = 40, σ₁² = σ₂² = 1 (App. F.0.1; P = 40d, κ = 1 enter
/// only through P\* and the posterior's effective tilt t ≈ P/κ).
pub fn fig2a_model(perp: Perp) -> LdtModel {
    LdtModel {
        d: 40.0,
        n: 40.0,
        sigma1_sq: 1.0,
        sigma2_sq: 1.0,
        perp,
    }
}

/// The tilted law drawn as −log density against β, the way the paper shows overlap
/// histograms (Fig. 2(a)); one series per distribution.
pub fn tilted_chart(dists: &[(String, &TiltedDistribution)]) -> LineChart {
    let mut notes = Vec::new();
    let series = dists
        .iter()
        .map(|(label, dist)| {
            notes.push(format!(
                "{label}: t = {:.4}, beta* = {:.3}, side mass {:.3}",
                dist.t, dist.beta_star, dist.side_mass
            ));
            Series::new(
                label.clone(),
                dist.density
                    .iter()
                    .filter(|(_, p)| *p > 0.0)
                    .map(|&(b, p)| (b, -p.ln()))
                    .collect(),
                Mark::Line,
            )
        })
        .collect();
    LineChart {
        title: "Tilted overlap distribution at t* (App. B.3)".into(),
        x_label: "beta = w . w*".into(),
        y_label: "-log p_t*(beta)".into(),
        log_x: false,
        log_y: false,
        series,
        notes,
    }
}

/// A sampled overlap histogram's bins (low, high, count) as (bin centre, density):
/// density = count/(total·width), total over the bins (overlaps beyond the histogram's range,
/// ±3σ₁ for the fig2a preset, are not in it). Empty bins are dropped (−log 0 has no point).
pub fn histogram_density(bins: &[(f64, f64, u64)]) -> crate::error::Result<Vec<(f64, f64)>> {
    let total: u64 = bins.iter().map(|b| b.2).sum();
    if total == 0 {
        return Err(crate::error::Error::invalid(
            "the overlap histogram is empty; run the sampler with histogram output first",
        ));
    }
    if let Some(b) = bins.iter().find(|b| !(b.0.is_finite() && b.1 > b.0)) {
        return Err(crate::error::Error::invalid(format!(
            "histogram bin [{}, {}] is not allowed; bins need finite edges with low < high",
            b.0, b.1
        )));
    }
    Ok(bins
        .iter()
        .filter(|b| b.2 > 0)
        .map(|&(lo, hi, c)| (0.5 * (lo + hi), c as f64 / (total as f64 * (hi - lo))))
        .collect())
}

/// The fraction of overlaps with |β| > `threshold` in a histogram (bins straddling the
/// threshold count in proportion to their overlap, i.e. assuming a flat density within a bin).
pub fn histogram_tail_fraction(bins: &[(f64, f64, u64)], threshold: f64) -> f64 {
    let total: u64 = bins.iter().map(|b| b.2).sum();
    let beyond: f64 = bins
        .iter()
        .map(|&(lo, hi, c)| {
            let inside = |a: f64, b: f64| (b.min(hi) - a.max(lo)).max(0.0);
            let outside = inside(f64::NEG_INFINITY, -threshold) + inside(threshold, f64::INFINITY);
            c as f64 * outside / (hi - lo)
        })
        .sum();
    beyond / total.max(1) as f64
}

/// The tilted law's mass at |β| > `threshold`, by the trapezoid rule on its density table
/// (accurate to the table's resolution; the table must reach well beyond the side peaks).
pub fn tilted_tail_fraction(dist: &TiltedDistribution, threshold: f64) -> f64 {
    let (mut total, mut beyond) = (0.0, 0.0);
    for w in dist.density.windows(2) {
        let (b0, p0) = w[0];
        let (b1, p1) = w[1];
        let area = 0.5 * (p0 + p1) * (b1 - b0);
        total += area;
        if (0.5 * (b0 + b1)).abs() > threshold {
            beyond += area;
        }
    }
    beyond / total
}

/// The paper's Fig. 2(a): the tilted law at t as −log density (line) over the −log density of
/// a sampled first-layer overlap histogram (points). The line stops 8 nats above the
/// histogram's highest point, so that its far tails do not squeeze the comparison.
pub fn tilted_overlay_chart(
    dist: &TiltedDistribution,
    label: &str,
    histogram: &[(f64, f64)],
    histogram_label: &str,
) -> LineChart {
    let ceiling = histogram
        .iter()
        .map(|&(_, p)| -p.ln())
        .fold(f64::NEG_INFINITY, f64::max)
        + 8.0;
    LineChart {
        title: "First-layer overlaps: Langevin histogram and the tilted law (Fig. 2(a))".into(),
        x_label: "beta = w . w*".into(),
        y_label: "-log density".into(),
        log_x: false,
        log_y: false,
        series: vec![
            Series::new(
                histogram_label,
                histogram.iter().map(|&(b, p)| (b, -p.ln())).collect(),
                Mark::Points,
            ),
            Series::new(
                label,
                dist.density
                    .iter()
                    .filter(|(_, p)| *p > 0.0 && -p.ln() <= ceiling)
                    .map(|&(b, p)| (b, -p.ln()))
                    .collect(),
                Mark::Line,
            ),
        ],
        notes: vec![format!(
            "{label}: t = {:.4}, beta* = {:.3}, side mass {:.3}",
            dist.t, dist.beta_star, dist.side_mass
        )],
    }
}

/// E(α) against d on log-log axes with the fitted power law.
pub fn scaling_chart(fits: &[&ScalingFit]) -> LineChart {
    let mut series = Vec::new();
    let mut notes = Vec::new();
    for fit in fits {
        let label = format!("nu = {}, perp = {:?}", fit.nu, fit.perp).to_lowercase();
        series.push(Series::new(
            label.clone(),
            fit.points.iter().map(|p| (p.d, p.rate.rate)).collect(),
            Mark::Points,
        ));
        series.push(Series::new(
            format!("fit d^{:.3}", fit.exponent),
            fit.points
                .iter()
                .map(|p| (p.d, (fit.intercept + fit.exponent * p.d.ln()).exp()))
                .collect(),
            Mark::Dashed,
        ));
        notes.push(format!(
            "{label}: exponent {:.3} (predicted {:.3})",
            fit.exponent, fit.predicted_exponent
        ));
    }
    LineChart {
        title: format!(
            "Chernoff rate E(alpha = {}) against d at N = d^nu",
            fits.first().map(|f| f.alpha).unwrap_or(1.0)
        ),
        x_label: "d".into(),
        y_label: "E(alpha)".into(),
        log_x: true,
        log_y: true,
        series,
        notes,
    }
}

/// E(α) against α.
pub fn rate_chart(model: &LdtModel, points: &[RatePoint]) -> LineChart {
    LineChart {
        title: format!(
            "Chernoff rate, d = {}, N = {}, perp = {:?}",
            model.d, model.n, model.perp
        ),
        x_label: "alpha".into(),
        y_label: "E(alpha)".into(),
        log_x: false,
        log_y: false,
        series: vec![Series::new(
            "E(alpha)",
            points.iter().map(|p| (p.alpha, p.rate)).collect(),
            Mark::LinePoints,
        )],
        notes: vec![],
    }
}
