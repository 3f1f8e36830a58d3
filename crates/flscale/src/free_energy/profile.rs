//! The free-energy profile F(s) = −ln p(s), its basins and barrier, and reweighted averages,
//! from weighted samples. Every quantity here is a function of a [`Tally`] (weights and
//! weighted observable sums on half-bins), so the point estimate and each bootstrap replicate
//! go through the same code.

use super::FreeEnergyError;

/// Uniform bins of the order parameter on [lo, hi].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bins {
    /// Lower edge of the first bin.
    pub lo: f64,
    /// Upper edge of the last bin.
    pub hi: f64,
    /// Number of bins.
    pub count: usize,
}

impl Bins {
    /// `count` ≥ 1 bins on the finite interval lo < hi.
    pub fn new(lo: f64, hi: f64, count: usize) -> Result<Bins, FreeEnergyError> {
        if !(lo.is_finite() && hi.is_finite() && lo < hi && count >= 1) {
            return Err(FreeEnergyError::InvalidInput(format!(
                "profile bins: need finite lo < hi and at least one bin, got [{lo}, {hi}] with {count}"
            )));
        }
        Ok(Bins { lo, hi, count })
    }

    /// Width of one bin.
    pub fn width(&self) -> f64 {
        (self.hi - self.lo) / self.count as f64
    }

    /// Centre of bin i.
    pub fn centre(&self, i: usize) -> f64 {
        self.lo + (i as f64 + 0.5) * self.width()
    }

    /// Half-bin index of s: 0 below lo, 1..=2·count inside (half-bin j − 1 from lo), 2·count + 1
    /// above hi. Half-bins let the basins split at a bin's centre.
    pub fn half_bin(&self, s: f64) -> usize {
        if s < self.lo {
            return 0;
        }
        if s > self.hi {
            return 2 * self.count + 1;
        }
        let j = ((s - self.lo) / (0.5 * self.width())).floor() as usize;
        j.min(2 * self.count - 1) + 1
    }
}

/// Normalised weights and weighted observable sums on the half-bins of [`Bins::half_bin`].
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    /// Σ w_n over each half-bin (sums to one over all).
    pub mass: Vec<f64>,
    /// `sums[j][h]` = Σ w_n O_j(x_n) over half-bin h.
    pub sums: Vec<Vec<f64>>,
}

impl Tally {
    /// Tallies samples with order parameter `s[n]`, normalised log weights `log_w[n]` and
    /// observables `obs[j][n]`.
    pub fn new(bins: &Bins, s: &[f64], log_w: &[f64], obs: &[Vec<f64>]) -> Tally {
        let h = 2 * bins.count + 2;
        let mut mass = vec![0.0; h];
        let mut sums = vec![vec![0.0; h]; obs.len()];
        for (n, (&x, &lw)) in s.iter().zip(log_w).enumerate() {
            let w = lw.exp();
            let b = bins.half_bin(x);
            mass[b] += w;
            for (sum, o) in sums.iter_mut().zip(obs) {
                sum[b] += w * o[n];
            }
        }
        Tally { mass, sums }
    }

    /// F(s) = −ln p(s) on each bin, p the weight in the bin over its width (so F does not depend
    /// on the bin width up to discretisation); +∞ for a bin without weight.
    pub fn profile(&self, bins: &Bins) -> Vec<f64> {
        (0..bins.count)
            .map(|i| -((self.mass[2 * i + 1] + self.mass[2 * i + 2]) / bins.width()).ln())
            .collect()
    }

    /// Weight between half-bin boundaries: half-bins `from..to`.
    fn mass_in(&self, from: usize, to: usize) -> f64 {
        self.mass[from..to].iter().sum()
    }

    /// The weight of each basin: the samples between its boundaries, those below lo counted in
    /// the first basin and those above hi in the last.
    pub fn basin_weights(&self, basins: &[BasinBins]) -> Vec<f64> {
        basin_half_ranges(basins, self.mass.len())
            .map(|(a, b)| self.mass_in(a, b))
            .collect()
    }

    /// The reweighted average of observable j over all samples.
    pub fn mean(&self, j: usize) -> f64 {
        self.sums[j].iter().sum::<f64>() / self.mass.iter().sum::<f64>()
    }

