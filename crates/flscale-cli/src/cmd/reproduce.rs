//! `flscale reproduce NAME [--quick]`: a figure of the paper end to end — the sweep, the
//! analysis (measured exponent beside the engine's prediction) and the figures (spec 03).

use std::path::{Path, PathBuf};
use std::time::Instant;

use flscale::experiment::analysis;
use flscale::experiment::presets::{preset, Preset};
use flscale::experiment::{ResultsFormat, StoreData, Sweep, SweepOutcome};
use flscale::{Error, Result};

use super::{out, out_json, Ctx};

/// Arguments of `flscale reproduce`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  flscale reproduce fig2b --quick          # about ten seconds on two cores\n  flscale reproduce fig2b --out runs/fig2b # the preset's full sizes (hours; docs/experiments.md)\n\n\
Presets: fig2a, fig2b, fig2c, fig3a, fig3b, fig3c (= fig8), fig7, blog. Each is an experiment file\n\
under presets/experiments/ (print it with --show and run it step by step with flscale sweep).\n\
Re-running the same command resumes."
)]
pub struct ReproduceArgs {
    /// Preset name.
    pub name: String,
    /// Tiny sizes (the preset's [quick] table).
    #[arg(long)]
    pub quick: bool,
    /// Results directory (default runs/NAME, or runs/NAME-quick with --quick).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// File format of the results tables: parquet or csv.
    #[arg(long, default_value = "parquet", value_parser = super::sweep::parse_format)]
    pub format: ResultsFormat,
    /// Print the preset's experiment file and exit.
    #[arg(long)]
    pub show: bool,
    /// Bootstrap replicates.
    #[arg(long, default_value_t = 1000)]
    pub bootstrap: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `flscale reproduce`.
pub fn run(args: ReproduceArgs, ctx: &Ctx) -> Result<()> {
    let p = preset(&args.name)?;
    if args.show {
        return out(p.text);
    }
    let sweep = preset_sweep(p, args.quick)?;
    let dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("runs").join(if args.quick {
            format!("{}-quick", p.name)
        } else {
            p.name.to_string()
        })
    });
    let start = Instant::now();
    let outcome = super::sweep::execute(&sweep, p.text, &dir, None, args.format, ctx)?;
    let figdir = dir.join("figures");
    let (files, an, data) = super::plot::draw(&dir, &figdir, args.bootstrap, false)?;
    let seconds = start.elapsed().as_secs_f64();
    let (warnings, carries_exponent) = fit_warnings(&data, &an, &dir);
    let report = Reproduced {
        preset: p,
        quick: args.quick,
        dir: &dir,
        outcome: &outcome,
        seconds,
        figures: &files,
        analysed: &an,
        data: &data,
        warnings: &warnings,
        carries_exponent,
    };
    if args.json {
        return out_json(&report.json());
    }
    out(&report.text())
}

/// The preset's sweep at full or quick sizes; a preset this build cannot run is refused with
/// the reason (and the loader's own words, if it objects too).
fn preset_sweep(p: &Preset, quick: bool) -> Result<Sweep> {
    let source = format!("presets/experiments/{}.toml", p.name);
    if let Some(why) = p.missing {
        // Validate anyway, so that the message also carries the loader's own words.
        let loader = match Sweep::from_toml(p.text, &source, quick) {
            Err(e) => format!(" ({e})"),
            Ok(_) => String::new(),
        };
        return Err(Error::runtime(format!(
            "preset {} ({}) cannot run in this build: {why}{loader}; no results were produced",
            p.name, p.paper
        )));
    }
    Sweep::from_toml(p.text, &source, quick)
}

/// Everything the report of `flscale reproduce` shows: the sweep, the analysis, the figures.
struct Reproduced<'a> {
    preset: &'a Preset,
    quick: bool,
    dir: &'a Path,
    outcome: &'a SweepOutcome,
    /// Wall-clock seconds of the sweep and the figures.
    seconds: f64,
    figures: &'a [PathBuf],
    analysed: &'a analysis::Analysed,
    data: &'a StoreData,
    warnings: &'a [String],
    /// Whether the fit has points enough to claim an exponent ([`analysis::claim_sentence`]).
    carries_exponent: bool,
}

