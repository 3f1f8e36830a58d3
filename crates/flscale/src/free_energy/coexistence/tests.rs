use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use super::super::analysis::{
    Barrier, Basin as ReportBasin, Diagnostics, Estimate, FreeEnergyReport, Profile,
};
use super::spinodal::fold_root;
use super::*;

/// A two-basin cell with ΔF = `df` ± `err`: w_lazy = 1/(1 + e^{−ΔF}), w_spec = 1 − w_lazy,
/// and weight errors σ_w = err·w_lazy·w_spec, which the delta method turns back into `err`.
fn two(d: f64, p: f64, df: f64, err: f64) -> CellSummary {
    let wl = 1.0 / (1.0 + (-df).exp());
    let ws = 1.0 - wl;
    let side = |min_s: f64, w: f64| Side {
        min_s,
        weight: Estimate {
            value: w,
            err: Some(err * wl * ws),
        },
        depth: Estimate {
            value: 3.0,
            err: Some(0.1),
        },
    };
    CellSummary {
        d,
        p,
        basins: CellBasins::Two {
            lazy: side(0.05, wl),
            spec: side(0.8, ws),
        },
    }
}

fn gaussian(rng: &mut ChaCha8Rng) -> f64 {
    rng.sample::<f64, _>(StandardNormal)
}

/// ΔF(P) = a·ln(P0/P) per d with P0 = c·d^α, measured with noise σ = 0.1 on a grid that
/// never hits P0: P\*_coex recovers P0 within its errors, the errors are what σ/a gives, and
/// ln P\* against ln d has slope α.
#[test]
fn coexistence_recovers_a_known_root_and_its_exponent() {
    let (a, c, alpha, sigma) = (2.0, 3.0, 1.5, 0.1);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let ds = [8.0, 16.0, 32.0, 64.0];
    let mut cells = Vec::new();
    for &d in &ds {
        let p0: f64 = c * f64::powf(d, alpha);
        for k in -2..=2 {
            let p = p0 * 1.2 * 1.5f64.powi(k);
            let df = a * (p0 / p).ln() + sigma * gaussian(&mut rng);
            cells.push(two(d, p, df, sigma));
        }
    }
    cells.reverse();
    let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
    assert_eq!(t.rows.len(), 4);
    let mut pts = Vec::new();
    for r in &t.rows {
        let p0 = c * r.d.powf(alpha);
        let x = &r.coexistence;
        assert_eq!(x.resolution, Resolution::Resolved, "{}", x.why);
        let (v, e) = (x.value.unwrap(), x.err.unwrap());
        // Linear interpolation of a·ln(P0/P) in ln P is exact, so only the noise is left:
        // σ_lnP ≈ σ/a·(interpolation weights) ∈ [0.035, 0.05].
        assert!((v - p0).abs() < 4.0 * e, "{v} ± {e} vs {p0}");
        assert!(e / v > 0.02 && e / v < 0.08, "{e} {v}");
        let (lo, hi) = x.interval.unwrap();
        assert!(lo < p0 && p0 < hi, "{lo} {hi} {p0}");
        let (blo, bhi) = x.bracket.unwrap();
        assert!((blo / (0.8 * p0) - 1.0).abs() < 1e-12 && (bhi / (1.2 * p0) - 1.0).abs() < 1e-12);
        assert!(x.why.contains("interpolated linearly in ln P"), "{}", x.why);
        pts.push((r.d.ln(), v.ln()));
    }
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>()
        / pts.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
    assert!((slope - alpha).abs() < 0.05, "{slope}");
    // The same seed gives the same table (compared as text: unresolved spinodals hold NaN
    // replicates); another seed other replicates.
    let again = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
    assert!(format!("{t:?}") == format!("{again:?}"));
    let other = CoexistenceOptions {
        seed: 9,
        ..CoexistenceOptions::default()
    };
    let other = coexistence_table(&cells, &other).unwrap();
    assert_ne!(
        t.rows[0].coexistence.replicates,
        other.rows[0].coexistence.replicates
    );
}

