//! Merging the results directories of sweep shards (spec 03 "Scale out"): runs are copied
//! once, verified ([`super::integrity`]), and the aggregate tables rebuilt in grid order.

use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};

use super::integrity;
use super::io::{io_err, pretty, read_text, write_atomic};
use super::results::rebuild_verified;
use super::store::{comparable, Store};
use super::table::ResultsFormat;
use crate::error::{Error, Result};

/// Merges results directories into `out` (idempotent): every input must hold the same sweep;
/// finished runs are copied (a run present twice must have identical files); the aggregates
/// are rebuilt in `format`, or when that is `None` in the format `out` (else the first input)
/// already has. With no inputs, `out` itself is re-aggregated (shards that wrote into one
/// shared directory). Returns (runs copied, finished, total).
pub fn merge(
    out: &Path,
    inputs: &[PathBuf],
    format: Option<ResultsFormat>,
) -> Result<(usize, usize, usize)> {
    merge_checked(out, inputs, format, false).map(|(c, f, t, _)| (c, f, t))
}

/// [`merge`] that verifies every run it copies or aggregates ([`integrity`]): a damaged run in
/// an input or in `out` is refused naming it, or with `skip_damaged` left out and listed in the
/// returned notes. Returns (runs copied, finished, total, notes).
pub fn merge_checked(
    out: &Path,
    inputs: &[PathBuf],
    format: Option<ResultsFormat>,
    skip_damaged: bool,
) -> Result<(usize, usize, usize, Vec<String>)> {
    let mut manifest: Option<Json> = None;
    let mut sources = Vec::new();
    for dir in inputs {
        let s = Store::open(dir)?;
        let m = s.manifest()?;
        if let Some(first) = &manifest {
            if comparable(first) != comparable(&m) {
                return Err(Error::invalid(format!(
                    "{} holds a different experiment or grid than {}; only shards of one sweep can be merged",
                    dir.display(),
                    inputs[0].display()
                )));
            }
        } else {
            manifest = Some(m);
        }
        sources.push(s);
    }
    let store = match &manifest {
        Some(m) => Store::create(out, m)?,
        None => Store::open(out)?,
    };
    let mut copied = 0;
    let mut timings = Vec::new();
    let mut notes = Vec::new();
    for s in &sources {
        if same_dir(&s.dir, &store.dir) {
            continue;
        }
        if let Ok(t) = read_text(&s.dir.join("timing.json")) {
            timings.push(serde_json::from_str::<Json>(&t).unwrap_or(Json::Null));
        }
        let Ok(entries) = std::fs::read_dir(s.dir.join("runs")) else {
            continue;
        };
        let mut ids: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("run-") && s.is_finished(n))
            .collect();
        ids.sort();
        let mut damaged = Vec::new();
        ids.retain(|id| match integrity::verify_run(&s.run_dir(id)) {
            integrity::RunState::Damaged(reason) => {
                damaged.push(format!("{id} ({reason})"));
                false
            }
            _ => true,
        });
        if !damaged.is_empty() {
            let list = damaged.join(", ");
            if !skip_damaged {
                return Err(Error::invalid(format!(
                    "{} has {} damaged run(s): {list}; recompute them there with the same flscale sweep, or pass --skip-damaged to merge without them",
                    s.dir.display(),
                    damaged.len()
                )));
            }
            notes.push(format!("{}: skipped {list}", s.dir.display()));
        }
        for id in ids {
            let src = s.run_dir(&id);
            let dest = store.run_dir(&id);
            if dest.exists() {
                compare_runs(&src, &dest, &id)?;
                continue;
            }
            let tmp = store
                .dir
                .join("runs")
                .join(format!(".partial-{id}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&tmp);
            copy_dir(&src, &tmp)?;
            std::fs::rename(&tmp, &dest).map_err(|e| io_err(&dest, e))?;
            copied += 1;
        }
    }
    if !timings.is_empty() {
        write_atomic(
            &store.dir.join("timing.json"),
            pretty(&json!({"merged_from": timings}))?.as_bytes(),
        )?;
    }
    let format = format.unwrap_or_else(|| {
        let has_tables = ResultsFormat::ALL
            .iter()
            .any(|f| store.dir.join(format!("results.{}", f.ext())).exists());
        if has_tables {
            store.aggregate_format()
        } else {
            sources
                .first()
                .map(Store::aggregate_format)
                .unwrap_or_default()
        }
    });
    let (finished, total, more) = rebuild_verified(&store, format, skip_damaged)?;
    notes.extend(more);
    Ok((copied, finished, total, notes))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn copy_dir(src: &Path, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(|e| io_err(dest, e))?;
    let entries = std::fs::read_dir(src).map_err(|e| io_err(src, e))?;
    for e in entries.flatten() {
        let to = dest.join(e.file_name());
        std::fs::copy(e.path(), &to).map_err(|err| io_err(&to, err))?;
    }
    Ok(())
}

/// Files of a run directory that must be byte-identical wherever the run was computed.
const RUN_FILES: [&str; 5] = [
    "experiment.toml",
    "summary.json",
    "chains.csv",
    "traces.csv",
    "histogram_rho.csv",
];

fn compare_runs(a: &Path, b: &Path, id: &str) -> Result<()> {
    for f in RUN_FILES {
        let x = std::fs::read(a.join(f)).ok();
        let y = std::fs::read(b.join(f)).ok();
        if x != y {
            return Err(Error::runtime(format!(
                "{id}/{f} differs between {} and {}; the two results were not computed from the same inputs",
                a.display(),
                b.display()
            )));
        }
    }
    Ok(())
}
