//! Figures as SVG or PNG (chosen by the file extension), drawn with `plotters` and a font the
//! crate carries (DejaVu Sans, `assets/fonts/`), so that a fresh machine without system fonts
//! renders text.
//!
//! Every figure implements [`Figure`]; [`write_figure`] picks the backend. [`LineChart`] covers
//! the common case (curves and points, optional log axes).

use std::path::Path;
use std::sync::Once;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};

mod palette;
pub use palette::{region_colour, PALETTE, REGION_PALETTE};

static FONT: Once = Once::new();
static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Registers the carried font under the family name "sans-serif" (idempotent).
pub fn ensure_font() {
    FONT.call_once(|| {
        // The bytes are a valid TTF shipped with the crate; a failure here is a packaging bug,
        // and text would merely be missing, so it is not turned into a user error.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT_BYTES);
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, FONT_BYTES);
    });
}

/// Something that can draw itself on any plotters backend.
pub trait Figure {
    /// Draws the figure on `root`.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>;
}

/// Writes `fig` to `path` as SVG (`.svg`) or PNG (`.png`), `width`×`height` pixels.
pub fn write_figure(path: &Path, width: u32, height: u32, fig: &impl Figure) -> Result<()> {
    ensure_font();
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() && !parent.exists() {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::runtime(format!("cannot create directory {}: {e}", parent.display()))
            })?;
        }
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("svg") => {
            let root = SVGBackend::new(path, (width, height)).into_drawing_area();
            fig.draw(&root)?;
            root.present().map_err(|e| draw_err(path, e))
        }
        Some("png") => {
            let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
            fig.draw(&root)?;
            root.present().map_err(|e| draw_err(path, e))
        }
        _ => Err(Error::invalid(format!(
            "figure path {} has no .svg or .png extension; use one of those",
            path.display()
        ))),
    }
}

/// Converts a plotters error into a runtime error naming the file.
pub fn draw_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("drawing {} failed: {e}", path.display()))
}

/// Converts any plotters drawing error into a runtime error.
pub fn perr<E: std::fmt::Display>(e: E) -> Error {
    Error::runtime(format!("drawing failed: {e}"))
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A polyline through the points.
    Line,
    /// Filled circles.
    Points,
    /// Both.
    LinePoints,
    /// A dashed polyline (e.g. a prediction or a bound).
    Dashed,
}

/// One named series of (x, y) points.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// The points; non-finite points (and non-positive ones on a log axis) are skipped.
    pub points: Vec<(f64, f64)>,
    /// How to draw it.
    pub mark: Mark,
    /// Points drawn as open circles in the series' colour, off its line: measurements that are
    /// shown but not used (runs whose hot and cold starts disagree).
    pub hollow: Vec<(f64, f64)>,
    /// Error bars: the half-width of each point's bar (y ± err), parallel to `points`; empty
    /// for none. Non-finite or non-positive half-widths draw no bar.
    pub errors: Vec<f64>,
}

impl Series {
    /// A series drawn with `mark`.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>, mark: Mark) -> Self {
        Series {
            label: label.into(),
            points,
            mark,
            hollow: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// The same series with error bars of half-width `errors` (one per point).
    pub fn with_errors(mut self, errors: Vec<f64>) -> Self {
        self.errors = errors;
        self
    }

    /// The ends (x, y − err) and (x, y + err) of the error bars that are drawn.
    fn bar_ends(&self) -> impl Iterator<Item = ((f64, f64), (f64, f64))> + '_ {
        self.points
            .iter()
            .zip(&self.errors)
            .filter(|(p, e)| p.0.is_finite() && p.1.is_finite() && e.is_finite() && **e > 0.0)
            .map(|(&(x, y), &e)| ((x, y - e), (x, y + e)))
    }
}

/// An x–y chart with optional log axes.
#[derive(Debug, Clone, Default)]
pub struct LineChart {
    /// Title at the top.
    pub title: String,
    /// x-axis label.
    pub x_label: String,
    /// y-axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The series, drawn in order with a fixed palette.
    pub series: Vec<Series>,
    /// Free text lines (fitted slopes, parameters), drawn in an empty corner like the legend.
    pub notes: Vec<String>,
}

impl LineChart {
    fn usable(&self, (x, y): (f64, f64)) -> bool {
        x.is_finite() && y.is_finite() && (!self.log_x || x > 0.0) && (!self.log_y || y > 0.0)
    }

