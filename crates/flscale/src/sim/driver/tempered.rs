//! Replica exchange in the FCN run (`sampler.tempering`): the replicas at β < 1 of
//! every chain, their swaps with the observed β = 1 ensemble, the ladder's adaptation during
//! burn-in and the diagnostics (the swap moves and statistics are in
//! [`crate::sim::kernel::tempering`]).
//!
//! Layout: slot j of the ladder is a whole [`Ensemble`] of E chains with its own cached-gradient
//! [`Kernel`] at `data_scale` = β_j, its own step η_j (adapted from its own λ_max, which falls
//! with β) and its own noise streams; slot 0 is the run's ensemble, the only one observed. A
//! slot advances its E chains in blocks as an untempered ensemble does, so every replica keeps
//! the GEMM throughput of a chain. Chain k's replicas are the k-th chains of the slots; a swap
//! of slots j and j + 1 of chain k exchanges their parameters (states stay in slots, so every
//! slot keeps its step and kernel state), after which the two slots' gradients are evaluated
//! again before their next move. Swap uniforms come from chain k's own swap stream, chains are
//! visited in order: the run is identical for any thread count.
//!
//! The tempered family is the power posterior of the data term (module doc of
//! [`crate::sim::kernel::tempering`]): U_β = β·D + prior, D the data term of the posterior the
//! kernel samples — the likelihood term L for the plain posterior; for the collapsed one the
//! β-dependent part is D_c = −T·log ∫ p(a)·e^{−L/T} da (the readout's marginal likelihood term,
//! readout prior included) and the β-independent part the hidden weights' Gaussian prior. So
//! the swap of states x (at β_j) and x′ (at β_{j+1}) has log ratio
//! (β_j − β_{j+1})(D(x) − D(x′))/T for either posterior, from the D every evaluation leaves in
//! `ChainBlock::data_loss`, at no extra cost. At β = 1 it is the collapsed posterior itself.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::sim::adapt::StepSteering;
use crate::sim::chains::Divergence;
use crate::sim::config::{SamplerConfig, TemperingConfig};
use crate::sim::ensemble::fcn::Ensemble;
use crate::sim::kernel::mala::Kernel;
use crate::sim::kernel::tempering::{log_swap_ratio, Ladder, ReplicaSet, SwapStats};
use crate::sim::kernel::transition::Transition;
use crate::sim::model::fcn::FcnModel;
use crate::sim::model::interface::Model;
use crate::sim::num::real::Real;

/// What a tempered run reports (in `summary.tempering`; docs/langevin.md, "Replica exchange").
/// Rates are over the sampling window (after burn-in) and over the chains whose replicas all
/// survived.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct TemperingDiagnostics {
    /// R.
    pub replicas: usize,
    /// The ladder after burn-in, β_0 = 1 > … > β_{R−1}.
    pub betas: Vec<f64>,
    /// Steps between swap rounds.
    pub swap_every: usize,
    /// Whether the ladder was adapted during burn-in.
    pub adapted: bool,
    /// Per neighbouring pair (j, j+1): accepted / proposed swaps.
    pub swap_acceptance: Vec<f64>,
    /// The global communication barrier Λ = Σ_j (1 − acceptance_j) (Syed et al. 2022, §4).
    pub barrier: f64,
    /// The R ≈ 2Λ + 1 that makes each pair's rejection about ½ (the rule of Syed et al.,
    /// Pigeons.jl); a larger R than this costs more without speeding round trips much.
    pub suggested_replicas: usize,
    /// Completed round trips (β = 1 → β_min → β = 1) of all chains' states.
    pub round_trips: u64,
    /// Round trips per chain per swap round, measured.
    pub round_trip_rate: f64,
    /// The rate DEO reaches with this ladder's rejections when the kernels decorrelate the
    /// energies between rounds (Syed et al. 2022, Thm 3); measured ≪ predicted says the kernel
    /// is the bottleneck, not the ladder.
    pub predicted_round_trip_rate: f64,
    /// Round trips per chain per 1000 steps (the unit of `steps`).
    pub round_trips_per_1000_steps: f64,
    /// The step η of every slot after burn-in (slot 0 is `diagnostics.step`).
    pub steps: Vec<f64>,
    /// Chains left out of the swaps because one of their replicas at β < 1 diverged.
    pub diverged_replicas: usize,
    /// The changes of R during burn-in (`max_replicas`), in order; R is `replicas` after the
    /// last one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resizes: Vec<LadderResize>,
}

