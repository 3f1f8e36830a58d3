//! The sweep tables of an experiment file (spec 03 "Experiment files and sweeps").
//!
//! An experiment file is the Langevin engine's file (`[model]`, `[data]`, `[target]`,
//! `[sampler]`, `[priors]`, see [`crate::sim::config`]) plus three optional tables that only
//! sweeps read:
//!
//! ```toml
//! [sweep]                      # lists over any experiment field: the grid is their product
//! data.d = [10, 20, 40]
//! data.p_over_d = [5, 10, 20]  # derived field: P = round(ratio · d)
//! sampler.seed = [1, 2]
//! follow = { "model.widths" = "data.d" }   # every hidden width equals d at each point (N = d)
//!
//! [analysis]                   # defaults of `flscale pstar | fit | plot`
//! x = "p"                      # crossing variable of P*
//! group = "d"                  # one P* per value of this
//! threshold = 0.1              # A_f = 0.1 (paper App. F.0.1)
//! fit = { y = "pstar", x = "d" }
//! predict = { preset = "fcn2-erf-he3", at = "N=d" }
//!
//! [quick]                      # `--quick`: smaller sizes (tests, a first look)
//! set = { "sampler.steps" = 2000, "sampler.burn_in" = 1000 }
//! sweep = { "data.d" = [8, 12, 16] }
//! ```
//!
//! `[free_energy]` (the umbrella windows of `flscale free-energy`, [`crate::free_energy::config`])
//! is taken out and kept beside the grid the same way.
//!
//! The engine's own tables use `deny_unknown_fields`, so these tables are removed before each
//! grid point is handed to [`ExperimentConfig::from_toml`]: every run is validated by the same
//! loader as `flscale sample`, and all of them are validated before the first run starts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::{Table, Value};

use crate::error::{Error, Result};
use crate::free_energy::config::FreeEnergyConfig;
use crate::free_energy::window::FreeEnergyPlan;
use crate::sim::ExperimentConfig;

/// Fields that are not in the engine's file but are computed at each grid point.
const DERIVED: [&str; 2] = ["data.p_over_d", "model.width"];

/// Fields that hold a size (a whole number ≥ 1; `data.p` may be 0, which samples the prior).
const SIZES: [&str; 12] = [
    "data.d",
    "data.p",
    "data.n_test",
    "data.tokens",
    "model.patch",
    "model.heads",
    "model.widths",
    "model.width",
    "sampler.steps",
    "sampler.thin",
    "sampler.chains",
    "sampler.burn_in",
];

/// Every field of the engine's experiment file (spec 02) as a dotted path, read from the
/// config types' `Deserialize` implementations ([`super::fields`]), so a field added to
/// [`ExperimentConfig`] is sweepable at once. A sweep over a field that is not among them is
/// rejected before anything runs; the engine's loader still validates every grid point.
fn engine_fields() -> &'static [String] {
    static FIELDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    FIELDS.get_or_init(super::fields::field_paths::<ExperimentConfig>)
}

/// One swept field and its values, in the file's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    /// Dotted path, e.g. `data.d`.
    pub field: String,
    /// The values (TOML values, so that lists such as `model.widths` can be swept too).
    pub values: Vec<Value>,
}

/// What `flscale fit` fits by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitSpec {
    /// `"pstar"` (P\* per group) or an observable with per-chain values: alignment, test_mse,
    /// r_overlap2, outliers.
    #[serde(default = "default_fit_y")]
    pub y: String,
    /// The variable of the fit, e.g. `d` or `n1`.
    #[serde(default = "default_group")]
    pub x: String,
}

/// Which exponent of the scaling engine is printed beside the measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictSpec {
    /// A built-in architecture preset (`flscale presets`), e.g. `fcn2-erf-he3`.
    pub preset: String,
    /// Regime assignments, e.g. `N=d` (the `--at` syntax of `flscale predict`).
    #[serde(default)]
    pub at: Option<String>,
    /// `"pstar"` (the exponent of P\* in d) or the name of a free parameter of the winning
    /// pattern (e.g. `M`, the number of specialising neurons).
    #[serde(default = "default_fit_y")]
    pub quantity: String,
    /// The scale whose exponent is read from the parameter's optimal monomial (e.g. `N`).
    #[serde(default = "default_scale")]
    pub scale: String,
}

/// The bracket factor x_hi/x_lo below which a crossing counts as resolved (the default of
/// `flscale sweep --refine-pstar`): its uniform-in-log uncertainty is then ≤ 2.8 % of P\*.
pub const DEFAULT_RESOLUTION: f64 = 1.1;

