//! The diagonal metric of `sampler.metric = "diag"` on the cached-gradient kernel: gathering
//! every step's draw during a window of the burn-in, setting M = diag(m) from the window at
//! its end ([`crate::sim::kernel::metric::VarianceWindow`]), and what a run records of the
//! metric it sampled with ([`MetricRecord`]). The windows themselves are
//! [`crate::sim::adapt::MetricWindows`]; the moves and tests that use M are in
//! [`crate::sim::kernel::mala`] and [`crate::sim::kernel::hmc`].

use serde::Serialize;

use crate::sim::config::MetricKind;
use crate::sim::ensemble::fcn::Ensemble;
use crate::sim::kernel::mala::Kernel;
use crate::sim::model::interface::Model;
use crate::sim::num::real::Real;

/// Which metric a run sampled with, and per moved group the spread of a diagonal one: what
/// the summary (`diagnostics.metric`) and so the results store's `summary.json` say of it.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct MetricRecord {
    /// "identity", "diag", or the collapsed sampler's preconditioner ("neuron", "block").
    pub kind: String,
    /// With "diag": per group Langevin moves, the spread of m over its weights and the live
    /// chains; empty otherwise.
    pub groups: Vec<MetricSpread>,
}

/// The spread of a diagonal metric over one group's weights and chains.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricSpread {
    /// Parameter group (0 = first layer, readout last).
    pub group: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl<T: Real> Kernel<T> {
    /// Whether the draws of the coming steps go into the current window (the kernel adds
    /// every chain's state after every step while on).
    pub fn gather_variances(&mut self, on: bool) {
        self.gathering = on && self.metric == MetricKind::Diag;
    }

    /// Ends a window of the burn-in: every chain's diagonal metric becomes the regularised
    /// variance of its own draws in the window ([`crate::sim::kernel::metric::VarianceWindow`])
    /// and the window is emptied. Returns whether the metric changed (a diagonal metric and
    /// at least two draws in every block's window); the cached energies stay valid, M
    /// entering only the moves.
    pub fn end_metric_window<M: Model<T>>(&mut self, ens: &Ensemble<T, M>) -> bool {
        if self.metric != MetricKind::Diag {
            return false;
        }
        let prior_var: Vec<f64> = (0..ens.model.n_groups())
            .map(|g| ens.model.prior_var(g))
            .collect();
        let ready = self.states.iter().all(|s| s.variance.count() >= 2);
        if ready {
            for state in &mut self.states {
                if let Some(metric) = state.variance.metric(&prior_var) {
                    state.metric = metric;
                }
            }
        }
        for state in &mut self.states {
            state.variance.clear();
        }
        ready
    }

    /// Whether a diagonal metric is in use (set at the end of a window).
    pub fn has_diagonal_metric(&self) -> bool {
        self.states.iter().all(|s| !s.metric.diagonal.is_empty()) && !self.states.is_empty()
    }

    /// Every chain's diagonal metric per group (chain order; the layout of
    /// [`crate::sim::driver::result::RunResult::final_state`], an empty group where Langevin
    /// does not move it); empty unless a diagonal metric is in use.
    pub fn metric_diagonal<M: Model<T>>(&self, ens: &Ensemble<T, M>) -> Vec<Vec<Vec<f64>>> {
        if !self.has_diagonal_metric() {
            return Vec::new();
        }
        let model = &ens.model;
        ens.blocks
            .iter()
            .zip(&self.states)
            .flat_map(|(block, state)| {
                (0..block.len).map(move |c| {
                    (0..model.n_groups())
                        .map(|g| {
                            let n = model.group_len(g);
                            let m = &state.metric.diagonal[g];
                            if m.is_empty() {
                                Vec::new()
                            } else {
                                m[c * n..(c + 1) * n].to_vec()
                            }
                        })
                        .collect()
                })
            })
            .collect()
    }

    /// The metric in use now ([`MetricRecord`]), the spread over the chains that did not
    /// diverge.
    pub fn metric_record<M: Model<T>>(&self, ens: &Ensemble<T, M>) -> MetricRecord {
        let diagonal = self.metric_diagonal(ens);
        if diagonal.is_empty() {
            let first = self.states.first().map(|s| &s.metric);
            let kind = match first {
                Some(m) if !m.scalar.is_empty() => "neuron",
                Some(m) if !m.factor.is_empty() => "block",
                _ => "identity",
            };
            return MetricRecord {
                kind: kind.to_string(),
                groups: Vec::new(),
            };
        }
        let groups = (0..ens.model.n_groups())
            .filter_map(|g| {
                let mut values: Vec<f64> = diagonal
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| ens.alive(*k))
                    .flat_map(|(_, chain)| chain[g].iter().copied())
                    .collect();
                if values.is_empty() {
                    return None;
                }
                values.sort_by(f64::total_cmp);
                Some(MetricSpread {
                    group: g,
                    min: values[0],
                    median: values[values.len() / 2],
                    max: values[values.len() - 1],
                })
            })
            .collect();
        MetricRecord {
            kind: MetricKind::Diag.name().to_string(),
            groups,
        }
    }
}
