//! Synthetic data and targets (spec 02, "Data and targets"; paper §2, App. E.2, F.0.1).
//!
//! Inputs x ~ 𝒩(0, Σ) with Σ = I_d or Σ = diag(k^{−a}); a teacher direction w* (unit
//! vector); the teacher feature Φ*(x) = w*·x/√(w*ᵀΣw*), normalised so that Φ* ~ 𝒩(0, 1)
//! for either covariance; targets that are functions of Φ* (Hermite polynomials and sums of
//! them) or sign-parity labels of the raw coordinates. The training set (size P) and the test
//! set (size n_test) are independent draws.
//!
//! Reproducibility: the teacher, the training inputs and the test inputs come from three
//! separate ChaCha8 streams of a key derived from the seed, so the test set and the teacher do
//! not change when P changes (useful in sweeps over P).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::hermite;
use crate::sim::config::{Covariance, DataConfig, TargetConfig, Teacher};

/// Distinguishes the data streams' key from the chains' key (same user seed).
const DATA_KEY_TAG: u64 = 0x6461_7461_5eed_0001;

/// A train/test data set with its teacher.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Input dimension d.
    pub d: usize,
    /// Training inputs, P × d row-major.
    pub x_train: Vec<f64>,
    /// Training targets (length P).
    pub y_train: Vec<f64>,
    /// Test inputs, n_test × d row-major.
    pub x_test: Vec<f64>,
    /// Test targets (length n_test).
    pub y_test: Vec<f64>,
    /// Teacher direction w* (unit vector).
    pub teacher: Vec<f64>,
    /// √(w*ᵀΣw*): Φ* = w*·x / this.
    pub teacher_scale: f64,
}

impl Dataset {
    /// Number of training samples P.
    pub fn p(&self) -> usize {
        self.y_train.len()
    }

    /// Number of test samples.
    pub fn n_test(&self) -> usize {
        self.y_test.len()
    }

    /// Draws the data set of an experiment. The configuration must already be validated.
    pub fn generate(data: &DataConfig, target: &TargetConfig, seed: u64) -> Dataset {
        let d = data.d;
        let std_devs = input_std_devs(data, d);
        let teacher = match target.parity {
            // A parity/sign label sign(x_1⋯x_k) has no teacher vector: its relevant subspace is
            // span(e_1, …, e_k), and the specialised neurons align with the signed diagonals
            // w_{*,1±2…} = (e_1 ± e_2 …)/√k (paper App. E.2, Fig. 7). The first of them,
            // (e_1 + … + e_k)/√k, is the direction along which ρ, the first-layer outliers, R,
            // the overlap histogram and the hot start are taken; every diagonal is also probed
            // separately (`observe::overlaps::parity_directions`).
            Some(k) if k >= 1 && k <= d => {
                let mut u = vec![0.0; d];
                u[..k].fill(1.0 / (k as f64).sqrt());
                u
            }
            _ => teacher_direction(data.teacher, d, seed),
        };
        let teacher_scale = teacher_scale(&teacher, &std_devs);
        let draw = |n: usize, s: u64| draw_inputs(n, &std_devs, &mut data_stream(seed, s));
        let x_train = draw(data.p, 1);
        let x_test = draw(data.n_test, 2);
        let target_fn = TargetFn::new(target);
        let labels = |x: &[f64]| -> Vec<f64> {
            x.chunks_exact(d)
                .map(|row| {
                    let phi =
                        row.iter().zip(&teacher).map(|(a, b)| a * b).sum::<f64>() / teacher_scale;
                    target_fn.eval(phi, row)
                })
                .collect()
        };
        let y_train = if d == 0 {
            vec![0.0; data.p]
        } else {
            labels(&x_train)
        };
        let y_test = labels(&x_test);
        Dataset {
            d,
            x_train,
            y_train,
            x_test,
            y_test,
            teacher,
            teacher_scale,
        }
    }
}

/// Stream `k` of the data key of `seed`: 0 the teacher, 1 the training inputs, 2 the test
/// inputs (separate streams, so that the test set and the teacher do not change with P).
pub(crate) fn data_stream(seed: u64, k: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ DATA_KEY_TAG);
    rng.set_stream(k);
    rng
}

