//! The speed benchmark of `flscale bench` (spec 02, "Performance bar"): the paper's Fig. 2
//! setting — two-layer erf network, d = N = 40, P = 1600, κ = σ1² = σ2² = 1, T = 1, f32 —
//! timed in ensemble-steps per second (all E chains advanced once) and effective GFLOP/s
//! counted as 6PdN + 6PN per network-step, the same model and count as the PyTorch and JAX
//! references in `shared/bench/`.

use serde::Serialize;

use super::activation::Activation;
use super::config::{Covariance, DataConfig, TargetConfig, Teacher};
use super::data::Dataset;
use super::model::FcnModel;
use super::sampler::{Dynamics, Ensemble};

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
