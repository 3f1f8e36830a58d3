//! `flscale free-energy EXP.toml --out DIR [--json] [--quick] [--windows LIST]`: umbrella
//! windows along an order parameter, combined by MBAR into the free-energy profile F(s), the
//! basins' weights, the barrier and reweighted observables (spec 07).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use flscale::experiment::analysis::{analyse_coexistence, side_by_side, CoexistenceAnalysis};
use flscale::experiment::sweep::AnalysisSpec;
use flscale::experiment::{FreeEnergyCell, Sweep};
use flscale::free_energy::analysis::{Estimate, FreeEnergyReport};
use flscale::free_energy::coexistence::{
    coexistence_table, CellBasins, CellSummary, CoexistenceOptions, Side, Threshold,
};
use flscale::free_energy::output::write_outputs;
use flscale::free_energy::runner::{
    run_free_energy, stage_dir, Progress, StageProgress, WindowObserver,
};
use flscale::free_energy::window::{FreeEnergyPlan, Stage, WindowRun, OBSERVABLES};
use flscale::sim::driver::outcome::RunObserver;
use flscale::{Error, Result};

use super::{out, out_json, read_file, Ctx};

/// Arguments of `flscale free-energy`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example (the sign-symmetry case: one erf neuron on y = He1, whose two basins s > 0 and\n\
s < 0 have weight 1/2 each exactly; --quick runs it at ridge 2, a barrier of about 8 kT, in seconds):\n  \
flscale free-energy examples/experiments/free-energy-sign.toml --out runs/fe-sign --quick\n\n\
Near P* the posterior has two basins (lazy and specialised) that no unbiased sampler crosses in\n\
time. This command restrains the sampler at K points s_k of an order parameter s(θ) with\n\
umbrella potentials ½κ(s − s_k)² (one independent run per window, any sampler.method), joins\n\
the windows by MBAR and reports the unbiased profile F(s) = −ln p(s) in kT, the basins (split at\n\
the barrier tops of F) with their weights, the barrier height and the reweighted A_f, test MSE\n\
and outlier count, every number with a block-bootstrap error (--replicates, default 200).\n\n\
The experiment file is the one of `flscale sample` plus a table\n  \
[free_energy]\n  \
order_parameter = \"neuron_overlap\"   # w_i·w*/|w_i| of one neuron; or \"aligned_fraction\",\n  \
neuron = 0                           #   \"projected_fraction\" (with coordinates = [0, 1])\n  \
range = [-1.0, 1.0]                  # window centres, ends included (default: all of s)\n  \
windows = 16                         # K ≥ 2\n  \
kappa = 200.0                        # optional; default kT/spacing², neighbours overlap\n  \
bins = 40                            # optional; bins of F(s)\n  \
flatten = true                       # optional; a pilot stage first (default true)\n\
and optionally [quick] (used with --quick). Fields: docs/free-energy.md.\n\n\
Barriers of hundreds of kT: with flatten = true (default) a pilot of 4(K-1)+1 stiff windows\n\
first estimates F by umbrella integration, and the K windows then carry the bias -F, so that\n\
they overlap; MBAR removes the bias exactly (docs/free-energy.md, \"Flattening\").\n\n\
DIR gets pilot/ and windows/window-KKK.json (each finished window, written atomically), profile.csv\n\
(s,F,F_err), free_energy.json (what --json prints) and free_energy.svg (F(s) with its error band,\n\
the basins shaded with their weights). A killed run resumes: the same command skips the windows\n\
already in DIR. --windows 0,3-5 runs only those windows (shards by hand or in Slurm array\n\
tasks: --windows $SLURM_ARRAY_TASK_ID) and analyses only once every window is there.\n\n\
With a [sweep] table every grid point runs in DIR/run-NNNNN/, and DIR/coexistence.json gets per d\n\
P*_coex and both spinodals and their exponents against d; `flscale pstar DIR`, `fit DIR` and\n\
`plot DIR` read them back without sampling (a grid whose quick run brackets coexistence:\n\
examples/experiments/free-energy-coexistence.toml; docs/free-energy.md, \"Two thresholds\").\n\n\
Exit codes: 2 for a bad or missing [free_energy] table or a DIR that holds another plan's\n\
windows; 1 when neighbouring windows do not overlap enough for MBAR (the message names them:\n\
add windows or lower kappa) or every chain of a window diverged."
)]
pub struct FreeEnergyArgs {
    /// The experiment file (TOML with a [free_energy] table).
    #[arg(value_name = "EXP.toml")]
    pub experiment: PathBuf,
    /// Output directory (created if missing; an existing one must hold the same plan).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Apply the file's [quick] overrides (small sizes).
    #[arg(long)]
    pub quick: bool,
    /// Run only these windows, e.g. 0,3-5 (0-based); the analysis waits for all of them.
    #[arg(long, value_name = "LIST")]
    pub windows: Option<String>,
    /// Block-bootstrap replicates of the errors (0: no errors).
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub replicates: usize,
}