/// One change of the number of replicas during burn-in (`sampler.tempering.max_replicas`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LadderResize {
    /// The burn-in step at which it happened.
    pub step: usize,
    /// The barrier Λ measured over the swaps since the previous adaptation.
    pub barrier: f64,
    /// R before.
    pub from: usize,
    /// R after: ⌈2Λ⌉ + 1 within 2 … `max_replicas`.
    pub to: usize,
}

/// One slot of the ladder at β < 1.
struct Slot<T: Real, M: Model<T>> {
    ens: Ensemble<T, M>,
    /// Always the cached-gradient kernel: replica exchange needs its cached energies.
    kernel: Transition<T>,
    steering: StepSteering,
}

/// Builds a slot's kernel for its ensemble.
type KernelFactory<'a, T, M> = Box<dyn FnMut(&Ensemble<T, M>) -> Kernel<T> + 'a>;

/// How the slots' ensembles and kernels are built: `start(stream)` is an ensemble of the
/// run's model, data and start with the noise streams of `stream` (distinct for every slot
/// ever built; [`slot_seed`]), `kernel` its kernel. Kept for the slots a growing ladder adds.
struct SlotFactory<'a, T: Real, M: Model<T>> {
    start: Box<dyn FnMut(usize) -> Ensemble<T, M> + 'a>,
    kernel: KernelFactory<'a, T, M>,
    /// Streams used so far (slot 0's included).
    streams: usize,
    /// (mala, hmc) of the sampler, for a new slot's step steering.
    steering: (bool, bool),
}

impl<T: Real, M: Model<T>> SlotFactory<'_, T, M> {
    /// A slot with the next unused noise streams, its kernel, and the step steering of
    /// `steering` restarted (a fresh one without).
    fn slot(&mut self, steering: Option<&StepSteering>) -> Slot<T, M> {
        let ens = (self.start)(self.streams);
        self.streams += 1;
        let kernel = (self.kernel)(&ens);
        Slot {
            ens,
            kernel: Transition::Cached(kernel),
            steering: steering.map_or_else(
                || StepSteering::new(self.steering.0, self.steering.1),
                StepSteering::restarted,
            ),
        }
    }
}

/// Copies every chain's state of `from` into `to` (same model, data and chain blocks): the
/// parameters, the data term and training error they leave, the divergence marks, the step
/// and the step count. The noise streams stay `to`'s own.
fn copy_states<T: Real, M: Model<T>>(from: &Ensemble<T, M>, to: &mut Ensemble<T, M>) {
    for (a, b) in from.blocks.iter().zip(&mut to.blocks) {
        for (pa, pb) in a.params.iter().zip(&mut b.params) {
            pb.copy_from_slice(pa);
        }
        b.data_loss.clone_from(&a.data_loss);
        b.sq_error.clone_from(&a.sq_error);
        b.diverged.clone_from(&a.diverged);
    }
    to.dynamics.step = from.dynamics.step;
    to.steps_done = from.steps_done;
}

/// The replicas of a tempered run beside its β = 1 ensemble (module doc).
pub(crate) struct Replicas<'a, T: Real, M: Model<T> = FcnModel> {
    config: TemperingConfig,
    ladder: Ladder,
    /// Slots 1 … R−1.
    slots: Vec<Slot<T, M>>,
    factory: SlotFactory<'a, T, M>,
    resizes: Vec<LadderResize>,
    /// Per chain: who sits where, and the swap statistics.
    sets: Vec<ReplicaSet>,
    swap_rngs: Vec<ChaCha8Rng>,
    round: u64,
    adapted: bool,
    /// The steps of swap rounds done in the sampling window (for the rate per step).
    window_steps: usize,
}

