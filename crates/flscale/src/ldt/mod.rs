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