/// Most bootstrap replicates: a guard against typos (each one re-solves MBAR).
const MAX_REPLICATES: usize = 100_000;

/// Parses `--windows` (`0,3-5`) against K windows: sorted, without repeats.
pub fn parse_windows(list: &str, k: usize) -> Result<Vec<usize>> {
    let bad = |why: String| {
        Error::invalid(format!(
            "--windows {list} is not allowed; {why} (write indices and ranges such as 0,3-5, between 0 and {})",
            k - 1
        ))
    };
    let index = |t: &str| -> Result<usize> {
        t.trim()
            .parse::<usize>()
            .map_err(|_| bad(format!("`{}` is not a window index", t.trim())))
    };
    let mut out = Vec::new();
    for part in list.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (index(a)?, index(b)?),
            None => {
                let i = index(part)?;
                (i, i)
            }
        };
        if a > b {
            return Err(bad(format!("the range {a}-{b} runs backwards")));
        }
        if b >= k {
            return Err(bad(format!("the plan has {k} windows")));
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The progress bar over the windows of the stage running, the signal check, and the
/// windows' warnings printed above the bar.
struct Bar<'a> {
    bar: indicatif::ProgressBar,
    ctx: &'a Ctx,
    /// Steps of one window of each stage (pilot, umbrella).
    steps: [usize; 2],
    /// Steps of the windows finished before the current one.
    offset: usize,
}

impl Bar<'_> {
    fn stage_steps(&self, stage: Stage) -> usize {
        match stage {
            Stage::Pilot => self.steps[0],
            Stage::Umbrella => self.steps[1],
        }
    }
}

impl RunObserver for Bar<'_> {
    fn progress(&mut self, done: usize, _total: usize) {
        self.bar.set_position((self.offset + done) as u64);
    }

    fn should_stop(&mut self) -> bool {
        super::signals::received().is_some()
    }
}

impl WindowObserver for Bar<'_> {
    fn window_started(&mut self, stage: Stage, k: usize, index: usize, count: usize) {
        let steps = self.stage_steps(stage);
        if index == 0 {
            self.bar.set_length((steps * count) as u64);
            self.bar.set_position(0);
            self.offset = 0;
        } else {
            self.offset = steps * index;
        }
        self.bar.set_message(format!(
            "{} window {k} ({} of {count})",
            stage.as_str(),
            index + 1
        ));
    }

    fn window_finished(&mut self, plan: &FreeEnergyPlan, run: &WindowRun) {
        if self.ctx.quiet {
            return;
        }
        let stage = plan.stage.as_str();
        self.bar.suspend(|| {
            if run.diverged > 0 {
                eprintln!(
                    "warning: {stage} window {} (s₀ = {:.4}): {} of {} chains diverged and were left out; a smaller sampler.step avoids this",
                    run.window,
                    run.centre,
                    run.diverged,
                    plan.config.sampler.chains
                );
            }
            for w in &run.warnings {
                eprintln!("warning: {stage} window {}: {w}", run.window);
            }
        });
    }
}

