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
//! ## The kernel for a fixed overlap ρ (derived here)
//!
//! For fixed ρ, u_μ = ξ·x^μ are jointly Gaussian with covariance C_μν = σ_w²/(D−1)·x⊥^μ·x⊥^ν,
//! and the entry is E[erf(m_μ + u_μ)·erf(m_ν + u_ν)] with m = ρz. Expanding the bivariate
//! Gaussian density in its covariance (Mehler) gives
//! E[f(u_μ)g(u_ν)] = Σ_n C_μν^n/n!·E[f⁽ⁿ⁾(u_μ)]·E[g⁽ⁿ⁾(u_ν)], and E[erf⁽ⁿ⁾(m + u)] =
//! κⁿ·erf⁽ⁿ⁾(κm) with κ = (1 + 2C_μμ)^{−1/2}. With erf⁽ⁿ⁾(x) = (2/√π)(−1)^{n−1}H_{n−1}(x)e^{−x²}
//! (physicists' Hermite) and Ĥ_k = H_k/√(2ᵏk!), the n-th term is
//! rⁿ/(2n)·ẽ_n(κ_μ m_μ)·ẽ_n(κ_ν m_ν), r = 2C_μνκ_μκ_ν, ẽ_n(x) = (2/√π)Ĥ_{n−1}(x)e^{−x²}
//! (|r| < 1 by Cauchy–Schwarz). Summing over the ρ nodes first turns each order n into one
//! matrix product. Pairs with |r| > [`SERIES_MAX_R`] (and the diagonal, where r = 2C_μμκ_μ²)
//! are summed one by one to as many terms as they need, and pairs with |r| > 0.92 use a
//! one-dimensional Gauss–Hermite rule instead:
//! E_{u_μ}[erf(m_μ + u_μ)·erf((m_ν + (C_μν/C_μμ)u_μ)/√(1 + 2(C_νν − C_μν²/C_μμ)))].

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use serde::Serialize;

use super::phase_at::{phase_at_fixed_point, PhaseAtFixedPoint};
use super::potential::FiniteModel;
use super::solver::{damped_fixed_point, newton_fixed_point, Method, NewtonOptions};
use super::{at_least, finite, positive};
use crate::error::{Error, Result};
use crate::hermite::GaussHermite;

/// Pairs with |r| above this use quadrature; below it the series is truncated where the
/// remainder bound r^{n+1}/(2(n+1)(1−r))·(4/π)·1.2 falls below 1e-15 (≤ [`SERIES_TERMS`]).
pub const SERIES_MAX_R: f64 = 0.6;
/// Number of Mehler terms (n = 1 … SERIES_TERMS) kept for pairs with |r| ≤ SERIES_MAX_R.
pub const SERIES_TERMS: usize = 64;
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

/// Points as the kernel sees them: the teacher coordinate z and the perpendicular part x⊥
/// (row-major, D − 1 per point).
#[derive(Debug, Clone)]
pub struct Points {
    /// z = e·x (e is the first basis vector; the problem is rotation invariant).
    pub z: Vec<f64>,
    /// x⊥, `len × (D − 1)` row-major.
    pub perp: Vec<f64>,
    /// D − 1.
    pub perp_dim: usize,
}

impl Points {
    /// `count` points x ∼ 𝒩(0, I_D) from stream `stream` of the seed.
    pub fn sample(d: usize, count: usize, seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        let mut z = Vec::with_capacity(count);
        let mut perp = Vec::with_capacity(count * (d - 1));
        for _ in 0..count {
            z.push(rng.sample(StandardNormal));
            for _ in 1..d {
                perp.push(rng.sample(StandardNormal));
            }
        }
        Points {
            z,
            perp,
            perp_dim: d - 1,
        }
    }

    /// The first `count` points.
    pub fn prefix(&self, count: usize) -> Self {
        Points {
            z: self.z[..count].to_vec(),
            perp: self.perp[..count * self.perp_dim].to_vec(),
            perp_dim: self.perp_dim,
        }
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.z.len()
    }

    /// True when there are no points.
    pub fn is_empty(&self) -> bool {
        self.z.is_empty()
    }

    fn row(&self, i: usize) -> &[f64] {
        &self.perp[i * self.perp_dim..(i + 1) * self.perp_dim]
    }

    /// Targets y = H1(z) + ε·H3(z).
    pub fn targets(&self, eps: f64) -> Vec<f64> {
        self.z
            .iter()
            .map(|&z| z + eps * (z * z * z - 3.0 * z))
            .collect()
    }
}

/// Covariance of the perpendicular pre-activations, σ_w²/(D−1)·x⊥^a·x⊥^b.
fn perp_cov(a: &Points, b: &Points, sigma_w2: f64) -> Mat<f64> {
    let scale = sigma_w2 / a.perp_dim as f64;
    Mat::from_fn(a.len(), b.len(), |i, j| {
        scale
            * a.row(i)
                .iter()
                .zip(b.row(j))
                .map(|(x, y)| x * y)
                .sum::<f64>()
    })
}

/// E[erf(m1 + u1)·erf(m2 + u2)] for (u1, u2) ∼ 𝒩(0, [[q1, c], [c, q2]]), by conditioning u2 on
/// u1 and a Gauss–Hermite rule over u1.
pub fn erf_pair_mean_quadrature(
    gh: &GaussHermite,
    m1: f64,
    m2: f64,
    q1: f64,
    q2: f64,
    c: f64,
) -> f64 {
    let rule: Vec<(f64, f64)> = gh
        .nodes()
        .iter()
        .copied()
        .zip(gh.weights().iter().copied())
        .collect();
    erf_pair_mean_rule(&rule, m1, m2, q1, q2, c)
}

/// Largest |r| for which a single pair is summed by the series (≤ ~400 terms).
const PAIR_SERIES_MAX_R: f64 = 0.92;

