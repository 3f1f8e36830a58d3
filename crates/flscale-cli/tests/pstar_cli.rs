//! `flscale pstar`, `fit` and `sweep --refine-pstar` on what the grid can say about P*
//! (issue 15): `fit` honours `[analysis] falling`, brackets are reported, and the refinement
//! bisects a real sweep's bracket in the same store, resumably.

use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flscale"))
        .arg("-q")
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn ok_json(args: &[&str], cwd: &Path) -> serde_json::Value {
    let o = run(args, cwd);
    assert!(
        o.status.success(),
        "flscale {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A results directory written by hand in the store's format: runs at (d, x) whose six chains
/// all have alignment `a(d, x)`.
fn write_store(dir: &Path, analysis: serde_json::Value, points: &[(f64, f64, f64)]) {
    std::fs::create_dir_all(dir.join("runs")).unwrap();
    let mut runs = Vec::new();
    for (k, &(d, x, a)) in points.iter().enumerate() {
        let id = format!("run-{k:05}");
        runs.push(serde_json::json!({
            "index": k, "id": id, "point": {},
            "coordinates": {"d": d, "p": x, "seed": 0.0}, "seed": 0,
        }));
        let rd = dir.join("runs").join(&id);
        std::fs::create_dir_all(&rd).unwrap();
        std::fs::write(rd.join("summary.json"), "{}\n").unwrap();
        std::fs::write(rd.join("experiment.toml"), "[data]\nd = 4\n").unwrap();
        std::fs::write(
            rd.join("traces.csv"),
            "step,burn_in,energy,alignment,test_mse,train_mse,r_overlap2,outliers\n",
        )
        .unwrap();
        let mut chains = String::from("chain,status,alignment,test_mse,r_overlap2,outliers,mu\n");
        for c in 0..6 {
            // ±1 % chain-to-chain spread, so the bootstrap has something to resample.
            let v = a * (1.0 + 0.01 * (c as f64 - 2.5) / 2.5);
            chains += &format!("{c},ok,{v},{},{},1,\n", 1.0 - v, v * v);
        }
        std::fs::write(rd.join("chains.csv"), chains).unwrap();
        std::fs::write(
            rd.join("histogram_rho.csv"),
            "bin_low,bin_high,count\n,,0\n",
        )
        .unwrap();
    }
    let manifest = serde_json::json!({
        "format": "flscale-results/1", "source": "hand-written", "experiment": "",
        "grid": {}, "analysis": analysis, "runs": runs,
    });
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
}

/// The failing case of the audit: an observable that falls with x (fig3b's A_f against
/// √(L·d³)/P). `fit` used to look for upward crossings only and found none.
#[test]
fn fit_with_falling_matches_pstar() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("falling");
    // A_f = 0.4·(x*/x)^{1.5} with the crossing of 0.1 at x = 2^{4/3}·x*, x* = 0.3·d^{0.75}.
    let mut pts = Vec::new();
    for d in [10.0f64, 20.0, 40.0] {
        let xs = 0.3 * d.powf(0.75);
        for r in [0.25, 0.5, 1.0, 2.0, 4.0, 8.0] {
            let x = r * xs;
            pts.push((d, x, 0.4 * (xs / x).powf(1.5)));
        }
    }
    write_store(
        &dir,
        serde_json::json!({"x": "p", "group": "d", "observable": "alignment",
                           "threshold": 0.1, "falling": true}),
        &pts,
    );
    let d = dir.to_str().unwrap();
    let p = ok_json(&["pstar", d, "--json", "--bootstrap", "200"], tmp.path());
    let f = ok_json(&["fit", d, "--json", "--bootstrap", "200"], tmp.path());
    let pe = p["exponent"]["value"].as_f64().unwrap();
    let fe = f["exponent"].as_f64().unwrap();
    assert_eq!(pe, fe, "pstar {p} vs fit {f}");
    assert!((fe - 0.75).abs() < 0.02, "{fe}");
    // Same bootstrap stream, same interval.
    assert_eq!(p["exponent"]["ci95"], f["ci95"]);
    // Every crossing lies between grid points a factor 2 apart: bracketed, not resolved.
    for row in p["rows"].as_array().unwrap() {
        assert_eq!(row["resolved"], false, "{row}");
        assert!((row["bracket_factor"].as_f64().unwrap() - 2.0).abs() < 1e-9);
    }
    assert_eq!(f["unresolved"].as_array().unwrap().len(), 3, "{f}");
    // No crossing is resolved: both commands flag the exponent with the command to run.
    for v in [&p, &f] {
        let w = v["fit_warnings"].as_array().unwrap();
        let last = w.last().unwrap().as_str().unwrap();
        assert!(last.contains("rests on 0 resolved P* value(s) of d"), "{v}");
        assert_eq!(v["exponent_claimed"], false, "{v}");
        assert!(
            last.contains(&format!("--out {d} --refine-pstar 1.1")),
            "{v}"
        );
    }
    let o = run(&["pstar", d], tmp.path());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("bracketed"), "{text}");
    assert!(text.contains("--refine-pstar"), "{text}");
    assert!(
        text.contains("warning: the exponent rests on 0 resolved"),
        "{text}"
    );
    // The slope through unresolved crossings is shown, not claimed as a measurement.
    assert!(
        text.contains("P* vs d: no exponent claimed from 3 point(s)")
            && !text.contains("measured exponent"),
        "{text}"
    );
}