fn progress_bar(ctx: &Ctx) -> indicatif::ProgressBar {
    if ctx.quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(1);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} free energy [{bar:30}] {pos}/{len} steps  ETA {eta}  {msg}",
        )
        .expect("static progress template")
        .progress_chars("=> "),
    );
    bar
}

/// Runs `flscale free-energy`.
pub fn run(args: FreeEnergyArgs, ctx: &Ctx) -> Result<()> {
    let text = read_file(&args.experiment)?;
    let source = args.experiment.display().to_string();
    if args.replicates > MAX_REPLICATES {
        return Err(Error::invalid(format!(
            "--replicates {} is not allowed; it must be between 0 and {MAX_REPLICATES}",
            args.replicates
        )));
    }
    let sweep = Sweep::from_toml(&text, &source, args.quick)?;
    let mut cells = sweep.free_energy_plans()?;
    if cells.len() > 1 {
        return run_grid(&args, &text, &sweep, cells, ctx);
    }
    let plan = cells.remove(0).plan;
    let k = plan.windows();
    let which = match &args.windows {
        Some(list) => Some(parse_windows(list, k)?),
        None => None,
    };
    let cfg = &plan.config;
    flscale::limits::check_steps(cfg.sampler.steps).map_err(|e| e.context(&source))?;
    flscale::sim::memory::check_experiment_values(cfg).map_err(|e| e.context(&source))?;
    super::limits::check(
        &flscale::sim::memory::sample(cfg),
        &format!("each window of {source}"),
        ctx,
    )?;
    std::fs::create_dir_all(&args.out).map_err(|e| {
        Error::invalid(format!(
            "cannot create output directory {}: {e}",
            args.out.display()
        ))
    })?;
    let pilot_steps = if plan.needs_pilot() {
        plan.pilot()?.config.sampler.steps
    } else {
        0
    };
    super::signals::install();
    let mut bar = Bar {
        bar: progress_bar(ctx),
        ctx,
        steps: [pilot_steps, cfg.sampler.steps],
        offset: 0,
    };
    let progress = run_free_energy(&plan, Some(&args.out), which.as_deref(), &mut bar)?;
    bar.bar.finish_and_clear();
    let (plan, runs, stages) = match progress {
        Progress::Complete { plan, runs, stages } => (plan, runs, stages),
        Progress::Waiting { stages } => return report_partial(&args, &stages),
        Progress::Interrupted {
            stage,
            window,
            stages,
        } => {
            let sig = super::signals::received().unwrap_or("a signal");
            let finished: usize = stages.iter().map(|s| s.run.len()).sum();
            return Err(Error::runtime(format!(
                "stopped by {sig} in {} window {window}; the {finished} windows finished now are kept in {} with those from before, and the same command resumes",
                stage.as_str(),
                args.out.display()
            )));
        }
    };
    let report = plan.analyse(&runs, args.replicates, cfg.sampler.seed)?;
    let mut json = write_outputs(&args.out, &plan, &report)?;
    if args.json {
        if let serde_json::Value::Object(map) = &mut json {
            map.insert("windows".into(), serde_json::json!(k));
            map.insert("stages".into(), stages_json(&stages));
            map.insert("analysed".into(), serde_json::json!(true));
        }
        return out_json(&json);
    }
    out(&human(&plan, &report, &stages, &args.out))
}

