//! Step-size adaptation during burn-in (spec 02 "Stiffness is the enemy"): how often to adapt,
//! and the target of η·λ_max — fixed for unadjusted Langevin, steered towards a target
//! acceptance rate with MALA/HMC. Shared by the FCN and the flat (CNN, attention) engines;
//! the λ_max estimates themselves are the ensembles' ([`crate::sim::num::power`]).

/// η·λ_max targeted by `adapt_step`: well inside the stability limit 2, with a bias of
/// about 5 % in the stiffest direction (variance inflation 1/(1 − ηλ/2)).
const ADAPT_FRACTION: f64 = 0.1;

/// η·λ_max from which `adapt_step` with `mala` starts: the Metropolis test removes the step's
/// bias (mala.rs), so only the stability of the stiffest direction (ηλ < 2) and the
/// acceptance rate limit the step. The fraction is then scaled during burn-in towards
/// [`MALA_TARGET_ACCEPTANCE`], since the 10-iteration λ_max estimate can miss the stiffest
/// direction (then a fixed ηλ = 1 freezes every chain by rejection).
const MALA_ADAPT_FRACTION: f64 = 1.0;

/// The acceptance rate that `adapt_step` with `mala` steers to: 0.574 optimises MALA's
/// efficiency for product-form targets in high dimension (Roberts & Rosenthal, J. R. Stat.
/// Soc. B 60 (1998) 255).
const MALA_TARGET_ACCEPTANCE: f64 = 0.574;

/// The acceptance rate that `adapt_step` steers HMC (`hmc_steps`) to: the high-dimensional
/// optimum of the leapfrog integrator is 0.651 (Beskos, Pillai, Roberts, Sanz-Serna & Stuart,
/// Bernoulli 19 (2013) 1501; Neal 2011, sec. 5.4.4). 0.7 by measurement in the blog setting
/// (BENCHMARKS.md, "Sampling efficiency": 0.6 and 0.7 within the run-to-run spread, 0.85
/// twice the autocorrelation time at P = 80).
const HMC_TARGET_ACCEPTANCE: f64 = 0.7;

/// At most about this many burn-in adaptations (λ_max by 10 power iterations, and the
/// collapsed sampler's preconditioner): each costs tens of gradient evaluations, so with a
/// small `thin` (an HMC run measured every proposal) adapting at every measurement would cost
/// several times the burn-in's own steps (BENCHMARKS.md, "Sampling efficiency"). 200 leaves
/// the acceptance steering and the preconditioner's average as many updates as they use.
const MAX_ADAPTATIONS: usize = 200;

/// Steps between two burn-in adaptations: every measurement (`thin` steps) unless that would
/// exceed [`MAX_ADAPTATIONS`] over the burn-in, then the smallest multiple of `thin` that
/// does not. Shared by the FCN and the flat (CNN, attention) engines.
pub(crate) fn adaptation_interval(thin: usize, burn_in: usize) -> usize {
    let thin = thin.max(1);
    thin * burn_in.div_ceil(MAX_ADAPTATIONS * thin).max(1)
}

/// Stan's windowed metric adaptation at its default warm-up of 1000 iterations, as fractions
/// of it: an initial fast interval of 75 iterations, a first slow window of 25 and a terminal
/// fast interval of 50 (Stan Reference Manual, "HMC algorithm parameters", automatic parameter
/// tuning; `stan/mcmc/windowed_adaptation.hpp`).
const STAN_WARMUP: f64 = 1000.0;
const STAN_INIT_BUFFER: f64 = 75.0;
const STAN_BASE_WINDOW: f64 = 25.0;
const STAN_TERM_BUFFER: f64 = 50.0;

