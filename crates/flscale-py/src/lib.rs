//! The native half of `import flscale`. Every function here is a thin adapter: it turns
//! Python arguments into the library's typed inputs, releases the GIL while the library
//! computes, and hands back the same JSON the CLI prints (the Python layer decodes it), so the
//! two front ends cannot drift apart. Errors map in one place ([`to_py_err`]): bad input is a
//! `ValueError` with the CLI's one-sentence message, a failed computation a `RuntimeError`.

use flscale::patterns::arch::{preset_text, Architecture, PRESETS};
use flscale::patterns::report::to_json;
use flscale::scaling::report::EnergyProblem;
use flscale::sim::config::ExperimentConfig;
use flscale::sim::driver::run::{Outcome, Run, RunObserver};
use flscale::{Error, ErrorKind};
use numpy::IntoPyArray;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The one map from library errors to Python exceptions.
fn to_py_err(e: Error) -> PyErr {
    match e.kind() {
        ErrorKind::InvalidInput => PyValueError::new_err(e.to_string()),
        ErrorKind::Runtime => PyRuntimeError::new_err(e.to_string()),
    }
}

fn encode(v: &serde_json::Value) -> PyResult<String> {
    serde_json::to_string(v)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot encode JSON: {e}")))
}

/// The first line of the TOML written from a dict: an error whose position is line 1 then
/// concerns the whole dict (a missing table), not its first key.
const DICT_HEADER: &str = "# written from a Python dict\n";

/// Turns a JSON object (from a Python dict) into TOML text, so that dicts go through the same
/// validated loaders as files; [`dict_error`] turns the loaders' positions back into keys.
fn json_to_toml(source: &str, what: &str) -> flscale::Result<String> {
    let value: serde_json::Value =
        serde_json::from_str(source).map_err(|e| Error::invalid(format!("{what} dict: {e}")))?;
    let toml_value = toml::Value::try_from(value)
        .map_err(|e| Error::invalid(format!("{what} dict cannot be written as TOML: {e}")))?;
    toml::to_string(&toml_value)
        .map(|text| format!("{DICT_HEADER}{text}"))
        .map_err(|e| Error::invalid(format!("{what} dict cannot be written as TOML: {e}")))
}

/// An error about the TOML written from a dict: its "line L, column C" points into text the
/// caller never saw, so the dict's key at that line is named instead (`at network.widths`),
/// or nothing where the error concerns the whole dict.
fn dict_error(e: Error, text: &str, label: &str) -> Error {
    let Error::InvalidInput(m) = &e else { return e };
    let parsed = m
        .strip_prefix(&format!("{label}, line "))
        .and_then(|rest| rest.split_once(", column "))
        .and_then(|(line, rest)| Some((line.parse::<usize>().ok()?, rest.split_once(": ")?.1)));
    match parsed {
        Some((line, msg)) => match key_at_line(text, line) {
            Some(key) => Error::invalid(format!("{label}, at {key}: {msg}")),
            None => Error::invalid(format!("{label}: {msg}")),
        },
        None => e,
    }
}

/// The dotted key (or table) that line `line` (1-based) of generated TOML sets.
fn key_at_line(text: &str, line: usize) -> Option<String> {
    let mut table = String::new();
    for (i, l) in text.lines().enumerate().take(line) {
        let t = l.trim();
        if t.starts_with('[') {
            table = t.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            if i + 1 == line {
                return Some(table);
            }
        } else if i + 1 == line {
            let key = t.split_once('=')?.0.trim().trim_matches('"');
            return Some(if table.is_empty() {
                key.to_string()
            } else {
                format!("{table}.{key}")
            });
        }
    }
    None
}

/// Loads an architecture: `kind` is "preset", "file" or "toml" (TOML text), or "json" (a
/// JSON object with the TOML file's structure, from a Python dict).
fn load_architecture(source: &str, kind: &str) -> flscale::Result<Architecture> {
    match kind {
        "preset" => Architecture::from_preset(source),
        "file" => Architecture::from_file(std::path::Path::new(source)),
        "toml" => Architecture::from_toml(source, "architecture", None),
        "json" => {
            let text = json_to_toml(source, "architecture")?;
            Architecture::from_toml(&text, "architecture dict", None)
                .map_err(|e| dict_error(e, &text, "architecture dict"))
        }
        other => Err(Error::invalid(format!(
            "unknown architecture kind \"{other}\""
        ))),
    }
}

