//! Store integrity (issue 21 item 4) and claims (issue 19 "Faults"), end to end: every reader
//! names a damaged run and exits non-zero, or skips it on request; two sweeps into one
//! directory compute each run once; stale temporary files are cleaned on resume.

use std::path::Path;
use std::process::Stdio;

mod common;
use common::{bin, copy_tree, ok, run, snapshot, EXP};

/// The readers, each with its skip flag.
const READERS: [&[&str]; 5] = [
    &["merge", "D"],
    &["pstar", "D", "--bootstrap", "20"],
    &["fit", "D", "--bootstrap", "20"],
    &["plot", "D", "--bootstrap", "20"],
    &["status", "D"],
];

fn reader_args<'a>(reader: &[&'a str], dir: &'a str) -> Vec<&'a str> {
    reader
        .iter()
        .map(|a| if *a == "D" { dir } else { *a })
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Truncate,
    Nan,
    Delete,
}

fn damage(path: &Path, how: Damage) {
    match how {
        Damage::Truncate => {
            let b = std::fs::read(path).unwrap();
            std::fs::write(path, &b[..b.len() * 2 / 3]).unwrap();
        }
        Damage::Nan => {
            let t = std::fs::read_to_string(path).unwrap();
            // The first number after the header (or in the JSON) becomes NaN.
            let body_start = t.find('\n').map_or(0, |i| i + 1);
            let (head, body) = t.split_at(body_start);
            let pos = body.find(|c: char| c.is_ascii_digit()).unwrap();
            let end = pos
                + body[pos..]
                    .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-'))
                    .unwrap_or(body.len() - pos);
            let edited = format!("{head}{}NaN{}", &body[..pos], &body[end..]);
            std::fs::write(path, edited).unwrap();
        }
        Damage::Delete => std::fs::remove_file(path).unwrap(),
    }
}

#[test]
fn every_reader_names_a_damaged_run_and_refuses_or_skips_it() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("exp.toml"), EXP).unwrap();
    ok(
        &["sweep", "exp.toml", "--out", "good", "--format", "csv"],
        t,
    );
    for reader in READERS {
        ok(&reader_args(reader, "good"), t);
    }
    let files = [
        "summary.json",
        "chains.csv",
        "traces.csv",
        "histogram_rho.csv",
        "experiment.toml",
        "checksums.json",
    ];
    let mut cases = Vec::new();
    for f in files {
        for how in [Damage::Truncate, Damage::Nan, Damage::Delete] {
            if f == "experiment.toml" && matches!(how, Damage::Nan) {
                continue;
            }
            cases.push((Some(f), how));
        }
    }
    // The whole run directory deleted.
    cases.push((None, Damage::Delete));
    for (k, (file, how)) in cases.iter().enumerate() {
        let dir = format!("bad{k}");
        copy_tree(&t.join("good"), &t.join(&dir));
        let run_dir = t.join(&dir).join("runs/run-00004");
        match file {
            Some(f) => damage(&run_dir.join(f), *how),
            None => std::fs::remove_dir_all(&run_dir).unwrap(),
        }
        for reader in READERS {
            let args = reader_args(reader, &dir);
            let o = run(&args, t);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{args:?} after {how:?} of {file:?} must refuse: {err}"
            );
            assert!(
                err.contains("run-00004"),
                "{args:?} {file:?} {how:?}: {err}"
            );
            assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
        }
        // --skip-damaged goes on and lists the run (pstar on the five intact runs).
        let mut args = reader_args(READERS[1], &dir);
        args.push("--skip-damaged");
        let o = run(&args, t);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{args:?}: {err}");
        assert!(
            err.contains("skipped") && err.contains("run-00004"),
            "{err}"
        );
        // The same sweep recomputes the damaged run to the original bytes.
        ok(&["sweep", "exp.toml", "--out", &dir, "--format", "csv"], t);
        assert_eq!(
            snapshot(&t.join(&dir)),
            snapshot(&t.join("good")),
            "{file:?} {how:?}"
        );
    }
}

