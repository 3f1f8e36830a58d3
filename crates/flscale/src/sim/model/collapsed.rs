//! The collapsed posterior of any model with a linear readout (every [`Model`]): the readout
//! integrated out exactly (spec 02, "Stiffness is the enemy" (b); docs/langevin.md, "The
//! collapsed sampler").
//!
//! With Φ the P × N matrix of the readout's features (the FCN's last hidden layer, the CNN's
//! patch activations, attention's attended tokens: [`Model::features`]), the readout a enters
//! the energy
//! U(W, a) = |Φa − y|²/(2κ) + |a|²/(2v) + prior(W) (paper App. A.1; v the readout's prior
//! variance) quadratically, so its conditional law given W at temperature T is Gaussian,
//! a | W ~ 𝒩(m, κT·A⁻¹) with A = ΦᵀΦ + (κ/v)·I_N and m = A⁻¹Φᵀy (Bayesian linear
//! regression; Bishop, *Pattern Recognition and Machine Learning*, eq. 3.53–3.54, with
//! α = 1/v, β = 1/κ). Integrating it out of exp(−U/T), normalised by the readout prior's
//! own integral, leaves π(W) ∝ exp(−U_c(W)/T) with
//!
//! U_c(W) = ½ yᵀ(κI_P + vΦΦᵀ)⁻¹y + (T/2)·log det(I_N + (v/κ)ΦᵀΦ) + prior(W)
//!        = (|Φm − y|² + (κ/v)|m|²)/(2κ) + (T/2)·(log det A − N log(κ/v)) + prior(W),
//!
//! the second line by the Woodbury identity (κI + vΦΦᵀ)⁻¹ = (I − ΦA⁻¹Φᵀ)/κ and the matrix
//! determinant lemma (Petersen & Pedersen, *The Matrix Cookbook*, eqs. 156 and 24): one
//! N × N Cholesky per chain instead of a P × P one. Note that the log-determinant carries a
//! factor T: it comes from the Gaussian integral, not from the energy (at T = 1 this is the
//! log marginal likelihood −log 𝒩(y; 0, κI + vΦΦᵀ) up to a constant).
//!
//! Gradient with respect to Φ (then back-propagated through the hidden layers by the model,
//! [`Model::feature_backward`]; for the FCN the same code as the plain sampler's):
//! ∂U_c/∂Φ = r mᵀ + T·ΦA⁻¹, r = (Φm − y)/κ —
//! the first term is the plain data gradient at a = m (m minimises the quadratic, so its
//! own variation drops out), the second is ∂ log det A/∂Φ = 2ΦA⁻¹ (Matrix Cookbook eq. 51).

use crate::sim::num::gemm::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use crate::sim::chains::ChainBlock;
use crate::sim::model::fcn::{forward, FcnModel, Scratch};
use crate::sim::model::interface::{DataTerm, Features, Model};
use crate::sim::num::linalg::{
    cholesky_lanes, cholesky_solve_lanes, inverse_from_cholesky_lanes, LANES,
};
// The small Cholesky and its solves, at their paths before they moved to `num::linalg`.
pub use crate::sim::num::linalg::{
    cholesky, cholesky_solve, inverse_from_cholesky, solve_lower, solve_upper_transposed,
};
use crate::sim::num::real::Real;

/// Work buffers of the collapsed evaluation of one block (reused across steps).
#[derive(Debug, Default)]
pub struct CollapsedWork<T> {
    gram: Vec<T>,
    a: Vec<f64>,
    chol: Vec<f64>,
    inverse: Vec<T>,
    phi_inverse: Vec<T>,
    mean: Vec<f64>,
    mean_t: Vec<T>,
    /// ∂U_c/∂Φ of every chain of the block, P × (b·N) (row μ: the chains' N entries one after
    /// the other), for [`Model::feature_backward`].
    dphi: Vec<T>,
    /// Per chain of the block: whether its gradient is zero (stopped, or A not factorised).
    zero: Vec<bool>,
    /// A⁻¹ of one chain in f64 ([`conditionals_one_by_one`]).
    inverse_f64: Vec<f64>,
    /// Per chain of the block (b·N, chain-major, the layout of the readout parameters): the
    /// conditional mean m = E[a | W] at the last [`draw_readouts`], for Rao–Blackwellised
    /// predictions (a chain whose A could not be factorised keeps its current readout).
    pub conditional_means: Vec<T>,
    /// Per chain of the block: why the evaluation failed (`None` when it did not).
    pub failure: Vec<Option<String>>,
    /// [`LANES`] chains' Cholesky factors, inverses, work space (n² each) and means (n).
    chol_lanes: Vec<[f64; LANES]>,
    inverse_lanes: Vec<[f64; LANES]>,
    work_lanes: Vec<[f64; LANES]>,
    mean_lanes: Vec<[f64; LANES]>,
}

