//! `flscale bench [--json]`: ensemble-steps per second and effective GFLOP/s of the Langevin
//! engine in the paper's Fig. 2 setting (spec 02, "Performance bar").

use flscale::sim::bench::sampling::{
    compare, compare_tempered, SamplerEfficiency, SamplingComparison, SamplingSetting,
    DEFAULT_COLLAPSED_THIN, DEFAULT_HMC_STEPS,
};
use flscale::sim::bench::{bench_case, gemm_peak, BenchSize};
use flscale::sim::config::{Preconditioner, TemperingConfig};
use flscale::{Error, Result};

use super::{out, out_json, Ctx};

/// Arguments of `flscale bench`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  flscale bench            # E = 30 and 300, d = N = 40, P = 1600, f32\n  \
flscale bench --json --chains 300 --steps 50 --repeats 7\n\n\
Prints {\"cases\": [{\"chains\": 30, \"steps_per_second\": …, \"gflops\": …}, …],\n\
\"gemm_peak\": {\"gflops\": …}} with --json. GFLOP/s counts 6PdN + 6PN per network-step;\n\
gemm_peak is this machine's f32 GEMM rate (faer, 1024³, same threads) measured in the same\n\
run, and each case's fraction_of_gemm_peak is its effective GFLOP/s over it.\n\
Use RAYON_NUM_THREADS to set the thread count.\n\n\
--sampling instead measures effective samples per second (ESS/s) in equilibrium of the\n\
alignment, R = E[ρ²] and the outlier count, plain vs collapsed sampler (each with adapt_step),\n\
and the precision per second 1/(SE²·s) from the spread of the chains' means, at the blog\n\
setting D = N = 20, y = He1 + 0.3·He3, κ = 0.05, f32: the collapsed sampler runs from the\n\
prior (half burn-in; block preconditioner, HMC with --hmc-steps leapfrog steps per proposal),\n\
the plain one from its final state (exact posterior draws) for as many gradient evaluations\n\
as the collapsed window; both are timed over their windows only:\n  \
flscale bench --sampling --p 160 --sampling-steps 40000 --json"
)]
pub struct BenchArgs {
    /// Ensemble sizes E to time.
    #[arg(long, value_delimiter = ',', default_values_t = vec![30usize, 300])]
    pub chains: Vec<usize>,
    /// Ensemble steps per timed repeat (default: about one second's worth is not guessed;
    /// 200 for E ≤ 50, 20 otherwise).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Timed repeats; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Measure sampling efficiency (ESS/s, plain vs collapsed) instead of raw speed.
    #[arg(long)]
    pub sampling: bool,
    /// With --sampling: training-set size P of the blog setting.
    #[arg(long, default_value_t = SamplingSetting::default().p)]
    pub p: usize,
    /// With --sampling: Langevin steps per run, half of them burn-in (default 40000).
    #[arg(long = "sampling-steps", default_value_t = SamplingSetting::default().steps)]
    pub sampling_steps: usize,
    /// With --sampling: ensemble size.
    #[arg(long = "sampling-chains", default_value_t = SamplingSetting::default().chains)]
    pub sampling_chains: usize,
    /// With --sampling: the collapsed sampler without the Metropolis adjustment (unadjusted
    /// Langevin at η·λ_max = 0.1 instead of MALA with its step adapted to an acceptance of
    /// 0.574).
    #[arg(long = "no-mala")]
    pub no_mala: bool,
    /// With --sampling: the collapsed sampler's preconditioner (none, neuron or block).
    #[arg(long, default_value = "block", value_parser = ["none", "neuron", "block"])]
    pub preconditioner: String,
    /// With --sampling: leapfrog steps per HMC proposal of the collapsed sampler (its
    /// `sampler.hmc_steps`; 0 = MALA, one Langevin step per proposal; default 10, none with
    /// --no-mala). Its run then makes --sampling-steps / L proposals, so both samplers spend
    /// the same gradient evaluations.
    #[arg(long = "hmc-steps")]
    pub hmc_steps: Option<usize>,
    /// With --sampling: the collapsed run's measurement interval in its own steps (HMC
    /// proposals; default 1 with HMC, else the plain sampler's 50 steps / L).
    #[arg(long = "collapsed-thin")]
    pub collapsed_thin: Option<usize>,
    /// With --sampling: seed of the data, teacher and chains (autocorrelation times vary from
    /// seed to seed by tens of per cent; compare ratios over several).
    #[arg(long, default_value_t = SamplingSetting::default().seed)]
    pub seed: u64,
    /// With --sampling: the plain sampler Metropolis-adjusted (MALA, its step steered during
    /// a burn-in of --sampling-steps/10 outside its window) instead of the default unadjusted
    /// step: the comparison against plain MALA.
    #[arg(long = "plain-mala")]
    pub plain_mala: bool,
    /// With --sampling: compare the collapsed sampler with itself under replica exchange
    /// (`sampler.tempering`, R replicas per chain, ladder adapted during burn-in) instead of
    /// with the plain sampler; the tempered run's cost counts all R replicas
    /// (docs/langevin.md, "Replica exchange"). R between 2 and 64.
    #[arg(long, value_name = "R")]
    pub tempered: Option<usize>,
    /// With --tempered: β of the hottest replica (`sampler.tempering.beta_min`), in (0, 1).
    #[arg(long = "beta-min", default_value_t = 0.1)]
    pub beta_min: f64,
    /// With --tempered: proposals between swap rounds (`sampler.tempering.swap_every`).
    #[arg(long = "swap-every", default_value_t = 1)]
    pub swap_every: usize,
    /// With --tempered: let R follow the measured barrier, ⌈2Λ⌉ + 1 replicas chosen during
    /// burn-in, at most this many (`sampler.tempering.max_replicas`, 2 … 64); --tempered is
    /// then the starting R and the cost counts the R of the window.
    #[arg(long = "max-replicas", value_name = "R")]
    pub max_replicas: Option<usize>,
}

