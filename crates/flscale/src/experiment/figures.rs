//! The figures of a results directory (spec 03 "Analysis", `flscale plot`): each one is
//! written as PNG and SVG, and only when the sweep holds the data it needs.
//!
//! * `observable_vs_x`: the analysis observable (A_f by default) against P, one curve per
//!   group value (d), with the threshold (paper Fig. 2b inset, Fig. 3a).
//! * `pstar_vs_d`: P\* against the group variable in log-log, the least-squares fit and the
//!   scaling engine's slope through the data's centre (Fig. 2b).
//! * `outliers_vs_n`: first-layer outlier count against N_1 in log-log (Fig. 2c).
//! * `overlap_histograms`: −log density of the first-layer overlaps ρ = w·w\* (Figs. 2a, 8).
//! * `test_mse_vs_X`: test MSE against the same x per group, when the observable is A_f
//!   (the right panel of Fig. 3b).
//! * `mse_vs_alignment`: the mean predictor's test MSE divided by each run's ⟨y²⟩ against A_f,
//!   with the bound (1 − A_f)² that every predictor obeys (App. F.2).
//! * `layer2_overlap_histograms_phi`, `layer2_overlap_histograms_he3`: −log density of the
//!   second-layer overlaps with Φ\* and Ĥe3(Φ\*), one curve per run (Fig. 8, second-layer
//!   panels), and `outliers_by_layer_vs_n1`: first-layer outliers and second-layer NNGP
//!   outliers against N_1 (Fig. 3(c)).
//! * `mu_vs_n1`: the μ-specialisation magnitude along w_{∗,1+2} against N_1 in log-log with the
//!   fit and the scaling engine's slope (Fig. 7(b)), and `parity_overlap_histograms`: −log
//!   density of w·(e1 + e2)/√2 per run (Fig. 7(a)).

use std::path::{Path, PathBuf};

use super::analysis::Predicted;
use super::pstar::PstarTable;
use super::stats::{cells, coordinate, Cell, ExponentFit};
use super::store::{RunData, StoreData};
use crate::error::Result;
use crate::plot::{write_figure, LineChart, Mark, Series};

const W: u32 = 800;
const H: u32 = 560;

/// What the figures draw besides the raw data.
#[derive(Debug, Clone, Default)]
pub struct FigureInputs<'a> {
    /// P\* per group.
    pub pstar: Option<&'a PstarTable>,
    /// The fitted P\* exponent.
    pub pstar_fit: Option<&'a ExponentFit>,
    /// The engine's P\* exponent.
    pub pstar_predicted: Option<&'a Predicted>,
    /// The fitted outlier exponent.
    pub outlier_fit: Option<&'a ExponentFit>,
    /// The engine's outlier (M) exponent.
    pub outlier_predicted: Option<&'a Predicted>,
    /// The fitted μ exponent (Fig. 7(b)).
    pub mu_fit: Option<&'a ExponentFit>,
    /// The engine's μ exponent.
    pub mu_predicted: Option<&'a Predicted>,
}

/// A run and one of its histograms, as bins (lo, hi, count).
type RunHistogram<'a> = (&'a RunData, &'a [(f64, f64, u64)]);

/// −log density curves of the histogram `name` of every run that has it (up to six, spread
/// over the grid), labelled by the run's d, p, n1.
fn neg_log_density_series(data: &StoreData, name: &str) -> Vec<Series> {
    let with: Vec<RunHistogram> = data
        .runs
        .iter()
        .filter_map(|r| Some((r, r.probe_histograms.get(name)?.as_slice())))
        .filter(|(_, h)| h.iter().any(|b| b.2 > 0))
        .collect();
    neg_log_density_curves(&with)
}

