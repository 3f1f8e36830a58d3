//! The equivalent-kernel (continuum) self-consistency of the solvable model at finite D, and its
//! D → ∞ limit at fixed invariants, where the first-order transition into the mixed phase is
//! sharp.
//!
//! Source: Rubin, Seroussi & Ringel (ICLR 2024, arXiv 2310.03789) App. A.2 eq. (6)/(8) (the
//! action S = D·Ŝ(ρ) = D[ρ²/(2σ_w²) − u·g(ρ; b, c)], the blog's mean-field Ũ_u, L → 1),
//! App. A.3 eqs. (9)–(12) (the kernel in the basis Ĥ1 = H1, Ĥ3 = H3/√6 and the GPR equation
//! for the discrepancy), §3.1 eq. (11) (the scaling N → βN, D → √βD, σ_a² → σ_a²/√β,
//! n → αn, T → (α/β)T) and Claims I–IV.
//!
//! ## The finite-D equations (derived from App. A.3)
//! With c(ρ) = (E[Ĥ1 erf(w·x)], E[Ĥ3 erf(w·x)]) = (2ρ/√(π(1+2q)), −4ρ³/(√(6π)(1+2q)^{3/2})),
//! q = σ_w² + ρ² (blog §"Reduce the hidden weight posterior…"), the kernel restricted to
//! span(Ĥ1, Ĥ3) is Q̃ = N s_a²·E_ρ[c cᵀ] (App. A.3 after eq. (11); its (1,1) entry there reads
//! 2ρ² where c₁² = 4ρ²/(π(1+2q)), a typo — the off-diagonal and (3,3) entries agree with c cᵀ).
//! The EK discrepancy t̂ = (b, √6c) is t̂ = (T/P)(Q̃ + (T/P)I)⁻¹ŷ = (I + M)⁻¹ŷ with
//! ŷ = (1, √6ε) and M = (P/T)Q̃ = κ·D·E_ρ[c cᵀ]. Everything depends on the two invariants
//! u = P²s_a²/(T²D) and κ = P·N·s_a²/(T·D) (both unchanged by the scaling of eq. (11); the
//! readout factor s_a²P/T falls as β^{−1/2}, so L → 1) and on D through the law
//! p(ρ) ∝ e^{−D·Ũ_u(ρ; b, c)}, averaged here by quadrature.
//!
//! ## The D → ∞ limit (derived here)
//! The centre well is Gaussian with D·E[ρ²] = σ_w²/(1 − X), X = u·g₀·b², g₀ = 4σ_w²/(π(1+2σ_w²))
//! (the curvature of D·Ũ_u at 0, blog box "Expand the potential near zero overlap"), so it adds
//! κ·g₀/(1 − X) to M₁₁ and nothing to the cubic entries (they are O(1/D)). A side well at ρ*
//! holding mass f adds κ·D·f·c(ρ*)c(ρ*)ᵀ, finite only for f = φ/D: the mixed phase has
//! φ = D·f side-well neurons per unit D.
//! * **GFL** (φ = 0): c = ε and b solves b(1 + κg₀/(1 − u g₀ b²)) = 1 (one root in
//!   (0, min(1, 1/√(u g₀)))); valid while u < u_coexist(b, ε) (closed form, [`super::phase`]).
//! * **GMFL-I** (φ > 0): the side wells must stay degenerate with the centre (Claim IV), so
//!   u = u_coexist(b, c), and (I + M)t̂ = ŷ gives
//!   ŷ − t̂ − κg₀b/(1 − X)·e₁ = κφ(c*·t̂)·c*, c* = c(ρ*): the left side must be parallel to c*
//!   (one scalar equation) and its length fixes φ. u_coexist is homogeneous of degree −2 in
//!   (b, c), so along a ray c = r·b, b = √(u_coexist(1, r)/u): a scalar equation in r, solved by
//!   a scan and bisection.
//!
//! The onset of the mixed phase along a path is where GFL stops being valid:
//! u = u_coexist(b_GFL, ε).

