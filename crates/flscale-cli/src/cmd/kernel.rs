//! `flscale kernel` — kernel feature propagation (paper Sec. 5.2, App. C.5, Figs. 5–6;
//! spec 05 B), NNGP kernel checks and the eigendecomposition benchmark.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use flscale::activation::NngpActivation;
use flscale::kernels::{self, empirical_kernel, nngp_kernel, DataKind, Points, PropagateConfig};
use flscale::plot::write_figure;
use flscale::{Error, Result};
use serde_json::json;

use super::{out, out_json, Ctx};

/// Arguments of `flscale kernel`.
#[derive(Debug, Args)]
pub struct KernelArgs {
    #[command(subcommand)]
    command: KernelCommand,
}

#[derive(Debug, Subcommand)]
enum KernelCommand {
    /// RKHS norm and inverse expectation of Φ*² in the next layer's kernel against the
    /// amplification D of Φ* (paper Figs. 5–6), with the fitted log-log slope.
    #[command(
        after_help = "Examples:\n  flscale kernel propagate --quick --out fig5-quick.svg\n  flscale kernel propagate --out fig5.svg                       # Fig. 5 sizes (d=120, N1=2000, N2=1000, P=6000)\n  flscale kernel propagate --data powerlaw --layernorm --json    # Fig. 6 top left (d=250, N1=N2=3000, P=4000)\n  flscale kernel propagate --activation poly --layernorm --quick"
    )]
    Propagate(PropagateArgs),
    /// The propagation procedure at infinite width (closed-form kernels, Gaussian data):
    /// ⟨f, K3, f⟩⁻¹ against D with and without finite-P sampling noise, and its slopes.
    #[command(
        after_help = "Examples:\n  flscale kernel population --d 120 --p 6000            # what Fig. 5's procedure predicts at its sizes\n  flscale kernel population --d 100000 --fit-min 32 --fit-max 512 --json   # the D^-2 asymptote"
    )]
    Population(PopulationArgs),
    /// Empirical finite-width kernels against the closed forms (arcsine, arc-cosine 1, poly).
    #[command(
        after_help = "Example:\n  flscale kernel nngp --activation relu --widths 100,1000,10000 --json"
    )]
    Nngp(NngpArgs),
    /// Time the dense symmetric eigendecomposition on the erf NNGP kernel matrix of
    /// shared/bench/eigh.py (n points in d = 40) and report its residual.
    #[command(after_help = "Example:\n  flscale kernel eigh-bench --n 4000 --reps 3")]
    EighBench(EighBenchArgs),
}

