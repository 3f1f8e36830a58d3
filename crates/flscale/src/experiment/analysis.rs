//! Exponent fits of an observable against a coordinate, the sentence each fit claims, the
//! scaling engine's prediction for the same architecture, and [`analyse`], which runs the
//! `[analysis]` table of a store (spec 03 "Analysis"; paper App. F.0.1). The statistics
//! (least squares, the bootstrap) are in [`super::stats`]; P\*, its bracket and its combined
//! uncertainty in [`super::pstar`].
//!
//! * **P\***: the sample size at which the ensemble alignment A_f crosses a threshold (the
//!   paper uses A_f = 0.1, App. F.0.1), found by linear interpolation of A_f in log P between
//!   the two measured sizes that bracket the threshold, reported with that bracket.
//! * **Exponents**: ordinary least squares of log y on log x, with the bootstrap over seeds and
//!   chains ([`super::stats`]).
//! * **Two thresholds** (`[analysis] pstar = "coexistence"`): the coexistence P\*\_coex and the
//!   spinodals of the lazy and the specialised basin from the free energies of a sweep
//!   ([`crate::free_energy::coexistence`]), each turned into a [`PstarTable`] and fitted
//!   against d by the same [`fit_pstar`] ([`analyse_coexistence`]).

use super::pstar::{fit_pstar, pstar, Bracket, PstarQuery, PstarRow, PstarTable};
use super::stats::{cells, coordinate, estimate, loglog_fit, Bootstrap, Cell, ExponentFit};
use super::store::StoreData;
use super::sweep::{AnalysisSpec, PredictSpec, PstarSource};
use crate::error::{Error, Result};
use crate::free_energy::coexistence::{CoexistenceRow, CoexistenceTable, Resolution, Threshold};
use crate::patterns::Architecture;

/// The exponent of an observable's ensemble mean against `x` (all other coordinates pooled),
/// bootstrapped over chains.
pub fn fit_observable(
    data: &StoreData,
    x: &str,
    observable: &str,
    boot: &mut Bootstrap,
) -> Result<ExponentFit> {
    let groups = cells(data, None, x, observable)?;
    let cs: Vec<Cell> = groups.into_iter().flat_map(|(_, c)| c).collect();
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    let mut kept = Vec::new();
    for c in &cs {
        let m = c.mean();
        if m > 0.0 && c.x > 0.0 {
            points.push((c.x, m));
            kept.push(c);
        } else {
            skipped.push(format!(
                "{x} = {}: mean {observable} = {m}, which has no logarithm",
                c.x
            ));
        }
    }
    let fit = loglog_fit(&points).ok_or_else(|| {
        let left_out = data
            .runs
            .iter()
            .filter(|r| !data.analyses(r, observable))
            .count();
        let why = if left_out > 0 {
            format!(
                "; {left_out} run(s) were left out because their hot and cold starts disagree on it (rerun them longer, or pass --include-unequilibrated to see them)"
            )
        } else {
            String::new()
        };
        Error::runtime(format!(
            "{observable} is positive at {} value(s) of {x}; a log-log fit needs at least two{why}",
            points.len()
        ))
    })?;
    let mut slopes = Vec::with_capacity(boot.replicates);
    for _ in 0..boot.replicates {
        let pts: Vec<(f64, f64)> = kept.iter().map(|c| (c.x, boot.resample_cell(c))).collect();
        if pts.iter().all(|p| p.1 > 0.0) {
            if let Some(f) = loglog_fit(&pts) {
                slopes.push(f.slope);
            }
        }
    }
    Ok(ExponentFit {
        what: format!("{observable} vs {x}"),
        exponent: estimate(fit.slope, &slopes),
        without_bracket: None,
        points,
        fit,
        skipped,
    })
}

