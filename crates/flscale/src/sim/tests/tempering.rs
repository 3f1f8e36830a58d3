//! Replica exchange in the FCN run ([`crate::sim::driver::tempered`]) against exact answers:
//! the prior at P = 0 (every swap accepted), Bayesian linear regression with a frozen first
//! layer (every β's posterior Gaussian, the β = 1 one known in closed form), the two mirror
//! modes of a one-neuron erf network (weight ½ each by the symmetry (w, a) → (−w, −a)), and
//! thread-count identity.

use crate::sim::config::{ExperimentConfig, SamplerMethod};
use crate::sim::data::Dataset;
use crate::sim::driver::run::{Run, RunResult};
use crate::sim::driver::tempered::{slot_seed, Replicas, TemperingDiagnostics};
use crate::sim::ensemble::fcn::{Dynamics, Ensemble};
use crate::sim::kernel::mala::Kernel;
use crate::sim::langevin::Proposal;
use crate::sim::model::fcn::FcnModel;

fn config(text: &str) -> ExperimentConfig {
    ExperimentConfig::from_toml(text, "test.toml").unwrap()
}

/// At P = 0 the data term vanishes, so every β targets the prior and every swap is accepted
/// (log ratio 0); the β = 1 replicas must still sample 𝒩(0, v_g) in every group.
#[test]
fn tempering_at_p_zero_accepts_every_swap_and_keeps_the_prior() {
    let cfg = config(
        r#"
[model]
kind = "fcn"
activation = "erf"
widths = [4]
[data]
d = 3
p = 0
n_test = 20
[target]
hermite = 1
[sampler]
kappa = 1.0
step = 0.002
steps = 6000
burn_in = 1000
thin = 25
chains = 48
seed = 11
precision = "f64"
mala = true
tempering = { replicas = 4, swap_every = 5 }
[priors]
sigma2 = [1.0, 2.0]
"#,
    );
    let r = Run::new(&cfg).run().unwrap();
    let t = r.summary.tempering.as_ref().expect("tempering diagnostics");
    assert_eq!(t.replicas, 4);
    assert_eq!(t.swap_acceptance, vec![1.0; 3], "{t:?}");
    // With every swap accepted, a state crosses the 4 slots and back in 2·3 rounds.
    assert!(t.round_trips > 0 && t.barrier == 0.0, "{t:?}");
    let model = FcnModel::from_config(&cfg);
    for (g, stats) in r.summary.diagnostics.groups.iter().enumerate() {
        let v = model.prior_var[g];
        // As in fcn.rs (ESS ≳ 2000 per group): relative MC error of ⟨θ²⟩ ≈ 3 %.
        let m2 = stats.second_moment.unwrap() / v;
        let mean = stats.mean.unwrap() / v.sqrt();
        assert!((m2 - 1.0).abs() < 0.1, "{}: ⟨θ²⟩/v = {m2}", stats.group);
        assert!(mean.abs() < 0.1, "{}: ⟨θ⟩/√v = {mean}", stats.group);
    }
}

/// With the first layer frozen, every replica's target is Gaussian in the readout a, and the
/// β = 1 one is the Bayesian linear regression on Φ = erf(XW₁ᵀ): precision
/// Λ = ΦᵀΦ/κ + I/v, mean Λ⁻¹Φᵀy/κ (T = 1). MALA replicas at a ladder from 1 to 0.05 with
/// swaps every 5 steps (and the ladder adapted during burn-in); the β = 1 samples whitened
/// per chain, z = Lᵀ(a − m), must have mean 0 and identity covariance.
#[test]
fn tempered_frozen_first_layer_gives_bayesian_linear_regression() {
    let diagnostics = tempered_frozen_first_layer("replicas = 5");
    assert_eq!(diagnostics.replicas, 5);
    assert!(diagnostics.resizes.is_empty());
}

/// The same with R chosen from the barrier (`max_replicas`): started over-provisioned at
/// R = 10, the ladder shrinks to ⌈2Λ⌉ + 1 in the second quarter of burn-in, each new slot a
/// copy of the nearest old one, and the β = 1 law is still the exact one.
#[test]
fn tempered_frozen_first_layer_stays_exact_when_the_ladder_is_resized() {
    let diagnostics = tempered_frozen_first_layer("replicas = 10, max_replicas = 16");
    let last = diagnostics.resizes.last().expect("R was resized");
    assert_eq!(diagnostics.resizes[0].from, 10, "{diagnostics:?}");
    assert_eq!(diagnostics.replicas, last.to);
    for r in &diagnostics.resizes {
        assert_eq!(
            r.to,
            crate::sim::kernel::tempering::Ladder::replicas_for_barrier(r.barrier, 16)
        );
    }
    assert!(diagnostics.replicas < 10, "{diagnostics:?}");
    assert_eq!(diagnostics.betas.len(), diagnostics.replicas);
    assert_eq!(diagnostics.swap_acceptance.len(), diagnostics.replicas - 1);
}

