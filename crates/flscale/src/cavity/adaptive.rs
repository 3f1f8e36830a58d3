//! The self-consistent adaptive kernel on a sampled data set, and its continuation in P.
//!
//! Source: blog §"Match the residual to the network's prediction" (the kernel K(b, c), the
//! mean residual r̄ = T(K + T·I)⁻¹y and the least-squares projection onto the sampled H1, H3),
//! §"The hidden weight covariance records the learned direction" (E[wwᵀ] and R = E[ρ²]);
//! spec 04 "What the tool computes" (`solve`, `sweep-p`).
//!
//! One step of the fixed-point map (b, c) ↦ (b', c'):
//! 1. the overlap posterior p(ρ | b, c) ∝ e^{−U(ρ; b, c)} ([`FiniteModel::potential`]),
//!    discretised by the trapezoid rule on a grid fine enough for its narrowest well;
//! 2. the kernel K_μν = N s_a²·E[erf(w·x^μ) erf(w·x^ν)] with w = ρe + ξ, ρ ∼ p(ρ | b, c) and
//!    ξ ∼ 𝒩(0, σ_w²/(D−1)·(I − eeᵀ)) (so |ξ|² concentrates at σ_w², blog §"Check the
//!    perpendicular norm approximation"); see [`kernel_block`];
//! 3. r̄ = T(K + T·I)⁻¹y by a Cholesky solve (faer, sequential, so results do not depend on
//!    the thread count);
//! 4. (b', c') = the least-squares fit r̄ ≈ b'·H1(z) + c'·H3(z) on the training set.
//!
//! Damped iteration (b, c) ← (1 − η)(b, c) + η(b', c') runs to a fixed point from two starts:
//! small alignment (b = c = 0: the posterior is the prior) and large alignment (the full
//! target b = 1, c = ε), the two branches of the first-order transition.
//!
//! The kernel itself is in [`super::sampled_kernel`], the overlap law in
//! [`super::overlap_posterior`], the continuation in P in [`super::sweep_p`].

use faer::{Mat, Par};
use serde::Serialize;

use super::phase_at::{phase_at_fixed_point, PhaseAtFixedPoint};
use super::potential::FiniteModel;
use super::sampled_kernel::perp_cov;
use super::solver::{damped_fixed_point, newton_fixed_point, Method, NewtonOptions};
use super::{at_least, finite, positive};
use crate::error::{Error, Result};

pub use super::overlap_posterior::{overlap_posterior, OverlapPosterior};
pub use super::sampled_kernel::{
    erf_pair_mean_quadrature, kernel_block, Points, SERIES_MAX_R, SERIES_TERMS,
};

/// Largest supported training-set size (the kernel is a dense P×P matrix).
pub const MAX_P: usize = 5000;

/// Inputs of `flscale cavity solve` / `sweep-p`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdaptiveParams {
    /// Input dimension D (≥ 2).
    pub d: usize,
    /// Width N (enters through N·s_a²).
    pub n: usize,
    /// Number of training samples P.
    pub p: usize,
    /// Likelihood variance T.
    pub t: f64,
    /// Readout prior variance s_a².
    pub s_a2: f64,
    /// Hidden prior scale σ_w².
    pub sigma_w2: f64,
    /// Cubic target strength ε in y = H1 + ε·H3.
    pub eps: f64,
    /// Seed of the data set (train and test are separate ChaCha streams).
    pub seed: u64,
    /// Number of test points for the test MSE.
    pub p_test: usize,
    /// Damping η ∈ (0, 1] of the fixed-point iteration.
    pub damping: f64,
    /// Iteration cap per branch.
    pub max_iter: usize,
    /// Convergence tolerance on max(|Δb|, |Δc|) of one undamped map application.
    pub tol: f64,
}

impl AdaptiveParams {
    /// The blog preset (spec 03 `blog`): D = N = 20, ε = 0.3, σ_w² = 1, s_a² = 1/N, T = 0.05.
    pub fn blog(p: usize) -> Self {
        AdaptiveParams {
            d: 20,
            n: 20,
            p,
            t: 0.05,
            s_a2: 1.0 / 20.0,
            sigma_w2: 1.0,
            eps: 0.3,
            seed: 0,
            p_test: 1000,
            damping: 0.5,
            max_iter: 400,
            tol: 1e-7,
        }
    }

