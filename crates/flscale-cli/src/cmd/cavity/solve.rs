//! `flscale cavity solve`: the self-consistent adaptive kernel from both starts (spec 04).

use clap::Args;
use flscale::cavity;
use flscale::Result;

use super::{to_json, ModelArgs};
use crate::cmd::{out, out_json, Ctx};

#[derive(Debug, Args)]
pub(super) struct SolveArgs {
    #[command(flatten)]
    pub(super) model: ModelArgs,
    /// Number of training samples P.
    #[arg(long, default_value_t = 150)]
    pub(super) p: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(super) json: bool,
}

fn branch_text(s: &cavity::BranchSolution) -> String {
    format!(
        "{:<10} b = {:+.6}  c = {:+.6}  R = {:.6}  test MSE = {:.6} ({:.4} of E[y²])  iterations {}{}\n",
        match s.branch {
            cavity::Branch::Unaligned => "unaligned",
            cavity::Branch::Aligned => "aligned",
        },
        s.b,
        s.c,
        s.r,
        s.test_mse,
        s.test_mse_relative,
        s.iterations,
        if s.converged { "" } else { " (NOT converged)" }
    )
}

pub(super) fn run_solve(a: SolveArgs, _ctx: &Ctx) -> Result<()> {
    let prm = a.model.params(a.p)?;
    let rep = cavity::solve(&prm)?;
    if a.json {
        return out_json(&to_json(&rep)?);
    }
    let mut s = format!(
        "Adaptive kernel at P = {}, D = {}, N = {}, T = {}, s_a² = {}, σ_w² = {}, ε = {} (u = {:.4})\n",
        prm.p, prm.d, prm.n, prm.t, prm.s_a2, prm.sigma_w2, prm.eps, rep.unaligned.u
    );
    for sol in [&rep.unaligned, &rep.aligned] {
        s += &branch_text(sol);
        s += &super::mixed::phase_text(&sol.phase);
        s += &super::mixed::solver_text(sol);
    }
    s += &format!(
        "free energy F (nats): unaligned {:.4}, aligned {:.4}{}\n",
        rep.unaligned.free_energy.total,
        rep.aligned.free_energy.total,
        match rep.preferred {
            Some(cavity::Branch::Aligned) => "; the aligned solution is preferred",
            Some(cavity::Branch::Unaligned) => "; the unaligned solution is preferred",
            None => "",
        }
    );
    s += &format!(
        "{}; aligned means R > {:.4} (σ_w²/√D)\n",
        if rep.two_solutions {
            "two distinct solutions (first-order coexistence)"
        } else {
            "one solution"
        },
        rep.r_threshold
    );
    s += &format!(
        "covariance  E[wwᵀ] = {:.6}·(I − eeᵀ) + R·eeᵀ (D − 1 = {} perpendicular eigenvalues)\n",
        rep.unaligned.covariance.perpendicular, rep.unaligned.covariance.perpendicular_multiplicity
    );
    out(&s)
}
