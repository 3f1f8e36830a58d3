//! `flscale pstar DIR`: P* per group, the threshold crossing of the ensemble alignment in
//! log P with a bootstrap error over chains (spec 03; paper App. F.0.1); on the directory of a
//! free-energy grid, P\*\_coex and both spinodals per d with their exponents (spec 07).

use std::path::PathBuf;

use flscale::experiment::analysis;
use flscale::experiment::pstar::{self, PstarQuery, PstarTable};
use flscale::experiment::stats::{Bootstrap, Estimate};
use flscale::experiment::StoreData;
use flscale::{Error, Result};

use super::free_energy::{exponents_text, thresholds_json, StoredGrid};
use super::{out, out_json, Ctx};

/// Arguments of `flscale pstar`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  flscale pstar runs/fig2b --threshold 0.1\n\n\
P* is where the observable (the ensemble alignment A_f by default) first crosses the threshold,\n\
interpolated linearly in log P between the two bracketing sizes, which are printed too. The\n\
error is the standard deviation of a bootstrap over seeds, then chains within each seed; the\n\
interval is its 2.5–97.5 % range. The last column combines it with the bracket (the crossing\n\
anywhere in the bracket, uniformly in log P): a bracket wider than [analysis] pstar_resolution\n\
(default 1.1) is marked `bracketed` — the grid cannot place a sharp jump inside it; bisect it with\n\
`flscale sweep EXP --out DIR --refine-pstar`. Defaults come from the experiment's [analysis] table.\n\n\
On the output directory of a free-energy grid (`flscale free-energy GRID.toml --out DIR` with a\n\
[sweep], which leaves DIR/coexistence.json) it prints per d the coexistence P*_coex and the lazy\n\
and specialised spinodals with their errors, brackets and resolution, and each one's exponent\n\
against d, recomputed from the cells' basin summaries kept there (no sampling); --bootstrap and\n\
--seed default to the run's own, so the numbers are the run's (docs/free-energy.md)."
)]
pub struct PstarArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Crossing variable (default p).
    #[arg(long)]
    pub x: Option<String>,
    /// One P* per value of this variable (default d).
    #[arg(long)]
    pub group: Option<String>,
    /// Observable: alignment, test_mse, r_overlap2, outliers.
    #[arg(long)]
    pub observable: Option<String>,
}

/// The arguments that `flscale pstar` and `flscale fit` share: the results directory, the
/// threshold override, the bootstrap and the output format.
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// A results directory of `flscale sweep`, or the output directory of a free-energy grid.
    pub dir: PathBuf,
    /// Threshold of P* (default: [analysis] threshold, else 0.1).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// Bootstrap replicates (default 1000; on a free-energy grid, the run's own).
    #[arg(long)]
    pub bootstrap: Option<usize>,
    /// Seed of the bootstrap stream (default 0; on a free-energy grid, the run's own).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Use runs whose hot and cold starts disagree too (left out by default; the report names
    /// them either way).
    #[arg(long)]
    pub include_unequilibrated: bool,
    /// Go on without damaged or missing runs (listed on stderr) instead of refusing.
    #[arg(long)]
    pub skip_damaged: bool,
}

impl StoreArgs {
    /// The bootstrap over chains these arguments ask for.
    pub fn bootstrap(&self) -> Bootstrap {
        Bootstrap::new(self.seed.unwrap_or(0), self.bootstrap.unwrap_or(1000))
    }

    /// The free-energy grid in `dir`, reread ([`super::free_energy::load_grid`]); None when
    /// `dir` is not one. `flags` are the given options that select a crossing, each refused
    /// there in one sentence: a grid's thresholds are ΔF = 0 and the two spinodals.
    pub fn grid(&self, flags: &[(&str, bool)]) -> Result<Option<StoredGrid>> {
        if !super::free_energy::is_grid(&self.dir) {
            return Ok(None);
        }
        if let Some((flag, _)) = std::iter::once(("--threshold", self.threshold.is_some()))
            .chain(flags.iter().copied())
            .find(|f| f.1)
        {
            return Err(Error::invalid(format!(
                "{flag} does not apply to {}, the directory of a free-energy grid: its thresholds are ΔF = 0 and the two spinodals; leave {flag} out",
                self.dir.display()
            )));
        }
        super::free_energy::load_grid(&self.dir, self.bootstrap, self.seed).map(Some)
    }
}