use serde::Serialize;

use super::closed_forms::{erf_h1, erf_h3};
use super::phase::coexistence_closed_form;
use super::phase_at::{label, simpson_weight, wells, PhaseLabel};
use super::potential::MeanField;
use super::solver::{newton_fixed_point, NewtonOptions};
use super::{finite, positive};
use crate::error::{Error, Result};

/// The invariants of the EK self-consistency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Invariants {
    /// u = P²s_a²/(T²D).
    pub u: f64,
    /// κ = P·N·s_a²/(T·D).
    pub kappa: f64,
    /// σ_w².
    pub sigma_w2: f64,
    /// ε in y = H1 + εH3.
    pub eps: f64,
}

impl Invariants {
    /// Validates u > 0, κ > 0, σ_w² > 0 and a finite ε ≠ 0.
    pub fn new(u: f64, kappa: f64, sigma_w2: f64, eps: f64) -> Result<Self> {
        if finite("ε (cubic target strength)", eps)? == 0.0 {
            return Err(Error::invalid(
                "ε = 0 is not allowed here; the mixed phase needs a cubic target component",
            ));
        }
        Ok(Invariants {
            u: positive("u (effective interaction)", u)?,
            kappa: positive("κ (P·N·s_a²/(T·D))", kappa)?,
            sigma_w2: positive("σ_w² (hidden prior variance)", sigma_w2)?,
            eps,
        })
    }

    /// The invariants of a network: D, N, P, T, s_a² (per readout weight), σ_w², ε.
    pub fn of_network(net: &Network) -> Result<Self> {
        let (d, n, p, t, s) = (net.d, net.n, net.p, net.t, net.s_a2);
        for (name, v) in [("D", d), ("N", n), ("P", p), ("T", t), ("s_a²", s)] {
            positive(name, v)?;
        }
        Invariants::new(
            p * p * s / (t * t * d),
            p * n * s / (t * d),
            net.sigma_w2,
            net.eps,
        )
    }

    fn g0(&self) -> f64 {
        4.0 * self.sigma_w2 / (std::f64::consts::PI * (1.0 + 2.0 * self.sigma_w2))
    }
}

/// A network's parameters (the paper's d, N, n, σ², σ_a²/N, σ_w², ε).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Network {
    /// Input dimension D.
    pub d: f64,
    /// Width N.
    pub n: f64,
    /// Samples P.
    pub p: f64,
    /// Likelihood variance T.
    pub t: f64,
    /// Readout prior variance per weight s_a².
    pub s_a2: f64,
    /// σ_w².
    pub sigma_w2: f64,
    /// ε.
    pub eps: f64,
}

/// c(ρ) = (E[Ĥ1 erf], E[Ĥ3 erf]) at q = σ_w² + ρ² (App. A.3).
fn projections(rho: f64, sigma_w2: f64) -> (f64, f64) {
    let q = sigma_w2 + rho * rho;
    (erf_h1(rho, q), erf_h3(rho, q) / 6f64.sqrt())
}

/// (b, c) from t̂ = (I + M)⁻¹(1, √6ε).
fn gpr(m: [[f64; 2]; 2], eps: f64) -> (f64, f64) {
    let y = (1.0, 6f64.sqrt() * eps);
    let (a11, a12, a21, a22) = (1.0 + m[0][0], m[0][1], m[1][0], 1.0 + m[1][1]);
    let det = a11 * a22 - a12 * a21;
    let t0 = (a22 * y.0 - a12 * y.1) / det;
    let t1 = (a11 * y.1 - a21 * y.0) / det;
    (t0, t1 / 6f64.sqrt())
}