/// `[analysis]`: defaults for `pstar`, `fit` and `plot`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalysisSpec {
    /// Variable in which the threshold crossing is interpolated (log scale), default `p`.
    #[serde(default = "default_x")]
    pub x: String,
    /// One P\* per value of this variable (default `d`).
    #[serde(default = "default_group")]
    pub group: String,
    /// Observable that crosses the threshold (default `alignment`).
    #[serde(default = "default_observable")]
    pub observable: String,
    /// Threshold (default 0.1, the paper's A_f = 0.1 of App. F.0.1).
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// The observable falls as `x` grows (default false): the crossing is then the first
    /// downward one — A_f against `sqrt_ld3_over_p` = √(L·d³)/P in paper Fig. 3(b).
    #[serde(default)]
    pub falling: bool,
    /// Bracket factor x_hi/x_lo at or below which a P\* crossing counts as resolved (default
    /// 1.1, [`DEFAULT_RESOLUTION`]); coarser brackets are reported and `--refine-pstar` bisects
    /// them. Left out of the manifest at its default, so that stores written before it existed
    /// still resume.
    #[serde(
        default = "default_pstar_resolution",
        skip_serializing_if = "is_default_pstar_resolution"
    )]
    pub pstar_resolution: f64,
    /// Where P\* comes from (default `"crossing"`, the threshold crossing of `observable`);
    /// `"coexistence"` takes P\*\_coex and both spinodals from the free energy at every grid
    /// point ([`crate::free_energy::coexistence`]) and needs a `[free_energy]` table. Left out
    /// of the manifest at its default, as `pstar_resolution`.
    #[serde(default, skip_serializing_if = "PstarSource::is_crossing")]
    pub pstar: PstarSource,
    /// Default fit.
    #[serde(default)]
    pub fit: Option<FitSpec>,
    /// The engine's prediction for the same architecture.
    #[serde(default)]
    pub predict: Option<PredictSpec>,
}

/// Where `pstar`, `fit` and `plot` take P\* from (`[analysis] pstar`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PstarSource {
    /// The crossing of `observable` through `threshold` in `x` (paper App. F.0.1).
    #[default]
    Crossing,
    /// The free energies of the `[free_energy]` windows at every grid point: the coexistence
    /// P\*\_coex and the spinodals of the lazy and the specialised basin, each fitted against
    /// the group variable.
    Coexistence,
}

impl PstarSource {
    fn is_crossing(&self) -> bool {
        *self == PstarSource::Crossing
    }
}

fn default_fit_y() -> String {
    "pstar".into()
}
fn default_group() -> String {
    "d".into()
}
fn default_scale() -> String {
    "d".into()
}
fn default_x() -> String {
    "p".into()
}
fn default_observable() -> String {
    "alignment".into()
}
fn default_pstar_resolution() -> f64 {
    DEFAULT_RESOLUTION
}
fn is_default_pstar_resolution(r: &f64) -> bool {
    *r == DEFAULT_RESOLUTION
}
fn default_threshold() -> f64 {
    0.1
}

impl Default for AnalysisSpec {
    fn default() -> Self {
        AnalysisSpec {
            x: default_x(),
            group: default_group(),
            observable: default_observable(),
            threshold: default_threshold(),
            falling: false,
            pstar_resolution: default_pstar_resolution(),
            pstar: PstarSource::Crossing,
            fit: None,
            predict: None,
        }
    }
}

/// One grid point, ready to run.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// Position in the full grid (0-based, the product order: the last field varies fastest).
    pub index: usize,
    /// Directory name, `run-00012`.
    pub id: String,
    /// The swept fields' values at this point, in axis order.
    pub point: Vec<(String, Value)>,
    /// The experiment file of this run (what the engine's loader accepted).
    pub toml: String,
    /// The validated configuration.
    pub config: ExperimentConfig,
}

impl RunPlan {
    /// The point as the sweep runner shows it: `field=value` pairs in axis order, separated by
    /// spaces (`data.d=8 data.p_over_d=4`); empty without a grid.
    pub fn label(&self) -> String {
        self.point
            .iter()
            .map(|(f, v)| format!("{f}={}", show_value(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The resolved coordinates the analysis uses: d, p, p_over_d, n1 … (hidden widths),
    /// kappa, seed, and every numeric swept field under its own path.
    pub fn coordinates(&self) -> BTreeMap<String, f64> {
        let c = &self.config;
        let mut m = BTreeMap::new();
        m.insert("d".to_string(), c.data.d as f64);
        m.insert("p".to_string(), c.data.p as f64);
        m.insert("p_over_d".to_string(), c.data.p as f64 / c.data.d as f64);
        for (i, &w) in c.model.widths.iter().enumerate() {
            m.insert(format!("n{}", i + 1), w as f64);
        }
        m.insert("kappa".to_string(), c.sampler.kappa);
        m.insert("seed".to_string(), c.sampler.seed as f64);
        m.insert("temperature".to_string(), c.sampler.temperature);
        if let (Some(l), Some(h)) = (c.data.tokens, c.model.heads()) {
            // Attention (paper App. E.3, Fig. 3b): context length L, heads H and the scale
            // √(L·d³)/P at which O(1) alignment appears (P* ∝ √(L·H)·d^{3/2}).
            let (l, d) = (l as f64, c.data.d as f64);
            m.insert("tokens".to_string(), l);
            m.insert("heads".to_string(), h as f64);
            if c.data.p > 0 {
                m.insert(
                    "sqrt_ld3_over_p".to_string(),
                    (l * d * d * d).sqrt() / c.data.p as f64,
                );
            }
        }
        for (k, v) in &self.point {
            if let Some(x) = as_f64(v) {
                m.insert(k.clone(), x);
            }
        }
        m
    }
}

/// One grid point of a free-energy sweep: its free-energy plan and how the sweep names it.
#[derive(Debug, Clone)]
pub struct FreeEnergyCell {
    /// Position in the full grid (as [`RunPlan::index`]).
    pub index: usize,
    /// Directory name, `run-00012` (as [`RunPlan::id`]).
    pub id: String,
    /// The point as the sweep runner shows it ([`RunPlan::label`]).
    pub label: String,
    /// The swept fields' values at this point, in axis order.
    pub point: Vec<(String, Value)>,
    /// The resolved coordinates (d, p, …; [`RunPlan::coordinates`]).
    pub coordinates: BTreeMap<String, f64>,
    /// The point's experiment with the `[free_energy]` table, checked.
    pub plan: FreeEnergyPlan,
}

/// A parsed sweep: the base experiment, the grid and every run.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Name of the source in messages.
    pub source: String,
    /// The experiment without `[sweep]`, `[analysis]`, `[quick]` (and with quick overrides
    /// applied when asked).
    pub base: Table,
    /// The grid axes, in the order they appear after sorting by path.
    pub axes: Vec<Axis>,
    /// `target ← source` field links applied at every point.
    pub follow: Vec<(String, String)>,
    /// Analysis defaults.
    pub analysis: AnalysisSpec,
    /// Every grid point.
    pub runs: Vec<RunPlan>,
    /// Whether the `[quick]` overrides were applied.
    pub quick: bool,
    /// `[slurm]`: knobs of the sbatch script of `--emit-slurm` ([`super::slurm`]).
    pub slurm: super::slurm::SlurmSpec,
    /// `[free_energy]`: the umbrella windows of `flscale free-energy`, parsed but not yet
    /// checked against the model ([`crate::free_energy::window::FreeEnergyPlan::new`] does).
    /// The other commands ignore it.
    pub free_energy: Option<FreeEnergyConfig>,
}

/// A TOML value as a number, if it is one.
pub fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// A compact, comma-free rendering of a value for CSV cells and messages (`[40;40]`).
pub fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(show_value).collect::<Vec<_>>().join(";")
        ),
        other => other.to_string(),
    }
}

