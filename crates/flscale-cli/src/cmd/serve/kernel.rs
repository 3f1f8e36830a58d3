//! `GET /api/kernel/view`: the kernel-propagation page (paper Sec. 5.2, App. C.5, Figs. 5–6;
//! docs/ldt-kernels.md) — the RKHS norm and the inverse expectation of Φ\*² in the next layer's
//! kernel against the amplification D, with their fitted slopes, as `flscale kernel propagate
//! --quick … --json`, from the same library call (`flscale::kernels::propagate_with`). The
//! sizes are bounded so that one request takes a few seconds at most; the figures' sizes
//! (d = 120, P = 6000) are for the CLI.

use flscale::activation::NngpActivation;
use flscale::kernels::{self, DataKind, PropagateConfig};
use serde_json::Value;

use super::api::Params;
use super::error::{ApiError, ApiResult};

/// Largest input dimension d.
pub const MAX_D: usize = 80;
/// Largest first hidden width N1.
pub const MAX_N1: usize = 1000;
/// Largest second hidden width N2 (and it must stay below P: the Gram route; the dense one
/// at N2 ≥ P is several times slower).
pub const MAX_N2: usize = 500;
/// Largest number of sample points P.
pub const MAX_P: usize = 1500;

fn word<'a>(q: &'a Params, name: &str, default: &'a str) -> &'a str {
    q.0.get(name)
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .unwrap_or(default)
}

/// The page's object: the object of `flscale kernel propagate --quick --data DATA --activation
/// ACT [--layernorm] --d D --n1 N1 --n2 N2 --p P --seed SEED --json` (`figure` null).
pub fn kernel_view(q: &Params) -> ApiResult<Value> {
    let mut cfg = PropagateConfig::quick();
    cfg.data = word(q, "data", "gaussian").parse::<DataKind>()?;
    cfg.activation = word(q, "activation", "relu").parse::<NngpActivation>()?;
    if cfg.activation == NngpActivation::Erf {
        return Err(ApiError::bad(
            "activation = erf is not offered here; the paper's propagation figures use relu or poly",
        ));
    }
    cfg.layernorm = match word(q, "layernorm", "0") {
        "0" | "false" => false,
        "1" | "true" => true,
        other => {
            return Err(ApiError::bad(format!(
                "parameter layernorm = \"{}\" is not allowed; use 0 or 1",
                other.chars().take(20).collect::<String>()
            )))
        }
    };
    cfg.d = q.count_or("d", cfg.d, 2, MAX_D)?;
    cfg.n1 = q.count_or("n1", cfg.n1, 2, MAX_N1)?;
    cfg.p = q.count_or("p", cfg.p, 10, MAX_P)?;
    cfg.n2 = q.count_or("n2", cfg.n2.min(cfg.p - 1), 2, MAX_N2.min(cfg.p - 1))?;
    cfg.seed = q.count_or("seed", 5, 0, u32::MAX as usize)? as u64;
    cfg.feature_rank = (cfg.d / 2).max(1);
    cfg.validate()?;
    let res = kernels::propagate_with(&cfg, kernels::default_par(), |_, _| {})?;
    let mut v = serde_json::to_value(&res).map_err(|e| ApiError {
        status: 500,
        message: format!("cannot encode JSON: {e}"),
    })?;
    v["figure"] = Value::Null;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params::from_pairs(pairs)
    }

    /// The view is the library's result for the same configuration, and sizes beyond the
    /// bounds are refused with the parameter named.
    #[test]
    fn the_view_is_the_library_result_within_bounds() {
        let v = kernel_view(&params(&[
            ("d", "20"),
            ("n1", "120"),
            ("n2", "60"),
            ("p", "200"),
        ]))
        .unwrap();
        let mut cfg = PropagateConfig::quick();
        (cfg.d, cfg.n1, cfg.n2, cfg.p, cfg.feature_rank) = (20, 120, 60, 200, 10);
        let lib = kernels::propagate_with(&cfg, kernels::default_par(), |_, _| {}).unwrap();
        assert_eq!(v["points"], serde_json::to_value(&lib.points).unwrap());
        assert_eq!(v["slope_rkhs"].as_f64().unwrap(), lib.slope_rkhs);
        for (k, val) in [
            ("d", "500"),
            ("n2", "1000"),
            ("p", "100000"),
            ("activation", "erf"),
        ] {
            let e = kernel_view(&params(&[(k, val)])).unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.message.contains(k), "{k}: {}", e.message);
        }
    }
}
