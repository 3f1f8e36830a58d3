//! Sweeps on a real Slurm (issue 19): a single-node cluster on localhost started by
//! `scripts/slurm-local.sh`, a job array of 3 tasks on a tiny grid, a cancelled task and a lost
//! node followed by the resubmission `flscale status` prints, and two tasks racing on the same
//! runs — each ending with a store byte-identical to the same sweep run locally.
//!
//! Skipped, with the reason printed, only where Slurm cannot be started (no packages and not
//! root); under CI (`CI=true`) that is a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

mod common;
use std::time::{Duration, Instant};

/// The tests share one cluster of 2 CPUs; one at a time keeps their timing predictable.
static CLUSTER: Mutex<()> = Mutex::new(());

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn slurm_conf() -> PathBuf {
    let dir = std::env::var("FLSCALE_SLURM_DIR").unwrap_or_else(|_| "/tmp/flscale-slurm".into());
    Path::new(&dir).join("slurm.conf")
}

/// Starts the local cluster (idempotent); false, with the reason printed, when it cannot run.
fn cluster() -> bool {
    let o = Command::new("bash")
        .arg(repo().join("scripts/slurm-local.sh"))
        .arg("start")
        .output()
        .unwrap();
    if o.status.success() {
        return true;
    }
    let reason = String::from_utf8_lossy(&o.stderr).trim().to_string();
    assert!(
        std::env::var("CI").ok().as_deref() != Some("true"),
        "CI must run the Slurm tests, but the local cluster did not start: {reason}"
    );
    eprintln!("skipped: no local Slurm ({reason})");
    false
}

fn slurm(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .env("SLURM_CONF", slurm_conf())
        .output()
        .unwrap()
}

fn flscale(args: &[&str], cwd: &Path) -> String {
    common::ok(args, cwd)
}

/// Submits `script` (with extra sbatch arguments) and returns the array job id.
fn submit(script: &Path, extra: &[&str]) -> String {
    let mut args: Vec<&str> = vec!["--parsable"];
    args.extend(extra);
    let s = script.to_str().unwrap();
    args.push(s);
    let o = slurm("sbatch", &args);
    assert!(
        o.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .trim()
        .split(';')
        .next()
        .unwrap()
        .to_string()
}

/// The array's tasks still queued or running.
fn queued(job: &str) -> Vec<String> {
    let o = slurm("squeue", &["-h", "-j", job, "-o", "%i %T"]);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.trim().is_empty())
        .collect()
}

