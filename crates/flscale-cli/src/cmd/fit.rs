//! `flscale fit DIR`: a power-law exponent (of P*, or of an observable) with a bootstrap
//! interval, side by side with the scaling engine's prediction (spec 03 "Analysis").

use flscale::experiment::analysis::{self, Predicted};
use flscale::experiment::pstar::{self, PstarQuery};
use flscale::experiment::stats::ExponentFit;
use flscale::experiment::sweep::PredictSpec;
use flscale::{Error, Result};

use super::free_energy::StoredGrid;
use super::pstar::StoreArgs;
use super::{out, out_json, Ctx};

/// Arguments of `flscale fit`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
flscale fit runs/fig2b                         # P* vs d, as [analysis] says\n  \
flscale reproduce fig2c --quick --out runs/fig2c   # a store of outliers at three widths, then:\n  \
flscale fit runs/fig2c --y outliers --x n1 --preset fcn2-erf-he3 --at N=d --quantity M --scale N\n\n\
Least squares of log y on log x; the error is the standard deviation of a bootstrap over chains,\n\
the interval its 2.5–97.5 % range. The prediction is the scaling engine's exponent for the same\n\
architecture (`flscale predict`): the exponent of P* in d, or of a winning pattern's free\n\
parameter (e.g. M, the number of specialising neurons) in a scale.\n\n\
On the output directory of a free-energy grid (DIR/coexistence.json) it fits an exponent against\n\
d to each of P*_coex, the lazy and the specialised spinodal, recomputed from the cells' basin\n\
summaries kept there (no sampling); --bootstrap and --seed default to the run's own.")]
pub struct FitArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// What to fit: pstar, alignment, test_mse, r_overlap2 or outliers.
    #[arg(long)]
    pub y: Option<String>,
    /// Against which variable (d, p, n1, kappa, …).
    #[arg(long)]
    pub x: Option<String>,
    /// Architecture preset of the prediction (default: [analysis] predict).
    #[arg(long)]
    pub preset: Option<String>,
    /// Regime of the prediction, e.g. N=d.
    #[arg(long)]
    pub at: Option<String>,
    /// Predicted quantity: pstar or a free parameter such as M.
    #[arg(long)]
    pub quantity: Option<String>,
    /// Scale of the predicted exponent (d, N, …).
    #[arg(long)]
    pub scale: Option<String>,
}

/// The fit as JSON.
pub fn fit_json(f: &ExponentFit, p: Option<&Predicted>) -> serde_json::Value {
    serde_json::json!({
        "what": f.what,
        "points": f.points,
        "exponent": f.exponent.value,
        "err": f.exponent.err,
        "ci95": f.exponent.lo.zip(f.exponent.hi),
        "replicates_ok": f.exponent.replicates_ok,
        "without_bracket": f.without_bracket.map(|b| serde_json::json!({
            "err": b.err, "ci95": b.lo.zip(b.hi),
        })),
        "intercept": f.fit.intercept,
        "skipped": f.skipped,
        "predicted": p.map(|p| serde_json::json!({
            "value": p.value, "exact": p.exact, "description": p.description,
        })),
    })
}

/// The prediction printed beside the fit: `--preset` (with `--at/--quantity/--scale`), else
/// the experiment's `[analysis] predict` with those flags applied, and only when it is about
/// the fitted quantity (P\* or an observable).
fn prediction_spec(
    args: &FitArgs,
    predict: Option<&PredictSpec>,
    y: &str,
) -> Result<Option<PredictSpec>> {
    Ok(match (&args.preset, predict) {
        (Some(p), _) => Some(PredictSpec {
            preset: p.clone(),
            at: args.at.clone(),
            quantity: args.quantity.clone().unwrap_or_else(|| "pstar".into()),
            scale: args.scale.clone().unwrap_or_else(|| "d".into()),
        }),
        // The experiment's prediction is only printed beside the quantity it is about.
        (None, Some(p)) if (p.quantity == "pstar") != (y == "pstar") && args.quantity.is_none() => {
            None
        }
        (None, Some(p)) => {
            let mut p = p.clone();
            if let Some(at) = &args.at {
                p.at = Some(at.clone());
            }
            if let Some(q) = &args.quantity {
                p.quantity = q.clone();
            }
            if let Some(s) = &args.scale {
                p.scale = s.clone();
            }
            Some(p)
        }
        (None, None) => {
            if args.at.is_some() || args.quantity.is_some() || args.scale.is_some() {
                return Err(Error::invalid(
                    "--at, --quantity and --scale need --preset (or [analysis] predict in the experiment)",
                ));
            }
            None
        }
    })
}

