//! Non-reversible parallel tempering on the data term: the swap moves, the
//! communication statistics and the ladder adaptation, independent of the kernel that advances
//! each replica.
//!
//! # The tempered family
//! Likelihood ("power posterior") tempering: replica r targets
//! π_β(θ) ∝ p(θ)·exp(−β·U_data(θ)), with the prior p untempered, so β = 0 is the prior
//! (sampled exactly by its own kernel) and β = 1 the posterior. For the plain posterior U_data
//! is the data term of U. For the collapsed posterior (readout a integrated out) the
//! β-independent part of U_c is the hidden weights' Gaussian prior and the β-dependent part
//! is D_c(θ) = −T·log ∫ p(a)·exp(−L(θ, a)/T) da, the readout's marginal-likelihood term: the
//! family p(θ)·p(y | θ)^β is the power posterior of that marginal likelihood, linear in β like
//! the plain one, so a swap needs each state's D_c at its own β only (the value every
//! evaluation leaves behind). (Tempering the joint instead, ∫ p(a)·L(θ, a)^β da, would be the
//! collapsed energy at κ/β, not linear in β: each swap would evaluate both states at both
//! temperatures; [`log_swap_ratio`] takes the energy as a function of β for either.)
//!
//! # Swaps (Syed, Bouchard-Côté, Deligiannidis & Doucet, JRSS-B 84 (2022) 321, §3)
//! Slots 0 … R−1 hold β_0 = 1 > β_1 > … > β_{R−1} ≥ 0. The deterministic even/odd scheme
//! (DEO) proposes, at round n, a swap of every pair (k, k+1) with k ≡ n (mod 2); the swap of
//! states x (at β_k) and x' (at β_{k+1}) is accepted with probability
//! min(1, π_{β_k}(x') π_{β_{k+1}}(x) / (π_{β_k}(x) π_{β_{k+1}}(x'))), which for linear
//! tempering is min(1, exp((β_k − β_{k+1})(U_data(x) − U_data(x')))). Each swap is a
//! Metropolis move that leaves the product of the π_β invariant; the alternation makes the
//! index process non-reversible, so a replica crosses the ladder in O(R) rounds instead of
//! O(R²). [`ReplicaSet`] exchanges temperatures (the "machine" keeps its state and changes its
//! β) and says which pairs swapped; the FCN run ([`crate::sim::driver::tempered`]) keeps a whole
//! ensemble per β, each with its own step, and moves the states instead.
//!
//! # Communication barrier and the ladder (ibid. §4–5; Pigeons.jl)
//! With r_k the rejection rate of pair k, the cumulative barrier Λ(β) is the piecewise linear
//! function through (β_k, Σ_{j<k} r_j) and Λ = Σ_k r_k; the round-trip rate of NRPT is
//! 1/(2 + 2Λ) in the limit of a fine ladder (ibid. Thm 3). The adapted ladder puts its β's at
//! equal increments of Λ(β) (equal rejection per pair), and R ≈ 2Λ + 1 slots make each pair's
//! rejection about ½ (R ≈ 2Λ for a large barrier).

use rand::Rng;

/// Inverse temperatures of the slots, β_0 = 1 > β_1 > … > β_{R−1} ≥ 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Ladder {
    betas: Vec<f64>,
}

impl Ladder {
    /// A ladder from explicit β's; they must start at 1, fall strictly and end at or above 0.
    pub fn new(betas: Vec<f64>) -> Result<Self, String> {
        let ok = betas.len() >= 2
            && betas[0] == 1.0
            && betas.windows(2).all(|w| w[1] < w[0])
            && betas.iter().all(|b| b.is_finite() && *b >= 0.0);
        if ok {
            Ok(Ladder { betas })
        } else {
            Err(format!(
                "the inverse temperatures {betas:?} are not allowed; they must start at 1.0 and fall strictly to a value ≥ 0, with at least two"
            ))
        }
    }