impl Reproduced<'_> {
    /// The report as the JSON object of `--json`.
    fn json(&self) -> serde_json::Value {
        let (p, an) = (self.preset, self.analysed);
        serde_json::json!({
            "preset": p.name,
            "paper": p.paper,
            "quick": self.quick,
            "dir": self.dir.display().to_string(),
            "runs": self.outcome.finished,
            "runs_computed": self.outcome.computed,
            "pstar": an.pstar.as_ref().map(super::pstar::table_json),
            "fit": an.fit.as_ref().map(|f| super::fit::fit_json(f, an.predicted.as_ref())),
            "figures": self.figures.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "sizes": self.sizes_json(),
            "notes": unique(&an.notes),
            "fit_warnings": self.warnings,
            "exponent_claimed": an.fit.as_ref().map(|_| self.carries_exponent),
            "partial": p.partial,
        })
    }

    /// The sizes that ran: the distinct values of each coordinate of [`SIZE_COORDINATES`]
    /// over the runs.
    fn sizes(&self) -> Vec<(&'static str, Vec<f64>)> {
        SIZE_COORDINATES
            .iter()
            .filter_map(|&k| {
                let mut v: Vec<f64> = self
                    .data
                    .runs
                    .iter()
                    .filter_map(|r| r.coords.get(k).copied())
                    .collect();
                v.sort_by(f64::total_cmp);
                v.dedup();
                (!v.is_empty()).then_some((k, v))
            })
            .collect()
    }

    fn sizes_json(&self) -> serde_json::Value {
        self.sizes()
            .into_iter()
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// One line: `d = 10; p = 200; n1 = 10, 20, 40` (a coordinate's values joined by commas).
    fn sizes_text(&self) -> String {
        self.sizes()
            .into_iter()
            .map(|(k, v)| {
                let vs: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
                format!("{k} = {}", vs.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The report as text: with --quick the smoke-test disclaimer first, the header (what the
    /// paper's figure shows, then the sizes that ran), the P\* table, one block per run where
    /// there is no P\* of the alignment, the fit beside the prediction, notes (each once),
    /// warnings and the figures.
    fn text(&self) -> String {
        let (p, an) = (self.preset, self.analysed);
        let mut s = String::new();
        if self.quick {
            s += "quick sizes: far from the paper's; read the numbers as a smoke test, not a measurement\n";
        }
        s += &format!(
            "{} — {} ({}){}\nran: {}\n{} runs in {} ({} computed now, {:.1} s)\n",
            p.name,
            if self.quick {
                format!("the paper's figure: {}", p.shows)
            } else {
                p.shows.to_string()
            },
            p.paper,
            if self.quick { ", at quick sizes" } else { "" },
            self.sizes_text(),
            self.outcome.finished,
            self.dir.display(),
            self.outcome.computed,
            self.seconds
        );
        if let Some(t) = &an.pstar {
            s += &super::pstar::table_text(t);
        }
        if self.data.analysis.observable != "alignment" || an.pstar.is_none() {
            s += &run_lines(self.data);
        }
        if let Some(f) = &an.fit {
            s += &analysis::claim_sentence(f, an.predicted.as_ref(), self.carries_exponent);
            s += "\n";
        } else if let Some(pr) = &an.predicted {
            s += &format!("predicted: {}\n", pr.description);
        }
        // Each note once: the P* table above prints its own (the unresolved brackets).
        for n in unique(&an.notes) {
            let line = format!("note: {n}\n");
            if !s.contains(&line) {
                s += &line;
            }
        }
        for w in self.warnings {
            s += &format!("warning: {w}\n");
        }
        if !self.warnings.is_empty() {
            s += &format!(
                "EXP in the warnings is the preset's experiment file: `flscale reproduce {} --show > EXP`{}\n",
                p.name,
                if self.quick {
                    "; add --quick to the sweep commands, as this store has the quick sizes"
                } else {
                    ""
                }
            );
        }
        if let Some(part) = p.partial {
            s += &format!("not reproduced: {part}\n");
        }
        for f in self.figures {
            s += &format!("figure {}\n", f.display());
        }
        s
    }
}

/// The coordinates whose values the header lists ("ran: d = 10; p = 200; n1 = 10, 20, 40").
const SIZE_COORDINATES: [&str; 6] = ["d", "p", "n1", "n2", "tokens", "heads"];

/// `notes` with repeats left out, in their first order: the analyses of several figures can
/// arrive at the same note.
fn unique(notes: &[String]) -> Vec<&String> {
    let mut seen = std::collections::BTreeSet::new();
    notes.iter().filter(|n| seen.insert(n.as_str())).collect()
}

/// One line per run (coordinates, alignment, R, outliers, test MSE), with the deeper-layer
/// (Fig. 8) and parity (Fig. 7) observables beneath when the run has them.
fn run_lines(data: &StoreData) -> String {
    let mut s = String::new();
    for r in &data.runs {
        let g = |k: &str| {
            r.summary
                .get(k)
                .and_then(|v| v.as_f64())
                .map(|v| format!("{v:.4}"))
                .unwrap_or_else(|| "n/a".into())
        };
        s += &format!(
            "  {}  d={} p={} n1={}  alignment {}  R {}  outliers {}  test MSE {}\n",
            r.id,
            r.coords.get("d").copied().unwrap_or(f64::NAN),
            r.coords.get("p").copied().unwrap_or(f64::NAN),
            r.coords.get("n1").copied().unwrap_or(f64::NAN),
            g("alignment"),
            g("r_overlap2"),
            g("outliers_layer1"),
            g("test_mse")
        );
        // Deeper-layer (Fig. 8) and parity (Fig. 7) observables, when the run has them.
        let has = |k: &str| r.summary.get(k).is_some_and(|v| v.is_number());
        if has("outliers_layer2_phi") {
            s += &format!(
                "           layer-2 outliers (3 NNGP std) along Φ* {}, along Ĥe3(Φ*) {}\n",
                g("outliers_layer2_phi"),
                g("outliers_layer2_he3")
            );
        }
        if has("test_accuracy") {
            s += &format!(
                "           test accuracy {}  specialising along e1+e2 {}  μ {} ± {}\n",
                g("test_accuracy"),
                g("specialising"),
                g("mu"),
                g("mu_err")
            );
        }
    }
    s
}

/// The minimum-points warnings of `flscale pstar` and `flscale fit`, and whether the fit
/// carries an exponent. For P\* ([`flscale::experiment::pstar::fit_readiness`]) the table
/// already leaves out the runs whose starts disagree, so too few equilibrated cells show up as
/// too few grid points; for another observable
/// ([`analysis::observable_fit_readiness`]) the left-out values of x are named.
fn fit_warnings(
    data: &flscale::experiment::StoreData,
    an: &analysis::Analysed,
    dir: &std::path::Path,
) -> (Vec<String>, bool) {
    let dir = dir.display().to_string();
    let spec = data.analysis.fit.as_ref();
    match (spec, &an.pstar, &an.fit) {
        (Some(f), _, Some(fit)) if f.y != "pstar" => {
            let w = analysis::observable_fit_readiness(fit, data, &f.x, &f.y, &dir);
            let carries = w.is_empty();
            (w, carries)
        }
        (_, Some(t), _) if spec.is_none_or(|f| f.y == "pstar") => (
            flscale::experiment::pstar::fit_readiness(t, &dir),
            flscale::experiment::pstar::carries_exponent(t),
        ),
        _ => (Vec::new(), true),
    }
}
