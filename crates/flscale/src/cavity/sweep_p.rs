//! `flscale cavity sweep-p`: the adaptive-kernel fixed point continued in P along both
//! branches, with the transition P, the branch ends and the alternative solutions (blog
//! §"Match the residual to the network's prediction"; spec 04 `sweep-p`).

use serde::Serialize;

use super::adaptive::{
    finish, fixed_point, r_threshold, AdaptiveParams, Branch, BranchSolution, Prepared,
};
use super::at_least;
use super::sampled_kernel::Points;
use crate::error::{Error, Result};

/// Result of `flscale cavity sweep-p`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    /// The inputs (`p` is the largest P).
    pub params: AdaptiveParams,
    /// The P values, ascending.
    pub p_values: Vec<usize>,
    /// Continued upward in P from small alignment.
    pub unaligned: Vec<BranchSolution>,
    /// Continued downward in P from large alignment.
    pub aligned: Vec<BranchSolution>,
    /// The R threshold that calls a solution aligned (σ_w²/√D).
    pub r_threshold: f64,
    /// P where the branch continued from small alignment crosses the R threshold upward
    /// (interpolated in log P); `None` if it never does in the range. Where the two branches
    /// coincide this is a smooth crossover, not a jump.
    pub p_threshold_unaligned: Option<f64>,
    /// P where the branch continued from large alignment drops below the R threshold; `None`
    /// if it stays aligned at every P.
    pub p_threshold_aligned: Option<f64>,
    /// The spinodals bracketed by the grid: every place where one of the two branches ceases
    /// to exist, as the pair of neighbouring P values between which the two solutions merge,
    /// and which branch vanished there (the one whose R is farther from the merged solution's,
    /// in log R). Both ends of a coexistence window can belong to the same branch: at the blog
    /// preset the aligned branch exists only in a window of P.
    pub branch_ends: Vec<BranchEnd>,
    /// P where the branch from small alignment first expects one neuron per network with
    /// |ρ| > 3σ_w/√D (`outliers` crosses 1, interpolated in log P): the first specialised
    /// neuron; `None` if it never does in the range.
    pub p_first_specialised: Option<f64>,
    /// F(aligned) − F(unaligned) ([`FreeEnergy`]) at each P where the two branches are
    /// distinct (|ΔR| > 1e-3·max R), `None` where they coincide.
    pub free_energy_gap: Vec<Option<f64>>,
    /// The first-order transition: the P where `free_energy_gap` changes sign from + (the
    /// unaligned branch preferred) to − (interpolated linearly in log P between grid points);
    /// `None` when no such sign change lies between two P values with two solutions.
    pub p_transition: Option<f64>,
    /// Whether the two branches differ at some P (hysteresis, a first-order transition).
    pub hysteresis: bool,
    /// The largest centre drive of the unaligned branch at its population residual, over all
    /// P (not only the swept ones), and where it is reached
    /// ([`super::potential::population_centre_drive_max`]). A population-level estimate: below
    /// 1 the centre keeps its stability at every P when b takes its population value; the
    /// finite-P fixed points' (b, c) (their `centre_drive`) can lie above or below it.
    pub population_drive_max: PopulationDrive,
    /// Fixed points a branch found but did not keep: where R jumped by more than
    /// [`R_JUMP_FACTOR`] between neighbouring P, the branch's start was solved as well, and
    /// when the two differ the one continuous with the previous R stays on the branch; the
    /// other is listed here with its free energy relative to the kept one.
    pub alternatives: Vec<AlternativeSolution>,
}

/// The maximum over P of the population centre drive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PopulationDrive {
    /// Where it is reached.
    pub p: f64,
    /// Its value X_max.
    pub drive: f64,
}

/// Where one branch ceases to exist, bracketed by two neighbouring P values of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BranchEnd {
    /// The branch that vanishes between the two P values.
    pub branch: Branch,
    /// (smaller P, larger P): the two solutions differ at exactly one of them.
    pub between: (usize, usize),
}

