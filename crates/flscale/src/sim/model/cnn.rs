//! The CNN with non-overlapping patches (paper App. E.1.2; spec 02 "Models"), with exact
//! analytic gradients.
//!
//! The input x ∈ R^d is cut into N_w = d/S patches x_i = (x_{iS+1}, …, x_{(i+1)S}) and
//!
//!   f(x) = Σ_{i≤N_w} Σ_{j≤N} w²_ij σ(w¹_j·x_i)                          (App. E.1.2)
//!
//! with N shared filters w¹_j ∈ R^S and a readout w²_ij per (patch, channel). Priors, by
//! the paper's fan-in convention (§2, spec 02 "Models"): w¹_j ~ 𝒩(0, σ1²/S I_S), w²_ij ~
//! 𝒩(0, σ2²/(N·N_w)) (standard) or 𝒩(0, σ2²/(N·N_w)²) (mean-field).
//!
//! Data (the target of ringel_applications_2025 that App. E.1.2 recovers): x ~ 𝒩(0, I_d) —
//! or, with power-law inputs, every patch x_i ~ 𝒩(0, Σ_S), Σ_S = diag(k^{−a}), k = 1 … S (the
//! FCN's spectrum of [`crate::sim::data`] applied per patch: patch statistics are the same in every
//! window, as a shared filter presumes) — a teacher filter w* ∈ R^S (unit; random from the
//! seed or e_1) and y(x) = N_w^{−1/2} Σ_i g(Φ*_i), Φ*_i = w*·x_i/√(w*ᵀΣ_S w*) ~ 𝒩(0, 1), with g
//! the configured `[target]` (Ĥe_m or a Hermite sum), so that y has the variance of g. The overlaps ρ_j = w¹_j·w* (GP standard deviation
//! σ1/√S) give the outliers, R = E[ρ²] and the leading direction of E[w¹w¹ᵀ]. With one patch
//! (S = d) the model, its prior, the data and the chains' streams coincide with a two-layer
//! FCN's, which a test uses.
//!
//! Layout of one chain's θ: W¹ (N × S, row-major), then W² (N_w × N, row-major, w²_ij at
//! i·N + j). The first layer of all patches of all inputs is one GEMM: the n × d input
//! matrix *is* the (n·N_w) × S patch matrix, so H = X_p·W¹ᵀ and ∇_{W¹} = Δᵀ·X_p. The patch
//! matrix is the same for every chain, so a block of B chains stacks its filters into one
//! (B·N) × S matrix and both products become one GEMM for the whole block
//! ([`FlatModel::data_gradient_block`]), the FCN's first-layer blocking
//! ([`crate::sim::model::fcn`]). The readout is linear in the features σ(w¹_j·x_i), which the collapsed
//! sampler integrates out ([`crate::sim::model::collapsed`]).

use crate::sim::num::gemm::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use crate::activation::Activation;
use crate::sim::config::{ExperimentConfig, Parametrization};
use crate::sim::data::{input_std_devs, teacher_direction, teacher_scale, TargetFn};
use crate::sim::model::flat::{set_component, FlatData, FlatModel, ParamGroup};
use crate::sim::model::interface::{DataTerm, PreconditionedUnits};
use crate::sim::num::real::Real;

/// A CNN with non-overlapping patches (no weights: those live in the chains).
#[derive(Debug, Clone, PartialEq)]
pub struct CnnModel {
    /// Input dimension d = N_w·S.
    pub d: usize,
    /// Patch size S.
    pub patch: usize,
    /// Number of patches N_w.
    pub windows: usize,
    /// Number of channels (filters) N.
    pub channels: usize,
    /// σ.
    pub activation: Activation,
    /// Filters W¹ and readout W².
    pub groups: Vec<ParamGroup>,
}