    fn range(&self, pick: impl Fn(&(f64, f64)) -> f64, log: bool) -> (f64, f64) {
        let vals: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| {
                let bars: Vec<(f64, f64)> = s.bar_ends().flat_map(|(a, b)| [a, b]).collect();
                s.points
                    .iter()
                    .chain(&s.hollow)
                    .copied()
                    .chain(bars)
                    .filter(|p| self.usable(*p))
                    .map(|p| pick(&p))
                    .collect::<Vec<_>>()
            })
            .collect();
        let (mut lo, mut hi) = vals
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        if !lo.is_finite() {
            return if log { (0.1, 10.0) } else { (0.0, 1.0) };
        }
        if log {
            if hi / lo < 1.0 + 1e-9 {
                lo /= 2.0;
                hi *= 2.0;
            }
            (lo / 1.15, hi * 1.15)
        } else {
            let pad = if hi > lo {
                0.05 * (hi - lo)
            } else {
                lo.abs().max(1.0) * 0.1
            };
            (lo - pad, hi + pad)
        }
    }
}

/// Where the legend and the notes go: a corner inside the plotting area that no data point or
/// line passes through, else a strip to the right of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Inside, upper right.
    UpperRight,
    /// Inside, upper left.
    UpperLeft,
    /// Inside, lower right.
    LowerRight,
    /// Inside, lower left.
    LowerLeft,
    /// In a strip right of the plotting area.
    Outside,
}

const CORNERS: [Placement; 4] = [
    Placement::UpperRight,
    Placement::UpperLeft,
    Placement::LowerRight,
    Placement::LowerLeft,
];

/// Gap between a box and the plotting area's edge, and around the data, in pixels.
const INSET: f64 = 10.0;
const LEGEND_ROW: u32 = 20;
const NOTE_ROW: u32 = 18;
const FONT_SIZE: u32 = 14;

/// Value of a point along an axis as a fraction of the axis (0 = low end), linear or log.
fn frac(v: f64, (lo, hi): (f64, f64), log: bool) -> f64 {
    if log {
        (v.ln() - lo.ln()) / (hi.ln() - lo.ln())
    } else {
        (v - lo) / (hi - lo)
    }
}

/// The box (left, top, right, bottom) in pixels of a `w`×`h` block in corner `at` of the area
/// `area` = (left, top, right, bottom).
fn corner_box(at: Placement, area: (f64, f64, f64, f64), w: f64, h: f64) -> (f64, f64, f64, f64) {
    let (l, t, r, b) = area;
    let x = match at {
        Placement::UpperLeft | Placement::LowerLeft => l + INSET,
        _ => r - INSET - w,
    };
    let y = match at {
        Placement::LowerRight | Placement::LowerLeft => b - INSET - h,
        _ => t + INSET,
    };
    (x, y, x + w, y + h)
}

/// Picks corners for blocks of the given pixel sizes (legend first, then notes) inside the
/// plotting area `area` so that none covers a drawn pixel of `ink` (data points and points
/// sampled along lines, in pixels) or another block; a block that fits nowhere goes
/// [`Placement::Outside`]. Corners are tried in the order upper right, upper left, lower
/// right, lower left.
pub fn place_blocks(
    area: (f64, f64, f64, f64),
    ink: &[(f64, f64)],
    blocks: &[(f64, f64)],
) -> Vec<Placement> {
    let mut taken: Vec<(f64, f64, f64, f64)> = Vec::new();
    let mut out = Vec::new();
    for &(w, h) in blocks {
        let free = CORNERS.iter().copied().find(|&c| {
            let (l, t, r, b) = corner_box(c, area, w, h);
            // Data closer than INSET/2 to the box counts as covered (markers have a radius).
            let pad = INSET / 2.0;
            let clear = !ink
                .iter()
                .any(|&(x, y)| x >= l - pad && x <= r + pad && y >= t - pad && y <= b + pad);
            let apart = taken
                .iter()
                .all(|&(l2, t2, r2, b2)| r < l2 || r2 < l || b < t2 || b2 < t);
            clear && apart && l >= area.0 && t >= area.1
        });
        match free {
            Some(c) => {
                taken.push(corner_box(c, area, w, h));
                out.push(c);
            }
            None => out.push(Placement::Outside),
        }
    }
    out
}

