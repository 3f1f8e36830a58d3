//! `flscale sweep EXP.toml --out DIR [--shard i/n] [--quick] [--emit-slurm N]`: expand the
//! experiment's grid and run it into a results directory (spec 03), resumably.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use flscale::experiment::{run_sweep, ResultsFormat, Sweep, SweepObserver, SweepOutcome};
use flscale::{Error, Result};

use super::emit::{emit, EmitInputs, SlurmFlags};
use super::{git_revision, out, out_json, read_file, Ctx};

/// Arguments of `flscale sweep`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  flscale sweep presets/experiments/fig2b.toml --out runs/fig2b --quick\n\n\
The experiment file is the one of `flscale sample` plus [sweep] (lists over any field; the grid\n\
is their product), [analysis] and [quick]; see docs/experiments.md. Every grid point is validated\n\
before the first run starts. Re-running the same command skips finished runs and ends with\n\
exactly the files of an uninterrupted run. DIR gets manifest.json, results.parquet (one row per\n\
run and observable; pandas.read_parquet, polars.read_parquet), chains.parquet,\n\
histograms.parquet (.csv instead with --format csv), runs/run-NNNNN/ and timing.json (clock\n\
times and machine: the only file that differs between identical sweeps).\n\
Shards: --shard 0/4 … --shard 3/4 run disjoint quarters (into one shared DIR or separate ones;\n\
then `flscale merge`). --emit-slurm 4 writes DIR/sweep.sbatch for a Slurm job array instead\n\
of running (knobs: --partition --time --cpus-per-task --mem --sbatch, or [slurm] in the file);\n\
`flscale status DIR` shows its progress and the command that resubmits what is missing.\n\
Two sweeps into one DIR never compute the same run (each run is claimed); SIGTERM or Ctrl-C\n\
stops after the current block of steps, keeping the finished runs.\n\
P* without a dense grid: --refine-pstar (factor 1.1 by default) bisects, after the grid, every\n\
crossing that lies between two distant grid sizes, in log P, until it is bracketed within the\n\
factor; the added runs are runs/refine-NNNNN/ in the same DIR, listed in refine.json."
)]
pub struct SweepArgs {
    /// The experiment file (TOML with an optional [sweep] table).
    #[arg(value_name = "EXP.toml")]
    pub experiment: PathBuf,
    /// Results directory (created if missing; an existing one must hold the same sweep).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Run only shard i of n (0-based), e.g. 0/4; runs with index ≡ i (mod n).
    #[arg(long, value_name = "i/n")]
    pub shard: Option<String>,
    /// Apply the file's [quick] overrides (tiny sizes).
    #[arg(long)]
    pub quick: bool,
    /// File format of the aggregate tables: parquet or csv.
    #[arg(long, default_value = "parquet", value_parser = parse_format)]
    pub format: ResultsFormat,
    /// Write an sbatch script for a job array of N shards into DIR and exit.
    #[arg(long, value_name = "N")]
    pub emit_slurm: Option<usize>,
    /// Validate the grid and list its runs without running anything.
    #[arg(long)]
    pub dry_run: bool,
    /// After the grid, bisect every P* crossing that is only bracketed (in [analysis] x, per
    /// [analysis] group) until its bracket is within FACTOR (default 1.1), adding runs at the
    /// brackets' log midpoints into the same DIR (resumable, listed in refine.json).
    #[arg(long, value_name = "FACTOR", num_args = 0..=1, default_missing_value = "1.1")]
    pub refine_pstar: Option<f64>,
    /// Bound on the bisection rounds of --refine-pstar.
    #[arg(long, default_value_t = flscale::experiment::refine::DEFAULT_MAX_ROUNDS)]
    pub max_rounds: usize,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub slurm: SlurmFlags,
}

/// Parses `--format` (parquet | csv).
pub fn parse_format(s: &str) -> std::result::Result<ResultsFormat, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

