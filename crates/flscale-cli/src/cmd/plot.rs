//! `flscale plot DIR`: the figures of a results directory as PNG and SVG (spec 03).

use std::path::PathBuf;

use flscale::experiment::analysis;
use flscale::experiment::figures::{self, FigureInputs};
use flscale::Result;

use super::{out, out_json, Ctx};

/// Arguments of `flscale plot`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  flscale plot runs/fig2b            # writes runs/fig2b/figures/*.png and *.svg\n\n\
Draws what the data supports: the observable vs P per d with the threshold; P* vs d (log-log)\n\
with the fit and the predicted slope; outliers vs N1; −log density of the first-layer overlaps;\n\
test MSE vs alignment with the bound (1 − A_f)²·⟨y²⟩."
)]
pub struct PlotArgs {
    /// A results directory of `flscale sweep`.
    pub dir: PathBuf,
    /// Where the figures go (default DIR/figures).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Bootstrap replicates for the P* error bars and fits.
    #[arg(long, default_value_t = 1000)]
    pub bootstrap: usize,
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

/// Runs `flscale plot`.
pub fn run(args: PlotArgs, _ctx: &Ctx) -> Result<()> {
    let to = args.out.clone().unwrap_or_else(|| args.dir.join("figures"));
    let (files, an, _) = draw(&args.dir, &to, args.bootstrap, args.skip_damaged)?;
    if args.json {
        return out_json(&serde_json::json!({
            "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "notes": an.notes,
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
