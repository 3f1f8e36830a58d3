//! `flscale free-energy` as a user runs it: the quick run of the sign-symmetry example writes
//! its files and a JSON object with the documented keys, a rerun resumes from the window
//! files, bad tables exit 2 with one sentence, and a `--windows` subset analyses only once
//! every window is there.

mod common;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use common::{ok, run};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/experiments/free-energy-sign.toml")
        .canonicalize()
        .unwrap()
}

/// Every window file of both stages (pilot/ and windows/) with its modification time.
fn mtimes(dir: &Path) -> Vec<(String, SystemTime)> {
    let mut v: Vec<(String, SystemTime)> = ["pilot", "windows"]
        .iter()
        .filter_map(|sub| std::fs::read_dir(dir.join(sub)).ok().map(|r| (sub, r)))
        .flat_map(|(sub, r)| {
            r.flatten().map(move |e| {
                (
                    format!("{sub}/{}", e.file_name().to_string_lossy()),
                    e.metadata().unwrap().modified().unwrap(),
                )
            })
        })
        .collect();
    v.sort();
    v
}

/// The `stages` entry of `stage` ("pilot" or "umbrella") in a `--json` answer.
fn stage<'a>(v: &'a serde_json::Value, stage: &str) -> &'a serde_json::Value {
    v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == stage)
        .unwrap_or_else(|| panic!("no {stage} stage in {v}"))
}

/// One sentence on stderr, exit code 2, no output directory content beyond what existed.
fn refused(args: &[&str], cwd: &Path, want: &str) {
    let o = run(args, cwd);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(want), "{args:?}: {err}");
}

#[test]
fn quick_run_writes_the_report_and_a_rerun_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let exp = example();
    let exp = exp.to_str().unwrap();
    let out = dir.path().join("fe");
    let out_s = out.to_str().unwrap();
    let text = ok(
        &[
            "free-energy",
            exp,
            "--out",
            out_s,
            "--quick",
            "--json",
            "--replicates",
            "40",
        ],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let n = v["profile"]["s"].as_array().unwrap().len();
    assert!(n >= 10);
    for key in ["F", "F_err"] {
        assert_eq!(v["profile"][key].as_array().unwrap().len(), n, "{key}");
    }
    let basins = v["basins"].as_array().unwrap();
    assert!(!basins.is_empty());
    let total: f64 = basins.iter().map(|b| b["weight"].as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-9, "{total}");
    for b in basins {
        for key in ["lo", "hi", "weight", "weight_err"] {
            assert!(b.get(key).is_some(), "basin without {key}: {b}");
        }
    }
    assert!(v.get("barrier").is_some());
    for name in ["alignment", "test_mse", "outliers"] {
        assert!(v["observables"][name]["value"].is_number(), "{name}");
        assert!(v["observables"][name].get("err").is_some(), "{name}");
    }
    // A flattened run: 4·15 + 1 = 61 pilot windows, then the 16 windows MBAR joins.
    assert_eq!(stage(&v, "pilot")["run"].as_array().unwrap().len(), 61);
    assert_eq!(stage(&v, "umbrella")["run"].as_array().unwrap().len(), 16);
    for f in ["profile.csv", "free_energy.json", "free_energy.svg"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(out.join("profile.csv")).unwrap();
    assert_eq!(csv.lines().next(), Some("s,F,F_err"));
    assert_eq!(csv.lines().count(), n + 1);
    assert!(std::fs::read_to_string(out.join("free_energy.svg"))
        .unwrap()
        .starts_with("<svg"));
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("free_energy.json")).unwrap())
            .unwrap();
    assert_eq!(saved["profile"], v["profile"]);

    // The rerun runs no window, leaves the window files untouched and reports the same numbers.
    let before = mtimes(&out);
    assert_eq!(before.len(), 61 + 16);
    let again = ok(
        &[
            "free-energy",
            exp,
            "--out",
            out_s,
            "--quick",
            "--json",
            "--replicates",
            "40",
        ],
        dir.path(),
    );
    let w: serde_json::Value = serde_json::from_str(&again).unwrap();
    for (name, count) in [("pilot", 61), ("umbrella", 16)] {
        assert_eq!(stage(&w, name)["run"].as_array().unwrap().len(), 0);
        assert_eq!(stage(&w, name)["kept"].as_array().unwrap().len(), count);
    }
    assert_eq!(mtimes(&out), before);
    assert_eq!(w["profile"], v["profile"]);
    assert_eq!(w["basins"], v["basins"]);

    // The same directory with the full-size plan holds another plan's windows.
    refused(
        &["free-energy", exp, "--out", out_s],
        dir.path(),
        "was written by a different experiment or [free_energy] table",
    );
    // The human summary names the basins and where the files are.
    let human = ok(
        &[
            "free-energy",
            exp,
            "--out",
            out_s,
            "--quick",
            "--replicates",
            "10",
        ],
        dir.path(),
    );
    assert!(
        human.contains("basin 1") && human.contains("written to") && human.contains("flattened"),
        "{human}"
    );
}

