//! Every fixed point of the adaptive-kernel map (b, c) ↦ G(b, c) at one P, with its stability.
//!
//! G is one undamped step of [`super::adaptive`] (blog §"Match the residual to the network's
//! prediction": p(ρ | b, c), the kernel K(b, c), r̄ = T(K + T·I)⁻¹y, the least-squares
//! projection onto H1, H3). `solve` iterates G with damping from two starts and so finds only
//! fixed points that attract the damped iteration, and only from those two basins. Here the
//! roots of g = G − id are enumerated on a grid over a rectangle that provably contains every
//! fixed point ([`map_range`]), refined by Newton ([`super::roots2d`]), and classified by the
//! eigenvalues λ of the Jacobian ∂G:
//!
//! * the damped iteration x ← x + η(G(x) − x) has Jacobian I + η(∂G − I), eigenvalues
//!   1 − η(1 − λ); it converges for some η ∈ (0, 1] iff Re λ < 1 for both λ, and for exactly
//!   the η < min_λ 2·Re(1 − λ)/|1 − λ|² (`max_stable_damping`); the undamped one iff |λ| < 1;
//! * the index sign det(I − ∂G) is +1 at attracting and repelling points and −1 at saddles
//!   (one real λ above 1, one below). A saddle between two attracting fixed points is the
//!   signature of a first-order transition (coexisting phases separated by a barrier).
//!
//! Completeness check (derived here): G maps the whole plane into the rectangle
//! B = [−B_b, B_b] × [−B_c, B_c] of [`map_range`], and the search rectangle B' contains B in its
//! interior, so the homotopy x − tG(x), t ∈ [0, 1], has no zero on ∂B' and the Brouwer degree
//! of id − G on B' is that of id, 1. With all fixed points nondegenerate the sum of their
//! indices sign det(I − ∂G) is therefore 1 (`index_sum`); a missed single fixed point shows as
//! a different sum (a missed pair of opposite indices does not).

use rayon::prelude::*;
use serde::Serialize;

use super::adaptive::{finish, map_step, AdaptiveParams, Branch, FixedPoint, FreeEnergy, Prepared};
use super::overlap_posterior::overlap_posterior;
use super::phase_at::PhaseAtFixedPoint;
use super::potential::FiniteModel;
use super::roots2d::{find_roots, Rect, Root, RootSettings, Unresolved};
use super::sampled_kernel::Points;
use super::solver::Method;
use crate::error::{Error, Result};

/// Relative margin of the default search rectangle beyond [`map_range`] (so that no fixed point
/// lies on its boundary).
pub const RANGE_MARGIN: f64 = 0.02;

/// Largest grid (nodes per axis).
pub const MAX_GRID: usize = 2000;

/// The bounds |b'| ≤ B_b, |c'| ≤ B_c on every value (b', c') = G(b, c) of the map.
///
/// Derived here: K is positive semi-definite, so r̄ = T(K + T·I)⁻¹y has |r̄| ≤ |y| (the
/// eigenvalues of T(K + T·I)⁻¹ lie in (0, 1]). The projection is (b', c') = (AᵀA)⁻¹Aᵀr̄ with A
/// the P × 2 matrix of H1(z), H3(z) on the training set, so
/// |b'| ≤ |row 1 of (AᵀA)⁻¹Aᵀ|·|r̄| = √((AᵀA)⁻¹)₁₁·|r̄|, hence
/// B_b = √((AᵀA)⁻¹)₁₁·|y| and B_c = √((AᵀA)⁻¹)₂₂·|y|. For large P, B_b → √E[y²] = √(1 + 6ε²)
/// and B_c → √(E[y²]/6).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MapRange {
    /// B_b.
    pub b_max: f64,
    /// B_c.
    pub c_max: f64,
}

