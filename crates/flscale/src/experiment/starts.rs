//! The hot/cold verdicts in the results store and the analysis: the
//! `results` table's columns for the hot start and the agreement of the two starts, which runs
//! the analysis uses, and the sentence every report prints about it (`sim::equilibration`
//! computes the verdicts).

use serde_json::Value as Json;

use super::store::{RunData, StoreData, OBSERVABLES};
use super::table::{Column, Table};

/// The hot/cold columns of `results`: per row, the hot start's value and error, the
/// z-score of cold − hot and whether the two starts agree (a boolean, missing when the run had
/// one start, coupled starts, or the observable no error bar); per run, `equilibrated` over all
/// its fitted observables (`sim::equilibration`) and the seed of each start's noise streams,
/// `seed_cold` and `seed_hot` (missing for a start that did not run; integers, or doubles
/// should a seed lie beyond 2⁵³, which derived seeds do not: `sim::driver::coupling::start_seed`).
pub(super) fn push_start_columns(t: &mut Table, data: &StoreData) {
    let per_run = OBSERVABLES.len() + 1;
    let (mut hv, mut he, mut z, mut agree, mut run_eq) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut seed_cold, mut seed_hot) = (Vec::new(), Vec::new());
    for r in &data.runs {
        let verdicts = r
            .summary
            .get("equilibration")
            .and_then(|e| e.get("observables"))
            .and_then(Json::as_array);
        let first_direction = |prefix: &str| {
            verdicts.and_then(|v| {
                v.iter().find(|o| {
                    o.get("name")
                        .and_then(Json::as_str)
                        .is_some_and(|n| n.starts_with(prefix))
                })
            })
        };
        for k in 0..per_run {
            let name = OBSERVABLES.get(k).map(|o| o.0).unwrap_or("diverged_chains");
            let o = match name {
                // The summary's μ and specialised count are those of the first parity
                // direction.
                "mu" => first_direction("mu_"),
                "specialising" => first_direction("specialising_"),
                _ => verdicts.and_then(|v| {
                    v.iter()
                        .find(|o| o.get("name").and_then(Json::as_str) == Some(name))
                }),
            };
            let f = |key: &str| o.and_then(|o| o.get(key)).and_then(Json::as_f64);
            hv.push(f("hot"));
            he.push(f("hot_err"));
            z.push(f("z"));
            agree.push(o.and_then(|o| o.get("agree")).and_then(Json::as_bool));
            run_eq.push(r.equilibrated);
            let seed = |start: &str| r.summary["start_seeds"][start].as_u64().map(|s| s as f64);
            seed_cold.push(seed("cold"));
            seed_hot.push(seed("hot"));
        }
    }
    t.push("hot_value", Column::Float(hv));
    t.push("hot_err", Column::Float(he));
    t.push("z_cold_hot", Column::Float(z));
    t.push("starts_agree", Column::Bool(agree));
    t.push("equilibrated", Column::Bool(run_eq));
    t.push("seed_cold", Column::whole(seed_cold));
    t.push("seed_hot", Column::whole(seed_hot));
}

/// The names of the hot/cold verdicts (`summary.equilibration.observables`,
/// `sim::driver::starts::fitted_observables`) that judge a per-chain observable of the results
/// table: μ stands on the specialised neurons' identification, so its verdicts along every
/// parity direction and their specialised counts.
fn verdicts_of(observable: &str, name: &str) -> bool {
    match observable {
        "outliers" | "outliers_layer1" => name == "outliers_layer1",
        "mu" => name.starts_with("mu_") || name.starts_with("specialising_"),
        o => name == o,
    }
}

impl RunData {
    /// Whether the run's hot and cold starts agree on `observable` (a per-chain observable,
    /// e.g. alignment or outliers): every verdict that judges it agrees. None for a run with one
    /// start or one whose summary has no verdict for it (then only the run-level verdict says).
    pub fn starts_agree_on(&self, observable: &str) -> Option<bool> {
        let list = self.summary["equilibration"]["observables"].as_array()?;
        let verdicts: Vec<bool> = list
            .iter()
            .filter(|o| {
                o["name"]
                    .as_str()
                    .is_some_and(|n| verdicts_of(observable, n))
            })
            .filter_map(|o| o["agree"].as_bool())
            .collect();
        (!verdicts.is_empty()).then(|| verdicts.iter().all(|&a| a))
    }

