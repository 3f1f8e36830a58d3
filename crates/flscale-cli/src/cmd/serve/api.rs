//! The JSON API of `flscale serve` as plain functions (no HTTP): each takes the request's
//! parameters and returns the object the page draws, built by the same functions as the
//! CLI's `--json` (`cavity potential`, `cavity phase`, `predict`, `predict --phase`).
//! Every size that sets the cost of a request is bounded here, so that no request can hold
//! the server for long; a value outside the bounds is a 400 with one sentence.

use std::collections::BTreeMap;

use flscale::cavity::phase_at::label_name;
use flscale::cavity::{self, PhaseReport};
use flscale::experiment::io::parse_cell;
use flscale::patterns::arch::{
    preset_text, Architecture, ArchitectureFile, BUILTIN_CATALOG, PRESETS,
};
use flscale::patterns::phase::phase_map_until;
use flscale::patterns::report::to_json;
use flscale::Error;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{secs, ApiError, ApiResult};
use super::wells;
use super::work::Cancel;
use crate::cmd::args::out_of_range;
use crate::cmd::cavity::{
    check_phase_input, check_potential_input, potential_report, PotentialInput,
};
use crate::cmd::predict::{parse_range, phase_axes, phase_map_json, regime_with_overrides};

/// Largest ρ grid of one potential curve the server draws (the CLI allows 100000).
pub const MAX_POINTS: usize = 2001;
/// Largest number of c values of the (u, c) phase diagram.
pub const MAX_DIAGRAM_POINTS: usize = 1001;
/// Largest grid per axis of the scaling engine's phase map (grid² predictions).
pub const MAX_PHASE_GRID: usize = 41;
/// Largest input dimension D of the finite-D moments R (the quadrature is exact for any D;
/// beyond this the side well is a spike no grid of the page resolves).
pub const MAX_D: f64 = 1e6;
/// Largest half-width of the ρ grid (|ρ| ≤ 1 holds the posterior's mass; the page zooms out
/// to see the wells' walls).
pub const MAX_RHO: f64 = 10.0;
/// Largest architecture TOML accepted (bytes); the HTTP layer also caps whole bodies.
pub const MAX_TOML_BYTES: usize = 64 * 1024;

/// The query parameters of a GET request, read with the names the CLI's flags have (with
/// `_` for `-`).
#[derive(Debug, Clone, Default)]
pub struct Params(pub BTreeMap<String, String>);

impl Params {
    /// Parameters from `(name, value)` pairs (unit tests).
    #[cfg(test)]
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Params(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn raw(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|s| s.trim()).filter(|s| !s.is_empty())
    }

    /// A finite number, or `default` when absent.
    pub fn f64_or(&self, name: &str, default: f64) -> ApiResult<f64> {
        self.f64_opt(name).map(|v| v.unwrap_or(default))
    }

    /// A finite number, if given.
    pub fn f64_opt(&self, name: &str) -> ApiResult<Option<f64>> {
        let Some(s) = self.raw(name) else {
            return Ok(None);
        };
        // The CLI's first check of every number (`args::check_numbers`): finite, magnitude
        // between 1e-100 and 1e100, or 0.
        if let Some(why) = out_of_range(s) {
            return Err(ApiError::bad(format!(
                "parameter {name} = \"{}\" is not allowed; {why}: numbers must be finite, with magnitude between 1e-100 and 1e100, or 0",
                shorten(s)
            )));
        }
        // `raw` is never empty, so a cell the store would read as null cannot come back.
        parse_cell(s).map_err(|_| {
            ApiError::bad(format!(
                "parameter {name} = \"{}\" is not allowed; it must be a finite number",
                shorten(s)
            ))
        })
    }

    /// A count in `lo..=hi`, or `default` when absent.
    pub fn count_or(&self, name: &str, default: usize, lo: usize, hi: usize) -> ApiResult<usize> {
        let Some(s) = self.raw(name) else {
            return Ok(default);
        };
        match s.parse::<usize>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(ApiError::bad(format!(
                "parameter {name} = \"{}\" is not allowed; it must be a whole number between {lo} and {hi}",
                shorten(s)
            ))),
        }
    }
}

/// The first 40 characters of a user's value, for quoting it in a message.
fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