impl CnnModel {
    /// The model of a validated `model.kind = "cnn"` experiment.
    pub fn from_config(cfg: &ExperimentConfig) -> CnnModel {
        let d = cfg.data.d;
        let patch = cfg.model.patch().unwrap_or(d);
        let windows = d / patch;
        let channels = cfg.model.widths[0];
        let sigma2 = cfg.sigma2();
        let fan_in = (channels * windows) as f64;
        let readout_var = match cfg.model.parametrization {
            Parametrization::Standard => sigma2[1] / fan_in,
            Parametrization::MeanField => sigma2[1] / (fan_in * fan_in),
        };
        let frozen = |l: usize| cfg.sampler.frozen_layers.contains(&l);
        CnnModel {
            d,
            patch,
            windows,
            channels,
            activation: cfg.model.activation,
            groups: vec![
                ParamGroup {
                    name: "layer1".into(),
                    len: channels * patch,
                    prior_var: sigma2[0] / patch as f64,
                    frozen: frozen(1),
                },
                ParamGroup {
                    name: "readout".into(),
                    len: windows * channels,
                    prior_var: readout_var,
                    frozen: frozen(2),
                },
            ],
        }
    }

    /// Train and test sets of the experiment (see the module doc): inputs of
    /// [`FlatData::draw`] with the input covariance applied to every patch, so that S = d
    /// reproduces the FCN's data exactly.
    pub fn dataset(&self, cfg: &ExperimentConfig) -> FlatData {
        let s = self.patch;
        let seed = cfg.sampler.seed;
        let teacher = teacher_direction(cfg.data.teacher, s, seed);
        let patch_std_devs = input_std_devs(&cfg.data, s);
        let scale = teacher_scale(&teacher, &patch_std_devs);
        let target = TargetFn::new(&cfg.target);
        let norm = 1.0 / (self.windows as f64).sqrt();
        let windows = self.windows;
        let label = |row: &[f64]| -> f64 {
            let sum: f64 = row
                .chunks_exact(s)
                .map(|xi| {
                    let phi = xi.iter().zip(&teacher).map(|(a, b)| a * b).sum::<f64>() / scale;
                    target.eval(phi, xi)
                })
                .sum();
            if windows == 1 {
                sum
            } else {
                norm * sum
            }
        };
        FlatData::draw(cfg, &patch_std_devs, windows, teacher.clone(), label)
    }

    fn forward<T: Real>(&self, theta: &[T], x: &[T], n: usize, sc: &mut CnnScratch<T>) {
        let (s, nw, nc) = (self.patch, self.windows, self.channels);
        let rows = n * nw;
        sc.h.resize(rows * nc, T::zero());
        sc.act.resize(rows * nc, T::zero());
        sc.der.resize(rows * nc, T::zero());
        sc.f.resize(n, T::zero());
        if rows > 0 {
            let xp = MatRef::from_row_major_slice(&x[..rows * s], rows, s);
            let w1 = MatRef::from_row_major_slice(&theta[..nc * s], nc, s);
            let h = MatMut::from_row_major_slice_mut(&mut sc.h[..], rows, nc);
            matmul(h, Accum::Replace, xp, w1.transpose(), T::one(), Par::Seq);
        }
        self.activation.apply(&sc.h, &mut sc.act, &mut sc.der);
        let w2 = &theta[nc * s..];
        for (mu, f) in sc.f.iter_mut().enumerate() {
            let a = &sc.act[mu * nw * nc..(mu + 1) * nw * nc];
            *f = a
                .iter()
                .zip(w2)
                .fold(T::zero(), |acc, (&ai, &wi)| acc + ai * wi);
        }
    }
    /// The first layer of a block of chains in one GEMM (module doc): the filters of chain c
    /// are rows c·N … (c + 1)·N of a (B·N) × S matrix, so H = X_p·W¹ᵀ is (n·N_w) × (B·N), and
    /// σ(H), σ′(H) follow; chain c's columns are c·N … (c + 1)·N.
    fn forward_block<T: Real>(&self, thetas: &[&[T]], x: &[T], n: usize, sc: &mut CnnScratch<T>) {
        let (s, nw, nc) = (self.patch, self.windows, self.channels);
        let (rows, bn) = (n * nw, thetas.len() * nc);
        sc.filters.clear();
        for theta in thetas {
            sc.filters.extend_from_slice(&theta[..nc * s]);
        }
        sc.h.resize(rows * bn, T::zero());
        sc.act.resize(rows * bn, T::zero());
        sc.der.resize(rows * bn, T::zero());
        if rows > 0 && bn > 0 {
            let xp = MatRef::from_row_major_slice(&x[..rows * s], rows, s);
            let w1 = MatRef::from_row_major_slice(&sc.filters[..], bn, s);
            let h = MatMut::from_row_major_slice_mut(&mut sc.h[..], rows, bn);
            matmul(h, Accum::Replace, xp, w1.transpose(), T::one(), Par::Seq);
        }
        self.activation.apply(&sc.h, &mut sc.act, &mut sc.der);
    }