impl<T: Real> CollapsedWork<T> {
    fn ensure(&mut self, n: usize, p: usize, block: usize) {
        self.gram.resize(n * n, T::zero());
        self.a.resize(n * n, 0.0);
        self.chol.resize(n * n, 0.0);
        self.inverse.resize(n * n, T::zero());
        self.phi_inverse.resize(p * n, T::zero());
        self.mean.resize(n, 0.0);
        self.mean_t.resize(n, T::zero());
        self.failure.resize(block, None);
        self.dphi.resize(p * block * n, T::zero());
        self.zero.resize(block, false);
    }
}

/// The readout's conditional law given the features of one chain: A = LLᵀ and the mean m.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadoutConditional {
    /// Cholesky factor L of A = ΦᵀΦ + (κ/v)·I (row-major, lower).
    pub chol: Vec<f64>,
    /// Conditional mean m = A⁻¹Φᵀy.
    pub mean: Vec<f64>,
    /// log det A.
    pub log_det: f64,
}

/// The readout's posterior precision (over κ) A = ΦᵀΦ + ridge·I for features Φ (P × K) into
/// `a` (symmetrised: the GEMM need not return an exactly symmetric product) and its Cholesky
/// factor into `chol` (spec 02 (b): a | θ_hidden ~ 𝒩(A⁻¹Φᵀy, κT·A⁻¹), ridge = κ/s_a²); `gram`
/// is work space of K² entries. False when A is not numerically positive definite.
#[inline(always)]
pub fn readout_precision<T: Real>(
    phi: MatRef<'_, T>,
    ridge: f64,
    gram: &mut [T],
    a: &mut [f64],
    chol: &mut [f64],
) -> bool {
    let k = phi.ncols();
    readout_gram(phi, ridge, gram, a);
    cholesky(&a[..k * k], &mut chol[..k * k], k)
}

/// A = ΦᵀΦ + ridge·I into `a` (f64, symmetrised), the first half of [`readout_precision`].
#[inline(always)]
fn readout_gram<T: Real>(phi: MatRef<'_, T>, ridge: f64, gram: &mut [T], a: &mut [f64]) {
    let k = phi.ncols();
    if phi.nrows() > 0 {
        let g = MatMut::from_row_major_slice_mut(&mut gram[..k * k], k, k);
        matmul(g, Accum::Replace, phi.transpose(), phi, T::one(), Par::Seq);
    } else {
        gram[..k * k].fill(T::zero());
    }
    for i in 0..k {
        for j in 0..k {
            let g = 0.5 * (gram[i * k + j].f64() + gram[j * k + i].f64());
            a[i * k + j] = g + if i == j { ridge } else { 0.0 };
        }
    }
}

/// Φᵀy for one chain's features into `out`.
#[inline(always)]
fn features_times_targets<T: Real>(phi: Features<'_, T>, y: &[T], p: usize, out: &mut [f64]) {
    out.fill(0.0);
    for (mu, yv) in y.iter().enumerate().take(p) {
        let row = phi.row(mu);
        let yv = yv.f64();
        for (m, a) in out.iter_mut().zip(row) {
            *m += a.f64() * yv;
        }
    }
}

/// A = ΦᵀΦ + (κ/v)·I, its Cholesky factor and m = A⁻¹Φᵀy for chain `c` (forward pass in
/// `scratch`). `None` when the Cholesky fails (non-finite or non-positive-definite A).
#[inline(always)]
fn conditional<T: Real, M: Model<T>>(
    model: &M,
    scratch: &M::Scratch,
    data: &DataTerm<'_, T>,
    block: usize,
    c: usize,
    work: &mut CollapsedWork<T>,
) -> Option<f64> {
    let (y, p, kappa) = (data.y, data.p, data.kappa);
    let readout = model.n_groups() - 1;
    let n = model.group_len(readout);
    let ridge = kappa / model.prior_var(readout);
    let phi = model.features(scratch, block, c, p);
    if !readout_precision(
        phi.mat(),
        ridge,
        &mut work.gram,
        &mut work.a,
        &mut work.chol,
    ) {
        return None;
    }
    features_times_targets(phi, y, p, &mut work.mean);
    cholesky_solve(&work.chol, &mut work.mean, n);
    Some(2.0 * (0..n).map(|i| work.chol[i * n + i].ln()).sum::<f64>())
}