/// Where u lies relative to the fold, coexistence and spinodal of Ũ_u (blog "A solvable
/// model", Fig. 4.1): below the fold only the central well exists; between fold and
/// coexistence the aligned side wells are metastable; above coexistence they are deeper
/// (the posterior is aligned) and the centre is metastable up to the spinodal, beyond which
/// it is unstable. A continuous transition has fold = coexistence = spinodal.
pub fn phase_at(rep: &PhaseReport, u: f64) -> (&'static str, &'static str) {
    let spinodal = rep.u_spinodal.map_or(f64::INFINITY, |l| l.u);
    if rep.kind != "first-order" {
        return if u < rep.u_coexist.u {
            ("unaligned", "one central well at ρ = 0")
        } else {
            ("aligned", "the centre is unstable; the minima sit at ρ ≠ 0")
        };
    }
    if u < rep.u_fold.u {
        ("unaligned", "only the central well at ρ = 0 exists")
    } else if u < rep.u_coexist.u {
        (
            "unaligned",
            "the central well is deepest; aligned side wells exist but are metastable",
        )
    } else if u < spinodal {
        (
            "aligned",
            "the side wells at ±ρ* are deepest; the central well is metastable",
        )
    } else {
        (
            "aligned",
            "the centre is unstable (past the spinodal); only the side wells remain",
        )
    }
}

/// `GET /api/cavity/view`: everything the solvable-model page draws for one slider state —
/// the potential (as `cavity potential --json`, one curve), the phase analysis (as
/// `cavity phase --json`), the (u, c) phase diagram rows at this σ_w², b, and where the
/// current point lies. With `mode=finite` the potential is the finite-size U(ρ; b, c) at
/// D, N, P, T, s_a² and u = P²s_a²/(T²D) (blog "the mean-field limit").
pub fn cavity_view(q: &Params) -> ApiResult<Value> {
    let sigma_w2 = q.f64_or("sigma_w2", 0.5)?;
    let b = q.f64_or("b", 0.3)?;
    let c = q.f64_or("c", -0.3)?;
    let d = q.f64_or("d", 20.0)?;
    if !(1.0..=MAX_D).contains(&d) || d.fract() != 0.0 {
        return Err(ApiError::bad(format!(
            "parameter d = {d} is not allowed; it must be a whole number between 1 and {MAX_D}"
        )));
    }
    let points = q.count_or("points", 301, 2, MAX_POINTS)?;
    // `auto`: wide enough for every well of the potential (see `auto_rho_max`).
    let auto = q.raw("rho_max") == Some("auto");
    let rho_max = if auto { 1.5 } else { q.f64_or("rho_max", 1.5)? };
    if !(rho_max > 0.0 && rho_max <= MAX_RHO) {
        return Err(ApiError::bad(format!(
            "parameter rho_max = {rho_max} is not allowed; it must be in (0, {MAX_RHO}]"
        )));
    }
    let finite = match q.raw("mode").unwrap_or("mean-field") {
        "mean-field" => false,
        "finite" => true,
        other => {
            return Err(ApiError::bad(format!(
                "parameter mode = \"{}\" is not allowed; use mean-field or finite",
                shorten(other)
            )))
        }
    };
    let n = q.f64_or("n", 20.0)?;
    let mut input = PotentialInput {
        sigma_w2,
        b,
        c,
        u: Vec::new(),
        p: Vec::new(),
        d,
        n,
        t: q.f64_or("t", 0.05)?,
        s_a2: q.f64_opt("s_a2")?,
        rho_max,
        points,
    };
    let model = if finite {
        let p = q.f64_or("p", 200.0)?;
        input.p = vec![p];
        let s_a2 = input.s_a2.unwrap_or(1.0 / n);
        flscale::error::require_positive("N (width)", n)?;
        Some(cavity::FiniteModel::new(d, p, input.t, s_a2, sigma_w2)?)
    } else {
        None
    };
    let u = if let Some(m) = &model {
        m.u()
    } else {
        let u = q.f64_or("u", 25.0)?;
        input.u = vec![u];
        u
    };
    let diagram_points = q.count_or("diagram_points", 201, 2, MAX_DIAGRAM_POINTS)?;
    let c_min = q.f64_or("c_min", -1.0)?;
    let c_max = q.f64_or("c_max", 1.0)?;
    // The CLI's range checks of `cavity potential` and `cavity phase`, with the page's
    // parameter names in place of the flags.
    check_potential_input(&input).map_err(parameter_names)?;
    check_phase_input(sigma_w2, b, c, d, c_min, c_max).map_err(parameter_names)?;
    let phase = cavity::phase(sigma_w2, b, c, d as usize)?;
    // The wells at this very point: of the finite-size U, whose phase they decide, or of the
    // mean-field D·Ũ_u at this u (ρ* and R follow u; `phase` holds them at coexistence).
    let (view, point) = match &model {
        Some(m) => {
            let (view, label) = wells::finite_wells(m, b, c, n)?;
            let (word, description) = wells::describe_finite(&view, label, n);
            let point = json!({
                "u": u, "c": c, "phase": word, "label": label_name(label),
                "description": description, "from": "the finite-size potential's own minima",
            });
            (view, point)
        }
        None => {
            let view = wells::mean_field_wells(&cavity::MeanField::new(sigma_w2, b, c)?, u, d)?;
            let (word, description) = phase_at(&phase, u);
            let point = json!({
                "u": u, "c": c, "phase": word, "description": description,
                "from": "u against the mean-field fold, coexistence and spinodal",
            });
            (view, point)
        }
    };
    if auto {
        input.rho_max = auto_rho_max(&view);
    }
    let potential = potential_report(&input)?;
    let rows = cavity::phase_diagram(sigma_w2, b, c_min, c_max, diagram_points)?;
    Ok(json!({
        "potential": potential.to_json(),
        "rho_max": input.rho_max,
        "phase": to_value(&phase)?,
        "wells": view.to_json(),
        "diagram": { "sigma_w2": sigma_w2, "b": b, "rows": to_value(&rows)? },
        "point": point,
    }))
}