/// One −log density curve per histogram (bins (lo, hi, count)) for up to six of `runs`,
/// spread over the grid, labelled by the run's d, p, n1.
fn neg_log_density_curves(runs: &[RunHistogram]) -> Vec<Series> {
    let k = runs.len();
    let picks: Vec<usize> = if k <= 6 {
        (0..k).collect()
    } else {
        let mut v: Vec<usize> = (0..6).map(|i| i * (k - 1) / 5).collect();
        v.dedup();
        v
    };
    picks
        .iter()
        .map(|&i| {
            let (r, bins) = runs[i];
            let total: u64 = bins.iter().map(|b| b.2).sum();
            let pts = bins
                .iter()
                .filter(|b| b.2 > 0)
                .map(|&(lo, hi, c)| {
                    let density = c as f64 / (total as f64 * (hi - lo));
                    (0.5 * (lo + hi), -density.ln())
                })
                .collect();
            let label = ["d", "p", "n1"]
                .iter()
                .filter_map(|k| r.coords.get(*k).map(|v| format!("{k}={}", short(*v))))
                .collect::<Vec<_>>()
                .join(" ");
            Series::new(label, pts, Mark::LinePoints)
        })
        .collect()
}

/// The figures of the deeper-layer and parity-direction observables (Figs. 3(c), 7, 8).
fn draw_probe_figures(
    data: &StoreData,
    dir: &Path,
    inputs: &FigureInputs,
    out: &mut Vec<PathBuf>,
) -> Result<()> {
    draw_layer2_overlap_histograms(data, dir, out)?;
    draw_outliers_by_layer_vs_n1(data, dir, out)?;
    draw_parity_overlap_histograms(data, dir, out)?;
    draw_mu_vs_n1(data, dir, inputs, out)
}

/// `layer2_overlap_histograms_phi` and `_he3`: −log density of the second-layer overlaps with
/// Φ\* and Ĥe3(Φ\*), one curve per run (Fig. 8, second-layer panels).
fn draw_layer2_overlap_histograms(
    data: &StoreData,
    dir: &Path,
    out: &mut Vec<PathBuf>,
) -> Result<()> {
    for (feature, what) in [("phi", "Φ*"), ("he3", "Ĥe3(Φ*)")] {
        let series = neg_log_density_series(data, &format!("h2_{feature}"));
        if !series.is_empty() {
            let chart = LineChart {
                title: format!("second-layer overlaps ⟨h², {what}⟩"),
                x_label: format!("⟨h², {what}⟩"),
                y_label: "−log density".into(),
                log_x: false,
                log_y: false,
                series,
                notes: vec!["outliers: beyond 3 NNGP standard deviations".into()],
            };
            save(
                dir,
                &format!("layer2_overlap_histograms_{feature}"),
                &chart,
                out,
            )?;
        }
    }
    Ok(())
}

/// The summary value `key` against N1 as one series: the analysed runs filled, the runs whose
/// starts disagree hollow, off the line.
fn summary_series_by_n1(data: &StoreData, label: &str, key: &str, mark: Mark) -> Series {
    let mut s = Series::new(label, summary_points_by_n1(data, key, true), mark);
    s.hollow = summary_points_by_n1(data, key, false);
    s
}

/// The legend notes of `series`: the hollow-marker note when any series has hollow points.
fn hollow_notes(series: &[Series]) -> Vec<String> {
    if series.iter().any(|s| !s.hollow.is_empty()) {
        vec![HOLLOW_NOTE.to_string()]
    } else {
        Vec::new()
    }
}

/// `outliers_by_layer_vs_n1`: first-layer outliers and second-layer NNGP outliers against N1
/// (Fig. 3(c)), when the data has at least two N1 values.
fn draw_outliers_by_layer_vs_n1(
    data: &StoreData,
    dir: &Path,
    out: &mut Vec<PathBuf>,
) -> Result<()> {
    let layer2 = summary_series_by_n1(
        data,
        "layer 2 along Φ*",
        "outliers_layer2_phi",
        Mark::LinePoints,
    );
    if distinct(layer2.points.iter().chain(&layer2.hollow).map(|p| p.0)).len() < 2 {
        return Ok(());
    }
    let series = vec![
        summary_series_by_n1(
            data,
            "layer 1, |w·w*| > 3σ1/√d",
            "outliers_layer1",
            Mark::LinePoints,
        ),
        layer2,
        summary_series_by_n1(
            data,
            "layer 2 along Ĥe3(Φ*)",
            "outliers_layer2_he3",
            Mark::LinePoints,
        ),
    ];
    let chart = LineChart {
        title: "outliers per network vs N1 (layer 2: beyond 3 NNGP std)".into(),
        x_label: "N1".into(),
        y_label: "outliers per network".into(),
        log_x: true,
        log_y: false,
        notes: hollow_notes(&series),
        series,
    };
    save(dir, "outliers_by_layer_vs_n1", &chart, out)
}

