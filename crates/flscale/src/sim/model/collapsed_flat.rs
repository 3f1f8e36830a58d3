//! The collapsed posterior of the flat-parameter models (CNN, softmax attention): the readout
//! integrated out exactly, as [`crate::sim::model::collapsed`] does for the FCN (spec 02, "Stiffness is
//! the enemy" (b); docs/langevin.md, "The collapsed sampler" and "CNN and attention").
//!
//! Both models are linear in their last parameter group given the others,
//! f(x) = Σ_k φ_k(x; θ_hidden)·a_k ([`FlatModel::features_block`]): for the CNN (paper
//! App. E.1.2) φ_{(i,j)}(x) = σ(w¹_j·x_i) and a = W², K = N_w·N features; for attention (App.
//! E.3) φ_{(h,k)}(X) = (1/√L) Σ_{a,b} @_{ab;h}(X) x^b_k and a = (w_1, …, w_H), K = H·d. With Φ
//! the P × K feature matrix and v the readout's prior variance, the formulas of
//! [`crate::sim::model::collapsed`]'s module doc apply unchanged (Bishop, *Pattern Recognition and Machine
//! Learning*, eq. 3.53–3.54; Woodbury and the matrix determinant lemma, *The Matrix Cookbook*
//! eqs. 156 and 24):
//!
//! U_c(θ_hidden) = (|Φm − y|² + (κ/v)|m|²)/(2κ) + (T/2)·(log det A − K log(κ/v)) + prior,
//! A = ΦᵀΦ + (κ/v)·I_K, m = A⁻¹Φᵀy, ∂U_c/∂Φ = r mᵀ + T·ΦA⁻¹, r = (Φm − y)/κ,
//!
//! one K × K Cholesky per chain ([`crate::sim::model::collapsed::cholesky`] and its solves, shared with the
//! FCN); ∂U_c/∂Φ is back-propagated by the model ([`FlatModel::feature_backward_block`]).
//! Readouts are drawn exactly from a | θ_hidden ~ 𝒩(m, κT·A⁻¹), a = m + √(κT)·L⁻ᵀz, from the
//! chain's stream, as the FCN's [`crate::sim::model::collapsed::draw_readouts`] draws them (same order),
//! so that a CNN with one patch retraces the FCN's collapsed chain.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rand_chacha::ChaCha8Rng;

use crate::sim::model::collapsed::{
    cholesky_solve, inverse_from_cholesky, readout_precision, solve_upper_transposed,
};
use crate::sim::model::fcn::dot;
use crate::sim::model::flat::FlatModel;
use crate::sim::num::real::Real;

/// Work buffers of the collapsed evaluation of one block of chains (reused across steps).
#[derive(Debug, Default)]
pub struct CollapsedWork<T> {
    /// Φ of every chain of the block (P × K, row-major).
    pub phis: Vec<Vec<T>>,
    /// ∂U_c/∂Φ of every chain of the block (P × K, row-major).
    dphis: Vec<Vec<T>>,
    gram: Vec<T>,
    a: Vec<f64>,
    chol: Vec<f64>,
    inverse: Vec<T>,
    inverse_f64: Vec<f64>,
    mean: Vec<f64>,
    mean_t: Vec<T>,
}

impl<T: Real> CollapsedWork<T> {
    fn ensure(&mut self, k: usize, block: usize) {
        self.gram.resize(k * k, T::zero());
        self.a.resize(k * k, 0.0);
        self.chol.resize(k * k, 0.0);
        self.inverse.resize(k * k, T::zero());
        self.inverse_f64.resize(k * k, 0.0);
        self.mean.resize(k, 0.0);
        self.mean_t.resize(k, T::zero());
        if self.phis.len() < block {
            self.phis.resize_with(block, Vec::new);
            self.dphis.resize_with(block, Vec::new);
        }
    }
}

/// A = ΦᵀΦ + ridge·I into `work.a`, its Cholesky factor into `work.chol` and m = A⁻¹Φᵀy into
/// `work.mean`, for one chain's Φ (`p` × `k`, row-major, in `work.phis[c]`); returns log det A,
/// or `None` when A is not numerically positive definite (non-finite features).
fn conditional<T: Real>(
    work: &mut CollapsedWork<T>,
    c: usize,
    y: &[T],
    p: usize,
    k: usize,
    ridge: f64,
) -> Option<f64> {
    let phi = &work.phis[c][..p * k];
    let phi_mat = MatRef::from_row_major_slice(phi, p, k);
    if !readout_precision(phi_mat, ridge, &mut work.gram, &mut work.a, &mut work.chol) {
        return None;
    }
    work.mean.fill(0.0);
    for (row, yv) in phi.chunks_exact(k.max(1)).zip(y).take(p) {
        let yv = yv.f64();
        for (m, a) in work.mean.iter_mut().zip(row) {
            *m += a.f64() * yv;
        }
    }
    cholesky_solve(&work.chol, &mut work.mean, k);
    Some(2.0 * (0..k).map(|i| work.chol[i * k + i].ln()).sum::<f64>())
}

/// Why a chain's collapsed energy could not be evaluated.
const CHOLESKY_FAILED: &str =
    "the Cholesky factorisation of ΦᵀΦ + (κ/v)·I failed (non-finite features)";

