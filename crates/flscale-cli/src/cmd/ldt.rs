//! `flscale ldt` — large deviations of the prior alignment (paper App. A.3, B.2, B.3;
//! spec 05 A): the Chernoff rate E(α), the tilted overlap law at t\*, and the d-scaling of E.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use flscale::ldt::{self, LdtModel, Perp};
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
    /// Alignment threshold α; the law is taken at its maximiser t*(α).
    #[arg(long, default_value_t = 1.0)]
    alpha: f64,
    /// Use this tilt t instead of t*(α) (e.g. P/κ, the posterior's effective tilt).
    #[arg(long)]
    t: Option<f64>,
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
            "quadrature": "adaptive Gauss–Kronrod (7,15), relative tolerance 1e-12",
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

fn tilted(a: TiltedArgs) -> Result<()> {
    let model = a.model.model()?;
    let (t, alpha) = match a.t {
        Some(t) => {
            if !(t.is_finite() && t >= 0.0) {
                return Err(Error::invalid(format!(
                    "--t {t} is not allowed; the tilt must be a finite number ≥ 0"
                )));
            }
            (t, None)
        }
        None => (model.rate(a.alpha, 1.0)?.t_star, Some(a.alpha)),
    };
    let dist = model.tilted(t, a.beta_max, a.grid)?;
    if let Some(path) = &a.out {
        let label = format!("{:?}", model.perp).to_lowercase();
        write_figure(path, 800, 560, &ldt::tilted_chart(&[(label, &dist)]))?;
    }
    if a.json {
        return out_json(&json!({
            "model": to_json(&model)?,
            "alpha": alpha,
            "t": t,
            "log_z": dist.log_z,
            "bimodal": dist.bimodal,
            "beta_star": dist.beta_star,
            "side_mass": dist.side_mass,
            "specialised_neurons": dist.specialised_neurons,
            "peaks": to_json(&dist.peaks)?,
            "density": dist.density.iter().map(|(b, p)| json!([b, p])).collect::<Vec<_>>(),
            "figure": a.out.as_ref().map(|p| p.display().to_string()),
        }));
    }
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
    out(&s)
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