/// F(s) = A·(s⁴/4 − s²/2 − h·s) on 400 bins of [−2, 2] as a report: basins at the interior
/// local minima, split at the highest bin between them (half its weight to each side),
/// weights by summing e^{−F}, F errors `f_err`.
fn double_well_report(h: f64, amplitude: f64, f_err: f64) -> FreeEnergyReport {
    let n = 400;
    let s: Vec<f64> = (0..n)
        .map(|i| -2.0 + (i as f64 + 0.5) * 4.0 / n as f64)
        .collect();
    let raw: Vec<f64> = s
        .iter()
        .map(|&x| amplitude * (x.powi(4) / 4.0 - x * x / 2.0 - h * x))
        .collect();
    let fmin = raw.iter().copied().fold(f64::INFINITY, f64::min);
    let f: Vec<f64> = raw.iter().map(|x| x - fmin).collect();
    let mins: Vec<usize> = (1..n - 1)
        .filter(|&i| f[i] <= f[i - 1] && f[i] < f[i + 1])
        .collect();
    let tops: Vec<usize> = mins
        .windows(2)
        .map(|w| {
            (w[0]..=w[1])
                .max_by(|&a, &b| f[a].total_cmp(&f[b]))
                .unwrap()
        })
        .collect();
    let z: f64 = f.iter().map(|x| (-x).exp()).sum();
    let mass = |a: usize, b: usize| -> f64 {
        (a..=b)
            .map(|i| {
                let half = (i == a && a != 0) || (i == b && b != n - 1);
                (-f[i]).exp() * if half { 0.5 } else { 1.0 }
            })
            .sum::<f64>()
            / z
    };
    let mut edges = vec![0];
    edges.extend(&tops);
    edges.push(n - 1);
    let basins: Vec<ReportBasin> = mins
        .iter()
        .enumerate()
        .map(|(k, &m)| ReportBasin {
            lo: s[edges[k]],
            hi: s[edges[k + 1]],
            min_s: s[m],
            weight: mass(edges[k], edges[k + 1]),
            weight_err: Some(0.01),
            observables: Vec::new(),
        })
        .collect();
    let barrier = (basins.len() == 2).then(|| {
        let top = tops[0];
        let (fa, fb) = (f[mins[0]], f[mins[1]]);
        let e = Some(f_err * 2f64.sqrt());
        Barrier {
            basins: (0, 1),
            top_s: s[top],
            height: Estimate {
                value: f[top] - fa.min(fb),
                err: e,
            },
            height_from_shallower: Estimate {
                value: f[top] - fa.max(fb),
                err: e,
            },
        }
    });
    FreeEnergyReport {
        profile: Profile {
            s: s.clone(),
            f: f.iter().map(|&x| Some(x)).collect(),
            f_err: vec![Some(f_err); n],
        },
        basins,
        barrier,
        observables: Vec::new(),
        diagnostics: Diagnostics {
            f_k: Vec::new(),
            f_k_err: Vec::new(),
            overlap: Vec::new(),
            order: Vec::new(),
            neighbour_overlap: Vec::new(),
            kish_ess: Vec::new(),
            unbiased_kish_ess: 0.0,
            tau: Vec::new(),
            ess: Vec::new(),
            block_length: Vec::new(),
            replicates_used: 0,
            chain_rhat: Vec::new(),
        },
        notes: Vec::new(),
    }
}

