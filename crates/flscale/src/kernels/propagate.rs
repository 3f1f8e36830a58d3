//! Kernel feature propagation: the numerical demonstration of paper Sec. 5.2 Claim (ii)
//! (App. C.5, Figs. 5 and 6; spec 05 B).
//!
//! Claim (ii): amplifying a feature's eigenvalue by D in one layer's kernel amplifies its
//! m-th power by D^m in the next layer's kernel, so the RKHS norm of Φ\*² falls as D^{−2}.
//!
//! ## Procedure (App. C.5, paragraph after Fig. 6)
//!
//! 1. x_ν ∼ 𝒩(0, I_d) (`gaussian`), or 𝒩(0, Σ) with Σ's k-th eigenvalue ∝ k^{−1.1}
//!    (`powerlaw`, Fig. 6; scaled so that tr Σ = d, i.e. pre-activations of unit variance as
//!    in the i.i.d. case — for ReLU this only rescales every kernel by a constant).
//! 2. First layer W₁ ∈ ℝ^{N₁×d}, entries 𝒩(0, 1/d); φ₁ = σ(XW₁ᵀ), optionally layer-normalised
//!    per point across the N₁ units (`--layernorm`, Fig. 6: "layer normalization between the
//!    two activated layers", which stops K₂(x, x) from fluctuating with |x|).
//! 3. K₂ = φ₁φ₁ᵀ/N₁; Φ\* = its eigenvector with the (d/2)-th largest eigenvalue, scaled to
//!    unit norm on the data (Σ_ν Φ\*(x_ν)²/P = 1).
//! 4. a = argmin |φ₁a − Φ\*|² (least squares, minimum norm); â = a/|a|. Because Φ\* lies in the
//!    column space of φ₁, a = φ₁ᵀ(φ₁φ₁ᵀ)⁺Φ\* ∝ φ₁ᵀu\* exactly — no solve needed (a test checks
//!    it against an explicit least-squares solve).
//! 5. Second layer rows W_i ∼ 𝒩(0, I/N₁ + (D − 1)ââᵀ/N₁), i ≤ N₂ (mimics GFL), drawn as
//!    W_i = (z_i + (√D − 1)(â·z_i)â)/√N₁ with z_i ∼ 𝒩(0, I) ((I + (√D−1)ââᵀ)² = I + (D−1)ââᵀ).
//!    The same z_i serve every D (common random numbers), so that the D-dependence is not
//!    masked by draw-to-draw noise; then h₂ = φ₁Zᵀ/√N₁ + (√D−1)(φ₁â)(Zâ)ᵀ/√N₁ is a rank-1
//!    update of one product computed once.
//! 6. K₃ = φ₂φ₂ᵀ/N₂ with φ₂ = σ(h₂); f = Φ\*² with its mean removed, unit norm on the data.
//!    Measure the RKHS norm ⟨f, K₃⁻¹, f⟩ (pseudo-inverse) and the inverse expectation
//!    ⟨f, K₃, f⟩⁻¹ over a log grid of D, with operators on the empirical data measure
//!    (K_op = K/P, ⟨f, g⟩ = fᵀg/P): ⟨f, K⁻¹, f⟩ = fᵀK⁺f and ⟨f, K, f⟩ = fᵀKf/P².
//! 7. Fit the log-log slope over a window of D; the claim predicts −2.
//!
//! Spectra use the low-rank route of [`super::spectral`] whenever the width is below P.

use std::time::Instant;

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;

use super::spectral::{default_par, FeatureKernel, SpectralMethod};
use crate::activation::NngpActivation;
use crate::error::{Error, Result};
use crate::ldt::fit_line;
use crate::plot::{LineChart, Mark, Series};

/// The data measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataKind {
    /// x ∼ 𝒩(0, I_d) (Fig. 5).
    Gaussian,
    /// x ∼ 𝒩(0, Σ), eigenvalues of Σ ∝ k^{−1.1}, tr Σ = d (Fig. 6).
    Powerlaw,
}

impl std::str::FromStr for DataKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "gaussian" => Ok(DataKind::Gaussian),
            "powerlaw" => Ok(DataKind::Powerlaw),
            other => Err(Error::invalid(format!(
                "data = \"{other}\" is not allowed; use gaussian or powerlaw"
            ))),
        }
    }
}

