//! `flscale predict`: which feature-learning pattern wins, and how P\* scales.

use std::path::{Path, PathBuf};

use flscale::patterns::arch::Architecture;
use flscale::patterns::phase::{
    line_chart, phase_line, phase_map, region_letter, MapFigure, PhaseLine, PhaseMap,
};
use flscale::patterns::report::{to_json, to_text};
use flscale::plot::write_figure;
use flscale::scaling::energy::exponent_strings;
use flscale::scaling::expr::parse_decimal;
use flscale::scaling::{fmt_q, Monomial, Regime, Q};
use flscale::{Error, Result};
use serde_json::json;

use super::{out, out_json, Ctx};

/// Arguments of `flscale predict`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  flscale predict --preset fcn3-erf-he3                 # the paper's Table 1
  flscale predict --preset fcn3-erf-he3 --at N1=d^2     # wider first layer: GP-Sp takes over
  flscale preset show fcn3-erf-he3 > my-net.toml        # your own architecture: copy a preset, edit it,
  flscale predict my-net.toml --json                    # and predict it
  flscale predict --preset fcn2-erf-he3 --phase N --out phase.svg
  flscale predict --preset fcn3-erf-he3 --phase N1,N2 --range 0:6 --out map.png

The table stars every pattern tied at the smallest exponent and names the paper's rows
(e.g. Table 1's GP-GP, GP-Sp, Sp-Mag); --all adds muSp and feature learning on other
features (names: docs/scaling.md). Exit status: 0 with a prediction, also when no pattern
can align with the target (e.g. erf, which is odd, on an even target such as He2: the
reading says why, --json has \"winners\": [] and \"no_winner_reason\"); 2 for bad input.

Architecture TOML (fields of [network]: kind, activation, widths, parametrization, catalog):
  [network]
  kind = \"fcn\"                 # or \"catalog\" with catalog = \"cnn-patches\" | path
  activation = \"erf\"           # erf | relu | tanh | linear | poly
  widths = [\"N1\", \"N2\"]        # one scale symbol per hidden layer
  parametrization = \"standard\" # standard | mean-field
  [target]
  hermite = 3                  # y = He_m(w*.x)
  [regime]                     # every scale as a power of d
  N1 = \"d\"
  N2 = \"d^2\"")]
pub struct PredictArgs {
    /// Architecture TOML file (or use --preset).
    #[arg(
        value_name = "ARCH.toml",
        required_unless_present = "preset",
        conflicts_with = "preset"
    )]
    pub file: Option<PathBuf>,
    /// A built-in preset (list them with `flscale presets`).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Override the regime: comma-separated SCALE=power-of-d, e.g. `N1=d^2,N2=sqrt(d)`.
    #[arg(long, value_name = "N1=d^2,...")]
    pub at: Option<String>,
    /// Print one JSON object instead of the table (it always lists every pattern).
    #[arg(long)]
    pub json: bool,
    /// Show every enumerated pattern in the table, not only the paper's kinds.
    #[arg(long)]
    pub all: bool,
    /// Phase diagram over the exponent of one scale (`N`) or two (`N1,N2`).
    #[arg(long, value_name = "SCALE[,SCALE]")]
    pub phase: Option<String>,
    /// Exponent range of the phase axes, LO:HI (rationals allowed, e.g. 0:11/2).
    #[arg(long, value_name = "LO:HI", default_value = "0:6")]
    pub range: String,
    /// Grid points per axis of a two-axis phase map.
    #[arg(long, value_name = "N", default_value_t = 25)]
    pub grid: usize,
    /// Write the phase diagram picture here (.svg or .png).
    #[arg(long, value_name = "FIG.svg")]
    pub out: Option<PathBuf>,
}

