//! The results browser of `flscale serve`: the sweep stores named by `--results`, read
//! afresh on every request (so a reload shows runs that finished since), and the files inside
//! them — and only inside them.

use std::path::{Component, Path, PathBuf};

use flscale::experiment::analysis;
use flscale::experiment::stats::{cells, coordinate};
use flscale::experiment::{integrity, pstar, Bootstrap, StoreData};
use flscale::sim::observe::observables::mean_and_error;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use crate::cmd::fit::fit_json;
use crate::cmd::pstar::table_json;

/// Bootstrap replicates of the P\* errors and the exponent's interval (as `flscale fit`).
const REPLICATES: usize = 1000;

/// The result directories the server may read, canonicalised once at start.
#[derive(Debug, Clone, Default)]
pub struct ResultDirs {
    roots: Vec<PathBuf>,
}

impl ResultDirs {
    /// Checks that every path is a readable directory and remembers its canonical form.
    pub fn new(paths: &[PathBuf]) -> flscale::Result<Self> {
        let roots = paths
            .iter()
            .map(|p| {
                let c = p.canonicalize().map_err(|e| {
                    flscale::Error::invalid(format!(
                        "--results {}: cannot open it ({e}); give a directory written by flscale sweep",
                        p.display()
                    ))
                })?;
                if c.is_dir() {
                    Ok(c)
                } else {
                    Err(flscale::Error::invalid(format!(
                        "--results {} is not a directory; give a directory written by flscale sweep",
                        p.display()
                    )))
                }
            })
            .collect::<flscale::Result<Vec<_>>>()?;
        Ok(ResultDirs { roots })
    }

    fn root(&self, index: usize) -> ApiResult<&Path> {
        self.roots.get(index).map(PathBuf::as_path).ok_or_else(|| {
            ApiError::not_found(format!(
                "results directory #{index} does not exist; the server has {} (0 … {})",
                self.roots.len(),
                self.roots.len().saturating_sub(1)
            ))
        })
    }

    /// `GET /api/results`: the directories, by index.
    pub fn list(&self) -> Value {
        let dirs: Vec<_> = self
            .roots
            .iter()
            .enumerate()
            .map(|(i, r)| json!({ "index": i, "name": dir_name(r), "path": r.display().to_string() }))
            .collect();
        json!({ "results": dirs })
    }

    /// `GET /api/results/I`: the store's analysis as the CLI reports it — `fit`, the object
    /// of `flscale fit DIR --json`, and `pstar`, that of `flscale pstar DIR --json` (flags,
    /// warnings and notes included; each `null` with its `*_error` where the CLI refuses) —
    /// the measured points per group with their standard errors and equilibration flags, the
    /// run table, the figure files already drawn and the commands that print the same.
    pub fn summary(&self, index: usize) -> ApiResult<Value> {
        let root = self.root(index)?;
        let dir = root.display().to_string();
        let (data, notes, skip_damaged) = load_as_the_cli(root)?;
        let a = &data.analysis;
        let series = if data.runs.is_empty() {
            Vec::new()
        } else {
            series(&data).map_err(ApiError::from)?
        };
        let runs: Vec<_> = data.runs.iter().map(run_row).collect();
        let (fit, fit_error) = split(fit_report(&data, &dir));
        let (pstar, pstar_error) = split(pstar_report(&data, &dir));
        let cli: Vec<String> = ["fit", "pstar"]
            .iter()
            .map(|c| {
                let mut words = vec!["flscale".to_string(), c.to_string(), shell_word(&dir)];
                if skip_damaged {
                    words.push("--skip-damaged".into());
                }
                words.push("--json".into());
                words.join(" ")
            })
            .collect();
        Ok(json!({
            "name": dir_name(root),
            "path": dir,
            "finished": data.runs.len(),
            "total": data.total,
            "analysis": { "x": a.x, "group": a.group, "observable": a.observable, "threshold": a.threshold },
            "series": series,
            "fit": fit,
            "fit_error": fit_error,
            "pstar": pstar,
            "pstar_error": pstar_error,
            "notes": notes,
            "cli": cli,
            "runs": runs,
            "figures": figure_files(root),
        }))
    }

    /// The file `rel` (a `/`-separated path from the page) inside directory `index`. Refused:
    /// absolute paths, `..`, anything that is not a plain relative name, and any path whose
    /// canonical form (symlinks resolved) leaves the directory.
    pub fn resolve_file(&self, index: usize, rel: &str) -> ApiResult<PathBuf> {
        let root = self.root(index)?;
        let refused = || {
            ApiError::not_found(format!(
                "{} is not a file inside results directory #{index}",
                shorten_path(rel)
            ))
        };
        let rel_path = Path::new(rel);
        if rel.is_empty()
            || rel.contains('\\')
            || rel.contains('\0')
            || !rel_path
                .components()
                .all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(refused());
        }
        let full = root.join(rel_path).canonicalize().map_err(|_| refused())?;
        if !full.starts_with(root) || !full.is_file() {
            return Err(refused());
        }
        Ok(full)
    }
}

