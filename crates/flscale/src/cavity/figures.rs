//! Figures of the solvable model, built on [`crate::plot::LineChart`]: the potential for
//! several u (the shape of blog Fig. 4.1), the (c, u) phase diagram, and R(P) with the test
//! error along both branches (the curve of spec 04 `sweep-p`).

use crate::plot::{LineChart, Mark, Series};

use super::langevin::LangevinCurve;
use super::phase::PhaseRow;
use super::sweep_p::SweepReport;

/// One potential curve: its legend label and (ρ, value) points.
pub type Curve = (String, Vec<(f64, f64)>);

/// (U(ρ) − min U) per curve against ρ, like blog Fig. 4.1 (which plots (Ũ_u − min Ũ_u)/D).
pub fn potential_chart(
    title: &str,
    y_label: &str,
    curves: Vec<Curve>,
    notes: Vec<String>,
) -> LineChart {
    LineChart {
        title: title.into(),
        x_label: "overlap ρ = w·e".into(),
        y_label: y_label.into(),
        log_x: false,
        log_y: false,
        series: curves
            .into_iter()
            .map(|(label, pts)| Series::new(label, pts, Mark::Line))
            .collect(),
        notes,
    }
}

/// The phase diagram over (c, u) at fixed σ_w², b: fold, coexistence and spinodal lines
/// (log u axis). Between fold and coexistence the side wells are metastable; between
/// coexistence and spinodal the centre is.
pub fn phase_diagram_chart(sigma_w2: f64, b: f64, rows: &[PhaseRow]) -> LineChart {
    let line = |pick: &dyn Fn(&PhaseRow) -> Option<f64>| {
        rows.iter()
            .filter_map(|r| pick(r).map(|u| (r.c, u)))
            .collect::<Vec<_>>()
    };
    LineChart {
        title: format!("Mean-field phases, σ_w² = {sigma_w2}, b = {b}"),
        x_label: "cubic residual c".into(),
        y_label: "interaction strength u = P²s_a²/(T²D)".into(),
        log_x: false,
        log_y: true,
        series: vec![
            Series::new(
                "fold (side minima appear)",
                line(&|r| r.u_fold),
                Mark::Dashed,
            ),
            Series::new(
                "coexistence (equal depth)",
                line(&|r| r.u_coexist),
                Mark::Line,
            ),
            Series::new(
                "spinodal (U''(0) = 0)",
                line(&|r| r.u_spinodal),
                Mark::Dashed,
            ),
        ],
        notes: vec!["aligned phase above the coexistence line".into()],
    }
}