/// Loads DIR, verified: damaged or missing runs are refused naming them, or with
/// `skip_damaged` left out and listed on stderr. Applies the command-line overrides of
/// [analysis].
pub fn load(
    dir: &std::path::Path,
    threshold: Option<f64>,
    x: Option<&str>,
    group: Option<&str>,
    observable: Option<&str>,
    skip_damaged: bool,
) -> Result<StoreData> {
    let policy = flscale::experiment::integrity::Policy {
        skip_damaged,
        require_complete: true,
    };
    let (mut data, notes) = StoreData::load_verified(dir, policy)?;
    for n in notes {
        eprintln!("note: {n}");
    }
    if data.runs.is_empty() {
        return Err(Error::invalid(format!(
            "{} has no finished runs yet; run flscale sweep first",
            dir.display()
        )));
    }
    let a = &mut data.analysis;
    if let Some(t) = threshold {
        a.threshold = flscale::error::require_finite("--threshold", t)?;
    }
    if let Some(x) = x {
        a.x = x.to_string();
    }
    if let Some(g) = group {
        a.group = g.to_string();
    }
    if let Some(o) = observable {
        a.observable = o.to_string();
    }
    Ok(data)
}

/// The P* table as aligned text.
pub fn table_text(t: &PstarTable) -> String {
    let mut s = format!(
        "P* = {} where {} crosses {} (interpolated in log {})\n{:>10}  {:>12}  {:>10}  {:>25}  {:>23}  {:>25}\n",
        t.x,
        t.observable,
        t.threshold,
        t.x,
        t.group,
        "P*",
        "± (boot)",
        "95 % interval",
        "bracket",
        "95 % with bracket"
    );
    let interval = |e: &Estimate| match (e.lo, e.hi) {
        (Some(lo), Some(hi)) => format!("{lo:.4} … {hi:.4}"),
        _ => "n/a".into(),
    };
    for r in &t.rows {
        match (&r.pstar, &r.bracket) {
            (Some(e), Some(b)) => {
                s += &format!(
                    "{:>10}  {:>12.4}  {:>10}  {:>25}  {:>23}  {:>25}\n",
                    r.group,
                    e.value,
                    e.err.map(|v| format!("{v:.4}")).unwrap_or("n/a".into()),
                    interval(e),
                    format!(
                        "[{}, {}] {}",
                        b.lo,
                        b.hi,
                        if r.resolved { "ok" } else { "bracketed" }
                    ),
                    r.combined.as_ref().map(interval).unwrap_or("n/a".into()),
                )
            }
            _ => {
                s += &format!(
                    "{:>10}  {:>12}  (no crossing in the measured range {})\n",
                    r.group,
                    "n/a",
                    r.curve
                        .iter()
                        .map(|(x, y)| format!("{x}:{y:.3}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            }
        }
    }
    for n in pstar::unresolved_notes(t) {
        s += &format!("note: {n}\n");
    }
    s
}

/// The P* table as JSON.
pub fn table_json(t: &PstarTable) -> serde_json::Value {
    serde_json::json!({
        "x": t.x, "group": t.group, "observable": t.observable, "threshold": t.threshold,
        "rows": t.rows.iter().map(|r| serde_json::json!({
            "group": r.group,
            "curve": r.curve,
            "pstar": r.pstar.map(|e| e.value),
            "err": r.pstar.and_then(|e| e.err),
            "ci95": r.pstar.and_then(|e| e.lo.zip(e.hi)),
            "replicates_ok": r.pstar.map(|e| e.replicates_ok),
            "bracket": r.bracket.map(|b| [b.lo, b.hi]),
            "bracket_factor": r.bracket.map(|b| b.factor()),
            "resolved": r.resolved,
            "ci95_with_bracket": r.combined.and_then(|e| e.lo.zip(e.hi)),
        })).collect::<Vec<_>>(),
        "resolution": t.resolution,
    })
}

/// Per d and threshold: P, its bootstrap error and 95 % interval, the bracket and how far it
/// is known.
pub fn grid_table_text(g: &StoredGrid) -> String {
    let mut s = format!(
        "thresholds per d from the free energy (replicates {})\n{:>8}  {:<17}  {:>12}  {:>10}  {:>23}  {:>21}  {}\n",
        g.analysis.thresholds.replicates,
        "d",
        "threshold",
        "P",
        "± (boot)",
        "95 % interval",
        "bracket",
        "resolution"
    );
    for row in &g.analysis.thresholds.rows {
        for kind in analysis::ThresholdKind::ALL {
            let t = kind.of(row);
            let num = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.4}"));
            s += &format!(
                "{:>8}  {:<17}  {:>12}  {:>10}  {:>23}  {:>21}  {}\n",
                row.d,
                kind.name(),
                num(t.value),
                num(t.err),
                t.interval
                    .map_or("n/a".into(), |(lo, hi)| format!("{lo:.4} … {hi:.4}")),
                t.bracket
                    .map_or("n/a".into(), |(lo, hi)| format!("[{lo}, {hi}]")),
                format!("{:?}", t.resolution).to_lowercase()
            );
        }
    }
    s
}

/// `flscale pstar` on a free-energy grid's directory.
fn run_grid(args: &PstarArgs, g: &StoredGrid) -> Result<()> {
    if args.store.json {
        return out_json(&thresholds_json(&g.analysis));
    }
    out(&(grid_table_text(g) + &exponents_text(&g.analysis)))
}

/// Runs `flscale pstar`.
pub fn run(args: PstarArgs, _ctx: &Ctx) -> Result<()> {
    let flags = [
        ("--x", args.x.is_some()),
        ("--group", args.group.is_some()),
        ("--observable", args.observable.is_some()),
    ];
    if let Some(g) = args.store.grid(&flags)? {
        return run_grid(&args, &g);
    }
    let data = load(
        &args.store.dir,
        args.store.threshold,
        args.x.as_deref(),
        args.group.as_deref(),
        args.observable.as_deref(),
        args.store.skip_damaged,
    )?;
    let mut data = data;
    data.include_unequilibrated = args.store.include_unequilibrated;
    let a = data.analysis.clone();
    let mut boot = args.store.bootstrap();
    let t = pstar::pstar(&data, &PstarQuery::from_analysis(&data), &mut boot)?;
    let fit = pstar::fit_pstar(&t).ok();
    let warnings = pstar::fit_readiness(&t, &args.store.dir.display().to_string());
    let carries = pstar::carries_exponent(&t);
    let predicted = a
        .predict
        .as_ref()
        .filter(|p| p.quantity == "pstar")
        .map(analysis::predicted_exponent)
        .transpose()?;
    if args.store.json {
        let mut v = table_json(&t);
        v["exponent"] = serde_json::json!(fit.as_ref().map(|f| serde_json::json!({
            "value": f.exponent.value, "err": f.exponent.err,
            "ci95": f.exponent.lo.zip(f.exponent.hi),
        })));
        v["predicted"] = serde_json::json!(predicted.as_ref().map(|p| serde_json::json!({
            "value": p.value, "exact": p.exact, "description": p.description,
        })));
        v["equilibration"] = serde_json::json!(data.equilibration_note());
        v["fit_warnings"] = serde_json::json!(warnings);
        v["exponent_claimed"] = serde_json::json!(carries);
        v["step_bias"] = serde_json::json!(data.step_bias_note());
        return out_json(&v);
    }
    let mut s = table_text(&t);
    s += &format!("{}\n", data.equilibration_note());
    for w in warnings.iter().chain(&data.step_bias_note()) {
        s += &format!("warning: {w}\n");
    }
    if let Some(f) = &fit {
        s += &analysis::claim_sentence(f, predicted.as_ref(), carries);
        s += "\n";
    }
    out(&s)
}