fn flatten(prefix: &str, table: &Table, out: &mut Vec<(String, Value)>) {
    for (k, v) in table {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Table(t) => flatten(&path, t, out),
            other => out.push((path, other.clone())),
        }
    }
}

fn known_field(path: &str) -> bool {
    DERIVED.contains(&path) || engine_fields().iter().any(|f| f == path)
}

fn known_list() -> String {
    let mut v: Vec<&str> = engine_fields().iter().map(String::as_str).collect();
    v.extend(DERIVED);
    v.join(", ")
}

fn check_field(path: &str, place: &str) -> Result<()> {
    if known_field(path) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{place} names the field `{path}`, which is not an experiment field; allowed: {}",
            known_list()
        )))
    }
}

/// Checks that a swept size is a whole number (≥ 1, or ≥ 0 for `data.p`/`burn_in`).
fn check_size(path: &str, i: usize, v: &Value) -> Result<()> {
    if !SIZES.contains(&path) {
        if path == "data.p_over_d" {
            return match as_f64(v) {
                Some(x) if x.is_finite() && x >= 0.0 => Ok(()),
                _ => Err(Error::invalid(format!(
                    "sweep.{path}[{i}] = {} is not allowed; it must be a finite number >= 0",
                    show_value(v)
                ))),
            };
        }
        return Ok(());
    }
    let min = if path == "data.p" || path == "sampler.burn_in" {
        0
    } else {
        1
    };
    let ok = |x: &Value| matches!(x, Value::Integer(n) if *n >= min);
    let good = match v {
        Value::Array(a) if path == "model.widths" => !a.is_empty() && a.iter().all(ok),
        other => ok(other),
    };
    if good {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "sweep.{path}[{i}] = {} is not allowed; {path} {} whole number(s) >= {min}",
            show_value(v),
            if path == "model.widths" {
                "takes lists of"
            } else {
                "is a"
            }
        )))
    }
}

fn get_mut_path<'a>(table: &'a mut Table, path: &str) -> Result<&'a mut Table> {
    let (head, _) = path
        .split_once('.')
        .ok_or_else(|| Error::invalid(format!("`{path}` is not a dotted field path")))?;
    let entry = table
        .entry(head.to_string())
        .or_insert_with(|| Value::Table(Table::new()));
    match entry {
        Value::Table(t) => Ok(t),
        _ => Err(Error::invalid(format!("`{head}` is not a table"))),
    }
}

/// Sets `path` (`table.field`) in an experiment table; derived fields are resolved later.
fn set_field(table: &mut Table, path: &str, value: Value) -> Result<()> {
    let field = path
        .split_once('.')
        .map(|x| x.1)
        .unwrap_or(path)
        .to_string();
    get_mut_path(table, path)?.insert(field, value);
    Ok(())
}

fn get_field<'a>(table: &'a Table, path: &str) -> Option<&'a Value> {
    let (head, field) = path.split_once('.')?;
    table.get(head)?.as_table()?.get(field)
}