/// Standard deviations of input coordinates k = 1 … `len`: 1 (isotropic) or √(k^{−a}),
/// Σ_kk = k^{−a} with a = `power_law_exponent` (paper App. F, power-law data, a = 1.1).
pub(crate) fn input_std_devs(data: &DataConfig, len: usize) -> Vec<f64> {
    (1..=len)
        .map(|k| match data.covariance {
            Covariance::Isotropic => 1.0,
            Covariance::PowerLaw => (k as f64).powf(-data.power_law_exponent).sqrt(),
        })
        .collect()
}

/// The teacher w* ∈ R^len: e_1, or a uniformly random unit vector from data stream 0.
pub(crate) fn teacher_direction(teacher: Teacher, len: usize, seed: u64) -> Vec<f64> {
    match teacher {
        Teacher::E1 => {
            let mut w = vec![0.0; len];
            w[0] = 1.0;
            w
        }
        Teacher::Random => {
            let mut rng = data_stream(seed, 0);
            loop {
                let w: Vec<f64> = (0..len).map(|_| StandardNormal.sample(&mut rng)).collect();
                let norm = w.iter().map(|v| v * v).sum::<f64>().sqrt();
                if norm > 1e-12 {
                    break w.iter().map(|v| v / norm).collect();
                }
            }
        }
    }
}

