//! A hostile client against `flscale serve` (issue 35 §2), loopback only, bounded in count and
//! time (each test ends within about a minute and stops its server): deep nesting, malformed
//! and oversized requests, slow-loris sockets, stalled downloads, a burst of heavy requests.
//! Every error must be `{"error": "<one sentence>"}` with the right status and the security
//! headers, and the server must keep serving — the slider within a second.

use std::process::Command;

/// `N1=((((…d))))` nested `depth` deep: the `--at` of the hostile-client review.
fn deep_at(depth: usize) -> String {
    format!("N1={}d{}", "(".repeat(depth), ")".repeat(depth))
}

/// The CLI died with a stack overflow at depth 60000 (SIGABRT); now it exits 2 with one line
/// that names the limit and the column.
#[test]
fn predict_refuses_a_60000_deep_at_with_one_sentence() {
    let at = deep_at(60_000);
    let o = Command::new(env!("CARGO_BIN_EXE_flscale"))
        .args(["predict", "--preset", "fcn3-erf-he3", "--at", &at])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("nests deeper than 200 parentheses at column 201; flatten it"),
        "{err}"
    );
    assert!(err.len() < 400, "{} bytes: {err}", err.len());
    // The deepest accepted nesting still predicts.
    let o = Command::new(env!("CARGO_BIN_EXE_flscale"))
        .args(["predict", "--preset", "fcn3-erf-he3", "--at", &deep_at(200)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
