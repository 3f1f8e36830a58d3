//! The neighbour-overlap diagnostic: MBAR's answer between two windows is only as good as the
//! samples they share. The overlap matrix O (see [`super::mbar::Mbar::overlap_matrix`]) gives,
//! for neighbouring windows k and k + 1 along s, the probability that a sample of one is
//! attributed to the other.

use super::FreeEnergyError;

/// Smallest acceptable overlap-matrix element between neighbouring windows. Klimovich, Shirts &
/// Mobley (J. Comput.-Aided Mol. Des. 29, 397 (2015)) recommend that the elements next to the
/// diagonal be at least 0.03; below it the estimates between the two windows become unreliable
/// and their error estimates with them (the same rule of thumb is repeated in the alchemical
/// best-practice guide of Mey et al., Living J. Comp. Mol. Sci. 2, 18378 (2020)).
pub const DEFAULT_OVERLAP_THRESHOLD: f64 = 0.03;

/// min(O[a][b], O[b][a]) for each consecutive pair (a, b) of `order` (the windows sorted along
/// s): the overlap of each pair of neighbours, the smaller direction.
pub fn neighbour_overlaps(o: &[Vec<f64>], order: &[usize]) -> Vec<f64> {
    order
        .windows(2)
        .map(|p| o[p[0]][p[1]].min(o[p[1]][p[0]]))
        .collect()
}

/// Refuses when some neighbouring windows overlap less than `threshold`, naming every such pair.
pub fn check_neighbours(
    o: &[Vec<f64>],
    order: &[usize],
    threshold: f64,
) -> Result<(), FreeEnergyError> {
    let pairs: Vec<(usize, usize, f64)> = order
        .windows(2)
        .zip(neighbour_overlaps(o, order))
        .filter(|(_, v)| !(*v >= threshold))
        .map(|(p, v)| (p[0], p[1], v))
        .collect();
    if pairs.is_empty() {
        Ok(())
    } else {
        Err(FreeEnergyError::PoorOverlap { pairs, threshold })
    }
}

/// The windows in order of their centres (ties by index).
pub fn order_by_centre(centres: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..centres.len()).collect();
    order.sort_by(|&a, &b| centres[a].total_cmp(&centres[b]).then(a.cmp(&b)));
    order
}