    /// Checks every field; errors name the field, the value and what is allowed.
    pub fn validate(&self) -> Result<()> {
        at_least("D (input dimension)", self.d, 2)?;
        at_least("N (width)", self.n, 1)?;
        at_least("P (number of samples)", self.p, 2)?;
        if self.p > MAX_P {
            return Err(Error::invalid(format!(
                "P = {} is not allowed; the dense kernel supports P ≤ {MAX_P}",
                self.p
            )));
        }
        at_least("p-test (number of test points)", self.p_test, 1)?;
        if self.p_test > 20_000 {
            return Err(Error::invalid(format!(
                "p-test = {} is not allowed; it must be ≤ 20000",
                self.p_test
            )));
        }
        positive("T (likelihood variance)", self.t)?;
        positive("s_a² (readout prior variance)", self.s_a2)?;
        positive("σ_w² (hidden prior variance)", self.sigma_w2)?;
        finite("ε (cubic target strength)", self.eps)?;
        if !(self.damping > 0.0 && self.damping <= 1.0) {
            return Err(Error::invalid(format!(
                "damping = {} is not allowed; it must be in (0, 1]",
                self.damping
            )));
        }
        at_least("max-iter", self.max_iter, 1)?;
        positive("tol", self.tol)?;
        Ok(())
    }

    pub(crate) fn model(&self, p: usize) -> Result<FiniteModel> {
        FiniteModel::new(self.d as f64, p as f64, self.t, self.s_a2, self.sigma_w2)
    }
}

/// A training set prepared for repeated kernel evaluations.
pub(crate) struct Prepared {
    pub(crate) train: Points,
    pub(crate) y: Vec<f64>,
    cov: Mat<f64>,
    var: Vec<f64>,
}

impl Prepared {
    pub(crate) fn new(train: Points, eps: f64, sigma_w2: f64) -> Self {
        let cov = perp_cov(&train, &train, sigma_w2);
        let var = (0..train.len()).map(|i| cov[(i, i)]).collect();
        let y = train.targets(eps);
        Prepared { train, y, cov, var }
    }

    fn kernel(&self, post: &OverlapPosterior, n_sa2: f64) -> Mat<f64> {
        let side = (&self.train, self.var.as_slice());
        kernel_block(side, side, self.cov.as_ref(), &post.nodes, n_sa2, true)
    }
}

/// α = (K + T·I)⁻¹y and log det(K + T·I) by Cholesky (sequential faer).
fn ridge_solve(mut k: Mat<f64>, t: f64, y: &[f64]) -> Result<(Vec<f64>, f64)> {
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::cholesky::llt;
    let n = k.nrows();
    for i in 0..n {
        k[(i, i)] += t;
    }
    let par = Par::Seq;
    let mut buf = MemBuffer::new(llt::factor::cholesky_in_place_scratch::<f64>(
        n,
        par,
        Default::default(),
    ));
    llt::factor::cholesky_in_place(
        k.as_mut(),
        Default::default(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .map_err(|e| Error::runtime(format!("K + T·I is not positive definite ({e:?})")))?;
    // The factor L (K + T·I = LLᵀ) is in the lower triangle: log det = 2·Σ log L_ii.
    let log_det = 2.0 * (0..n).map(|i| k[(i, i)].ln()).sum::<f64>();
    let mut rhs = Mat::from_fn(n, 1, |i, _| y[i]);
    let mut buf = MemBuffer::new(llt::solve::solve_in_place_scratch::<f64>(n, 1, par));
    llt::solve::solve_in_place(k.as_ref(), rhs.as_mut(), par, MemStack::new(&mut buf));
    Ok(((0..n).map(|i| rhs[(i, 0)]).collect(), log_det))
}

/// Least-squares (b, c) with r ≈ b·H1(z) + c·H3(z) on the sampled z.
pub(crate) fn project(z: &[f64], r: &[f64]) -> (f64, f64) {
    let (mut a11, mut a12, mut a22, mut y1, mut y2) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (&z, &r) in z.iter().zip(r) {
        let (h1, h3) = (z, z * z * z - 3.0 * z);
        a11 += h1 * h1;
        a12 += h1 * h3;
        a22 += h3 * h3;
        y1 += h1 * r;
        y2 += h3 * r;
    }
    let det = a11 * a22 - a12 * a12;
    ((a22 * y1 - a12 * y2) / det, (a11 * y2 - a12 * y1) / det)
}

/// Which start a branch was continued from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Branch {
    /// From small alignment (b = c = 0: the prior).
    Unaligned,
    /// From large alignment (b = 1, c = ε: the whole target as residual).
    Aligned,
}

/// The branch's name as the JSON writes it ("unaligned", "aligned").
pub fn branch_name(branch: Branch) -> &'static str {
    match branch {
        Branch::Unaligned => "unaligned",
        Branch::Aligned => "aligned",
    }
}

