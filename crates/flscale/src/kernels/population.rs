//! The Fig. 5 procedure in its infinite-width, infinite-data limit: an independent computation
//! of ⟨f, K₃, f⟩ from the closed-form kernels, to tell what the paper's procedure itself
//! predicts at finite d from what finite N₁, N₂, P add (paper App. C.5, Fig. 5; spec 05 B).
//!
//! ## The limit
//!
//! With N₁, N₂ → ∞ the kernels are the closed forms of [`super::nngp`] (App. C.3: K_l is the
//! expectation over a layer's weights of σ(h(x))σ(h(x′))):
//!
//! * K₂(x, x′) = σ-kernel of the first-layer pre-activation covariance (|x|²/d, |x′|²/d, x·x′/d)
//!   (weights 𝒩(0, 1/d)).
//! * The amplified mode: Φ\*(x) = w·x (unit w; the rank-d/2 mode of K₂ is a linear function for
//!   i.i.d. Gaussian data, and rotation invariance makes every direction equivalent), with
//!   operator eigenvalue λ\* = ⟨Φ\*, K₂, Φ\*⟩. The second-layer rows W_i ∼ 𝒩(0, I/N₁ + (D−1)ââᵀ/N₁)
//!   make the second pre-activation covariance Q = K₂ + (D − 1)λ\*Φ\*(x)Φ\*(x′) (App. C.5:
//!   φ₁â ∝ Φ\*, and |φ₁â|²/N₁ = λ\* on the data; see [`super::propagate`] step 5).
//! * K₃(x, x′) = σ-kernel of (Q(x, x), Q(x′, x′), Q(x, x′)); f = Φ\*² with its mean removed and
//!   unit norm: f(x) = (u² − 1)/√2 with u = w·x.
//!
//! So ⟨f, K₃, f⟩ = E_{x,x′}[f(x)K₃(x, x′)f(x′)] depends on x, x′ only through u, u′ ∼ 𝒩(0, 1),
//! the squared perpendicular norms s, s′ ∼ χ²_{d−1} and the cosine c between the perpendicular
//! parts, whose density is ∝ (1 − c²)^{(d−4)/2} (uniform direction in ℝ^{d−1}):
//! x·x′ = uu′ + √(ss′)c, |x|² = u² + s. The five-dimensional integral is a tensor rule:
//! Gauss–Hermite in u, u′ ([`crate::hermite::GaussHermite`]), and the trapezoid rule in
//! v = ln s and in y = artanh c (both densities become smooth, rapidly decaying bells on ℝ, where
//! the trapezoid rule converges geometrically).
//!
//! ## Finite P
//!
//! The empirical quantity is fᵀK₃f/P² with f centred and normalised on the P points. Its mean
//! over samples, to first order in 1/P (expand f_ν = g_ν − ḡ, keep index coincidences), is
//! ⟨g, K₃, g⟩ + (E[g²K₃(x, x)] − 2E[g²k̄] + K̄ − 3⟨g, K₃, g⟩)/P with k̄(x) = E_{x′}K₃(x, x′) and
//! K̄ = E k̄ (g = (u² − 1)/√2, E g² = 1). The diagonal term E[g²K₃(x, x)]/P is what
//! dominates at small D: the sampling noise of f's overlap with each feature lifts the floor
//! of ⟨f, K₃, f⟩ above its population value.

use rayon::prelude::*;

use crate::activation::NngpActivation;
use crate::error::{Error, Result};
use crate::hermite::GaussHermite;
use crate::ldt::fit_line;

/// Quadrature sizes: Gauss–Hermite nodes per u, trapezoid nodes per ln s and in artanh c.
const HERMITE_NODES: usize = 40;
const NORM_NODES: usize = 10;
const COSINE_NODES: usize = 31;
/// Half-width of the trapezoid grids in units of the bells' widths.
const GRID_HALF_WIDTH: f64 = 7.0;

/// One amplification in the limit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PopulationPoint {
    /// The amplification D.
    pub amplification: f64,
    /// ⟨f, K₃, f⟩⁻¹ at N₁, N₂, P → ∞.
    pub inverse_expectation: f64,
    /// The sample mean of fᵀK₃f/P² at the given P (N₁, N₂ → ∞), inverted; `None` without P.
    pub inverse_expectation_finite_p: Option<f64>,
    /// The local log-log slope from the previous D (None at the first point).
    pub local_slope: Option<f64>,
}

