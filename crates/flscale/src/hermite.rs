//! Probabilists' Hermite polynomials and Gauss–Hermite quadrature under the standard
//! Gaussian measure 𝒩(0, 1).
//!
//! Conventions (spec 00, "The physics in one page"): He₀ = 1, He₁ = z, He_{n+1} = z·He_n − n·He_{n−1},
//! E[He_m He_n] = n!·δ_{mn}, Ĥe_m = He_m/√(m!). A function f ∈ L²(𝒩) expands as
//! f = Σ_k c_k He_k with c_k = E[f·He_k]/k!.
//!
//! Quadrature: an n-point Gauss–Hermite rule is exact for polynomials of degree ≤ 2n − 1.
//! Nodes are computed by Newton iteration on the orthonormal physicists' recurrence (the
//! classical `gauher` construction, Press et al., *Numerical Recipes* §4.6) and mapped
//! x = √2·t, w = w_t/√π, so that the weights sum to 1.

use crate::error::{Error, Result};

/// Value of He_n(x) by the three-term recurrence.
pub fn he(n: usize, x: f64) -> f64 {
    let (mut prev, mut cur) = (0.0, 1.0);
    for k in 0..n {
        let next = x * cur - k as f64 * prev;
        prev = cur;
        cur = next;
    }
    cur
}

/// Values He_0(x) … He_nmax(x).
pub fn he_all(nmax: usize, x: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(nmax + 1);
    out.push(1.0);
    if nmax >= 1 {
        out.push(x);
    }
    for k in 1..nmax {
        let next = x * out[k] - k as f64 * out[k - 1];
        out.push(next);
    }
    out
}

/// n! as f64 (exact up to 22!).
pub fn factorial(n: usize) -> f64 {
    (1..=n).fold(1.0, |acc, k| acc * k as f64)
}

/// Normalised Hermite polynomial Ĥe_n(x) = He_n(x)/√(n!).
pub fn he_normalized(n: usize, x: f64) -> f64 {
    he(n, x) / factorial(n).sqrt()
}

/// Largest supported Gauss–Hermite order.
pub const MAX_ORDER: usize = 150;

/// A Gauss–Hermite rule for E_{z∼𝒩(0,1)}[f(z)] = Σ_i w_i f(x_i).
#[derive(Debug, Clone)]
pub struct GaussHermite {
    nodes: Vec<f64>,
    weights: Vec<f64>,
}

impl GaussHermite {
    /// The n-point rule (exact for polynomials of degree ≤ 2n − 1). `n` must be in 1..=150
    /// (beyond that the unnormalised recurrence at the outermost nodes overflows f64; 150 points
    /// already integrate polynomials of degree 299 exactly).
    pub fn new(n: usize) -> Result<Self> {
        if !(1..=MAX_ORDER).contains(&n) {
            return Err(Error::invalid(format!(
                "Gauss–Hermite order {n} is not allowed; it must be between 1 and {MAX_ORDER}"
            )));
        }
        let (t, wt) = physicists_rule(n);
        let sqrt2 = std::f64::consts::SQRT_2;
        let inv_sqrt_pi = 1.0 / std::f64::consts::PI.sqrt();
        let nodes: Vec<f64> = t.iter().map(|t| t * sqrt2).collect();
        let weights: Vec<f64> = wt.iter().map(|w| w * inv_sqrt_pi).collect();
        Ok(GaussHermite { nodes, weights })
    }

    /// Nodes x_i (ascending).
    pub fn nodes(&self) -> &[f64] {
        &self.nodes
    }

    /// Weights w_i (summing to 1).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// E_{z∼𝒩(0,1)}[f(z)].
    pub fn expect(&self, mut f: impl FnMut(f64) -> f64) -> f64 {
        // Sum small terms first (the tails) to limit rounding error.
        let mut idx: Vec<usize> = (0..self.nodes.len()).collect();
        idx.sort_by(|&a, &b| self.nodes[b].abs().total_cmp(&self.nodes[a].abs()));
        idx.iter()
            .map(|&i| self.weights[i] * f(self.nodes[i]))
            .sum()
    }

    /// E over a pair of standard Gaussians with correlation ρ:
    /// E[f(u) g(v)], (u, v) ∼ 𝒩(0, [[1, ρ], [ρ, 1]]), by the tensor rule
    /// u = z₁, v = ρ z₁ + √(1−ρ²) z₂.
    pub fn expect_pair(&self, rho: f64, f: impl Fn(f64) -> f64, g: impl Fn(f64) -> f64) -> f64 {
        let s = (1.0 - rho * rho).max(0.0).sqrt();
        let mut total = 0.0;
        for (&z1, &w1) in self.nodes.iter().zip(&self.weights) {
            let fu = f(z1);
            let inner: f64 = self
                .nodes
                .iter()
                .zip(&self.weights)
                .map(|(&z2, &w2)| w2 * g(rho * z1 + s * z2))
                .sum();
            total += w1 * fu * inner;
        }
        total
    }