    /// R slots from β = 1 down to `beta_min` > 0 in equal ratios (the usual starting ladder:
    /// for a data term ∝ P, log β is the natural scale), or to 0 in equal steps when
    /// `beta_min` = 0.
    pub fn geometric(replicas: usize, beta_min: f64) -> Self {
        let r = replicas.max(2);
        let betas = (0..r)
            .map(|k| {
                let t = k as f64 / (r - 1) as f64;
                if beta_min > 0.0 {
                    beta_min.powf(t)
                } else {
                    1.0 - t
                }
            })
            .collect();
        Ladder { betas }
    }

    /// The β's, slot 0 first.
    pub fn betas(&self) -> &[f64] {
        &self.betas
    }

    /// Number of slots R.
    pub fn len(&self) -> usize {
        self.betas.len()
    }

    /// Always false: a ladder has at least two slots.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The cumulative communication barrier Λ(β_k) at each slot from per-pair rejection rates
    /// (module doc): Λ(β_0) = 0, Λ(β_{k+1}) = Λ(β_k) + r_k.
    pub fn cumulative_barrier(rejection: &[f64]) -> Vec<f64> {
        let mut out = Vec::with_capacity(rejection.len() + 1);
        let mut acc = 0.0;
        out.push(0.0);
        for r in rejection {
            acc += r;
            out.push(acc);
        }
        out
    }

    /// The ladder with `replicas` slots at equal increments of the barrier Λ(β) estimated from
    /// this ladder's per-pair rejection rates (Syed et al. 2022 §5.2): Λ(β) is interpolated
    /// linearly between the slots and inverted. The end points stay (1 and β_{R−1}).
    pub fn equalised(&self, rejection: &[f64], replicas: usize) -> Ladder {
        assert_eq!(
            rejection.len() + 1,
            self.len(),
            "one rejection rate per pair"
        );
        let lambda = Self::cumulative_barrier(rejection);
        let total = *lambda.last().expect("at least one pair");
        let r = replicas.max(2);
        let last = *self.betas.last().expect("at least two slots");
        if total <= 0.0 {
            return Ladder::geometric(r, last);
        }
        let mut betas = Vec::with_capacity(r);
        betas.push(1.0);
        for k in 1..r - 1 {
            let target = total * k as f64 / (r - 1) as f64;
            // The pair whose barrier interval holds the target, then linear inside it.
            let j = (0..rejection.len())
                .find(|&j| lambda[j + 1] >= target)
                .unwrap_or(rejection.len() - 1);
            let width = lambda[j + 1] - lambda[j];
            let t = if width > 0.0 {
                (target - lambda[j]) / width
            } else {
                0.0
            };
            betas.push(self.betas[j] + t * (self.betas[j + 1] - self.betas[j]));
        }
        betas.push(last);
        // Equal barriers can give equal β's only where a pair never rejected; keep them apart.
        for k in 1..betas.len() {
            if betas[k] >= betas[k - 1] {
                betas[k] = betas[k - 1] * (1.0 - 1e-9);
            }
        }
        Ladder { betas }
    }

    /// The number of slots for a barrier Λ: ⌈2Λ⌉ + 1, at least 2 (module doc).
    pub fn replicas_for_barrier(barrier: f64, max: usize) -> usize {
        let r = (2.0 * barrier).ceil() as usize + 1;
        r.clamp(2, max.max(2))
    }
}

/// log of the swap ratio π_{β_a}(x_b) π_{β_b}(x_a) / (π_{β_a}(x_a) π_{β_b}(x_b)) for states
/// x_a at β_a and x_b at β_b, where `energy_a(β)` and `energy_b(β)` are the states' tempered
/// energies −log π_β up to a β-dependent constant (module doc): the prior cancels and so does
/// any normalisation that depends on β only.
pub fn log_swap_ratio(
    beta_a: f64,
    beta_b: f64,
    energy_a: impl Fn(f64) -> f64,
    energy_b: impl Fn(f64) -> f64,
) -> f64 {
    (energy_a(beta_a) + energy_b(beta_b)) - (energy_b(beta_a) + energy_a(beta_b))
}

/// Swap and round-trip statistics of one ladder (module doc).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SwapStats {
    /// Per pair (k, k+1): proposed swaps.
    pub proposed: Vec<u64>,
    /// Per pair: accepted swaps.
    pub accepted: Vec<u64>,
    /// Completed round trips (slot 0 → slot R−1 → slot 0) over all machines.
    pub round_trips: u64,
    /// Swap rounds done.
    pub rounds: u64,
}

