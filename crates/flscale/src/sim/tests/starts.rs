//! Cold and hot starts as evidence: on shared noise streams their estimates are
//! correlated, so the two-sample z-test that assumes independence is too lenient; on
//! independent streams (the default) they are not. The cold start keeps the run's streams, the
//! coupled starts' meeting is certified per chain, and every start is the same on one and two
//! threads.

use crate::sim::config::ExperimentConfig;
use crate::sim::driver::coupling::{start_seed, MEETING_TOLERANCE};
use crate::sim::driver::result::{ChainRow, StartResults};
use crate::sim::driver::run::{Run, RunResult};

/// A two-layer erf network on a He1 target at P = 8d: a posterior that a hot start leaves
/// within the burn-in. `extra` adds `[sampler]` lines. Unadjusted Langevin at a fixed step:
/// synchronously coupled unadjusted chains contract towards each other, while the default
/// Metropolis-adjusted kernel's accept/reject steps split coupled chains apart (its coupled
/// starts met in none of 6 chains), which would need a coupled accept step as well.
fn setting(chains: usize, steps: usize, extra: &str) -> ExperimentConfig {
    let text = format!(
        r#"
[model]
kind = "fcn"
widths = [8]
[data]
d = 4
p = 32
n_test = 200
[target]
hermite = 1
[sampler]
kappa = 0.5
step = 0.01
steps = {steps}
burn_in = {}
thin = 10
chains = {chains}
seed = 5
precision = "f64"
{kernel}
{extra}
"#,
        steps / 2,
        kernel = if extra.contains("mala") {
            ""
        } else {
            "mala = false\nadapt_step = false"
        },
    );
    ExperimentConfig::from_toml(&text, "starts.toml").unwrap()
}

fn run(cfg: &ExperimentConfig, threads: usize) -> RunResult {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(|| Run::new(cfg).run().unwrap())
}

/// Pearson correlation of two equally long samples.
fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

/// Sample standard deviation.
fn std_dev(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}

fn per_chain(rows: &[ChainRow], f: fn(&ChainRow) -> Option<f64>) -> Vec<f64> {
    rows.iter().map(|r| f(r).unwrap()).collect()
}

/// The defect of shared streams, measured: per chain k, the cold and the hot start's time
/// averages are strongly correlated when chain k of both runs on stream k of the same seed,
/// and uncorrelated on independent streams. The z-test divides cold − hot by
/// √(err_cold² + err_hot²), the spread of a difference of independent estimates; its true
/// spread, from the per-chain differences, is far smaller on shared streams, so z shrinks by
/// that ratio and a real hot/cold gap passes as agreement. On independent streams the ratio is
/// about 1, as the test assumes. Measured: coupled, correlation 1.000 and ratio 0.000 for both
/// observables (the copies coalesce during burn-in); independent, 0.24/0.25 and 0.87/0.88.
#[test]
fn coupled_starts_are_correlated_evidence_and_independent_ones_are_not() {
    let chains = 32;
    let cold = run(&setting(chains, 2000, ""), 1);
    let hot_independent = run(&setting(chains, 2000, "start = \"hot\""), 1);
    let hot_coupled = run(
        &setting(
            chains,
            2000,
            "start = \"hot\"\nstarts_coupling = \"coupled\"",
        ),
        1,
    );
    assert_eq!(cold.summary.start_seeds.cold, Some(5));
    assert_eq!(hot_coupled.summary.start_seeds.hot, Some(5));
    let derived = hot_independent.summary.start_seeds.hot.unwrap();
    assert_ne!(derived, 5);
    for (name, f) in [
        (
            "alignment",
            (|r: &ChainRow| r.alignment) as fn(&ChainRow) -> Option<f64>,
        ),
        ("R", |r: &ChainRow| r.r_overlap2),
    ] {
        let c = per_chain(&cold.chains, f);
        let mut seen = Vec::new();
        for (coupling, hot) in [("coupled", &hot_coupled), ("independent", &hot_independent)] {
            let h = per_chain(&hot.chains, f);
            let rho = correlation(&c, &h);
            let diff: Vec<f64> = c.iter().zip(&h).map(|(a, b)| a - b).collect();
            // The error of cold − hot over the chains' paired differences, against the
            // combined error of the z-test (each the standard error over chains).
            let ratio = std_dev(&diff) / (std_dev(&c).powi(2) + std_dev(&h).powi(2)).sqrt();
            seen.push(format!(
                "{coupling}: correlation {rho:.3}, error ratio {ratio:.3}"
            ));
            let ok = match coupling {
                "coupled" => rho > 0.9 && ratio < 0.4,
                _ => rho.abs() < 0.5 && (0.7..1.4).contains(&ratio),
            };
            assert!(ok, "{name}, {coupling}: {seen:?}");
        }
        eprintln!("{name}: {seen:?}");
    }
}

