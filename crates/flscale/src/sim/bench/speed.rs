//! The speed benchmark of `flscale bench` (spec 02, "Performance bar"): the paper's Fig. 2
//! setting — two-layer erf network, d = N = 40, P = 1600, κ = σ1² = σ2² = 1, T = 1, f32 —
//! timed in ensemble-steps per second (all E chains advanced once) and effective GFLOP/s
//! counted as 6PdN + 6PN per network-step, the same model and count as the PyTorch and JAX
//! references in `shared/bench/`.

use serde::Serialize;

use crate::activation::Activation;
use crate::sim::config::{Covariance, DataConfig, TargetConfig, Teacher};
use crate::sim::data::Dataset;
use crate::sim::ensemble::fcn::{Dynamics, Ensemble};
use crate::sim::model::fcn::FcnModel;

/// One timed case.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BenchCase {
    /// Ensemble size E.
    pub chains: usize,
    /// Median ensemble-steps per second over the repeats.
    pub steps_per_second: f64,
    /// Effective GFLOP/s at the median: E·(6PdN + 6PN)·steps/s / 10⁹.
    pub gflops: f64,
    /// Slowest and fastest repeat, steps per second.
    pub range: [f64; 2],
    /// Ensemble steps per second of CPU time consumed by the process (all threads; Linux
    /// only, else null). On a shared, loaded machine wall-clock rates understate the engine;
    /// threads × this is what the same threads would give on otherwise idle cores.
    pub steps_per_cpu_second: Option<f64>,
}

/// CPU seconds (user + system) used so far by this process, from /proc/self/stat (Linux;
/// clock ticks of 1/100 s, the USER_HZ of every mainstream Linux build).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// The Fig. 2 problem size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchSize {
    /// Input dimension d.
    pub d: usize,
    /// Hidden width N.
    pub n: usize,
    /// Training samples P.
    pub p: usize,
}

impl Default for BenchSize {
    fn default() -> Self {
        BenchSize {
            d: 40,
            n: 40,
            p: 1600,
        }
    }
}

/// Times `steps` ensemble steps `repeats` times (after one warm-up call) for E = `chains`.
/// The step is η = 10⁻⁴ (stable here, `shared/bench/README.md`).
pub fn bench_case(size: BenchSize, chains: usize, steps: usize, repeats: usize) -> BenchCase {
    let data_cfg = DataConfig {
        d: size.d,
        p: size.p,
        n_test: 1,
        covariance: Covariance::Isotropic,
        power_law_exponent: 1.1,
        teacher: Teacher::Random,
        tokens: None,
    };
    let target = TargetConfig {
        hermite: Some(3),
        terms: None,
        parity: None,
        normalize: false,
        cubic_tokens: false,
    };
    let data = Dataset::generate(&data_cfg, &target, 0);
    let model = FcnModel {
        d: size.d,
        widths: vec![size.n],
        activation: Activation::Erf,
        prior_var: vec![1.0 / size.d as f64, 1.0 / size.n as f64],
        frozen: vec![false, false],
        layernorm: false,
    };
    let dynamics = Dynamics {
        kappa: 1.0,
        step: 1e-4,
        temperature: 1.0,
    };
    let mut ens = Ensemble::<f32>::new(
        model,
        &data.x_train,
        &data.y_train,
        chains,
        1,
        dynamics,
        None,
    );
    ens.advance(steps.clamp(1, 3));
    let cpu_start = process_cpu_seconds();
    let mut rates: Vec<f64> = (0..repeats.max(1))
        .map(|_| {
            let t0 = std::time::Instant::now();
            ens.advance(steps.max(1));
            steps.max(1) as f64 / t0.elapsed().as_secs_f64()
        })
        .collect();
    let cpu = cpu_start.zip(process_cpu_seconds()).map(|(a, b)| b - a);
    let total_steps = (steps.max(1) * repeats.max(1)) as f64;
    let steps_per_cpu_second = cpu.filter(|&c| c >= 0.05).map(|c| total_steps / c);
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    let (p, d, n) = (size.p as f64, size.d as f64, size.n as f64);
    let flops = chains as f64 * (6.0 * p * d * n + 6.0 * p * n);
    BenchCase {
        chains,
        steps_per_second: median,
        gflops: median * flops / 1e9,
        range: [rates[0], rates[rates.len() - 1]],
        steps_per_cpu_second,
    }
}

/// The machine's dense f32 GEMM rate, measured with the library the engine's GEMMs use (faer),
/// so that the effective GFLOP/s of a case can be read against the machine's measured f32
/// GEMM peak.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GemmPeak {
    /// Matrix size n of the n × n × n product C = A·B.
    pub size: usize,
    /// Threads used (all of the rayon pool).
    pub threads: usize,
    /// Median GFLOP/s over the repeats, 2n³ flops per product.
    pub gflops: f64,
    /// Slowest and fastest repeat, GFLOP/s.
    pub range: [f64; 2],
}

/// Times `repeats` products C = A·B of n × n f32 matrices (after one warm-up) on all rayon
/// threads. The matrices hold a deterministic pattern; the product is returned so that a test
/// can check that the timed kernel computed it.
pub fn gemm_peak(n: usize, repeats: usize) -> (GemmPeak, faer::Mat<f32>) {
    use faer::linalg::matmul::matmul;
    use faer::{Accum, Mat, Par};
    let n = n.max(1);
    let a = Mat::<f32>::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.5);
    let b = Mat::<f32>::from_fn(n, n, |i, j| ((i * 5 + j * 2) % 13) as f32 / 13.0 - 0.5);
    let mut c = Mat::<f32>::zeros(n, n);
    let threads = rayon::current_num_threads();
    let par = if threads > 1 {
        Par::rayon(threads)
    } else {
        Par::Seq
    };
    let product = |c: &mut Mat<f32>| {
        matmul(
            c.as_mut(),
            Accum::Replace,
            a.as_ref(),
            b.as_ref(),
            1.0f32,
            par,
        );
    };
    product(&mut c);
    let flops = 2.0 * (n as f64).powi(3);
    let mut rates: Vec<f64> = (0..repeats.max(1))
        .map(|_| {
            let t0 = std::time::Instant::now();
            product(&mut c);
            flops / t0.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    let peak = GemmPeak {
        size: n,
        threads,
        gflops: rates[rates.len() / 2],
        range: [rates[0], rates[rates.len() - 1]],
    };
    (peak, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timed kernel really computes A·B: compared entry by entry with a naive f64 product
    /// of the same pattern.
    #[test]
    fn gemm_peak_times_the_real_product() {
        let n = 37;
        let (peak, c) = gemm_peak(n, 2);
        assert_eq!(peak.size, n);
        assert!(peak.gflops.is_finite() && peak.gflops > 0.0);
        assert!(peak.range[0] <= peak.gflops && peak.gflops <= peak.range[1]);
        let a = |i: usize, j: usize| ((i * 7 + j * 3) % 11) as f64 / 11.0 - 0.5;
        let b = |i: usize, j: usize| ((i * 5 + j * 2) % 13) as f64 / 13.0 - 0.5;
        for i in 0..n {
            for j in 0..n {
                let exact: f64 = (0..n).map(|k| a(i, k) * b(k, j)).sum();
                assert!((c[(i, j)] as f64 - exact).abs() < 1e-4, "C[{i},{j}]");
            }
        }
    }
}
