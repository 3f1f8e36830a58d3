//! f32 elementary functions of the hot loops: erf with its derivative and the row softmax,
//! whose exponentials share [`exp_neg_f32`]. Each is one loop compiled twice through the one
//! run-time dispatch ([`super::simd::vectorized_fma`]): with fused multiply–adds in the
//! AVX-512 / AVX2 + FMA build, without in the baseline build (where `mul_add` would be a
//! library call). The reference benchmark README (`shared/bench/README.md`) measured a scalar
//! libm erf as 6× slower overall.

use super::simd::vectorized_fma;

/// erf and (2/√π)e^{−x²} in f32, dispatched at run time to an AVX2+FMA build of the same
/// loop when the CPU has it.
pub fn erf_with_derivative_f32(x: &[f32], value: &mut [f32], derivative: &mut [f32]) {
    vectorized_fma(
        (value, derivative),
        #[inline(always)]
        |(value, derivative)| erf_f32_loop::<true>(x, value, derivative),
        |(value, derivative)| erf_f32_loop::<false>(x, value, derivative),
    )
}

/// The softmax of every row of length `l` of `scores`, in place, in f32: p_b = e^{s_b − m}/Σ_c
/// e^{s_c − m} with m the row maximum (so every exponent is ≤ 0 and none overflows), the
/// exponentials by [`exp_neg_f32`] (relative error < 2·10⁻⁷) so that the loops vectorise, in
/// the CPU's AVX-512 or AVX2 + FMA build when it has one (as [`erf_with_derivative_f32`]). A
/// non-finite score makes its whole row NaN, as the library exponential would, so that the
/// samplers' divergence checks see it.
pub fn softmax_rows_f32(scores: &mut [f32], l: usize) {
    vectorized_fma(
        scores,
        #[inline(always)]
        |scores| softmax_rows_f32_loop::<true>(scores, l),
        |scores| softmax_rows_f32_loop::<false>(scores, l),
    )
}

/// Lanes of the row maximum and sum: 16 independent accumulators (one AVX-512 register), so
/// the reductions vectorise without reassociating anything the compiler would have to prove.
const SOFTMAX_LANES: usize = 16;

/// Folds the lanes pairwise (8 + 8, 4 + 4, …): vector shuffles instead of 15 dependent scalar
/// operations per row, which matter at the short rows (L ≈ 16) of small contexts.
#[inline(always)]
fn lane_tree(mut lanes: [f32; SOFTMAX_LANES], op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut width = SOFTMAX_LANES / 2;
    while width > 0 {
        for j in 0..width {
            lanes[j] = op(lanes[j], lanes[j + width]);
        }
        width /= 2;
    }
    lanes[0]
}

#[inline(always)]
fn softmax_rows_f32_loop<const FMA: bool>(scores: &mut [f32], l: usize) {
    if l == 0 {
        return;
    }
    for row in scores.chunks_exact_mut(l) {
        let mut lanes = [f32::NEG_INFINITY; SOFTMAX_LANES];
        let mut chunks = row.chunks_exact(SOFTMAX_LANES);
        for chunk in &mut chunks {
            for (m, &s) in lanes.iter_mut().zip(chunk) {
                *m = m.max(s);
            }
        }
        let max = chunks
            .remainder()
            .iter()
            .fold(lane_tree(lanes, f32::max), |m, &s| m.max(s));
        // (d − d) is 0 for a finite d and NaN otherwise: it carries a non-finite score (or
        // maximum) into the row.
        for s in row.iter_mut() {
            let d = max - *s;
            #[allow(clippy::eq_op)] // deliberate: 0 for finite d, NaN otherwise (above)
            let carry = d - d;
            *s = exp_neg_f32::<FMA>(d) + carry;
        }
        let mut sums = [0.0f32; SOFTMAX_LANES];
        let mut chunks = row.chunks_exact(SOFTMAX_LANES);
        for chunk in &mut chunks {
            for (z, &s) in sums.iter_mut().zip(chunk) {
                *z += s;
            }
        }
        let total = chunks.remainder().iter().sum::<f32>() + lane_tree(sums, |a, b| a + b);
        let inv = 1.0 / total;
        for s in row.iter_mut() {
            *s *= inv;
        }
    }
}

/// Abramowitz & Stegun 7.1.26: for a ≥ 0, erf(a) = 1 − t(a₁ + t(a₂ + t(a₃ + t(a₄ + t a₅))))·e^{−a²}
/// with t = 1/(1 + p a); absolute error ≤ 1.5·10⁻⁷, i.e. at f32 resolution. erf is odd, so
/// the sign of x is copied onto the result. The e^{−a²} factor is exactly what σ′ needs.
/// `FMA`: use fused multiply–adds (only in the build compiled with the `fma` feature, where
/// `mul_add` is one instruction; elsewhere it would be a library call).
#[inline(always)]
fn erf_f32_loop<const FMA: bool>(x: &[f32], value: &mut [f32], derivative: &mut [f32]) {
    const P: f32 = 0.327_591_1;
    const A1: f32 = 0.254_829_6;
    const A2: f32 = -0.284_496_74;
    const A3: f32 = 1.421_413_7;
    const A4: f32 = -1.453_152;
    const A5: f32 = 1.061_405_4;
    const TWO_OVER_SQRT_PI: f32 = std::f32::consts::FRAC_2_SQRT_PI;
    let n = x.len().min(value.len()).min(derivative.len());
    let (x, value, derivative) = (&x[..n], &mut value[..n], &mut derivative[..n]);
    for i in 0..n {
        let xi = x[i];
        let a = xi.abs();
        let t = 1.0 / (1.0 + P * a);
        let e = exp_neg_f32::<FMA>(a * a);
        let poly = t * fma::<FMA>(
            t,
            fma::<FMA>(t, fma::<FMA>(t, fma::<FMA>(t, A5, A4), A3), A2),
            A1,
        );
        value[i] = fma::<FMA>(-poly, e, 1.0).copysign(xi);
        derivative[i] = TWO_OVER_SQRT_PI * e;
    }
}