/// `parity_overlap_histograms`: −log density of the first-layer overlaps along the first
/// parity direction the runs record (`rho_…` histograms, Fig. 7(a)).
fn draw_parity_overlap_histograms(
    data: &StoreData,
    dir: &Path,
    out: &mut Vec<PathBuf>,
) -> Result<()> {
    let rho_name = data
        .runs
        .iter()
        .flat_map(|r| r.probe_histograms.keys())
        .find(|k| k.starts_with("rho_"))
        .cloned();
    let Some(name) = rho_name else {
        return Ok(());
    };
    let series = neg_log_density_series(data, &name);
    if series.is_empty() {
        return Ok(());
    }
    let dir_name = &name["rho_".len()..];
    let chart = LineChart {
        title: format!("first-layer overlaps along ({dir_name})/√k"),
        x_label: "w·u".into(),
        y_label: "−log density".into(),
        log_x: false,
        log_y: false,
        series,
        notes: vec!["specialising: the side peak of |w·u| (else |w·u| > 3σ1/√d)".into()],
    };
    save(dir, "parity_overlap_histograms", &chart, out)
}

/// `mu_vs_n1`: the μ-specialisation magnitude against N1 in log-log with the fit and the
/// engine's slope (Fig. 7(b)), when the data has at least two N1 values.
fn draw_mu_vs_n1(
    data: &StoreData,
    dir: &Path,
    inputs: &FigureInputs,
    out: &mut Vec<PathBuf>,
) -> Result<()> {
    let mu = summary_series_by_n1(data, "measured μ", "mu", Mark::Points);
    if distinct(mu.points.iter().chain(&mu.hollow).map(|p| p.0)).len() < 2 {
        return Ok(());
    }
    let mut notes = hollow_notes(std::slice::from_ref(&mu));
    let mut series = vec![mu];
    if let Some(f) = inputs.mu_fit {
        push_fit_lines(f, inputs.mu_predicted, &mut series, &mut notes);
    }
    let chart = LineChart {
        title: "μ-specialisation magnitude along (e1+e2)/√2 vs N1".into(),
        x_label: "N1".into(),
        y_label: "μ (mean |w·u| of specialising neurons)".into(),
        log_x: true,
        log_y: true,
        series,
        notes,
    };
    save(dir, "mu_vs_n1", &chart, out)
}

/// Appends the least-squares line of `f` and, when known, the engine's slope through the same
/// points (log-log) to `series`, with the measured and predicted slopes in `notes`.
fn push_fit_lines(
    f: &ExponentFit,
    predicted: Option<&Predicted>,
    series: &mut Vec<Series>,
    notes: &mut Vec<String>,
) {
    series.push(Series::new(
        format!("fit, slope {:.2}", f.exponent.value),
        slope_line(&f.points, f.fit.slope),
        Mark::Line,
    ));
    notes.push(format!(
        "measured slope {:.3}{}",
        f.exponent.value,
        f.exponent
            .err
            .map(|e| format!(" ± {e:.3}"))
            .unwrap_or_default()
    ));
    if let Some(p) = predicted {
        series.push(Series::new(
            format!("predicted slope {}", p.exact),
            slope_line(&f.points, p.value),
            Mark::Dashed,
        ));
        notes.push(format!("predicted {}", p.exact));
    }
}

fn save(dir: &Path, name: &str, chart: &LineChart, out: &mut Vec<PathBuf>) -> Result<()> {
    for ext in ["png", "svg"] {
        let p = dir.join(format!("{name}.{ext}"));
        write_figure(&p, W, H, chart)?;
        out.push(p);
    }
    Ok(())
}

fn distinct(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

fn short(x: f64) -> String {
    if x == x.round() && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.3}")
    }
}