/// The frozen-first-layer run with `sampler.tempering = { <tempering>, beta_min = 0.05,
/// swap_every = 5 }`, its whitened β = 1 readouts checked against the closed form; returns the
/// tempering diagnostics.
fn tempered_frozen_first_layer(tempering: &str) -> TemperingDiagnostics {
    let (model, x, y, kappa) = super::fcn::frozen_first_layer_problem();
    let n = model.widths[0];
    let v_readout = model.prior_var[1];
    let chains = 24;
    let dynamics = Dynamics {
        kappa,
        step: 2e-3,
        temperature: 1.0,
    };
    let settings = config(&format!(
        r#"
[model]
kind = "fcn"
widths = [4]
[data]
d = 3
p = 12
[target]
hermite = 1
[sampler]
kappa = 0.5
step = 2e-3
steps = 2
burn_in = 1
thin = 1
chains = 24
seed = 3
mala = true
tempering = {{ {tempering}, beta_min = 0.05, swap_every = 5 }}
"#
    ));
    let s = &settings.sampler;
    let start = |slot: usize| {
        // Every slot's chain k gets chain k's frozen W₁ (the seed of slot 0) and its own
        // readout and noise stream: slots that shared their noise would move in step, and
        // swaps are exact only for independent replicas.
        let first = Ensemble::<f64>::new(model.clone(), &x, &y, chains, 3, dynamics, None);
        let mut e = Ensemble::<f64>::new(
            model.clone(),
            &x,
            &y,
            chains,
            slot_seed(3, slot),
            dynamics,
            None,
        );
        for (b, f) in e.blocks.iter_mut().zip(first.blocks) {
            b.params[0] = f.params[0].clone();
        }
        e
    };
    let new_kernel =
        |e: &Ensemble<f64>| Kernel::new(e, SamplerMethod::Plain, Proposal::MetropolisLangevin);
    let mut ens = start(0);
    let mut kernel = new_kernel(&ens);
    let mut replicas = Replicas::new(s.tempering().unwrap(), s, chains, start, new_kernel);
    let exact: Vec<(Vec<f64>, Vec<f64>)> = (0..chains)
        .map(|k| super::fcn::readout_posterior(&ens.chain_group(k, 0), &x, &y, kappa, v_readout, n))
        .collect();
    let mut t = 0;
    // Burn-in of 3000 steps with three ladder adaptations (at t = 500, 1000, 1500: the
    // second and third in the second quarter, where R may change).
    for _ in 0..3 {
        for _ in 0..100 {
            t += 5;
            replicas.advance(&mut ens, &mut kernel, 5, t, false);
        }
        replicas.adapt(&ens, t, 3000, |_, _, _| {});
    }
    replicas.start_window();
    let (mut sum, mut cov, mut count) = (vec![0.0; n], vec![0.0; n * n], 0.0);
    for _ in 0..400 {
        for _ in 0..4 {
            t += 5;
            replicas.advance(&mut ens, &mut kernel, 5, t, true);
        }
        for (k, (l, m)) in exact.iter().enumerate() {
            let a = ens.chain_group(k, 1);
            let z: Vec<f64> = (0..n)
                .map(|i| (i..n).map(|r| l[r * n + i] * (a[r] - m[r])).sum())
                .collect();
            for i in 0..n {
                sum[i] += z[i];
                for j in 0..n {
                    cov[i * n + j] += z[i] * z[j];
                }
            }
            count += 1.0;
        }
    }
    let diagnostics = replicas.finish(&mut ens);
    assert!(diagnostics.adapted);
    assert!(
        diagnostics
            .swap_acceptance
            .iter()
            .all(|&a| a > 0.05 && a < 1.0),
        "{diagnostics:?}"
    );
    assert!(diagnostics.round_trips > 0, "{diagnostics:?}");
    // 9600 draws 20 steps apart; ESS ≳ 1000: MC error of the mean ≲ 0.03, of a covariance
    // entry ≲ 0.05. MALA leaves no step bias.
    for i in 0..n {
        let mean = sum[i] / count;
        assert!(mean.abs() < 0.15, "whitened mean {i}: {mean}");
        for j in 0..n {
            let c = cov[i * n + j] / count - (sum[i] / count) * (sum[j] / count);
            let expected = if i == j { 1.0 } else { 0.0 };
            assert!(
                (c - expected).abs() < 0.2,
                "whitened covariance ({i},{j}): {c}"
            );
        }
    }
    diagnostics
}

/// One erf neuron fitting y = He1(Φ*) = ±x (d = 1): f = a·erf(wx) has two mirror modes,
/// (w, a) and (−w, −a), of equal weight by symmetry (erf odd, prior even), separated by a
/// barrier of about P·⟨y²⟩/(2κ) = 200 nats at f = 0. Started in one mode, untempered MALA
/// stays there; the tempered run puts half the chains in each.
fn one_neuron(chains: usize, extra: &str) -> ExperimentConfig {
    config(&format!(
        r#"
[model]
kind = "fcn"
activation = "erf"
widths = [1]
[data]
d = 1
p = 20
n_test = 10
[target]
hermite = 1
[sampler]
kappa = 0.05
step = 0.3
steps = 3000
burn_in = 1000
thin = 10
chains = {chains}
seed = 5
precision = "f64"
mala = true
adapt_step = true
{extra}
[priors]
sigma2 = [1.0, 1.0]
"#
    ))
}