    /// ∇_{W¹} of every chain of the block from the back-propagated δ in `sc.delta` ((n·N_w) ×
    /// (B·N), same layout as H) in one GEMM, Δᵀ·X_p, into the filter part of `grads[c]`.
    fn filter_gradients_block<T: Real>(
        &self,
        x: &[T],
        n: usize,
        grads: &mut [&mut [T]],
        sc: &mut CnnScratch<T>,
    ) {
        let (s, nw, nc) = (self.patch, self.windows, self.channels);
        let (rows, bn) = (n * nw, grads.len() * nc);
        sc.filter_grads.resize(bn * s, T::zero());
        if rows > 0 && bn > 0 {
            let xp = MatRef::from_row_major_slice(&x[..rows * s], rows, s);
            let delta = MatRef::from_row_major_slice(&sc.delta[..rows * bn], rows, bn);
            let g = MatMut::from_row_major_slice_mut(&mut sc.filter_grads[..], bn, s);
            matmul(g, Accum::Replace, delta.transpose(), xp, T::one(), Par::Seq);
        } else {
            sc.filter_grads.fill(T::zero());
        }
        for (grad, g) in grads.iter_mut().zip(sc.filter_grads.chunks_exact(nc * s)) {
            grad[..nc * s].copy_from_slice(g);
        }
    }
}

/// Work buffers of one chain's CNN evaluation.
#[derive(Debug, Default)]
pub struct CnnScratch<T> {
    h: Vec<T>,
    act: Vec<T>,
    der: Vec<T>,
    f: Vec<T>,
    delta: Vec<T>,
    /// A block's filters side by side, (B·N) × S.
    filters: Vec<T>,
    /// A block's filter gradients, (B·N) × S.
    filter_grads: Vec<T>,
    /// A block's readouts and their gradients in the layout of one sample's rows of H,
    /// N_w × (B·N).
    readout: Vec<T>,
    readout_grad: Vec<T>,
    /// Per column of H (chain c's columns c·N … (c + 1)·N): Σ_i σ(h_ij) w²_ij of the current
    /// sample, and the chain's residual r.
    column_sum: Vec<T>,
    column_residual: Vec<T>,
}

impl<T: Real> FlatModel<T> for CnnModel {
    type Scratch = CnnScratch<T>;

    fn groups(&self) -> &[ParamGroup] {
        &self.groups
    }

    fn sample_len(&self) -> usize {
        self.d
    }

    /// A chain's columns of the block's H (n·N_w × N floats): the FCN's cache rule on the
    /// first-layer activations ([`crate::sim::ensemble::fcn::block_size`]).
    fn chain_bytes(&self, p: usize, bytes_per_float: usize) -> usize {
        p.max(1) * self.windows * self.channels * bytes_per_float
    }