/// A line through the centre of `points` (log-log) with slope `slope`, over their x range.
fn slope_line(points: &[(f64, f64)], slope: f64) -> Vec<(f64, f64)> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.0 > 0.0 && p.1 > 0.0)
        .map(|p| (p.0.ln(), p.1.ln()))
        .collect();
    if pts.is_empty() {
        return Vec::new();
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    [lo, hi]
        .iter()
        .map(|&x| (x.exp(), (my + slope * (x - mx)).exp()))
        .collect()
}

/// (N1, summary value of `key`) of the runs an analysis of `key` uses (`analysed`) or of the
/// others (runs whose hot and cold starts disagree on it, [`StoreData::analyses`]), by N1.
fn summary_points_by_n1(data: &StoreData, key: &str, analysed: bool) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = data
        .runs
        .iter()
        .filter(|r| analysed == data.analyses(r, key))
        .filter_map(|r| {
            let v = r.summary.get(key).and_then(|v| v.as_f64())?;
            Some((coordinate(r, "n1")?, v))
        })
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// The legend note of figures with hollow markers.
const HOLLOW_NOTE: &str = "open circles: hot and cold starts disagree (not used)";

/// The legend note of figures with error bars.
const ERROR_BAR_NOTE: &str = "bars: ± one standard error over the networks";

/// The cells of the runs whose hot and cold starts disagree (drawn, not used).
fn unequilibrated_cells(
    data: &StoreData,
    group: Option<&str>,
    x: &str,
    obs: &str,
) -> Vec<(f64, Vec<Cell>)> {
    if data.runs.iter().all(|r| data.analyses(r, obs)) {
        return Vec::new();
    }
    let only_bad = StoreData {
        runs: data
            .runs
            .iter()
            .filter(|r| !data.analyses(r, obs))
            .cloned()
            .collect(),
        include_unequilibrated: true,
        ..data.clone()
    };
    cells(&only_bad, group, x, obs).unwrap_or_default()
}

/// Draws every figure the data supports into `dir`; returns the files written.
pub fn draw_all(data: &StoreData, dir: &Path, inputs: &FigureInputs) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    draw_observable_vs_x(data, dir, &mut out)?;
    draw_test_mse_vs_x(data, dir, &mut out)?;
    draw_pstar_vs_group(dir, inputs, &mut out)?;
    draw_outliers_vs_n1(data, dir, inputs, &mut out)?;
    draw_overlap_histograms(data, dir, &mut out)?;
    draw_mse_vs_alignment(data, dir, &mut out)?;
    draw_probe_figures(data, dir, inputs, &mut out)?;
    Ok(out)
}

/// `<observable>_vs_<x>`: the analysis observable against x, one curve per group value, runs
/// whose hot and cold starts disagree drawn hollow, and the threshold for the alignment
/// (paper Fig. 2b inset, Fig. 3a).
fn draw_observable_vs_x(data: &StoreData, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let a = &data.analysis;
    let obs = a.observable.as_str();
    let groups = cells(data, Some(&a.group), &a.x, obs).ok();
    let unequilibrated = unequilibrated_cells(data, Some(&a.group), &a.x, obs);
    let Some(groups) = &groups else {
        return Ok(());
    };
    let xs = distinct(groups.iter().flat_map(|(_, c)| c.iter().map(|c| c.x)));
    if xs.len() < 2 {
        return Ok(());
    }
    let mut series: Vec<Series> = groups
        .iter()
        .map(|(g, cs)| {
            let mut s = Series::new(
                format!("{} = {}", a.group, short(*g)),
                cs.iter().map(|c| (c.x, c.mean())).collect(),
                Mark::LinePoints,
            )
            .with_errors(cs.iter().map(|c| c.sem()).collect());
            s.hollow = unequilibrated
                .iter()
                .filter(|(ug, _)| ug == g)
                .flat_map(|(_, cs)| cs.iter().map(|c| (c.x, c.mean())))
                .collect();
            s
        })
        .collect();
    let mut notes = vec![ERROR_BAR_NOTE.to_string()];
    if !unequilibrated.is_empty() {
        notes.push(HOLLOW_NOTE.to_string());
    }
    if obs == "alignment" {
        series.push(Series::new(
            format!("threshold {}", a.threshold),
            vec![(xs[0], a.threshold), (xs[xs.len() - 1], a.threshold)],
            Mark::Dashed,
        ));
    }
    let chart = LineChart {
        title: format!("{obs} vs {}", a.x),
        x_label: a.x.clone(),
        y_label: obs.to_string(),
        log_x: true,
        log_y: false,
        series,
        notes,
    };
    save(dir, &format!("{obs}_vs_{}", a.x), &chart, out)
}