/// The seed of slot j's ensemble: distinct streams for every slot, slot 0 the run's own.
pub(crate) fn slot_seed(seed: u64, slot: usize) -> u64 {
    if slot == 0 {
        seed
    } else {
        seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(slot as u64))
    }
}

/// The stream tag of the swap uniforms (chain k uses stream k of this seed).
const SWAP_STREAM_SEED: u64 = 0x5357_4150_5354_524D;

impl<'a, T: Real, M: Model<T>> Replicas<'a, T, M> {
    /// The replicas of slots 1 … R−1; `start(stream)` builds an ensemble with the model, data
    /// and start of slot 0 and the noise streams of `stream` (slot j starts with stream j;
    /// slots added by a growing ladder get new ones) and `kernel(&ens)` its kernel.
    pub(crate) fn new(
        config: &TemperingConfig,
        sampler: &SamplerConfig,
        chains: usize,
        start: impl FnMut(usize) -> Ensemble<T, M> + 'a,
        kernel: impl FnMut(&Ensemble<T, M>) -> Kernel<T> + 'a,
    ) -> Self {
        let ladder = Ladder::geometric(config.replicas, config.beta_min);
        let mut factory = SlotFactory {
            start: Box::new(start),
            kernel: Box::new(kernel),
            streams: 1,
            steering: (
                sampler.proposal.is_metropolis(),
                sampler.proposal.leapfrog_steps().is_some(),
            ),
        };
        let slots = (1..config.replicas)
            .map(|j| {
                let mut slot = factory.slot(None);
                if let Some(k) = slot.kernel.kernel_mut() {
                    k.data_scale = ladder.betas()[j];
                }
                slot
            })
            .collect();
        let swap_seed = sampler.seed ^ SWAP_STREAM_SEED;
        Replicas {
            config: config.clone(),
            ladder,
            slots,
            sets: (0..chains)
                .map(|_| ReplicaSet::new(config.replicas))
                .collect(),
            swap_rngs: (0..chains)
                .map(|k| {
                    let mut rng = ChaCha8Rng::seed_from_u64(swap_seed);
                    rng.set_stream(k as u64);
                    rng
                })
                .collect(),
            round: 0,
            adapted: false,
            window_steps: 0,
            factory,
            resizes: Vec::new(),
        }
    }

    /// Every slot's step adaptation (`adapt` is the driver's, run on each slot's own ensemble,
    /// kernel and steering), preceded in the first half of burn-in by the ladder's adaptation.
    /// `ens0` is the β = 1 slot, the source of new slots' states where it is the nearest.
    pub(crate) fn adapt(
        &mut self,
        ens0: &Ensemble<T, M>,
        t: usize,
        burn_in: usize,
        mut adapt: impl FnMut(&mut Ensemble<T, M>, &mut Transition<T>, &mut StepSteering),
    ) {
        if self.config.adapt && 2 * t <= burn_in && self.round > 0 {
            self.equalise_ladder(ens0, t, burn_in);
        }
        for slot in &mut self.slots {
            adapt(&mut slot.ens, &mut slot.kernel, &mut slot.steering);
        }
    }

    /// Moves the β's to equal rejection per pair from the swaps since the last call — with
    /// [`Replicas::replicas_wanted`] slots — then restarts the statistics.
    fn equalise_ladder(&mut self, ens0: &Ensemble<T, M>, t: usize, burn_in: usize) {
        let pooled = self.pooled_stats();
        if pooled.proposed.contains(&0) {
            return;
        }
        let (from, barrier) = (self.ladder.len(), pooled.barrier());
        let to = self.replicas_wanted(barrier, t, burn_in);
        let ladder = self.ladder.equalised(&pooled.rejection(), to);
        if to == from {
            self.ladder = ladder;
            for (j, slot) in self.slots.iter_mut().enumerate() {
                if let Some(k) = slot.kernel.kernel_mut() {
                    k.data_scale = self.ladder.betas()[j + 1];
                    k.invalidate();
                }
            }
            for set in &mut self.sets {
                set.reset_stats();
            }
        } else {
            self.resize(ens0, ladder);
            self.resizes.push(LadderResize {
                step: t,
                barrier,
                from,
                to,
            });
        }
        self.adapted = true;
    }