    /// The reweighted average of observable j within each basin (NaN for a basin with no weight).
    pub fn basin_means(&self, j: usize, basins: &[BasinBins]) -> Vec<f64> {
        basin_half_ranges(basins, self.mass.len())
            .map(|(a, b)| self.sums[j][a..b].iter().sum::<f64>() / self.mass_in(a, b))
            .collect()
    }
}

/// Half-bin ranges of each basin: the split at bin t's centre falls between half-bins 2t + 1
/// and 2t + 2.
fn basin_half_ranges(
    basins: &[BasinBins],
    halves: usize,
) -> impl Iterator<Item = (usize, usize)> + '_ {
    let last = basins.len().saturating_sub(1);
    basins.iter().enumerate().map(move |(i, b)| {
        let from = if i == 0 { 0 } else { 2 * b.first + 2 };
        let to = if i == last { halves } else { 2 * b.last + 2 };
        (from, to)
    })
}

/// One basin of F as bins: it spans bins first..=last (neighbouring basins share the barrier-top
/// bin, split at its centre) and its lowest bin is `min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BasinBins {
    /// First bin (0 for the first basin, else the barrier top to its left).
    pub first: usize,
    /// Last bin (count − 1 for the last basin, else the barrier top to its right).
    pub last: usize,
    /// Bin of the minimum of F.
    pub min: usize,
}

/// Splits F into basins at its barrier tops. Starting from every local minimum of the finite
/// part of F (bins without weight count as +∞), the two neighbouring basins with the least
/// prominent barrier between them — F_top − max(F_a, F_b), F_top the maximum of F between their
/// minima — are merged while that prominence is below `threshold(top, min_a, min_b)` (in kT; the
/// caller makes it noise-aware). Basins are returned in order of s; none if F has no finite bin.
pub fn split_basins(f: &[f64], threshold: &dyn Fn(usize, usize, usize) -> f64) -> Vec<BasinBins> {
    let mut mins = local_minima(f);
    loop {
        if mins.len() < 2 {
            break;
        }
        let weakest = (0..mins.len() - 1)
            .map(|i| {
                let (a, b) = (mins[i], mins[i + 1]);
                let top = arg_max(f, a, b);
                let prominence = f[top] - f[a].max(f[b]);
                (i, prominence - threshold(top, a, b))
            })
            .min_by(|x, y| x.1.total_cmp(&y.1));
        match weakest {
            Some((i, excess)) if excess < 0.0 => {
                let drop = if f[mins[i]] <= f[mins[i + 1]] {
                    i + 1
                } else {
                    i
                };
                mins.remove(drop);
            }
            _ => break,
        }
    }
    let last_bin = f.len() - 1;
    (0..mins.len())
        .map(|i| BasinBins {
            first: if i == 0 {
                0
            } else {
                arg_max(f, mins[i - 1], mins[i])
            },
            last: if i + 1 == mins.len() {
                last_bin
            } else {
                arg_max(f, mins[i], mins[i + 1])
            },
            min: mins[i],
        })
        .collect()
}

/// Local minima of the finite bins: f[i] ≤ its left neighbour and < its right one (a plateau
/// counts once), neighbours outside or without weight counting as +∞.
fn local_minima(f: &[f64]) -> Vec<usize> {
    let at = |i: Option<usize>| {
        i.and_then(|i| f.get(i))
            .copied()
            .filter(|v| v.is_finite())
            .unwrap_or(f64::INFINITY)
    };
    (0..f.len())
        .filter(|&i| f[i].is_finite() && f[i] <= at(i.checked_sub(1)) && f[i] < at(Some(i + 1)))
        .collect()
}

/// Index of the (first) maximum of f over bins a..=b, +∞ counting as largest.
fn arg_max(f: &[f64], a: usize, b: usize) -> usize {
    (a..=b).fold(a, |best, i| if f[i] > f[best] { i } else { best })
}

