//! The aggregate tables of a results store, derived from its run directories (spec 03
//! "Results store"): `results` (one row per run and observable, with the hot/cold columns of
//! [`super::starts`] and the μ/M rule of [`super::specialised`]), `chains`, `histograms` and
//! `histograms_probe`, and the verified read of `results`.
//!
//! The tables are rebuilt from the finished run directories in grid order (never appended to:
//! a Parquet file cannot be), at the end of every sweep and by every merge, so resuming,
//! sharding and merging produce the same bytes as one uninterrupted sweep; a kill before the
//! end leaves no table at all rather than a partial one.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value as Json;

use super::integrity;
use super::io::{io_err, write_atomic};
use super::specialised::{push_classifier_column, specialising_err};
use super::starts::push_start_columns;
use super::store::{RunData, Store, StoreData, OBSERVABLES};
use super::table::{whole_by_name, Column, ResultsFormat, Table};
use crate::error::{Error, Result};

/// Rebuilds the aggregate tables `results`, `chains`, `histograms` and `histograms_probe` (as
/// `.parquet` or `.csv`) from the finished runs, in grid order, and removes the tables of
/// the other format, which would no longer describe the runs. Returns (finished, total).
pub fn rebuild_aggregates(store: &Store, format: ResultsFormat) -> Result<(usize, usize)> {
    let data = StoreData::load(&store.dir)?;
    write_aggregates(store, &data, format)
}

/// [`rebuild_aggregates`] from the intact runs only: damaged runs are refused (or,
/// with `skip_damaged`, left out and listed in the returned notes); runs not computed yet
/// are fine (shards finish at different times). Returns (finished, total, notes).
pub fn rebuild_verified(
    store: &Store,
    format: ResultsFormat,
    skip_damaged: bool,
) -> Result<(usize, usize, Vec<String>)> {
    let policy = integrity::Policy {
        skip_damaged,
        require_complete: false,
    };
    let (data, notes) = StoreData::load_verified(&store.dir, policy)?;
    let (finished, total) = write_aggregates(store, &data, format)?;
    Ok((finished, total, notes))
}

fn write_aggregates(
    store: &Store,
    data: &StoreData,
    format: ResultsFormat,
) -> Result<(usize, usize)> {
    let tables = [
        ("results", results_table(data)),
        ("chains", chains_table(data)),
        ("histograms", histograms_table(data)),
        ("histograms_probe", probe_histograms_table(data)),
    ];
    for (name, table) in &tables {
        let path = store.dir.join(format!("{name}.{}", format.ext()));
        let bytes = match format {
            ResultsFormat::Parquet => table.to_parquet()?,
            ResultsFormat::Csv => table.to_csv()?.into_bytes(),
        };
        write_atomic(&path, &bytes)?;
        for other in ResultsFormat::ALL.iter().filter(|f| **f != format) {
            let stale = store.dir.join(format!("{name}.{}", other.ext()));
            if stale.exists() {
                std::fs::remove_file(&stale).map_err(|e| io_err(&stale, e))?;
            }
        }
    }
    Ok((data.runs.len(), data.total))
}

/// The number at `key` of a run's summary, `a.b` for field b of object a.
fn summary_number(summary: &Json, key: &str) -> Option<f64> {
    key.split('.')
        .try_fold(summary, |v, k| v.get(k))
        .and_then(Json::as_f64)
}

/// The run id and grid index columns, one entry per row (`rows_per_run[k]` rows for run k).
fn run_columns(data: &StoreData, rows_per_run: impl Fn(&RunData) -> usize) -> Table {
    let mut ids = Vec::new();
    let mut idx = Vec::new();
    for r in &data.runs {
        for _ in 0..rows_per_run(r) {
            ids.push(r.id.clone());
            idx.push(r.index as i64);
        }
    }
    let mut t = Table::default();
    t.push("run", Column::Text(ids));
    t.push("index", Column::Int(idx));
    t
}

