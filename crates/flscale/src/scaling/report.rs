//! The result of `flscale energy` as one JSON object, shared by the CLI and the Python
//! bindings so that both print the same numbers.

use serde_json::{json, Map, Value};

use super::energy::{exponent_strings, Minimum, Regime};
use super::monomial::fmt_q;
use super::{minimise, parse_constraints, parse_posynomial, Term};
use crate::error::{Error, Result};

/// A calculator request: minimise `expr` over `free` subject to `constraints` in `regime`.
#[derive(Debug, Clone)]
pub struct EnergyProblem {
    /// The energy, e.g. `M*d + N/M`.
    pub expr: String,
    /// Free parameters.
    pub free: Vec<String>,
    /// Constraint strings such as `1<=M<=N`.
    pub constraints: Vec<String>,
    /// Regime assignments in the `--at` syntax, e.g. `N=d^3,L=sqrt(d)`.
    pub at: String,
}

impl EnergyProblem {
    /// Parses and minimises; returns the regime and the minimum.
    pub fn solve(&self) -> Result<(Regime, Minimum)> {
        let terms: Vec<Term> = parse_posynomial(&self.expr)?
            .into_iter()
            .map(|m| Term {
                label: m.to_string(),
                monomial: m,
            })
            .collect();
        let mut constraints = Vec::new();
        for c in &self.constraints {
            constraints.extend(parse_constraints(c)?);
        }
        let mut regime = Regime::new();
        regime.apply_assignments(&self.at, "--at")?;
        for f in &self.free {
            if f == "d" || regime.get(f).is_some() {
                return Err(Error::invalid(format!(
                    "free parameter '{f}' is a scale with a value in --at; a free parameter must not have one"
                )));
            }
        }
        let min = minimise(&terms, &self.free, &constraints, &regime)?;
        Ok((regime, min))
    }

    /// The JSON object `flscale energy --json` prints: `exponent`, `exponent_float`,
    /// `optimum`, `argmin`, `active`, `binding`, `tight`, `valid_when`.
    pub fn to_json(&self, regime: &Regime, min: &Minimum) -> Value {
        let (e, ef) = exponent_strings(&min.exponent);
        let argmin: Map<String, Value> = self
            .free
            .iter()
            .filter_map(|n| min.argmin.get(n).map(|r| (n, r)))
            .map(|(n, r)| {
                (
                    n.clone(),
                    json!({
                        "symbolic": min.argmin_symbolic.get(n).map(|m| m.to_string()),
                        "exponent_lo": r.lo.map(|q| fmt_q(&q)),
                        "exponent_hi": r.hi.map(|q| fmt_q(&q)),
                        "value": r.describe(),
                    }),
                )
            })
            .collect();
        let regime_obj: Map<String, Value> = regime
            .iter()
            .map(|(k, v)| (k.to_string(), json!(fmt_q(&v))))
            .collect();
        json!({
            "expression": self.expr,
            "regime": regime_obj,
            "exponent": e,
            "exponent_float": ef,
            "optimum": min.energy_symbolic.to_string(),
            "argmin": argmin,
            "active": min.active,
            "binding": min.binding,
            "tight": min.tight,
            "valid_when": min.valid_when,
        })
    }
}