/// R(P) and the relative test MSE along both branches, with the alignment threshold.
/// R(P) and the relative test error along both branches; with `langevin`, the Langevin
/// engine's measured R(P) (cold and, if measured, hot start) on the same axes.
pub fn sweep_chart(rep: &SweepReport, langevin: Option<&LangevinCurve>) -> LineChart {
    let pts = |v: &[super::adaptive::BranchSolution],
               f: &dyn Fn(&super::adaptive::BranchSolution) -> f64| {
        v.iter().map(|s| (s.p as f64, f(s))).collect::<Vec<_>>()
    };
    let (p0, p1) = (
        *rep.p_values.first().unwrap_or(&1) as f64,
        *rep.p_values.last().unwrap_or(&1) as f64,
    );
    let mut notes = vec![format!(
        "D = {}, N = {}, T = {}, s_a² = {}, σ_w² = {}, ε = {}",
        rep.params.d,
        rep.params.n,
        rep.params.t,
        rep.params.s_a2,
        rep.params.sigma_w2,
        rep.params.eps
    )];
    for end in &rep.branch_ends {
        let (a, b) = end.between;
        notes.push(format!(
            "{} branch ends between P = {a} and {b}",
            super::adaptive::branch_name(end.branch)
        ));
    }
    if let Some(p) = rep.p_transition {
        notes.push(format!("free energies cross at P ≈ {p:.1}"));
    }
    // A log R axis only when R spans decades (the shared chart labels a log axis by decades).
    let lv_cold: Vec<(f64, f64)> = langevin
        .map(|c| c.points.iter().map(|p| (p.p as f64, p.r)).collect())
        .unwrap_or_default();
    let lv_hot: Vec<(f64, f64)> = langevin
        .map(|c| {
            c.points
                .iter()
                .filter_map(|p| p.r_hot.map(|r| (p.p as f64, r)))
                .collect()
        })
        .unwrap_or_default();
    let values: Vec<f64> = rep
        .unaligned
        .iter()
        .chain(&rep.aligned)
        .flat_map(|s| [s.r, s.test_mse_relative])
        .chain(lv_cold.iter().chain(&lv_hot).map(|p| p.1))
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
    let mut series = vec![
        Series::new(
            "R, from small alignment",
            pts(&rep.unaligned, &|s| s.r),
            Mark::LinePoints,
        ),
        Series::new(
            "R, from large alignment",
            pts(&rep.aligned, &|s| s.r),
            Mark::LinePoints,
        ),
        Series::new(
            "test MSE, from small",
            pts(&rep.unaligned, &|s| s.test_mse_relative),
            Mark::Dashed,
        ),
        Series::new(
            "test MSE, from large",
            pts(&rep.aligned, &|s| s.test_mse_relative),
            Mark::Dashed,
        ),
        Series::new(
            "R threshold σ_w²/√D",
            vec![(p0, rep.r_threshold), (p1, rep.r_threshold)],
            Mark::Dashed,
        ),
    ];
    if !lv_cold.is_empty() {
        series.push(Series::new("Langevin R, cold start", lv_cold, Mark::Points));
    }
    if !lv_hot.is_empty() {
        series.push(Series::new("Langevin R, hot start", lv_hot, Mark::Points));
    }
    LineChart {
        title: if langevin.is_some() {
            "Adaptive kernel vs Langevin: R = E[ρ²] and test error vs P".into()
        } else {
            "Adaptive kernel: alignment R = E[ρ²] and test error vs P".into()
        },
        x_label: "P (training samples)".into(),
        y_label: "R, test MSE / E[y²]".into(),
        log_x: true,
        log_y: hi > 20.0 * lo,
        series,
        notes,
    }
}

/// The EK solutions along a path: the learned linear (1 − b) and cubic (1 − c/ε) fractions at
/// D → ∞ and at the network's D, with the phase band (0 = GFL, ½ = GMFL-I, 1 = GMFL-II).
pub fn continuum_chart(
    points: &[super::continuum::PathPoint],
    x_label: &str,
    onset: Option<f64>,
) -> LineChart {
    use super::continuum::ContinuumSolution;
    use super::sweep_over::phase_level;
    // `limit`: the D → ∞ solution, else the finite-D one.
    let curve = |limit: bool, f: &dyn Fn(&ContinuumSolution) -> f64| {
        points
            .iter()
            .filter_map(|p| {
                let s = if limit { &p.limit } else { &p.finite_d };
                s.as_ref().map(|s| (p.x, f(s)))
            })
            .collect::<Vec<_>>()
    };
    let (lim, fin) = (true, false);
    let mut notes = vec!["phase band: 0 = GFL, ½ = GMFL-I, 1 = GMFL-II".to_string()];
    if let Some(x) = onset {
        notes.push(format!("D → ∞ onset of the mixed phase at {x:.5}"));
    }
    LineChart {
        title: "Equivalent-kernel solution: learned fractions and phase, D → ∞ and finite D".into(),
        x_label: x_label.into(),
        y_label: "1 − c/ε, 1 − b, phase level".into(),
        log_x: false,
        log_y: false,
        series: vec![
            Series::new(
                "1 − c/ε, D → ∞",
                curve(lim, &|s| s.cubic_fraction),
                Mark::Line,
            ),
            Series::new(
                "1 − c/ε, finite D",
                curve(fin, &|s| s.cubic_fraction),
                Mark::LinePoints,
            ),
            Series::new(
                "1 − b, D → ∞",
                curve(lim, &|s| s.linear_fraction),
                Mark::Dashed,
            ),
            Series::new(
                "1 − b, finite D",
                curve(fin, &|s| s.linear_fraction),
                Mark::Points,
            ),
            Series::new(
                "phase band, D → ∞",
                curve(lim, &|s| phase_level(s.label)),
                Mark::Points,
            ),
            Series::new(
                "phase band, finite D",
                curve(fin, &|s| phase_level(s.label)),
                Mark::Points,
            ),
        ],
        notes,
    }
}
