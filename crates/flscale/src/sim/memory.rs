//! Memory and work of a Langevin run, counted before it starts ([`sample`]), and the checks
//! of an experiment's real values against [`MAX_MAGNITUDE`].
//!
//! The counts follow the engine's own allocations (the ensemble's chain blocks, the models'
//! workspaces, the observables' accumulators, the collapsed sampler's Gram matrices) and are
//! upper bounds in spirit: a term the engine allocates per block of chains is counted for
//! [`CONCURRENT_CHAINS`] chains whatever the thread count. What every thread reserves whether
//! it uses it or not — its stack, its allocator arena, the products' slab — is counted per
//! thread of the run ([`per_thread_terms`]), so that the estimate bounds the address space a
//! run reserves (what `ulimit -v` limits), not only what it touches. The comparison with the
//! memory available is [`crate::limits::Estimate::check_memory`].

use crate::error::{Error, Result};
use crate::limits::{Estimate, MemoryTerm, MAX_MAGNITUDE};
use crate::sim::config::{ExperimentConfig, ModelKind, Precision, SamplerMethod, Start};

/// Chains whose forward/backward workspaces are live at once (blocks of chains run in
/// parallel; the ensemble, `sim/ensemble/`, keeps a block's P × B·N₁ activations near 1 MiB,
/// so B is a few chains to a few dozen). Counting 64 bounds any thread count the build
/// machines have.
pub const CONCURRENT_CHAINS: usize = 64;

/// Refuses real-valued experiment fields outside [10⁻¹⁰⁰, 10¹⁰⁰] (κ, η, T, σ_l², target
/// coefficients) and power-law exponents above 100 (k^−a underflows for every k > 1 beyond).
pub fn check_experiment_values(cfg: &ExperimentConfig) -> Result<()> {
    let positive = |name: String, v: f64| -> Result<()> {
        if (1.0 / MAX_MAGNITUDE..=MAX_MAGNITUDE).contains(&v) {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "{name} = {v:e} is not allowed; it must lie between 1e-100 and 1e100 (docs/limits.md)"
            )))
        }
    };
    let s = &cfg.sampler;
    positive("sampler.kappa".into(), s.kappa)?;
    positive("sampler.step".into(), s.step)?;
    positive("sampler.temperature".into(), s.temperature)?;
    for (i, &v) in cfg.priors.sigma2.iter().flatten().enumerate() {
        positive(format!("priors.sigma2[{i}]"), v)?;
    }
    for (i, &(_, c)) in cfg.target.terms.iter().flatten().enumerate() {
        if c != 0.0 {
            positive(
                format!("target.terms[{i}] coefficient (in magnitude)"),
                c.abs(),
            )?;
        }
    }
    let a = cfg.data.power_law_exponent;
    if a > 100.0 {
        return Err(Error::invalid(format!(
            "data.power_law_exponent = {a:e} is not allowed; it must be at most 100 (the spectrum k^-a underflows beyond)"
        )));
    }
    Ok(())
}

/// Sizes of one network as the engine sees them.
struct NetSizes {
    /// Parameters of one network.
    params: f64,
    /// Multiply–adds of one forward pass on one input.
    macs: f64,
    /// Activation entries of one forward pass on one input (kept for the backward pass).
    activations: f64,
    /// Length of the first-layer filters whose second moment is pooled (0: none).
    filter_dim: f64,
    /// Input entries of one sample (d, or L·d tokens).
    input_len: f64,
}

fn net_sizes(cfg: &ExperimentConfig) -> NetSizes {
    let d = cfg.data.d as f64;
    let widths: Vec<f64> = cfg.model.widths.iter().map(|&w| w as f64).collect();
    match cfg.model.kind() {
        ModelKind::Fcn => {
            // W¹ (N₁ × d), W^l (N_l × N_{l−1}), readout N_{L−1} (paper eq. 1).
            let mut fan_in = d;
            let mut params = 0.0;
            for &n in &widths {
                params += n * fan_in;
                fan_in = n;
            }
            params += fan_in;
            NetSizes {
                params,
                macs: params,
                activations: widths.iter().sum::<f64>(),
                filter_dim: d,
                input_len: d,
            }
        }
        ModelKind::Cnn => {
            // N filters of S entries on N_w = d/S patches, readout N × N_w (App. E.1.2).
            let s = cfg.model.patch().unwrap_or(cfg.data.d).max(1) as f64;
            let n = widths.first().copied().unwrap_or(1.0);
            let windows = (d / s).floor().max(1.0);
            NetSizes {
                params: n * s + n * windows,
                macs: windows * n * s + n * windows,
                activations: windows * n,
                filter_dim: s,
                input_len: d,
            }
        }
        ModelKind::Attention => {
            // H heads of A_h (d × d) and w_h (d) over L tokens (App. E.3): per head the scores
            // x^a A x^b (L·d² + L²·d), the softmax (L²) and the values (L·d).
            let h = cfg.model.heads().unwrap_or(1) as f64;
            let l = cfg.data.tokens.unwrap_or(1) as f64;
            NetSizes {
                params: h * (d * d + d),
                macs: h * (l * d * d + l * l * d + l * l + l * d),
                activations: h * (l * d + l * l),
                filter_dim: 0.0, // attention has no first-layer filters (AttentionModel::filters)
                input_len: l * d,
            }
        }
    }
}