/// The swept fields (`data.d`, `sampler.kappa`, …) whose every value in the manifest's grid
/// (`runs[].point`) is a TOML integer: their columns hold whole numbers.
fn integer_swept_fields(manifest: &Json) -> BTreeSet<String> {
    let mut ints = BTreeSet::new();
    let mut other = BTreeSet::new();
    let points = manifest["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["point"].as_object());
    for (k, v) in points.flatten() {
        if v.is_i64() || v.is_u64() {
            ints.insert(k.clone());
        } else {
            other.insert(k.clone());
        }
    }
    ints.difference(&other).cloned().collect()
}

/// A coordinate's column: whole numbers ([`Column::OptInt`]) for d, p, the widths, seed …
/// ([`whole_by_name`]) and integer swept fields, doubles for the rest.
fn coordinate_column(
    name: &str,
    values: Vec<Option<f64>>,
    swept_ints: &BTreeSet<String>,
) -> Column {
    if whole_by_name(name) || swept_ints.contains(name) {
        Column::whole(values)
    } else {
        Column::Float(values)
    }
}

/// `results`: one row per (run, observable) — run, index, every coordinate (whole numbers as
/// integers), observable, value, err (long format), the hot/cold columns
/// ([`super::starts`]) and, on the μ and M rows, the rule that identified the specialised
/// neurons ([`super::specialised`]).
pub fn results_table(data: &StoreData) -> Table {
    let mut coord_names: Vec<String> = data
        .runs
        .iter()
        .flat_map(|r| r.coords.keys().cloned())
        .collect();
    coord_names.sort();
    coord_names.dedup();
    let per_run = OBSERVABLES.len() + 1;
    let swept_ints = integer_swept_fields(&data.manifest);
    let mut t = run_columns(data, |_| per_run);
    for k in &coord_names {
        let col = data
            .runs
            .iter()
            .flat_map(|r| std::iter::repeat_n(r.coords.get(k).copied(), per_run))
            .collect();
        t.push(k.clone(), coordinate_column(k, col, &swept_ints));
    }
    let mut names = Vec::new();
    let mut values = Vec::new();
    let mut errs = Vec::new();
    for r in &data.runs {
        for (name, vkey, ekey) in OBSERVABLES {
            names.push(name.to_string());
            values.push(summary_number(&r.summary, vkey));
            let err = match ekey {
                Some(k) => r.summary.get(k).and_then(Json::as_f64),
                None if name == "specialising" => specialising_err(&r.summary),
                None => None,
            };
            errs.push(err);
        }
        names.push("diverged_chains".to_string());
        values.push(
            r.summary
                .get("diverged_chains")
                .and_then(Json::as_array)
                .map(|a| a.len() as f64),
        );
        errs.push(None);
    }
    t.push("observable", Column::Text(names));
    t.push("value", Column::Float(values));
    t.push("err", Column::Float(errs));
    push_start_columns(&mut t, data);
    push_classifier_column(&mut t, data);
    let warnings = data
        .runs
        .iter()
        .flat_map(|r| std::iter::repeat_n(r.warnings().join(" | "), per_run))
        .collect();
    t.push("warnings", Column::Text(warnings));
    t
}

/// `chains`: one row per (run, chain) — the per-chain time averages the bootstrap resamples.
pub fn chains_table(data: &StoreData) -> Table {
    let mut t = run_columns(data, |r| r.chains.len());
    let all = || data.runs.iter().flat_map(|r| r.chains.iter());
    t.push(
        "chain",
        Column::Int(all().map(|c| c.chain as i64).collect()),
    );
    t.push(
        "status",
        Column::Text(
            all()
                .map(|c| if c.ok { "ok" } else { "diverged" }.to_string())
                .collect(),
        ),
    );
    t.push(
        "alignment",
        Column::Float(all().map(|c| c.alignment).collect()),
    );
    t.push(
        "test_mse",
        Column::Float(all().map(|c| c.test_mse).collect()),
    );
    t.push(
        "r_overlap2",
        Column::Float(all().map(|c| c.r_overlap2).collect()),
    );
    t.push(
        "outliers",
        Column::Float(all().map(|c| c.outliers).collect()),
    );
    t.push("mu", Column::Float(all().map(|c| c.mu).collect()));
    t
}

/// `histograms`: one row per (run, bin) of the first-layer overlap histograms.
pub fn histograms_table(data: &StoreData) -> Table {
    let mut t = run_columns(data, |r| r.histogram.len());
    let all = || data.runs.iter().flat_map(|r| r.histogram.iter());
    t.push("bin_low", Column::Float(all().map(|b| Some(b.0)).collect()));
    t.push(
        "bin_high",
        Column::Float(all().map(|b| Some(b.1)).collect()),
    );
    t.push("count", Column::Int(all().map(|b| b.2 as i64).collect()));
    t
}

/// `histograms_probe`: one row per (run, histogram, bin) of the deeper-layer and
/// parity-direction overlap histograms (h2_phi, h2_he3, rho_e1+e2, …).
pub fn probe_histograms_table(data: &StoreData) -> Table {
    let bins = || {
        data.runs.iter().flat_map(|r| {
            r.probe_histograms
                .iter()
                .flat_map(move |(name, bins)| bins.iter().map(move |b| (r, name, b)))
        })
    };
    let mut t = Table::default();
    t.push(
        "run",
        Column::Text(bins().map(|(r, _, _)| r.id.clone()).collect()),
    );
    t.push(
        "index",
        Column::Int(bins().map(|(r, _, _)| r.index as i64).collect()),
    );
    t.push(
        "histogram",
        Column::Text(bins().map(|(_, n, _)| n.clone()).collect()),
    );
    t.push(
        "bin_low",
        Column::Float(bins().map(|(_, _, b)| Some(b.0)).collect()),
    );
    t.push(
        "bin_high",
        Column::Float(bins().map(|(_, _, b)| Some(b.1)).collect()),
    );
    t.push(
        "count",
        Column::Int(bins().map(|(_, _, b)| b.2 as i64).collect()),
    );
    t
}

/// Reads the `results` table of a results directory, Parquet or CSV (whichever is there),
/// with the column types [`results_table`] writes: a table that holds the whole-number
/// coordinates as doubles (a store written before they were integers, or a CSV file, whose
/// cells do not say which swept fields are integers) gets them as integers, as the manifest
/// says; the readers turn older `yes`/`no` verdicts into booleans.
pub fn load_results(dir: &Path) -> Result<Table> {
    let manifest = Store::open(dir)?.manifest()?;
    for f in ResultsFormat::ALL {
        let path = dir.join(format!("results.{}", f.ext()));
        if path.exists() {
            return Ok(with_integer_coordinates(Table::read(&path)?, &manifest));
        }
    }
    Err(Error::invalid(format!(
        "{} has no results.parquet or results.csv; give a directory written by flscale sweep --out DIR",
        dir.display()
    )))
}

/// `table` with each whole-number coordinate ([`coordinate_column`]) that it holds as doubles
/// turned into integers (when every value is whole); the other columns unchanged.
fn with_integer_coordinates(table: Table, manifest: &Json) -> Table {
    let swept_ints = integer_swept_fields(manifest);
    let mut out = Table::default();
    for (name, column) in table.names.into_iter().zip(table.columns) {
        let column = match column {
            Column::Float(v) => coordinate_column(&name, v, &swept_ints),
            other => other,
        };
        out.push(name, column);
    }
    out
}

/// Columns of `results` added after the first stores were written: the hot/cold
/// verdicts and the rule behind μ and M. A table without them still loads.
const NEWER_RESULTS_COLUMNS: [&str; 6] = [
    "hot_value",
    "hot_err",
    "z_cold_hot",
    "starts_agree",
    "equilibrated",
    "mu_classifier",
];

/// One sentence naming the [`NEWER_RESULTS_COLUMNS`] that an older `results` table lacks and
/// how to add them (the tables are derived from `runs/`, so re-aggregating writes them).
fn missing_columns_note(dir: &Path, table: &Table) -> Option<String> {
    let missing: Vec<&str> = NEWER_RESULTS_COLUMNS
        .into_iter()
        .filter(|c| table.column(c).is_none())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "the results table of {} has no {} column(s) (written by an older flscale); `flscale merge {}` rebuilds it from the runs with them",
            dir.display(),
            missing.join(", "),
            dir.display()
        )
    })
}