    /// R for the next stretch. Without `max_replicas`, the current R. With it, from the second
    /// quarter of burn-in on (the first quarter's swaps are of states far from equilibrium and
    /// of a ladder not yet equalised), R ≈ 2Λ + 1 ([`Ladder::replicas_for_barrier`]): grown
    /// whenever Λ asks for more (a coarse ladder's rejections saturate at 1, so its Σ r_k
    /// underestimates Λ and the next, finer ladder measures more), shrunk only by three or
    /// more: Λ from one interval is noisy, and at the blog setting's P = 32d it moved between
    /// 10.3 and 11.7 from one adaptation to the next, so a two-slot threshold flipped R between
    /// 22 and 24 five times in one burn-in (BENCHMARKS.md, "Replica exchange at the blog
    /// setting", "With R chosen from the barrier"); the rule is [`resized_replicas`].
    fn replicas_wanted(&self, barrier: f64, t: usize, burn_in: usize) -> usize {
        let now = self.ladder.len();
        let Some(max) = self.config.max_replicas else {
            return now;
        };
        if 4 * t < burn_in {
            return now;
        }
        resized_replicas(now, Ladder::replicas_for_barrier(barrier, max))
    }

    /// Replaces the slots by those of `ladder` (another R): each new slot j ≥ 1 starts from a
    /// copy of every chain's state (parameters, data term, divergence) and of the step of the
    /// old slot nearest to β_j in log β — slot 0 included — with new noise streams, a new
    /// kernel and the old slot's step steering. The run stays exact: the ladder only changes
    /// during burn-in, and after its last change every slot targets its π_β from there on.
    fn resize(&mut self, ens0: &Ensemble<T, M>, ladder: Ladder) {
        let old_betas = self.ladder.betas().to_vec();
        let old_slots = std::mem::take(&mut self.slots);
        for &beta in &ladder.betas()[1..] {
            let nearest = (0..old_betas.len())
                .min_by(|&a, &b| {
                    let dist = |k: usize| (old_betas[k].ln() - beta.ln()).abs();
                    dist(a).total_cmp(&dist(b))
                })
                .expect("at least two slots");
            // Slot 0's steering is the driver's: a copy of it is steered afresh.
            let (source, steering) = match nearest {
                0 => (ens0, None),
                k => (&old_slots[k - 1].ens, Some(&old_slots[k - 1].steering)),
            };
            let mut slot = self.factory.slot(steering);
            copy_states(source, &mut slot.ens);
            if let Some(k) = slot.kernel.kernel_mut() {
                k.data_scale = beta;
            }
            self.slots.push(slot);
        }
        self.ladder = ladder;
        let r = self.ladder.len();
        for set in &mut self.sets {
            *set = ReplicaSet::new(r);
        }
    }

    /// Advances every slot by `n` steps (slot 0 by `advance0`), then, when `t_end` is a
    /// multiple of `swap_every`, runs one swap round against slot 0's ensemble `ens0`.
    pub(crate) fn advance(
        &mut self,
        ens0: &mut Ensemble<T, M>,
        kernel0: &mut Kernel<T>,
        n: usize,
        t_end: usize,
        sampling: bool,
    ) {
        kernel0.advance(ens0, n);
        for slot in &mut self.slots {
            if let Some(k) = slot.kernel.kernel_mut() {
                k.advance(&mut slot.ens, n);
            }
        }
        if sampling {
            self.window_steps += n;
        }
        if t_end % self.config.swap_every == 0 {
            self.swap_round(ens0, kernel0);
        }
    }