/// The slow windows of the diagonal metric's adaptation over a burn-in of `burn_in` steps
/// adapted every `every` steps ([`adaptation_interval`]): variances are gathered from
/// `start` on, and at each of `ends` (steps done, increasing, multiples of `every`) the
/// metric is set from the window that ends there and the gathering restarts; after the last
/// end only the step size is adapted, under the final metric.
///
/// Stan's schedule (initial fast interval, slow windows doubling from the base window, the
/// last one stretched to the terminal fast interval when the next would not fit twice,
/// Stan Reference Manual, "HMC algorithm parameters") at its default proportions
/// ([`STAN_INIT_BUFFER`] …), scaled to the burn-in: Stan counts NUTS iterations, each close to
/// an independent draw, while a Langevin step moves a chain a small part of its posterior
/// width, so the burn-in the experiment chose for equilibration is the time unit, not the
/// step. Each boundary is rounded up to the adaptation grid, where the step is re-adapted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetricWindows {
    pub start: usize,
    pub ends: Vec<usize>,
}

impl MetricWindows {
    pub(crate) fn new(burn_in: usize, every: usize) -> Self {
        let w = burn_in as f64;
        let scaled = |x: f64| (x / STAN_WARMUP * w).round() as usize;
        let (init, base, term) = (
            scaled(STAN_INIT_BUFFER),
            scaled(STAN_BASE_WINDOW).max(1),
            scaled(STAN_TERM_BUFFER),
        );
        let every = every.max(1);
        let on_grid = |t: usize| t.div_ceil(every) * every;
        let start = on_grid(init).min(burn_in);
        let mut ends = Vec::new();
        for end in stan_window_ends(burn_in, init, base, term) {
            let end = on_grid(end).min(burn_in);
            if end > start && ends.last().is_none_or(|&last| end > last) {
                ends.push(end);
            }
        }
        MetricWindows { start, ends }
    }

    /// Whether the steps after step `t` (an adaptation time) are gathered into a window.
    pub(crate) fn gathering(&self, t: usize) -> bool {
        self.ends
            .last()
            .is_some_and(|&last| t >= self.start && t < last)
    }

    /// Whether a window ends at step `t`.
    pub(crate) fn ends_at(&self, t: usize) -> bool {
        self.ends.contains(&t)
    }
}

/// The ends (iterations done) of Stan's slow windows over `warmup` iterations with the given
/// buffers (`windowed_adaptation.hpp`: `compute_next_window`), before any rounding.
fn stan_window_ends(warmup: usize, init: usize, base: usize, term: usize) -> Vec<usize> {
    if warmup < 20 {
        return Vec::new();
    }
    let (init, base, term) = if init + base + term > warmup {
        // Stan's fallback for a short warm-up: 15 % / 75 % / 10 %.
        let init = (0.15 * warmup as f64) as usize;
        let term = (0.1 * warmup as f64) as usize;
        (init, warmup - init - term, term)
    } else {
        (init, base, term)
    };
    let last = warmup - term;
    let mut size = base;
    let mut end = init + size;
    let mut ends = Vec::new();
    while end <= last {
        ends.push(end);
        if end == last {
            break;
        }
        size *= 2;
        end += size;
        if end != last && end + 2 * size > last {
            end = last;
        }
    }
    ends
}

/// Dual averaging's settings (Hoffman & Gelman, JMLR 15 (2014) 1593, Alg. 5, with Stan's
/// defaults): γ, the shrinkage towards μ; t₀, which damps the first iterations; κ, the decay
/// of the weights of the averaged iterate.
const DUAL_AVERAGING_GAMMA: f64 = 0.05;
const DUAL_AVERAGING_T0: f64 = 10.0;
const DUAL_AVERAGING_KAPPA: f64 = 0.75;

/// The range of the scale of [`MALA_ADAPT_FRACTION`]: η·λ_max between 10⁻³ and 2 (above 2 the
/// stiffest direction is unstable; the Metropolis test would reject every proposal).
const SCALE_RANGE: (f64, f64) = (1e-3, 2.0);

