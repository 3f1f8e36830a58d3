//! Integrity of a results store: per-run checksums, the verification every
//! reader runs before it trusts a run, and the survey of a whole grid.
//!
//! Every run directory gets `checksums.json`, written last inside the partial directory and
//! therefore present exactly when the run's rename made it visible: the length and 64-bit
//! FNV-1a hash of each data file. A reader checks every listed file against it, then parses the
//! files strictly (every CSV row has its columns; every number cell is empty — null — or a
//! finite number, since the writer never writes NaN or ∞). A run is then
//!
//! * `Intact`: checksums match (or, in a store written before checksums, the files parse);
//! * `Damaged(reason)`: a file is missing, edited, truncated or holds a non-finite number, or
//!   the run's directory is gone although the results table lists it (a deleted run);
//! * `Missing`: not computed yet.
//!
//! `timing.json` is not covered: it holds clock times that differ between identical runs and no
//! reader takes data from it (`flscale status` reads it for the cost, and says when it cannot).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Value as Json};

use super::io::{parse_cell, BadCell};
use super::layout::listed_runs;
use crate::error::{Error, Result};

/// The checksum file of a run directory.
pub const CHECKSUMS: &str = "checksums.json";

/// Layout version of `checksums.json`.
const CHECKSUMS_FORMAT: &str = "flscale-run-checksums/1";

/// Files every run directory holds.
const REQUIRED: [&str; 5] = [
    "experiment.toml",
    "summary.json",
    "chains.csv",
    "traces.csv",
    "histogram_rho.csv",
];

/// 64-bit FNV-1a (Fowler, Noll, Vo; IETF draft-eastlake-fnv-21 §2, offset basis
/// 0xcbf29ce484222325, prime 2⁴⁰ + 2⁸ + 0xb3): detects accidental damage — truncation, edits,
/// bit flips — which is what a store needs; it is not meant against deliberate forgery.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `checksums.json` for the files `(name, bytes)` of one run, in name order (deterministic).
pub fn checksums_json(files: &[(String, Vec<u8>)]) -> Json {
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let entries: serde_json::Map<String, Json> = sorted
        .iter()
        .map(|(name, bytes)| {
            (
                name.clone(),
                json!({"bytes": bytes.len(), "fnv1a64": format!("{:016x}", fnv1a64(bytes))}),
            )
        })
        .collect();
    json!({"format": CHECKSUMS_FORMAT, "files": entries})
}

/// The state of one run of the grid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// Finished and verified; `checksummed` is false for a run written before checksums.
    Intact {
        /// Whether the files were checked against `checksums.json`.
        checksummed: bool,
    },
    /// A file is missing, altered or non-finite, or the directory was deleted.
    Damaged(String),
    /// Not computed yet.
    Missing,
}

/// Checks the run directory `dir` (see the module documentation).
pub fn verify_run(dir: &Path) -> RunState {
    if !dir.is_dir() {
        return RunState::Missing;
    }
    let sums_path = dir.join(CHECKSUMS);
    let checksummed = sums_path.exists();
    if checksummed {
        if let Err(reason) = check_sums(dir, &sums_path) {
            return RunState::Damaged(reason);
        }
    }
    match check_contents(dir) {
        Ok(()) => RunState::Intact { checksummed },
        Err(reason) => RunState::Damaged(reason),
    }
}

/// True when run directory `dir` is finished, intact and checksummed (as this version writes
/// it): what a sweep that finds a run written by another process accepts.
pub fn is_intact(dir: &Path) -> bool {
    verify_run(dir) == RunState::Intact { checksummed: true }
}

