//! A test model with one weight θ whose posterior is the tilted double well of spec 07 ("Exact
//! tests": "a 1-D double well with known weights through the same code path"),
//! p(s) ∝ exp(−b(s² − 1)² + h s) in s = u·θ (u = ±1 the teacher direction of a one-input
//! network), so that umbrella windows, replica exchange and plain chains can be run on the
//! sampler and checked against quadrature.
//!
//! The model is an honest Gaussian-likelihood regression on the engine's flat-model path
//! ([`FlatModel`], made an engine model by [`crate::sim::model::chainwise`]): inputs x ∈ R²,
//! f(x; θ) = x₁θ² + x₂θ, prior θ ~ 𝒩(0, v), ridge κ, and two training points
//!
//! * x = (1, 0) with label y₁ = (3 + κ/v)/2,
//! * x = (0, u) with label y₂ = hκ.
//!
//! Then U(θ) = [(θ² − y₁)² + (s − y₂)²]/(2κ) + θ²/(2v) (App. A.1's energy; θ² = s²)
//! = s⁴/(2κ) − s²(2y₁ − 1 − κ/v)/(2κ) − (y₂/κ) s + const = b(s² − 1)² − h s + const with
//! b = 1/(2κ): expanding the squares, the quartic coefficient is 1/(2κ) = b, the quadratic one
//! −(2y₁ − 1 − κ/v)/(2κ) = −2/(2κ) = −2b by the choice of y₁, and the linear one −y₂/κ = −h.
//! At T = 1 the posterior of s is the double well exactly.
//!
//! The test input x = (0, u) with label 1 makes f = s, so the run's observables are functions of
//! s with exact reweighted averages: the alignment f·y/|y|² = s and the test MSE (s − 1)².
//!
//! The model has no linear readout (f is quadratic in its only weight), so the collapsed
//! sampler, which integrates a readout out, cannot run it: its feature methods refuse.

use crate::error::{Error, Result};
use crate::sim::config::{ExperimentConfig, Precision};
use crate::sim::driver::engine::RunOptions;
use crate::sim::driver::flat::run_flat;
use crate::sim::driver::outcome::{Outcome, RunObserver};
use crate::sim::model::flat::{FlatData, FlatModel, ParamGroup};
use crate::sim::model::interface::DataTerm;
use crate::sim::num::real::Real;
use crate::sim::order::OrderKind;
use crate::sim::restraint::Restraint;

/// Prior variance v of θ.
pub(crate) const PRIOR_VAR: f64 = 1.0;

/// The tilt h of the windows [`run_window`] runs.
pub(crate) const TILT: f64 = 0.5;

/// The double well p(s) ∝ exp(−b(s² − 1)² + h s) at T = 1 (module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DoubleWell {
    /// Barrier parameter b (the barrier at h = 0 is b, in kT).
    pub b: f64,
    /// Tilt h (the basin at s = +1 is lower by about 2h).
    pub h: f64,
}

impl DoubleWell {
    /// The well a run at ridge κ samples: b = 1/(2κ) (module docs), tilt h.
    pub fn at_ridge(kappa: f64, h: f64) -> DoubleWell {
        DoubleWell { b: 0.5 / kappa, h }
    }

    /// The ridge κ = 1/(2b) whose runs sample this well.
    pub fn ridge(&self) -> f64 {
        0.5 / self.b
    }

    /// ln p(s) up to a constant: −b(s² − 1)² + h s.
    pub fn log_density(&self, s: f64) -> f64 {
        -self.b * (s * s - 1.0).powi(2) + self.h * s
    }

    /// ∫ exp(ln p(s) − bias(s)) g(s) ds over [lo, hi] ∩ [−4, 4], by composite Simpson with
    /// intervals of 10⁻³ (Abramowitz & Stegun 25.4.6); outside [−4, 4] the density is below
    /// e^{−b·225 + 4h} and contributes nothing at the b, h used here.
    pub fn integral(
        &self,
        lo: f64,
        hi: f64,
        bias: impl Fn(f64) -> f64,
        g: impl Fn(f64) -> f64,
    ) -> f64 {
        let (a, c) = (lo.max(-4.0), hi.min(4.0));
        if a >= c {
            return 0.0;
        }
        let n = (((c - a) / 1e-3).ceil() as usize)
            .max(2)
            .next_multiple_of(2);
        let step = (c - a) / n as f64;
        let f = |s: f64| (self.log_density(s) - bias(s)).exp() * g(s);
        let mut sum = f(a) + f(c);
        for i in 1..n {
            sum += if i % 2 == 1 { 4.0 } else { 2.0 } * f(a + i as f64 * step);
        }
        sum * step / 3.0
    }

