//! `flscale sample` and `flscale bench` run as a user runs them: the binary, a temporary
//! directory, exit codes, files. Issue acceptance (v) reproducibility across thread counts and
//! (vi) divergence handling.

use std::path::Path;
use std::process::{Command, Output};

const QUICK: &str = r#"
[model]
kind = "fcn"
activation = "erf"
widths = [8]
[data]
d = 6
p = 60
n_test = 100
[target]
terms = [[1, 1.0], [3, 0.3]]
[sampler]
kappa = 0.5
step = 1e-3
steps = 600
burn_in = 200
thin = 20
chains = 7
seed = 42
"#;

fn flscale(args: &[&str], threads: Option<usize>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flscale"));
    cmd.args(args);
    if let Some(t) = threads {
        cmd.env("RAYON_NUM_THREADS", t.to_string());
    }
    cmd.output().expect("run flscale")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn same_seed_gives_byte_identical_json_for_one_and_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    let exp = write(dir.path(), "exp.toml", QUICK);
    let out1 = dir.path().join("t1").display().to_string();
    let out2 = dir.path().join("t2").display().to_string();
    let a = flscale(&["sample", &exp, "--out", &out1, "--json"], Some(1));
    let b = flscale(&["sample", &exp, "--out", &out2, "--json"], Some(2));
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    assert_eq!(a.stdout, b.stdout, "--json differs between 1 and 2 threads");
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    for key in [
        "alignment",
        "alignment_err",
        "test_mse",
        "train_mse",
        "outliers_layer1",
        "r_overlap2",
        "diverged_chains",
        "steps_per_second",
    ] {
        assert!(v.get(key).is_some(), "--json lacks {key}");
    }
    assert!(v["alignment"].as_f64().is_some());
    assert!(
        v["steps_per_second"].is_null(),
        "timing must stay out of --json by default"
    );
    // Files: summary, traces, chains, histogram, the experiment echoed.
    for f in [
        "summary.json",
        "traces.csv",
        "chains.csv",
        "histogram_rho.csv",
        "experiment.toml",
    ] {
        assert!(Path::new(&out1).join(f).exists(), "{f} missing");
    }
    let traces = std::fs::read_to_string(Path::new(&out1).join("traces.csv")).unwrap();
    assert_eq!(traces.lines().count(), 1 + 600 / 20);
    // The traces and per-chain files are also thread-count independent.
    for f in ["traces.csv", "chains.csv", "histogram_rho.csv"] {
        assert_eq!(
            std::fs::read(Path::new(&out1).join(f)).unwrap(),
            std::fs::read(Path::new(&out2).join(f)).unwrap(),
            "{f} differs between thread counts"
        );
    }
    // A different seed gives different numbers.
    let exp3 = write(
        dir.path(),
        "exp3.toml",
        &QUICK.replace("seed = 42", "seed = 43"),
    );
    let out3 = dir.path().join("t3").display().to_string();
    let c = flscale(&["sample", &exp3, "--out", &out3, "--json"], Some(2));
    assert_ne!(a.stdout, c.stdout);
    // --timing adds the speed.
    let t = flscale(
        &["sample", &exp, "--out", &out3, "--json", "--timing"],
        None,
    );
    let v: serde_json::Value = serde_json::from_slice(&t.stdout).unwrap();
    assert!(v["steps_per_second"].as_f64().unwrap() > 0.0);
}

/// Issue 21 item 2: d = 4000 with 100 chains once kept a 4000 × 4000 second moment per chain
/// (12.8 GB) and aborted; with the pooled sum it runs under a 3 GiB address-space limit (a real
/// allocation limit, not the estimate), at a tiny P and step count, and still reports the
/// leading direction. Why the limit: it is the test that the run's address space follows its
/// sizes, whatever the machine — issue 35 found faer's product kernel reserving 960 MiB per
/// thread from one machine's cache description (docs/limits.md), which this run must not do.
#[test]
fn d_4000_with_100_chains_runs() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[model]\nkind = \"fcn\"\nactivation = \"erf\"\nwidths = [4]\n\
                [data]\nd = 4000\np = 8\nn_test = 20\n[target]\nhermite = 1\n\
                [sampler]\nkappa = 0.5\nstep = 1e-4\nsteps = 4\nburn_in = 2\nthin = 2\n\
                chains = 100\nseed = 3\n";
    let exp = write(dir.path(), "exp.toml", text);
    let out = dir.path().join("run").display().to_string();
    let r = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 3145728; exec \"$0\" --max-memory 2G \"$@\"")
        .arg(env!("CARGO_BIN_EXE_flscale"))
        .args(["sample", &exp, "--out", &out, "--json"])
        .output()
        .expect("run flscale");
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["chains_used"].as_u64(), Some(100));
    let overlap = v["leading_direction_overlap"]
        .as_f64()
        .expect("a leading direction");
    assert!((0.0..=1.0 + 1e-12).contains(&overlap), "{overlap}");
}

