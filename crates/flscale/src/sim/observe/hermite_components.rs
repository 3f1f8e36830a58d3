//! The mean predictor's components along He_k(Φ*) (the H1/H3 content of the
//! learned function, compared with the solvable model's 1 − b and ε − c; blog §"Match the
//! residual to the network's prediction", which projects onto the sampled H1, H3 the same way).
//!
//! The coefficients are the least-squares fit of f̄(x_μ) on He_0 … He_K(Φ*_μ) over the test
//! set, in the probabilists' basis the targets are written in (`target.terms`,
//! y = Σ c_k He_k(Φ*)), so a target in that span is recovered exactly and the
//! test-set sample's non-orthogonality of the He_k does not leak between components.

/// Coefficients c_0 … c_K of the least-squares fit f ≈ Σ c_k He_k(φ) (module doc); None when
/// the normal equations are singular (fewer distinct points than K + 1) or a value is not
/// finite.
pub fn hermite_components(f: &[f64], phi: &[f64], max_k: usize) -> Option<Vec<f64>> {
    let n = max_k + 1;
    let (mut gram, mut rhs) = (vec![0.0; n * n], vec![0.0; n]);
    for (&fv, &x) in f.iter().zip(phi) {
        let h = crate::hermite::he_all(max_k, x);
        for i in 0..n {
            rhs[i] += h[i] * fv;
            for j in 0..n {
                gram[i * n + j] += h[i] * h[j];
            }
        }
    }
    let mut l = vec![0.0; n * n];
    if !crate::sim::num::linalg::cholesky(&gram, &mut l, n) {
        return None;
    }
    crate::sim::num::linalg::cholesky_solve(&l, &mut rhs, n);
    rhs.iter().all(|c| c.is_finite()).then_some(rhs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    #[test]
    fn a_target_in_the_span_is_recovered_exactly_and_noise_projects_to_its_mean() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let phi: Vec<f64> = (0..500).map(|_| StandardNormal.sample(&mut rng)).collect();
        // The blog's target He1 + 0.3 He3 (He3 = x³ − 3x), plus 0.2.
        let f: Vec<f64> = phi
            .iter()
            .map(|&x| 0.2 + x + 0.3 * (x * x * x - 3.0 * x))
            .collect();
        let c = hermite_components(&f, &phi, 3).unwrap();
        let want = [0.2, 1.0, 0.0, 0.3];
        for (a, b) in c.iter().zip(want) {
            assert!((a - b).abs() < 1e-10, "{c:?}");
        }
        // |x| has no odd components; its He_0 and He_2 coefficients are E|x| − E|x|He₂/2 and
        // E[|x|He₂]/2 = (E|x|³ − E|x|)/2 = (2√(2/π) − √(2/π))/2 for the population; the
        // 500-point fit is within a few standard errors of it.
        let g: Vec<f64> = phi.iter().map(|x| x.abs()).collect();
        let c = hermite_components(&g, &phi, 3).unwrap();
        let s = (2.0 / std::f64::consts::PI).sqrt();
        assert!(c[1].abs() < 0.1 && c[3].abs() < 0.05, "{c:?}");
        assert!((c[2] - s / 2.0).abs() < 0.1, "{c:?}");
        assert_eq!(hermite_components(&[1.0, 2.0], &[0.5, 0.5], 3), None);
    }
}
