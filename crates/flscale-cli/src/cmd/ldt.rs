//! `flscale ldt` — large deviations of the prior alignment (paper App. A.3, B.2, B.3;
//! spec 05 A): the Chernoff rate E(α), the tilted overlap law at t\*, and the d-scaling of E.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use flscale::ldt::{self, LdtModel, Perp, TiltedDistribution};
use flscale::plot::write_figure;
use flscale::{Error, Result};
use serde_json::json;

use super::{out, out_json, Ctx};

/// Arguments of `flscale ldt`.
#[derive(Debug, Args)]
pub struct LdtArgs {
    #[command(subcommand)]
    command: LdtCommand,
}

#[derive(Debug, Subcommand)]
enum LdtCommand {
    /// E(α) = sup_t [tα − N log Z(t)], the maximiser t* and P* ∝ 2κE(α) on a grid of α.
    #[command(
        after_help = "Example:\n  flscale ldt rate --d 40 --n 40 --alpha 0.5,1,2 --perp exact --json"
    )]
    Rate(RateArgs),
    /// The tilted overlap distribution p_t*(β) (paper Fig. 2(a)) with its peaks.
    #[command(
        after_help = "Example (the Fig. 2(a) setting, both treatments of |w_⊥|²):\n  flscale ldt tilted --alpha 1 --out tilted.svg\n  flscale ldt tilted --perp exact --json"
    )]
    Tilted(TiltedArgs),
    /// Fit of E(α) against d at N = d^ν (prediction: exponent (1 + ν)/2).
    #[command(
        after_help = "Example:\n  flscale ldt scaling --d-values 20,40,80,160,320 --nu 1 --out scaling.svg"
    )]
    Scaling(ScalingArgs),
}

/// The network and prior (App. B.3): f = Σ a_i erf(w_i·x), a ∼ 𝒩(0, σ2²/N), w ∼ 𝒩(0, σ1²/d).
#[derive(Debug, Args)]
struct ModelArgs {
    /// Input dimension d.
    #[arg(long, default_value_t = 40.0)]
    d: f64,
    /// Hidden width N.
    #[arg(long, default_value_t = 40.0)]
    n: f64,
    /// First-layer prior variance σ1².
    #[arg(long, default_value_t = 1.0)]
    sigma1_sq: f64,
    /// Readout prior variance σ2².
    #[arg(long, default_value_t = 1.0)]
    sigma2_sq: f64,
    /// |w_⊥|²: "prior" fixes it (the paper's q ≈ σ1² + β²), "exact" integrates it.
    #[arg(long, default_value = "prior")]
    perp: String,
}

impl ModelArgs {
    fn model(&self) -> Result<LdtModel> {
        let m = LdtModel {
            d: self.d,
            n: self.n,
            sigma1_sq: self.sigma1_sq,
            sigma2_sq: self.sigma2_sq,
            perp: self.perp.parse()?,
        };
        m.validate()?;
        Ok(m)
    }
}

#[derive(Debug, Args)]
struct RateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Alignment thresholds α (comma-separated, each in (0, 1000]).
    #[arg(long, value_delimiter = ',', default_values_t = vec![0.25, 0.5, 1.0, 2.0])]
    alpha: Vec<f64>,
    /// Ridge κ for the estimate P* ∝ 2κE(α).
    #[arg(long, default_value_t = 1.0)]
    kappa: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Write E(α) against α as a figure (.svg or .png).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct TiltedArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Alignment threshold α; the law is taken at its maximiser t*(α). Default 1, or with
    /// --histogram the run's measured alignment A_f.
    #[arg(long)]
    alpha: Option<f64>,
    /// Use this tilt t instead of t*(α) (e.g. P/κ, the posterior's effective tilt).
    #[arg(long)]
    t: Option<f64>,
    /// Overlay the law on the first-layer overlap histogram of a sweep/sample results
    /// directory (e.g. from `flscale reproduce fig2a`), as −log densities (Fig. 2(a)). The
    /// run's d and N1 must equal --d and --n.
    #[arg(long)]
    histogram: Option<PathBuf>,
    /// Which finished run of the --histogram directory (grid index); default the first one
    /// with a histogram.
    #[arg(long)]
    run: Option<usize>,
    /// Half-width of the tabulated β window.
    #[arg(long, default_value_t = 3.0)]
    beta_max: f64,
    /// Number of tabulated points.
    #[arg(long, default_value_t = 241)]
    grid: usize,
    /// Print one JSON object (with the density table).
    #[arg(long)]
    json: bool,
    /// Write −log p_t(β) as a figure (.svg or .png).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ScalingArgs {
    /// Input dimensions d (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![20.0, 40.0, 80.0, 160.0, 320.0, 640.0])]
    d_values: Vec<f64>,
    /// Width exponent ν: N = d^ν.
    #[arg(long, default_value_t = 1.0)]
    nu: f64,
    /// Alignment threshold α.
    #[arg(long, default_value_t = 1.0)]
    alpha: f64,
    /// First-layer prior variance σ1².
    #[arg(long, default_value_t = 1.0)]
    sigma1_sq: f64,
    /// Readout prior variance σ2².
    #[arg(long, default_value_t = 1.0)]
    sigma2_sq: f64,
    /// |w_⊥|² treatment: prior or exact.
    #[arg(long, default_value = "prior")]
    perp: String,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Write log E against log d as a figure (.svg or .png).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs `flscale ldt`.
