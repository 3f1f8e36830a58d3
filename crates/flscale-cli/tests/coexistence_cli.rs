//! The coexistence example as a user runs it: `flscale free-energy` on its grid with `--quick`
//! brackets ΔF = 0 at both d and writes DIR/coexistence.json; `flscale pstar`, `fit` and `plot`
//! then read that directory without sampling and give the same thresholds, the exponents and
//! the figure; options that select a crossing, and a damaged file, exit 2 with one sentence.

mod common;

use std::path::{Path, PathBuf};

use common::{ok, run};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/experiments/free-energy-coexistence.toml")
        .canonicalize()
        .unwrap()
}

/// `a` and `b` agree to rounding: the reread parses the stored summaries, and JSON's decimal
/// form of a float may come back one unit in the last place off.
fn close(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a, b) {
        (serde_json::Value::Number(x), serde_json::Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-300)
        }
        (serde_json::Value::Array(x), serde_json::Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| close(x, y))
        }
        (serde_json::Value::Object(x), serde_json::Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
        }
        _ => a == b,
    }
}

fn one_sentence_exit_2(args: &[&str], cwd: &Path, want: &str) {
    let o = run(args, cwd);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
}

#[test]
fn the_coexistence_example_brackets_and_the_stored_results_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let ex = example();
    let ex = ex.to_str().unwrap();
    ok(
        &[
            "free-energy",
            ex,
            "--out",
            "fe",
            "--quick",
            "--replicates",
            "20",
        ],
        t,
    );
    let dir = t.join("fe");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("coexistence.json")).unwrap())
            .unwrap();

    // Six cells (d = 16, 20 at three P/d), every one analysed in its own directory.
    let cells = saved["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6, "{saved}");
    for c in cells {
        assert_eq!(c["analysed"], true, "{c}");
        assert!(dir
            .join(c["id"].as_str().unwrap())
            .join("free_energy.json")
            .is_file());
    }

    // Per d: ΔF changes sign between two measured P, so P*_coex lies inside that bracket with a
    // positive error. At d = 16 both cells of the bracket have two basins well above the
    // prominence cut, so it is interpolated (resolved); at d = 20 a cell's second basin may
    // fall under the cut, leaving the bracket (bracketed). The spinodals carry a resolution and
    // a sentence.
    let rows = saved["thresholds"]["rows"].as_array().unwrap();
    let ds: Vec<f64> = rows.iter().map(|r| r["d"].as_f64().unwrap()).collect();
    assert_eq!(ds, [16.0, 20.0], "{saved}");
    assert_eq!(rows[0]["coexistence"]["resolution"], "resolved", "{saved}");
    for r in rows {
        let c = &r["coexistence"];
        let resolution = c["resolution"].as_str().unwrap();
        assert!(["resolved", "bracketed"].contains(&resolution), "{c}");
        let p = c["P"].as_f64().unwrap();
        let (lo, hi) = (
            c["bracket"][0].as_f64().unwrap(),
            c["bracket"][1].as_f64().unwrap(),
        );
        assert!(lo < p && p < hi, "{c}");
        assert!(c["err"].as_f64().unwrap() > 0.0, "{c}");
        let d = r["d"].as_f64().unwrap();
        assert!(lo >= 10.0 * d && hi <= 17.0 * d, "{c}");
        // ΔF has opposite signs at the bracket's ends (a single basin's ΔF is ±∞, null in
        // JSON: + when only the lazy minimum exists).
        let sign = |p: f64| {
            let cell = r["cells"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["P"].as_f64() == Some(p))
                .unwrap();
            match (cell["delta_f"]["value"].as_f64(), cell["phases"].as_str()) {
                (Some(v), _) => v.signum(),
                (None, Some("lazy")) => 1.0,
                (None, _) => -1.0,
            }
        };
        assert!(sign(lo) * sign(hi) < 0.0, "{r}");
        for key in ["spinodal_lazy", "spinodal_spec"] {
            let s = &r[key];
            assert!(s["resolution"].is_string() && !s["why"].as_str().unwrap().is_empty());
        }
    }
    let fits = saved["fits"].as_array().unwrap();
    let names: Vec<&str> = fits
        .iter()
        .map(|f| f["threshold"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["P*_coex", "P*_spinodal_lazy", "P*_spinodal_spec"]);
    assert!(
        fits[0]["exponent"].as_f64().unwrap().is_finite(),
        "{}",
        fits[0]
    );
    assert_eq!(saved["input"]["summaries"].as_array().unwrap().len(), 6);

    // `pstar` rereads the directory: the same thresholds, fits and notes (same replicates and
    // seed), and the table as text.
    let p: serde_json::Value = serde_json::from_str(&ok(&["pstar", "fe", "--json"], t)).unwrap();
    for key in ["thresholds", "fits", "notes"] {
        assert!(
            close(&p[key], &saved[key]),
            "{key}: {} vs {}",
            p[key],
            saved[key]
        );
    }
    let text = ok(&["pstar", "fe"], t);
    assert!(
        text.contains("P*_coex") && text.contains("resolved"),
        "{text}"
    );
    assert!(text.contains("P*_coex vs d: measured exponent"), "{text}");

    // `fit`: each threshold's exponent, the same as the run's.
    let f: serde_json::Value = serde_json::from_str(&ok(&["fit", "fe", "--json"], t)).unwrap();
    let coex = &f["fits"][0];
    assert_eq!(coex["threshold"], "P*_coex", "{f}");
    assert!(close(&coex["exponent"], &fits[0]["exponent"]), "{f}");
    assert!(close(&coex["points"], &fits[0]["points"]), "{f}");

    // `plot`: the thresholds against d as PNG and SVG, with the carried font's text.
    let files: serde_json::Value = serde_json::from_str(&ok(&["plot", "fe", "--json"], t)).unwrap();
    let png = dir.join("figures/thresholds_vs_d.png");
    let svg = dir.join("figures/thresholds_vs_d.svg");
    assert_eq!(
        files["files"],
        serde_json::json!([
            "fe/figures/thresholds_vs_d.png",
            "fe/figures/thresholds_vs_d.svg"
        ])
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "{}",
        bytes.len()
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.contains("P*_coex") && svg.contains("P*_coex fit, slope"),
        "{svg}"
    );

    // Bad input: options that select a crossing, and a damaged file.
    one_sentence_exit_2(
        &["pstar", "fe", "--threshold", "0.2"],
        t,
        "--threshold does not apply",
    );
    one_sentence_exit_2(
        &["pstar", "fe", "--observable", "test_mse"],
        t,
        "--observable",
    );
    one_sentence_exit_2(&["fit", "fe", "--y", "outliers"], t, "--y does not apply");
    std::fs::write(dir.join("coexistence.json"), "{\"cells\": []}").unwrap();
    one_sentence_exit_2(&["pstar", "fe"], t, "does not hold the cells' summaries");
    one_sentence_exit_2(&["plot", "fe"], t, "rerun `flscale free-energy");
    std::fs::write(dir.join("coexistence.json"), "{").unwrap();
    one_sentence_exit_2(&["fit", "fe"], t, "is not JSON");
}
