use super::*;
use crate::error::{Error, Result};

pub(crate) const BASE: &str = r#"
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
kappa = 1.0
step = 1e-3
steps = 200
burn_in = 100
thin = 10
chains = 4
seed = 1
"#;

#[test]
fn grid_is_the_product_in_sorted_field_order() {
    let text = format!(
        "{BASE}\n[sweep]\ndata.d = [4, 6]\ndata.p_over_d = [2, 5.5]\nsampler.seed = [1, 2, 3]\nfollow = {{ \"model.widths\" = \"data.d\" }}\n"
    );
    let s = Sweep::from_toml(&text, "exp.toml", false).unwrap();
    assert_eq!(s.len(), 12);
    let fields: Vec<&str> = s.axes.iter().map(|a| a.field.as_str()).collect();
    assert_eq!(fields, ["data.d", "data.p_over_d", "sampler.seed"]);
    // Index 7 = (d index 1, ratio index 0, seed index 1): d = 6, P = 12, seed = 2.
    let r = &s.runs[7];
    assert_eq!(r.config.data.d, 6);
    assert_eq!(r.config.data.p, 12);
    assert_eq!(r.config.sampler.seed, 2);
    assert_eq!(r.config.model.widths, vec![6]);
    // P = round(5.5 · 4) = 22.
    assert_eq!(s.runs[3].config.data.p, 22);
    assert_eq!(s.runs[3].config.data.d, 4);
    let c = r.coordinates();
    assert_eq!(c["n1"], 6.0);
    assert_eq!(c["p_over_d"], 2.0);
    // Shards are disjoint and cover the grid.
    let mut all: Vec<usize> = (0..3)
        .flat_map(|i| s.shard(i, 3).into_iter().map(|r| r.index))
        .collect();
    all.sort();
    assert_eq!(all, (0..12).collect::<Vec<_>>());
}

#[test]
fn no_sweep_table_is_one_run_and_quick_overrides_apply() {
    let s = Sweep::from_toml(BASE, "exp.toml", false).unwrap();
    assert_eq!(s.runs.len(), 1);
    let text = format!(
        "{BASE}\n[sweep]\ndata.d = [4, 6]\n[quick]\nset = {{ \"sampler.steps\" = 150 }}\nsweep = {{ \"data.d\" = [5] }}\n"
    );
    let full = Sweep::from_toml(&text, "exp.toml", false).unwrap();
    assert_eq!(full.runs.len(), 2);
    assert_eq!(full.runs[0].config.sampler.steps, 200);
    let q = Sweep::from_toml(&text, "exp.toml", true).unwrap();
    assert_eq!(q.runs.len(), 1);
    assert_eq!(q.runs[0].config.data.d, 5);
    assert_eq!(q.runs[0].config.sampler.steps, 150);
}

#[test]
fn the_free_energy_table_is_kept_and_quick_still_applies() {
    let table = "[free_energy]\norder_parameter = \"neuron_overlap\"\nneuron = 0\nwindows = 4\n";
    let text = format!("{BASE}\n{table}[quick]\nset = {{ \"sampler.steps\" = 150 }}\n");
    let q = Sweep::from_toml(&text, "exp.toml", true).unwrap();
    assert_eq!(q.runs.len(), 1);
    assert_eq!(q.runs[0].config.sampler.steps, 150);
    let fe = q.free_energy.expect("the table is kept");
    assert_eq!((fe.windows, fe.neuron), (4, Some(0)));
    // The run's own file does not carry the table: `flscale sample` accepts it.
    assert!(!q.runs[0].toml.contains("free_energy"));
    assert!(Sweep::from_toml(BASE, "exp.toml", false)
        .unwrap()
        .free_energy
        .is_none());
    let bad = format!("{BASE}\n[free_energy]\norder_parameter = \"neuron_overlap\"\nwindow = 4\n");
    let err = Sweep::from_toml(&bad, "exp.toml", false).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
    let msg = err.to_string();
    assert!(
        msg.starts_with("exp.toml: [free_energy]: unknown field `window`") && !msg.contains('\n'),
        "{msg}"
    );
}