impl Sweep {
    /// Parses an experiment file with optional `[sweep]`, `[analysis]` and `[quick]` tables;
    /// `quick` applies the `[quick]` overrides. Every grid point is built and validated by the
    /// engine's loader, so an invalid grid fails here, before any run starts.
    pub fn from_toml(text: &str, source: &str, quick: bool) -> Result<Sweep> {
        let mut doc: Table =
            toml::from_str(text).map_err(|e| crate::error::toml_error(source, text, &e))?;
        let sweep = take_table(&mut doc, "sweep", source)?;
        let analysis_t = take_table(&mut doc, "analysis", source)?;
        let quick_t = take_table(&mut doc, "quick", source)?;
        let slurm = parse_slurm(take_table(&mut doc, "slurm", source)?, source)?;
        let free_energy = parse_free_energy(take_table(&mut doc, "free_energy", source)?, source)?;
        let ctx = |e: Error| e.context(source);
        let mut axes = Vec::new();
        let mut follow = Vec::new();
        if let Some(sweep) = &sweep {
            let mut leaves = Vec::new();
            for (k, v) in sweep {
                if k == "follow" {
                    let Value::Table(f) = v else {
                        return Err(ctx(Error::invalid(
                            "sweep.follow must be a table such as { \"model.widths\" = \"data.d\" }",
                        )));
                    };
                    let mut links = Vec::new();
                    flatten("", f, &mut links);
                    for (target, src) in links {
                        let Value::String(src) = src else {
                            return Err(ctx(Error::invalid(format!(
                                "sweep.follow.\"{target}\" must name a field as a string, e.g. \"data.d\""
                            ))));
                        };
                        check_field(&target, "sweep.follow").map_err(ctx)?;
                        check_field(&src, &format!("sweep.follow.\"{target}\"")).map_err(ctx)?;
                        follow.push((target, src));
                    }
                    continue;
                }
                match v {
                    Value::Table(t) => flatten(k, t, &mut leaves),
                    other => leaves.push((k.clone(), other.clone())),
                }
            }
            if leaves.is_empty() {
                return Err(ctx(Error::invalid(
                    "[sweep] lists no field, which is not allowed; give at least one list, e.g. data.d = [10, 20, 40], or remove [sweep]",
                )));
            }
            for (path, v) in leaves {
                axes.push(make_axis(&path, v).map_err(ctx)?);
            }
        }
        if let Some(q) = &quick_t {
            if quick {
                apply_quick(&mut doc, &mut axes, q).map_err(ctx)?;
            } else {
                // Still validated, so that a broken [quick] table is found early.
                let mut d2 = doc.clone();
                let mut a2 = axes.clone();
                apply_quick(&mut d2, &mut a2, q).map_err(ctx)?;
            }
        }
        axes.sort_by(|a, b| a.field.cmp(&b.field));
        let fields: Vec<&str> = axes.iter().map(|a| a.field.as_str()).collect();
        if fields.contains(&"data.p") && fields.contains(&"data.p_over_d") {
            return Err(ctx(Error::invalid(
                "[sweep] lists both data.p and data.p_over_d, which is not allowed; keep one",
            )));
        }
        if fields.contains(&"model.widths") && fields.contains(&"model.width") {
            return Err(ctx(Error::invalid(
                "[sweep] lists both model.widths and model.width, which is not allowed; keep one",
            )));
        }
        let analysis: AnalysisSpec = match analysis_t {
            Some(t) => Value::Table(t).try_into().map_err(|e: toml::de::Error| {
                ctx(Error::invalid(format!(
                    "[analysis]: {}",
                    e.to_string().trim_end().replace('\n', " ")
                )))
            })?,
            None => AnalysisSpec::default(),
        };
        if !(analysis.threshold.is_finite()) {
            return Err(ctx(Error::invalid(format!(
                "analysis.threshold = {} is not allowed; it must be a finite number",
                analysis.threshold
            ))));
        }
        if !(analysis.pstar_resolution.is_finite() && analysis.pstar_resolution > 1.0) {
            return Err(ctx(Error::invalid(format!(
                "analysis.pstar_resolution = {} is not allowed; it is a bracket factor x_hi/x_lo above 1, e.g. 1.1",
                analysis.pstar_resolution
            ))));
        }
        if analysis.pstar == PstarSource::Coexistence && free_energy.is_none() {
            return Err(ctx(Error::invalid(
                "analysis.pstar = \"coexistence\" needs a [free_energy] table, since the thresholds come from the free energy at every grid point; add one (docs/free-energy.md) or remove pstar",
            )));
        }
        let mut sw = Sweep {
            source: source.to_string(),
            base: doc,
            axes,
            follow,
            analysis,
            runs: Vec::new(),
            quick,
            slurm,
            free_energy,
        };
        sw.runs = sw.expand()?;
        Ok(sw)
    }

    /// One free-energy plan per grid point: each point's experiment with the file's
    /// `[free_energy]` table, checked against that point's model, in grid order. Each cell
    /// carries the id and label the sweep runner gives the same point (`run-00012`,
    /// `data.d=8 data.p_over_d=4`), so that a driver can run each cell's windows in its own
    /// directory. A missing table or a point the table does not fit is refused in one sentence
    /// naming the point (exit code 2).
    pub fn free_energy_plans(&self) -> Result<Vec<FreeEnergyCell>> {
        let source = &self.source;
        let table = self.free_energy.clone().ok_or_else(|| {
            Error::invalid(format!(
                "{source} has no [free_energy] table; add one such as [free_energy] order_parameter = \"neuron_overlap\", neuron = 0, windows = 16 (docs/free-energy.md)"
            ))
        })?;
        self.runs
            .iter()
            .map(|r| {
                let label = r.label();
                let plan = FreeEnergyPlan::new(r.config.clone(), table.clone()).map_err(|e| {
                    if label.is_empty() {
                        e.context(source)
                    } else {
                        e.context(format!("{source} at the grid point {label}"))
                    }
                })?;
                Ok(FreeEnergyCell {
                    index: r.index,
                    id: r.id.clone(),
                    label,
                    point: r.point.clone(),
                    coordinates: r.coordinates(),
                    plan,
                })
            })
            .collect()
    }

    /// The free-energy plan of a file without a grid ([`Sweep::free_energy_plans`] of its one
    /// point). A grid is refused in one sentence (exit code 2): `flscale free-energy` runs one
    /// experiment, a driver over cells calls [`Sweep::free_energy_plans`].
    pub fn free_energy_plan(&self) -> Result<FreeEnergyPlan> {
        if self.runs.len() != 1 {
            return Err(Error::invalid(format!(
                "{}: [sweep] lists {} grid points, but a free-energy run is one experiment; remove [sweep] (or write one file per point)",
                self.source,
                self.runs.len()
            )));
        }
        let mut cells = self.free_energy_plans()?;
        Ok(cells.remove(0).plan)
    }

