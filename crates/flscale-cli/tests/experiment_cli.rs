//! End-to-end tests of `flscale sweep | merge | pstar | fit | plot | reproduce` (issue 6):
//! each runs the binary in a temporary directory.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use flscale::experiment::table::Column;

mod common;
use common::{bin, finished_runs, ok, run, snapshot, EXP};

fn assert_same(a: &Path, b: &Path) {
    let (x, y) = (snapshot(a), snapshot(b));
    assert_eq!(
        x.keys().collect::<Vec<_>>(),
        y.keys().collect::<Vec<_>>(),
        "different file sets in {} and {}",
        a.display(),
        b.display()
    );
    for (k, v) in &x {
        assert!(
            v == &y[k],
            "{} differs between {} and {}",
            k.display(),
            a.display(),
            b.display()
        );
    }
}

/// Checks the results table (Parquet or CSV, read back by the library): one row per (run,
/// observable), and alignment present for every run.
fn check_results(dir: &Path, runs: usize) {
    let t = flscale::experiment::results::load_results(dir).unwrap();
    let Some(Column::Text(obs)) = t.column("observable") else {
        panic!("no observable column: {:?}", t.names)
    };
    let Some(Column::Float(values)) = t.column("value") else {
        panic!("no value column: {:?}", t.names)
    };
    assert_eq!(
        obs.len(),
        runs * (flscale::experiment::store::OBSERVABLES.len() + 1)
    );
    let alignments: Vec<f64> = obs
        .iter()
        .zip(values)
        .filter(|(o, _)| *o == "alignment")
        .map(|(_, v)| v.expect("alignment missing"))
        .collect();
    assert_eq!(alignments.len(), runs);
    assert!(alignments.iter().all(|a| a.is_finite()));
    // The stored file itself (not only the library's reading of it) holds the whole
    // coordinates and swept integers as integers and the verdicts as booleans.
    let stored = ["parquet", "csv"]
        .map(|ext| dir.join(format!("results.{ext}")))
        .into_iter()
        .find(|p| p.exists())
        .unwrap();
    let raw = flscale::experiment::Table::read(&stored).unwrap();
    // (An attention network has no width n1.)
    let widths = raw.column("n1").map(|_| "n1");
    for name in ["d", "p", "seed", "seed_cold"].into_iter().chain(widths) {
        assert!(
            matches!(raw.column(name), Some(Column::OptInt(_))),
            "{name} in {}: {:?}",
            stored.display(),
            raw.column(name)
        );
    }
    assert!(matches!(raw.column("p_over_d"), Some(Column::Float(_))));
    assert!(matches!(raw.column("equilibrated"), Some(Column::Bool(_))));
    assert!(matches!(raw.column("starts_agree"), Some(Column::Bool(_))));
}

/// Starts `flscale sweep exp.toml --out OUT ARGS`, SIGKILLs it right after its first run
/// directory appears, checks that no results table was written, and re-runs it to the end.
fn kill_and_resume(t: &Path, out: &str, args: &[&str]) {
    let mut child = bin()
        .args(["sweep", "exp.toml", "--out", out])
        .args(args)
        .current_dir(t)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while finished_runs(&t.join(out)) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no run finished"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let at_kill = finished_runs(&t.join(out));
    assert!(at_kill < 6, "the sweep finished before it could be killed");
    for ext in ["parquet", "csv"] {
        assert!(!t.join(out).join(format!("results.{ext}")).exists());
    }
    let mut resume = vec!["sweep", "exp.toml", "--out", out];
    resume.extend(args);
    let resumed = ok(&resume, t);
    assert!(
        resumed.contains(&format!("{at_kill} already finished")),
        "{resumed}"
    );
}

fn table(path: &Path) -> flscale::experiment::Table {
    flscale::experiment::Table::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn check_figure(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match path.extension().and_then(|e| e.to_str()) {
        Some("png") => assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display()),
        Some("svg") => {
            let s = String::from_utf8(bytes).unwrap();
            assert!(
                s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
                "{}",
                path.display()
            );
        }
        _ => panic!("unexpected figure {}", path.display()),
    }
}