/// √(w*ᵀΣw*) for diagonal Σ with standard deviations `std_devs`: Φ* = w*·x/√(w*ᵀΣw*) is then
/// 𝒩(0, 1) (module doc).
pub(crate) fn teacher_scale(teacher: &[f64], std_devs: &[f64]) -> f64 {
    teacher
        .iter()
        .zip(std_devs)
        .map(|(w, s)| (w * s).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// `n` independent inputs, row-major, coordinate i of each drawn as `std_devs[i]`·z, z ~
/// 𝒩(0, 1), in row order from `rng` (a row is `std_devs.len()` long).
pub(crate) fn draw_inputs(n: usize, std_devs: &[f64], rng: &mut ChaCha8Rng) -> Vec<f64> {
    let mut x = Vec::with_capacity(n * std_devs.len());
    for _ in 0..n {
        for sd in std_devs {
            let z: f64 = StandardNormal.sample(rng);
            x.push(sd * z);
        }
    }
    x
}

/// The target as a function of Φ* (and of the raw input, for parity labels).
#[derive(Debug, Clone)]
pub struct TargetFn {
    /// Coefficients c_m of y = s·Σ c_m He_m(Φ*), or empty for parity labels.
    coefficients: Vec<f64>,
    /// k of y = sign Π_{j≤k} x_j.
    parity: Option<usize>,
    /// Overall factor s (unit variance when normalising).
    scale: f64,
}

impl TargetFn {
    /// Builds the target of a validated `[target]` table.
    pub fn new(t: &TargetConfig) -> TargetFn {
        if let Some(k) = t.parity {
            // sign labels already have unit variance.
            return TargetFn {
                coefficients: Vec::new(),
                parity: Some(k),
                scale: 1.0,
            };
        }
        let pairs: Vec<(usize, f64)> = match (t.hermite, &t.terms) {
            // Ĥe_m = He_m/√(m!): unit variance (spec 00).
            (Some(m), _) => vec![(m, 1.0 / hermite::factorial(m).sqrt())],
            (None, Some(terms)) => terms.clone(),
            (None, None) => vec![],
        };
        let max_degree = pairs.iter().map(|p| p.0).max().unwrap_or(0);
        let mut coefficients = vec![0.0; max_degree + 1];
        for (m, c) in pairs {
            coefficients[m] += c;
        }
        // Var[Σ c_m He_m] = Σ_{m≥1} c_m² m! (orthogonality E[He_m He_n] = n! δ_mn), and the
        // mean is c_0; "unit variance" normalises the second moment about the mean.
        let variance: f64 = coefficients
            .iter()
            .enumerate()
            .skip(1)
            .map(|(m, c)| c * c * hermite::factorial(m))
            .sum();
        let scale = if t.normalize && variance > 0.0 {
            1.0 / variance.sqrt()
        } else {
            1.0
        };
        TargetFn {
            coefficients,
            parity: None,
            scale,
        }
    }

    /// y for teacher feature `phi` and raw input `x`.
    pub fn eval(&self, phi: f64, x: &[f64]) -> f64 {
        if let Some(k) = self.parity {
            let product: f64 = x.iter().take(k).product();
            return if product >= 0.0 { 1.0 } else { -1.0 };
        }
        let he = hermite::he_all(self.coefficients.len().saturating_sub(1), phi);
        self.scale
            * self
                .coefficients
                .iter()
                .zip(he)
                .map(|(c, h)| c * h)
                .sum::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(d: usize, p: usize) -> DataConfig {
        DataConfig {
            d,
            p,
            n_test: 20000,
            covariance: Covariance::Isotropic,
            power_law_exponent: 1.1,
            teacher: Teacher::Random,
            tokens: None,
        }
    }

    fn target_h(m: usize) -> TargetConfig {
        TargetConfig {
            hermite: Some(m),
            terms: None,
            parity: None,
            normalize: false,
            cubic_tokens: false,
        }
    }

    fn moments(y: &[f64]) -> (f64, f64) {
        let n = y.len() as f64;
        let mean = y.iter().sum::<f64>() / n;
        let var = y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        (mean, var)
    }

    #[test]
    fn hermite_targets_have_unit_variance_and_teacher_is_unit() {
        let data = Dataset::generate(&cfg(10, 5), &target_h(3), 7);
        let norm: f64 = data.teacher.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-12);
        let (mean, var) = moments(&data.y_test);
        // Var of the sample variance of Ĥe3 is (E[Ĥe3⁴] − 1)/n ≈ 14/n: 5σ ≈ 0.13.
        assert!(
            mean.abs() < 0.05 && (var - 1.0).abs() < 0.13,
            "{mean} {var}"
        );
    }

    #[test]
    fn power_law_teacher_feature_is_standard_normal_and_sums_normalise() {
        let mut c = cfg(12, 5);
        c.covariance = Covariance::PowerLaw;
        let t = TargetConfig {
            hermite: None,
            terms: Some(vec![(1, 1.0)]),
            parity: None,
            normalize: false,
            cubic_tokens: false,
        };
        let data = Dataset::generate(&c, &t, 3);
        let (mean, var) = moments(&data.y_test);
        assert!(
            mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
        // Coordinate k has variance k^{−1.1}.
        let n = data.n_test() as f64;
        let v12: f64 = data.x_test.chunks(12).map(|r| r[11] * r[11]).sum::<f64>() / n;
        assert!((v12 / 12f64.powf(-1.1) - 1.0).abs() < 0.06, "{v12}");
        let t = TargetConfig {
            hermite: None,
            terms: Some(vec![(1, 1.0), (3, 0.3)]),
            parity: None,
            normalize: true,
            cubic_tokens: false,
        };
        let data = Dataset::generate(&cfg(8, 5), &t, 3);
        let (_, var) = moments(&data.y_test);
        assert!((var - 1.0).abs() < 0.08, "{var}");
    }

    #[test]
    fn parity_labels_and_independent_streams() {
        let t = TargetConfig {
            hermite: None,
            terms: None,
            parity: Some(2),
            normalize: false,
            cubic_tokens: false,
        };
        let data = Dataset::generate(&cfg(4, 50), &t, 1);
        for (row, y) in data.x_train.chunks(4).zip(&data.y_train) {
            assert_eq!(*y, (row[0] * row[1]).signum());
        }
        // Overlaps of a parity target are taken along its first parity direction, not along
        // the data set's random teacher vector.
        let s = 1.0 / 2f64.sqrt();
        assert_eq!(data.teacher, vec![s, s, 0.0, 0.0]);
        let first = &crate::sim::observe::overlaps::parity_directions(2, 4)[0].1;
        assert_eq!(&data.teacher, first);
        // The test set and teacher do not depend on P.
        let a = Dataset::generate(&cfg(4, 50), &target_h(1), 9);
        let b = Dataset::generate(&cfg(4, 80), &target_h(1), 9);
        assert_eq!(a.x_test, b.x_test);
        assert_eq!(a.teacher, b.teacher);
        assert_eq!(a.x_train[..200], b.x_train[..200]);
        let c = Dataset::generate(&cfg(4, 50), &target_h(1), 10);
        assert_ne!(a.x_test, c.x_test);
    }
}