/// The half-width of the drawn ρ grid for `rho_max=auto`: 1.2 (where the blog's figures
/// stop), widened to a quarter beyond the outermost well, in steps of 0.1, at most
/// [`MAX_RHO`] (a page that needs more says so: its wells lie outside).
fn auto_rho_max(view: &wells::WellView) -> f64 {
    let wanted = (1.25 * view.outermost() * 10.0).ceil() / 10.0;
    wanted.clamp(1.2, MAX_RHO)
}

/// A CLI message that starts with its flag (`--sigma-w2 1e9 is not allowed; …`) with the
/// API's parameter name in its place (`parameter sigma_w2 = 1e9 is not allowed; …`).
fn parameter_names(e: Error) -> ApiError {
    let text = e.to_string();
    let message = match text.strip_prefix("--").and_then(|t| t.split_once(' ')) {
        Some((flag, rest)) => match rest.split_once(' ') {
            Some((value, rest)) => format!("parameter {} = {value} {rest}", flag.replace('-', "_")),
            None => text.clone(),
        },
        None => text.clone(),
    };
    ApiError::bad(message)
}

fn to_value<T: serde::Serialize>(v: &T) -> ApiResult<Value> {
    serde_json::to_value(v).map_err(|e| ApiError {
        status: 500,
        message: format!("cannot encode JSON: {e}"),
    })
}

/// The architecture of a scaling-engine request: TOML typed in the page, or a preset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    /// Architecture TOML (the format of `flscale preset show NAME`).
    pub toml: Option<String>,
    /// A built-in preset name, used when `toml` is absent.
    pub preset: Option<String>,
    /// Regime override, as `predict --at`, e.g. `N1=d^2`.
    pub at: Option<String>,
    /// Two scales for a phase map, as `predict --phase N1,N2`.
    pub phase: Option<String>,
    /// Exponent range of the phase map, as `predict --range`, default 0:6.
    pub range: Option<String>,
    /// Grid points per axis of the phase map (2 … [`MAX_PHASE_GRID`]), default 17.
    pub grid: Option<usize>,
}

/// The name the page's TOML has in error messages (where the CLI names the file).
pub const EDITOR_SOURCE: &str = "the editor's TOML";