/// The limit over a D grid.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PopulationResult {
    /// Input dimension.
    pub d: usize,
    /// Activation of both layers.
    pub activation: NngpActivation,
    /// Sample size of the finite-P column, if any.
    pub p: Option<usize>,
    /// λ\* = ⟨Φ\*, K₂, Φ\*⟩ (1/(4d) for ReLU at large d).
    pub phi_star_eigenvalue: f64,
    /// One point per D.
    pub points: Vec<PopulationPoint>,
    /// The fit window in D.
    pub fit_window: (f64, f64),
    /// Log-log slope of the population inverse expectation in the window.
    pub slope: f64,
    /// The same for the finite-P column.
    pub slope_finite_p: Option<f64>,
    /// The steepest local slope over the grid (most negative).
    pub steepest_local_slope: f64,
}

/// A normalised trapezoid rule on ℝ for a density given by its logarithm, on a grid of `n`
/// points centre ± half·width.
fn trapezoid_rule(
    n: usize,
    centre: f64,
    width: f64,
    log_density: impl Fn(f64) -> f64,
) -> Vec<(f64, f64)> {
    let h = 2.0 * GRID_HALF_WIDTH * width / (n - 1) as f64;
    let nodes: Vec<f64> = (0..n)
        .map(|k| centre - GRID_HALF_WIDTH * width + k as f64 * h)
        .collect();
    let logs: Vec<f64> = nodes.iter().map(|&t| log_density(t)).collect();
    let top = logs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = logs.iter().map(|l| (l - top).exp()).collect();
    let total: f64 = w.iter().sum();
    nodes
        .into_iter()
        .zip(w)
        .map(|(t, wk)| (t, wk / total))
        .collect()
}

/// One input point of the tensor rule: u = w·x, s = |x_⊥|², weight.
#[derive(Debug, Clone, Copy)]
struct Node {
    u: f64,
    s: f64,
    w: f64,
}

/// Checks the inputs of [`population_propagation`].
fn validate(
    act: NngpActivation,
    d: usize,
    amplifications: &[f64],
    p: Option<usize>,
    window: (f64, f64),
) -> Result<()> {
    if act == NngpActivation::Erf {
        return Err(Error::invalid(
            "activation erf is not offered here; the paper's propagation figures use relu or poly",
        ));
    }
    if !(8..=10_000_000).contains(&d) {
        return Err(Error::invalid(format!(
            "d = {d} is not allowed; the limit needs d between 8 and 10000000"
        )));
    }
    if let Some(p) = p {
        if p < 2 {
            return Err(Error::invalid(format!(
                "p = {p} is not allowed; the finite-P column needs at least 2 points"
            )));
        }
    }
    if amplifications.is_empty()
        || amplifications
            .iter()
            .any(|&a| !(a.is_finite() && (1.0..=1e8).contains(&a)))
        || amplifications.windows(2).any(|w| w[0] >= w[1])
    {
        return Err(Error::invalid(format!(
            "amplifications {amplifications:?} are not allowed; give strictly increasing values D in [1, 1e8]"
        )));
    }
    let (lo, hi) = window;
    let inside = amplifications
        .iter()
        .filter(|&&a| a >= lo && a <= hi)
        .count();
    if !(lo.is_finite() && hi.is_finite() && lo < hi) || inside < 2 {
        return Err(Error::invalid(format!(
            "fit window [{lo}, {hi}] is not allowed; it must contain at least two of the amplifications D"
        )));
    }
    Ok(())
}

/// The tensor rule over (x, x′) of the module docs with K₂ tabulated on it: the input nodes
/// (u, s, weight), the cosine nodes (c, weight), K₂ at every (x, x′, c) triple (index
/// (i·n + j)·C + k) and on the diagonal.
struct Quadrature {
    nodes: Vec<Node>,
    cosines: Vec<(f64, f64)>,
    k2: Vec<f64>,
    k2_diag: Vec<f64>,
}

