//! NNGP variances of the deeper-layer overlaps of [`crate::sim::observe::overlaps`].
//!
//! **NNGP standard deviation** (App. F.1 "3 times the NNGP standard deviation"). Under the
//! NNGP prior h^l is a Gaussian process with covariance K_l (paper Sec. 5.1, the GP pattern
//! h^l_i ~ 𝒩(0, K_{l−1}) in the paper's indexing), so o = gᵀh/n is Gaussian with variance
//! s_l² = gᵀK_l g/n² on the very test set used — exact for the measured quantity, including
//! its finite-n terms. The covariance follows the layer recursion element-wise:
//! K_1(x, x′) = σ1² x·x′/d and, for l ≥ 2, K_l = σ_l² E[σ(u)σ(v)] with (u, v) Gaussian of
//! covariance K_{l−1} on (x, x′) — the arcsine kernel for erf, the arc-cosine kernel for ReLU,
//! Wick's theorem for poly ([`crate::activation`]), K_{l−1} itself for linear. With layer
//! normalisation the infinite-width LN subtracts the mean m(x) = E[σ(u)] and divides by the
//! standard deviation, K_l = σ_l² (E[σ(u)σ(v)] − m(x)m(x′))/√(v(x)v(x′)), v = E[σ²] − m²,
//! with m = 0 (erf, linear), √(K/(2π)) (ReLU), 1 + K (poly). tanh has no closed form: its
//! deeper overlaps are reported without outliers. For l = 2 without layer normalisation the
//! variance is exact at any width N_1 (h^1 is exactly Gaussian, so the empirical kernel's mean
//! is K_2); the overlap's law is then a Gaussian scale mixture that tends to the Gaussian as
//! N_1 grows.
//!
//! **Layer 2 under the Gaussian data measure** (paper Sec. 5.2: "a data measure that is i.i.d.
//! Gaussian with zero mean and variance 1 … for measuring function overlaps"). The test-set
//! variance above carries a diagonal term (1/n)·E[g² K_2(x, x)] that, for g = Ĥe3(Φ\*), is
//! larger than the population term E[g(x) K_2(x, x′) g(x′)] = O(d^{−3}) at the test sizes used,
//! so a threshold from it follows n_test (0.0041–0.0088 over the test sizes used). For isotropic Gaussian inputs
//! and no layer normalisation the overlap of h²_i = Σ_j W²_ij σ(w_j·x) with g = Ĥe_k(Φ\*) has a
//! closed form per neuron (Mehler's formula: E[He_m(y) He_k(z)] = δ_mk k! a^k for standard
//! Gaussians of correlation a):
//!
//!   ⟨h²_i, Ĥe_k(Φ\*)⟩ = Σ_j W²_ij c_k(|w_j|) a_j^k,  a_j = ŵ_j·w\*,  c_k(s) = E_z[σ(s z) Ĥe_k(z)],
//!
//! with c_1(s) = (2/√π) s/√(1 + 2s²) and c_3(s) = −(4/√π) s³/((1 + 2s²)^{3/2} √6) for erf (the
//! derivatives of erf under the Gaussian, the same integrals as Williams' 1997 arcsine kernel
//! (2/π) arcsin(2Σ_xy/√((1 + 2Σ_xx)(1 + 2Σ_yy)))), c_1 = s/2 and c_k = s φ(0) He_{k−2}(0)/√k!
//! (k ≥ 2, Stein's lemma twice) for ReLU, and 120-point Gauss–Hermite otherwise. Under the prior
//! W²_ij ~ 𝒩(0, σ2²/N_1) independently of W¹, so the overlap's NNGP variance is exact at any N_1:
//!
//!   s_2² = σ2² · E_r[c_k(√(σ1²/d)·r)²] · E[a^{2k}],  r ~ χ_d,  E[a^{2k}] = Π_{j<k} (2j + 1)/(d + 2j),
//!
//! (|w| and ŵ of an isotropic Gaussian w are independent; a² ~ Beta(½, (d − 1)/2)); the χ_d
//! average by Simpson's rule. It does not depend on the test set at all. Deeper layers, layer
//! normalisation and power-law inputs keep the test-set overlap and its variance above.