/// The non-prior part of U_c (module doc) of every chain of a block and its gradient with
/// respect to the hidden groups, into `grads[c]` (the readout part zeroed); the value goes to
/// `energy[c]`, |Φm − y|² to `sq_error[c]`. A chain whose A cannot be factorised gets NaN
/// values and its reason in `failure[c]`.
#[allow(clippy::too_many_arguments)]
pub fn data_gradient_block<T: Real, M: FlatModel<T>>(
    model: &M,
    thetas: &[&[T]],
    x: &[T],
    y: &[T],
    p: usize,
    kappa: f64,
    temperature: f64,
    grads: &mut [&mut [T]],
    energy: &mut [f64],
    sq_error: &mut [f64],
    failure: &mut [Option<String>],
    scratch: &mut M::Scratch,
    work: &mut CollapsedWork<T>,
) {
    let b = thetas.len();
    let readout = model
        .groups()
        .last()
        .expect("a flat model has a readout group");
    let k = readout.len;
    let ridge = kappa / readout.prior_var;
    work.ensure(k, b);
    model.features_block(thetas, x, p, &mut work.phis[..b], scratch);
    let inv_kappa = 1.0 / kappa;
    let temp = T::of(temperature);
    for c in 0..b {
        work.dphis[c].resize(p * k, T::zero());
        failure[c] = None;
        let Some(log_det) = conditional(work, c, y, p, k, ridge) else {
            failure[c] = Some(CHOLESKY_FAILED.to_string());
            energy[c] = f64::NAN;
            sq_error[c] = f64::NAN;
            work.dphis[c].fill(T::zero());
            continue;
        };
        inverse_from_cholesky(&work.chol, &mut work.inverse_f64, k);
        for (dst, &src) in work.inverse.iter_mut().zip(&work.inverse_f64) {
            *dst = T::of(src);
        }
        for (dst, &src) in work.mean_t.iter_mut().zip(&work.mean) {
            *dst = T::of(src);
        }
        if p > 0 {
            // ΦA⁻¹ in one GEMM, into ∂U_c/∂Φ; the r mᵀ term is added row by row below.
            let phi = MatRef::from_row_major_slice(&work.phis[c][..p * k], p, k);
            let inv = MatRef::from_row_major_slice(&work.inverse[..], k, k);
            let out = MatMut::from_row_major_slice_mut(&mut work.dphis[c][..], p, k);
            matmul(out, Accum::Replace, phi, inv, T::one(), Par::Seq);
        }
        let mut sq = 0.0;
        let (phi, dphi) = (&work.phis[c], &mut work.dphis[c]);
        for mu in 0..p {
            let row = mu * k..(mu + 1) * k;
            let r = dot(&phi[row.clone()], &work.mean_t).f64() - y[mu].f64();
            sq += r * r;
            let r_t = T::of(r * inv_kappa);
            for (d, &m) in dphi[row].iter_mut().zip(&work.mean_t) {
                *d = r_t * m + temp * *d;
            }
        }
        let m2: f64 = work.mean.iter().map(|m| m * m).sum();
        sq_error[c] = sq;
        energy[c] = (sq + ridge * m2) * 0.5 * inv_kappa
            + 0.5 * temperature * (log_det - k as f64 * ridge.ln());
    }
    model.feature_backward_block(thetas, x, p, &work.dphis[..b], grads, scratch);
}

/// One exact draw of a readout from its conditional (module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct ReadoutDraw {
    /// a = m + √(κT)·L⁻ᵀz.
    pub readout: Vec<f64>,
    /// m = E[a | θ_hidden], for Rao–Blackwellised predictions.
    pub mean: Vec<f64>,
    /// |Φa − y|² on the training set.
    pub sq_error: f64,
    /// aᵀ∇_aU = aᵀA(a − m)/κ, whose mean is T·K (the configurational-temperature check).
    pub virial: f64,
}

/// Draws the readout of chain `c` of the block whose features are in `work.phis`
/// ([`FlatModel::features_block`]) from a | θ_hidden ~ 𝒩(m, κT·A⁻¹): K standard normals z from
/// the chain's stream, then a = m + √(κT)·L⁻ᵀz. `None` (and nothing drawn) when A cannot be
/// factorised.
#[allow(clippy::too_many_arguments)]
pub fn draw_readout<T: Real>(
    work: &mut CollapsedWork<T>,
    c: usize,
    y: &[T],
    p: usize,
    k: usize,
    kappa: f64,
    temperature: f64,
    prior_var: f64,
    rng: &mut ChaCha8Rng,
) -> Option<ReadoutDraw> {
    work.ensure(k, c + 1);
    conditional(work, c, y, p, k, kappa / prior_var)?;
    let mut z: Vec<f64> = (0..k).map(|_| T::standard_normal(rng).f64()).collect();
    solve_upper_transposed(&work.chol, &mut z, k);
    let scale = (kappa * temperature).sqrt();
    let readout: Vec<f64> = work
        .mean
        .iter()
        .zip(&z)
        .map(|(m, e)| m + scale * e)
        .collect();
    let phi = &work.phis[c];
    let sq_error = (0..p)
        .map(|mu| {
            let f: f64 = (0..k).map(|i| phi[mu * k + i].f64() * readout[i]).sum();
            (f - y[mu].f64()).powi(2)
        })
        .sum();
    let virial = (0..k)
        .map(|i| {
            let shift: f64 = (0..k)
                .map(|j| work.a[i * k + j] * (readout[j] - work.mean[j]))
                .sum();
            readout[i] * shift
        })
        .sum::<f64>()
        / kappa;
    Some(ReadoutDraw {
        readout,
        mean: work.mean[..k].to_vec(),
        sq_error,
        virial,
    })
}
