//! Adaptive Gauss–Kronrod quadrature, the numerical kernel of the large-deviation
//! computation (its root finder is [`crate::scalar::brent_root`]).
//!
//! **Quadrature.** Globally adaptive 7-point Gauss / 15-point Kronrod rule (QUADPACK `qag`
//! with `key = 1`; Piessens et al., *QUADPACK*, 1983, §2.2). Each interval carries the
//! Kronrod estimate K₁₅ and the error estimate |K₁₅ − G₇|; the interval with the largest
//! error is bisected until the summed error is below the requested tolerance. |K₁₅ − G₇| is
//! the error of the *Gauss* rule, so it over-estimates the error of K₁₅ (degree 23 vs 13) on
//! smooth integrands: the stated tolerance is a conservative bound, not an optimistic one.
//! The integrand may return several components at once (Z and its t-derivative share the
//! same nodes); an interval's error is the largest relative error over the components.
//!

use crate::error::{Error, Result};

/// Kronrod abscissae on [−1, 1] (non-negative half, descending; QUADPACK `qk15`).
const XGK: [f64; 8] = [
    0.991_455_371_120_812_6,
    0.949_107_912_342_758_5,
    0.864_864_423_359_769_1,
    0.741_531_185_599_394_4,
    0.586_087_235_467_691_1,
    0.405_845_151_377_397_2,
    0.207_784_955_007_898_5,
    0.0,
];
/// Kronrod weights matching [`XGK`].
const WGK: [f64; 8] = [
    0.022_935_322_010_529_22,
    0.063_092_092_629_978_55,
    0.104_790_010_322_250_2,
    0.140_653_259_715_525_9,
    0.169_004_726_639_267_9,
    0.190_350_578_064_785_4,
    0.204_432_940_075_298_9,
    0.209_482_141_084_727_8,
];
/// Weights of the embedded 7-point Gauss rule at XGK[1], XGK[3], XGK[5], XGK[7].
const WG: [f64; 4] = [
    0.129_484_966_168_869_7,
    0.279_705_391_489_276_7,
    0.381_830_050_505_118_9,
    0.417_959_183_673_469_4,
];

/// Result of an adaptive integration of `M` components.
#[derive(Debug, Clone, Copy)]
pub struct Quadrature<const M: usize> {
    /// Integral of each component.
    pub value: [f64; M],
    /// Summed error estimate of each component.
    pub abs_err: [f64; M],
    /// Number of integrand evaluations.
    pub evals: usize,
}

struct Panel<const M: usize> {
    a: f64,
    b: f64,
    value: [f64; M],
    err: [f64; M],
}

fn gk15<const M: usize>(f: &mut impl FnMut(f64) -> [f64; M], a: f64, b: f64) -> Panel<M> {
    let c = 0.5 * (a + b);
    let h = 0.5 * (b - a);
    let fc = f(c);
    let mut k = [0.0; M];
    let mut g = [0.0; M];
    for m in 0..M {
        k[m] = WGK[7] * fc[m];
        g[m] = WG[3] * fc[m];
    }
    for j in 0..7 {
        let dx = h * XGK[j];
        let f1 = f(c - dx);
        let f2 = f(c + dx);
        for m in 0..M {
            let s = f1[m] + f2[m];
            k[m] += WGK[j] * s;
            if j % 2 == 1 {
                g[m] += WG[j / 2] * s;
            }
        }
    }
    let mut value = [0.0; M];
    let mut err = [0.0; M];
    for m in 0..M {
        value[m] = k[m] * h;
        err[m] = ((k[m] - g[m]) * h).abs();
    }
    Panel { a, b, value, err }
}

