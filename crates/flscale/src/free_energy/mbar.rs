//! The multistate Bennett acceptance ratio (MBAR; Shirts & Chodera, J. Chem. Phys. 129, 124105
//! (2008)), written in log-sum-exp form throughout.
//!
//! K states (umbrella windows) with N_k samples each; u_k(x_n) is the reduced energy of sample
//! n in state k (energy over kT, up to a state-independent term that cancels). The free
//! energies f_k solve their Eq. 11,
//!
//!   f_i = −ln Σ_n exp(−u_i(x_n)) / Σ_k N_k exp(f_k − u_k(x_n)),
//!
//! found here by a few self-consistent iterations of Eq. 11 followed by Newton–Raphson on the
//! convex objective of their Appendix C (pymbar's `mbar_objective_and_gradient`)
//!
//!   A(f) = Σ_n ln Σ_k N_k exp(f_k − u_k(x_n)) − Σ_k N_k f_k,
//!
//! whose gradient is N_i (Σ_n W_ni − 1) and Hessian (their Eq. C9)
//! H_ij = δ_ij N_i Σ_n W_ni − N_i N_j Σ_n W_ni W_nj, with the weights of their Eq. 9
//! W_ni = exp(f_i − u_i(x_n)) / Σ_k N_k exp(f_k − u_k(x_n)). The gauge is f_0 = 0.

use super::{log_sum_exp, FreeEnergyError};

/// The reduced energies u_k(x_n) of every sample in every state, the samples stored window by
/// window (the first `counts[0]` samples were drawn in state 0, and so on).
#[derive(Debug, Clone, PartialEq)]
pub struct ReducedEnergies {
    counts: Vec<usize>,
    /// Sample-major: `u[n * K + k]`.
    u: Vec<f64>,
}

impl ReducedEnergies {
    /// Checks the shape and the values: every state has at least one sample, `u` has
    /// K × Σ N_k entries (sample-major, `u[n * K + k]`), none NaN or −∞ (+∞ means "impossible in
    /// that state"), and each sample is possible in the state that drew it.
    pub fn new(counts: Vec<usize>, u: Vec<f64>) -> Result<Self, FreeEnergyError> {
        let k = counts.len();
        if k == 0 {
            return Err(invalid("MBAR needs at least one state, got none"));
        }
        if let Some(i) = counts.iter().position(|&c| c == 0) {
            return Err(invalid(format!(
                "window {i} has no samples; every window needs at least one"
            )));
        }
        let n: usize = counts.iter().sum();
        if u.len() != n * k {
            return Err(invalid(format!(
                "the reduced-energy matrix has {} entries, expected {k} states × {n} samples = {}",
                u.len(),
                n * k
            )));
        }
        if let Some(i) = u.iter().position(|x| x.is_nan() || *x == f64::NEG_INFINITY) {
            return Err(invalid(format!(
                "reduced energy of sample {} in state {} is {}; allowed: finite or +inf",
                i / k,
                i % k,
                u[i]
            )));
        }
        let e = ReducedEnergies { counts, u };
        for (n, state) in e.sample_states().enumerate() {
            if !e.row(n)[state].is_finite() {
                return Err(invalid(format!(
                    "sample {n} has infinite reduced energy in window {state}, which drew it"
                )));
            }
        }
        Ok(e)
    }

    /// Number of states K.
    pub fn states(&self) -> usize {
        self.counts.len()
    }

    /// Number of samples N = Σ N_k.
    pub fn samples(&self) -> usize {
        self.u.len() / self.counts.len()
    }

    /// N_k.
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// u_k(x_n) for every k.
    pub fn row(&self, n: usize) -> &[f64] {
        let k = self.states();
        &self.u[n * k..(n + 1) * k]
    }

    /// The state that drew each sample, in sample order.
    pub fn sample_states(&self) -> impl Iterator<Item = usize> + '_ {
        self.counts
            .iter()
            .enumerate()
            .flat_map(|(k, &c)| std::iter::repeat_n(k, c))
    }

    /// The energies of the samples `indices` (each an index into this set), as a new set whose
    /// counts are `counts`: the bootstrap's resampled data set.
    pub fn gather(&self, counts: Vec<usize>, indices: &[usize]) -> Self {
        let k = self.states();
        let mut u = Vec::with_capacity(indices.len() * k);
        for &i in indices {
            u.extend_from_slice(self.row(i));
        }
        ReducedEnergies { counts, u }
    }
}

