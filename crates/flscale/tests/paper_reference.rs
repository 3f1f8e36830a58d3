//! Every reference value of spec 01 §4 (paper App. E.1.1, Sec. 6.1 Table 1, App. E.1.2, E.2,
//! E.3), derived through the engine from the architecture description — not looked up.

use flscale::patterns::{Architecture, Prediction};
use flscale::scaling::{Monomial, Q};

const FCN2: &str = r#"
[network]
kind = "fcn"
activation = "erf"
widths = ["N"]
parametrization = "PARAM"
[target]
hermite = M
[regime]
N = "NREG"
"#;

fn fcn2(m: usize, param: &str, n: &str) -> Prediction {
    let text = FCN2
        .replace("PARAM", param)
        .replace("M\n", &format!("{m}\n"))
        .replace("NREG", n);
    Architecture::from_toml(&text, "test", None)
        .unwrap()
        .predict(None)
        .unwrap()
}

fn fcn3(n1: &str, n2: &str) -> Prediction {
    Architecture::from_preset("fcn3-erf-he3")
        .unwrap()
        .predict(Some(&format!("N1={n1},N2={n2}")))
        .unwrap()
}

fn exp(p: &Prediction, name: &str) -> Q {
    p.pattern(name)
        .unwrap_or_else(|| panic!("no pattern {name}"))
        .minimum
        .as_ref()
        .unwrap()
        .exponent
}

fn optimum(p: &Prediction, name: &str) -> String {
    p.pattern(name)
        .unwrap()
        .minimum
        .as_ref()
        .unwrap()
        .energy_symbolic
        .to_string()
}

fn argmin(p: &Prediction, name: &str, param: &str) -> String {
    p.pattern(name)
        .unwrap()
        .minimum
        .as_ref()
        .unwrap()
        .argmin_symbolic[param]
        .to_string()
}

fn term(p: &Prediction, name: &str, label: &str) -> String {
    p.pattern(name)
        .unwrap()
        .terms
        .iter()
        .find(|t| t.0 == label)
        .unwrap()
        .1
        .to_string()
}

fn q(n: i64, d: i64) -> Q {
    Q::new(n, d)
}

#[test]
fn two_layer_standard_general_m() {
    // App. E.1.1: GP = d^m; GFL = (N d)^(m/(m+1)) with D = (d^m/N)^(1/(m+1)); Sp = sqrt(dN).
    // Regimes are chosen so that no constraint binds: N = d^(1/2) for GFL (D > 1), N = d^2
    // for Sp (M > 1).
    // erf is odd, so only odd targets have a finite norm (relu_cannot_build_he3_lazily covers
    // the converse).
    for m in [1i64, 3, 5] {
        let narrow = fcn2(m as usize, "standard", "d^(1/2)");
        assert_eq!(exp(&narrow, "GP"), q(m, 1), "m={m}");
        assert_eq!(
            optimum(&narrow, "GP"),
            Monomial::power("d", q(m, 1)).to_string()
        );
        assert_eq!(exp(&narrow, "GFL"), q(3 * m, 2 * (m + 1)), "m={m}");
        assert_eq!(
            optimum(&narrow, "GFL"),
            Monomial::power("N", q(m, m + 1))
                .mul(&Monomial::power("d", q(m, m + 1)))
                .to_string()
        );
        assert_eq!(
            argmin(&narrow, "GFL", "D"),
            Monomial::power("d", q(m, m + 1))
                .mul(&Monomial::power("N", q(-1, m + 1)))
                .to_string(),
            "D = (d^m/N)^(1/(m+1)), m={m}"
        );
        let p = fcn2(m as usize, "standard", "d^2");
        assert_eq!(optimum(&p, "Sp"), "sqrt(N*d)");
        assert_eq!(argmin(&p, "Sp", "M"), "sqrt(N/d)");
        assert_eq!(term(&p, "Sp", "Delta_1"), "M*d");
        assert_eq!(term(&p, "Sp", "a_y"), "N/M");
    }
    // The paper's own forms for m = 3.
    let p = fcn2(3, "standard", "d");
    assert_eq!(optimum(&p, "GFL"), "(N*d)^(3/4)");
    assert_eq!(term(&p, "GFL", "Delta_1"), "D*N");
    assert_eq!(term(&p, "GFL", "a_y"), "d^3/D^3");
}