pub fn run(args: LdtArgs, _ctx: &Ctx) -> Result<()> {
    match args.command {
        LdtCommand::Rate(a) => rate(a),
        LdtCommand::Tilted(a) => tilted(a),
        LdtCommand::Scaling(a) => scaling(a),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))
}

fn rate(a: RateArgs) -> Result<()> {
    let model = a.model.model()?;
    let points = ldt::rate_curve(&model, &a.alpha, a.kappa)?;
    if let Some(path) = &a.out {
        write_figure(path, 800, 560, &ldt::rate_chart(&model, &points))?;
    }
    if a.json {
        return out_json(&json!({
            "model": to_json(&model)?,
            "kappa": a.kappa,
            "quadrature": "adaptive Gauss–Kronrod (7,15), relative tolerance max(1e-12, 32·ε·L) ≤ 1e-10 (L: the log-integrand scale)",
            "points": to_json(&points)?,
            "figure": a.out.as_ref().map(|p| p.display().to_string()),
        }));
    }
    let mut s = format!(
        "Chernoff rate, d = {}, N = {}, σ1² = {}, σ2² = {}, perp = {:?}, κ = {}\n{:>10} {:>14} {:>14} {:>14} {:>14}\n",
        model.d, model.n, model.sigma1_sq, model.sigma2_sq, model.perp, a.kappa,
        "alpha", "E(alpha)", "t*", "N log Z(t*)", "P* ~ 2κE"
    );
    for p in &points {
        s += &format!(
            "{:>10.4} {:>14.6} {:>14.6} {:>14.6} {:>14.6}\n",
            p.alpha, p.rate, p.t_star, p.log_mgf, p.p_star
        );
    }
    out(&s)
}

/// The sampled run to overlay: its id, bins and measured alignment.
struct SampledHistogram {
    id: String,
    bins: Vec<(f64, f64, u64)>,
    alignment: Option<f64>,
}

fn sampled_histogram(
    dir: &std::path::Path,
    run: Option<usize>,
    model: &LdtModel,
) -> Result<SampledHistogram> {
    let data = flscale::experiment::StoreData::load(dir)?;
    let r = match run {
        Some(i) => data.runs.iter().find(|r| r.index == i).ok_or_else(|| {
            Error::invalid(format!(
                "--run {i} is not allowed: {} has no finished run with that index ({} finished)",
                dir.display(),
                data.runs.len()
            ))
        })?,
        None => data
            .runs
            .iter()
            .find(|r| r.histogram.iter().any(|b| b.2 > 0))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{} has no finished run with an overlap histogram",
                    dir.display()
                ))
            })?,
    };
    for (key, flag, want) in [("d", "--d", model.d), ("n1", "--n", model.n)] {
        match r.coords.get(key) {
            Some(&v) if v == want => {}
            Some(&v) => {
                return Err(Error::invalid(format!(
                "{flag} {want} does not match run {} of {}, which has {key} = {v}; pass {flag} {v}",
                r.id,
                dir.display()
            )))
            }
            None => {
                return Err(Error::invalid(format!(
                    "run {} of {} does not record {key}; it is not a two-layer network run",
                    r.id,
                    dir.display()
                )))
            }
        }
    }
    Ok(SampledHistogram {
        id: r.id.clone(),
        bins: r.histogram.clone(),
        alignment: r.summary.get("alignment").and_then(|v| v.as_f64()),
    })
}

