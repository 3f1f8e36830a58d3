//! `flscale cavity` — the solvable two-layer model (spec 04; blog text, seed 001): the overlap
//! potential, its phases, the self-consistent adaptive kernel and the cubic sample scales.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use flscale::cavity::{self, figures, AdaptiveParams, FiniteModel, MeanField};
use flscale::plot::write_figure;
use flscale::{Error, Result};
use serde_json::json;

use super::{out, out_json, Ctx};

mod mixed;

/// Arguments of `flscale cavity`.
#[derive(Debug, Args)]
pub struct CavityArgs {
    #[command(subcommand)]
    command: CavityCommand,
}

#[derive(Debug, Subcommand)]
enum CavityCommand {
    /// The overlap potential: mean-field Ũ_u(ρ)/D for several u, or the finite U(ρ; b, c)/D for
    /// several P; a table, JSON, or a figure (blog Fig. 4.1).
    #[command(
        allow_negative_numbers = true,
        after_help = "Examples:\n  flscale cavity potential --sigma-w2 0.5 --b 0.3 --c -0.3 --u 20,25,30 --out fig41.svg\n  flscale cavity potential --b 0.05 --c 0.3 --p 100,200 --d 20 --t 0.05 --n 20 --json"
    )]
    Potential(PotentialArgs),
    /// Fold, equal-depth coexistence and spinodal of Ũ_u in u, with closed forms, ρ*, R on
    /// each side, and the (c, u) phase diagram.
    #[command(
        allow_negative_numbers = true,
        after_help = "Example:\n  flscale cavity phase --sigma-w2 1 --b 0.3 --c -0.3 --json\n  flscale cavity phase --sigma-w2 0.5 --b 0.3 --c -0.3 --diagram phases.svg"
    )]
    Phase(PhaseArgs),
    /// The self-consistent adaptive kernel on a sampled data set, from small and from large
    /// alignment: b, c, R, test MSE and the predicted weight covariance.
    #[command(
        allow_negative_numbers = true,
        after_help = "Example (the blog preset D = N = 20, T = 0.05, s_a² = 1/N, σ_w² = 1, ε = 0.3):\n  flscale cavity solve --p 150 --json"
    )]
    Solve(SolveArgs),
    /// R(P), b(P), c(P) and test MSE along both branches (continuation in P), the transition.
    #[command(
        allow_negative_numbers = true,
        after_help = "Examples:\n  flscale cavity sweep-p --p-values 50,100,150,200,300,400 --out sweep.svg\n  flscale reproduce blog --quick --out runs/blog-quick\n  flscale cavity sweep-p --p-values 10,40,160 --langevin runs/blog-quick --out overlay.svg"
    )]
    SweepP(SweepArgs),
    /// Every fixed point of the adaptive-kernel map (b, c) ↦ G(b, c) at one P, with its
    /// stability: a grid of sign changes of G − id over a rectangle that contains every value of
    /// G, each candidate refined by Newton. Two attracting fixed points with a saddle between
    /// them are coexisting phases (a first-order transition).
    #[command(
        allow_negative_numbers = true,
        long_about = "Every fixed point of the adaptive-kernel map (b, c) ↦ G(b, c) at one P.\n\nG is one undamped step of `cavity solve` (overlap posterior p(ρ | b, c), kernel K, residual r̄ = T(K + T·I)⁻¹y, projection onto H1, H3). `solve` iterates G with damping from (0, 0) and (1, ε), so it finds only fixed points that attract the damped iteration, and only from those two basins. This command evaluates G on a grid × grid lattice of (b, c), marks every cell where both components of G(b, c) − (b, c) change sign, refines each by Newton (finite-difference Jacobian) to max|G − id| < --tol, and merges duplicates.\n\nThe default ranges are ±1.02·B_b and ±1.02·B_c, where |b'| ≤ B_b and |c'| ≤ B_c bound every value of G on this data set (|r̄| ≤ |y| because K is positive semi-definite; B = √((AᵀA)⁻¹)_kk·|y| with A = [H1(z), H3(z)]): every fixed point lies inside, and the indices sign det(I − ∂G) of all fixed points must sum to 1 (Brouwer degree); a different `index_sum` means a fixed point was missed (use a finer --grid). Cost: grid² evaluations of G, each one kernel build and Cholesky solve of size P (time one with `cavity solve`).\n\nFor each fixed point: b, c, R = E[ρ²], outliers (neurons beyond 3σ_w/√D), free energy F, test MSE, the eigenvalues λ of ∂G and the stability: attracting (Re λ < 1: the damped iteration converges for η < max_stable_damping), saddle (index −1), repelling. Two attracting fixed points with a saddle between them (`coexistence`) are the signature of a first-order transition; the lower F is the preferred phase.",
        after_help = "Examples:\n  flscale cavity fixed-points --p 150 --grid 31\n  flscale cavity fixed-points --d 8 --n 8 --p 40 --grid 41 --with-damped --json\n  flscale cavity fixed-points --p 100 --s-a2 0.02 --b-range=-0.5,0.5 --c-range 0,0.5 --grid 61"
    )]
    FixedPoints(FixedPointArgs),
    /// The cubic kernel power λ3 and the fixed-kernel (O(D³)) vs adaptive (O(D)) sample scales.
    #[command(
        allow_negative_numbers = true,
        after_help = "Example:\n  flscale cavity cubic --d 50 --n 50 --t 0.05 --json"
    )]
    Cubic(CubicArgs),
    /// `solve` along one parameter (--over n|t|eps) with the phase of every solution (GFL,
    /// GMFL-I, GMFL-II: Rubin, Seroussi & Ringel 2024), and a figure with the phase band.
    #[command(
        allow_negative_numbers = true,
        long_about = "`solve` (both starts) at each value of one parameter, with the phase of every self-consistent solution.\n\nThe phase (Rubin, Seroussi & Ringel 2024, §2.4 and Fig. 1): the minima of the single-neuron potential U(ρ; b, c) (positions, depths U − U(0), curvatures), the posterior mass beyond the barrier (the side wells; exact 1-D quadrature of e^{−U}), u/u_coexist(b, c) and u/u_spinodal(b, c) from the mean-field closed forms, and the learned cubic fraction 1 − c/ε. Label: GFL when U has no side minimum or fewer than one neuron (mass < 1/N) sits in the side wells, GMFL-I (mixed phase) when side wells carry mass between 1/N and ½, GMFL-II when they carry more than ½.\n\nEach solution reports its solver: damped steps, then safeguarded Newton on G(b, c) − (b, c) when the damped iteration has not converged after 25 steps (the mixed phase makes ∂G stiff), with the final residual and the number of map evaluations.",
        after_help = "Examples (the paper's App. D: d = 150, n = 600, σ² = 0.05, σ_a² = 0.011, σ_w² = 0.5, ε = −1.2):\n  flscale cavity sweep --over n --values 2800,2000,1400,1000,700 --readout-total 0.011 --d 150 --p 600 --t 0.05 --sigma-w2 0.5 --eps -1.2 --out appd.svg\n  flscale cavity sweep --over t --values 0.04,0.05,0.06 --p 60 --json"
    )]
    Sweep(mixed::SweepOverArgs),
    /// The equivalent-kernel (continuum) self-consistency of the paper's App. A.3 at D → ∞ (fixed
    /// u, κ) and at finite D, along a path in T, N or P, with the onset of the mixed phase.
    #[command(
        allow_negative_numbers = true,
        long_about = "The equivalent-kernel (EK) self-consistency of Rubin, Seroussi & Ringel (2024), App. A.2–A.3: the law p(ρ) ∝ e^{−D·Ũ_u(ρ; b, c)} of one neuron's teacher overlap, the kernel restricted to span(H1, H3/√6), and the GPR equation (b, √6c) = (I + κ·D·E[c cᵀ])⁻¹(1, √6ε). It depends on two invariants, u = P²s_a²/(T²D) and κ = P·N·s_a²/(T·D), unchanged by the paper's scaling N → βN, D → √βD, σ_a² → σ_a²/√β, P → βP (eq. 11), and on D.\n\nD → ∞: the centre well contributes κ·g₀/(1 − X) to the linear mode (X = u·g₀·b², g₀ = 4σ_w²/(π(1 + 2σ_w²))); GFL (c = ε) holds while u < u_coexist(b, ε); beyond it the side wells stay degenerate with the centre (u = u_coexist(b, c), the mixed phase GMFL-I) and hold φ/D of the neurons, φ set by the GPR equation. The onset is where GFL ends. Finite D: the same equations with p(ρ) averaged by quadrature (Newton on the 2-D map), labelled by the rule of `cavity sweep` with the mass floor 0.01/D.",
        after_help = "Examples:\n  flscale cavity continuum --paper main --over t --values 0.1,0.15,0.2,0.25,0.3 --out main-path.svg\n  flscale cavity continuum --paper main --values 0.17 --d-values 150,1500,15000,150000 --json\n  flscale cavity continuum --paper app-d --over n --values 700,1000,1400,2000,2800"
    )]
    Continuum(mixed::ContinuumArgs),
}

