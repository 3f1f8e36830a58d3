//! The results store of a sweep (spec 03 "Results store", spec 06 "Outputs").
//!
//! ```text
//! DIR/manifest.json        the full experiment text, the grid, every run's point and seed,
//!                          flscale version, git revision — deterministic, written once
//! DIR/timing.json          start/end times, machine, threads, shard — never compared
//! DIR/results.parquet      one row per (run, observable): run, index, coordinates, observable,
//!                          value, err  (long format; pandas.read_parquet / polars.read_parquet;
//!                          `.csv` instead with --format csv)
//! DIR/chains.parquet       one row per (run, chain): per-chain time averages
//! DIR/histograms.parquet   one row per (run, bin): first-layer overlap histograms
//! DIR/histograms_probe.parquet  one row per (run, histogram, bin): deeper-layer overlaps
//!                          (h2_phi, h2_he3, …) and parity-direction overlaps (rho_e1+e2)
//! DIR/runs/run-00012/      experiment.toml, summary.json, chains.csv, traces.csv,
//!                          histogram_rho.csv, histogram_<name>.csv, checksums.json
//!                          (length and hash of each, see [`super::integrity`]), timing.json
//! ```
//!
//! A run directory is first written under `runs/.partial-<id>-<pid>` and then renamed, so a
//! kill leaves either a complete run or a partial directory that the next start removes.
//! The aggregate tables are derived from the run directories by [`super::results`]. Everything
//! that depends on the clock or the machine lives in the `timing.json` files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};

use super::claim::clean_leftovers;
use super::integrity;
use super::io::{io_err, num, parse_cell, pretty, read_text, write_atomic};
use super::layout::listed_runs;
use super::sweep::{toml_to_json, AnalysisSpec, RunPlan, Sweep};
use super::table::ResultsFormat;
use crate::error::{Error, Result};
use crate::sim::RunResult;

/// Layout version written into the manifest.
pub const FORMAT: &str = "flscale-results/1";

/// Per-run observables copied from `summary.json` into `results.csv`: (observable, value
/// key, error key); a dotted key is a field of a summary object (`tempering.barrier`: the
/// replica-exchange diagnostics of a tempered run, empty for the others).
pub const OBSERVABLES: [(&str, &str, Option<&str>); 20] = [
    ("alignment", "alignment", Some("alignment_err")),
    ("test_mse", "test_mse", Some("test_mse_err")),
    ("test_mse_mean_predictor", "test_mse_mean_predictor", None),
    ("mse_lower_bound", "mse_lower_bound", None),
    ("train_mse", "train_mse", None),
    (
        "outliers_layer1",
        "outliers_layer1",
        Some("outliers_layer1_err"),
    ),
    ("outlier_threshold", "outlier_threshold", None),
    ("r_overlap2", "r_overlap2", Some("r_overlap2_err")),
    (
        "leading_direction_overlap",
        "leading_direction_overlap",
        None,
    ),
    ("chains_used", "chains_used", None),
    ("samples_per_chain", "samples_per_chain", None),
    ("suggested_step", "suggested_step", None),
    ("test_accuracy", "test_accuracy", Some("test_accuracy_err")),
    ("mu", "mu", Some("mu_err")),
    ("specialising", "specialising", None),
    (
        "outliers_layer2_phi",
        "outliers_layer2_phi",
        Some("outliers_layer2_phi_err"),
    ),
    (
        "outliers_layer2_he3",
        "outliers_layer2_he3",
        Some("outliers_layer2_he3_err"),
    ),
    ("tempering_replicas", "tempering.replicas", None),
    ("tempering_barrier", "tempering.barrier", None),
    (
        "tempering_round_trips_per_1000_steps",
        "tempering.round_trips_per_1000_steps",
        None,
    ),
];

/// The deterministic manifest of a sweep (nothing that depends on the clock or machine).
pub fn manifest(sweep: &Sweep, experiment_text: &str, git_revision: Option<&str>) -> Json {
    let runs: Vec<Json> = sweep
        .runs
        .iter()
        .map(|r| {
            json!({
                "index": r.index,
                "id": r.id,
                "point": r.point.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect::<serde_json::Map<_, _>>(),
                "coordinates": r.coordinates(),
                "seed": r.config.sampler.seed,
            })
        })
        .collect();
    json!({
        "format": FORMAT,
        "flscale_version": env!("CARGO_PKG_VERSION"),
        "git_revision": git_revision,
        "source": sweep.source,
        "experiment": experiment_text,
        "grid": sweep.grid_json(),
        "analysis": serde_json::to_value(&sweep.analysis).unwrap_or(Json::Null),
        "runs": runs,
    })
}