/// A sweep with `[free_energy]`: every grid point's windows in `DIR/<run id>/` (as one
/// experiment's, resumable), each cell analysed and written there, then the thresholds per d
/// from the cells' basin weights and profiles — coexistence and the two spinodals
/// ([`coexistence_table`]) — and their exponents against d ([`analyse_coexistence`]), in
/// `DIR/coexistence.json`. A cell whose windows do not overlap is reported and left out.
fn run_grid(
    args: &FreeEnergyArgs,
    experiment: &str,
    sweep: &Sweep,
    cells: Vec<FreeEnergyCell>,
    ctx: &Ctx,
) -> Result<()> {
    let mut summaries = Vec::new();
    let mut cell_json = Vec::new();
    let mut text = String::new();
    let mut missing = Vec::new();
    super::signals::install();
    for cell in &cells {
        let analysed = match run_cell(args, cell, ctx)? {
            Some(result) => result,
            None => {
                missing.push(cell.id.clone());
                continue;
            }
        };
        match analysed {
            Ok((summary, report)) => {
                let weights: Vec<String> = report
                    .basins
                    .iter()
                    .map(|b| {
                        pm(&Estimate {
                            value: b.weight,
                            err: b.weight_err,
                        })
                    })
                    .collect();
                text += &format!(
                    "{}  {:<28} basin weights {}\n",
                    cell.id,
                    cell.label,
                    weights.join(" | ")
                );
                cell_json.push(serde_json::json!({
                    "id": cell.id, "label": cell.label, "d": summary.d, "p": summary.p,
                    "analysed": true,
                    "basins": report.basins.iter().map(|b| serde_json::json!({
                        "lo": b.lo, "hi": b.hi, "weight": b.weight, "weight_err": b.weight_err,
                    })).collect::<Vec<_>>(),
                }));
                summaries.push(summary);
            }
            Err(e) => {
                text += &format!("{}  {:<28} not analysed: {e}\n", cell.id, cell.label);
                cell_json.push(serde_json::json!({
                    "id": cell.id, "label": cell.label, "analysed": false, "error": e.to_string(),
                }));
            }
        }
    }
    if !missing.is_empty() {
        let msg = format!(
            "cells {} have windows missing (a --windows shard ran its subset), so the thresholds wait; run without --windows to finish them",
            missing.join(", ")
        );
        if args.json {
            return out_json(&serde_json::json!({
                "cells": cell_json, "missing": missing, "analysed": false,
            }));
        }
        return out(&format!("{text}{msg}\n"));
    }
    let opts = CoexistenceOptions {
        replicates: args.replicates.max(2),
        seed: cells[0].plan.config.sampler.seed,
    };
    let thresholds = coexistence_table(&summaries, &opts)
        .map_err(Error::from)
        .map(|table| analyse_coexistence(table, &sweep.analysis));
    let json = match &thresholds {
        Ok(a) => {
            let mut v = thresholds_json(a);
            v["cells"] = serde_json::json!(cell_json);
            v["analysed"] = serde_json::json!(true);
            v
        }
        Err(e) => serde_json::json!({
            "cells": cell_json, "thresholds": null, "notes": [e.to_string()], "analysed": true,
        }),
    };
    // The file also keeps what recomputing the thresholds needs (`load_grid`), so that
    // `flscale pstar`, `fit` and `plot` read the directory without sampling or MBAR.
    let mut saved = json.clone();
    saved["input"] = serde_json::json!({
        "experiment": experiment,
        "source": args.experiment.display().to_string(),
        "quick": args.quick,
        "replicates": opts.replicates,
        "seed": opts.seed,
        "summaries": summaries,
    });
    let body = serde_json::to_string_pretty(&saved)
        .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?;
    let path = args.out.join(COEXISTENCE_FILE);
    std::fs::write(&path, body + "\n")
        .map_err(|e| Error::runtime(format!("cannot write {}: {e}", path.display())))?;
    if args.json {
        return out_json(&json);
    }
    match &thresholds {
        Ok(a) => text += &thresholds_text(a),
        Err(e) => text += &format!("no thresholds: {e}\n"),
    }
    text += &format!(
        "written to {} (one directory per cell, {COEXISTENCE_FILE})\n",
        args.out.display()
    );
    out(&text)
}

/// The file a free-energy grid writes into its output directory; its presence marks the
/// directory as one for `flscale pstar`, `fit` and `plot`.
pub const COEXISTENCE_FILE: &str = "coexistence.json";