#[test]
fn a_window_subset_waits_for_the_rest_then_the_full_run_completes() {
    let dir = tempfile::tempdir().unwrap();
    let exp = example();
    let exp = exp.to_str().unwrap();
    let out = dir.path().join("fe");
    let out_s = out.to_str().unwrap();
    let text = ok(
        &[
            "free-energy",
            exp,
            "--out",
            out_s,
            "--quick",
            "--windows",
            "0,3-5",
            "--json",
        ],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // The subset runs in the pilot stage; the umbrella stage waits for the whole pilot.
    assert_eq!(v["analysed"], false);
    assert_eq!(stage(&v, "pilot")["run"], serde_json::json!([0, 3, 4, 5]));
    assert_eq!(stage(&v, "pilot")["missing"].as_array().unwrap().len(), 57);
    assert_eq!(v["stages"].as_array().unwrap().len(), 1);
    assert!(!out.join("free_energy.json").exists());
    let said = ok(
        &[
            "free-energy",
            exp,
            "--out",
            out_s,
            "--quick",
            "--windows",
            "1",
        ],
        dir.path(),
    );
    assert!(
        said.contains("umbrella stage waits") && said.contains("2,6-60"),
        "{said}"
    );
    let first = mtimes(&out);
    assert_eq!(first.len(), 5);
    let text = ok(
        &[
            "free-energy",
            exp,
            "--out",
            out_s,
            "--quick",
            "--json",
            "--replicates",
            "20",
        ],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["analysed"], true);
    assert_eq!(
        stage(&v, "pilot")["kept"],
        serde_json::json!([0, 1, 3, 4, 5])
    );
    assert_eq!(stage(&v, "pilot")["run"].as_array().unwrap().len(), 56);
    assert_eq!(stage(&v, "umbrella")["run"].as_array().unwrap().len(), 16);
    let all = mtimes(&out);
    assert!(
        first.iter().all(|f| all.contains(f)),
        "a kept window was rewritten"
    );
    assert!(out.join("free_energy.json").is_file());
}

#[test]
fn bad_tables_and_arguments_exit_2_with_one_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(example()).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let no_table = write(
        "none.toml",
        &base[..base.find("[free_energy]").unwrap()].to_string(),
    );
    refused(
        &["free-energy", &no_table, "--out", "o1"],
        dir.path(),
        "has no [free_energy] table",
    );
    let bad_neuron = write("n.toml", &base.replace("neuron = 0", "neuron = 3"));
    refused(
        &["free-energy", &bad_neuron, "--out", "o2", "--quick"],
        dir.path(),
        "free_energy.neuron = 3 is out of range",
    );
    let unknown = write("u.toml", &base.replace("windows = 16", "windowz = 16"));
    refused(
        &["free-energy", &unknown, "--out", "o3"],
        dir.path(),
        "unknown field `windowz`",
    );
    let exp = example();
    refused(
        &[
            "free-energy",
            exp.to_str().unwrap(),
            "--out",
            "o4",
            "--windows",
            "3-16",
        ],
        dir.path(),
        "the plan has 16 windows",
    );
    // `flscale sample` runs the same file's unbiased experiment, ignoring the table.
    let small = write("s.toml", &no_table_quick(&base));
    ok(&["sample", &small, "--out", "s"], dir.path());
}

/// The example with small sampler numbers and without [quick] (which `sample` does not read),
/// keeping [free_energy].
fn no_table_quick(base: &str) -> String {
    let cut = base.find("[quick]").unwrap();
    base[..cut]
        .lines()
        .map(|l| {
            if l.starts_with("steps =") {
                "steps = 300"
            } else if l.starts_with("burn_in =") {
                "burn_in = 100"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A `[sweep]` over P: each cell's windows and report in `DIR/run-NNNNN/`, then the
/// thresholds. The sign case is symmetric at every P (ΔF ≈ 0 within errors, but never of one
/// sign only by chance at two cells), so the answer either brackets or says in one sentence
/// why no pair of cells brackets coexistence; either way coexistence.json is written.
#[test]
fn a_grid_runs_every_cell_and_ends_with_the_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.toml");
    let base = std::fs::read_to_string(example()).unwrap();
    std::fs::write(&grid, format!("{base}\n[sweep]\n\"data.p\" = [32, 64]\n")).unwrap();
    let out = dir.path().join("fe");
    let text = ok(
        &[
            "free-energy",
            grid.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quick",
            "--json",
            "--replicates",
            "20",
        ],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{v}");
    for (c, p) in cells.iter().zip([32.0, 64.0]) {
        assert_eq!(c["analysed"], true, "{c}");
        assert_eq!(c["p"].as_f64(), Some(p));
        let dir = out.join(c["id"].as_str().unwrap());
        assert!(dir.join("free_energy.json").is_file());
        assert!(dir.join("windows").is_dir() && dir.join("pilot").is_dir());
    }
    assert!(out.join("coexistence.json").is_file());
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("coexistence.json")).unwrap())
            .unwrap();
    assert_eq!(saved["cells"], v["cells"]);
    // A row for d = 8, or one sentence saying why there is none.
    let rows = v["thresholds"]["rows"].as_array().map_or(0, |r| r.len());
    let notes = v["notes"].as_array().unwrap();
    assert!(rows == 1 || !notes.is_empty(), "{v}");
}