/// The part of two manifests that must agree for them to describe the same sweep (the git
/// revision and the file name it was read from may differ).
pub(super) fn comparable(m: &Json) -> Json {
    let mut m = m.clone();
    if let Json::Object(o) = &mut m {
        o.remove("git_revision");
        o.remove("source");
    }
    m
}

/// A results directory.
#[derive(Debug, Clone)]
pub struct Store {
    /// The directory.
    pub dir: PathBuf,
}

impl Store {
    /// Opens (or creates) `dir` for `manifest`. An existing directory must hold the same
    /// sweep; leftovers of killed runs are removed.
    pub fn create(dir: &Path, manifest: &Json) -> Result<Store> {
        std::fs::create_dir_all(dir.join("runs")).map_err(|e| {
            Error::invalid(format!("cannot create directory {}: {e}", dir.display()))
        })?;
        let store = Store {
            dir: dir.to_path_buf(),
        };
        let path = dir.join("manifest.json");
        if path.exists() {
            let old: Json = serde_json::from_str(&read_text(&path)?).map_err(|e| {
                Error::invalid(format!("{} is not valid JSON: {e}", path.display()))
            })?;
            if comparable(&old) != comparable(manifest) {
                return Err(Error::invalid(format!(
                    "{} holds the results of a different experiment or grid; choose a new --out directory or remove it",
                    dir.display()
                )));
            }
        } else {
            write_atomic(&path, pretty(manifest)?.as_bytes())?;
        }
        store.remove_partials()?;
        Ok(store)
    }

    /// Opens an existing results directory.
    pub fn open(dir: &Path) -> Result<Store> {
        if !dir.join("manifest.json").exists() {
            return Err(Error::invalid(format!(
                "{} is not a results directory (no manifest.json); create one with flscale sweep",
                dir.display()
            )));
        }
        Ok(Store {
            dir: dir.to_path_buf(),
        })
    }

    /// The manifest.
    pub fn manifest(&self) -> Result<Json> {
        let path = self.dir.join("manifest.json");
        serde_json::from_str(&read_text(&path)?)
            .map_err(|e| Error::invalid(format!("{} is not valid JSON: {e}", path.display())))
    }

    /// Removes what killed processes left: partial run directories, `*.tmp-<pid>` files and
    /// stale claims ([`super::claim::clean_leftovers`]).
    fn remove_partials(&self) -> Result<()> {
        clean_leftovers(&self.dir);
        Ok(())
    }

    /// The directory of run `id`.
    pub fn run_dir(&self, id: &str) -> PathBuf {
        self.dir.join("runs").join(id)
    }

    /// True when run `id` finished (its directory is only ever created complete).
    pub fn is_finished(&self, id: &str) -> bool {
        self.run_dir(id).join("summary.json").exists()
    }

