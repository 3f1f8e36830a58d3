//! The grid of a sweep: the product of its axes (the last axis varies fastest), each point
//! resolved (`model.width`, `follow` links, `data.p_over_d`) and validated by the engine's
//! loader; shards of it; its JSON description for the manifest.

use toml::{Table, Value};

use super::plan::RunPlan;
use super::value::{as_f64, get_field, set_field, show_value, toml_to_json};
use super::Sweep;
use crate::error::{Error, Result};
use crate::sim::ExperimentConfig;

impl Sweep {
    /// Number of grid points.
    pub fn len(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// True if the grid is empty (never, after a successful parse).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn expand(&self) -> Result<Vec<RunPlan>> {
        let n = self.len();
        let mut runs = Vec::with_capacity(n);
        for index in 0..n {
            // Mixed-radix digits: the last axis varies fastest.
            let mut rest = index;
            let mut point = vec![(String::new(), Value::Boolean(false)); self.axes.len()];
            for (k, axis) in self.axes.iter().enumerate().rev() {
                let m = axis.values.len();
                point[k] = (axis.field.clone(), axis.values[rest % m].clone());
                rest /= m;
            }
            let mut table = self.base.clone();
            let mut p_over_d = None;
            let mut width = None;
            for (field, v) in &point {
                match field.as_str() {
                    "data.p_over_d" => p_over_d = as_f64(v),
                    "model.width" => width = Some(v.clone()),
                    _ => set_field(&mut table, field, v.clone())?,
                }
            }
            let label = point
                .iter()
                .map(|(k, v)| format!("{k} = {}", show_value(v)))
                .collect::<Vec<_>>()
                .join(", ");
            let where_ = if label.is_empty() {
                self.source.clone()
            } else {
                format!("{} at the grid point {label}", self.source)
            };
            let resolve = |table: &mut Table, field: &str, v: Value| -> Result<()> {
                if field == "model.widths" || field == "model.width" {
                    let layers = get_field(table, "model.widths")
                        .and_then(|w| w.as_array())
                        .map(|a| a.len())
                        .unwrap_or(1)
                        .max(1);
                    let v = match v {
                        Value::Array(a) => Value::Array(a),
                        scalar => Value::Array(vec![scalar; layers]),
                    };
                    set_field(table, "model.widths", v)
                } else {
                    set_field(table, field, v)
                }
            };
            if let Some(w) = width {
                resolve(&mut table, "model.width", w)?;
            }
            for (target, src) in &self.follow {
                let v = if src == "data.p_over_d" {
                    p_over_d.map(Value::Float)
                } else {
                    get_field(&table, src).cloned()
                };
                let v = v.ok_or_else(|| {
                    Error::invalid(format!(
                        "{where_}: sweep.follow.\"{target}\" = \"{src}\" names a field that has no value"
                    ))
                })?;
                resolve(&mut table, target, v)?;
            }
            if let Some(r) = p_over_d {
                let d = get_field(&table, "data.d")
                    .and_then(as_f64)
                    .ok_or_else(|| {
                        Error::invalid(format!("{where_}: data.p_over_d needs data.d to be set"))
                    })?;
                let p = (r * d).round();
                table
                    .entry("data".to_string())
                    .or_insert_with(|| Value::Table(Table::new()));
                set_field(&mut table, "data.p", Value::Integer(p as i64))?;
            }
            let text = toml::to_string(&table)
                .map_err(|e| Error::runtime(format!("cannot encode the grid point: {e}")))?;
            let config = ExperimentConfig::from_generated_toml(&text, &where_)?;
            runs.push(RunPlan {
                index,
                id: crate::experiment::layout::run_id(index),
                point,
                toml: text,
                config,
            });
        }
        Ok(runs)
    }

    /// The runs of shard `i` of `n` (0-based): every n-th run starting at i, so that shards
    /// are disjoint, cover the grid and are balanced across the grid's fast axes.
    pub fn shard(&self, i: usize, n: usize) -> Vec<&RunPlan> {
        self.runs.iter().filter(|r| r.index % n == i).collect()
    }

    /// A deterministic JSON description of the grid (for the manifest).
    pub fn grid_json(&self) -> serde_json::Value {
        let axes: Vec<serde_json::Value> = self
            .axes
            .iter()
            .map(|a| {
                serde_json::json!({
                    "field": a.field,
                    "values": a.values.iter().map(toml_to_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        let follow: Vec<serde_json::Value> = self
            .follow
            .iter()
            .map(|(t, s)| serde_json::json!({"field": t, "follows": s}))
            .collect();
        serde_json::json!({"axes": axes, "follow": follow, "quick": self.quick})
    }
}