/// predict(source, kind, at) -> JSON text of `flscale predict --json`.
#[pyfunction]
#[pyo3(signature = (source, kind, at=None))]
fn predict(py: Python<'_>, source: String, kind: String, at: Option<String>) -> PyResult<String> {
    let value = py
        .detach(|| {
            let arch = load_architecture(&source, &kind)?;
            let pred = arch.predict(at.as_deref())?;
            Ok(to_json(&pred))
        })
        .map_err(to_py_err)?;
    encode(&value)
}

/// energy(expr, free, constraints, at) -> JSON text of `flscale energy --json`.
#[pyfunction]
fn energy(
    py: Python<'_>,
    expr: String,
    free: Vec<String>,
    constraints: Vec<String>,
    at: String,
) -> PyResult<String> {
    let problem = EnergyProblem {
        expr,
        free,
        constraints,
        at,
    };
    let value = py
        .detach(|| {
            problem
                .solve()
                .map(|(regime, min)| problem.to_json(&regime, &min))
        })
        .map_err(|e| {
            // As `flscale energy`: Python's `M**2` is written M^2 here.
            let mut inputs = vec![problem.expr.as_str(), problem.at.as_str()];
            inputs.extend(problem.constraints.iter().map(String::as_str));
            match (e, inputs.iter().find(|t| t.contains("**"))) {
                (Error::InvalidInput(m), Some(text)) => Error::InvalidInput(format!(
                    "{m}; powers are written with ^, not **: \"{}\"",
                    text.replace("**", "^")
                )),
                (e, _) => e,
            }
        })
        .map_err(to_py_err)?;
    encode(&value)
}

/// presets() -> list of (name, summary).
#[pyfunction]
fn presets() -> Vec<(String, String)> {
    PRESETS
        .iter()
        .map(|(n, s, _)| (n.to_string(), s.to_string()))
        .collect()
}

/// preset_toml(name) -> the preset's TOML text.
#[pyfunction]
fn preset_toml(name: String) -> PyResult<String> {
    preset_text(&name).map(str::to_string).map_err(to_py_err)
}

/// The memory check of `flscale sample` (docs/limits.md): the run's estimate
/// against `max_memory` ("8G", "500MB"; the CLI's `--max-memory`) or else `MemAvailable` of
/// /proc/meminfo. The work check is the caller's: a Python call has no `--yes` to give.
fn check_memory(cfg: &ExperimentConfig, max_memory: Option<&str>) -> flscale::Result<()> {
    let (limit, source) = match max_memory {
        Some(text) => (
            flscale::limits::parse_memory(text).map_err(|_| {
                Error::invalid(format!(
                    "max_memory = {text:?} is not allowed; give a size such as \"8G\", \"500M\" or \"16GiB\""
                ))
            })?,
            "max_memory",
        ),
        None => match std::fs::read_to_string("/proc/meminfo")
            .ok()
            .as_deref()
            .and_then(flscale::limits::mem_available)
        {
            Some(bytes) => (
                bytes,
                "MemAvailable in /proc/meminfo; max_memory= sets another limit",
            ),
            None => return Ok(()),
        },
    };
    flscale::sim::memory::sample(cfg).check_memory("this experiment", limit, source)
}

/// A run's observer that stops it on a pending signal (Ctrl-C), keeping the exception.
struct Signals<'a> {
    pending: &'a std::sync::Mutex<Option<PyErr>>,
}

impl flscale::free_energy::runner::WindowObserver for Signals<'_> {}

impl RunObserver for Signals<'_> {
    fn should_stop(&mut self) -> bool {
        Python::attach(|py| match py.check_signals() {
            Ok(()) => false,
            Err(e) => {
                if let Ok(mut slot) = self.pending.lock() {
                    *slot = Some(e);
                }
                true
            }
        })
    }
}