    /// One DEO round for every chain whose replicas are all alive (module doc).
    fn swap_round(&mut self, ens0: &mut Ensemble<T, M>, kernel0: &mut Kernel<T>) {
        let betas = self.ladder.betas().to_vec();
        let temperature = ens0.dynamics.temperature;
        let mut exchanges = Vec::new();
        let mut chain = 0;
        for (bi, block) in ens0.blocks.iter().enumerate() {
            for c in 0..block.len {
                let slot_blocks: Vec<_> = self.slots.iter().map(|s| &s.ens.blocks[bi]).collect();
                let alive = block.diverged[c].is_none()
                    && slot_blocks.iter().all(|b| b.diverged[c].is_none());
                if alive {
                    // D of every slot's state of this chain, slot order.
                    let d: Vec<f64> = std::iter::once(block.data_loss[c])
                        .chain(slot_blocks.iter().map(|b| b.data_loss[c]))
                        .collect();
                    let swapped = self.sets[chain].swap_round(
                        self.round,
                        &mut self.swap_rngs[chain],
                        |_, _, j| {
                            let (da, db) = (d[j], d[j + 1]);
                            log_swap_ratio(
                                betas[j],
                                betas[j + 1],
                                |beta| beta * da / temperature,
                                |beta| beta * db / temperature,
                            )
                        },
                    );
                    exchanges.extend(swapped.into_iter().map(|j| (j, bi, c)));
                }
                chain += 1;
            }
        }
        self.round += 1;
        let mut touched = vec![false; betas.len()];
        for &(j, bi, c) in &exchanges {
            touched[j] = true;
            touched[j + 1] = true;
            self.exchange(ens0, j, bi, c);
        }
        if touched[0] {
            // The observed slot is measured next: its energy and virial must be its new state's.
            kernel0.refresh(ens0);
        }
        for (j, slot) in self.slots.iter_mut().enumerate() {
            if touched[j + 1] {
                if let Some(k) = slot.kernel.kernel_mut() {
                    k.invalidate();
                }
            }
        }
    }

    /// Exchanges chain (block `bi`, position `c`)'s states of slots j and j + 1.
    fn exchange(&mut self, ens0: &mut Ensemble<T, M>, j: usize, bi: usize, c: usize) {
        let lens: Vec<usize> = (0..ens0.model.n_groups())
            .map(|g| ens0.model.group_len(g))
            .collect();
        let (low, high): (&mut Ensemble<T, M>, &mut Ensemble<T, M>) = if j == 0 {
            (ens0, &mut self.slots[0].ens)
        } else {
            let (a, b) = self.slots.split_at_mut(j);
            (&mut a[j - 1].ens, &mut b[0].ens)
        };
        let (a, b) = (&mut low.blocks[bi], &mut high.blocks[bi]);
        for (g, &n) in lens.iter().enumerate() {
            a.params[g][c * n..(c + 1) * n].swap_with_slice(&mut b.params[g][c * n..(c + 1) * n]);
        }
        std::mem::swap(&mut a.data_loss[c], &mut b.data_loss[c]);
        std::mem::swap(&mut a.sq_error[c], &mut b.sq_error[c]);
    }

    /// Every slot's kernel under `restraint` (the burn-in ramp of
    /// [`super::engine`]), its cached energies forgotten.
    pub(crate) fn set_restraint(&mut self, restraint: &crate::sim::restraint::Restraint) {
        for slot in &mut self.slots {
            if let Transition::Cached(k) = &mut slot.kernel {
                k.restraint = Some(restraint.clone());
                k.invalidate();
            }
        }
    }

    /// Clears the swap statistics (at the end of burn-in).
    pub(crate) fn start_window(&mut self) {
        for set in &mut self.sets {
            set.reset_stats();
        }
        self.window_steps = 0;
    }

    /// The statistics summed over the chains whose replicas are all alive.
    fn pooled_stats(&self) -> SwapStats {
        let pairs = self.ladder.len() - 1;
        let mut pooled = SwapStats {
            proposed: vec![0; pairs],
            accepted: vec![0; pairs],
            ..SwapStats::default()
        };
        for set in &self.sets {
            let s = &set.stats;
            if s.rounds == 0 {
                continue;
            }
            for j in 0..pairs {
                pooled.proposed[j] += s.proposed[j];
                pooled.accepted[j] += s.accepted[j];
            }
            pooled.round_trips += s.round_trips;
            pooled.rounds += s.rounds;
        }
        pooled
    }