/// What keeps an observable's power-law fit from carrying an exponent, one sentence saying
/// what to run; empty when the fit stands on at least
/// [`super::pstar::MIN_RESOLVED_FOR_FIT`] distinct values of `x`. The rule is P\*'s: two points
/// fix a line and test nothing, so no exponent is claimed from fewer equilibrated points. Runs left out as unequilibrated are named with their `x`, since
/// rerunning them longer is the cheapest way to a third point.
pub fn observable_fit_readiness(
    fit: &ExponentFit,
    data: &StoreData,
    x: &str,
    y: &str,
    dir: &str,
) -> Vec<String> {
    let need = super::pstar::MIN_RESOLVED_FOR_FIT;
    let mut xs: Vec<f64> = fit.points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if xs.len() >= need {
        return Vec::new();
    }
    let mut left_out: Vec<f64> = if data.include_unequilibrated {
        Vec::new()
    } else {
        data.runs
            .iter()
            .filter(|r| !data.analyses(r, y))
            .filter_map(|r| coordinate(r, x))
            .filter(|v| !xs.contains(v))
            .collect()
    };
    left_out.sort_by(f64::total_cmp);
    left_out.dedup();
    let mut todo = Vec::new();
    if !left_out.is_empty() {
        let list: Vec<String> = left_out.iter().map(|v| format!("{x} = {v}")).collect();
        todo.push(format!(
            "{} left out as unequilibrated: rerun them with longer chains (sampler.steps) into `{dir}`",
            list.join(", ")
        ));
    }
    let missing = need - xs.len();
    if left_out.len() < missing {
        todo.push(format!(
            "add {} value(s) of {x} to the sweep in EXP and rerun `flscale sweep EXP --out {dir}`",
            missing - left_out.len()
        ));
    }
    vec![format!(
        "the exponent of {} rests on {} value(s) of {x} (needs {need}): {}",
        fit.what,
        xs.len(),
        todo.join("; ")
    )]
}

/// The fit's one-line verdict: [`side_by_side`] when the fit has points enough
/// (`carries_exponent`: [`super::pstar::carries_exponent`], or [`observable_fit_readiness`]
/// empty); otherwise no exponent is claimed and the slope through the points is shown as
/// such, beside the prediction.
pub fn claim_sentence(
    fit: &ExponentFit,
    predicted: Option<&Predicted>,
    carries_exponent: bool,
) -> String {
    if carries_exponent {
        return side_by_side(fit, predicted);
    }
    let mut s = format!(
        "{}: no exponent claimed from {} point(s) (see the warning); the slope through them is {:.3}",
        fit.what,
        fit.points.len(),
        fit.exponent.value
    );
    if let Some(err) = fit.exponent.err {
        s += &format!(" ± {err:.3}");
    }
    if let Some(p) = predicted {
        s += &format!(", predicted {} — {}", p.exact, p.description);
    }
    s
}

/// The scaling engine's exponent for the same architecture.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicted {
    /// The exponent.
    pub value: f64,
    /// Its exact rational form, e.g. "1" or "1/2".
    pub exact: String,
    /// What it is, e.g. "P* ∝ d^1 (fcn2-erf-he3, N=d; winner M-Sp)".
    pub description: String,
}