/// The spinodals of the sweep: at every neighbour pair (P_i, P_{i+1}) where exactly one P has
/// two distinct solutions (`gap` is `Some` there), the branch that vanished is the one whose R
/// at the two-solution P is farther (in |log R|) from the single solution's R at the other P.
/// `cold_r` and `hot_r` are the R of the branches continued from small and from large
/// alignment, ascending in P like `ps` and `gap`.
fn branch_ends(ps: &[usize], cold_r: &[f64], hot_r: &[f64], gap: &[Option<f64>]) -> Vec<BranchEnd> {
    let log_dist = |a: f64, b: f64| (a.max(1e-300).ln() - b.max(1e-300).ln()).abs();
    (1..ps.len())
        .filter_map(|i| {
            let (two, one) = match (gap[i - 1].is_some(), gap[i].is_some()) {
                (true, false) => (i - 1, i),
                (false, true) => (i, i - 1),
                _ => return None,
            };
            let merged = cold_r[one];
            let branch = if log_dist(hot_r[two], merged) >= log_dist(cold_r[two], merged) {
                Branch::Aligned
            } else {
                Branch::Unaligned
            };
            Some(BranchEnd {
                branch,
                between: (ps[i - 1], ps[i]),
            })
        })
        .collect()
}

/// Where `gap` (ascending in P) first changes sign from > 0 to ≤ 0 between two neighbours
/// that both have a value, interpolated linearly in log P.
fn gap_crossing(ps: &[usize], gap: &[Option<f64>]) -> Option<f64> {
    (1..ps.len()).find_map(|i| match (gap[i - 1], gap[i]) {
        (Some(g0), Some(g1)) if g0 > 0.0 && g1 <= 0.0 => {
            let (l0, l1) = ((ps[i - 1] as f64).ln(), (ps[i] as f64).ln());
            Some((l0 + g0 / (g0 - g1) * (l1 - l0)).exp())
        }
        _ => None,
    })
}

fn crossing(points: &[(f64, f64)], threshold: f64, upward: bool) -> Option<f64> {
    // points ascending in P; for `upward`, the first crossing from below; otherwise the last
    // P below the threshold followed by one above (scanning from large P down).
    let idx: Vec<usize> = (1..points.len()).collect();
    let hit = |i: usize| points[i - 1].1 < threshold && points[i].1 >= threshold;
    let i = if upward {
        idx.into_iter().find(|&i| hit(i))
    } else {
        idx.into_iter().rev().find(|&i| hit(i))
    }?;
    let (p0, r0) = points[i - 1];
    let (p1, r1) = points[i];
    let frac = (threshold - r0) / (r1 - r0);
    Some((p0.ln() + frac * (p1.ln() - p0.ln())).exp())
}

/// R(P), b(P), c(P) and the test MSE along both branches, continued in P (nested data sets:
/// the first P points of one sample, so the curves are smooth in P).
pub fn sweep_p(prm: &AdaptiveParams, p_values: &[usize]) -> Result<SweepReport> {
    sweep_p_observed(prm, p_values, &|_, _| {})
}

