use super::*;
use proptest::prelude::*;

pub(crate) const EXAMPLE: &str = r#"
[model]
kind = "fcn"
activation = "erf"
widths = [40]
parametrization = "standard"
[data]
d = 40
p = 1600
n_test = 4000
[target]
hermite = 3
[sampler]
kappa = 1.0
step = 1e-3
steps = 20000
burn_in = 10000
thin = 100
chains = 30
seed = 1
"#;

#[test]
fn the_issue_example_parses_with_defaults() {
    let cfg = ExperimentConfig::from_toml(EXAMPLE, "exp.toml").unwrap();
    assert_eq!(cfg.model.widths, vec![40]);
    assert_eq!(cfg.sigma2(), vec![1.0, 1.0]);
    assert_eq!(cfg.sampler.temperature, 1.0);
    assert_eq!(cfg.sampler.precision, Precision::F32);
    assert_eq!(cfg.data.covariance, Covariance::Isotropic);
    let terms = EXAMPLE.replace("hermite = 3", "terms = [[1, 1.0], [3, 0.3]]");
    let cfg = ExperimentConfig::from_toml(&terms, "exp.toml").unwrap();
    assert_eq!(cfg.target.terms, Some(vec![(1, 1.0), (3, 0.3)]));
}

#[test]
fn errors_name_field_value_and_what_is_allowed() {
    let bad = EXAMPLE.replace("step = 1e-3", "step = -1");
    let e = ExperimentConfig::from_toml(&bad, "exp.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "exp.toml: sampler.step = -1 is not allowed; it must be a finite number > 0"
    );
    assert_eq!(e.exit_code(), 2);
    let bad = EXAMPLE.replace("burn_in = 10000", "burn_in = 20000");
    let e = ExperimentConfig::from_toml(&bad, "exp.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sampler.burn_in = 20000") && e.contains("smaller than"),
        "{e}"
    );
    let bad = EXAMPLE.replace("kind = \"fcn\"", "kind = \"cnn\"");
    let e = ExperimentConfig::from_toml(&bad, "exp.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.patch is missing"), "{e}");
    let bad = EXAMPLE.replace("activation = \"erf\"", "activation = \"gelu\"");
    let e = ExperimentConfig::from_toml(&bad, "exp.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("gelu") && e.contains("erf"), "{e}");
    let bad = EXAMPLE.replace("seed = 1", "seed = 1\nsped = 2");
    let e = ExperimentConfig::from_toml(&bad, "exp.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("sped"), "{e}");
    let bad = EXAMPLE.replace("hermite = 3", "hermite = 3\nparity = 2");
    let e = ExperimentConfig::from_toml(&bad, "exp.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("exactly one"), "{e}");
    let bad = format!("{EXAMPLE}\n[priors]\nsigma2 = [1.0]\n");
    let e = ExperimentConfig::from_toml(&bad, "exp.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("priors.sigma2"), "{e}");
}

const ATTENTION: &str = r#"
[model]
kind = "attention"
heads = 2
[data]
d = 8
tokens = 16
p = 100
[target]
cubic_tokens = true
[sampler]
kappa = 0.1
step = 1e-4
steps = 100
burn_in = 50
thin = 10
chains = 2
seed = 1
"#;

#[test]
fn cnn_and_attention_fields_are_checked_per_architecture() {
    let cfg = ExperimentConfig::from_toml(ATTENTION, "a.toml").unwrap();
    assert_eq!(cfg.n_groups(), 2);
    assert_eq!(cfg.sigma2(), vec![1.0, 1.0]);
    let cnn = EXAMPLE.replace("kind = \"fcn\"", "kind = \"cnn\"\npatch = 8");
    let cfg = ExperimentConfig::from_toml(&cnn, "c.toml").unwrap();
    assert_eq!((cfg.model.patch(), cfg.n_groups()), (Some(8), 2));
    let cases = [
        (
            ATTENTION.replace("heads = 2\n", ""),
            "model.heads is missing",
        ),
        (
            ATTENTION.replace("heads = 2", "heads = 0"),
            "model.heads = 0",
        ),
        (
            ATTENTION.replace("tokens = 16\n", ""),
            "data.tokens is missing",
        ),
        (
            ATTENTION.replace("tokens = 16", "tokens = 0"),
            "data.tokens = 0",
        ),
        (
            ATTENTION.replace("cubic_tokens = true", "hermite = 3"),
            "must be cubic_tokens = true",
        ),
        (
            ATTENTION.replace("heads = 2", "heads = 2\nwidths = [4]"),
            "model.widths = [4] is not allowed",
        ),
        (ATTENTION.replace("d = 8", "d = 2"), "data.d = 2"),
        (
            EXAMPLE.replace("hermite = 3", "cubic_tokens = true"),
            "target.cubic_tokens = true is not allowed",
        ),
        (
            EXAMPLE.replace("d = 40", "d = 40\ntokens = 4"),
            "data.tokens = 4 is not allowed with model.kind = \"fcn\"",
        ),
        (
            EXAMPLE.replace("kind = \"fcn\"", "kind = \"fcn\"\nheads = 2"),
            "model.heads = 2",
        ),
        (
            EXAMPLE.replace("kind = \"fcn\"", "kind = \"fcn\"\npatch = 4"),
            "model.patch = 4",
        ),
        (
            cnn.replace("patch = 8", "patch = 7"),
            "model.patch = 7 is not allowed; it must be at least 1 and divide data.d = 40",
        ),
        (cnn.replace("widths = [40]", "widths = [4, 4]"), "one entry"),
        (
            cnn.replace("hermite = 3", "parity = 2"),
            "target.parity = 2",
        ),
        (
            ATTENTION.replace("heads = 2", "heads = 2\nlayernorm = true"),
            "model.layernorm = true is not allowed",
        ),
        (
            cnn.replace("seed = 1", "seed = 1\nlikelihood = \"cross-entropy\""),
            "sampler.likelihood = \"cross-entropy\" is not allowed with model.kind = \"cnn\"",
        ),
        (
            EXAMPLE.replace("seed = 1", "seed = 1\nmala = true\nhmc_steps = 0"),
            "sampler.hmc_steps = 0 is not allowed; it is the number of leapfrog steps",
        ),
        (
            EXAMPLE.replace("seed = 1", "seed = 1\nmala = false\nhmc_steps = 10"),
            "sampler.hmc_steps = 10 is not allowed with mala = false",
        ),
        (
            cnn.replace("seed = 1", "seed = 1\nmala = false\nhmc_steps = 5"),
            "sampler.hmc_steps = 5 is not allowed with mala = false",
        ),
        (
            ATTENTION.replace("seed = 1", "seed = 1\nmethod = \"collapsed\"\nfrozen_layers = [2]"),
            "sampler.method = \"collapsed\" with the readout (layer 2) in sampler.frozen_layers is not allowed",
        ),
    ];
    // The collapsed sampler exists for every architecture (the readout is linear in
    // features for the CNN and for attention).
    for text in [cnn.clone(), ATTENTION.to_string()] {
        let text = text.replace("seed = 1", "seed = 1\nmethod = \"collapsed\"");
        ExperimentConfig::from_toml(&text, "x.toml").unwrap();
        // HMC too, on both posteriors (kernel/hmc.rs, every model).
        let hmc = text.replace("seed = 1", "seed = 1\nmala = true\nhmc_steps = 5");
        ExperimentConfig::from_toml(&hmc, "x.toml").unwrap();
    }
    // The CNN's filters and the attention matrices have a Gauss–Newton preconditioner
    // (model/cnn.rs, model/attention.rs).
    for (base, pc) in [
        (&cnn[..], "block"),
        (&cnn[..], "neuron"),
        (ATTENTION, "block"),
        (ATTENTION, "neuron"),
    ] {
        let text = base.replace(
            "seed = 1",
            &format!(
                "seed = 1\nmethod = \"collapsed\"\nadapt_step = true\npreconditioner = \"{pc}\""
            ),
        );
        ExperimentConfig::from_toml(&text, "x.toml").unwrap();
    }
    for (text, want) in cases {
        let e = ExperimentConfig::from_toml(&text, "x.toml").unwrap_err();
        assert_eq!(e.exit_code(), 2, "{want}");
        let msg = e.to_string();
        assert!(msg.contains(want), "want `{want}` in: {msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Arbitrary text never panics the parser.
    #[test]
    fn random_text_never_panics(text in "\\PC{0,400}") {
        let _ = ExperimentConfig::from_toml(&text, "fuzz.toml");
    }

    /// Mutating a valid file (cutting it, replacing a number) never panics.
    #[test]
    fn mutated_example_never_panics(cut in 0usize..400, pick in 0usize..12,
                                    value in prop_oneof![Just("-1".to_string()), Just("0".to_string()),
                                        Just("nan".to_string()), Just("inf".to_string()), Just("1e308".to_string()),
                                        Just("18446744073709551615".to_string()), Just("\"x\"".to_string()),
                                        Just("[]".to_string()), Just("[[0, nan]]".to_string())]) {
        let cut = cut.min(EXAMPLE.len());
        let _ = ExperimentConfig::from_toml(&EXAMPLE[..cut], "fuzz.toml");
        let keys = ["widths", "d", "p", "n_test", "hermite", "kappa", "step", "steps",
                    "burn_in", "thin", "chains", "seed"];
        let key = keys[pick];
        let mutated: String = EXAMPLE.lines().map(|l| {
            if l.split('=').next().map(str::trim) == Some(key) { format!("{key} = {value}") } else { l.to_string() }
        }).collect::<Vec<_>>().join("\n");
        let _ = ExperimentConfig::from_toml(&mutated, "fuzz.toml");
    }
}

#[test]
fn starts_coupling_defaults_to_independent_and_names_its_values_when_bad() {
    let cfg = ExperimentConfig::from_toml(EXAMPLE, "exp.toml").unwrap();
    assert_eq!(cfg.sampler.starts_coupling, StartsCoupling::Independent);
    // The default is left out of a written file, so that configurations written before the
    // field existed are written the same.
    assert!(!toml::to_string(&cfg).unwrap().contains("starts_coupling"));
    let coupled = EXAMPLE.replace(
        "seed = 1",
        "seed = 1\nstart = \"both\"\nstarts_coupling = \"coupled\"",
    );
    let cfg = ExperimentConfig::from_toml(&coupled, "exp.toml").unwrap();
    assert_eq!(cfg.sampler.starts_coupling, StartsCoupling::Coupled);
    let back = ExperimentConfig::from_toml(&toml::to_string(&cfg).unwrap(), "w.toml").unwrap();
    assert_eq!(back, cfg);
    let bad = EXAMPLE.replace("seed = 1", "seed = 1\nstarts_coupling = \"paired\"");
    let e = ExperimentConfig::from_toml(&bad, "exp.toml").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    // Derived like every enum of the file (a hand-written parser hid the later fields from
    // `experiment::fields::field_paths`): serde names the value and what is allowed.
    let msg = e.to_string();
    assert!(
        msg.contains("paired") && msg.contains("`independent` or `coupled`"),
        "{e}"
    );
    let cold = EXAMPLE.replace("seed = 1", "seed = 1\nstarts_coupling = \"coupled\"");
    let e = ExperimentConfig::from_toml(&cold, "exp.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sampler.starts_coupling = \"coupled\"") && e.contains("start = \"cold\""),
        "{e}"
    );
}

/// The variants are read from and written as the file's fields: a configuration written and
/// read back is the same, with `kind`, `patch`, `heads`, `mala` and `hmc_steps` in the text.
#[test]
fn variants_round_trip_through_the_files_fields() {
    let cnn = EXAMPLE
        .replace("kind = \"fcn\"", "kind = \"cnn\"\npatch = 8")
        .replace("seed = 1", "seed = 1\nhmc_steps = 4");
    let ula = EXAMPLE.replace("seed = 1", "seed = 1\nmala = false");
    for (text, arch, proposal, written) in [
        (
            cnn.as_str(),
            NetworkVariant::Cnn { patch: 8 },
            Proposal::Hmc { leapfrog_steps: 4 },
            [
                "kind = \"cnn\"",
                "patch = 8",
                "mala = true",
                "hmc_steps = 4",
            ],
        ),
        (
            ATTENTION,
            NetworkVariant::Attention { heads: 2 },
            Proposal::MetropolisLangevin,
            [
                "kind = \"attention\"",
                "heads = 2",
                "mala = true",
                "tokens = 16",
            ],
        ),
        (
            ula.as_str(),
            NetworkVariant::Fcn,
            Proposal::Langevin,
            [
                "kind = \"fcn\"",
                "widths = [40]",
                "mala = false",
                "seed = 1",
            ],
        ),
    ] {
        let cfg = ExperimentConfig::from_toml(text, "x.toml").unwrap();
        assert_eq!(
            (cfg.model.architecture, cfg.sampler.proposal),
            (arch, proposal)
        );
        let out = toml::to_string(&cfg).unwrap();
        for line in written {
            assert!(out.lines().any(|l| l == line), "{line}: {out}");
        }
        assert_eq!(ExperimentConfig::from_toml(&out, "y.toml").unwrap(), cfg);
    }
    // Read by serde alone (a stored configuration), a combination without a variant is
    // refused with the same sentence.
    let bad = EXAMPLE.replace("kind = \"fcn\"", "kind = \"fcn\"\npatch = 4");
    let e = toml::from_str::<ExperimentConfig>(&bad)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("model.patch = 4 is not allowed with model.kind = \"fcn\"; it belongs to model.kind = \"cnn\" only"),
        "{e}"
    );
}

/// `sampler.metric`: "diag" is read and written back (the identity, the default, is left out
/// of a written file, so that files written before the field existed stay the same); a value
/// that is neither, and the combinations the diagonal metric cannot run in, are one sentence
/// naming the field with exit code 2.
#[test]
fn metric_is_read_written_and_refused_in_one_sentence() {
    let diag = EXAMPLE.replace("seed = 1", "seed = 1\nmetric = \"diag\"");
    let cfg = ExperimentConfig::from_toml(&diag, "x.toml").unwrap();
    assert_eq!(cfg.sampler.metric, MetricKind::Diag);
    let out = toml::to_string(&cfg).unwrap();
    assert!(out.lines().any(|l| l == "metric = \"diag\""), "{out}");
    assert_eq!(ExperimentConfig::from_toml(&out, "y.toml").unwrap(), cfg);
    let plain = ExperimentConfig::from_toml(EXAMPLE, "x.toml").unwrap();
    assert_eq!(plain.sampler.metric, MetricKind::Identity);
    assert!(!toml::to_string(&plain).unwrap().contains("metric"));
    let identity = EXAMPLE.replace("seed = 1", "seed = 1\nmetric = \"identity\"");
    assert_eq!(
        ExperimentConfig::from_toml(&identity, "x.toml").unwrap(),
        plain
    );
    for (text, want) in [
        (
            EXAMPLE.replace("seed = 1", "seed = 1\nmetric = \"dense\""),
            "sampler.metric = \"dense\" is not allowed; it is \"identity\" (the default) or \"diag\"",
        ),
        (
            diag.replace("seed = 1", "seed = 1\nadapt_step = false"),
            "sampler.metric = \"diag\" is not allowed with adapt_step = false",
        ),
        (
            diag.replace("burn_in = 10000", "burn_in = 19"),
            "sampler.metric = \"diag\" is not allowed with burn_in = 19",
        ),
        (
            diag.replace(
                "seed = 1",
                "seed = 1\nmethod = \"collapsed\"\npreconditioner = \"block\"",
            ),
            "sampler.metric = \"diag\" with sampler.preconditioner = \"block\" is not allowed",
        ),
    ] {
        let e = ExperimentConfig::from_toml(&text, "x.toml").unwrap_err();
        assert_eq!(e.exit_code(), 2, "{want}");
        let msg = e.to_string();
        assert!(msg.contains(want), "want `{want}` in: {msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
}