/// Reads the predicted exponent from the scaling engine (`flscale predict`): the exponent
/// of P\*/κ in d (paper eq. 12, P\* ∝ κ·min_q Ẽ_q), or the exponent in `scale` of a free
/// parameter's optimal monomial in the simplest winning pattern (e.g. M ∝ √(N/d) for the
/// two-layer network, App. E.1.1, which gives outliers ∝ N^{1/2} at fixed d).
pub fn predicted_exponent(spec: &PredictSpec) -> Result<Predicted> {
    let arch = Architecture::from_preset(&spec.preset)?;
    let pred = arch.predict(spec.at.as_deref())?;
    let at = spec.at.clone().unwrap_or_else(|| "preset regime".into());
    let winners = pred.winners.join(", ");
    let q2f = |q: crate::scaling::Q| *q.numer() as f64 / *q.denom() as f64;
    let show = |q: crate::scaling::Q| {
        if *q.denom() == 1 {
            format!("{}", q.numer())
        } else {
            format!("{}/{}", q.numer(), q.denom())
        }
    };
    if spec.quantity == "pstar" {
        let q = pred.p_star_exponent.ok_or_else(|| {
            Error::runtime(format!(
                "the scaling engine finds no aligning pattern for {} at {at}",
                spec.preset
            ))
        })?;
        return Ok(Predicted {
            value: q2f(q),
            exact: show(q),
            description: format!(
                "P* ∝ d^{} ({}, {at}; winner {winners})",
                show(q),
                spec.preset
            ),
        });
    }
    for w in pred.simplest_winners() {
        if let Some(m) = w
            .minimum
            .as_ref()
            .and_then(|m| m.argmin_symbolic.get(&spec.quantity))
        {
            let q = m.exponent(&spec.scale);
            return Ok(Predicted {
                value: q2f(q),
                exact: show(q),
                description: format!(
                    "{} ∝ {}^{} ({}, {at}; winner {})",
                    spec.quantity,
                    spec.scale,
                    show(q),
                    spec.preset,
                    w.name
                ),
            });
        }
    }
    Err(Error::runtime(format!(
        "the winning pattern of {} at {at} ({winners}) has no free parameter `{}` with a symbolic optimum",
        spec.preset, spec.quantity
    )))
}

/// Everything `pstar`, `fit`, `plot` and `reproduce` print and draw, computed from the
/// results directory and its `[analysis]` table.
#[derive(Debug, Clone)]
pub struct Analysed {
    /// P\* per group (when the crossing variable takes at least two values).
    pub pstar: Option<PstarTable>,
    /// The default fit of `[analysis] fit` (P\* vs the group variable unless stated).
    pub fit: Option<ExponentFit>,
    /// The scaling engine's exponent for the same quantity.
    pub predicted: Option<Predicted>,
    /// Why something could not be computed, one sentence each.
    pub notes: Vec<String>,
}

/// Runs the analysis that `data.analysis` describes with `replicates` bootstrap resamples
/// from stream `seed`.
pub fn analyse(data: &StoreData, replicates: usize, seed: u64) -> Analysed {
    let a = &data.analysis;
    let mut boot = Bootstrap::new(seed, replicates);
    let mut notes = vec![data.equilibration_note()];
    notes.extend(data.mu_rule_note());
    let fit_spec = a.fit.clone().unwrap_or(super::sweep::FitSpec {
        y: "pstar".into(),
        x: a.group.clone(),
    });
    if a.pstar == PstarSource::Coexistence {
        notes.push(
            "[analysis] pstar = \"coexistence\" takes P* from the free energy at every grid point, not from this store's crossings: `flscale free-energy EXP --out DIR` reports P*_coex and both spinodals per d, and `flscale pstar`, `fit` and `plot` read them back from DIR".into(),
        );
    }
    let xs_vary = a.pstar == PstarSource::Crossing && {
        let mut v: Vec<f64> = data
            .runs
            .iter()
            .filter_map(|r| coordinate(r, &a.x))
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v.len() >= 2
    };
    let pstar_table = if xs_vary {
        match pstar(data, &PstarQuery::from_analysis(data), &mut boot) {
            Ok(t) => {
                notes.extend(super::pstar::unresolved_notes(&t));
                Some(t)
            }
            Err(e) => {
                notes.push(format!("P* not computed: {e}"));
                None
            }
        }
    } else {
        None
    };
    let fit = if fit_spec.y == "pstar" {
        match &pstar_table {
            Some(t) => match fit_pstar(t) {
                Ok(f) => Some(f),
                Err(e) => {
                    notes.push(format!("no exponent: {e}"));
                    None
                }
            },
            None => None,
        }
    } else {
        match fit_observable(data, &fit_spec.x, &fit_spec.y, &mut boot) {
            Ok(f) => Some(f),
            Err(e) => {
                notes.push(format!("no exponent: {e}"));
                None
            }
        }
    };
    // A prediction is only paired with the fit of the quantity it is about.
    let predicted = match &a.predict {
        Some(p) if (p.quantity == "pstar") != (fit_spec.y == "pstar") => {
            notes.push(format!(
                "[analysis] predict is about {}, the fit about {}; not paired",
                p.quantity, fit_spec.y
            ));
            None
        }
        Some(p) => match predicted_exponent(p) {
            Ok(p) => Some(p),
            Err(e) => {
                notes.push(format!("no prediction: {e}"));
                None
            }
        },
        None => None,
    };
    Analysed {
        pstar: pstar_table,
        fit,
        predicted,
        notes,
    }
}

