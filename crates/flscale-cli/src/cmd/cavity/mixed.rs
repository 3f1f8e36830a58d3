//! The mixed phase GMFL-I (Rubin, Seroussi & Ringel 2024): the phase text of a solution,
//! `flscale cavity sweep --over n|t|eps` and `flscale cavity continuum` (the equivalent-kernel
//! solution at finite D and D → ∞, and the onset of the mixed phase along a path).

use std::path::PathBuf;

use clap::Args;
use flscale::cavity::continuum::{self, Network, PathVariable};
use flscale::cavity::phase_at::{label_name, PhaseAtFixedPoint};
use flscale::cavity::sweep_over::{parse_variable, sweep_over, sweep_over_chart, SweepVariable};
use flscale::cavity::{figures, BranchSolution};
use flscale::plot::write_figure;
use flscale::{Error, Result};
use serde_json::json;

use super::{to_json, ModelArgs};
use crate::cmd::{out, out_json};

/// One line: the label, side-well mass, distance to coexistence/spinodal and the wells.
pub(super) fn phase_text(ph: &PhaseAtFixedPoint) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.4}"));
    let wells: Vec<String> = ph
        .wells
        .minima
        .iter()
        .map(|m| {
            if m.rho == 0.0 {
                format!("ρ = 0 (U'' = {:.4})", m.curvature)
            } else {
                format!(
                    "ρ = {:.4} (U − U(0) = {:+.4}, U'' = {:.4})",
                    m.rho, m.depth, m.curvature
                )
            }
        })
        .collect();
    format!(
        "  phase {}: side-well mass {:.4e} ({:.3} neurons), u/u_coexist {}, u/u_spinodal {}, cubic fraction 1 − c/ε {}; minima {}\n",
        label_name(ph.label),
        ph.wells.side_mass,
        ph.side_neurons,
        opt(ph.u_over_coexist),
        opt(ph.u_over_spinodal),
        opt(ph.cubic_fraction),
        wells.join(", ")
    )
}

/// The solver record of a solution.
pub(super) fn solver_text(s: &BranchSolution) -> String {
    format!(
        "  solver {:?}: residual max|G − id| = {:.2e} after {} iterations, {} map evaluations\n",
        s.solver, s.last_step, s.iterations, s.map_evaluations
    )
    .to_lowercase()
}

/// Arguments of `flscale cavity sweep`.
#[derive(Debug, Args)]
pub(super) struct SweepOverArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The parameter to vary: n (width), t (likelihood variance) or eps (ε).
    #[arg(long)]
    over: String,
    /// Its values (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    values: Vec<f64>,
    /// Number of training samples P.
    #[arg(long, default_value_t = 150)]
    p: usize,
    /// With --over n: the layer's readout variance σ_a² = N·s_a², held fixed (s_a² = σ_a²/N per
    /// weight, the paper's convention). Default: 1 (s_a² = 1/N) unless --s-a2 is given.
    #[arg(long = "readout-total")]
    readout_total: Option<f64>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Write R, the cubic fraction and the phase band against the parameter (.svg or .png).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(super) fn run_sweep_over(a: SweepOverArgs) -> Result<()> {
    let over = parse_variable(&a.over)?;
    let base = a.model.params(a.p)?;
    let readout_total = match (over, a.readout_total, a.model.s_a2) {
        (SweepVariable::N, Some(t), _) => {
            Some(flscale::error::require_positive("--readout-total", t)?)
        }
        (SweepVariable::N, None, None) => Some(1.0),
        (_, Some(_), _) => {
            return Err(Error::invalid(
                "--readout-total is only allowed with --over n",
            ))
        }
        _ => None,
    };
    let rep = sweep_over(&base, over, &a.values, readout_total)?;
    if let Some(path) = &a.out {
        write_figure(path, 900, 600, &sweep_over_chart(&rep))?;
    }
    if a.json {
        return out_json(&to_json(&rep)?);
    }
    let mut s = format!(
        "# sweep over {} at P = {}, D = {}, seed {}; each value solved from both starts\n",
        a.over, base.p, base.d, base.seed
    );
    for (x, p) in rep.values.iter().zip(&rep.points) {
        s += &format!(
            "{} = {x}: N = {}, T = {}, s_a² = {:.6e}, ε = {}, u = {:.4}\n",
            a.over, p.params.n, p.params.t, p.params.s_a2, p.params.eps, p.unaligned.u
        );
        for sol in [&p.unaligned, &p.aligned] {
            s += &format!(
                "  {:<9} b = {:+.6}  c = {:+.6}  R = {:.6}  test MSE/E[y²] = {:.4}{}\n",
                flscale::cavity::adaptive::branch_name(sol.branch),
                sol.b,
                sol.c,
                sol.r,
                sol.test_mse_relative,
                if sol.converged {
                    ""
                } else {
                    " (NOT converged)"
                }
            );
            s += &phase_text(&sol.phase);
            s += &solver_text(sol);
        }
    }
    if let Some(path) = &a.out {
        s += &format!("figure: {}\n", path.display());
    }
    out(&s)
}

