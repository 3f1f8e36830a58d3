//! `flscale cavity` — the solvable two-layer model (spec 04; blog text, seed 001): the overlap
//! potential, its phases, the self-consistent adaptive kernel and the cubic sample scales.

use clap::{Args, Subcommand};
use flscale::cavity::AdaptiveParams;
use flscale::{Error, Result};

use super::Ctx;

mod fixed_points;
mod mixed;
mod potential;
mod solve;
mod sweep_p;

pub use potential::{potential_report, PotentialInput};

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
    Potential(potential::PotentialArgs),
    /// Fold, equal-depth coexistence and spinodal of Ũ_u in u, with closed forms, ρ*, R on
    /// each side, and the (c, u) phase diagram.
    #[command(
        allow_negative_numbers = true,
        after_help = "Example:\n  flscale cavity phase --sigma-w2 1 --b 0.3 --c -0.3 --json\n  flscale cavity phase --sigma-w2 0.5 --b 0.3 --c -0.3 --diagram phases.svg"
    )]
    Phase(potential::PhaseArgs),
    /// The self-consistent adaptive kernel on a sampled data set, from small and from large
    /// alignment: b, c, R, test MSE and the predicted weight covariance.
    #[command(
        allow_negative_numbers = true,
        after_help = "Example (the blog preset D = N = 20, T = 0.05, s_a² = 1/N, σ_w² = 1, ε = 0.3):\n  flscale cavity solve --p 150 --json"
    )]
    Solve(solve::SolveArgs),
    /// R(P), b(P), c(P) and test MSE along both branches (continuation in P), the transition.
    #[command(
        allow_negative_numbers = true,
        after_help = "Examples:\n  flscale cavity sweep-p --p-values 50,100,150,200,300,400 --out sweep.svg\n  flscale reproduce blog --quick --out runs/blog-quick\n  flscale cavity sweep-p --p-values 10,40,160 --langevin runs/blog-quick --out overlay.svg"
    )]
    SweepP(sweep_p::SweepArgs),
    /// Every fixed point of the adaptive-kernel map (b, c) ↦ G(b, c) at one P, with its
    /// stability: a grid of sign changes of G − id over a rectangle that contains every value of
    /// G, each candidate refined by Newton. Two attracting fixed points with a saddle between
    /// them are coexisting phases (a first-order transition).
    #[command(
        allow_negative_numbers = true,
        long_about = "Every fixed point of the adaptive-kernel map (b, c) ↦ G(b, c) at one P.\n\nG is one undamped step of `cavity solve` (overlap posterior p(ρ | b, c), kernel K, residual r̄ = T(K + T·I)⁻¹y, projection onto H1, H3). `solve` iterates G with damping from (0, 0) and (1, ε), so it finds only fixed points that attract the damped iteration, and only from those two basins. This command evaluates G on a grid × grid lattice of (b, c), marks every cell where both components of G(b, c) − (b, c) change sign, refines each by Newton (finite-difference Jacobian) to max|G − id| < --tol, and merges duplicates.\n\nThe default ranges are ±1.02·B_b and ±1.02·B_c, where |b'| ≤ B_b and |c'| ≤ B_c bound every value of G on this data set (|r̄| ≤ |y| because K is positive semi-definite; B = √((AᵀA)⁻¹)_kk·|y| with A = [H1(z), H3(z)]): every fixed point lies inside, and the indices sign det(I − ∂G) of all fixed points must sum to 1 (Brouwer degree); a different `index_sum` means a fixed point was missed (use a finer --grid). Cost: grid² evaluations of G, each one kernel build and Cholesky solve of size P (time one with `cavity solve`).\n\nFor each fixed point: b, c, R = E[ρ²], outliers (neurons beyond 3σ_w/√D), free energy F, test MSE, the eigenvalues λ of ∂G and the stability: attracting (Re λ < 1: the damped iteration converges for η < max_stable_damping), saddle (index −1), repelling. Two attracting fixed points with a saddle between them (`coexistence`) are the signature of a first-order transition; the lower F is the preferred phase.",
        after_help = "Examples:\n  flscale cavity fixed-points --p 150 --grid 31\n  flscale cavity fixed-points --d 8 --n 8 --p 40 --grid 41 --with-damped --json\n  flscale cavity fixed-points --p 100 --s-a2 0.02 --b-range=-0.5,0.5 --c-range 0,0.5 --grid 61"
    )]
    FixedPoints(fixed_points::FixedPointArgs),
    /// The cubic kernel power λ3 and the fixed-kernel (O(D³)) vs adaptive (O(D)) sample scales.
    #[command(
        allow_negative_numbers = true,
        after_help = "Example:\n  flscale cavity cubic --d 50 --n 50 --t 0.05 --json"
    )]
    Cubic(potential::CubicArgs),
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
pub(super) struct ResidualArgs {
    /// Hidden-weight prior scale σ_w² (w ∼ 𝒩(0, σ_w²/D·I)); > 0.
    #[arg(long = "sigma-w2", default_value_t = 0.5)]
    pub(super) sigma_w2: f64,
    /// Linear residual coefficient b.
    #[arg(long, default_value_t = 0.3)]
    pub(super) b: f64,
    /// Cubic residual coefficient c.
    #[arg(long, default_value_t = -0.3)]
    pub(super) c: f64,
}