/// One of the three thresholds the free energies of a sweep give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdKind {
    /// Equal basin weights, ΔF = 0.
    Coexistence,
    /// The lazy minimum disappears.
    SpinodalLazy,
    /// The specialised minimum disappears.
    SpinodalSpec,
}

impl ThresholdKind {
    /// The three, in the order reports list them.
    pub const ALL: [ThresholdKind; 3] = [
        ThresholdKind::Coexistence,
        ThresholdKind::SpinodalLazy,
        ThresholdKind::SpinodalSpec,
    ];

    /// Its name in reports and fits.
    pub fn name(self) -> &'static str {
        match self {
            ThresholdKind::Coexistence => "P*_coex",
            ThresholdKind::SpinodalLazy => "P*_spinodal_lazy",
            ThresholdKind::SpinodalSpec => "P*_spinodal_spec",
        }
    }

    /// The quantity whose zero it is (the `observable` of its [`PstarTable`]).
    fn quantity(self) -> &'static str {
        match self {
            ThresholdKind::Coexistence => "ΔF",
            ThresholdKind::SpinodalLazy => "the lazy minimum's depth",
            ThresholdKind::SpinodalSpec => "the specialised minimum's depth",
        }
    }

    /// This threshold of a row.
    pub fn of(self, row: &CoexistenceRow) -> &Threshold {
        match self {
            ThresholdKind::Coexistence => &row.coexistence,
            ThresholdKind::SpinodalLazy => &row.spinodal_lazy,
            ThresholdKind::SpinodalSpec => &row.spinodal_spec,
        }
    }
}

/// One threshold of every d as the rows [`fit_pstar`] consumes: the threshold's P with the
/// replicates' error and interval, its bracket, resolved only when [`Resolution::Resolved`],
/// and as the curve (P, ΔF) or (P, depth) of the cells where that is finite. A threshold
/// without an error (reports analysed without bootstrap replicates) gets NaN replicates, so
/// that the fit claims no error either. `resolution` is the bracket factor the table states.
pub fn threshold_pstar_table(
    table: &CoexistenceTable,
    kind: ThresholdKind,
    resolution: f64,
) -> PstarTable {
    let rows = table
        .rows
        .iter()
        .map(|r| {
            let t = kind.of(r);
            let reps = if t.err.is_some() {
                t.replicates.clone()
            } else {
                vec![f64::NAN; t.replicates.len()]
            };
            let curve = r
                .cells
                .iter()
                .filter_map(|c| {
                    let y = match kind {
                        ThresholdKind::Coexistence => Some(c.delta_f),
                        ThresholdKind::SpinodalLazy => c.depth_lazy,
                        ThresholdKind::SpinodalSpec => c.depth_spec,
                    }?;
                    y.value.is_finite().then_some((c.p, y.value))
                })
                .collect();
            let value = t.value.map(|v| estimate(v, &reps));
            PstarRow {
                group: r.d,
                curve,
                pstar: value,
                bracket: t.bracket.map(|(lo, hi)| Bracket { lo, hi }),
                combined: value,
                resolved: t.resolution == Resolution::Resolved,
                replicates: reps.clone(),
                combined_replicates: reps,
            }
        })
        .collect();
    PstarTable {
        x: "p".into(),
        group: "d".into(),
        observable: kind.quantity().into(),
        threshold: 0.0,
        resolution,
        rows,
    }
}