/// Residual coefficients r = b·H1 + c·H3 and the hidden prior.
#[derive(Debug, Args)]
struct ResidualArgs {
    /// Hidden-weight prior scale σ_w² (w ∼ 𝒩(0, σ_w²/D·I)); > 0.
    #[arg(long = "sigma-w2", default_value_t = 0.5)]
    sigma_w2: f64,
    /// Linear residual coefficient b.
    #[arg(long, default_value_t = 0.3)]
    b: f64,
    /// Cubic residual coefficient c.
    #[arg(long, default_value_t = -0.3)]
    c: f64,
}

#[derive(Debug, Args)]
struct PotentialArgs {
    #[command(flatten)]
    residual: ResidualArgs,
    /// Mean-field interaction strengths u = P²s_a²/(T²D) (comma-separated); default: just below
    /// the fold, at coexistence and at the spinodal.
    #[arg(long, value_delimiter = ',')]
    u: Vec<f64>,
    /// Finite-size potential U(ρ; b, c) at these P instead of Ũ_u (comma-separated).
    #[arg(long, value_delimiter = ',')]
    p: Vec<f64>,
    /// Input dimension D (finite potential).
    #[arg(long, default_value_t = 20.0)]
    d: f64,
    /// Width N; s_a² defaults to 1/N (finite potential).
    #[arg(long, default_value_t = 20.0)]
    n: f64,
    /// Likelihood variance T (finite potential).
    #[arg(long, default_value_t = 0.05)]
    t: f64,
    /// Readout prior variance s_a² (default 1/N).
    #[arg(long = "s-a2")]
    s_a2: Option<f64>,
    /// The grid spans ρ ∈ [−rho-max, rho-max].
    #[arg(long = "rho-max", default_value_t = 1.5)]
    rho_max: f64,
    /// Number of grid points (2 … 100000).
    #[arg(long, default_value_t = 201)]
    points: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Write the figure (.svg or .png).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct PhaseArgs {
    #[command(flatten)]
    residual: ResidualArgs,
    /// Input dimension D for the finite-D moments R at coexistence.
    #[arg(long, default_value_t = 20)]
    d: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Write the (c, u) phase diagram at this σ_w², b (.svg or .png).
    #[arg(long)]
    diagram: Option<PathBuf>,
    /// Smallest c of the diagram.
    #[arg(long = "c-min", default_value_t = -1.0)]
    c_min: f64,
    /// Largest c of the diagram.
    #[arg(long = "c-max", default_value_t = 1.0)]
    c_max: f64,
    /// Number of c values in the diagram (2 … 10000).
    #[arg(long = "diagram-points", default_value_t = 201)]
    diagram_points: usize,
}

/// The model and solver settings shared by `solve` and `sweep-p` (defaults: the blog preset).
#[derive(Debug, Args)]
struct ModelArgs {
    /// Input dimension D (≥ 2).
    #[arg(long, default_value_t = 20)]
    d: usize,
    /// Width N (enters through N·s_a²).
    #[arg(long, default_value_t = 20)]
    n: usize,
    /// Likelihood variance T.
    #[arg(long, default_value_t = 0.05)]
    t: f64,
    /// Readout prior variance s_a² (default 1/N).
    #[arg(long = "s-a2")]
    s_a2: Option<f64>,
    /// Hidden prior scale σ_w².
    #[arg(long = "sigma-w2", default_value_t = 1.0)]
    sigma_w2: f64,
    /// Cubic target strength ε (y = H1 + ε·H3).
    #[arg(long, default_value_t = 0.3)]
    eps: f64,
    /// Seed of the sampled data (train and test).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Number of test points.
    #[arg(long = "p-test", default_value_t = 1000)]
    p_test: usize,
    /// Damping η ∈ (0, 1] of the fixed-point iteration.
    #[arg(long, default_value_t = 0.5)]
    damping: f64,
    /// Iteration cap per branch.
    #[arg(long = "max-iter", default_value_t = 400)]
    max_iter: usize,
    /// Convergence tolerance on max(|Δb|, |Δc|).
    #[arg(long, default_value_t = 1e-7)]
    tol: f64,
}

impl ModelArgs {
    fn params(&self, p: usize) -> Result<AdaptiveParams> {
        let s_a2 = self.s_a2.unwrap_or(1.0 / self.n.max(1) as f64);
        let prm = AdaptiveParams {
            d: self.d,
            n: self.n,
            p,
            t: self.t,
            s_a2,
            sigma_w2: self.sigma_w2,
            eps: self.eps,
            seed: self.seed,
            p_test: self.p_test,
            damping: self.damping,
            max_iter: self.max_iter,
            tol: self.tol,
        };
        prm.validate()?;
        Ok(prm)
    }
}

#[derive(Debug, Args)]
struct SolveArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Number of training samples P.
    #[arg(long, default_value_t = 150)]
    p: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SweepArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The P values (comma-separated).
    #[arg(long = "p-values", value_delimiter = ',', default_values_t = vec![25, 50, 75, 100, 150, 200, 300, 400])]
    p_values: Vec<usize>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Write the R(P) figure (.svg or .png).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A results directory of `flscale sweep` / `flscale reproduce` (e.g. the `blog` preset):
    /// its runs with the same D, N, T, s_a², σ_w², ε are overlaid (R vs P) on the figure and
    /// listed next to the prediction.
    #[arg(long, value_name = "DIR")]
    langevin: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct FixedPointArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Number of training samples P.
    #[arg(long, default_value_t = 150)]
    p: usize,
    /// Range of b searched, lo,hi (default ±1.02·B_b, every value G can take; see above).
    #[arg(long = "b-range", value_delimiter = ',', num_args = 1)]
    b_range: Vec<f64>,
    /// Range of c searched, lo,hi (default ±1.02·B_c).
    #[arg(long = "c-range", value_delimiter = ',', num_args = 1)]
    c_range: Vec<f64>,
    /// Grid nodes per axis (3 … 2000; grid² evaluations of G).
    #[arg(long, default_value_t = 41)]
    grid: usize,
    /// Also run `solve`'s damped iteration from both starts and say which fixed point each reached.
    #[arg(long = "with-damped")]
    with_damped: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CubicArgs {
    /// Input dimension D.
    #[arg(long, default_value_t = 20.0)]
    d: f64,
    /// Width N.
    #[arg(long, default_value_t = 20.0)]
    n: f64,
    /// Likelihood variance T.
    #[arg(long, default_value_t = 0.05)]
    t: f64,
    /// Readout prior variance s_a² (default 1/N).
    #[arg(long = "s-a2")]
    s_a2: Option<f64>,
    /// Residual (b, c) that sets the aligned overlap ρ* and u_c; σ_w² the hidden prior.
    #[command(flatten)]
    residual: ResidualArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `flscale cavity`.
pub fn run(args: CavityArgs, ctx: &Ctx) -> Result<()> {
    validate_ranges(&args.command)?;
    match args.command {
        CavityCommand::Potential(a) => run_potential(a),
        CavityCommand::Phase(a) => run_phase(a),
        CavityCommand::Solve(a) => run_solve(a, ctx),
        CavityCommand::SweepP(a) => run_sweep(a, ctx),
        CavityCommand::FixedPoints(a) => run_fixed_points(a),
        CavityCommand::Cubic(a) => run_cubic(a),
        CavityCommand::Sweep(a) => mixed::run_sweep_over(a),
        CavityCommand::Continuum(a) => mixed::run_continuum(a),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))
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

fn run_potential(a: PotentialArgs) -> Result<()> {
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

fn run_phase(a: PhaseArgs) -> Result<()> {
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

fn run_solve(a: SolveArgs, _ctx: &Ctx) -> Result<()> {
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
        s += &mixed::phase_text(&sol.phase);
        s += &mixed::solver_text(sol);
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

fn run_sweep(a: SweepArgs, ctx: &Ctx) -> Result<()> {
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
                flscale::cavity::adaptive::SolutionOrigin::PreviousSolution =>
                    "continued from the previous P",
                flscale::cavity::adaptive::SolutionOrigin::BranchStart => "from the branch's start",
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
    if let (Some(curve), Some(rows)) = (&langevin, &overlay) {
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
    }
    out(&s)
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

fn run_fixed_points(a: FixedPointArgs) -> Result<()> {
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
        s += &mixed::phase_text(&p.phase);
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

fn run_cubic(a: CubicArgs) -> Result<()> {
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

/// The ranges in which the blog model's numbers stay inside f64 (issue 21, docs/limits.md):
/// sizes D, N up to 10⁶, variances T, s_a², σ_w² in [10⁻¹², 10⁶], residual and target
/// coefficients b, c, ε within ±10⁶, the overlap grid |ρ| ≤ 10³. Beyond them u = P²s_a²/(T²D)
/// and the potential's exponentials overflow (`--rho-max 1e308` gave a NaN grid, `--d 1e-308`
/// u = inf) or the fixed-point search runs for minutes (`fixed-points --s-a2 1e300`).
fn validate_ranges(command: &CavityCommand) -> Result<()> {
    use super::args::in_range;
    const SIZE: (f64, f64) = (1.0, 1e6);
    const VARIANCE: (f64, f64) = (1e-12, 1e6);
    const COEFFICIENT: (f64, f64) = (-1e6, 1e6);
    let why = "the blog model's range; docs/limits.md";
    let residual = |r: &ResidualArgs| -> Result<()> {
        in_range("--sigma-w2", r.sigma_w2, VARIANCE.0, VARIANCE.1, why)?;
        in_range("--b", r.b, COEFFICIENT.0, COEFFICIENT.1, why)?;
        in_range("--c", r.c, COEFFICIENT.0, COEFFICIENT.1, why)
    };
    let finite_model = |d: f64, n: f64, t: f64, s_a2: Option<f64>| -> Result<()> {
        in_range("--d", d, SIZE.0, SIZE.1, why)?;
        in_range("--n", n, SIZE.0, SIZE.1, why)?;
        in_range("--t", t, VARIANCE.0, VARIANCE.1, why)?;
        match s_a2 {
            Some(v) => in_range("--s-a2", v, VARIANCE.0, VARIANCE.1, why),
            None => Ok(()),
        }
    };
    // The adaptive-kernel iteration's overlap posterior sharpens with s_a²/T² (u = P²s_a²/(T²D)):
    // at P = 40 a ratio of 4·10⁶ takes seconds per solve, 4·10⁸ over a minute.
    let model = |m: &ModelArgs| -> Result<()> {
        finite_model(m.d as f64, m.n as f64, m.t, m.s_a2)?;
        let s_a2 = m.s_a2.unwrap_or(1.0 / m.n.max(1) as f64);
        let ratio = s_a2 / (m.t * m.t);
        if ratio > 1e6 {
            return Err(Error::invalid(format!(
                "--s-a2 {s_a2} with --t {} is not allowed; s_a²/T² = {ratio:.1e} must be at most 1e6, beyond which the adaptive-kernel iteration takes minutes (docs/limits.md)",
                m.t
            )));
        }
        in_range("--sigma-w2", m.sigma_w2, VARIANCE.0, VARIANCE.1, why)?;
        // ε = 10⁶ made the iteration run for over a minute; the blog's ε is 0.3.
        in_range("--eps", m.eps, -10.0, 10.0, why)
    };
    match command {
        CavityCommand::Potential(a) => {
            residual(&a.residual)?;
            finite_model(a.d, a.n, a.t, a.s_a2)?;
            in_range("--rho-max", a.rho_max, 1e-6, 1e3, why)?;
            for &u in &a.u {
                in_range("--u", u, -1e12, 1e12, why)?;
            }
            for &p in &a.p {
                in_range("--p", p, 0.0, 1e9, why)?;
            }
            Ok(())
        }
        CavityCommand::Phase(a) => {
            residual(&a.residual)?;
            in_range("--d", a.d as f64, SIZE.0, SIZE.1, why)?;
            in_range("--c-min", a.c_min, COEFFICIENT.0, COEFFICIENT.1, why)?;
            in_range("--c-max", a.c_max, COEFFICIENT.0, COEFFICIENT.1, why)
        }
        CavityCommand::Solve(a) => model(&a.model),
        CavityCommand::SweepP(a) => model(&a.model),
        CavityCommand::FixedPoints(a) => {
            model(&a.model)?;
            for &v in a.b_range.iter().chain(&a.c_range) {
                in_range("--b-range/--c-range", v, COEFFICIENT.0, COEFFICIENT.1, why)?;
            }
            Ok(())
        }
        CavityCommand::Cubic(a) => {
            residual(&a.residual)?;
            finite_model(a.d, a.n, a.t, a.s_a2)
        }
        #[allow(unreachable_patterns)]
        _ => Ok(()),
    }
}