/// Tick positions of a log axis over [lo, hi]: powers of ten when the axis spans several
/// decades, mantissas 1-2-5 (or denser) when it spans about one, and evenly spaced round
/// numbers when it spans less than that, so that every axis carries at least three labels
/// and no stretch of more than 30 % of it is left without one. Returns (labelled ticks,
/// unlabelled grid ticks).
pub fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let in_range = |v: f64| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9);
    let k0 = lo.log10().floor() as i32;
    let k1 = hi.log10().ceil() as i32;
    let with = |mantissas: &[f64], every: i32| -> Vec<f64> {
        let mut v = Vec::new();
        for k in k0..=k1 {
            if (k - k0) % every != 0 {
                continue;
            }
            for m in mantissas {
                let x = round_sig(m * 10f64.powi(k));
                if in_range(x) {
                    v.push(x);
                }
            }
        }
        v
    };
    let decades = (k1 - k0).max(1);
    // Grid lines at 1…9 × 10^k, or only at the powers of ten when they would crowd.
    let minor = if decades > 6 {
        with(&[1.0], 1)
    } else {
        with(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], 1)
    };
    let sets: [&[f64]; 5] = [
        &[1.0],
        &[1.0, 3.0],
        &[1.0, 2.0, 5.0],
        &[1.0, 2.0, 3.0, 5.0, 7.0],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    ];
    let every = (decades + 7) / 8;
    // Labels must cover the axis: no stretch without a label longer than 30 % of it.
    let span = (hi / lo).ln();
    let covers = |t: &[f64]| {
        let mut edges = vec![lo];
        edges.extend(t);
        edges.push(hi);
        edges.windows(2).all(|w| (w[1] / w[0]).ln() <= 0.3 * span)
    };
    for set in sets {
        let t = with(set, if set.len() == 1 { every } else { 1 });
        if t.len() >= 3 && covers(&t) {
            return (t, minor);
        }
    }
    // Less than a decade with fewer than three 1…9 × 10^k inside: round linear steps.
    let raw = (hi - lo) / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| (hi - lo) / s <= 6.0)
        .unwrap_or(10.0 * mag);
    let mut t = Vec::new();
    let mut x = (lo / step).ceil() * step;
    while x <= hi * (1.0 + 1e-12) {
        t.push(round_sig(x));
        x += step;
    }
    (t, minor)
}

/// `x` rounded to 12 significant digits (tick arithmetic leaves 0.30000000000000004).
fn round_sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let p = 11 - x.abs().log10().floor() as i32;
    let f = 10f64.powi(p);
    (x * f).round() / f
}