/// One EK solution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContinuumSolution {
    /// D, or `None` for D → ∞.
    pub d: Option<f64>,
    /// Linear discrepancy coefficient.
    pub b: f64,
    /// Cubic discrepancy coefficient.
    pub c: f64,
    /// The learned cubic fraction 1 − c/ε.
    pub cubic_fraction: f64,
    /// The learned linear fraction 1 − b.
    pub linear_fraction: f64,
    /// φ = D·(side-well mass): side-well neurons per unit D.
    pub side_mass_times_d: f64,
    /// The side minimum ρ* (`None` without a side well).
    pub rho_star: Option<f64>,
    /// u / u_coexist(b, c) (1 in the mixed phase at D → ∞).
    pub u_over_coexist: Option<f64>,
    /// The centre drive X = u·g₀·b² (= u/u_spinodal(b)).
    pub centre_drive: f64,
    /// GFL, GMFL-I or GMFL-II (finite D: [`super::phase_at`]'s rule with floor 0.01/D).
    pub label: PhaseLabel,
    /// max|G(b, c) − (b, c)| at the solution (finite D) or the residual of the D → ∞ equations.
    pub residual: f64,
    /// Newton iterations (finite D); 0 for D → ∞ (scan and bisection).
    pub iterations: usize,
}

/// The D → ∞ GFL solution: b with b(1 + κg₀/(1 − u g₀ b²)) = 1, c = ε (bisection to 1e-15).
pub fn gfl_limit(inv: &Invariants) -> f64 {
    let g0 = inv.g0();
    let b_s = 1.0 / (inv.u * g0).sqrt();
    let f = |b: f64| b + inv.kappa * g0 * b / (1.0 - inv.u * g0 * b * b) - 1.0;
    crate::scalar::bisect(|b| f(b) > 0.0, 0.0, b_s.min(1.0), 1e-15, 200)
}

/// u / u_coexist(b, c) and ρ* for a first-order coexistence (`None` when Ũ has none, or when
/// it is continuous, ρ* = 0).
fn coexist(inv: &Invariants, b: f64, c: f64) -> Option<(f64, f64)> {
    let mf = MeanField::new(inv.sigma_w2, b, c).ok()?;
    coexistence_closed_form(&mf)
        .filter(|&(_, rho)| rho > 0.0)
        .map(|(uc, rho)| (inv.u / uc, rho))
}

/// The mixed-phase equations on the ray c = r·b: (b, c, φ, ρ*, cross), with `cross` the
/// component of the left side perpendicular to c* (zero at a solution).
fn mixed_on_ray(inv: &Invariants, r: f64) -> Option<(f64, f64, f64, f64, f64)> {
    let (ratio, rho) = coexist(inv, 1.0, r)?;
    // u_coexist(b, rb) = u_coexist(1, r)/b², so u/u_coexist = 1 at b = 1/√ratio.
    let b = 1.0 / ratio.sqrt();
    let c = r * b;
    let x = inv.u * inv.g0() * b * b;
    if x >= 1.0 {
        return None;
    }
    let t = (b, 6f64.sqrt() * c);
    let w = (
        1.0 - t.0 - inv.kappa * inv.g0() * b / (1.0 - x),
        6f64.sqrt() * inv.eps - t.1,
    );
    let v = projections(rho, inv.sigma_w2);
    let (vv, vt) = (v.0 * v.0 + v.1 * v.1, v.0 * t.0 + v.1 * t.1);
    let phi = (w.0 * v.0 + w.1 * v.1) / (inv.kappa * vt * vv);
    let cross = (w.0 * v.1 - w.1 * v.0) / vv.sqrt();
    Some((b, c, phi, rho, cross))
}