/// Runs `flscale bench`.
pub fn run(args: BenchArgs, ctx: &Ctx) -> Result<()> {
    if args.chains.is_empty() || args.chains.iter().any(|&c| c == 0 || c > 100_000) {
        return Err(Error::invalid(format!(
            "--chains {:?} is not allowed; give ensemble sizes between 1 and 100000",
            args.chains
        )));
    }
    if args.repeats == 0 || args.steps == Some(0) {
        return Err(Error::invalid("--repeats and --steps must be at least 1"));
    }
    // One Fig. 2 ensemble step is 3 GFLOP at E = 300 (about 40 steps/s on the build machine):
    // 10⁵ steps or 100 repeats are already an hour.
    if let Some(steps) = args.steps {
        flscale::limits::check_cap(
            "--steps",
            steps,
            100_000,
            "10^5 Fig. 2 steps are about an hour",
        )?;
    }
    flscale::limits::check_cap(
        "--repeats",
        args.repeats,
        100,
        "each repeat times every case again",
    )?;
    if args.sampling {
        return run_sampling(&args, ctx);
    }
    let size = BenchSize::default();
    let mut cases = Vec::new();
    for &chains in &args.chains {
        let steps = args.steps.unwrap_or(if chains <= 50 { 200 } else { 20 });
        if !ctx.quiet && !args.json {
            eprintln!("timing E = {chains} ({} × {steps} steps) …", args.repeats);
        }
        cases.push(bench_case(size, chains, steps, args.repeats));
    }
    if !ctx.quiet && !args.json {
        eprintln!("timing the f32 GEMM peak (1024³) …");
    }
    let (peak, _) = gemm_peak(1024, args.repeats.max(15));
    if args.json {
        let cases: Vec<serde_json::Value> = cases
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).unwrap_or_default();
                v["fraction_of_gemm_peak"] = serde_json::json!(c.gflops / peak.gflops);
                v
            })
            .collect();
        let v = serde_json::json!({
            "cases": cases,
            "gemm_peak": peak,
            "setting": {"d": size.d, "n": size.n, "p": size.p, "precision": "f32",
                        "threads": rayon_threads()},
        });
        return out_json(&v);
    }
    let mut t = format!(
        "Fig. 2 setting: two-layer erf, d = {}, N = {}, P = {}, f32, {} threads\n",
        size.d,
        size.n,
        size.p,
        rayon_threads()
    );
    t += "chains  ensemble-steps/s  (min–max)        GFLOP/s  of peak  steps/CPU-s\n";
    for c in &cases {
        let cpu = c
            .steps_per_cpu_second
            .map(|v| format!("{v:.1}"))
            .unwrap_or_else(|| "n/a".into());
        t += &format!(
            "{:>6}  {:>16.1}  ({:.1}–{:.1})  {:>10.1}  {:>6.0} %  {:>11}\n",
            c.chains,
            c.steps_per_second,
            c.range[0],
            c.range[1],
            c.gflops,
            100.0 * c.gflops / peak.gflops,
            cpu
        );
    }
    t += &format!(
        "f32 GEMM peak of this machine (faer, {0}×{0}×{0}, {1} threads): {2:.1} GFLOP/s ({3:.1}–{4:.1})\n",
        peak.size, peak.threads, peak.gflops, peak.range[0], peak.range[1]
    );
    out(&t)
}