/// The thresholds, their exponents and the notes as JSON (what `coexistence.json` and
/// `flscale pstar DIR --json` hold).
pub fn thresholds_json(a: &CoexistenceAnalysis) -> serde_json::Value {
    serde_json::json!({
        "thresholds": a.thresholds,
        "fits": a.fits.iter().map(|f| serde_json::json!({
            "threshold": f.kind.name(),
            "exponent": f.fit.as_ref().map(|x| x.exponent.value),
            "exponent_err": f.fit.as_ref().and_then(|x| x.exponent.err),
            "points": f.fit.as_ref().map(|x| x.points.clone()),
        })).collect::<Vec<_>>(),
        "notes": a.notes,
    })
}

/// Per d the three thresholds on one line, then [`exponents_text`].
pub fn thresholds_text(a: &CoexistenceAnalysis) -> String {
    let mut text = String::new();
    for row in &a.thresholds.rows {
        text += &format!(
            "d = {}: P*_coex {}, lazy spinodal {}, specialised spinodal {}\n",
            row.d,
            threshold_text(&row.coexistence),
            threshold_text(&row.spinodal_lazy),
            threshold_text(&row.spinodal_spec)
        );
    }
    text + &exponents_text(a)
}

/// Each threshold's exponent beside the prediction, then the notes.
pub fn exponents_text(a: &CoexistenceAnalysis) -> String {
    let mut text = String::new();
    for f in &a.fits {
        if let Some(fit) = &f.fit {
            text += &format!("{}\n", side_by_side(fit, a.predicted.as_ref()));
        }
    }
    for n in &a.notes {
        text += &format!("note: {n}\n");
    }
    text
}

/// A free-energy grid's results as `flscale pstar`, `fit` and `plot` read them back.
#[derive(Debug, Clone)]
pub struct StoredGrid {
    /// The thresholds per d, their exponents and notes, recomputed from the kept summaries.
    pub analysis: CoexistenceAnalysis,
    /// The grid file's `[analysis]` table (the prediction, the bracket resolution).
    pub spec: AnalysisSpec,
}

/// Whether `dir` is the output directory of a free-energy grid (it holds [`COEXISTENCE_FILE`]).
pub fn is_grid(dir: &Path) -> bool {
    dir.join(COEXISTENCE_FILE).is_file()
}

/// Rereads a free-energy grid's directory: the cells' summaries and the grid file that
/// `coexistence.json` keeps give the same thresholds, exponents and notes as the run that
/// wrote it (same replicates and seed unless `replicates` or `seed` say otherwise), without
/// sampling or MBAR. Refused in one sentence (exit code 2) when the file cannot be read, is not
/// one `flscale free-energy` wrote, or holds no thresholds (the sentence says why).
pub fn load_grid(dir: &Path, replicates: Option<usize>, seed: Option<u64>) -> Result<StoredGrid> {
    let path = dir.join(COEXISTENCE_FILE);
    let shown = path.display();
    let text = read_file(&path)?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::invalid(format!(
            "{shown} is not JSON ({e}); rerun `flscale free-energy GRID.toml --out {}`, which keeps every finished window",
            dir.display()
        ))
    })?;
    let input = &v["input"];
    let not_ours = || {
        Error::invalid(format!(
            "{shown} does not hold the cells' summaries and the grid file that `flscale free-energy` keeps there; rerun `flscale free-energy GRID.toml --out {}`, which keeps every finished window",
            dir.display()
        ))
    };
    let (Some(experiment), Some(source), Some(quick)) = (
        input["experiment"].as_str(),
        input["source"].as_str(),
        input["quick"].as_bool(),
    ) else {
        return Err(not_ours());
    };
    let summaries: Vec<CellSummary> = input["summaries"]
        .as_array()
        .ok_or_else(not_ours)?
        .iter()
        .map(summary_from_json)
        .collect::<Option<_>>()
        .ok_or_else(not_ours)?;
    let opts = CoexistenceOptions {
        replicates: match replicates {
            Some(r) => r.max(2),
            None => input["replicates"].as_u64().ok_or_else(not_ours)? as usize,
        },
        seed: match seed {
            Some(s) => s,
            None => input["seed"].as_u64().ok_or_else(not_ours)?,
        },
    };
    let spec = Sweep::from_toml(experiment, source, quick)
        .map_err(|e| e.context(format!("the grid file kept in {shown}")))?
        .analysis;
    let table = coexistence_table(&summaries, &opts)
        .map_err(|e| Error::invalid(format!("{shown} holds no thresholds: {e}")))?;
    Ok(StoredGrid {
        analysis: analyse_coexistence(table, &spec),
        spec,
    })
}

