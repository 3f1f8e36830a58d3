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

/// `adapt_step`'s target for η·λ_max, shared by the FCN and the flat (CNN, attention) engines:
/// [`ADAPT_FRACTION`] unadjusted; with MALA/HMC it starts at [`MALA_ADAPT_FRACTION`] and is
/// scaled at each burn-in adaptation towards the target acceptance rate.
#[derive(Debug)]
pub(crate) struct StepSteering {
    mala: bool,
    target_acceptance: f64,
    /// Scale of `MALA_ADAPT_FRACTION`.
    scale: f64,
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
            scale: 1.0,
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

    /// η·λ_max for the next stretch, given the run's acceptance counts so far (`None`
    /// without a Metropolis test).
    pub(crate) fn fraction(&mut self, counts: Option<(u64, u64)>) -> f64 {
        if let Some((accepted, proposed)) = counts {
            if proposed > self.counts_then.1 {
                // Multiplicative Robbins–Monro step on log(scale): up when the acceptance
                // since the last adaptation is above target, down below.
                let rate =
                    (accepted - self.counts_then.0) as f64 / (proposed - self.counts_then.1) as f64;
                self.scale =
                    (self.scale * (2.0 * (rate - self.target_acceptance)).exp()).clamp(1e-3, 2.0);
            }
            self.counts_then = (accepted, proposed);
        }
        if self.mala {
            MALA_ADAPT_FRACTION * self.scale
        } else {
            ADAPT_FRACTION
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{adaptation_interval, MAX_ADAPTATIONS};

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