/// Solver settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MbarOptions {
    /// Converged when every state's weights sum to one within this: max_k |Σ_n W_nk − 1|.
    pub tolerance: f64,
    /// Self-consistent iterations of Eq. 11 before Newton–Raphson (they are robust far from the
    /// solution, where Newton's quadratic model is poor).
    pub self_consistent_iterations: usize,
    /// Newton–Raphson iterations at most.
    pub max_iterations: usize,
    /// Starting free energies (any gauge), e.g. the point estimate when bootstrapping.
    pub initial: Option<Vec<f64>>,
}

impl Default for MbarOptions {
    fn default() -> Self {
        MbarOptions {
            tolerance: 1e-10,
            self_consistent_iterations: 10,
            max_iterations: 200,
            initial: None,
        }
    }
}

/// Solved MBAR equations.
#[derive(Debug, Clone, PartialEq)]
pub struct Mbar {
    /// f_k, gauge f_0 = 0.
    pub f: Vec<f64>,
    /// ln Σ_k N_k exp(f_k − u_k(x_n)) of every sample: the log of the mixture density the
    /// samples were drawn from, up to a constant.
    pub log_denominator: Vec<f64>,
    /// Newton–Raphson iterations used.
    pub iterations: usize,
    /// max_k |Σ_n W_nk − 1| at the solution.
    pub residual: f64,
}

impl Mbar {
    /// Solves the MBAR equations. Refuses with [`FreeEnergyError::Disconnected`] when groups of
    /// states share no samples (their overlap-matrix elements are below 1e−12, so the data
    /// cannot fix their relative free energy).
    pub fn solve(e: &ReducedEnergies, opts: &MbarOptions) -> Result<Mbar, FreeEnergyError> {
        let k = e.states();
        let mut f = match &opts.initial {
            Some(f0) if f0.len() == k && f0.iter().all(|x| x.is_finite()) => f0.clone(),
            Some(f0) => {
                return Err(invalid(format!(
                    "initial free energies: {} values for {k} states, all must be finite",
                    f0.len()
                )))
            }
            None => vec![0.0; k],
        };
        gauge(&mut f);
        for _ in 0..opts.self_consistent_iterations {
            f = self_consistent_update(e, &f);
        }
        let mut iterations = 0;
        let mut state = Evaluation::at(e, &f);
        while state.residual > opts.tolerance && iterations < opts.max_iterations {
            iterations += 1;
            let step = newton_step(&state);
            match line_search(e, &f, &step, &state) {
                Some(next) => state = next,
                None => {
                    // Far from the solution (one state holding nearly all weight) the Hessian
                    // is nearly singular; Eq. 11 is defined everywhere and moves f back.
                    let next = Evaluation::at(e, &self_consistent_update(e, &f));
                    if !(next.residual < state.residual) {
                        break;
                    }
                    state = next;
                }
            }
            f.clone_from(&state.f);
        }
        let mbar = Mbar {
            f,
            log_denominator: state.log_denominator,
            iterations,
            residual: state.residual,
        };
        let groups = connected_groups(&mbar.overlap_matrix(e));
        if groups.len() > 1 {
            return Err(FreeEnergyError::Disconnected { groups });
        }
        if mbar.residual > opts.tolerance {
            return Err(FreeEnergyError::NotConverged {
                iterations,
                residual: mbar.residual,
            });
        }
        Ok(mbar)
    }

    /// ln W_nk (Eq. 9) of sample n in state k.
    pub fn log_weight(&self, e: &ReducedEnergies, n: usize, k: usize) -> f64 {
        self.f[k] - e.row(n)[k] - self.log_denominator[n]
    }

    /// The free energy of a target state with reduced energies `u_target[n]` (relative to the
    /// same state-independent term), and the normalised log weights of every sample in it
    /// (Shirts & Chodera Eq. 9 and 15): f = −ln Σ_n exp(−u_n − ln D_n). The unbiased state of
    /// umbrella sampling has u_target = 0.
    pub fn target(&self, u_target: &[f64]) -> (f64, Vec<f64>) {
        let log_w: Vec<f64> = u_target
            .iter()
            .zip(&self.log_denominator)
            .map(|(u, d)| -u - d)
            .collect();
        let log_z = log_sum_exp(log_w.iter().copied());
        (-log_z, log_w.into_iter().map(|x| x - log_z).collect())
    }

    /// The normalised log weights of every sample in the unbiased state (u_target = 0).
    pub fn unbiased_log_weights(&self) -> Vec<f64> {
        self.target(&vec![0.0; self.log_denominator.len()]).1
    }

