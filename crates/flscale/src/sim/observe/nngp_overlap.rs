//! NNGP variances of the deeper-layer overlaps of [`crate::sim::observe::overlaps`].
//!
//! **NNGP standard deviation** (App. F.1 "3 times the NNGP standard deviation"). Under the
//! NNGP prior h^l is a Gaussian process with covariance K_l (paper Sec. 5.1, the GP pattern
//! h^l_i ~ 𝒩(0, K_{l−1}) in the paper's indexing), so o = gᵀh/n is Gaussian with variance
//! s_l² = gᵀK_l g/n² on the very test set used — exact for the measured quantity, including
//! its finite-n terms. The covariance follows the layer recursion element-wise:
//! K_1(x, x′) = σ1² x·x′/d and, for l ≥ 2, K_l = σ_l² E[σ(u)σ(v)] with (u, v) Gaussian of
//! covariance K_{l−1} on (x, x′) — the arcsine kernel for erf, the arc-cosine kernel for ReLU,
//! Wick's theorem for poly ([`crate::kernels::nngp`]), K_{l−1} itself for linear. With layer
//! normalisation the infinite-width LN subtracts the mean m(x) = E[σ(u)] and divides by the
//! standard deviation, K_l = σ_l² (E[σ(u)σ(v)] − m(x)m(x′))/√(v(x)v(x′)), v = E[σ²] − m²,
//! with m = 0 (erf, linear), √(K/(2π)) (ReLU), 1 + K (poly). tanh has no closed form: its
//! deeper overlaps are reported without outliers. For l = 2 without layer normalisation the
//! variance is exact at any width N_1 (h^1 is exactly Gaussian, so the empirical kernel's mean
//! is K_2); the overlap's law is then a Gaussian scale mixture that tends to the Gaussian as
//! N_1 grows.

use rayon::prelude::*;

use crate::kernels::nngp::Activation as KernelActivation;
use crate::sim::model::activation::Activation;
use crate::sim::model::fcn::FcnModel;

/// E[σ(u)σ(v)] for (u, v) Gaussian with variances s11, s22 and covariance s12 (None: no
/// closed form).
fn pair_moment(act: Activation, s11: f64, s22: f64, s12: f64) -> Option<f64> {
    match act {
        Activation::Erf => Some(KernelActivation::Erf.kernel_from_cov(s11, s22, s12)),
        Activation::Relu => Some(KernelActivation::Relu.kernel_from_cov(s11, s22, s12)),
        Activation::Poly => Some(KernelActivation::Poly.kernel_from_cov(s11, s22, s12)),
        Activation::Linear => Some(s12),
        Activation::Tanh => None,
    }
}

/// E[σ(u)] for u ~ 𝒩(0, s).
fn mean_moment(act: Activation, s: f64) -> Option<f64> {
    match act {
        Activation::Erf | Activation::Linear => Some(0.0),
        Activation::Relu => Some((s / (2.0 * std::f64::consts::PI)).sqrt()),
        Activation::Poly => Some(1.0 + s),
        Activation::Tanh => None,
    }
}

/// NNGP covariance of layer g + 1 (0-based group g ≥ 1) from that of layer g on one pair of
/// inputs (module docs).
fn next_kernel(model: &FcnModel, g: usize, s11: f64, s22: f64, s12: f64) -> Option<f64> {
    let sigma2 = model.prior_var[g] * model.fan_in(g) as f64;
    let e = pair_moment(model.activation, s11, s22, s12)?;
    if !model.layernorm {
        return Some(sigma2 * e);
    }
    let (m1, m2) = (
        mean_moment(model.activation, s11)?,
        mean_moment(model.activation, s22)?,
    );
    let v1 = pair_moment(model.activation, s11, s11, s11)? - m1 * m1;
    let v2 = pair_moment(model.activation, s22, s22, s22)? - m2 * m2;
    if v1 <= 0.0 || v2 <= 0.0 {
        return None;
    }
    Some(sigma2 * (e - m1 * m2) / (v1 * v2).sqrt())
}

