//! What `flscale free-energy` and `flscale.free_energy` make of a [`FreeEnergyReport`]: the
//! profile as CSV, the report as one JSON object, the figure of F(s), and the file a finished
//! window is kept in so that a rerun resumes (spec 07, "Outputs").
//!
//! Everything here turns values into text or a drawing; [`write_window`], [`read_window`] and
//! [`write_outputs`] are the only functions that touch files, each writing through a temporary
//! file and a rename so that a kill never leaves half a file behind.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use super::analysis::{Estimate, FreeEnergyReport};
use super::config::FreeEnergyConfig;
use super::window::{FreeEnergyPlan, WindowRun, OBSERVABLES};
use crate::error::{Error, Result};
use crate::plot::{perr, region_colour, write_figure, Figure, PALETTE};
use crate::sim::config::ExperimentConfig;

/// A number for a CSV cell: empty when missing or not finite.
fn cell(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => String::new(),
    }
}

/// The profile as CSV: a header `s,F,F_err` and one row per bin; F and F_err are empty where
/// no sample fell (F undefined) or the bootstrap gave no error.
pub fn profile_csv(report: &FreeEnergyReport) -> String {
    let p = &report.profile;
    let mut t = String::from("s,F,F_err\n");
    for i in 0..p.s.len() {
        t += &format!(
            "{},{},{}\n",
            cell(Some(p.s[i])),
            cell(p.f[i]),
            cell(p.f_err[i])
        );
    }
    t
}

/// A finite number as JSON, null otherwise.
fn json_num(x: Option<f64>) -> serde_json::Value {
    match x {
        Some(v) if v.is_finite() => serde_json::json!(v),
        _ => serde_json::Value::Null,
    }
}

fn json_estimate(e: &Estimate) -> serde_json::Value {
    serde_json::json!({"value": json_num(Some(e.value)), "err": json_num(e.err)})
}

/// Each observable's estimate under its name (`names[j]` for `estimates[j]`).
fn named(names: &[&str], estimates: &[Estimate]) -> serde_json::Value {
    serde_json::Value::Object(
        names
            .iter()
            .zip(estimates)
            .map(|(n, e)| (n.to_string(), json_estimate(e)))
            .collect(),
    )
}

/// The report as one JSON object: `profile` = {`s`, `F`, `F_err`} (null where undefined),
/// `basins` = [{`lo`, `hi`, `min_s`, `weight`, `weight_err`, `observables`}] in order of s,
/// `barrier` = {`height`, `err`, `top_s`, `basins`, `height_from_shallower`,
/// `height_from_shallower_err`} or null with one basin, `observables` = {name: {`value`,
/// `err`}} with `names[j]` naming observable j, and `diagnostics` (MBAR's f_k, the overlap
/// matrix, each window's effective sample size and autocorrelation time).
pub fn report_json(report: &FreeEnergyReport, names: &[&str]) -> Result<serde_json::Value> {
    let p = &report.profile;
    let basins: Vec<serde_json::Value> = report
        .basins
        .iter()
        .map(|b| {
            serde_json::json!({
                "lo": b.lo,
                "hi": b.hi,
                "min_s": b.min_s,
                "weight": json_num(Some(b.weight)),
                "weight_err": json_num(b.weight_err),
                "observables": named(names, &b.observables),
            })
        })
        .collect();
    let barrier = match &report.barrier {
        None => serde_json::Value::Null,
        Some(b) => serde_json::json!({
            "height": json_num(Some(b.height.value)),
            "err": json_num(b.height.err),
            "top_s": b.top_s,
            "basins": [b.basins.0, b.basins.1],
            "height_from_shallower": json_num(Some(b.height_from_shallower.value)),
            "height_from_shallower_err": json_num(b.height_from_shallower.err),
        }),
    };
    let diagnostics = serde_json::to_value(&report.diagnostics)
        .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?;
    Ok(serde_json::json!({
        "profile": {
            "s": p.s,
            "F": p.f.iter().map(|x| json_num(*x)).collect::<Vec<_>>(),
            "F_err": p.f_err.iter().map(|x| json_num(*x)).collect::<Vec<_>>(),
        },
        "basins": basins,
        "barrier": barrier,
        "observables": named(names, &report.observables),
        "diagnostics": diagnostics,
        "notes": report.notes,
    }))
}

/// The figure of F(s): the profile with its ±1 standard-error band, each basin shaded and
/// labelled with its weight, the barrier top marked.
#[derive(Debug, Clone)]
pub struct ProfileFigure<'a> {
    /// What is drawn.
    pub report: &'a FreeEnergyReport,
    /// Title at the top.
    pub title: String,
    /// Name of the order parameter (the x axis).
    pub x_label: String,
}