/// sample(source, kind, max_memory) -> (summary JSON text, dict of numpy arrays).
///
/// `kind` is "toml" (experiment TOML text) or "json" (a dict with the TOML file's structure).
/// `max_memory` (None: MemAvailable) bounds the run's estimated memory ([`check_memory`]).
/// The arrays: trace columns (`trace_step`, `trace_energy`, `trace_alignment`, `trace_test_mse`,
/// `trace_r_overlap2`, `trace_outliers`, `trace_burn_in`), per-chain time averages
/// (`chain_alignment`, `chain_test_mse`, `chain_r_overlap2`, `chain_outliers`; NaN marks a
/// diverged chain), the ρ histogram (`hist_edges`, `hist_counts`) and the ensemble-mean test
/// prediction (`mean_test_prediction`).
#[pyfunction]
fn sample<'py>(
    py: Python<'py>,
    source: String,
    kind: String,
    max_memory: Option<String>,
) -> PyResult<(String, Bound<'py, PyDict>)> {
    // Ctrl-C: the sampler asks after every block of steps; the check briefly re-attaches to
    // the interpreter, and the KeyboardInterrupt it raises is handed back to the caller.
    let pending: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
    let outcome = py.detach(|| {
        let cfg = match kind.as_str() {
            "json" => {
                let text = json_to_toml(&source, "experiment")?;
                ExperimentConfig::from_toml(&text, "experiment dict")
                    .map_err(|e| dict_error(e, &text, "experiment dict"))?
            }
            _ => ExperimentConfig::from_toml(&source, "experiment")?,
        };
        check_memory(&cfg, max_memory.as_deref())?;
        let mut signals = Signals { pending: &pending };
        Run::new(&cfg).observe(&mut signals).run()
    });
    if let Some(e) = pending.lock().ok().and_then(|mut slot| slot.take()) {
        return Err(e);
    }
    let result = outcome.and_then(Outcome::into_result).map_err(to_py_err)?;
    if result.all_diverged() {
        let chains: Vec<String> = result
            .summary
            .diverged_chains
            .iter()
            .map(|c| c.chain.to_string())
            .collect();
        return Err(PyRuntimeError::new_err(format!(
            "all chains diverged (chains {}); the step size is too large for this posterior: reduce sampler.step (e.g. by 10x)",
            chains.join(", ")
        )));
    }
    let summary = serde_json::to_value(&result.summary)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot encode the summary: {e}")))?;
    let arrays = PyDict::new(py);
    let t = &result.traces;
    let col = |f: &dyn Fn(&flscale::sim::driver::run::TraceRow) -> f64| {
        t.iter().map(f).collect::<Vec<f64>>()
    };
    arrays.set_item("trace_step", col(&|r| r.step as f64).into_pyarray(py))?;
    arrays.set_item(
        "trace_burn_in",
        t.iter()
            .map(|r| r.burn_in)
            .collect::<Vec<bool>>()
            .into_pyarray(py),
    )?;
    arrays.set_item("trace_energy", col(&|r| r.energy).into_pyarray(py))?;
    arrays.set_item("trace_alignment", col(&|r| r.alignment).into_pyarray(py))?;
    arrays.set_item("trace_test_mse", col(&|r| r.test_mse).into_pyarray(py))?;
    arrays.set_item("trace_r_overlap2", col(&|r| r.r_overlap2).into_pyarray(py))?;
    arrays.set_item("trace_outliers", col(&|r| r.outliers).into_pyarray(py))?;
    let c = &result.chains;
    let nan = |x: Option<f64>| x.unwrap_or(f64::NAN);
    arrays.set_item(
        "chain_alignment",
        c.iter()
            .map(|r| nan(r.alignment))
            .collect::<Vec<f64>>()
            .into_pyarray(py),
    )?;
    arrays.set_item(
        "chain_test_mse",
        c.iter()
            .map(|r| nan(r.test_mse))
            .collect::<Vec<f64>>()
            .into_pyarray(py),
    )?;
    arrays.set_item(
        "chain_r_overlap2",
        c.iter()
            .map(|r| nan(r.r_overlap2))
            .collect::<Vec<f64>>()
            .into_pyarray(py),
    )?;
    arrays.set_item(
        "chain_outliers",
        c.iter()
            .map(|r| nan(r.outliers))
            .collect::<Vec<f64>>()
            .into_pyarray(py),
    )?;
    arrays.set_item(
        "hist_edges",
        result.histogram.edges.clone().into_pyarray(py),
    )?;
    arrays.set_item(
        "hist_counts",
        result.histogram.counts.clone().into_pyarray(py),
    )?;
    arrays.set_item(
        "mean_test_prediction",
        result.mean_test_prediction.clone().into_pyarray(py),
    )?;
    Ok((encode(&summary)?, arrays))
}

fn serde_json_text<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot encode JSON: {e}")))
}