/// A tick label: plain digits between 10⁻³ and 10⁵ (`0.05`, `250`, `20000`), else `2e6`.
pub fn tick_label(x: f64) -> String {
    let x = round_sig(x);
    if x == 0.0 {
        return "0".into();
    }
    let a = x.abs();
    if (1e-3..1e5).contains(&a) {
        let s = format!("{x:.6}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_string()
    } else {
        let e = a.log10().floor() as i32;
        let m = round_sig(x / 10f64.powi(e));
        format!("{}e{e}", tick_label(m))
    }
}

impl LineChart {
    /// The labelled series, in legend order.
    fn labelled(&self) -> impl Iterator<Item = (usize, &Series)> {
        self.series
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.label.is_empty())
    }

    /// Pixel sizes of the legend box and the notes box (zero when empty).
    fn block_sizes<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> [(f64, f64); 2] {
        let style: TextStyle = ("sans-serif", FONT_SIZE).into_font().into();
        let width = |t: &str| {
            root.estimate_text_size(t, &style)
                .map(|(w, _)| w)
                .unwrap_or(8 * t.chars().count() as u32)
        };
        let legend_rows = self.labelled().count() as u32;
        let legend = if legend_rows == 0 {
            (0.0, 0.0)
        } else {
            let w = self
                .labelled()
                .map(|(_, s)| width(&s.label))
                .max()
                .unwrap_or(0);
            ((w + 44) as f64, (legend_rows * LEGEND_ROW + 8) as f64)
        };
        let notes = if self.notes.is_empty() {
            (0.0, 0.0)
        } else {
            let w = self.notes.iter().map(|n| width(n)).max().unwrap_or(0);
            (
                (w + 14) as f64,
                (self.notes.len() as u32 * NOTE_ROW + 8) as f64,
            )
        };
        [legend, notes]
    }

    /// Data pixels (points, hollow points, and samples along lines every 3 px) for a plotting
    /// area (left, top, right, bottom) and the axis ranges.
    fn ink(&self, area: (f64, f64, f64, f64), xr: (f64, f64), yr: (f64, f64)) -> Vec<(f64, f64)> {
        let (l, t, r, b) = area;
        let px = |p: (f64, f64)| {
            (
                l + (r - l) * frac(p.0, xr, self.log_x),
                b - (b - t) * frac(p.1, yr, self.log_y),
            )
        };
        let mut ink = Vec::new();
        for s in &self.series {
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|p| self.usable(*p))
                .map(px)
                .collect();
            ink.extend(&pts);
            if s.mark != Mark::Points {
                for w in pts.windows(2) {
                    let (a, c) = (w[0], w[1]);
                    let n = ((c.0 - a.0).hypot(c.1 - a.1) / 3.0).ceil().max(1.0) as usize;
                    for i in 1..n {
                        let f = i as f64 / n as f64;
                        ink.push((a.0 + f * (c.0 - a.0), a.1 + f * (c.1 - a.1)));
                    }
                }
            }
            // The open circles of unused runs are data too: no block may cover them.
            ink.extend(s.hollow.iter().copied().filter(|p| self.usable(*p)).map(px));
            for (lo, hi) in s.bar_ends() {
                for f in [0.0, 0.25, 0.5, 0.75, 1.0] {
                    let p = (lo.0, lo.1 + f * (hi.1 - lo.1));
                    if self.usable(p) {
                        ink.push(px(p));
                    }
                }
            }
        }
        ink
    }

    fn draw_legend<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        (x, y): (i32, i32),
        (w, h): (f64, f64),
    ) -> Result<()> {
        root.draw(&Rectangle::new(
            [(x, y), (x + w as i32, y + h as i32)],
            WHITE.mix(0.9).filled(),
        ))
        .map_err(perr)?;
        root.draw(&Rectangle::new(
            [(x, y), (x + w as i32, y + h as i32)],
            BLACK.stroke_width(1),
        ))
        .map_err(perr)?;
        for (row, (k, s)) in self.labelled().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let cy = y + 4 + (row as i32) * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
            let (x0, x1) = (x + 8, x + 32);
            match s.mark {
                Mark::Line | Mark::LinePoints => root
                    .draw(&PathElement::new(
                        vec![(x0, cy), (x1, cy)],
                        color.stroke_width(2),
                    ))
                    .map_err(perr)?,
                Mark::Dashed => {
                    for seg in 0..3 {
                        let a = x0 + seg * 9;
                        root.draw(&PathElement::new(
                            vec![(a, cy), (a + 5, cy)],
                            color.stroke_width(2),
                        ))
                        .map_err(perr)?;
                    }
                }
                Mark::Points => {}
            }
            if matches!(s.mark, Mark::Points | Mark::LinePoints) {
                root.draw(&Circle::new((x0 + 12, cy), 4, color.filled()))
                    .map_err(perr)?;
            }
            root.draw(&Text::new(
                s.label.as_str(),
                (x1 + 6, cy - FONT_SIZE as i32 / 2 - 1),
                ("sans-serif", FONT_SIZE).into_font().color(&BLACK),
            ))
            .map_err(perr)?;
        }
        Ok(())
    }

    fn draw_notes<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        (x, y): (i32, i32),
        (w, h): (f64, f64),
    ) -> Result<()> {
        root.draw(&Rectangle::new(
            [(x, y), (x + w as i32, y + h as i32)],
            WHITE.mix(0.9).filled(),
        ))
        .map_err(perr)?;
        for (i, line) in self.notes.iter().enumerate() {
            root.draw(&Text::new(
                line.as_str(),
                (x + 7, y + 4 + NOTE_ROW as i32 * i as i32),
                ("sans-serif", FONT_SIZE).into_font().color(&BLACK),
            ))
            .map_err(perr)?;
        }
        Ok(())
    }

    /// Where the legend and the notes go on a `width`×`height` root: the empty corners of the
    /// plotting area the chart builder will lay out, else a strip to its right. Returns one
    /// placement per block and the strip's width (0 without a strip).
    fn place_legend_and_notes(
        &self,
        (width, height): (u32, u32),
        blocks: &[(f64, f64); 2],
        xr: (f64, f64),
        yr: (f64, f64),
    ) -> (Vec<Placement>, f64) {
        // Where the plotting area will be (the builder's margins, label areas and caption),
        // to find the empty corners before anything is drawn.
        let margin = 14.0;
        let top = margin
            + if self.title.is_empty() {
                0.0
            } else {
                22.0 + 8.0
            };
        let full = (
            margin + 64.0,
            top,
            width as f64 - margin,
            height as f64 - margin - 44.0,
        );
        let decide = |area: (f64, f64, f64, f64)| -> Vec<Placement> {
            let ink = self.ink(area, xr, yr);
            let drawn: Vec<(f64, f64)> = blocks.iter().copied().filter(|b| b.0 > 0.0).collect();
            let mut placed = place_blocks(area, &ink, &drawn).into_iter();
            blocks
                .iter()
                .map(|b| {
                    if b.0 > 0.0 {
                        placed.next().unwrap_or(Placement::Outside)
                    } else {
                        Placement::UpperRight
                    }
                })
                .collect()
        };
        let strip_of = |places: &[Placement]| {
            blocks
                .iter()
                .zip(places)
                .filter(|(b, p)| **p == Placement::Outside && b.0 > 0.0)
                .map(|(b, _)| b.0)
                .fold(0.0, f64::max)
        };
        let mut places = decide(full);
        let mut strip = strip_of(&places);
        if strip > 0.0 {
            // The strip narrows the plotting area: place the blocks that stayed inside again.
            let narrowed = (full.0, full.1, full.2 - strip - 10.0, full.3);
            for (p, q) in places.iter_mut().zip(decide(narrowed)) {
                if *p != Placement::Outside {
                    *p = q;
                }
            }
            strip = strip_of(&places);
        }
        (places, strip)
    }

    /// Builds the axes on `chart_root` (log or linear per axis), draws the mesh and every
    /// series; returns the plotting area in pixels (left, top, right, bottom).
    fn draw_axes_and_series<DB: DrawingBackend>(
        &self,
        chart_root: &DrawingArea<DB, Shift>,
        (x0, x1): (f64, f64),
        (y0, y1): (f64, f64),
    ) -> Result<(i32, i32, i32, i32)> {
        let mut builder = ChartBuilder::on(chart_root);
        builder
            .caption(&self.title, ("sans-serif", 22))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(64);
        // plotters types differ for log and linear axes, so each combination is built apart.
        macro_rules! draw_with {
            ($xr:expr, $yr:expr) => {{
                let mut chart = builder.build_cartesian_2d($xr, $yr).map_err(perr)?;
                self.draw_mesh_and_series(&mut chart)?
            }};
        }
        let ticks = |log: bool, lo: f64, hi: f64| {
            if log {
                log_ticks(lo, hi)
            } else {
                (Vec::new(), Vec::new())
            }
        };
        let (xt, xm) = ticks(self.log_x, x0, x1);
        let (yt, ym) = ticks(self.log_y, y0, y1);
        let area = match (self.log_x, self.log_y) {
            (false, false) => draw_with!(x0..x1, y0..y1),
            (true, false) => draw_with!(
                (x0..x1)
                    .log_scale()
                    .with_key_points(xt)
                    .with_light_points(xm),
                y0..y1
            ),
            (false, true) => draw_with!(
                x0..x1,
                (y0..y1)
                    .log_scale()
                    .with_key_points(yt)
                    .with_light_points(ym)
            ),
            (true, true) => draw_with!(
                (x0..x1)
                    .log_scale()
                    .with_key_points(xt)
                    .with_light_points(xm),
                (y0..y1)
                    .log_scale()
                    .with_key_points(yt)
                    .with_light_points(ym)
            ),
        };
        Ok(area)
    }

    /// Draws the mesh with the axis labels and every series (lines, filled and hollow points)
    /// on a built chart, whatever its axis types; returns its plotting area in pixels.
    fn draw_mesh_and_series<DB, X, Y>(
        &self,
        chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    ) -> Result<(i32, i32, i32, i32)>
    where
        DB: DrawingBackend,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let fmt = |v: &f64| tick_label(*v);
        chart
            .configure_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .x_label_formatter(&fmt)
            .y_label_formatter(&fmt)
            .label_style(("sans-serif", FONT_SIZE))
            .axis_desc_style(("sans-serif", 16))
            .draw()
            .map_err(perr)?;
        let (xs, ys) = chart.plotting_area().get_pixel_range();
        let area = (xs.start, ys.start, xs.end, ys.end);
        for (k, s) in self.series.iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|p| self.usable(*p))
                .collect();
            match s.mark {
                Mark::Line | Mark::LinePoints => {
                    chart
                        .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                        .map_err(perr)?;
                }
                Mark::Dashed => {
                    chart
                        .draw_series(DashedLineSeries::new(
                            pts.clone(),
                            6,
                            4,
                            color.stroke_width(2),
                        ))
                        .map_err(perr)?;
                }
                Mark::Points => {}
            }
            if matches!(s.mark, Mark::Points | Mark::LinePoints) {
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
                    .map_err(perr)?;
            }
            let open = s.hollow.iter().copied().filter(|p| self.usable(*p));
            chart
                .draw_series(open.map(|p| Circle::new(p, 5, color.stroke_width(2))))
                .map_err(perr)?;
            // Error bars, clipped to the axis (a log axis cannot show y − err ≤ 0).
            let (y_lo, y_hi) = (chart.y_range().start, chart.y_range().end);
            let bars: Vec<PathElement<(f64, f64)>> = s
                .bar_ends()
                .filter(|(lo, _)| self.usable((lo.0, 1.0)))
                .map(|(lo, hi)| {
                    let a = if self.log_y && lo.1 <= 0.0 {
                        y_lo
                    } else {
                        lo.1.max(y_lo)
                    };
                    PathElement::new(
                        vec![(lo.0, a), (hi.0, hi.1.min(y_hi))],
                        color.stroke_width(1),
                    )
                })
                .collect();
            chart.draw_series(bars).map_err(perr)?;
        }
        Ok(area)
    }

    /// Draws the legend (block 0) and the notes (block 1) where `places` puts them: in a corner
    /// of the plotting area `plot`, or stacked down the strip to its right.
    fn draw_blocks<DB: DrawingBackend>(
        &self,
        (places, blocks): (&[Placement], &[(f64, f64); 2]),
        plot: (f64, f64, f64, f64),
        chart_root: &DrawingArea<DB, Shift>,
        strip_root: Option<&DrawingArea<DB, Shift>>,
    ) -> Result<()> {
        let mut strip_y = plot.1 as i32;
        for (i, (&place, &size)) in places.iter().zip(blocks).enumerate() {
            if size.0 == 0.0 {
                continue;
            }
            let (target, at) = match (place, strip_root) {
                (Placement::Outside, Some(s)) => {
                    let at = (4, strip_y);
                    strip_y += size.1 as i32 + 8;
                    (s, at)
                }
                _ => {
                    let b = corner_box(place, plot, size.0, size.1);
                    (chart_root, (b.0 as i32, b.1 as i32))
                }
            };
            if i == 0 {
                self.draw_legend(target, at, size)?;
            } else {
                self.draw_notes(target, at, size)?;
            }
        }
        Ok(())
    }
}