impl SwapStats {
    /// Per-pair rejection rates (1 where nothing was proposed yet).
    pub fn rejection(&self) -> Vec<f64> {
        self.proposed
            .iter()
            .zip(&self.accepted)
            .map(|(&p, &a)| {
                if p == 0 {
                    1.0
                } else {
                    1.0 - a as f64 / p as f64
                }
            })
            .collect()
    }

    /// The communication barrier Λ = Σ_k r_k.
    pub fn barrier(&self) -> f64 {
        self.rejection().iter().sum()
    }

    /// Round trips per swap round, over all machines.
    pub fn round_trip_rate(&self) -> f64 {
        if self.rounds == 0 {
            0.0
        } else {
            self.round_trips as f64 / self.rounds as f64
        }
    }

    /// The round-trip rate that DEO swaps reach when the replicas' energies are efficient
    /// local exploration (Syed et al. 2022, Thm 3): 1/(2 + 2 Σ_k r_k/(1 − r_k)); a measured
    /// rate well below it says that the kernels, not the ladder, limit the communication.
    pub fn predicted_round_trip_rate(&self) -> f64 {
        let s: f64 = self
            .rejection()
            .iter()
            .map(|r| r / (1.0 - r).max(1e-12))
            .sum();
        1.0 / (2.0 + 2.0 * s)
    }
}

/// Where a machine is on its way round the ladder (for counting round trips).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Leg {
    /// Not yet at slot 0.
    Unknown,
    /// Left slot 0, heading for the last slot.
    Outward,
    /// Touched the last slot after slot 0, heading back.
    Homeward,
}

/// The replicas of one chain: which machine (state) sits at which slot, where each machine is
/// on its round trip, and the statistics.
#[derive(Debug, Clone)]
pub struct ReplicaSet {
    /// slot → machine.
    machine_at: Vec<usize>,
    /// machine → slot.
    slot_of: Vec<usize>,
    /// machine → its leg: a round trip is slot 0 → last slot → slot 0.
    leg: Vec<Leg>,
    /// The statistics since the last [`ReplicaSet::reset_stats`].
    pub stats: SwapStats,
}

impl ReplicaSet {
    /// R replicas, machine k at slot k.
    pub fn new(replicas: usize) -> Self {
        let r = replicas.max(2);
        let mut leg = vec![Leg::Unknown; r];
        leg[0] = Leg::Outward;
        ReplicaSet {
            machine_at: (0..r).collect(),
            slot_of: (0..r).collect(),
            leg,
            stats: SwapStats {
                proposed: vec![0; r - 1],
                accepted: vec![0; r - 1],
                ..SwapStats::default()
            },
        }
    }

    /// The machine at slot k (slot 0: the β = 1 replica whose samples are observed).
    pub fn machine_at(&self, slot: usize) -> usize {
        self.machine_at[slot]
    }

    /// The slot of machine m.
    pub fn slot_of(&self, machine: usize) -> usize {
        self.slot_of[machine]
    }

    /// Clears the statistics (after burn-in, or when the ladder changes).
    pub fn reset_stats(&mut self) {
        let pairs = self.stats.proposed.len();
        self.stats = SwapStats {
            proposed: vec![0; pairs],
            accepted: vec![0; pairs],
            ..SwapStats::default()
        };
    }