fn parse_exponent(s: &str) -> Result<Q> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let q = match body.split_once('/') {
        Some((a, b)) => {
            let (a, b) = (parse_decimal(a.trim()), parse_decimal(b.trim()));
            match (a, b) {
                (Some(a), Some(b)) if b != Q::from_integer(0) => Some(a / b),
                _ => None,
            }
        }
        None => parse_decimal(body),
    };
    q.map(|q| if neg { -q } else { q }).ok_or_else(|| {
        Error::invalid(format!(
            "--range value \"{s}\" is not a number; write e.g. 0:6 or 1/2:11/2"
        ))
    })
}

/// The two-axis phase map as the JSON object of `flscale predict --phase X,Y --json`
/// (shared with `flscale serve`); `figure` is the picture written beside it, if any.
pub fn phase_map_json(map: &PhaseMap, figure: Option<&std::path::Path>) -> serde_json::Value {
    let cells: Vec<Vec<serde_json::Value>> = map
        .cells
        .iter()
        .map(|row| {
            row.iter()
                .map(|c| c.map_or(serde_json::Value::Null, |k| json!(k)))
                .collect()
        })
        .collect();
    json!({
        "axes": [map.axes.0, map.axes.1],
        "grid": map.grid.0.iter().map(fmt_q).collect::<Vec<_>>(),
        "winner_sets": map.winner_sets,
        "cells": cells,
        "boundaries": map.boundaries,
        "figure": figure.map(|p| p.display().to_string()),
    })
}

/// Parses a `LO:HI` exponent range such as `0:6` or `1/2:11/2`.
pub fn parse_range(range: &str) -> Result<(Q, Q)> {
    let (lo, hi) = range.split_once(':').ok_or_else(|| {
        Error::invalid(format!(
            "--range \"{range}\" has no ':'; write LO:HI, e.g. 0:6"
        ))
    })?;
    Ok((parse_exponent(lo)?, parse_exponent(hi)?))
}

/// Refuses a scale name (of `--at` or `--phase`) that the architecture's regime does not
/// list, naming the ones it has; `d` is the base and always known.
fn check_scale(arch: &Architecture, option: &str, name: &str) -> Result<()> {
    if name == flscale::scaling::energy::BASE || arch.regime.get(name).is_some() {
        return Ok(());
    }
    let known: Vec<&str> = arch
        .regime
        .iter()
        .map(|(s, _)| s)
        .filter(|s| *s != flscale::scaling::energy::BASE)
        .collect();
    Err(Error::invalid(format!(
        "{option} names the scale '{name}', which {} does not have; its scales are {}",
        arch.source,
        if known.is_empty() {
            "d only".to_string()
        } else {
            format!("d, {}", known.join(", "))
        }
    )))
}

/// The title of a phase diagram's text: the file's `title`, then what was parsed (an edited
/// copy of a preset keeps the preset's title) and where it came from.
fn header(arch: &Architecture) -> String {
    let mut h = arch.title.clone();
    if arch.parsed != arch.title {
        h += &format!("\nparsed: {}", arch.parsed);
    }
    h + &format!("\nfrom: {}", arch.source)
}

/// Runs `flscale predict`.
pub fn run(args: PredictArgs, _ctx: &Ctx) -> Result<()> {
    let arch = load_architecture(&args)?;
    let regime = regime_with_overrides(&arch, args.at.as_deref())?;
    let Some(phase) = &args.phase else {
        return predict_in_regime(&args, &arch, &regime);
    };
    let range = parse_range(&args.range)?;
    let axes = phase_axes(&arch, phase, args.grid)?;
    match axes.as_slice() {
        [axis] => run_phase_line(&args, &arch, &regime, axis, range),
        [x, y] => run_phase_map(&args, &arch, &regime, (x, y), range),
        _ => Err(Error::invalid(format!(
            "--phase \"{phase}\" must name one or two scales, e.g. N or N1,N2"
        ))),
    }
}

/// The architecture of `--preset` or of the file argument.
fn load_architecture(args: &PredictArgs) -> Result<Architecture> {
    match (&args.preset, &args.file) {
        (Some(name), _) => Architecture::from_preset(name),
        (None, Some(path)) => Architecture::from_file(path),
        (None, None) => Err(Error::invalid(
            "give an architecture file or --preset NAME (see `flscale presets`)",
        )),
    }
}

