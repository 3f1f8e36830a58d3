//! `flscale bench [--json]`: ensemble-steps per second and effective GFLOP/s of the Langevin
//! engine in the paper's Fig. 2 setting (spec 02, "Performance bar").

use flscale::sim::bench::{bench_case, BenchSize};
use flscale::{Error, Result};

use super::{out, out_json, Ctx};

/// Arguments of `flscale bench`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  flscale bench            # E = 30 and 300, d = N = 40, P = 1600, f32\n  \
flscale bench --json --chains 300 --steps 50 --repeats 7\n\n\
Prints {\"cases\": [{\"chains\": 30, \"steps_per_second\": …, \"gflops\": …}, …]} with --json.\n\
GFLOP/s counts 6PdN + 6PN per network-step. Use RAYON_NUM_THREADS to set the thread count."
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
    let size = BenchSize::default();
    let mut cases = Vec::new();
    for &chains in &args.chains {
        let steps = args.steps.unwrap_or(if chains <= 50 { 200 } else { 20 });
        if !ctx.quiet && !args.json {
            eprintln!("timing E = {chains} ({} × {steps} steps) …", args.repeats);
        }
        cases.push(bench_case(size, chains, steps, args.repeats));
    }
    if args.json {
        let v = serde_json::json!({
            "cases": cases,
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
    t += "chains  ensemble-steps/s  (min–max)        GFLOP/s  steps/CPU-s\n";
    for c in &cases {
        let cpu = c
            .steps_per_cpu_second
            .map(|v| format!("{v:.1}"))
            .unwrap_or_else(|| "n/a".into());
        t += &format!(
            "{:>6}  {:>16.1}  ({:.1}–{:.1})  {:>10.1}  {:>11}\n",
            c.chains, c.steps_per_second, c.range[0], c.range[1], c.gflops, cpu
        );
    }
    out(&t)
}

fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