/// `test_mse_vs_<x>`: test MSE against x per group beside the alignment (the right panel of
/// paper Fig. 3b; App. F.2: strong alignment goes with low test loss).
fn draw_test_mse_vs_x(data: &StoreData, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let a = &data.analysis;
    if a.observable != "alignment" {
        return Ok(());
    }
    let Ok(groups) = cells(data, Some(&a.group), &a.x, "test_mse") else {
        return Ok(());
    };
    let xs = distinct(groups.iter().flat_map(|(_, c)| c.iter().map(|c| c.x)));
    if xs.len() < 2 {
        return Ok(());
    }
    let series = groups
        .iter()
        .map(|(g, cs)| {
            Series::new(
                format!("{} = {}", a.group, short(*g)),
                cs.iter().map(|c| (c.x, c.mean())).collect(),
                Mark::LinePoints,
            )
            .with_errors(cs.iter().map(|c| c.sem()).collect())
        })
        .collect();
    let chart = LineChart {
        title: format!("test MSE vs {}", a.x),
        x_label: a.x.clone(),
        y_label: "test MSE".into(),
        log_x: true,
        log_y: false,
        series,
        notes: vec![ERROR_BAR_NOTE.to_string()],
    };
    save(dir, &format!("test_mse_vs_{}", a.x), &chart, out)
}

/// `pstar_vs_<group>`: P\* against the group variable in log-log with the least-squares fit
/// and the scaling engine's slope (Fig. 2b), when both the table and the fit are given.
fn draw_pstar_vs_group(dir: &Path, inputs: &FigureInputs, out: &mut Vec<PathBuf>) -> Result<()> {
    let (Some(t), Some(f)) = (inputs.pstar, inputs.pstar_fit) else {
        return Ok(());
    };
    let mut series = vec![Series::new("measured P*", f.points.clone(), Mark::Points)];
    let mut notes = Vec::new();
    push_fit_lines(f, inputs.pstar_predicted, &mut series, &mut notes);
    let chart = LineChart {
        title: format!("P* ({} = {}) vs {}", t.observable, t.threshold, t.group),
        x_label: t.group.clone(),
        y_label: format!("P* ({})", t.x),
        log_x: true,
        log_y: true,
        series,
        notes,
    };
    save(dir, &format!("pstar_vs_{}", t.group), &chart, out)
}

/// Which P the points of `outliers_vs_n1` are at: `(None, "P = 1600")` when every run has
/// the same P (and d), else the coordinate to draw one curve per value of (`p_over_d` when
/// it takes fewer values than `p`, as in a sweep over d at fixed P/d) and its words.
fn outlier_p_grouping(data: &StoreData) -> (Option<&'static str>, String) {
    let values = |k: &str| distinct(data.runs.iter().filter_map(|r| coordinate(r, k)));
    let (ps, ds, ratios) = (values("p"), values("d"), values("p_over_d"));
    match (ps.as_slice(), ds.as_slice()) {
        ([p], [d]) => (None, format!("d = {}, P = {}", short(*d), short(*p))),
        ([p], _) => (None, format!("P = {}", short(*p))),
        _ if !ratios.is_empty() && ratios.len() < ps.len() => {
            (Some("p_over_d"), "one curve per P/d".to_string())
        }
        _ => (Some("p"), "one curve per P".to_string()),
    }
}