/// One Mehler sum Σ_n rⁿ/(2n)·ẽ_n(x1)ẽ_n(x2) (n = 0 term erf(x1)·erf(x2)) for |r| ≤
/// [`PAIR_SERIES_MAX_R`], truncated where the remainder bound falls below 1e-15.
fn pair_series(x1: f64, x2: f64, r: f64) -> f64 {
    let c = 2.0 / std::f64::consts::PI.sqrt();
    let (g1, g2) = ((-x1 * x1).exp(), (-x2 * x2).exp());
    let mut total = libm::erf(x1) * libm::erf(x2);
    // Ĥ_{n−1} for both points.
    let (mut p1, mut c1, mut p2, mut c2) = (0.0, 1.0, 0.0, 1.0);
    let mut pow = 1.0;
    for n in 1..=series_terms_for(r.abs(), 1000) {
        pow *= r;
        total += pow / (2.0 * n as f64) * (c * c1 * g1) * (c * c2 * g2);
        let k = (n - 1) as f64;
        let (s, t) = ((2.0 / (k + 1.0)).sqrt(), (k / (k + 1.0)).sqrt());
        let n1 = x1 * s * c1 - t * p1;
        let n2 = x2 * s * c2 - t * p2;
        (p1, c1, p2, c2) = (c1, n1, c2, n2);
    }
    total
}

/// Smallest n whose remainder bound r^{n+1}/(2(n+1)(1−r))·1.6 (|Ĥ_k e^{−x²/2}| ≤ 1.09,
/// (2/√π)² < 1.28) is below 1e-15, at most `cap`.
fn series_terms_for(r: f64, cap: usize) -> usize {
    let mut pow = r;
    for n in 1..=cap {
        pow *= r;
        if pow / (2.0 * (n + 1) as f64 * (1.0 - r)) * 1.6 < 1e-15 {
            return n;
        }
    }
    cap
}

/// [`erf_pair_mean_quadrature`] on an explicit (node, weight) list.
fn erf_pair_mean_rule(rule: &[(f64, f64)], m1: f64, m2: f64, q1: f64, q2: f64, c: f64) -> f64 {
    let s1 = q1.max(0.0).sqrt();
    let slope = if q1 > 0.0 { c / q1 } else { 0.0 };
    let rest = (q2 - slope * c).max(0.0);
    let k2 = 1.0 / (1.0 + 2.0 * rest).sqrt();
    rule.iter()
        .map(|&(x, w)| {
            let u1 = s1 * x;
            w * libm::erf(m1 + u1) * libm::erf((m2 + slope * u1) * k2)
        })
        .sum()
}

/// The adaptive kernel block K_ab = N s_a²·Σ_k w_k·E_ξ[erf(ρ_k z_a + u_a)·erf(ρ_k z_b + u_b)]
/// for overlap nodes (ρ_k, w_k) (see the module docs for the series and the quadrature).
/// Each side is its points with their perpendicular variances C_μμ; `cov` is the cross
/// covariance; `same` marks a = b (the diagonal is then summed pair by pair).
pub fn kernel_block(
    (a, var_a): (&Points, &[f64]),
    (b, var_b): (&Points, &[f64]),
    cov: MatRef<'_, f64>,
    nodes: &[(f64, f64)],
    n_sa2: f64,
    same: bool,
) -> Mat<f64> {
    let (na, nb, nk) = (a.len(), b.len(), nodes.len());
    let kap_a: Vec<f64> = var_a.iter().map(|v| 1.0 / (1.0 + 2.0 * v).sqrt()).collect();
    let kap_b: Vec<f64> = var_b.iter().map(|v| 1.0 / (1.0 + 2.0 * v).sqrt()).collect();
    let r = Mat::from_fn(na, nb, |i, j| 2.0 * cov[(i, j)] * kap_a[i] * kap_b[j]);
    let sqrt_w: Vec<f64> = nodes.iter().map(|&(_, w)| w.max(0.0).sqrt()).collect();

    // Per point and node: x = κρz, the Hermite recurrence state and e^{−x²}.
    struct Side {
        x: Vec<f64>,
        h_prev: Vec<f64>,
        h_cur: Vec<f64>,
        gauss: Vec<f64>,
    }
    let side = |pts: &Points, kap: &[f64]| {
        let x: Vec<f64> = (0..pts.len())
            .flat_map(|i| nodes.iter().map(move |&(rho, _)| (i, rho)))
            .map(|(i, rho)| kap[i] * rho * pts.z[i])
            .collect();
        let gauss = x.iter().map(|x| (-x * x).exp()).collect();
        Side {
            h_prev: vec![0.0; x.len()],
            h_cur: vec![1.0; x.len()],
            gauss,
            x,
        }
    };
    let mut sa = side(a, &kap_a);
    let mut sb = side(b, &kap_b);
    let two_over_sqrt_pi = 2.0 / std::f64::consts::PI.sqrt();

    let mut out = Mat::<f64>::zeros(na, nb);
    let mut prod = Mat::<f64>::zeros(na, nb);
    // r^n, column-major like `out`.
    let mut pow = vec![1.0f64; na * nb];
    let mut ea = Mat::<f64>::zeros(na, nk);
    let mut eb = Mat::<f64>::zeros(nb, nk);
    // Terms needed for the largest |r| handled by the series: remainder ≤ 1e-15.
    let r_series = (0..nb)
        .flat_map(|j| (0..na).map(move |i| (i, j)))
        .filter(|&(i, j)| !(same && i == j))
        .map(|(i, j)| r[(i, j)].abs())
        .filter(|&v| v <= SERIES_MAX_R)
        .fold(0.0, f64::max);
    let terms = series_terms_for(r_series, SERIES_TERMS);
    for n in 0..=terms {
        let fill = |e: &mut Mat<f64>, s: &Side, len: usize| {
            for (k, &wk) in sqrt_w.iter().enumerate() {
                let col = e.col_as_slice_mut(k);
                for (i, slot) in col.iter_mut().enumerate().take(len) {
                    let idx = i * nk + k;
                    let v = if n == 0 {
                        libm::erf(s.x[idx])
                    } else {
                        two_over_sqrt_pi * s.h_cur[idx] * s.gauss[idx]
                    };
                    *slot = v * wk;
                }
            }
        };
        fill(&mut ea, &sa, na);
        fill(&mut eb, &sb, nb);
        matmul(
            prod.as_mut(),
            Accum::Replace,
            ea.as_ref(),
            eb.transpose(),
            1.0,
            Par::Seq,
        );
        let inv = if n == 0 { 0.0 } else { 1.0 / (2.0 * n as f64) };
        for j in 0..nb {
            let (o, p, rr) = (
                out.col_as_slice_mut(j),
                prod.col_as_slice(j),
                r.col_as_slice(j),
            );
            let pw = &mut pow[j * na..(j + 1) * na];
            if n == 0 {
                o.copy_from_slice(p);
            } else {
                for i in 0..na {
                    pw[i] *= rr[i];
                    o[i] += pw[i] * inv * p[i];
                }
            }
        }
        // Advance Ĥ: after step n ≥ 1, h_cur holds Ĥ_n for the next order.
        if n >= 1 {
            let k = (n - 1) as f64; // h_cur is Ĥ_{n−1}, h_prev Ĥ_{n−2}
            for s in [&mut sa, &mut sb] {
                for idx in 0..s.x.len() {
                    let next = s.x[idx] * (2.0 / (k + 1.0)).sqrt() * s.h_cur[idx]
                        - (k / (k + 1.0)).sqrt() * s.h_prev[idx];
                    s.h_prev[idx] = s.h_cur[idx];
                    s.h_cur[idx] = next;
                }
            }
        }
    }
    // Pairs where the truncated series is not accurate enough, and the diagonal.
    // erf(m + √q·x) is smooth but not polynomial: 100 nodes err by ~1e-10 (tested).
    let gh = GaussHermite::new(100).expect("order 100 is within the supported range");
    // The outermost nodes carry weights below 1e-18 and cannot change an O(1) result.
    let rule: Vec<(f64, f64)> = gh
        .nodes()
        .iter()
        .copied()
        .zip(gh.weights().iter().copied())
        .filter(|&(_, w)| w > 1e-18)
        .collect();
    for j in 0..nb {
        for i in 0..na {
            if r[(i, j)].abs() > SERIES_MAX_R || (same && i == j) {
                let (q1, q2, c) = (var_a[i], var_b[j], cov[(i, j)]);
                let rij = r[(i, j)];
                out[(i, j)] = if rij.abs() <= PAIR_SERIES_MAX_R {
                    nodes
                        .iter()
                        .map(|&(rho, w)| {
                            w * pair_series(kap_a[i] * rho * a.z[i], kap_b[j] * rho * b.z[j], rij)
                        })
                        .sum()
                } else {
                    nodes
                        .iter()
                        .map(|&(rho, w)| {
                            w * erf_pair_mean_rule(&rule, rho * a.z[i], rho * b.z[j], q1, q2, c)
                        })
                        .sum()
                };
            }
        }
    }
    for j in 0..nb {
        for i in 0..na {
            out[(i, j)] *= n_sa2;
        }
    }
    out
}