#[test]
fn absurd_step_names_diverged_chains_exits_1_and_writes_no_nan() {
    let dir = tempfile::tempdir().unwrap();
    let exp = write(
        dir.path(),
        "exp.toml",
        // Divergence is unadjusted Langevin's failure at a fixed step; the default
        // (Metropolis-adjusted, adapted) sampler rejects such proposals instead.
        &QUICK.replace(
            "step = 1e-3",
            "step = 50.0\nmala = false\nadapt_step = false",
        ),
    );
    let out = dir.path().join("run").display().to_string();
    let r = flscale(&["sample", &exp, "--out", &out, "--json"], None);
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("all 7 chains diverged"), "{err}");
    assert!(err.contains("chain 0 at step"), "{err}");
    assert!(err.contains("try sampler.step = 5"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["diverged_chains"].as_array().unwrap().len(), 7);
    assert!(v["alignment"].is_null());
    assert_eq!(v["suggested_step"].as_f64(), Some(5.0));
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap().to_lowercase();
        assert!(
            !text.contains("nan") && !text.contains("inf"),
            "{} has NaN/inf",
            path.display()
        );
    }
}

#[test]
fn bad_input_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let exp = write(
        dir.path(),
        "exp.toml",
        &QUICK.replace("step = 1e-3", "step = -1"),
    );
    let out = dir.path().join("run").display().to_string();
    let r = flscale(&["sample", &exp, "--out", &out], None);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("sampler.step = -1 is not allowed; it must be a finite number > 0"),
        "{err}"
    );
    let r = flscale(&["sample", "/nonexistent/exp.toml", "--out", &out], None);
    assert_eq!(r.status.code(), Some(2));
    let exp = write(
        dir.path(),
        "typo.toml",
        &QUICK.replace("thin = 20", "thinning = 20"),
    );
    let r = flscale(&["sample", &exp, "--out", &out], None);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("thinning"));
}

#[test]
fn bench_json_has_the_documented_shape() {
    let r = flscale(
        &[
            "bench",
            "--json",
            "--chains",
            "2,3",
            "--steps",
            "1",
            "--repeats",
            "1",
        ],
        None,
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[0]["chains"], 2);
    assert_eq!(cases[1]["chains"], 3);
    for c in cases {
        assert!(c["steps_per_second"].as_f64().unwrap() > 0.0);
        assert!(c["gflops"].as_f64().unwrap() > 0.0);
        let fraction = c["fraction_of_gemm_peak"].as_f64().unwrap();
        let expected = c["gflops"].as_f64().unwrap() / v["gemm_peak"]["gflops"].as_f64().unwrap();
        assert!((fraction - expected).abs() < 1e-12 * expected);
    }
    assert_eq!(v["gemm_peak"]["size"], 1024);
    assert!(v["gemm_peak"]["gflops"].as_f64().unwrap() > 0.0);
    let r = flscale(&["bench", "--chains", "0"], None);
    assert_eq!(r.status.code(), Some(2));
}

/// `bench --sampling --plain-mala --seed S`: the plain side is Metropolis-adjusted (it reports
/// an acceptance rate, the unadjusted one none) and the seed is the one asked for.
#[test]
fn bench_sampling_with_plain_mala_and_a_seed() {
    let args = [
        "bench",
        "--sampling",
        "--p",
        "20",
        "--sampling-steps",
        "2000",
        "--sampling-chains",
        "2",
        "--seed",
        "3",
        "--json",
    ];
    let mut with_mala = args.to_vec();
    with_mala.push("--plain-mala");
    for (args, mala) in [(args.to_vec(), false), (with_mala, true)] {
        let r = flscale(&args, None);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
        assert_eq!(v["setting"]["seed"], 3);
        assert_eq!(v["setting"]["plain_mala"], mala);
        let acceptance = v["plain"]["acceptance_rate"].as_f64();
        if mala {
            let a = acceptance.expect("plain MALA reports its acceptance");
            assert!(a > 0.0 && a <= 1.0, "{a}");
        } else {
            assert!(acceptance.is_none());
        }
        assert!(v["plain"]["steps_per_second"].as_f64().unwrap() > 0.0);
    }
}