/// The predicted hidden-weight covariance E[wwᵀ] = σ_w²/(D−1)·(I − eeᵀ) + R·eeᵀ (blog §"The
/// hidden weight covariance records the learned direction").
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Covariance {
    /// The eigenvalue along e: R.
    pub parallel: f64,
    /// Each perpendicular eigenvalue: σ_w²/(D−1).
    pub perpendicular: f64,
    /// Multiplicity of the perpendicular eigenvalue: D − 1.
    pub perpendicular_multiplicity: usize,
}

/// The adaptive-kernel free energy of a solution, in nats (derived here; the blog gives none).
///
/// Integrating out the readouts exactly turns the posterior of the hidden weights W into
/// p0(W)·𝒩(y; 0, K_W + T·I) with K_W = s_a²Σ_i φ(w_i)φ(w_i)ᵀ (blog §"Score one neuron…", the
/// same Gaussian integral for all N readouts). With the N neurons i.i.d. from q (the overlap law
/// p(ρ | b, c), the perpendicular part at its prior) and K_W replaced by its mean
/// K = N s_a²E_q[φφᵀ] (the adaptive-kernel approximation of blog §"Match the residual…"),
/// the Gibbs variational free energy −log Z ≤ E_q[−log 𝒩] + N·KL(q ‖ p0) becomes
/// F[q] = N·KL(q ‖ p0) + ½yᵀ(K + T·I)⁻¹y + ½log det(K + T·I) + (P/2)·log 2π.
/// Its stationary point in q is q ∝ p0·exp(½s_a²[(φᵀα)² − φᵀ(K + T·I)⁻¹φ]), α = (K + T·I)⁻¹y:
/// the blog's cavity exponent s_a²(φᵀr̄)²/(2T²L) with r̄ = Tα and L → 1, and ½log L replaced by
/// ½(L̃ − 1), L̃ = 1 + s_a²φᵀ(K + T·I)⁻¹φ (all readouts integrated): its large-N linearisation.
/// Evaluated at each branch's fixed point it ranks the branches: the lower F is the preferred
/// (more probable) phase, and the P where the two cross is the first-order transition.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FreeEnergy {
    /// F = `kl_neurons` + `data_fit` + `log_det` + (P/2)·log 2π.
    pub total: f64,
    /// N·KL(p(ρ | b, c) ‖ 𝒩(0, σ_w²/D)): the prior cost of moving N neurons.
    pub kl_neurons: f64,
    /// ½yᵀ(K + T·I)⁻¹y.
    pub data_fit: f64,
    /// ½log det(K + T·I).
    pub log_det: f64,
}

