//! The softmax attention layer of paper App. E.3 (spec 02 "Models"), its token data and its
//! cubic target, with exact analytic gradients.
//!
//! An input is a sequence X ∈ R^{L×d} of L tokens x^a (rows). With H heads,
//!
//!   f(X) = (1/√L) Σ_h Σ_{a,b} @_{ab;h}(X) (w_h·x^b),
//!   @_{ab;h}(X) = exp(x^aᵀA_h x^b) / Σ_c exp(x^aᵀA_h x^c)              (App. E.3)
//!
//! Priors (App. E.3, the lazy pattern q_h = 𝒩(0, I/d²) of A_h and the action
//! S = (d²Tr[AᵀA] + …)/2 of E.3.1): every entry of A_h ~ 𝒩(0, σ_A²/d²) and w_h ~
//! 𝒩(0, σ_w²/d · I_d), with `priors.sigma2 = [σ_A², σ_w²]` (default 1, the paper's values).
//!
//! Data and target. The tokens are i.i.d. x^a ~ 𝒩(0, I_d). The paper's text names the
//! mechanism but its equation for the target (Eq. 88) is not in the available source; App. E.3
//! says that a specialising (A_h)_12 of order M/d "together with a spike in [w_h]_3" creates
//! strong alignment and that "other combinations of 1, 2, 3 indices … lead to the same
//! scaling", and §6 calls it "a cubic target". Expanding the softmax around uniform attention,
//! @_{ab} ≈ (1 + x^aᵀA x^b)/L, the (A)_12·(w)_3 term of f is proportional to
//! (Σ_a x^a_1)(Σ_b x^b_2 x^b_3). The target is that term at unit variance:
//!
//!   y(X) = (1/L)·(Σ_a x^a_1)·(Σ_b x^b_2 x^b_3)
//!
//! (the two sums are independent with variance L each, so E[y] = 0 and E[y²] = 1). With
//! power-law inputs every token is x^a ~ 𝒩(0, diag(k^{−a})), k = 1 … d (the spectrum of
//! [`crate::sim::data`]), and the coordinates in y are standardised, x^a_k/√(Σ_kk), so that y keeps
//! unit variance (the analogue of the FCN's Φ* = w*·x/√(w*ᵀΣw*)). The
//! overlap of a head with this teacher structure is ρ_h = d·⟨A_h, T⟩_F with
//! T = (e_1e_2ᵀ + e_1e_3ᵀ)/√2 — the (1,2) and (1,3) entries that realise it — so ρ_h ~
//! 𝒩(0, σ_A²) under the prior; outliers are heads with |ρ_h| > 3σ_A, and R = E[ρ_h²].
//!
//! Hot start (`sampler.start = "hot"`, spec 02's teacher-aligned start). The mechanism above
//! is a head whose A_h has an O(1) component along T together with a value vector with a
//! component along u = (e_2 + e_3)/√2 — the value entries that T's (1,2) and (1,3) entries
//! pair with. Teacher-aligned therefore means: ⟨A_h, T⟩_F = ±σ_A (ρ_h = ±d·σ_A, the norm the
//! whole of A_h has under the prior, as the FCN sets w_i·w* to ±σ1 = the prior norm of w_i)
//! and w_h·u = ±σ_w with the same sign, + for even heads and − for odd ones; every other
//! component keeps its prior draw. To linear order in A_h (@_ab ≈ (1 + S_ab − mean_c S_ac)/L)
//! each head then contributes +σ_Aσ_w(1 − 1/L)/√L · y(X) to f, whatever its sign.
//!
//! Gradients, per sample and head, with P = @_h, v_b = w_h·x^b, u_a = Σ_b P_ab v_b and
//! c_b = Σ_a P_ab: ∂f/∂w_h = (1/√L) Xᵀc and ∂f/∂A_h = XᵀGX with
//! G_ab = (1/√L) P_ab (v_b − u_a) (the softmax Jacobian ∂P_ab/∂S_ac = P_ab(δ_bc − P_ac)).
//!
//! Layout of one chain's θ: A_1 … A_H (each d × d row-major), then w_1 … w_H.

use crate::sim::num::gemm::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use crate::sim::config::ExperimentConfig;
use crate::sim::data::input_std_devs;
use crate::sim::model::flat::{set_component, FlatData, FlatModel, ParamGroup};
use crate::sim::model::interface::{DataTerm, PreconditionedUnits};
use crate::sim::num::real::Real;

/// A softmax attention layer (no weights: those live in the chains).
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionModel {
    /// Token dimension d.
    pub d: usize,
    /// Context length L.
    pub tokens: usize,
    /// Heads H.
    pub heads: usize,
    /// Attention matrices A_h, value vectors w_h.
    pub groups: Vec<ParamGroup>,
}