/// A [`CellSummary`] from its JSON (the serialised form; a depth over an empty bin is +∞,
/// which JSON writes as null).
fn summary_from_json(v: &serde_json::Value) -> Option<CellSummary> {
    let opt = |x: &serde_json::Value| -> Option<Option<f64>> {
        if x.is_null() {
            Some(None)
        } else {
            x.as_f64().map(Some)
        }
    };
    let side = |s: &serde_json::Value| -> Option<Side> {
        Some(Side {
            min_s: s["min_s"].as_f64()?,
            weight: Estimate {
                value: s["weight"]["value"].as_f64()?,
                err: opt(&s["weight"]["err"])?,
            },
            depth: Estimate {
                value: opt(&s["depth"]["value"])?.unwrap_or(f64::INFINITY),
                err: opt(&s["depth"]["err"])?,
            },
        })
    };
    let b = &v["basins"];
    let basins = if b["two"].is_object() {
        CellBasins::Two {
            lazy: side(&b["two"]["lazy"])?,
            spec: side(&b["two"]["spec"])?,
        }
    } else {
        CellBasins::One {
            min_s: b["one"]["min_s"].as_f64()?,
        }
    };
    Some(CellSummary {
        d: v["d"].as_f64()?,
        p: v["P"].as_f64()?,
        basins,
    })
}

/// One threshold as "P ± err (resolution)".
fn threshold_text(t: &Threshold) -> String {
    let status = format!("{:?}", t.resolution).to_lowercase();
    match (t.value, t.err) {
        (Some(v), Some(e)) => format!("{v:.1} ± {e:.1} ({status})"),
        (Some(v), None) => format!("{v:.1} ({status})"),
        _ => format!("— ({status})"),
    }
}

/// What a grid cell yielded: None while some of its windows are missing; otherwise its
/// summary and report, or why it could not be analysed.
type CellOutcome = Option<Result<(CellSummary, FreeEnergyReport)>>;

/// Runs one cell of a grid in `DIR/<id>/` and analyses it.
fn run_cell(args: &FreeEnergyArgs, cell: &FreeEnergyCell, ctx: &Ctx) -> Result<CellOutcome> {
    let dir = args.out.join(&cell.id);
    let cfg = &cell.plan.config;
    flscale::limits::check_steps(cfg.sampler.steps)?;
    std::fs::create_dir_all(&dir).map_err(|e| {
        Error::invalid(format!(
            "cannot create output directory {}: {e}",
            dir.display()
        ))
    })?;
    let pilot_steps = if cell.plan.needs_pilot() {
        cell.plan.pilot()?.config.sampler.steps
    } else {
        0
    };
    let mut bar = Bar {
        bar: progress_bar(ctx),
        ctx,
        steps: [pilot_steps, cfg.sampler.steps],
        offset: 0,
    };
    let which = match &args.windows {
        Some(list) => Some(parse_windows(list, cell.plan.windows())?),
        None => None,
    };
    let progress = run_free_energy(&cell.plan, Some(&dir), which.as_deref(), &mut bar)?;
    bar.bar.finish_and_clear();
    let (plan, runs) = match progress {
        Progress::Complete { plan, runs, .. } => (plan, runs),
        Progress::Waiting { .. } => return Ok(None),
        Progress::Interrupted { stage, window, .. } => {
            let sig = super::signals::received().unwrap_or("a signal");
            return Err(Error::runtime(format!(
                "stopped by {sig} in {} ({}), {} window {window}; finished windows are kept in {} and the same command resumes",
                cell.id,
                cell.label,
                stage.as_str(),
                args.out.display()
            )));
        }
    };
    let analysed = plan
        .analyse(&runs, args.replicates, cfg.sampler.seed)
        .and_then(|report| {
            write_outputs(&dir, &plan, &report)?;
            let coordinate = |name: &str| {
                cell.coordinates.get(name).copied().ok_or_else(|| {
                    Error::runtime(format!("grid point {} has no {name}", cell.label))
                })
            };
            let summary = CellSummary::from_report(coordinate("d")?, coordinate("p")?, &report)?;
            Ok((summary, report))
        });
    Ok(Some(analysed))
}

