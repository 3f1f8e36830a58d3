//! `flscale ldt` and `flscale kernel` run as a user would: JSON fields, exit codes on bad
//! input, figures, help text, reproducibility across thread counts.

use std::process::{Command, Output};

fn flscale(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flscale"))
        .args(args)
        .output()
        .expect("the flscale binary runs")
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let o = flscale(args);
    assert!(
        o.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(!text.contains("NaN"), "{text}");
    serde_json::from_str(&text).expect("one JSON object")
}

fn assert_bad_input(args: &[&str]) {
    let o = flscale(args);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.trim().is_empty());
}

#[test]
fn ldt_rate_json_has_the_rate_and_its_maximiser() {
    let v = json_of(&["ldt", "rate", "--alpha", "0.5,1", "--kappa", "2", "--json"]);
    let pts = v["points"].as_array().unwrap();
    assert_eq!(pts.len(), 2);
    for p in pts {
        let (e, t, ps) = (
            p["rate"].as_f64().unwrap(),
            p["t_star"].as_f64().unwrap(),
            p["p_star"].as_f64().unwrap(),
        );
        assert!(e > 0.0 && t > 0.0);
        assert!((ps - 4.0 * e).abs() < 1e-9 * ps);
    }
    // E grows with α (a rate function is increasing on α > mean = 0).
    assert!(pts[1]["rate"].as_f64().unwrap() > pts[0]["rate"].as_f64().unwrap());
    assert_eq!(v["model"]["perp"], "prior");
}

#[test]
fn ldt_tilted_reports_bimodal_peaks_for_both_treatments() {
    let v = json_of(&["ldt", "tilted", "--json", "--grid", "61"]);
    assert_eq!(v["bimodal"], true);
    let b = v["beta_star"].as_f64().unwrap();
    assert!((1.5..1.75).contains(&b), "{b}");
    assert_eq!(v["density"].as_array().unwrap().len(), 61);
    let v = json_of(&["ldt", "tilted", "--perp", "exact", "--json", "--grid", "31"]);
    let b = v["beta_star"].as_f64().unwrap();
    assert!((1.3..1.5).contains(&b), "{b}");
}

#[test]
fn ldt_scaling_fits_exponent_one_at_n_equals_d() {
    let v = json_of(&["ldt", "scaling", "--d-values", "20,40,80,160", "--json"]);
    let e = v["exponent"].as_f64().unwrap();
    assert!((e - 1.0).abs() < 0.1, "{e}");
    assert_eq!(v["predicted_exponent"].as_f64().unwrap(), 1.0);
}