/// The non-prior part of U_c for every chain of the block and its gradient with respect to
/// the hidden weights, written into `block.grads` (readout group zeroed); the value goes to
/// `block.energy`, |Φm − y|² to `block.sq_error`. A chain whose A cannot be factorised gets
/// a NaN energy and its reason in `work.failure`. Module doc for the formulas.
#[inline(always)]
pub fn data_gradient<T: Real, M: Model<T>>(
    block: &mut ChainBlock<T>,
    model: &M,
    data: &DataTerm<'_, T>,
    temperature: f64,
    scratch: &mut M::Scratch,
    work: &mut CollapsedWork<T>,
) {
    let (b, p) = (block.len, data.p);
    let readout = model.n_groups() - 1;
    work.ensure(model.group_len(readout), p, b);
    model.features_forward(&block.params, b, data.x, p, scratch);
    let terms = Terms {
        data,
        temperature,
        ridge: data.kappa / model.prior_var(readout),
    };
    // The model-independent linear algebra in the CPU's vector build, for every model: a
    // model that runs its own passes in the baseline build (`Model::VECTOR_BUILD`) still
    // gets the vectorised lanes of Cholesky factors (BENCHMARKS.md, "One engine").
    crate::sim::num::simd::vectorized(
        #[inline(always)]
        || conditionals_and_feature_gradients(block, model, &terms, scratch, work),
    );
    // The model's back-propagation of ∂U_c/∂Φ (for the FCN the plain sampler's, from δ^{L−1}).
    model.feature_backward(block, data, &work.dphi, &work.zero[..b], scratch);
    block.grads[readout].fill(T::zero());
}

/// [`data_gradient`] between the model's forward pass and its back-propagation: per chain
/// A = ΦᵀΦ + (κ/v)·I and Φᵀy, the Cholesky factor, m = A⁻¹Φᵀy, log det A and A⁻¹, [`LANES`]
/// chains at a time, then [`gradient_of_chain`] (∂U_c/∂Φ into `work.dphi`, the energy).
#[inline(always)]
fn conditionals_and_feature_gradients<T: Real, M: Model<T>>(
    block: &mut ChainBlock<T>,
    model: &M,
    terms: &Terms<'_, '_, T>,
    scratch: &M::Scratch,
    work: &mut CollapsedWork<T>,
) {
    let b = block.len;
    let (y, p, ridge) = (terms.data.y, terms.data.p, terms.ridge);
    let n = model.group_len(model.n_groups() - 1);
    if n > LANES_UP_TO {
        conditionals_one_by_one(block, model, terms, scratch, work);
        return;
    }
    // Per chain: A = ΦᵀΦ + (κ/v)·I and Φᵀy, then the Cholesky factor, m = A⁻¹Φᵀy, log det A
    // and A⁻¹ = L⁻ᵀL⁻¹ (for ∂ log det A/∂Φ), LANES chains at a time; padding lanes and
    // stopped chains hold the identity.
    let nn = n * n;
    work.chol_lanes.resize(nn, [0.0; LANES]);
    work.inverse_lanes.resize(nn, [0.0; LANES]);
    work.work_lanes.resize(nn, [0.0; LANES]);
    work.mean_lanes.resize(n, [0.0; LANES]);
    for first in (0..b).step_by(LANES) {
        let chains = first..(first + LANES).min(b);
        work.chol_lanes.fill([0.0; LANES]);
        for i in 0..n {
            work.chol_lanes[i * n + i] = [1.0; LANES];
        }
        work.mean_lanes.fill([0.0; LANES]);
        let mut live = [false; LANES];
        for c in chains.clone() {
            let lane = c - first;
            if block.diverged[c].is_some() {
                continue;
            }
            live[lane] = true;
            let phi = model.features(scratch, b, c, p);
            readout_gram(phi.mat(), ridge, &mut work.gram, &mut work.a);
            for (dst, &src) in work.chol_lanes.iter_mut().zip(&work.a) {
                dst[lane] = src;
            }
            features_times_targets(phi, y, p, &mut work.mean);
            for (dst, &src) in work.mean_lanes.iter_mut().zip(&work.mean) {
                dst[lane] = src;
            }
        }
        let ok = cholesky_lanes(&mut work.chol_lanes, n);
        cholesky_solve_lanes(&work.chol_lanes, &mut work.mean_lanes, n);
        inverse_from_cholesky_lanes(
            &work.chol_lanes,
            &mut work.inverse_lanes,
            &mut work.work_lanes,
            n,
        );
        for c in chains {
            let lane = c - first;
            work.failure[c] = None;
            work.zero[c] = !(live[lane] && ok[lane]);
            if work.zero[c] {
                if live[lane] {
                    work.failure[c] = Some(CHOLESKY_FAILED.to_string());
                }
                block.energy[c] = f64::NAN;
                block.sq_error[c] = f64::NAN;
                continue;
            }
            let log_det = 2.0
                * (0..n)
                    .map(|i| work.chol_lanes[i * n + i][lane].ln())
                    .sum::<f64>();
            for (dst, src) in work.mean.iter_mut().zip(&work.mean_lanes) {
                *dst = src[lane];
            }
            for (dst, src) in work.inverse.iter_mut().zip(&work.inverse_lanes) {
                *dst = T::of(src[lane]);
            }
            gradient_of_chain(block, model, scratch, work, terms, c, log_det);
        }
    }
}

