//! The adaptive kernel K_μν = N s_a²·E[erf(w·x^μ) erf(w·x^ν)] on sampled points for a
//! discretised overlap law of ρ = w·e (blog §"Match the residual to the network's prediction";
//! used by [`super::adaptive`]).
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

use crate::hermite::GaussHermite;

/// Pairs with |r| above this use quadrature; below it the series is truncated where the
/// remainder bound r^{n+1}/(2(n+1)(1−r))·(4/π)·1.2 falls below 1e-15 (≤ [`SERIES_TERMS`]).
pub const SERIES_MAX_R: f64 = 0.6;
/// Number of Mehler terms (n = 1 … SERIES_TERMS) kept for pairs with |r| ≤ SERIES_MAX_R.
pub const SERIES_TERMS: usize = 64;

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

    pub(crate) fn row(&self, i: usize) -> &[f64] {
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
pub(crate) fn perp_cov(a: &Points, b: &Points, sigma_w2: f64) -> Mat<f64> {
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
    let (na, nb) = (a.len(), b.len());
    let side_a = BlockSide::new(a, var_a);
    let side_b = BlockSide::new(b, var_b);
    let r = Mat::from_fn(na, nb, |i, j| {
        2.0 * cov[(i, j)] * side_a.kap[i] * side_b.kap[j]
    });
    // Terms needed for the largest |r| handled by the series: remainder ≤ 1e-15.
    let r_series = (0..nb)
        .flat_map(|j| (0..na).map(move |i| (i, j)))
        .filter(|&(i, j)| !(same && i == j))
        .map(|(i, j)| r[(i, j)].abs())
        .filter(|&v| v <= SERIES_MAX_R)
        .fold(0.0, f64::max);
    let terms = series_terms_for(r_series, SERIES_TERMS);
    let mut out = mehler_series_block(
        HermiteSide::new(a, &side_a.kap, nodes),
        HermiteSide::new(b, &side_b.kap, nodes),
        &r,
        nodes,
        terms,
    );
    resum_pairs_beyond_series(&mut out, (&side_a, &side_b), cov, &r, nodes, same);
    for j in 0..nb {
        for i in 0..na {
            out[(i, j)] *= n_sa2;
        }
    }
    out
}

/// One side of a kernel block: its points, their perpendicular variances C_μμ and
/// κ = (1 + 2C_μμ)^{−1/2}.
struct BlockSide<'a> {
    pts: &'a Points,
    var: &'a [f64],
    kap: Vec<f64>,
}

impl<'a> BlockSide<'a> {
    fn new(pts: &'a Points, var: &'a [f64]) -> Self {
        let kap = var.iter().map(|v| 1.0 / (1.0 + 2.0 * v).sqrt()).collect();
        BlockSide { pts, var, kap }
    }
}

/// Per point and node of one side: x = κρz, the Hermite recurrence state and e^{−x²}.
struct HermiteSide {
    x: Vec<f64>,
    h_prev: Vec<f64>,
    h_cur: Vec<f64>,
    gauss: Vec<f64>,
}

impl HermiteSide {
    /// The state before order 0 (Ĥ_{−1} = 0, Ĥ_0 = 1), index point·nodes + node.
    fn new(pts: &Points, kap: &[f64], nodes: &[(f64, f64)]) -> Self {
        let x: Vec<f64> = (0..pts.len())
            .flat_map(|i| nodes.iter().map(move |&(rho, _)| (i, rho)))
            .map(|(i, rho)| kap[i] * rho * pts.z[i])
            .collect();
        let gauss = x.iter().map(|x| (-x * x).exp()).collect();
        HermiteSide {
            h_prev: vec![0.0; x.len()],
            h_cur: vec![1.0; x.len()],
            gauss,
            x,
        }
    }