#[test]
fn killed_sweep_resumes_to_the_uninterrupted_result_and_shards_merge_to_it() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("exp.toml"), EXP).unwrap();
    // Uninterrupted.
    ok(&["sweep", "exp.toml", "--out", "a"], t);
    check_results(&t.join("a"), 6);
    assert!(t.join("a/results.parquet").exists() && !t.join("a/results.csv").exists());
    // Killed (SIGKILL) right after its first run directory appears, then re-run.
    kill_and_resume(t, "b", &[]);
    assert_same(&t.join("a"), &t.join("b"));
    // The same with CSV tables: the same runs, the same table in the other format.
    ok(&["sweep", "exp.toml", "--out", "c", "--format", "csv"], t);
    assert!(t.join("c/results.csv").exists() && !t.join("c/results.parquet").exists());
    check_results(&t.join("c"), 6);
    assert_eq!(
        flscale::experiment::results::load_results(&t.join("a")).unwrap(),
        flscale::experiment::results::load_results(&t.join("c")).unwrap()
    );
    kill_and_resume(t, "d", &["--format", "csv"]);
    assert_same(&t.join("c"), &t.join("d"));
    // Two shards in separate directories, with different thread counts, merged.
    for (i, threads) in [(0, "1"), (1, "2")] {
        let o = bin()
            .args(["sweep", "exp.toml", "--out", &format!("s{i}"), "--shard"])
            .arg(format!("{i}/2"))
            .env("RAYON_NUM_THREADS", threads)
            .current_dir(t)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(finished_runs(&t.join("s0")), 3);
    ok(&["merge", "m", "s0", "s1"], t);
    assert_same(&t.join("a"), &t.join("m"));
    ok(&["merge", "m", "s0", "s1"], t);
    ok(&["merge", "m"], t);
    assert_same(&t.join("a"), &t.join("m"));
    // Merging into CSV gives the CSV sweep's bytes; merging that again keeps CSV.
    ok(&["merge", "mc", "s0", "s1", "--format", "csv"], t);
    assert_same(&t.join("c"), &t.join("mc"));
    ok(&["merge", "mc"], t);
    assert_same(&t.join("c"), &t.join("mc"));
    let o = run(&["merge", "mc", "--format", "xlsx"], t);
    assert_eq!(o.status.code(), Some(2));
    // Merging a different sweep is refused.
    std::fs::write(t.join("other.toml"), EXP.replace("seed = 3", "seed = 4")).unwrap();
    ok(&["sweep", "other.toml", "--out", "o", "--shard", "0/6"], t);
    let o = run(&["merge", "m", "o"], t);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("different experiment"));
    // So is resuming into a directory of another sweep.
    let o = run(&["sweep", "other.toml", "--out", "a"], t);
    assert_eq!(o.status.code(), Some(2));

    // Analysis on the finished sweep: finite numbers, the prediction beside them.
    let p: serde_json::Value =
        serde_json::from_str(&ok(&["pstar", "a", "--json", "--bootstrap", "200"], t)).unwrap();
    assert_eq!(p["rows"].as_array().unwrap().len(), 2);
    for r in p["rows"].as_array().unwrap() {
        for (_, a) in r["curve"].as_array().unwrap().iter().map(|c| {
            let c = c.as_array().unwrap();
            (c[0].as_f64().unwrap(), c[1].as_f64().unwrap())
        }) {
            assert!(a.is_finite());
        }
    }
    assert_eq!(p["predicted"]["value"].as_f64(), Some(1.0));
    let o = run(&["fit", "a", "--y", "r_overlap2", "--x", "p"], t);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    // The experiment's prediction is about P*, so it is not paired with an R fit.
    assert!(
        s.contains("measured exponent") && s.contains("no prediction"),
        "{s}"
    );
    let o = run(
        &[
            "fit",
            "a",
            "--y",
            "r_overlap2",
            "--x",
            "p",
            "--preset",
            "fcn2-erf-he3",
            "--at",
            "N=d",
        ],
        t,
    );
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("predicted 1"), "{s}");
    let o = run(&["fit", "a", "--y", "energy"], t);
    assert_eq!(o.status.code(), Some(2));
    let plotted = ok(&["plot", "a", "--bootstrap", "100"], t);
    let figs: Vec<&str> = plotted
        .lines()
        .filter_map(|l| l.strip_prefix("wrote "))
        .collect();
    assert!(
        figs.iter().any(|f| f.ends_with("alignment_vs_p.png")),
        "{plotted}"
    );
    assert!(
        figs.iter().any(|f| f.ends_with("mse_vs_alignment.svg")),
        "{plotted}"
    );
    for f in figs {
        check_figure(&t.join(f));
    }
}