fn architecture(req: &PredictRequest) -> ApiResult<Architecture> {
    match (&req.toml, &req.preset) {
        (Some(text), _) => {
            if text.len() > MAX_TOML_BYTES {
                return Err(ApiError::bad(format!(
                    "the architecture TOML has {} bytes; at most {MAX_TOML_BYTES} are allowed",
                    text.len()
                )));
            }
            refuse_catalog_paths(text)?;
            Ok(Architecture::from_toml(text, EDITOR_SOURCE, None)?)
        }
        (None, Some(name)) => Ok(Architecture::from_preset(name)?),
        (None, None) => Err(ApiError::bad(
            "give toml (architecture TOML) or preset (a name from /api/presets)",
        )),
    }
}

/// A catalog named by a file path would make the server read its disk on a page's behalf;
/// only the built-in entries are allowed here. Text that does not parse is left to
/// `Architecture::from_toml`, which words the error.
fn refuse_catalog_paths(text: &str) -> ApiResult<()> {
    let Ok(file) = toml::from_str::<ArchitectureFile>(text) else {
        return Ok(());
    };
    match file.network.catalog.as_deref() {
        Some(name) if !BUILTIN_CATALOG.iter().any(|(n, _)| *n == name) => Err(ApiError::bad(format!(
            "{EDITOR_SOURCE}: network.catalog = \"{}\" is not a built-in entry ({}); the server reads no files, run flscale predict FILE.toml for a catalog file",
            shorten(name),
            BUILTIN_CATALOG.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ))),
        _ => Ok(()),
    }
}

/// `POST /api/predict`: `prediction` is the object of `flscale predict --json`; `notes` the
/// architecture's notes; `phase_map`, when `phase` names two scales, the object of
/// `flscale predict --phase X,Y --json`. `at` and `phase` pass the CLI's checks (every scale
/// must be one of the architecture's). A phase map whose estimate (grid² times the measured
/// time of the one prediction) exceeds the time left is refused before it starts (503 with
/// the estimate); one that runs past `cancel`'s deadline stops between two cells.
pub fn predict(req: &PredictRequest, cancel: &Cancel) -> ApiResult<Value> {
    let arch = architecture(req)?;
    let at = req.at.as_deref().filter(|s| !s.trim().is_empty());
    let regime = regime_with_overrides(&arch, at)?;
    let started = std::time::Instant::now();
    let prediction = to_json(&arch.predict_in(&regime)?);
    let one = started.elapsed();
    let map = match req
        .phase
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        None => Value::Null,
        Some(phase) => {
            let grid = req.grid.unwrap_or(17);
            if !(2..=MAX_PHASE_GRID).contains(&grid) {
                return Err(ApiError::bad(format!(
                    "grid = {grid} is not allowed; the server draws 2 … {MAX_PHASE_GRID} points per axis (use `flscale predict --phase` for finer maps)"
                )));
            }
            let axes = phase_axes(&arch, phase, grid)?;
            let [x, y] = axes.as_slice() else {
                return Err(ApiError::bad(format!(
                    "phase = \"{}\" is not allowed; name two scales, e.g. N1,N2",
                    shorten(phase)
                )));
            };
            let (lo, hi) = parse_range(req.range.as_deref().unwrap_or("0:6"))?;
            refuse_over_estimate(grid, one, cancel.remaining())?;
            let map = phase_map_until(&arch, &regime, (*x, *y), lo, hi, grid, &|| {
                cancel.should_stop()
            })?;
            phase_map_json(&map, None)
        }
    };
    Ok(json!({ "prediction": prediction, "notes": arch.notes, "phase_map": map }))
}

/// Refuses a phase map of `grid`² predictions when, at `one` per prediction (measured on this
/// request's own prediction), it would need more than the time `left`; names the estimate and
/// the largest grid that fits.
fn refuse_over_estimate(
    grid: usize,
    one: std::time::Duration,
    left: std::time::Duration,
) -> ApiResult<()> {
    let cells = (grid * grid) as u32;
    let estimate = one.saturating_mul(cells);
    if estimate <= left {
        return Ok(());
    }
    let fits = (left.as_secs_f64() / one.as_secs_f64().max(1e-9))
        .sqrt()
        .floor() as usize;
    let advice = if fits >= 2 {
        format!("ask for a grid of at most {}", fits.min(MAX_PHASE_GRID))
    } else {
        "this architecture is too slow for a phase map here; run `flscale predict --phase`".into()
    };
    Err(ApiError {
        status: 503,
        message: format!(
            "the phase map would take about {:.1} s ({grid}² = {cells} predictions at {:.1} ms each, measured), more than the {} left of the time limit; {advice}",
            estimate.as_secs_f64(),
            one.as_secs_f64() * 1e3,
            secs(std::time::Duration::from_secs_f64((left.as_secs_f64() * 10.0).floor() / 10.0)),
        ),
    })
}