fn shorten_path(s: &str) -> String {
    let short: String = s.chars().take(80).collect();
    format!("\"{short}\"")
}

fn dir_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into())
}

/// The store as `flscale fit`/`pstar` load it (verified; damaged or missing runs refused
/// unless `--skip-damaged`), except that a store the CLI would refuse is loaded as with
/// `--skip-damaged` (a sweep still running is worth looking at); the third value says so, and
/// the notes name what was left out.
fn load_as_the_cli(root: &Path) -> ApiResult<(StoreData, Vec<String>, bool)> {
    let manifest = flscale::experiment::Store::open(root)?.manifest()?;
    let survey = integrity::survey(root, &manifest)?;
    let skip_damaged = !(survey.damaged().is_empty() && survey.missing().is_empty());
    let policy = integrity::Policy {
        skip_damaged,
        require_complete: true,
    };
    let (data, notes) = StoreData::load_verified(root, policy)?;
    Ok((data, notes, skip_damaged))
}

/// An answer's value and error as two JSON fields (one of them null).
fn split(r: flscale::Result<Value>) -> (Value, Value) {
    match r {
        Ok(v) => (v, Value::Null),
        Err(e) => (Value::Null, json!(e.to_string())),
    }
}

/// A path as a shell word (quoted when it holds anything but plain characters).
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.,:/=+-".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The stores the CLI refuses outright ([`crate::cmd::pstar::load`]).
fn require_runs(data: &StoreData, dir: &str) -> flscale::Result<()> {
    if data.runs.is_empty() {
        return Err(flscale::Error::invalid(format!(
            "{dir} has no finished runs yet; run flscale sweep first"
        )));
    }
    Ok(())
}

/// The object `flscale fit DIR --json` prints with every flag at its default, built by the
/// same library calls in the same order (`cmd/fit.rs`): the fit of `[analysis] fit` (P\* against
/// the group variable unless stated), its readiness warnings and whether it claims an
/// exponent, the prediction when it is about the fitted quantity, the equilibration and
/// step-size notes.
fn fit_report(data: &StoreData, dir: &str) -> flscale::Result<Value> {
    require_runs(data, dir)?;
    let a = &data.analysis;
    let spec = a
        .fit
        .clone()
        .unwrap_or(flscale::experiment::sweep::FitSpec {
            y: "pstar".into(),
            x: a.group.clone(),
        });
    let (y, x) = (spec.y, spec.x);
    let mut boot = Bootstrap::new(0, REPLICATES);
    let mut unresolved = Vec::new();
    let (f, warnings, carries) = if y == "pstar" {
        let mut query = pstar::PstarQuery::from_analysis(data);
        query.group = x.clone();
        let t = pstar::pstar(data, &query, &mut boot)?;
        unresolved = pstar::unresolved_notes(&t);
        let warnings = pstar::fit_readiness(&t, dir);
        let carries = pstar::carries_exponent(&t);
        (pstar::fit_pstar(&t)?, warnings, carries)
    } else {
        let f = analysis::fit_observable(data, &x, &y, &mut boot)?;
        let warnings = analysis::observable_fit_readiness(&f, data, &x, &y, dir);
        let carries = warnings.is_empty();
        (f, warnings, carries)
    };
    // The experiment's prediction is only paired with the quantity it is about.
    let predicted = a
        .predict
        .as_ref()
        .filter(|p| (p.quantity == "pstar") == (y == "pstar"))
        .map(analysis::predicted_exponent)
        .transpose()?;
    let mut v = fit_json(&f, predicted.as_ref());
    if matches!(y.as_str(), "mu" | "specialising") {
        if let Some(n) = data.mu_rule_note() {
            v["mu_rule"] = json!(n);
        }
    }
    v["unresolved"] = json!(unresolved);
    v["fit_warnings"] = json!(warnings);
    v["exponent_claimed"] = json!(carries);
    v["equilibration"] = json!(data.equilibration_note());
    v["step_bias"] = json!(data.step_bias_note());
    Ok(v)
}

/// The object `flscale pstar DIR --json` prints with every flag at its default, built by the
/// same library calls (`cmd/pstar.rs`): the P\* table with each row's bracket and the interval
/// that includes it, the exponent through it, the prediction, and the notes and warnings.
fn pstar_report(data: &StoreData, dir: &str) -> flscale::Result<Value> {
    require_runs(data, dir)?;
    let mut boot = Bootstrap::new(0, REPLICATES);
    let t = pstar::pstar(data, &pstar::PstarQuery::from_analysis(data), &mut boot)?;
    let fit = pstar::fit_pstar(&t).ok();
    let predicted = data
        .analysis
        .predict
        .as_ref()
        .filter(|p| p.quantity == "pstar")
        .map(analysis::predicted_exponent)
        .transpose()?;
    let mut v = table_json(&t);
    v["exponent"] = json!(fit.as_ref().map(|f| json!({
        "value": f.exponent.value, "err": f.exponent.err,
        "ci95": f.exponent.lo.zip(f.exponent.hi),
    })));
    v["predicted"] = json!(predicted.as_ref().map(|p| json!({
        "value": p.value, "exact": p.exact, "description": p.description,
    })));
    v["equilibration"] = json!(data.equilibration_note());
    v["fit_warnings"] = json!(pstar::fit_readiness(&t, dir));
    v["exponent_claimed"] = json!(pstar::carries_exponent(&t));
    v["step_bias"] = json!(data.step_bias_note());
    Ok(v)
}