impl Figure for LineChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(perr)?;
        let (x0, x1) = self.range(|p| p.0, self.log_x);
        let (y0, y1) = self.range(|p| p.1, self.log_y);
        let (width, height) = root.dim_in_pixel();
        let blocks = self.block_sizes(root);
        let (places, strip) =
            self.place_legend_and_notes((width, height), &blocks, (x0, x1), (y0, y1));
        let (chart_root, strip_root) = if strip > 0.0 {
            let split = (width as i32 - strip as i32 - 10).max(width as i32 / 2);
            let (a, b) = root.split_horizontally(split);
            (a, Some(b))
        } else {
            (root.clone(), None)
        };
        let area = self.draw_axes_and_series(&chart_root, (x0, x1), (y0, y1))?;
        let plot = (area.0 as f64, area.1 as f64, area.2 as f64, area.3 as f64);
        self.draw_blocks((&places, &blocks), plot, &chart_root, strip_root.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_valid_svg_and_png() {
        let dir = tempfile::tempdir().unwrap();
        let chart = LineChart {
            title: "test".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            log_y: true,
            series: vec![
                Series::new(
                    "a",
                    (1..10).map(|i| (i as f64, (i * i) as f64)).collect(),
                    Mark::LinePoints,
                ),
                Series::new("b", vec![(1.0, 1.0), (9.0, 9.0)], Mark::Dashed),
            ],
            notes: vec!["slope 2".into()],
        };
        let svg = dir.path().join("a.svg");
        let png = dir.path().join("a.png");
        write_figure(&svg, 640, 480, &chart).unwrap();
        write_figure(&png, 640, 480, &chart).unwrap();
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(s.starts_with("<svg") && s.contains("slope 2"));
        let p = std::fs::read(&png).unwrap();
        assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
        assert!(write_figure(&dir.path().join("a.pdf"), 10, 10, &chart).is_err());
    }

    #[test]
    fn short_log_axes_get_at_least_three_labelled_ticks() {
        // (range, expected labelled ticks)
        let cases: [(f64, f64, &[f64]); 7] = [
            (150.0, 900.0, &[200.0, 300.0, 500.0, 700.0]),
            (8.0, 60.0, &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]),
            (0.75, 1.6, &[0.8, 1.0, 1.2, 1.4, 1.6]),
            (5.2, 13.8, &[6.0, 8.0, 10.0, 12.0]),
            (210.0, 260.0, &[210.0, 220.0, 230.0, 240.0, 250.0, 260.0]),
            (0.5, 2000.0, &[1.0, 10.0, 100.0, 1000.0]),
            (1e-3, 1e9, &[1e-3, 1e-1, 1e1, 1e3, 1e5, 1e7, 1e9]),
        ];
        for (lo, hi, want) in cases {
            let (t, minor) = log_ticks(lo, hi);
            assert_eq!(t, want, "{lo}..{hi}");
            assert!(t.iter().chain(&minor).all(|&x| x >= lo && x <= hi));
        }
        // No power of ten inside the range: plotters' own log ticks would label nothing.
        assert!(log_ticks(150.0, 900.0).0.len() >= 3);
        assert_eq!(tick_label(0.30000000000000004), "0.3");
        assert_eq!(tick_label(250.0), "250");
        assert_eq!(tick_label(2e6), "2e6");
        assert_eq!(tick_label(1e-5), "1e-5");
    }

    #[test]
    fn blocks_go_to_empty_corners_or_outside() {
        let area = (0.0, 0.0, 400.0, 300.0);
        // A rising line from lower left to upper right: upper left and lower right are free.
        let ink: Vec<(f64, f64)> = (0..=100)
            .map(|i| (4.0 * i as f64, 300.0 - 3.0 * i as f64))
            .collect();
        let p = place_blocks(area, &ink, &[(120.0, 60.0), (100.0, 40.0)]);
        assert_eq!(p, [Placement::UpperLeft, Placement::LowerRight]);
        // Ink everywhere: outside.
        let everywhere: Vec<(f64, f64)> = (0..40)
            .flat_map(|i| (0..30).map(move |j| (10.0 * i as f64, 10.0 * j as f64)))
            .collect();
        assert_eq!(
            place_blocks(area, &everywhere, &[(50.0, 20.0)]),
            [Placement::Outside]
        );
        // A chart whose data fill the upper right draws its legend elsewhere, in the picture.
        let chart = LineChart {
            title: "t".into(),
            series: vec![Series::new(
                "a long legend label",
                (0..20).map(|i| (i as f64, (i * i) as f64)).collect(),
                Mark::LinePoints,
            )],
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        write_figure(&dir.path().join("c.svg"), 640, 480, &chart).unwrap();
    }

    /// The fig3c figure of RESULTS.md had its notes box over an open circle: hollow points
    /// count as ink. Solid points at the lower left, one hollow point in the upper right: the
    /// legend goes to the upper left.
    #[test]
    fn blocks_avoid_hollow_points() {
        let chart = LineChart {
            series: vec![Series {
                hollow: vec![(9.5, 9.5)],
                ..Series::new("a", vec![(0.0, 0.0), (1.0, 0.5)], Mark::Points)
            }],
            ..Default::default()
        };
        let area = (0.0, 0.0, 400.0, 300.0);
        let ink = chart.ink(area, (0.0, 10.0), (0.0, 10.0));
        assert_eq!(
            place_blocks(area, &ink, &[(120.0, 60.0)]),
            [Placement::UpperLeft]
        );
    }
}