/// Each stage's windows run now, kept from before and missing, as JSON.
fn stages_json(stages: &[StageProgress]) -> serde_json::Value {
    stages
        .iter()
        .map(|s| {
            serde_json::json!({
                "stage": s.stage.as_str(),
                "run": s.run,
                "kept": s.kept,
                "missing": s.missing,
            })
        })
        .collect()
}

/// The answer when some windows of a stage are still missing: what ran, what is missing, no
/// analysis.
fn report_partial(args: &FreeEnergyArgs, stages: &[StageProgress]) -> Result<()> {
    if args.json {
        return out_json(&serde_json::json!({
            "stages": stages_json(stages),
            "analysed": false,
        }));
    }
    let mut t = String::new();
    for s in stages {
        t += &format!(
            "{} stage: ran windows [{}] now ({} asked for were already there)",
            s.stage.as_str(),
            compact_list(&s.run),
            s.kept.len()
        );
        if s.missing.is_empty() {
            t += "; every window is there\n";
        } else {
            t += &format!(
                "; windows {} are missing from {}, so the {} waits (run them with --windows, or run without --windows)\n",
                compact_list(&s.missing),
                stage_dir(&args.out, s.stage).display(),
                match s.stage {
                    Stage::Pilot => "umbrella stage",
                    Stage::Umbrella => "analysis",
                }
            );
        }
    }
    out(&t)
}