/// `bench --sampling --tempered R`: the collapsed sampler against itself with R replicas;
/// the tempered side's cost counts every replica and the ladder's diagnostics come along.
#[test]
fn bench_sampling_tempered_reports_the_ladder_and_counts_every_replica() {
    let r = flscale(
        &[
            "bench",
            "--sampling",
            "--p",
            "20",
            "--sampling-steps",
            "2000",
            "--sampling-chains",
            "2",
            "--tempered",
            "3",
            "--json",
        ],
        None,
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["replicas"], 3);
    let per_step = |k: &str| v[k]["gradient_evaluations_per_step"].as_u64().unwrap();
    assert_eq!(per_step("tempered"), 3 * per_step("collapsed"));
    let t = &v["tempering"];
    assert_eq!(t["betas"].as_array().unwrap().len(), 3);
    assert_eq!(t["betas"][0], 1.0);
    assert_eq!(t["swap_acceptance"].as_array().unwrap().len(), 2);
    for bad in [
        vec!["--tempered", "1"],
        vec!["--tempered", "4", "--beta-min", "1.5"],
    ] {
        let mut args = vec!["bench", "--sampling"];
        args.extend(bad);
        let r = flscale(&args, None);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("is not allowed"), "{stderr}");
    }
}

/// `sampler.tempering` in an experiment file: the summary's `tempering` object in `--json`
/// and summary.json, its lines in the text output, and bad values refused with the field.
#[test]
fn tempered_sample_reports_its_ladder_and_rejects_bad_settings() {
    let dir = tempfile::tempdir().unwrap();
    let tempered = format!("{QUICK}mala = true\ntempering = {{ replicas = 3, swap_every = 2 }}\n");
    let path = write(dir.path(), "t.toml", &tempered);
    let out = dir.path().join("out");
    let r = flscale(
        &["sample", &path, "--out", out.to_str().unwrap(), "--json"],
        None,
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let t = &v["tempering"];
    assert_eq!(t["replicas"], 3, "{v}");
    assert!(t["round_trips"].as_u64().is_some(), "{t}");
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(&stored["tempering"], t);
    let r = flscale(&["sample", &path, "--out", out.to_str().unwrap()], None);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("tempering          3 replicas"), "{text}");
    // Untempered runs carry no tempering object.
    let plain = write(dir.path(), "p.toml", QUICK);
    let r = flscale(
        &["sample", &plain, "--out", out.to_str().unwrap(), "--json"],
        None,
    );
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert!(v.get("tempering").is_none());
    for (bad, field) in [
        (
            "tempering = { replicas = 65 }",
            "sampler.tempering.replicas = 65",
        ),
        (
            "tempering = { replicas = 4, beta_min = 0.0 }",
            "sampler.tempering.beta_min = 0",
        ),
        (
            "tempering = { replicas = 4, swap_every = 0 }",
            "sampler.tempering.swap_every = 0",
        ),
        (
            "tempering = { replicas = 4, max_replicas = 65 }",
            "sampler.tempering.max_replicas = 65",
        ),
        (
            "tempering = { replicas = 4, max_replicas = 8, adapt = false }",
            "sampler.tempering.max_replicas = 8 is not allowed with replicas = 4 and adapt = false",
        ),
    ] {
        let path = write(dir.path(), "bad.toml", &format!("{QUICK}{bad}\n"));
        let r = flscale(&["sample", &path, "--out", out.to_str().unwrap()], None);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains(field), "{bad}: {stderr}");
    }
}

/// `bench --sampling`'s HMC options are checked before anything runs: one line naming the
/// option and what is allowed, exit code 2.
#[test]
fn bench_sampling_rejects_bad_hmc_options() {
    for (args, expected) in [
        (
            vec!["--hmc-steps", "5", "--no-mala"],
            "--hmc-steps 5 is not allowed with --no-mala",
        ),
        (
            vec!["--hmc-steps", "1000", "--sampling-steps", "20000"],
            "--hmc-steps 1000 is not allowed with --sampling-steps 20000",
        ),
        (
            vec!["--collapsed-thin", "0"],
            "--collapsed-thin 0 is not allowed",
        ),
        (
            vec!["--tempered", "4", "--max-replicas", "1"],
            "--max-replicas 1 is not allowed",
        ),
    ] {
        let mut all = vec!["bench", "--sampling"];
        all.extend(args);
        let r = flscale(&all, None);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{all:?}: {stderr}");
        assert!(stderr.contains(expected), "{all:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}

#[test]
fn example_experiments_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/experiments");
    let mut n = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            // Every table a file may hold ([quick], [free_energy], [sweep]) through the sweep
            // loader, which validates each grid point as the engine's config.
            let sweep =
                flscale::experiment::Sweep::from_toml(&text, &path.display().to_string(), false)
                    .unwrap();
            assert!(!sweep.runs.is_empty());
            n += 1;
        }
    }
    assert!(n >= 3);
}