/// Everything that defines one propagation run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PropagateConfig {
    /// Input dimension d.
    pub d: usize,
    /// First hidden width N₁.
    pub n1: usize,
    /// Second hidden width N₂.
    pub n2: usize,
    /// Number of sample points P.
    pub p: usize,
    /// Data measure.
    pub data: DataKind,
    /// Activation of both layers.
    pub activation: NngpActivation,
    /// Layer normalisation of φ₁.
    pub layernorm: bool,
    /// The amplifications D (ascending, ≥ 1).
    pub amplifications: Vec<f64>,
    /// The closed D-window of the slope fit.
    pub fit_window: (f64, f64),
    /// Φ\* is the eigenvector with this (1-based) rank; the paper uses d/2.
    pub feature_rank: usize,
    /// Spectral route of K₃ (and K₂).
    pub method: SpectralMethod,
    /// Seed of every random draw.
    pub seed: u64,
}

/// The default D grid: 1, 2, 4, …, 1024.
pub fn default_amplifications() -> Vec<f64> {
    (0..=10).map(|k| f64::powi(2.0, k)).collect()
}

impl PropagateConfig {
    /// Paper Fig. 5: ReLU, Gaussian data, d = 120, N₁ = 2000, N₂ = 1000, P = 6000.
    pub fn fig5() -> Self {
        PropagateConfig {
            d: 120,
            n1: 2000,
            n2: 1000,
            p: 6000,
            data: DataKind::Gaussian,
            activation: NngpActivation::Relu,
            layernorm: false,
            amplifications: default_amplifications(),
            fit_window: (8.0, 64.0),
            feature_rank: 60,
            method: SpectralMethod::Auto,
            seed: 5,
        }
    }

    /// Paper Fig. 6 (top left): power-law data with layer norm, d = 250, N₁ = N₂ = 3000,
    /// P = 4000.
    pub fn fig6() -> Self {
        PropagateConfig {
            d: 250,
            n1: 3000,
            n2: 3000,
            p: 4000,
            data: DataKind::Powerlaw,
            layernorm: true,
            feature_rank: 125,
            ..Self::fig5()
        }
    }

    /// A small run for tests and a first look (seconds).
    pub fn quick() -> Self {
        PropagateConfig {
            d: 40,
            n1: 400,
            n2: 200,
            p: 1000,
            feature_rank: 20,
            ..Self::fig5()
        }
    }

    /// Checks every field, naming the bad one.
    pub fn validate(&self) -> Result<()> {
        let size = |name: &str, v: usize, min: usize, max: usize| -> Result<()> {
            if (min..=max).contains(&v) {
                Ok(())
            } else {
                Err(Error::invalid(format!(
                    "{name} = {v} is not allowed; it must be between {min} and {max}"
                )))
            }
        };
        size("d", self.d, 2, 100_000)?;
        size("n1", self.n1, 2, 50_000)?;
        size("n2", self.n2, 2, 50_000)?;
        size("p", self.p, 4, 50_000)?;
        let bytes = propagate_bytes(self.d, self.n1, self.n2, self.p);
        let gib = bytes / (1u64 << 30) as f64;
        if gib > 24.0 {
            return Err(Error::invalid(format!(
                "sizes d = {}, n1 = {}, n2 = {}, p = {} need about {gib:.0} GiB; reduce them to stay below 24 GiB",
                self.d, self.n1, self.n2, self.p
            )));
        }
        if self.feature_rank == 0 || self.feature_rank > self.n1.min(self.p) {
            return Err(Error::invalid(format!(
                "feature rank = {} is not allowed; it must be between 1 and min(n1, p) = {}",
                self.feature_rank,
                self.n1.min(self.p)
            )));
        }
        if self.amplifications.is_empty()
            || self
                .amplifications
                .iter()
                .any(|&d| !(d.is_finite() && (1.0..=1e8).contains(&d)))
            || self.amplifications.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(Error::invalid(format!(
                "amplifications {:?} are not allowed; give strictly increasing values D in [1, 1e8]",
                self.amplifications
            )));
        }
        let (lo, hi) = self.fit_window;
        let inside = self
            .amplifications
            .iter()
            .filter(|&&d| d >= lo && d <= hi)
            .count();
        if !(lo.is_finite() && hi.is_finite() && lo < hi) || inside < 2 {
            return Err(Error::invalid(format!(
                "fit window [{lo}, {hi}] is not allowed; it must contain at least two of the amplifications D"
            )));
        }
        Ok(())
    }
}