/// `flscale ldt tilted`: the tilted overlap law at t, with a sampled run's histogram beside it
/// when `--histogram` is given.
fn tilted(a: TiltedArgs) -> Result<()> {
    let model = a.model.model()?;
    let sampled = match &a.histogram {
        Some(dir) => Some(sampled_histogram(dir, a.run, &model)?),
        None => None,
    };
    let (t, alpha) = tilt_of(&a, &model, sampled.as_ref())?;
    // With a histogram, tabulate over its range (and finely enough for the tail masses).
    let (beta_max, grid) = match &sampled {
        Some(h) => (
            h.bins
                .iter()
                .map(|b| b.0.abs().max(b.1.abs()))
                .fold(a.beta_max.min(0.0), f64::max),
            a.grid.max(2001),
        ),
        None => (a.beta_max, a.grid),
    };
    let dist = model.tilted(t, beta_max, grid)?;
    // The paper's outlier threshold 3σ₁/√d (App. F.0.1).
    let threshold = 3.0 * (model.sigma1_sq / model.d).sqrt();
    let overlay = match &sampled {
        Some(h) => Some(Overlay::new(h, &dist, threshold)?),
        None => None,
    };
    if let Some(path) = &a.out {
        let label = format!("tilted law, perp {:?}", model.perp).to_lowercase();
        let chart = match &overlay {
            Some(o) => ldt::tilted_overlay_chart(
                &dist,
                &label,
                &o.density,
                &format!("Langevin histogram, run {}", o.run.id),
            ),
            None => ldt::tilted_chart(&[(label, &dist)]),
        };
        write_figure(path, 800, 560, &chart)?;
    }
    if a.json {
        let figure = a.out.as_deref();
        return out_json(&tilted_json(
            &model,
            (t, alpha),
            &dist,
            overlay.as_ref(),
            figure,
        )?);
    }
    out(&tilted_text(&model, t, &dist, overlay.as_ref()))
}

/// The tilt t (`--t`, else t\*(α)) and the α it was taken at (`None` with `--t`); α is
/// `--alpha`, else the sampled run's measured alignment, else 1.
fn tilt_of(
    a: &TiltedArgs,
    model: &LdtModel,
    sampled: Option<&SampledHistogram>,
) -> Result<(f64, Option<f64>)> {
    let alpha_arg = match (a.alpha, sampled) {
        (Some(x), _) => x,
        (
            None,
            Some(SampledHistogram {
                alignment: Some(x),
                id,
                ..
            }),
        ) => {
            if !(x.is_finite() && *x > 0.0) {
                return Err(Error::invalid(format!(
                    "run {id} has measured alignment {x}; the law needs α > 0, pass --alpha or --t"
                )));
            }
            *x
        }
        _ => 1.0,
    };
    match a.t {
        Some(t) => {
            if !(t.is_finite() && t >= 0.0) {
                return Err(Error::invalid(format!(
                    "--t {t} is not allowed; the tilt must be a finite number ≥ 0"
                )));
            }
            Ok((t, None))
        }
        None => Ok((model.rate(alpha_arg, 1.0)?.t_star, Some(alpha_arg))),
    }
}

/// A sampled histogram beside the tilted law: its density and the fractions of overlaps
/// beyond the outlier threshold in the run and under the law.
struct Overlay<'a> {
    run: &'a SampledHistogram,
    density: Vec<(f64, f64)>,
    threshold: f64,
    sampled_tail: f64,
    predicted_tail: f64,
}

impl<'a> Overlay<'a> {
    fn new(run: &'a SampledHistogram, dist: &TiltedDistribution, threshold: f64) -> Result<Self> {
        Ok(Overlay {
            run,
            density: ldt::histogram_density(&run.bins)?,
            threshold,
            sampled_tail: ldt::histogram_tail_fraction(&run.bins, threshold),
            predicted_tail: ldt::tilted_tail_fraction(dist, threshold),
        })
    }
}