/// Arguments of `flscale cavity continuum`.
#[derive(Debug, Args)]
pub(super) struct ContinuumArgs {
    /// The paper's setting to start from: main (§3.1.1: D = 150, N = 700, P = 3000, T = 0.2,
    /// s_a² = 8/N², σ_w² = 0.5, ε = −0.3) or app-d (App. D: D = 150, N = 1400, P = 600,
    /// T = 0.05, s_a² = 0.011/N, σ_w² = 0.5, ε = −1.2). The flags below override it.
    #[arg(long, default_value = "main")]
    paper: String,
    /// Input dimension D.
    #[arg(long)]
    d: Option<f64>,
    /// Width N.
    #[arg(long)]
    n: Option<f64>,
    /// Number of samples P.
    #[arg(long)]
    p: Option<f64>,
    /// Likelihood variance T (the paper's σ²).
    #[arg(long)]
    t: Option<f64>,
    /// Readout variance per weight s_a² (the paper's σ_a²/N).
    #[arg(long = "s-a2")]
    s_a2: Option<f64>,
    /// σ_w².
    #[arg(long = "sigma-w2")]
    sigma_w2: Option<f64>,
    /// ε.
    #[arg(long)]
    eps: Option<f64>,
    /// The path variable: t, n or p (along n, N·s_a² is held).
    #[arg(long, default_value = "t")]
    over: String,
    /// Its values (comma-separated; default: T = 0.10, 0.11, … , 0.30).
    #[arg(long, value_delimiter = ',')]
    values: Vec<f64>,
    /// Also solve the EK equations at these D (a convergence table toward D → ∞).
    #[arg(long = "d-values", value_delimiter = ',')]
    d_values: Vec<f64>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Write the learned fractions and the phase band along the path (.svg or .png).
    #[arg(long)]
    out: Option<PathBuf>,
}

fn paper_network(name: &str) -> Result<Network> {
    match name {
        "main" => Ok(Network {
            d: 150.0,
            n: 700.0,
            p: 3000.0,
            t: 0.2,
            s_a2: 8.0 / (700.0 * 700.0),
            sigma_w2: 0.5,
            eps: -0.3,
        }),
        "app-d" => Ok(Network {
            d: 150.0,
            n: 1400.0,
            p: 600.0,
            t: 0.05,
            s_a2: 0.011 / 1400.0,
            sigma_w2: 0.5,
            eps: -1.2,
        }),
        other => Err(Error::invalid(format!(
            "--paper {other:?} is not allowed; it must be main or app-d"
        ))),
    }
}

fn path_variable(s: &str) -> Result<PathVariable> {
    match s {
        "t" => Ok(PathVariable::T),
        "n" => Ok(PathVariable::N),
        "p" => Ok(PathVariable::P),
        other => Err(Error::invalid(format!(
            "--over {other:?} is not allowed; it must be t, n or p"
        ))),
    }
}

fn network(a: &ContinuumArgs) -> Result<Network> {
    let mut net = paper_network(&a.paper)?;
    let set = |slot: &mut f64, v: Option<f64>| {
        if let Some(v) = v {
            *slot = v;
        }
    };
    set(&mut net.d, a.d);
    set(&mut net.n, a.n);
    set(&mut net.p, a.p);
    set(&mut net.t, a.t);
    set(&mut net.s_a2, a.s_a2);
    set(&mut net.sigma_w2, a.sigma_w2);
    set(&mut net.eps, a.eps);
    continuum::Invariants::of_network(&net)?;
    Ok(net)
}

