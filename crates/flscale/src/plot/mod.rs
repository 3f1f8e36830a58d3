//! Figures as SVG or PNG (chosen by the file extension), drawn with `plotters` and a font the
//! crate carries (DejaVu Sans, `assets/fonts/`), so that a fresh machine without system fonts
//! renders text.
//!
//! Every figure implements [`Figure`]; [`write_figure`] picks the backend. [`LineChart`] covers
//! the common case (curves and points, optional log axes).

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};

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
}

impl Series {
    /// A series drawn with `mark`.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>, mark: Mark) -> Self {
        Series {
            label: label.into(),
            points,
            mark,
        }
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
    /// Free text lines drawn in the upper-left corner (fitted slopes, parameters).
    pub notes: Vec<String>,
}

/// The palette shared by all flscale figures.
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

impl LineChart {
    fn usable(&self, (x, y): (f64, f64)) -> bool {
        x.is_finite() && y.is_finite() && (!self.log_x || x > 0.0) && (!self.log_y || y > 0.0)
    }

    fn range(&self, pick: impl Fn(&(f64, f64)) -> f64, log: bool) -> (f64, f64) {
        let vals: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter(|p| self.usable(**p)).map(&pick))
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

impl Figure for LineChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        root.fill(&WHITE).map_err(perr)?;
        let (x0, x1) = self.range(|p| p.0, self.log_x);
        let (y0, y1) = self.range(|p| p.1, self.log_y);
        let mut builder = ChartBuilder::on(root);
        builder
            .caption(&self.title, ("sans-serif", 22))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(64);
        // plotters types differ for log and linear axes, so each combination is built apart.
        macro_rules! draw_with {
            ($xr:expr, $yr:expr) => {{
                let mut chart = builder.build_cartesian_2d($xr, $yr).map_err(perr)?;
                chart
                    .configure_mesh()
                    .x_desc(self.x_label.as_str())
                    .y_desc(self.y_label.as_str())
                    .label_style(("sans-serif", 14))
                    .axis_desc_style(("sans-serif", 16))
                    .draw()
                    .map_err(perr)?;
                for (k, s) in self.series.iter().enumerate() {
                    let color = PALETTE[k % PALETTE.len()];
                    let pts: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .copied()
                        .filter(|p| self.usable(*p))
                        .collect();
                    let legend_color = color;
                    if matches!(s.mark, Mark::Line | Mark::LinePoints) {
                        chart
                            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                            .map_err(perr)?
                            .label(s.label.as_str())
                            .legend(move |(x, y)| {
                                PathElement::new(
                                    vec![(x, y), (x + 18, y)],
                                    legend_color.stroke_width(2),
                                )
                            });
                    }
                    if s.mark == Mark::Dashed {
                        chart
                            .draw_series(DashedLineSeries::new(
                                pts.clone(),
                                6,
                                4,
                                color.stroke_width(2),
                            ))
                            .map_err(perr)?
                            .label(s.label.as_str())
                            .legend(move |(x, y)| {
                                PathElement::new(
                                    vec![(x, y), (x + 18, y)],
                                    legend_color.stroke_width(1),
                                )
                            });
                    }
                    if matches!(s.mark, Mark::Points | Mark::LinePoints) {
                        let ann = chart
                            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
                            .map_err(perr)?;
                        if s.mark == Mark::Points {
                            ann.label(s.label.as_str()).legend(move |(x, y)| {
                                Circle::new((x + 9, y), 4, legend_color.filled())
                            });
                        }
                    }
                }
                if !self.series.is_empty() {
                    chart
                        .configure_series_labels()
                        .background_style(WHITE.mix(0.85))
                        .border_style(BLACK)
                        .label_font(("sans-serif", 14))
                        .position(SeriesLabelPosition::UpperRight)
                        .draw()
                        .map_err(perr)?;
                }
            }};
        }
        match (self.log_x, self.log_y) {
            (false, false) => draw_with!(x0..x1, y0..y1),
            (true, false) => draw_with!((x0..x1).log_scale(), y0..y1),
            (false, true) => draw_with!(x0..x1, (y0..y1).log_scale()),
            (true, true) => draw_with!((x0..x1).log_scale(), (y0..y1).log_scale()),
        }
        for (i, line) in self.notes.iter().enumerate() {
            root.draw(&Text::new(
                line.as_str(),
                (90, 52 + 18 * i as i32),
                ("sans-serif", 14).into_font().color(&BLACK),
            ))
            .map_err(perr)?;
        }
        Ok(())
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
}
