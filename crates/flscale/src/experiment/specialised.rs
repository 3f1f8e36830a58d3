//! Which rule identified the specialised neurons behind μ and M in the results store: the `results` table's `mu_classifier` column and the sentence the reports print
//! about it. The rule itself is chosen per run by `sim::observe::probe_summary`: the side peak
//! of the pooled |ρ^u| distribution (a half-normal bulk plus a Gaussian side peak fitted by EM
//! and kept by BIC, `sim::observe::side_peak`), or, when no side peak is resolved, the
//! 3σ₁/√d cut of paper App. F.2.

use serde_json::Value as Json;

use super::store::{StoreData, OBSERVABLES};
use super::table::{Column, Table};
use crate::sim::observe::probe_summary::{CLASSIFIER_CUT, CLASSIFIER_SIDE_PEAK};

/// The observables of `results` that are counted over the specialised neurons.
const COUNTED_OVER_SPECIALISED: [&str; 2] = ["mu", "specialising"];

/// Run ids listed in a note before it only counts them.
const LISTED: usize = 8;

/// The summary's rule for μ and M along the first parity direction, if recorded.
fn rule(summary: &Json) -> Option<&str> {
    summary.get("mu_classifier").and_then(Json::as_str)
}

/// True when the run measured μ or M (a parity target), whatever the rule.
fn measures_mu(summary: &Json) -> bool {
    COUNTED_OVER_SPECIALISED
        .iter()
        .any(|k| summary.get(*k).is_some_and(Json::is_number))
}

/// The `mu_classifier` column of `results`: on the `mu` and `specialising` rows the rule that
/// identified the specialised neurons ("side_peak" or "cut_3sigma", the summary's
/// `mu_classifier`); empty on every other row, for runs without a parity target and for runs
/// written before the rule was recorded.
pub(super) fn push_classifier_column(t: &mut Table, data: &StoreData) {
    let per_run = OBSERVABLES.len() + 1;
    let mut col = Vec::with_capacity(per_run * data.runs.len());
    for r in &data.runs {
        let rule = rule(&r.summary).unwrap_or_default();
        for k in 0..per_run {
            let counted = OBSERVABLES
                .get(k)
                .is_some_and(|o| COUNTED_OVER_SPECIALISED.contains(&o.0));
            col.push(if counted { rule } else { "" }.to_string());
        }
    }
    t.push("mu_classifier", Column::Text(col));
}

/// The error of M from the first parity direction (the summary's top-level `specialising` is
/// that direction's, `sim::observe::probe_summary`), for the `specialising` row of `results`.
pub(super) fn specialising_err(summary: &Json) -> Option<f64> {
    summary
        .get("parity_directions")
        .and_then(Json::as_array)
        .and_then(|d| d.first())
        .and_then(|d| d.get("specialising_err"))
        .and_then(Json::as_f64)
}

fn name_runs(ids: &[&str]) -> String {
    if ids.len() <= LISTED {
        ids.join(", ")
    } else {
        format!("{}, … ({} in all)", ids[..LISTED].join(", "), ids.len())
    }
}