/// NNGP variances of the overlaps o = gᵀh^l/n of every hidden layer l ≥ 2 with each feature
/// in `features` (module docs), and the mean NNGP variance of h^l itself (for histogram
/// ranges): result[l − 2] = (per-feature variances, mean K_l(x, x)). None where the activation
/// has no closed form. `x` is n × d row-major.
pub fn nngp_overlap_variances(
    model: &FcnModel,
    x: &[f64],
    n: usize,
    features: &[Vec<f64>],
) -> Vec<Option<(Vec<f64>, f64)>> {
    let hidden = model.widths.len();
    if hidden < 2 || n == 0 {
        return vec![None; hidden.saturating_sub(1)];
    }
    let d = model.d;
    let v1 = model.prior_var[0];
    let dot = |i: usize, j: usize| -> f64 {
        x[i * d..(i + 1) * d]
            .iter()
            .zip(&x[j * d..(j + 1) * d])
            .map(|(a, b)| a * b)
            .sum::<f64>()
            * v1
    };
    // Diagonals K_l(x, x) of every layer.
    let mut diag: Vec<Vec<f64>> = vec![(0..n).map(|i| dot(i, i)).collect()];
    for g in 1..hidden {
        let prev = &diag[g - 1];
        let next: Option<Vec<f64>> = prev
            .iter()
            .map(|&s| next_kernel(model, g, s, s, s))
            .collect();
        match next {
            Some(v) => diag.push(v),
            None => return vec![None; hidden - 1],
        }
    }
    // Σ_ij g_i g_j K_l(i, j) per layer and feature, one row i per task, summed in row order.
    let nf = features.len();
    let rows: Vec<Vec<f64>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut acc = vec![0.0; (hidden - 1) * nf];
            for j in 0..n {
                let mut k = dot(i, j);
                for g in 1..hidden {
                    k = next_kernel(model, g, diag[g - 1][i], diag[g - 1][j], k).unwrap_or(0.0);
                    for (f, feat) in features.iter().enumerate() {
                        acc[(g - 1) * nf + f] += feat[i] * feat[j] * k;
                    }
                }
            }
            acc
        })
        .collect();
    let n2 = (n * n) as f64;
    (1..hidden)
        .map(|g| {
            let vars = (0..nf)
                .map(|f| rows.iter().map(|r| r[(g - 1) * nf + f]).sum::<f64>() / n2)
                .collect();
            let mean_diag = diag[g].iter().sum::<f64>() / n as f64;
            Some((vars, mean_diag))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::sim::{run_experiment, ExperimentConfig};

    fn prior_run(activation: &str, layernorm: bool, widths: &str) -> crate::sim::RunResult {
        let text = format!(
            r#"
[model]
kind = "fcn"
activation = "{activation}"
widths = {widths}
layernorm = {layernorm}
[data]
d = 8
p = 0
n_test = 300
[target]
hermite = 3
[sampler]
kappa = 1.0
step = 1e-5
steps = 20
burn_in = 10
thin = 10
chains = 240
seed = 3
precision = "f64"
"#
        );
        let cfg = ExperimentConfig::from_toml(&text, "prior.toml").unwrap();
        run_experiment(&cfg, &mut |_, _| {}).unwrap()
    }

    /// At P = 0 the chains are prior draws (the start is exact and 20 steps of 10⁻⁵ barely
    /// move it), so the measured second moment of the layer-2 overlaps must equal the NNGP
    /// variance gᵀK₂g/n² (exact at any N₁ without layer normalisation) within Monte Carlo error,
    /// and the outlier fraction must be close to the Gaussian 3σ tail 0.0027.
    #[test]
    fn prior_deeper_overlaps_match_the_nngp_prediction() {
        for (act, ln, tol) in [
            ("erf", false, 0.06),
            ("relu", false, 0.06),
            ("relu", true, 0.1),
        ] {
            let r = prior_run(act, ln, "[64, 48]");
            let layer = &r.summary.probe.deeper_layers[0];
            assert_eq!((layer.layer, layer.width), (2, 48));
            let mut outliers = 0.0;
            for f in &layer.features {
                let sd = f.nngp_std.unwrap();
                let m2 = f.overlap2.unwrap();
                // 240 chains × 48 neurons, correlated within a chain through W¹: a few %.
                assert!(
                    (m2 / (sd * sd) - 1.0).abs() < tol,
                    "{act} LN {ln} {}: measured ⟨o²⟩ {m2} vs NNGP {}",
                    f.feature,
                    sd * sd
                );
                eprintln!(
                    "{act} LN {ln} {}: ⟨o²⟩ {m2:.5e}, NNGP {:.5e}, outlier fraction {:.4}",
                    f.feature,
                    sd * sd,
                    f.outlier_fraction.unwrap()
                );
                outliers += f.outlier_fraction.unwrap();
            }
            // 2 × 11520 overlaps: 62 ± 8 expected beyond 3σ for a Gaussian. At N₁ = 64 the
            // overlaps are a sum of 64 non-Gaussian terms (heavier tails), and the 48 neurons of
            // one chain share W¹, so the count scatters more than Poisson: the upper end allows
            // 2.2× the Gaussian tail. A wrong NNGP scale fails it by far (σ 10 % too small puts
            // the cut at 2.7σ: fraction 0.007).
            let fraction = outliers / 2.0;
            assert!(
                (0.0014..0.006).contains(&fraction),
                "{act} LN {ln}: outlier fraction {fraction}"
            );
            let h = r
                .probe_histograms
                .iter()
                .find(|h| h.name == "h2_he3")
                .unwrap();
            let total: u64 = h.counts.iter().sum::<u64>() + h.outside;
            assert_eq!(total, 240 * 48);
            assert!(r.summary.probe.parity_directions.is_empty());
            assert_eq!(r.summary.probe.test_accuracy, None);
        }
        // A two-layer network has no deeper layers.
        let r = prior_run("erf", false, "[16]");
        assert!(r.summary.probe.deeper_layers.is_empty());
        assert_eq!(r.summary.probe.outliers_layer2_phi, None);
    }
}
