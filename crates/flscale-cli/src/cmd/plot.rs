//! `flscale plot DIR`: the figures of a results directory as PNG and SVG (spec 03); for the
//! directory of a free-energy grid, the three thresholds against d (spec 07).

use std::path::{Path, PathBuf};

use flscale::experiment::analysis::{self, CoexistenceAnalysis, ThresholdKind};
use flscale::experiment::figures::{self, FigureInputs};
use flscale::free_energy::coexistence::Resolution;
use flscale::plot::{write_figure, LineChart, Mark, Series};
use flscale::Result;

use super::{out, out_json, Ctx};

/// Arguments of `flscale plot`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  flscale plot runs/fig2b            # writes runs/fig2b/figures/*.png and *.svg\n\n\
Draws what the data supports: the observable vs P per d with the threshold; P* vs d (log-log)\n\
with the fit and the predicted slope; outliers vs N1; −log density of the first-layer overlaps;\n\
test MSE vs alignment with the bound (1 − A_f)²·⟨y²⟩.\n\n\
On the output directory of a free-energy grid (DIR/coexistence.json) it draws thresholds_vs_d:\n\
P*_coex and the lazy and specialised spinodals against d (log-log) with their bootstrap error\n\
bars and each one's fitted power law, recomputed from the cells' summaries kept there."
)]
pub struct PlotArgs {
    /// A results directory of `flscale sweep`, or the output directory of a free-energy grid.
    pub dir: PathBuf,
    /// Where the figures go (default DIR/figures).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Bootstrap replicates for the P* error bars and fits (default 1000; on a free-energy
    /// grid, the run's own).
    #[arg(long)]
    pub bootstrap: Option<usize>,
    /// Print the written files as JSON.
    #[arg(long)]
    pub json: bool,
    /// Go on without damaged or missing runs (listed on stderr) instead of refusing.
    #[arg(long)]
    pub skip_damaged: bool,
}

/// Draws the figures of `dir` into `to`; returns the files and the analysis.
pub fn draw(
    dir: &std::path::Path,
    to: &std::path::Path,
    replicates: usize,
    skip_damaged: bool,
) -> Result<(
    Vec<PathBuf>,
    analysis::Analysed,
    flscale::experiment::StoreData,
)> {
    let data = super::pstar::load(dir, None, None, None, None, skip_damaged)?;
    let an = analysis::analyse(&data, replicates, 0);
    let fit_y = data
        .analysis
        .fit
        .as_ref()
        .map(|f| f.y.clone())
        .unwrap_or_else(|| "pstar".into());
    let is_pstar = fit_y == "pstar";
    let inputs = FigureInputs {
        pstar: an.pstar.as_ref(),
        pstar_fit: an.fit.as_ref().filter(|_| is_pstar),
        pstar_predicted: an.predicted.as_ref().filter(|_| is_pstar),
        outlier_fit: an.fit.as_ref().filter(|_| fit_y.starts_with("outliers")),
        outlier_predicted: an
            .predicted
            .as_ref()
            .filter(|_| fit_y.starts_with("outliers")),
        mu_fit: an.fit.as_ref().filter(|_| fit_y == "mu"),
        mu_predicted: an.predicted.as_ref().filter(|_| fit_y == "mu"),
    };
    let files = figures::draw_all(&data, to, &inputs)?;
    Ok((files, an, data))
}

/// Width and height of the thresholds figure in pixels (those of the sweep figures).
const W: u32 = 800;
const H: u32 = 560;

/// Markers of the three thresholds at one d are drawn at d·(1 + k·DODGE), k = −1, 0, 1, so
/// that equal values stay apart.
const DODGE: f64 = 0.015;

/// How far beyond its d's measured P an extrapolated spinodal may lie and still be drawn.
const FAR: f64 = 4.0;

