//! `flscale cavity sweep --over n|t|eps`: the sampled-data self-consistent solution (both starts,
//! [`super::adaptive::solve`]) along one parameter, with the phase of every solution, and its
//! figure (R and the learned cubic fraction, with the phase band).
//!
//! The paths are the paper's: Rubin, Seroussi & Ringel (2024) App. D drives the transition by
//! the width N at n = 600, d = 150, ε = −1.2, σ² = 0.05, σ_a² = 0.011, σ_w² = 0.5; §3.1.1 by
//! the noise σ² (= T here).

use serde::Serialize;

use super::adaptive::{solve, AdaptiveParams, SolveReport};
use super::phase_at::{label_name, PhaseLabel};
use crate::error::{Error, Result};
use crate::plot::{LineChart, Mark, Series};

/// The parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SweepVariable {
    /// The width N; with `readout_total` the readout variance per weight is s_a² = σ_a²/N.
    N,
    /// The likelihood variance T.
    T,
    /// The cubic target strength ε.
    Eps,
}

/// Parses `n`, `t` or `eps`.
pub fn parse_variable(s: &str) -> Result<SweepVariable> {
    match s {
        "n" => Ok(SweepVariable::N),
        "t" => Ok(SweepVariable::T),
        "eps" => Ok(SweepVariable::Eps),
        other => Err(Error::invalid(format!(
            "--over {other:?} is not allowed; it must be n, t or eps"
        ))),
    }
}

/// Result of a parameter sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParamSweepReport {
    /// The varied parameter.
    pub over: SweepVariable,
    /// Its values, in the given order.
    pub values: Vec<f64>,
    /// With `over = n`: the readout variance of the whole layer σ_a² = N·s_a² held fixed.
    pub readout_total: Option<f64>,
    /// `solve` at each value.
    pub points: Vec<SolveReport>,
}

/// The parameters at one value of the sweep.
fn params_at(
    base: &AdaptiveParams,
    over: SweepVariable,
    x: f64,
    readout_total: Option<f64>,
) -> Result<AdaptiveParams> {
    let mut prm = base.clone();
    match over {
        SweepVariable::N => {
            if !(x >= 1.0 && x.fract() == 0.0 && x <= 1e9) {
                return Err(Error::invalid(format!(
                    "--values {x} is not allowed for --over n; widths must be integers in [1, 1e9]"
                )));
            }
            prm.n = x as usize;
            if let Some(total) = readout_total {
                prm.s_a2 = total / x;
            }
        }
        SweepVariable::T => prm.t = x,
        SweepVariable::Eps => prm.eps = x,
    }
    prm.validate()?;
    Ok(prm)
}

/// `solve` at every value of `over` (each on the same data seed).
pub fn sweep_over(
    base: &AdaptiveParams,
    over: SweepVariable,
    values: &[f64],
    readout_total: Option<f64>,
) -> Result<ParamSweepReport> {
    if values.is_empty() {
        return Err(Error::invalid("--values is empty; give at least one value"));
    }
    let points = values
        .iter()
        .map(|&x| params_at(base, over, x, readout_total).and_then(|p| solve(&p)))
        .collect::<Result<Vec<_>>>()?;
    Ok(ParamSweepReport {
        over,
        values: values.to_vec(),
        readout_total,
        points,
    })
}

/// 0 for GFL, ½ for GMFL-I, 1 for GMFL-II: the phase band's level on the [0, 1] axis.
pub fn phase_level(label: PhaseLabel) -> f64 {
    match label {
        PhaseLabel::Gfl => 0.0,
        PhaseLabel::GmflI => 0.5,
        PhaseLabel::GmflII => 1.0,
    }
}

/// R, the learned cubic fraction 1 − c/ε and the phase band (the level 0 / ½ / 1 of each
/// solution's label) against the swept parameter.
pub fn sweep_over_chart(rep: &ParamSweepReport) -> LineChart {
    let name = match rep.over {
        SweepVariable::N => "N (width)",
        SweepVariable::T => "T (likelihood variance)",
        SweepVariable::Eps => "ε (cubic target strength)",
    };
    let xs = &rep.values;
    let curve = |f: &dyn Fn(&SolveReport) -> f64| -> Vec<(f64, f64)> {
        xs.iter()
            .zip(&rep.points)
            .map(|(&x, p)| (x, f(p)))
            .collect()
    };
    let mut notes: Vec<String> = xs
        .iter()
        .zip(&rep.points)
        .map(|(x, p)| {
            format!(
                "{x}: {} (small start), {} (large start)",
                label_name(p.unaligned.phase.label),
                label_name(p.aligned.phase.label)
            )
        })
        .collect();
    notes.insert(0, "phase band: 0 = GFL, ½ = GMFL-I, 1 = GMFL-II".into());
    let frac = |s: &super::adaptive::BranchSolution| s.phase.cubic_fraction.unwrap_or(0.0);
    LineChart {
        title: "Adaptive kernel: R, learned cubic fraction and phase".into(),
        x_label: name.into(),
        y_label: "R = E[ρ²], 1 − c/ε, phase level".into(),
        log_x: matches!(rep.over, SweepVariable::N),
        log_y: false,
        series: vec![
            Series::new(
                "R, small start",
                curve(&|p| p.unaligned.r),
                Mark::LinePoints,
            ),
            Series::new("R, large start", curve(&|p| p.aligned.r), Mark::LinePoints),
            Series::new(
                "1 − c/ε, small start",
                curve(&|p| frac(&p.unaligned)),
                Mark::Dashed,
            ),
            Series::new(
                "1 − c/ε, large start",
                curve(&|p| frac(&p.aligned)),
                Mark::Dashed,
            ),
            Series::new(
                "phase band, small start",
                curve(&|p| phase_level(p.unaligned.phase.label)),
                Mark::Points,
            ),
        ],
        notes,
    }
}