/// e^{−s} for s ≥ 0 in f32 without branches or library calls, so that the loop above
/// vectorises: Cody–Waite reduction s·log₂e = n + r/ln2 with n rounded by the 1.5·2²³ trick,
/// a degree-6 Taylor polynomial for e^{r} (|r| ≤ ln2/2, relative error < 2·10⁻⁷), and 2ⁿ
/// assembled in the exponent bits. Arguments beyond 87 are clamped (e^{−87} ≈ 1.6·10⁻³⁸).
#[inline(always)]
fn exp_neg_f32<const FMA: bool>(s: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5·2²³: adding it rounds to an integer
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let x = -(s.min(87.0));
    let shifted = fma::<FMA>(x, std::f32::consts::LOG2_E, MAGIC);
    let n = shifted - MAGIC;
    let r = fma::<FMA>(-n, LN2_LO, fma::<FMA>(-n, LN2_HI, x));
    let mut p = fma::<FMA>(r, 1.0 / 720.0, 1.0 / 120.0);
    for c in [1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = fma::<FMA>(r, p, c);
    }
    let n_int = (shifted.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let scale = f32::from_bits((n_int.wrapping_add(127) << 23) as u32);
    p * scale
}

/// a·b + c, fused when `FMA`.
#[inline(always)]
fn fma<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_erf_matches_libm_to_f32_resolution() {
        let xs: Vec<f32> = (-4000..=4000).map(|i| i as f32 * 1.7e-3).collect();
        let mut v = vec![0.0; xs.len()];
        let mut g = vec![0.0; xs.len()];
        erf_with_derivative_f32(&xs, &mut v, &mut g);
        for ((&x, &v), &g) in xs.iter().zip(&v).zip(&g) {
            let x64 = x as f64;
            // A&S 7.1.26 (1.5e-7) plus f32 rounding of 1 − poly·e.
            assert!((v as f64 - libm::erf(x64)).abs() < 5e-7, "erf({x})");
            let exact_g = std::f64::consts::FRAC_2_SQRT_PI * (-x64 * x64).exp();
            // e^{−x²} of an f32 x: rounding x² costs a relative 6e-8·x² in the result.
            let tol = 2e-7 * (1.0 + x64 * x64) * exact_g + 1e-37;
            assert!((g as f64 - exact_g).abs() < tol, "erf'({x})");
        }
        // Far tails: saturates to ±1 with a vanishing derivative, never NaN.
        let tails = [-1e30f32, -50.0, 50.0, 1e30, 0.0];
        let mut v = [0.0; 5];
        let mut g = [0.0; 5];
        erf_with_derivative_f32(&tails, &mut v, &mut g);
        assert_eq!(v[..4], [-1.0, -1.0, 1.0, 1.0]);
        assert!(g.iter().all(|g| g.is_finite() && *g >= 0.0));
        assert!(v[4].abs() < 1e-7);
    }

    /// The f32 softmax against the f64 one: every entry to a relative 10⁻⁶ (plus the rounding
    /// of its exponent), rows summing to
    /// one; scores far below the maximum give 0 (never NaN); a NaN or infinite score makes its
    /// row NaN (what the divergence checks look for).
    #[test]
    fn fast_softmax_matches_the_f64_softmax() {
        for l in [1usize, 3, 16, 17, 45, 180] {
            let scores: Vec<f32> = (0..3 * l)
                .map(|i| ((i * 37 % 101) as f32 * 0.37).sin() * 30.0 - (i % 7) as f32 * 10.0)
                .collect();
            let mut p = scores.clone();
            softmax_rows_f32(&mut p, l);
            for (row, out) in scores.chunks(l).zip(p.chunks(l)) {
                let m = row.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s as f64));
                let z: f64 = row.iter().map(|&s| (s as f64 - m).exp()).sum();
                for (&s, &q) in row.iter().zip(out) {
                    let exact = (s as f64 - m).exp() / z;
                    // Plus the f32 rounding of the exponent m − s itself (6·10⁻⁸ relative).
                    let tol = (1e-6 + 1.2e-7 * (m - s as f64)) * exact + 1e-37;
                    assert!(
                        (q as f64 - exact).abs() <= tol,
                        "l = {l}: {q} against {exact}"
                    );
                }
                let total: f64 = out.iter().map(|&q| q as f64).sum();
                assert!((total - 1.0).abs() < 1e-6, "l = {l}: sum {total}");
            }
        }
        let mut far = vec![0.0f32, -1e4, -1e30, 5.0];
        softmax_rows_f32(&mut far, 4);
        assert!(far.iter().all(|q| q.is_finite()), "{far:?}");
        assert!(far[1] < 1e-30 && far[2] < 1e-30 && (far[3] - 0.993_307_2).abs() < 1e-6);
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut row = vec![
                0.0f32, 1.0, bad, 2.0, 0.5, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1,
                1.2,
            ];
            softmax_rows_f32(&mut row, 17);
            assert!(row.iter().all(|q| q.is_nan()), "{bad}: {row:?}");
        }
    }
}