/// A discretised overlap posterior: nodes ρ_k ≥ 0 with weights summing to 1 (the mass of ±ρ_k
/// together; the kernel is even in ρ because ξ is symmetric).
#[derive(Debug, Clone)]
pub struct OverlapPosterior {
    /// (ρ_k, w_k).
    pub nodes: Vec<(f64, f64)>,
    /// Grid step.
    pub step: f64,
    /// KL(p(ρ | b, c) ‖ p0(ρ)) to the prior overlap law p0 = 𝒩(0, σ_w²/D), in nats.
    pub kl_prior: f64,
    /// P(|ρ| > 3σ_w/√D): the fraction of neurons outside three prior standard deviations
    /// (the Langevin engine's outlier criterion, paper App. F.0.1).
    pub outlier_fraction: f64,
}

impl OverlapPosterior {
    /// R = E[ρ²].
    pub fn second_moment(&self) -> f64 {
        self.nodes.iter().map(|&(r, w)| w * r * r).sum()
    }
}

/// Most nodes the posterior grid may use (the kernel cost is linear in it).
const MAX_NODES: usize = 600;

/// p(ρ | b, c) ∝ e^{−U(ρ; b, c)} on a trapezoid grid whose step is a fraction of the narrowest
/// well's width (the trapezoid rule for a smooth, rapidly decaying integrand on the line errs
/// by ~exp(−2π²(width/step)²), below 1e-16 at step = width/1.5).
pub fn overlap_posterior(model: &FiniteModel, b: f64, c: f64) -> Result<OverlapPosterior> {
    let (d, s2) = (model.d, model.sigma_w2);
    let u = |r: f64| model.potential(r, b, c);
    // U ≥ Dρ²/(2σ_w²) − s_a²P²m_max²/(2T²) with m² ≤ (2/π)(|b| + |c|)² (erf² ≤ 1, L ≥ 1).
    let reward_bound = model.s_a2 * model.p * model.p * 2.0 / std::f64::consts::PI
        * (b.abs() + c.abs()).powi(2)
        / (2.0 * model.t * model.t);
    let scan = 0.1 * (s2 / d).sqrt();
    let mut vals = vec![u(0.0)];
    let mut umin = vals[0];
    loop {
        let r = scan * vals.len() as f64;
        let v = u(r);
        if !v.is_finite() {
            return Err(Error::runtime(format!(
                "the overlap potential is not finite at ρ = {r} (b = {b}, c = {c})"
            )));
        }
        umin = umin.min(v);
        vals.push(v);
        if d * r * r / (2.0 * s2) - reward_bound > umin + 60.0 || vals.len() > 2_000_000 {
            break;
        }
    }
    let rho_end = scan * (vals.len() - 1) as f64;
    // P(|ρ| > 3σ_w/√D): Simpson's rule on [0, cut] and [cut, ρ_end] separately (the
    // integrand is smooth on each), 2·⌈·⌉ intervals of at most a twentieth of the scan step.
    let outlier_fraction = {
        let cut = 3.0 * (s2 / d).sqrt();
        let simpson = |a: f64, b: f64| {
            if b <= a {
                return 0.0;
            }
            let n = 2 * ((b - a) / (scan / 20.0) / 2.0).ceil().max(1.0) as usize;
            let h = (b - a) / n as f64;
            (0..=n)
                .map(|i| {
                    let w = if i == 0 || i == n {
                        1.0
                    } else if i % 2 == 1 {
                        4.0
                    } else {
                        2.0
                    };
                    w * (-(u(a + i as f64 * h) - umin)).exp()
                })
                .sum::<f64>()
                * h
                / 3.0
        };
        let (inner, tail) = (simpson(0.0, cut.min(rho_end)), simpson(cut, rho_end));
        tail / (inner + tail)
    };
    // Narrowest well: curvature at the local minima (second differences on the scan grid).
    let mut curvature_max = d / s2;
    for j in 0..vals.len() - 1 {
        let left = if j == 0 { vals[1] } else { vals[j - 1] };
        if vals[j] <= left && vals[j] <= vals[j + 1] && vals[j] - umin < 30.0 {
            let second = (left - 2.0 * vals[j] + vals[j + 1]) / (scan * scan);
            curvature_max = curvature_max.max(second);
        }
    }
    let mut step = (1.0 / curvature_max.sqrt() / 1.5).min(0.05);
    // The relevant range: where U − U_min < 45 (weights below e^{−45} ≈ 3e-20 are dropped).
    let lo = vals.iter().position(|v| v - umin < 45.0).unwrap_or(0) as f64 * scan;
    let hi = (vals.len() - 1 - vals.iter().rev().position(|v| v - umin < 45.0).unwrap_or(0)) as f64
        * scan;
    let hi = (hi + scan).min(rho_end);
    if (hi / step) as usize > MAX_NODES {
        step = hi / MAX_NODES as f64;
    }
    let first = (lo / step).floor() as usize;
    let last = (hi / step).ceil() as usize;
    let mut nodes = Vec::with_capacity(last - first + 1);
    for k in first..=last {
        let r = k as f64 * step;
        let w = if k == 0 { 1.0 } else { 2.0 } * (-(u(r) - umin)).exp();
        if w > 1e-20 {
            nodes.push((r, w));
        }
    }
    let total: f64 = nodes.iter().map(|n| n.1).sum();
    if !(total > 0.0 && total.is_finite()) {
        return Err(Error::runtime(format!(
            "the overlap posterior could not be normalised (b = {b}, c = {c})"
        )));
    }
    for n in &mut nodes {
        n.1 /= total;
    }
    // KL(q ‖ p0) with q = e^{−U}/Z, log p0 = −Dρ²/(2σ_w²) − ½log(2πσ_w²/D):
    // KL = E_q[Dρ²/(2σ_w²) − U] − log Z + ½log(2πσ_w²/D), Z = step·e^{−U_min}·total (the same
    // trapezoid sum over the whole line that normalised the weights).
    let excess: f64 = nodes
        .iter()
        .map(|&(r, w)| w * (d * r * r / (2.0 * s2) - u(r)))
        .sum();
    let log_z = step.ln() - umin + total.ln();
    let kl_prior = excess - log_z + 0.5 * (2.0 * std::f64::consts::PI * s2 / d).ln();
    Ok(OverlapPosterior {
        nodes,
        step,
        kl_prior,
        outlier_fraction,
    })
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

fn r_threshold(prm: &AdaptiveParams) -> f64 {
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

/// Result of `flscale cavity sweep-p`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    /// The inputs (`p` is the largest P).
    pub params: AdaptiveParams,
    /// The P values, ascending.
    pub p_values: Vec<usize>,
    /// Continued upward in P from small alignment.
    pub unaligned: Vec<BranchSolution>,
    /// Continued downward in P from large alignment.
    pub aligned: Vec<BranchSolution>,
    /// The R threshold that calls a solution aligned (σ_w²/√D).
    pub r_threshold: f64,
    /// P where the branch continued from small alignment crosses the R threshold upward
    /// (interpolated in log P); `None` if it never does in the range. Where the two branches
    /// coincide this is a smooth crossover, not a jump.
    pub p_threshold_unaligned: Option<f64>,
    /// P where the branch continued from large alignment drops below the R threshold; `None`
    /// if it stays aligned at every P.
    pub p_threshold_aligned: Option<f64>,
    /// The spinodals bracketed by the grid: every place where one of the two branches ceases
    /// to exist, as the pair of neighbouring P values between which the two solutions merge,
    /// and which branch vanished there (the one whose R is farther from the merged solution's,
    /// in log R). Both ends of a coexistence window can belong to the same branch: at the blog
    /// preset the aligned branch exists only in a window of P.
    pub branch_ends: Vec<BranchEnd>,
    /// P where the branch from small alignment first expects one neuron per network with
    /// |ρ| > 3σ_w/√D (`outliers` crosses 1, interpolated in log P): the first specialised
    /// neuron; `None` if it never does in the range.
    pub p_first_specialised: Option<f64>,
    /// F(aligned) − F(unaligned) ([`FreeEnergy`]) at each P where the two branches are
    /// distinct (|ΔR| > 1e-3·max R), `None` where they coincide.
    pub free_energy_gap: Vec<Option<f64>>,
    /// The first-order transition: the P where `free_energy_gap` changes sign from + (the
    /// unaligned branch preferred) to − (interpolated linearly in log P between grid points);
    /// `None` when no such sign change lies between two P values with two solutions.
    pub p_transition: Option<f64>,
    /// Whether the two branches differ at some P (hysteresis, a first-order transition).
    pub hysteresis: bool,
    /// The largest centre drive of the unaligned branch at its population residual, over all
    /// P (not only the swept ones), and where it is reached
    /// ([`super::potential::population_centre_drive_max`]). A population-level estimate: below
    /// 1 the centre keeps its stability at every P when b takes its population value; the
    /// finite-P fixed points' (b, c) (their `centre_drive`) can lie above or below it.
    pub population_drive_max: PopulationDrive,
    /// Fixed points a branch found but did not keep: where R jumped by more than
    /// [`R_JUMP_FACTOR`] between neighbouring P, the branch's start was solved as well, and
    /// when the two differ the one continuous with the previous R stays on the branch; the
    /// other is listed here with its free energy relative to the kept one.
    pub alternatives: Vec<AlternativeSolution>,
}

/// The maximum over P of the population centre drive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PopulationDrive {
    /// Where it is reached.
    pub p: f64,
    /// Its value X_max.
    pub drive: f64,
}