/// `GET /api/presets`: the built-in architecture presets, as `flscale presets --json`.
pub fn presets() -> Value {
    let list: Vec<_> = PRESETS
        .iter()
        .map(|(n, s, _)| json!({"name": n, "summary": s}))
        .collect();
    json!({ "presets": list })
}

/// `GET /api/presets/NAME`: a preset's TOML, as `flscale preset show NAME`.
pub fn preset(name: &str) -> ApiResult<Value> {
    let text = preset_text(name).map_err(|e| ApiError::not_found(e.to_string()))?;
    Ok(json!({ "name": name, "toml": text }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flscale::cavity::phase::coexistence_closed_form;
    use flscale::cavity::MeanField;
    use flscale::scaling::Q;
    use proptest::prelude::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params::from_pairs(pairs)
    }

    /// The phase label flips at u_coexist, and u_coexist is where the side well of Ũ_u
    /// becomes as deep as the centre: checked against a brute-force scan of the potential
    /// and the closed form (blog eq. for the coexistence line).
    #[test]
    fn phase_label_flips_where_the_side_well_becomes_deepest() {
        let (s, b, c) = (0.5, 0.3, -0.3);
        let rep = cavity::phase(s, b, c, 20).unwrap();
        let uc = rep.u_coexist.u;
        let closed = coexistence_closed_form(&MeanField::new(s, b, c).unwrap())
            .unwrap()
            .0;
        assert!((uc - closed).abs() < 1e-8 * closed, "{uc} vs {closed}");
        let mf = MeanField::new(s, b, c).unwrap();
        let side_minus_centre = |u: f64| {
            let side = (1..3000)
                .map(|i| mf.potential(u, i as f64 * 5e-4))
                .fold(f64::INFINITY, f64::min);
            side - mf.potential(u, 0.0)
        };
        for (u, label, deeper_side) in [
            (uc * 0.99, "unaligned", false),
            (uc * 1.01, "aligned", true),
        ] {
            let v = cavity_view(&params(&[("u", &u.to_string())])).unwrap();
            assert_eq!(v["point"]["phase"], label);
            assert_eq!(side_minus_centre(u) < 0.0, deeper_side, "u = {u}");
        }
    }

    /// The view's parts are the CLI's objects: the phase report and the potential curve
    /// equal what the library gives for the same inputs.
    #[test]
    fn view_parts_are_the_cli_objects() {
        let v = cavity_view(&params(&[("u", "22"), ("b", "0.2"), ("points", "11")])).unwrap();
        let rep = cavity::phase(0.5, 0.2, -0.3, 20).unwrap();
        assert_eq!(v["phase"], serde_json::to_value(&rep).unwrap());
        let mf = MeanField::new(0.5, 0.2, -0.3).unwrap();
        let curve = v["potential"]["curves"][0]["potential_over_d"]
            .as_array()
            .unwrap();
        assert_eq!(curve.len(), 11);
        assert_eq!(curve[0].as_f64().unwrap(), mf.potential(22.0, -1.5));
        let fin = cavity_view(&params(&[("mode", "finite"), ("p", "100")])).unwrap();
        let u = 100.0f64.powi(2) * (1.0 / 20.0) / (0.05f64.powi(2) * 20.0);
        assert!((fin["point"]["u"].as_f64().unwrap() - u).abs() < 1e-9 * u);
    }

    /// The finite-size view takes its phase from U's own minima (at P = 10, u = 100 lies far
    /// past the mean-field coexistence, yet U has one well: unaligned), and `rho_max=auto`
    /// draws every well (at P = 200 the side well lies near ρ = 2, beyond the default 1.5).
    #[test]
    fn finite_view_reads_its_own_wells_and_draws_them() {
        let v = cavity_view(&params(&[("mode", "finite"), ("p", "10")])).unwrap();
        assert!(
            v["point"]["u"].as_f64().unwrap()
                > 3.0 * v["phase"]["u_coexist"]["u"].as_f64().unwrap()
        );
        assert_eq!(v["point"]["phase"], "unaligned", "{}", v["point"]);
        assert_eq!(v["point"]["label"], "GFL");
        let v = cavity_view(&params(&[
            ("mode", "finite"),
            ("p", "200"),
            ("rho_max", "auto"),
        ]))
        .unwrap();
        assert_eq!(v["point"]["phase"], "aligned", "{}", v["point"]);
        let outer = v["wells"]["minima"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["rho"].as_f64().unwrap())
            .fold(0.0, f64::max);
        let drawn = v["rho_max"].as_f64().unwrap();
        assert!(outer > 1.5 && drawn >= 1.2 * outer, "{outer} vs {drawn}");
        let rho = v["potential"]["rho"].as_array().unwrap();
        assert_eq!(rho.last().unwrap().as_f64().unwrap(), drawn);
        // In the mean-field view ρ* follows u: the side minimum moves out past coexistence.
        let at = |u: &str| {
            let v = cavity_view(&params(&[("u", u)])).unwrap();
            v["wells"]["minima"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["rho"].as_f64().unwrap())
                .fold(0.0, f64::max)
        };
        assert!(at("34") > at("30") && at("30") > 0.0 && at("15") == 0.0);
    }

    #[test]
    fn limits_answer_400_with_the_parameter_named() {
        for (k, v, needle) in [
            ("points", "100000000", "points"),
            ("diagram_points", "5000", "diagram_points"),
            ("d", "1e12", "parameter d"),
            ("b", "nan", "parameter b"),
            ("mode", "x", "mode"),
        ] {
            let e = cavity_view(&params(&[(k, v)])).unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.message.contains(needle), "{}", e.message);
        }
        let e = predict(
            &PredictRequest {
                preset: Some("fcn3-erf-he3".into()),
                phase: Some("N1,N2".into()),
                grid: Some(100_000),
                ..Default::default()
            },
            &Cancel::none(),
        )
        .unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.contains("grid = 100000"), "{}", e.message);
    }

    /// The engine answers the paper's Table 1 exponent and the CLI's message for bad TOML.
    #[test]
    fn predict_matches_the_engine_and_its_errors() {
        let v = predict(
            &PredictRequest {
                preset: Some("fcn3-erf-he3".into()),
                ..Default::default()
            },
            &Cancel::none(),
        )
        .unwrap();
        let direct = to_json(
            &Architecture::from_preset("fcn3-erf-he3")
                .unwrap()
                .predict(None)
                .unwrap(),
        );
        assert_eq!(v["prediction"], direct);
        let bad = "[network\nkind = 1";
        let e = predict(
            &PredictRequest {
                toml: Some(bad.into()),
                ..Default::default()
            },
            &Cancel::none(),
        )
        .unwrap_err();
        let lib = Architecture::from_toml(bad, EDITOR_SOURCE, None).unwrap_err();
        assert_eq!((e.status, e.message), (400, lib.to_string()));
        let by_path = "[network]\nkind = \"catalog\"\ncatalog = \"/etc/hostname\"\n";
        let e = predict(
            &PredictRequest {
                toml: Some(by_path.into()),
                ..Default::default()
            },
            &Cancel::none(),
        )
        .unwrap_err();
        assert!(e.message.contains("not a built-in entry"), "{}", e.message);
        let builtin = "[network]\nkind = \"catalog\"\ncatalog = \"cnn-patches\"\n";
        assert!(predict(
            &PredictRequest {
                toml: Some(builtin.into()),
                ..Default::default()
            },
            &Cancel::none()
        )
        .is_ok());
    }

    /// The phase map asks its stop flag before each cell and gives up when told to; a map
    /// whose estimate exceeds the time left is refused before it starts, naming the estimate.
    #[test]
    fn phase_maps_stop_when_told_and_over_estimates_are_refused() {
        let arch = Architecture::from_preset("fcn3-erf-he3").unwrap();
        let asked = std::cell::Cell::new(0usize);
        let e = phase_map_until(
            &arch,
            &arch.regime,
            ("N1", "N2"),
            Q::from_integer(0),
            Q::from_integer(6),
            9,
            &|| {
                asked.set(asked.get() + 1);
                asked.get() > 5
            },
        )
        .unwrap_err();
        assert_eq!(asked.get(), 6);
        assert!(
            e.to_string().contains("stopped after 5 of its 81 cells"),
            "{e}"
        );
        let ms = std::time::Duration::from_millis;
        assert!(refuse_over_estimate(41, ms(5), ms(10_000)).is_ok());
        let e = refuse_over_estimate(41, ms(7), ms(10_000)).unwrap_err();
        assert_eq!(e.status, 503);
        assert!(
            e.message
                .contains("about 11.8 s (41² = 1681 predictions at 7.0 ms each")
                && e.message.contains("at most 37"),
            "{}",
            e.message
        );
    }

    /// Out-of-range numbers are refused as the CLI refuses them, with the parameter's name.
    #[test]
    fn the_api_refuses_what_the_cli_refuses() {
        for (k, v, needle) in [
            (
                "u",
                "1e308",
                "parameter u = \"1e308\" is not allowed; it is too large",
            ),
            ("u", "1e13", "parameter u = 10000000000000 is not allowed"),
            (
                "sigma_w2",
                "1e-200",
                "parameter sigma_w2 = \"1e-200\" is not allowed; it is too small",
            ),
            ("rho_max", "1e-7", "parameter rho_max"),
            (
                "c_min",
                "-1e7",
                "parameter c_min = -10000000 is not allowed",
            ),
        ] {
            let e = cavity_view(&params(&[(k, v)])).unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.message.contains(needle), "{k}={v}: {}", e.message);
        }
        let e = predict(
            &PredictRequest {
                preset: Some("fcn3-erf-he3".into()),
                at: Some("K=d^2".into()),
                ..Default::default()
            },
            &Cancel::none(),
        )
        .unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.contains("names the scale 'K'"), "{}", e.message);
    }

    const KEYS: [&str; 16] = [
        "sigma_w2",
        "b",
        "c",
        "u",
        "d",
        "points",
        "mode",
        "n",
        "t",
        "s_a2",
        "rho_max",
        "p",
        "diagram_points",
        "c_min",
        "c_max",
        "junk",
    ];

    fn value_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<f64>().prop_map(|x| x.to_string()),
            (-5.0f64..60.0).prop_map(|x| x.to_string()),
            (0u32..3000).prop_map(|x| x.to_string()),
            Just("finite".to_string()),
            ".{0,12}",
        ]
    }

    fn no_non_finite(v: &Value) -> bool {
        match v {
            Value::Number(n) => n.as_f64().is_some_and(f64::is_finite),
            Value::Array(a) => a.iter().all(no_non_finite),
            Value::Object(o) => o.values().all(no_non_finite),
            _ => true,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Random parameter sets never panic: an answer with finite numbers, or a 4xx.
        #[test]
        fn fuzzed_view_parameters_never_panic(
            pairs in proptest::collection::vec((0usize..KEYS.len(), value_strategy()), 0..6)
        ) {
            let q = Params(pairs.into_iter().map(|(k, v)| (KEYS[k].to_string(), v)).collect());
            match cavity_view(&q) {
                Ok(v) => prop_assert!(
                    no_non_finite(&v) && v["point"]["u"].is_number()
                        && v["phase"]["u_coexist"]["u"].is_number(),
                    "{v}"
                ),
                Err(e) => prop_assert!((400..500).contains(&e.status) && !e.message.is_empty()),
            }
        }

        /// Random TOML text, regimes and phase requests never panic (grids kept small or past
        /// the limit: a valid 41 × 41 map is 1681 predictions, too slow for a fuzz case).
        #[test]
        fn fuzzed_predict_requests_never_panic(
            toml in ".{0,80}", at in ".{0,12}", phase in prop_oneof![Just("N1,N2".to_string()), ".{0,8}"],
            grid in prop_oneof![0usize..10, 42usize..60], use_preset in any::<bool>()
        ) {
            let req = PredictRequest {
                toml: (!use_preset).then_some(toml),
                preset: use_preset.then(|| "fcn3-erf-he3".to_string()),
                at: Some(at),
                phase: Some(phase),
                range: None,
                grid: Some(grid),
            };
            match predict(&req, &Cancel::none()) {
                Ok(v) => prop_assert!(no_non_finite(&v) && v["prediction"]["winners"].is_array()),
                Err(e) => prop_assert!((400..500).contains(&e.status) && !e.message.is_empty()),
            }
        }
    }
}