/// `flscale bench --sampling`.
fn run_sampling(args: &BenchArgs, ctx: &Ctx) -> Result<()> {
    let thin = SamplingSetting::default().thin;
    if args.sampling_steps < 4 * thin || args.sampling_steps > 100_000_000 {
        return Err(Error::invalid(format!(
            "--sampling-steps {} is not allowed; it must be between {} and 100000000",
            args.sampling_steps,
            4 * thin
        )));
    }
    if args.sampling_chains < 2 || args.sampling_chains > 100_000 {
        return Err(Error::invalid(format!(
            "--sampling-chains {} is not allowed; it must be between 2 and 100000",
            args.sampling_chains
        )));
    }
    // The setting becomes an experiment file, whose integers are TOML's (i64).
    if args.seed > i64::MAX as u64 {
        return Err(Error::invalid(format!(
            "--seed {} is not allowed; it must be at most {} (sampler.seed of an experiment file is a TOML integer)",
            args.seed,
            i64::MAX
        )));
    }
    let hmc_steps = match (args.hmc_steps, args.no_mala) {
        (Some(l), true) if l > 0 => {
            return Err(Error::invalid(format!(
                "--hmc-steps {l} is not allowed with --no-mala; HMC is exact only through its Metropolis test: leave one of them out"
            )))
        }
        (_, true) | (Some(0), false) => 0,
        (Some(l), false) => l,
        (None, false) => DEFAULT_HMC_STEPS,
    };
    if hmc_steps > 10_000 || hmc_steps > args.sampling_steps / (4 * thin) {
        return Err(Error::invalid(format!(
            "--hmc-steps {hmc_steps} is not allowed with --sampling-steps {}; give 0 (MALA) or a number of leapfrog steps between 1 and min(10000, --sampling-steps/{}) (the collapsed run needs at least four measurements)",
            args.sampling_steps,
            4 * thin
        )));
    }
    if let Some(t) = args.collapsed_thin {
        let proposals = args.sampling_steps / hmc_steps.max(1);
        if t == 0 || t.saturating_mul(4) > proposals {
            return Err(Error::invalid(format!(
                "--collapsed-thin {t} is not allowed; it must be between 1 and a quarter of the collapsed run's {proposals} steps"
            )));
        }
    }
    let setting = SamplingSetting {
        d: SamplingSetting::default().d,
        p: args.p,
        steps: args.sampling_steps,
        thin,
        chains: args.sampling_chains,
        collapsed_mala: !args.no_mala,
        collapsed_hmc_steps: (hmc_steps > 0).then_some(hmc_steps),
        collapsed_thin: match args.collapsed_thin {
            Some(t) => Some(t),
            None => (hmc_steps > 0).then_some(DEFAULT_COLLAPSED_THIN),
        },
        preconditioner: match args.preconditioner.as_str() {
            "none" => Preconditioner::None,
            "neuron" => Preconditioner::Neuron,
            _ => Preconditioner::Block,
        },
        seed: args.seed,
        plain_mala: args.plain_mala,
    };
    if let Some(replicas) = args.tempered {
        let tempering = TemperingConfig {
            replicas,
            adapt: true,
            beta_min: args.beta_min,
            swap_every: args.swap_every,
            max_replicas: args.max_replicas,
        };
        return run_tempered(setting, tempering, args.json, ctx);
    }
    if !ctx.quiet && !args.json {
        eprintln!(
            "sampling P = {}, {} chains: collapsed {} steps, then plain from its final state …",
            setting.p, setting.chains, setting.steps
        );
    }
    let c = compare(setting)?;
    if args.json {
        return out_json(&serde_json::to_value(&c).map_err(|e| Error::runtime(e.to_string()))?);
    }
    out(&sampling_table(&c))
}