/// cavity_phase(sigma_w2, b, c, d) -> JSON text of `flscale cavity phase --json`.
#[pyfunction]
fn cavity_phase(py: Python<'_>, sigma_w2: f64, b: f64, c: f64, d: usize) -> PyResult<String> {
    let rep = py
        .detach(|| flscale::cavity::phase(sigma_w2, b, c, d))
        .map_err(to_py_err)?;
    serde_json_text(&rep)
}

/// cavity_solve(...) -> JSON text of `flscale cavity solve --json`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn cavity_solve(
    py: Python<'_>,
    p: usize,
    d: usize,
    n: usize,
    t: f64,
    s_a2: Option<f64>,
    sigma_w2: f64,
    eps: f64,
    seed: u64,
    p_test: usize,
    damping: f64,
    max_iter: usize,
    tol: f64,
) -> PyResult<String> {
    let prm = flscale::cavity::adaptive::AdaptiveParams {
        d,
        n,
        p,
        t,
        s_a2: s_a2.unwrap_or(1.0 / n.max(1) as f64),
        sigma_w2,
        eps,
        seed,
        p_test,
        damping,
        max_iter,
        tol,
    };
    let rep = py
        .detach(|| flscale::cavity::solve(&prm))
        .map_err(to_py_err)?;
    serde_json_text(&rep)
}

/// cavity_potential(rho, sigma_w2, b, c, u, finite) -> Ũ_u(ρ)/D (mean-field, `finite` None) or
/// U(ρ)/D for `finite = (d, p, t, s_a2)`, on the given ρ values.
#[pyfunction]
#[pyo3(signature = (rho, sigma_w2, b, c, u=None, finite=None))]
fn cavity_potential<'py>(
    py: Python<'py>,
    rho: Vec<f64>,
    sigma_w2: f64,
    b: f64,
    c: f64,
    u: Option<f64>,
    finite: Option<(f64, f64, f64, f64)>,
) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
    use flscale::cavity::potential::{FiniteModel, MeanField};
    let values = match (u, finite) {
        (Some(u), None) => {
            let mf = MeanField::new(sigma_w2, b, c).map_err(to_py_err)?;
            flscale::error::require_finite("u", u).map_err(to_py_err)?;
            rho.iter()
                .map(|&r| mf.potential(u, r))
                .collect::<Vec<f64>>()
        }
        (None, Some((d, p, t, s_a2))) => {
            let model = FiniteModel::new(d, p, t, s_a2, sigma_w2).map_err(to_py_err)?;
            rho.iter().map(|&r| model.potential(r, b, c) / d).collect()
        }
        _ => {
            return Err(PyValueError::new_err(
                "give either u (mean-field potential) or p (finite-size potential), not both",
            ))
        }
    };
    Ok(values.into_pyarray(py))
}

/// ldt_rate(alpha, d, n, sigma1_sq, sigma2_sq, perp, kappa) -> JSON text with `model`, `kappa`,
/// `points` (E(α), t*, P* ~ 2κE per α), as `flscale ldt rate --json` prints them.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn ldt_rate(
    py: Python<'_>,
    alpha: Vec<f64>,
    d: f64,
    n: f64,
    sigma1_sq: f64,
    sigma2_sq: f64,
    perp: String,
    kappa: f64,
) -> PyResult<String> {
    let value = py
        .detach(|| {
            let model = flscale::ldt::LdtModel {
                d,
                n,
                sigma1_sq,
                sigma2_sq,
                perp: perp.parse()?,
            };
            model.validate()?;
            let points = flscale::ldt::rate_curve(&model, &alpha, kappa)?;
            Ok(serde_json::json!({ "model": model, "kappa": kappa, "points": points }))
        })
        .map_err(to_py_err)?;
    encode(&value)
}

/// kernel_propagate(size) -> JSON text of `flscale kernel propagate --json` for the built-in
/// sizes "quick", "fig5" or "fig6".
#[pyfunction]
fn kernel_propagate(py: Python<'_>, size: String) -> PyResult<String> {
    use flscale::kernels::PropagateConfig;
    let cfg = match size.as_str() {
        "quick" => PropagateConfig::quick(),
        "fig5" => PropagateConfig::fig5(),
        "fig6" => PropagateConfig::fig6(),
        other => {
            return Err(PyValueError::new_err(format!(
                "size \"{other}\" is not known; allowed are quick, fig5, fig6"
            )))
        }
    };
    let res = py
        .detach(|| flscale::kernels::propagate(&cfg))
        .map_err(to_py_err)?;
    serde_json_text(&res)
}