/// `start = "both"` is a cold-only run and a hot-only run side by side: the cold ensemble keeps
/// the run's own streams (a cold run's numbers do not change), and the independent hot
/// ensemble is the hot-only run on the derived seed.
#[test]
fn both_starts_are_the_cold_run_and_the_hot_run_on_their_own_seeds() {
    let cold = run(&setting(6, 400, ""), 1);
    let hot = run(&setting(6, 400, "start = \"hot\""), 1);
    let both = run(&setting(6, 400, "start = \"both\""), 1);
    let hot_seed = start_seed(5, true, Default::default());
    assert_eq!(both.summary.start_seeds.cold, Some(5));
    assert_eq!(both.summary.start_seeds.hot, Some(hot_seed));
    assert_eq!(hot.summary.start_seeds.hot, Some(hot_seed));
    assert_eq!(hot.summary.start_seeds.cold, None);
    assert_eq!(both.summary.hot_start, Some(StartResults::of(&hot.summary)));
    assert!(both.summary.equilibration.is_some() && both.summary.coupling.is_none());
    let mut cold_part = both.summary.clone();
    cold_part.hot_start = None;
    cold_part.start_seeds.hot = None;
    cold_part.equilibrated = None;
    cold_part.equilibration = None;
    assert_eq!(cold_part, cold.summary);
    assert_eq!(both.chains, cold.chains);
    assert_eq!(both.traces, cold.traces);
}

/// Coupled starts carry a coupling certificate and no verdict. Started far apart on the same
/// streams, the copies of every chain of this unimodal posterior meet within the run and stay
/// together; 20 steps are too few for any to meet.
#[test]
fn coupled_starts_certify_their_meeting_per_chain() {
    let coupled = "start = \"both\"\nstarts_coupling = \"coupled\"";
    let long = run(&setting(6, 2000, coupled), 1).summary;
    assert_eq!((long.equilibrated, &long.equilibration), (None, &None));
    assert_eq!(long.start_seeds.hot, Some(5));
    let c = long.coupling.unwrap();
    assert_eq!((c.met, c.compared, c.chains.len()), (6, 6, 6), "{c:?}");
    assert_eq!(c.tolerance, MEETING_TOLERANCE);
    for m in &c.chains {
        assert_eq!(m.status, "met", "{m:?}");
        assert_eq!(m.stayed_met, Some(true), "{m:?}");
        assert!(m.meeting_step.unwrap() > 10, "{m:?}");
        assert!(
            m.final_relative_distance.unwrap() <= MEETING_TOLERANCE,
            "{m:?}"
        );
    }
    assert_eq!(
        c.last_meeting_step,
        c.chains.iter().filter_map(|m| m.meeting_step).max()
    );
    let short = run(&setting(6, 20, coupled), 1);
    let c = short.summary.coupling.unwrap();
    assert_eq!((c.met, c.last_meeting_step), (0, None), "{c:?}");
    for m in &c.chains {
        assert_eq!((m.status.as_str(), m.meeting_step), ("not met", None));
        assert!(m.final_relative_distance.unwrap() > 1e-2, "{m:?}");
    }
}

/// Same file and seed → the same summary and chain rows on one and on two threads
/// (spec 02 "Reproducible") with both starts, independent (the hot one on its derived seed)
/// and coupled (the certificate included); 8 chains make two blocks of 4, which the two
/// threads split.
#[test]
fn both_starts_do_not_depend_on_the_thread_count() {
    for extra in [
        "start = \"both\"",
        "start = \"both\"\nstarts_coupling = \"coupled\"",
        "start = \"both\"\nmala = true\nadapt_step = true",
    ] {
        let cfg = setting(8, 300, extra);
        let (one, two) = (run(&cfg, 1), run(&cfg, 2));
        assert!(one.summary.hot_start.is_some(), "{extra}");
        assert_eq!(one.summary, two.summary, "{extra}");
        assert_eq!(one.chains, two.chains, "{extra}");
        assert_eq!(one.final_state, two.final_state, "{extra}");
    }
}
