//! `cargo bench -p flscale --bench langevin_step`: one ensemble step of the plain and of the
//! collapsed sampler at the paper's Fig. 2 size (two-layer erf, d = N = 40, P = 1600, E = 30,
//! f32; spec 02, "Performance bar"). Measured numbers go to BENCHMARKS.md with the command.

use flscale::activation::Activation;
use flscale::sim::config::{Covariance, DataConfig, SamplerMethod, TargetConfig, Teacher};
use flscale::sim::data::Dataset;
use flscale::sim::ensemble::fcn::{Dynamics, Ensemble};
use flscale::sim::kernel::mala::Kernel;
use flscale::sim::langevin::Proposal;
use flscale::sim::model::FcnModel;

const CHAINS: usize = 30;

fn main() {
    divan::main();
}

fn ensemble() -> Ensemble<f32> {
    let (d, n, p) = (40, 40, 1600);
    let data = Dataset::generate(
        &DataConfig {
            d,
            p,
            n_test: 1,
            covariance: Covariance::Isotropic,
            power_law_exponent: 1.1,
            teacher: Teacher::Random,
            tokens: None,
        },
        &TargetConfig {
            hermite: Some(3),
            terms: None,
            parity: None,
            normalize: false,
            cubic_tokens: false,
        },
        0,
    );
    let model = FcnModel {
        d,
        widths: vec![n],
        activation: Activation::Erf,
        prior_var: vec![1.0 / d as f64, 1.0 / n as f64],
        frozen: vec![false, false],
        layernorm: false,
    };
    let dynamics = Dynamics {
        kappa: 1.0,
        step: 1e-4,
        temperature: 1.0,
    };
    Ensemble::new(
        model,
        &data.x_train,
        &data.y_train,
        CHAINS,
        1,
        dynamics,
        None,
    )
}

/// One plain (fused ULA) ensemble step, E = 30.
#[divan::bench(sample_count = 20)]
fn plain_step(bencher: divan::Bencher) {
    let mut ens = ensemble();
    ens.advance(1);
    bencher.bench_local(|| ens.advance(1));
}

/// One collapsed ensemble step (hidden weights; N × N Cholesky per chain), E = 30.
#[divan::bench(sample_count = 20)]
fn collapsed_step(bencher: divan::Bencher) {
    let mut ens = ensemble();
    let mut kernel = Kernel::new(&ens, SamplerMethod::Collapsed, Proposal::Langevin);
    kernel.advance(&mut ens, 1);
    bencher.bench_local(|| kernel.advance(&mut ens, 1));
}