/// A sweep observer for Python: no output, and Ctrl-C (checked after every block of steps)
/// stops the sweep; finished runs stay on disk and a re-run resumes.
struct PySweepObserver<'a> {
    pending: &'a std::sync::Mutex<Option<PyErr>>,
}

impl flscale::experiment::SweepObserver for PySweepObserver<'_> {
    fn interrupted(&self) -> bool {
        Python::attach(|py| match py.check_signals() {
            Ok(()) => false,
            Err(e) => {
                if let Ok(mut slot) = self.pending.lock() {
                    *slot = Some(e);
                }
                true
            }
        })
    }
}

/// sweep(text, out, quick, shard, format) -> JSON text of the sweep's outcome (runs computed,
/// skipped, finished, all-diverged runs), running `flscale sweep` into `out`; `format` is
/// "parquet" or "csv".
#[pyfunction]
#[pyo3(signature = (text, out, quick=false, shard=None, format="parquet"))]
fn sweep(
    py: Python<'_>,
    text: String,
    out: String,
    quick: bool,
    shard: Option<(usize, usize)>,
    format: &str,
) -> PyResult<String> {
    let format: flscale::experiment::ResultsFormat = format.parse().map_err(to_py_err)?;
    let pending: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
    let outcome = py.detach(|| {
        let plan = flscale::experiment::Sweep::from_toml(&text, "experiment", quick)?;
        let mut observer = PySweepObserver { pending: &pending };
        let command = vec!["flscale.sweep (Python)".to_string()];
        flscale::experiment::run_sweep(
            &plan,
            &text,
            std::path::Path::new(&out),
            shard,
            format,
            None,
            &command,
            &mut observer,
        )
    });
    if let Some(e) = pending.lock().ok().and_then(|mut slot| slot.take()) {
        return Err(e);
    }
    serde_json_text(&outcome.map_err(to_py_err)?)
}

/// The `results` table as Python columns, each as stored: text as str, whole numbers (the
/// grid index, the integer coordinates d, p, widths, seeds and integer swept fields) as int,
/// verdicts (`starts_agree`, `equilibrated`) as True/False/None, measurements as float or
/// None; a swept field equal row by row to a coordinate of its own (`data.d` beside `d`) left
/// out.
fn results_columns<'py>(
    py: Python<'py>,
    table: flscale::experiment::table::Table,
) -> PyResult<Bound<'py, PyDict>> {
    use flscale::experiment::table::Column;
    let position = |name: &str| table.names.iter().position(|n| n == name);
    // The coordinates lie between `index` and `observable` (experiment::results::results_table).
    let coords = match (position("index"), position("observable")) {
        (Some(a), Some(b)) if a < b => a + 1..b,
        _ => 0..0,
    };
    // A swept field of integers (`data.p_over_d = [2, 8]`) is an integer column, its own
    // coordinate (p_over_d = p/d) a double one: equal is equal in value.
    let numbers = |c: &Column| -> Option<Vec<Option<f64>>> {
        match c {
            Column::OptInt(v) => Some(v.iter().map(|x| x.map(|x| x as f64)).collect()),
            Column::Float(v) => Some(v.clone()),
            _ => None,
        }
    };
    let out = PyDict::new(py);
    for (i, (name, column)) in table.names.iter().zip(&table.columns).enumerate() {
        if coords.contains(&i) && name.contains('.') {
            let same = coords.clone().any(|j| {
                !table.names[j].contains('.')
                    && numbers(&table.columns[j]).is_some()
                    && numbers(&table.columns[j]) == numbers(column)
            });
            if same {
                continue;
            }
        }
        match column {
            Column::Text(v) => out.set_item(name, v)?,
            Column::Int(v) => out.set_item(name, v)?,
            Column::OptInt(v) => out.set_item(name, v)?,
            Column::Bool(v) => out.set_item(name, v)?,
            Column::Float(v) => out.set_item(name, v)?,
        }
    }
    Ok(out)
}

