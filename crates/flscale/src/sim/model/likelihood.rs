//! The data term of the energy U(θ) = L(f(X), y) + prior (spec 02; paper App. A.1, A.2, E.2).
//!
//! * Gaussian (App. A.1): L = Σ_μ (f_μ − y_μ)²/(2κ), ∂L/∂f_μ = (f_μ − y_μ)/κ.
//! * Cross-entropy (App. A.2 with d_o = 2 classes, labels y = ±1 of the parity target of
//!   App. E.2): the two-class softmax of A.2 over the logits (f/2, −f/2) gives
//!   p(y | f) = 1/(1 + e^{−y f}), so L = Σ_μ log(1 + e^{−y_μ f_μ})/κ and
//!   ∂L/∂f_μ = −y_μ/(1 + e^{y_μ f_μ})/κ. κ = 1 is the Bayesian posterior of that likelihood;
//!   κ ≠ 1 rescales the data term only (a temperature of the likelihood), while
//!   `sampler.temperature` T rescales the whole energy, π ∝ e^{−U/T}.

use crate::sim::config::Likelihood;
use crate::sim::model::interface::DataTerm;
use crate::sim::num::real::Real;

/// log(1 + e^{−m}) without overflow: max(−m, 0) + log1p(e^{−|m|}).
#[inline]
pub fn softplus_neg(margin: f64) -> f64 {
    (-margin).max(0.0) + (-margin.abs()).exp().ln_1p()
}

/// Cross-entropy term of one sample: (∂L/∂f·κ, L·κ) for output f and label y = ±1.
/// Written with a single exponential of −|y f| so that neither branch overflows.
#[inline]
pub fn cross_entropy<T: Real>(f: T, y: T) -> (T, f64) {
    let margin = (y * f).f64();
    let e = (-margin.abs()).exp();
    // 1/(1 + e^{m}): e/(1 + e) for m > 0, 1/(1 + e) for m ≤ 0 (e = e^{−|m|}).
    let sigmoid_neg = if margin > 0.0 {
        e / (1.0 + e)
    } else {
        1.0 / (1.0 + e)
    };
    let loss = (-margin).max(0.0) + e.ln_1p();
    (T::of(-sigmoid_neg) * y, loss)
}