fn check_sums(dir: &Path, sums_path: &Path) -> std::result::Result<(), String> {
    let text = std::fs::read_to_string(sums_path)
        .map_err(|e| format!("{CHECKSUMS} cannot be read ({e})"))?;
    let sums: Json =
        serde_json::from_str(&text).map_err(|_| format!("{CHECKSUMS} is not valid JSON"))?;
    let files = sums
        .get("files")
        .and_then(Json::as_object)
        .filter(|_| sums.get("format").and_then(Json::as_str) == Some(CHECKSUMS_FORMAT))
        .ok_or_else(|| format!("{CHECKSUMS} is not a {CHECKSUMS_FORMAT} file"))?;
    for name in REQUIRED {
        if !files.contains_key(name) {
            return Err(format!("{CHECKSUMS} does not list {name}"));
        }
    }
    for (name, entry) in files {
        let bytes = std::fs::read(dir.join(name))
            .map_err(|_| format!("{name} is missing or unreadable"))?;
        let want_len = entry.get("bytes").and_then(Json::as_u64);
        let want_hash = entry.get("fnv1a64").and_then(Json::as_str);
        if want_len != Some(bytes.len() as u64) {
            return Err(format!(
                "{name} has {} bytes where {CHECKSUMS} says {} (truncated or edited)",
                bytes.len(),
                want_len.map_or("?".into(), |n| n.to_string())
            ));
        }
        if want_hash != Some(format!("{:016x}", fnv1a64(&bytes)).as_str()) {
            return Err(format!("{name} does not match its checksum (edited)"));
        }
    }
    Ok(())
}

/// A number cell as the writer writes it: empty (null) or a finite number ([`parse_cell`]).
fn check_cell(file: &str, line: usize, cell: &str) -> std::result::Result<(), String> {
    match parse_cell(cell) {
        Ok(_) => Ok(()),
        Err(BadCell::NonFinite) => Err(format!(
            "{file} line {line} holds the non-finite number {cell}"
        )),
        Err(BadCell::NotANumber) => Err(format!(
            "{file} line {line} holds `{cell}`, which is not a number"
        )),
    }
}

/// Every row of CSV file `name` has the header's number of cells, all numbers except the
/// columns in `text_columns`.
fn check_csv(dir: &Path, name: &str, text_columns: &[usize]) -> std::result::Result<(), String> {
    let text = std::fs::read_to_string(dir.join(name))
        .map_err(|_| format!("{name} is missing or unreadable"))?;
    if !text.ends_with('\n') {
        return Err(format!("{name} does not end with a newline (truncated)"));
    }
    let mut lines = text.lines();
    let header = lines
        .next()
        .ok_or_else(|| format!("{name} is empty (truncated)"))?;
    let width = header.split(',').count();
    for (k, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        if cells.len() != width {
            return Err(format!(
                "{name} line {} has {} cells where the header has {width} (truncated or edited)",
                k + 2,
                cells.len()
            ));
        }
        for (c, cell) in cells.iter().enumerate() {
            if !text_columns.contains(&c) {
                check_cell(name, k + 2, cell)?;
            }
        }
    }
    Ok(())
}

/// The strict parse of a run's files (also what guards a store written before checksums).
fn check_contents(dir: &Path) -> std::result::Result<(), String> {
    if !dir.join("experiment.toml").is_file() {
        return Err("experiment.toml is missing".into());
    }
    let summary = std::fs::read_to_string(dir.join("summary.json"))
        .map_err(|_| "summary.json is missing or unreadable".to_string())?;
    // JSON has no NaN or ∞: a non-finite number written into it fails to parse.
    serde_json::from_str::<Json>(&summary)
        .map_err(|_| {
            "summary.json is not valid JSON (truncated, edited or non-finite)".to_string()
        })?
        .as_object()
        .ok_or_else(|| "summary.json is not a JSON object".to_string())?;
    // chains.csv: chain,status,alignment,test_mse,r_overlap2,outliers,mu (status is text).
    check_csv(dir, "chains.csv", &[1])?;
    // traces.csv: step,burn_in,energy,… (burn_in is true/false).
    check_csv(dir, "traces.csv", &[1])?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list the directory ({e})"))?;
    let mut histograms: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("histogram_") && n.ends_with(".csv"))
        .collect();
    histograms.sort();
    if !histograms.iter().any(|n| n == "histogram_rho.csv") {
        return Err("histogram_rho.csv is missing".into());
    }
    for h in &histograms {
        check_csv(dir, h, &[])?;
    }
    Ok(())
}

/// The state of every run of a store's grid, in grid order.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    /// (run id, state), in grid order.
    pub runs: Vec<(String, RunState)>,
}

impl Survey {
    /// Runs that are damaged, with the reason.
    pub fn damaged(&self) -> Vec<(&str, &str)> {
        self.runs
            .iter()
            .filter_map(|(id, s)| match s {
                RunState::Damaged(r) => Some((id.as_str(), r.as_str())),
                _ => None,
            })
            .collect()
    }