/// Parses `i/n` with 0 ≤ i < n.
pub fn parse_shard(s: &str) -> Result<(usize, usize)> {
    let bad = || {
        Error::invalid(format!(
            "--shard {s} is not allowed; write i/n with 0 <= i < n, e.g. 0/4"
        ))
    };
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let i: usize = i.trim().parse().map_err(|_| bad())?;
    let n: usize = n.trim().parse().map_err(|_| bad())?;
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

/// Progress bar for a sweep (hidden with -q or when stderr is not a terminal), with the
/// all-diverged warnings printed above it.
struct BarObserver {
    bar: indicatif::ProgressBar,
    quiet: bool,
}

impl SweepObserver for BarObserver {
    fn start(&mut self, todo: usize) {
        self.bar.set_length(todo as u64);
    }
    fn run_started(&mut self, _k: usize, id: &str, label: &str) {
        self.bar.set_message(format!("{id} {label}"));
    }
    fn run_progress(&mut self, k: usize, id: &str, label: &str, done: usize, total: usize) {
        if total > 0 {
            self.bar.set_position(k as u64);
            self.bar
                .set_message(format!("{id} {label} ({}%)", 100 * done / total.max(1)));
        }
    }
    fn interrupted(&self) -> bool {
        super::signals::received().is_some()
    }
    fn run_finished(&mut self, k: usize, id: &str, label: &str, all_diverged: bool) {
        if all_diverged && !self.quiet {
            self.bar.suspend(|| {
                eprintln!(
                    "warning: every chain of {id} ({label}) diverged; its observables are empty. Try a smaller sampler.step"
                )
            });
        }
        self.bar.set_position(k as u64 + 1);
    }
}

/// Runs `sweep` (or shard `shard`) into `dir` with a progress bar, writing the tables in
/// `format`; `text` is the experiment file's text.
pub fn execute(
    sweep: &Sweep,
    text: &str,
    dir: &Path,
    shard: Option<(usize, usize)>,
    format: ResultsFormat,
    ctx: &Ctx,
) -> Result<SweepOutcome> {
    let mut observer = progress_observer(ctx);
    let command: Vec<String> = std::env::args().collect();
    let outcome = run_sweep(
        sweep,
        text,
        dir,
        shard,
        format,
        git_revision().as_deref(),
        &command,
        &mut observer,
    );
    observer.bar.finish_and_clear();
    outcome
}

fn progress_observer(ctx: &Ctx) -> BarObserver {
    let bar = if ctx.quiet || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} sweep [{bar:30}] {pos}/{len} runs  ETA {eta}  {msg}",
            )
            .expect("static progress template")
            .progress_chars("=> "),
        );
        bar
    };
    BarObserver {
        bar,
        quiet: ctx.quiet,
    }
}

/// Runs `flscale sweep`.
pub fn run(args: SweepArgs, ctx: &Ctx) -> Result<()> {
    let text = read_file(&args.experiment)?;
    let source = args.experiment.display().to_string();
    check_grid_size(&text, &source)?;
    let sweep = Sweep::from_toml(&text, &source, args.quick)?;
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    validate_analysis(&sweep)?;
    if args.emit_slurm.is_none() {
        check_resources(&sweep, shard, ctx)?;
    }
    if let Some(n) = args.emit_slurm {
        let inputs = EmitInputs {
            slurm: &args.slurm,
            out: &args.out,
            experiment: &args.experiment,
            format: args.format,
            quick: args.quick,
        };
        let path = emit(&inputs, &sweep, &text, n)?;
        return out(&format!(
            "wrote {} ({n} array tasks over {} runs); submit it with sbatch, follow it with flscale status {}, then run flscale merge {}\n",
            path.display(),
            sweep.runs.len(),
            args.out.display(),
            args.out.display()
        ));
    }
    if args.dry_run {
        let (i, n) = shard.unwrap_or((0, 1));
        let shard_runs = sweep.shard(i, n);
        let header = format!(
            "{}: {} runs in the grid{}",
            source,
            sweep.runs.len(),
            if n > 1 {
                format!(", {} in shard {i}/{n}", shard_runs.len())
            } else {
                String::new()
            }
        );
        // The count comes first; the listing is streamed.
        let listing = shard_runs.into_iter().map(|r| {
            let c = &r.config;
            format!(
                "{}  d={} p={} widths={:?} kappa={} seed={}",
                r.id, c.data.d, c.data.p, c.model.widths, c.sampler.kappa, c.sampler.seed
            )
        });
        return super::out_lines(std::iter::once(header).chain(listing));
    }
    if args.refine_pstar.is_some() && shard.is_some() {
        return Err(Error::invalid(
            "--refine-pstar needs the whole grid; run it without --shard after the shards have finished (and flscale merge)",
        ));
    }
    super::signals::install();
    let outcome = match execute(&sweep, &text, &args.out, shard, args.format, ctx) {
        Err(e) => match super::signals::received() {
            Some(sig) => {
                return Err(Error::runtime(format!(
                "stopped by {sig}; the finished runs are kept in {} and the same command resumes",
                args.out.display()
            )))
            }
            None => return Err(e),
        },
        Ok(o) => o,
    };
    if !outcome.busy.is_empty() && !ctx.quiet {
        eprintln!(
            "note: {} run(s) are being computed by another process and were left to it: {}",
            outcome.busy.len(),
            outcome.busy.join(", ")
        );
    }
    if !outcome.recomputed.is_empty() && !ctx.quiet {
        eprintln!(
            "note: recomputed {} damaged run(s): {}",
            outcome.recomputed.len(),
            outcome.recomputed.join(", ")
        );
    }
    if let Some(factor) = args.refine_pstar {
        return refine_pstar(&sweep, &args, factor, outcome.computed, ctx);
    }
    if args.json {
        return out_json(
            &serde_json::to_value(&outcome)
                .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?,
        );
    }
    out(&format!(
        "{} runs computed, {} already finished; {}/{} runs of the grid are in {}\n\
results: {}/results.{ext} (one row per run and observable), chains.{ext}, histograms.{ext}\n",
        outcome.computed,
        outcome.skipped,
        outcome.finished,
        outcome.grid_runs,
        outcome.dir,
        outcome.dir,
        ext = args.format.ext()
    ))
}