/// y(X) = (1/L)(Σ_a x^a_1/s_1)(Σ_b x^b_2 x^b_3/(s_2 s_3)) of one L × d sequence, s_k the
/// standard deviation of token coordinate k (all 1 for isotropic tokens; module doc).
pub fn cubic_token_target(x: &[f64], tokens: usize, d: usize, std_devs: &[f64]) -> f64 {
    let mut first = 0.0;
    let mut pair = 0.0;
    for t in x.chunks_exact(d).take(tokens) {
        first += t[0] / std_devs[0];
        pair += t[1] * t[2] / (std_devs[1] * std_devs[2]);
    }
    first * pair / tokens as f64
}

impl AttentionModel {
    /// The model of a validated `model.kind = "attention"` experiment.
    pub fn from_config(cfg: &ExperimentConfig) -> AttentionModel {
        let d = cfg.data.d;
        let heads = cfg.model.heads().unwrap_or(1);
        let sigma2 = cfg.sigma2();
        let frozen = |l: usize| cfg.sampler.frozen_layers.contains(&l);
        let df = d as f64;
        AttentionModel {
            d,
            tokens: cfg.data.tokens.unwrap_or(1),
            heads,
            groups: vec![
                ParamGroup {
                    name: "attention".into(),
                    len: heads * d * d,
                    prior_var: sigma2[0] / (df * df),
                    frozen: frozen(1),
                },
                ParamGroup {
                    name: "value".into(),
                    len: heads * d,
                    prior_var: sigma2[1] / df,
                    frozen: frozen(2),
                },
            ],
        }
    }

    /// Train (P sequences) and test (n_test sequences) sets of i.i.d. tokens with the
    /// experiment's input covariance (`data.covariance`, per token) and the cubic target; the
    /// data streams 1 and 2 of [`crate::sim::data::Dataset::generate`], so that the test set does
    /// not change with P.
    pub fn dataset(&self, cfg: &ExperimentConfig) -> FlatData {
        let (d, l) = (self.d, self.tokens);
        let token_std_devs = input_std_devs(&cfg.data, d);
        let label = |s: &[f64]| cubic_token_target(s, l, d, &token_std_devs);
        FlatData::draw(cfg, &token_std_devs, l, Vec::new(), label)
    }

    /// f of one sequence `x` (L × d); leaves @_h, v, u, c of every head in `sc`.
    fn forward_sample<T: Real>(&self, theta: &[T], x: &[T], sc: &mut AttentionScratch<T>) -> T {
        let (d, l, heads) = (self.d, self.tokens, self.heads);
        sc.ensure(l, d, heads);
        let xm = MatRef::from_row_major_slice(x, l, d);
        let mut f = T::zero();
        for h in 0..heads {
            let a = MatRef::from_row_major_slice(&theta[h * d * d..(h + 1) * d * d], d, d);
            {
                let xa = MatMut::from_row_major_slice_mut(&mut sc.xa[..], l, d);
                matmul(xa, Accum::Replace, xm, a, T::one(), Par::Seq);
            }
            let p = &mut sc.att[h * l * l..(h + 1) * l * l];
            let xa = MatRef::from_row_major_slice(&sc.xa[..], l, d);
            let s = MatMut::from_row_major_slice_mut(&mut p[..], l, l);
            matmul(s, Accum::Replace, xa, xm.transpose(), T::one(), Par::Seq);
        }
        // Row softmax of every head's scores at once, shifted by the row maximum for range
        // safety (vectorised in f32).
        T::softmax_rows(&mut sc.att[..heads * l * l], l);
        for h in 0..heads {
            let w = &theta[heads * d * d + h * d..heads * d * d + (h + 1) * d];
            let p = &sc.att[h * l * l..(h + 1) * l * l];
            let v = &mut sc.v[h * l..(h + 1) * l];
            for (vb, xb) in v.iter_mut().zip(x.chunks_exact(d)) {
                *vb = xb
                    .iter()
                    .zip(w)
                    .fold(T::zero(), |acc, (&xi, &wi)| acc + xi * wi);
            }
            let u = &mut sc.u[h * l..(h + 1) * l];
            let c = &mut sc.c[h * l..(h + 1) * l];
            c.fill(T::zero());
            for (ua, row) in u.iter_mut().zip(p.chunks_exact(l)) {
                for (cb, &pab) in c.iter_mut().zip(row) {
                    *cb += pab;
                }
                *ua = dot_lanes(row, v);
                f += *ua;
            }
        }
        f / T::of((l as f64).sqrt())
    }