/// Memory of `kernel propagate` in bytes (what [`PropagateConfig::validate`] caps): φ₁ and
/// φ₁Zᵀ (P × N), Z (N₂ × N₁), and the N × N (or P × P when N ≥ P) matrix being decomposed,
/// one per concurrent D point.
pub fn propagate_bytes(d: usize, n1: usize, n2: usize, p: usize) -> f64 {
    let (d, n1, n2, pf) = (d as f64, n1 as f64, n2 as f64, p as f64);
    let side = |n: f64| n.min(pf);
    8.0 * (pf * (n1 + 2.0 * n2 + d) + n1 * n2 + 4.0 * (side(n1).powi(2) + side(n2).powi(2)))
}

/// The two measured quantities at one amplification.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PropagatePoint {
    /// The amplification D.
    pub amplification: f64,
    /// ⟨f, K₃⁻¹, f⟩ (pseudo-inverse).
    pub rkhs_norm: f64,
    /// ⟨f, K₃, f⟩⁻¹.
    pub inverse_expectation: f64,
    /// Non-zero eigenvalues of K₃ kept in the pseudo-inverse.
    pub kept_eigenvalues: usize,
}

/// Wall-clock seconds of the stages (not part of the reproducible result).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct PropagateTiming {
    /// Data, first layer, K₂ spectrum, Φ\*, â and the base product φ₁Zᵀ.
    pub setup_s: f64,
    /// All D points.
    pub sweep_s: f64,
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PropagateResult {
    /// The inputs.
    pub config: PropagateConfig,
    /// Spectral route of K₃ actually used.
    pub method: SpectralMethod,
    /// The eigenvalue of Φ\* as an operator on the data measure (matrix eigenvalue / P).
    pub phi_star_eigenvalue: f64,
    /// One point per D.
    pub points: Vec<PropagatePoint>,
    /// Fitted log-log slope of the RKHS norm in the fit window.
    pub slope_rkhs: f64,
    /// Fitted log-log slope of the inverse expectation in the fit window.
    pub slope_inverse_expectation: f64,
    /// The slope Claim (ii) predicts for Φ\*² (m = 2).
    pub predicted_slope: f64,
    /// Stage timings.
    #[serde(skip)]
    pub timing: PropagateTiming,
}

fn standard_normals(rng: &mut ChaCha8Rng, rows: usize, cols: usize, scale: f64) -> Mat<f64> {
    // Row-major draw order (row i, then column j), so the numbers do not depend on the
    // storage layout.
    let mut m = Mat::<f64>::zeros(rows, cols);
    for i in 0..rows {
        for j in 0..cols {
            m[(i, j)] = rng.sample::<f64, _>(StandardNormal) * scale;
        }
    }
    m
}

