//! `flscale sweep EXP --out DIR --refine-pstar`: bisect every P\* bracket in log x until each
//! crossing is bracketed within a factor (default 1.1, [`super::sweep::DEFAULT_RESOLUTION`]).
//!
//! A sharp transition (fig3a: A_f from ≈ 0.03 to ≈ 0.5 within a factor 1.4 in P) is located
//! by a dense grid only at great cost: resolving a factor 1.1 over P/d ∈ [5, 80] takes 31 sizes
//! per d. Bisection needs the coarse grid plus ⌈log₂(ln(bracket)/ln(1.1))⌉ runs per group and
//! seed: 3 for a factor-2 bracket, 5 for a factor 16. Each round reads the store, finds the
//! crossings that are only bracketed ([`super::pstar::PstarTable::unresolved`]), and adds one
//! run per seed at the bracket's geometric midpoint √(x_lo·x_hi) — copies of the grid runs at
//! x_lo with only x changed — then repeats. Rounds are decided from the finished runs alone
//! (no random numbers), and every planned run is listed in `refine.json` before it starts, so
//! an interrupted refinement resumes into exactly the files of an uninterrupted one.
//!
//! The refined runs live beside the grid's as `runs/refine-NNNNN/`; [`super::store`] reads them
//! with the grid's, so `pstar`, `fit`, `plot` and the aggregate tables include them.

use serde_json::{json, Value as Json};
use toml::{Table, Value};

use super::io::write_atomic;
use super::layout::{listed_runs, refine_id, REFINE_FILE};
use super::pstar::{pstar, Bracket, PstarQuery, PstarTable};
use super::runner::{run_plans, SweepObserver};
use super::stats::{coordinate, Bootstrap};
use super::store::{RunData, Store, StoreData};
use super::sweep::{as_f64, RunPlan, Sweep};
use crate::error::{Error, Result};
use crate::sim::ExperimentConfig;

/// Default bound on bisection rounds: a factor-2¹⁰ bracket still reaches 1.1 within it.
pub const DEFAULT_MAX_ROUNDS: usize = 10;

/// One bisection target: a group's bracket and the x to measure next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// The group's value (e.g. d).
    pub group: f64,
    /// The bracket it refines.
    pub bracket: Bracket,
    /// The new x, √(x_lo·x_hi).
    pub x: f64,
}

/// The targets of one round: the log midpoint of every crossing that is only bracketed.
pub fn plan_round(table: &PstarTable) -> Vec<Target> {
    table
        .unresolved()
        .into_iter()
        .map(|(group, bracket)| Target {
            group,
            bracket,
            x: bracket.log_midpoint(),
        })
        .collect()
}

/// Where the bisection reads crossings from and adds measurements to: the results store, or
/// a synthetic response in tests.
pub trait CrossingSource {
    /// The current P\* table (crossings and brackets of every group).
    fn table(&mut self) -> Result<PstarTable>;
    /// Measures at every target; returns how many new runs were added (0 when no target can
    /// be measured any finer, e.g. P already at integer resolution).
    fn measure(&mut self, targets: &[Target]) -> Result<usize>;
}

/// What a refinement did.
#[derive(Debug, Clone, PartialEq)]
pub struct RefineReport {
    /// Rounds that added runs.
    pub rounds: usize,
    /// Runs added over all rounds.
    pub runs_added: usize,
    /// Groups still only bracketed at the end, with their brackets.
    pub unresolved: Vec<(f64, Bracket)>,
    /// The final table.
    pub table: PstarTable,
}

/// Bisects until every crossing is resolved, no target can be measured finer, or
/// `max_rounds` rounds have run.
pub fn bisect(source: &mut dyn CrossingSource, max_rounds: usize) -> Result<RefineReport> {
    let mut rounds = 0;
    let mut runs_added = 0;
    let mut table = source.table()?;
    while rounds < max_rounds {
        let targets = plan_round(&table);
        if targets.is_empty() {
            break;
        }
        let added = source.measure(&targets)?;
        if added == 0 {
            break;
        }
        rounds += 1;
        runs_added += added;
        table = source.table()?;
    }
    Ok(RefineReport {
        rounds,
        runs_added,
        unresolved: table.unresolved(),
        table,
    })
}