    /// Writes a finished run atomically (all files, then one directory rename).
    pub fn write_run(&self, plan: &RunPlan, r: &RunResult) -> Result<()> {
        let tmp =
            self.dir
                .join("runs")
                .join(format!(".partial-{}-{}", plan.id, std::process::id()));
        if tmp.exists() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        std::fs::create_dir_all(&tmp).map_err(|e| io_err(&tmp, e))?;
        let written = std::cell::RefCell::new(Vec::new());
        let w = |name: &str, text: &str| -> Result<()> {
            let p = tmp.join(name);
            std::fs::write(&p, text).map_err(|e| io_err(&p, e))?;
            written
                .borrow_mut()
                .push((name.to_string(), text.as_bytes().to_vec()));
            Ok(())
        };
        w("experiment.toml", &plan.toml)?;
        let summary = serde_json::to_value(&r.summary)
            .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?;
        w("summary.json", &pretty(&summary)?)?;
        let f = |x: f64| num(Some(x));
        let mut traces =
            String::from("step,burn_in,energy,alignment,test_mse,train_mse,r_overlap2,outliers\n");
        for t in &r.traces {
            traces += &format!(
                "{},{},{},{},{},{},{},{}\n",
                t.step,
                t.burn_in,
                f(t.energy),
                f(t.alignment),
                f(t.test_mse),
                num(t.train_mse),
                f(t.r_overlap2),
                f(t.outliers)
            );
        }
        w("traces.csv", &traces)?;
        let mut chains = String::from("chain,status,alignment,test_mse,r_overlap2,outliers,mu\n");
        for c in &r.chains {
            chains += &format!(
                "{},{},{},{},{},{},{}\n",
                c.chain,
                c.status,
                num(c.alignment),
                num(c.test_mse),
                num(c.r_overlap2),
                num(c.outliers),
                num(c.mu)
            );
        }
        w("chains.csv", &chains)?;
        for ph in &r.probe_histograms {
            let mut hist = String::from("bin_low,bin_high,count\n");
            for (i, &c) in ph.counts.iter().enumerate() {
                hist += &format!("{},{},{}\n", f(ph.edges[i]), f(ph.edges[i + 1]), c);
            }
            hist += &format!(",,{}\n", ph.outside);
            w(&format!("histogram_{}.csv", ph.name), &hist)?;
        }
        let h = &r.histogram;
        let mut hist = String::from("bin_low,bin_high,count\n");
        for (i, &c) in h.counts.iter().enumerate() {
            hist += &format!("{},{},{}\n", f(h.edges[i]), f(h.edges[i + 1]), c);
        }
        hist += &format!(",,{}\n", h.outside);
        w("histogram_rho.csv", &hist)?;
        let sums = integrity::checksums_json(&written.borrow());
        w(integrity::CHECKSUMS, &pretty(&sums)?)?;
        // Clock time: not checksummed (it differs between identical runs).
        let timing = tmp.join("timing.json");
        std::fs::write(
            &timing,
            pretty(&json!({"seconds": r.seconds, "steps": r.steps}))?,
        )
        .map_err(|e| io_err(&timing, e))?;
        self.publish_run(&tmp, &plan.id)
    }

    /// Renames the complete partial directory `tmp` to run `id`'s directory. When another
    /// process finished the same run first, its intact files are identical and ours are dropped;
    /// a damaged run directory there is replaced.
    fn publish_run(&self, tmp: &Path, id: &str) -> Result<()> {
        let dest = self.run_dir(id);
        if dest.exists() {
            if integrity::is_intact(&dest) {
                let _ = std::fs::remove_dir_all(tmp);
                return Ok(());
            }
            let aside = self
                .dir
                .join("runs")
                .join(format!(".partial-damaged-{id}-{}", std::process::id()));
            std::fs::rename(&dest, &aside).map_err(|e| io_err(&dest, e))?;
            let _ = std::fs::remove_dir_all(&aside);
        }
        std::fs::rename(tmp, &dest).map_err(|e| io_err(&dest, e))
    }

    /// The format of the aggregate tables already in the directory: CSV when only
    /// `results.csv` is there, Parquet otherwise (also for a directory without tables).
    pub fn aggregate_format(&self) -> ResultsFormat {
        let has = |f: ResultsFormat| self.dir.join(format!("results.{}", f.ext())).exists();
        if has(ResultsFormat::Csv) && !has(ResultsFormat::Parquet) {
            ResultsFormat::Csv
        } else {
            ResultsFormat::Parquet
        }
    }
}

/// Per-chain time averages of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainValues {
    /// Chain index.
    pub chain: usize,
    /// False for a diverged chain.
    pub ok: bool,
    /// Alignment A_f.
    pub alignment: Option<f64>,
    /// Test MSE.
    pub test_mse: Option<f64>,
    /// R = E[ρ²].
    pub r_overlap2: Option<f64>,
    /// First-layer outlier count.
    pub outliers: Option<f64>,
    /// μ along the first parity direction (paper Fig. 7; null without specialising neurons).
    pub mu: Option<f64>,
}

impl ChainValues {
    /// The per-chain value of an observable (alignment, test_mse, r_overlap2, outliers).
    pub fn get(&self, observable: &str) -> Option<f64> {
        match observable {
            "alignment" => self.alignment,
            "test_mse" => self.test_mse,
            "r_overlap2" => self.r_overlap2,
            "outliers" | "outliers_layer1" => self.outliers,
            "mu" => self.mu,
            _ => None,
        }
    }
}