/// The [`MapRange`] of the map on a training set with targets `y`.
fn map_range_of(z: &[f64], y: &[f64]) -> MapRange {
    let (mut a11, mut a12, mut a22) = (0.0, 0.0, 0.0);
    for &z in z {
        let (h1, h3) = (z, z * z * z - 3.0 * z);
        a11 += h1 * h1;
        a12 += h1 * h3;
        a22 += h3 * h3;
    }
    let det = a11 * a22 - a12 * a12;
    let y_norm = y.iter().map(|v| v * v).sum::<f64>().sqrt();
    MapRange {
        b_max: (a22 / det).sqrt() * y_norm,
        c_max: (a11 / det).sqrt() * y_norm,
    }
}

/// The [`MapRange`] for the training set of `prm` (P points of seed `prm.seed`).
pub fn map_range(prm: &AdaptiveParams) -> Result<MapRange> {
    prm.validate()?;
    let train = Points::sample(prm.d, prm.p, prm.seed, 0);
    Ok(map_range_of(&train.z, &train.targets(prm.eps)))
}

/// Search settings of [`fixed_points`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FixedPointOptions {
    /// Range of b; `None`: ±(1 + [`RANGE_MARGIN`])·B_b ([`map_range`]).
    pub b_range: Option<(f64, f64)>,
    /// Range of c; `None`: ±(1 + [`RANGE_MARGIN`])·B_c.
    pub c_range: Option<(f64, f64)>,
    /// Grid nodes per axis.
    pub grid: usize,
    /// Also run `solve`'s damped iteration from both starts and match its results.
    pub with_damped: bool,
}

/// An eigenvalue of ∂G.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Eigenvalue {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

/// What a fixed point is for the iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stability {
    /// Re λ < 1 for both eigenvalues: the damped iteration converges to it for small η.
    Attracting,
    /// One real eigenvalue above 1 and one below: unstable for every damping.
    Saddle,
    /// Re λ > 1 for both: unstable for every damping.
    Repelling,
    /// det(I − ∂G) ≈ 0: a fold (two fixed points merging) within the Jacobian's accuracy.
    Degenerate,
}

/// One fixed point of G.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FixedPointSolution {
    /// Linear residual coefficient.
    pub b: f64,
    /// Cubic residual coefficient.
    pub c: f64,
    /// R = E[ρ²] under p(ρ | b, c).
    pub r: f64,
    /// Expected neurons per network with |ρ| > 3σ_w/√D.
    pub outliers: f64,
    /// Centre drive X (U''(0) ∝ 1 − X).
    pub centre_drive: f64,
    /// Test MSE of the mean predictor.
    pub test_mse: f64,
    /// Test MSE / E[y²].
    pub test_mse_relative: f64,
    /// The adaptive-kernel free energy ([`FreeEnergy`]).
    pub free_energy: FreeEnergy,
    /// max(|G_b − b|, |G_c − c|) at the reported point.
    pub residual: f64,
    /// ∂G (central differences), rows (b', c'), columns (b, c).
    pub jacobian: [[f64; 2]; 2],
    /// Its eigenvalues.
    pub eigenvalues: [Eigenvalue; 2],
    /// sign det(I − ∂G): +1 attracting or repelling, −1 saddle, 0 degenerate.
    pub index: i32,
    /// The classification.
    pub stability: Stability,
    /// Whether the undamped iteration (η = 1) converges to it (|λ| < 1).
    pub stable_undamped: bool,
    /// The damped iteration converges to it for η below this (`None` unless attracting).
    pub max_stable_damping: Option<f64>,
    /// Grid cells whose Newton run ended here.
    pub cells: usize,
    /// The phase at this fixed point ([`super::phase_at`]).
    pub phase: PhaseAtFixedPoint,
}

/// Where `solve`'s damped iteration from one start ended, and which enumerated fixed point that is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DampedResult {
    /// The start.
    pub branch: Branch,
    /// b where it stopped.
    pub b: f64,
    /// c where it stopped.
    pub c: f64,
    /// R there.
    pub r: f64,
    /// Whether it converged within the iteration cap.
    pub converged: bool,
    /// Index into `fixed_points` of the fixed point within 1e-5 (max norm), if any.
    pub matches: Option<usize>,
}