#[test]
fn a_store_without_checksums_still_loads_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("exp.toml"), EXP).unwrap();
    ok(&["sweep", "exp.toml", "--out", "old"], t);
    for e in std::fs::read_dir(t.join("old/runs")).unwrap().flatten() {
        std::fs::remove_file(e.path().join("checksums.json")).unwrap();
    }
    let o = run(&["pstar", "old", "--bootstrap", "20"], t);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("6 run(s) have no checksums.json"), "{err}");
    // Its format is still checked: a NaN is found.
    let chains = t.join("old/runs/run-00002/chains.csv");
    let text = std::fs::read_to_string(&chains).unwrap();
    let line = text.lines().nth(1).unwrap();
    let mut cells: Vec<&str> = line.split(',').collect();
    cells[2] = "NaN";
    std::fs::write(&chains, text.replace(line, &cells.join(","))).unwrap();
    let o = run(&["fit", "old", "--bootstrap", "20"], t);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("run-00002") && err.contains("non-finite"),
        "{err}"
    );
}

#[test]
fn two_sweeps_into_one_directory_compute_each_run_once() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("exp.toml"), EXP).unwrap();
    ok(&["sweep", "exp.toml", "--out", "alone"], t);
    // A temporary file of a process that died (a full disk, a kill) is removed on resume.
    std::fs::create_dir_all(t.join("shared/runs")).unwrap();
    let stale = t.join("shared/.timing.json.tmp-4000000000");
    std::fs::write(&stale, "{").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let spawn = || {
        bin()
            .args(["sweep", "exp.toml", "--out", "shared", "--json"])
            .current_dir(t)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let mut computed = 0;
    for child in [a, b] {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        computed += v["computed"].as_u64().unwrap();
    }
    assert_eq!(computed, 6, "every run computed exactly once");
    assert!(!stale.exists());
    ok(&["merge", "shared"], t);
    assert_eq!(snapshot(&t.join("shared")), snapshot(&t.join("alone")));
}

#[test]
fn status_counts_runs_and_prints_the_resubmit_command() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("exp.toml"), EXP).unwrap();
    let o = ok(
        &[
            "sweep",
            "exp.toml",
            "--out",
            "s",
            "--emit-slurm",
            "3",
            "--cpus-per-task",
            "1",
            "--time",
            "00:10:00",
            "--sbatch=--account=test",
        ],
        t,
    );
    assert!(o.contains("flscale status s"), "{o}");
    let script = std::fs::read_to_string(t.join("s/sweep.sbatch")).unwrap();
    for want in [
        "--cpus-per-task=1\n",
        "--time=00:10:00\n",
        "#SBATCH --account=test\n",
        "--requeue",
    ] {
        assert!(script.contains(want), "{want}: {script}");
    }
    let st = ok(&["status", "s"], t);
    assert!(
        st.contains("6 runs in the grid: 0 done, 0 running, 0 failed, 6 missing"),
        "{st}"
    );
    assert!(st.contains("sbatch --array=0,1,2 "), "{st}");
    // Shard 1 (runs 1 and 4) done; run 2 interrupted (a claim of a dead process).
    ok(&["sweep", "exp.toml", "--out", "s", "--shard", "1/3"], t);
    std::fs::write(
        t.join("s/runs/.claim-run-00002"),
        format!(
            "{{\"host\": \"{}\", \"pid\": 4000000000}}",
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap()
                .trim()
        ),
    )
    .unwrap();
    let st = ok(&["status", "s"], t);
    assert!(
        st.contains("2 done, 0 running, 1 failed, 3 missing"),
        "{st}"
    );
    assert!(
        st.contains("run-00002  shard 2  failed: interrupted"),
        "{st}"
    );
    assert!(st.contains("estimated remaining:"), "{st}");
    assert!(st.contains("sbatch --array=0,2 "), "{st}");
    let v: serde_json::Value = serde_json::from_str(&ok(&["status", "s", "--json"], t)).unwrap();
    assert_eq!(v["per_shard"][1]["done"], 2);
    assert!(v["seconds_done"].as_f64().unwrap() > 0.0);
}