/// `adapt_step`'s target for η·λ_max, shared by the FCN and the flat (CNN, attention) engines:
/// [`ADAPT_FRACTION`] unadjusted; with MALA/HMC it starts at [`MALA_ADAPT_FRACTION`] and its
/// scale x is steered towards the target acceptance δ by dual averaging on log x
/// (Hoffman & Gelman 2014, Alg. 5; the adaptation of Stan, numpyro and blackjax), one
/// iteration per burn-in adaptation with the acceptance rate α_m of the stretch since the
/// previous one:
///
/// H̄_m = (1 − 1/(m + t₀))·H̄_{m−1} + (δ − α_m)/(m + t₀),
/// log x_m = μ − (√m/γ)·H̄_m,   log x̄_m = m^{−κ}·log x_m + (1 − m^{−κ})·log x̄_{m−1},
///
/// with μ = log(10·x₀), x₀ = 1. The last adaptation of the burn-in returns the averaged x̄,
/// whose noise decays as the iterations accumulate, and the chain then runs with it frozen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepSteering {
    mala: bool,
    target_acceptance: f64,
    /// μ of the dual averaging.
    mu: f64,
    /// H̄_m.
    h_bar: f64,
    /// log x_m, the scale in use during the burn-in.
    log_scale: f64,
    /// log x̄_m, the averaged scale returned at the last adaptation.
    log_scale_bar: f64,
    /// m, the dual-averaging iterations so far.
    iterations: u64,
    /// (accepted, proposed) at the previous adaptation.
    counts_then: (u64, u64),
}

impl StepSteering {
    pub(crate) fn new(mala: bool, hmc: bool) -> Self {
        let target_acceptance = if hmc {
            HMC_TARGET_ACCEPTANCE
        } else {
            MALA_TARGET_ACCEPTANCE
        };
        StepSteering {
            mala,
            target_acceptance,
            mu: 10f64.ln(),
            h_bar: 0.0,
            log_scale: 0.0,
            log_scale_bar: 0.0,
            iterations: 0,
            counts_then: (0, 0),
        }
    }

    /// The same steering for a new kernel (a slot added to a tempering ladder): the scale
    /// learnt so far, the acceptance counted from the new kernel's zero.
    pub(crate) fn restarted(&self) -> Self {
        StepSteering {
            counts_then: (0, 0),
            ..*self
        }
    }

    /// Restarts the dual averaging from the current scale, as Stan does after every metric
    /// window (Stan Reference Manual, "HMC algorithm parameters": the step size is re-adapted
    /// after each window, with μ = log(10·x) at the scale x reached so far): the metric
    /// changes the acceptance at a given η·λ_max little, but the averages of the old window
    /// no longer describe the new kernel. `counts` are the acceptance counts now, from which
    /// the next stretch is counted.
    pub(crate) fn restart(&mut self, counts: Option<(u64, u64)>) {
        if let Some(counts) = counts {
            self.counts_then = counts;
        }
        self.mu = 10f64.ln() + self.log_scale;
        self.h_bar = 0.0;
        self.log_scale_bar = 0.0;
        self.iterations = 0;
    }

    /// η·λ_max for the next stretch, given the run's acceptance counts so far (`None`
    /// without a Metropolis test); `last`: the final adaptation of the burn-in, which returns
    /// the averaged scale.
    pub(crate) fn fraction(&mut self, counts: Option<(u64, u64)>, last: bool) -> f64 {
        if let Some((accepted, proposed)) = counts {
            if proposed > self.counts_then.1 {
                let rate =
                    (accepted - self.counts_then.0) as f64 / (proposed - self.counts_then.1) as f64;
                self.dual_averaging_step(rate);
            }
            self.counts_then = (accepted, proposed);
        }
        if !self.mala {
            return ADAPT_FRACTION;
        }
        let log_scale = if last && self.iterations > 0 {
            self.log_scale_bar
        } else {
            self.log_scale
        };
        MALA_ADAPT_FRACTION * log_scale.exp()
    }

    /// One iteration of Hoffman & Gelman's Alg. 5 with the acceptance `rate` of the stretch.
    fn dual_averaging_step(&mut self, rate: f64) {
        self.iterations += 1;
        let m = self.iterations as f64;
        let w = 1.0 / (m + DUAL_AVERAGING_T0);
        self.h_bar = (1.0 - w) * self.h_bar + w * (self.target_acceptance - rate);
        self.log_scale = (self.mu - m.sqrt() / DUAL_AVERAGING_GAMMA * self.h_bar)
            .clamp(SCALE_RANGE.0.ln(), SCALE_RANGE.1.ln());
        let eta = m.powf(-DUAL_AVERAGING_KAPPA);
        self.log_scale_bar = eta * self.log_scale + (1.0 - eta) * self.log_scale_bar;
    }
}