/// Result of `flscale cavity fixed-points`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FixedPointReport {
    /// The inputs.
    pub params: AdaptiveParams,
    /// The search rectangle's b range.
    pub b_range: (f64, f64),
    /// The search rectangle's c range.
    pub c_range: (f64, f64),
    /// Grid nodes per axis.
    pub grid: usize,
    /// The bounds on G's values ([`MapRange`]).
    pub map_range: MapRange,
    /// Whether the search rectangle contains [−B_b, B_b] × [−B_c, B_c] (then every fixed point
    /// lies in it and the indices must sum to 1).
    pub covers_map_range: bool,
    /// Every fixed point found, ascending in R.
    pub fixed_points: Vec<FixedPointSolution>,
    /// Σ index over `fixed_points` (1 expected when `covers_map_range`).
    pub index_sum: i32,
    /// Attracting fixed points.
    pub attracting: usize,
    /// Saddles.
    pub saddles: usize,
    /// Two or more attracting fixed points and a saddle: coexisting phases (first-order).
    pub coexistence: bool,
    /// With coexistence, F(highest-R attracting) − F(lowest-R attracting), nats.
    pub free_energy_gap: Option<f64>,
    /// Candidate cells (both components of G − id change sign).
    pub candidate_cells: usize,
    /// Candidates whose Newton run did not converge.
    pub unresolved: Vec<Unresolved>,
    /// Evaluations of G.
    pub evaluations: usize,
    /// `solve`'s damped iteration from both starts (with `with_damped`).
    pub damped: Vec<DampedResult>,
}

/// Eigenvalues of a 2 × 2 matrix.
fn eigenvalues(j: [[f64; 2]; 2]) -> [Eigenvalue; 2] {
    let half_trace = 0.5 * (j[0][0] + j[1][1]);
    let det = j[0][0] * j[1][1] - j[0][1] * j[1][0];
    let disc = half_trace * half_trace - det;
    if disc >= 0.0 {
        let s = disc.sqrt();
        [
            Eigenvalue {
                re: half_trace + s,
                im: 0.0,
            },
            Eigenvalue {
                re: half_trace - s,
                im: 0.0,
            },
        ]
    } else {
        let s = (-disc).sqrt();
        [
            Eigenvalue {
                re: half_trace,
                im: s,
            },
            Eigenvalue {
                re: half_trace,
                im: -s,
            },
        ]
    }
}

/// Stability of a fixed point from ∂G (module docs): classification, undamped stability and the
/// largest stable damping.
fn classify(index: i32, ev: &[Eigenvalue; 2]) -> (Stability, bool, Option<f64>) {
    let undamped = ev.iter().all(|e| e.re.hypot(e.im) < 1.0);
    let stability = match index {
        0 => Stability::Degenerate,
        -1 => Stability::Saddle,
        _ if ev.iter().all(|e| e.re < 1.0) => Stability::Attracting,
        _ => Stability::Repelling,
    };
    let eta = (stability == Stability::Attracting).then(|| {
        ev.iter()
            .map(|e| {
                let (x, y) = (1.0 - e.re, -e.im);
                2.0 * x / (x * x + y * y)
            })
            .fold(f64::INFINITY, f64::min)
    });
    (stability, undamped, eta)
}

fn check_range(name: &str, r: (f64, f64)) -> Result<()> {
    if r.0.is_finite() && r.1.is_finite() && r.0 < r.1 {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{name} = {},{} is not allowed; it must be two finite numbers lo,hi with lo < hi",
            r.0, r.1
        )))
    }
}