    /// Runs not computed yet.
    pub fn missing(&self) -> Vec<&str> {
        self.ids_where(|s| *s == RunState::Missing)
    }

    /// Finished runs written before checksums (verified by their format only).
    pub fn unchecksummed(&self) -> Vec<&str> {
        self.ids_where(|s| *s == RunState::Intact { checksummed: false })
    }

    /// Runs that are not intact (damaged or missing): what a reader leaves out.
    pub fn unusable(&self) -> BTreeSet<String> {
        self.runs
            .iter()
            .filter(|(_, s)| !matches!(s, RunState::Intact { .. }))
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn ids_where(&self, f: impl Fn(&RunState) -> bool) -> Vec<&str> {
        self.runs
            .iter()
            .filter(|(_, s)| f(s))
            .map(|(id, _)| id.as_str())
            .collect()
    }
}

/// Surveys every run listed in `manifest` under `dir/runs`. A run whose directory is gone
/// while the results table in `dir` lists it counts as damaged (deleted), not as missing.
pub fn survey(dir: &Path, manifest: &Json) -> Result<Survey> {
    let list = manifest
        .get("runs")
        .and_then(Json::as_array)
        .ok_or_else(|| Error::invalid("manifest.json has no runs list"))?;
    let tabled = tabled_runs(dir);
    // The runs `--refine-pstar` added are verified like the grid's.
    let refined = listed_runs(dir)?;
    let mut runs: Vec<(String, RunState)> = list
        .iter()
        .chain(&refined)
        .filter_map(|r| r.get("id").and_then(Json::as_str))
        .map(|id| {
            let state = match verify_run(&dir.join("runs").join(id)) {
                RunState::Missing if tabled.contains(id) => RunState::Damaged(
                    "its directory is gone, though the results table lists it (deleted)".into(),
                ),
                s => s,
            };
            (id.to_string(), state)
        })
        .collect();
    // A store written with checksums has them in every run: one without lost its file.
    if runs
        .iter()
        .any(|(_, s)| *s == RunState::Intact { checksummed: true })
    {
        for (_, s) in runs.iter_mut() {
            if *s == (RunState::Intact { checksummed: false }) {
                *s = RunState::Damaged(format!(
                    "{CHECKSUMS} is missing, while the other runs have one (deleted)"
                ));
            }
        }
    }
    Ok(Survey { runs })
}

/// Run ids of the results table already in `dir` (empty when there is none or it is unreadable:
/// the table is rebuilt from the runs, so it only serves to recognise a deleted run).
fn tabled_runs(dir: &Path) -> BTreeSet<String> {
    use super::table::{Column, ResultsFormat, Table};
    for f in ResultsFormat::ALL {
        let path = dir.join(format!("results.{}", f.ext()));
        if path.exists() {
            if let Ok(t) = Table::read(&path) {
                if let Some(Column::Text(ids)) = t.column("run") {
                    return ids.iter().cloned().collect();
                }
            }
            return BTreeSet::new();
        }
    }
    BTreeSet::new()
}

/// What a reader does with runs that are not intact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Go on without damaged runs (`--skip-damaged`) instead of refusing.
    pub skip_damaged: bool,
    /// Runs not computed yet are refused too (analysis of a whole grid: pstar, fit, plot);
    /// merge and sweep accept them, since shards finish at different times.
    pub require_complete: bool,
}

/// At most this many run ids are named in one sentence; the rest are counted.
const NAMED: usize = 8;

fn name_runs<'a>(items: impl Iterator<Item = String> + 'a) -> String {
    let all: Vec<String> = items.collect();
    let mut s = all
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if all.len() > NAMED {
        s += &format!(" and {} more", all.len() - NAMED);
    }
    s
}