    /// Hermite coefficients c_0 … c_kmax of f, with f = Σ c_k He_k (c_k = E[f He_k]/k!).
    pub fn hermite_coefficients(&self, f: impl Fn(f64) -> f64, kmax: usize) -> Vec<f64> {
        let mut c = vec![0.0; kmax + 1];
        for (&x, &w) in self.nodes.iter().zip(&self.weights) {
            let fx = f(x);
            for (k, h) in he_all(kmax, x).into_iter().enumerate() {
                c[k] += w * fx * h;
            }
        }
        for (k, ck) in c.iter_mut().enumerate() {
            *ck /= factorial(k);
        }
        c
    }
}

/// Nodes and weights of the n-point rule for the weight e^{−t²} on ℝ (physicists').
fn physicists_rule(n: usize) -> (Vec<f64>, Vec<f64>) {
    const PIM4: f64 = 0.751_125_544_464_942_5; // π^{-1/4}
    let mut x = vec![0.0; n];
    let mut w = vec![0.0; n];
    let m = n.div_ceil(2);
    let nf = n as f64;
    let mut z = 0.0f64;
    for i in 0..m {
        // Initial guesses for the largest roots first (Numerical Recipes §4.6).
        z = match i {
            0 => (2.0 * nf + 1.0).sqrt() - 1.855_75 * (2.0 * nf + 1.0).powf(-0.166_67),
            1 => z - 1.14 * nf.powf(0.426) / z,
            2 => 1.86 * z - 0.86 * x[0],
            3 => 1.91 * z - 0.91 * x[1],
            _ => 2.0 * z - x[i - 2],
        };
        let mut pp = 0.0;
        for _ in 0..100 {
            let mut p1 = PIM4;
            let mut p2 = 0.0;
            for j in 0..n {
                let p3 = p2;
                p2 = p1;
                let jf = j as f64;
                p1 = z * (2.0 / (jf + 1.0)).sqrt() * p2 - (jf / (jf + 1.0)).sqrt() * p3;
            }
            pp = (2.0 * nf).sqrt() * p2;
            let z1 = z;
            z = z1 - p1 / pp;
            if (z - z1).abs() <= 1e-15 * z.abs().max(1.0) {
                break;
            }
        }
        x[i] = z;
        x[n - 1 - i] = -z;
        w[i] = 2.0 / (pp * pp);
        w[n - 1 - i] = w[i];
    }
    if n % 2 == 1 {
        x[n / 2] = 0.0;
    }
    x.reverse();
    w.reverse();
    (x, w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_and_moments_are_exact() {
        for n in [1, 2, 5, 20, 80, 150] {
            let gh = GaussHermite::new(n).unwrap();
            let s: f64 = gh.weights().iter().sum();
            assert!((s - 1.0).abs() < 1e-13, "n={n} sum={s}");
            // E[z^{2k}] = (2k−1)!!, exact for 2k ≤ 2n − 1.
            let mut dfact = 1.0;
            for k in 1..n.min(12) {
                dfact *= (2 * k - 1) as f64;
                let m = gh.expect(|z| z.powi(2 * k as i32));
                assert!((m / dfact - 1.0).abs() < 1e-11, "n={n} k={k} m={m}");
            }
        }
    }

    #[test]
    fn hermite_orthogonality() {
        let gh = GaussHermite::new(40).unwrap();
        for m in 0..8 {
            for n in 0..8 {
                let v = gh.expect(|z| he(m, z) * he(n, z));
                let want = if m == n { factorial(n) } else { 0.0 };
                assert!(
                    (v - want).abs() < 1e-9 * factorial(n).max(1.0),
                    "{m} {n} {v}"
                );
            }
        }
    }

    #[test]
    fn erf_hermite_coefficients_match_closed_form() {
        // erf(z) = Σ_k c_k He_k(z) with c_1 = 2/√(3π) (E[z erf z] = 2/√(3π) by Stein's lemma:
        // E[erf'(z)] = (2/√π) E[e^{-z²}] = 2/√(3π)), c_even = 0.
        let gh = GaussHermite::new(120).unwrap();
        let c = gh.hermite_coefficients(libm::erf, 5);
        let c1 = 2.0 / (3.0 * std::f64::consts::PI).sqrt();
        assert!((c[1] - c1).abs() < 1e-12);
        assert!(c[0].abs() < 1e-14 && c[2].abs() < 1e-14 && c[4].abs() < 1e-14);
        // E[erf(z) He_3(z)] = E[erf'''(z)] = (2/√π) E[(4z²−2) e^{-z²}] = −(4/3)·(2/√(3π))·(1/3)·... :
        // compute via Stein: E[f He_3] = E[f'''], f''' = (2/√π)(4z²−2)e^{−z²};
        // E[z² e^{−z²}] = 1/3^{3/2}, E[e^{−z²}] = 1/√3 → E[f'''] = (2/√π)(4/(3√3) − 2/√3).
        let e3 =
            2.0 / std::f64::consts::PI.sqrt() * (4.0 / (3.0 * 3f64.sqrt()) - 2.0 / 3f64.sqrt());
        assert!((c[3] * 6.0 - e3).abs() < 1e-12, "{} vs {}", c[3] * 6.0, e3);
    }

    #[test]
    fn rejects_bad_order() {
        assert!(GaussHermite::new(0).is_err());
        assert!(GaussHermite::new(MAX_ORDER + 1).is_err());
    }
}
