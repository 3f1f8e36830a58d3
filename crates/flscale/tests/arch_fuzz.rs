//! The architecture/catalog loader and the expression language never panic on malformed input;
//! their errors locate the problem.

use flscale::patterns::Architecture;
use proptest::prelude::*;

const VALID: &str = "[network]\nkind = \"fcn\"\nactivation = \"erf\"\nwidths = [\"N1\", \"N2\"]\nparametrization = \"standard\"\n[target]\nhermite = 3\n[regime]\nN1 = \"d\"\nN2 = \"d^2\"\n";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_text_never_panics(s in "\\PC{0,200}") {
        let _ = Architecture::from_toml(&s, "fuzz", None);
        let _ = Architecture::from_catalog_toml(&s, "fuzz");
    }

    #[test]
    fn mutations_of_a_valid_file_fail_cleanly(pos in 0usize..VALID.len(), insert in "[a-z0-9\"=\\[\\]^/(). ,-]{1,6}") {
        let mut text = VALID.to_string();
        let p = (0..=pos).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        text.insert_str(p, &insert);
        match Architecture::from_toml(&text, "arch.toml", None) {
            Ok(arch) => { let _ = arch.predict(None); }
            Err(e) => {
                let m = e.to_string();
                prop_assert!(m.starts_with("arch.toml"), "{}", m);
                prop_assert!(!m.contains('\n'), "{}", m);
            }
        }
    }

    #[test]
    fn random_regimes_never_panic(n1 in "[-0-9d^()/.a-z]{0,10}", n2 in -30i64..30, q in 1i64..9) {
        let arch = Architecture::from_preset("fcn3-erf-he3").unwrap();
        let _ = arch.predict(Some(&format!("N1={n1},N2=d^({n2}/{q})")));
    }
}

#[test]
fn errors_name_the_field() {
    let e = Architecture::from_toml(&VALID.replace("hermite = 3", "hermite = 0"), "a.toml", None)
        .unwrap_err();
    assert!(e.to_string().contains("target.hermite = 0"), "{e}");
    let e = Architecture::from_toml(&VALID.replace("standard", "ntk"), "a.toml", None).unwrap_err();
    assert!(e.to_string().contains("network.parametrization"), "{e}");
    let e = Architecture::from_toml(
        &VALID.replace("N2 = \"d^2\"", "N2 = \"d^\""),
        "a.toml",
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("regime.N2") && e.to_string().contains("column"),
        "{e}"
    );
    let e = Architecture::from_toml(
        &VALID.replace("kind = \"fcn\"", "kind = \"rnn\""),
        "a.toml",
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("network.kind"), "{e}");
    let e = Architecture::from_toml(
        &VALID.replace("[target]", "[target]\nextra = 1"),
        "a.toml",
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("extra") && e.to_string().contains("line"),
        "{e}"
    );
}