/// Every D → ∞ mixed-phase solution (φ ≥ 0), by a scan of the ray ratio r over the range where
/// the coexistence is first order (r < −½ for ε < 0, r > 1 for ε > 0) and bisection.
pub fn mixed_limit(inv: &Invariants) -> Vec<ContinuumSolution> {
    let sign = inv.eps.signum();
    let base = if sign < 0.0 { 0.5 } else { 1.0 };
    // |r| − base log-spaced from 1e-6 to 200.
    let ray = |k: f64| sign * (base + 1e-6 * 2e8f64.powf(k));
    let at = |k: f64| mixed_on_ray(inv, ray(k));
    let steps = 2000;
    let mut out = Vec::new();
    let mut prev: Option<(f64, f64)> = None;
    for i in 0..=steps {
        let k = i as f64 / steps as f64;
        let Some(cur) = at(k).map(|s| s.4) else {
            prev = None;
            continue;
        };
        if let Some((kp, cp)) = prev {
            if cp.signum() != cur.signum() {
                let (mut lo, mut hi, mut flo) = (kp, k, cp);
                for _ in 0..100 {
                    let mid = 0.5 * (lo + hi);
                    let Some(fm) = at(mid).map(|s| s.4) else {
                        break;
                    };
                    if fm.signum() == flo.signum() {
                        lo = mid;
                        flo = fm;
                    } else {
                        hi = mid;
                    }
                }
                if let Some((b, c, phi, rho, cross)) = at(0.5 * (lo + hi)) {
                    if phi >= 0.0 && cross.abs() < 1e-8 {
                        out.push(limit_solution(inv, b, c, phi, Some(rho), cross.abs()));
                    }
                }
            }
        }
        prev = Some((k, cur));
    }
    out
}

fn limit_solution(
    inv: &Invariants,
    b: f64,
    c: f64,
    phi: f64,
    rho_star: Option<f64>,
    residual: f64,
) -> ContinuumSolution {
    ContinuumSolution {
        d: None,
        b,
        c,
        cubic_fraction: 1.0 - c / inv.eps,
        linear_fraction: 1.0 - b,
        side_mass_times_d: phi,
        rho_star,
        u_over_coexist: coexist(inv, b, c).map(|x| x.0),
        centre_drive: inv.u * inv.g0() * b * b,
        label: if phi > 0.0 {
            PhaseLabel::GmflI
        } else {
            PhaseLabel::Gfl
        },
        residual,
        iterations: 0,
    }
}

/// The D → ∞ solution: GFL where it is valid (u < u_coexist(b_GFL, ε)), else the mixed-phase
/// solution with the smallest φ (the one continuous with GFL at the onset); `None` when
/// neither exists.
pub fn solve_limit(inv: &Invariants) -> Option<ContinuumSolution> {
    let b = gfl_limit(inv);
    let valid = coexist(inv, b, inv.eps).is_none_or(|(ratio, _)| ratio < 1.0);
    if valid {
        let residual =
            (b + inv.kappa * inv.g0() * b / (1.0 - inv.u * inv.g0() * b * b) - 1.0).abs();
        return Some(limit_solution(inv, b, inv.eps, 0.0, None, residual));
    }
    mixed_limit(inv)
        .into_iter()
        .min_by(|a, b| a.side_mass_times_d.total_cmp(&b.side_mass_times_d))
}

/// g(ρ) ≤ (|b| + |c|)²/π (ρ²/(1+2q) < ½) and Ũ(0) = 0, so D·Ũ exceeds its minimum by more
/// than 60 beyond this ρ.
fn rho_max_of(inv: &Invariants, d: f64, (b, c): (f64, f64)) -> f64 {
    let reward = inv.u * (b.abs() + c.abs()).powi(2) / std::f64::consts::PI;
    (2.0 * inv.sigma_w2 * (reward + 60.0 / d)).sqrt()
}

