//! One swept field and its values: which fields a sweep may list (the engine's fields plus
//! the derived ones) and which values a size takes, checked before anything runs.

use serde::Serialize;
use toml::Value;

use super::value::{as_f64, show_value};
use crate::error::{Error, Result};
use crate::sim::ExperimentConfig;

/// Fields that are not in the engine's file but are computed at each grid point.
pub(super) const DERIVED: [&str; 2] = ["data.p_over_d", "model.width"];

/// Fields that hold a size (a whole number ≥ 1; `data.p` may be 0, which samples the prior).
const SIZES: [&str; 12] = [
    "data.d",
    "data.p",
    "data.n_test",
    "data.tokens",
    "model.patch",
    "model.heads",
    "model.widths",
    "model.width",
    "sampler.steps",
    "sampler.thin",
    "sampler.chains",
    "sampler.burn_in",
];

/// Every field of the engine's experiment file (spec 02) as a dotted path, read from the
/// config types' `Deserialize` implementations ([`crate::experiment::fields`]), so a field added to
/// [`ExperimentConfig`] is sweepable at once. A sweep over a field that is not among them is
/// rejected before anything runs; the engine's loader still validates every grid point.
fn engine_fields() -> &'static [String] {
    static FIELDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    FIELDS.get_or_init(crate::experiment::fields::field_paths::<ExperimentConfig>)
}

/// One swept field and its values, in the file's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    /// Dotted path, e.g. `data.d`.
    pub field: String,
    /// The values (TOML values, so that lists such as `model.widths` can be swept too).
    pub values: Vec<Value>,
}

fn known_field(path: &str) -> bool {
    DERIVED.contains(&path) || engine_fields().iter().any(|f| f == path)
}

fn known_list() -> String {
    let mut v: Vec<&str> = engine_fields().iter().map(String::as_str).collect();
    v.extend(DERIVED);
    v.join(", ")
}

pub(super) fn check_field(path: &str, place: &str) -> Result<()> {
    if known_field(path) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{place} names the field `{path}`, which is not an experiment field; allowed: {}",
            known_list()
        )))
    }
}

/// Checks that a swept size is a whole number (≥ 1, or ≥ 0 for `data.p`/`burn_in`).
fn check_size(path: &str, i: usize, v: &Value) -> Result<()> {
    if !SIZES.contains(&path) {
        if path == "data.p_over_d" {
            return match as_f64(v) {
                Some(x) if x.is_finite() && x >= 0.0 => Ok(()),
                _ => Err(Error::invalid(format!(
                    "sweep.{path}[{i}] = {} is not allowed; it must be a finite number >= 0",
                    show_value(v)
                ))),
            };
        }
        return Ok(());
    }
    let min = if path == "data.p" || path == "sampler.burn_in" {
        0
    } else {
        1
    };
    let ok = |x: &Value| matches!(x, Value::Integer(n) if *n >= min);
    let good = match v {
        Value::Array(a) if path == "model.widths" => !a.is_empty() && a.iter().all(ok),
        other => ok(other),
    };
    if good {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "sweep.{path}[{i}] = {} is not allowed; {path} {} whole number(s) >= {min}",
            show_value(v),
            if path == "model.widths" {
                "takes lists of"
            } else {
                "is a"
            }
        )))
    }
}

pub(super) fn make_axis(path: &str, v: Value) -> Result<Axis> {
    check_field(path, &format!("sweep.{path}"))?;
    let Value::Array(values) = v else {
        return Err(Error::invalid(format!(
            "sweep.{path} = {} is not a list; write sweep.{path} = [{}]",
            show_value(&v),
            show_value(&v)
        )));
    };
    if values.is_empty() {
        return Err(Error::invalid(format!(
            "sweep.{path} = [] is an empty grid, which is not allowed; give at least one value"
        )));
    }
    for (i, x) in values.iter().enumerate() {
        check_size(path, i, x)?;
    }
    Ok(Axis {
        field: path.to_string(),
        values,
    })
}
