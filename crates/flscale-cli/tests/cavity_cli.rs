//! `flscale cavity …` run as a binary: JSON fields, exit codes on bad input, figure files.

use std::process::{Command, Output};

fn flscale(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flscale"))
        .args(args)
        .output()
        .expect("the flscale binary runs")
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

fn num(v: &serde_json::Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

#[test]
fn phase_json_has_located_points_matching_closed_forms() {
    let v = json_of(&flscale(&[
        "cavity",
        "phase",
        "--sigma-w2",
        "1",
        "--b",
        "0.3",
        "--c",
        "-0.3",
        "--json",
    ]));
    let fold = num(&v, &["u_fold", "u"]);
    let coexist = num(&v, &["u_coexist", "u"]);
    let spinodal = num(&v, &["u_spinodal", "u"]);
    assert!(fold < coexist && coexist < spinodal);
    // Spinodal closed form π(1 + 2σ_w²)/(4σ_w²b²) computed here independently.
    let want = std::f64::consts::PI * 3.0 / (4.0 * 0.09);
    assert!((spinodal - want).abs() < 1e-9 * want);
    // Coexistence: s* = (b + 2c)/(6c) = 1/6, h* = 4(c − b)³/(27c), u_c = π·3/(4h*), ρ*² = 3s*/(1 − 2s*).
    let h = 4.0 * (-0.6f64).powi(3) / (27.0 * -0.3);
    let want_c = std::f64::consts::PI * 3.0 / (4.0 * h);
    assert!((coexist - want_c).abs() < 1e-9 * want_c);
    assert!((num(&v, &["rho_star"]) - 0.75f64.sqrt()).abs() < 1e-6);
    assert_eq!(v["kind"], "first-order");
    assert!(num(&v, &["tolerance"]) > 0.0);
    assert!(num(&v, &["r_aligned_at_d"]) > num(&v, &["r_unaligned_at_d"]));
}

#[test]
fn phase_diagram_and_potential_figures_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("phases.svg");
    let out = flscale(&["cavity", "phase", "--diagram", svg.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("coexistence"));

    let png = dir.path().join("potential.png");
    let out = flscale(&[
        "cavity",
        "potential",
        "--u",
        "20,25,30",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn potential_json_is_even_and_zero_at_the_origin() {
    let v = json_of(&flscale(&[
        "cavity",
        "potential",
        "--sigma-w2",
        "0.5",
        "--b",
        "0.3",
        "--c",
        "-0.3",
        "--u",
        "10,30",
        "--points",
        "11",
        "--json",
    ]));
    assert_eq!(v["model"], "mean-field");
    let rho: Vec<f64> = v["rho"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(rho.len(), 11);
    for curve in v["curves"].as_array().unwrap() {
        let vals: Vec<f64> = curve["potential_over_d"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert!(vals[5].abs() < 1e-15);
        for i in 0..11 {
            assert!((vals[i] - vals[10 - i]).abs() < 1e-14);
        }
        // Independent evaluation of Ũ_u/D at ρ = 1.5 (the last node).
        let (u, r): (f64, f64) = (curve["u"].as_f64().unwrap(), 1.5);
        let a = 1.0 + 2.0 * (0.5 + r * r);
        let want = r * r / 1.0
            - 2.0 * u / std::f64::consts::PI * r * r / a * (0.3 + 0.6 * r * r / a).powi(2);
        assert!((vals[10] - want).abs() < 1e-12, "{} vs {want}", vals[10]);
    }
    let v = json_of(&flscale(&[
        "cavity",
        "potential",
        "--p",
        "100,200",
        "--d",
        "20",
        "--t",
        "0.05",
        "--json",
    ]));
    assert_eq!(v["model"], "finite");
    assert_eq!(v["curves"].as_array().unwrap().len(), 2);
}

#[test]
fn cubic_json_reports_both_scales() {
    let v = json_of(&flscale(&[
        "cavity", "cubic", "--d", "30", "--n", "30", "--json",
    ]));
    assert!(num(&v, &["p_fixed"]) > num(&v, &["p_adaptive"]));
    assert!(num(&v, &["lambda3_aligned"]) > 100.0 * num(&v, &["lambda3_fixed"]));
}

#[test]
fn solve_json_reports_both_branches() {
    let v = json_of(&flscale(&[
        "cavity", "solve", "--d", "6", "--n", "6", "--p", "24", "--p-test", "50", "--t", "0.1",
        "--json",
    ]));
    for branch in ["unaligned", "aligned"] {
        let b = &v[branch];
        assert!(b["converged"].as_bool().unwrap(), "{b}");
        assert!(num(b, &["r"]) > 0.0 && num(b, &["test_mse"]) > 0.0);
        assert!((num(b, &["covariance", "parallel"]) - num(b, &["r"])).abs() < 1e-15);
        assert!((num(b, &["covariance", "perpendicular"]) - 1.0 / 5.0).abs() < 1e-15);
    }
}

#[test]
fn sweep_writes_a_figure_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("sweep.svg");
    let v = json_of(&flscale(&[
        "cavity",
        "sweep-p",
        "--d",
        "6",
        "--n",
        "6",
        "--p-values",
        "12,24",
        "--p-test",
        "50",
        "--t",
        "0.1",
        "--json",
        "--out",
        svg.to_str().unwrap(),
    ]));
    assert_eq!(v["unaligned"].as_array().unwrap().len(), 2);
    assert_eq!(v["aligned"].as_array().unwrap().len(), 2);
    // Fixed points found after a jump in R but not kept are listed, each with its P.
    for alt in v["alternatives"].as_array().unwrap() {
        assert!(num(alt, &["solution", "p"]) > 0.0);
        assert!(num(alt, &["free_energy_above_branch"]).is_finite());
    }
    assert!(num(&v, &["r_threshold"]) > 0.0);
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    // centre_drive = [s_a²P²α²/(T²L0)]/[D/σ_w² + ℓ/L0] at each solution's b (blog §"Expand the
    // potential near zero overlap"), recomputed here from the JSON's b: D = N = 6, s_a² = 1/6,
    // σ_w² = 1, T = 0.1; v(1) = (2/π)asin(2/3), v'(1) = (4/π)/(3√5).
    let pi = std::f64::consts::PI;
    let (d, s_a2, t) = (6.0, 1.0 / 6.0, 0.1);
    for sol in v["unaligned"]
        .as_array()
        .unwrap()
        .iter()
        .chain(v["aligned"].as_array().unwrap())
    {
        let (p, b) = (num(sol, &["p"]), num(sol, &["b"]));
        let l0 = 1.0 + s_a2 * p / t * 2.0 / pi * (2.0f64 / 3.0).asin();
        let ell = s_a2 * p / t * 4.0 / pi / (3.0 * 5f64.sqrt());
        let alpha2 = 4.0 / pi * b * b / 3.0;
        let want = s_a2 * p * p * alpha2 / (t * t * l0) / (d + ell / l0);
        let got = num(sol, &["centre_drive"]);
        assert!(
            (got - want).abs() < 1e-9 * want.max(1e-12),
            "{got} vs {want}"
        );
    }
    assert!(num(&v, &["population_drive_max", "drive"]) > 0.0);
    assert!(num(&v, &["population_drive_max", "p"]) > 0.0);
}

#[test]
fn solve_is_identical_for_any_thread_count() {
    let args = [
        "cavity", "solve", "--d", "5", "--n", "5", "--p", "20", "--p-test", "30", "--seed", "3",
        "--json",
    ];
    let run = |threads: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_flscale"))
            .args(args)
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .expect("the flscale binary runs");
        assert!(out.status.success());
        out.stdout
    };
    assert_eq!(run("1"), run("3"));
}

/// `fixed-points` at D = N = 6, P = 20: JSON shape, every point's stability fields, the damped
/// solutions matched, the index sum of a full search, the text form, and thread independence.
#[test]
fn fixed_points_json_lists_classified_fixed_points() {
    let args = [
        "cavity",
        "fixed-points",
        "--d",
        "6",
        "--n",
        "6",
        "--p",
        "20",
        "--p-test",
        "30",
        "--grid",
        "15",
        "--with-damped",
        "--json",
    ];
    let run = |threads: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_flscale"))
            .args(args)
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .expect("the flscale binary runs");
        assert!(out.status.success());
        out.stdout
    };
    let one = run("1");
    assert_eq!(one, run("3"));
    let v: serde_json::Value = serde_json::from_slice(&one).unwrap();
    assert_eq!(v["covers_map_range"], true);
    assert_eq!(v["index_sum"], 1);
    let points = v["fixed_points"].as_array().unwrap();
    assert!(!points.is_empty());
    for p in points {
        assert!(num(p, &["residual"]) < 1e-7);
        assert!(num(p, &["r"]) > 0.0 && num(p, &["free_energy", "total"]).is_finite());
        assert_eq!(p["eigenvalues"].as_array().unwrap().len(), 2);
        assert!(["attracting", "saddle", "repelling", "degenerate"]
            .contains(&p["stability"].as_str().unwrap()));
    }
    // |b| ≤ B_b at every fixed point (they are values of G).
    for p in points {
        assert!(num(p, &["b"]).abs() <= num(&v, &["map_range", "b_max"]));
    }
    let damped = v["damped"].as_array().unwrap();
    assert_eq!(damped.len(), 2);
    assert!(damped.iter().all(|d| d["matches"].is_u64()));
    let text = flscale(&args[..args.len() - 1]);
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("index sum 1") && text.contains("attracting") && !text.contains("NaN"),
        "{text}"
    );
}

#[test]
fn continuous_phase_prints_no_nan() {
    let out = flscale(&["cavity", "phase", "--b", "0.3", "--c", "0"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("continuous") && !text.contains("NaN") && !text.contains("inf"),
        "{text}"
    );
    let v = json_of(&flscale(&[
        "cavity", "phase", "--b", "0.3", "--c", "0", "--json",
    ]));
    assert!(v["r_unaligned_leading"].is_null() && v["r_aligned_at_d"].is_null());
}

#[test]
fn bad_parameters_exit_with_code_2() {
    let cases: &[&[&str]] = &[
        &["cavity", "phase", "--sigma-w2", "0"],
        &["cavity", "phase", "--sigma-w2", "-1"],
        &["cavity", "phase", "--b", "nan"],
        &["cavity", "phase", "--b", "0", "--c", "0"],
        &["cavity", "potential", "--u", "inf"],
        &["cavity", "potential", "--p", "100", "--t", "0"],
        &["cavity", "potential", "--points", "1"],
        &["cavity", "solve", "--t", "-0.1"],
        &["cavity", "solve", "--d", "1"],
        &["cavity", "solve", "--p", "100000"],
        &[
            "cavity",
            "sweep-p",
            "--sigma-w2",
            "0",
            "--p-values",
            "10,20",
        ],
        &["cavity", "cubic", "--t", "0"],
        &["cavity", "phase", "--diagram", "x.pdf"],
        &["cavity", "fixed-points", "--p", "10", "--b-range", "1,-1"],
        &["cavity", "fixed-points", "--p", "10", "--c-range", "0,1,2"],
        &["cavity", "fixed-points", "--p", "10", "--c-range", "nan,1"],
        &["cavity", "fixed-points", "--p", "10", "--grid", "2"],
        &["cavity", "fixed-points", "--p", "10", "--sigma-w2", "0"],
    ];
    for args in cases {
        let out = flscale(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error: ") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?} printed output");
    }
}

#[test]
fn every_subcommand_help_has_an_example() {
    for sub in [
        "potential",
        "phase",
        "solve",
        "sweep-p",
        "cubic",
        "fixed-points",
        "sweep",
        "continuum",
    ] {
        let out = flscale(&["cavity", sub, "--help"]);
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Example") && text.contains("flscale cavity"),
            "{sub}: {text}"
        );
    }
}

/// A tiny real Langevin sweep (erf, D = N = 4, T = 0.1, y = He1 + 0.3·He3), with the plain and
/// the collapsed sampler, overlaid on the cavity sweep: every row's R is the run's own summary
/// value, the hot start is read, and a store of another setting is refused with exit code 2.
#[test]
fn sweep_overlays_a_langevin_results_store() {
    for method in ["plain", "collapsed"] {
        overlay_store_with(method);
    }
}

fn overlay_store_with(method: &str) {
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("tiny.toml");
    std::fs::write(
        &exp,
        format!(
            r#"
[model]
kind = "fcn"
activation = "erf"
widths = [4]
[data]
d = 4
p = 8
n_test = 20
[target]
terms = [[1, 1.0], [3, 0.3]]
[sampler]
kappa = 0.1
step = 1e-3
steps = 200
burn_in = 100
thin = 10
chains = 2
seed = 1
start = "both"
method = "{method}"
[priors]
sigma2 = [1.0, 1.0]
[sweep]
data.p = [8, 16]
"#
        ),
    )
    .unwrap();
    let store = dir.path().join("store");
    let out = flscale(&[
        "-q",
        "sweep",
        exp.to_str().unwrap(),
        "--out",
        store.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = dir.path().join("overlay.svg");
    let v = json_of(&flscale(&[
        "cavity",
        "sweep-p",
        "--d",
        "4",
        "--n",
        "4",
        "--t",
        "0.1",
        "--p-values",
        "8,16",
        "--p-test",
        "40",
        "--langevin",
        store.to_str().unwrap(),
        "--out",
        svg.to_str().unwrap(),
        "--json",
    ]));
    let rows = v["langevin"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, (run, p)) in rows.iter().zip([("run-00000", 8.0), ("run-00001", 16.0)]) {
        let summary: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(store.join("runs").join(run).join("summary.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(num(row, &["p"]), p);
        assert_eq!(num(row, &["r_langevin"]), num(&summary, &["r_overlap2"]));
        assert_eq!(
            num(row, &["r_langevin_hot"]),
            num(&summary, &["hot_start", "r_overlap2"])
        );
        // The prediction at a swept P is that sweep point's R.
        let i = if p == 8.0 { 0 } else { 1 };
        assert!((num(row, &["r_unaligned"]) - num(&v["unaligned"][i], &["r"])).abs() < 1e-12);
    }
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<svg") && svg_text.contains("Langevin R, hot start"));
    // Another width than the store's: nothing matches, exit code 2 with the reason.
    let out = flscale(&[
        "cavity",
        "sweep-p",
        "--d",
        "4",
        "--n",
        "5",
        "--t",
        "0.1",
        "--p-values",
        "8",
        "--langevin",
        store.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("its width is 4, not N = 5"), "{err}");
}

/// The sweeps behind the documented blog overlays (docs/cavity.md, RESULTS.md) are valid grids.
#[test]
fn blog_overlay_sweep_files_are_valid() {
    // The plain-sampler file of docs/cavity.md and the collapsed-sampler ones of RESULTS.md.
    for (name, runs) in [
        ("examples/sweeps/blog-cavity-overlay.toml", 6),
        ("docs/results/cavity-overlay-collapsed.toml", 6),
        ("docs/results/cavity-transition-overlay.toml", 6),
    ] {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(name);
        let dir = tempfile::tempdir().unwrap();
        let out = flscale(&[
            "sweep",
            file.to_str().unwrap(),
            "--out",
            dir.path().join("s").to_str().unwrap(),
            "--dry-run",
        ]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(&format!("{runs} runs in the grid")), "{text}");
    }
}

/// `cavity sweep --over t` at D = N = 6: every solution carries its phase (label, side mass,
/// u/u_spinodal, cubic fraction, recomputed here from b, c, u) and its solver record; the figure
/// is written; the numbers do not depend on the thread count.
#[test]
fn sweep_over_reports_phase_and_solver_per_solution() {
    let dir = tempfile::tempdir().unwrap();
    let fig = dir.path().join("sweep.svg");
    let fig_s = fig.to_str().unwrap();
    let args = [
        "cavity", "sweep", "--over", "t", "--values", "0.05,0.1", "--d", "6", "--n", "6", "--p",
        "24", "--p-test", "40", "--json", "--out", fig_s,
    ];
    let run = |threads: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_flscale"))
            .args(args)
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .expect("the flscale binary runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let one = run("1");
    assert_eq!(one, run("3"));
    let v: serde_json::Value = serde_json::from_slice(&one).unwrap();
    assert_eq!(v["over"], "t");
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (pt, t) in points.iter().zip([0.05, 0.1]) {
        assert_eq!(num(pt, &["params", "t"]), t);
        for branch in ["unaligned", "aligned"] {
            let s = &pt[branch];
            let ph = &s["phase"];
            assert!(["GFL", "GMFL-I", "GMFL-II"].contains(&ph["label"].as_str().unwrap()));
            let mass = num(ph, &["side_mass"]);
            assert!((0.0..=1.0).contains(&mass));
            assert!((num(ph, &["side_neurons"]) - 6.0 * mass).abs() < 1e-12);
            let (b, c, u) = (num(s, &["b"]), num(s, &["c"]), num(s, &["u"]));
            assert!((num(ph, &["cubic_fraction"]) - (1.0 - c / 0.3)).abs() < 1e-12);
            // u/u_s = 4σ_w²b²u/(π(1 + 2σ_w²)) at σ_w² = 1.
            let want = 4.0 * b * b * u / (std::f64::consts::PI * 3.0);
            assert!((num(ph, &["u_over_spinodal"]) - want).abs() < 1e-9 * want.max(1e-12));
            assert!(!ph["minima"].as_array().unwrap().is_empty());
            assert!(s["converged"].as_bool().unwrap());
            assert!(num(s, &["last_step"]) < 1e-7);
            assert!(num(s, &["map_evaluations"]) >= num(s, &["iterations"]));
        }
    }
    assert!(std::fs::read_to_string(&fig).unwrap().contains("<svg"));
    // The text form names the phase and the solver.
    let text = flscale(&[
        "cavity", "solve", "--d", "6", "--n", "6", "--p", "24", "--p-test", "40",
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("phase ") && text.contains("side-well mass") && text.contains("solver"));
}

/// `cavity continuum` on the paper's main path: u and κ recomputed from the network, the GFL
/// points solve b(1 + κg₀/(1 − u g₀ b²)) = 1 with c = ε, the mixed-phase points sit at
/// coexistence (u/u_coexist = 1) with φ > 0, and the onset lies between them.
#[test]
fn continuum_path_has_gfl_then_mixed_phase_and_an_onset() {
    let v = json_of(&flscale(&[
        "cavity",
        "continuum",
        "--paper",
        "main",
        "--values",
        "0.14,0.2,0.26",
        "--json",
    ]));
    let onset = num(&v, &["onset"]);
    assert!(onset > 0.14 && onset < 0.26, "{onset}");
    let g0 = 4.0 * 0.5 / (std::f64::consts::PI * 2.0);
    let (mut gfl, mut mixed) = (0, 0);
    for pt in v["points"].as_array().unwrap() {
        let t = num(pt, &["x"]);
        let s_a2 = 8.0 / 700.0f64.powi(2);
        let u = 3000.0f64.powi(2) * s_a2 / (t * t * 150.0);
        let kappa = 3000.0 * 700.0 * s_a2 / (t * 150.0);
        assert!((num(pt, &["invariants", "u"]) - u).abs() < 1e-9 * u);
        assert!((num(pt, &["invariants", "kappa"]) - kappa).abs() < 1e-9 * kappa);
        let lim = &pt["limit"];
        let (b, c) = (num(lim, &["b"]), num(lim, &["c"]));
        match lim["label"].as_str().unwrap() {
            "GFL" => {
                gfl += 1;
                assert!(t > onset);
                assert!((c + 0.3).abs() < 1e-15);
                assert!((b * (1.0 + kappa * g0 / (1.0 - u * g0 * b * b)) - 1.0).abs() < 1e-12);
            }
            "GMFL-I" => {
                mixed += 1;
                assert!(t < onset);
                assert!((num(lim, &["u_over_coexist"]) - 1.0).abs() < 1e-9);
                assert!(num(lim, &["side_mass_times_d"]) > 0.0);
                assert!(num(lim, &["cubic_fraction"]) > 0.0);
            }
            other => panic!("unexpected label {other}"),
        }
        assert!(pt["finite_d"]["b"].is_number());
    }
    assert!(gfl >= 1 && mixed >= 1, "{v}");
}

#[test]
fn mixed_phase_commands_refuse_bad_parameters_with_code_2() {
    let cases: &[&[&str]] = &[
        &["cavity", "sweep", "--over", "x", "--values", "1"],
        &["cavity", "sweep", "--over", "n", "--values", "1.5"],
        &["cavity", "sweep", "--over", "t", "--values", "-0.1"],
        &[
            "cavity",
            "sweep",
            "--over",
            "t",
            "--values",
            "0.1",
            "--readout-total",
            "1",
        ],
        &[
            "cavity",
            "sweep",
            "--over",
            "n",
            "--values",
            "10",
            "--readout-total",
            "0",
        ],
        &["cavity", "continuum", "--paper", "other"],
        &["cavity", "continuum", "--t", "-1"],
        &["cavity", "continuum", "--eps", "0"],
        &["cavity", "continuum", "--over", "q"],
        &["cavity", "continuum", "--d-values", "0"],
        &["cavity", "continuum", "--values", "nan"],
    ];
    for args in cases {
        let out = flscale(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error: ") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}
