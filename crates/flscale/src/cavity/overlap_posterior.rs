//! The overlap posterior p(ρ | b, c) ∝ e^{−U(ρ; b, c)} of one neuron, discretised for the
//! kernel (blog §"Reduce the hidden weight posterior to one overlap"; step 1 of the map in
//! [`super::adaptive`]).

use super::potential::FiniteModel;
use crate::error::{Error, Result};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