#[test]
fn a_free_energy_grid_gives_one_plan_per_point_named_as_the_runner_names_it() {
    let table = "[free_energy]\norder_parameter = \"neuron_overlap\"\nneuron = 5\nwindows = 4\n";
    let grid = "[sweep]\ndata.d = [6, 10]\ndata.p_over_d = [2, 4]\nfollow = { \"model.widths\" = \"data.d\" }\n";
    let text = format!("{BASE}\n{grid}{table}");
    let s = Sweep::from_toml(&text, "exp.toml", false).unwrap();
    let cells = s.free_energy_plans().unwrap();
    assert_eq!(cells.len(), 4);
    for (c, r) in cells.iter().zip(&s.runs) {
        assert_eq!((c.index, c.id.as_str()), (r.index, r.id.as_str()));
        assert_eq!(c.plan.config.data.d, r.config.data.d);
        assert_eq!(c.plan.config.data.p, r.config.data.p);
        assert_eq!(c.plan.windows(), 4);
        assert_eq!(c.coordinates["p"], r.config.data.p as f64);
    }
    assert_eq!(cells[3].id, "run-00003");
    assert_eq!(cells[3].label, "data.d=10 data.p_over_d=4");
    assert_eq!(cells[3].plan.config.data.p, 40);
    // The one-cell form refuses the grid in one sentence.
    let e = s.free_energy_plan().unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("lists 4 grid points"), "{e}");
    // A point the table does not fit is named: neuron 5 exists at d = 10 (N = 10) but not
    // at N = 4.
    let narrow = text.replace("data.d = [6, 10]", "data.d = [4, 10]");
    let e = Sweep::from_toml(&narrow, "exp.toml", false)
        .unwrap()
        .free_energy_plans()
        .unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let msg = e.to_string();
    assert!(
        msg.starts_with("exp.toml at the grid point data.d=4 data.p_over_d=2: ")
            && msg.contains("free_energy.neuron = 5")
            && !msg.contains('\n'),
        "{msg}"
    );
    // Without a grid, both forms give the file's one plan.
    let one = Sweep::from_toml(&format!("{BASE}\n{table}"), "exp.toml", false).unwrap();
    let cells = one.free_energy_plans().unwrap();
    assert_eq!((cells.len(), cells[0].label.as_str()), (1, ""));
    assert_eq!(one.free_energy_plan().unwrap().config.data.d, 8);
    let e = Sweep::from_toml(&format!("{BASE}\n{grid}"), "exp.toml", false)
        .unwrap()
        .free_energy_plans()
        .unwrap_err();
    assert!(e.to_string().contains("has no [free_energy] table"), "{e}");
}

#[test]
fn analysis_pstar_chooses_the_source_of_pstar() {
    let s = Sweep::from_toml(BASE, "exp.toml", false).unwrap();
    assert_eq!(s.analysis.pstar, PstarSource::Crossing);
    // Left out of the manifest at its default.
    let json = serde_json::to_string(&s.analysis).unwrap();
    assert!(!json.contains("pstar\""), "{json}");
    let table = "[free_energy]\norder_parameter = \"aligned_fraction\"\nwindows = 4\n";
    let text = format!("{BASE}\n[analysis]\npstar = \"coexistence\"\n{table}");
    let s = Sweep::from_toml(&text, "exp.toml", false).unwrap();
    assert_eq!(s.analysis.pstar, PstarSource::Coexistence);
    assert!(serde_json::to_string(&s.analysis)
        .unwrap()
        .contains("\"pstar\":\"coexistence\""));
    let e = Sweep::from_toml(&text.replace(table, ""), "exp.toml", false).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string().contains("needs a [free_energy] table") && !e.to_string().contains('\n'),
        "{e}"
    );
    let e = Sweep::from_toml(&text.replace("coexistence", "coex"), "exp.toml", false).unwrap_err();
    assert!(e.to_string().contains("unknown variant `coex`"), "{e}");
}