fn fmt3(v: Option<f64>) -> String {
    v.map_or("n/a".to_string(), |v| format!("{v:.3}"))
}

/// The collapsed sampler's name in the tables.
fn collapsed_name(setting: &SamplingSetting) -> String {
    match setting.collapsed_hmc_steps {
        Some(l) if setting.collapsed_mala => format!("HMC, {l} leapfrog steps per proposal"),
        _ if setting.collapsed_mala => "MALA".to_string(),
        _ => "unadjusted Langevin".to_string(),
    }
}

/// One row per sampler: step, evaluations per second, τ's and ESS/s.
fn efficiency_rows(rows: &[(&str, &SamplerEfficiency)]) -> String {
    let f = fmt3;
    let mut t = String::from(
        "method     step       steps/s   τ_align  τ_R  τ_out (steps)  ESS/s align  ESS/s R  ESS/s out\n",
    );
    for (name, e) in rows {
        t += &format!(
            "{:<9}  {:<9.3e}  {:>7.1}  {} {} {}  {:>11}  {:>7}  {:>9}\n",
            name,
            e.step,
            e.steps_per_second,
            f(e.iat_alignment_steps),
            f(e.iat_r_overlap2_steps),
            f(e.iat_outliers_steps),
            f(e.ess_per_second_alignment),
            f(e.ess_per_second_r_overlap2),
            f(e.ess_per_second_outliers)
        );
    }
    t
}

/// One row per sampler: the estimates and their precision per second.
fn precision_rows(rows: &[(&str, &SamplerEfficiency)]) -> String {
    let f = fmt3;
    let mut t = String::from(
        "method     alignment          R                  outliers           1/(SE²·s) align  1/(SE²·s) R\n",
    );
    for (name, e) in rows {
        t += &format!(
            "{:<9}  {} ± {}  {} ± {}  {} ± {}  {:>15}  {:>11}\n",
            name,
            f(e.alignment),
            f(e.alignment_err),
            f(e.r_overlap2),
            f(e.r_overlap2_err),
            f(e.outliers),
            f(e.outliers_err),
            f(e.precision_per_second_alignment),
            f(e.precision_per_second_r_overlap2)
        );
    }
    t
}