/// Address space a thread reserves beside the arrays it allocates: its stack (Rust's default
/// of 2 MiB for spawned threads; 8 MiB for the main thread, the usual `ulimit -s`), its
/// glibc malloc arena (each thread that allocates gets one of up to 8 per core, each
/// reserving HEAP_MAX_SIZE = 64 MiB of address space on 64-bit Linux, glibc `malloc/arena.c`)
/// and the `gemm` crate's per-thread slab ([`crate::sim::num::gemm::workspace_bytes_per_thread`]).
/// `threads` is the worker count; the main thread is added.
pub fn per_thread_terms(threads: usize) -> Vec<MemoryTerm> {
    let workers = threads.max(1) as f64;
    const MIB: f64 = 1024.0 * 1024.0;
    vec![
        MemoryTerm {
            what: "thread stacks and allocator arenas (per thread)".to_string(),
            bytes: 8.0 * MIB + workers * (2.0 * MIB + 64.0 * MIB),
            sizes: "RAYON_NUM_THREADS".to_string(),
        },
        MemoryTerm {
            what: "matrix-product slabs (per thread)".to_string(),
            bytes: (workers + 1.0) * crate::sim::num::gemm::workspace_bytes_per_thread(),
            sizes: "RAYON_NUM_THREADS".to_string(),
        },
    ]
}

/// Memory and work of `flscale sample` on `cfg` (also one grid point of a sweep) on the
/// current rayon pool's thread count.
pub fn sample(cfg: &ExperimentConfig) -> Estimate {
    sample_on_threads(cfg, rayon::current_num_threads())
}