/// Where one branch ceases to exist, bracketed by two neighbouring P values of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BranchEnd {
    /// The branch that vanishes between the two P values.
    pub branch: Branch,
    /// (smaller P, larger P): the two solutions differ at exactly one of them.
    pub between: (usize, usize),
}

/// The spinodals of the sweep: at every neighbour pair (P_i, P_{i+1}) where exactly one P has
/// two distinct solutions (`gap` is `Some` there), the branch that vanished is the one whose R
/// at the two-solution P is farther (in |log R|) from the single solution's R at the other P.
/// `cold_r` and `hot_r` are the R of the branches continued from small and from large
/// alignment, ascending in P like `ps` and `gap`.
fn branch_ends(ps: &[usize], cold_r: &[f64], hot_r: &[f64], gap: &[Option<f64>]) -> Vec<BranchEnd> {
    let log_dist = |a: f64, b: f64| (a.max(1e-300).ln() - b.max(1e-300).ln()).abs();
    (1..ps.len())
        .filter_map(|i| {
            let (two, one) = match (gap[i - 1].is_some(), gap[i].is_some()) {
                (true, false) => (i - 1, i),
                (false, true) => (i, i - 1),
                _ => return None,
            };
            let merged = cold_r[one];
            let branch = if log_dist(hot_r[two], merged) >= log_dist(cold_r[two], merged) {
                Branch::Aligned
            } else {
                Branch::Unaligned
            };
            Some(BranchEnd {
                branch,
                between: (ps[i - 1], ps[i]),
            })
        })
        .collect()
}