/// The `results` table of `dir` ([`load_results`]) after verifying every run:
/// damaged runs are refused naming them, or with `skip_damaged` their rows are dropped and
/// listed in the returned notes (runs not computed yet are not in the table, so they are fine).
pub fn load_results_verified(dir: &Path, skip_damaged: bool) -> Result<(Table, Vec<String>)> {
    let manifest = Store::open(dir)?.manifest()?;
    let survey = integrity::survey(dir, &manifest)?;
    let policy = integrity::Policy {
        skip_damaged,
        require_complete: false,
    };
    let mut notes = integrity::enforce(dir, &survey, policy)?;
    let table = load_results(dir)?;
    notes.extend(missing_columns_note(dir, &table));
    let bad = survey.unusable();
    let keep: Vec<bool> = match table.column("run") {
        Some(Column::Text(ids)) => ids.iter().map(|id| !bad.contains(id)).collect(),
        _ => return Ok((table, notes)),
    };
    let mut out = Table::default();
    for (name, col) in table.names.iter().zip(&table.columns) {
        out.push(name.clone(), col.select(&keep));
    }
    Ok((out, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A tempered run's ladder diagnostics land on their rows of `results` (nested summary
    /// fields); an untempered run leaves them empty.
    #[test]
    fn tempering_diagnostics_fill_their_rows_for_tempered_runs_only() {
        let mut tempered = RunData::synthetic(0, BTreeMap::new(), Vec::new());
        tempered.summary = serde_json::json!({
            "alignment": 0.5,
            "tempering": {"replicas": 8, "barrier": 5.72, "round_trips_per_1000_steps": 4.62},
        });
        let mut plain = RunData::synthetic(1, BTreeMap::new(), Vec::new());
        plain.summary = serde_json::json!({"alignment": 0.4});
        let t = results_table(&StoreData::of_runs(vec![tempered, plain]));
        let (Some(Column::Text(names)), Some(Column::Float(values))) =
            (t.column("observable"), t.column("value"))
        else {
            panic!("no observable/value columns")
        };
        let rows = OBSERVABLES.len() + 1;
        let at = |run: usize, name: &str| {
            let k = names[..rows].iter().position(|n| n == name).unwrap();
            values[run * rows + k]
        };
        assert_eq!(at(0, "tempering_replicas"), Some(8.0));
        assert_eq!(at(0, "tempering_barrier"), Some(5.72));
        assert_eq!(at(0, "tempering_round_trips_per_1000_steps"), Some(4.62));
        assert_eq!(at(0, "alignment"), Some(0.5));
        assert_eq!(at(1, "tempering_barrier"), None);
        assert_eq!(at(1, "alignment"), Some(0.4));
    }

    #[test]
    fn an_older_results_table_loads_and_names_the_columns_it_lacks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        super::super::integrity::tests::write_run(&dir.join("runs").join("run-00000"));
        let manifest = r#"{"format": "flscale-results/1", "runs": [{"id": "run-00000"}]}"#;
        std::fs::write(dir.join("manifest.json"), manifest).unwrap();
        // The columns of a store written before the hot/cold and μ-rule columns existed.
        std::fs::write(
            dir.join("results.csv"),
            "run,index,d,observable,value,err\nrun-00000,0,10,mu,1.5,0.125\n",
        )
        .unwrap();
        let (t, notes) = load_results_verified(dir, false).unwrap();
        assert_eq!(t.column("value"), Some(&Column::Float(vec![Some(1.5)])));
        assert_eq!(t.column("mu_classifier"), None);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains(
                "no hot_value, hot_err, z_cold_hot, starts_agree, equilibrated, mu_classifier column(s)"
            ) && notes[0].contains("`flscale merge"),
            "{notes:?}"
        );
        // A table with every column loads without a note.
        std::fs::write(
            dir.join("results.csv"),
            "run,index,observable,value,err,hot_value,hot_err,z_cold_hot,starts_agree,equilibrated,mu_classifier\n\
             run-00000,0,mu,1.5,0.125,,,,,,side_peak\n",
        )
        .unwrap();
        let (t, notes) = load_results_verified(dir, false).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            t.column("mu_classifier"),
            Some(&Column::Text(vec!["side_peak".into()]))
        );
    }

    /// The coordinates that are whole numbers are stored as integers (`6`, not `6.0`), the
    /// others as doubles; a swept field is whole when its TOML values are integers.
    #[test]
    fn whole_coordinates_are_stored_as_integers() {
        let coords = |d: f64| {
            BTreeMap::from([
                ("d".to_string(), d),
                ("kappa".to_string(), 0.5),
                ("data.d".to_string(), d),
                ("p_over_d".to_string(), 2.0),
            ])
        };
        let mut data = StoreData::of_runs(vec![
            RunData::synthetic(0, coords(6.0), Vec::new()),
            RunData::synthetic(1, coords(8.0), Vec::new()),
        ]);
        data.manifest = serde_json::json!({"runs": [
            {"point": {"data.d": 6}}, {"point": {"data.d": 8}},
        ]});
        let t = results_table(&data);
        let rows = OBSERVABLES.len() + 1;
        let mut d = vec![Some(6); rows];
        d.extend(vec![Some(8); rows]);
        assert_eq!(t.column("d"), Some(&Column::OptInt(d.clone())));
        assert_eq!(t.column("data.d"), Some(&Column::OptInt(d)));
        assert_eq!(
            t.column("kappa"),
            Some(&Column::Float(vec![Some(0.5); 2 * rows]))
        );
        assert_eq!(
            t.column("p_over_d"),
            Some(&Column::Float(vec![Some(2.0); 2 * rows]))
        );
        // A swept field with one non-integer value is a double column throughout.
        data.manifest["runs"][1]["point"]["data.d"] = serde_json::json!(8.5);
        let t = results_table(&data);
        assert!(matches!(t.column("data.d"), Some(Column::Float(_))));
    }

    /// A store written before the verdicts were booleans and the whole coordinates integers
    /// (`yes`/`no` text, doubles in Parquet) reads as a new one, in both formats.
    #[test]
    fn an_older_store_with_yes_no_and_double_coordinates_reads_as_a_new_one() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        super::super::integrity::tests::write_run(&dir.join("runs").join("run-00000"));
        let manifest = r#"{"format": "flscale-results/1",
            "runs": [{"id": "run-00000", "point": {"data.d": 6, "sampler.kappa": 0.5}}]}"#;
        std::fs::write(dir.join("manifest.json"), manifest).unwrap();
        let old_csv = "run,index,d,data.d,kappa,sampler.kappa,observable,value,err,\
            hot_value,hot_err,z_cold_hot,starts_agree,equilibrated,seed_cold,seed_hot,mu_classifier\n\
            run-00000,0,6,6,0.5,0.5,alignment,0.25,0.01,0.3,0.02,1.5,yes,no,7,8670364517712541,\n\
            run-00000,0,6,6,0.5,0.5,mu,1.5,,,,,,no,7,8670364517712541,side_peak\n";
        let old = Table::from_csv(old_csv, "old.csv").unwrap();
        // The same table as the older Parquet writer wrote it: every number a double, the
        // verdicts text.
        let mut old_parquet = Table::default();
        for (name, column) in old.names.iter().zip(&old.columns) {
            let column = match column {
                Column::OptInt(v) => Column::Float(v.iter().map(|x| x.map(|x| x as f64)).collect()),
                Column::Bool(v) => Column::Text(
                    v.iter()
                        .map(|b| match b {
                            Some(true) => "yes",
                            Some(false) => "no",
                            None => "",
                        })
                        .map(String::from)
                        .collect(),
                ),
                other => other.clone(),
            };
            old_parquet.push(name.clone(), column);
        }
        assert!(matches!(old_parquet.column("d"), Some(Column::Float(_))));
        let two = |a, b| Some(Column::OptInt(vec![Some(a), Some(b)]));
        for (format, bytes) in [
            ("csv", old_csv.as_bytes().to_vec()),
            ("parquet", old_parquet.to_parquet().unwrap()),
        ] {
            for f in ResultsFormat::ALL {
                let _ = std::fs::remove_file(dir.join(format!("results.{}", f.ext())));
            }
            std::fs::write(dir.join(format!("results.{format}")), bytes).unwrap();
            let (t, _) = load_results_verified(dir, false).unwrap();
            assert_eq!(t.column("d"), two(6, 6).as_ref(), "{format}");
            assert_eq!(t.column("data.d"), two(6, 6).as_ref(), "{format}");
            assert_eq!(t.column("seed_cold"), two(7, 7).as_ref(), "{format}");
            assert_eq!(
                t.column("seed_hot"),
                two(8_670_364_517_712_541, 8_670_364_517_712_541).as_ref(),
                "{format}"
            );
            assert_eq!(
                t.column("kappa"),
                Some(&Column::Float(vec![Some(0.5), Some(0.5)])),
                "{format}"
            );
            assert_eq!(
                t.column("starts_agree"),
                Some(&Column::Bool(vec![Some(true), None])),
                "{format}"
            );
            assert_eq!(
                t.column("equilibrated"),
                Some(&Column::Bool(vec![Some(false), Some(false)])),
                "{format}"
            );
            assert_eq!(
                t.column("mu_classifier"),
                Some(&Column::Text(vec![String::new(), "side_peak".into()])),
                "{format}"
            );
            // Written again, the table holds integers and booleans.
            let csv = t.to_csv().unwrap();
            assert!(
                csv.lines().nth(1).unwrap().contains(",true,false,7,"),
                "{csv}"
            );
        }
    }
}