/// Runs of consecutive bins where `keep` holds, as index ranges.
fn runs_of(n: usize, keep: impl Fn(usize) -> bool) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    for i in 0..=n {
        match (start, i < n && keep(i)) {
            (None, true) => start = Some(i),
            (Some(a), false) => {
                out.push(a..i);
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// "0.50 ± 0.02", or the value alone without an error.
fn with_err(value: f64, err: Option<f64>) -> String {
    match err {
        Some(e) => format!("{value:.3} ± {e:.3}"),
        None => format!("{value:.3}"),
    }
}

impl ProfileFigure<'_> {
    /// The y range: every F ± err, padded; (0, 1) with nothing to draw.
    fn y_range(&self) -> (f64, f64) {
        let p = &self.report.profile;
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for (f, e) in p.f.iter().zip(&p.f_err) {
            if let Some(f) = f.filter(|v| v.is_finite()) {
                let e = e.filter(|v| v.is_finite()).unwrap_or(0.0);
                lo = lo.min(f - e);
                hi = hi.max(f + e);
            }
        }
        if !lo.is_finite() {
            return (0.0, 1.0);
        }
        let pad = 0.08 * (hi - lo).max(1.0);
        // Room above the curve for the basins' labels.
        (lo - pad, hi + 3.0 * pad)
    }
}

impl Figure for ProfileFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(perr)?;
        let r = self.report;
        let p = &r.profile;
        let n = p.s.len();
        let half = if n > 1 { 0.5 * (p.s[1] - p.s[0]) } else { 0.5 };
        let (x0, x1) = (
            p.s.first().copied().unwrap_or(0.0) - half,
            p.s.last().copied().unwrap_or(1.0) + half,
        );
        let (y0, y1) = self.y_range();
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(42)
            .y_label_area_size(56)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(perr)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc("F(s) / kT")
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(perr)?;
        for (i, b) in r.basins.iter().enumerate() {
            let (lo, hi) = (b.lo.max(x0), b.hi.min(x1));
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(lo, y0), (hi, y1)],
                    region_colour(i).mix(0.18).filled(),
                )))
                .map_err(perr)?;
            let label = format!("w = {}", with_err(b.weight, b.weight_err));
            let top = y1 - 0.04 * (y1 - y0);
            chart
                .draw_series(std::iter::once(Text::new(
                    label,
                    (lo + 0.02 * (x1 - x0), top),
                    ("sans-serif", 13).into_font(),
                )))
                .map_err(perr)?;
        }
        let colour = PALETTE[0];
        let banded =
            |i: usize| p.f[i].is_some_and(f64::is_finite) && p.f_err[i].is_some_and(f64::is_finite);
        for run in runs_of(n, banded) {
            let upper = run
                .clone()
                .map(|i| (p.s[i], p.f[i].unwrap() + p.f_err[i].unwrap()));
            let lower = run
                .clone()
                .rev()
                .map(|i| (p.s[i], p.f[i].unwrap() - p.f_err[i].unwrap()));
            chart
                .draw_series(std::iter::once(Polygon::new(
                    upper.chain(lower).collect::<Vec<_>>(),
                    colour.mix(0.3).filled(),
                )))
                .map_err(perr)?;
        }
        let defined = |i: usize| p.f[i].is_some_and(f64::is_finite);
        for run in runs_of(n, defined) {
            let pts: Vec<(f64, f64)> = run.map(|i| (p.s[i], p.f[i].unwrap())).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))
                .map_err(perr)?;
            chart
                .draw_series(pts.into_iter().map(|q| Circle::new(q, 2, colour.filled())))
                .map_err(perr)?;
        }
        if let Some(b) = &r.barrier {
            chart
                .draw_series(DashedLineSeries::new(
                    [(b.top_s, y0), (b.top_s, y1)],
                    6,
                    4,
                    BLACK.mix(0.6).stroke_width(1),
                ))
                .map_err(perr)?
                .label(format!(
                    "barrier {} kT",
                    with_err(b.height.value, b.height.err)
                ))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK));
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .label_font(("sans-serif", 13))
                .draw()
                .map_err(perr)?;
        }
        Ok(())
    }
}

/// Figure size in pixels.
pub const FIGURE_SIZE: (u32, u32) = (720, 480);

/// The window file's name: `window-KKK.json` (three digits, more when needed).
pub fn window_file_name(k: usize) -> String {
    format!("window-{k:03}.json")
}

/// What a window's file holds: the run and the fingerprint of the plan it ran under.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WindowFile {
    /// [`plan_fingerprint`] of the plan.
    pub plan: String,
    /// The experiment and table, for a reader (not compared: JSON numbers may not round-trip
    /// to the last bit, the fingerprint does).
    pub experiment: ExperimentConfig,
    pub free_energy: FreeEnergyConfig,
    /// The run.
    pub run: WindowRun,
}