/// `flscale bench --sampling --tempered R`.
fn run_tempered(
    setting: SamplingSetting,
    tempering: TemperingConfig,
    json: bool,
    ctx: &Ctx,
) -> Result<()> {
    let replicas = tempering.replicas;
    if !(2..=64).contains(&replicas) {
        return Err(Error::invalid(format!(
            "--tempered {replicas} is not allowed; it is the number of replicas per chain, between 2 and 64"
        )));
    }
    if !(tempering.beta_min > 0.0 && tempering.beta_min < 1.0) {
        return Err(Error::invalid(format!(
            "--beta-min {} is not allowed; it is the hottest replica's β, strictly between 0 and 1",
            tempering.beta_min
        )));
    }
    if tempering.swap_every == 0 || tempering.swap_every > 1_000_000 {
        return Err(Error::invalid(format!(
            "--swap-every {} is not allowed; it is the number of proposals between swap rounds, between 1 and 1000000",
            tempering.swap_every
        )));
    }
    if let Some(max) = tempering.max_replicas {
        if !(2..=64).contains(&max) {
            return Err(Error::invalid(format!(
                "--max-replicas {max} is not allowed; it is the most replicas per chain the adapted ladder may use, between 2 and 64"
            )));
        }
    }
    if !ctx.quiet && !json {
        eprintln!(
            "sampling P = {}, {} chains: collapsed {} steps, then the same with {replicas} replicas per chain …",
            setting.p, setting.chains, setting.steps
        );
    }
    let c = compare_tempered(setting, tempering)?;
    if json {
        return out_json(&serde_json::to_value(&c).map_err(|e| Error::runtime(e.to_string()))?);
    }
    let f = fmt3;
    let mut t = format!(
        "blog setting: D = N = {}, He1 + 0.3·He3, κ = 0.05, P = {}, {} chains, {} gradient evaluations per chain (half burn-in), from the prior, {} threads\n",
        setting.d,
        setting.p,
        setting.chains,
        setting.steps,
        rayon_threads()
    );
    let window_replicas = c.replicas;
    t += &format!(
        "collapsed: {}; tempered: the same with {window_replicas} replicas, whose cost (steps, τ) counts all replicas:\n",
        collapsed_name(&setting)
    );
    let rows = [("collapsed", &c.collapsed), ("tempered", &c.tempered)];
    t += &efficiency_rows(&rows);
    t += &format!(
        "tempered / collapsed ESS/s: alignment {}, R {}, outliers {}\n",
        f(c.speedup_alignment),
        f(c.speedup_r_overlap2),
        f(c.speedup_outliers)
    );
    t += &precision_rows(&rows);
    t += &format!(
        "tempered / collapsed precision per second: alignment {}, R {}{}\n",
        f(c.precision_speedup_alignment),
        f(c.precision_speedup_r_overlap2),
        match c.samplers_agree {
            Some(false) => " — they disagree beyond 3 SE: at least one has not equilibrated",
            _ => "",
        }
    );
    if let Some(tp) = &c.tempering {
        t += &format!(
            "ladder β {}; swap acceptance {}; barrier Λ {:.2} (suggests R = {}); round trips {:.3} per chain per 1000 proposals (per round {:.4}, DEO limit {:.4})\n",
            super::three_decimals(&tp.betas),
            super::three_decimals(&tp.swap_acceptance),
            tp.barrier,
            tp.suggested_replicas,
            tp.round_trips_per_1000_steps,
            tp.round_trip_rate,
            tp.predicted_round_trip_rate
        );
        for r in &tp.resizes {
            t += &format!(
                "R {} → {} at burn-in step {} (Λ {:.2} over the interval before)\n",
                r.from, r.to, r.step, r.barrier
            );
        }
    }
    out(&t)
}

/// The text report of `flscale bench --sampling` (plain vs collapsed).
fn sampling_table(c: &SamplingComparison) -> String {
    let setting = c.setting;
    let f = fmt3;
    let mut t = format!(
        "blog setting: D = N = {}, He1 + 0.3·He3, κ = 0.05, P = {}, {} chains, collapsed {} steps (half burn-in), plain from its final state for the other half, {} threads\n",
        setting.d,
        setting.p,
        setting.chains,
        setting.steps,
        rayon_threads()
    );
    t += &format!(
        "collapsed: {}; measurement window only (equilibrium); a step is one gradient evaluation:\n",
        collapsed_name(&setting)
    );
    let rows = [
        (&c.plain.method[..], &c.plain),
        (&c.collapsed.method[..], &c.collapsed),
    ];
    t += &efficiency_rows(&rows);
    t += &format!(
        "collapsed / plain ESS/s: alignment {}, R {}, outliers {}\n",
        f(c.speedup_alignment),
        f(c.speedup_r_overlap2),
        f(c.speedup_outliers)
    );
    t += &precision_rows(&rows);
    t += &format!(
        "collapsed / plain precision per second: alignment {}, R {}{}\n",
        f(c.precision_speedup_alignment),
        f(c.precision_speedup_r_overlap2),
        match c.samplers_agree {
            Some(false) =>
                " — the samplers disagree beyond 3 SE: at least one has not equilibrated",
            _ => "",
        }
    );
    t
}

fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