#[derive(Debug, Args)]
struct PropagateArgs {
    /// Small sizes (d=40, N1=400, N2=200, P=1000) for a first look in about a second.
    #[arg(long)]
    quick: bool,
    /// Data measure: gaussian (Fig. 5 sizes) or powerlaw (covariance ∝ k^−1.1, Fig. 6 sizes).
    #[arg(long, default_value = "gaussian")]
    data: String,
    /// Activation of both layers: relu or poly (1 + z + z²).
    #[arg(long, default_value = "relu")]
    activation: String,
    /// Layer-normalise the first layer's activations (Fig. 6).
    #[arg(long)]
    layernorm: bool,
    /// Input dimension (overrides the preset).
    #[arg(long)]
    d: Option<usize>,
    /// First hidden width (overrides the preset).
    #[arg(long)]
    n1: Option<usize>,
    /// Second hidden width (overrides the preset).
    #[arg(long)]
    n2: Option<usize>,
    /// Number of sample points (overrides the preset).
    #[arg(long)]
    p: Option<usize>,
    /// Rank of Φ* among K2's eigenvalues (default d/2, as in the paper).
    #[arg(long)]
    feature_rank: Option<usize>,
    /// Amplifications D (comma-separated, increasing, ≥ 1); default 1, 2, 4, …, 1024.
    #[arg(long, value_delimiter = ',')]
    amplifications: Option<Vec<f64>>,
    /// Lower end of the slope-fit window in D.
    #[arg(long, default_value_t = 8.0)]
    fit_min: f64,
    /// Upper end of the slope-fit window in D.
    #[arg(long, default_value_t = 64.0)]
    fit_max: f64,
    /// Spectral route: auto (Gram when N < P), gram or dense.
    #[arg(long, default_value = "auto")]
    method: String,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 5)]
    seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Write the log-log figure (.svg or .png).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct PopulationArgs {
    /// Input dimension d.
    #[arg(long, default_value_t = 120)]
    d: usize,
    /// Activation of both layers: relu or poly (1 + z + z²).
    #[arg(long, default_value = "relu")]
    activation: String,
    /// Sample size for the finite-P column (omit for the population limit only).
    #[arg(long)]
    p: Option<usize>,
    /// Amplifications D (comma-separated, increasing, ≥ 1); default 1, 2, 4, …, 1024.
    #[arg(long, value_delimiter = ',')]
    amplifications: Option<Vec<f64>>,
    /// Lower end of the slope-fit window in D.
    #[arg(long, default_value_t = 8.0)]
    fit_min: f64,
    /// Upper end of the slope-fit window in D.
    #[arg(long, default_value_t = 64.0)]
    fit_max: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct NngpArgs {
    /// Activation: erf, relu or poly.
    #[arg(long, default_value = "erf")]
    activation: String,
    /// Number of Gaussian input points.
    #[arg(long, default_value_t = 12)]
    points: usize,
    /// Input dimension.
    #[arg(long, default_value_t = 20)]
    d: usize,
    /// Widths of the empirical kernels (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![100usize, 1000, 10000])]
    widths: Vec<usize>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct EighBenchArgs {
    /// Matrix size.
    #[arg(long, default_value_t = 4000)]
    n: usize,
    /// Repetitions (the median is reported).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `flscale kernel`.
pub fn run(args: KernelArgs, ctx: &Ctx) -> Result<()> {
    match args.command {
        KernelCommand::Propagate(a) => propagate(a, ctx),
        KernelCommand::Population(a) => population(a),
        KernelCommand::Nngp(a) => nngp(a),
        KernelCommand::EighBench(a) => eigh_bench(a),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))
}

fn propagate(a: PropagateArgs, ctx: &Ctx) -> Result<()> {
    let data: DataKind = a.data.parse()?;
    let mut cfg = if a.quick {
        PropagateConfig::quick()
    } else if data == DataKind::Powerlaw {
        PropagateConfig::fig6()
    } else {
        PropagateConfig::fig5()
    };
    cfg.data = data;
    cfg.activation = a.activation.parse()?;
    if cfg.activation == NngpActivation::Erf {
        return Err(Error::invalid(
            "--activation erf is not offered here; the paper's propagation figures use relu or poly",
        ));
    }
    cfg.layernorm = a.layernorm;
    cfg.d = a.d.unwrap_or(cfg.d);
    cfg.n1 = a.n1.unwrap_or(cfg.n1);
    cfg.n2 = a.n2.unwrap_or(cfg.n2);
    cfg.p = a.p.unwrap_or(cfg.p);
    cfg.feature_rank = a.feature_rank.unwrap_or(cfg.d / 2).max(1);
    if let Some(amps) = a.amplifications {
        cfg.amplifications = amps;
    }
    cfg.fit_window = (a.fit_min, a.fit_max);
    cfg.method = a.method.parse()?;
    cfg.seed = a.seed;
    cfg.validate()?;
    let bar = if ctx.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let b = indicatif::ProgressBar::new(cfg.amplifications.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:30}] {pos}/{len} D values, eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.set_message("kernel propagate");
        b
    };
    let res = kernels::propagate_with(&cfg, kernels::default_par(), |done, _| {
        bar.set_position(done as u64)
    })?;
    bar.finish_and_clear();
    tracing::info!(
        setup_s = res.timing.setup_s,
        sweep_s = res.timing.sweep_s,
        "kernel propagate timing"
    );
    if let Some(path) = &a.out {
        write_figure(path, 860, 600, &kernels::propagate_chart(&res))?;
    }
    if a.json {
        let mut v = to_json(&res)?;
        v["figure"] = json!(a.out.as_ref().map(|p| p.display().to_string()));
        return out_json(&v);
    }
    let mut s = format!(
        "Kernel feature propagation ({:?} data, {:?}{}; d = {}, N1 = {}, N2 = {}, P = {}, route {:?})\n\
         Φ* = eigenvector #{} of K2, operator eigenvalue {:.4e}\n{:>10} {:>16} {:>16} {:>8}\n",
        cfg.data,
        cfg.activation,
        if cfg.layernorm { " + layernorm" } else { "" },
        cfg.d,
        cfg.n1,
        cfg.n2,
        cfg.p,
        res.method,
        cfg.feature_rank,
        res.phi_star_eigenvalue,
        "D",
        "<f,K3^-1,f>",
        "<f,K3,f>^-1",
        "kept"
    );
    for q in &res.points {
        s += &format!(
            "{:>10} {:>16.6e} {:>16.6e} {:>8}\n",
            q.amplification, q.rkhs_norm, q.inverse_expectation, q.kept_eigenvalues
        );
    }
    s += &format!(
        "slope over D in [{}, {}]: RKHS norm {:.3}, inverse expectation {:.3} (Claim (ii): −2)\n",
        cfg.fit_window.0, cfg.fit_window.1, res.slope_rkhs, res.slope_inverse_expectation
    );
    out(&s)
}