    /// [`FlatModel::data_gradient`] of a block of chains, the first layer and its gradient
    /// one GEMM each over the block ([`CnnModel::forward_block`]), the element-wise passes along
    /// whole rows of the block. Per chain the readout gradient and δ are the one-chain path's
    /// operations in its order; f sums the same products in another order (patch by patch
    /// per column, then over the chain's columns), so the two agree to rounding (the tests
    /// keep the one-chain path as reference); no chain's numbers depend on the block. Not
    /// inlined: inlined into the engine's evaluation its element-wise passes compiled ≈ 20 %
    /// slower (BENCHMARKS.md, "One engine").
    #[inline(never)]
    fn data_gradient_block(
        &self,
        thetas: &[&[T]],
        data: &DataTerm<'_, T>,
        grads: &mut [&mut [T]],
        sq: &mut [f64],
        sc: &mut CnnScratch<T>,
    ) {
        let (x, y, n, inv_kappa) = (data.x, data.y, data.p, T::of(1.0 / data.kappa));
        let (s, nw, nc) = (self.patch, self.windows, self.channels);
        let (rows, bn) = (n * nw, thetas.len() * nc);
        self.forward_block(thetas, x, n, sc);
        sc.delta.resize(rows * bn, T::zero());
        // The block's readouts in the layout of one sample's N_w rows of H (row i, column
        // c·N + j holds w²_ij of chain c), so that every element-wise pass below runs along
        // whole contiguous rows of B·N entries.
        sc.readout.resize(nw * bn, T::zero());
        sc.readout_grad.clear();
        sc.readout_grad.resize(nw * bn, T::zero());
        for (c, theta) in thetas.iter().enumerate() {
            for (i, w) in theta[nc * s..].chunks_exact(nc).enumerate() {
                sc.readout[i * bn + c * nc..i * bn + (c + 1) * nc].copy_from_slice(w);
            }
        }
        sc.column_sum.resize(bn, T::zero());
        sc.column_residual.resize(bn, T::zero());
        sq.fill(0.0);
        let per_sample = nw * bn;
        for mu in 0..n {
            let span = mu * per_sample..(mu + 1) * per_sample;
            let act = &sc.act[span.clone()];
            let der = &sc.der[span.clone()];
            let delta = &mut sc.delta[span];
            // f_c = Σ_j Σ_i σ(h_ij) w²_ij: column sums over the patches, then chain c's columns.
            sc.column_sum.fill(T::zero());
            for (a, w) in act.chunks_exact(bn).zip(sc.readout.chunks_exact(bn)) {
                for ((sum, &ak), &wk) in sc.column_sum.iter_mut().zip(a).zip(w) {
                    *sum += ak * wk;
                }
            }
            let chains = sc
                .column_sum
                .chunks_exact(nc)
                .zip(sc.column_residual.chunks_exact_mut(nc));
            for ((sums, residual), sq_c) in chains.zip(sq.iter_mut()) {
                let f = sums.iter().fold(T::zero(), |acc, &v| acc + v);
                let e = f - y[mu];
                *sq_c += (e * e).f64();
                residual.fill(e * inv_kappa);
            }
            // ∂/∂w²_ij += r σ(h_ij), δ_ij = r w²_ij σ′(h_ij).
            let rows = act
                .chunks_exact(bn)
                .zip(der.chunks_exact(bn))
                .zip(delta.chunks_exact_mut(bn))
                .zip(
                    sc.readout
                        .chunks_exact(bn)
                        .zip(sc.readout_grad.chunks_exact_mut(bn)),
                );
            for (((a, dr), dl), (w, g)) in rows {
                let cells = g
                    .iter_mut()
                    .zip(dl.iter_mut())
                    .zip(a.iter().zip(dr))
                    .zip(w.iter().zip(&sc.column_residual));
                for (((gk, dk), (&ak, &derk)), (&wk, &r)) in cells {
                    *gk += r * ak;
                    *dk = r * wk * derk;
                }
            }
        }
        for (c, grad) in grads.iter_mut().enumerate() {
            for (i, g) in grad[nc * s..].chunks_exact_mut(nc).enumerate() {
                g.copy_from_slice(&sc.readout_grad[i * bn + c * nc..i * bn + (c + 1) * nc]);
            }
        }
        self.filter_gradients_block(x, n, grads, sc);
    }

    /// Φ_{μ,(i,j)} = σ(w¹_j·x_{μ,i}), K = N_w·N (readout index i·N + j).
    fn features_block(
        &self,
        thetas: &[&[T]],
        x: &[T],
        n: usize,
        phis: &mut [Vec<T>],
        sc: &mut CnnScratch<T>,
    ) {
        let (nw, nc) = (self.windows, self.channels);
        let bn = thetas.len() * nc;
        self.forward_block(thetas, x, n, sc);
        for (c, phi) in phis.iter_mut().enumerate() {
            phi.clear();
            for row in 0..n * nw {
                let at = row * bn + c * nc;
                phi.extend_from_slice(&sc.act[at..at + nc]);
            }
        }
    }

