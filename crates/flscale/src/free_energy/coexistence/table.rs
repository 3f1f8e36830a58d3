//! The thresholds of every d from the cells of a sweep: one [`CoexistenceRow`] per d, each row's
//! replicates from its own ChaCha8 stream.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::cells::CellSummary;
use super::crossing::{coexistence_threshold, find_root};
use super::error::CoexistenceError;
use super::rows::{cell_rows, merge_repeats, CellRow};
use super::spinodal::{spinodal, Basin};
use super::threshold::Threshold;

/// Replicates of the parametric bootstrap unless told otherwise.
pub const DEFAULT_REPLICATES: usize = 1000;

/// Settings of [`coexistence_table`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoexistenceOptions {
    /// Parametric-bootstrap replicates (every threshold of every row has this many).
    pub replicates: usize,
    /// Seed of the replicates' ChaCha8 streams.
    pub seed: u64,
}

impl Default for CoexistenceOptions {
    fn default() -> Self {
        CoexistenceOptions {
            replicates: DEFAULT_REPLICATES,
            seed: 0,
        }
    }
}

/// The thresholds of one d.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoexistenceRow {
    /// The d.
    pub d: f64,
    /// Its cells in order of P.
    pub cells: Vec<CellRow>,
    /// ΔF(P) = 0.
    pub coexistence: Threshold,
    /// Where the lazy minimum disappears.
    pub spinodal_lazy: Threshold,
    /// Where the specialised minimum disappears.
    pub spinodal_spec: Threshold,
}

/// The thresholds of every d, in order of d.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoexistenceTable {
    /// One row per d.
    pub rows: Vec<CoexistenceRow>,
    /// Replicates per threshold.
    pub replicates: usize,
}

/// The thresholds of every d from the cells of a sweep (module docs). Cells need not be in
/// order; repeats at one (d, P) are averaged. Refused in one sentence: a malformed cell,
/// repeats that disagree on which minima exist, a d with fewer than two P, a d whose ΔF never
/// changes sign.
pub fn coexistence_table(
    cells: &[CellSummary],
    opts: &CoexistenceOptions,
) -> Result<CoexistenceTable, CoexistenceError> {
    if cells.is_empty() {
        return Err(CoexistenceError::InvalidInput(
            "no free-energy cell was given; coexistence needs cells at two or more P per d".into(),
        ));
    }
    for c in cells {
        c.check()?;
    }
    let mut sorted: Vec<CellSummary> = cells.to_vec();
    sorted.sort_by(|a, b| a.d.total_cmp(&b.d).then(a.p.total_cmp(&b.p)));
    let mut rows = Vec::new();
    for (g, group) in sorted.chunk_by(|a, b| a.d == b.d).enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
        rng.set_stream(g as u64);
        rows.push(coexistence_row(group, opts.replicates, &mut rng)?);
    }
    Ok(CoexistenceTable {
        rows,
        replicates: opts.replicates,
    })
}

/// The thresholds of one d; `cells` in order of P.
fn coexistence_row(
    cells: &[CellSummary],
    replicates: usize,
    rng: &mut ChaCha8Rng,
) -> Result<CoexistenceRow, CoexistenceError> {
    let d = cells[0].d;
    let sizes = cells.chunk_by(|a, b| a.p == b.p).count();
    if sizes < 2 {
        return Err(CoexistenceError::TooFewSizes { d, sizes });
    }
    let rows = merge_repeats(cell_rows(cells), d)?;
    let df: Vec<f64> = rows.iter().map(|r| r.delta_f.value).collect();
    let Some(first) = df.iter().copied().find(|&x| x != 0.0) else {
        return Err(CoexistenceError::InvalidInput(format!(
            "ΔF is exactly 0 at every P at d = {d}, which no pair of basins gives; check the cells"
        )));
    };
    if find_root(&df).is_none() {
        return Err(CoexistenceError::NoSignChange {
            d,
            positive: first > 0.0,
            p_range: (cells[0].p, cells[cells.len() - 1].p),
        });
    }
    let coexistence = coexistence_threshold(&rows, replicates, rng);
    // The lazy minimum folds where it is the less stable one: above coexistence when ΔF starts
    // positive (lazy heavier at small P).
    let lazy_up = first > 0.0;
    let spinodal_lazy = spinodal(&rows, Basin::Lazy, lazy_up, replicates, rng);
    let spinodal_spec = spinodal(&rows, Basin::Spec, !lazy_up, replicates, rng);
    Ok(CoexistenceRow {
        d,
        cells: rows,
        coexistence,
        spinodal_lazy,
        spinodal_spec,
    })
}