/// M = κ·D·E_ρ[c cᵀ] under p(ρ) ∝ e^{−D·Ũ_u(ρ; b, c)} (Simpson on a grid of step
/// σ_w/(40√D), to where D·Ũ exceeds its minimum by more than 60).
fn finite_d_moments(inv: &Invariants, d: f64, (b, c): (f64, f64)) -> Result<[[f64; 2]; 2]> {
    let mf = MeanField::new(inv.sigma_w2, b, c)?;
    let scale = (inv.sigma_w2 / d).sqrt();
    let rho_max = rho_max_of(inv, d, (b, c));
    let n = 2 * ((rho_max / (scale / 40.0)) / 2.0).ceil().max(2.0) as usize;
    let h = rho_max / n as f64;
    let vals: Vec<f64> = (0..=n)
        .map(|i| d * mf.potential(inv.u, i as f64 * h))
        .collect();
    let vmin = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let (mut z, mut m11, mut m12, mut m22) = (0.0, 0.0, 0.0, 0.0);
    for (i, v) in vals.iter().enumerate() {
        let w = simpson_weight(i, n) * (-(v - vmin)).exp();
        let p = projections(i as f64 * h, inv.sigma_w2);
        z += w;
        m11 += w * p.0 * p.0;
        m12 += w * p.0 * p.1;
        m22 += w * p.1 * p.1;
    }
    let k = inv.kappa * d / z;
    Ok([[k * m11, k * m12], [k * m12, k * m22]])
}

/// Newton on the finite-D map from `start`; `None` when it does not converge.
fn newton_at(
    inv: &Invariants,
    d: f64,
    start: (f64, f64),
) -> Result<Option<super::solver::FixedPointRun>> {
    let g =
        |bc: (f64, f64)| -> Result<(f64, f64)> { Ok(gpr(finite_d_moments(inv, d, bc)?, inv.eps)) };
    let opts = NewtonOptions {
        tol: 1e-11,
        ..NewtonOptions::default()
    };
    let run = newton_fixed_point(&g, start, &opts)?;
    Ok(run.converged.then_some(run))
}

/// The finite-D EK solution by safeguarded Newton from the D → ∞ solution (or from (1, ε)).
/// At large D the map is stiff (the side mass changes like e^{−D·ΔŨ}); when Newton from that
/// start fails, the solution is continued in D from D = 150 upward by factors √10 ≤ 3.2.
pub fn solve_finite(inv: &Invariants, d: f64) -> Result<ContinuumSolution> {
    positive("D (input dimension)", d)?;
    let start = solve_limit(inv).map_or((1.0, inv.eps), |s| (s.b, s.c));
    let mut run = newton_at(inv, d, start)?;
    if run.is_none() && d > 150.0 {
        let mut at = start;
        let mut dk = 150.0f64;
        while let Some(r) = newton_at(inv, dk, at)? {
            at = r.x;
            if dk >= d {
                run = newton_at(inv, d, at)?;
                break;
            }
            dk = (dk * 10f64.sqrt()).min(d);
        }
    }
    let Some(run) = run else {
        return Err(Error::runtime(format!(
            "the EK fixed point at D = {d} did not converge (Newton from the D → ∞ solution and the continuation in D both failed)"
        )));
    };
    let (b, c) = run.x;
    let mf = MeanField::new(inv.sigma_w2, b, c)?;
    let scale = (inv.sigma_w2 / d).sqrt();
    let rho_max = rho_max_of(inv, d, (b, c));
    let wl = wells(|r| d * mf.potential(inv.u, r), scale, rho_max)?;
    let rho_star = wl.minima.iter().find(|m| m.rho > 0.0).map(|m| m.rho);
    Ok(ContinuumSolution {
        d: Some(d),
        b,
        c,
        cubic_fraction: 1.0 - c / inv.eps,
        linear_fraction: 1.0 - b,
        side_mass_times_d: d * wl.side_mass,
        rho_star,
        u_over_coexist: coexist(inv, b, c).map(|x| x.0),
        centre_drive: inv.u * inv.g0() * b * b,
        label: label(&wl, 0.01 / d),
        residual: run.residual,
        iterations: run.iterations,
    })
}