/// [`sample`] on `threads` worker threads.
pub fn sample_on_threads(cfg: &ExperimentConfig, threads: usize) -> Estimate {
    let s = &cfg.sampler;
    let net = net_sizes(cfg);
    let p = cfg.data.p as f64;
    let n_test = cfg.data.n_test as f64;
    let chains = s.chains as f64 * if s.start == Start::Both { 2.0 } else { 1.0 };
    let float = match s.precision {
        Precision::F32 => 4.0,
        Precision::F64 => 8.0,
    };
    let live = chains.min(CONCURRENT_CHAINS as f64);
    let measurements = (s.steps / s.thin.max(1)) as f64;
    let mut e = Estimate::default();
    // The data in f64 and in the sampler's precision (sim/data.rs, sim/driver/run.rs).
    e.add(
        "training inputs (P × input)",
        p * net.input_len * (8.0 + float),
        "data.p, data.d, data.tokens",
    );
    e.add(
        "test inputs (n_test × input)",
        n_test * net.input_len * (8.0 + float),
        "data.n_test, data.d, data.tokens",
    );
    // θ and ∇U per chain (ChainBlock); MALA keeps a proposal and its gradient, HMC a momentum.
    let copies = 2.0
        + if s.proposal.is_metropolis() { 2.0 } else { 0.0 }
        + if s.proposal.leapfrog_steps().is_some() {
            1.0
        } else {
            0.0
        };
    e.add(
        "weights and gradients of every chain",
        chains * net.params * copies * float,
        "sampler.chains, model.widths, data.d",
    );
    e.add(
        "residuals of every chain (P per chain)",
        chains * p * float,
        "sampler.chains, data.p",
    );
    // Forward/backward workspaces (h, σ(h), σ'(h) per layer) on the train and the test set.
    e.add(
        "activations of the chains computed at once",
        live * (p.max(n_test)) * net.activations * 4.0 * float,
        "data.p, data.n_test, model.widths",
    );
    // The first-layer second moment Σ w wᵀ for R's leading direction, pooled over chains
    // (sim/observe/leading_direction.rs): one d × d sum and its row buffer for the whole run
    // (the two starts of start = "both" run one after the other), kept only up to
    // MAX_LEADING_DIRECTION_DIM.
    let dim = net.filter_dim as usize;
    if crate::sim::observe::leading_direction::PooledSecondMoment::enabled_for(dim) {
        e.add(
            "the pooled d × d first-layer second moment",
            net.filter_dim * (net.filter_dim + 1024.0) * 8.0,
            "data.d",
        );
    }
    // The ρ histogram (HIST_BINS u64 counts) and the fixed bookkeeping of every chain: its
    // RNG stream, divergence record, energies and per-chain result row (about 1 kB).
    e.add(
        "histograms and bookkeeping of every chain",
        chains * (crate::sim::observe::observables::HIST_BINS as f64 * 8.0 + 1024.0),
        "sampler.chains",
    );
    e.add(
        "summed test predictions of every chain",
        chains * n_test * 8.0,
        "sampler.chains, data.n_test",
    );
    // One stored measurement (≈ 80 bytes) per chain and measured step, and the trace rows.
    e.add(
        "stored measurements (every thin-th step, every chain)",
        (chains + 1.0) * measurements * 80.0,
        "sampler.steps or raise sampler.thin",
    );
    if s.method == SamplerMethod::Collapsed {
        collapsed_terms(cfg, &mut e, chains, live);
    }
    // The packing buffers of the products running at once (sim/num/gemm.rs): the first
    // layer's (rows × input by input × the block's units) on every thread, and the pooled
    // second moment's d × d update from 1024 buffered rows.
    let width = cfg.model.widths.iter().copied().max().unwrap_or(1).max(1);
    let rows = cfg.data.p.max(cfg.data.n_test).max(1);
    let input = net.input_len as usize;
    let per_thread = crate::sim::num::gemm::packing_bytes(
        rows,
        CONCURRENT_CHAINS * width,
        input,
        float as usize,
    );
    // The pooled sum is updated on one thread at a time.
    let pooled = if crate::sim::observe::leading_direction::PooledSecondMoment::enabled_for(dim) {
        crate::sim::num::gemm::packing_bytes(dim, dim, 1024, 8)
    } else {
        0.0
    };
    e.add(
        "matrix-product packing buffers (per thread)",
        (threads.max(1) + 1) as f64 * per_thread + pooled,
        "data.d, data.p, model.widths",
    );
    e.memory.extend(per_thread_terms(threads));
    // Forward + backward ≈ 3 passes of 2 flops per multiply–add on the training set, a test
    // forward at every measurement (the Fig. 2 count of sim/bench/speed.rs: 6·P·(d·N + N)).
    let evals = s.steps as f64 * s.proposal.leapfrog_steps().unwrap_or(1) as f64;
    e.flops =
        chains * (evals * 6.0 * p.max(1.0) * net.macs + measurements * 2.0 * n_test * net.macs);
    if s.method == SamplerMethod::Collapsed {
        // The readout's Gaussian conditional: the N × N Gram on P features and its Cholesky
        // factor at every step (sim/model/collapsed.rs).
        let n = collapsed_width(cfg);
        e.flops += chains * evals * (2.0 * p * n * n + n * n * n / 3.0);
    }
    e.work_sizes = "sampler.steps, sampler.chains, data.p, model.widths".to_string();
    e.sort()
}

/// Width N of the layer whose readout the collapsed sampler integrates out.
fn collapsed_width(cfg: &ExperimentConfig) -> f64 {
    let m = &cfg.model;
    match m.kind() {
        ModelKind::Fcn => m.widths.last().copied().unwrap_or(1) as f64,
        ModelKind::Cnn => {
            let s = m.patch().unwrap_or(cfg.data.d).max(1);
            (m.widths.first().copied().unwrap_or(1) * (cfg.data.d / s).max(1)) as f64
        }
        ModelKind::Attention => (m.heads().unwrap_or(1) * cfg.data.d) as f64,
    }
}