#[cfg(test)]
mod tests {
    use super::{
        adaptation_interval, stan_window_ends, MetricWindows, StepSteering, MALA_TARGET_ACCEPTANCE,
        MAX_ADAPTATIONS,
    };

    /// Stan's default warm-up (1000 iterations; buffers 75, 25, 50) has the slow windows
    /// [75, 100), [100, 150), [150, 250), [250, 450), [450, 950): the fifth, 400 long, is
    /// stretched to the terminal buffer because a sixth of 800 would not fit (Stan Reference
    /// Manual, "HMC algorithm parameters"). Short warm-ups fall back to 15 % / 75 % / 10 %.
    #[test]
    fn windows_are_stans() {
        assert_eq!(
            stan_window_ends(1000, 75, 25, 50),
            vec![100, 150, 250, 450, 950]
        );
        assert_eq!(stan_window_ends(100, 75, 25, 50), vec![90]);
        assert!(stan_window_ends(19, 75, 25, 50).is_empty());
        // Scaled to a burn-in of 10⁴ steps adapted every 50: the same proportions.
        let w = MetricWindows::new(10_000, 50);
        assert_eq!(w.start, 750);
        assert_eq!(w.ends, vec![1000, 1500, 2500, 4500, 9500]);
        assert!(!w.gathering(700) && w.gathering(750) && w.gathering(9450));
        assert!(!w.gathering(9500) && w.ends_at(2500) && !w.ends_at(2000));
        // A coarse grid merges windows but keeps them on it and inside the burn-in.
        let w = MetricWindows::new(1000, 100);
        assert_eq!((w.start, w.ends.clone()), (100, vec![200, 300, 500, 1000]));
    }

    /// A synthetic sampler whose acceptance falls with the scale x as α = exp(−x²/2) (so the
    /// target 0.574 is met at x* = √(−2 ln 0.574) = 1.0536), observed through binomial noise
    /// of 2000 proposals per stretch: dual averaging's averaged scale lands near x*.
    #[test]
    fn dual_averaging_finds_the_scale_of_the_target_acceptance() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let mut steering = StepSteering::new(true, false);
        let (mut accepted, mut proposed) = (0u64, 0u64);
        let mut fraction = steering.fraction(Some((0, 0)), false);
        for i in 0..200 {
            let alpha = (-fraction * fraction / 2.0).exp();
            for _ in 0..2000 {
                proposed += 1;
                accepted += rng.random_bool(alpha) as u64;
            }
            fraction = steering.fraction(Some((accepted, proposed)), i == 199);
        }
        let x_star = (-2.0 * MALA_TARGET_ACCEPTANCE.ln()).sqrt();
        assert!(
            (fraction / x_star - 1.0).abs() < 0.03,
            "{fraction} vs {x_star}"
        );
    }

    #[test]
    fn unadjusted_steering_keeps_its_fixed_fraction() {
        let mut steering = StepSteering::new(false, false);
        assert_eq!(steering.fraction(None, false), super::ADAPT_FRACTION);
        assert_eq!(steering.fraction(None, true), super::ADAPT_FRACTION);
    }

    #[test]
    fn adaptations_are_at_measurements_and_at_most_max_adaptations() {
        for (thin, burn_in) in [
            (1, 2000),
            (1, 20_000),
            (100, 10_000),
            (7, 5000),
            (1, 50),
            (0, 10),
        ] {
            let every = adaptation_interval(thin, burn_in);
            assert_eq!(every % thin.max(1), 0, "thin {thin}, burn-in {burn_in}");
            let count = burn_in / every + 1;
            assert!(
                count <= MAX_ADAPTATIONS + 1,
                "{count} at thin {thin}, burn-in {burn_in}"
            );
            // Not sparser than needed: halving the interval's multiple would exceed the cap.
            if every > thin.max(1) {
                assert!(burn_in / (every - thin) + 1 > MAX_ADAPTATIONS, "{every}");
            }
        }
        assert_eq!(adaptation_interval(100, 10_000), 100);
        assert_eq!(adaptation_interval(1, 2000), 10);
    }
}