/// Which network parameter a path varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathVariable {
    /// The likelihood variance T (the paper's σ²).
    T,
    /// The width N.
    N,
    /// The number of samples P.
    P,
}

/// The network at path value `x`; along N the layer's readout variance σ_a² = N·s_a² is held
/// (the paper's convention: σ_a²/N per weight, App. D).
pub fn with(net: &Network, var: PathVariable, x: f64) -> Network {
    let mut out = *net;
    match var {
        PathVariable::T => out.t = x,
        PathVariable::N => {
            out.s_a2 = net.s_a2 * net.n / x;
            out.n = x;
        }
        PathVariable::P => out.p = x,
    }
    out
}

/// How far GFL is from its end at D → ∞: u/u_coexist(b_GFL, ε) − 1 (< 0 inside GFL; `None`
/// when the coexistence is not first order for this b).
fn gfl_margin(inv: &Invariants) -> Option<f64> {
    coexist(inv, gfl_limit(inv), inv.eps).map(|(ratio, _)| ratio - 1.0)
}

/// The onset of the mixed phase at D → ∞ along `var` between `lo` and `hi`: the value where
/// u = u_coexist(b_GFL, ε) (a scan of 400 log-spaced points and bisection to 1e-12 relative);
/// `None` when GFL holds over the whole range or nowhere.
pub fn onset(net: &Network, var: PathVariable, lo: f64, hi: f64) -> Result<Option<f64>> {
    positive("path start", lo)?;
    positive("path end", hi)?;
    let margin = |x: f64| -> Result<Option<f64>> {
        Ok(gfl_margin(&Invariants::of_network(&with(net, var, x))?))
    };
    let steps = 400;
    let xs: Vec<f64> = (0..=steps)
        .map(|i| lo * (hi / lo).powf(i as f64 / steps as f64))
        .collect();
    let mut prev: Option<(f64, f64)> = None;
    for &x in &xs {
        let m = margin(x)?;
        if let (Some((xp, mp)), Some(mc)) = (prev, m) {
            if mp.signum() != mc.signum() {
                let (mut a, mut b, mut fa) = (xp, x, mp);
                while (b - a).abs() > 1e-12 * b.abs() {
                    let mid = 0.5 * (a + b);
                    let Some(fm) = margin(mid)? else { break };
                    if fm.signum() == fa.signum() {
                        a = mid;
                        fa = fm;
                    } else {
                        b = mid;
                    }
                }
                return Ok(Some(0.5 * (a + b)));
            }
        }
        prev = m.map(|mc| (x, mc));
    }
    Ok(None)
}

/// One point of a path: the D → ∞ solution and the finite-D EK solution at the network's D.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathPoint {
    /// The path variable's value.
    pub x: f64,
    /// The invariants there.
    pub invariants: Invariants,
    /// D → ∞ (`None` when neither GFL nor a degenerate mixed solution exists).
    pub limit: Option<ContinuumSolution>,
    /// The EK solution at the network's own D.
    pub finite_d: Option<ContinuumSolution>,
}