fn wait_for(job: &str, limit: Duration) {
    let start = Instant::now();
    while !queued(job).is_empty() {
        assert!(
            start.elapsed() < limit,
            "job {job} still queued: {:?}",
            queued(job)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The small sweep of the other CLI tests (6 runs) with `steps` steps per run.
fn experiment(steps: usize) -> String {
    let text = common::EXP.replace(
        "steps = 800\nburn_in = 400",
        &format!("steps = {steps}\nburn_in = {}", steps / 2),
    );
    assert!(text.contains(&format!("steps = {steps}\n")), "{text}");
    text
}

/// The data of a store: the tables and the run directories, without timing, Slurm logs and
/// the script.
fn data_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    common::snapshot_where(dir, &|name| {
        !(name.starts_with("timing") || name.starts_with("slurm") || name == "sweep.sbatch")
    })
}

fn assert_same_store(slurm_dir: &Path, local: &Path) {
    let (a, b) = (data_files(slurm_dir), data_files(local));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in &a {
        assert!(v == &b[k], "{} differs from the local sweep", k.display());
    }
}

fn setup(steps: usize) -> (tempfile::TempDir, PathBuf) {
    // Under /tmp so that root's slurmd can write it even when the tests run elsewhere.
    let tmp = tempfile::Builder::new()
        .prefix("flscale-slurm-test")
        .tempdir_in("/tmp")
        .unwrap();
    let t = tmp.path().to_path_buf();
    std::fs::write(t.join("exp.toml"), experiment(steps)).unwrap();
    flscale(&["sweep", "exp.toml", "--out", "local"], &t);
    (tmp, t)
}

fn emit(t: &Path, tasks: &str) -> PathBuf {
    flscale(
        &[
            "sweep",
            "exp.toml",
            "--out",
            "s",
            "--emit-slurm",
            tasks,
            "--cpus-per-task",
            "1",
        ],
        t,
    );
    t.join("s/sweep.sbatch")
}

#[test]
fn job_array_on_slurm_equals_the_local_sweep() {
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    if !cluster() {
        return;
    }
    let (_tmp, t) = setup(800);
    let script = emit(&t, "3");
    let job = submit(&script, &[]);
    wait_for(&job, Duration::from_secs(180));
    flscale(&["merge", "s"], &t);
    assert_same_store(&t.join("s"), &t.join("local"));
    let st = flscale(&["status", "s"], &t);
    assert!(
        st.contains("6 done, 0 running, 0 failed, 0 missing"),
        "{st}"
    );
    for cmd in [
        vec!["pstar", "D", "--json", "--bootstrap", "50"],
        vec!["fit", "D", "--json", "--bootstrap", "50"],
    ] {
        let at = |d: &'static str| -> Vec<&str> {
            cmd.iter().map(|a| if *a == "D" { d } else { *a }).collect()
        };
        // The fit's warnings name the store they were run on (the command to run next).
        let slurm_store = flscale(&at("s"), &t)
            .replace("--out s ", "--out local ")
            .replace("--out s`", "--out local`");
        assert_eq!(slurm_store, flscale(&at("local"), &t), "{cmd:?}");
    }
    flscale(&["plot", "s", "--bootstrap", "20"], &t);
}

/// PIDs of the flscale sweeps writing into `dir` (started by this test through Slurm).
fn sweeps_into(dir: &Path) -> Vec<u32> {
    let needle = dir.canonicalize().unwrap().display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    let c = String::from_utf8_lossy(&c).replace('\0', " ");
                    c.contains(" sweep ") && c.contains(&needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn cancelled_task_and_lost_node_resubmit_to_the_local_result() {
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    if !cluster() {
        return;
    }
    let (_tmp, t) = setup(6000);
    let dir = t.join("s");
    let script = emit(&t, "3");
    let job = submit(&script, &[]);
    let start = Instant::now();
    while common::finished_runs(&dir) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no run finished"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // scancel of one array task mid-run: SIGTERM, the sweep stops after its current block.
    let o = slurm("scancel", &[&format!("{job}_1")]);
    assert!(o.status.success());
    // A node failure: slurmd goes away and the tasks' processes die with the machine.
    let stop = Command::new("bash")
        .arg(repo().join("scripts/slurm-local.sh"))
        .arg("stop-node")
        .status()
        .unwrap();
    assert!(stop.success());
    for pid in sweeps_into(&dir) {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(cluster(), "the node did not come back");
    // Requeued tasks (--requeue) may run again; cancel whatever is left and resubmit.
    let _ = slurm("scancel", &[&job]);
    wait_for(&job, Duration::from_secs(60));
    assert!(
        common::finished_runs(&dir) < 6,
        "everything finished before the faults"
    );
    let st = flscale(&["status", "s"], &t);
    let line = st
        .lines()
        .find(|l| l.starts_with("to compute what is missing: sbatch "))
        .unwrap_or_else(|| panic!("no resubmit command: {st}"));
    let array = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("--array="))
        .unwrap()
        .to_string();
    let again = submit(&script, &[&format!("--array={array}")]);
    wait_for(&again, Duration::from_secs(180));
    flscale(&["merge", "s"], &t);
    let st = flscale(&["status", "s"], &t);
    assert!(
        st.contains("6 done, 0 running, 0 failed, 0 missing"),
        "{st}"
    );
    // Nothing lost or doubled, no leftovers.
    assert_eq!(common::finished_runs(&dir), 6);
    let leftovers: Vec<String> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_same_store(&dir, &t.join("local"));
}

#[test]
fn two_tasks_racing_on_the_same_runs_leave_one_intact_store() {
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    if !cluster() {
        return;
    }
    let (_tmp, t) = setup(800);
    let script = emit(&t, "2");
    // Misconfigured shards: both tasks run the whole grid into the same directory.
    let text = std::fs::read_to_string(&script).unwrap();
    let broken = text.replace("--shard \"${SLURM_ARRAY_TASK_ID}/2\"", "");
    assert_ne!(broken, text);
    let bad = t.join("s/race.sbatch");
    std::fs::write(&bad, broken.replace("-q sweep", "sweep")).unwrap();
    let job = submit(&bad, &[]);
    wait_for(&job, Duration::from_secs(180));
    // Each task printed how many runs it computed: together exactly the grid.
    let mut computed = 0;
    for e in std::fs::read_dir(t.join("s")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with(&format!("slurm-{job}_")) {
            let log = std::fs::read_to_string(e.path()).unwrap();
            let n: usize = log
                .lines()
                .find_map(|l| {
                    l.split(" runs computed")
                        .next()
                        .filter(|_| l.contains(" runs computed"))
                })
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("{name}: {log}"));
            computed += n;
        }
    }
    assert_eq!(computed, 6, "a run was computed twice or not at all");
    std::fs::remove_file(&bad).unwrap();
    flscale(&["merge", "s"], &t);
    assert_same_store(&t.join("s"), &t.join("local"));
}