/// The architecture's regime with the `--at` assignments applied (each scale checked first);
/// a bad entry's message names the file or preset it was given for.
pub(crate) fn regime_with_overrides(arch: &Architecture, at: Option<&str>) -> Result<Regime> {
    let mut regime = arch.regime.clone();
    if let Some(at) = at {
        for part in at.split(',').filter_map(|p| p.split_once('=')) {
            check_scale(arch, "--at", part.0.trim())?;
        }
        regime
            .apply_assignments(at, "--at")
            .map_err(|e| super::energy::power_hint(e.context(&arch.source), &[at]))?;
    }
    Ok(regime)
}

/// The prediction at one regime (no `--phase`): the table, or the JSON object with `--json`.
fn predict_in_regime(args: &PredictArgs, arch: &Architecture, regime: &Regime) -> Result<()> {
    if args.out.is_some() {
        return Err(Error::invalid(
            "--out writes a phase diagram; give --phase SCALE[,SCALE] too",
        ));
    }
    let pred = arch.predict_in(regime)?;
    if args.json {
        return out_json(&to_json(&pred));
    }
    let mut text = to_text(&pred, args.all);
    for n in &arch.notes {
        text.push_str(&format!("\n{n}\n"));
    }
    out(&text)
}

/// The scales of `--phase`, each checked against the architecture; with two, `grid` is
/// checked too (at least 2 points per axis, at most the phase-map cap).
pub(crate) fn phase_axes<'a>(
    arch: &Architecture,
    phase: &'a str,
    grid: usize,
) -> Result<Vec<&'a str>> {
    let axes: Vec<&str> = phase
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    for axis in &axes {
        check_scale(arch, "--phase", axis)?;
    }
    if axes.len() == 2 {
        if grid < 2 {
            return Err(Error::invalid(format!(
                "--grid = {grid} is not allowed; a phase map needs at least 2 points per axis"
            )));
        }
        flscale::limits::check_cap(
            "--grid",
            grid,
            flscale::limits::MAX_PHASE_GRID,
            "the map solves every pattern's LP in each of grid² cells; 200² is about a minute",
        )?;
    }
    Ok(axes)
}

/// `--phase SCALE`: the winners and P\* exponent along the exponent of one scale over
/// `(lo, hi)`, as text or JSON, with the figure when `--out` is given.
fn run_phase_line(
    args: &PredictArgs,
    arch: &Architecture,
    regime: &Regime,
    axis: &str,
    (lo, hi): (Q, Q),
) -> Result<()> {
    let line = phase_line(arch, regime, axis, lo, hi)?;
    if let Some(path) = &args.out {
        let mut chart = line_chart(&line, &format!("winner and P* exponent vs log_d {axis}"));
        chart.notes.insert(0, arch.title.clone());
        write_figure(path, 900, 560, &chart)?;
    }
    if args.json {
        return out_json(&phase_line_json(&line, axis, args.out.as_deref()));
    }
    let mut text = format!(
        "{}\nphase diagram along log_d {axis} in [{}, {}]\n\n",
        header(arch),
        fmt_q(&lo),
        fmt_q(&hi)
    );
    text.push_str(&phase_line_text(&line, axis));
    if let Some(p) = &args.out {
        text.push_str(&format!("\nfigure: {}\n", p.display()));
    }
    out(&text)
}