/// The double-well family F_P(s) = A·(s⁴/4 − s²/2 − h(P)·s), h = b·ln(P/P0): the left
/// (lazy) minimum disappears at h = +2/(3√3), the right one at h = −2/(3√3) (F′ = s³ − s − h
/// and F″ = 3s² − 1 vanish together at s = ∓1/√3), and the two have equal weight at h = 0 by
/// the symmetry s → −s. Those exact folds are the independent values the spinodals must hit.
#[test]
fn spinodals_of_a_double_well_family_hit_its_exact_folds() {
    let (amplitude, b, p0, d) = (20.0, 0.5, 100.0, 10.0);
    let h_c = 2.0 / (3.0 * 3f64.sqrt());
    let cells: Vec<CellSummary> = (0..12)
        .map(|k| {
            let h = -0.55 + 0.1 * k as f64;
            let p = p0 * (h / b).exp();
            CellSummary::from_report(d, p, &double_well_report(h, amplitude, 0.05)).unwrap()
        })
        .collect();
    // Beyond ±h_c one basin is left.
    assert!(matches!(cells[0].basins, CellBasins::One { .. }));
    assert!(matches!(cells[11].basins, CellBasins::One { .. }));
    assert!(matches!(cells[2].basins, CellBasins::Two { .. }));
    let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
    let r = &t.rows[0];
    assert_eq!(r.cells[0].phases, Phases::Lazy);
    assert_eq!(r.cells[11].phases, Phases::Spec);
    // Coexistence: the grid is symmetric about h = 0, so the interpolated root is P0.
    let coex = r.coexistence.value.unwrap();
    assert!((coex / p0 - 1.0).abs() < 1e-9, "{coex}");
    assert_eq!(r.coexistence.resolution, Resolution::Resolved);
    let exact_lazy = p0 * (h_c / b).exp();
    let exact_spec = p0 * (-h_c / b).exp();
    for (th, exact) in [
        (&r.spinodal_lazy, exact_lazy),
        (&r.spinodal_spec, exact_spec),
    ] {
        assert_eq!(th.resolution, Resolution::Resolved, "{}", th.why);
        let v = th.value.unwrap();
        // The 3/2 law through the two cells nearest the fold (h = 0.25, 0.35): within 0.003
        // of h_c, i.e. 0.6 % in P at b = 0.5.
        assert!((v / exact).ln().abs() < 0.008, "{v} vs {exact}: {}", th.why);
        let (lo, hi) = th.interval.unwrap();
        assert!(lo <= exact && exact <= hi, "{lo} {hi} {exact}");
        let (blo, bhi) = th.bracket.unwrap();
        assert!(blo < exact && exact < bhi, "{blo} {bhi}");
        assert!(th.why.contains("inside the bracket"), "{}", th.why);
    }
    assert!(exact_spec < coex && coex < exact_lazy);
}

/// A sign change next to a single-basin cell is only bracketed, and so is a spinodal with
/// one measured depth before it; a minimum that never disappears and has one depth says
/// nothing.
#[test]
fn single_basin_cells_count_and_bracket() {
    let spec_only = CellSummary {
        d: 8.0,
        p: 20.0,
        basins: CellBasins::One { min_s: 0.85 },
    };
    let cells = [two(8.0, 10.0, 1.0, 0.1), spec_only];
    let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
    let r = &t.rows[0];
    assert_eq!(r.cells[1].phases, Phases::Spec);
    assert_eq!(r.cells[1].delta_f.value, f64::NEG_INFINITY);
    let c = &r.coexistence;
    assert_eq!(c.resolution, Resolution::Bracketed);
    assert_eq!(c.bracket, Some((10.0, 20.0)));
    assert!((c.value.unwrap() - 200f64.sqrt()).abs() < 1e-9);
    // Uniform in ln P over the bracket: sd of ln P* = ln 2/√12.
    let sd_ln = (c.err.unwrap() / c.value.unwrap()).abs();
    assert!((sd_ln - 2f64.ln() / 12f64.sqrt()).abs() < 0.02, "{sd_ln}");
    assert!(c
        .replicates
        .iter()
        .all(|&x| x > 10.0 - 1e-9 && x < 20.0 + 1e-9));
    assert!(c.why.contains("a single basin at P = 20"), "{}", c.why);
    let l = &r.spinodal_lazy;
    assert_eq!(l.resolution, Resolution::Bracketed, "{}", l.why);
    assert_eq!(l.bracket, Some((10.0, 20.0)));
    let s = &r.spinodal_spec;
    assert_eq!(s.resolution, Resolution::Unresolved, "{}", s.why);
    assert_eq!(s.value, None);
    assert!(s.why.contains("extend the grid below P = 10"), "{}", s.why);
    assert!(s.replicates.iter().all(|x| x.is_nan()));
}