/// `thresholds_vs_d.png` and `.svg`: each threshold's resolved and bracketed values against d
/// (log-log) with ± one bootstrap standard deviation, and its least-squares power law
/// (exp(intercept)·d^slope over the fitted d) with the measured exponent. A spinodal
/// extrapolated beyond every measured P is an open circle without a bar (its replicates are
/// clamped only at the grid's end, so the bar would say nothing), and left out, named in a note,
/// when it lies more than [`FAR`] times beyond that d's measured P. Returns the files and the
/// notes.
pub fn draw_thresholds(a: &CoexistenceAnalysis, to: &Path) -> Result<(Vec<PathBuf>, Vec<String>)> {
    let mut series = Vec::new();
    let mut notes = vec!["bars: ± one bootstrap standard deviation".to_string()];
    let mut left_out = Vec::new();
    let mut any_hollow = false;
    for (k, kind) in ThresholdKind::ALL.iter().enumerate() {
        let shift = 1.0 + (k as f64 - 1.0) * DODGE;
        let mut s = Series::new(kind.name(), Vec::new(), Mark::Points);
        for row in &a.thresholds.rows {
            let t = kind.of(row);
            let (lo, hi) = row.cells.iter().fold((f64::INFINITY, 0.0f64), |(l, h), c| {
                (l.min(c.p), h.max(c.p))
            });
            match (t.value, t.resolution) {
                (Some(v), Resolution::Resolved | Resolution::Bracketed) => {
                    s.points.push((row.d * shift, v));
                    s.errors.push(t.err.unwrap_or(f64::NAN));
                }
                (Some(v), _) if v >= lo / FAR && v <= hi * FAR => {
                    s.hollow.push((row.d * shift, v));
                }
                (Some(_), _) => left_out.push(format!("{} at d = {}", kind.name(), row.d)),
                (None, _) => {}
            }
        }
        any_hollow |= !s.hollow.is_empty();
        if !(s.points.is_empty() && s.hollow.is_empty()) {
            series.push(s);
        }
    }
    if any_hollow {
        notes.push("open circles: extrapolated beyond the grid (no bar)".into());
    }
    for f in &a.fits {
        let Some(fit) = &f.fit else { continue };
        let (lo, hi) = fit
            .points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
                (l.min(p.0), h.max(p.0))
            });
        let line = |d: f64| (d, (fit.fit.intercept + fit.fit.slope * d.ln()).exp());
        series.push(Series::new(
            format!("{} fit, slope {:.2}", f.kind.name(), fit.exponent.value),
            vec![line(lo), line(hi)],
            Mark::Dashed,
        ));
    }
    if !left_out.is_empty() {
        notes.push(format!(
            "not drawn (extrapolated over {FAR}× beyond the grid): {}",
            left_out.join(", ")
        ));
    }
    let chart = LineChart {
        title: "thresholds from the free energy vs d".into(),
        x_label: "d".into(),
        y_label: "P".into(),
        log_x: true,
        log_y: true,
        series,
        notes: notes.clone(),
    };
    std::fs::create_dir_all(to).map_err(|e| {
        flscale::Error::invalid(format!("cannot create directory {}: {e}", to.display()))
    })?;
    let mut files = Vec::new();
    for ext in ["png", "svg"] {
        let p = to.join(format!("thresholds_vs_d.{ext}"));
        write_figure(&p, W, H, &chart)?;
        files.push(p);
    }
    Ok((files, notes))
}

/// Runs `flscale plot`.
pub fn run(args: PlotArgs, _ctx: &Ctx) -> Result<()> {
    let to = args.out.clone().unwrap_or_else(|| args.dir.join("figures"));
    let (files, notes) = if super::free_energy::is_grid(&args.dir) {
        let g = super::free_energy::load_grid(&args.dir, args.bootstrap, None)?;
        let (files, mut notes) = draw_thresholds(&g.analysis, &to)?;
        notes.extend(g.analysis.notes.iter().cloned());
        (files, notes)
    } else {
        let replicates = args.bootstrap.unwrap_or(1000);
        let (files, an, _) = draw(&args.dir, &to, replicates, args.skip_damaged)?;
        (files, an.notes)
    };
    if args.json {
        return out_json(&serde_json::json!({
            "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "notes": notes,
        }));
    }
    let mut s = String::new();
    for f in &files {
        s += &format!("wrote {}\n", f.display());
    }
    if files.is_empty() {
        s += "no figure: the sweep has too few runs for any of them\n";
    }
    out(&s)
}