/// Every fixed point of the adaptive-kernel map at `prm.p` (module docs). The Newton tolerance
/// is `prm.tol` on max|G − id|.
pub fn fixed_points(prm: &AdaptiveParams, opts: &FixedPointOptions) -> Result<FixedPointReport> {
    prm.validate()?;
    if !(3..=MAX_GRID).contains(&opts.grid) {
        return Err(Error::invalid(format!(
            "grid = {} is not allowed; it must be an integer between 3 and {MAX_GRID}",
            opts.grid
        )));
    }
    let prep = Prepared::new(
        Points::sample(prm.d, prm.p, prm.seed, 0),
        prm.eps,
        prm.sigma_w2,
    );
    let range = map_range_of(&prep.train.z, &prep.y);
    let (rect, covers) = search_rectangle(&range, opts)?;
    let model = prm.model(prm.p)?;
    let g = |(b, c): (f64, f64)| -> Result<(f64, f64)> {
        let next = map_step(prm, &model, &prep, (b, c))?.next;
        Ok((next.0 - b, next.1 - c))
    };
    let settings = RootSettings {
        grid: opts.grid,
        tol: prm.tol,
        max_newton: 100,
        fd_step: 1e-6,
        same: 1e-5,
    };
    let search = find_roots(&g, rect, &settings)?;
    let test = Points::sample(prm.d, prm.p_test, prm.seed, 1);
    let mut points: Vec<FixedPointSolution> = search
        .roots
        .par_iter()
        .map(|root| solution_at_root(prm, &model, (&prep, &test), root))
        .collect::<Result<_>>()?;
    points.sort_by(|a, b| a.r.total_cmp(&b.r));
    let attracting: Vec<&FixedPointSolution> = points
        .iter()
        .filter(|p| p.stability == Stability::Attracting)
        .collect();
    let saddles = points
        .iter()
        .filter(|p| p.stability == Stability::Saddle)
        .count();
    let coexistence = attracting.len() >= 2 && saddles >= 1;
    let free_energy_gap = match (coexistence, attracting.first(), attracting.last()) {
        (true, Some(lo), Some(hi)) => Some(hi.free_energy.total - lo.free_energy.total),
        _ => None,
    };
    let damped = if opts.with_damped {
        damped_results(prm, &points)?
    } else {
        Vec::new()
    };
    Ok(FixedPointReport {
        params: prm.clone(),
        b_range: rect.x,
        c_range: rect.y,
        grid: opts.grid,
        map_range: range,
        covers_map_range: covers,
        index_sum: points.iter().map(|p| p.index).sum(),
        attracting: attracting.len(),
        saddles,
        coexistence,
        free_energy_gap,
        fixed_points: points,
        candidate_cells: search.candidate_cells,
        unresolved: search.unresolved,
        evaluations: search.evaluations,
        damped,
    })
}

/// The search rectangle over (b, c) (the options' ranges, else the map range with a margin),
/// and whether it contains the map range (then it holds every fixed point).
fn search_rectangle(range: &MapRange, opts: &FixedPointOptions) -> Result<(Rect, bool)> {
    let (wb, wc) = (
        (1.0 + RANGE_MARGIN) * range.b_max,
        (1.0 + RANGE_MARGIN) * range.c_max,
    );
    let b_range = opts.b_range.unwrap_or((-wb, wb));
    let c_range = opts.c_range.unwrap_or((-wc, wc));
    check_range("b-range", b_range)?;
    check_range("c-range", c_range)?;
    let covers = b_range.0 < -range.b_max
        && b_range.1 > range.b_max
        && c_range.0 < -range.c_max
        && c_range.1 > range.c_max;
    Ok((
        Rect {
            x: b_range,
            y: c_range,
        },
        covers,
    ))
}