/// FNV-1a (64 bit) of the plan's experiment and table (and flattening bias, if any) as JSON
/// text: equal for equal plans
/// (serialisation is deterministic), different when any field differs (up to hash
/// collisions, 2⁻⁶⁴ per pair).
pub fn plan_fingerprint(plan: &FreeEnergyPlan) -> Result<String> {
    let encoded = match &plan.umbrella.flattening {
        None => serde_json::to_string(&(&plan.config, &plan.table)),
        Some(b) => serde_json::to_string(&(&plan.config, &plan.table, b)),
    };
    let text = encoded.map_err(|e| Error::runtime(format!("cannot encode the plan: {e}")))?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Ok(format!("{h:016x}"))
}

/// Writes `text` to `path` through a temporary file and a rename.
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| Error::runtime(format!("cannot write {}: {e}", path.display())))
}

/// Writes a finished window of `plan` into `dir` (created if missing) and returns its path.
pub fn write_window(dir: &Path, plan: &FreeEnergyPlan, run: &WindowRun) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::invalid(format!("cannot create directory {}: {e}", dir.display())))?;
    let file = WindowFile {
        plan: plan_fingerprint(plan)?,
        experiment: plan.config.clone(),
        free_energy: plan.table.clone(),
        run: run.clone(),
    };
    let text = serde_json::to_string(&file)
        .map_err(|e| Error::runtime(format!("cannot encode window {}: {e}", run.window)))?;
    let path = dir.join(window_file_name(run.window));
    write_atomic(&path, &(text + "\n"))?;
    Ok(path)
}