/// The constants of one collapsed evaluation: the data term, the temperature T and the
/// readout's ridge κ/v.
struct Terms<'a, 'd, T> {
    data: &'a DataTerm<'d, T>,
    temperature: f64,
    ridge: f64,
}

/// Why a chain's collapsed energy could not be evaluated.
const CHOLESKY_FAILED: &str =
    "the Cholesky factorisation of ΦᵀΦ + (κ/v)·I failed (non-finite features)";

/// Readouts longer than this (K features) are factorised one chain at a time
/// ([`conditionals_one_by_one`]), shorter ones [`LANES`] chains at a time. The two give the
/// same bits; the lanes are faster for small K and slower for large (whole-process, one
/// thread, collapsed MALA: FCN N = 20 2.5 % faster in lanes, N = 40 even, N = 64 6 % slower;
/// CNN K = 50 13 % slower; BENCHMARKS.md, "One engine").
const LANES_UP_TO: usize = 32;

/// [`conditionals_and_feature_gradients`] one chain at a time, for long readouts.
#[inline(always)]
fn conditionals_one_by_one<T: Real, M: Model<T>>(
    block: &mut ChainBlock<T>,
    model: &M,
    terms: &Terms<'_, '_, T>,
    scratch: &M::Scratch,
    work: &mut CollapsedWork<T>,
) {
    let b = block.len;
    let n = model.group_len(model.n_groups() - 1);
    work.inverse_f64.resize(n * n, 0.0);
    for c in 0..b {
        let live = block.diverged[c].is_none();
        let log_det = if live {
            conditional(model, scratch, terms.data, b, c, work)
        } else {
            None
        };
        work.zero[c] = log_det.is_none();
        work.failure[c] = (live && log_det.is_none()).then(|| CHOLESKY_FAILED.to_string());
        let Some(log_det) = log_det else {
            block.energy[c] = f64::NAN;
            block.sq_error[c] = f64::NAN;
            continue;
        };
        inverse_from_cholesky(&work.chol, &mut work.inverse_f64, n);
        for (dst, &src) in work.inverse.iter_mut().zip(&work.inverse_f64) {
            *dst = T::of(src);
        }
        gradient_of_chain(block, model, scratch, work, terms, c, log_det);
    }
}

/// [`data_gradient`] for live chain `c` once `work.mean` (m), `work.inverse` (A⁻¹) and
/// log det A are known: ΦA⁻¹ in one GEMM, ∂U_c/∂Φ = r mᵀ + T·ΦA⁻¹ into `work.dphi`, the
/// energy and |Φm − y|².
#[inline(always)]
fn gradient_of_chain<T: Real, M: Model<T>>(
    block: &mut ChainBlock<T>,
    model: &M,
    scratch: &M::Scratch,
    work: &mut CollapsedWork<T>,
    terms: &Terms<'_, '_, T>,
    c: usize,
    log_det: f64,
) {
    let (y, p, ridge) = (terms.data.y, terms.data.p, terms.ridge);
    let (inv_kappa, temperature) = (1.0 / terms.data.kappa, terms.temperature);
    let temp = T::of(temperature);
    let b = block.len;
    let n = model.group_len(model.n_groups() - 1);
    let phi = model.features(scratch, b, c, p);
    if p > 0 {
        let inv = MatRef::from_row_major_slice(&work.inverse[..], n, n);
        let out = MatMut::from_row_major_slice_mut(&mut work.phi_inverse[..], p, n);
        matmul(out, Accum::Replace, phi.mat(), inv, T::one(), Par::Seq);
    }
    for (dst, &src) in work.mean_t.iter_mut().zip(&work.mean) {
        *dst = T::of(src);
    }
    let mean_t = &work.mean_t;
    let mut sq = 0.0;
    for mu in 0..p {
        let fm = crate::sim::model::fcn::dot(phi.row(mu), mean_t).f64();
        let r = fm - y[mu].f64();
        sq += r * r;
        let r_t = T::of(r * inv_kappa);
        let pa = &work.phi_inverse[mu * n..(mu + 1) * n];
        let range = mu * b * n + c * n..mu * b * n + (c + 1) * n;
        for ((d, &mi), &pai) in work.dphi[range].iter_mut().zip(mean_t).zip(pa) {
            *d = r_t * mi + temp * pai;
        }
    }
    let m2: f64 = work.mean.iter().map(|m| m * m).sum();
    block.sq_error[c] = sq;
    block.energy[c] =
        (sq + ridge * m2) * 0.5 * inv_kappa + 0.5 * temperature * (log_det - n as f64 * ridge.ln());
}