/// Integrates the `M`-component function `f` over the consecutive intervals defined by the
/// sorted `breakpoints` (at least two), until every component's summed error estimate is at
/// most `rel_tol`·|integral| (or `abs_floor`). Breakpoints should sit at the integrand's
/// peaks so that narrow peaks are never straddled by a coarse first panel.
pub fn integrate<const M: usize>(
    mut f: impl FnMut(f64) -> [f64; M],
    breakpoints: &[f64],
    rel_tol: f64,
    abs_floor: f64,
    max_panels: usize,
) -> Result<Quadrature<M>> {
    if breakpoints.len() < 2
        || breakpoints
            .windows(2)
            .any(|w| w[0].partial_cmp(&w[1]) != Some(std::cmp::Ordering::Less))
    {
        return Err(Error::runtime(format!(
            "quadrature breakpoints {breakpoints:?} are not strictly increasing"
        )));
    }
    let mut panels: Vec<Panel<M>> = breakpoints
        .windows(2)
        .map(|w| gk15(&mut f, w[0], w[1]))
        .collect();
    let mut evals = 15 * panels.len();
    loop {
        let mut value = [0.0; M];
        let mut err = [0.0; M];
        for p in &panels {
            for m in 0..M {
                value[m] += p.value[m];
                err[m] += p.err[m];
            }
        }
        if value.iter().chain(err.iter()).any(|v| !v.is_finite()) {
            return Err(Error::runtime(
                "quadrature produced a non-finite value (the integrand overflowed)",
            ));
        }
        let converged = (0..M).all(|m| err[m] <= (rel_tol * value[m].abs()).max(abs_floor));
        if converged {
            return Ok(Quadrature {
                value,
                abs_err: err,
                evals,
            });
        }
        if panels.len() >= max_panels {
            return Err(Error::runtime(format!(
                "adaptive quadrature did not reach relative accuracy {rel_tol:e} within \
                 {max_panels} panels (estimated errors {err:?} for integrals {value:?})"
            )));
        }
        // Bisect the panel with the largest error relative to its component's total.
        let worst = (0..panels.len())
            .max_by(|&i, &j| {
                let score = |p: &Panel<M>| {
                    (0..M)
                        .map(|m| p.err[m] / value[m].abs().max(abs_floor))
                        .fold(0.0, f64::max)
                };
                score(&panels[i]).total_cmp(&score(&panels[j]))
            })
            .expect("at least one panel");
        let p = panels.swap_remove(worst);
        let mid = 0.5 * (p.a + p.b);
        if !(p.a < mid && mid < p.b) {
            return Err(Error::runtime(
                "adaptive quadrature cannot subdivide further (panel at machine precision)",
            ));
        }
        panels.push(gk15(&mut f, p.a, mid));
        panels.push(gk15(&mut f, mid, p.b));
        evals += 30;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauss_kronrod_integrates_known_functions() {
        // ∫_0^π sin = 2; ∫_{-5}^{5} e^{-x²/2} dx/√(2π) = erf(5/√2).
        let q = integrate(|x| [x.sin()], &[0.0, std::f64::consts::PI], 1e-13, 0.0, 200).unwrap();
        assert!((q.value[0] - 2.0).abs() < 1e-13);
        let g = integrate(
            |x| [(-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()],
            &[-5.0, 0.0, 5.0],
            1e-13,
            0.0,
            200,
        )
        .unwrap();
        let want = libm::erf(5.0 / std::f64::consts::SQRT_2);
        assert!((g.value[0] - want).abs() < 1e-14, "{} {}", g.value[0], want);
        // A narrow peak far from the breakpoints still converges (adaptivity) and the error
        // estimate is honest: ∫ over [0, 1] of a Gaussian of width 1e-3 centred at 0.3.
        let s = 1e-3;
        let n = integrate(
            |x| [(-0.5 * ((x - 0.3) / s).powi(2)).exp()],
            &[0.0, 1.0],
            1e-12,
            0.0,
            2000,
        )
        .unwrap();
        let want = s * (2.0 * std::f64::consts::PI).sqrt();
        assert!(
            (n.value[0] / want - 1.0).abs() < 1e-11,
            "{}",
            n.value[0] / want
        );
    }

    #[test]
    fn integrate_rejects_bad_breakpoints() {
        assert!(integrate(|x| [x], &[1.0], 1e-10, 0.0, 10).is_err());
        assert!(integrate(|x| [x], &[1.0, 0.0], 1e-10, 0.0, 10).is_err());
    }
}
