//! One grid point, ready to run: its id, its point, its experiment file and configuration,
//! and the coordinates the analysis reads from it.

use std::collections::BTreeMap;

use toml::Value;

use super::value::{as_f64, show_value};
use crate::sim::ExperimentConfig;

/// One grid point, ready to run.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// Position in the full grid (0-based, the product order: the last field varies fastest).
    pub index: usize,
    /// Directory name, `run-00012`.
    pub id: String,
    /// The swept fields' values at this point, in axis order.
    pub point: Vec<(String, Value)>,
    /// The experiment file of this run (what the engine's loader accepted).
    pub toml: String,
    /// The validated configuration.
    pub config: ExperimentConfig,
}

impl RunPlan {
    /// The point as the sweep runner shows it: `field=value` pairs in axis order, separated by
    /// spaces (`data.d=8 data.p_over_d=4`); empty without a grid.
    pub fn label(&self) -> String {
        self.point
            .iter()
            .map(|(f, v)| format!("{f}={}", show_value(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The resolved coordinates the analysis uses: d, p, p_over_d, n1 … (hidden widths),
    /// kappa, seed, and every numeric swept field under its own path.
    pub fn coordinates(&self) -> BTreeMap<String, f64> {
        let c = &self.config;
        let mut m = BTreeMap::new();
        m.insert("d".to_string(), c.data.d as f64);
        m.insert("p".to_string(), c.data.p as f64);
        m.insert("p_over_d".to_string(), c.data.p as f64 / c.data.d as f64);
        for (i, &w) in c.model.widths.iter().enumerate() {
            m.insert(format!("n{}", i + 1), w as f64);
        }
        m.insert("kappa".to_string(), c.sampler.kappa);
        m.insert("seed".to_string(), c.sampler.seed as f64);
        m.insert("temperature".to_string(), c.sampler.temperature);
        if let (Some(l), Some(h)) = (c.data.tokens, c.model.heads()) {
            // Attention (paper App. E.3, Fig. 3b): context length L, heads H and the scale
            // √(L·d³)/P at which O(1) alignment appears (P* ∝ √(L·H)·d^{3/2}).
            let (l, d) = (l as f64, c.data.d as f64);
            m.insert("tokens".to_string(), l);
            m.insert("heads".to_string(), h as f64);
            if c.data.p > 0 {
                m.insert(
                    "sqrt_ld3_over_p".to_string(),
                    (l * d * d * d).sqrt() / c.data.p as f64,
                );
            }
        }
        for (k, v) in &self.point {
            if let Some(x) = as_f64(v) {
                m.insert(k.clone(), x);
            }
        }
        m
    }
}