#[test]
fn two_layer_he3_proportional_width_specialises_few_neurons() {
    // N ∝ d, m = 3: specialization wins, P* ∝ d, O(1) specializing neurons.
    let p = fcn2(3, "standard", "d");
    assert_eq!(p.p_star_exponent, Some(q(1, 1)));
    assert!(p.winners.contains(&"Sp".to_string()), "{:?}", p.winners);
    assert!(!p.winners.contains(&"GP".to_string()) && !p.winners.contains(&"GFL".to_string()));
    let m = &p.pattern("Sp").unwrap().minimum.as_ref().unwrap().argmin["M"];
    assert_eq!((m.lo, m.hi), (Some(q(0, 1)), Some(q(0, 1))), "M = O(1)");
    assert_eq!(exp(&p, "GFL"), q(3, 2)); // (N d)^(3/4) = d^(3/2)
}

#[test]
fn lazy_wins_only_for_very_wide_networks() {
    // m = 3: lazy learning wins for N ≫ d^(2m−1) = d^5; at N = d^5 it ties with Sp.
    let wide = fcn2(3, "standard", "d^6");
    assert_eq!(wide.winners, vec!["GP".to_string()]);
    assert_eq!(wide.p_star_exponent, Some(q(3, 1)));
    let edge = fcn2(3, "standard", "d^5");
    assert!(edge.winners.contains(&"GP".to_string()) && edge.winners.contains(&"Sp".to_string()));
    let narrow = fcn2(3, "standard", "d^4");
    assert!(!narrow.winners.contains(&"GP".to_string()));
    // General m: the boundary is N = d^(2m−1).
    for m in [1i64, 3, 5] {
        let above = fcn2(m as usize, "standard", &format!("d^{}", 2 * m));
        assert_eq!(above.winners, vec!["GP".to_string()], "m={m}");
        let below = fcn2(m as usize, "standard", &format!("d^{}", 2 * m - 2));
        assert!(!below.winners.contains(&"GP".to_string()), "m={m}");
    }
}

#[test]
fn linear_target_gfl_and_specialisation_on_par() {
    // m = 1: GFL and M-Sp are on par for N ∝ d.
    let p = fcn2(1, "standard", "d");
    assert_eq!(exp(&p, "GFL"), exp(&p, "Sp"));
    assert!(p.winners.contains(&"GFL".to_string()) && p.winners.contains(&"Sp".to_string()));
}

#[test]
fn mean_field_two_layer() {
    // App. E.1.1 (mean-field): GP = N d^m; GFL = N D + N (d/D)^m → N d^(m/(m+1)) with
    // D ∝ d^(m/(m+1)) (spec 01 §5: the paper's text says d^(1/(m+1)), a typo);
    // Sp = d M + N^2/M with M = N/sqrt(d) → sqrt(d) N.
    let p = fcn2(3, "mean-field", "d");
    assert_eq!(optimum(&p, "GP"), "N*d^3");
    assert_eq!(term(&p, "GFL", "a_y"), "N*d^3/D^3");
    assert_eq!(optimum(&p, "GFL"), "N*d^(3/4)");
    assert_eq!(argmin(&p, "GFL", "D"), "d^(3/4)");
    assert_ne!(
        argmin(&p, "GFL", "D"),
        "d^(1/4)",
        "typo of App. E.1.1 corrected"
    );
    assert_eq!(term(&p, "Sp", "a_y"), "N^2/M");
    assert_eq!(optimum(&p, "Sp"), "N*sqrt(d)");
    assert_eq!(argmin(&p, "Sp", "M"), "N/sqrt(d)");
    // N ∝ d, m > 1: specialization wins with O(sqrt(d)) neurons.
    assert!(p.winners.contains(&"Sp".to_string()));
    assert_eq!(
        p.pattern("Sp").unwrap().minimum.as_ref().unwrap().argmin["M"].lo,
        Some(q(1, 2))
    );
    // It stays rich as N → ∞: Sp beats GP at any width.
    for n in ["d^3", "d^6", "d^10"] {
        let wide = fcn2(3, "mean-field", n);
        assert!(!wide.winners.contains(&"GP".to_string()), "N = {n}");
    }
}

#[test]
fn three_layer_table_1() {
    // Sec. 6.1, Table 1, in a generic regime (N1 = d^2, N2 = d^2).
    let p = fcn3("d^2", "d^2");
    assert_eq!(term(&p, "GP-GP", "a_y"), "d^3");
    assert_eq!(optimum(&p, "GP-GP"), "d^3");
    assert_eq!(term(&p, "GP-Sp", "Delta_2"), "M2*d");
    assert_eq!(term(&p, "GP-Sp", "a_y"), "N2/M2");
    assert_eq!(argmin(&p, "GP-Sp", "M2"), "sqrt(N2/d)");
    assert_eq!(optimum(&p, "GP-Sp"), "sqrt(N2*d)");
    assert_eq!(term(&p, "Sp-Mag", "Delta_1"), "M1*d");
    assert_eq!(term(&p, "Sp-Mag", "Delta_2"), "N1*beta2/M1");
    assert_eq!(term(&p, "Sp-Mag", "a_y"), "N2/beta2");
    assert_eq!(argmin(&p, "Sp-Mag", "beta2"), "(N2^2/(N1*d))^(1/3)");
    assert_eq!(argmin(&p, "Sp-Mag", "M1"), "(N1*N2/d^2)^(1/3)");
    assert_eq!(optimum(&p, "Sp-Mag"), "(N1*N2*d)^(1/3)");
}