/// The model and solver settings shared by `solve` and `sweep-p` (defaults: the blog preset).
#[derive(Debug, Args)]
pub(super) struct ModelArgs {
    /// Input dimension D (≥ 2).
    #[arg(long, default_value_t = 20)]
    pub(super) d: usize,
    /// Width N (enters through N·s_a²).
    #[arg(long, default_value_t = 20)]
    pub(super) n: usize,
    /// Likelihood variance T.
    #[arg(long, default_value_t = 0.05)]
    pub(super) t: f64,
    /// Readout prior variance s_a² (default 1/N).
    #[arg(long = "s-a2")]
    pub(super) s_a2: Option<f64>,
    /// Hidden prior scale σ_w².
    #[arg(long = "sigma-w2", default_value_t = 1.0)]
    pub(super) sigma_w2: f64,
    /// Cubic target strength ε (y = H1 + ε·H3).
    #[arg(long, default_value_t = 0.3)]
    pub(super) eps: f64,
    /// Seed of the sampled data (train and test).
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
    /// Number of test points.
    #[arg(long = "p-test", default_value_t = 1000)]
    pub(super) p_test: usize,
    /// Damping η ∈ (0, 1] of the fixed-point iteration.
    #[arg(long, default_value_t = 0.5)]
    pub(super) damping: f64,
    /// Iteration cap per branch.
    #[arg(long = "max-iter", default_value_t = 400)]
    pub(super) max_iter: usize,
    /// Convergence tolerance on max(|Δb|, |Δc|).
    #[arg(long, default_value_t = 1e-7)]
    pub(super) tol: f64,
}

impl ModelArgs {
    pub(super) fn params(&self, p: usize) -> Result<AdaptiveParams> {
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

/// Runs `flscale cavity`.
pub fn run(args: CavityArgs, ctx: &Ctx) -> Result<()> {
    validate_ranges(&args.command)?;
    match args.command {
        CavityCommand::Potential(a) => potential::run_potential(a),
        CavityCommand::Phase(a) => potential::run_phase(a),
        CavityCommand::Solve(a) => solve::run_solve(a, ctx),
        CavityCommand::SweepP(a) => sweep_p::run_sweep(a, ctx),
        CavityCommand::FixedPoints(a) => fixed_points::run_fixed_points(a),
        CavityCommand::Cubic(a) => potential::run_cubic(a),
        CavityCommand::Sweep(a) => mixed::run_sweep_over(a),
        CavityCommand::Continuum(a) => mixed::run_continuum(a),
    }
}

pub(super) fn to_json<T: serde::Serialize>(v: &T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))
}