/// [`sweep_p`], calling `on_solved(branch, P)` after each fixed point (for progress bars; the
/// two branches run concurrently, so calls may come from two threads).
pub fn sweep_p_observed(
    prm: &AdaptiveParams,
    p_values: &[usize],
    on_solved: &(dyn Fn(Branch, usize) + Sync),
) -> Result<SweepReport> {
    let mut ps: Vec<usize> = p_values.to_vec();
    ps.sort_unstable();
    ps.dedup();
    if ps.is_empty() {
        return Err(Error::invalid(
            "the list of P values is empty; give at least one P",
        ));
    }
    let p_max = *ps.last().unwrap_or(&2);
    let mut top = prm.clone();
    top.p = p_max;
    top.validate()?;
    at_least("smallest P", ps[0], 2)?;
    let all = Points::sample(prm.d, p_max, prm.seed, 0);
    let test = Points::sample(prm.d, prm.p_test, prm.seed, 1);
    type Run = (Vec<BranchSolution>, Vec<AlternativeSolution>);
    let run = |order: Vec<usize>, start: (f64, f64), branch: Branch| -> Result<Run> {
        let mut at = start;
        let mut out: Vec<BranchSolution> = Vec::with_capacity(order.len());
        let mut alternatives = Vec::new();
        for p in order {
            let prep = Prepared::new(all.prefix(p), prm.eps, prm.sigma_w2);
            let fp = fixed_point(prm, &prep, at)?;
            let mut sol = finish(prm, &prep, &test, branch, fp)?;
            // Continuation across a large step in P can leave the basin it came from (at
            // D = N = 20 the step P = 320 → 640 fell from R = 0.10 into the fully aligned
            // R = 6.5). When R jumps, the branch's own start is solved too: the branch keeps
            // the solution continuous with its previous R, the other is reported with its
            // free energy.
            if let Some(prev) = out.last() {
                if at != start && r_jumped(prev.r, sol.r) {
                    let fp_start = fixed_point(prm, &prep, start)?;
                    let from_start = finish(prm, &prep, &test, branch, fp_start)?;
                    let (kept, alternative) = keep_continuous(prev.r, sol, from_start);
                    sol = kept;
                    alternatives.extend(alternative);
                }
            }
            at = (sol.b, sol.c);
            out.push(sol);
            on_solved(branch, p);
        }
        Ok((out, alternatives))
    };
    let (cold, hot) = rayon::join(
        || run(ps.clone(), (0.0, 0.0), Branch::Unaligned),
        || {
            run(
                ps.iter().rev().copied().collect(),
                (1.0, prm.eps),
                Branch::Aligned,
            )
        },
    );
    let (cold, mut alternatives) = cold?;
    let (mut hot, hot_alternatives) = hot?;
    hot.reverse();
    alternatives.extend(hot_alternatives);
    alternatives.sort_by_key(|a| a.solution.p);
    let thr = r_threshold(prm);
    let curve = |v: &[BranchSolution]| v.iter().map(|s| (s.p as f64, s.r)).collect::<Vec<_>>();
    let free_energy_gap: Vec<Option<f64>> = cold
        .iter()
        .zip(&hot)
        .map(|(a, b)| distinct(a, b).then_some(b.free_energy.total - a.free_energy.total))
        .collect();
    let hysteresis = free_energy_gap.iter().any(Option::is_some);
    let (p_drive, drive) = super::potential::population_centre_drive_max(
        prm.d as f64,
        prm.n as f64,
        prm.t,
        prm.s_a2,
        prm.sigma_w2,
    )?;
    Ok(SweepReport {
        population_drive_max: PopulationDrive { p: p_drive, drive },
        p_threshold_unaligned: crossing(&curve(&cold), thr, true),
        p_threshold_aligned: crossing(&curve(&hot), thr, false),
        branch_ends: branch_ends(
            &ps,
            &cold.iter().map(|s| s.r).collect::<Vec<_>>(),
            &hot.iter().map(|s| s.r).collect::<Vec<_>>(),
            &free_energy_gap,
        ),
        p_first_specialised: crossing(
            &cold
                .iter()
                .map(|s| (s.p as f64, s.outliers))
                .collect::<Vec<_>>(),
            1.0,
            true,
        ),
        p_transition: gap_crossing(&ps, &free_energy_gap),
        free_energy_gap,
        params: top,
        p_values: ps,
        unaligned: cold,
        aligned: hot,
        r_threshold: thr,
        hysteresis,
        alternatives,
    })
}

/// Two solutions at one P are distinct when their R differ by more than 1e-3 of the larger
/// and both iterations converged, or, if either stopped at the iteration cap, by more than
/// [`UNCONVERGED_DISTINCT`] of the larger: two unconverged iterates of one slowly converging
/// fixed point differ in R by ~1e-3 (D = N = 20, σ_w² = 0.1, P = 640: 0.04173 vs 0.04167),
/// which is not a second phase and must not be reported as hysteresis.
fn distinct(a: &BranchSolution, b: &BranchSolution) -> bool {
    let tolerance = if a.converged && b.converged {
        1e-3
    } else {
        UNCONVERGED_DISTINCT
    };
    (a.r - b.r).abs() > tolerance * a.r.max(b.r)
}

/// Relative difference in R beyond which two solutions count as distinct although one of
/// them did not converge (the branches of a first-order transition differ by O(1) factors).
pub const UNCONVERGED_DISTINCT: f64 = 0.1;