impl Quadrature {
    /// The rule for dimension `d` and K₂ of `act` on it.
    fn new(act: NngpActivation, d: usize) -> Result<Self> {
        let df = d as f64;
        let m = df - 1.0;
        let gh = GaussHermite::new(HERMITE_NODES)?;
        // s ∼ χ²_m: with v = ln s the density is ∝ exp(mv/2 − eᵛ/2), a bell at ln m of width √(2/m).
        let norms = trapezoid_rule(NORM_NODES, m.ln(), (2.0 / m).sqrt(), |v| {
            0.5 * m * v - 0.5 * v.exp()
        });
        // c = tanh y: (1 − c²)^{(m−3)/2} dc = cosh(y)^{−(m−1)} dy, a bell of width 1/√(m − 1).
        let cosines: Vec<(f64, f64)> =
            trapezoid_rule(COSINE_NODES, 0.0, 1.0 / (m - 1.0).sqrt(), |y| {
                -(m - 1.0) * (y.abs() + (-2.0 * y.abs()).exp().ln_1p() - std::f64::consts::LN_2)
            })
            .into_iter()
            .map(|(y, w)| (y.tanh(), w))
            .collect();
        let mut nodes = Vec::with_capacity(HERMITE_NODES * NORM_NODES);
        for (&u, &wu) in gh.nodes().iter().zip(gh.weights()) {
            for &(v, wv) in &norms {
                nodes.push(Node {
                    u,
                    s: v.exp(),
                    w: wu * wv,
                });
            }
        }
        let n = nodes.len();
        let var1 = |a: &Node| (a.u * a.u + a.s) / df;
        // K₂ on every (x, x′, c) triple, computed once: index (i·n + j)·C + k.
        let k2: Vec<f64> = (0..n)
            .into_par_iter()
            .flat_map_iter(|i| {
                let a = nodes[i];
                let nodes = &nodes;
                let cosines = &cosines;
                (0..n).flat_map(move |j| {
                    let b = nodes[j];
                    cosines.iter().map(move |&(c, _)| {
                        let dot = a.u * b.u + (a.s * b.s).sqrt() * c;
                        act.kernel_from_cov(var1(&a), var1(&b), dot / df)
                    })
                })
            })
            .collect();
        let k2_diag: Vec<f64> = nodes
            .iter()
            .map(|a| act.kernel_from_cov(var1(a), var1(a), var1(a)))
            .collect();
        Ok(Quadrature {
            nodes,
            cosines,
            k2,
            k2_diag,
        })
    }

    /// λ\* = E[u K₂ u′], the eigenvalue of Φ\* under K₂.
    fn phi_star_eigenvalue(&self) -> f64 {
        let (nodes, cosines, k2) = (&self.nodes, &self.cosines, &self.k2);
        let (n, nc) = (nodes.len(), cosines.len());
        (0..n)
            .into_par_iter()
            .map(|i| {
                let mut acc = 0.0;
                for j in 0..n {
                    for (k, &(_, wc)) in cosines.iter().enumerate() {
                        acc += nodes[j].w * wc * nodes[i].u * nodes[j].u * k2[(i * n + j) * nc + k];
                    }
                }
                acc * nodes[i].w
            })
            .collect::<Vec<f64>>()
            .iter()
            .sum()
    }

    /// ⟨f, K₃, f⟩ at amplification `amp` (module docs, "The limit"), with the sample mean of
    /// fᵀK₃f/P² inverted when `p` is given (module docs, "Finite P").
    fn expectation_at(
        &self,
        act: NngpActivation,
        lam: f64,
        amp: f64,
        p: Option<usize>,
    ) -> (f64, Option<f64>) {
        let (nodes, cosines, k2) = (&self.nodes, &self.cosines, &self.k2);
        let (n, nc) = (nodes.len(), cosines.len());
        let g = |u: f64| (u * u - 1.0) / std::f64::consts::SQRT_2;
        let boost = (amp - 1.0) * lam;
        let q_diag: Vec<f64> = (0..n)
            .map(|i| self.k2_diag[i] + boost * nodes[i].u * nodes[i].u)
            .collect();
        // Per i: (E_x′[g g′ K₃], k̄(x_i)).
        let rows: Vec<(f64, f64)> = (0..n)
            .into_par_iter()
            .map(|i| {
                let (mut ggk, mut kbar) = (0.0, 0.0);
                for j in 0..n {
                    let cross = boost * nodes[i].u * nodes[j].u;
                    let mut kc = 0.0;
                    for (k, &(_, wc)) in cosines.iter().enumerate() {
                        let q = k2[(i * n + j) * nc + k] + cross;
                        kc += wc * act.kernel_from_cov(q_diag[i], q_diag[j], q);
                    }
                    ggk += nodes[j].w * g(nodes[j].u) * kc;
                    kbar += nodes[j].w * kc;
                }
                (ggk * g(nodes[i].u), kbar)
            })
            .collect();
        let pop: f64 = (0..n).map(|i| nodes[i].w * rows[i].0).sum();
        let finite = p.map(|p| {
            let mut diag = 0.0;
            let mut g2kbar = 0.0;
            let mut kbar = 0.0;
            for i in 0..n {
                let gi2 = g(nodes[i].u).powi(2);
                diag += nodes[i].w * gi2 * act.kernel_from_cov(q_diag[i], q_diag[i], q_diag[i]);
                g2kbar += nodes[i].w * gi2 * rows[i].1;
                kbar += nodes[i].w * rows[i].1;
            }
            1.0 / (pop + (diag - 2.0 * g2kbar + kbar - 3.0 * pop) / p as f64)
        });
        (pop, finite)
    }
}