/// Draws every live chain's readout exactly from a | W ~ 𝒩(m, κT·A⁻¹) (module doc) into the
/// block's readout parameters, from the chain's own stream: a = m + √(κT)·L⁻ᵀz, z ~ 𝒩(0, I).
/// Also sets the training error |Φa − y|² and the readout's virial aᵀ∇_aU = aᵀA(a − m)/κ
/// (whose mean is T·N, the configurational-temperature check of the draw).
#[inline(always)]
pub fn draw_readouts<T: Real, M: Model<T>>(
    block: &mut ChainBlock<T>,
    model: &M,
    data: &DataTerm<'_, T>,
    temperature: f64,
    scratch: &mut M::Scratch,
    work: &mut CollapsedWork<T>,
) {
    let (x, y, p, kappa) = (data.x, data.y, data.p, data.kappa);
    let b = block.len;
    let hidden = model.n_groups() - 1;
    let n = model.group_len(hidden);
    work.ensure(n, p, b);
    work.conditional_means.clone_from(&block.params[hidden]);
    model.features_forward(&block.params, b, x, p, scratch);
    let scale = (kappa * temperature).sqrt();
    for c in 0..b {
        if block.diverged[c].is_some() {
            continue;
        }
        let Some(_) = conditional(model, scratch, data, b, c, work) else {
            // Left to the next step's evaluation to report; keep the previous readout.
            continue;
        };
        for (dst, &src) in work.conditional_means[c * n..(c + 1) * n]
            .iter_mut()
            .zip(&work.mean)
        {
            *dst = T::of(src);
        }
        let mut z: Vec<f64> = (0..n)
            .map(|_| T::standard_normal(&mut block.rngs[c]).f64())
            .collect();
        solve_upper_transposed(&work.chol, &mut z, n);
        let a: Vec<f64> = work
            .mean
            .iter()
            .zip(&z)
            .map(|(m, e)| m + scale * e)
            .collect();
        let phi = model.features(scratch, b, c, p);
        block.sq_error[c] = (0..p)
            .map(|mu| {
                let f: f64 = phi.row(mu).iter().zip(&a).map(|(v, ai)| v.f64() * ai).sum();
                (f - y[mu].f64()).powi(2)
            })
            .sum();
        let virial: f64 = (0..n)
            .map(|i| {
                let adiff: f64 = (0..n)
                    .map(|j| work.a[i * n + j] * (a[j] - work.mean[j]))
                    .sum();
                a[i] * adiff
            })
            .sum::<f64>()
            / kappa;
        block.virial[c][hidden] = virial;
        for (dst, &src) in block.params[hidden][c * n..(c + 1) * n].iter_mut().zip(&a) {
            *dst = T::of(src);
        }
    }
}

/// The input z_μ of hidden layer `g` for sample μ of chain `c` of a block whose forward pass
/// is in `scratch`: x_μ for the first layer, else the previous layer's activations
/// (layer-normalised with `layernorm`).
#[inline(always)]
fn layer_input<'a, T: Real>(
    model: &FcnModel,
    scratch: &'a Scratch<T>,
    x: &'a [T],
    g: usize,
    b: usize,
    c: usize,
    mu: usize,
) -> &'a [T] {
    let n_in = model.fan_in(g);
    if g == 0 {
        return &x[mu * n_in..(mu + 1) * n_in];
    }
    let row = mu * b * n_in + c * n_in;
    let input = if model.layernorm {
        &scratch.normed[g - 1]
    } else {
        &scratch.act[g - 1]
    };
    &input[row..row + n_in]
}