/// One self-consistent solution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BranchSolution {
    /// The start it was continued from.
    pub branch: Branch,
    /// Number of samples.
    pub p: usize,
    /// Linear residual coefficient at the fixed point.
    pub b: f64,
    /// Cubic residual coefficient at the fixed point.
    pub c: f64,
    /// R = E[ρ²] under p(ρ | b, c).
    pub r: f64,
    /// Mean-squared error of the mean predictor on the test set.
    pub test_mse: f64,
    /// test_mse / E[y²] (E[y²] = 1 + 6ε²).
    pub test_mse_relative: f64,
    /// Training-set mean-squared residual |r̄|²/P.
    pub train_mse: f64,
    /// The mean-field interaction strength u = P²s_a²/(T²D).
    pub u: f64,
    /// Iterations used.
    pub iterations: usize,
    /// Whether max(|Δb|, |Δc|) fell below the tolerance.
    pub converged: bool,
    /// The final residual max|G(b, c) − (b, c)| (one undamped map application).
    pub last_step: f64,
    /// The method that finished the run: `damped` or `newton` ([`DAMPED_BEFORE_NEWTON`]).
    pub solver: Method,
    /// Evaluations of the map G (each is one kernel and one Cholesky solve); 0 for the points of
    /// `fixed-points`, whose root search reports its own cost.
    pub map_evaluations: usize,
    /// The phase at this solution: wells of U(ρ; b, c), side mass, u/u_coexist, label.
    pub phase: PhaseAtFixedPoint,
    /// Expected neurons per network with |ρ| > 3σ_w/√D: N·P(|ρ| > 3σ_w/√D) under p(ρ | b, c),
    /// comparable with the Langevin engine's `outliers_layer1`. R = E[ρ²] is a population
    /// mean: a few such neurons raise it only by O(1/N) each.
    pub outliers: f64,
    /// The centre drive X at this (b, c) ([`FiniteModel::centre_drive`]):
    /// U''(0) = (D/σ_w² + ℓ/L0)(1 − X), so X ≥ 1 means the unaligned centre of p(ρ | b, c) has
    /// lost local stability (the spinodal); X < 1 leaves only side wells as a route to
    /// alignment.
    pub centre_drive: f64,
    /// The predicted weight covariance.
    pub covariance: Covariance,
    /// The adaptive-kernel free energy at this solution ([`FreeEnergy`]).
    pub free_energy: FreeEnergy,
    /// Overlap nodes used for p(ρ | b, c).
    pub overlap_nodes: usize,
}

/// Where the iteration stopped: (b, c), the overlap posterior and α = (K + T·I)⁻¹y there, and
/// the convergence record.
pub(crate) struct FixedPoint {
    pub(crate) bc: (f64, f64),
    pub(crate) post: OverlapPosterior,
    pub(crate) alpha: Vec<f64>,
    pub(crate) log_det: f64,
    pub(crate) iterations: usize,
    pub(crate) converged: bool,
    pub(crate) last_step: f64,
    pub(crate) method: Method,
    pub(crate) evaluations: usize,
}

/// One undamped application of the fixed-point map at (b, c) (steps 1–4 of the module docs).
pub(crate) struct MapStep {
    /// (b', c') = G(b, c).
    pub(crate) next: (f64, f64),
    /// α = (K + T·I)⁻¹y with K the kernel at (b, c).
    pub(crate) alpha: Vec<f64>,
    /// log det(K + T·I).
    pub(crate) log_det: f64,
}

/// Applies the map G once: p(ρ | b, c), K, r̄ = T·α, and the projection onto H1, H3.
pub(crate) fn map_step(
    prm: &AdaptiveParams,
    model: &FiniteModel,
    prep: &Prepared,
    (b, c): (f64, f64),
) -> Result<MapStep> {
    let post = overlap_posterior(model, b, c)?;
    let (alpha, log_det) =
        ridge_solve(prep.kernel(&post, prm.n as f64 * prm.s_a2), prm.t, &prep.y)?;
    let resid: Vec<f64> = alpha.iter().map(|a| prm.t * a).collect();
    let next = project(&prep.train.z, &resid);
    if !(next.0.is_finite() && next.1.is_finite()) {
        return Err(Error::runtime(
            "the residual projection produced a non-finite value",
        ));
    }
    Ok(MapStep {
        next,
        alpha,
        log_det,
    })
}

/// Damped steps before `solve` switches to Newton ([`super::solver`]): a fixed point the damped
/// iteration reaches quickly is kept as it is; one it has not reached by then (a slow or
/// oscillating iteration, as in the mixed phase) is finished by Newton from the last iterate.
pub const DAMPED_BEFORE_NEWTON: usize = 25;