    /// Adds r·∇_θ f of the sequence last passed to [`Self::forward_sample`] into `grad`.
    fn backward_sample<T: Real>(
        &self,
        x: &[T],
        r: T,
        grad: &mut [T],
        sc: &mut AttentionScratch<T>,
    ) {
        let (d, l, heads) = (self.d, self.tokens, self.heads);
        let coef = r / T::of((l as f64).sqrt());
        let (ga_all, gw_all) = grad.split_at_mut(heads * d * d);
        for h in 0..heads {
            let c = &sc.c[h * l..(h + 1) * l];
            let gw = &mut gw_all[h * d..(h + 1) * d];
            for (xb, &cb) in x.chunks_exact(d).zip(c) {
                let s = coef * cb;
                for (g, &xi) in gw.iter_mut().zip(xb) {
                    *g += s * xi;
                }
            }
            self.add_score_gradient(x, coef, h, &mut ga_all[h * d * d..(h + 1) * d * d], sc);
        }
    }

    /// Adds XᵀGX, G_ab = coef·P_ab(v_b − u_a), to head h's ∂/∂A_h (`ga`, d × d), with P, v and u
    /// of head h in `sc` (module doc, "Gradients").
    fn add_score_gradient<T: Real>(
        &self,
        x: &[T],
        coef: T,
        h: usize,
        ga: &mut [T],
        sc: &mut AttentionScratch<T>,
    ) {
        let (d, l) = (self.d, self.tokens);
        let xm = MatRef::from_row_major_slice(x, l, d);
        let p = &sc.att[h * l * l..(h + 1) * l * l];
        let v = &sc.v[h * l..(h + 1) * l];
        let u = &sc.u[h * l..(h + 1) * l];
        for ((grow, prow), &ua) in sc.g.chunks_exact_mut(l).zip(p.chunks_exact(l)).zip(u) {
            for ((gab, &pab), &vb) in grow.iter_mut().zip(prow).zip(v) {
                *gab = coef * pab * (vb - ua);
            }
        }
        {
            let g = MatRef::from_row_major_slice(&sc.g[..], l, l);
            let gx = MatMut::from_row_major_slice_mut(&mut sc.xa[..], l, d);
            matmul(gx, Accum::Replace, g, xm, T::one(), Par::Seq);
        }
        let gx = MatRef::from_row_major_slice(&sc.xa[..], l, d);
        let ga = MatMut::from_row_major_slice_mut(ga, d, d);
        matmul(ga, Accum::Add, xm.transpose(), gx, T::one(), Par::Seq);
    }
}