    /// The verdicts on which the starts disagree (`summary.equilibration.disagree`).
    pub fn disagreeing_observables(&self) -> Vec<String> {
        self.summary["equilibration"]["disagree"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl StoreData {
    /// The runs the analysis uses: all of them, less those whose hot and cold starts disagree
    /// (unless `include_unequilibrated`).
    pub fn analysed_runs(&self) -> impl Iterator<Item = &RunData> {
        self.runs
            .iter()
            .filter(|r| self.include_unequilibrated || r.equilibrated != Some(false))
    }

    /// The runs an analysis of `observable` uses: those of [`StoreData::analysed_runs`], and
    /// also a run whose starts disagree on other observables but agree on every verdict of this
    /// one ([`RunData::starts_agree_on`]). A P\* of the alignment needs the alignment
    /// equilibrated; a first-order transition can leave the hot start with more specialised
    /// neurons at the same alignment (fig3a at d = 40, P = 400: alignment 0.354 vs 0.355,
    /// outliers 2.3 vs 6.4), and the outlier fits still leave that run out.
    pub fn analysed_runs_for<'a>(
        &'a self,
        observable: &'a str,
    ) -> impl Iterator<Item = &'a RunData> + 'a {
        self.runs
            .iter()
            .filter(move |r| self.analyses(r, observable))
    }

    /// Whether an analysis of `observable` uses run `r` ([`StoreData::analysed_runs_for`]); the
    /// figures draw the others hollow.
    pub fn analyses(&self, r: &RunData, observable: &str) -> bool {
        self.include_unequilibrated
            || r.equilibrated != Some(false)
            || r.starts_agree_on(observable) == Some(true)
    }

    /// One sentence on the equilibration of the runs, for every report: how many were tested
    /// with both starts, which disagree (and whether they were left out), or that none was; and
    /// how many had coupled starts, which carry a coupling certificate instead of a verdict
    /// (`sim::driver::coupling`).
    pub fn equilibration_note(&self) -> String {
        let coupled = self
            .runs
            .iter()
            .filter(|r| r.summary.get("coupling").is_some_and(|c| !c.is_null()))
            .count();
        let coupled_note = if coupled == 0 {
            String::new()
        } else {
            format!("; {coupled} with coupled hot and cold starts (sampler.starts_coupling = \"coupled\") are no test of it")
        };
        self.verdicts_note() + &coupled_note
    }

    /// [`StoreData::equilibration_note`] for the runs with independent starts.
    fn verdicts_note(&self) -> String {
        let tested = self
            .runs
            .iter()
            .filter(|r| r.equilibrated.is_some())
            .count();
        let failed: Vec<String> = self
            .runs
            .iter()
            .filter(|r| r.equilibrated == Some(false))
            .map(|r| {
                let on = r.disagreeing_observables();
                if on.is_empty() {
                    r.id.clone()
                } else {
                    format!("{} (on {})", r.id, on.join(", "))
                }
            })
            .collect();
        if tested == 0 {
            return "equilibration untested: no run has independent hot and cold starts (sampler.start = \"both\")".into();
        }
        let mut s = format!(
            "equilibration: {} of {} runs have hot and cold starts, {} agree on every fitted observable",
            tested,
            self.runs.len(),
            tested - failed.len()
        );
        if !failed.is_empty() {
            s += &format!(
                "; not equilibrated: {}{}",
                failed.join(", "),
                if self.include_unequilibrated {
                    " (included, marked)"
                } else {
                    " (left out of the analysis of every observable their starts disagree on; rerun them with more sampler.steps, or with the collapsed sampler where the likelihood is Gaussian, or pass --include-unequilibrated)"
                }
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::super::results::results_table;
    use super::*;
    use std::collections::BTreeMap;

    fn run(k: usize, equilibrated: Option<bool>) -> RunData {
        let summary = serde_json::json!({
            "alignment": 0.4, "alignment_err": 0.01,
            "outliers_layer1": 2.77, "outliers_layer1_err": 0.1,
            "equilibrated": equilibrated,
            "start_seeds": {"cold": 7, "hot": equilibrated.map(|_| 8_670_364_517_712_541u64)},
            "equilibration": equilibrated.map(|e| serde_json::json!({"observables": [
                {"name": "alignment", "cold": 0.4, "cold_err": 0.01, "hot": 0.41,
                 "hot_err": 0.01, "z": -0.5, "agree": true},
                {"name": "outliers_layer1", "cold": 2.77, "cold_err": 0.1, "hot": 3.32,
                 "hot_err": 0.1, "z": -3.8890872965260113, "agree": e},
                {"name": "mu_e1+e2", "cold": 1.5, "cold_err": 0.1, "hot": 1.4,
                 "hot_err": 0.1, "z": 0.25, "agree": true},
            ]})),
        });
        RunData {
            index: k,
            id: format!("run-{k:05}"),
            coords: BTreeMap::from([("d".to_string(), 10.0), ("p".to_string(), k as f64)]),
            equilibrated: summary.get("equilibrated").and_then(Json::as_bool),
            summary,
            chains: Vec::new(),
            histogram: Vec::new(),
            probe_histograms: BTreeMap::new(),
        }
    }

    fn data() -> StoreData {
        StoreData {
            manifest: Json::Null,
            analysis: Default::default(),
            runs: vec![run(0, Some(false)), run(1, Some(true)), run(2, None)],
            total: 3,
            include_unequilibrated: false,
        }
    }

    #[test]
    fn hot_cold_columns_round_trip_through_parquet_and_csv() {
        let t = results_table(&data());
        let dir = tempfile::tempdir().unwrap();
        let pq = dir.path().join("r.parquet");
        std::fs::write(&pq, t.to_parquet().unwrap()).unwrap();
        let csv = t.to_csv().unwrap();
        for back in [
            Table::read(&pq).unwrap(),
            Table::from_csv(&csv, "r.csv").unwrap(),
        ] {
            for name in [
                "hot_value",
                "hot_err",
                "z_cold_hot",
                "starts_agree",
                "equilibrated",
                "seed_cold",
                "seed_hot",
            ] {
                assert_eq!(back.column(name), t.column(name), "{name}");
            }
        }
        let rows = OBSERVABLES.len() + 1;
        let Some(Column::Bool(agree)) = t.column("starts_agree") else {
            panic!("no starts_agree column")
        };
        let Some(Column::Float(z)) = t.column("z_cold_hot") else {
            panic!("no z column")
        };
        let k = OBSERVABLES
            .iter()
            .position(|o| o.0 == "outliers_layer1")
            .unwrap();
        let m = OBSERVABLES.iter().position(|o| o.0 == "mu").unwrap();
        assert_eq!(agree[k], Some(false));
        assert_eq!(agree[rows + k], Some(true));
        assert_eq!(agree[2 * rows + k], None);
        assert_eq!(z[k], Some(-3.8890872965260113));
        // μ of the summary is the first parity direction's.
        assert_eq!(z[m], Some(0.25));
        let Some(Column::Bool(eq)) = t.column("equilibrated") else {
            panic!("no equilibrated column")
        };
        assert_eq!(
            (eq[0], eq[rows], eq[2 * rows]),
            (Some(false), Some(true), None)
        );
        let csv_line = |row: usize| csv.lines().nth(row + 1).unwrap().to_string();
        assert!(csv_line(k).contains(",false,false,"), "{}", csv_line(k));
        // One start: no hot value, error, z or verdicts; the cold seed 7.
        assert!(
            csv_line(2 * rows + k).contains(",,,,,7,"),
            "{}",
            csv_line(2 * rows + k)
        );
        let Some(Column::OptInt(hot_seed)) = t.column("seed_hot") else {
            panic!("no seed_hot column")
        };
        // A derived seed is a whole number; a one-start run has none.
        assert_eq!(hot_seed[k], Some(8_670_364_517_712_541));
        assert_eq!(hot_seed[2 * rows], None);
        assert_eq!(
            t.column("seed_cold"),
            Some(&Column::OptInt(vec![Some(7); 3 * rows]))
        );
    }

    #[test]
    fn runs_whose_starts_disagree_are_left_out_and_named() {
        let mut d = data();
        let ids: Vec<&str> = d.analysed_runs().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["run-00001", "run-00002"]);
        let note = d.equilibration_note();
        assert!(
            note.contains("2 of 3 runs") || note.contains("2 of 3"),
            "{note}"
        );
        assert!(
            note.contains("run-00000") && note.contains("left out"),
            "{note}"
        );
        // run-00000 disagrees on the outlier count only: its alignment is analysed, its
        // outliers are not.
        assert_eq!(d.runs[0].starts_agree_on("alignment"), Some(true));
        assert_eq!(d.runs[0].starts_agree_on("outliers"), Some(false));
        assert_eq!(d.runs[1].starts_agree_on("outliers"), Some(true));
        assert_eq!(d.runs[2].starts_agree_on("alignment"), None);
        let used = |d: &StoreData, o: &str| -> Vec<String> {
            d.analysed_runs_for(o).map(|r| r.id.clone()).collect()
        };
        assert_eq!(
            used(&d, "alignment"),
            ["run-00000", "run-00001", "run-00002"]
        );
        assert_eq!(used(&d, "outliers"), ["run-00001", "run-00002"]);
        assert_eq!(used(&d, "outliers_layer1"), ["run-00001", "run-00002"]);
        // A verdict the run does not have (R here) falls back on the run-level one.
        assert_eq!(used(&d, "r_overlap2"), ["run-00001", "run-00002"]);
        d.include_unequilibrated = true;
        assert_eq!(d.analysed_runs().count(), 3);
        assert_eq!(d.analysed_runs_for("outliers").count(), 3);
        d.runs.iter_mut().for_each(|r| r.equilibrated = None);
        assert!(d.equilibration_note().contains("untested"));
        d.runs[1].summary["coupling"] = serde_json::json!({"met": 4, "compared": 4});
        let note = d.equilibration_note();
        assert!(
            note.contains("untested") && note.contains("1 with coupled hot and cold starts"),
            "{note}"
        );
    }
}