    /// δ_{μ,i,j} = D_{μ,(i,j)}·σ′(h_{μ,i,j}) in the layout of H, then ∇_{W¹} = Δᵀ·X_p.
    fn feature_backward_block(
        &self,
        _thetas: &[&[T]],
        x: &[T],
        n: usize,
        dphis: &[Vec<T>],
        grads: &mut [&mut [T]],
        sc: &mut CnnScratch<T>,
    ) {
        let (s, nw, nc) = (self.patch, self.windows, self.channels);
        let (rows, bn) = (n * nw, grads.len() * nc);
        sc.delta.resize(rows * bn, T::zero());
        for (c, dphi) in dphis.iter().enumerate().take(grads.len()) {
            for row in 0..rows {
                let at = row * bn + c * nc;
                let d = &dphi[row * nc..(row + 1) * nc];
                for ((delta, &der), &dv) in sc.delta[at..at + nc]
                    .iter_mut()
                    .zip(&sc.der[at..at + nc])
                    .zip(d)
                {
                    *delta = dv * der;
                }
            }
        }
        self.filter_gradients_block(x, n, grads, sc);
        for grad in grads.iter_mut() {
            grad[nc * s..].fill(T::zero());
        }
    }

    fn predict(&self, theta: &[T], x: &[T], n: usize, f: &mut [T], sc: &mut CnnScratch<T>) {
        self.forward(theta, x, n, sc);
        f.copy_from_slice(&sc.f[..n]);
    }

    /// ∂f/∂w²_ij = σ(h_ij), ∂f/∂w¹_j = Σ_i w²_ij σ′(h_ij) x_i with h_ij = w¹_j·x_i.
    fn data_gradient(
        &self,
        theta: &[T],
        data: &DataTerm<'_, T>,
        grad: &mut [T],
        sc: &mut CnnScratch<T>,
    ) -> f64 {
        let (x, y, n, inv_kappa) = (data.x, data.y, data.p, T::of(1.0 / data.kappa));
        let (s, nw, nc) = (self.patch, self.windows, self.channels);
        self.forward(theta, x, n, sc);
        let rows = n * nw;
        let (g1, g2) = grad.split_at_mut(nc * s);
        g2.fill(T::zero());
        let w2 = &theta[nc * s..];
        sc.delta.resize(rows * nc, T::zero());
        let mut sq = 0.0;
        for mu in 0..n {
            let e = sc.f[mu] - y[mu];
            sq += (e * e).f64();
            let r = e * inv_kappa;
            let span = mu * nw * nc..(mu + 1) * nw * nc;
            let a = &sc.act[span.clone()];
            let der = &sc.der[span.clone()];
            let delta = &mut sc.delta[span];
            for k in 0..nw * nc {
                g2[k] += r * a[k];
                delta[k] = r * w2[k] * der[k];
            }
        }
        if rows > 0 {
            let xp = MatRef::from_row_major_slice(&x[..rows * s], rows, s);
            let delta = MatRef::from_row_major_slice(&sc.delta[..], rows, nc);
            let g = MatMut::from_row_major_slice_mut(g1, nc, s);
            matmul(g, Accum::Replace, delta.transpose(), xp, T::one(), Par::Seq);
        } else {
            g1.fill(T::zero());
        }
        sq
    }

    /// ρ_j = w¹_j·w* for every filter.
    fn overlaps(&self, theta: &[T], teacher: &[f64]) -> Vec<f64> {
        theta[..self.channels * self.patch]
            .chunks_exact(self.patch)
            .map(|w| w.iter().zip(teacher).map(|(a, b)| a.f64() * b).sum())
            .collect()
    }

    /// σ1/√S, the prior standard deviation of ρ_j (outliers beyond 3σ1/√S, App. F.0.1).
    fn overlap_scale(&self) -> f64 {
        self.groups[0].prior_var.sqrt()
    }