/// The JSON object of `flscale ldt tilted --json`; `figure` is the picture written, if any.
fn tilted_json(
    model: &LdtModel,
    (t, alpha): (f64, Option<f64>),
    dist: &TiltedDistribution,
    overlay: Option<&Overlay>,
    figure: Option<&Path>,
) -> Result<serde_json::Value> {
    let histogram_json = match overlay {
        Some(o) => json!({
            "run": o.run.id,
            "measured_alignment": o.run.alignment,
            "outlier_threshold": o.threshold,
            "sampled_outlier_fraction": o.sampled_tail,
            "predicted_outlier_fraction": o.predicted_tail,
            "density": o.density.iter().map(|(b, p)| json!([b, p])).collect::<Vec<_>>(),
        }),
        None => serde_json::Value::Null,
    };
    Ok(json!({
        "histogram": histogram_json,
        "model": to_json(model)?,
        "alpha": alpha,
        "t": t,
        "log_z": dist.log_z,
        "bimodal": dist.bimodal,
        "beta_star": dist.beta_star,
        "side_mass": dist.side_mass,
        "specialised_neurons": dist.specialised_neurons,
        "peaks": to_json(&dist.peaks)?,
        "density": dist.density.iter().map(|(b, p)| json!([b, p])).collect::<Vec<_>>(),
        "figure": figure.map(|p| p.display().to_string()),
    }))
}

/// The text of `flscale ldt tilted`: the peaks, bimodality and side mass, and the tail
/// fractions of the overlaid run.
fn tilted_text(
    model: &LdtModel,
    t: f64,
    dist: &TiltedDistribution,
    overlay: Option<&Overlay>,
) -> String {
    let mut s = format!(
        "Tilted overlap law at t = {t:.6} (d = {}, N = {}, perp = {:?})\n",
        model.d, model.n, model.perp
    );
    for p in &dist.peaks {
        s += &format!(
            "  peak at beta = ±{:.4}, log density {:.4}\n",
            p.beta, p.log_density
        );
    }
    s += &format!(
        "  bimodal: {}, beta* = {:.4}, mass beyond the minimum {:.4} (≈ {:.2} specialised neurons)\n",
        dist.bimodal, dist.beta_star, dist.side_mass, dist.specialised_neurons
    );
    if let Some(o) = overlay {
        s += &format!(
            "  histogram of run {} (alpha = measured A_f {}): fraction of overlaps beyond 3σ1/√d = {:.4}: sampled {:.5}, tilted law {:.5}\n",
            o.run.id,
            o.run.alignment.map_or("n/a".into(), |x| format!("{x:.4}")),
            o.threshold,
            o.sampled_tail,
            o.predicted_tail
        );
    }
    s
}

fn scaling(a: ScalingArgs) -> Result<()> {
    let fit = ldt::scaling_fit(
        &a.d_values,
        a.nu,
        a.alpha,
        a.sigma1_sq,
        a.sigma2_sq,
        a.perp.parse::<Perp>()?,
    )?;
    if let Some(path) = &a.out {
        write_figure(path, 800, 560, &ldt::scaling_chart(&[&fit]))?;
    }
    if a.json {
        let mut v = to_json(&fit)?;
        v["figure"] = json!(a.out.as_ref().map(|p| p.display().to_string()));
        return out_json(&v);
    }
    let mut s = format!(
        "E(alpha = {}) against d at N = d^{} (perp = {:?})\n{:>10} {:>12} {:>14} {:>14} {:>14}\n",
        a.alpha, a.nu, fit.perp, "d", "N", "E", "t*", "E/(α√(Nd))"
    );
    for p in &fit.points {
        s += &format!(
            "{:>10.1} {:>12.2} {:>14.6} {:>14.6} {:>14.6}\n",
            p.d, p.n, p.rate.rate, p.rate.t_star, p.rate_per_sqrt_nd
        );
    }
    s += &format!(
        "fitted exponent {:.4} (predicted {:.4}); large-d constant {:.4}\n",
        fit.exponent, fit.predicted_exponent, fit.large_d_constant
    );
    out(&s)
}