    /// The overlap matrix O = Wᵀ W diag(N) (Klimovich, Shirts & Mobley, J. Comput.-Aided Mol.
    /// Des. 29, 397 (2015), Eq. 6; pymbar's `compute_overlap`), row-major K × K: O[i][j] is the
    /// probability that a sample from state i is attributed to state j. Each row sums to one.
    pub fn overlap_matrix(&self, e: &ReducedEnergies) -> Vec<Vec<f64>> {
        let k = e.states();
        let mut o = vec![vec![0.0; k]; k];
        let mut w = vec![0.0; k];
        for n in 0..e.samples() {
            for (i, wi) in w.iter_mut().enumerate() {
                *wi = self.log_weight(e, n, i).exp();
            }
            for i in 0..k {
                if w[i] == 0.0 {
                    continue;
                }
                for j in 0..k {
                    o[i][j] += w[i] * w[j];
                }
            }
        }
        for row in &mut o {
            for (j, x) in row.iter_mut().enumerate() {
                *x *= e.counts()[j] as f64;
            }
        }
        o
    }

    /// Each state's Kish effective sample size 1/Σ_n W_nk² (Kish, *Survey Sampling* (1965);
    /// pymbar's `compute_effective_sample_number`): how many independent samples the
    /// reweighted estimate of that state is worth, before autocorrelation.
    pub fn kish_ess(&self, e: &ReducedEnergies) -> Vec<f64> {
        (0..e.states())
            .map(|k| {
                let s: f64 = (0..e.samples())
                    .map(|n| (2.0 * self.log_weight(e, n, k)).exp())
                    .sum();
                1.0 / s
            })
            .collect()
    }
}

/// Kish's effective sample size (Σ w)²/Σ w² of normalised log weights.
pub fn kish_ess_of(log_w: &[f64]) -> f64 {
    1.0 / log_w.iter().map(|l| (2.0 * l).exp()).sum::<f64>()
}

fn invalid(msg: impl Into<String>) -> FreeEnergyError {
    FreeEnergyError::InvalidInput(msg.into())
}

fn gauge(f: &mut [f64]) {
    let f0 = f[0];
    f.iter_mut().for_each(|x| *x -= f0);
}

fn log_denominators(e: &ReducedEnergies, f: &[f64]) -> Vec<f64> {
    let ln_n: Vec<f64> = e.counts().iter().map(|&c| (c as f64).ln()).collect();
    (0..e.samples())
        .map(|n| {
            let row = e.row(n);
            log_sum_exp((0..f.len()).map(|k| ln_n[k] + f[k] - row[k]))
        })
        .collect()
}

/// One application of Eq. 11, in the gauge f_0 = 0.
fn self_consistent_update(e: &ReducedEnergies, f: &[f64]) -> Vec<f64> {
    let d = log_denominators(e, f);
    let mut next: Vec<f64> = (0..f.len())
        .map(|k| -log_sum_exp((0..e.samples()).map(|n| -e.row(n)[k] - d[n])))
        .collect();
    gauge(&mut next);
    next
}

/// The objective, gradient and Hessian of Appendix C at one f.
struct Evaluation {
    f: Vec<f64>,
    log_denominator: Vec<f64>,
    objective: f64,
    gradient: Vec<f64>,
    hessian: Vec<Vec<f64>>,
    residual: f64,
}

impl Evaluation {
    fn at(e: &ReducedEnergies, f: &[f64]) -> Evaluation {
        let k = f.len();
        let counts: Vec<f64> = e.counts().iter().map(|&c| c as f64).collect();
        let ln_n: Vec<f64> = counts.iter().map(|c| c.ln()).collect();
        let mut d = Vec::with_capacity(e.samples());
        let mut col = vec![0.0; k];
        let mut hessian = vec![vec![0.0; k]; k];
        let mut p = vec![0.0; k];
        for n in 0..e.samples() {
            // p_i = N_i W_ni = N_i exp(f_i − u_i − ln D_n): one exponential per state.
            let row = e.row(n);
            let m = (0..k)
                .map(|i| ln_n[i] + f[i] - row[i])
                .fold(f64::NEG_INFINITY, f64::max);
            let mut total = 0.0;
            for i in 0..k {
                p[i] = (ln_n[i] + f[i] - row[i] - m).exp();
                total += p[i];
            }
            d.push(m + total.ln());
            for i in 0..k {
                p[i] /= total;
                col[i] += p[i];
            }
            for i in 0..k {
                if p[i] == 0.0 {
                    continue;
                }
                for j in 0..=i {
                    hessian[i][j] -= p[i] * p[j];
                }
            }
        }
        for i in 0..k {
            hessian[i][i] += col[i];
            for j in 0..i {
                hessian[j][i] = hessian[i][j];
            }
        }
        let objective =
            d.iter().sum::<f64>() - counts.iter().zip(f).map(|(c, x)| c * x).sum::<f64>();
        let gradient: Vec<f64> = col.iter().zip(&counts).map(|(s, c)| s - c).collect();
        let residual = gradient
            .iter()
            .zip(&counts)
            .map(|(g, c)| (g / c).abs())
            .fold(0.0, f64::max);
        Evaluation {
            f: f.to_vec(),
            log_denominator: d,
            objective,
            gradient,
            hessian,
            residual,
        }
    }
}