impl StoreData {
    /// One sentence on how μ and M were measured, for every report of a store with a parity
    /// target: how many runs found a side peak, which fell back to the 3σ₁/√d cut, and which
    /// do not record the rule (older stores; rerunning them records it). None when no run
    /// measured μ or M.
    pub fn mu_rule_note(&self) -> Option<String> {
        // Every run, those left out for disagreeing starts included: their μ is printed too.
        let runs: Vec<_> = self
            .runs
            .iter()
            .filter(|r| measures_mu(&r.summary))
            .collect();
        if runs.is_empty() {
            return None;
        }
        let with = |want: Option<&str>| -> Vec<&str> {
            runs.iter()
                .filter(|r| rule(&r.summary) == want)
                .map(|r| r.id.as_str())
                .collect()
        };
        let peak = with(Some(CLASSIFIER_SIDE_PEAK));
        let cut = with(Some(CLASSIFIER_CUT));
        let unknown = with(None);
        let mut s = format!(
            "μ and M: the specialised neurons are the side peak of |w·u| in {} of {} runs",
            peak.len(),
            runs.len()
        );
        if !cut.is_empty() {
            s += &format!(
                "; no side peak resolved, so the 3σ1/√d cut, in {}",
                name_runs(&cut)
            );
        }
        let other = runs.len() - peak.len() - cut.len() - unknown.len();
        if other > 0 {
            s += &format!("; {other} run(s) name a rule this flscale does not know");
        }
        if !unknown.is_empty() {
            s += &format!(
                "; the rule is not recorded (no mu_classifier in summary.json, written by an older flscale) for {}: rerun them to record it",
                name_runs(&unknown)
            );
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::results::results_table;
    use super::super::store::RunData;
    use super::*;
    use std::collections::BTreeMap;

    fn run(k: usize, summary: Json) -> RunData {
        RunData {
            index: k,
            id: format!("run-{k:05}"),
            coords: BTreeMap::from([("n1".to_string(), 10.0 * (k + 1) as f64)]),
            equilibrated: None,
            summary,
            chains: Vec::new(),
            histogram: Vec::new(),
            probe_histograms: BTreeMap::new(),
        }
    }

    fn parity(rule: Option<&str>, m: f64, m_err: f64) -> Json {
        let mut s = serde_json::json!({
            "mu": 1.2, "mu_err": 0.05, "specialising": m,
            "parity_directions": [{"direction": "e1+e2", "specialising": m,
                                   "specialising_err": m_err}],
        });
        if let Some(r) = rule {
            s["mu_classifier"] = Json::from(r);
        }
        s
    }

    fn data(runs: Vec<RunData>) -> StoreData {
        StoreData {
            manifest: Json::Null,
            analysis: Default::default(),
            total: runs.len(),
            runs,
            include_unequilibrated: false,
        }
    }

    fn row(name: &str) -> usize {
        OBSERVABLES.iter().position(|o| o.0 == name).unwrap()
    }

    #[test]
    fn the_rule_and_m_round_trip_through_parquet_and_csv() {
        let d = data(vec![
            run(0, parity(Some(CLASSIFIER_SIDE_PEAK), 3.0, 0.25)),
            run(1, parity(Some(CLASSIFIER_CUT), 7.5, 0.5)),
            // Written before the rule was recorded, and a run without a parity target.
            run(2, parity(None, 4.0, 0.125)),
            run(3, serde_json::json!({"alignment": 0.3})),
        ]);
        let t = results_table(&d);
        let dir = tempfile::tempdir().unwrap();
        let pq = dir.path().join("r.parquet");
        std::fs::write(&pq, t.to_parquet().unwrap()).unwrap();
        let csv = t.to_csv().unwrap();
        let per_run = OBSERVABLES.len() + 1;
        let (mu, m, a) = (row("mu"), row("specialising"), row("alignment"));
        for back in [
            Table::read(&pq).unwrap(),
            Table::from_csv(&csv, "r.csv").unwrap(),
        ] {
            for name in ["mu_classifier", "value", "err", "observable"] {
                assert_eq!(back.column(name), t.column(name), "{name}");
            }
            let Some(Column::Text(rule)) = back.column("mu_classifier") else {
                panic!("no mu_classifier text column")
            };
            assert_eq!(rule[mu], "side_peak");
            assert_eq!(rule[m], "side_peak");
            assert_eq!(rule[a], "");
            assert_eq!(rule[per_run + mu], "cut_3sigma");
            assert_eq!(rule[per_run + m], "cut_3sigma");
            assert_eq!(rule[2 * per_run + mu], "");
            assert_eq!(rule[3 * per_run + m], "");
            assert_eq!(rule.len(), 4 * per_run);
            let Some(Column::Float(value)) = back.column("value") else {
                panic!("no value column")
            };
            let Some(Column::Float(err)) = back.column("err") else {
                panic!("no err column")
            };
            // M and its error (the first parity direction's) sit on the specialising row.
            assert_eq!(
                (value[per_run + m], err[per_run + m]),
                (Some(7.5), Some(0.5))
            );
            assert_eq!((value[m], err[m]), (Some(3.0), Some(0.25)));
            assert_eq!(err[3 * per_run + m], None);
        }
    }

    #[test]
    fn the_note_counts_each_rule_and_names_runs_that_do_not_record_one() {
        let d = data(vec![
            run(0, parity(Some(CLASSIFIER_SIDE_PEAK), 3.0, 0.25)),
            run(1, parity(Some(CLASSIFIER_CUT), 7.5, 0.5)),
            run(2, parity(None, 4.0, 0.125)),
            run(3, serde_json::json!({"alignment": 0.3})),
        ]);
        let note = d.mu_rule_note().unwrap();
        assert!(note.contains("side peak of |w·u| in 1 of 3 runs"), "{note}");
        assert!(note.contains("3σ1/√d cut, in run-00001"), "{note}");
        assert!(
            note.contains("not recorded") && note.contains("for run-00002: rerun"),
            "{note}"
        );
        let no_parity = data(vec![run(0, serde_json::json!({"alignment": 0.3}))]);
        assert_eq!(no_parity.mu_rule_note(), None);
        let all_peak = data(vec![run(0, parity(Some(CLASSIFIER_SIDE_PEAK), 3.0, 0.2))]);
        assert_eq!(
            all_peak.mu_rule_note().unwrap(),
            "μ and M: the specialised neurons are the side peak of |w·u| in 1 of 1 runs"
        );
    }
}