/// The number of grid values a dense log-spaced grid needs to resolve a factor `resolution`
/// over [x_min, x_max]: the cost `--refine-pstar` saves, per group and seed.
pub fn dense_grid_size(x_min: f64, x_max: f64, resolution: f64) -> usize {
    ((x_max / x_min).ln() / resolution.ln()).ceil() as usize + 1
}

/// The results store as a [`CrossingSource`]: measuring means running copies of the grid's
/// runs at the new x into the store.
pub struct StoreSource<'a> {
    sweep: &'a Sweep,
    store: &'a Store,
    resolution: f64,
    observer: &'a mut dyn SweepObserver,
}

impl<'a> StoreSource<'a> {
    /// Refines `sweep`'s crossings in `store` to `resolution`.
    pub fn new(
        sweep: &'a Sweep,
        store: &'a Store,
        resolution: f64,
        observer: &'a mut dyn SweepObserver,
    ) -> Self {
        StoreSource {
            sweep,
            store,
            resolution,
            observer,
        }
    }
}

impl CrossingSource for StoreSource<'_> {
    fn table(&mut self) -> Result<PstarTable> {
        let data = StoreData::load(&self.store.dir)?;
        let mut q = PstarQuery::from_analysis(&data);
        q.resolution = self.resolution;
        // Rounds depend on the crossings of the means only: no bootstrap replicates.
        pstar(&data, &q, &mut Bootstrap::new(0, 0))
    }

    fn measure(&mut self, targets: &[Target]) -> Result<usize> {
        let mut listed = listed_runs(&self.store.dir)?;
        let mut plans = Vec::new();
        let x_name = self.sweep.analysis.x.clone();
        let group_name = self.sweep.analysis.group.clone();
        for t in targets {
            // The template is the grid run at the largest grid x not above the bracket: after
            // the first round the bracket's lower end is usually a refinement run, which the
            // grid does not hold, and copying only the crossing variable keeps every other
            // setting of the group (and seed) as the grid has it.
            let in_group = |r: &&RunPlan| coord_of(&r.coordinates(), &group_name) == Some(t.group);
            let grid_lo = self
                .sweep
                .runs
                .iter()
                .filter(in_group)
                .filter_map(|r| coord_of(&r.coordinates(), &x_name))
                .filter(|&x| x <= t.bracket.lo)
                .fold(f64::NEG_INFINITY, f64::max);
            for template in self
                .sweep
                .runs
                .iter()
                .filter(in_group)
                .filter(|r| coord_of(&r.coordinates(), &x_name) == Some(grid_lo))
            {
                let Some(plan) = plan_at(self.sweep, template, &x_name, t.x, listed.len())? else {
                    continue;
                };
                let x_new = coord_of(&plan.coordinates(), &x_name);
                let Some(x_new) = x_new.filter(|&x| x > t.bracket.lo && x < t.bracket.hi) else {
                    // Integer P cannot split this bracket further.
                    continue;
                };
                // A run planned before an interruption keeps its id: it is resumed, not
                // planned twice.
                let same = |r: &Json| {
                    r.get("template").and_then(Json::as_str) == Some(template.id.as_str())
                        && r.get("x").and_then(Json::as_f64) == Some(x_new)
                };
                if let Some(k) = listed.iter().position(same) {
                    if let Some(plan) = plan_at(self.sweep, template, &x_name, t.x, k)? {
                        if !self.store.is_finished(&plan.id) {
                            plans.push(plan);
                        }
                    }
                    continue;
                }
                listed.push(json!({
                    "index": plan.index,
                    "id": plan.id,
                    "template": template.id,
                    "x": x_new,
                    "point": plan.point.iter().map(|(k, v)| (k.clone(), super::sweep::toml_to_json(v))).collect::<serde_json::Map<_, _>>(),
                    "coordinates": plan.coordinates(),
                    "seed": plan.config.sampler.seed,
                    "refines": {"group": t.group, "bracket": [t.bracket.lo, t.bracket.hi]},
                }));
                plans.push(plan);
            }
        }
        if plans.is_empty() {
            return Ok(0);
        }
        let text = serde_json::to_string_pretty(&json!({ "runs": listed }))
            .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?;
        write_atomic(&self.store.dir.join(REFINE_FILE), (text + "\n").as_bytes())?;
        let todo: Vec<&RunPlan> = plans
            .iter()
            .filter(|p| !self.store.is_finished(&p.id))
            .collect();
        run_plans(self.store, &todo, &mut *self.observer)?;
        Ok(plans.len())
    }
}