/// The phase line as the JSON object of `flscale predict --phase SCALE --json`; `figure` is
/// the picture written beside it, if any.
fn phase_line_json(line: &PhaseLine, axis: &str, figure: Option<&Path>) -> serde_json::Value {
    let regions: Vec<_> = line
        .regions
        .iter()
        .map(|r| {
            let (a, _) = exponent_strings(&r.p_star.a);
            let (b, _) = exponent_strings(&r.p_star.b);
            json!({"from": fmt_q(&r.from), "to": fmt_q(&r.to), "winners": r.winners, "optimum": r.energy,
                   "p_star_exponent": {"slope": a, "intercept": b}})
        })
        .collect();
    let bounds: Vec<_> = line
        .boundaries
        .iter()
        .map(|b| {
            json!({"at": fmt_q(&b.at), "scale": Monomial::power("d", b.at).to_string(), "tied": b.tied,
                   "winners_change": b.winners_change, "exact": b.exact})
        })
        .collect();
    json!({"axis": axis, "regions": regions, "boundaries": bounds,
                        "figure": figure.map(|p| p.display().to_string())})
}

/// One line per region of the phase line (winners, optimum, P\* exponent), then one per
/// boundary (where the winners tie, or where their optimum changes form).
fn phase_line_text(line: &PhaseLine, axis: &str) -> String {
    let mut text = String::new();
    for r in &line.regions {
        text.push_str(&format!(
            "  {axis} from {} to {}: {}  (Ẽ = {}, P* exponent = {}·ν + {})\n",
            Monomial::power("d", r.from),
            Monomial::power("d", r.to),
            r.winners.join(" = "),
            r.energy,
            fmt_q(&r.p_star.a),
            fmt_q(&r.p_star.b)
        ));
    }
    for b in &line.boundaries {
        let at = Monomial::power("d", b.at);
        let approx = if b.exact {
            ""
        } else {
            " (located between two samples, not exact)"
        };
        if b.winners_change {
            text.push_str(&format!(
                "  boundary at {axis} = {at}: {} tie there{approx}\n",
                b.tied.join(", ")
            ));
        } else {
            text.push_str(&format!(
                "  at {axis} = {at} the winners stay, but their optimum changes form (a constraint starts or stops binding){approx}\n"
            ));
        }
    }
    text
}

/// `--phase X,Y`: the winner over a grid of the two scales' exponents in `(lo, hi)`, as a
/// letter map with its legend and boundaries, or JSON, with the figure when `--out` is given.
fn run_phase_map(
    args: &PredictArgs,
    arch: &Architecture,
    regime: &Regime,
    (x, y): (&str, &str),
    (lo, hi): (Q, Q),
) -> Result<()> {
    let map = phase_map(arch, regime, (x, y), lo, hi, args.grid)?;
    if let Some(path) = &args.out {
        let fig = MapFigure {
            map: &map,
            title: format!("winner over (log_d {x}, log_d {y})"),
        };
        write_figure(path, 1000, 620, &fig)?;
    }
    if args.json {
        return out_json(&phase_map_json(&map, args.out.as_deref()));
    }
    let mut text = format!(
        "{}\nphase map over log_d {x} (columns) and log_d {y} (rows) in [{}, {}], {}x{} grid\n\n",
        header(arch),
        fmt_q(&lo),
        fmt_q(&hi),
        map.grid.0.len(),
        map.grid.0.len()
    );
    text.push_str(&phase_map_text(&map));
    if let Some(p) = &args.out {
        text.push_str(&format!("\nfigure: {}\n", p.display()));
    }
    out(&text)
}

/// The phase map as rows of letters (one per winner set, highest y first), the letters'
/// winner sets and the boundaries between neighbouring winners.
fn phase_map_text(map: &PhaseMap) -> String {
    let mut text = String::new();
    for (iy, row) in map.cells.iter().enumerate().rev() {
        let line: String = row.iter().map(|c| c.map_or('.', region_letter)).collect();
        text.push_str(&format!("{:>6} | {line}\n", fmt_q(&map.grid.1[iy])));
    }
    text.push('\n');
    for (k, w) in map.winner_sets.iter().enumerate() {
        text.push_str(&format!("  {} = {}\n", region_letter(k), w.join(" = ")));
    }
    text.push_str("\nboundaries (where the neighbouring winners' energies are equal):\n");
    for b in &map.boundaries {
        text.push_str(&format!("  {b}\n"));
    }
    text
}