/// The observable of `[analysis]` against its crossing variable, one series per group: the
/// mean over pooled chains with its standard error, and whether every run at the point
/// passed the cold/hot equilibration check (`null` where no check was run).
fn series(data: &StoreData) -> flscale::Result<Vec<Value>> {
    let a = &data.analysis;
    let groups = cells(data, Some(a.group.as_str()), &a.x, &a.observable)?;
    Ok(groups
        .iter()
        .map(|(g, cells)| {
            let points: Vec<_> = cells
                .iter()
                .map(|cell| {
                    let (mean, err) = mean_and_error(&cell.values);
                    json!({
                        "x": cell.x, "y": mean, "err": err, "chains": cell.values.len(),
                        "equilibrated": equilibrated_at(data, *g, cell.x),
                    })
                })
                .collect();
            json!({ "group": g, "points": points })
        })
        .collect())
}

fn equilibrated_at(data: &StoreData, group: f64, x: f64) -> Option<bool> {
    let a = &data.analysis;
    let flags: Vec<bool> = data
        .runs
        .iter()
        .filter(|r| coordinate(r, &a.group) == Some(group) && coordinate(r, &a.x) == Some(x))
        .filter_map(|r| r.summary.get("equilibrated").and_then(Value::as_bool))
        .collect();
    (!flags.is_empty()).then(|| flags.iter().all(|&f| f))
}

fn run_row(r: &flscale::experiment::store::RunData) -> Value {
    let ok = r.chains.iter().filter(|c| c.ok).count();
    let observables: serde_json::Map<String, Value> = flscale::experiment::store::CHAIN_OBSERVABLES
        .iter()
        .filter_map(|&name| {
            let vals: Vec<f64> = r
                .chains
                .iter()
                .filter(|c| c.ok)
                .filter_map(|c| c.get(name))
                .filter(|v| v.is_finite())
                .collect();
            (!vals.is_empty()).then(|| {
                let (mean, err) = mean_and_error(&vals);
                (name.to_string(), json!({ "mean": mean, "err": err }))
            })
        })
        .collect();
    json!({
        "index": r.index, "id": r.id, "coordinates": r.coords,
        "chains_ok": ok, "chains": r.chains.len(),
        "equilibrated": r.summary.get("equilibrated").cloned().unwrap_or(Value::Null),
        "observables": observables,
    })
}

/// The figures `flscale plot` drew into `figures/`, as paths relative to the directory.
fn figure_files(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.join("figures")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".svg") || n.ends_with(".png"))
        .map(|n| format!("figures/{n}"))
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, ResultDirs) {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        std::fs::create_dir_all(store.join("figures")).unwrap();
        std::fs::write(store.join("figures/a.svg"), "<svg/>").unwrap();
        std::fs::write(tmp.path().join("secret.txt"), "outside").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(tmp.path().join("secret.txt"), store.join("link.txt"))
                .unwrap();
            std::os::unix::fs::symlink(store.join("figures/a.svg"), store.join("inner.svg"))
                .unwrap();
        }
        let dirs = ResultDirs::new(&[store]).unwrap();
        (tmp, dirs)
    }

    #[test]
    fn files_inside_are_served() {
        let (_tmp, dirs) = setup();
        let p = dirs.resolve_file(0, "figures/a.svg").unwrap();
        assert_eq!(std::fs::read_to_string(p).unwrap(), "<svg/>");
        #[cfg(unix)]
        assert!(dirs.resolve_file(0, "inner.svg").is_ok());
        assert_eq!(dirs.list()["results"][0]["name"], "store");
    }

    #[test]
    fn traversal_absolute_and_symlinks_out_are_refused() {
        let (tmp, dirs) = setup();
        let abs = tmp.path().join("secret.txt").display().to_string();
        for rel in [
            "../secret.txt",
            "figures/../../secret.txt",
            abs.as_str(),
            "/etc/passwd",
            "link.txt",
            "figures",
            "",
            "./figures/a.svg",
            "figures\\..\\..\\secret.txt",
            "nonexistent.svg",
        ] {
            let e = dirs.resolve_file(0, rel).unwrap_err();
            assert_eq!(e.status, 404, "{rel}");
        }
        assert_eq!(
            dirs.resolve_file(3, "figures/a.svg").unwrap_err().status,
            404
        );
    }

    #[test]
    fn a_missing_directory_is_bad_input() {
        let e = ResultDirs::new(&[PathBuf::from("/nonexistent/dir")]).unwrap_err();
        assert!(e.to_string().contains("--results /nonexistent/dir"), "{e}");
    }
}
