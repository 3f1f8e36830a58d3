//! `flscale predict`, `energy`, `presets`, `preset show` run as a user runs them.

use std::process::{Command, Output};

fn flscale(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flscale"))
        .args(args)
        .output()
        .expect("run flscale")
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = flscale(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn table_1_preset_prints_a_table_and_a_reading() {
    let o = flscale(&["predict", "--preset", "fcn3-erf-he3"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "GP-GP",
        "GP-Sp",
        "Sp-Mag",
        "Delta_1",
        "Delta_2",
        "a_y",
        "(N1*N2*d)^(1/3)",
        "sqrt(N2*d)",
        "P*/kappa ∝ d",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
}

#[test]
fn json_has_every_pattern_and_the_documented_fields() {
    let v = json(&["predict", "--preset", "fcn3-erf-he3", "--json"]);
    assert_eq!(v["p_star_exponent"], "1");
    assert_eq!(v["regime"]["N1"], "1");
    let patterns = v["patterns"].as_array().unwrap();
    assert_eq!(patterns.len(), 45);
    let sp_mag = patterns.iter().find(|p| p["name"] == "Sp-Mag").unwrap();
    for field in [
        "name",
        "layers",
        "terms",
        "energy",
        "exponent",
        "exponent_float",
        "argmin",
        "binding",
    ] {
        assert!(sp_mag.get(field).is_some(), "missing {field}");
    }
    assert_eq!(sp_mag["terms"]["Delta_1"], "M1*d");
    assert_eq!(sp_mag["terms"]["Delta_2"], "N1*beta2/M1");
    assert_eq!(sp_mag["terms"]["a_y"], "N2/beta2");
    assert_eq!(sp_mag["exponent"], "1");
    assert_eq!(sp_mag["exponent_float"], 1.0);
    for name in ["Sp-GP", "GFL-GP"] {
        assert!(patterns.iter().any(|p| p["name"] == name), "{name}");
    }
    let winners: Vec<&str> = v["winners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(winners.contains(&"GP-Sp") && winners.contains(&"Sp-Mag"));
}

#[test]
fn at_overrides_the_regime() {
    let v = json(&[
        "predict",
        "--preset",
        "fcn3-erf-he3",
        "--at",
        "N1=d^2",
        "--json",
    ]);
    let winners: Vec<&str> = v["winners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        winners.contains(&"GP-Sp") && !winners.contains(&"Sp-Mag"),
        "{winners:?}"
    );
    let p = json(&[
        "predict",
        "--preset",
        "fcn2-erf-he3",
        "--at",
        "N=d^(1/2)",
        "--json",
    ]);
    let sp = p["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "Sp")
        .unwrap();
    assert_eq!(sp["binding"], serde_json::json!(["1 <= M"]));
}

#[test]
fn phase_diagrams_write_valid_pictures() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("phase.svg");
    let v = json(&[
        "predict",
        "--preset",
        "fcn2-erf-he3",
        "--phase",
        "N",
        "--range",
        "0:8",
        "--out",
        svg.to_str().unwrap(),
        "--json",
    ]);
    assert!(v["boundaries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["at"] == "5" && b["winners_change"] == true));
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let png = dir.path().join("map.png");
    let o = flscale(&[
        "predict",
        "--preset",
        "fcn3-erf-he3",
        "--phase",
        "N1,N2",
        "--grid",
        "6",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn bad_input_is_one_sentence_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("arch.toml");
    std::fs::write(&f, "[network]\nkind = \"fcn\"\nactivation = \"erf\"\nwidths = [\"N\"]\nwidht = 3\n[target]\nhermite = 3\n").unwrap();
    let o = flscale(&["predict", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("widht") && e.contains("line 5"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    std::fs::write(&f, "[network]\nkind = \"fcn\"\nactivation = \"softplus\"\nwidths = [\"N\"]\n[target]\nhermite = 3\n").unwrap();
    let e = stderr(&flscale(&["predict", f.to_str().unwrap()]));
    assert!(
        e.contains("softplus") && e.contains("erf, relu, tanh, linear, poly"),
        "{e}"
    );
    let o = flscale(&["predict", "--preset", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("fcn3-erf-he3"));
    let o = flscale(&["predict", "--preset", "fcn3-erf-he3", "--at", "N1=K"]);
    assert_eq!(o.status.code(), Some(2));
    let o = flscale(&["predict", "/nonexistent.toml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn energy_calculator() {
    let v = json(&[
        "energy",
        "M*d + N/M",
        "--free",
        "M",
        "--constraint",
        "1<=M<=N",
        "--at",
        "N=d^3",
        "--json",
    ]);
    assert_eq!(v["exponent"], "2");
    assert_eq!(v["optimum"], "sqrt(N*d)");
    assert_eq!(v["argmin"]["M"]["symbolic"], "sqrt(N/d)");
    assert_eq!(v["binding"], serde_json::json!([]));
    let v = json(&[
        "energy",
        "M*d + N/M",
        "--free",
        "M",
        "--constraint",
        "1<=M<=N",
        "--at",
        "N=d^(1/2)",
        "--json",
    ]);
    assert_eq!(v["exponent"], "1");
    assert_eq!(v["binding"], serde_json::json!(["1 <= M"]));
    for field in ["exponent", "exponent_float", "argmin", "active", "binding"] {
        assert!(v.get(field).is_some(), "{field}");
    }
    let o = flscale(&["energy", "M*d - N", "--free", "M"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("column 5"), "{}", stderr(&o));
    let o = flscale(&["energy", "N/M", "--free", "M", "--at", "N=d"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("without bound"));
}

#[test]
fn presets_round_trip() {
    let list = json(&["presets", "--json"]);
    let names: Vec<String> = list["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    for n in [
        "fcn2-erf-he3",
        "fcn2-erf-he3-meanfield",
        "fcn3-erf-he3",
        "cnn-patches",
        "attention-softmax",
        "fcn2-relu-parity",
    ] {
        assert!(names.contains(&n.to_string()), "{n}");
    }
    let dir = tempfile::tempdir().unwrap();
    for n in &names {
        let shown = flscale(&["preset", "show", n]);
        assert!(shown.status.success());
        let f = dir.path().join(format!("{n}.toml"));
        std::fs::write(&f, &shown.stdout).unwrap();
        let from_file = json(&["predict", f.to_str().unwrap(), "--json"]);
        let from_preset = json(&["predict", "--preset", n, "--json"]);
        assert_eq!(
            from_file["p_star_exponent"], from_preset["p_star_exponent"],
            "{n}"
        );
        assert_eq!(from_file["winners"], from_preset["winners"], "{n}");
    }
}

#[test]
fn user_catalog_files_work_like_built_in_ones() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mine.toml"),
        r#"
[catalog]
name = "toy"
title = "toy model"
source = "a test"
target = "none"
derivation = "by hand"
scales = ["N"]
[[pattern]]
name = "lazy"
terms = { a_y = "d^2" }
[[pattern]]
name = "rich"
free = ["M"]
constraints = ["1 <= M <= N"]
terms = { cost = "M*d", a_y = "N/M" }
"#,
    )
    .unwrap();
    let arch = dir.path().join("arch.toml");
    std::fs::write(
        &arch,
        "[network]\nkind = \"catalog\"\ncatalog = \"mine.toml\"\n[regime]\nN = \"d\"\n",
    )
    .unwrap();
    let v = json(&["predict", arch.to_str().unwrap(), "--json"]);
    assert_eq!(v["winners"], serde_json::json!(["rich"]));
    assert_eq!(v["p_star_exponent"], "1");
}

#[test]
fn help_teaches() {
    for sub in ["predict", "energy", "presets", "preset"] {
        let o = flscale(&[sub, "--help"]);
        assert!(o.status.success());
        let t = String::from_utf8_lossy(&o.stdout);
        assert!(t.contains("Example"), "{sub} --help has no example");
    }
}

/// Issue 40: an erf network on an even target has no finite pattern; the output says why in
/// one sentence (erf's even Hermite coefficients vanish), prints no empty table, carries the
/// reason in --json and exits 0 (docs/scaling.md).
#[test]
fn an_even_target_names_why_no_pattern_aligns() {
    let dir = tempfile::tempdir().unwrap();
    for m in [2, 4] {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../presets/fcn2-erf-he3.toml"
        ))
        .unwrap()
        .replace("hermite = 3", &format!("hermite = {m}"));
        let file = dir.path().join(format!("he{m}.toml"));
        std::fs::write(&file, text).unwrap();
        let f = file.to_str().unwrap();
        let o = flscale(&["predict", f]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("erf is odd (its Hermite coefficients of even order vanish)")
                && out.contains(&format!("even target He{m}")),
            "{out}"
        );
        assert!(!out.contains("Delta_1"), "a header-only table:\n{out}");
        let v = json(&["predict", f, "--json"]);
        assert_eq!(v["winners"], serde_json::json!([]));
        assert!(v["p_star_exponent"].is_null());
        assert!(v["no_winner_reason"]
            .as_str()
            .unwrap()
            .contains("even order vanish"));
    }
    // An odd target has a winner and no such reason.
    let v = json(&["predict", "--preset", "fcn2-erf-he3", "--json"]);
    assert!(v["no_winner_reason"].is_null());
}

/// Issue 40: the table names the paper's rows, says how many patterns tie and where the
/// ones it does not show are; the JSON tells the same story (winners, simplest_winners,
/// paper_patterns).
#[test]
fn the_paper_rows_and_the_ties_are_named() {
    let o = flscale(&["predict", "--preset", "fcn3-erf-he3"]);
    let out = String::from_utf8_lossy(&o.stdout);
    for name in ["GP-GP", "GP-Sp", "Sp-Mag"] {
        let row = out
            .lines()
            .find(|l| {
                l.trim_start_matches(['*', ' '])
                    .starts_with(&format!("{name} "))
            })
            .unwrap_or_else(|| panic!("no row {name}:\n{out}"));
        assert!(row.trim_end().ends_with("Table 1"), "{row}");
    }
    let v = json(&["predict", "--preset", "fcn3-erf-he3", "--json"]);
    let winners = v["winners"].as_array().unwrap();
    let starred = out
        .lines()
        .filter(|l| l.starts_with("* ") && !l.contains("patterns tie"))
        .count();
    let hidden_tied = v["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["paper_kind"] == false && winners.contains(&p["name"]))
        .count();
    assert_eq!(starred + hidden_tied, winners.len());
    assert!(
        out.contains(&format!(
            "* {} patterns tie at the smallest exponent, Ẽ ∝ d: {starred} in this table, and {hidden_tied} of the ",
            winners.len()
        )),
        "{out}"
    );
    assert!(out.contains(" patterns not shown (muSp"), "{out}");
    assert!(!out.contains("among the"), "{out}");
    assert_eq!(v["paper_table"], "Table 1");
    assert_eq!(
        v["paper_patterns"],
        serde_json::json!(["GP-GP", "GP-Sp", "Sp-Mag"])
    );
    for w in v["simplest_winners"].as_array().unwrap() {
        assert!(winners.contains(w), "{w}");
    }
    assert!(out.contains("from: preset fcn3-erf-he3"), "{out}");
}

/// Issue 40: an edited copy of a preset keeps the preset's title; the header shows what was
/// parsed, and the paper's rows are marked only while it is still the paper's setup.
#[test]
fn the_header_shows_the_parsed_target_beside_a_stale_title() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../presets/fcn3-erf-he3.toml"
    ))
    .unwrap()
    .replace("hermite = 3", "hermite = 5");
    let file = dir.path().join("mine.toml");
    std::fs::write(&file, text).unwrap();
    let o = flscale(&["predict", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines();
    assert!(lines.next().unwrap().contains("learning He3"), "{out}");
    assert_eq!(
        lines.next().unwrap(),
        "parsed: 3-layer erf FCN (widths N1, N2), target He5, standard scaling"
    );
    // He5 is not the paper's Table 1 setup: no `paper` column, no `paper:` line.
    assert!(
        out.lines()
            .all(|l| !l.starts_with("paper:") && !l.trim_end().ends_with("  paper")),
        "{out}"
    );
}

/// Issue 40: `--at` with a scale the architecture lacks names the preset (or file), not its
/// 90-character title.
#[test]
fn an_unknown_scale_names_the_preset_not_the_title() {
    let o = flscale(&["predict", "--preset", "fcn3-erf-he3", "--at", "N3=d"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(
        err.trim(),
        "error: --at names the scale 'N3', which preset fcn3-erf-he3 does not have; its scales are d, N1, N2"
    );
}

/// A malformed `--at` entry is named once, with the option once (not `--at: --at entry`);
/// `predict` names the preset or file it applies to, not its title.
#[test]
fn a_malformed_at_entry_names_the_option_once() {
    let only = |args: &[&str]| {
        let o = flscale(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.matches("--at").count(), 1, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        err.trim().to_string()
    };
    assert_eq!(
        only(&["energy", "M*d + N/M", "--free", "M", "--at", "N"]),
        "error: --at entry \"N\" has no '='; write e.g. N1=d^2"
    );
    assert_eq!(
        only(&["energy", "M*d + N/M", "--free", "M", "--at", "N=K^2"]),
        "error: --at entry \"N=K^2\" mentions 'K', which has no value; write the value as a power of d, e.g. N=d^2"
    );
    assert_eq!(
        only(&["predict", "--preset", "fcn3-erf-he3", "--at", "N1=d,N2"]),
        "error: preset fcn3-erf-he3: --at entry \"N2\" has no '='; write e.g. N1=d^2"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("net.toml");
    let toml = flscale(&["preset", "show", "fcn3-erf-he3"]);
    assert!(toml.status.success());
    std::fs::write(&file, &toml.stdout).unwrap();
    let path = file.display().to_string();
    let err = only(&["predict", &path, "--at", "N1=q"]);
    assert!(
        err.starts_with(&format!("error: {path}: --at entry \"N1=q\" mentions 'q'")),
        "{err}"
    );
}

/// Issue 40: Python's power operator gets a hint to write `^`.
#[test]
fn a_python_power_gets_a_hint() {
    let o = flscale(&["energy", "M**2*d + N/M", "--free", "M", "--at", "N=d"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("powers are written with ^, not **: \"M^2*d + N/M\""),
        "{err}"
    );
    let o = flscale(&["predict", "--preset", "fcn3-erf-he3", "--at", "N1=d**2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("\"N1=d^2\""), "{}", stderr(&o));
}