/// Applies `policy` to a survey of `dir`: an error naming the damaged (and, when the policy
/// requires a complete grid, the missing) runs, or the notes a reader prints when it goes on.
pub fn enforce(dir: &Path, survey: &Survey, policy: Policy) -> Result<Vec<String>> {
    let damaged = survey.damaged();
    let missing = survey.missing();
    let mut notes = Vec::new();
    if !damaged.is_empty() {
        let list = name_runs(damaged.iter().map(|(id, r)| format!("{id} ({r})")));
        if !policy.skip_damaged {
            return Err(Error::invalid(format!(
                "{} has {} damaged run(s): {list}; run the same flscale sweep again to recompute them, or pass --skip-damaged to go on without them",
                dir.display(),
                damaged.len()
            )));
        }
        notes.push(format!("skipped {} damaged run(s): {list}", damaged.len()));
    }
    if policy.require_complete && !missing.is_empty() {
        let list = name_runs(missing.iter().map(|s| s.to_string()));
        if !policy.skip_damaged {
            return Err(Error::invalid(format!(
                "{} is incomplete: {} of {} run(s) are not computed yet ({list}); finish the sweep (flscale status {} prints the command) or pass --skip-damaged to analyse the finished ones",
                dir.display(),
                missing.len(),
                survey.runs.len(),
                dir.display()
            )));
        }
        notes.push(format!("skipped {} missing run(s): {list}", missing.len()));
    }
    let legacy = survey.unchecksummed();
    if !legacy.is_empty() {
        notes.push(format!(
            "{} run(s) have no {CHECKSUMS} (written by an older flscale), so only their format was checked: {}",
            legacy.len(),
            name_runs(legacy.iter().map(|s| s.to_string()))
        ));
    }
    Ok(notes)
}

/// A count of runs by state, for messages.
pub fn counts(survey: &Survey) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for (_, s) in &survey.runs {
        let k = match s {
            RunState::Intact { .. } => "intact",
            RunState::Damaged(_) => "damaged",
            RunState::Missing => "missing",
        };
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        // draft-eastlake-fnv-21, Appendix C / the reference implementation's test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// Writes an intact run with checksums into `dir`.
    pub(in crate::experiment) fn write_run(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        let files: Vec<(String, Vec<u8>)> = [
            ("experiment.toml", "[data]\nd = 4\n"),
            ("summary.json", "{\"alignment\": 0.5}\n"),
            (
                "chains.csv",
                "chain,status,alignment,test_mse,r_overlap2,outliers,mu\n0,ok,0.5,0.1,,2,\n",
            ),
            ("traces.csv", "step,energy\n10,1.5\n"),
            ("histogram_rho.csv", "bin_low,bin_high,count\n0,1,3\n,,0\n"),
        ]
        .iter()
        .map(|(n, t)| (n.to_string(), t.as_bytes().to_vec()))
        .collect();
        for (n, b) in &files {
            std::fs::write(dir.join(n), b).unwrap();
        }
        let sums = serde_json::to_string_pretty(&checksums_json(&files)).unwrap();
        std::fs::write(dir.join(CHECKSUMS), sums).unwrap();
    }

    #[test]
    fn every_kind_of_damage_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run-00000");
        write_run(&run);
        assert_eq!(verify_run(&run), RunState::Intact { checksummed: true });
        let chains = run.join("chains.csv");
        let text = std::fs::read_to_string(&chains).unwrap();
        std::fs::write(&chains, &text[..text.len() - 4]).unwrap();
        let RunState::Damaged(r) = verify_run(&run) else {
            panic!()
        };
        assert!(
            r.contains("chains.csv has") && r.contains("truncated"),
            "{r}"
        );
        std::fs::write(&chains, text.replace("0.1", "NaN")).unwrap();
        let RunState::Damaged(r) = verify_run(&run) else {
            panic!()
        };
        assert!(r.contains("chains.csv"), "{r}");
        // Without checksums (an older store) the strict parse still finds the NaN.
        std::fs::remove_file(run.join(CHECKSUMS)).unwrap();
        let RunState::Damaged(r) = verify_run(&run) else {
            panic!()
        };
        assert!(r.contains("non-finite number NaN"), "{r}");
        std::fs::write(&chains, &text).unwrap();
        assert_eq!(verify_run(&run), RunState::Intact { checksummed: false });
        std::fs::remove_file(run.join("histogram_rho.csv")).unwrap();
        assert!(matches!(verify_run(&run), RunState::Damaged(_)));
        assert_eq!(verify_run(&tmp.path().join("run-00001")), RunState::Missing);
    }
}