/// Runs the fixed-point iteration from `start` on a prepared training set: damped steps, then
/// safeguarded Newton on G(b, c) − (b, c) within the remaining `max_iter`.
pub(crate) fn fixed_point(
    prm: &AdaptiveParams,
    prep: &Prepared,
    start: (f64, f64),
) -> Result<FixedPoint> {
    let model = prm.model(prep.train.len())?;
    let g = |bc: (f64, f64)| map_step(prm, &model, prep, bc).map(|s| s.next);
    let damped_iter = prm.max_iter.min(DAMPED_BEFORE_NEWTON);
    let first = damped_fixed_point(&g, start, prm.damping, damped_iter, prm.tol)?;
    let run = if first.converged || prm.max_iter <= damped_iter {
        first
    } else {
        let opts = NewtonOptions {
            tol: prm.tol,
            max_iter: prm.max_iter - damped_iter,
            ..NewtonOptions::default()
        };
        let mut second = newton_fixed_point(&g, first.x, &opts)?;
        second.iterations += first.iterations;
        second.evaluations += first.evaluations;
        if second.converged || second.residual <= first.residual {
            second
        } else {
            first
        }
    };
    let step = map_step(prm, &model, prep, run.x)?;
    Ok(FixedPoint {
        bc: run.x,
        post: overlap_posterior(&model, run.x.0, run.x.1)?,
        alpha: step.alpha,
        log_det: step.log_det,
        iterations: run.iterations,
        converged: run.converged,
        last_step: run.residual,
        method: run.method,
        evaluations: run.evaluations + 1,
    })
}

/// Evaluates a converged branch: test MSE with the cross kernel, R, covariance.
pub(crate) fn finish(
    prm: &AdaptiveParams,
    prep: &Prepared,
    test: &Points,
    branch: Branch,
    fp: FixedPoint,
) -> Result<BranchSolution> {
    let FixedPoint {
        bc: (b, c),
        post,
        alpha,
        log_det,
        iterations,
        converged,
        last_step,
        method,
        evaluations,
    } = fp;
    let p = prep.train.len();
    let n_sa2 = prm.n as f64 * prm.s_a2;
    let cross = perp_cov(test, &prep.train, prm.sigma_w2);
    let var_test: Vec<f64> = (0..test.len())
        .map(|i| {
            prm.sigma_w2 / test.perp_dim as f64 * test.row(i).iter().map(|x| x * x).sum::<f64>()
        })
        .collect();
    let k_cross = kernel_block(
        (test, &var_test),
        (&prep.train, &prep.var),
        cross.as_ref(),
        &post.nodes,
        n_sa2,
        false,
    );
    let y_test = test.targets(prm.eps);
    let mut se = 0.0;
    for (i, y) in y_test.iter().enumerate() {
        let f: f64 = (0..p).map(|j| k_cross[(i, j)] * alpha[j]).sum();
        se += (y - f).powi(2);
    }
    let test_mse = se / test.len() as f64;
    let train_mse = alpha.iter().map(|a| (prm.t * a).powi(2)).sum::<f64>() / p as f64;
    let r = post.second_moment();
    let model = prm.model(p)?;
    let kl_neurons = prm.n as f64 * post.kl_prior;
    let data_fit = 0.5 * prep.y.iter().zip(&alpha).map(|(y, a)| y * a).sum::<f64>();
    let half_log_det = 0.5 * log_det;
    let free_energy = FreeEnergy {
        total: kl_neurons
            + data_fit
            + half_log_det
            + 0.5 * p as f64 * (2.0 * std::f64::consts::PI).ln(),
        kl_neurons,
        data_fit,
        log_det: half_log_det,
    };
    Ok(BranchSolution {
        branch,
        p,
        b,
        c,
        r,
        test_mse,
        test_mse_relative: test_mse / (1.0 + 6.0 * prm.eps * prm.eps),
        train_mse,
        u: model.u(),
        centre_drive: model.centre_drive(b),
        iterations,
        converged,
        last_step,
        solver: method,
        map_evaluations: evaluations,
        phase: phase_at_fixed_point(&model, (b, c), prm.eps, prm.n)?,
        covariance: Covariance {
            parallel: r,
            perpendicular: prm.sigma_w2 / (prm.d - 1) as f64,
            perpendicular_multiplicity: prm.d - 1,
        },
        free_energy,
        outliers: prm.n as f64 * post.outlier_fraction,
        overlap_nodes: post.nodes.len(),
    })
}

