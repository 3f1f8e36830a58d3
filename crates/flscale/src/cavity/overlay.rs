//! The `flscale sample` experiment that simulates one cavity setting, for the Langevin overlay
//! of the mixed phase (docs/cavity.md "Langevin overlay at β = 1/8").
//!
//! The mapping is the one [`super::langevin`] checks when it reads a results store: a
//! one-hidden-layer erf network, standard readout scaling, width N, d = D, κ = T at sampler
//! temperature 1, σ1² = σ_w², σ2² = N·s_a² (readout variance s_a² per weight), target
//! y = He1 + ε·He3 (probabilists' Hermite, as [`super::sampled_kernel::Points::targets`]). The
//! sampler is the collapsed posterior (readout integrated out) with burn-in step adaptation,
//! from a cold (prior) or a hot (teacher-aligned) start.

use super::adaptive::AdaptiveParams;
use crate::error::Result;
use crate::sim::config::ExperimentConfig;

/// Length and size of the sampling runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverlaySampling {
    /// Langevin steps, burn-in included.
    pub steps: usize,
    /// Burn-in steps (step adaptation runs here).
    pub burn_in: usize,
    /// Measurement interval.
    pub thin: usize,
    /// Independent chains.
    pub chains: usize,
    /// Seed of the sampler's data and chains (the cavity's data seed is separate).
    pub seed: u64,
    /// Test points of the sampler.
    pub n_test: usize,
}

/// The experiment file (TOML) for `prm` from a hot (`hot`) or cold start.
pub fn overlay_experiment_toml(prm: &AdaptiveParams, s: &OverlaySampling, hot: bool) -> String {
    let readout_total = prm.n as f64 * prm.s_a2;
    format!(
        "[model]\nkind = \"fcn\"\nactivation = \"erf\"\nwidths = [{n}]\nparametrization = \"standard\"\n\n\
         [data]\nd = {d}\np = {p}\nn_test = {n_test}\n\n\
         [target]\nterms = [[1, 1.0], [3, {eps:?}]]\n\n\
         [sampler]\nkappa = {t:?}\nstep = 1e-2\nsteps = {steps}\nburn_in = {burn_in}\nthin = {thin}\n\
         chains = {chains}\nseed = {seed}\nmethod = \"collapsed\"\nadapt_step = true\nstart = \"{start}\"\n\n\
         [priors]\nsigma2 = [{sw:?}, {readout_total:?}]\n",
        n = prm.n,
        d = prm.d,
        p = prm.p,
        n_test = s.n_test,
        eps = prm.eps,
        t = prm.t,
        steps = s.steps,
        burn_in = s.burn_in,
        thin = s.thin,
        chains = s.chains,
        seed = s.seed,
        start = if hot { "hot" } else { "cold" },
        sw = prm.sigma_w2,
    )
}

/// [`overlay_experiment_toml`], parsed and validated.
pub fn overlay_experiment(
    prm: &AdaptiveParams,
    s: &OverlaySampling,
    hot: bool,
) -> Result<ExperimentConfig> {
    ExperimentConfig::from_generated_toml(
        &overlay_experiment_toml(prm, s, hot),
        "the cavity overlay experiment",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cavity::adaptive::solve;
    use crate::cavity::langevin::mismatch;

    fn beta_eighth(t: f64) -> AdaptiveParams {
        AdaptiveParams {
            d: 53,
            n: 88,
            p: 375,
            t,
            s_a2: 0.032325 / 88.0,
            sigma_w2: 0.5,
            eps: -0.3,
            seed: 0,
            p_test: 1000,
            damping: 0.5,
            max_iter: 400,
            tol: 1e-7,
        }
    }

    const RUNS: OverlaySampling = OverlaySampling {
        steps: 7500,
        burn_in: 3750,
        thin: 50,
        chains: 4,
        seed: 1,
        n_test: 1000,
    };

    /// The generated experiment is the cavity's setting by the store reader's independent
    /// check, and equals the documented files in examples/experiments/cavity-overlay/.
    #[test]
    fn generated_experiment_is_the_cavity_setting_and_the_documented_files() {
        let files = [
            (
                0.1,
                false,
                include_str!("../../../../examples/experiments/cavity-overlay/s0.1-cold.toml"),
            ),
            (
                0.1,
                true,
                include_str!("../../../../examples/experiments/cavity-overlay/s0.1-hot.toml"),
            ),
            (
                0.18,
                false,
                include_str!("../../../../examples/experiments/cavity-overlay/s0.18-cold.toml"),
            ),
            (
                0.18,
                true,
                include_str!("../../../../examples/experiments/cavity-overlay/s0.18-hot.toml"),
            ),
            (
                0.3,
                false,
                include_str!("../../../../examples/experiments/cavity-overlay/s0.3-cold.toml"),
            ),
            (
                0.3,
                true,
                include_str!("../../../../examples/experiments/cavity-overlay/s0.3-hot.toml"),
            ),
        ];
        for (t, hot, text) in files {
            let prm = beta_eighth(t);
            let cfg = overlay_experiment(&prm, &RUNS, hot).unwrap();
            assert_eq!(mismatch(&cfg, &prm), None, "T = {t}");
            let mut doc = ExperimentConfig::from_toml(text, "example").unwrap();
            // The file writes σ2² = 0.032325; 88·(0.032325/88) may differ from it in the last bit.
            assert!((doc.sigma2()[1] - cfg.sigma2()[1]).abs() < 1e-15);
            doc.priors = cfg.priors.clone();
            assert_eq!(doc, cfg, "T = {t}, hot = {hot}");
        }
    }

    /// With a likelihood variance so large that the data carry no weight (u ≈ 10⁻⁹), the
    /// cavity's overlap law is the prior 𝒩(0, σ_w²/D) and the sampled R = E[ρ²] must be
    /// σ_w²/D within its error, from both starts: the sampler runs the setting the cavity
    /// solves.
    #[test]
    fn sampled_and_cavity_r_agree_at_the_prior() {
        let prm = AdaptiveParams {
            d: 6,
            n: 4,
            p: 4,
            t: 100.0,
            s_a2: 0.25,
            sigma_w2: 0.5,
            eps: -0.3,
            seed: 0,
            p_test: 50,
            damping: 0.5,
            max_iter: 400,
            tol: 1e-10,
        };
        let cav = solve(&prm).unwrap().unaligned;
        let prior = prm.sigma_w2 / prm.d as f64;
        assert!(
            (cav.r - prior).abs() < 1e-3 * prior,
            "cavity R {} vs {prior}",
            cav.r
        );
        let runs = OverlaySampling {
            steps: 6000,
            burn_in: 2000,
            thin: 20,
            chains: 16,
            seed: 3,
            n_test: 50,
        };
        for hot in [false, true] {
            let cfg = overlay_experiment(&prm, &runs, hot).unwrap();
            let s = crate::sim::Run::new(&cfg).run().unwrap().summary;
            let (r, err) = (s.r_overlap2.unwrap(), s.r_overlap2_err.unwrap());
            assert!(
                (r - cav.r).abs() < 4.0 * err + 0.03 * prior,
                "hot = {hot}: sampled R {r} ± {err} vs cavity {}",
                cav.r
            );
        }
    }
}