/// One threshold's table and its exponent against d.
#[derive(Debug, Clone)]
pub struct ThresholdFit {
    /// Which threshold.
    pub kind: ThresholdKind,
    /// Its rows.
    pub table: PstarTable,
    /// The exponent (None when fewer than two d have a value).
    pub fit: Option<ExponentFit>,
}

/// What `[analysis] pstar = "coexistence"` reports: the thresholds per d, an exponent for each,
/// the scaling engine's prediction and one sentence per value that is not resolved.
#[derive(Debug, Clone)]
pub struct CoexistenceAnalysis {
    /// The thresholds per d.
    pub thresholds: CoexistenceTable,
    /// P\*\_coex, the lazy and the specialised spinodal, each fitted against d.
    pub fits: Vec<ThresholdFit>,
    /// The scaling engine's exponent of P\* (paired with all three).
    pub predicted: Option<Predicted>,
    /// Why a value is only bracketed, extrapolated or missing, or an exponent missing.
    pub notes: Vec<String>,
}

/// Fits an exponent to each of the three thresholds against d with [`fit_pstar`], the rule of
/// the crossing P\* (a bracketed value enters with its bracket's uniform spread), and pairs
/// the prediction of `spec.predict` when it is about P\*. The library half of `[analysis]
/// pstar = "coexistence"`: the caller runs the windows of every cell
/// ([`super::sweep::Sweep::free_energy_plans`]) and builds `table` with
/// [`crate::free_energy::coexistence::coexistence_table`].
pub fn analyse_coexistence(table: CoexistenceTable, spec: &AnalysisSpec) -> CoexistenceAnalysis {
    let mut notes = Vec::new();
    for r in &table.rows {
        for kind in ThresholdKind::ALL {
            let t = kind.of(r);
            if t.resolution != Resolution::Resolved {
                notes.push(format!("d = {}: {} — {}", r.d, kind.name(), t.why));
            }
        }
    }
    let fits = ThresholdKind::ALL
        .iter()
        .map(|&kind| {
            let t = threshold_pstar_table(&table, kind, spec.pstar_resolution);
            let fit = match fit_pstar(&t) {
                Ok(mut f) => {
                    f.what = format!("{} vs {}", kind.name(), t.group);
                    Some(f)
                }
                Err(e) => {
                    notes.push(format!("no exponent of {}: {e}", kind.name()));
                    None
                }
            };
            ThresholdFit {
                kind,
                table: t,
                fit,
            }
        })
        .collect();
    let predicted = match &spec.predict {
        Some(p) if p.quantity == "pstar" => match predicted_exponent(p) {
            Ok(p) => Some(p),
            Err(e) => {
                notes.push(format!("no prediction: {e}"));
                None
            }
        },
        _ => None,
    };
    CoexistenceAnalysis {
        thresholds: table,
        fits,
        predicted,
        notes,
    }
}