/// The fixed point at a root of G − id: the solution there (on the training set and the
/// `test` points), ∂G, its eigenvalues and the stability they imply.
fn solution_at_root(
    prm: &AdaptiveParams,
    model: &FiniteModel,
    (prep, test): (&Prepared, &Points),
    root: &Root,
) -> Result<FixedPointSolution> {
    let step = map_step(prm, model, prep, root.x)?;
    let fp = FixedPoint {
        bc: root.x,
        post: overlap_posterior(model, root.x.0, root.x.1)?,
        alpha: step.alpha,
        log_det: step.log_det,
        iterations: root.newton_steps,
        converged: true,
        last_step: root.residual,
        method: Method::Newton,
        evaluations: 0,
    };
    let sol = finish(prm, prep, test, Branch::Unaligned, fp)?;
    // ∂G = ∂g + I.
    let mut jac = root.jacobian;
    jac[0][0] += 1.0;
    jac[1][1] += 1.0;
    let ev = eigenvalues(jac);
    let (stability, stable_undamped, max_stable_damping) = classify(root.index, &ev);
    Ok(FixedPointSolution {
        b: root.x.0,
        c: root.x.1,
        r: sol.r,
        outliers: sol.outliers,
        centre_drive: sol.centre_drive,
        test_mse: sol.test_mse,
        test_mse_relative: sol.test_mse_relative,
        free_energy: sol.free_energy,
        residual: root.residual,
        jacobian: jac,
        eigenvalues: ev,
        index: root.index,
        stability,
        stable_undamped,
        max_stable_damping,
        cells: root.cells,
        phase: sol.phase,
    })
}

