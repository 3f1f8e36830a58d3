//! `flscale cavity potential`, `phase` and `cubic`: the closed-form subcommands (the overlap
//! potential, its phases and the cubic sample scales; spec 04, blog text seed 001).

use std::path::PathBuf;

use clap::Args;
use flscale::cavity::{self, figures, FiniteModel, MeanField};
use flscale::plot::write_figure;
use flscale::{Error, Result};
use serde_json::json;

use super::{to_json, ResidualArgs};
use crate::cmd::{out, out_json};

#[derive(Debug, Args)]
pub(super) struct PotentialArgs {
    #[command(flatten)]
    pub(super) residual: ResidualArgs,
    /// Mean-field interaction strengths u = P²s_a²/(T²D) (comma-separated); default: just below
    /// the fold, at coexistence and at the spinodal.
    #[arg(long, value_delimiter = ',')]
    pub(super) u: Vec<f64>,
    /// Finite-size potential U(ρ; b, c) at these P instead of Ũ_u (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub(super) p: Vec<f64>,
    /// Input dimension D (finite potential).
    #[arg(long, default_value_t = 20.0)]
    pub(super) d: f64,
    /// Width N; s_a² defaults to 1/N (finite potential).
    #[arg(long, default_value_t = 20.0)]
    pub(super) n: f64,
    /// Likelihood variance T (finite potential).
    #[arg(long, default_value_t = 0.05)]
    pub(super) t: f64,
    /// Readout prior variance s_a² (default 1/N).
    #[arg(long = "s-a2")]
    pub(super) s_a2: Option<f64>,
    /// The grid spans ρ ∈ [−rho-max, rho-max].
    #[arg(long = "rho-max", default_value_t = 1.5)]
    pub(super) rho_max: f64,
    /// Number of grid points (2 … 100000).
    #[arg(long, default_value_t = 201)]
    pub(super) points: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub(super) json: bool,
    /// Write the figure (.svg or .png).
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(super) struct PhaseArgs {
    #[command(flatten)]
    pub(super) residual: ResidualArgs,
    /// Input dimension D for the finite-D moments R at coexistence.
    #[arg(long, default_value_t = 20)]
    pub(super) d: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(super) json: bool,
    /// Write the (c, u) phase diagram at this σ_w², b (.svg or .png).
    #[arg(long)]
    pub(super) diagram: Option<PathBuf>,
    /// Smallest c of the diagram.
    #[arg(long = "c-min", default_value_t = -1.0)]
    pub(super) c_min: f64,
    /// Largest c of the diagram.
    #[arg(long = "c-max", default_value_t = 1.0)]
    pub(super) c_max: f64,
    /// Number of c values in the diagram (2 … 10000).
    #[arg(long = "diagram-points", default_value_t = 201)]
    pub(super) diagram_points: usize,
}

#[derive(Debug, Args)]
pub(super) struct CubicArgs {
    /// Input dimension D.
    #[arg(long, default_value_t = 20.0)]
    pub(super) d: f64,
    /// Width N.
    #[arg(long, default_value_t = 20.0)]
    pub(super) n: f64,
    /// Likelihood variance T.
    #[arg(long, default_value_t = 0.05)]
    pub(super) t: f64,
    /// Readout prior variance s_a² (default 1/N).
    #[arg(long = "s-a2")]
    pub(super) s_a2: Option<f64>,
    /// Residual (b, c) that sets the aligned overlap ρ* and u_c; σ_w² the hidden prior.
    #[command(flatten)]
    pub(super) residual: ResidualArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(super) json: bool,
}

/// What `cavity potential` evaluates: the mean-field Ũ_u (one curve per u) or, when `p` is
/// not empty, the finite-size U(ρ; b, c) (one curve per P). Shared with `flscale serve`.
#[derive(Debug, Clone)]
pub struct PotentialInput {
    /// Hidden prior scale σ_w².
    pub sigma_w2: f64,
    /// Linear residual coefficient b.
    pub b: f64,
    /// Cubic residual coefficient c.
    pub c: f64,
    /// Mean-field interaction strengths; empty: just below the fold, coexistence, spinodal.
    pub u: Vec<f64>,
    /// Sample sizes of the finite potential (empty: mean-field).
    pub p: Vec<f64>,
    /// Input dimension D (finite potential).
    pub d: f64,
    /// Width N (finite potential; s_a² defaults to 1/N).
    pub n: f64,
    /// Likelihood variance T (finite potential).
    pub t: f64,
    /// Readout prior variance s_a² (default 1/N).
    pub s_a2: Option<f64>,
    /// The grid spans ρ ∈ [−rho_max, rho_max].
    pub rho_max: f64,
    /// Number of grid points (2 … 100000).
    pub points: usize,
}

/// The evaluated potential curves of [`potential_report`].
#[derive(Debug, Clone)]
pub struct PotentialReport {
    /// "mean-field" or "finite".
    pub kind: &'static str,
    /// The curves' parameter: "u" or "p".
    pub param_name: &'static str,
    /// The fixed parameters, one line.
    pub note: String,
    /// σ_w², b, c of the residual.
    pub residual: (f64, f64, f64),
    /// The ρ grid.
    pub rho: Vec<f64>,
    /// Per curve: label, parameter value, Ũ/D (or U/D) on the grid.
    pub curves: Vec<(String, f64, Vec<f64>)>,
}

impl PotentialReport {
    /// The JSON object of `flscale cavity potential --json`.
    pub fn to_json(&self) -> serde_json::Value {
        let cs: Vec<_> = self
            .curves
            .iter()
            .map(|(label, v, vals)| json!({ self.param_name: v, "label": label, "potential_over_d": vals }))
            .collect();
        let (sigma_w2, b, c) = self.residual;
        json!({
            "model": self.kind,
            "sigma_w2": sigma_w2, "b": b, "c": c,
            "parameters": self.note,
            "rho": self.rho,
            "curves": cs,
        })
    }
}

/// Evaluates the potential curves `a` asks for, validating every value (blog Fig. 4.1; the
/// formulas are in `flscale::cavity::potential`).
pub fn potential_report(a: &PotentialInput) -> Result<PotentialReport> {
    let mf = MeanField::new(a.sigma_w2, a.b, a.c)?;
    flscale::error::require_positive("rho-max", a.rho_max)?;
    if !(2..=100_000).contains(&a.points) {
        return Err(Error::invalid(format!(
            "points = {} is not allowed; it must be between 2 and 100000",
            a.points
        )));
    }
    let grid = cavity::potential::symmetric_grid(a.rho_max, a.points);
    let mut curves: Vec<(String, f64, Vec<f64>)> = Vec::new();
    if !a.p.is_empty() {
        if !a.u.is_empty() {
            return Err(Error::invalid(
                "--u and --p together are not allowed; --u draws the mean-field Ũ_u, --p the finite-size U",
            ));
        }
        let s_a2 = a.s_a2.unwrap_or(1.0 / a.n);
        flscale::error::require_positive("N (width)", a.n)?;
        for &p in &a.p {
            let model = FiniteModel::new(a.d, p, a.t, s_a2, a.sigma_w2)?;
            let vals = grid
                .iter()
                .map(|&x| model.potential(x, a.b, a.c) / a.d)
                .collect();
            curves.push((format!("P = {p} (u = {:.4})", model.u()), p, vals));
        }
        let note = format!(
            "D = {}, T = {}, s_a² = {s_a2}, σ_w² = {}, b = {}, c = {}",
            a.d, a.t, a.sigma_w2, a.b, a.c
        );
        return Ok(PotentialReport {
            kind: "finite",
            param_name: "p",
            note,
            residual: (a.sigma_w2, a.b, a.c),
            rho: grid,
            curves,
        });
    }
    let us = if a.u.is_empty() {
        let ph = cavity::phase(a.sigma_w2, a.b, a.c, 20)?;
        let mut v = vec![0.9 * ph.u_fold.u, ph.u_coexist.u];
        if let Some(s) = ph.u_spinodal {
            v.push(s.u);
        }
        v
    } else {
        a.u.clone()
    };
    for &u in &us {
        flscale::error::require_finite("u", u)?;
        if u < 0.0 {
            return Err(Error::invalid(format!(
                "u = {u} is not allowed; it must be ≥ 0"
            )));
        }
        let vals = grid.iter().map(|&x| mf.potential(u, x)).collect();
        curves.push((format!("u = {u:.4}"), u, vals));
    }
    Ok(PotentialReport {
        kind: "mean-field",
        param_name: "u",
        note: format!("σ_w² = {}, b = {}, c = {}", a.sigma_w2, a.b, a.c),
        residual: (a.sigma_w2, a.b, a.c),
        rho: grid,
        curves,
    })
}

pub(super) fn run_potential(a: PotentialArgs) -> Result<()> {
    let r = &a.residual;
    let rep = potential_report(&PotentialInput {
        sigma_w2: r.sigma_w2,
        b: r.b,
        c: r.c,
        u: a.u.clone(),
        p: a.p.clone(),
        d: a.d,
        n: a.n,
        t: a.t,
        s_a2: a.s_a2,
        rho_max: a.rho_max,
        points: a.points,
    })?;
    let finite = rep.kind == "finite";
    let (grid, curves, note) = (&rep.rho, &rep.curves, &rep.note);
    if let Some(path) = &a.out {
        let chart_curves = curves
            .iter()
            .map(|(label, _, vals)| {
                let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
                (
                    label.clone(),
                    grid.iter().zip(vals).map(|(&x, &v)| (x, v - min)).collect(),
                )
            })
            .collect();
        let title = if finite {
            "Finite-size overlap potential"
        } else {
            "Mean-field overlap potential"
        };
        let y = if finite {
            "(U(ρ) − min U)/D"
        } else {
            "(Ũ_u(ρ) − min Ũ_u)/D"
        };
        write_figure(
            path,
            900,
            600,
            &figures::potential_chart(title, y, chart_curves, vec![note.clone()]),
        )?;
    }
    if a.json {
        return out_json(&rep.to_json());
    }
    if a.out.is_some() {
        return Ok(());
    }
    let mut s = format!("# {} potential / D; {note}\n{:>10}", rep.kind, "rho");
    for (label, _, _) in curves {
        s += &format!(" {label:>22}");
    }
    s += "\n";
    for (i, x) in grid.iter().enumerate() {
        s += &format!("{x:>10.5}");
        for (_, _, vals) in curves {
            s += &format!(" {:>22.10e}", vals[i]);
        }
        s += "\n";
    }
    out(&s)
}

pub(super) fn run_phase(a: PhaseArgs) -> Result<()> {
    let r = &a.residual;
    let rep = cavity::phase(r.sigma_w2, r.b, r.c, a.d)?;
    if let Some(path) = &a.diagram {
        if !(2..=10_000).contains(&a.diagram_points) {
            return Err(Error::invalid(format!(
                "diagram-points = {} is not allowed; it must be between 2 and 10000",
                a.diagram_points
            )));
        }
        let rows = cavity::phase_diagram(r.sigma_w2, r.b, a.c_min, a.c_max, a.diagram_points)?;
        write_figure(
            path,
            900,
            600,
            &figures::phase_diagram_chart(r.sigma_w2, r.b, &rows),
        )?;
    }
    if a.json {
        return out_json(&to_json(&rep)?);
    }
    let fmt = |name: &str, l: &cavity::phase::Located| {
        format!(
            "{name:<11} u = {:.10}  (closed form {:.10}, rel. diff {:.1e})  ρ = {:.7}\n",
            l.u, l.u_closed_form, l.rel_diff, l.rho
        )
    };
    let mut s = format!(
        "Mean-field phases of Ũ_u(ρ) for σ_w² = {}, b = {}, c = {}: {} transition\n",
        rep.sigma_w2, rep.b, rep.c, rep.kind
    );
    s += &fmt("u_fold", &rep.u_fold);
    s += &fmt("u_coexist", &rep.u_coexist);
    match &rep.u_spinodal {
        Some(l) => s += &fmt("u_spinodal", l),
        None => s += "u_spinodal  none (b = 0: the centre never loses stability)\n",
    }
    s += &format!("rho_star    {:.7}\n", rep.rho_star);
    let show = |v: Option<f64>| v.map_or("n/a".to_string(), |x| format!("{x:.6}"));
    s += &format!(
        "R = E[ρ²]   leading order: {} below u_c, {:.6} above; at D = {}: central well {:.6}, side well {}, side mass {:.4}\n",
        show(rep.r_unaligned_leading), rep.r_aligned_leading, rep.d, rep.r_unaligned_at_d, show(rep.r_aligned_at_d), rep.side_weight_at_d
    );
    s += &format!(
        "tolerance   u values relative {:.0e}; ρ absolute {:.0e}\n",
        rep.tolerance, rep.rho_tolerance
    );
    out(&s)
}

pub(super) fn run_cubic(a: CubicArgs) -> Result<()> {
    let s_a2 = a.s_a2.unwrap_or(1.0 / a.n);
    let r = &a.residual;
    let rep = cavity::cubic_scales(a.d, a.n, a.t, s_a2, r.sigma_w2, r.b, r.c)?;
    if a.json {
        return out_json(&to_json(&rep)?);
    }
    out(&format!(
        "Cubic kernel power (blog \"Derive the cubic sample scale\"), D = {}, N = {}, T = {}, s_a² = {}, σ_w² = {}\n\
         λ3 fixed (prior)   {:.6e}  (leading (N s_a²/6)(16/π)15σ_w⁶/(D³(1+2σ_w²)³) = {:.6e})\n\
         P_fixed = T/λ3     {:.6e}   O(D³)\n\
         λ3 aligned (ρ* = {:.5})  {:.6e}  →  T/λ3 = {:.4}\n\
         P_align            {:.6e}   T·√(u_c·D/s_a²), u_c = {:.6}\n\
         P_adaptive         {:.6e}   max(P_align, T/λ3_aligned)\n",
        rep.d, rep.n, rep.t, rep.s_a2, rep.sigma_w2,
        rep.lambda3_fixed, rep.lambda3_fixed_leading, rep.p_fixed,
        rep.rho_aligned, rep.lambda3_aligned, rep.p_cubic_aligned,
        rep.p_align, rep.u_coexist, rep.p_adaptive
    ))
}