/// "measured 1.03 ± 0.08 (95 % CI 0.91 … 1.19), predicted 1" — the line every report prints.
pub fn side_by_side(fit: &ExponentFit, predicted: Option<&Predicted>) -> String {
    let e = &fit.exponent;
    let mut s = format!("{}: measured exponent {:.3}", fit.what, e.value);
    if let Some(err) = e.err {
        s += &format!(" ± {err:.3}");
    }
    if let (Some(lo), Some(hi)) = (e.lo, e.hi) {
        s += &format!(" (95 % CI {lo:.3} … {hi:.3})");
    }
    if let Some(b) = &fit.without_bracket {
        if let (Some(err), Some(lo), Some(hi)) = (b.err, b.lo, b.hi) {
            s += &format!(
                " [the grid's brackets included; seeds and chains alone ± {err:.3}, {lo:.3} … {hi:.3}]"
            );
        }
    }
    match predicted {
        Some(p) => s += &format!(", predicted {} — {}", p.exact, p.description),
        None => s += ", no prediction configured",
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::store::{ChainValues, RunData};
    use super::super::sweep::DEFAULT_RESOLUTION;
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::BTreeMap;

    /// Synthetic sweep: A_f(P, d) = 0.05·(P/d)^0.7 per chain, times 1 + 10 % noise, so
    /// P*(d) = d·2^{1/0.7} ∝ d¹ exactly in expectation.
    fn synthetic(ds: &[f64], ratios: &[f64], chains: usize) -> StoreData {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut runs = Vec::new();
        for &d in ds {
            for &r in ratios {
                let p = r * d;
                let chains: Vec<ChainValues> = (0..chains)
                    .map(|k| {
                        let a = 0.05 * r.powf(0.7) * (1.0 + 0.1 * (rng.random::<f64>() - 0.5));
                        ChainValues {
                            chain: k,
                            ok: true,
                            alignment: Some(a),
                            test_mse: Some(1.0 - a),
                            r_overlap2: Some(a * a),
                            outliers: Some(d.sqrt() * (1.0 + 0.05 * rng.random::<f64>())),
                            mu: None,
                        }
                    })
                    .collect();
                let mut coords = BTreeMap::new();
                coords.insert("d".to_string(), d);
                coords.insert("p".to_string(), p);
                coords.insert("n1".to_string(), d);
                runs.push(RunData::synthetic(runs.len(), coords, chains));
            }
        }
        StoreData::of_runs(runs)
    }

    fn query(x: &str, group: &str) -> PstarQuery {
        PstarQuery {
            x: x.into(),
            group: group.into(),
            observable: "alignment".into(),
            threshold: 0.1,
            falling: false,
            resolution: DEFAULT_RESOLUTION,
        }
    }

    #[test]
    fn pstar_and_its_exponent_on_synthetic_data() {
        let data = synthetic(&[10.0, 20.0, 40.0, 80.0], &[1.0, 2.0, 4.0, 8.0, 16.0], 30);
        let mut boot = Bootstrap::new(0, 300);
        let t = pstar(&data, &query("p", "d"), &mut boot).unwrap();
        assert_eq!(t.rows.len(), 4);
        for r in &t.rows {
            let e = r.pstar.unwrap();
            let exact = r.group * 2f64.powf(1.0 / 0.7);
            // Interpolation in log P of a power law is exact up to the noise.
            assert!((e.value / exact - 1.0).abs() < 0.05, "{e:?} vs {exact}");
            assert!(e.err.unwrap() > 0.0);
        }
        let f = fit_pstar(&t).unwrap();
        assert!((f.exponent.value - 1.0).abs() < 0.03, "{f:?}");
        let (lo, hi) = (f.exponent.lo.unwrap(), f.exponent.hi.unwrap());
        // The grid's factor-2 brackets dominate the interval (each crossing ± ln 2/√12 = 20 %
        // in P*): 1 inside, and far wider than the bootstrap over chains alone.
        assert!(lo < 1.0 && hi > 1.0 && hi - lo > 0.3, "{lo} {hi}");
        let b = f.without_bracket.unwrap();
        let (blo, bhi) = (b.lo.unwrap(), b.hi.unwrap());
        assert!(
            blo < 1.0 + 0.03 && bhi > 1.0 - 0.03 && bhi - blo < 0.2,
            "{blo} {bhi}"
        );
        // Same seed, same numbers.
        let mut boot2 = Bootstrap::new(0, 300);
        let t2 = pstar(&data, &query("p", "d"), &mut boot2).unwrap();
        assert_eq!(t, t2);
        // Outliers ∝ √d (here √N): exponent 1/2.
        let mut boot = Bootstrap::new(0, 200);
        let g = fit_observable(&data, "n1", "outliers", &mut boot).unwrap();
        assert!((g.exponent.value - 0.5).abs() < 0.02, "{g:?}");
        let e = fit_observable(&data, "n1", "energy", &mut boot).unwrap_err();
        assert!(e.to_string().contains("energy"), "{e}");
        let e = pstar(&data, &query("q", "d"), &mut boot).unwrap_err();
        assert!(e.to_string().contains("`q`"), "{e}");
    }

    /// fig2c's situation (session 13): of three widths one run's starts disagree, so the
    /// outlier exponent would rest on two points. No exponent is claimed; the warning names
    /// the left-out width and what to run. With the third width equilibrated it is claimed.
    #[test]
    fn an_observable_fit_on_two_equilibrated_points_claims_no_exponent() {
        let mut data = synthetic(&[20.0, 40.0, 80.0], &[4.0], 8);
        data.runs[2].equilibrated = Some(false);
        let mut boot = Bootstrap::new(0, 100);
        let f = fit_observable(&data, "n1", "outliers", &mut boot).unwrap();
        assert_eq!(f.points.len(), 2, "{f:?}");
        let w = observable_fit_readiness(&f, &data, "n1", "outliers", "runs/fig2c");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("rests on 2 value(s) of n1 (needs 3)")
                && w[0].contains("n1 = 80 left out as unequilibrated")
                && w[0].contains("runs/fig2c")
                && !w[0].contains("add "),
            "{w:?}"
        );
        let line = claim_sentence(&f, None, w.is_empty());
        assert!(
            line.contains("no exponent claimed from 2 point(s)") && !line.contains("measured"),
            "{line}"
        );
        // A width that was never run is asked for as a new grid value.
        let two = synthetic(&[20.0, 40.0], &[4.0], 8);
        let f2 = fit_observable(&two, "n1", "outliers", &mut boot).unwrap();
        let w2 = observable_fit_readiness(&f2, &two, "n1", "outliers", "runs/x");
        assert!(w2[0].contains("add 1 value(s) of n1"), "{w2:?}");
        data.runs[2].equilibrated = Some(true);
        let f3 = fit_observable(&data, "n1", "outliers", &mut boot).unwrap();
        assert!(observable_fit_readiness(&f3, &data, "n1", "outliers", "runs/fig2c").is_empty());
        assert!(claim_sentence(&f3, None, true).contains("measured exponent"));
        // With one equilibrated width left the fit refuses, and says why.
        data.runs[1].equilibrated = Some(false);
        data.runs[2].equilibrated = Some(false);
        let e = fit_observable(&data, "n1", "outliers", &mut boot)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("at 1 value(s) of n1") && e.contains("2 run(s) were left out"),
            "{e}"
        );
    }

    /// Cells of a sweep whose free energies are known: with h = b·ln(P/P0(d)), P0 = c·d^α,
    /// ΔF = −2h, and the depths of the two minima D = 5·(h_c ∓ h)^{3/2} (the fold's 3/2 law,
    /// exact here) up to the folds at h = ±h_c, beyond which one basin is left. Every threshold
    /// is a fixed multiple of P0 (P0, P0·e^{h_c/b}, P0·e^{−h_c/b}), so each has exponent α.
    #[test]
    fn the_three_thresholds_feed_the_same_exponent_fit() {
        use crate::free_energy::analysis::Estimate as FeEstimate;
        use crate::free_energy::coexistence::{
            coexistence_table, CellBasins, CellSummary, CoexistenceOptions, Side,
        };
        let (b, c, alpha, h_c) = (0.5, 2.0, 1.5, 0.4);
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let mut noisy = |v: f64, e: f64| FeEstimate {
            value: v + e * (rng.random::<f64>() - 0.5) * 3f64.sqrt() * 2.0,
            err: Some(e),
        };
        let mut cells = Vec::new();
        for d in [8.0, 16.0, 32.0, 64.0] {
            let p0 = c * f64::powf(d, alpha);
            for k in 0..11 {
                let h = -0.525 + 0.105 * k as f64;
                let p = p0 * (h / b).exp();
                let basins = if h >= h_c {
                    CellBasins::One { min_s: 0.9 }
                } else if h <= -h_c {
                    CellBasins::One { min_s: 0.05 }
                } else {
                    let df = -2.0 * h;
                    let wl = 1.0 / (1.0 + (-df).exp());
                    let (dl, ds) = (5.0 * (h_c - h).powf(1.5), 5.0 * (h_c + h).powf(1.5));
                    let side = |min_s: f64, w: f64, depth: FeEstimate| Side {
                        min_s,
                        weight: FeEstimate {
                            value: w,
                            err: Some(0.005),
                        },
                        depth,
                    };
                    CellBasins::Two {
                        lazy: side(0.05, wl, noisy(dl, 0.01)),
                        spec: side(0.9, 1.0 - wl, noisy(ds, 0.01)),
                    }
                };
                cells.push(CellSummary { d, p, basins });
            }
        }
        let table = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
        let spec = AnalysisSpec {
            predict: Some(PredictSpec {
                preset: "fcn2-erf-he3".into(),
                at: Some("N=d".into()),
                quantity: "pstar".into(),
                scale: "d".into(),
            }),
            ..AnalysisSpec::default()
        };
        let a = analyse_coexistence(table, &spec);
        assert_eq!(a.fits.len(), 3);
        let names: Vec<&str> = a.fits.iter().map(|f| f.kind.name()).collect();
        assert_eq!(names, ["P*_coex", "P*_spinodal_lazy", "P*_spinodal_spec"]);
        for (f, factor) in a.fits.iter().zip([1.0, (h_c / b).exp(), (-h_c / b).exp()]) {
            assert_eq!(f.table.rows.len(), 4);
            for r in &f.table.rows {
                let v = r.pstar.unwrap().value;
                let want = factor * c * r.group.powf(alpha);
                assert!(
                    (v / want).ln().abs() < 0.03,
                    "{}: {v} vs {want}",
                    f.kind.name()
                );
                assert!(r.resolved, "{:?}", f.kind);
            }
            let fit = f.fit.as_ref().unwrap();
            assert_eq!(fit.what, format!("{} vs d", f.kind.name()));
            let e = fit.exponent;
            assert!((e.value - alpha).abs() < 0.02, "{}: {e:?}", f.kind.name());
            assert!(e.err.unwrap() > 0.0 && e.lo.unwrap() < alpha && alpha < e.hi.unwrap());
        }
        assert_eq!(a.predicted.as_ref().unwrap().value, 1.0);
        assert!(a.notes.is_empty(), "{:?}", a.notes);
        assert!(
            side_by_side(a.fits[0].fit.as_ref().unwrap(), a.predicted.as_ref())
                .starts_with("P*_coex vs d: measured exponent ")
        );
    }

    #[test]
    fn the_engine_predicts_pstar_linear_in_d_and_m_as_sqrt_n() {
        let p = predicted_exponent(&PredictSpec {
            preset: "fcn2-erf-he3".into(),
            at: Some("N=d".into()),
            quantity: "pstar".into(),
            scale: "d".into(),
        })
        .unwrap();
        assert_eq!(p.value, 1.0, "{p:?}");
        let m = predicted_exponent(&PredictSpec {
            preset: "fcn2-erf-he3".into(),
            at: Some("N=d".into()),
            quantity: "M".into(),
            scale: "N".into(),
        })
        .unwrap();
        assert_eq!(m.value, 0.5, "{m:?}");
    }
}