/// `outliers_vs_n1`: the mean first-layer outlier count against N1 in log-log with error bars,
/// the fit and the engine's slope (Fig. 2c), when the data has at least two N1 values. The
/// title says which P the points are at; runs at several P are drawn one curve per P/d (or P).
fn draw_outliers_vs_n1(
    data: &StoreData,
    dir: &Path,
    inputs: &FigureInputs,
    out: &mut Vec<PathBuf>,
) -> Result<()> {
    let ns = distinct(data.runs.iter().filter_map(|r| coordinate(r, "n1")));
    if ns.len() < 2 {
        return Ok(());
    }
    let (group, at) = outlier_p_grouping(data);
    let Ok(groups) = cells(data, group, "n1", "outliers") else {
        return Ok(());
    };
    let unequilibrated = unequilibrated_cells(data, group, "n1", "outliers");
    let mut notes = vec![ERROR_BAR_NOTE.to_string()];
    let mut series: Vec<Series> = groups
        .iter()
        .map(|(g, cs)| {
            let label = match group {
                None => "mean outliers".to_string(),
                Some("p_over_d") => format!("P/d = {}", short(*g)),
                Some(k) => format!("{} = {}", k.to_uppercase(), short(*g)),
            };
            let mark = if group.is_some() {
                Mark::LinePoints
            } else {
                Mark::Points
            };
            let mut s = Series::new(label, cs.iter().map(|c| (c.x, c.mean())).collect(), mark)
                .with_errors(cs.iter().map(|c| c.sem()).collect());
            s.hollow = unequilibrated
                .iter()
                .filter(|(ug, _)| ug == g)
                .flat_map(|(_, cs)| cs.iter().map(|c| (c.x, c.mean())))
                .collect();
            s
        })
        .collect();
    if series.iter().any(|s| !s.hollow.is_empty()) {
        notes.push(HOLLOW_NOTE.to_string());
    }
    if let (Some(f), None) = (inputs.outlier_fit, group) {
        push_fit_lines(f, inputs.outlier_predicted, &mut series, &mut notes);
    }
    let chart = LineChart {
        title: format!("first-layer outliers (|ρ| > 3σ1/√d) vs N1, {at}"),
        x_label: "N1".into(),
        y_label: "outliers per network".into(),
        log_x: true,
        log_y: true,
        series,
        notes,
    };
    save(dir, "outliers_vs_n1", &chart, out)
}

/// `overlap_histograms`: −log density of the first-layer overlaps ρ = w·w\* for up to six runs
/// spread over the grid (Figs. 2a, 8).
fn draw_overlap_histograms(data: &StoreData, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let with_hist: Vec<RunHistogram> = data
        .runs
        .iter()
        .filter(|r| r.histogram.iter().any(|b| b.2 > 0))
        .map(|r| (r, r.histogram.as_slice()))
        .collect();
    if with_hist.is_empty() {
        return Ok(());
    }
    let series = neg_log_density_curves(&with_hist);
    let chart = LineChart {
        title: "first-layer overlaps ρ = w·w*".into(),
        x_label: "ρ".into(),
        y_label: "−log density".into(),
        log_x: false,
        log_y: false,
        series,
        notes: Vec::new(),
    };
    save(dir, "overlap_histograms", &chart, out)
}

/// `mse_vs_alignment`: each run's test MSE over its ⟨y²⟩ against A_f, with the bound
/// (1 − A_f)² (App. F.2), when at least two runs have both.
fn draw_mse_vs_alignment(data: &StoreData, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    // Test MSE vs alignment with the Cauchy–Schwarz bound MSE ≥ (1 − A_f)²·⟨y²⟩ of the
    // ensemble-mean predictor (spec 02, "Observables"). Every run has its own test set and so
    // its own ⟨y²⟩ (He3 targets scatter it widely at small n_test); dividing each run's MSE by
    // its ⟨y²⟩ turns the bound into the one curve (1 − A_f)² that holds for every run.
    let mut pts = Vec::new();
    for r in &data.runs {
        let get = |k: &str| r.summary.get(k).and_then(|v| v.as_f64());
        let mse = get("test_mse_mean_predictor").or_else(|| get("test_mse"));
        if let (Some(a), Some(m), Some(b)) = (get("alignment"), mse, get("mse_lower_bound")) {
            if let Some(y_msq) = target_mean_square(a, b) {
                pts.push((a, m / y_msq));
            }
        }
    }
    if pts.len() < 2 {
        return Ok(());
    }
    let bound = mse_bound_curve(&pts);
    let chart = LineChart {
        title: "test MSE vs alignment".into(),
        x_label: "alignment A_f".into(),
        y_label: "test MSE / ⟨y²⟩ (mean predictor)".into(),
        log_x: false,
        log_y: false,
        series: vec![
            Series::new("runs", pts, Mark::Points),
            Series::new("bound (1 − A_f)²", bound, Mark::Dashed),
        ],
        notes: Vec::new(),
    };
    save(dir, "mse_vs_alignment", &chart, out)
}