/// Per chain and neuron i of the last hidden layer (b·N values, chain-major): the
/// Gauss–Newton estimate of the curvature of U_c along that neuron's incoming weights,
/// g_i = 1/v + (m_i²/κ)·Σ_μ σ′(h_{μi})²·|z_μ|²/n_in, with z_μ the layer's input (x_μ for a
/// two-layer network, the layer-normalised activations with `layernorm`) and v that layer's
/// prior variance: the mean eigenvalue of the
/// neuron's block (m_i²/κ)Σ_μ σ′²z_μz_μᵀ + I/v of the Hessian, neglecting the coupling
/// through the projection on Φ and the log-determinant. A specialised neuron (large m_i) is
/// stiffer than the rest by the factor its readout squared (spec 02, "Stiffness is the
/// enemy"), which is what the collapsed sampler's preconditioner ([`crate::sim::kernel::mala`]) removes.
pub fn neuron_curvature<T: Real>(
    block: &ChainBlock<T>,
    model: &FcnModel,
    data: &DataTerm<'_, T>,
    scratch: &mut Scratch<T>,
    work: &mut CollapsedWork<T>,
) -> Vec<f64> {
    // g_i = tr(G_i)/n_in = tr(v·G_i)/(v·n_in) of the block (neuron_curvature_blocks), from
    // its diagonal alone: the same additions as the block's diagonal, n_in times fewer
    // operations (at N1 = 640 the whole block made the burn-in 12× slower).
    let g = model.widths.len() - 1;
    let n_in = model.fan_in(g);
    let scale = 1.0 / (model.prior_var[g] * n_in as f64);
    gauss_newton_of_neurons::<T, true>(block, model, data, scratch, work)
        .chunks(n_in)
        .map(|diagonal| diagonal.iter().sum::<f64>() * scale)
        .collect()
}

/// Per chain and neuron i of the last hidden layer (b·N blocks of n_in × n_in, row-major,
/// chain-major then neuron-major): v·G_i with G_i = I/v + (m_i²/κ)·Σ_μ σ′(h_{μi})²·z_μz_μᵀ the
/// Gauss–Newton block of neuron i's incoming weights — the Hessian of the plain energy
/// |Φa − y|²/(2κ) + prior at a = m with the residual term dropped (the Fisher information of
/// the Gaussian likelihood; Martens, *New insights and perspectives on the natural gradient
/// method*, JMLR 21 (2020), sec. 8) — with the same z_μ, v and neglected couplings as
/// [`neuron_curvature`], whose g_i is tr(G_i)/n_in. Unlike that scalar, the block keeps the
/// anisotropy of a specialised neuron: for erf and h = w·x with |w|² = s², the curvature
/// along w is smaller than across it by 1 + 4s² (E[σ′(h)²h²]/s² against E[σ′(h)²]), the
/// radial direction that carries ρ = w·w*.
#[inline(always)]
pub fn neuron_curvature_blocks<T: Real>(
    block: &ChainBlock<T>,
    model: &FcnModel,
    data: &DataTerm<'_, T>,
    scratch: &mut Scratch<T>,
    work: &mut CollapsedWork<T>,
) -> Vec<f64> {
    gauss_newton_of_neurons::<T, false>(block, model, data, scratch, work)
}

/// [`neuron_curvature_blocks`] (`DIAGONAL` false: n_in × n_in per neuron), or only the
/// diagonal of each block (`DIAGONAL` true: n_in per neuron), accumulated identically.
#[inline(always)]
fn gauss_newton_of_neurons<T: Real, const DIAGONAL: bool>(
    block: &ChainBlock<T>,
    model: &FcnModel,
    data: &DataTerm<'_, T>,
    scratch: &mut Scratch<T>,
    work: &mut CollapsedWork<T>,
) -> Vec<f64> {
    let (x, p, kappa) = (data.x, data.p, data.kappa);
    let b = block.len;
    let hidden = model.widths.len();
    let g = hidden - 1;
    let n = model.widths[g];
    let n_in = model.fan_in(g);
    let v = model.prior_var[g];
    work.ensure(n, p, b);
    forward(model, &block.params, b, x, p, scratch);
    let nn = if DIAGONAL { n_in } else { n_in * n_in };
    let diagonal_stride = if DIAGONAL { 1 } else { n_in + 1 };
    let mut out = vec![0.0; b * n * nn];
    for blk in out.chunks_mut(nn) {
        for j in 0..n_in {
            blk[j * diagonal_stride] = 1.0;
        }
    }
    let mut z = vec![0.0; n_in];
    for c in 0..b {
        if block.diverged[c].is_some() || conditional(model, scratch, data, b, c, work).is_none() {
            continue;
        }
        let der = &scratch.der[g];
        for mu in 0..p {
            for (zj, a) in z
                .iter_mut()
                .zip(layer_input(model, scratch, x, g, b, c, mu))
            {
                *zj = a.f64();
            }
            let row = &der[mu * b * n + c * n..mu * b * n + (c + 1) * n];
            for (i, s) in row.iter().enumerate() {
                let weight = v * work.mean[i].powi(2) / kappa * s.f64().powi(2);
                let blk = &mut out[(c * n + i) * nn..(c * n + i + 1) * nn];
                if DIAGONAL {
                    for (dj, zj) in blk.iter_mut().zip(&z) {
                        *dj += weight * zj * zj;
                    }
                    continue;
                }
                // Lower triangle only; mirrored below.
                for j in 0..n_in {
                    let wz = weight * z[j];
                    for k in 0..=j {
                        blk[j * n_in + k] += wz * z[k];
                    }
                }
            }
        }
    }
    if DIAGONAL {
        return out;
    }
    for blk in out.chunks_mut(nn) {
        for j in 0..n_in {
            for k in 0..j {
                blk[k * n_in + j] = blk[j * n_in + k];
            }
        }
    }
    out
}