fn rng_stream(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// Per-point layer normalisation across units: (φ − mean)/std (no affine parameters).
fn layer_norm(phi: &mut Mat<f64>) -> Result<()> {
    let (p, n) = (phi.nrows(), phi.ncols());
    for i in 0..p {
        let mean = (0..n).map(|j| phi[(i, j)]).sum::<f64>() / n as f64;
        let var = (0..n).map(|j| (phi[(i, j)] - mean).powi(2)).sum::<f64>() / n as f64;
        if var.is_nan() || var <= 0.0 {
            return Err(Error::runtime(format!(
                "layer normalisation: all {n} units are equal at data point {i}"
            )));
        }
        let inv = 1.0 / var.sqrt();
        for j in 0..n {
            phi[(i, j)] = (phi[(i, j)] - mean) * inv;
        }
    }
    Ok(())
}

/// The data matrix X (P×d) of the run.
pub fn sample_data(cfg: &PropagateConfig) -> Mat<f64> {
    let mut x = standard_normals(&mut rng_stream(cfg.seed, 0), cfg.p, cfg.d, 1.0);
    if cfg.data == DataKind::Powerlaw {
        let lam: Vec<f64> = (1..=cfg.d).map(|k| (k as f64).powf(-1.1)).collect();
        let norm = cfg.d as f64 / lam.iter().sum::<f64>();
        for j in 0..cfg.d {
            let s = (lam[j] * norm).sqrt();
            for i in 0..cfg.p {
                x[(i, j)] *= s;
            }
        }
    }
    x
}

/// The first-layer features φ₁ (P×N₁), layer-normalised if asked.
pub fn first_layer(cfg: &PropagateConfig, x: &Mat<f64>, par: Par) -> Result<Mat<f64>> {
    let w1 = standard_normals(
        &mut rng_stream(cfg.seed, 1),
        cfg.n1,
        cfg.d,
        1.0 / (cfg.d as f64).sqrt(),
    );
    let mut h = Mat::<f64>::zeros(cfg.p, cfg.n1);
    matmul(
        h.as_mut(),
        Accum::Replace,
        x.as_ref(),
        w1.transpose(),
        1.0,
        par,
    );
    let act = cfg.activation;
    let mut phi = Mat::<f64>::from_fn(cfg.p, cfg.n1, |i, j| act.value_f64(h[(i, j)]));
    if cfg.layernorm {
        layer_norm(&mut phi)?;
    }
    Ok(phi)
}

/// f = Φ\*² with its mean removed, scaled to unit norm on the data (Σf²/P = 1).
pub fn centred_square(phi_star: &[f64]) -> Result<Vec<f64>> {
    let p = phi_star.len() as f64;
    let sq: Vec<f64> = phi_star.iter().map(|v| v * v).collect();
    let mean = sq.iter().sum::<f64>() / p;
    let mut f: Vec<f64> = sq.iter().map(|v| v - mean).collect();
    let norm = (f.iter().map(|v| v * v).sum::<f64>() / p).sqrt();
    if norm.is_nan() || norm <= 0.0 {
        return Err(Error::runtime(
            "Φ*² is constant on the data; cannot normalise it",
        ));
    }
    f.iter_mut().for_each(|v| *v /= norm);
    Ok(f)
}

/// Runs the procedure of the module docs.
pub fn propagate(cfg: &PropagateConfig) -> Result<PropagateResult> {
    propagate_with(cfg, default_par(), |_, _| {})
}

/// As [`propagate`], with explicit parallelism and a progress callback (done, total).
pub fn propagate_with(
    cfg: &PropagateConfig,
    par: Par,
    progress: impl Fn(usize, usize) + Sync,
) -> Result<PropagateResult> {
    cfg.validate()?;
    let t0 = Instant::now();
    let (p, n1, n2) = (cfg.p, cfg.n1, cfg.n2);
    let x = sample_data(cfg);
    let phi1 = first_layer(cfg, &x, par)?;
    drop(x);
    // Steps 3–4: Φ*, â.
    let k2 = FeatureKernel::new(phi1, cfg.method, par)?;
    let (u_star, lam_star) = k2.eigenvector(cfg.feature_rank)?;
    let phi_star: Vec<f64> = u_star.iter().map(|v| v * (p as f64).sqrt()).collect();
    let a = k2.project(&u_star); // ∝ minimum-norm least-squares a
    let a_norm = a.iter().map(|v| v * v).sum::<f64>().sqrt();
    if a_norm.is_nan() || a_norm <= 0.0 {
        return Err(Error::runtime("the least-squares readout â vanished"));
    }
    let a_hat: Vec<f64> = a.iter().map(|v| v / a_norm).collect();
    let phi1 = k2.into_features();
    // Step 5: base product H0 = φ₁Zᵀ/√N₁, s = φ₁â, c = Zâ.
    let z = standard_normals(&mut rng_stream(cfg.seed, 2), n2, n1, 1.0);
    let inv_sqrt_n1 = 1.0 / (n1 as f64).sqrt();
    let mut h0 = Mat::<f64>::zeros(p, n2);
    matmul(
        h0.as_mut(),
        Accum::Replace,
        phi1.as_ref(),
        z.transpose(),
        inv_sqrt_n1,
        par,
    );
    let s: Vec<f64> = (0..p)
        .map(|i| (0..n1).map(|j| phi1[(i, j)] * a_hat[j]).sum())
        .collect();
    let c: Vec<f64> = (0..n2)
        .map(|i| (0..n1).map(|j| z[(i, j)] * a_hat[j]).sum())
        .collect();
    drop(z);
    drop(phi1);
    let f = centred_square(&phi_star)?;
    let setup_s = t0.elapsed().as_secs_f64();
    // Step 6: sweep D. The points are independent: run them concurrently (each one is
    // deterministic, see `spectral`), collecting in grid order.
    let t1 = Instant::now();
    let act = cfg.activation;
    let done = std::sync::atomic::AtomicUsize::new(0);
    let total = cfg.amplifications.len();
    let results: Vec<Result<(PropagatePoint, SpectralMethod)>> = cfg
        .amplifications
        .par_iter()
        .map(|&amp| {
            let boost = (amp.sqrt() - 1.0) * inv_sqrt_n1;
            let phi2 = Mat::<f64>::from_fn(p, n2, |i, j| {
                act.value_f64(h0[(i, j)] + boost * s[i] * c[j])
            });
            let k3 = FeatureKernel::new(phi2, cfg.method, par)?;
            let rkhs = k3.pinv_quadratic_form(&f);
            let expect = k3.quadratic_form(&f) / (p as f64 * p as f64);
            let point = PropagatePoint {
                amplification: amp,
                rkhs_norm: rkhs,
                inverse_expectation: 1.0 / expect,
                kept_eigenvalues: k3.kept_eigenvalues().len(),
            };
            if !(point.rkhs_norm.is_finite() && point.inverse_expectation.is_finite()) {
                return Err(Error::runtime(format!(
                    "non-finite norm at D = {amp} (the kernel lost all overlap with Φ*²)"
                )));
            }
            let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(k, total);
            Ok((point, k3.method()))
        })
        .collect();
    let mut points = Vec::with_capacity(total);
    let mut method = cfg.method;
    for r in results {
        let (point, m) = r?;
        points.push(point);
        method = m;
    }
    let sweep_s = t1.elapsed().as_secs_f64();
    let (lo, hi) = cfg.fit_window;
    let window: Vec<&PropagatePoint> = points
        .iter()
        .filter(|q| q.amplification >= lo && q.amplification <= hi)
        .collect();
    let xs: Vec<f64> = window.iter().map(|q| q.amplification.ln()).collect();
    let fit = |ys: Vec<f64>| fit_line(&xs, &ys).map(|(b, _, _)| b);
    let slope_rkhs = fit(window.iter().map(|q| q.rkhs_norm.ln()).collect())?;
    let slope_inv = fit(window.iter().map(|q| q.inverse_expectation.ln()).collect())?;
    Ok(PropagateResult {
        config: cfg.clone(),
        method,
        phi_star_eigenvalue: lam_star / p as f64,
        points,
        slope_rkhs,
        slope_inverse_expectation: slope_inv,
        predicted_slope: -2.0,
        timing: PropagateTiming { setup_s, sweep_s },
    })
}

/// The Fig. 5-style log-log figure: both measures against D, the D^{−2} guide through the fit
/// window, fitted slopes in the notes.
pub fn propagate_chart(res: &PropagateResult) -> LineChart {
    let cfg = &res.config;
    let (lo, hi) = cfg.fit_window;
    let anchor = res
        .points
        .iter()
        .find(|q| q.amplification >= lo)
        .copied()
        .unwrap_or(res.points[0]);
    let guide: Vec<(f64, f64)> = [lo, hi]
        .iter()
        .map(|&d| (d, anchor.rkhs_norm * (d / anchor.amplification).powf(-2.0)))
        .collect();
    LineChart {
        title: format!(
            "Feature propagation: {:?} data, {:?}{}, d={}, N1={}, N2={}, P={}",
            cfg.data,
            cfg.activation,
            if cfg.layernorm { " + layernorm" } else { "" },
            cfg.d,
            cfg.n1,
            cfg.n2,
            cfg.p
        )
        .to_lowercase(),
        x_label: "amplification D".into(),
        y_label: "norm of Phi*^2 (mean removed)".into(),
        log_x: true,
        log_y: true,
        series: vec![
            Series::new(
                "<f, K3^-1, f> (RKHS norm)",
                res.points
                    .iter()
                    .map(|q| (q.amplification, q.rkhs_norm))
                    .collect(),
                Mark::LinePoints,
            ),
            Series::new(
                "<f, K3, f>^-1",
                res.points
                    .iter()
                    .map(|q| (q.amplification, q.inverse_expectation))
                    .collect(),
                Mark::LinePoints,
            ),
            Series::new("D^-2", guide, Mark::Dashed),
        ],
        notes: vec![format!(
            "slope in D in [{lo}, {hi}]: RKHS {:.3}, inverse expectation {:.3} (claim: -2)",
            res.slope_rkhs, res.slope_inverse_expectation
        )],
    }
}