/// A tiny real sweep with two sizes far apart: `--refine-pstar 1.5` adds runs at the log
/// midpoints until the bracket is within 1.5 (or P is at integer resolution), and a second
/// invocation adds nothing and leaves the files as they were.
/// A two-point grid of tiny runs for `--refine-pstar`: P = 6 and 96 at d = 6.
const REFINE_GRID: &str = r#"
[model]
kind = "fcn"
activation = "erf"
widths = [6]
[data]
d = 6
p = 6
n_test = 100
[target]
hermite = 1
[sampler]
kappa = 0.3
step = 5e-4
steps = 300
burn_in = 150
thin = 30
chains = 4
seed = 5
[sweep]
data.p = [6, 96]
"#;

/// The experiment file of [`REFINE_GRID`] whose threshold lies the fraction `at` of the way
/// from the mean at P = 6 to the mean at P = 96 (so the means cross it inside the factor-16
/// bracket), written into `dir` as exp.toml after running the grid alone to read the means.
fn refine_experiment(dir: &Path, at: f64) {
    let base = REFINE_GRID;
    std::fs::write(dir.join("grid.toml"), base).unwrap();
    let g = ok_json(&["sweep", "grid.toml", "--out", "grid", "--json"], dir);
    assert_eq!(g["computed"], 2);
    let p = ok_json(&["pstar", "grid", "--json", "--threshold", "0.0"], dir);
    let curve = p["rows"][0]["curve"].as_array().unwrap().clone();
    let (y0, y1) = (curve[0][1].as_f64().unwrap(), curve[1][1].as_f64().unwrap());
    assert!(y0 != y1, "{curve:?}");
    let exp = format!(
        "{base}[analysis]\nx = \"p\"\ngroup = \"d\"\nthreshold = {}\nfalling = {}\n",
        y0 + at * (y1 - y0),
        y1 < y0
    );
    std::fs::write(dir.join("exp.toml"), exp).unwrap();
}

#[test]
fn refine_pstar_bisects_a_real_bracket_resumably() {
    let tmp = tempfile::tempdir().unwrap();
    refine_experiment(tmp.path(), 0.5);
    let args = [
        "sweep",
        "exp.toml",
        "--out",
        "refined",
        "--refine-pstar",
        "1.5",
        "--json",
    ];
    let r = ok_json(&args, tmp.path());
    let added = r["runs_added"].as_u64().unwrap();
    assert!(added >= 1, "{r}");
    let row = &r["pstar"]["rows"][0];
    let b = row["bracket"].as_array().unwrap();
    let (lo, hi) = (b[0].as_f64().unwrap(), b[1].as_f64().unwrap());
    assert!(hi / lo <= 1.5 || hi - lo <= 1.0, "{row}");
    assert!(
        (6.0..=96.0).contains(&lo) && (6.0..=96.0).contains(&hi),
        "{row}"
    );
    let listed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("refined/refine.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(listed["runs"].as_array().unwrap().len() as u64, added);
    assert!(tmp
        .path()
        .join("refined/runs/refine-00000/summary.json")
        .exists());
    let before = std::fs::read(tmp.path().join("refined/results.parquet")).unwrap();
    let again = ok_json(&args, tmp.path());
    assert_eq!(again["runs_added"], 0, "{again}");
    assert_eq!(again["grid_runs_computed"], 0, "{again}");
    assert_eq!(
        std::fs::read(tmp.path().join("refined/results.parquet")).unwrap(),
        before
    );
    // Shards cannot refine: the bisection needs the whole grid.
    let o = run(
        &[
            "sweep",
            "exp.toml",
            "--out",
            "x",
            "--shard",
            "0/2",
            "--refine-pstar",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("whole grid"));
}

/// The crossing near the upper grid point: after the first midpoint the bracket's lower end
/// is a refinement run, not a grid run, and the bisection must go on from there (it used to
/// stop, finding no grid run at the new lower end to copy).
#[test]
fn refine_pstar_goes_on_once_the_bracket_leaves_the_grid() {
    let tmp = tempfile::tempdir().unwrap();
    refine_experiment(tmp.path(), 0.9);
    let r = ok_json(
        &[
            "sweep",
            "exp.toml",
            "--out",
            "refined",
            "--refine-pstar",
            "1.5",
            "--json",
        ],
        tmp.path(),
    );
    let row = &r["pstar"]["rows"][0];
    let b = row["bracket"].as_array().unwrap();
    let (lo, hi) = (b[0].as_f64().unwrap(), b[1].as_f64().unwrap());
    assert!(hi / lo <= 1.5 || hi - lo <= 1.0, "{r}");
    assert!(r["unresolved"].as_array().unwrap().is_empty(), "{r}");
    // A factor 16 takes at least three halvings in log P to reach 1.5 (16^{1/8} = 1.41).
    assert!(r["rounds"].as_u64().unwrap() >= 3, "{r}");
}