/// load_results(dir, skip_damaged=False) -> {column: list} of the sweep's `results` table,
/// read from `results.parquet` or `results.csv`: text as str, whole numbers (the grid index,
/// integer coordinates) as int, verdicts as bool or None, measurements as float or None
/// ([`results_columns`]). Every run is verified first: damaged runs raise ValueError
/// naming them; with skip_damaged their rows are dropped and a warning lists them.
#[pyfunction]
#[pyo3(signature = (dir, skip_damaged = false))]
fn load_results<'py>(
    py: Python<'py>,
    dir: String,
    skip_damaged: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (table, notes) = py
        .detach(|| {
            let path = std::path::Path::new(&dir);
            flscale::experiment::results::load_results_verified(path, skip_damaged)
        })
        .map_err(to_py_err)?;
    if !notes.is_empty() {
        let warnings = py.import("warnings")?;
        for n in notes {
            warnings.call_method1("warn", (n,))?;
        }
    }
    results_columns(py, table)
}

/// The `flscale._native` module.
/// free_energy(source, kind, out, quick, replicates, max_memory) -> the report's JSON text.
///
/// `kind` is "toml" or "json" (a dict with the TOML file's structure, `[free_energy]`
/// included). With `out`, every finished window is kept in `out/windows/` and a rerun skips it
/// (as `flscale free-energy --out`; the pilot stage's windows in `out/pilot/`), and the
/// report's files are written there; without, the windows run in memory. Ctrl-C stops the window in progress and raises KeyboardInterrupt.
#[pyfunction]
#[pyo3(signature = (source, kind, out=None, quick=false, replicates=200, max_memory=None))]
fn free_energy(
    py: Python<'_>,
    source: String,
    kind: String,
    out: Option<String>,
    quick: bool,
    replicates: usize,
    max_memory: Option<String>,
) -> PyResult<String> {
    use flscale::free_energy::output::{report_json, write_outputs};
    use flscale::free_energy::runner::{run_free_energy, Progress};
    use flscale::free_energy::window::OBSERVABLES;
    let pending: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
    let outcome = py.detach(|| -> flscale::Result<Option<serde_json::Value>> {
        let plan = match kind.as_str() {
            "json" => {
                let text = json_to_toml(&source, "experiment")?;
                flscale::experiment::Sweep::from_toml(&text, "experiment dict", quick)
                    .and_then(|s| s.free_energy_plan())
                    .map_err(|e| dict_error(e, &text, "experiment dict"))?
            }
            _ => flscale::experiment::Sweep::from_toml(&source, "experiment", quick)?
                .free_energy_plan()?,
        };
        check_memory(&plan.config, max_memory.as_deref())?;
        let mut signals = Signals { pending: &pending };
        let out_dir = out.as_ref().map(std::path::Path::new);
        let (plan, runs) = match run_free_energy(&plan, out_dir, None, &mut signals)? {
            Progress::Complete { plan, runs, .. } => (plan, runs),
            Progress::Interrupted { .. } => return Ok(None),
            // Every window is asked for, so a stage can only be incomplete if a window was
            // interrupted, which is the arm above.
            Progress::Waiting { stages } => {
                return Err(flscale::Error::runtime(format!(
                    "windows {:?} of the {} stage are missing after the run",
                    stages.last().map(|s| s.missing.clone()).unwrap_or_default(),
                    stages.last().map_or("umbrella", |s| s.stage.as_str())
                )))
            }
        };
        let report = plan.analyse(&runs, replicates, plan.config.sampler.seed)?;
        match &out {
            Some(o) => write_outputs(std::path::Path::new(o), &plan, &report).map(Some),
            None => report_json(&report, &OBSERVABLES).map(Some),
        }
    });
    if let Some(e) = pending.lock().ok().and_then(|mut slot| slot.take()) {
        return Err(e);
    }
    match outcome.map_err(to_py_err)? {
        Some(v) => encode(&v),
        None => Err(PyRuntimeError::new_err("interrupted")),
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(predict, m)?)?;
    m.add_function(wrap_pyfunction!(energy, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(preset_toml, m)?)?;
    m.add_function(wrap_pyfunction!(sample, m)?)?;
    m.add_function(wrap_pyfunction!(cavity_phase, m)?)?;
    m.add_function(wrap_pyfunction!(cavity_solve, m)?)?;
    m.add_function(wrap_pyfunction!(cavity_potential, m)?)?;
    m.add_function(wrap_pyfunction!(ldt_rate, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_propagate, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(free_energy, m)?)?;
    m.add_function(wrap_pyfunction!(load_results, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