#[test]
fn malformed_experiment_files_fail_before_any_run_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let cases = [
        ("data.p_over_d = [2, 8, 32]", "data.pp = [2]", "data.pp"),
        (
            "data.d = [6, 8]",
            "data.d = []",
            "sweep.data.d = [] is an empty grid",
        ),
        (
            "data.d = [6, 8]",
            "data.d = [6, -8]",
            "sweep.data.d[1] = -8",
        ),
        ("seed = 3", "seed = 3\nsede = 4", "sede"),
        ("kappa = 0.5", "kappa = -0.5", "sampler.kappa = -0.5"),
    ];
    for (from, to, want) in cases {
        std::fs::write(t.join("bad.toml"), EXP.replace(from, to)).unwrap();
        let o = run(&["sweep", "bad.toml", "--out", "bad"], t);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{to}: {err}");
        assert!(err.contains(want), "{to}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(!t.join("bad").exists(), "{to}: a run directory was created");
    }
    let o = run(&["sweep", "bad.toml", "--out", "x", "--shard", "2/2"], t);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn emit_slurm_writes_a_job_array_and_dry_run_lists_the_grid() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("exp.toml"), EXP).unwrap();
    ok(&["sweep", "exp.toml", "--out", "c", "--emit-slurm", "3"], t);
    let s = std::fs::read_to_string(t.join("c/sweep.sbatch")).unwrap();
    assert!(s.starts_with("#!/bin/bash"));
    assert!(s.contains("#SBATCH --array=0-2"), "{s}");
    assert!(s.contains("--shard \"${SLURM_ARRAY_TASK_ID}/3\""), "{s}");
    assert_eq!(finished_runs(&t.join("c")), 0);
    let l = ok(&["sweep", "exp.toml", "--out", "c", "--dry-run"], t);
    assert_eq!(
        l.lines().filter(|x| x.starts_with("run-")).count(),
        6,
        "{l}"
    );
    assert!(l.contains("run-00005  d=8 p=256 widths=[8]"), "{l}");
}