use rayon::prelude::*;

use crate::activation::Activation;
use crate::hermite::GaussHermite;
use crate::sim::model::fcn::FcnModel;

/// E[σ(u)σ(v)] for (u, v) Gaussian with variances s11, s22 and covariance s12 (None: no
/// closed form).
fn pair_moment(act: Activation, s11: f64, s22: f64, s12: f64) -> Option<f64> {
    match (act, act.nngp()) {
        (_, Some(closed)) => Some(closed.kernel_from_cov(s11, s22, s12)),
        (Activation::Linear, None) => Some(s12),
        (_, None) => None,
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

/// Orders k of the features Ĥe_k(Φ\*) of [`crate::sim::observe::overlaps::FEATURES`]: Φ\* = Ĥe_1.
pub const FEATURE_ORDERS: [usize; 2] = [1, 3];

const FRAC_2_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// The normalised Hermite coefficient c_k(s) = E_{z~𝒩(0,1)}[σ(s z) Ĥe_k(z)] (module docs).
pub fn hermite_coefficient(act: Activation, s: f64, k: usize, gh: &GaussHermite) -> f64 {
    let norm = crate::hermite::factorial(k).sqrt();
    match (act, k) {
        (Activation::Erf, 1) => FRAC_2_SQRT_PI * s / (1.0 + 2.0 * s * s).sqrt(),
        (Activation::Erf, 3) => {
            -2.0 * FRAC_2_SQRT_PI * s.powi(3) / ((1.0 + 2.0 * s * s).powf(1.5) * norm)
        }
        (Activation::Relu, 0) => s / (2.0 * std::f64::consts::PI).sqrt(),
        (Activation::Relu, 1) => s / 2.0,
        (Activation::Relu, _) => {
            s * crate::hermite::he(k - 2, 0.0) / ((2.0 * std::f64::consts::PI).sqrt() * norm)
        }
        _ => gh.expect(|z| act.value_f64(s * z) * crate::hermite::he(k, z)) / norm,
    }
}

/// The NNGP standard deviation of the population layer-2 overlap with Ĥe_k(Φ\*) for every order
/// in `orders` (module docs): isotropic Gaussian inputs, no layer normalisation, ≥ 2 hidden
/// layers; None otherwise.
pub fn population_layer2_std(
    model: &FcnModel,
    orders: &[usize],
    gh: &GaussHermite,
) -> Option<Vec<f64>> {
    if model.widths.len() < 2 || model.layernorm || model.d == 0 {
        return None;
    }
    let d = model.d as f64;
    let v1 = model.prior_var[0];
    let sigma2_sq = model.prior_var[1] * model.widths[0] as f64;
    // χ_d density of r = |w|/√v1, by Simpson's rule on [0, √d + 12] (the tail beyond is
    // below e^{−72}).
    let ln_norm = (d / 2.0 - 1.0) * std::f64::consts::LN_2 + libm::lgamma(d / 2.0);
    let chi = |r: f64| {
        if r <= 0.0 {
            return if model.d == 1 { (-ln_norm).exp() } else { 0.0 };
        }
        ((d - 1.0) * r.ln() - 0.5 * r * r - ln_norm).exp()
    };
    let intervals = 4000;
    let hi = d.sqrt() + 12.0;
    let h = hi / intervals as f64;
    Some(
        orders
            .iter()
            .map(|&k| {
                let mut acc = 0.0;
                for i in 0..=intervals {
                    let r = i as f64 * h;
                    let w = if i == 0 || i == intervals {
                        1.0
                    } else if i % 2 == 1 {
                        4.0
                    } else {
                        2.0
                    };
                    let c = hermite_coefficient(model.activation, v1.sqrt() * r, k, gh);
                    acc += w * chi(r) * c * c;
                }
                let moment: f64 = (0..k)
                    .map(|j| (2 * j + 1) as f64 / (d + 2.0 * j as f64))
                    .product();
                (sigma2_sq * acc * h / 3.0 * moment).sqrt()
            })
            .collect(),
    )
}

/// The population overlaps ⟨h²_i, Ĥe_k(Φ\*)⟩ of one network's layer-2 neurons for every order
/// in `orders` (module docs): `w1` is N_1 × d, `w2` N_2 × N_1 (row-major), `teacher` the unit
/// w\*. Result [order][neuron].
pub fn population_layer2_overlaps<T: crate::sim::num::real::Real>(
    act: Activation,
    w1: &[T],
    w2: &[T],
    d: usize,
    teacher: &[f64],
    orders: &[usize],
    gh: &GaussHermite,
) -> Vec<Vec<f64>> {
    let n1 = w1.len() / d.max(1);
    let n2 = w2.len() / n1.max(1);
    // Per first-layer neuron j and order: c_k(|w_j|) a_j^k.
    let coef: Vec<Vec<f64>> = w1
        .chunks_exact(d.max(1))
        .map(|row| {
            let s = row.iter().map(|w| w.f64() * w.f64()).sum::<f64>().sqrt();
            let a = if s > 0.0 {
                row.iter()
                    .zip(teacher)
                    .map(|(w, t)| w.f64() * t)
                    .sum::<f64>()
                    / s
            } else {
                0.0
            };
            orders
                .iter()
                .map(|&k| hermite_coefficient(act, s, k, gh) * a.powi(k as i32))
                .collect()
        })
        .collect();
    (0..orders.len())
        .map(|o| {
            (0..n2)
                .map(|i| {
                    w2[i * n1..(i + 1) * n1]
                        .iter()
                        .zip(&coef)
                        .map(|(w, c)| w.f64() * c[o])
                        .sum()
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::sim::{ExperimentConfig, Run};

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
        Run::new(&cfg).run().unwrap()
    }

    /// At P = 0 the chains are prior draws (the start is exact and 20 steps of 10⁻⁵ barely
    /// move it), so the measured second moment of the layer-2 overlaps must equal the NNGP
    /// variance (the population one without layer normalisation, exact at any N₁; gᵀK₂g/n² on
    /// the test set with it) within Monte Carlo error,
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
            let mut judged = 0.0;
            for f in &layer.features {
                // Layer 2 without LN is taken under the Gaussian measure; with LN on the test
                // set. ReLU's c_3 = 0: its Ĥe3 overlap vanishes identically, with no threshold.
                let want = if ln { "test_set" } else { "gaussian" };
                assert_eq!(f.measure, want, "{act} LN {ln}");
                if act == "relu" && !ln && f.feature == "he3" {
                    assert_eq!(f.overlap2, Some(0.0));
                    assert_eq!((f.nngp_std, f.outliers), (None, None));
                    continue;
                }
                judged += 1.0;
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
            let fraction = outliers / judged;
            assert!(
                (0.0014..0.006).contains(&fraction),
                "{act} LN {ln}: outlier fraction {fraction}"
            );
            let h = r
                .probe_histograms
                .iter()
                .find(|h| h.name == "h2_phi")
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

    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    fn gh() -> GaussHermite {
        GaussHermite::new(120).unwrap()
    }

    /// The closed forms of c_k against independent integrals: Gauss–Hermite for erf (smooth),
    /// Simpson on (0, 12] for ReLU (the kink defeats Gauss–Hermite).
    #[test]
    fn hermite_coefficients_match_quadrature() {
        let g = gh();
        for s in [0.2, 0.5, 1.0, 2.5] {
            for k in [1usize, 3] {
                let norm = crate::hermite::factorial(k).sqrt();
                let erf_q = g.expect(|z| libm::erf(s * z) * crate::hermite::he(k, z)) / norm;
                let erf_c = hermite_coefficient(Activation::Erf, s, k, &g);
                assert!(
                    (erf_c - erf_q).abs() < 1e-8,
                    "erf s {s} k {k}: {erf_c} vs {erf_q}"
                );
                let n = 20000;
                let h = 12.0 / n as f64;
                let relu_q: f64 = (0..=n)
                    .map(|i| {
                        let z = i as f64 * h;
                        let w = if i == 0 || i == n {
                            1.0
                        } else if i % 2 == 1 {
                            4.0
                        } else {
                            2.0
                        };
                        w * s * z * crate::hermite::he(k, z) * (-0.5 * z * z).exp()
                    })
                    .sum::<f64>()
                    * h
                    / 3.0
                    / (2.0 * std::f64::consts::PI).sqrt()
                    / norm;
                let relu_c = hermite_coefficient(Activation::Relu, s, k, &g);
                assert!(
                    (relu_c - relu_q).abs() < 1e-9,
                    "relu s {s} k {k}: {relu_c} vs {relu_q}"
                );
            }
        }
    }

    fn fig3c_model(act: Activation, d: usize, n1: usize, n2: usize) -> FcnModel {
        FcnModel {
            d,
            widths: vec![n1, n2],
            activation: act,
            prior_var: vec![0.25 / d as f64, 0.25 / n1 as f64, 0.25 / n2 as f64],
            frozen: vec![false; 3],
            layernorm: false,
        }
    }

    fn prior_network(m: &FcnModel, rng: &mut rand_chacha::ChaCha8Rng) -> (Vec<f64>, Vec<f64>) {
        let (d, n1, n2) = (m.d, m.widths[0], m.widths[1]);
        let n_w1 = Normal::new(0.0, m.prior_var[0].sqrt()).unwrap();
        let n_w2 = Normal::new(0.0, m.prior_var[1].sqrt()).unwrap();
        let w1 = (0..n1 * d).map(|_| n_w1.sample(rng)).collect();
        let w2 = (0..n2 * n1).map(|_| n_w2.sample(rng)).collect();
        (w1, w2)
    }

    /// The analytic NNGP variance of the population layer-2 overlaps against a Monte Carlo
    /// over prior draws (W¹, W²) of fig3c's network (d = 10, σ² = 0.25): 4000 networks × 10
    /// neurons, ⟨o²⟩ within 5 % (its Monte Carlo error is ≈ 1.5–3 %: o is a Gaussian scale
    /// mixture, heavier for Ĥe3, whose overlap is carried by the few neurons with large a_j).
    #[test]
    fn the_population_nngp_variance_matches_prior_draws() {
        let g = gh();
        let mut teacher = vec![0.0; 10];
        teacher[0] = 0.6;
        teacher[1] = 0.8;
        for act in [Activation::Erf, Activation::Relu, Activation::Tanh] {
            let m = fig3c_model(act, 10, 40, 10);
            let sd = population_layer2_std(&m, &FEATURE_ORDERS, &g).unwrap();
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
            let mut m2 = [0.0; 2];
            let draws = 4000;
            for _ in 0..draws {
                let (w1, w2) = prior_network(&m, &mut rng);
                let o =
                    population_layer2_overlaps(act, &w1, &w2, 10, &teacher, &FEATURE_ORDERS, &g);
                for (k, ok) in o.iter().enumerate() {
                    m2[k] += ok.iter().map(|v| v * v).sum::<f64>() / (10 * draws) as f64;
                }
            }
            for k in 0..2 {
                let want = sd[k] * sd[k];
                if want < 1e-14 {
                    // ReLU: c_3 = 0, the Ĥe3 overlap vanishes identically.
                    assert!(m2[k] < 1e-20, "{act:?}: {m2:?}");
                    continue;
                }
                assert!(
                    (m2[k] / want - 1.0).abs() < 0.05,
                    "{act:?} order {}: MC {} vs {want}",
                    FEATURE_ORDERS[k],
                    m2[k]
                );
            }
        }
        // Layer normalisation and two-layer networks have no closed form here.
        let mut ln = fig3c_model(Activation::Erf, 10, 40, 10);
        ln.layernorm = true;
        assert!(population_layer2_std(&ln, &FEATURE_ORDERS, &g).is_none());
    }

    /// The closed-form overlap of one network against the average over 2·10⁵ Gaussian inputs
    /// (first-layer weights partly along w\*, so the Ĥe3 overlap is O(0.1)); the sample mean's
    /// standard error is ≈ 10⁻³.
    #[test]
    fn the_population_overlap_is_the_gaussian_average() {
        let g = gh();
        let (d, n1, n2) = (6, 8, 3);
        let m = fig3c_model(Activation::Erf, d, n1, n2);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let (mut w1, w2) = prior_network(&m, &mut rng);
        let teacher: Vec<f64> = (0..d)
            .map(|i| if i < 2 { 0.5f64.sqrt() } else { 0.0 })
            .collect();
        for j in 0..n1 {
            for i in 0..d {
                w1[j * d + i] += 1.2 * teacher[i];
            }
        }
        let o =
            population_layer2_overlaps(Activation::Erf, &w1, &w2, d, &teacher, &FEATURE_ORDERS, &g);
        let n = 200_000;
        let mut sums = vec![vec![0.0; n2]; 2];
        let mut sq = vec![vec![0.0; n2]; 2];
        let std = Normal::new(0.0, 1.0).unwrap();
        let mut x = vec![0.0; d];
        for _ in 0..n {
            for v in x.iter_mut() {
                *v = std.sample(&mut rng);
            }
            let phi: f64 = x.iter().zip(&teacher).map(|(a, b)| a * b).sum();
            let feats = [phi, crate::hermite::he(3, phi) / 6f64.sqrt()];
            let act: Vec<f64> = w1
                .chunks_exact(d)
                .map(|w| libm::erf(w.iter().zip(&x).map(|(a, b)| a * b).sum()))
                .collect();
            for i in 0..n2 {
                let h: f64 = w2[i * n1..(i + 1) * n1]
                    .iter()
                    .zip(&act)
                    .map(|(a, b)| a * b)
                    .sum();
                for k in 0..2 {
                    sums[k][i] += h * feats[k];
                    sq[k][i] += (h * feats[k]).powi(2);
                }
            }
        }
        for k in 0..2 {
            for i in 0..n2 {
                let mean = sums[k][i] / n as f64;
                let se = ((sq[k][i] / n as f64 - mean * mean) / n as f64).sqrt();
                assert!(
                    (o[k][i] - mean).abs() < 5.0 * se,
                    "order {} neuron {i}: {} vs {mean} ± {se}",
                    FEATURE_ORDERS[k],
                    o[k][i]
                );
            }
        }
        assert!(o[1].iter().any(|v| v.abs() > 0.02), "{o:?}");
    }

    /// fig3c's layer-2 thresholds no longer follow n_test: the probe of the same run at
    /// n_test = 200 and 2000 has the same NNGP deviations, while the test-set variance of the
    /// Ĥe3 overlap (its 1/n diagonal term) changes by far more than 1 %.
    #[test]
    fn layer2_thresholds_do_not_depend_on_n_test() {
        let probe_at = |n_test: usize| {
            let text = format!(
                "[model]\nkind = \"fcn\"\nactivation = \"erf\"\nwidths = [40, 10]\n[data]\nd = 10\np = 40\nn_test = {n_test}\n[target]\nhermite = 3\n[sampler]\nkappa = 0.125\nstep = 1e-5\nsteps = 2\nburn_in = 1\nthin = 1\nchains = 1\nseed = 1\n[priors]\nsigma2 = [0.25, 0.25, 0.25]\n"
            );
            let cfg = crate::sim::ExperimentConfig::from_toml(&text, "fig3c.toml").unwrap();
            let model = FcnModel::from_config(&cfg);
            let data = crate::sim::data::Dataset::generate(&cfg.data, &cfg.target, 1);
            let probe = crate::sim::observe::overlaps::Probe::new(&model, &data, None, true);
            let test_set = nngp_overlap_variances(&model, &data.x_test, n_test, &probe.features);
            (probe, test_set[0].clone().unwrap().0)
        };
        let (small, ts_small) = probe_at(200);
        let (large, ts_large) = probe_at(2000);
        assert!(small.layer2_population.is_some());
        for k in 0..2 {
            let (a, b) = (small.nngp_std[0][k].unwrap(), large.nngp_std[0][k].unwrap());
            assert!((a / b - 1.0).abs() < 0.01, "feature {k}: {a} vs {b}");
        }
        let ratio = ts_small[1] / ts_large[1];
        assert!(ratio > 1.5, "test-set Ĥe3 variance ratio {ratio}");
        let he3 = small.nngp_std[0][1].unwrap();
        assert!(he3 * he3 < ts_large[1], "{he3} vs {ts_large:?}");
    }
}