/// Indices as ranges: [0, 1, 2, 5] → "0-2,5".
pub fn compact_list(v: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// "0.500 ± 0.021", the value alone without an error.
fn pm(e: &Estimate) -> String {
    match e.err {
        Some(err) => format!("{:.4} ± {:.4}", e.value, err),
        None => format!("{:.4}", e.value),
    }
}

/// The report as the aligned text of `flscale free-energy` (without `--json`).
fn human(
    plan: &FreeEnergyPlan,
    r: &FreeEnergyReport,
    stages: &[StageProgress],
    dir: &Path,
) -> String {
    let name = plan.table.order_parameter.as_str();
    let along = match plan.table.neuron {
        Some(i) => format!("{name} of neuron {i}"),
        None => name.to_string(),
    };
    let counts = |stage: Stage| {
        stages
            .iter()
            .find(|s| s.stage == stage)
            .map_or((0, 0), |s| (s.run.len(), plan.windows() - s.run.len()))
    };
    let (run, kept) = counts(Stage::Umbrella);
    let mut t = format!(
        "free energy along {along}: {} windows ({run} run now, {kept} kept), κ = {:.4}, {} bins\n",
        plan.windows(),
        plan.umbrella.kappa,
        r.profile.s.len()
    );
    if let Some(b) = &plan.umbrella.flattening {
        let pilot_windows = plan.table.pilot_windows();
        let (run, kept) = stages
            .iter()
            .find(|s| s.stage == Stage::Pilot)
            .map_or((0, pilot_windows), |s| {
                (s.run.len(), pilot_windows - s.run.len())
            });
        let (lo, hi) = b
            .values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, z), &v| {
                (a.min(v), z.max(v))
            });
        t += &format!(
            "flattened          by a pilot of {} windows at κ = {:.1} ({run} run now, {kept} kept): its estimate spans {:.1} kT over s in [{:.3}, {:.3}]\n",
            pilot_windows,
            plan.table.pilot_kappa(plan.config.sampler.temperature),
            (hi - lo) / plan.config.sampler.temperature,
            b.lo,
            b.hi
        );
    }
    for (i, b) in r.basins.iter().enumerate() {
        let weight = Estimate {
            value: b.weight,
            err: b.weight_err,
        };
        t += &format!(
            "basin {}            s in [{:.3}, {:.3}], minimum at {:.3}: weight {}\n",
            i + 1,
            b.lo,
            b.hi,
            b.min_s,
            pm(&weight)
        );
        let obs: Vec<String> = OBSERVABLES
            .iter()
            .zip(&b.observables)
            .map(|(n, e)| format!("{n} {}", pm(e)))
            .collect();
        t += &format!("                   {}\n", obs.join(", "));
    }
    match &r.barrier {
        Some(b) => {
            t += &format!(
                "barrier            {} kT at s = {:.3} (from the shallower basin {} kT)\n",
                pm(&b.height),
                b.top_s,
                pm(&b.height_from_shallower)
            )
        }
        None => t += "barrier            none: F(s) has one basin\n",
    }
    for (n, e) in OBSERVABLES.iter().zip(&r.observables) {
        t += &format!("{:<18} {} (reweighted)\n", n, pm(e));
    }
    let d = &r.diagnostics;
    if let Some((i, o)) = d
        .neighbour_overlap
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
    {
        t += &format!(
            "overlap            smallest between neighbours {:.3} (windows {}–{}), unbiased ESS {:.0}\n",
            o,
            d.order[i],
            d.order[i + 1],
            d.unbiased_kish_ess
        );
    }
    for n in &r.notes {
        t += &format!("note:              {n}\n");
    }
    t += &format!(
        "written to         {} (profile.csv, free_energy.json, free_energy.svg, windows/{})\n",
        dir.display(),
        if plan.umbrella.flattening.is_some() {
            ", pilot/"
        } else {
            ""
        }
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_lists_parse_and_refuse_in_one_sentence() {
        assert_eq!(parse_windows("0,3-5", 16).unwrap(), vec![0, 3, 4, 5]);
        assert_eq!(parse_windows(" 2 , 2,1-2", 4).unwrap(), vec![1, 2]);
        for (list, want) in [
            ("16", "the plan has 16 windows"),
            ("3-1", "runs backwards"),
            ("a", "`a` is not a window index"),
            ("", "`` is not a window index"),
            ("1,", "`` is not a window index"),
        ] {
            let e = parse_windows(list, 16).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(want), "{list}: {e}");
        }
    }

    /// The summaries `coexistence.json` keeps come back as they were written, a depth over an
    /// empty bin (+∞, null in JSON) and missing errors included; a malformed one is None.
    #[test]
    fn cell_summaries_round_trip_through_json() {
        let side = |min_s: f64, w: f64, depth: f64, err: Option<f64>| Side {
            min_s,
            weight: Estimate { value: w, err },
            depth: Estimate { value: depth, err },
        };
        let cells = [
            CellSummary {
                d: 16.0,
                p: 176.0,
                basins: CellBasins::Two {
                    lazy: side(0.0625, 0.948, f64::INFINITY, None),
                    spec: side(0.8875, 0.052, 3.07, Some(0.18)),
                },
            },
            CellSummary {
                d: 20.0,
                p: 220.0,
                basins: CellBasins::One { min_s: 0.0375 },
            },
        ];
        for c in cells {
            let v = serde_json::to_value(c).unwrap();
            assert_eq!(summary_from_json(&v), Some(c), "{v}");
        }
        let mut bad = serde_json::to_value(cells[0]).unwrap();
        bad["basins"]["two"]["spec"]["weight"]["value"] = serde_json::json!("half");
        assert_eq!(summary_from_json(&bad), None);
        assert_eq!(summary_from_json(&serde_json::json!({"d": 16})), None);
    }

    #[test]
    fn compact_lists_join_consecutive_indices() {
        assert_eq!(compact_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(compact_list(&[3]), "3");
        assert_eq!(compact_list(&[]), "");
    }
}