#[test]
fn three_layer_proportional_limit_and_width_trend() {
    // N1 ∝ N2 ∝ d: every non-GP pattern of Table 1 gives P*/κ ∝ d.
    let p = fcn3("d", "d");
    assert_eq!(exp(&p, "GP-GP"), q(3, 1));
    assert_eq!(exp(&p, "GP-Sp"), q(1, 1));
    assert_eq!(exp(&p, "Sp-Mag"), q(1, 1));
    assert_eq!(p.p_star_exponent, Some(q(1, 1)));
    // Increasing N1 raises Sp-Mag ∝ N1^(1/3) and leaves GP-Sp alone: the winner moves to GP-Sp.
    let wide = fcn3("d^2", "d");
    assert_eq!(exp(&wide, "GP-Sp"), q(1, 1));
    assert_eq!(exp(&wide, "Sp-Mag"), q(4, 3));
    assert!(wide.winners.contains(&"GP-Sp".to_string()));
    assert!(!wide.winners.contains(&"Sp-Mag".to_string()));
}

#[test]
fn table_1_caption_typo_gp_gp_needs_n2_above_d5() {
    // Spec 01 §5: the caption says "GP-GP is favourable only for d > N2^5"; from GP-GP = d^3
    // and GP-Sp = sqrt(N2 d), GP-GP beats GP-Sp only when N2 > d^5.
    let above = fcn3("d", "d^6");
    assert!(exp(&above, "GP-GP") < exp(&above, "GP-Sp"));
    let at = fcn3("d", "d^5");
    assert_eq!(exp(&at, "GP-GP"), exp(&at, "GP-Sp"));
    let below = fcn3("d", "d^4");
    assert!(exp(&below, "GP-GP") > exp(&below, "GP-Sp"));
    // The caption's reading (GP-GP wins for small N2) is false:
    let small = fcn3("d", "d^(1/10)");
    assert!(!small.winners.contains(&"GP-GP".to_string()));
    // Overall, lazy learning wins only when both layers are wider than d^5 (the first layer's
    // specialization, Sp-GP = sqrt(N1 d), competes too — a pattern the paper did not list).
    let both = fcn3("d^6", "d^6");
    assert_eq!(both.winners, vec!["GP-GP".to_string()]);
    assert_eq!(both.p_star_exponent, Some(q(3, 1)));
}

#[test]
fn patterns_the_paper_did_not_list() {
    let p = fcn3("d", "d");
    for name in ["Sp-GP", "GFL-GP", "GP-GFL", "Sp-Sp", "GFL-Mag", "muSp-GP"] {
        assert!(
            p.pattern(name).is_some_and(|x| x.minimum.is_some()),
            "{name}"
        );
    }
    // Sp-GP: the first layer's spike on erf(Φ) carries He3 through a lazy second layer:
    // Ẽ = M1 d + N1/M1 → sqrt(N1 d).
    assert_eq!(optimum(&p, "Sp-GP"), "sqrt(N1*d)");
    // Four layers enumerate too.
    let four = Architecture::from_toml(
        "[network]\nkind=\"fcn\"\nactivation=\"erf\"\nwidths=[\"N1\",\"N2\",\"N3\"]\n[target]\nhermite=3\n[regime]\nN1=\"d\"\nN2=\"d\"\nN3=\"d\"\n",
        "four",
        None,
    )
    .unwrap()
    .predict(None)
    .unwrap();
    assert_eq!(four.patterns.len(), 5 * 9 * 9);
    assert_eq!(four.p_star_exponent, Some(q(1, 1)));
    assert_eq!(exp(&four, "GP-GP-GP"), q(3, 1));
}