/// Of the solution continued from the previous P (`continued`) and the one solved from the
/// branch's start (`from_start`) at the same P, keeps the one whose R is nearer (in log R) to
/// the branch's previous `prev_r`, and returns the other as an [`AlternativeSolution`] with
/// its free-energy difference, or `None` when the two are the same fixed point.
fn keep_continuous(
    prev_r: f64,
    continued: BranchSolution,
    from_start: BranchSolution,
) -> (BranchSolution, Option<AlternativeSolution>) {
    if !distinct(&continued, &from_start) {
        return (continued, None);
    }
    let log_gap = |s: &BranchSolution| (s.r.max(1e-300).ln() - prev_r.max(1e-300).ln()).abs();
    let (kept, other, origin) = if log_gap(&from_start) < log_gap(&continued) {
        (from_start, continued, SolutionOrigin::PreviousSolution)
    } else {
        (continued, from_start, SolutionOrigin::BranchStart)
    };
    let alternative = AlternativeSolution {
        branch: kept.branch,
        origin,
        free_energy_above_branch: other.free_energy.total - kept.free_energy.total,
        solution: other,
    };
    (kept, Some(alternative))
}

/// A continuation step "jumped" when R changed by more than a factor [`R_JUMP_FACTOR`].
fn r_jumped(prev: f64, next: f64) -> bool {
    (next.max(1e-300).ln() - prev.max(1e-300).ln()).abs() > R_JUMP_FACTOR.ln()
}

/// R ratio between neighbouring P that triggers a second solve from the branch's start.
pub const R_JUMP_FACTOR: f64 = 2.0;

/// Where a solution that a branch did not keep was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SolutionOrigin {
    /// Continued from the branch's solution at the previous P.
    PreviousSolution,
    /// Solved from the branch's own start ((0, 0) or (1, ε)).
    BranchStart,
}

