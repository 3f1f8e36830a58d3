//! Two thresholds from the free energies of a sweep: the coexistence P\*\_coex and the spinodals
//! of the lazy and the specialised basin, per d, each with an error (spec 07, "Outputs").
//!
//! The input is one [`CellSummary`] per (d, P) cell — the lowest-s ("lazy") and highest-s
//! ("specialised") basin of its [`FreeEnergyReport`], or its single basin — and the output one
//! [`CoexistenceRow`] per d.
//!
//! * **Coexistence** is the P at which the two basins have equal weight, ΔF(P) = 0 with
//!   ΔF = −ln(w_spec/w_lazy) (the equal-weight rule for a first-order transition: Binder, Rep.
//!   Prog. Phys. 50, 783 (1987), §3; Borgs & Kotecký, J. Stat. Phys. 61, 79 (1990)). ΔF is
//!   smooth through the transition, so the root is found by *linear interpolation of ΔF in
//!   ln P between the two cells that bracket its first sign change*. Not a fit over more cells:
//!   ΔF is not linear in ln P over a wide range (near the transition ΔF ≈ P·Δf, linear in P),
//!   and a line through distant cells trades a small interpolation error for a bias that does
//!   not shrink as the grid is refined; between neighbouring cells ln P and P agree to first
//!   order. The error is a parametric bootstrap over cells: every replicate draws each cell's
//!   ΔF from N(ΔF, σ²) and finds the root again (Efron & Tibshirani, *An Introduction to the
//!   Bootstrap*, 1993, §6.5).
//! * **ΔF's error** is the delta method applied to the basin weights' bootstrap errors:
//!   σ_ΔF = σ_spec/w_spec + σ_lazy/w_lazy, the sum rather than the root of the sum of squares
//!   because the weights are anticorrelated (with two basins w_spec = 1 − w_lazy exactly, and
//!   then the sum is the exact first-order error); for three or more basins it is an upper bound.
//! * **A single basin** means one minimum has vanished. The cell's basin is the lazy one when its
//!   minimum lies nearer the lazy minimum than the specialised one of the nearest two-basin
//!   cell (in ln P) at the same d; when no cell at that d has two basins, when it lies in the
//!   lower half of the range of minima seen at that d. Its ΔF is +∞ (lazy only) or −∞
//!   (specialised only): it fixes the sign but no value, so a sign change next to such a cell is
//!   only bracketed.
//! * **Spinodals** are the P at which a basin stops being a local minimum of F (a fold, or
//!   saddle-node bifurcation, of the metastable minimum). Near a fold the depth D of the
//!   minimum below its barrier vanishes as D ∝ (P_sp − P)^{3/2}: the normal form V = x³/3 − εx
//!   has the barrier (4/3)ε^{3/2} (Gilmore, *Catastrophe Theory for Scientists and Engineers*,
//!   1981, ch. 5; the "3/2 law" of Garg, Phys. Rev. B 51, 15592 (1995)). D^{2/3} is therefore
//!   linear in the control parameter near the fold; the two cells nearest the fold where the
//!   minimum exists give a line of D^{2/3} against ln P, and its zero is the spinodal. Two cells
//!   rather than more because the law is asymptotic: the cells nearest the fold follow it best.
//!   The cells where the minimum exists and the first where it does not bracket the fold; the
//!   extrapolation is *resolved* when it lands inside that bracket, *extrapolated* when the
//!   minimum exists at every measured P, and the bracket alone is reported when the line misses
//!   it. A basin shallower than the profile analysis's prominence (0.5 kT, or twice the noise)
//!   is merged into its neighbour, so "absent" means a depth below that, which D^{2/3} reaches
//!   only just before the fold. The lazy minimum folds on the side where ΔF < 0 (where it is the
//!   less stable one), the specialised one on the other.
//! * **Repeats** at the same (d, P) (other seeds, hot and cold starts) are averaged before
//!   anything else: each ΔF and depth is the repeats' mean, with the larger of the within-run
//!   error of the mean and the spread between repeats, since errors from one run are a lower
//!   bound when a slow mode outlives it (spec 07). Repeats that disagree on which minima exist
//!   are refused.
//! * **Only bracketed** values are the bracket's geometric midpoint, and their replicates are
//!   uniform in ln P across the bracket (the rule of [`crate::experiment::pstar`]), so an
//!   exponent fitted through replicates carries the bracket's width.
//!
//! Replicates of row g draw from ChaCha8 stream (seed, g) sequentially: the same seed gives the
//! same numbers on any thread count.
//!
//! The folder by role: [`cells`] (what a cell's report gives), [`rows`] (ΔF and the depths of
//! one d, repeats averaged), [`crossing`] (P\*\_coex), [`spinodal`] (the folds), [`threshold`]
//! (a threshold's bootstrap error), [`table`] (every d), [`error`] (the refusals).

mod cells;
mod crossing;
mod error;
mod rows;
mod spinodal;
mod table;
mod threshold;

#[cfg(test)]
mod tests;

pub use cells::{CellBasins, CellSummary, Side};
pub use error::CoexistenceError;
pub use rows::{CellRow, Phases};
pub use table::{
    coexistence_table, CoexistenceOptions, CoexistenceRow, CoexistenceTable, DEFAULT_REPLICATES,
};
pub use threshold::{Resolution, Threshold};