/// Fills `residual` (rows × B, row-major) with ∂L/∂f of the outputs `f` (rows × B) against
/// the targets of `data`, and returns per chain Σ_μ(f − y)² (the training squared error,
/// reported as the train MSE) in `sq_error` and the data term L in `loss`.
#[inline(always)]
pub fn residuals<T: Real>(
    data: &DataTerm<'_, T>,
    f: &[T],
    block: usize,
    residual: &mut [T],
    sq_error: &mut [f64],
    loss: &mut [f64],
) {
    let (likelihood, y, kappa) = (data.likelihood, data.y, data.kappa);
    let inv_kappa = T::of(1.0 / kappa);
    sq_error[..block].fill(0.0);
    match likelihood {
        Likelihood::Gaussian => {
            for (mu, &yv) in y.iter().enumerate() {
                for c in 0..block {
                    let r = f[mu * block + c] - yv;
                    residual[mu * block + c] = r * inv_kappa;
                    sq_error[c] += (r * r).f64();
                }
            }
            for c in 0..block {
                loss[c] = sq_error[c] / (2.0 * kappa);
            }
        }
        Likelihood::CrossEntropy => {
            loss[..block].fill(0.0);
            for (mu, &yv) in y.iter().enumerate() {
                for c in 0..block {
                    let fv = f[mu * block + c];
                    let (g, l) = cross_entropy(fv, yv);
                    residual[mu * block + c] = g * inv_kappa;
                    let r = fv - yv;
                    sq_error[c] += (r * r).f64();
                    loss[c] += l;
                }
            }
            for l in &mut loss[..block] {
                *l /= kappa;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_entropy_matches_its_definition_and_derivative() {
        for &y in &[1.0f64, -1.0] {
            for &f in &[-40.0f64, -3.0, -0.2, 0.0, 0.7, 5.0, 40.0] {
                let (g, l) = cross_entropy(f, y);
                // Definition −log p(y|f), p = 1/(1 + e^{−yf}), evaluated where it is safe.
                if (y * f).abs() < 30.0 {
                    let direct = (1.0 + (-y * f).exp()).ln();
                    assert!((l - direct).abs() < 1e-12, "{y} {f}: {l} vs {direct}");
                }
                assert!((l - softplus_neg(y * f)).abs() < 1e-12);
                let eps = 1e-6;
                let fd = (cross_entropy(f + eps, y).1 - cross_entropy(f - eps, y).1) / (2.0 * eps);
                assert!((g - fd).abs() < 1e-7, "{y} {f}: {g} vs {fd}");
                assert!(l.is_finite() && g.is_finite());
            }
        }
    }

    /// The whole data-term gradient of a two-layer ReLU classifier (App. E.2) with the
    /// cross-entropy likelihood, through [`residuals`] and the model's back-propagation,
    /// against central finite differences of L computed from the forward pass.
    #[test]
    fn cross_entropy_network_gradient_matches_finite_differences() {
        use crate::activation::Activation;
        use crate::sim::model::fcn::{backward, forward, FcnModel, Scratch};
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let (d, rows, block, kappa) = (4, 9, 2, 0.6);
        let model = FcnModel {
            d,
            widths: vec![5],
            activation: Activation::Relu,
            prior_var: vec![1.0; 2],
            frozen: vec![false; 2],
            layernorm: false,
        };
        let x: Vec<f64> = (0..rows * d).map(|_| rng.random_range(-1.5..1.5)).collect();
        let y: Vec<f64> = (0..rows)
            .map(|mu| (x[mu * d] * x[mu * d + 1]).signum())
            .collect();
        let mut params: Vec<Vec<f64>> = (0..2)
            .map(|g| {
                (0..block * model.group_len(g))
                    .map(|_| rng.random_range(-1.2..1.2))
                    .collect()
            })
            .collect();
        let data = DataTerm {
            x: &x,
            y: &y,
            p: rows,
            kappa,
            likelihood: Likelihood::CrossEntropy,
        };
        let mut scratch = Scratch::default();
        let loss_of = |params: &[Vec<f64>], scratch: &mut Scratch<f64>| -> Vec<f64> {
            forward(&model, params, block, &x, rows, scratch);
            let (mut r, mut sq, mut l) =
                (vec![0.0; rows * block], vec![0.0; block], vec![0.0; block]);
            residuals(&data, &scratch.f, block, &mut r, &mut sq, &mut l);
            l
        };
        forward(&model, &params, block, &x, rows, &mut scratch);
        let (mut r, mut sq, mut l) = (vec![0.0; rows * block], vec![0.0; block], vec![0.0; block]);
        residuals(&data, &scratch.f, block, &mut r, &mut sq, &mut l);
        // L by its definition, per chain.
        for c in 0..block {
            let direct: f64 = (0..rows)
                .map(|mu| (1.0 + (-y[mu] * scratch.f[mu * block + c]).exp()).ln() / kappa)
                .sum();
            assert!((l[c] - direct).abs() < 1e-12);
        }
        let mut grads: Vec<Vec<f64>> = params.iter().map(|p| vec![0.0; p.len()]).collect();
        backward(&model, &params, block, &data, &r, &mut scratch, &mut grads);
        for g in 0..2 {
            for idx in 0..params[g].len() {
                let c = idx / model.group_len(g);
                let old = params[g][idx];
                let eps = 1e-6;
                params[g][idx] = old + eps;
                let up = loss_of(&params, &mut scratch)[c];
                params[g][idx] = old - eps;
                let down = loss_of(&params, &mut scratch)[c];
                params[g][idx] = old;
                let fd = (up - down) / (2.0 * eps);
                assert!(
                    (fd - grads[g][idx]).abs() <= 1e-6 * (1.0 + fd.abs()),
                    "group {g} index {idx}: fd {fd} analytic {}",
                    grads[g][idx]
                );
            }
        }
    }
}