/// Every chain's conditional readout mean m = A⁻¹Φᵀy after the model's
/// [`Model::features_forward`] of the block (`None` for a stopped chain or one whose A cannot
/// be factorised): the readout at which the preconditioner's curvature is taken.
pub(crate) fn conditional_readout_means<T: Real, M: Model<T>>(
    block: &ChainBlock<T>,
    model: &M,
    data: &DataTerm<'_, T>,
    scratch: &M::Scratch,
) -> Vec<Option<Vec<f64>>> {
    let (b, p) = (block.len, data.p);
    let mut work = CollapsedWork::<T>::default();
    work.ensure(model.group_len(model.n_groups() - 1), p, b);
    (0..b)
        .map(|c| {
            if block.diverged[c].is_some() {
                return None;
            }
            conditional(model, scratch, data, b, c, &mut work).map(|_| work.mean.clone())
        })
        .collect()
}

/// The readout conditional of chain `c` of a block, computed afresh (for tests and tools).
pub fn readout_conditional<T: Real, M: Model<T>>(
    block: &ChainBlock<T>,
    model: &M,
    data: &DataTerm<'_, T>,
    c: usize,
) -> Option<ReadoutConditional> {
    let p = data.p;
    let n = model.group_len(model.n_groups() - 1);
    let mut scratch = M::Scratch::default();
    let mut work = CollapsedWork::<T>::default();
    work.ensure(n, p, block.len);
    model.features_forward(&block.params, block.len, data.x, p, &mut scratch);
    let log_det = conditional(model, &scratch, data, block.len, c, &mut work)?;
    Some(ReadoutConditional {
        chol: work.chol.clone(),
        mean: work.mean.clone(),
        log_det,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Activation;
    use crate::sim::ensemble::fcn::{Dynamics, Ensemble};
    use rand::{Rng, SeedableRng};

    /// A small ensemble in f64 with random data; `params` of every chain drawn from the prior.
    fn ensemble(
        widths: &[usize],
        act: Activation,
        layernorm: bool,
        p: usize,
        chains: usize,
    ) -> Ensemble<f64> {
        let d = 3;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        let layers = widths.len() + 1;
        let model = FcnModel {
            d,
            widths: widths.to_vec(),
            activation: act,
            prior_var: (0..layers)
                .map(|l| 1.3 / if l == 0 { d } else { widths[l - 1] } as f64)
                .collect(),
            frozen: vec![false; layers],
            layernorm,
        };
        let x: Vec<f64> = (0..p * d).map(|_| rng.random_range(-1.5..1.5)).collect();
        let y: Vec<f64> = (0..p).map(|_| rng.random_range(-1.0..1.0)).collect();
        let dynamics = Dynamics {
            kappa: 0.3,
            step: 1e-3,
            temperature: 0.7,
        };
        Ensemble::new(model, &x, &y, chains, 4, dynamics, Some(chains))
    }

    /// Features Φ (P × N) of chain `c`, computed directly from the weights in f64.
    fn features_direct(ens: &Ensemble<f64>, c: usize) -> Vec<Vec<f64>> {
        let model = &ens.model;
        (0..ens.p)
            .map(|mu| {
                let mut a: Vec<f64> = ens.x[mu * model.d..(mu + 1) * model.d].to_vec();
                for (l, &n) in model.widths.iter().enumerate() {
                    let w = ens.chain_group(c, l);
                    let fan = a.len();
                    a = (0..n)
                        .map(|i| {
                            let h: f64 = (0..fan).map(|j| w[i * fan + j] * a[j]).sum();
                            model.activation.value_f64(h)
                        })
                        .collect();
                }
                a
            })
            .collect()
    }

    /// The non-prior part of U_c by brute force, with the P × P matrix K = κI + vΦΦᵀ:
    /// −T log E_{a~𝒩(0, vT)} exp(−|Φa − y|²/(2κT)) = ½yᵀK⁻¹y + (T/2)(log det K − P log κ).
    fn brute_force(ens: &Ensemble<f64>, c: usize) -> f64 {
        let (p, kappa, t) = (ens.p, ens.dynamics.kappa, ens.dynamics.temperature);
        let v = *ens.model.prior_var.last().unwrap();
        let phi = features_direct(ens, c);
        let k: Vec<f64> = (0..p * p)
            .map(|ij| {
                let (i, j) = (ij / p, ij % p);
                let dot: f64 = phi[i].iter().zip(&phi[j]).map(|(a, b)| a * b).sum();
                v * dot + if i == j { kappa } else { 0.0 }
            })
            .collect();
        let mut l = vec![0.0; p * p];
        assert!(cholesky(&k, &mut l, p));
        let mut sol = ens.y.clone();
        cholesky_solve(&l, &mut sol, p);
        let quad: f64 = sol.iter().zip(&ens.y).map(|(a, b)| a * b).sum();
        let log_det: f64 = 2.0 * (0..p).map(|i| l[i * p + i].ln()).sum::<f64>();
        0.5 * quad + 0.5 * t * (log_det - p as f64 * kappa.ln())
    }

    #[test]
    fn collapsed_energy_equals_the_brute_force_marginal() {
        for (widths, act, p) in [
            (vec![4], Activation::Erf, 9),
            (vec![6], Activation::Tanh, 3),
            (vec![3, 5], Activation::Erf, 7),
        ] {
            let mut ens = ensemble(&widths, act, false, p, 3);
            let (x, y) = (ens.x.clone(), ens.y.clone());
            let model = ens.model.clone();
            let (kappa, t) = (ens.dynamics.kappa, ens.dynamics.temperature);
            let mut scratch = Scratch::default();
            let mut work = CollapsedWork::default();
            let block = &mut ens.blocks[0];
            let data = DataTerm {
                x: &x,
                y: &y,
                p,
                kappa,
                likelihood: crate::sim::config::Likelihood::Gaussian,
            };
            data_gradient(block, &model, &data, t, &mut scratch, &mut work);
            let energies = block.energy.clone();
            for (c, &u) in energies.iter().enumerate() {
                let reference = brute_force(&ens, c);
                assert!(
                    (u - reference).abs() < 1e-10 * (1.0 + reference.abs()),
                    "{widths:?} chain {c}: Woodbury {u} vs brute force {reference}"
                );
            }
        }
    }

    #[test]
    fn collapsed_gradient_matches_finite_differences() {
        for (widths, act, layernorm) in [
            (vec![4], Activation::Erf, false),
            (vec![5], Activation::Tanh, false),
            (vec![3, 4], Activation::Erf, false),
            (vec![4, 3], Activation::Relu, false),
            (vec![4, 3], Activation::Tanh, true),
        ] {
            let p = 8;
            let mut ens = ensemble(&widths, act, layernorm, p, 2);
            let (x, y) = (ens.x.clone(), ens.y.clone());
            let model = ens.model.clone();
            let (kappa, t) = (ens.dynamics.kappa, ens.dynamics.temperature);
            let mut scratch = Scratch::default();
            let mut work = CollapsedWork::default();
            let data = DataTerm {
                x: &x,
                y: &y,
                p,
                kappa,
                likelihood: crate::sim::config::Likelihood::Gaussian,
            };
            let mut energy = |block: &mut ChainBlock<f64>| {
                data_gradient(block, &model, &data, t, &mut scratch, &mut work);
                (block.energy.clone(), block.grads.clone())
            };
            let block = &mut ens.blocks[0];
            let (_, grads) = energy(block);
            assert!(grads[widths.len()].iter().all(|&g| g == 0.0));
            for g in 0..widths.len() {
                for idx in 0..block.params[g].len() {
                    let c = idx / model.group_len(g);
                    let old = block.params[g][idx];
                    let eps = 1e-6;
                    block.params[g][idx] = old + eps;
                    let up = energy(block).0[c];
                    block.params[g][idx] = old - eps;
                    let down = energy(block).0[c];
                    block.params[g][idx] = old;
                    let fd = (up - down) / (2.0 * eps);
                    assert!(
                        (fd - grads[g][idx]).abs() <= 1e-6 * (1.0 + fd.abs()),
                        "{widths:?} {act:?} group {g} index {idx}: fd {fd} analytic {}",
                        grads[g][idx]
                    );
                }
            }
        }
    }
}