/// Window k of `plan` as kept in `dir`: None when its file is missing; an error (exit code 2)
/// when the file is unreadable or comes from another plan.
pub fn read_window(dir: &Path, plan: &FreeEnergyPlan, k: usize) -> Result<Option<WindowRun>> {
    let path = dir.join(window_file_name(k));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::invalid(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    let other_plan = || {
        Error::invalid(format!(
            "{} was written by a different experiment or [free_energy] table; use a new output directory, or delete {} to recompute",
            path.display(),
            dir.display()
        ))
    };
    let file: WindowFile = serde_json::from_str(&text).map_err(|e| {
        Error::invalid(format!(
            "{} is not a window file of flscale free-energy ({e}); delete it to recompute the window",
            path.display()
        ))
    })?;
    if file.plan != plan_fingerprint(plan)? || file.run.window != k {
        return Err(other_plan());
    }
    Ok(Some(file.run))
}

/// Writes `profile.csv`, `free_energy.json` (the [`report_json`] object) and
/// `free_energy.svg` ([`ProfileFigure`]) into `dir`; returns the JSON object.
pub fn write_outputs(
    dir: &Path,
    plan: &FreeEnergyPlan,
    report: &FreeEnergyReport,
) -> Result<serde_json::Value> {
    let json = report_json(report, &OBSERVABLES)?;
    write_atomic(&dir.join("profile.csv"), &profile_csv(report))?;
    let text = serde_json::to_string_pretty(&json)
        .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?;
    write_atomic(&dir.join("free_energy.json"), &(text + "\n"))?;
    let name = plan.table.order_parameter.as_str();
    let x_label = match plan.table.neuron {
        Some(i) => format!("{name} of neuron {i}"),
        None => name.to_string(),
    };
    let fig = ProfileFigure {
        report,
        title: format!("free energy along {x_label}"),
        x_label,
    };
    let svg = dir.join("free_energy.svg");
    let tmp = dir.join("free_energy.tmp.svg");
    write_figure(&tmp, FIGURE_SIZE.0, FIGURE_SIZE.1, &fig)?;
    std::fs::rename(&tmp, &svg)
        .map_err(|e| Error::runtime(format!("cannot write {}: {e}", svg.display())))?;
    Ok(json)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::free_energy::analysis::{analyse, AnalysisOptions, WindowSeries};
    use crate::free_energy::profile::Bins;
    use crate::free_energy::tests::{double_well, rejection_draws};
    use crate::free_energy::Umbrella;

    /// Two Gaussian-like wells (the tilted double well of the exact tests), 9 windows of exact
    /// draws, with s and s² as the observables.
    fn report() -> FreeEnergyReport {
        let umbrella = Umbrella::spread(-1.6, 1.6, 9, 20.0).unwrap();
        let g = double_well(2.0, 0.3);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let windows: Vec<WindowSeries> = umbrella
            .centres
            .iter()
            .map(|&c| {
                let s = rejection_draws(g, c, umbrella.kappa, 400, &mut rng);
                let s2 = s.iter().map(|x| x * x).collect();
                WindowSeries {
                    observables: vec![s.clone(), s2],
                    s,
                }
            })
            .collect();
        let mut opts = AnalysisOptions::new(Bins::new(-1.6, 1.6, 24).unwrap(), 7);
        opts.replicates = 40;
        analyse(&umbrella, &windows, &opts).unwrap()
    }

    #[test]
    fn the_csv_has_one_row_per_bin_and_blank_cells_where_undefined() {
        let mut r = report();
        let csv = profile_csv(&r);
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(rows[0], "s,F,F_err");
        assert_eq!(rows.len(), 1 + 24);
        let cells: Vec<f64> = rows[5].split(',').map(|c| c.parse().unwrap()).collect();
        assert_eq!(cells[0], r.profile.s[4]);
        assert_eq!(cells[1], r.profile.f[4].unwrap());
        assert_eq!(cells[2], r.profile.f_err[4].unwrap());
        r.profile.f[0] = None;
        r.profile.f_err[1] = Some(f64::NAN);
        let csv = profile_csv(&r);
        let rows: Vec<&str> = csv.lines().collect();
        assert!(rows[1].ends_with(",,") || rows[1].split(',').nth(1) == Some(""));
        assert!(rows[2].ends_with(','), "{}", rows[2]);
    }

    #[test]
    fn the_json_has_the_documented_keys_and_values() {
        let r = report();
        assert_eq!(r.basins.len(), 2, "{:?}", r.basins);
        let j = report_json(&r, &["s", "s2"]).unwrap();
        let f = j["profile"]["F"].as_array().unwrap();
        assert_eq!(f.len(), r.profile.s.len());
        assert_eq!(j["profile"]["s"].as_array().unwrap().len(), f.len());
        assert_eq!(j["profile"]["F_err"].as_array().unwrap().len(), f.len());
        let basins = j["basins"].as_array().unwrap();
        assert_eq!(basins.len(), 2);
        let total: f64 = basins.iter().map(|b| b["weight"].as_f64().unwrap()).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert!(basins[0]["lo"].as_f64().unwrap() < basins[1]["lo"].as_f64().unwrap());
        assert_eq!(basins[0]["weight_err"].as_f64(), r.basins[0].weight_err);
        let b = r.barrier.as_ref().unwrap();
        assert_eq!(j["barrier"]["height"].as_f64().unwrap(), b.height.value);
        assert_eq!(j["barrier"]["err"].as_f64(), b.height.err);
        assert_eq!(
            j["observables"]["s2"]["value"].as_f64().unwrap(),
            r.observables[1].value
        );
        assert!(j["observables"]["s"]["err"].as_f64().unwrap() > 0.0);
        assert_eq!(
            j["basins"][1]["observables"]["s"]["value"]
                .as_f64()
                .unwrap(),
            r.basins[1].observables[0].value
        );
        assert!(j["diagnostics"]["overlap"].is_array());
        assert!(j["diagnostics"]["chain_rhat"].is_array() && j["notes"].is_array());
        // Undefined numbers are null, so the object is valid JSON for any reader.
        let mut r2 = r.clone();
        r2.profile.f[0] = None;
        r2.barrier = None;
        let j2 = report_json(&r2, &["s", "s2"]).unwrap();
        assert!(j2["profile"]["F"][0].is_null() && j2["barrier"].is_null());
    }

    #[test]
    fn the_figure_shows_the_profile_band_and_basin_weights() {
        let r = report();
        let dir = tempfile::tempdir().unwrap();
        let fig = ProfileFigure {
            report: &r,
            title: "free energy along s".into(),
            x_label: "s".into(),
        };
        let path = dir.path().join("f.svg");
        write_figure(&path, FIGURE_SIZE.0, FIGURE_SIZE.1, &fig).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        let w0 = format!(
            "w = {}",
            with_err(r.basins[0].weight, r.basins[0].weight_err)
        );
        assert!(svg.contains(&w0), "no basin label {w0}");
        assert!(svg.contains("barrier"));
        assert!(svg.contains("<polygon"), "no error band");
        // A profile with a hole still draws.
        let mut r2 = r.clone();
        r2.profile.f[10] = None;
        let fig = ProfileFigure { report: &r2, ..fig };
        write_figure(&dir.path().join("g.png"), 320, 240, &fig).unwrap();
    }

    #[test]
    fn runs_of_splits_at_missing_bins() {
        let keep = [true, true, false, true, false, false, true];
        assert_eq!(runs_of(7, |i| keep[i]), vec![0..2, 3..4, 6..7]);
        assert!(runs_of(3, |_| false).is_empty());
    }
}