    /// P(lo < s < hi) under the density biased by exp(−bias(s)), by quadrature.
    pub fn probability(&self, lo: f64, hi: f64, bias: impl Fn(f64) -> f64 + Copy) -> f64 {
        self.integral(lo, hi, bias, |_| 1.0) / self.integral(-4.0, 4.0, bias, |_| 1.0)
    }

    /// E[g(s)] under the unbiased density, by quadrature.
    pub fn mean(&self, g: impl Fn(f64) -> f64) -> f64 {
        self.integral(-4.0, 4.0, |_| 0.0, g) / self.integral(-4.0, 4.0, |_| 0.0, |_| 1.0)
    }

    /// The model and its data for teacher direction u = ±1 (module docs).
    pub fn model(&self, u: f64) -> (DoubleWellModel, FlatData) {
        let kappa = self.ridge();
        let data = FlatData {
            x_train: vec![1.0, 0.0, 0.0, u],
            y_train: vec![0.5 * (3.0 + kappa / PRIOR_VAR), self.h * kappa],
            x_test: vec![0.0, u],
            y_test: vec![1.0],
            teacher: vec![u],
        };
        let model = DoubleWellModel {
            groups: vec![ParamGroup {
                name: "layer1".to_string(),
                len: 1,
                prior_var: PRIOR_VAR,
                frozen: false,
            }],
        };
        (model, data)
    }
}

/// f(x; θ) = x₁θ² + x₂θ with one weight θ (module docs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DoubleWellModel {
    groups: Vec<ParamGroup>,
}

impl<T: Real> FlatModel<T> for DoubleWellModel {
    type Scratch = ();

    fn groups(&self) -> &[ParamGroup] {
        &self.groups
    }

    fn sample_len(&self) -> usize {
        2
    }

    fn predict(&self, theta: &[T], x: &[T], n: usize, f: &mut [T], _: &mut ()) {
        let t = theta[0].f64();
        for (fm, xm) in f[..n].iter_mut().zip(x.chunks_exact(2)) {
            *fm = T::of(xm[0].f64() * t * t + xm[1].f64() * t);
        }
    }

    /// ∂f/∂θ = 2x₁θ + x₂.
    fn data_gradient(
        &self,
        theta: &[T],
        data: &DataTerm<'_, T>,
        grad: &mut [T],
        _: &mut (),
    ) -> f64 {
        let t = theta[0].f64();
        let (mut sq, mut g) = (0.0, 0.0);
        for (xm, ym) in data.x.chunks_exact(2).zip(data.y).take(data.p) {
            let (x1, x2) = (xm[0].f64(), xm[1].f64());
            let r = x1 * t * t + x2 * t - ym.f64();
            sq += r * r;
            g += r / data.kappa * (2.0 * x1 * t + x2);
        }
        grad[0] = T::of(g);
        sq
    }

    /// s = θ·u.
    fn overlaps(&self, theta: &[T], teacher: &[f64]) -> Vec<f64> {
        vec![theta[0].f64() * teacher[0]]
    }

    fn overlap_scale(&self) -> f64 {
        PRIOR_VAR.sqrt()
    }

    fn filters<'a>(&self, _: &'a [T]) -> Option<(&'a [T], usize)> {
        None
    }

    /// s = +1, the bottom of the aligned basin.
    fn hot_start(&self, theta: &mut [T], teacher: &[f64]) {
        theta[0] = T::of(teacher[0]);
    }

    fn features_block(&self, _: &[&[T]], _: &[T], _: usize, _: &mut [Vec<T>], _: &mut ()) {
        unreachable!("the double-well model has no linear readout for the collapsed sampler to integrate out")
    }

    fn feature_backward_block(
        &self,
        _: &[&[T]],
        _: &[T],
        _: usize,
        _: &[Vec<T>],
        _: &mut [&mut [T]],
        _: &mut (),
    ) {
        unreachable!("the double-well model has no linear readout for the collapsed sampler to integrate out")
    }
}

/// A window of a free-energy plan on the double well instead of the plan's network (the
/// [`crate::free_energy::window::WindowSampler`] of the exact tests): the well at the
/// experiment's ridge (b = 1/(2κ)) and tilt [`TILT`], oriented by the restraint's order
/// parameter, which must be the projection of the one weight on the teacher (a one-neuron,
/// one-input FCN's `neuron_projection`), run with the experiment's sampler settings on the
/// flat-model driver.
pub(crate) fn run_window(
    config: &ExperimentConfig,
    restraint: &Restraint,
    noise_seed: u64,
    observer: &mut dyn RunObserver,
) -> Result<Outcome> {
    let u = match restraint.order.kind() {
        OrderKind::NeuronProjection { neuron: 0, direction } if direction.len() == 1 => {
            direction[0]
        }
        other => {
            return Err(Error::invalid(format!(
                "the double-well model's order parameter is neuron 0's projection on a one-input teacher, got {other:?}"
            )))
        }
    };
    let well = DoubleWell::at_ridge(config.sampler.kappa, TILT);
    Ok(run(
        config,
        &well,
        u,
        Some(restraint),
        Some(noise_seed),
        observer,
    ))
}

