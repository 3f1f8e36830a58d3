//! `flscale cavity sweep-p`: R(P), b(P), c(P) along both branches, with the Langevin overlay
//! (spec 04).

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use flscale::cavity::{self, figures, AdaptiveParams};
use flscale::plot::write_figure;
use flscale::Result;

use super::{to_json, ModelArgs};
use crate::cmd::{out, out_json, Ctx};

#[derive(Debug, Args)]
pub(super) struct SweepArgs {
    #[command(flatten)]
    pub(super) model: ModelArgs,
    /// The P values (comma-separated).
    #[arg(long = "p-values", value_delimiter = ',', default_values_t = vec![25, 50, 75, 100, 150, 200, 300, 400])]
    pub(super) p_values: Vec<usize>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub(super) json: bool,
    /// Write the R(P) figure (.svg or .png).
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// A results directory of `flscale sweep` / `flscale reproduce` (e.g. the `blog` preset):
    /// its runs with the same D, N, T, s_a², σ_w², ε are overlaid (R vs P) on the figure and
    /// listed next to the prediction.
    #[arg(long, value_name = "DIR")]
    pub(super) langevin: Option<PathBuf>,
}

pub(super) fn run_sweep(a: SweepArgs, ctx: &Ctx) -> Result<()> {
    let p_max = a.p_values.iter().copied().max().unwrap_or(2);
    let prm = a.model.params(p_max)?;
    // Read the measurement first: a wrong directory fails before minutes of fixed points.
    let langevin = a
        .langevin
        .as_deref()
        .map(|dir| cavity::langevin::load_langevin_r(dir, &prm))
        .transpose()?;
    let bar = if ctx.quiet || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        let bar = indicatif::ProgressBar::new(2 * a.p_values.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} sweep-p [{bar:30}] {pos}/{len} fixed points  ETA {eta}  {msg}",
            )
            .expect("static progress template")
            .progress_chars("=> "),
        );
        bar
    };
    let rep = cavity::sweep_p_observed(&prm, &a.p_values, &|branch, p| {
        bar.set_message(format!("{branch:?} branch, P = {p}"));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    if let Some(path) = &a.out {
        write_figure(
            path,
            960,
            640,
            &figures::sweep_chart(&rep, langevin.as_ref()),
        )?;
    }
    let overlay = langevin
        .as_ref()
        .map(|c| cavity::langevin::overlay_rows(c, &rep));
    if a.json {
        let mut v = to_json(&rep)?;
        if let (Some(curve), Some(rows), Some(obj)) = (&langevin, &overlay, v.as_object_mut()) {
            obj.insert(
                "langevin".into(),
                serde_json::json!({ "dir": curve.dir, "skipped": curve.skipped, "rows": to_json(rows)? }),
            );
        }
        return out_json(&v);
    }
    let mut s = sweep_text(&prm, &rep);
    if let (Some(curve), Some(rows)) = (&langevin, &overlay) {
        s += &langevin_text(curve, rows);
    }
    out(&s)
}

/// The text report of `sweep-p`: the table of both branches and the transition summary.
fn sweep_text(prm: &AdaptiveParams, rep: &cavity::SweepReport) -> String {
    let mut s = format!(
        "# D = {}, N = {}, T = {}, s_a² = {}, σ_w² = {}, ε = {}; R threshold {:.4}; mse = test MSE / E[y²]; ΔF = F_hot − F_cold (nats)\n{:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        prm.d, prm.n, prm.t, prm.s_a2, prm.sigma_w2, prm.eps, rep.r_threshold,
        "P", "u", "R_cold", "b_cold", "c_cold", "mse_cold", "R_hot", "b_hot", "c_hot", "mse_hot", "ΔF"
    );
    for ((c, h), gap) in rep
        .unaligned
        .iter()
        .zip(&rep.aligned)
        .zip(&rep.free_energy_gap)
    {
        s += &format!(
            "{:>6} {:>10.3e} {:>10.5} {:>+10.5} {:>+10.5} {:>10.5} {:>10.5} {:>+10.5} {:>+10.5} {:>10.5} {:>10}\n",
            c.p, c.u, c.r, c.b, c.c, c.test_mse_relative, h.r, h.b, h.c, h.test_mse_relative,
            gap.map_or("same".to_string(), |g| format!("{g:+.3}"))
        );
    }
    let show = |v: Option<f64>| v.map_or("none in range".to_string(), |p| format!("{p:.1}"));
    s += "expected neurons per network with |ρ| > 3σ_w/√D (cold / hot):";
    for (c, h) in rep.unaligned.iter().zip(&rep.aligned) {
        s += &format!("  P={}: {:.2} / {:.2}", c.p, c.outliers, h.outliers);
    }
    s += "\nphase (cold / hot; side-well neurons):";
    for (c, h) in rep.unaligned.iter().zip(&rep.aligned) {
        s += &format!(
            "  P={}: {} {:.2} / {} {:.2}",
            c.p,
            flscale::cavity::phase_at::label_name(c.phase.label),
            c.phase.side_neurons,
            flscale::cavity::phase_at::label_name(h.phase.label),
            h.phase.side_neurons
        );
    }
    s += "\ncentre drive X, U''(0) ∝ 1 − X (cold / hot):";
    for (c, h) in rep.unaligned.iter().zip(&rep.aligned) {
        s += &format!("  P={}: {:.3} / {:.3}", c.p, c.centre_drive, h.centre_drive);
    }
    s += &format!(
        "\nfirst specialised neuron (cold branch, 1 per network): P ≈ {}\n",
        show(rep.p_first_specialised)
    );
    let ends = if rep.branch_ends.is_empty() {
        "none in range".to_string()
    } else {
        rep.branch_ends
            .iter()
            .map(|e| {
                format!(
                    "the {} branch ends between P = {} and {}",
                    flscale::cavity::adaptive::branch_name(e.branch),
                    e.between.0,
                    e.between.1
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    for alt in &rep.alternatives {
        s += &format!(
            "second fixed point of the {} branch at P = {} (R jumped; {}): R = {:.5}, b = {:+.5}, c = {:+.5}, F − F(kept) = {:+.3} nats\n",
            flscale::cavity::adaptive::branch_name(alt.branch),
            alt.solution.p,
            match alt.origin {
                flscale::cavity::sweep_p::SolutionOrigin::PreviousSolution =>
                    "continued from the previous P",
                flscale::cavity::sweep_p::SolutionOrigin::BranchStart => "from the branch's start",
            },
            alt.solution.r,
            alt.solution.b,
            alt.solution.c,
            alt.free_energy_above_branch
        );
    }
    s += &format!(
        "largest centre drive X of the unaligned branch at its population residual: {:.4} at P ≈ {:.1} (population estimate; X < 1: no spinodal at that level)\n",
        rep.population_drive_max.drive, rep.population_drive_max.p
    );
    s += &format!(
        "transition (free energies cross): P ≈ {}\nspinodals: {}; hysteresis: {}\nR threshold crossed: upward by the cold branch at P ≈ {}, downward by the hot branch at P ≈ {}\n",
        show(rep.p_transition),
        ends,
        rep.hysteresis,
        show(rep.p_threshold_unaligned),
        show(rep.p_threshold_aligned)
    );
    s
}

/// The Langevin overlay table of `sweep-p --langevin`.
fn langevin_text(
    curve: &cavity::langevin::LangevinCurve,
    rows: &[cavity::langevin::OverlayRow],
) -> String {
    let mut s = String::new();
    s += &format!(
        "\nLangevin R(P) from {} ({} matching runs{})\n{:>6} {:>18} {:>12} {:>12} {:>12}\n",
        curve.dir,
        rows.len(),
        if curve.skipped.is_empty() {
            String::new()
        } else {
            format!(", {} skipped", curve.skipped.len())
        },
        "P",
        "R_langevin ± se",
        "R_lv_hot",
        "R_cold",
        "R_hot"
    );
    s.truncate(s.trim_end().len());
    s += &format!(
        " {:>10} {:>10} {:>10} {:>10}\n",
        "out_lv", "out_lv_hot", "out_cold", "out_hot"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.5}"));
    for r in rows {
        let short = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
        s += &format!(
            "{:>6} {:>18} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10}\n",
            r.p,
            format!("{:.5} ± {}", r.r_langevin, opt(r.r_langevin_err)),
            opt(r.r_langevin_hot),
            opt(r.r_unaligned),
            opt(r.r_aligned),
            short(r.outliers_langevin),
            short(r.outliers_langevin_hot),
            short(r.outliers_unaligned),
            short(r.outliers_aligned)
        );
    }
    s
}