/// The EK solutions along a path of network parameters.
pub fn path(net: &Network, var: PathVariable, values: &[f64]) -> Result<Vec<PathPoint>> {
    values
        .iter()
        .map(|&x| {
            let inv = Invariants::of_network(&with(net, var, x))?;
            Ok(PathPoint {
                x,
                invariants: inv,
                limit: solve_limit(&inv),
                finite_d: solve_finite(&inv, net.d).ok(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's main experiment (§3.1.1, App. C) at β = 1: d = 150, N = 700, n = 3000,
    /// σ_w² = 0.5, σ_a² = 8/N (per weight 8/N²), ε = −0.3.
    fn main_experiment(t: f64) -> Network {
        Network {
            d: 150.0,
            n: 700.0,
            p: 3000.0,
            t,
            s_a2: 8.0 / 700.0f64.powi(2),
            sigma_w2: 0.5,
            eps: -0.3,
        }
    }

    #[test]
    fn gfl_limit_solves_its_equation_and_matches_large_d() {
        let inv = Invariants::of_network(&main_experiment(0.25)).unwrap();
        let b = gfl_limit(&inv);
        let g0 = inv.g0();
        assert!((b * (1.0 + inv.kappa * g0 / (1.0 - inv.u * g0 * b * b)) - 1.0).abs() < 1e-13);
        let lim = solve_limit(&inv).unwrap();
        assert_eq!(lim.label, PhaseLabel::Gfl);
        // Finite D approaches the limit with an O(1/D) error.
        let mut errs = Vec::new();
        for d in [1e2, 1e3, 1e4] {
            let s = solve_finite(&inv, d).unwrap();
            errs.push((s.b - lim.b).abs().max((s.c - lim.c).abs()));
        }
        assert!(
            errs[1] < 0.3 * errs[0] && errs[2] < 0.3 * errs[1],
            "{errs:?}"
        );
        assert!(errs[2] < 1e-3, "{errs:?}");
    }

    #[test]
    fn mixed_limit_is_degenerate_and_finite_d_converges_to_it() {
        let net = main_experiment(0.25);
        let t_on = onset(&net, PathVariable::T, 0.1, 0.3).unwrap().unwrap();
        let inv = Invariants::of_network(&main_experiment(0.9 * t_on)).unwrap();
        let lim = solve_limit(&inv).unwrap();
        assert_eq!(lim.label, PhaseLabel::GmflI);
        assert!((lim.u_over_coexist.unwrap() - 1.0).abs() < 1e-9);
        assert!(lim.side_mass_times_d > 0.0);
        // The EK equations hold with M built from the centre and φ side neurons per D.
        let v = projections(lim.rho_star.unwrap(), inv.sigma_w2);
        let x = inv.u * inv.g0() * lim.b * lim.b;
        let k = inv.kappa;
        let m = [
            [
                k * inv.g0() / (1.0 - x) + k * lim.side_mass_times_d * v.0 * v.0,
                k * lim.side_mass_times_d * v.0 * v.1,
            ],
            [
                k * lim.side_mass_times_d * v.0 * v.1,
                k * lim.side_mass_times_d * v.1 * v.1,
            ],
        ];
        let (b, c) = gpr(m, inv.eps);
        assert!(
            (b - lim.b).abs() < 1e-9 && (c - lim.c).abs() < 1e-9,
            "{b} {c} {lim:?}"
        );
        let mut errs = Vec::new();
        for d in [150.0, 1500.0, 15000.0] {
            let s = solve_finite(&inv, d).unwrap();
            errs.push((s.b - lim.b).abs().max((s.c - lim.c).abs()));
        }
        assert!(errs[1] < errs[0] && errs[2] < errs[1], "{errs:?}");
        assert!(
            errs[2] < 0.1 * lim.cubic_fraction.abs().max(0.01),
            "{errs:?} {lim:?}"
        );
    }

    #[test]
    fn onset_of_main_experiment_is_where_gfl_ends() {
        let net = main_experiment(0.2);
        let t_on = onset(&net, PathVariable::T, 0.1, 0.3).unwrap().unwrap();
        let inv = Invariants::of_network(&main_experiment(t_on)).unwrap();
        assert!(gfl_margin(&inv).unwrap().abs() < 1e-8);
        let above = solve_limit(&Invariants::of_network(&main_experiment(1.05 * t_on)).unwrap());
        assert_eq!(above.unwrap().label, PhaseLabel::Gfl);
    }

    #[test]
    fn bad_invariants_are_refused() {
        assert!(Invariants::new(-1.0, 1.0, 0.5, -0.3).is_err());
        assert!(Invariants::new(1.0, f64::NAN, 0.5, -0.3).is_err());
        assert!(Invariants::new(1.0, 1.0, 0.5, 0.0).is_err());
    }
}