    /// The diagnostics of the sampling window; also marks slot 0's chains whose replicas
    /// diverged as diverged, so that they are left out of every result as a diverged chain is.
    pub(crate) fn finish(&self, ens0: &mut Ensemble<T, M>) -> TemperingDiagnostics {
        let mut diverged = 0;
        let step_now = ens0.steps_done;
        for (bi, block) in ens0.blocks.iter_mut().enumerate() {
            for c in 0..block.len {
                let lost =
                    self.slots.iter().enumerate().find_map(|(j, s)| {
                        s.ens.blocks[bi].diverged[c].as_ref().map(|d| (j + 1, d))
                    });
                if let (None, Some((slot, d))) = (&block.diverged[c], lost) {
                    diverged += 1;
                    block.diverged[c] = Some(Divergence {
                        step: d.step.min(step_now),
                        reason: format!(
                            "its replica at β = {:.4} (slot {slot}) diverged: {}",
                            self.ladder.betas()[slot],
                            d.reason
                        ),
                    });
                }
            }
        }
        let pooled = self.pooled_stats();
        let acceptance: Vec<f64> = pooled
            .proposed
            .iter()
            .zip(&pooled.accepted)
            .map(|(&p, &a)| if p == 0 { 0.0 } else { a as f64 / p as f64 })
            .collect();
        let barrier = pooled.barrier();
        let live_chains = self
            .sets
            .iter()
            .filter(|s| s.stats.rounds > 0)
            .count()
            .max(1);
        TemperingDiagnostics {
            replicas: self.ladder.len(),
            betas: self.ladder.betas().to_vec(),
            swap_every: self.config.swap_every,
            adapted: self.adapted,
            swap_acceptance: acceptance,
            barrier,
            suggested_replicas: Ladder::replicas_for_barrier(barrier, 64),
            round_trips: pooled.round_trips,
            round_trip_rate: pooled.round_trip_rate(),
            predicted_round_trip_rate: pooled.predicted_round_trip_rate(),
            round_trips_per_1000_steps: if self.window_steps > 0 {
                1000.0 * pooled.round_trips as f64 / live_chains as f64 / self.window_steps as f64
            } else {
                0.0
            },
            steps: std::iter::once(ens0.dynamics.step)
                .chain(self.slots.iter().map(|s| s.ens.dynamics.step))
                .collect(),
            diverged_replicas: diverged,
            resizes: self.resizes.clone(),
        }
    }
}

/// The R a ladder of `now` slots moves to when the barrier asks for `wanted`: up at once,
/// down only by [`SHRINK_HYSTERESIS`] or more ([`Replicas::replicas_wanted`]).
fn resized_replicas(now: usize, wanted: usize) -> usize {
    if wanted > now || wanted + SHRINK_HYSTERESIS <= now {
        wanted
    } else {
        now
    }
}

/// Fewest slots a ladder sheds at once: at P = 32d, seed 1, a threshold of 2 flipped R between
/// 24 and 22 five times on the noise of Λ (10.3–11.7 between adaptations).
const SHRINK_HYSTERESIS: usize = 3;

#[cfg(test)]
mod resize_tests {
    use super::resized_replicas;

    #[test]
    fn the_ladder_grows_at_once_and_shrinks_only_by_three_or_more() {
        assert_eq!(resized_replicas(16, 17), 17);
        assert_eq!(resized_replicas(8, 24), 24);
        assert_eq!(resized_replicas(24, 23), 24);
        // The flip of the P = 32d benchmark: Λ asking for 22 keeps 24 slots.
        assert_eq!(resized_replicas(24, 22), 24);
        assert_eq!(resized_replicas(24, 21), 21);
        assert_eq!(resized_replicas(10, 3), 3);
    }
}