#[test]
fn figures_are_valid_svg_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("tilted.svg");
    let png = dir.path().join("prop.png");
    let o = flscale(&[
        "ldt",
        "tilted",
        "--grid",
        "41",
        "--out",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
    let o = flscale(&[
        "-q",
        "kernel",
        "propagate",
        "--quick",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    let scal = dir.path().join("s.svg");
    let o = flscale(&[
        "ldt",
        "scaling",
        "--d-values",
        "20,40",
        "--out",
        scal.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(std::fs::read_to_string(&scal).unwrap().starts_with("<svg"));
}

#[test]
fn kernel_propagate_quick_has_a_clearly_negative_slope_and_ignores_thread_count() {
    let run = |threads: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_flscale"))
            .args(["-q", "kernel", "propagate", "--quick", "--json"])
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let one = run("1");
    let two = run("2");
    assert_eq!(one, two, "output depends on the thread count");
    let v: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert!(v["slope_rkhs"].as_f64().unwrap() < -0.5);
    assert!(v["slope_inverse_expectation"].as_f64().unwrap() < -0.9);
    assert_eq!(v["points"].as_array().unwrap().len(), 11);
    assert_eq!(v["method"], "gram");
    assert_eq!(v["predicted_slope"].as_f64().unwrap(), -2.0);
}

#[test]
fn kernel_nngp_and_eigh_bench_report_checks() {
    let v = json_of(&[
        "kernel",
        "nngp",
        "--activation",
        "relu",
        "--widths",
        "100,10000",
        "--json",
    ]);
    let w = v["widths"].as_array().unwrap();
    let e0 = w[0]["max_abs_error"].as_f64().unwrap();
    let e1 = w[1]["max_abs_error"].as_f64().unwrap();
    assert!(e1 < e0, "{e0} {e1}");
    let v = json_of(&["kernel", "eigh-bench", "--n", "150", "--json"]);
    assert!(v["max_relative_residual"].as_f64().unwrap() < 1e-12);
}

#[test]
fn bad_input_exits_with_code_2() {
    assert_bad_input(&["ldt", "rate", "--d", "-3"]);
    assert_bad_input(&["ldt", "rate", "--alpha", "0"]);
    assert_bad_input(&["ldt", "rate", "--alpha", "nan"]);
    assert_bad_input(&["ldt", "rate", "--perp", "sideways"]);
    assert_bad_input(&["ldt", "rate", "--sigma1-sq", "inf"]);
    assert_bad_input(&["ldt", "tilted", "--t", "-1"]);
    assert_bad_input(&["ldt", "tilted", "--grid", "1"]);
    assert_bad_input(&["ldt", "scaling", "--d-values", "40"]);
    assert_bad_input(&["ldt", "scaling", "--nu", "9"]);
    assert_bad_input(&["ldt", "rate", "--out", "figure.pdf"]);
    // Valid but out of f64 reach: rejected up front, not a quadrature failure.
    assert_bad_input(&["ldt", "rate", "--alpha", "1000"]);
    assert_bad_input(&["ldt", "rate", "--d", "1e6", "--n", "1"]);
    assert_bad_input(&["ldt", "rate", "--d", "1e7", "--n", "1e7", "--perp", "exact"]);
    assert_bad_input(&["ldt", "rate", "--sigma1-sq", "1e-6"]);
    assert_bad_input(&["ldt", "tilted", "--t", "1e9"]);
    assert_bad_input(&["ldt", "scaling", "--d-values", "1e6,1e7"]);
    assert_bad_input(&["kernel", "population", "--d", "4"]);
    assert_bad_input(&["kernel", "population", "--activation", "erf"]);
    assert_bad_input(&[
        "ldt",
        "tilted",
        "--histogram",
        "/nonexistent/flscale-results",
    ]);
    assert_bad_input(&["kernel", "propagate", "--quick", "--data", "uniform"]);
    assert_bad_input(&["kernel", "propagate", "--quick", "--activation", "tanh"]);
    assert_bad_input(&[
        "kernel",
        "propagate",
        "--quick",
        "--fit-min",
        "100",
        "--fit-max",
        "50",
    ]);
    assert_bad_input(&["kernel", "propagate", "--quick", "--n1", "1"]);
    assert_bad_input(&["kernel", "propagate", "--quick", "--amplifications", "4,2"]);
    assert_bad_input(&["kernel", "propagate", "--quick", "--method", "svd"]);
    assert_bad_input(&["kernel", "nngp", "--widths", "0"]);
    assert_bad_input(&["kernel", "eigh-bench", "--n", "1"]);
    assert_bad_input(&["ldt"]);
}

#[test]
fn every_subcommand_has_help_with_an_example() {
    for sub in [
        vec!["ldt", "rate"],
        vec!["ldt", "tilted"],
        vec!["ldt", "scaling"],
        vec!["kernel", "propagate"],
        vec!["kernel", "population"],
        vec!["kernel", "nngp"],
        vec!["kernel", "eigh-bench"],
    ] {
        let mut args = sub.clone();
        args.push("--help");
        let o = flscale(&args);
        assert!(o.status.success());
        let text = String::from_utf8(o.stdout).unwrap();
        assert!(text.contains("Example"), "{sub:?}: {text}");
        assert!(text.contains("flscale "), "{sub:?}");
    }
}

/// Fig. 2(a): the tilted law over a sampled overlap histogram from `reproduce fig2a --quick`.
#[test]
fn ldt_tilted_overlays_a_sampled_histogram() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fig2a");
    let d = dir.to_str().unwrap();
    let o = flscale(&["-q", "reproduce", "fig2a", "--quick", "--out", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fig = tmp.path().join("overlay.svg");
    let v = json_of(&[
        "ldt",
        "tilted",
        "--histogram",
        d,
        "--d",
        "10",
        "--n",
        "10",
        "--json",
        "--out",
        fig.to_str().unwrap(),
    ]);
    let h = &v["histogram"];
    let alignment = h["measured_alignment"].as_f64().unwrap();
    // Without --alpha the law is taken at the run's measured alignment.
    assert_eq!(v["alpha"].as_f64().unwrap(), alignment);
    for key in ["sampled_outlier_fraction", "predicted_outlier_fraction"] {
        let f = h[key].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&f), "{key} = {f}");
    }
    let density = h["density"].as_array().unwrap();
    assert!(density.len() > 10);
    assert!(std::fs::read_to_string(&fig).unwrap().starts_with("<svg"));
    // The model must be the run's.
    assert_bad_input(&["ldt", "tilted", "--histogram", d, "--d", "40", "--n", "10"]);
    assert_bad_input(&[
        "ldt",
        "tilted",
        "--histogram",
        d,
        "--d",
        "10",
        "--n",
        "10",
        "--run",
        "7",
    ]);
}