#[test]
fn narrow_network_binds_the_lower_neuron_count() {
    // Two-layer erf He3 with N = d^(1/2): O(1) specializing neurons, and 1 <= M binds.
    let p = fcn2(3, "standard", "d^(1/2)");
    let sp = p.pattern("Sp").unwrap().minimum.as_ref().unwrap();
    assert_eq!(sp.binding, vec!["1 <= M".to_string()]);
    assert_eq!(sp.argmin["M"].lo, Some(q(0, 1)));
    assert_eq!(sp.exponent, q(1, 1)); // max(d·1, N/1) = d
    assert!(
        p.reading()
            .contains("M ∝ 1 neurons of layer 1 specialise on Phi"),
        "{}",
        p.reading()
    );
}

#[test]
fn cnn_patches() {
    // App. E.1.2: both GFL and M-Sp give P* ∝ S^(3/2) = d^(3/4); lazy costs Nw·S = d.
    let p = Architecture::from_preset("cnn-patches")
        .unwrap()
        .predict(None)
        .unwrap();
    assert_eq!(exp(&p, "GFL"), q(3, 4));
    assert_eq!(exp(&p, "Sp"), q(3, 4));
    assert_eq!(exp(&p, "GP"), q(1, 1));
    assert_eq!(optimum(&p, "Sp"), "sqrt(N*Nw*S)");
    assert_eq!(p.p_star_exponent, Some(q(3, 4)));
    assert!(p.winners.contains(&"GFL".to_string()) && p.winners.contains(&"Sp".to_string()));
}

#[test]
fn softmax_attention() {
    // App. E.3: Ẽ_sp = M^2 + H L d^3/M^2 → sqrt(L H) d^1.5, so P* ∝ sqrt(L) at fixed d, H.
    let arch = Architecture::from_preset("attention-softmax").unwrap();
    let p = arch.predict(None).unwrap();
    assert_eq!(optimum(&p, "Sp"), "sqrt(H*L*d^3)");
    let base = arch
        .predict(Some("L=d,H=1"))
        .unwrap()
        .p_star_exponent
        .unwrap();
    let longer = arch
        .predict(Some("L=d^3,H=1"))
        .unwrap()
        .p_star_exponent
        .unwrap();
    assert_eq!(longer - base, q(1, 1), "L grows by d^2 → P* by d");
    let heads = arch
        .predict(Some("L=d,H=d^2"))
        .unwrap()
        .p_star_exponent
        .unwrap();
    assert_eq!(heads - base, q(1, 1));
}

#[test]
fn relu_parity() {
    // App. E.2: GP ∝ d^2, GFL ∝ (N d)^(2/3) with D = d^(2/3)/N^(1/3), M-Sp ∝ sqrt(d N) with
    // M = sqrt(N/d), mu-Sp ∝ sqrt(d N) with mu = (N/d)^(1/4).
    let p = Architecture::from_preset("fcn2-relu-parity")
        .unwrap()
        .predict(Some("N=d^(3/2)"))
        .unwrap();
    assert_eq!(optimum(&p, "GP"), "d^2");
    assert_eq!(optimum(&p, "GFL"), "(N*d)^(2/3)");
    assert_eq!(argmin(&p, "GFL", "D"), "(d^2/N)^(1/3)");
    assert_eq!(optimum(&p, "Sp"), "sqrt(N*d)");
    assert_eq!(argmin(&p, "Sp", "M"), "sqrt(N/d)");
    assert_eq!(optimum(&p, "muSp"), "sqrt(N*d)");
    assert_eq!(argmin(&p, "muSp", "mu"), "(N/d)^(1/4)");
    // The FCN rule engine with a ReLU network and a degree-2 target derives the same energies.
    let rules = Architecture::from_toml(
        "[network]\nkind=\"fcn\"\nactivation=\"relu\"\nwidths=[\"N\"]\n[target]\nhermite=2\n[regime]\nN=\"d^(3/2)\"\n",
        "relu",
        None,
    )
    .unwrap()
    .predict(None)
    .unwrap();
    for name in ["GP", "GFL", "Sp", "muSp"] {
        assert_eq!(exp(&rules, name), exp(&p, name), "{name}");
        assert_eq!(optimum(&rules, name), optimum(&p, name), "{name}");
    }
}

#[test]
fn relu_cannot_build_he3_lazily() {
    // ReLU has no odd Hermite coefficient beyond the first, so He3 has no finite norm in a
    // two-layer ReLU network: every pattern is infinite (the engine says so, no number).
    let p = Architecture::from_toml(
        "[network]\nkind=\"fcn\"\nactivation=\"relu\"\nwidths=[\"N\"]\n[target]\nhermite=3\n[regime]\nN=\"d\"\n",
        "relu3",
        None,
    )
    .unwrap()
    .predict(None)
    .unwrap();
    assert!(p.patterns.iter().all(|x| x.minimum.is_none()));
    assert!(p.winners.is_empty() && p.p_star_exponent.is_none());
}