    /// Number of grid points.
    pub fn len(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// True if the grid is empty (never, after a successful parse).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn expand(&self) -> Result<Vec<RunPlan>> {
        let n = self.len();
        let mut runs = Vec::with_capacity(n);
        for index in 0..n {
            // Mixed-radix digits: the last axis varies fastest.
            let mut rest = index;
            let mut point = vec![(String::new(), Value::Boolean(false)); self.axes.len()];
            for (k, axis) in self.axes.iter().enumerate().rev() {
                let m = axis.values.len();
                point[k] = (axis.field.clone(), axis.values[rest % m].clone());
                rest /= m;
            }
            let mut table = self.base.clone();
            let mut p_over_d = None;
            let mut width = None;
            for (field, v) in &point {
                match field.as_str() {
                    "data.p_over_d" => p_over_d = as_f64(v),
                    "model.width" => width = Some(v.clone()),
                    _ => set_field(&mut table, field, v.clone())?,
                }
            }
            let label = point
                .iter()
                .map(|(k, v)| format!("{k} = {}", show_value(v)))
                .collect::<Vec<_>>()
                .join(", ");
            let where_ = if label.is_empty() {
                self.source.clone()
            } else {
                format!("{} at the grid point {label}", self.source)
            };
            let resolve = |table: &mut Table, field: &str, v: Value| -> Result<()> {
                if field == "model.widths" || field == "model.width" {
                    let layers = get_field(table, "model.widths")
                        .and_then(|w| w.as_array())
                        .map(|a| a.len())
                        .unwrap_or(1)
                        .max(1);
                    let v = match v {
                        Value::Array(a) => Value::Array(a),
                        scalar => Value::Array(vec![scalar; layers]),
                    };
                    set_field(table, "model.widths", v)
                } else {
                    set_field(table, field, v)
                }
            };
            if let Some(w) = width {
                resolve(&mut table, "model.width", w)?;
            }
            for (target, src) in &self.follow {
                let v = if src == "data.p_over_d" {
                    p_over_d.map(Value::Float)
                } else {
                    get_field(&table, src).cloned()
                };
                let v = v.ok_or_else(|| {
                    Error::invalid(format!(
                        "{where_}: sweep.follow.\"{target}\" = \"{src}\" names a field that has no value"
                    ))
                })?;
                resolve(&mut table, target, v)?;
            }
            if let Some(r) = p_over_d {
                let d = get_field(&table, "data.d")
                    .and_then(as_f64)
                    .ok_or_else(|| {
                        Error::invalid(format!("{where_}: data.p_over_d needs data.d to be set"))
                    })?;
                let p = (r * d).round();
                table
                    .entry("data".to_string())
                    .or_insert_with(|| Value::Table(Table::new()));
                set_field(&mut table, "data.p", Value::Integer(p as i64))?;
            }
            let text = toml::to_string(&table)
                .map_err(|e| Error::runtime(format!("cannot encode the grid point: {e}")))?;
            let config = ExperimentConfig::from_generated_toml(&text, &where_)?;
            runs.push(RunPlan {
                index,
                id: super::layout::run_id(index),
                point,
                toml: text,
                config,
            });
        }
        Ok(runs)
    }

    /// The runs of shard `i` of `n` (0-based): every n-th run starting at i, so that shards
    /// are disjoint, cover the grid and are balanced across the grid's fast axes.
    pub fn shard(&self, i: usize, n: usize) -> Vec<&RunPlan> {
        self.runs.iter().filter(|r| r.index % n == i).collect()
    }