/// The double well `well` with teacher u under the experiment's sampler settings (its ridge
/// must be the well's), restrained by `restraint`, on the noise streams of `noise_seed`
/// (`sampler.seed` when None).
pub(crate) fn run(
    config: &ExperimentConfig,
    well: &DoubleWell,
    u: f64,
    restraint: Option<&Restraint>,
    noise_seed: Option<u64>,
    observer: &mut dyn RunObserver,
) -> Outcome {
    assert!(
        (config.sampler.kappa - well.ridge()).abs() <= 1e-12 * well.ridge(),
        "the run's ridge κ = {} does not give b = {}",
        config.sampler.kappa,
        well.b
    );
    let (model, data) = well.model(u);
    let opts = RunOptions {
        restraint,
        streams: noise_seed,
    };
    match config.sampler.precision {
        Precision::F32 => run_flat::<f32, _>(config, model, &data, opts, observer),
        Precision::F64 => run_flat::<f64, _>(config, model, &data, opts, observer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::flat::gradient_error;

    /// The data gradient against central differences of |f − y|²/2 (κ = 1 in the helper).
    #[test]
    fn the_data_gradient_matches_central_differences() {
        let (model, data) = DoubleWell { b: 3.0, h: 0.7 }.model(-1.0);
        for t in [-1.7, -0.3, 0.0, 0.4, 1.2] {
            let err = gradient_error(&model, &[t], &data.x_train, &data.y_train, 1e-6);
            assert!(err < 1e-6, "θ = {t}: {err}");
        }
    }

    /// U(θ) = L + θ²/(2v) against b(s² − 1)² − h s at several θ: equal up to one constant.
    #[test]
    fn the_energy_is_the_tilted_double_well() {
        for u in [1.0, -1.0] {
            let well = DoubleWell { b: 16.0, h: 0.5 };
            let (model, data) = well.model(u);
            let energy = |t: f64| {
                let mut f = vec![0.0; 2];
                FlatModel::<f64>::predict(&model, &[t], &data.x_train, 2, &mut f, &mut ());
                let l: f64 = f
                    .iter()
                    .zip(&data.y_train)
                    .map(|(a, b)| (a - b).powi(2))
                    .sum();
                l / (2.0 * well.ridge()) + t * t / (2.0 * PRIOR_VAR)
            };
            let c = energy(0.0) + well.log_density(0.0);
            for t in [-1.6, -1.0, -0.2, 0.3, 1.0, 1.5] {
                let s = u * t;
                let diff = energy(t) + well.log_density(s) - c;
                assert!(diff.abs() < 1e-9, "u = {u}, θ = {t}: {diff}");
            }
        }
    }

    /// The quadrature against the same rule on 20× finer intervals, the symmetric well's
    /// P(s > 0) = ½, and the tilted one's odds of the basins ≈ e^{2h} (Laplace: minima at
    /// U ≈ ∓h, curvatures 8b ± 3h, so the odds are e^{2h}·√((8b − 3h)/(8b + 3h)) to O(1/b)).
    #[test]
    fn the_quadrature_is_converged() {
        let well = DoubleWell { b: 16.0, h: 0.5 };
        let p = well.probability(0.0, 4.0, |_| 0.0);
        let z = |n: usize| {
            let step = 8.0 / n as f64;
            let f = |s: f64| well.log_density(s).exp();
            let mut sum = f(-4.0) + f(4.0);
            for i in 1..n {
                sum += if i % 2 == 1 { 4.0 } else { 2.0 } * f(-4.0 + i as f64 * step);
            }
            sum * step / 3.0
        };
        let fine = z(160_000);
        assert!((well.integral(-4.0, 4.0, |_| 0.0, |_| 1.0) / fine - 1.0).abs() < 1e-10);
        let sym = DoubleWell { b: 16.0, h: 0.0 };
        assert!((sym.probability(0.0, 4.0, |_| 0.0) - 0.5).abs() < 1e-12);
        let laplace = 1f64.exp() * ((128.0 - 1.5) / (128.0 + 1.5f64)).sqrt();
        assert!((p / (1.0 - p) / laplace - 1.0).abs() < 0.01, "{p}");
    }
}