/// Observables with per-chain values (what the bootstrap resamples).
pub const CHAIN_OBSERVABLES: [&str; 5] = ["alignment", "test_mse", "r_overlap2", "outliers", "mu"];

/// One finished run, read back from its directory.
#[derive(Debug, Clone)]
pub struct RunData {
    /// Grid index.
    pub index: usize,
    /// Directory name.
    pub id: String,
    /// Resolved coordinates (d, p, p_over_d, n1, kappa, seed, swept paths).
    pub coords: BTreeMap<String, f64>,
    /// `summary.json`.
    pub summary: Json,
    /// Per-chain values.
    pub chains: Vec<ChainValues>,
    /// Histogram bins (low, high, count) of the first-layer overlaps ρ.
    pub histogram: Vec<(f64, f64, u64)>,
    /// The run's other histograms (`histogram_<name>.csv`: h2_phi, h2_he3, rho_e1+e2, …),
    /// by name.
    pub probe_histograms: BTreeMap<String, Vec<(f64, f64, u64)>>,
    /// The hot/cold verdict over every fitted observable (`summary.equilibrated`); None for a
    /// run with one start.
    pub equilibrated: Option<bool>,
}

/// Everything the analysis and the figures read from a results directory.
#[derive(Debug, Clone)]
pub struct StoreData {
    /// The manifest.
    pub manifest: Json,
    /// `[analysis]` of the experiment.
    pub analysis: AnalysisSpec,
    /// Finished runs, in grid order.
    pub runs: Vec<RunData>,
    /// Number of runs in the grid.
    pub total: usize,
    /// Analyse runs whose hot and cold starts disagree too (they are left out by default,
    /// [`StoreData::analysed_runs`]).
    pub include_unequilibrated: bool,
}