    /// One DEO round (module doc): pairs (k, k+1) with k ≡ `round` (mod 2) are proposed;
    /// `log_ratio(machine_low, machine_high, k)` is the log swap ratio of the machines at
    /// slots k and k+1 ([`log_swap_ratio`] with β_k, β_{k+1}). One uniform is drawn per
    /// proposed pair, in slot order. Returns the pairs k whose swap was accepted (for a
    /// caller that keeps states in slots and moves them instead of the temperatures).
    pub fn swap_round<R: Rng>(
        &mut self,
        round: u64,
        rng: &mut R,
        mut log_ratio: impl FnMut(usize, usize, usize) -> f64,
    ) -> Vec<usize> {
        let pairs = self.machine_at.len() - 1;
        let mut swapped = Vec::new();
        let parity = (round % 2) as usize;
        for k in (parity..pairs).step_by(2) {
            let (a, b) = (self.machine_at[k], self.machine_at[k + 1]);
            let lr = log_ratio(a, b, k);
            let u: f64 = rng.random();
            self.stats.proposed[k] += 1;
            if lr >= 0.0 || u < lr.exp() {
                self.stats.accepted[k] += 1;
                swapped.push(k);
                self.machine_at.swap(k, k + 1);
                self.slot_of[a] = k + 1;
                self.slot_of[b] = k;
            }
        }
        self.stats.rounds += 1;
        for (m, leg) in self.leg.iter_mut().enumerate() {
            let slot = self.slot_of[m];
            *leg = match (*leg, slot) {
                (Leg::Homeward, 0) => {
                    self.stats.round_trips += 1;
                    Leg::Outward
                }
                (Leg::Unknown, 0) => Leg::Outward,
                (Leg::Outward, s) if s == pairs => Leg::Homeward,
                (l, _) => l,
            };
        }
        swapped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, StandardNormal};

    /// A 1-D test target: prior N(0, 1), data term V(x) = 16(x² − 1)² + 0.4x, so π_1 has two
    /// wells near ±1, the left one heavier, and a barrier of ≈ 16 nats between them.
    fn data_term(x: f64) -> f64 {
        16.0 * (x * x - 1.0).powi(2) + 0.4 * x
    }

    fn prior_term(x: f64) -> f64 {
        x * x / 2.0
    }

    /// R slots evenly spaced from 1 down to `lowest`.
    fn uniform_ladder(replicas: usize, lowest: f64) -> Ladder {
        let betas = (0..replicas)
            .map(|k| 1.0 - (1.0 - lowest) * k as f64 / (replicas - 1) as f64)
            .collect();
        Ladder::new(betas).unwrap()
    }

    /// Mass of x < 0 under π_β by dense quadrature (trapezoid on [−6, 6]).
    fn left_mass(beta: f64) -> f64 {
        let n = 200_000;
        let (mut left, mut all) = (0.0, 0.0);
        for i in 0..=n {
            let x = -6.0 + 12.0 * i as f64 / n as f64;
            let w = (-(prior_term(x) + beta * data_term(x))).exp();
            all += w;
            if x < 0.0 {
                left += w;
            }
        }
        left / all
    }

    /// Random-walk Metropolis on π_β, `steps` proposals of width `h`.
    fn metropolis(x: &mut f64, beta: f64, h: f64, steps: usize, rng: &mut ChaCha8Rng) {
        let u = |x: f64| prior_term(x) + beta * data_term(x);
        for _ in 0..steps {
            let z: f64 = StandardNormal.sample(rng);
            let y = *x + h * z;
            let a: f64 = rng.random();
            if a < (u(*x) - u(y)).exp() {
                *x = y;
            }
        }
    }