/// The barrier between the two deepest basins `pair` = (a, b), a < b in order of s: the
/// maximum F_top of F over the bins between their minima (through any basin between them), and
/// its height F_top − min(F_a, F_b) above the deeper minimum (what the more populated basin must
/// climb) and F_top − max(F_a, F_b) above the shallower one (what keeps the metastable basin
/// alive: it vanishes at a spinodal). F_a and F_b are the minima of F over each basin's bins,
/// so the same definition applies to a bootstrap replicate's F with the basins held fixed.
pub fn barrier(f: &[f64], basins: &[BasinBins], pair: (usize, usize)) -> (usize, f64, f64) {
    let (a, b) = (basins[pair.0], basins[pair.1]);
    let min_over = |x: BasinBins| {
        (x.first..=x.last)
            .map(|i| f[i])
            .fold(f64::INFINITY, f64::min)
    };
    let (fa, fb) = (min_over(a), min_over(b));
    let top = arg_max(f, a.min, b.min);
    (top, f[top] - fa.min(fb), f[top] - fa.max(fb))
}

/// The two deepest basins (lowest F at their minima), as indices in order of s; None with
/// fewer than two basins.
pub fn deepest_pair(f: &[f64], basins: &[BasinBins]) -> Option<(usize, usize)> {
    if basins.len() < 2 {
        return None;
    }
    let mut idx: Vec<usize> = (0..basins.len()).collect();
    idx.sort_by(|&x, &y| {
        f[basins[x].min]
            .total_cmp(&f[basins[y].min])
            .then(x.cmp(&y))
    });
    let (x, y) = (idx[0], idx[1]);
    Some((x.min(y), x.max(y)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_bins_put_edges_and_outside_samples_where_documented() {
        let b = Bins::new(0.0, 1.0, 2).unwrap();
        assert_eq!(b.half_bin(-0.1), 0);
        assert_eq!(b.half_bin(0.0), 1);
        assert_eq!(b.half_bin(0.3), 2);
        assert_eq!(b.half_bin(0.5), 3);
        assert_eq!(b.half_bin(1.0), 4);
        assert_eq!(b.half_bin(1.5), 5);
    }

    #[test]
    fn small_wiggles_do_not_split_a_basin_but_a_real_barrier_does() {
        // Minima at 1 and 7; a 0.2 kT wiggle at 3–4 and a 3 kT barrier at 5.
        let f = [2.0, 0.0, 0.5, 0.7, 0.5, 3.0, 1.0, 0.2, 2.0];
        let basins = split_basins(&f, &|_, _, _| 0.5);
        assert_eq!(basins.len(), 2, "{basins:?}");
        assert_eq!((basins[0].first, basins[0].last, basins[0].min), (0, 5, 1));
        assert_eq!((basins[1].first, basins[1].last, basins[1].min), (5, 8, 7));
        let pair = deepest_pair(&f, &basins).unwrap();
        let (top, from_deeper, from_shallower) = barrier(&f, &basins, pair);
        assert_eq!(top, 5);
        assert!((from_deeper - 3.0).abs() < 1e-12 && (from_shallower - 2.8).abs() < 1e-12);
        // With no threshold the wiggle splits off a third basin.
        assert_eq!(split_basins(&f, &|_, _, _| 0.0).len(), 3);
    }

    #[test]
    fn basin_weights_split_the_barrier_bin_at_its_centre_and_keep_outside_samples() {
        let bins = Bins::new(0.0, 3.0, 3).unwrap();
        let s = [-1.0, 0.5, 1.2, 1.7, 2.5, 9.0];
        let log_w = vec![(1.0f64 / 6.0).ln(); 6];
        let t = Tally::new(&bins, &s, &log_w, &[s.to_vec()]);
        let basins = [
            BasinBins {
                first: 0,
                last: 1,
                min: 0,
            },
            BasinBins {
                first: 1,
                last: 2,
                min: 2,
            },
        ];
        let w = t.basin_weights(&basins);
        assert!(
            (w[0] - 0.5).abs() < 1e-12 && (w[1] - 0.5).abs() < 1e-12,
            "{w:?}"
        );
        let m = t.basin_means(0, &basins);
        assert!((m[0] - (-1.0 + 0.5 + 1.2) / 3.0).abs() < 1e-12);
        assert!((t.mean(0) - s.iter().sum::<f64>() / 6.0).abs() < 1e-12);
    }
}