/// Σ a_i b_i with eight partial sums (then folded pairwise), so that the long rows of a large
/// context (L in the hundreds) are summed in vector registers rather than by one chain of
/// dependent additions.
#[inline(always)]
fn dot_lanes<T: Real>(a: &[T], b: &[T]) -> T {
    const LANES: usize = 8;
    let mut acc = [T::zero(); LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: T = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .fold(T::zero(), |s, (&x, &y)| s + x * y);
    for (xa, xb) in ca.zip(cb) {
        for j in 0..LANES {
            acc[j] += xa[j] * xb[j];
        }
    }
    let mut width = LANES / 2;
    while width > 0 {
        for j in 0..width {
            let upper = acc[j + width];
            acc[j] += upper;
        }
        width /= 2;
    }
    acc[0] + tail
}

/// Work buffers of one chain's attention evaluation.
#[derive(Debug, Default)]
pub struct AttentionScratch<T> {
    xa: Vec<T>,
    att: Vec<T>,
    v: Vec<T>,
    u: Vec<T>,
    c: Vec<T>,
    g: Vec<T>,
}

impl<T: Real> AttentionScratch<T> {
    fn ensure(&mut self, l: usize, d: usize, heads: usize) {
        self.xa.resize(l * d, T::zero());
        self.att.resize(heads * l * l, T::zero());
        self.v.resize(heads * l, T::zero());
        self.u.resize(heads * l, T::zero());
        self.c.resize(heads * l, T::zero());
        self.g.resize(l * l, T::zero());
    }
}

impl<T: Real> FlatModel<T> for AttentionModel {
    type Scratch = AttentionScratch<T>;

    fn groups(&self) -> &[ParamGroup] {
        &self.groups
    }

    fn sample_len(&self) -> usize {
        self.tokens * self.d
    }

    fn predict(&self, theta: &[T], x: &[T], n: usize, f: &mut [T], sc: &mut Self::Scratch) {
        let len = self.tokens * self.d;
        for (fm, xs) in f.iter_mut().zip(x.chunks_exact(len)).take(n) {
            *fm = self.forward_sample(theta, xs, sc);
        }
    }

    fn data_gradient(
        &self,
        theta: &[T],
        data: &DataTerm<'_, T>,
        grad: &mut [T],
        sc: &mut Self::Scratch,
    ) -> f64 {
        let (x, y, n, inv_kappa) = (data.x, data.y, data.p, T::of(1.0 / data.kappa));
        grad.fill(T::zero());
        let len = self.tokens * self.d;
        let mut sq = 0.0;
        for (xs, &ym) in x.chunks_exact(len).zip(y).take(n) {
            let e = self.forward_sample(theta, xs, sc) - ym;
            sq += (e * e).f64();
            self.backward_sample(xs, e * inv_kappa, grad, sc);
        }
        sq
    }

    /// φ_{(h,k)}(X) = (1/√L) Σ_{a,b} @_{ab;h}(X) x^b_k = (1/√L)(Xᵀc_h)_k, c_{h,b} = Σ_a @_{ab;h}
    /// (module doc): f = Σ_h w_h·φ_h, K = H·d. One chain and one sequence at a time.
    fn features_block(
        &self,
        thetas: &[&[T]],
        x: &[T],
        n: usize,
        phis: &mut [Vec<T>],
        sc: &mut Self::Scratch,
    ) {
        let (d, l, heads) = (self.d, self.tokens, self.heads);
        let norm = T::of(1.0 / (l as f64).sqrt());
        for (theta, phi) in thetas.iter().zip(phis.iter_mut()) {
            phi.clear();
            phi.resize(n * heads * d, T::zero());
            for (xs, row) in x
                .chunks_exact(l * d)
                .zip(phi.chunks_exact_mut(heads * d))
                .take(n)
            {
                self.forward_sample(theta, xs, sc);
                for (h, out) in row.chunks_exact_mut(d).enumerate() {
                    for (xb, &cb) in xs.chunks_exact(d).zip(&sc.c[h * l..(h + 1) * l]) {
                        for (o, &xi) in out.iter_mut().zip(xb) {
                            *o += cb * xi;
                        }
                    }
                    out.iter_mut().for_each(|o| *o *= norm);
                }
            }
        }
    }

    /// Σ_{μ,h} D_{μ,h}·∇φ_h(X_μ): the value gradient's back-propagation with w_h replaced by
    /// D_{μ,h} and r = 1 (v_b = D_{μ,h}·x^b, u_a = Σ_b @_ab v_b, ∂A_h += XᵀGX; module doc). The
    /// attention of each sequence is recomputed (forward and backward are per sequence).
    fn feature_backward_block(
        &self,
        thetas: &[&[T]],
        x: &[T],
        n: usize,
        dphis: &[Vec<T>],
        grads: &mut [&mut [T]],
        sc: &mut Self::Scratch,
    ) {
        let (d, l, heads) = (self.d, self.tokens, self.heads);
        let coef = T::one() / T::of((l as f64).sqrt());
        for ((theta, dphi), grad) in thetas.iter().zip(dphis).zip(grads.iter_mut()) {
            grad.fill(T::zero());
            let ga_all = &mut grad[..heads * d * d];
            for (xs, drow) in x
                .chunks_exact(l * d)
                .zip(dphi.chunks_exact(heads * d))
                .take(n)
            {
                self.forward_sample(theta, xs, sc);
                for h in 0..heads {
                    let dh = &drow[h * d..(h + 1) * d];
                    for (vb, xb) in sc.v[h * l..(h + 1) * l].iter_mut().zip(xs.chunks_exact(d)) {
                        *vb = xb
                            .iter()
                            .zip(dh)
                            .fold(T::zero(), |acc, (&xi, &di)| acc + xi * di);
                    }
                    let p = &sc.att[h * l * l..(h + 1) * l * l];
                    for (ua, prow) in sc.u[h * l..(h + 1) * l].iter_mut().zip(p.chunks_exact(l)) {
                        *ua = dot_lanes(prow, &sc.v[h * l..(h + 1) * l]);
                    }
                    self.add_score_gradient(
                        xs,
                        coef,
                        h,
                        &mut ga_all[h * d * d..(h + 1) * d * d],
                        sc,
                    );
                }
            }
        }
    }

    /// ρ_h = d·((A_h)_12 + (A_h)_13)/√2 (module doc).
    fn overlaps(&self, theta: &[T], _teacher: &[f64]) -> Vec<f64> {
        let d = self.d;
        (0..self.heads)
            .map(|h| {
                let a = &theta[h * d * d..(h + 1) * d * d];
                d as f64 * (a[1].f64() + a[2].f64()) / std::f64::consts::SQRT_2
            })
            .collect()
    }

    /// σ_A: the prior standard deviation of ρ_h.
    fn overlap_scale(&self) -> f64 {
        self.groups[0].prior_var.sqrt() * self.d as f64
    }

    fn filters<'a>(&self, _theta: &'a [T]) -> Option<(&'a [T], usize)> {
        None
    }

    /// The heads: H units of d² attention weights (A_h, row-major) per chain.
    fn preconditioned_units(&self) -> Option<PreconditionedUnits> {
        Some(PreconditionedUnits {
            group: 0,
            units: self.heads,
            fan_in: self.d * self.d,
        })
    }

    /// Per chain and head, v·G_h = I + (v/κ)·Σ_μ g_μh g_μhᵀ with g_μh = vec ∂f(X_μ)/∂A_h taken
    /// at the chain's A and at the conditional readout mean m in place of the value vectors
    /// (XᵀGX of the module doc's "Gradients", v_b = m_h·x^b): the Gauss–Newton Hessian of
    /// |f − y|²/(2κ) + |A_h|²_F/(2v) in A_h with the residual term dropped (Martens, JMLR 21
    /// (2020), sec. 8), as for the FCN's neurons and the CNN's filters. The P × d² Jacobian of
    /// each head is formed and contracted in one GEMM, JᵀJ (P·d⁴ per head: the estimate is
    /// taken a few times in burn-in only).
    fn unit_curvature_blocks(
        &self,
        thetas: &[&[T]],
        means: &[Option<Vec<f64>>],
        x: &[T],
        n: usize,
        kappa: f64,
        sc: &mut AttentionScratch<T>,
    ) -> Option<Vec<f64>> {
        let (d, l, heads) = (self.d, self.tokens, self.heads);
        let dd = d * d;
        let scale = self.groups[0].prior_var / kappa;
        let coef = T::one() / T::of((l as f64).sqrt());
        let mut out = vec![0.0; thetas.len() * heads * dd * dd];
        for blk in out.chunks_mut(dd * dd) {
            for a in 0..dd {
                blk[a * dd + a] = 1.0;
            }
        }
        let mut at_mean: Vec<T> = Vec::with_capacity(heads * (dd + d));
        let mut row = vec![T::zero(); dd];
        let mut jacobian = vec![0.0; heads * n * dd];
        for (c, (theta, mean)) in thetas.iter().zip(means).enumerate() {
            let Some(m) = mean else { continue };
            at_mean.clear();
            at_mean.extend_from_slice(&theta[..heads * dd]);
            at_mean.extend(m.iter().map(|&v| T::of(v)));
            for (mu, xs) in x.chunks_exact(l * d).take(n).enumerate() {
                self.forward_sample(&at_mean, xs, sc);
                for h in 0..heads {
                    row.fill(T::zero());
                    self.add_score_gradient(xs, coef, h, &mut row, sc);
                    let j = &mut jacobian[(h * n + mu) * dd..(h * n + mu + 1) * dd];
                    for (ji, ri) in j.iter_mut().zip(&row) {
                        *ji = ri.f64();
                    }
                }
            }
            for h in 0..heads {
                let j =
                    MatRef::from_row_major_slice(&jacobian[h * n * dd..(h + 1) * n * dd], n, dd);
                let blk = &mut out[(c * heads + h) * dd * dd..(c * heads + h + 1) * dd * dd];
                let blk = MatMut::from_row_major_slice_mut(blk, dd, dd);
                matmul(blk, Accum::Add, j.transpose(), j, scale, Par::Seq);
            }
            // Exactly symmetric (the GEMM need not sum (a, b) and (b, a) in one order).
            for blk in out[c * heads * dd * dd..(c + 1) * heads * dd * dd].chunks_mut(dd * dd) {
                for a in 0..dd {
                    for b in 0..a {
                        blk[b * dd + a] = blk[a * dd + b];
                    }
                }
            }
        }
        Some(out)
    }

    /// Teacher-aligned start (module doc, "Hot start"): head h's component along the
    /// teacher structure T is set to ⟨A_h, T⟩_F = ±σ_A (ρ_h = ±d·σ_A, + for even h) and its
    /// value vector's component along u = (e_2 + e_3)/√2 to the same sign times σ_w; every
    /// other component keeps its prior draw.
    fn hot_start(&self, theta: &mut [T], _teacher: &[f64]) {
        let (d, heads) = (self.d, self.heads);
        let sigma_a = self.groups[0].prior_var.sqrt() * d as f64;
        let sigma_w = (self.groups[1].prior_var * d as f64).sqrt();
        let diagonal = [std::f64::consts::FRAC_1_SQRT_2; 2];
        let (a_all, w_all) = theta.split_at_mut(heads * d * d);
        for h in 0..heads {
            let sign = if h % 2 == 0 { 1.0 } else { -1.0 };
            // (A_h)_12 and (A_h)_13 (row-major indices 1, 2), and (w_h)_2, (w_h)_3, along
            // (1, 1)/√2.
            set_component(
                &mut a_all[h * d * d + 1..h * d * d + 3],
                &diagonal,
                sign * sigma_a,
            );
            set_component(&mut w_all[h * d + 1..h * d + 3], &diagonal, sign * sigma_w);
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

    fn attention_toml(d: usize, l: usize, heads: usize, p: usize) -> String {
        format!(
            r#"
[model]
kind = "attention"
heads = {heads}
[data]
d = {d}
tokens = {l}
p = {p}
n_test = 200
[target]
cubic_tokens = true
[sampler]
kappa = 0.1
step = 1e-3
steps = 200
burn_in = 100
thin = 20
chains = 3
seed = 2
precision = "f64"
"#
        )
    }

    fn random_theta(model: &AttentionModel, scale: f64, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..FlatModel::<f64>::n_params(model))
            .map(|_| {
                scale * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng)
            })
            .collect::<Vec<f64>>()
    }

    /// f evaluated term by term from the definition of App. E.3 (explicit exponentials).
    fn naive_f(model: &AttentionModel, theta: &[f64], x: &[f64]) -> f64 {
        let (d, l, hs) = (model.d, model.tokens, model.heads);
        let tok = |a: usize| &x[a * d..(a + 1) * d];
        let mut f = 0.0;
        for h in 0..hs {
            let a_h = &theta[h * d * d..(h + 1) * d * d];
            let w = &theta[hs * d * d + h * d..hs * d * d + (h + 1) * d];
            let score = |a: usize, b: usize| -> f64 {
                (0..d)
                    .flat_map(|i| (0..d).map(move |j| (i, j)))
                    .map(|(i, j)| tok(a)[i] * a_h[i * d + j] * tok(b)[j])
                    .sum()
            };
            for a in 0..l {
                let z: f64 = (0..l).map(|c| score(a, c).exp()).sum();
                for b in 0..l {
                    let wb: f64 = w.iter().zip(tok(b)).map(|(p, q)| p * q).sum();
                    f += score(a, b).exp() / z * wb;
                }
            }
        }
        f / (l as f64).sqrt()
    }

    #[test]
    fn forward_matches_the_definition_and_gradients_match_finite_differences() {
        let cfg = config(&attention_toml(4, 5, 2, 6));
        let model = AttentionModel::from_config(&cfg);
        let data = model.dataset(&cfg);
        // Entries of order 1 (prior scale is 1/d): a far-from-uniform softmax.
        let theta = random_theta(&model, 0.6, 7);
        let mut f = vec![0.0; 6];
        model.predict(
            &theta,
            &data.x_train,
            6,
            &mut f,
            &mut AttentionScratch::default(),
        );
        for (mu, xs) in data.x_train.chunks(20).enumerate() {
            let want = naive_f(&model, &theta, xs);
            assert!(
                (f[mu] - want).abs() < 1e-12 * (1.0 + want.abs()),
                "{} vs {want}",
                f[mu]
            );
        }
        let err = gradient_error(&model, &theta, &data.x_train, &data.y_train, 1e-3);
        assert!(err < 1e-6, "relative gradient error {err}");
        // f32 agrees with f64 to single precision.
        let t32: Vec<f32> = theta.iter().map(|&v| v as f32).collect();
        let x32: Vec<f32> = data.x_train.iter().map(|&v| v as f32).collect();
        let mut f32s = vec![0f32; 6];
        model.predict(&t32, &x32, 6, &mut f32s, &mut AttentionScratch::default());
        for (a, b) in f32s.iter().zip(&f) {
            assert!((*a as f64 - b).abs() < 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
        }
    }

    /// The target is mean 0, variance 1 (Monte Carlo over 4000 sequences: ±0.15 is > 3σ for
    /// the variance, whose fourth moment E[y⁴] = (3 + 6/L)(1 + 8/L)·… stays below 15 here),
    /// for isotropic tokens and for power-law ones (Σ_kk = k^{−a} per token, coordinates
    /// standardised in y), whose coordinates have that spectrum.
    #[test]
    fn cubic_target_has_zero_mean_and_unit_variance() {
        for covariance in ["isotropic", "power-law"] {
            let text = attention_toml(5, 6, 1, 4).replace(
                "n_test = 200",
                &format!("n_test = 4000\ncovariance = \"{covariance}\""),
            );
            let cfg = config(&text);
            let model = AttentionModel::from_config(&cfg);
            let data = model.dataset(&cfg);
            let n = data.y_test.len() as f64;
            let mean = data.y_test.iter().sum::<f64>() / n;
            let var = data.y_test.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
            assert!(mean.abs() < 0.06, "{covariance}: {mean}");
            assert!((var - 1.0).abs() < 0.15, "{covariance}: {var}");
            for k in 0..5 {
                let x = data.x_test.iter().skip(k).step_by(5);
                let v = x.map(|x| x * x).sum::<f64>() / (6.0 * n);
                let want = if covariance == "isotropic" {
                    1.0
                } else {
                    ((k + 1) as f64).powf(-1.1)
                };
                assert!(
                    (v / want - 1.0).abs() < 0.05,
                    "coordinate {k}: {v} vs {want}"
                );
            }
            // The test set does not depend on P.
            let other = config(&text.replace("p = 4", "p = 9"));
            assert_eq!(model.dataset(&other).x_test, data.x_test);
        }
    }

    /// The hot start (module doc): each head's overlap is ρ_h = ±d·σ_A and its value
    /// component along (e_2 + e_3)/√2 is ±σ_w with the same sign, so every head adds +y to f
    /// at linear order in A: the ensemble-mean predictor is aligned with the target at once,
    /// where the cold start's is not.
    #[test]
    fn hot_start_aligns_every_head_with_the_target() {
        use crate::sim::ensemble::fcn::{predict, Dynamics, Ensemble};
        let text = attention_toml(4, 6, 3, 0).replace("n_test = 200", "n_test = 2000");
        let cfg = config(&text);
        let model = AttentionModel::from_config(&cfg);
        let data = model.dataset(&cfg);
        let dynamics = Dynamics {
            kappa: 0.1,
            step: 1e-3,
            temperature: 1.0,
        };
        let chains = 40;
        let mean_alignment = |hot: bool| -> f64 {
            let mut ens =
                Ensemble::<f64, _>::new(model.clone(), &[], &[], chains, 4, dynamics, None);
            if hot {
                for k in 0..chains {
                    let mut theta = ens.chain_params(k);
                    FlatModel::<f64>::hot_start(&model, &mut theta, &data.teacher);
                    ens.set_chain_params(k, &theta);
                }
                for k in 0..chains {
                    let c = ens.chain_params(k);
                    let rho = FlatModel::<f64>::overlaps(&model, &c, &data.teacher);
                    for (h, r) in rho.iter().enumerate() {
                        let want = if h % 2 == 0 { 4.0 } else { -4.0 };
                        assert!((r - want).abs() < 1e-12, "head {h}: ρ = {r}");
                        let w = &c[3 * 16 + h * 4..3 * 16 + (h + 1) * 4];
                        let along = (w[1] + w[2]) / std::f64::consts::SQRT_2;
                        assert!((along - want / 4.0).abs() < 1e-12, "head {h}: {along}");
                    }
                }
            }
            let n = data.y_test.len();
            let mut mean = vec![0.0; n];
            for f in predict(&ens, &data.x_test, n).into_iter().flatten() {
                mean.iter_mut()
                    .zip(f)
                    .for_each(|(m, v)| *m += v / chains as f64);
            }
            let fy: f64 = mean.iter().zip(&data.y_test).map(|(f, y)| f * y).sum();
            fy / data.y_test.iter().map(|y| y * y).sum::<f64>()
        };
        let (cold, hot) = (mean_alignment(false), mean_alignment(true));
        // Linear order: 3 heads × σ_Aσ_w(1 − 1/L)/√L ≈ 1.0; the softmax's saturation lowers it.
        assert!(hot > 0.3, "hot alignment {hot}");
        assert!(cold.abs() < 0.15, "cold alignment {cold}");
    }

    /// With the attention matrices frozen, f is linear in the value vectors:
    /// f(X) = φ(X)·w with φ_{h,k}(X) = (1/√L) Σ_{a,b} @_{ab;h}(X) x^b_k, so the posterior of w
    /// is Bayesian linear regression — precision Λ = ΦᵀΦ/κ + I/v_w, mean Λ⁻¹Φᵀy/κ. The
    /// features are computed here from the definition (explicit exponentials); the samples of
    /// every chain, whitened with its exact posterior (z = Lᵀ(w − m), Λ = LLᵀ), must have
    /// mean 0 and identity covariance.
    #[test]
    fn frozen_attention_gives_bayesian_linear_regression_for_the_values() {
        use crate::sim::ensemble::fcn::{Dynamics, Ensemble};
        use crate::sim::tests::exact::{linear_readout_posterior, WhitenedMoments};
        let (d, l, heads, p, kappa) = (3, 4, 2, 30, 0.5);
        let text = attention_toml(d, l, heads, p)
            .replace("kappa = 0.1", "kappa = 0.5")
            .replace("seed = 2", "seed = 2\nfrozen_layers = [1]");
        let cfg = config(&text);
        let model = AttentionModel::from_config(&cfg);
        let data = model.dataset(&cfg);
        let (chains, step) = (16, 5e-4);
        let dynamics = Dynamics {
            kappa,
            step,
            temperature: 1.0,
        };
        let mut ens = Ensemble::<f64, _>::new(
            model.clone(),
            &data.x_train,
            &data.y_train,
            chains,
            9,
            dynamics,
            None,
        );
        let n = heads * d;
        let v_w = model.groups[1].prior_var;
        let posterior: Vec<(Vec<f64>, Vec<f64>)> = (0..chains)
            .map(|k| ens.chain_params(k))
            .map(|c| {
                let phi: Vec<f64> = data
                    .x_train
                    .chunks(l * d)
                    .flat_map(|x| {
                        let tok = |a: usize| &x[a * d..(a + 1) * d];
                        let theta = &c;
                        (0..heads).flat_map(move |h| {
                            let a_h = &theta[h * d * d..(h + 1) * d * d];
                            let score = move |a: usize, b: usize| -> f64 {
                                (0..d * d)
                                    .map(|ij| tok(a)[ij / d] * a_h[ij] * tok(b)[ij % d])
                                    .sum()
                            };
                            (0..d).map(move |k| {
                                let mut s = 0.0;
                                for a in 0..l {
                                    let z: f64 = (0..l).map(|c| score(a, c).exp()).sum();
                                    for b in 0..l {
                                        s += score(a, b).exp() / z * tok(b)[k];
                                    }
                                }
                                s / (l as f64).sqrt()
                            })
                        })
                    })
                    .collect();
                linear_readout_posterior(&phi, &data.y_train, kappa, v_w)
            })
            .collect();
        ens.advance(4000);
        let mut moments = WhitenedMoments::new(n);
        for _ in 0..400 {
            ens.advance(50);
            for (k, (chol, m)) in posterior.iter().enumerate() {
                moments.add(chol, m, &ens.chain_params(k)[heads * d * d..], 1.0);
            }
        }
        // ≳ 500 effective samples per direction (relaxation ≤ 1/(η·λ_min) ≈ 700 steps): errors
        // ≈ 0.05 on the mean and 0.07 on a covariance entry, 0.03 on the mean variance over the
        // n directions; ULA inflates the stiffest variance by ηλ_max/2 ≲ 5 %.
        let mean_variance = moments.mean_variance();
        assert!(
            (mean_variance - 1.0).abs() < 0.08,
            "mean variance {mean_variance}"
        );
        moments.assert_standard_normal(0.15, 0.15, "frozen attention");
        assert!((0..chains).all(|k| ens.alive(k)));
    }

    /// P = 0: the entries of A_h and w_h have the prior moments 𝒩(0, σ_A²/d²), 𝒩(0, σ_w²/d),
    /// and R = E[ρ_h²] = σ_A².
    #[test]
    fn p_zero_recovers_the_prior_moments() {
        let text = attention_toml(3, 4, 2, 0)
            .replace("step = 1e-3", "step = 2e-3")
            .replace("steps = 200", "steps = 6000")
            .replace("burn_in = 100", "burn_in = 1000")
            .replace("chains = 3", "chains = 24")
            + "[priors]\nsigma2 = [0.5, 2.0]\n";
        let cfg = config(&text);
        let r = Run::new(&cfg).run().unwrap();
        for (stats, v) in r
            .summary
            .diagnostics
            .groups
            .iter()
            .zip([0.5 / 9.0, 2.0 / 3.0])
        {
            assert_eq!(stats.prior_variance, Some(v));
            let m2 = stats.second_moment.unwrap() / v;
            let m4 = stats.fourth_moment.unwrap() / (3.0 * v * v);
            assert!((m2 - 1.0).abs() < 0.1, "{}: {m2}", stats.group);
            assert!((m4 - 1.0).abs() < 0.25, "{}: {m4}", stats.group);
            let t = stats.temperature.unwrap();
            assert!((t - 1.0).abs() < 0.1, "{}: temperature {t}", stats.group);
        }
        let r2 = r.summary.r_overlap2.unwrap() / 0.5;
        assert!((r2 - 1.0).abs() < 0.2, "R/σ_A² = {r2}");
        assert_eq!(r.summary.leading_direction_overlap, None);
    }
}