/// A second fixed point found at one P when the continuation jumped in R: the branch kept the
/// solution continuous with its previous R, this is the other one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlternativeSolution {
    /// The branch whose continuation found it.
    pub branch: Branch,
    /// How it was reached.
    pub origin: SolutionOrigin,
    /// F(this) − F(the branch's solution at the same P), in nats ([`FreeEnergy`]): positive
    /// means the kept solution is the more probable one.
    pub free_energy_above_branch: f64,
    /// The solution itself.
    pub solution: BranchSolution,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cavity::adaptive::{small_test_params as small, solve};

    #[test]
    fn sweep_shows_r_rising_from_prior_scale_to_order_one() {
        // D = N = 8, T = 0.01: the branch continued from large alignment is aligned at P = 200
        // (R = O(1)) while continuation from small alignment starts at the prior scale.
        let prm = AdaptiveParams {
            d: 8,
            n: 8,
            s_a2: 1.0 / 8.0,
            t: 0.01,
            p_test: 50,
            ..small(200)
        };
        let rep = sweep_p(&prm, &[25, 200]).unwrap();
        let prior = prm.sigma_w2 / prm.d as f64;
        let first = &rep.unaligned[0];
        assert!(
            first.r < 3.0 * prior,
            "R at P=25: {} (prior {prior})",
            first.r
        );
        let last = rep.aligned.last().unwrap();
        assert!(last.r > rep.r_threshold, "R at P=200: {}", last.r);
        assert!(rep.hysteresis);
        let p_down = rep
            .p_threshold_aligned
            .expect("the aligned branch loses alignment in range");
        assert!((25.0..=200.0).contains(&p_down), "{p_down}");
    }

    #[test]
    fn a_jump_in_r_keeps_the_continuous_solution_and_reports_the_other() {
        let base = solve(&small(40)).unwrap().unaligned;
        let with = |r: f64, f: f64| {
            let mut s = base.clone();
            s.r = r;
            s.free_energy.total = f;
            s
        };
        // Continued from R = 0.10 into a basin with R = 6.5; the branch's start finds 0.11.
        let (kept, alt) = keep_continuous(0.10, with(6.5, 900.0), with(0.11, 100.0));
        let alt = alt.expect("two distinct fixed points");
        assert_eq!(kept.r, 0.11);
        assert_eq!(alt.solution.r, 6.5);
        assert_eq!(alt.origin, SolutionOrigin::PreviousSolution);
        assert!((alt.free_energy_above_branch - 800.0).abs() < 1e-12);
        // The continued solution is the nearer one: it stays, the start's is reported.
        let (kept, alt) = keep_continuous(4.0, with(3.5, 50.0), with(0.05, 80.0));
        let alt = alt.unwrap();
        assert_eq!((kept.r, alt.solution.r), (3.5, 0.05));
        assert_eq!(alt.origin, SolutionOrigin::BranchStart);
        assert!((alt.free_energy_above_branch - 30.0).abs() < 1e-12);
        // One fixed point reached from both: nothing to report.
        assert!(keep_continuous(0.1, with(0.5, 1.0), with(0.5, 1.0))
            .1
            .is_none());
        // Two iterates stopped at the cap, 0.15 % apart: one fixed point, not two; 0.15 %
        // between converged solutions, or 20 % between unconverged ones, are two.
        let unconverged = |r: f64| {
            let mut s = with(r, 1.0);
            s.converged = false;
            s
        };
        assert!(!distinct(&unconverged(0.04173), &unconverged(0.04167)));
        assert!(!distinct(&with(0.04173, 1.0), &unconverged(0.04167)));
        assert!(distinct(&with(0.04173, 1.0), &with(0.04167, 1.0)));
        assert!(distinct(&unconverged(0.05), &unconverged(0.04)));
        assert!(r_jumped(0.1, 0.25) && r_jumped(0.25, 0.1) && !r_jumped(0.1, 0.19));
    }

    #[test]
    fn free_energy_is_the_sum_of_its_parts_and_the_crossing_interpolates() {
        let rep = solve(&small(40)).unwrap();
        for s in [&rep.unaligned, &rep.aligned] {
            let f = s.free_energy;
            let want =
                f.kl_neurons + f.data_fit + f.log_det + 20.0 * (2.0 * std::f64::consts::PI).ln();
            assert!((f.total - want).abs() < 1e-9 * want.abs());
            assert!(f.kl_neurons >= 0.0 && f.data_fit > 0.0);
        }
        // ΔF = +1 at P = 100 and −1 at P = 400: the crossing is the geometric mean, 200.
        let p = gap_crossing(&[50, 100, 400], &[None, Some(1.0), Some(-1.0)]).unwrap();
        assert!((p - 200.0).abs() < 1e-9);
        assert_eq!(gap_crossing(&[50, 100], &[Some(-1.0), Some(-2.0)]), None);
        assert_eq!(
            gap_crossing(&[50, 100, 200], &[Some(1.0), None, Some(-2.0)]),
            None
        );
        // Branches differ at P = 100, 200 only. Below, the merged R (0.1) is the unaligned
        // branch's: the aligned one ends in (50, 100). Above, the merged R (4) is the aligned
        // branch's: the unaligned one jumps in (200, 400).
        let gap = [None, Some(1.0), Some(-1.0), None];
        let ps = [50, 100, 200, 400];
        let end = |branch, between| BranchEnd { branch, between };
        assert_eq!(
            branch_ends(&ps, &[0.1, 0.1, 0.2, 4.0], &[0.1, 3.0, 3.5, 4.0], &gap),
            vec![
                end(Branch::Aligned, (50, 100)),
                end(Branch::Unaligned, (200, 400))
            ]
        );
        // The blog preset's shape: the aligned branch exists only inside a window, so both
        // ends are its own.
        assert_eq!(
            branch_ends(&ps, &[0.1, 0.12, 0.1, 0.07], &[0.1, 5.3, 6.5, 0.07], &gap),
            vec![
                end(Branch::Aligned, (50, 100)),
                end(Branch::Aligned, (200, 400))
            ]
        );
        assert!(branch_ends(&[50, 100], &[0.1, 0.1], &[0.1, 0.1], &[None, None]).is_empty());
        assert!(branch_ends(
            &[50, 100],
            &[0.1, 0.1],
            &[1.0, 2.0],
            &[Some(1.0), Some(2.0)]
        )
        .is_empty());
    }
}