/// Where `gap` (ascending in P) first changes sign from > 0 to ≤ 0 between two neighbours
/// that both have a value, interpolated linearly in log P.
fn gap_crossing(ps: &[usize], gap: &[Option<f64>]) -> Option<f64> {
    (1..ps.len()).find_map(|i| match (gap[i - 1], gap[i]) {
        (Some(g0), Some(g1)) if g0 > 0.0 && g1 <= 0.0 => {
            let (l0, l1) = ((ps[i - 1] as f64).ln(), (ps[i] as f64).ln());
            Some((l0 + g0 / (g0 - g1) * (l1 - l0)).exp())
        }
        _ => None,
    })
}

fn crossing(points: &[(f64, f64)], threshold: f64, upward: bool) -> Option<f64> {
    // points ascending in P; for `upward`, the first crossing from below; otherwise the last
    // P below the threshold followed by one above (scanning from large P down).
    let idx: Vec<usize> = (1..points.len()).collect();
    let hit = |i: usize| points[i - 1].1 < threshold && points[i].1 >= threshold;
    let i = if upward {
        idx.into_iter().find(|&i| hit(i))
    } else {
        idx.into_iter().rev().find(|&i| hit(i))
    }?;
    let (p0, r0) = points[i - 1];
    let (p1, r1) = points[i];
    let frac = (threshold - r0) / (r1 - r0);
    Some((p0.ln() + frac * (p1.ln() - p0.ln())).exp())
}

/// R(P), b(P), c(P) and the test MSE along both branches, continued in P (nested data sets:
/// the first P points of one sample, so the curves are smooth in P).
pub fn sweep_p(prm: &AdaptiveParams, p_values: &[usize]) -> Result<SweepReport> {
    sweep_p_observed(prm, p_values, &|_, _| {})
}

/// [`sweep_p`], calling `on_solved(branch, P)` after each fixed point (for progress bars; the
/// two branches run concurrently, so calls may come from two threads).
pub fn sweep_p_observed(
    prm: &AdaptiveParams,
    p_values: &[usize],
    on_solved: &(dyn Fn(Branch, usize) + Sync),
) -> Result<SweepReport> {
    let mut ps: Vec<usize> = p_values.to_vec();
    ps.sort_unstable();
    ps.dedup();
    if ps.is_empty() {
        return Err(Error::invalid(
            "the list of P values is empty; give at least one P",
        ));
    }
    let p_max = *ps.last().unwrap_or(&2);
    let mut top = prm.clone();
    top.p = p_max;
    top.validate()?;
    at_least("smallest P", ps[0], 2)?;
    let all = Points::sample(prm.d, p_max, prm.seed, 0);
    let test = Points::sample(prm.d, prm.p_test, prm.seed, 1);
    type Run = (Vec<BranchSolution>, Vec<AlternativeSolution>);
    let run = |order: Vec<usize>, start: (f64, f64), branch: Branch| -> Result<Run> {
        let mut at = start;
        let mut out: Vec<BranchSolution> = Vec::with_capacity(order.len());
        let mut alternatives = Vec::new();
        for p in order {
            let prep = Prepared::new(all.prefix(p), prm.eps, prm.sigma_w2);
            let fp = fixed_point(prm, &prep, at)?;
            let mut sol = finish(prm, &prep, &test, branch, fp)?;
            // Continuation across a large step in P can leave the basin it came from (at
            // D = N = 20 the step P = 320 → 640 fell from R = 0.10 into the fully aligned
            // R = 6.5). When R jumps, the branch's own start is solved too: the branch keeps
            // the solution continuous with its previous R, the other is reported with its
            // free energy.
            if let Some(prev) = out.last() {
                if at != start && r_jumped(prev.r, sol.r) {
                    let fp_start = fixed_point(prm, &prep, start)?;
                    let from_start = finish(prm, &prep, &test, branch, fp_start)?;
                    let (kept, alternative) = keep_continuous(prev.r, sol, from_start);
                    sol = kept;
                    alternatives.extend(alternative);
                }
            }
            at = (sol.b, sol.c);
            out.push(sol);
            on_solved(branch, p);
        }
        Ok((out, alternatives))
    };
    let (cold, hot) = rayon::join(
        || run(ps.clone(), (0.0, 0.0), Branch::Unaligned),
        || {
            run(
                ps.iter().rev().copied().collect(),
                (1.0, prm.eps),
                Branch::Aligned,
            )
        },
    );
    let (cold, mut alternatives) = cold?;
    let (mut hot, hot_alternatives) = hot?;
    hot.reverse();
    alternatives.extend(hot_alternatives);
    alternatives.sort_by_key(|a| a.solution.p);
    let thr = r_threshold(prm);
    let curve = |v: &[BranchSolution]| v.iter().map(|s| (s.p as f64, s.r)).collect::<Vec<_>>();
    let free_energy_gap: Vec<Option<f64>> = cold
        .iter()
        .zip(&hot)
        .map(|(a, b)| distinct(a, b).then_some(b.free_energy.total - a.free_energy.total))
        .collect();
    let hysteresis = free_energy_gap.iter().any(Option::is_some);
    let (p_drive, drive) = super::potential::population_centre_drive_max(
        prm.d as f64,
        prm.n as f64,
        prm.t,
        prm.s_a2,
        prm.sigma_w2,
    )?;
    Ok(SweepReport {
        population_drive_max: PopulationDrive { p: p_drive, drive },
        p_threshold_unaligned: crossing(&curve(&cold), thr, true),
        p_threshold_aligned: crossing(&curve(&hot), thr, false),
        branch_ends: branch_ends(
            &ps,
            &cold.iter().map(|s| s.r).collect::<Vec<_>>(),
            &hot.iter().map(|s| s.r).collect::<Vec<_>>(),
            &free_energy_gap,
        ),
        p_first_specialised: crossing(
            &cold
                .iter()
                .map(|s| (s.p as f64, s.outliers))
                .collect::<Vec<_>>(),
            1.0,
            true,
        ),
        p_transition: gap_crossing(&ps, &free_energy_gap),
        free_energy_gap,
        params: top,
        p_values: ps,
        unaligned: cold,
        aligned: hot,
        r_threshold: thr,
        hysteresis,
        alternatives,
    })
}