/// Largest change of any f_k in one Newton step, in kT: beyond a few kT the weights change by
/// orders of magnitude and the quadratic model of the objective no longer describes it.
const MAX_STEP: f64 = 5.0;

/// The Newton direction on f_1..f_{K−1} (f_0 = 0 fixed). A relative ridge of 1e−10 on the
/// diagonal keeps the solve defined where states share no samples (the Hessian is then
/// singular along their relative shift, and the gradient vanishes along it too).
fn newton_step(s: &Evaluation) -> Vec<f64> {
    let k = s.f.len();
    let m = k - 1;
    let mut a: Vec<Vec<f64>> = (1..k).map(|i| s.hessian[i][1..].to_vec()).collect();
    for i in 0..m {
        a[i][i] += 1e-10 * a[i][i].abs() + 1e-300;
    }
    let b: Vec<f64> = s.gradient[1..].iter().map(|g| -g).collect();
    let x = cholesky_solve(a, b);
    // Trust the quadratic model for moves of at most MAX_STEP kT in any f_k.
    let largest = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let scale = if largest > MAX_STEP {
        MAX_STEP / largest
    } else {
        1.0
    };
    std::iter::once(0.0)
        .chain(x.into_iter().map(|v| v * scale))
        .collect()
}

/// Solves A x = b for symmetric positive definite A (Cholesky, in place).
fn cholesky_solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let m = b.len();
    for j in 0..m {
        let mut d = a[j][j];
        for p in 0..j {
            d -= a[j][p] * a[j][p];
        }
        let d = d.max(1e-300).sqrt();
        a[j][j] = d;
        for i in j + 1..m {
            let mut v = a[i][j];
            for p in 0..j {
                v -= a[i][p] * a[j][p];
            }
            a[i][j] = v / d;
        }
    }
    for i in 0..m {
        let mut v = b[i];
        for p in 0..i {
            v -= a[i][p] * b[p];
        }
        b[i] = v / a[i][i];
    }
    for i in (0..m).rev() {
        let mut v = b[i];
        for p in i + 1..m {
            v -= a[p][i] * b[p];
        }
        b[i] = v / a[i][i];
    }
    b
}

/// Backtracking on the step length: accepts the first step that lowers the objective or the
/// residual (near the solution the objective, a sum over all samples, is flat to rounding);
/// None when no step length helps, i.e. the solve has stalled at rounding level.
fn line_search(
    e: &ReducedEnergies,
    f: &[f64],
    step: &[f64],
    current: &Evaluation,
) -> Option<Evaluation> {
    let mut t = 1.0;
    for _ in 0..40 {
        let trial: Vec<f64> = f.iter().zip(step).map(|(x, d)| x + t * d).collect();
        let next = Evaluation::at(e, &trial);
        if next.objective < current.objective || next.residual < current.residual {
            return Some(next);
        }
        t *= 0.5;
    }
    None
}

/// Connected groups of states, linking i and j when O[i][j] + O[j][i] > 1e−12.
fn connected_groups(o: &[Vec<f64>]) -> Vec<Vec<usize>> {
    let k = o.len();
    let mut group = vec![usize::MAX; k];
    let mut groups = Vec::new();
    for start in 0..k {
        if group[start] != usize::MAX {
            continue;
        }
        let id = groups.len();
        let mut members = vec![start];
        group[start] = id;
        let mut next = 0;
        while next < members.len() {
            let i = members[next];
            next += 1;
            for j in 0..k {
                if group[j] == usize::MAX && o[i][j] + o[j][i] > 1e-12 {
                    group[j] = id;
                    members.push(j);
                }
            }
        }
        members.sort_unstable();
        groups.push(members);
    }
    groups
}
