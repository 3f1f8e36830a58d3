//! `GET /api/ldt/view`: the large-deviation page (paper App. A.3, B.2, B.3; docs/ldt.md) — the
//! Chernoff rate E(α) on a grid of α with P\* ∝ 2κE(α), as `flscale ldt rate --json`, and the
//! tilted overlap law at t\*(α) for the chosen α, as `flscale ldt tilted --json`, from the same
//! library calls (`flscale::ldt`). Only the `prior` treatment of |w_⊥|² is offered: `exact`
//! integrates |w_⊥|² and takes seconds per α, more than a page should wait.

use flscale::ldt::{self, LdtModel, Perp};
use serde_json::{json, Value};

use super::api::Params;
use super::error::{ApiError, ApiResult};

/// Most α values of one rate curve.
pub const MAX_ALPHAS: usize = 60;
/// Most points of the tabulated tilted law.
pub const MAX_GRID: usize = 2001;

/// The quadrature `flscale ldt rate --json` names (its `quadrature` field, word for word).
const QUADRATURE: &str = "adaptive Gauss–Kronrod (7,15), relative tolerance max(1e-12, 32·ε·L) ≤ 1e-10 (L: the log-integrand scale)";

/// `count` values of α spaced evenly in log between `lo` and `hi`, each rounded to four
/// significant digits (so that the page's command line lists them exactly).
fn alpha_grid(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let round = |x: f64| format!("{x:.3e}").parse::<f64>().unwrap_or(x);
    let mut v: Vec<f64> = (0..count)
        .map(|i| round(lo * (hi / lo).powf(i as f64 / (count - 1) as f64)))
        .filter(|&a| a <= hi)
        .collect();
    v.dedup();
    v
}

fn to_value<T: serde::Serialize>(v: &T) -> ApiResult<Value> {
    serde_json::to_value(v).map_err(|e| ApiError {
        status: 500,
        message: format!("cannot encode JSON: {e}"),
    })
}

/// The page's object: `rate` (the object of `flscale ldt rate --json` for `alphas`), `tilted`
/// (that of `flscale ldt tilted --alpha ALPHA --json`) and `alphas`, the α grid: `points`
/// values from min(0.05, α/2) to the largest α the quadrature reaches at this d and N (at most
/// 4 or 2α), with α itself among them.
pub fn ldt_view(q: &Params) -> ApiResult<Value> {
    let model = LdtModel {
        d: q.f64_or("d", 40.0)?,
        n: q.f64_or("n", 40.0)?,
        sigma1_sq: q.f64_or("sigma1_sq", 1.0)?,
        sigma2_sq: q.f64_or("sigma2_sq", 1.0)?,
        perp: Perp::Prior,
    };
    model.validate()?;
    let kappa = q.f64_or("kappa", 1.0)?;
    let alpha = q.f64_or("alpha", 1.0)?;
    let count = q.count_or("points", 24, 2, MAX_ALPHAS)?;
    let grid = q.count_or("grid", 241, 3, MAX_GRID)?;
    let beta_max = q.f64_or("beta_max", 3.0)?;
    if !(beta_max > 0.0 && beta_max <= 100.0) {
        return Err(ApiError::bad(format!(
            "parameter beta_max = {beta_max} is not allowed; it must be in (0, 100]"
        )));
    }
    // t*(α) as `ldt tilted` takes it (κ = 1: the tilt does not depend on κ); an α out of
    // reach is refused here with the library's sentence.
    let at = model.rate(alpha, 1.0)?;
    let reach = model.max_alpha()?;
    let hi = reach.min(4.0f64.max(2.0 * alpha));
    let lo = 0.05f64.min(alpha / 2.0);
    let mut alphas = alpha_grid(lo, hi, count);
    if !alphas.contains(&alpha) {
        alphas.push(alpha);
        alphas.sort_by(f64::total_cmp);
    }
    let points = ldt::rate_curve(&model, &alphas, kappa)?;
    let dist = model.tilted(at.t_star, beta_max, grid)?;
    Ok(json!({
        "alphas": alphas,
        "rate": {
            "model": to_value(&model)?,
            "kappa": kappa,
            "quadrature": QUADRATURE,
            "points": to_value(&points)?,
            "figure": null,
        },
        "tilted": {
            "histogram": null,
            "model": to_value(&model)?,
            "alpha": alpha,
            "t": at.t_star,
            "log_z": dist.log_z,
            "bimodal": dist.bimodal,
            "beta_star": dist.beta_star,
            "side_mass": dist.side_mass,
            "specialised_neurons": dist.specialised_neurons,
            "peaks": to_value(&dist.peaks)?,
            "density": dist.density.iter().map(|(b, p)| json!([b, p])).collect::<Vec<_>>(),
            "figure": null,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params::from_pairs(pairs)
    }

    /// The rate points are the library's at the listed α, α itself is among them, and the
    /// tilted law is taken at its t*.
    #[test]
    fn the_view_is_the_library_rate_and_tilted_law() {
        let v = ldt_view(&params(&[("d", "60"), ("n", "30"), ("alpha", "0.7")])).unwrap();
        let model = LdtModel {
            d: 60.0,
            n: 30.0,
            sigma1_sq: 1.0,
            sigma2_sq: 1.0,
            perp: Perp::Prior,
        };
        let alphas: Vec<f64> = v["alphas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_f64().unwrap())
            .collect();
        assert!(alphas.contains(&0.7) && alphas.windows(2).all(|w| w[0] < w[1]));
        let lib = ldt::rate_curve(&model, &alphas, 1.0).unwrap();
        assert_eq!(v["rate"]["points"], serde_json::to_value(&lib).unwrap());
        let t = model.rate(0.7, 1.0).unwrap().t_star;
        assert_eq!(v["tilted"]["t"].as_f64().unwrap(), t);
        let e = ldt_view(&params(&[("alpha", "1e6")])).unwrap_err();
        assert_eq!(e.status, 400, "{}", e.message);
        let e = ldt_view(&params(&[("points", "1000")])).unwrap_err();
        assert!(e.message.contains("points"), "{}", e.message);
    }

    const KEYS: [&str; 9] = [
        "d",
        "n",
        "alpha",
        "sigma1_sq",
        "sigma2_sq",
        "kappa",
        "points",
        "grid",
        "beta_max",
    ];

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Random parameters never panic: an answer, or a 4xx with a sentence.
        #[test]
        fn fuzzed_ldt_parameters_never_panic(
            pairs in proptest::collection::vec(
                (0usize..KEYS.len(), prop_oneof![
                    (-1e3f64..1e3).prop_map(|x| x.to_string()),
                    (0u32..5000).prop_map(|x| x.to_string()),
                    any::<f64>().prop_map(|x| x.to_string()),
                    ".{0,8}",
                ]),
                0..5,
            )
        ) {
            let q = Params(pairs.into_iter().map(|(k, v)| (KEYS[k].to_string(), v)).collect());
            if let Err(e) = ldt_view(&q) {
                prop_assert!((400..500).contains(&e.status) && !e.message.is_empty(), "{}", e.message);
            }
        }
    }
}