/// The collapsed sampler's per-chain arrays: the P × N features of the last hidden layer, the
/// N × N Gram matrix and its Cholesky factor, and with `adapt_step` the block preconditioner
/// (one fan-in × fan-in matrix per neuron, docs/langevin.md "Preconditioner").
fn collapsed_terms(cfg: &ExperimentConfig, e: &mut Estimate, chains: f64, live: f64) {
    let n = collapsed_width(cfg);
    let p = cfg.data.p as f64;
    e.add(
        "readout features of the chains computed at once (P × N)",
        live * p * n * 8.0,
        "data.p, model.widths",
    );
    e.add(
        "readout Gram matrices and Cholesky factors (N × N per chain)",
        chains * 3.0 * n * n * 8.0,
        "model.widths, sampler.chains",
    );
    let block = cfg.sampler.adapt_step
        && cfg.model.kind() == ModelKind::Fcn
        && matches!(
            cfg.sampler.preconditioner,
            None | Some(crate::sim::config::Preconditioner::Block)
        );
    if block {
        let w = &cfg.model.widths;
        let fan_in = if w.len() >= 2 {
            w[w.len() - 2]
        } else {
            cfg.data.d
        } as f64;
        e.add(
            "block preconditioner (fan-in × fan-in per neuron and chain)",
            chains * n * fan_in * fan_in * 8.0 * 2.0,
            "model.widths, data.d, or set sampler.preconditioner = \"neuron\"",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{check_steps, MAX_STEPS};

    fn experiment(d: usize, chains: usize, p: usize) -> ExperimentConfig {
        let text = format!(
            "[model]\nkind = \"fcn\"\nwidths = [40]\n[data]\nd = {d}\np = {p}\nn_test = 100\n\
             [target]\nhermite = 3\n[sampler]\nkappa = 0.1\nstep = 0.001\nsteps = 100\n\
             burn_in = 50\nthin = 10\nchains = {chains}\nseed = 1\n"
        );
        ExperimentConfig::from_toml(&text, "t").expect("valid experiment")
    }

    fn term(e: &Estimate, starts: &str) -> f64 {
        e.memory
            .iter()
            .find(|t| t.what.starts_with(starts))
            .map(|t| t.bytes)
            .unwrap_or(f64::NAN)
    }

    #[test]
    fn the_second_moment_is_pooled_so_d_4000_with_100_chains_fits() {
        // A per-chain d × d sum at d = 4000, chains = 100 was 12.8 GB; pooled it is
        // one 4000 × (4000 + 1024) f64 block, 161 MB, and the whole run stays well under 1 GB.
        let est = sample(&experiment(4000, 100, 50));
        assert_eq!(term(&est, "the pooled"), 4000.0 * 5024.0 * 8.0);
        assert!(est.bytes() < 1e9, "{}", est.bytes());
        assert!(est.check_memory("this run", 2e9, "--max-memory").is_ok());
        // d = 10⁶: no d × d sum at all (above MAX_LEADING_DIRECTION_DIM), and the weights of
        // 100 chains (100 · 4·10⁷ parameters) alone are 32 GB: refused with the estimate.
        let est = sample(&experiment(1_000_000, 100, 50));
        assert!(term(&est, "the pooled").is_nan());
        let err = est
            .check_memory("this run", 20e9, "--max-memory")
            .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let msg = err.to_string();
        assert!(
            msg.contains("GB") && msg.contains("sampler.chains"),
            "{msg}"
        );
    }

    #[test]
    fn weights_and_work_follow_the_parameter_count() {
        // FCN d = 50, N = 40: 50·40 + 40 = 2040 parameters; f32 θ and ∇U, and the default
        // MALA's proposal and its gradient → 2040·4·4 bytes.
        let est = sample(&experiment(50, 3, 200));
        assert_eq!(term(&est, "weights"), 3.0 * 2040.0 * 4.0 * 4.0);
        // 100 steps × 6·P·params + 10 measurements × 2·n_test·params, per chain.
        let flops = 3.0 * (100.0 * 6.0 * 200.0 * 2040.0 + 10.0 * 2.0 * 100.0 * 2040.0);
        assert_eq!(est.flops, flops);
        assert!(est.check_work("x", false).is_ok());
    }

    #[test]
    fn absurd_work_needs_confirmation() {
        let mut e = experiment(100, 1000, 10_000);
        e.sampler.steps = 1_000_000_000;
        let est = sample(&e);
        let err = est.check_work("this run", false).unwrap_err();
        assert!(err.to_string().contains("--yes"), "{err}");
        assert!(est.check_work("this run", true).is_ok());
        assert!(check_steps(MAX_STEPS).is_ok());
        assert!(check_steps(MAX_STEPS + 1).is_err());
    }
}