fn coord_of(c: &std::collections::BTreeMap<String, f64>, name: &str) -> Option<f64> {
    let run = RunData {
        index: 0,
        id: String::new(),
        coords: c.clone(),
        summary: Json::Null,
        chains: Vec::new(),
        histogram: Vec::new(),
        probe_histograms: Default::default(),
        equilibrated: None,
    };
    coordinate(&run, name)
}

/// A copy of `template` with the crossing variable `x_name` set to `x` (P is rounded to an
/// integer), as refinement run number `k`; None when `x` cannot be represented (P < 1).
/// Supported crossing variables: `p`, `p_over_d`, `sqrt_ld3_over_p` (paper Fig. 3b's
/// √(L·d³)/P) and any numeric swept field.
fn plan_at(
    sweep: &Sweep,
    template: &RunPlan,
    x_name: &str,
    x: f64,
    k: usize,
) -> Result<Option<RunPlan>> {
    let mut table: Table = toml::from_str(&template.toml)
        .map_err(|e| Error::runtime(format!("cannot read back {}: {e}", template.id)))?;
    let cfg = &template.config;
    let d = cfg.data.d as f64;
    let p = match x_name {
        "p" | "data.p" => Some(x),
        "p_over_d" | "data.p_over_d" => Some(x * d),
        "sqrt_ld3_over_p" => cfg.data.tokens.map(|l| (l as f64 * d * d * d).sqrt() / x),
        _ => None,
    };
    let mut point = template.point.clone();
    match p {
        Some(p) => {
            let p = p.round();
            if p < 1.0 {
                return Ok(None);
            }
            set(&mut table, "data.p", Value::Integer(p as i64))?;
            for (f, v) in &mut point {
                match f.as_str() {
                    "data.p" => *v = Value::Integer(p as i64),
                    "data.p_over_d" => *v = Value::Float(p / d),
                    _ => {}
                }
            }
        }
        None => {
            let slot = point.iter_mut().find(|(f, _)| f == x_name).ok_or_else(|| {
                Error::invalid(format!(
                    "--refine-pstar cannot set the crossing variable `{x_name}`; it refines p, p_over_d, sqrt_ld3_over_p or a swept numeric field"
                ))
            })?;
            let v = match slot.1 {
                Value::Integer(_) => Value::Integer(x.round() as i64),
                _ => Value::Float(x),
            };
            if as_f64(&v) == as_f64(&slot.1) {
                return Ok(None);
            }
            slot.1 = v.clone();
            set(&mut table, x_name, v)?;
        }
    }
    let text = toml::to_string(&table)
        .map_err(|e| Error::runtime(format!("cannot encode a refinement run: {e}")))?;
    let where_ = format!("{} (P* refinement of {})", sweep.source, template.id);
    let config = ExperimentConfig::from_generated_toml(&text, &where_)?;
    Ok(Some(RunPlan {
        index: sweep.runs.len() + k,
        id: refine_id(k),
        point,
        toml: text,
        config,
    }))
}