pub(super) fn run_continuum(a: ContinuumArgs) -> Result<()> {
    let net = network(&a)?;
    let var = path_variable(&a.over)?;
    let values: Vec<f64> = if a.values.is_empty() {
        (0..=20).map(|i| 0.1 + 0.01 * i as f64).collect()
    } else {
        a.values.clone()
    };
    for &v in values.iter().chain(&a.d_values) {
        flscale::error::require_positive("--values / --d-values", v)?;
    }
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
    let onset = if lo < hi {
        continuum::onset(&net, var, lo, hi)?
    } else {
        None
    };
    let points = continuum::path(&net, var, &values)?;
    let convergence: Vec<serde_json::Value> = points
        .iter()
        .map(|pt| {
            let rows: Vec<serde_json::Value> = a
                .d_values
                .iter()
                .map(|&d| match continuum::solve_finite(&pt.invariants, d) {
                    Ok(s) => to_json(&s).unwrap_or(serde_json::Value::Null),
                    Err(e) => json!({ "d": d, "error": e.to_string() }),
                })
                .collect();
            json!({ "x": pt.x, "finite_d": rows })
        })
        .collect();
    if let Some(path) = &a.out {
        write_figure(
            path,
            900,
            600,
            &figures::continuum_chart(&points, &a.over, onset),
        )?;
    }
    if a.json {
        return out_json(&json!({
            "network": to_json(&net)?,
            "over": a.over,
            "onset": onset,
            "points": to_json(&points)?,
            "convergence": if a.d_values.is_empty() { serde_json::Value::Null } else { json!(convergence) },
        }));
    }
    out(&continuum_text(&a, &net, &points, onset, &convergence))
}

fn continuum_text(
    a: &ContinuumArgs,
    net: &Network,
    points: &[continuum::PathPoint],
    onset: Option<f64>,
    convergence: &[serde_json::Value],
) -> String {
    let mut s = format!(
        "# EK self-consistency (paper App. A.3) along {}: D = {}, N = {}, P = {}, T = {}, s_a² = {:.4e}, σ_w² = {}, ε = {}\n",
        a.over, net.d, net.n, net.p, net.t, net.s_a2, net.sigma_w2, net.eps
    );
    s += &format!(
        "{:>9} {:>9} {:>7} | {:>9} {:>9} {:>8} {:>9} {:>8} | {:>9} {:>9} {:>8} {:>9} {:>8}\n",
        a.over,
        "u",
        "κ",
        "b ∞",
        "1−c/ε ∞",
        "φ ∞",
        "u/u_c ∞",
        "phase",
        "b D",
        "1−c/ε D",
        "φ D",
        "u/u_c D",
        "phase"
    );
    let cols = |o: &Option<continuum::ContinuumSolution>| match o {
        Some(x) => format!(
            "{:>+9.5} {:>9.5} {:>8.4} {:>9.5} {:>8}",
            x.b,
            x.cubic_fraction,
            x.side_mass_times_d,
            x.u_over_coexist.unwrap_or(f64::NAN),
            label_name(x.label)
        ),
        None => format!("{:>47}", "no solution"),
    };
    for p in points {
        s += &format!(
            "{:>9.5} {:>9.4} {:>7.4} | {} | {}\n",
            p.x,
            p.invariants.u,
            p.invariants.kappa,
            cols(&p.limit),
            cols(&p.finite_d)
        );
    }
    s += "φ = D·(side-well mass); u/u_c = u/u_coexist(b, c) (closed form); '∞' = D → ∞ at fixed u, κ\n";
    s += &match onset {
        Some(x) => format!(
            "D → ∞ onset of the mixed phase GMFL-I: {} = {x:.6}\n",
            a.over
        ),
        None => "D → ∞ onset of the mixed phase: none in the range\n".to_string(),
    };
    if !a.d_values.is_empty() {
        s += "convergence in D (b, c, φ at each D):\n";
        for row in convergence {
            s += &format!("  {} = {}:", a.over, row["x"]);
            for r in row["finite_d"].as_array().into_iter().flatten() {
                s += &format!(
                    "  D = {}: b {} c {} φ {}",
                    r["d"], r["b"], r["c"], r["side_mass_times_d"]
                );
            }
            s += "\n";
        }
    }
    if let Some(path) = &a.out {
        s += &format!("figure: {}\n", path.display());
    }
    s
}