/// Two solutions at one P are distinct when their R differ by more than 1e-3 of the larger
/// and both iterations converged, or, if either stopped at the iteration cap, by more than
/// [`UNCONVERGED_DISTINCT`] of the larger: two unconverged iterates of one slowly converging
/// fixed point differ in R by ~1e-3 (D = N = 20, σ_w² = 0.1, P = 640: 0.04173 vs 0.04167),
/// which is not a second phase and must not be reported as hysteresis.
fn distinct(a: &BranchSolution, b: &BranchSolution) -> bool {
    let tolerance = if a.converged && b.converged {
        1e-3
    } else {
        UNCONVERGED_DISTINCT
    };
    (a.r - b.r).abs() > tolerance * a.r.max(b.r)
}

/// Relative difference in R beyond which two solutions count as distinct although one of
/// them did not converge (the branches of a first-order transition differ by O(1) factors).
pub const UNCONVERGED_DISTINCT: f64 = 0.1;

/// Of the solution continued from the previous P (`continued`) and the one solved from the
/// branch's start (`from_start`) at the same P, keeps the one whose R is nearer (in log R) to
/// the branch's previous `prev_r`, and returns the other as an [`AlternativeSolution`] with
/// its free-energy difference, or `None` when the two are the same fixed point.
fn keep_continuous(
    prev_r: f64,
    continued: BranchSolution,
    from_start: BranchSolution,
) -> (BranchSolution, Option<AlternativeSolution>) {
    if !distinct(&continued, &from_start) {
        return (continued, None);
    }
    let log_gap = |s: &BranchSolution| (s.r.max(1e-300).ln() - prev_r.max(1e-300).ln()).abs();
    let (kept, other, origin) = if log_gap(&from_start) < log_gap(&continued) {
        (from_start, continued, SolutionOrigin::PreviousSolution)
    } else {
        (continued, from_start, SolutionOrigin::BranchStart)
    };
    let alternative = AlternativeSolution {
        branch: kept.branch,
        origin,
        free_energy_above_branch: other.free_energy.total - kept.free_energy.total,
        solution: other,
    };
    (kept, Some(alternative))
}

/// A continuation step "jumped" when R changed by more than a factor [`R_JUMP_FACTOR`].
fn r_jumped(prev: f64, next: f64) -> bool {
    (next.max(1e-300).ln() - prev.max(1e-300).ln()).abs() > R_JUMP_FACTOR.ln()
}

/// R ratio between neighbouring P that triggers a second solve from the branch's start.
pub const R_JUMP_FACTOR: f64 = 2.0;

/// Where a solution that a branch did not keep was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SolutionOrigin {
    /// Continued from the branch's solution at the previous P.
    PreviousSolution,
    /// Solved from the branch's own start ((0, 0) or (1, ε)).
    BranchStart,
}