    /// Fraction of β = 1 samples with x < 0, for a ladder (tempered) or one replica.
    fn sample_left_fraction(ladder: &Ladder, rounds: u64, seed: u64) -> (f64, SwapStats) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let r = ladder.len();
        let mut xs = vec![1.0; r];
        let mut set = ReplicaSet::new(r);
        let betas = ladder.betas().to_vec();
        let (mut left, mut n) = (0.0, 0.0);
        for round in 0..rounds {
            for (m, x) in xs.iter_mut().enumerate() {
                let beta = betas[set.slot_of(m)];
                metropolis(x, beta, 0.3, 5, &mut rng);
            }
            let snapshot = xs.clone();
            set.swap_round(round, &mut rng, |a, b, k| {
                let (xa, xb) = (snapshot[a], snapshot[b]);
                log_swap_ratio(
                    betas[k],
                    betas[k + 1],
                    |beta| prior_term(xa) + beta * data_term(xa),
                    |beta| prior_term(xb) + beta * data_term(xb),
                )
            });
            if round >= rounds / 10 {
                left += (xs[set.machine_at(0)] < 0.0) as u8 as f64;
                n += 1.0;
            }
        }
        (left / n, set.stats)
    }

    #[test]
    fn swap_ratio_is_the_direct_density_ratio_and_linear_tempering_simplifies() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..100 {
            // |x| ≤ 2.5 keeps the densities themselves (not only their logs) representable.
            let za: f64 = StandardNormal.sample(&mut rng);
            let xa = za.clamp(-2.5, 2.5);
            let zb: f64 = StandardNormal.sample(&mut rng);
            let xb = zb.clamp(-2.5, 2.5);
            let (ba, bb) = (rng.random::<f64>(), rng.random::<f64>());
            let density = |x: f64, b: f64| (-(prior_term(x) + b * data_term(x))).exp();
            let direct =
                (density(xb, ba) * density(xa, bb) / (density(xa, ba) * density(xb, bb))).ln();
            let got = log_swap_ratio(
                ba,
                bb,
                |b| prior_term(xa) + b * data_term(xa),
                |b| prior_term(xb) + b * data_term(xb),
            );
            assert!(
                (got - direct).abs() < 1e-9 * (1.0 + direct.abs()),
                "{got} {direct}"
            );
            let linear = (ba - bb) * (data_term(xa) - data_term(xb));
            assert!((got - linear).abs() < 1e-9 * (1.0 + linear.abs()));
            // A β-only constant in the energy cancels (the collapsed normalisation).
            let shifted = log_swap_ratio(
                ba,
                bb,
                |b| prior_term(xa) + b * data_term(xa) + 7.0 * b.ln(),
                |b| prior_term(xb) + b * data_term(xb) + 7.0 * b.ln(),
            );
            assert!((shifted - got).abs() < 1e-9 * (1.0 + got.abs()));
        }
    }

    #[test]
    fn deo_rounds_alternate_pairs_and_keep_a_permutation() {
        let mut set = ReplicaSet::new(5);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut seen = Vec::new();
        for round in 0..4 {
            set.swap_round(round, &mut rng, |_, _, k| {
                seen.push((round, k));
                f64::INFINITY
            });
            let mut slots: Vec<usize> = (0..5).map(|m| set.slot_of(m)).collect();
            slots.sort();
            assert_eq!(slots, vec![0, 1, 2, 3, 4]);
            for s in 0..5 {
                assert_eq!(set.slot_of(set.machine_at(s)), s);
            }
        }
        assert_eq!(
            seen,
            vec![
                (0, 0),
                (0, 2),
                (1, 1),
                (1, 3),
                (2, 0),
                (2, 2),
                (3, 1),
                (3, 3)
            ]
        );
        // Always accepted: machine 0 moves up one slot per round (non-reversible drift).
        assert_eq!(set.slot_of(0), 4);
        // Never accepted: nothing moves and every proposal is counted as rejected.
        let mut stuck = ReplicaSet::new(3);
        for round in 0..10 {
            stuck.swap_round(round, &mut rng, |_, _, _| f64::NEG_INFINITY);
        }
        assert_eq!(stuck.stats.rejection(), vec![1.0, 1.0]);
        assert_eq!(stuck.stats.round_trips, 0);
    }

    #[test]
    fn tempered_chain_finds_the_quadrature_weights_where_one_replica_stays_in_its_well() {
        // The untempered chain started at x = 1 stays in the right well.
        let exact = left_mass(1.0);
        assert!(exact > 0.55 && exact < 0.9, "{exact}");
        let single = Ladder::new(vec![1.0, 0.999_999]).unwrap();
        let mut rng_check = 0.0;
        for seed in 0..2 {
            rng_check += sample_left_fraction(&single, 4000, seed).0;
        }
        assert!(
            rng_check / 2.0 < 0.05,
            "untempered left mass {}",
            rng_check / 2.0
        );
        // Tempered to β = 0.01 (where the barrier is 0.16 nats): within Monte Carlo error.
        let ladder = Ladder::geometric(10, 0.01);
        let fractions: Vec<f64> = (0..4)
            .map(|seed| sample_left_fraction(&ladder, 20_000, 10 + seed).0)
            .collect();
        let mean = fractions.iter().sum::<f64>() / 4.0;
        let sd = (fractions.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
        let err = sd / 2.0;
        assert!(
            (mean - exact).abs() < 4.0 * err + 0.01,
            "tempered {mean} ± {err}, quadrature {exact}, per seed {fractions:?}"
        );
    }

    /// A 2-D, non-separable test target: prior N(0, I), data term with four wells near
    /// (±1, ±1), barriers of ≈ 12 nats, tilted and coupled so that the four masses differ.
    fn data_term_2d(x: f64, y: f64) -> f64 {
        12.0 * ((x * x - 1.0).powi(2) + (y * y - 1.0).powi(2)) + 0.4 * x + 0.2 * y + 0.5 * x * y
    }

    /// The four quadrant masses of π_β (quadrant index 2·[x < 0] + [y < 0]) by quadrature.
    fn quadrant_masses_2d(beta: f64) -> [f64; 4] {
        let n = 600;
        let mut m = [0.0; 4];
        for i in 0..=n {
            for j in 0..=n {
                let x = -3.5 + 7.0 * i as f64 / n as f64;
                let y = -3.5 + 7.0 * j as f64 / n as f64;
                let w = (-((x * x + y * y) / 2.0 + beta * data_term_2d(x, y))).exp();
                m[2 * (x < 0.0) as usize + (y < 0.0) as usize] += w;
            }
        }
        let z: f64 = m.iter().sum();
        m.map(|v| v / z)
    }

    /// Quadrant frequencies of the β = 1 samples, tempered over `ladder`, started at (1, 1).
    fn quadrant_frequencies_2d(ladder: &Ladder, rounds: u64, seed: u64) -> [f64; 4] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let betas = ladder.betas().to_vec();
        let u = |p: (f64, f64), beta: f64| {
            (p.0 * p.0 + p.1 * p.1) / 2.0 + beta * data_term_2d(p.0, p.1)
        };
        let mut states = vec![(1.0, 1.0); ladder.len()];
        let mut set = ReplicaSet::new(ladder.len());
        let mut counts = [0.0; 4];
        for round in 0..rounds {
            for (m, state) in states.iter_mut().enumerate() {
                let beta = betas[set.slot_of(m)];
                for _ in 0..5 {
                    let (zx, zy): (f64, f64) = (
                        StandardNormal.sample(&mut rng),
                        StandardNormal.sample(&mut rng),
                    );
                    let next = (state.0 + 0.25 * zx, state.1 + 0.25 * zy);
                    if rng.random::<f64>() < (u(*state, beta) - u(next, beta)).exp() {
                        *state = next;
                    }
                }
            }
            let snapshot = states.clone();
            set.swap_round(round, &mut rng, |a, b, k| {
                log_swap_ratio(
                    betas[k],
                    betas[k + 1],
                    |bt| u(snapshot[a], bt),
                    |bt| u(snapshot[b], bt),
                )
            });
            if round >= rounds / 10 {
                let (x, y) = states[set.machine_at(0)];
                counts[2 * (x < 0.0) as usize + (y < 0.0) as usize] += 1.0;
            }
        }
        let n: f64 = counts.iter().sum();
        counts.map(|c| c / n)
    }

    #[test]
    fn tempered_chain_finds_the_four_quadrature_weights_of_a_2d_target() {
        let exact = quadrant_masses_2d(1.0);
        // The untempered chain stays in its start quadrant (x, y > 0).
        let alone = quadrant_frequencies_2d(&Ladder::new(vec![1.0, 0.999_999]).unwrap(), 4000, 1);
        assert!(alone[0] > 0.95, "{alone:?}");
        let ladder = Ladder::geometric(10, 0.01);
        let runs: Vec<[f64; 4]> = (0..4)
            .map(|s| quadrant_frequencies_2d(&ladder, 20_000, 20 + s))
            .collect();
        for q in 0..4 {
            let v: Vec<f64> = runs.iter().map(|r| r[q]).collect();
            let mean = v.iter().sum::<f64>() / 4.0;
            let err = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 3.0).sqrt() / 2.0;
            assert!(
                (mean - exact[q]).abs() < 4.0 * err + 0.01,
                "quadrant {q}: tempered {mean} ± {err}, quadrature {} ({exact:?})",
                exact[q]
            );
        }
    }

    #[test]
    fn the_estimated_barrier_matches_its_quadrature_and_the_adapted_ladder_equalises_it() {
        // Syed et al. 2022 §4: λ(β) = ½ E|V(X) − V(X')| for X, X' iid π_β, Λ = ∫₀¹ λ(β) dβ.
        let lambda = |beta: f64| {
            let n = 1000;
            let xs: Vec<f64> = (0..=n).map(|i| -5.0 + 10.0 * i as f64 / n as f64).collect();
            let w: Vec<f64> = xs
                .iter()
                .map(|&x| (-(prior_term(x) + beta * data_term(x))).exp())
                .collect();
            let z: f64 = w.iter().sum();
            let v: Vec<f64> = xs.iter().map(|&x| data_term(x)).collect();
            let mut acc = 0.0;
            for i in 0..xs.len() {
                for j in 0..xs.len() {
                    acc += w[i] * w[j] * (v[i] - v[j]).abs();
                }
            }
            0.5 * acc / (z * z)
        };
        // Λ over [β_min, 1] by the midpoint rule; the ladder spans the same interval.
        let (m, lowest) = (200, 0.05);
        let barrier_exact: f64 = (0..m)
            .map(|k| {
                let b = lowest + (1.0 - lowest) * (k as f64 + 0.5) / m as f64;
                lambda(b) * (1.0 - lowest) / m as f64
            })
            .sum();
        // A fine uniform ladder: Σ r_k → Λ as the spacing falls.
        let ladder = uniform_ladder(41, lowest);
        let (_, stats) = sample_left_fraction(&ladder, 30_000, 99);
        let estimated = stats.barrier();
        assert!(
            (estimated - barrier_exact).abs() < 0.05 * barrier_exact,
            "Λ estimated {estimated}, quadrature {barrier_exact}"
        );
        let (rate, predicted) = (stats.round_trip_rate(), stats.predicted_round_trip_rate());
        assert!(
            (rate - predicted).abs() < 0.15 * predicted,
            "{rate} vs {predicted}"
        );
        // The equalised ladder with R = 2Λ + 1 slots: every pair rejects about equally.
        let r = Ladder::replicas_for_barrier(estimated, 64);
        let adapted = ladder.equalised(&stats.rejection(), r);
        assert_eq!(adapted.len(), r);
        assert_eq!(adapted.betas()[0], 1.0);
        let (_, after) = sample_left_fraction(&adapted, 30_000, 100);
        let rej = after.rejection();
        let mean = rej.iter().sum::<f64>() / rej.len() as f64;
        for (k, x) in rej.iter().enumerate() {
            assert!(
                (x - mean).abs() < 0.05,
                "pair {k}: {x} vs mean {mean} ({rej:?})"
            );
        }
        let (rate, predicted) = (after.round_trip_rate(), after.predicted_round_trip_rate());
        assert!(
            (rate - predicted).abs() < 0.15 * predicted,
            "{rate} vs {predicted}"
        );
    }

    #[test]
    fn ladders_are_validated_and_equalise_a_constructed_barrier() {
        assert!(Ladder::new(vec![1.0]).is_err());
        assert!(Ladder::new(vec![0.9, 0.5]).is_err());
        assert!(Ladder::new(vec![1.0, 0.5, 0.5]).is_err());
        assert!(Ladder::new(vec![1.0, f64::NAN]).is_err());
        // Barrier concentrated in the first pair: the adapted β's crowd near 1.
        let l = Ladder::new(vec![1.0, 0.5, 0.0]).unwrap();
        let a = l.equalised(&[0.9, 0.1], 3);
        // Λ = 1, target ½ lies in pair 0 at t = 0.5/0.9: β = 1 − 0.5·(0.5/0.9).
        assert!(
            (a.betas()[1] - (1.0 - 0.5 * 0.5 / 0.9)).abs() < 1e-12,
            "{a:?}"
        );
        assert_eq!(
            Ladder::cumulative_barrier(&[0.25, 0.5]),
            vec![0.0, 0.25, 0.75]
        );
        assert_eq!(Ladder::replicas_for_barrier(2.3, 64), 6);
        assert_eq!(Ladder::replicas_for_barrier(0.0, 64), 2);
    }
}
