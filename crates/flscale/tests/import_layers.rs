//! The layering check of ARCHITECTURE.md (`scripts/import_layers.py`, also run first by
//! `.ci/run`): it passes on the workspace as it is, and it fails — naming the file and the
//! import — when an upward import or a circle is planted in a copy of the sources.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the check on `root`; `None` when no `python3` can be started (the reason is printed,
/// and under CI the test fails instead).
fn check(root: &Path) -> Option<(bool, String)> {
    let script = workspace().join("scripts/import_layers.py");
    match Command::new("python3")
        .arg(&script)
        .arg("--root")
        .arg(root)
        .output()
    {
        Ok(out) => Some((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "python3 could not be started under CI: {e}"
            );
            eprintln!("import_layers: skipped, python3 could not be started: {e}");
            None
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

/// A copy of every crate's `src/` and of ARCHITECTURE.md, the inputs of the check.
fn copy_sources(to: &Path) {
    for krate in ["flscale", "flscale-cli", "flscale-py"] {
        let src = workspace().join("crates").join(krate).join("src");
        copy_tree(&src, &to.join("crates").join(krate).join("src"));
    }
    std::fs::copy(
        workspace().join("ARCHITECTURE.md"),
        to.join("ARCHITECTURE.md"),
    )
    .unwrap();
}

/// Puts `line` after the first line of `file` that starts with `use ` (non-test code).
fn plant(root: &Path, file: &str, line: &str) {
    let path = root.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let at = text.find("\nuse ").expect("a use line") + 1;
    let planted = format!("{}{line}\n{}", &text[..at], &text[at..]);
    std::fs::write(&path, planted).unwrap();
}

#[test]
fn the_workspace_keeps_its_layers() {
    let Some((ok, out)) = check(&workspace()) else {
        return;
    };
    assert!(
        ok,
        "scripts/import_layers.py fails on the workspace:\n{out}"
    );
}

#[test]
fn an_upward_import_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_sources(dir.path());
    // The store is a floor of experiment/: it must not reach the refinement planner.
    plant(
        dir.path(),
        "crates/flscale/src/experiment/store.rs",
        "use super::refine::refine_pstar;",
    );
    let Some((ok, out)) = check(dir.path()) else {
        return;
    };
    assert!(!ok, "a planted upward import passed:\n{out}");
    assert!(
        out.contains("crates/flscale/src/experiment/store.rs")
            && out.contains("super::refine::refine_pstar"),
        "the failure does not name the file and the import:\n{out}"
    );
}

#[test]
fn a_circle_between_crate_modules_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_sources(dir.path());
    // The error type is the bottom of the crate; an import of the Langevin engine closes a
    // circle error -> sim -> error.
    plant(
        dir.path(),
        "crates/flscale/src/error.rs",
        "use crate::sim::ExperimentConfig;",
    );
    let Some((ok, out)) = check(dir.path()) else {
        return;
    };
    assert!(!ok, "a planted circle passed:\n{out}");
    assert!(
        out.contains("circle in flscale ") && out.contains("crates/flscale/src/error.rs"),
        "the failure does not name the circle and the file:\n{out}"
    );
}