/// `flscale fit` on a free-energy grid's directory: each threshold's exponent against d, beside
/// the prediction of `--preset` or the grid's `[analysis] predict`.
fn run_grid(args: &FitArgs, g: &StoredGrid) -> Result<()> {
    let predicted = prediction_spec(args, g.spec.predict.as_ref(), "pstar")?
        .as_ref()
        .map(analysis::predicted_exponent)
        .transpose()?;
    let a = &g.analysis;
    if args.store.json {
        return out_json(&serde_json::json!({
            "fits": a.fits.iter().map(|f| {
                let mut v = f.fit.as_ref().map_or(serde_json::Value::Null, |x| fit_json(x, predicted.as_ref()));
                if let serde_json::Value::Object(m) = &mut v {
                    m.insert("threshold".into(), serde_json::json!(f.kind.name()));
                }
                v
            }).collect::<Vec<_>>(),
            "notes": a.notes,
        }));
    }
    let mut s = String::new();
    for f in &a.fits {
        let Some(fit) = &f.fit else { continue };
        for (px, py) in &fit.points {
            s += &format!("  d = {px:<10} {} = {py:.5}\n", f.kind.name());
        }
        for k in &fit.skipped {
            s += &format!("  left out: {k}\n");
        }
        s += &format!("{}\n", analysis::side_by_side(fit, predicted.as_ref()));
    }
    for n in &a.notes {
        s += &format!("  note: {n}\n");
    }
    out(&s)
}

/// Runs `flscale fit`.
pub fn run(args: FitArgs, _ctx: &Ctx) -> Result<()> {
    // A wrong preset name is the user's to fix: say so before any fit can fail on the data.
    if let Some(p) = &args.preset {
        flscale::patterns::arch::Architecture::from_preset(p).map_err(|e| e.context("--preset"))?;
    }
    let flags = [
        ("--y", args.y.as_deref().is_some_and(|y| y != "pstar")),
        ("--x", args.x.as_deref().is_some_and(|x| x != "d")),
    ];
    if let Some(g) = args.store.grid(&flags)? {
        return run_grid(&args, &g);
    }
    let mut data = super::pstar::load(
        &args.store.dir,
        args.store.threshold,
        None,
        None,
        None,
        args.store.skip_damaged,
    )?;
    data.include_unequilibrated = args.store.include_unequilibrated;
    let a = data.analysis.clone();
    let spec = a
        .fit
        .clone()
        .unwrap_or(flscale::experiment::sweep::FitSpec {
            y: "pstar".into(),
            x: a.group.clone(),
        });
    let y = args.y.clone().unwrap_or(spec.y);
    let x = args.x.clone().unwrap_or(spec.x);
    let mut boot = args.store.bootstrap();
    let mut unresolved = Vec::new();
    let warnings;
    let carries;
    let f = if y == "pstar" {
        // The crossing as `flscale pstar` finds it ([analysis] falling and resolution
        // included), grouped by the fit's x.
        let mut query = PstarQuery::from_analysis(&data);
        query.group = x.clone();
        let t = pstar::pstar(&data, &query, &mut boot)?;
        unresolved = flscale::experiment::pstar::unresolved_notes(&t);
        warnings =
            flscale::experiment::pstar::fit_readiness(&t, &args.store.dir.display().to_string());
        carries = flscale::experiment::pstar::carries_exponent(&t);
        pstar::fit_pstar(&t)?
    } else {
        let f = analysis::fit_observable(&data, &x, &y, &mut boot)?;
        warnings = analysis::observable_fit_readiness(
            &f,
            &data,
            &x,
            &y,
            &args.store.dir.display().to_string(),
        );
        carries = warnings.is_empty();
        f
    };
    let predict = prediction_spec(&args, a.predict.as_ref(), &y)?;
    let predicted = predict
        .as_ref()
        .map(analysis::predicted_exponent)
        .transpose()?;
    // μ and M are counted over the specialised neurons; say which rule found them.
    let mu_rule = if matches!(y.as_str(), "mu" | "specialising") {
        data.mu_rule_note()
    } else {
        None
    };
    if args.store.json {
        let mut v = fit_json(&f, predicted.as_ref());
        if let Some(n) = &mu_rule {
            v["mu_rule"] = serde_json::json!(n);
        }
        v["unresolved"] = serde_json::json!(unresolved);
        v["fit_warnings"] = serde_json::json!(warnings);
        v["exponent_claimed"] = serde_json::json!(carries);
        v["equilibration"] = serde_json::json!(data.equilibration_note());
        v["step_bias"] = serde_json::json!(data.step_bias_note());
        return out_json(&v);
    }
    let mut s = String::new();
    for (px, py) in &f.points {
        s += &format!("  {x} = {px:<10} {y} = {py:.5}\n");
    }
    for k in &f.skipped {
        s += &format!("  left out: {k}\n");
    }
    for k in &unresolved {
        s += &format!("  note: {k}\n");
    }
    for k in warnings.iter().chain(&data.step_bias_note()) {
        s += &format!("  warning: {k}\n");
    }
    s += &format!("  {}\n", data.equilibration_note());
    if let Some(n) = &mu_rule {
        s += &format!("  {n}\n");
    }
    s += &analysis::claim_sentence(&f, predicted.as_ref(), carries);
    s += "\n";
    out(&s)
}