/// A run's test-set ⟨y²⟩ from its stored bound (1 − A_f)²·⟨y²⟩; `None` where A_f is too close
/// to 1 for the division to be meaningful.
fn target_mean_square(alignment: f64, bound: f64) -> Option<f64> {
    let gap = (1.0 - alignment).powi(2);
    let y_msq = bound / gap;
    (gap > 1e-6 && y_msq.is_finite() && y_msq > 0.0).then_some(y_msq)
}

/// The normalised bound MSE/⟨y²⟩ ≥ (1 − A_f)² (Cauchy–Schwarz on the test set, spec 02
/// "Observables") as a smooth curve over the alignment range of the runs.
fn mse_bound_curve(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let lo = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    const SAMPLES: usize = 64;
    (0..SAMPLES)
        .map(|k| {
            let a = lo + (hi - lo) * k as f64 / (SAMPLES - 1) as f64;
            (a, (1.0 - a).powi(2))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{mse_bound_curve, summary_points_by_n1, target_mean_square};
    use crate::experiment::store::{RunData, StoreData};
    use std::collections::BTreeMap;

    /// fig7's μ against N1: a run whose starts disagree is kept off the analysed points and
    /// returned among the hollow ones, unless the store includes unequilibrated runs.
    #[test]
    fn unequilibrated_runs_are_drawn_apart_in_the_probe_figures() {
        let runs: Vec<RunData> = [
            (20.0, 2.4, Some(true)),
            (40.0, 2.5, None),
            (320.0, 1.5, Some(false)),
        ]
        .iter()
        .enumerate()
        .map(|(i, &(n1, mu, eq))| {
            let mut r = RunData::synthetic(i, BTreeMap::from([("n1".to_string(), n1)]), Vec::new());
            r.summary = serde_json::json!({ "mu": mu });
            r.equilibrated = eq;
            r
        })
        .collect();
        let mut data = StoreData::of_runs(runs);
        assert_eq!(
            summary_points_by_n1(&data, "mu", true),
            vec![(20.0, 2.4), (40.0, 2.5)]
        );
        assert_eq!(summary_points_by_n1(&data, "mu", false), vec![(320.0, 1.5)]);
        data.include_unequilibrated = true;
        assert_eq!(summary_points_by_n1(&data, "mu", true).len(), 3);
        assert!(summary_points_by_n1(&data, "mu", false).is_empty());
    }

    #[test]
    fn mse_bound_is_one_smooth_decreasing_curve_over_the_runs_alignment_range() {
        let points = [(0.2, 0.7), (0.5, 0.3), (0.35, 0.5)];
        let curve = mse_bound_curve(&points);
        assert_eq!(curve.first().unwrap().0, 0.2);
        assert!((curve.last().unwrap().0 - 0.5).abs() < 1e-12);
        for &(a, b) in &curve {
            assert!((b - (1.0 - a).powi(2)).abs() < 1e-12);
        }
        assert!(curve.windows(2).all(|w| w[1].1 < w[0].1));
    }

    #[test]
    fn target_mean_square_inverts_the_stored_bound() {
        let y_msq = 0.83;
        let a = 0.3;
        let got = target_mean_square(a, (1.0 - a) * (1.0 - a) * y_msq).unwrap();
        assert!((got - y_msq).abs() < 1e-12);
        assert_eq!(target_mean_square(1.0, 0.0), None);
        assert_eq!(target_mean_square(0.2, f64::NAN), None);
    }
}