fn set(table: &mut Table, path: &str, v: Value) -> Result<()> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap_or(path);
    let mut t = table;
    for part in parts {
        t = t
            .entry(part.to_string())
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
            .ok_or_else(|| Error::runtime(format!("{path}: `{part}` is not a table")))?;
    }
    t.insert(last.to_string(), v);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::store::{ChainValues, RunData};
    use super::super::sweep::DEFAULT_RESOLUTION;
    use super::*;
    use std::collections::BTreeMap;

    /// A synthetic monotone response measured on demand: A_f(P) = 0.02 below P* and
    /// 0.02 + 0.6·min(1, 5·ln(P/P*)) above (a steep but continuous rise), 2 seeds of 8 chains.
    struct Synthetic {
        data: StoreData,
        pstar: BTreeMap<u64, f64>,
        measured: usize,
    }

    impl Synthetic {
        fn response(&self, d: f64, p: f64) -> f64 {
            let ps = self.pstar[&(d as u64)];
            if p < ps {
                0.02
            } else {
                0.02 + 0.6 * (5.0 * (p / ps).ln()).min(1.0)
            }
        }
        fn add(&mut self, d: f64, p: f64) {
            for seed in 0..2 {
                let a = self.response(d, p);
                let chains = (0..8)
                    .map(|k| ChainValues {
                        chain: k,
                        ok: true,
                        alignment: Some(a),
                        test_mse: None,
                        r_overlap2: None,
                        outliers: None,
                        mu: None,
                    })
                    .collect();
                let n = self.data.runs.len();
                self.data.runs.push(RunData {
                    index: n,
                    id: format!("run-{n:05}"),
                    coords: BTreeMap::from([
                        ("d".into(), d),
                        ("p".into(), p),
                        ("seed".into(), seed as f64),
                    ]),
                    summary: Json::Null,
                    chains,
                    histogram: Vec::new(),
                    probe_histograms: BTreeMap::new(),
                    equilibrated: None,
                });
                self.measured += 1;
            }
        }
    }

    impl CrossingSource for Synthetic {
        fn table(&mut self) -> Result<PstarTable> {
            let q = PstarQuery {
                x: "p".into(),
                group: "d".into(),
                observable: "alignment".into(),
                threshold: 0.1,
                falling: false,
                resolution: DEFAULT_RESOLUTION,
            };
            pstar(&self.data, &q, &mut Bootstrap::new(0, 0))
        }
        fn measure(&mut self, targets: &[Target]) -> Result<usize> {
            let before = self.measured;
            for t in targets {
                self.add(t.group, t.x);
            }
            Ok(self.measured - before)
        }
    }

    #[test]
    fn bisection_recovers_a_known_crossing_within_the_factor() {
        // True P* at 7.3·d and 11.9·d, the coarse grid P/d = 5, 10, 20, 40, 80.
        let mut s = Synthetic {
            data: StoreData {
                manifest: Json::Null,
                analysis: Default::default(),
                runs: Vec::new(),
                total: 0,
                include_unequilibrated: false,
            },
            pstar: BTreeMap::from([(20, 7.3 * 20.0), (40, 11.9 * 40.0)]),
            measured: 0,
        };
        for d in [20.0, 40.0] {
            for r in [5.0, 10.0, 20.0, 40.0, 80.0] {
                s.add(d, r * d);
            }
        }
        let coarse = s.measured;
        let report = bisect(&mut s, DEFAULT_MAX_ROUNDS).unwrap();
        assert!(report.unresolved.is_empty(), "{report:?}");
        for r in &report.table.rows {
            let b = r.bracket.unwrap();
            let truth = s.pstar[&(r.group as u64)];
            assert!(b.factor() <= DEFAULT_RESOLUTION, "{b:?}");
            // The true crossing (where A_f reaches 0.1: P*·e^{0.08/3}) lies in the bracket.
            let cross = truth * (0.08f64 / 3.0).exp();
            assert!(b.lo <= cross && cross <= b.hi, "{b:?} vs {cross}");
            let v = r.pstar.unwrap().value;
            assert!(
                (v / cross).ln().abs() <= DEFAULT_RESOLUTION.ln(),
                "{v} vs {cross}"
            );
        }
        // A factor-2 bracket needs 3 halvings in log to reach 1.1 (2^{1/8} = 1.09).
        assert_eq!(report.rounds, 3, "{report:?}");
        assert_eq!(s.measured - coarse, 3 * 2 * 2);
        // The dense log grid at factor 1.1 over P/d ∈ [5, 80] needs 31 sizes per d.
        assert_eq!(dense_grid_size(5.0, 80.0, 1.1), 31);
    }

    #[test]
    fn bisection_stops_when_nothing_can_be_measured() {
        struct Stuck(PstarTable);
        impl CrossingSource for Stuck {
            fn table(&mut self) -> Result<PstarTable> {
                Ok(self.0.clone())
            }
            fn measure(&mut self, _: &[Target]) -> Result<usize> {
                Ok(0)
            }
        }
        let row = super::super::pstar::PstarRow {
            group: 1.0,
            curve: vec![(1.0, 0.0), (4.0, 1.0)],
            pstar: None,
            bracket: Some(Bracket { lo: 1.0, hi: 4.0 }),
            combined: None,
            resolved: false,
            replicates: Vec::new(),
            combined_replicates: Vec::new(),
        };
        let t = PstarTable {
            x: "p".into(),
            group: "d".into(),
            observable: "alignment".into(),
            threshold: 0.5,
            resolution: 1.1,
            rows: vec![row],
        };
        let r = bisect(&mut Stuck(t), 5).unwrap();
        assert_eq!((r.rounds, r.runs_added, r.unresolved.len()), (0, 0, 1));
    }
}