fn fraction_positive_readout(r: &RunResult) -> f64 {
    let alive: Vec<&Vec<Vec<f64>>> = r
        .final_state
        .iter()
        .zip(&r.chains)
        .filter(|(_, row)| row.status == "ok")
        .map(|(s, _)| s)
        .collect();
    alive.iter().filter(|s| s[1][0] > 0.0).count() as f64 / alive.len() as f64
}

#[test]
fn tempering_finds_both_mirror_modes_of_one_neuron() {
    let chains = 200;
    let plain = one_neuron(chains, "");
    let data = Dataset::generate(&plain.data, &plain.target, plain.sampler.seed);
    let sign = data.teacher[0].signum();
    // The mode with a > 0: w along the teacher, a = 1.
    let initial: Vec<Vec<Vec<f64>>> = (0..chains)
        .map(|_| vec![vec![1.5 * sign], vec![1.0]])
        .collect();
    let stuck = Run::new(&plain).start_from(&initial).run().unwrap();
    assert!(
        fraction_positive_readout(&stuck) > 0.97,
        "untempered: {}",
        fraction_positive_readout(&stuck)
    );
    let tempered = one_neuron(chains, "tempering = { replicas = 8, swap_every = 2 }");
    let r = Run::new(&tempered).start_from(&initial).run().unwrap();
    let t = r.summary.tempering.as_ref().unwrap();
    let f = fraction_positive_readout(&r);
    // 200 independent chains: binomial standard error 0.035; 4σ.
    assert!((f - 0.5).abs() < 0.14, "tempered: {f}, {t:?}");
    assert!(t.round_trips as usize > chains, "{t:?}");
}

/// Started with too few replicas for the mirror modes' barrier (R = 3, whose two pairs
/// rejected 88 % of swaps), `max_replicas` grows the ladder to ⌈2Λ⌉ + 1 during burn-in and the
/// tempered run then finds both modes with weight ½.
#[test]
fn a_growing_ladder_finds_both_mirror_modes_of_one_neuron() {
    let chains = 200;
    let cfg = one_neuron(
        chains,
        "tempering = { replicas = 3, max_replicas = 16, swap_every = 2 }",
    );
    let data = Dataset::generate(&cfg.data, &cfg.target, cfg.sampler.seed);
    let sign = data.teacher[0].signum();
    let initial: Vec<Vec<Vec<f64>>> = (0..chains)
        .map(|_| vec![vec![1.5 * sign], vec![1.0]])
        .collect();
    let r = Run::new(&cfg).start_from(&initial).run().unwrap();
    let t = r.summary.tempering.as_ref().unwrap();
    assert!(t.replicas > 3, "{t:?}");
    assert_eq!(t.resizes[0].from, 3, "{t:?}");
    // Every resize in the second quarter of burn-in (steps 250 … 500).
    assert!(
        t.resizes.iter().all(|z| (250..=500).contains(&z.step)),
        "{t:?}"
    );
    // R ≈ 2Λ + 1 spreads Λ over the pairs at a rejection of about ½ each (measured 3 → 5 →
    // 6 → 7 slots, acceptance 0.55–0.59 per pair, where R = 3 accepted 0.12).
    assert!(
        t.swap_acceptance.iter().all(|&a| a > 0.35 && a < 0.8),
        "{t:?}"
    );
    assert!(t.suggested_replicas.abs_diff(t.replicas) <= 1, "{t:?}");
    let f = fraction_positive_readout(&r);
    assert!((f - 0.5).abs() < 0.14, "tempered: {f}, {t:?}");
    assert!(t.round_trips as usize > chains, "{t:?}");
}

/// The swaps draw from per-chain streams and visit chains in order: a tempered run (two
/// blocks of chains, so two threads split every slot) is identical for 1 and 2 threads.
#[test]
fn tempered_runs_do_not_depend_on_the_thread_count() {
    let cfg = config(
        r#"
[model]
kind = "fcn"
activation = "erf"
widths = [6]
[data]
d = 6
p = 40
n_test = 100
[target]
terms = [[1, 1.0], [3, 0.3]]
[sampler]
kappa = 0.2
step = 1.0
seed = 3
method = "collapsed"
adapt_step = true
steps = 400
burn_in = 200
thin = 50
chains = 8
mala = true
hmc_steps = 3
tempering = { replicas = 3, max_replicas = 6, swap_every = 4 }
"#,
    );
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| Run::new(&cfg).run().unwrap().summary)
    };
    let one = run(1);
    let t = one.tempering.as_ref().unwrap();
    assert!(t.round_trips > 0);
    // The ladder grew (3 → 4 at step 100): the resize path is covered too.
    assert!(!t.resizes.is_empty(), "{t:?}");
    assert_eq!(one, run(2));
}