impl RunData {
    /// The run's `summary.warnings` (an unadjusted Langevin step above the bias threshold,
    /// [`crate::sim::driver::summary::ULA_BIAS_THRESHOLD`]); empty for older stores.
    pub fn warnings(&self) -> Vec<String> {
        self.summary
            .get("warnings")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|w| w.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl StoreData {
    /// One sentence naming the runs whose summaries carry a warning (a step-size bias of
    /// unadjusted Langevin), for `fit` and `pstar` to flag; None when no run does.
    pub fn step_bias_note(&self) -> Option<String> {
        let flagged: Vec<&RunData> = self
            .runs
            .iter()
            .filter(|r| !r.warnings().is_empty())
            .collect();
        let first = flagged.first()?;
        let ids: Vec<&str> = flagged.iter().map(|r| r.id.as_str()).collect();
        Some(format!(
            "{} of {} runs carry a step-size warning and their numbers are biased ({}): {}",
            flagged.len(),
            self.runs.len(),
            ids.join(", "),
            first.warnings()[0]
        ))
    }
}

impl StoreData {
    /// Loads the manifest and every finished run of `dir` (unverified: see
    /// [`StoreData::load_verified`]).
    pub fn load(dir: &Path) -> Result<StoreData> {
        Self::load_except(dir, &BTreeSet::new())
    }

    /// Loads `dir` after verifying every run ([`integrity`]): refuses damaged runs (and
    /// missing ones when `policy.require_complete`) naming them, or with `skip_damaged` leaves
    /// them out. Returns the data and the notes to print (skipped runs, runs without checksums).
    pub fn load_verified(
        dir: &Path,
        policy: integrity::Policy,
    ) -> Result<(StoreData, Vec<String>)> {
        let manifest = Store::open(dir)?.manifest()?;
        let survey = integrity::survey(dir, &manifest)?;
        let notes = integrity::enforce(dir, &survey, policy)?;
        Ok((Self::load_except(dir, &survey.unusable())?, notes))
    }

    /// Loads the manifest and the finished runs of `dir` that are not in `exclude`.
    fn load_except(dir: &Path, exclude: &BTreeSet<String>) -> Result<StoreData> {
        let store = Store::open(dir)?;
        let manifest = store.manifest()?;
        let analysis: AnalysisSpec = manifest
            .get("analysis")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::invalid(format!("manifest.json: bad analysis table: {e}")))?
            .unwrap_or_default();
        let list = manifest
            .get("runs")
            .and_then(Json::as_array)
            .ok_or_else(|| Error::invalid("manifest.json has no runs list"))?;
        // Runs added by `--refine-pstar` are listed beside the grid's ([`super::layout`]).
        let refined = listed_runs(dir)?;
        let cell = |s: &str| parse_cell(s).ok().flatten();
        let mut runs = Vec::new();
        for r in list.iter().chain(&refined) {
            let id = r.get("id").and_then(Json::as_str).unwrap_or("").to_string();
            let index = r.get("index").and_then(Json::as_u64).unwrap_or(0) as usize;
            if id.is_empty() || !store.is_finished(&id) || exclude.contains(&id) {
                continue;
            }
            let rd = store.run_dir(&id);
            let coords: BTreeMap<String, f64> = r
                .get("coordinates")
                .and_then(Json::as_object)
                .map(|o| {
                    o.iter()
                        .filter_map(|(k, v)| v.as_f64().map(|x| (k.clone(), x)))
                        .collect()
                })
                .unwrap_or_default();
            let sp = rd.join("summary.json");
            let summary: Json = serde_json::from_str(&read_text(&sp)?)
                .map_err(|e| Error::invalid(format!("{} is not valid JSON: {e}", sp.display())))?;
            let mut chains = Vec::new();
            for line in read_text(&rd.join("chains.csv"))?.lines().skip(1) {
                let f: Vec<&str> = line.split(',').collect();
                if f.len() < 6 {
                    continue;
                }
                chains.push(ChainValues {
                    chain: f[0].parse().unwrap_or(0),
                    ok: f[1] == "ok",
                    alignment: cell(f[2]),
                    test_mse: cell(f[3]),
                    r_overlap2: cell(f[4]),
                    outliers: cell(f[5]),
                    mu: f.get(6).and_then(|s| cell(s)),
                });
            }
            let read_bins = |path: &Path| -> Result<Vec<(f64, f64, u64)>> {
                let mut bins = Vec::new();
                for line in read_text(path)?.lines().skip(1) {
                    let f: Vec<&str> = line.split(',').collect();
                    if let (Some(lo), Some(hi), Ok(c)) = (
                        cell(f[0]),
                        f.get(1).and_then(|s| cell(s)),
                        f.get(2).map(|s| s.parse::<u64>()).unwrap_or(Ok(0)),
                    ) {
                        bins.push((lo, hi, c));
                    }
                }
                Ok(bins)
            };
            let histogram = read_bins(&rd.join("histogram_rho.csv"))?;
            let mut probe_histograms = BTreeMap::new();
            let mut names: Vec<String> = std::fs::read_dir(&rd)
                .map_err(|e| Error::runtime(format!("cannot read {}: {e}", rd.display())))?
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| {
                    n.starts_with("histogram_") && n.ends_with(".csv") && n != "histogram_rho.csv"
                })
                .collect();
            names.sort();
            for n in names {
                let name = n["histogram_".len()..n.len() - ".csv".len()].to_string();
                probe_histograms.insert(name, read_bins(&rd.join(&n))?);
            }
            runs.push(RunData {
                index,
                id,
                coords,
                equilibrated: summary.get("equilibrated").and_then(Json::as_bool),
                summary,
                chains,
                histogram,
                probe_histograms,
            });
        }
        runs.sort_by_key(|r| r.index);
        let total = list.len() + refined.len();
        Ok(StoreData {
            manifest,
            analysis,
            runs,
            total,
            include_unequilibrated: false,
        })
    }
}

#[cfg(test)]
impl RunData {
    /// A run with these coordinates and chains and nothing else (analysis tests).
    pub(crate) fn synthetic(
        index: usize,
        coords: BTreeMap<String, f64>,
        chains: Vec<ChainValues>,
    ) -> RunData {
        RunData {
            index,
            id: format!("run-{index:05}"),
            coords,
            summary: Json::Null,
            chains,
            histogram: Vec::new(),
            probe_histograms: BTreeMap::new(),
            equilibrated: None,
        }
    }
}

#[cfg(test)]
impl StoreData {
    /// A store of `runs` without a manifest (analysis tests).
    pub(crate) fn of_runs(runs: Vec<RunData>) -> StoreData {
        StoreData {
            manifest: Json::Null,
            analysis: Default::default(),
            total: runs.len(),
            include_unequilibrated: false,
            runs,
        }
    }
}