    /// A deterministic JSON description of the grid (for the manifest).
    pub fn grid_json(&self) -> serde_json::Value {
        let axes: Vec<serde_json::Value> = self
            .axes
            .iter()
            .map(|a| {
                serde_json::json!({
                    "field": a.field,
                    "values": a.values.iter().map(toml_to_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        let follow: Vec<serde_json::Value> = self
            .follow
            .iter()
            .map(|(t, s)| serde_json::json!({"field": t, "follows": s}))
            .collect();
        serde_json::json!({"axes": axes, "follow": follow, "quick": self.quick})
    }
}

/// Converts a TOML value to JSON (datetimes become strings).
pub fn toml_to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Integer(i) => serde_json::json!(i),
        Value::Float(f) => serde_json::json!(f),
        Value::Boolean(b) => serde_json::json!(b),
        Value::Datetime(d) => serde_json::Value::String(d.to_string()),
        Value::Array(a) => serde_json::Value::Array(a.iter().map(toml_to_json).collect()),
        Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

/// `[slurm]`, validated.
fn parse_slurm(t: Option<Table>, source: &str) -> Result<super::slurm::SlurmSpec> {
    let Some(t) = t else {
        return Ok(super::slurm::SlurmSpec::default());
    };
    let spec: super::slurm::SlurmSpec =
        Value::Table(t).try_into().map_err(|e: toml::de::Error| {
            Error::invalid(format!(
                "{source}: [slurm]: {}",
                e.to_string().trim_end().replace('\n', " ")
            ))
        })?;
    spec.validate(&format!("{source} [slurm]"))?;
    Ok(spec)
}

/// `[free_energy]`, parsed (unknown fields and wrong types refused in one line).
fn parse_free_energy(t: Option<Table>, source: &str) -> Result<Option<FreeEnergyConfig>> {
    let Some(t) = t else {
        return Ok(None);
    };
    Value::Table(t)
        .try_into()
        .map(Some)
        .map_err(|e: toml::de::Error| {
            Error::invalid(format!(
                "{source}: [free_energy]: {}",
                e.to_string().trim_end().replace('\n', " ")
            ))
        })
}

fn take_table(doc: &mut Table, name: &str, source: &str) -> Result<Option<Table>> {
    match doc.remove(name) {
        None => Ok(None),
        Some(Value::Table(t)) => Ok(Some(t)),
        Some(_) => Err(Error::invalid(format!(
            "{source}: `{name}` must be a table ([{name}])"
        ))),
    }
}

fn make_axis(path: &str, v: Value) -> Result<Axis> {
    check_field(path, &format!("sweep.{path}"))?;
    let Value::Array(values) = v else {
        return Err(Error::invalid(format!(
            "sweep.{path} = {} is not a list; write sweep.{path} = [{}]",
            show_value(&v),
            show_value(&v)
        )));
    };
    if values.is_empty() {
        return Err(Error::invalid(format!(
            "sweep.{path} = [] is an empty grid, which is not allowed; give at least one value"
        )));
    }
    for (i, x) in values.iter().enumerate() {
        check_size(path, i, x)?;
    }
    Ok(Axis {
        field: path.to_string(),
        values,
    })
}

/// `[quick]`: `set` overrides fields of the base experiment, `sweep` replaces axes.
fn apply_quick(doc: &mut Table, axes: &mut Vec<Axis>, q: &Table) -> Result<()> {
    for (k, v) in q {
        match (k.as_str(), v) {
            ("set", Value::Table(t)) => {
                let mut leaves = Vec::new();
                flatten("", t, &mut leaves);
                for (path, v) in leaves {
                    check_field(&path, "quick.set")?;
                    if DERIVED.contains(&path.as_str()) {
                        return Err(Error::invalid(format!(
                            "quick.set names `{path}`, a derived field that only [sweep] can list"
                        )));
                    }
                    set_field(doc, &path, v)?;
                }
            }
            ("sweep", Value::Table(t)) => {
                let mut leaves = Vec::new();
                flatten("", t, &mut leaves);
                for (path, v) in leaves {
                    let axis = make_axis(&path, v)?;
                    match axes.iter_mut().find(|a| a.field == axis.field) {
                        Some(a) => *a = axis,
                        None => axes.push(axis),
                    }
                }
            }
            (other, _) => {
                return Err(Error::invalid(format!(
                    "quick.{other} is not allowed; [quick] takes the tables set and sweep"
                )))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const BASE: &str = r#"
[model]
kind = "fcn"
activation = "erf"
widths = [8]
[data]
d = 8
p = 40
n_test = 200
[target]
hermite = 3
[sampler]
kappa = 1.0
step = 1e-3
steps = 200
burn_in = 100
thin = 10
chains = 4
seed = 1
"#;

    #[test]
    fn grid_is_the_product_in_sorted_field_order() {
        let text = format!(
            "{BASE}\n[sweep]\ndata.d = [4, 6]\ndata.p_over_d = [2, 5.5]\nsampler.seed = [1, 2, 3]\nfollow = {{ \"model.widths\" = \"data.d\" }}\n"
        );
        let s = Sweep::from_toml(&text, "exp.toml", false).unwrap();
        assert_eq!(s.len(), 12);
        let fields: Vec<&str> = s.axes.iter().map(|a| a.field.as_str()).collect();
        assert_eq!(fields, ["data.d", "data.p_over_d", "sampler.seed"]);
        // Index 7 = (d index 1, ratio index 0, seed index 1): d = 6, P = 12, seed = 2.
        let r = &s.runs[7];
        assert_eq!(r.config.data.d, 6);
        assert_eq!(r.config.data.p, 12);
        assert_eq!(r.config.sampler.seed, 2);
        assert_eq!(r.config.model.widths, vec![6]);
        // P = round(5.5 · 4) = 22.
        assert_eq!(s.runs[3].config.data.p, 22);
        assert_eq!(s.runs[3].config.data.d, 4);
        let c = r.coordinates();
        assert_eq!(c["n1"], 6.0);
        assert_eq!(c["p_over_d"], 2.0);
        // Shards are disjoint and cover the grid.
        let mut all: Vec<usize> = (0..3)
            .flat_map(|i| s.shard(i, 3).into_iter().map(|r| r.index))
            .collect();
        all.sort();
        assert_eq!(all, (0..12).collect::<Vec<_>>());
    }

    #[test]
    fn no_sweep_table_is_one_run_and_quick_overrides_apply() {
        let s = Sweep::from_toml(BASE, "exp.toml", false).unwrap();
        assert_eq!(s.runs.len(), 1);
        let text = format!(
            "{BASE}\n[sweep]\ndata.d = [4, 6]\n[quick]\nset = {{ \"sampler.steps\" = 150 }}\nsweep = {{ \"data.d\" = [5] }}\n"
        );
        let full = Sweep::from_toml(&text, "exp.toml", false).unwrap();
        assert_eq!(full.runs.len(), 2);
        assert_eq!(full.runs[0].config.sampler.steps, 200);
        let q = Sweep::from_toml(&text, "exp.toml", true).unwrap();
        assert_eq!(q.runs.len(), 1);
        assert_eq!(q.runs[0].config.data.d, 5);
        assert_eq!(q.runs[0].config.sampler.steps, 150);
    }

    #[test]
    fn the_free_energy_table_is_kept_and_quick_still_applies() {
        let table =
            "[free_energy]\norder_parameter = \"neuron_overlap\"\nneuron = 0\nwindows = 4\n";
        let text = format!("{BASE}\n{table}[quick]\nset = {{ \"sampler.steps\" = 150 }}\n");
        let q = Sweep::from_toml(&text, "exp.toml", true).unwrap();
        assert_eq!(q.runs.len(), 1);
        assert_eq!(q.runs[0].config.sampler.steps, 150);
        let fe = q.free_energy.expect("the table is kept");
        assert_eq!((fe.windows, fe.neuron), (4, Some(0)));
        // The run's own file does not carry the table: `flscale sample` accepts it.
        assert!(!q.runs[0].toml.contains("free_energy"));
        assert!(Sweep::from_toml(BASE, "exp.toml", false)
            .unwrap()
            .free_energy
            .is_none());
        let bad =
            format!("{BASE}\n[free_energy]\norder_parameter = \"neuron_overlap\"\nwindow = 4\n");
        let err = Sweep::from_toml(&bad, "exp.toml", false).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        let msg = err.to_string();
        assert!(
            msg.starts_with("exp.toml: [free_energy]: unknown field `window`")
                && !msg.contains('\n'),
            "{msg}"
        );
    }

    #[test]
    fn a_free_energy_grid_gives_one_plan_per_point_named_as_the_runner_names_it() {
        let table =
            "[free_energy]\norder_parameter = \"neuron_overlap\"\nneuron = 5\nwindows = 4\n";
        let grid = "[sweep]\ndata.d = [6, 10]\ndata.p_over_d = [2, 4]\nfollow = { \"model.widths\" = \"data.d\" }\n";
        let text = format!("{BASE}\n{grid}{table}");
        let s = Sweep::from_toml(&text, "exp.toml", false).unwrap();
        let cells = s.free_energy_plans().unwrap();
        assert_eq!(cells.len(), 4);
        for (c, r) in cells.iter().zip(&s.runs) {
            assert_eq!((c.index, c.id.as_str()), (r.index, r.id.as_str()));
            assert_eq!(c.plan.config.data.d, r.config.data.d);
            assert_eq!(c.plan.config.data.p, r.config.data.p);
            assert_eq!(c.plan.windows(), 4);
            assert_eq!(c.coordinates["p"], r.config.data.p as f64);
        }
        assert_eq!(cells[3].id, "run-00003");
        assert_eq!(cells[3].label, "data.d=10 data.p_over_d=4");
        assert_eq!(cells[3].plan.config.data.p, 40);
        // The one-cell form refuses the grid in one sentence.
        let e = s.free_energy_plan().unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("lists 4 grid points"), "{e}");
        // A point the table does not fit is named: neuron 5 exists at d = 10 (N = 10) but not
        // at N = 4.
        let narrow = text.replace("data.d = [6, 10]", "data.d = [4, 10]");
        let e = Sweep::from_toml(&narrow, "exp.toml", false)
            .unwrap()
            .free_energy_plans()
            .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let msg = e.to_string();
        assert!(
            msg.starts_with("exp.toml at the grid point data.d=4 data.p_over_d=2: ")
                && msg.contains("free_energy.neuron = 5")
                && !msg.contains('\n'),
            "{msg}"
        );
        // Without a grid, both forms give the file's one plan.
        let one = Sweep::from_toml(&format!("{BASE}\n{table}"), "exp.toml", false).unwrap();
        let cells = one.free_energy_plans().unwrap();
        assert_eq!((cells.len(), cells[0].label.as_str()), (1, ""));
        assert_eq!(one.free_energy_plan().unwrap().config.data.d, 8);
        let e = Sweep::from_toml(&format!("{BASE}\n{grid}"), "exp.toml", false)
            .unwrap()
            .free_energy_plans()
            .unwrap_err();
        assert!(e.to_string().contains("has no [free_energy] table"), "{e}");
    }

    #[test]
    fn analysis_pstar_chooses_the_source_of_pstar() {
        let s = Sweep::from_toml(BASE, "exp.toml", false).unwrap();
        assert_eq!(s.analysis.pstar, PstarSource::Crossing);
        // Left out of the manifest at its default.
        let json = serde_json::to_string(&s.analysis).unwrap();
        assert!(!json.contains("pstar\""), "{json}");
        let table = "[free_energy]\norder_parameter = \"aligned_fraction\"\nwindows = 4\n";
        let text = format!("{BASE}\n[analysis]\npstar = \"coexistence\"\n{table}");
        let s = Sweep::from_toml(&text, "exp.toml", false).unwrap();
        assert_eq!(s.analysis.pstar, PstarSource::Coexistence);
        assert!(serde_json::to_string(&s.analysis)
            .unwrap()
            .contains("\"pstar\":\"coexistence\""));
        let e = Sweep::from_toml(&text.replace(table, ""), "exp.toml", false).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("needs a [free_energy] table") && !e.to_string().contains('\n'),
            "{e}"
        );
        let e =
            Sweep::from_toml(&text.replace("coexistence", "coex"), "exp.toml", false).unwrap_err();
        assert!(e.to_string().contains("unknown variant `coex`"), "{e}");
    }

    #[test]
    fn malformed_grids_fail_naming_the_field() {
        let cases = [
            ("data.dd = [1, 2]", "`data.dd`"),
            ("data.d = []", "sweep.data.d = [] is an empty grid"),
            ("data.d = [4, -3]", "sweep.data.d[1] = -3"),
            ("data.d = 4", "sweep.data.d = 4 is not a list"),
            ("model.widths = [[4], []]", "sweep.model.widths[1]"),
            ("sampler.kappa = [1.0, -1.0]", "sampler.kappa = -1"),
            (
                "data.p = [4]\ndata.p_over_d = [2]",
                "both data.p and data.p_over_d",
            ),
        ];
        for (sweep, want) in cases {
            let text = format!("{BASE}\n[sweep]\n{sweep}\n");
            let e = Sweep::from_toml(&text, "exp.toml", false).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{sweep}");
            let msg = e.to_string();
            assert!(msg.contains(want), "{sweep}: {msg}");
            assert!(msg.starts_with("exp.toml"), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
        // The unknown-field message lists the allowed fields, read from the config types:
        // optional ones (target.parity, priors.sigma2) and derived ones included.
        let e = Sweep::from_toml(
            &format!("{BASE}\n[sweep]\ndata.dd = [1]\n"),
            "exp.toml",
            false,
        )
        .unwrap_err()
        .to_string();
        for f in [
            "data.d,",
            "target.parity",
            "priors.sigma2",
            "sampler.adapt_step",
            "data.p_over_d",
        ] {
            assert!(e.contains(f), "{f}: {e}");
        }
        let e = Sweep::from_toml(&format!("{BASE}\n[sweep]\n"), "exp.toml", false).unwrap_err();
        assert!(e.to_string().contains("lists no field"), "{e}");
        let e = Sweep::from_toml(
            &format!("{BASE}\n[analysis]\nthreshhold = 0.2\n"),
            "e",
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("threshhold"), "{e}");
    }

    /// Every experiment preset the repository ships, as text: the fuzz tests below mutate them.
    const PRESET_TEXTS: [&str; 8] = [
        include_str!("../../../../presets/experiments/blog.toml"),
        include_str!("../../../../presets/experiments/fig2a.toml"),
        include_str!("../../../../presets/experiments/fig2b.toml"),
        include_str!("../../../../presets/experiments/fig2c.toml"),
        include_str!("../../../../presets/experiments/fig3a.toml"),
        include_str!("../../../../presets/experiments/fig3b.toml"),
        include_str!("../../../../presets/experiments/fig3c.toml"),
        include_str!("../../../../presets/experiments/fig7.toml"),
    ];

    /// A parse failure must be bad input (exit code 2), on one line, naming the file.
    fn check_rejection(result: Result<Sweep>) {
        if let Err(e) = result {
            let Error::InvalidInput(msg) = &e else {
                panic!("a parse failure must be InvalidInput: {e}");
            };
            assert!(!msg.contains('\n'), "message spans lines: {msg}");
            assert!(
                msg.contains("fuzz.toml"),
                "message does not name the file: {msg}"
            );
        }
    }

    #[test]
    fn every_preset_parses_with_and_without_quick() {
        for text in PRESET_TEXTS {
            for quick in [false, true] {
                let sweep = Sweep::from_toml(text, "preset.toml", quick).unwrap();
                assert!(!sweep.is_empty());
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Arbitrary text never panics the sweep parser, and a rejection is one line of bad input.
        #[test]
        fn random_text_is_rejected_cleanly(text in "\\PC{0,300}") {
            check_rejection(Sweep::from_toml(&text, "fuzz.toml", false));
        }

        /// A shipped preset with one value replaced, a line dropped or the text cut short never
        /// panics the parser (the grid expansion included), and a rejection is one line of bad
        /// input naming the file.
        #[test]
        fn mutated_presets_are_rejected_cleanly(
            which in 0usize..8, line_pick in 0usize..200, cut in 0usize..4000, quick: bool,
            value in proptest::prop_oneof![
                proptest::strategy::Just("-1".to_string()), proptest::strategy::Just("0".to_string()),
                proptest::strategy::Just("nan".to_string()), proptest::strategy::Just("-inf".to_string()),
                proptest::strategy::Just("1e308".to_string()),
                proptest::strategy::Just("18446744073709551615".to_string()),
                proptest::strategy::Just("\"x\"".to_string()), proptest::strategy::Just("[]".to_string()),
                proptest::strategy::Just("[0, -3]".to_string()), proptest::strategy::Just("[[1, nan]]".to_string()),
                proptest::strategy::Just("{ a = 1 }".to_string()), proptest::strategy::Just("true".to_string()),
            ],
        ) {
            let text = PRESET_TEXTS[which];
            let lines: Vec<&str> = text.lines().collect();
            let assignments: Vec<usize> =
                (0..lines.len()).filter(|&i| lines[i].contains('=') && !lines[i].trim_start().starts_with('#')).collect();
            let target = assignments[line_pick % assignments.len()];
            let replaced: Vec<String> = lines.iter().enumerate().map(|(i, l)| {
                if i == target {
                    let key = l.split('=').next().unwrap_or("");
                    format!("{key}= {value}")
                } else {
                    l.to_string()
                }
            }).collect();
            check_rejection(Sweep::from_toml(&replaced.join("\n"), "fuzz.toml", quick));
            let dropped: Vec<&str> =
                lines.iter().enumerate().filter(|&(i, _)| i != target).map(|(_, l)| *l).collect();
            check_rejection(Sweep::from_toml(&dropped.join("\n"), "fuzz.toml", quick));
            let mut end = cut.min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            check_rejection(Sweep::from_toml(&text[..end], "fuzz.toml", quick));
        }
    }
}