    fn filters<'a>(&self, theta: &'a [T]) -> Option<(&'a [T], usize)> {
        Some((&theta[..self.channels * self.patch], self.patch))
    }

    /// The filters: N units of S weights per chain.
    fn preconditioned_units(&self) -> Option<PreconditionedUnits> {
        Some(PreconditionedUnits {
            group: 0,
            units: self.channels,
            fan_in: self.patch,
        })
    }

    /// The FCN neurons' Gauss–Newton block ([`crate::sim::model::collapsed::neuron_curvature_blocks`])
    /// summed over the windows: filter j of a chain with conditional readout mean m has
    /// v·G_j = I + (v/κ)·Σ_μ g_μj g_μjᵀ, g_μj = ∂f(x_μ)/∂w¹_j = Σ_i m_ij σ′(w¹_j·x_μi) x_μi —
    /// the Hessian of |Φm − y|²/(2κ) + |w¹_j|²/(2v) in w¹_j with the residual term dropped
    /// (Martens, JMLR 21 (2020), sec. 8), as for the FCN; with one window it is the FCN's
    /// (m_j²/κ)·Σ_μ σ′²·x_μx_μᵀ.
    fn unit_curvature_blocks(
        &self,
        thetas: &[&[T]],
        means: &[Option<Vec<f64>>],
        x: &[T],
        n: usize,
        kappa: f64,
        sc: &mut CnnScratch<T>,
    ) -> Option<Vec<f64>> {
        let (s, nw, nc) = (self.patch, self.windows, self.channels);
        let (bn, ss) = (thetas.len() * nc, s * s);
        let scale = self.groups[0].prior_var / kappa;
        self.forward_block(thetas, x, n, sc);
        let mut out = vec![0.0; bn * ss];
        for blk in out.chunks_mut(ss) {
            for a in 0..s {
                blk[a * s + a] = 1.0;
            }
        }
        let mut g = vec![0.0; s];
        for (c, mean) in means.iter().enumerate() {
            let Some(m) = mean else { continue };
            for mu in 0..n {
                for j in 0..nc {
                    g.fill(0.0);
                    for i in 0..nw {
                        let row = mu * nw + i;
                        let w = m[i * nc + j] * sc.der[row * bn + c * nc + j].f64();
                        for (gk, xk) in g.iter_mut().zip(&x[row * s..(row + 1) * s]) {
                            *gk += w * xk.f64();
                        }
                    }
                    // Lower triangle only; mirrored below.
                    let blk = &mut out[(c * nc + j) * ss..(c * nc + j + 1) * ss];
                    for a in 0..s {
                        let wa = scale * g[a];
                        for k in 0..=a {
                            blk[a * s + k] += wa * g[k];
                        }
                    }
                }
            }
        }
        for blk in out.chunks_mut(ss) {
            for a in 0..s {
                for k in 0..a {
                    blk[k * s + a] = blk[a * s + k];
                }
            }
        }
        Some(out)
    }

    /// The FCN's hot start ([`crate::sim::ensemble::fcn::Ensemble::hot_start`], spec 02) on the
    /// filters: filter j's component along w* is set to ±σ1 (+ for even j), its orthogonal
    /// part and the readout keep their prior draws; with one patch (S = d) it is the FCN's.
    fn hot_start(&self, theta: &mut [T], teacher: &[f64]) {
        let sigma1 = (self.groups[0].prior_var * self.patch as f64).sqrt();
        let filters = &mut theta[..self.channels * self.patch];
        for (j, row) in filters.chunks_exact_mut(self.patch).enumerate() {
            let target = if j % 2 == 0 { sigma1 } else { -sigma1 };
            set_component(row, teacher, target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::config::ExperimentConfig;
    use crate::sim::driver::run::Run;
    use crate::sim::model::flat::gradient_error;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, StandardNormal};

    fn config(text: &str) -> ExperimentConfig {
        ExperimentConfig::from_toml(text, "test.toml").unwrap()
    }

    fn cnn_toml(d: usize, patch: usize, n: usize, p: usize, activation: &str) -> String {
        format!(
            r#"
[model]
kind = "cnn"
activation = "{activation}"
widths = [{n}]
patch = {patch}
[data]
d = {d}
p = {p}
n_test = 300
[target]
hermite = 3
[sampler]
kappa = 0.5
step = 0.002
steps = 300
burn_in = 100
thin = 20
chains = 4
seed = 5
precision = "f64"
"#
        )
    }

    #[test]
    fn analytic_gradients_match_finite_differences() {
        for act in ["erf", "tanh", "poly"] {
            let cfg = config(&cnn_toml(12, 4, 5, 7, act));
            let model = CnnModel::from_config(&cfg);
            let data = model.dataset(&cfg);
            let mut rng = ChaCha8Rng::seed_from_u64(3);
            let theta: Vec<f64> = (0..FlatModel::<f64>::n_params(&model))
                .map(|_| StandardNormal.sample(&mut rng))
                .collect();
            let err = gradient_error(&model, &theta, &data.x_train, &data.y_train, 1e-3);
            assert!(err < 1e-6, "{act}: relative gradient error {err}");
        }
    }

    /// f(x) = Σ_i Σ_j w²_ij σ(w¹_j·x_i) evaluated by the definition, one term at a time.
    #[test]
    fn forward_is_the_patch_sum_of_app_e12() {
        let cfg = config(&cnn_toml(6, 2, 3, 4, "erf"));
        let model = CnnModel::from_config(&cfg);
        let data = model.dataset(&cfg);
        let theta: Vec<f64> = (0..FlatModel::<f64>::n_params(&model))
            .map(|i| ((i * 7 % 11) as f64 - 5.0) / 9.0)
            .collect();
        let mut f = vec![0.0; 4];
        model.predict(&theta, &data.x_train, 4, &mut f, &mut CnnScratch::default());
        for (mu, x) in data.x_train.chunks(6).enumerate() {
            let mut want = 0.0;
            for i in 0..3 {
                for j in 0..3 {
                    let h: f64 = (0..2).map(|k| theta[j * 2 + k] * x[i * 2 + k]).sum();
                    want += theta[6 + i * 3 + j] * libm::erf(h);
                }
            }
            assert!((f[mu] - want).abs() < 1e-12, "{} vs {want}", f[mu]);
        }
        // The target is N_w^{-1/2} Σ_i Ĥe3(w*·x_i): unit variance.
        let n = data.y_test.len() as f64;
        let var = data.y_test.iter().map(|v| v * v).sum::<f64>() / n;
        assert!((var - 1.0).abs() < 0.35, "{var}");
    }

    /// With one patch (S = d) the CNN is the two-layer FCN: same prior, data, streams and
    /// dynamics, so the whole run — alignment, MSEs, overlaps, moments — agrees with the FCN
    /// engine's to rounding (the two evaluate the same sums through differently shaped GEMMs),
    /// also with cold and hot starts compared, power-law inputs, MALA and `adapt_step`.
    #[test]
    fn one_patch_reproduces_the_two_layer_fcn_run() {
        let base = cnn_toml(6, 6, 5, 30, "erf");
        let variants = [
            base.clone(),
            base.replace("seed = 5", "seed = 5\nstart = \"both\""),
            base.replace("n_test = 300", "n_test = 300\ncovariance = \"power-law\""),
            base.replace("seed = 5", "seed = 5\nmala = true")
                .replace("step = 0.002", "step = 0.02"),
            base.replace("seed = 5", "seed = 5\nadapt_step = true"),
        ];
        for text in variants {
            let cnn = config(&text);
            let fcn_text = text
                .replace("kind = \"cnn\"", "kind = \"fcn\"")
                .replace("patch = 6\n", "");
            let fcn = config(&fcn_text);
            let a = Run::new(&cnn).run().unwrap().summary;
            let b = Run::new(&fcn).run().unwrap().summary;
            // Both engines' λ_max probes are `num::power` from the same start vector in the
            // same layout, so also the adapted runs agree to rounding.
            let tolerance = 1e-8;
            let close = |x: Option<f64>, y: Option<f64>, what: &str| {
                let (x, y) = (x.unwrap(), y.unwrap());
                assert!(
                    (x - y).abs() <= tolerance * (1.0 + y.abs()),
                    "{what}: cnn {x} vs fcn {y} in\n{text}"
                );
            };
            close(a.alignment, b.alignment, "alignment");
            close(a.test_mse, b.test_mse, "test_mse");
            close(a.train_mse, b.train_mse, "train_mse");
            close(a.r_overlap2, b.r_overlap2, "r_overlap2");
            close(a.outliers_layer1, b.outliers_layer1, "outliers");
            close(
                a.leading_direction_overlap,
                b.leading_direction_overlap,
                "leading direction",
            );
            for (g, h) in a.diagnostics.groups.iter().zip(&b.diagnostics.groups) {
                assert_eq!(g.group, h.group);
                close(g.second_moment, h.second_moment, &g.group);
                close(g.temperature, h.temperature, &g.group);
            }
            close(
                Some(a.outlier_threshold),
                Some(b.outlier_threshold),
                "threshold",
            );
            close(
                Some(a.diagnostics.step),
                Some(b.diagnostics.step),
                "adapted step",
            );
            assert_eq!(
                a.diagnostics.acceptance_rate, b.diagnostics.acceptance_rate,
                "MALA acceptance"
            );
            assert_eq!(a.equilibrated, b.equilibrated);
            assert_eq!(a.hot_start.is_some(), b.hot_start.is_some());
            if let (Some(h), Some(k)) = (&a.hot_start, &b.hot_start) {
                close(h.alignment, k.alignment, "hot alignment");
                close(h.r_overlap2, k.r_overlap2, "hot R");
            }
        }
    }

    /// Power-law inputs: every patch has the spectrum Σ_kk = k^{−a}, k = 1 … S, and the
    /// patch features w*·x_i/√(w*ᵀΣw*) are unit Gaussians, so the Ĥe3 target keeps unit
    /// variance (Monte Carlo over 4000 inputs).
    #[test]
    fn power_law_patches_have_the_spectrum_and_a_unit_variance_target() {
        let text = cnn_toml(8, 4, 3, 5, "erf")
            .replace("n_test = 300", "n_test = 4000\ncovariance = \"power-law\"");
        let cfg = config(&text);
        let model = CnnModel::from_config(&cfg);
        let data = model.dataset(&cfg);
        let n = data.y_test.len() as f64;
        for i in 0..8 {
            let var = data
                .x_test
                .iter()
                .skip(i)
                .step_by(8)
                .map(|v| v * v)
                .sum::<f64>()
                / n;
            let want = ((i % 4 + 1) as f64).powf(-1.1);
            assert!(
                (var / want - 1.0).abs() < 0.08,
                "coordinate {i}: {var} vs {want}"
            );
        }
        let var = data.y_test.iter().map(|v| v * v).sum::<f64>() / n;
        assert!((var - 1.0).abs() < 0.2, "{var}");
    }

    /// P = 0 samples the prior: second and fourth moments of w¹ (σ1²/S) and w² (σ2²/(N·N_w),
    /// mean-field σ2²/(N·N_w)²) within Monte Carlo error.
    #[test]
    fn p_zero_recovers_the_prior_moments() {
        for param in ["standard", "mean-field"] {
            let text = cnn_toml(6, 2, 4, 0, "erf")
                .replace("step = 0.002", "step = 1e-4")
                .replace("steps = 300", "steps = 6000")
                .replace("burn_in = 100", "burn_in = 1000")
                .replace("chains = 4", "chains = 24")
                .replace(
                    "patch = 2\n",
                    &format!("patch = 2\nparametrization = \"{param}\"\n"),
                )
                + "[priors]\nsigma2 = [0.02, 0.5]\n";
            let cfg = config(&text);
            let r = Run::new(&cfg).run().unwrap();
            // η/(2v) ≤ 1.5 % ULA bias; correlation times v/η ≤ 100 steps.
            let want = [
                0.02 / 2.0,
                if param == "standard" {
                    0.5 / 12.0
                } else {
                    0.5 / 144.0
                },
            ];
            for (stats, v) in r.summary.diagnostics.groups.iter().zip(want) {
                assert_eq!(stats.prior_variance, Some(v));
                let m2 = stats.second_moment.unwrap() / v;
                let m4 = stats.fourth_moment.unwrap() / (3.0 * v * v);
                assert!((m2 - 1.0).abs() < 0.12, "{param} {}: {m2}", stats.group);
                assert!((m4 - 1.0).abs() < 0.3, "{param} {}: {m4}", stats.group);
            }
            // R = E[ρ²] = σ1²/S under the prior.
            let r2 = r.summary.r_overlap2.unwrap() / 0.01;
            assert!((r2 - 1.0).abs() < 0.15, "{param}: R = {r2}");
        }
    }
}