/// Result of `flscale cavity solve`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SolveReport {
    /// The inputs.
    pub params: AdaptiveParams,
    /// The solution continued from small alignment.
    pub unaligned: BranchSolution,
    /// The solution continued from large alignment.
    pub aligned: BranchSolution,
    /// Whether the two starts reached different fixed points (|ΔR| > 1e-4·max R): the
    /// first-order coexistence region.
    pub two_solutions: bool,
    /// With two solutions, the one with the lower free energy ([`FreeEnergy`]); `None` with one.
    pub preferred: Option<Branch>,
    /// R threshold used to call a solution aligned: σ_w²/√D, the geometric mean of the prior
    /// R = σ_w²/D and the O(1) scale σ_w².
    pub r_threshold: f64,
}

pub(crate) fn r_threshold(prm: &AdaptiveParams) -> f64 {
    prm.sigma_w2 / (prm.d as f64).sqrt()
}

/// The self-consistent adaptive kernel at one P, from both starts.
pub fn solve(prm: &AdaptiveParams) -> Result<SolveReport> {
    prm.validate()?;
    let prep = Prepared::new(
        Points::sample(prm.d, prm.p, prm.seed, 0),
        prm.eps,
        prm.sigma_w2,
    );
    let test = Points::sample(prm.d, prm.p_test, prm.seed, 1);
    let (cold, hot) = rayon::join(
        || {
            fixed_point(prm, &prep, (0.0, 0.0))
                .and_then(|fp| finish(prm, &prep, &test, Branch::Unaligned, fp))
        },
        || {
            fixed_point(prm, &prep, (1.0, prm.eps))
                .and_then(|fp| finish(prm, &prep, &test, Branch::Aligned, fp))
        },
    );
    let (cold, hot) = (cold?, hot?);
    let two = (cold.r - hot.r).abs() > 1e-4 * cold.r.max(hot.r);
    let preferred = two.then_some(if hot.free_energy.total < cold.free_energy.total {
        Branch::Aligned
    } else {
        Branch::Unaligned
    });
    Ok(SolveReport {
        params: prm.clone(),
        unaligned: cold,
        aligned: hot,
        two_solutions: two,
        preferred,
        r_threshold: r_threshold(prm),
    })
}

/// A small, fast setting (D = N = 10, T = 0.05) shared by the tests here and in [`super::sweep_p`].
#[cfg(test)]
pub(crate) fn small_test_params(p: usize) -> AdaptiveParams {
    AdaptiveParams {
        d: 10,
        n: 10,
        p,
        t: 0.05,
        s_a2: 0.1,
        sigma_w2: 1.0,
        eps: 0.3,
        seed: 5,
        p_test: 200,
        damping: 0.6,
        max_iter: 300,
        tol: 1e-8,
    }
}

#[cfg(test)]
mod tests {
    use super::small_test_params as small;
    use super::*;
    use crate::cavity::sweep_p::sweep_p;

    #[test]
    fn solve_returns_self_consistent_fixed_points() {
        let prm = small(40);
        let rep = solve(&prm).unwrap();
        for s in [&rep.unaligned, &rep.aligned] {
            assert!(s.converged, "{s:?}");
            // One more undamped application of the map returns the same (b, c).
            let prep = Prepared::new(
                Points::sample(prm.d, prm.p, prm.seed, 0),
                prm.eps,
                prm.sigma_w2,
            );
            let post = overlap_posterior(&prm.model(prm.p).unwrap(), s.b, s.c).unwrap();
            let alpha = ridge_solve(prep.kernel(&post, prm.n as f64 * prm.s_a2), prm.t, &prep.y)
                .unwrap()
                .0;
            let resid: Vec<f64> = alpha.iter().map(|a| prm.t * a).collect();
            let (b2, c2) = project(&prep.train.z, &resid);
            assert!((b2 - s.b).abs() < 1e-6 && (c2 - s.c).abs() < 1e-6);
            assert!(s.test_mse.is_finite() && s.test_mse > 0.0);
            assert_eq!(s.covariance.perpendicular_multiplicity, 9);
        }
    }