fn population(a: PopulationArgs) -> Result<()> {
    let act: NngpActivation = a.activation.parse()?;
    let amps = a
        .amplifications
        .unwrap_or_else(kernels::default_amplifications);
    let res = kernels::population_propagation(act, a.d, &amps, a.p, (a.fit_min, a.fit_max))?;
    if a.json {
        return out_json(&to_json(&res)?);
    }
    let mut s = format!(
        "Feature propagation at infinite width ({:?}, Gaussian data, d = {}): λ* = {:.5e}\n{:>10} {:>16} {:>16} {:>12}\n",
        act,
        a.d,
        res.phi_star_eigenvalue,
        "D",
        "<f,K3,f>^-1",
        match a.p {
            Some(p) => format!("at P = {p}"),
            None => "(no P)".into(),
        },
        "local slope"
    );
    for q in &res.points {
        s += &format!(
            "{:>10} {:>16.6e} {:>16} {:>12}\n",
            q.amplification,
            q.inverse_expectation,
            q.inverse_expectation_finite_p
                .map_or("-".into(), |v| format!("{v:.6e}")),
            q.local_slope.map_or("-".into(), |v| format!("{v:.3}"))
        );
    }
    s += &format!(
        "slope over D in [{}, {}]: {:.3}{}; steepest local slope {:.3} (Claim (ii): −2)\n",
        a.fit_min,
        a.fit_max,
        res.slope,
        res.slope_finite_p.map_or(String::new(), |v| format!(
            " ({v:.3} at P = {})",
            a.p.unwrap_or(0)
        )),
        res.steepest_local_slope
    );
    out(&s)
}

fn nngp(a: NngpArgs) -> Result<()> {
    let act: NngpActivation = a.activation.parse()?;
    if !(2..=2000).contains(&a.points) || !(1..=10_000).contains(&a.d) {
        return Err(Error::invalid(format!(
            "--points {} / --d {} are not allowed; use 2–2000 points in dimension 1–10000",
            a.points, a.d
        )));
    }
    if a.widths.is_empty() || a.widths.iter().any(|&w| !(1..=1_000_000).contains(&w)) {
        return Err(Error::invalid(format!(
            "--widths {:?} are not allowed; give widths between 1 and 1000000",
            a.widths
        )));
    }
    let pts = Points::gaussian(a.points, a.d, a.seed)?;
    let closed = nngp_kernel(act, &pts, 1.0)?;
    let mut rows = Vec::new();
    for &w in &a.widths {
        let emp = empirical_kernel(act, &pts, 1.0, w, a.seed.wrapping_add(1))?;
        let err = emp
            .iter()
            .zip(&closed)
            .map(|(e, c)| (e - c).abs())
            .fold(0.0, f64::max);
        rows.push((w, err, err * (w as f64).sqrt()));
    }
    if a.json {
        return out_json(&json!({
            "activation": act,
            "points": a.points,
            "d": a.d,
            "widths": rows.iter().map(|r| json!({"width": r.0, "max_abs_error": r.1, "error_times_sqrt_width": r.2})).collect::<Vec<_>>(),
        }));
    }
    let mut s = format!(
        "Empirical {act:?} kernel vs closed form on {} Gaussian points in d = {}\n{:>10} {:>16} {:>18}\n",
        a.points, a.d, "width", "max |K_N − K|", "× √width"
    );
    for r in rows {
        s += &format!("{:>10} {:>16.6e} {:>18.6}\n", r.0, r.1, r.2);
    }
    out(&s)
}

fn eigh_bench(a: EighBenchArgs) -> Result<()> {
    let b = kernels::eigh_benchmark(a.n, a.reps)?;
    if a.json {
        return out_json(&to_json(&b)?);
    }
    out(&format!(
        "faer self-adjoint eigen (values + vectors), n = {}, {} threads: median {:.3} s over {} reps {:?}; \
         max ‖Kv − λv‖/λ_max = {:.2e}; λ_max = {:.6}, Σλ = {:.6}\n",
        b.n, b.threads, b.median_s, a.reps, b.times_s, b.max_relative_residual, b.lam_max, b.sum
    ))
}