/// A lazy minimum that exists at every P but grows shallower is extrapolated beyond the
/// grid along depth^(2/3); cells without weight errors give values without errors.
#[test]
fn a_fold_beyond_the_grid_is_extrapolated_and_missing_errors_stay_missing() {
    let with_depth = |p: f64, df: f64, lazy_depth: f64| {
        let mut c = two(8.0, p, df, 0.1);
        if let CellBasins::Two { lazy, .. } = &mut c.basins {
            lazy.depth = Estimate {
                value: lazy_depth,
                err: Some(0.01),
            };
        }
        c
    };
    let cells = [
        with_depth(10.0, 1.0, 3.0),
        with_depth(20.0, -0.5, 2.0),
        with_depth(40.0, -1.0, 1.0),
    ];
    let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
    let l = &t.rows[0].spinodal_lazy;
    assert_eq!(l.resolution, Resolution::Extrapolated, "{}", l.why);
    // D^{2/3} = 2^{2/3} at P = 20 and 1 at P = 40: zero at ln P = ln 40 + ln 2/(2^{2/3} − 1).
    let want = 40.0 * 2f64.powf(1.0 / (2f64.powf(2.0 / 3.0) - 1.0));
    assert!((l.value.unwrap() / want - 1.0).abs() < 1e-12, "{l:?}");
    assert!(l.replicates.iter().all(|&x| x >= 40.0 * (1.0 - 1e-12)));
    assert!(l.err.unwrap() > 0.0 && l.bracket.is_none());
    assert!(l.why.contains("beyond the grid"), "{}", l.why);
    // A depth that barely falls over the last two cells extrapolates decades away: unresolved,
    // not a number with an astronomical error.
    let slow = [
        with_depth(10.0, 1.0, 3.0),
        with_depth(20.0, -0.5, 2.0),
        with_depth(40.0, -1.0, 1.99),
    ];
    let s = coexistence_table(&slow, &CoexistenceOptions::default()).unwrap();
    let l = &s.rows[0].spinodal_lazy;
    assert_eq!(l.resolution, Resolution::Unresolved, "{}", l.why);
    assert!(l.value.is_none() && l.err.is_none(), "{l:?}");
    assert!(l.why.contains("extend the grid above P = 40"), "{}", l.why);
    let mut bare = cells;
    for c in &mut bare {
        if let CellBasins::Two { lazy, spec } = &mut c.basins {
            lazy.weight.err = None;
            spec.weight.err = None;
        }
    }
    let t = coexistence_table(&bare, &CoexistenceOptions::default()).unwrap();
    let c = &t.rows[0].coexistence;
    assert_eq!(c.resolution, Resolution::Resolved);
    assert!(c.value.is_some() && c.err.is_none() && c.interval.is_none());
    assert!(c.why.contains("no weight error"), "{}", c.why);
}

