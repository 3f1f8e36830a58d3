//! `flscale cavity fixed-points`: every fixed point of the adaptive-kernel map at one P, with
//! its stability (spec 04).

use clap::Args;
use flscale::cavity;
use flscale::{Error, Result};

use super::{to_json, ModelArgs};
use crate::cmd::{out, out_json};

#[derive(Debug, Args)]
pub(super) struct FixedPointArgs {
    #[command(flatten)]
    pub(super) model: ModelArgs,
    /// Number of training samples P.
    #[arg(long, default_value_t = 150)]
    pub(super) p: usize,
    /// Range of b searched, lo,hi (default ±1.02·B_b, every value G can take; see above).
    #[arg(long = "b-range", value_delimiter = ',', num_args = 1)]
    pub(super) b_range: Vec<f64>,
    /// Range of c searched, lo,hi (default ±1.02·B_c).
    #[arg(long = "c-range", value_delimiter = ',', num_args = 1)]
    pub(super) c_range: Vec<f64>,
    /// Grid nodes per axis (3 … 2000; grid² evaluations of G).
    #[arg(long, default_value_t = 41)]
    pub(super) grid: usize,
    /// Also run `solve`'s damped iteration from both starts and say which fixed point each reached.
    #[arg(long = "with-damped")]
    pub(super) with_damped: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(super) json: bool,
}

/// A `lo,hi` flag value; `None` when the flag was not given.
fn range_flag(name: &str, v: &[f64]) -> Result<Option<(f64, f64)>> {
    match v {
        [] => Ok(None),
        [lo, hi] if lo.is_finite() && hi.is_finite() && lo < hi => Ok(Some((*lo, *hi))),
        _ => Err(Error::invalid(format!(
            "--{name} {} is not allowed; give two finite numbers lo,hi with lo < hi",
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ))),
    }
}

pub(super) fn run_fixed_points(a: FixedPointArgs) -> Result<()> {
    let prm = a.model.params(a.p)?;
    let opts = cavity::fixed_points::FixedPointOptions {
        b_range: range_flag("b-range", &a.b_range)?,
        c_range: range_flag("c-range", &a.c_range)?,
        grid: a.grid,
        with_damped: a.with_damped,
    };
    let rep = cavity::fixed_points::fixed_points(&prm, &opts)?;
    if a.json {
        return out_json(&to_json(&rep)?);
    }
    let mut s = format!(
        "Fixed points of the adaptive-kernel map at P = {}, D = {}, N = {}, T = {}, s_a² = {}, σ_w² = {}, ε = {}, seed {}\n\
         searched b ∈ [{:.4}, {:.4}], c ∈ [{:.4}, {:.4}] on a {}×{} grid ({}; |G_b| ≤ {:.4}, |G_c| ≤ {:.4}); {} evaluations of G, {} candidate cells\n",
        prm.p, prm.d, prm.n, prm.t, prm.s_a2, prm.sigma_w2, prm.eps, prm.seed,
        rep.b_range.0, rep.b_range.1, rep.c_range.0, rep.c_range.1, rep.grid, rep.grid,
        if rep.covers_map_range { "covers every value of G" } else { "a part of G's range" },
        rep.map_range.b_max, rep.map_range.c_max, rep.evaluations, rep.candidate_cells
    );
    s += &format!(
        "{:>3} {:>10} {:>10} {:>10} {:>8} {:>8} {:>14} {:>8} {:>24} {:>11} {:>8}\n",
        "#",
        "b",
        "c",
        "R",
        "out",
        "mse",
        "F (nats)",
        "X",
        "eigenvalues of ∂G",
        "stability",
        "η_max"
    );
    for (i, p) in rep.fixed_points.iter().enumerate() {
        let ev = |e: &cavity::fixed_points::Eigenvalue| {
            if e.im == 0.0 {
                format!("{:+.4}", e.re)
            } else {
                format!("{:+.3}{:+.3}i", e.re, e.im)
            }
        };
        s += &format!(
            "{:>3} {:>+10.6} {:>+10.6} {:>10.6} {:>8.2} {:>8.4} {:>14.4} {:>8.3} {:>24} {:>11} {:>8}\n",
            i,
            p.b,
            p.c,
            p.r,
            p.outliers,
            p.test_mse_relative,
            p.free_energy.total,
            p.centre_drive,
            format!("{}, {}", ev(&p.eigenvalues[0]), ev(&p.eigenvalues[1])),
            format!("{:?}", p.stability).to_lowercase(),
            p.max_stable_damping.map_or("-".to_string(), |e| format!("{e:.3}"))
        );
        s += &super::mixed::phase_text(&p.phase);
    }
    s += &format!(
        "index sum {} ({}); {} attracting, {} saddle(s){}\n",
        rep.index_sum,
        if rep.covers_map_range {
            if rep.index_sum == 1 {
                "1 expected: consistent"
            } else {
                "1 expected: a fixed point was missed or is degenerate; try a finer --grid"
            }
        } else {
            "the search rectangle does not cover G's range: no expected value"
        },
        rep.attracting,
        rep.saddles,
        match rep.free_energy_gap {
            Some(g) => format!(
                "; COEXISTENCE (first-order signature): F(high R) − F(low R) = {g:+.4} nats"
            ),
            None => "; no coexistence".to_string(),
        }
    );
    for u in &rep.unresolved {
        s += &format!(
            "unresolved candidate from ({:+.4}, {:+.4}): stopped at ({:+.6}, {:+.6}), max|G − id| = {:.2e} ({})\n",
            u.start.0, u.start.1, u.at.0, u.at.1, u.residual, u.reason
        );
    }
    for d in &rep.damped {
        s += &format!(
            "damped iteration from the {} start: b = {:+.6}, c = {:+.6}, R = {:.6}{} → {}\n",
            flscale::cavity::adaptive::branch_name(d.branch),
            d.b,
            d.c,
            d.r,
            if d.converged { "" } else { " (NOT converged)" },
            d.matches
                .map_or("none of the fixed points above".to_string(), |i| format!(
                    "fixed point #{i}"
                ))
        );
    }
    out(&s)
}