/// `--refine-pstar FACTOR`: bisects the store's P* brackets ([`flscale::experiment::refine`]),
/// rebuilds the tables and prints what it added and what a dense grid would have cost.
fn refine_pstar(
    sweep: &Sweep,
    args: &SweepArgs,
    factor: f64,
    grid_computed: usize,
    ctx: &Ctx,
) -> Result<()> {
    use flscale::experiment::refine::{bisect, dense_grid_size, StoreSource};
    use flscale::experiment::results::rebuild_aggregates;
    if !(factor.is_finite() && factor > 1.0) {
        return Err(Error::invalid(format!(
            "--refine-pstar {factor} is not allowed; give a bracket factor above 1, e.g. 1.1"
        )));
    }
    let store = flscale::experiment::Store::open(&args.out)?;
    let mut observer = progress_observer(ctx);
    let report = {
        let mut source = StoreSource::new(sweep, &store, factor, &mut observer);
        bisect(&mut source, args.max_rounds)
    };
    observer.bar.finish_and_clear();
    let report = report?;
    rebuild_aggregates(&store, store.aggregate_format())?;
    let t = &report.table;
    let xs: Vec<f64> = t
        .rows
        .iter()
        .flat_map(|r| r.curve.iter().map(|c| c.0))
        .collect();
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
    let dense = if hi > lo {
        dense_grid_size(lo, hi, factor)
    } else {
        0
    };
    if args.json {
        return out_json(&serde_json::json!({
            "grid_runs_computed": grid_computed,
            "rounds": report.rounds,
            "runs_added": report.runs_added,
            "resolution": factor,
            "dense_grid_sizes_per_group": dense,
            "unresolved": report.unresolved.iter().map(|(g, b)| serde_json::json!({
                "group": g, "bracket": [b.lo, b.hi],
            })).collect::<Vec<_>>(),
            "pstar": super::pstar::table_json(t),
        }));
    }
    let mut s = format!(
        "{grid_computed} grid runs computed; P* refinement: {} rounds, {} runs added into {}\n",
        report.rounds,
        report.runs_added,
        args.out.display()
    );
    s += &super::pstar::table_text(t);
    s += &format!(
        "a dense log grid resolving a factor {factor} over {} ∈ [{lo}, {hi}] would need {dense} sizes per {} and seed\n",
        t.x, t.group
    );
    if !report.unresolved.is_empty() {
        s += "still bracketed (P at integer resolution, or --max-rounds reached): see the notes above\n";
    }
    out(&s)
}

/// Counts the grid (the product of the `[sweep]` lists) before it is expanded, and refuses
/// grids above [`flscale::limits::MAX_SWEEP_POINTS`]: expanding builds and validates one
/// configuration per point, so a typo such as a list of 10⁶ seeds would take a minute and a GB
/// before anything is said. The counting is a lower bound when `--quick` lengthens lists,
/// which `[quick]` tables do not do in practice.
fn check_grid_size(text: &str, source: &str) -> Result<()> {
    let Ok(doc) = text.parse::<toml::Table>() else {
        // Syntax errors are reported by the sweep's own parser, with line and column.
        return Ok(());
    };
    let Some(toml::Value::Table(sweep)) = doc.get("sweep") else {
        return Ok(());
    };
    fn lists(t: &toml::Table, count: &mut usize) {
        for (k, v) in t {
            match v {
                toml::Value::Table(inner) if k != "follow" => lists(inner, count),
                toml::Value::Array(values) => *count = count.saturating_mul(values.len()),
                _ => {}
            }
        }
    }
    let mut count = 1usize;
    lists(sweep, &mut count);
    flscale::limits::check_cap(
        &format!("{source}: the grid's number of points"),
        count,
        flscale::limits::MAX_SWEEP_POINTS,
        "every point is a run directory, and the grid is expanded and validated before it runs; split it into several sweeps",
    )
}