/// Repeats at one P are averaged; their error is the spread between them when that is
/// larger than the within-run errors, and the within-run error of the mean otherwise.
#[test]
fn repeats_are_averaged_with_the_larger_error() {
    let cells = [
        two(8.0, 10.0, 0.6, 0.01),
        two(8.0, 10.0, 1.0, 0.01),
        two(8.0, 10.0, 1.4, 0.01),
        two(8.0, 20.0, -1.0, 0.3),
        two(8.0, 20.0, -1.0, 0.3),
    ];
    let t = coexistence_table(&cells, &CoexistenceOptions::default()).unwrap();
    let r = &t.rows[0];
    assert_eq!(r.cells.len(), 2);
    let (a, b) = (r.cells[0].delta_f, r.cells[1].delta_f);
    assert!((a.value - 1.0).abs() < 1e-9 && (b.value + 1.0).abs() < 1e-9);
    // Spread 0.4 between three repeats: 0.4/√3 > √3·0.01/3.
    assert!((a.err.unwrap() - 0.4 / 3f64.sqrt()).abs() < 1e-9, "{a:?}");
    // Identical repeats: the within-run error of the mean, 0.3/√2.
    assert!((b.err.unwrap() - 0.3 / 2f64.sqrt()).abs() < 1e-9, "{b:?}");
    // ΔF is linear in ln P between them: the root is the geometric midpoint.
    let v = r.coexistence.value.unwrap();
    assert!((v - 200f64.sqrt()).abs() < 1e-9, "{v}");
}

#[test]
fn bad_cells_and_grids_are_refused_in_one_sentence() {
    let opts = CoexistenceOptions::default();
    let check = |cells: &[CellSummary], want: &str| {
        let e = coexistence_table(cells, &opts).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want) && !msg.contains('\n'), "{msg}");
        assert_eq!(crate::Error::from(e).exit_code(), 2);
    };
    check(
        &[two(8.0, 10.0, 1.0, 0.1), two(16.0, 10.0, 1.0, 0.1)],
        "d = 8 has free energies at 1 value(s) of P",
    );
    check(
        &[two(8.0, 10.0, 1.0, 0.1), two(8.0, 20.0, 0.5, 0.1)],
        "is positive at every measured P at d = 8 (P = 10 to 20",
    );
    check(
        &[two(8.0, 10.0, -1.0, 0.1), two(8.0, 20.0, -0.5, 0.1)],
        "extend the grid below P = 10",
    );
    check(
        &[two(8.0, 10.0, 1.0, 0.1), two(8.0, 10.0, -1.0, 0.1)],
        "d = 8 has free energies at 1 value(s) of P",
    );
    let lazy_only = CellSummary {
        d: 8.0,
        p: 20.0,
        basins: CellBasins::One { min_s: 0.05 },
    };
    check(
        &[
            two(8.0, 10.0, 1.0, 0.1),
            two(8.0, 20.0, -1.0, 0.1),
            lazy_only,
        ],
        "the 2 repeats at d = 8, P = 20 disagree on which minima exist (both, lazy)",
    );
    check(&[], "no free-energy cell");
    check(&[two(8.0, -1.0, 1.0, 0.1)], "d and P must be finite");
    let mut zero = two(8.0, 10.0, 1.0, 0.1);
    if let CellBasins::Two { lazy, .. } = &mut zero.basins {
        lazy.weight.value = 0.0;
    }
    check(
        &[zero, two(8.0, 20.0, -1.0, 0.1)],
        "the lazy basin at d = 8, P = 10",
    );
    let mut empty = double_well_report(0.0, 20.0, 0.05);
    empty.basins.clear();
    let e = CellSummary::from_report(8.0, 10.0, &empty).unwrap_err();
    assert!(e.to_string().contains("has no basin"), "{e}");
}

/// The 3/2 law is exact for the fold's normal form, so two cells anywhere before the fold
/// give it exactly; a depth that rises towards the grid's end gives no fold.
#[test]
fn the_fold_of_the_normal_form_is_exact() {
    let depth = |t: f64| 4.0 / 3.0 * (0.7 - t).powf(1.5);
    let t0 = fold_root(0.1, depth(0.1), 0.4, depth(0.4)).unwrap();
    assert!((t0 - 0.7).abs() < 1e-12, "{t0}");
    assert_eq!(fold_root(0.1, 1.0, 0.4, 2.0), None);
    assert_eq!(fold_root(0.1, 1.0, 0.4, 0.0), Some(0.4));
}