    /// Writes order `n`'s factor (erf(x) for n = 0, else ẽ_n(x)) times √w_k into column k of
    /// `e`, for the first `len` points.
    fn fill(&self, e: &mut Mat<f64>, sqrt_w: &[f64], n: usize, len: usize) {
        let nk = sqrt_w.len();
        let two_over_sqrt_pi = 2.0 / std::f64::consts::PI.sqrt();
        for (k, &wk) in sqrt_w.iter().enumerate() {
            let col = e.col_as_slice_mut(k);
            for (i, slot) in col.iter_mut().enumerate().take(len) {
                let idx = i * nk + k;
                let v = if n == 0 {
                    libm::erf(self.x[idx])
                } else {
                    two_over_sqrt_pi * self.h_cur[idx] * self.gauss[idx]
                };
                *slot = v * wk;
            }
        }
    }

    /// Advances Ĥ after step n ≥ 1: h_cur goes from Ĥ_{n−1} to Ĥ_n.
    fn advance(&mut self, n: usize) {
        let k = (n - 1) as f64; // h_cur is Ĥ_{n−1}, h_prev Ĥ_{n−2}
        for idx in 0..self.x.len() {
            let next = self.x[idx] * (2.0 / (k + 1.0)).sqrt() * self.h_cur[idx]
                - (k / (k + 1.0)).sqrt() * self.h_prev[idx];
            self.h_prev[idx] = self.h_cur[idx];
            self.h_cur[idx] = next;
        }
    }
}

/// The Mehler series Σ_{n ≤ terms} rⁿ/(2n)·ẽ_n ẽ_n summed over the ρ nodes, one matrix product
/// per order (module docs), for every pair of the block.
fn mehler_series_block(
    mut sa: HermiteSide,
    mut sb: HermiteSide,
    r: &Mat<f64>,
    nodes: &[(f64, f64)],
    terms: usize,
) -> Mat<f64> {
    let (na, nb, nk) = (r.nrows(), r.ncols(), nodes.len());
    let sqrt_w: Vec<f64> = nodes.iter().map(|&(_, w)| w.max(0.0).sqrt()).collect();
    let mut out = Mat::<f64>::zeros(na, nb);
    let mut prod = Mat::<f64>::zeros(na, nb);
    // r^n, column-major like `out`.
    let mut pow = vec![1.0f64; na * nb];
    let mut ea = Mat::<f64>::zeros(na, nk);
    let mut eb = Mat::<f64>::zeros(nb, nk);
    for n in 0..=terms {
        sa.fill(&mut ea, &sqrt_w, n, na);
        sb.fill(&mut eb, &sqrt_w, n, nb);
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
        if n >= 1 {
            sa.advance(n);
            sb.advance(n);
        }
    }
    out
}

/// Recomputes the pairs where the truncated series is not accurate enough, and the diagonal
/// when `same`: by the pair's own Mehler sum up to |r| ≤ [`PAIR_SERIES_MAX_R`], else by
/// Gauss–Hermite quadrature (module docs).
fn resum_pairs_beyond_series(
    out: &mut Mat<f64>,
    (a, b): (&BlockSide, &BlockSide),
    cov: MatRef<'_, f64>,
    r: &Mat<f64>,
    nodes: &[(f64, f64)],
    same: bool,
) {
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
    for j in 0..r.ncols() {
        for i in 0..r.nrows() {
            if r[(i, j)].abs() > SERIES_MAX_R || (same && i == j) {
                let (q1, q2, c) = (a.var[i], b.var[j], cov[(i, j)]);
                let rij = r[(i, j)];
                let (za, zb) = (a.pts.z[i], b.pts.z[j]);
                out[(i, j)] = if rij.abs() <= PAIR_SERIES_MAX_R {
                    nodes
                        .iter()
                        .map(|&(rho, w)| {
                            w * pair_series(a.kap[i] * rho * za, b.kap[j] * rho * zb, rij)
                        })
                        .sum()
                } else {
                    nodes
                        .iter()
                        .map(|&(rho, w)| {
                            w * erf_pair_mean_rule(&rule, rho * za, rho * zb, q1, q2, c)
                        })
                        .sum()
                };
            }
        }
    }
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
}