/// Checks `[analysis]` against the grid before any run starts: the
/// observable, the variables `x` and `group` (coordinates of every grid point), the default fit
/// and the engine prediction, so that a typo is not found only after the whole grid has run.
fn validate_analysis(sweep: &Sweep) -> Result<()> {
    use flscale::experiment::analysis::predicted_exponent;
    use flscale::experiment::stats::coordinate;
    use flscale::experiment::store::{RunData, CHAIN_OBSERVABLES};
    let a = &sweep.analysis;
    let ctx = |field: &str| format!("{}: analysis.{field}", sweep.source);
    let observable_ok = |o: &str| CHAIN_OBSERVABLES.contains(&o) || o == "outliers_layer1";
    if !observable_ok(&a.observable) {
        return Err(Error::invalid(format!(
            "{} = \"{}\" is not allowed; it must be one of {}, outliers_layer1",
            ctx("observable"),
            a.observable,
            CHAIN_OBSERVABLES.join(", ")
        )));
    }
    let points: Vec<RunData> = sweep
        .runs
        .iter()
        .map(|r| RunData {
            index: r.index,
            id: r.id.clone(),
            coords: r.coordinates(),
            summary: serde_json::Value::Null,
            chains: Vec::new(),
            histogram: Vec::new(),
            probe_histograms: Default::default(),
            equilibrated: None,
        })
        .collect();
    let check_variable = |field: &str, name: &str| -> Result<()> {
        if points.iter().all(|p| coordinate(p, name).is_some()) {
            return Ok(());
        }
        let known: Vec<String> = points
            .first()
            .map(|p| p.coords.keys().cloned().collect())
            .unwrap_or_default();
        Err(Error::invalid(format!(
            "{} = \"{name}\" is not allowed; it is not a coordinate of every grid point (available: {})",
            ctx(field),
            known.join(", ")
        )))
    };
    check_variable("x", &a.x)?;
    check_variable("group", &a.group)?;
    if let Some(fit) = &a.fit {
        check_variable("fit.x", &fit.x)?;
        if fit.y != "pstar" && !observable_ok(&fit.y) {
            return Err(Error::invalid(format!(
                "{} = \"{}\" is not allowed; it must be \"pstar\" or one of {}, outliers_layer1",
                ctx("fit.y"),
                fit.y,
                CHAIN_OBSERVABLES.join(", ")
            )));
        }
    }
    if let Some(p) = &a.predict {
        // Only the user's mistakes stop the sweep; an engine finding (no aligning pattern) is
        // reported by `flscale fit` as before.
        if let Err(e @ Error::InvalidInput(_)) = predicted_exponent(p) {
            return Err(e.context(ctx("predict")));
        }
    }
    Ok(())
}

/// The resource check of every grid point of this shard (docs/limits.md): `sampler.steps`
/// against its cap, the memory of the largest point against the machine's limit (points run
/// one after another), and the work of all of them together.
fn check_resources(sweep: &Sweep, shard: Option<(usize, usize)>, ctx: &Ctx) -> Result<()> {
    let (i, n) = shard.unwrap_or((0, 1));
    let mut total = flscale::limits::Estimate::default();
    let mut largest: Option<(flscale::limits::Estimate, String)> = None;
    for r in sweep.shard(i, n) {
        let what = format!("{} at grid point {}", sweep.source, r.id);
        flscale::limits::check_steps(r.config.sampler.steps).map_err(|e| e.context(&what))?;
        flscale::sim::memory::check_experiment_values(&r.config).map_err(|e| e.context(&what))?;
        let e = flscale::sim::memory::sample(&r.config);
        total.flops += e.flops;
        if largest.as_ref().is_none_or(|(l, _)| e.bytes() > l.bytes()) {
            total.work_sizes = e.work_sizes.clone();
            largest = Some((e, what));
        }
    }
    let Some((largest, what)) = largest else {
        return Ok(());
    };
    let (limit, source) = super::limits::memory_limit(ctx);
    largest.check_memory(&what, limit, source)?;
    total.memory = largest.memory;
    super::limits::check(
        &total,
        &format!("{} (this shard's runs together)", sweep.source),
        ctx,
    )
}