/// A second fixed point found at one P when the continuation jumped in R: the branch kept the
/// solution continuous with its previous R, this is the other one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlternativeSolution {
    /// The branch whose continuation found it.
    pub branch: Branch,
    /// How it was reached.
    pub origin: SolutionOrigin,
    /// F(this) − F(the branch's solution at the same P), in nats ([`FreeEnergy`]): positive
    /// means the kept solution is the more probable one.
    pub free_energy_above_branch: f64,
    /// The solution itself.
    pub solution: BranchSolution,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cavity::closed_forms::erf_arcsin_kernel;

    #[test]
    fn series_entries_match_quadrature() {
        let gh = GaussHermite::new(120).unwrap();
        // Compare one pair through kernel_block (series path) with the direct quadrature.
        let pts = Points::sample(6, 12, 3, 0);
        let cov = perp_cov(&pts, &pts, 0.8);
        let var: Vec<f64> = (0..pts.len()).map(|i| cov[(i, i)]).collect();
        let nodes = [(0.0, 0.2), (0.4, 0.5), (1.1, 0.3)];
        let k = kernel_block((&pts, &var), (&pts, &var), cov.as_ref(), &nodes, 1.0, true);
        let mut checked = 0;
        for i in 0..pts.len() {
            for j in 0..pts.len() {
                let r = 2.0 * cov[(i, j)] / ((1.0 + 2.0 * var[i]) * (1.0 + 2.0 * var[j])).sqrt();
                if i == j || r.abs() > SERIES_MAX_R {
                    continue;
                }
                let want: f64 = nodes
                    .iter()
                    .map(|&(rho, w)| {
                        w * erf_pair_mean_quadrature(
                            &gh,
                            rho * pts.z[i],
                            rho * pts.z[j],
                            var[i],
                            var[j],
                            cov[(i, j)],
                        )
                    })
                    .sum();
                assert!(
                    (k[(i, j)] - want).abs() < 1e-12,
                    "({i},{j}) r={r}: {} vs {want}",
                    k[(i, j)]
                );
                checked += 1;
            }
        }
        assert!(checked > 20);
    }

    #[test]
    fn pair_quadrature_matches_two_dimensional_rule() {
        // E[erf(m1 + u1) erf(m2 + u2)] by the tensor rule as an independent reference.
        let gh = GaussHermite::new(100).unwrap();
        let (m1, m2, q1, q2, c): (f64, f64, f64, f64, f64) = (0.4, -0.7, 0.9, 0.5, 0.3);
        let rho = c / (q1 * q2).sqrt();
        let want = gh.expect_pair(
            rho,
            |u| libm::erf(m1 + q1.sqrt() * u),
            |v| libm::erf(m2 + q2.sqrt() * v),
        );
        let got = erf_pair_mean_quadrature(&gh, m1, m2, q1, q2, c);
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }

    #[test]
    fn gaussian_overlap_gives_the_arcsin_kernel() {
        // With ρ ∼ 𝒩(0, σ_w²/D) the weight is Gaussian with covariance Σ = diag(σ_w²/D,
        // σ_w²/(D−1)…), and the kernel must be (2/π)·arcsin(2xᵀΣx'/√((1+2xᵀΣx)(1+2x'ᵀΣx'))).
        let (d, s2, nsa2) = (8, 0.9, 1.3);
        let pts = Points::sample(d, 40, 11, 0);
        let cov = perp_cov(&pts, &pts, s2);
        let var: Vec<f64> = (0..pts.len()).map(|i| cov[(i, i)]).collect();
        let gh = GaussHermite::new(60).unwrap();
        let sd = (s2 / d as f64).sqrt();
        let nodes: Vec<(f64, f64)> = gh
            .nodes()
            .iter()
            .zip(gh.weights())
            .map(|(&x, &w)| (sd * x, w))
            .collect();
        let k = kernel_block((&pts, &var), (&pts, &var), cov.as_ref(), &nodes, nsa2, true);
        let par = s2 / d as f64;
        for i in 0..pts.len() {
            for j in 0..pts.len() {
                let q1 = par * pts.z[i] * pts.z[i] + var[i];
                let q2 = par * pts.z[j] * pts.z[j] + var[j];
                let c12 = par * pts.z[i] * pts.z[j] + cov[(i, j)];
                let want = nsa2 * erf_arcsin_kernel(q1, q2, c12);
                assert!(
                    (k[(i, j)] - want).abs() < 1e-9,
                    "({i},{j}) {} vs {want}",
                    k[(i, j)]
                );
            }
        }
    }

    #[test]
    fn overlap_posterior_moment_matches_fine_grid() {
        let model = FiniteModel::new(20.0, 150.0, 0.05, 0.05, 1.0).unwrap();
        for (b, c) in [(0.0, 0.0), (0.02, 0.3), (0.2, 0.1)] {
            let post = overlap_posterior(&model, b, c).unwrap();
            let n = 400_000;
            let h = 4.0 / n as f64;
            let vals: Vec<f64> = (0..=n)
                .map(|i| model.potential(i as f64 * h, b, c))
                .collect();
            let vmin = vals.iter().copied().fold(f64::INFINITY, f64::min);
            let (mut z, mut m2) = (0.0, 0.0);
            for (i, v) in vals.iter().enumerate() {
                let r = i as f64 * h;
                let w = (-(v - vmin)).exp() * if i == 0 { 0.5 } else { 1.0 };
                z += w;
                m2 += w * r * r;
            }
            let want = m2 / z;
            let got = post.second_moment();
            assert!(
                (got - want).abs() < 1e-8 * want.max(1e-3),
                "b={b} c={c}: {got} vs {want}"
            );
        }
    }

    fn small(p: usize) -> AdaptiveParams {
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

    #[test]
    fn sweep_shows_r_rising_from_prior_scale_to_order_one() {
        // D = N = 8, T = 0.01: the branch continued from large alignment is aligned at P = 200
        // (R = O(1)) while continuation from small alignment starts at the prior scale.
        let prm = AdaptiveParams {
            d: 8,
            n: 8,
            s_a2: 1.0 / 8.0,
            t: 0.01,
            p_test: 50,
            ..small(200)
        };
        let rep = sweep_p(&prm, &[25, 200]).unwrap();
        let prior = prm.sigma_w2 / prm.d as f64;
        let first = &rep.unaligned[0];
        assert!(
            first.r < 3.0 * prior,
            "R at P=25: {} (prior {prior})",
            first.r
        );
        let last = rep.aligned.last().unwrap();
        assert!(last.r > rep.r_threshold, "R at P=200: {}", last.r);
        assert!(rep.hysteresis);
        let p_down = rep
            .p_threshold_aligned
            .expect("the aligned branch loses alignment in range");
        assert!((25.0..=200.0).contains(&p_down), "{p_down}");
    }

    /// KL(q ‖ p0) of the overlap posterior against an independent dense Simpson integration of
    /// q log(q/p0) over [−ρ_max, ρ_max], in one well and in two.
    #[test]
    fn kl_to_the_prior_matches_dense_quadrature() {
        let model = FiniteModel::new(10.0, 40.0, 0.05, 0.1, 1.0).unwrap();
        for (b, c) in [(0.0, 0.0), (0.1, 0.05), (0.3, -0.3), (0.05, 0.4)] {
            let post = overlap_posterior(&model, b, c).unwrap();
            let (lo, n) = (-8.0f64, 400_000usize);
            let h = 2.0 * -lo / n as f64;
            let rho: Vec<f64> = (0..=n).map(|i| lo + i as f64 * h).collect();
            let u: Vec<f64> = rho.iter().map(|&r| model.potential(r, b, c)).collect();
            let umin = u.iter().copied().fold(f64::INFINITY, f64::min);
            let simpson = |f: &dyn Fn(usize) -> f64| {
                (0..=n)
                    .map(|i| {
                        let w = if i == 0 || i == n {
                            1.0
                        } else if i % 2 == 1 {
                            4.0
                        } else {
                            2.0
                        };
                        w * f(i)
                    })
                    .sum::<f64>()
                    * h
                    / 3.0
            };
            let z = simpson(&|i| (-(u[i] - umin)).exp());
            let var0 = model.sigma_w2 / model.d;
            let kl = simpson(&|i| {
                let q = (-(u[i] - umin)).exp() / z;
                let log_p0 = -rho[i] * rho[i] / (2.0 * var0)
                    - 0.5 * (2.0 * std::f64::consts::PI * var0).ln();
                if q > 0.0 {
                    q * (q.ln() - log_p0)
                } else {
                    0.0
                }
            });
            assert!(
                (post.kl_prior - kl).abs() < 1e-7 * kl.max(1.0),
                "b = {b}, c = {c}: {} vs {kl}",
                post.kl_prior
            );
            let cut = 3.0 * var0.sqrt();
            let tail = simpson(&|i| {
                if rho[i].abs() > cut {
                    (-(u[i] - umin)).exp() / z
                } else {
                    0.0
                }
            });
            assert!(
                (post.outlier_fraction - tail).abs() < 1e-3 * tail + 1e-9,
                "b = {b}, c = {c}: outliers {} vs {tail}",
                post.outlier_fraction
            );
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
    fn free_energy_is_the_sum_of_its_parts_and_the_crossing_interpolates() {
        let rep = solve(&small(40)).unwrap();
        for s in [&rep.unaligned, &rep.aligned] {
            let f = s.free_energy;
            let want =
                f.kl_neurons + f.data_fit + f.log_det + 20.0 * (2.0 * std::f64::consts::PI).ln();
            assert!((f.total - want).abs() < 1e-9 * want.abs());
            assert!(f.kl_neurons >= 0.0 && f.data_fit > 0.0);
        }
        // ΔF = +1 at P = 100 and −1 at P = 400: the crossing is the geometric mean, 200.
        let p = gap_crossing(&[50, 100, 400], &[None, Some(1.0), Some(-1.0)]).unwrap();
        assert!((p - 200.0).abs() < 1e-9);
        assert_eq!(gap_crossing(&[50, 100], &[Some(-1.0), Some(-2.0)]), None);
        assert_eq!(
            gap_crossing(&[50, 100, 200], &[Some(1.0), None, Some(-2.0)]),
            None
        );
        // Branches differ at P = 100, 200 only. Below, the merged R (0.1) is the unaligned
        // branch's: the aligned one ends in (50, 100). Above, the merged R (4) is the aligned
        // branch's: the unaligned one jumps in (200, 400).
        let gap = [None, Some(1.0), Some(-1.0), None];
        let ps = [50, 100, 200, 400];
        let end = |branch, between| BranchEnd { branch, between };
        assert_eq!(
            branch_ends(&ps, &[0.1, 0.1, 0.2, 4.0], &[0.1, 3.0, 3.5, 4.0], &gap),
            vec![
                end(Branch::Aligned, (50, 100)),
                end(Branch::Unaligned, (200, 400))
            ]
        );
        // The blog preset's shape: the aligned branch exists only inside a window, so both
        // ends are its own.
        assert_eq!(
            branch_ends(&ps, &[0.1, 0.12, 0.1, 0.07], &[0.1, 5.3, 6.5, 0.07], &gap),
            vec![
                end(Branch::Aligned, (50, 100)),
                end(Branch::Aligned, (200, 400))
            ]
        );
        assert!(branch_ends(&[50, 100], &[0.1, 0.1], &[0.1, 0.1], &[None, None]).is_empty());
        assert!(branch_ends(
            &[50, 100],
            &[0.1, 0.1],
            &[1.0, 2.0],
            &[Some(1.0), Some(2.0)]
        )
        .is_empty());
    }

    #[test]
    fn a_jump_in_r_keeps_the_continuous_solution_and_reports_the_other() {
        let base = solve(&small(40)).unwrap().unaligned;
        let with = |r: f64, f: f64| {
            let mut s = base.clone();
            s.r = r;
            s.free_energy.total = f;
            s
        };
        // Continued from R = 0.10 into a basin with R = 6.5; the branch's start finds 0.11.
        let (kept, alt) = keep_continuous(0.10, with(6.5, 900.0), with(0.11, 100.0));
        let alt = alt.expect("two distinct fixed points");
        assert_eq!(kept.r, 0.11);
        assert_eq!(alt.solution.r, 6.5);
        assert_eq!(alt.origin, SolutionOrigin::PreviousSolution);
        assert!((alt.free_energy_above_branch - 800.0).abs() < 1e-12);
        // The continued solution is the nearer one: it stays, the start's is reported.
        let (kept, alt) = keep_continuous(4.0, with(3.5, 50.0), with(0.05, 80.0));
        let alt = alt.unwrap();
        assert_eq!((kept.r, alt.solution.r), (3.5, 0.05));
        assert_eq!(alt.origin, SolutionOrigin::BranchStart);
        assert!((alt.free_energy_above_branch - 30.0).abs() < 1e-12);
        // One fixed point reached from both: nothing to report.
        assert!(keep_continuous(0.1, with(0.5, 1.0), with(0.5, 1.0))
            .1
            .is_none());
        // Two iterates stopped at the cap, 0.15 % apart: one fixed point, not two; 0.15 %
        // between converged solutions, or 20 % between unconverged ones, are two.
        let unconverged = |r: f64| {
            let mut s = with(r, 1.0);
            s.converged = false;
            s
        };
        assert!(!distinct(&unconverged(0.04173), &unconverged(0.04167)));
        assert!(!distinct(&with(0.04173, 1.0), &unconverged(0.04167)));
        assert!(distinct(&with(0.04173, 1.0), &with(0.04167, 1.0)));
        assert!(distinct(&unconverged(0.05), &unconverged(0.04)));
        assert!(r_jumped(0.1, 0.25) && r_jumped(0.25, 0.1) && !r_jumped(0.1, 0.19));
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