fn reproduce_quick(name: &str) -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let out = ok(
        &[
            "reproduce",
            name,
            "--quick",
            "--out",
            "r",
            "--bootstrap",
            "200",
        ],
        tmp.path(),
    );
    let dir = tmp.path().join("r");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let runs = manifest["runs"].as_array().unwrap().len();
    assert_eq!(finished_runs(&dir), runs);
    check_results(&dir, runs);
    let figs: Vec<PathBuf> = std::fs::read_dir(dir.join("figures"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(!figs.is_empty(), "{name}: no figure");
    for f in &figs {
        check_figure(f);
    }
    (tmp, out)
}

#[test]
fn reproduce_fig2b_quick_prints_measured_and_predicted_exponents() {
    let (tmp, out) = reproduce_quick("fig2b");
    assert!(out.contains("predicted 1"), "{out}");
    // No resolved crossing: no exponent may be claimed (issue 15).
    assert!(
        out.contains("no exponent") && !out.contains("measured exponent"),
        "{out}"
    );
    assert!(tmp.path().join("r/figures/alignment_vs_p.svg").exists());
    // Three P values per d cannot give a crossing two grid points on each side: reproduce
    // warns as `pstar` and `fit` do, naming the store, in the text and in --json.
    assert!(
        out.contains("warning: the exponent rests on 0 resolved P* value(s) of d"),
        "{out}"
    );
    assert!(out.contains("--out r"), "{out}");
    assert!(
        out.contains("`flscale reproduce fig2b --show > EXP`; add --quick"),
        "{out}"
    );
    // Issue 40: the smoke-test disclaimer first, the sizes that ran in the header, each note
    // once; alignment_vs_p with error bars; outliers_vs_n1 says which P its points are at.
    assert!(
        out.starts_with("quick sizes: far from the paper's"),
        "{out}"
    );
    assert!(out.contains("\nran: d = 6, 9, 12; p = "), "{out}");
    let notes: Vec<&str> = out.lines().filter(|l| l.starts_with("note:")).collect();
    let distinct: std::collections::BTreeSet<&&str> = notes.iter().collect();
    assert_eq!(notes.len(), distinct.len(), "a note printed twice:\n{out}");
    let figs = tmp.path().join("r/figures");
    let svg = |name: &str| std::fs::read_to_string(figs.join(format!("{name}.svg"))).unwrap();
    assert!(svg("alignment_vs_p").contains("one standard error"));
    let outliers = svg("outliers_vs_n1");
    assert!(
        outliers.contains("one curve per P/d") && outliers.contains("P/d = 8"),
        "outliers_vs_n1 does not say which P its points are at"
    );
    let again = ok(
        &[
            "reproduce",
            "fig2b",
            "--quick",
            "--out",
            "r",
            "--bootstrap",
            "200",
            "--json",
        ],
        tmp.path(),
    );
    let v: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(v["runs_computed"], 0, "{v}");
    let w: Vec<&str> = v["fit_warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(!w.is_empty(), "{v}");
    for x in &w {
        assert!(out.contains(&format!("warning: {x}\n")), "{x} not in {out}");
    }
    // The same store through `flscale pstar` gives the same warnings.
    let p: serde_json::Value = serde_json::from_str(&ok(
        &["pstar", "r", "--json", "--bootstrap", "200"],
        tmp.path(),
    ))
    .unwrap();
    assert_eq!(p["fit_warnings"], v["fit_warnings"]);
}

#[test]
fn reproduce_fig2a_quick() {
    let (tmp, _) = reproduce_quick("fig2a");
    assert!(tmp.path().join("r/figures/overlap_histograms.png").exists());
}

#[test]
fn reproduce_fig2c_quick() {
    let (tmp, out) = reproduce_quick("fig2c");
    assert!(tmp.path().join("r/figures/outliers_vs_n1.png").exists());
    // Issue 40: the header described the paper's d = 40, P = 40d while d = 10, p = 200 ran.
    assert!(
        out.contains("the paper's figure: first-layer outliers")
            && out.contains("\nran: d = 10; p = 200; n1 = 10, 20, 40\n"),
        "{out}"
    );
    let svg = std::fs::read_to_string(tmp.path().join("r/figures/outliers_vs_n1.svg")).unwrap();
    assert!(
        svg.contains("d = 10, P = 200"),
        "the figure does not say its P"
    );
    assert!(
        out.contains("predicted 1/2") || out.contains("no exponent"),
        "{out}"
    );
    // An exponent is claimed exactly when the outlier fit stands on 3 equilibrated widths.
    let warned = out
        .lines()
        .any(|l| l.starts_with("warning:") && l.contains("value(s) of n1 (needs 3)"));
    assert_eq!(out.contains("no exponent claimed"), warned, "{out}");
    assert_eq!(out.contains("measured exponent"), !warned, "{out}");
}

#[test]
fn reproduce_fig3a_quick() {
    let (tmp, _) = reproduce_quick("fig3a");
    assert!(tmp.path().join("r/figures/alignment_vs_p.png").exists());
}

#[test]
fn reproduce_fig3b_quick_draws_alignment_against_sqrt_l_d3_over_p() {
    let (tmp, out) = reproduce_quick("fig3b");
    let figs = tmp.path().join("r/figures");
    for name in [
        "alignment_vs_sqrt_ld3_over_p",
        "test_mse_vs_sqrt_ld3_over_p",
    ] {
        assert!(figs.join(format!("{name}.png")).exists(), "{name}: {out}");
        assert!(figs.join(format!("{name}.svg")).exists(), "{name}: {out}");
    }
    assert!(out.contains("sqrt_ld3_over_p"), "{out}");
    // Every run carries L, H and the scale √(L·d³)/P among its coordinates.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("r/manifest.json")).unwrap())
            .unwrap();
    for run in manifest["runs"].as_array().unwrap() {
        let c = &run["coordinates"];
        let (d, l, p) = (
            c["d"].as_f64().unwrap(),
            c["tokens"].as_f64().unwrap(),
            c["p"].as_f64().unwrap(),
        );
        assert_eq!(c["heads"].as_f64(), Some(2.0));
        let x = c["sqrt_ld3_over_p"].as_f64().unwrap();
        assert!((x - (l * d * d * d).sqrt() / p).abs() < 1e-12, "{c}");
    }
}

#[test]
fn reproduce_fig3c_quick_draws_the_second_layer_panels() {
    let (tmp, out) = reproduce_quick("fig8");
    assert!(!out.contains("not reproduced"), "{out}");
    let r = tmp.path().join("r");
    for f in [
        "layer2_overlap_histograms_phi.png",
        "layer2_overlap_histograms_he3.svg",
        "outliers_by_layer_vs_n1.png",
    ] {
        assert!(r.join("figures").join(f).exists(), "{f}\n{out}");
    }
    // Every run reports finite layer-2 outliers along both features, with their NNGP scale.
    let results = table(&r.join("results.parquet"));
    let (Column::Text(obs), Column::Float(values)) = (
        results.column("observable").unwrap(),
        results.column("value").unwrap(),
    ) else {
        panic!("{:?}", results.names)
    };
    for name in ["outliers_layer2_phi", "outliers_layer2_he3"] {
        let rows: Vec<Option<f64>> = obs
            .iter()
            .zip(values)
            .filter(|(o, _)| *o == name)
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(rows.len(), 2, "{name}");
        for v in rows {
            assert!(
                v.is_some_and(|v| v.is_finite() && v >= 0.0),
                "{name}: {v:?}"
            );
        }
    }
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(r.join("runs/run-00000/summary.json")).unwrap(),
    )
    .unwrap();
    let layer = &summary["deeper_layers"][0];
    assert_eq!(layer["layer"], 2);
    for f in layer["features"].as_array().unwrap() {
        assert!(f["nngp_std"].as_f64().unwrap() > 0.0, "{f}");
    }
    let probe = table(&r.join("histograms_probe.parquet"));
    let Some(Column::Text(names)) = probe.column("histogram") else {
        panic!("{:?}", probe.names)
    };
    assert!(names.iter().any(|n| n == "h2_phi") && names.iter().any(|n| n == "h2_he3"));
}

#[test]
fn reproduce_fig7_quick_prints_mu_exponent_beside_the_prediction() {
    let (tmp, out) = reproduce_quick("fig7");
    assert!(
        out.contains("predicted 1/4") || out.contains("no exponent"),
        "{out}"
    );
    let r = tmp.path().join("r");
    assert!(
        r.join("figures/parity_overlap_histograms.svg").exists(),
        "{out}"
    );
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(r.join("runs/run-00000/summary.json")).unwrap(),
    )
    .unwrap();
    let acc = summary["test_accuracy"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&acc), "{acc}");
    let dirs = summary["parity_directions"].as_array().unwrap();
    assert_eq!(dirs.len(), 2);
    assert_eq!(dirs[0]["direction"], "e1+e2");
    assert_eq!(dirs[1]["direction"], "e1-e2");
    let chains = table(&r.join("chains.parquet"));
    assert_eq!(chains.names.last().map(String::as_str), Some("mu"));
    // The rule behind μ and M: in the results table beside the summary's, and counted in the
    // report.
    let rule = summary["mu_classifier"].as_str().unwrap();
    assert!(["side_peak", "cut_3sigma"].contains(&rule), "{rule}");
    let results = table(&r.join("results.parquet"));
    let (Some(Column::Text(obs)), Some(Column::Text(rules)), Some(Column::Text(runs))) = (
        results.column("observable"),
        results.column("mu_classifier"),
        results.column("run"),
    ) else {
        panic!("results.parquet lacks observable, mu_classifier or run")
    };
    for i in 0..obs.len() {
        let counted = obs[i] == "mu" || obs[i] == "specialising";
        match (counted, runs[i].as_str()) {
            (true, "run-00000") => assert_eq!(rules[i], rule),
            (true, _) => assert!(!rules[i].is_empty(), "{}", runs[i]),
            (false, _) => assert_eq!(rules[i], "", "{}", obs[i]),
        }
    }
    assert!(
        out.contains("note: μ and M: the specialised neurons are the side peak of |w·u| in"),
        "{out}"
    );
}

#[test]
fn reproduce_blog_quick() {
    let (tmp, _) = reproduce_quick("blog");
    assert!(tmp.path().join("r/figures/r_overlap2_vs_p.svg").exists());
}

#[test]
fn an_unknown_preset_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&["reproduce", "fig9"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
}