    #[test]
    fn population_residual_bounds_the_training_residual_of_a_kernel_with_that_h1_power() {
        // K = λ1zzᵀ + K₋ with K₋ ⪰ 0 (here a Gram matrix of the perpendicular inputs): the
        // projection of T(K + T·I)⁻¹z on z is at most T/(T + λ1|z|²), with equality at K₋ = 0
        // (FiniteModel::population_residual, with P = |z|²).
        let (d, n, t, s_a2, s2) = (6.0, 6.0, 0.05, 1.0 / 6.0, 0.8);
        let pts = Points::sample(6, 40, 7, 0);
        let zz: f64 = pts.z.iter().map(|v| v * v).sum();
        let model = FiniteModel::new(d, zz, t, s_a2, s2).unwrap();
        let bound = model.population_residual(n);
        let lambda1 = (t / bound - t) / zz;
        let rest = perp_cov(&pts, &pts, s2);
        for (scale, exact) in [(0.0, true), (1.0, false), (5.0, false)] {
            let k = Mat::from_fn(40, 40, |i, j| {
                lambda1 * pts.z[i] * pts.z[j] + scale * rest[(i, j)]
            });
            let alpha = ridge_solve(k, t, &pts.z).unwrap().0;
            let b = t * pts.z.iter().zip(&alpha).map(|(z, a)| z * a).sum::<f64>() / zz;
            if exact {
                assert!((b - bound).abs() < 1e-10 * bound, "{b} vs {bound}");
            } else {
                assert!(b < bound && b > 0.0, "K₋ scale {scale}: {b} vs {bound}");
            }
        }
    }

    /// log det(K + T·I) and yᵀ(K + T·I)⁻¹y from the Cholesky factor equal an independent
    /// Gaussian elimination with partial pivoting.
    #[test]
    fn log_det_and_solve_match_elimination() {
        let prep = Prepared::new(Points::sample(5, 15, 2, 0), 0.3, 1.0);
        let post = overlap_posterior(
            &FiniteModel::new(5.0, 15.0, 0.05, 0.2, 1.0).unwrap(),
            0.4,
            0.1,
        )
        .unwrap();
        let k = prep.kernel(&post, 1.0);
        let (alpha, log_det) = ridge_solve(k.clone(), 0.05, &prep.y).unwrap();
        let n = prep.y.len();
        let mut a: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                let mut row: Vec<f64> = (0..n)
                    .map(|j| k[(i, j)] + if i == j { 0.05 } else { 0.0 })
                    .collect();
                row.push(prep.y[i]);
                row
            })
            .collect();
        let mut want_log_det = 0.0;
        for col in 0..n {
            let piv = (col..n)
                .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
                .unwrap();
            a.swap(col, piv);
            want_log_det += a[col][col].abs().ln();
            for i in col + 1..n {
                let f = a[i][col] / a[col][col];
                for j in col..=n {
                    a[i][j] -= f * a[col][j];
                }
            }
        }
        let mut x = vec![0.0; n];
        for i in (0..n).rev() {
            let s: f64 = (i + 1..n).map(|j| a[i][j] * x[j]).sum();
            x[i] = (a[i][n] - s) / a[i][i];
        }
        assert!((log_det - want_log_det).abs() < 1e-10 * want_log_det.abs().max(1.0));
        for (got, want) in alpha.iter().zip(&x) {
            assert!(
                (got - want).abs() < 1e-9 * want.abs().max(1.0),
                "{got} vs {want}"
            );
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        let mut prm = small(40);
        prm.t = 0.0;
        assert!(solve(&prm).is_err());
        let mut prm = small(40);
        prm.d = 1;
        assert!(solve(&prm).is_err());
        let mut prm = small(40);
        prm.damping = 1.5;
        assert!(solve(&prm).is_err());
        assert!(sweep_p(&small(40), &[]).is_err());
    }
}
