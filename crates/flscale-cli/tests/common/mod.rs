//! Helpers the CLI test binaries share: running flscale, a small sweep, store snapshots.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flscale"));
    c.arg("-q");
    c
}

pub fn run(args: &[&str], cwd: &Path) -> Output {
    bin().args(args).current_dir(cwd).output().unwrap()
}

pub fn ok(args: &[&str], cwd: &Path) -> String {
    let o = run(args, cwd);
    assert!(
        o.status.success(),
        "flscale {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// A small sweep: 2 × 3 = 6 runs of a two-layer erf network, a fraction of a second each.
pub const EXP: &str = r#"
[model]
kind = "fcn"
activation = "erf"
widths = [8]
[data]
d = 8
p = 40
n_test = 200
[target]
hermite = 3
[sampler]
kappa = 0.5
step = 5e-4
steps = 800
burn_in = 400
thin = 40
chains = 6
seed = 3
[sweep]
data.d = [6, 8]
data.p_over_d = [2, 8, 32]
follow = { "model.widths" = "data.d" }
[analysis]
predict = { preset = "fcn2-erf-he3", at = "N=d" }
"#;

/// Every file under `dir` whose name `keep` accepts, as relative path → bytes.
pub fn snapshot_where(dir: &Path, keep: &dyn Fn(&str) -> bool) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(
        root: &Path,
        d: &Path,
        keep: &dyn Fn(&str) -> bool,
        out: &mut BTreeMap<PathBuf, Vec<u8>>,
    ) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if p.is_dir() {
                walk(root, &p, keep, out);
            } else if keep(&name) {
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, keep, &mut out);
    out
}

/// Every file under `dir` except the timing files, as relative path → bytes.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    snapshot_where(dir, &|name| !name.starts_with("timing"))
}

pub fn finished_runs(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("runs"))
        .map(|r| {
            r.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("run-"))
                .count()
        })
        .unwrap_or(0)
}

/// Copies the directory tree `src` to `dest`.
pub fn copy_tree(src: &Path, dest: &Path) {
    std::fs::create_dir_all(dest).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let to = dest.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}