#[test]
fn malformed_grids_fail_naming_the_field() {
    let cases = [
        ("data.dd = [1, 2]", "`data.dd`"),
        ("data.d = []", "sweep.data.d = [] is an empty grid"),
        ("data.d = [4, -3]", "sweep.data.d[1] = -3"),
        ("data.d = 4", "sweep.data.d = 4 is not a list"),
        ("model.widths = [[4], []]", "sweep.model.widths[1]"),
        ("sampler.kappa = [1.0, -1.0]", "sampler.kappa = -1"),
        (
            "data.p = [4]\ndata.p_over_d = [2]",
            "both data.p and data.p_over_d",
        ),
    ];
    for (sweep, want) in cases {
        let text = format!("{BASE}\n[sweep]\n{sweep}\n");
        let e = Sweep::from_toml(&text, "exp.toml", false).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{sweep}");
        let msg = e.to_string();
        assert!(msg.contains(want), "{sweep}: {msg}");
        assert!(msg.starts_with("exp.toml"), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
    // The unknown-field message lists the allowed fields, read from the config types:
    // optional ones (target.parity, priors.sigma2) and derived ones included.
    let e = Sweep::from_toml(
        &format!("{BASE}\n[sweep]\ndata.dd = [1]\n"),
        "exp.toml",
        false,
    )
    .unwrap_err()
    .to_string();
    for f in [
        "data.d,",
        "target.parity",
        "priors.sigma2",
        "sampler.adapt_step",
        "data.p_over_d",
    ] {
        assert!(e.contains(f), "{f}: {e}");
    }
    let e = Sweep::from_toml(&format!("{BASE}\n[sweep]\n"), "exp.toml", false).unwrap_err();
    assert!(e.to_string().contains("lists no field"), "{e}");
    let e = Sweep::from_toml(
        &format!("{BASE}\n[analysis]\nthreshhold = 0.2\n"),
        "e",
        false,
    )
    .unwrap_err();
    assert!(e.to_string().contains("threshhold"), "{e}");
}

/// Every experiment preset the repository ships, as text: the fuzz tests below mutate them.
const PRESET_TEXTS: [&str; 8] = [
    include_str!("../../../../../presets/experiments/blog.toml"),
    include_str!("../../../../../presets/experiments/fig2a.toml"),
    include_str!("../../../../../presets/experiments/fig2b.toml"),
    include_str!("../../../../../presets/experiments/fig2c.toml"),
    include_str!("../../../../../presets/experiments/fig3a.toml"),
    include_str!("../../../../../presets/experiments/fig3b.toml"),
    include_str!("../../../../../presets/experiments/fig3c.toml"),
    include_str!("../../../../../presets/experiments/fig7.toml"),
];

/// A parse failure must be bad input (exit code 2), on one line, naming the file.
fn check_rejection(result: Result<Sweep>) {
    if let Err(e) = result {
        let Error::InvalidInput(msg) = &e else {
            panic!("a parse failure must be InvalidInput: {e}");
        };
        assert!(!msg.contains('\n'), "message spans lines: {msg}");
        assert!(
            msg.contains("fuzz.toml"),
            "message does not name the file: {msg}"
        );
    }
}

#[test]
fn every_preset_parses_with_and_without_quick() {
    for text in PRESET_TEXTS {
        for quick in [false, true] {
            let sweep = Sweep::from_toml(text, "preset.toml", quick).unwrap();
            assert!(!sweep.is_empty());
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    /// Arbitrary text never panics the sweep parser, and a rejection is one line of bad input.
    #[test]
    fn random_text_is_rejected_cleanly(text in "\\PC{0,300}") {
        check_rejection(Sweep::from_toml(&text, "fuzz.toml", false));
    }

    /// A shipped preset with one value replaced, a line dropped or the text cut short never
    /// panics the parser (the grid expansion included), and a rejection is one line of bad
    /// input naming the file.
    #[test]
    fn mutated_presets_are_rejected_cleanly(
        which in 0usize..8, line_pick in 0usize..200, cut in 0usize..4000, quick: bool,
        value in proptest::prop_oneof![
            proptest::strategy::Just("-1".to_string()), proptest::strategy::Just("0".to_string()),
            proptest::strategy::Just("nan".to_string()), proptest::strategy::Just("-inf".to_string()),
            proptest::strategy::Just("1e308".to_string()),
            proptest::strategy::Just("18446744073709551615".to_string()),
            proptest::strategy::Just("\"x\"".to_string()), proptest::strategy::Just("[]".to_string()),
            proptest::strategy::Just("[0, -3]".to_string()), proptest::strategy::Just("[[1, nan]]".to_string()),
            proptest::strategy::Just("{ a = 1 }".to_string()), proptest::strategy::Just("true".to_string()),
        ],
    ) {
        let text = PRESET_TEXTS[which];
        let lines: Vec<&str> = text.lines().collect();
        let assignments: Vec<usize> =
            (0..lines.len()).filter(|&i| lines[i].contains('=') && !lines[i].trim_start().starts_with('#')).collect();
        let target = assignments[line_pick % assignments.len()];
        let replaced: Vec<String> = lines.iter().enumerate().map(|(i, l)| {
            if i == target {
                let key = l.split('=').next().unwrap_or("");
                format!("{key}= {value}")
            } else {
                l.to_string()
            }
        }).collect();
        check_rejection(Sweep::from_toml(&replaced.join("\n"), "fuzz.toml", quick));
        let dropped: Vec<&str> =
            lines.iter().enumerate().filter(|&(i, _)| i != target).map(|(_, l)| *l).collect();
        check_rejection(Sweep::from_toml(&dropped.join("\n"), "fuzz.toml", quick));
        let mut end = cut.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        check_rejection(Sweep::from_toml(&text[..end], "fuzz.toml", quick));
    }
}