/// ⟨f, K₃, f⟩ of the Fig. 5 procedure at N₁, N₂ → ∞ for i.i.d. Gaussian data in dimension d
/// (module docs), with the finite-P sample mean when `p` is given, over the amplifications,
/// and the log-log slopes over `window`. Deterministic for any thread count (partial sums are
/// combined in a fixed order).
pub fn population_propagation(
    act: NngpActivation,
    d: usize,
    amplifications: &[f64],
    p: Option<usize>,
    window: (f64, f64),
) -> Result<PopulationResult> {
    validate(act, d, amplifications, p, window)?;
    let quad = Quadrature::new(act, d)?;
    let lam = quad.phi_star_eigenvalue();
    if !(lam.is_finite() && lam > 0.0) {
        return Err(Error::runtime(format!(
            "the eigenvalue of Φ* came out as {lam}; the quadrature failed at d = {d}"
        )));
    }
    let mut points: Vec<PopulationPoint> = Vec::with_capacity(amplifications.len());
    for &amp in amplifications {
        let (pop, finite) = quad.expectation_at(act, lam, amp, p);
        if !(pop.is_finite() && pop > 0.0) || finite.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
            return Err(Error::runtime(format!(
                "⟨f, K3, f⟩ came out as {pop} at D = {amp}; the quadrature failed"
            )));
        }
        let local_slope = points
            .last()
            .map(|q| -(q.inverse_expectation * pop).ln() / (amp / q.amplification).ln());
        points.push(PopulationPoint {
            amplification: amp,
            inverse_expectation: 1.0 / pop,
            inverse_expectation_finite_p: finite,
            local_slope,
        });
    }
    let (slope, slope_finite_p) = window_slopes(&points, window, p.is_some())?;
    let steepest_local_slope = points
        .iter()
        .filter_map(|q| q.local_slope)
        .fold(f64::INFINITY, f64::min);
    Ok(PopulationResult {
        d,
        activation: act,
        p,
        phi_star_eigenvalue: lam,
        points,
        fit_window: window,
        slope,
        slope_finite_p,
        steepest_local_slope,
    })
}

/// Log-log slopes of the inverse expectation over the points inside `window`: the
/// population one, and the finite-P one when `finite_p`.
fn window_slopes(
    points: &[PopulationPoint],
    (lo, hi): (f64, f64),
    finite_p: bool,
) -> Result<(f64, Option<f64>)> {
    let inside: Vec<&PopulationPoint> = points
        .iter()
        .filter(|q| q.amplification >= lo && q.amplification <= hi)
        .collect();
    let xs: Vec<f64> = inside.iter().map(|q| q.amplification.ln()).collect();
    let slope = fit_line(
        &xs,
        &inside
            .iter()
            .map(|q| q.inverse_expectation.ln())
            .collect::<Vec<_>>(),
    )?
    .0;
    let slope_finite_p = if finite_p {
        Some(
            fit_line(
                &xs,
                &inside
                    .iter()
                    .filter_map(|q| q.inverse_expectation_finite_p.map(f64::ln))
                    .collect::<Vec<_>>(),
            )?
            .0,
        )
    } else {
        None
    };
    Ok((slope, slope_finite_p))
}
