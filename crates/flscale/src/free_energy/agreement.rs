//! Whether the chains of one window sample the same distribution of s: the split potential
//! scale reduction R̂ of Gelman & Rubin (Stat. Sci. 7, 457 (1992)) in the split form of Vehtari,
//! Gelman, Simpson, Carpenter & Bürkner (Bayesian Analysis 16, 667 (2021), §4.1).
//!
//! A window's restraint confines s, not the coordinates orthogonal to it. When one of those has
//! a barrier of its own (a hidden barrier: at the top of F(s) the network can sit on either side
//! of a second slow coordinate), each chain stays where its burn-in left it and the chains of one
//! window settle at different s. The pooled window then looks like one long, slowly varying
//! series, the block bootstrap turns the chains' disagreement into a large error, and that error
//! is still a lower bound (spec 07, "What users of the reference tools run into"). R̂ ≫ 1 names
//! the windows where this happens.

/// The split R̂ of `chains` (each a time series of s of one chain, equal lengths or not): every
/// chain is cut into halves, and with W the mean within-half variance and B/n the variance of
/// the half means (n the common half length, the shortest),
/// R̂ = √(((n − 1)/n · W + B/n) / W) (Vehtari et al. 2021, eqs. 3–4).
///
/// None with fewer than two chains, a half shorter than 2 samples, or no within-half variance
/// (every half constant).
pub fn split_rhat(chains: &[&[f64]]) -> Option<f64> {
    if chains.len() < 2 {
        return None;
    }
    let n = chains.iter().map(|c| c.len() / 2).min()?;
    if n < 2 {
        return None;
    }
    let halves: Vec<&[f64]> = chains
        .iter()
        .flat_map(|c| {
            let tail = &c[c.len() - 2 * n..];
            [&tail[..n], &tail[n..]]
        })
        .collect();
    let m = halves.len() as f64;
    let nf = n as f64;
    let means: Vec<f64> = halves.iter().map(|h| h.iter().sum::<f64>() / nf).collect();
    let within = halves
        .iter()
        .zip(&means)
        .map(|(h, mu)| h.iter().map(|x| (x - mu) * (x - mu)).sum::<f64>() / (nf - 1.0))
        .sum::<f64>()
        / m;
    let grand = means.iter().sum::<f64>() / m;
    let between_over_n = means
        .iter()
        .map(|mu| (mu - grand) * (mu - grand))
        .sum::<f64>()
        / (m - 1.0);
    if !(within > 0.0) || !within.is_finite() || !between_over_n.is_finite() {
        return None;
    }
    Some((((nf - 1.0) / nf * within + between_over_n) / within).sqrt())
}

/// R̂ above which a window's chains count as disagreeing. Vehtari et al. recommend 1.01 for final
/// inference with many effective samples; a window's chains hold a few hundred decorrelated
/// samples, whose R̂ scatters by a few hundredths about 1 even at equilibrium, so the warning uses
/// the older 1.1 (Gelman et al., *Bayesian Data Analysis*, 3rd ed., §11.4).
pub const RHAT_WARNING: f64 = 1.1;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    fn normal_chain(seed: u64, mean: f64, n: usize) -> Vec<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let g = Normal::new(mean, 1.0).unwrap();
        (0..n).map(|_| g.sample(&mut rng)).collect()
    }

    #[test]
    fn chains_of_one_distribution_give_rhat_near_one() {
        let chains: Vec<Vec<f64>> = (0..4).map(|k| normal_chain(k, 0.0, 2000)).collect();
        let refs: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
        let r = split_rhat(&refs).unwrap();
        assert!((r - 1.0).abs() < 0.01, "R̂ = {r}");
    }

    /// Two chains one unit apart, unit variance each: the half means are ±½, so
    /// B/n = 4·¼/3 = ⅓ and R̂ → √(1 + ⅓) for long chains.
    #[test]
    fn chains_stuck_apart_give_the_closed_form_rhat() {
        let (a, b) = (normal_chain(1, -0.5, 40_000), normal_chain(2, 0.5, 40_000));
        let r = split_rhat(&[&a, &b]).unwrap();
        assert!((r - (4.0f64 / 3.0).sqrt()).abs() < 0.01, "R̂ = {r}");
        assert!(r > RHAT_WARNING);
    }

    /// The split form sees a trend within one chain that the chains' whole means hide: two
    /// chains that both drift from −1 to 1.
    #[test]
    fn a_drift_within_the_chains_is_seen() {
        let drift: Vec<f64> = (0..1000).map(|t| -1.0 + 2.0 * t as f64 / 999.0).collect();
        let r = split_rhat(&[&drift, &drift]).unwrap();
        assert!(r > 1.5, "R̂ = {r}");
    }

    #[test]
    fn too_little_to_judge_gives_none() {
        assert_eq!(split_rhat(&[&[1.0, 2.0, 3.0, 4.0]]), None);
        assert_eq!(split_rhat(&[&[1.0, 2.0, 3.0], &[1.0, 2.0]]), None);
        assert_eq!(split_rhat(&[&[1.0; 10], &[1.0; 10]]), None);
    }
}