/// `solve`'s damped iteration from both starts, each matched to the fixed point it reached
/// (within 1e-5 in b and c), if any.
fn damped_results(
    prm: &AdaptiveParams,
    points: &[FixedPointSolution],
) -> Result<Vec<DampedResult>> {
    let rep = super::adaptive::solve(prm)?;
    Ok([rep.unaligned, rep.aligned]
        .into_iter()
        .map(|s| DampedResult {
            branch: s.branch,
            b: s.b,
            c: s.c,
            r: s.r,
            converged: s.converged,
            matches: points
                .iter()
                .position(|p| (p.b - s.b).abs().max((p.c - s.c).abs()) < 1e-5),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(p: usize) -> AdaptiveParams {
        AdaptiveParams {
            d: 6,
            n: 6,
            p,
            t: 0.05,
            s_a2: 1.0 / 6.0,
            sigma_w2: 1.0,
            eps: 0.3,
            seed: 2,
            p_test: 50,
            damping: 0.5,
            max_iter: 400,
            tol: 1e-9,
        }
    }

    #[test]
    fn the_map_range_bounds_the_map_everywhere() {
        let prm = small(20);
        let range = map_range(&prm).unwrap();
        let prep = Prepared::new(
            Points::sample(prm.d, prm.p, prm.seed, 0),
            prm.eps,
            prm.sigma_w2,
        );
        let model = prm.model(prm.p).unwrap();
        for (b, c) in [
            (0.0, 0.0),
            (3.0, -2.0),
            (-1.0, 1.0),
            (0.2, 0.3),
            (10.0, 10.0),
        ] {
            let next = map_step(&prm, &model, &prep, (b, c)).unwrap().next;
            assert!(next.0.abs() <= range.b_max && next.1.abs() <= range.c_max);
        }
        // With a vanishing readout prior K → 0, r̄ → y = H1 + εH3 and the projection returns
        // (1, ε) exactly, whatever (b, c): the map's values are correct, not only bounded.
        let mut weak = prm.clone();
        weak.s_a2 = 1e-12;
        let model = weak.model(weak.p).unwrap();
        for (b, c) in [(0.0, 0.0), (0.5, -0.4)] {
            let next = map_step(&weak, &model, &prep, (b, c)).unwrap().next;
            assert!((next.0 - 1.0).abs() < 1e-8 && (next.1 - weak.eps).abs() < 1e-8);
        }
        assert!(range.b_max >= 1.0 && range.c_max >= weak.eps);
    }

    #[test]
    fn enumerated_fixed_points_include_the_damped_solutions_and_are_fixed() {
        for p in [12, 30] {
            let prm = small(p);
            let rep = fixed_points(
                &prm,
                &FixedPointOptions {
                    b_range: None,
                    c_range: None,
                    grid: 25,
                    with_damped: true,
                },
            )
            .unwrap();
            assert!(rep.covers_map_range && !rep.fixed_points.is_empty());
            assert_eq!(rep.index_sum, 1, "{rep:?}");
            let prep = Prepared::new(
                Points::sample(prm.d, prm.p, prm.seed, 0),
                prm.eps,
                prm.sigma_w2,
            );
            let model = prm.model(prm.p).unwrap();
            for fp in &rep.fixed_points {
                let next = map_step(&prm, &model, &prep, (fp.b, fp.c)).unwrap().next;
                assert!((next.0 - fp.b).abs().max((next.1 - fp.c).abs()) < prm.tol);
            }
            let solved = super::super::adaptive::solve(&prm).unwrap();
            for s in [&solved.unaligned, &solved.aligned] {
                assert!(s.converged);
                let hit = rep
                    .fixed_points
                    .iter()
                    .find(|fp| (fp.b - s.b).abs() < 1e-6 && (fp.c - s.c).abs() < 1e-6)
                    .unwrap_or_else(|| panic!("P = {p}: damped ({}, {}) not in {rep:?}", s.b, s.c));
                // The damped iteration can only converge to an attracting fixed point, with F
                // and R equal to solve's.
                assert_eq!(hit.stability, Stability::Attracting);
                assert!((hit.r - s.r).abs() < 1e-6 * s.r);
                assert!((hit.free_energy.total - s.free_energy.total).abs() < 1e-4);
            }
            assert!(rep.damped.iter().all(|d| d.matches.is_some()));
        }
    }

    #[test]
    fn stability_follows_from_the_eigenvalues() {
        // λ = 0.5, −0.8: attracting, stable undamped, η < 2/(1 + 0.8).
        let ev = eigenvalues([[0.5, 0.0], [0.0, -0.8]]);
        let (s, undamped, eta) = classify(1, &ev);
        assert_eq!(s, Stability::Attracting);
        assert!(undamped);
        assert!((eta.unwrap() - 2.0 / 1.8).abs() < 1e-12);
        // λ = −3 (and 0.2): attracting only with damping η < 2/4.
        let ev = eigenvalues([[0.0, 1.0], [0.6, -2.8]]); // λ = 0.2, −3
        let (s, undamped, eta) = classify(1, &ev);
        assert_eq!(s, Stability::Attracting);
        assert!(!undamped && (eta.unwrap() - 0.5).abs() < 1e-9, "{ev:?}");
        // Complex pair 0.9 ± 0.5i: |λ| > 1, Re λ < 1, η < 2·0.1/(0.01 + 0.25).
        let ev = eigenvalues([[0.9, 0.5], [-0.5, 0.9]]);
        let (s, undamped, eta) = classify(1, &ev);
        assert!(s == Stability::Attracting && !undamped);
        assert!((eta.unwrap() - 0.2 / 0.26).abs() < 1e-12);
        // λ = 1.5, 0.2: saddle.
        let ev = eigenvalues([[1.5, 0.3], [0.0, 0.2]]);
        assert_eq!(classify(-1, &ev).0, Stability::Saddle);
    }

    #[test]
    fn rejects_bad_ranges_and_grids() {
        let prm = small(12);
        let opts = |b: Option<(f64, f64)>, grid| FixedPointOptions {
            b_range: b,
            c_range: None,
            grid,
            with_damped: false,
        };
        assert!(matches!(
            fixed_points(&prm, &opts(Some((1.0, -1.0)), 9)),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            fixed_points(&prm, &opts(Some((f64::NAN, 1.0)), 9)),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            fixed_points(&prm, &opts(None, 2)),
            Err(Error::InvalidInput(_))
        ));
    }
}
