//! What every container of chains shares: the per-chain RNG streams, the block-size rule and
//! the divergence record (spec 02, "Robust").

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The one chain layout of the engine: B consecutive chains advanced together,
/// every parameter group stored for the whole block, chain after chain, so that a model can
/// evaluate the block's chains at once (the FCN's first layer is one GEMM over them,
/// [`crate::sim::model::fcn`]); per chain its RNG stream, divergence record and the values of
/// its last evaluation.
#[derive(Debug, Clone)]
pub struct ChainBlock<T> {
    /// Global index of the block's first chain.
    pub first: usize,
    /// Number of chains B in the block.
    pub len: usize,
    /// Parameters per group, chain-major (group g of chain c at c·len_g … (c+1)·len_g).
    pub params: Vec<Vec<T>>,
    pub(crate) grads: Vec<Vec<T>>,
    pub(crate) residual: Vec<T>,
    pub(crate) rngs: Vec<ChaCha8Rng>,
    /// `Some` once the chain has diverged.
    pub diverged: Vec<Option<Divergence>>,
    /// U at the last gradient evaluation, per chain.
    pub energy: Vec<f64>,
    /// Σ_μ (f − y)² on the training set at the last gradient evaluation, per chain.
    pub sq_error: Vec<f64>,
    /// The data term L of U at the last gradient evaluation, per chain.
    pub data_loss: Vec<f64>,
    /// θ_g·∇_g U at the last gradient evaluation, per chain and group (kinetic/configurational
    /// temperature check: ⟨θ·∇U⟩ = T·#params at equilibrium, by integration by parts).
    pub virial: Vec<Vec<f64>>,
}

/// Why and when a chain was stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// Global step (1-based) at which it was detected.
    pub step: usize,
    /// "non-finite energy", "energy exploded (U = …)" or why U could not be evaluated.
    pub reason: String,
}

impl Divergence {
    /// The divergence of a chain whose energy at global step `step` is `energy`: its
    /// evaluation failed (`failure`, the reason given), the energy is not finite, or it
    /// exceeds `threshold` (spec 02, "Robust"); `None` when the chain may go on.
    pub fn check(
        energy: f64,
        failure: Option<&str>,
        threshold: f64,
        step: usize,
    ) -> Option<Divergence> {
        let reason = if let Some(failure) = failure {
            failure.to_string()
        } else if !energy.is_finite() {
            "non-finite energy".to_string()
        } else if energy > threshold {
            format!("energy exploded (U = {energy:.3e})")
        } else {
            return None;
        };
        Some(Divergence { step, reason })
    }
}

/// Chains per block for chains that take `per_chain` bytes of the block's buffers (at least
/// one chain; one chain per block when `per_chain` is 0). The cache rule: enough chains to make the block's first-layer GEMM wide,
/// few enough that a block's P × B·N₁ activation matrix stays within ~1 MiB (the L2 of the
/// build machine; see `shared/bench/README.md`). Measured at the Fig. 2 size (P·N₁ = 64000,
/// f32) on that machine, single-threaded CPU time per E = 300 step: B = 1: 2.17 s, B = 4:
/// 1.85 s, B = 8: 1.83 s per 33 steps — B = 4 is what this rule picks there.
/// The balance rule: rayon hands whole blocks to the threads, so E = 30 in blocks of 4
/// (7 × 4 + 2) leaves one of two cores with 16 chains and the other with 14. The largest
/// B ≤ the cache bound, and at least half of it, that cuts E into an even number of equal
/// blocks is taken instead (E = 30 → 10 × 3, E = 300 → 100 × 3; both B = 3 and B = 4 execute
/// 77 M instructions per E = 30 step, callgrind); if there is none, the cache bound.
/// Depends only on the problem size and E, so the blocking — and the numbers — do not depend
/// on the thread count; each chain's numbers do not depend on B either (the GEMMs sum over
/// the same k in the same order for every block width).
pub fn block_size_for(per_chain: usize, chains: usize) -> usize {
    if per_chain == 0 {
        return 1;
    }
    let cache_bound = (1024 * 1024 / per_chain).clamp(1, 8);
    (cache_bound.div_ceil(2)..=cache_bound)
        .rev()
        .find(|&b| chains % b == 0 && (chains / b) % 2 == 0)
        .unwrap_or(cache_bound)
}

/// The RNG stream of chain k: key from the seed, stream k (rand_chacha's 64-bit stream id).
pub fn chain_rng(seed: u64, chain: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(chain as u64);
    rng
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divergence_names_the_failure_first_then_non_finite_then_the_threshold() {
        let at = |u: f64, f: Option<&str>| Divergence::check(u, f, 10.0, 7).map(|d| d.reason);
        assert_eq!(at(1.0, None), None);
        assert_eq!(at(10.0, None), None);
        assert_eq!(
            at(11.0, None).as_deref(),
            Some("energy exploded (U = 1.100e1)")
        );
        assert_eq!(at(f64::NAN, None).as_deref(), Some("non-finite energy"));
        assert_eq!(
            at(f64::INFINITY, None).as_deref(),
            Some("non-finite energy")
        );
        assert_eq!(
            at(1.0, Some("A not positive definite")).as_deref(),
            Some("A not positive definite")
        );
        assert_eq!(Divergence::check(f64::NAN, None, 10.0, 7).unwrap().step, 7);
    }
}