/// The ranges in which the blog model's numbers stay inside f64 (docs/limits.md):
/// sizes D, N up to 10⁶, variances T, s_a², σ_w² in [10⁻¹², 10⁶], residual and target
/// coefficients b, c, ε within ±10⁶, the overlap grid |ρ| ≤ 10³. Beyond them u = P²s_a²/(T²D)
/// and the potential's exponentials overflow (`--rho-max 1e308` gave a NaN grid, `--d 1e-308`
/// u = inf) or the fixed-point search runs for minutes (`fixed-points --s-a2 1e300`).
const SIZE: (f64, f64) = (1.0, 1e6);
const VARIANCE: (f64, f64) = (1e-12, 1e6);
const COEFFICIENT: (f64, f64) = (-1e6, 1e6);
const WHY: &str = "the blog model's range; docs/limits.md";

fn check_residual(sigma_w2: f64, b: f64, c: f64) -> Result<()> {
    use super::args::in_range;
    in_range("--sigma-w2", sigma_w2, VARIANCE.0, VARIANCE.1, WHY)?;
    in_range("--b", b, COEFFICIENT.0, COEFFICIENT.1, WHY)?;
    in_range("--c", c, COEFFICIENT.0, COEFFICIENT.1, WHY)
}

fn check_finite_model(d: f64, n: f64, t: f64, s_a2: Option<f64>) -> Result<()> {
    use super::args::in_range;
    in_range("--d", d, SIZE.0, SIZE.1, WHY)?;
    in_range("--n", n, SIZE.0, SIZE.1, WHY)?;
    in_range("--t", t, VARIANCE.0, VARIANCE.1, WHY)?;
    match s_a2 {
        Some(v) => in_range("--s-a2", v, VARIANCE.0, VARIANCE.1, WHY),
        None => Ok(()),
    }
}

/// The range checks of `cavity potential` (messages name its flags). Shared with
/// `flscale serve`'s model page, so that the API refuses what the CLI refuses.
pub(crate) fn check_potential_input(i: &PotentialInput) -> Result<()> {
    use super::args::in_range;
    check_residual(i.sigma_w2, i.b, i.c)?;
    check_finite_model(i.d, i.n, i.t, i.s_a2)?;
    in_range("--rho-max", i.rho_max, 1e-6, 1e3, WHY)?;
    for &u in &i.u {
        in_range("--u", u, -1e12, 1e12, WHY)?;
    }
    for &p in &i.p {
        in_range("--p", p, 0.0, 1e9, WHY)?;
    }
    Ok(())
}

/// The range checks of `cavity phase` (messages name its flags); shared with `flscale serve`.
pub(crate) fn check_phase_input(
    sigma_w2: f64,
    b: f64,
    c: f64,
    d: f64,
    c_min: f64,
    c_max: f64,
) -> Result<()> {
    use super::args::in_range;
    check_residual(sigma_w2, b, c)?;
    in_range("--d", d, SIZE.0, SIZE.1, WHY)?;
    in_range("--c-min", c_min, COEFFICIENT.0, COEFFICIENT.1, WHY)?;
    in_range("--c-max", c_max, COEFFICIENT.0, COEFFICIENT.1, WHY)
}

fn validate_ranges(command: &CavityCommand) -> Result<()> {
    use super::args::in_range;
    let why = WHY;
    // The adaptive-kernel iteration's overlap posterior sharpens with s_a²/T² (u = P²s_a²/(T²D)):
    // at P = 40 a ratio of 4·10⁶ takes seconds per solve, 4·10⁸ over a minute.
    let model = |m: &ModelArgs| -> Result<()> {
        check_finite_model(m.d as f64, m.n as f64, m.t, m.s_a2)?;
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
        CavityCommand::Potential(a) => check_potential_input(&PotentialInput {
            sigma_w2: a.residual.sigma_w2,
            b: a.residual.b,
            c: a.residual.c,
            u: a.u.clone(),
            p: a.p.clone(),
            d: a.d,
            n: a.n,
            t: a.t,
            s_a2: a.s_a2,
            rho_max: a.rho_max,
            points: a.points,
        }),
        CavityCommand::Phase(a) => check_phase_input(
            a.residual.sigma_w2,
            a.residual.b,
            a.residual.c,
            a.d as f64,
            a.c_min,
            a.c_max,
        ),
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
            check_residual(a.residual.sigma_w2, a.residual.b, a.residual.c)?;
            check_finite_model(a.d, a.n, a.t, a.s_a2)
        }
        #[allow(unreachable_patterns)]
        _ => Ok(()),
    }
}
