//! `flscale sample EXP.toml --out DIR [--json]`: sample a Bayesian network ensemble by
//! Langevin dynamics (spec 02) and write the summary, traces, per-chain results and the
//! first-layer overlap histogram.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use flscale::experiment::io::num;
use flscale::sim::driver::coupling::CouplingCertificate;
use flscale::sim::driver::run::{Run, RunObserver, RunResult, Summary};
use flscale::sim::ExperimentConfig;
use flscale::{Error, Result};

use super::{out, out_json, read_file, Ctx};

/// Arguments of `flscale sample`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  flscale sample examples/experiments/he3-quick.toml --out runs/he3          # seconds\n  \
flscale sample examples/experiments/fig2a.toml --out runs/fig2a --json     # the paper's Fig. 2(a), about an hour\n\n\
Writes DIR/summary.json, DIR/traces.csv (every `thin` steps, burn-in included), DIR/chains.csv,\n\
DIR/histogram_rho.csv, DIR/histogram_<name>.csv (deeper-layer overlaps h2_phi, h2_he3, …; the\n\
parity direction rho_e1+e2) and DIR/experiment.toml. `--json` prints the summary; it is\n\
byte-identical for the same file and seed whatever RAYON_NUM_THREADS is, so wall-clock speed is\n\
left out (`steps_per_second` is null) unless --timing is given. Exit code 1 if every chain\n\
diverged.\n\n\
[sampler] method = \"collapsed\" integrates the readout out exactly and samples the hidden\n\
weights only; mala = true adds a Metropolis accept/reject to every step (acceptance rate in\n\
diagnostics.acceptance_rate), hmc_steps = L (with mala) makes every step an HMC proposal\n\
of L leapfrog steps. tempering = { replicas = R } (any model) adds replica exchange on the data term:\n\
R copies of every chain at β = 1 > … > β_min, even/odd swaps, only β = 1 observed\n\
(summary.tempering: ladder, swap acceptance, barrier Λ, round trips). Which to use when:\n\
docs/langevin.md, \"When to use which\" and \"Replica exchange\".\n\n\
Before it starts, the run's memory and work are estimated (docs/limits.md): a run that does\n\
not fit in MemAvailable (or --max-memory SIZE) is refused with exit code 2 and the sizes to\n\
reduce; one estimated above 30 days of work needs --yes."
)]
pub struct SampleArgs {
    /// The experiment file (TOML: [model], [data], [target], [sampler], optional [priors]).
    #[arg(value_name = "EXP.toml")]
    pub experiment: PathBuf,
    /// Output directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Include the measured steps per second in the printed summary (not reproducible).
    #[arg(long)]
    pub timing: bool,
}

/// Runs `flscale sample`.
pub fn run(args: SampleArgs, ctx: &Ctx) -> Result<()> {
    let text = read_file(&args.experiment)?;
    let source = args.experiment.display().to_string();
    let cfg = load_experiment(&text, &source)?;
    flscale::limits::check_steps(cfg.sampler.steps).map_err(|e| e.context(&source))?;
    flscale::sim::memory::check_experiment_values(&cfg).map_err(|e| e.context(&source))?;
    super::limits::check(&flscale::sim::memory::sample(&cfg), &source, ctx)?;
    std::fs::create_dir_all(&args.out).map_err(|e| {
        Error::invalid(format!(
            "cannot create output directory {}: {e}",
            args.out.display()
        ))
    })?;
    let bar = if ctx.quiet || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        let bar = indicatif::ProgressBar::new(cfg.sampler.steps as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} sampling [{bar:40}] {pos}/{len} steps  {per_sec}  ETA {eta}",
            )
            .expect("static progress template")
            .progress_chars("=> "),
        );
        bar
    };
    let result = Run::new(&cfg)
        .observe(&mut Bar(&bar))
        .run()?
        .into_result()?;
    bar.finish_and_clear();
    let steps_per_second = result.steps as f64 / result.seconds.max(1e-9);
    write_outputs(&args.out, &text, &result, steps_per_second)?;
    let mut summary = result.summary.clone();
    if args.timing {
        summary.steps_per_second = Some(steps_per_second);
    }
    if args.json {
        out_json(&to_json(&summary)?)?;
    } else {
        out(&human(&summary, &args.out, cfg.sampler.temperature))?;
    }
    report_divergence(&cfg, &result, ctx)
}

/// The experiment of a file. A `[free_energy]` table and its file's `[quick]` sizes are
/// `flscale free-energy`'s and are left out (the sample is the unbiased run of the same
/// experiment at its own sizes); every other table is the engine's.
fn load_experiment(text: &str, source: &str) -> Result<ExperimentConfig> {
    if let Ok(mut doc) = toml::from_str::<toml::Table>(text) {
        if doc.remove("free_energy").is_some() {
            doc.remove("quick");
            let rest = toml::to_string(&doc)
                .map_err(|e| Error::runtime(format!("cannot encode {source}: {e}")))?;
            return ExperimentConfig::from_generated_toml(&rest, source);
        }
    }
    ExperimentConfig::from_toml(text, source)
}

/// The terminal's progress bar as a run's observer.
struct Bar<'a>(&'a indicatif::ProgressBar);

impl RunObserver for Bar<'_> {
    fn progress(&mut self, done: usize, _total: usize) {
        self.0.set_position(done as u64);
    }
}

fn report_divergence(cfg: &ExperimentConfig, result: &RunResult, ctx: &Ctx) -> Result<()> {
    let s = &result.summary;
    if s.diverged_chains.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = s
        .diverged_chains
        .iter()
        .take(10)
        .map(|d| format!("chain {} at step {} ({})", d.chain, d.step, d.reason))
        .collect();
    let more = s.diverged_chains.len().saturating_sub(10);
    let list = names.join(", ")
        + &if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
    let cure = format!(
        "sampler.step = {} is too large for this posterior; try sampler.step = {}",
        cfg.sampler.step,
        cfg.sampler.step / 10.0
    );
    if result.all_diverged() {
        return Err(Error::runtime(format!(
            "all {} chains diverged: {list}; {cure}",
            cfg.sampler.chains
        )));
    }
    if !ctx.quiet {
        eprintln!(
            "warning: {} of {} chains diverged and were excluded: {list}; {cure}",
            s.diverged_chains.len(),
            cfg.sampler.chains
        );
    }
    Ok(())
}

fn to_json(summary: &Summary) -> Result<serde_json::Value> {
    serde_json::to_value(summary).map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))
}

/// Writes a file atomically (temporary file + rename), naming it in errors.
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| Error::runtime(format!("cannot write {}: {e}", path.display())))
}

fn write_outputs(dir: &Path, experiment: &str, r: &RunResult, steps_per_second: f64) -> Result<()> {
    let mut summary = to_json(&r.summary)?;
    if let serde_json::Value::Object(map) = &mut summary {
        map.insert(
            "timing".to_string(),
            serde_json::json!({
                "seconds": Some(r.seconds).filter(|s| s.is_finite()),
                "steps_per_second": Some(steps_per_second).filter(|s| s.is_finite()),
                "flscale_version": env!("CARGO_PKG_VERSION"),
            }),
        );
    }
    let text = serde_json::to_string_pretty(&summary)
        .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?;
    write_atomic(&dir.join("summary.json"), &(text + "\n"))?;
    write_atomic(&dir.join("experiment.toml"), experiment)?;
    let mut traces =
        String::from("step,burn_in,energy,alignment,test_mse,train_mse,r_overlap2,outliers\n");
    for t in &r.traces {
        traces += &format!(
            "{},{},{},{},{},{},{},{}\n",
            t.step,
            t.burn_in,
            num(Some(t.energy)),
            num(Some(t.alignment)),
            num(Some(t.test_mse)),
            num(t.train_mse),
            num(Some(t.r_overlap2)),
            num(Some(t.outliers))
        );
    }
    write_atomic(&dir.join("traces.csv"), &traces)?;
    let mut chains = String::from("chain,status,alignment,test_mse,r_overlap2,outliers,mu\n");
    for c in &r.chains {
        chains += &format!(
            "{},{},{},{},{},{},{}\n",
            c.chain,
            c.status,
            num(c.alignment),
            num(c.test_mse),
            num(c.r_overlap2),
            num(c.outliers),
            num(c.mu)
        );
    }
    write_atomic(&dir.join("chains.csv"), &chains)?;
    // Deeper-layer and parity-direction histograms (h2_phi, h2_he3, rho_e1+e2, …).
    for h in &r.probe_histograms {
        let mut text = String::from("bin_low,bin_high,count\n");
        for (i, &c) in h.counts.iter().enumerate() {
            text += &format!(
                "{},{},{}\n",
                num(Some(h.edges[i])),
                num(Some(h.edges[i + 1])),
                c
            );
        }
        text += &format!(",,{}\n", h.outside);
        write_atomic(&dir.join(format!("histogram_{}.csv", h.name)), &text)?;
    }
    let h = &r.histogram;
    let total: u64 = h.counts.iter().sum::<u64>() + h.outside;
    let mut hist = String::from("bin_low,bin_high,count,density,neg_log_density\n");
    for (i, &c) in h.counts.iter().enumerate() {
        let width = h.edges[i + 1] - h.edges[i];
        let density = if total > 0 {
            c as f64 / (total as f64 * width)
        } else {
            0.0
        };
        let nld = if density > 0.0 {
            num(Some(-density.ln()))
        } else {
            String::new()
        };
        hist += &format!(
            "{},{},{},{},{}\n",
            num(Some(h.edges[i])),
            num(Some(h.edges[i + 1])),
            c,
            num(Some(density)),
            nld
        );
    }
    write_atomic(&dir.join("histogram_rho.csv"), &hist)
}

/// The summary as the aligned text of `flscale sample` (without `--json`); `temperature` is
/// the sampler's T, what each group's configurational temperature is compared with.
fn human(s: &Summary, dir: &Path, temperature: f64) -> String {
    let mut t = String::new();
    for w in &s.warnings {
        t += &format!("warning: {w}\n");
    }
    t += &observable_lines(s);
    t += &probe_lines(s);
    t += &diagnostic_lines(s, temperature);
    t += &tempering_lines(s);
    t += &hot_start_line(s);
    if let Some(sp) = s.steps_per_second {
        t += &format!("speed              {sp:.1} ensemble-steps/s\n");
    }
    t += &format!("diverged chains    {}\n", s.diverged_chains.len());
    t += &format!("written to         {}\n", dir.display());
    t
}

/// A summary number to four decimals, `n/a` when missing.
fn fixed4(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.4}")).unwrap_or_else(|| "n/a".into())
}

/// A summary number with its error bar when there is one.
fn fixed4_err(x: Option<f64>, e: Option<f64>) -> String {
    match e {
        Some(e) => format!("{} ± {:.4}", fixed4(x), e),
        None => fixed4(x),
    }
}

/// The observables: chains, alignment, test and train MSE, outliers, R, the leading direction
/// and the mean predictor's Hermite coefficients.
fn observable_lines(s: &Summary) -> String {
    let mut t = String::new();
    t += &format!(
        "chains used        {} ({} samples each, {}, {} start)\n",
        s.chains_used, s.samples_per_chain, s.precision, s.start
    );
    t += &format!(
        "alignment A_f      {}\n",
        fixed4_err(s.alignment, s.alignment_err)
    );
    t += &format!(
        "test MSE           {}   (mean predictor {}, bound (1−A)² = {})\n",
        fixed4_err(s.test_mse, s.test_mse_err),
        fixed4(s.test_mse_mean_predictor),
        fixed4(s.mse_lower_bound)
    );
    t += &format!("train MSE          {}\n", fixed4(s.train_mse));
    t += &format!(
        "outliers layer 1   {}   (|ρ| > {:.4})\n",
        fixed4_err(s.outliers_layer1, s.outliers_layer1_err),
        s.outlier_threshold
    );
    t += &format!(
        "R = E[ρ²]          {}\n",
        fixed4_err(s.r_overlap2, s.r_overlap2_err)
    );
    t += &format!(
        "leading dir · w*   {}\n",
        fixed4(s.leading_direction_overlap)
    );
    if let Some(c) = &s.mean_predictor_hermite {
        let parts: Vec<String> = c
            .iter()
            .enumerate()
            .map(|(k, v)| format!("He{k} {v:.4}"))
            .collect();
        t += &format!("mean predictor     {}\n", parts.join(", "));
    }
    t
}

/// The deeper-layer outliers, the test accuracy and the parity directions, where measured.
fn probe_lines(s: &Summary) -> String {
    let mut t = String::new();
    let pr = &s.probe;
    for layer in &pr.deeper_layers {
        for ft in &layer.features {
            t += &format!(
                "layer {} · {:<4}     outliers {}  (|o| > {}, 3 NNGP std), ⟨o²⟩ {}\n",
                layer.layer,
                ft.feature,
                fixed4_err(ft.outliers, ft.outliers_err),
                fixed4(ft.threshold),
                fixed4(ft.overlap2)
            );
        }
    }
    if pr.test_accuracy.is_some() {
        t += &format!(
            "test accuracy      {}   (mean predictor {})\n",
            fixed4_err(pr.test_accuracy, pr.test_accuracy_err),
            fixed4(pr.test_accuracy_mean_predictor)
        );
    }
    for dir in &pr.parity_directions {
        t += &format!(
            "along {:<12} specialising {}  μ {}  R {}  ({}, |w·u| > {})\n",
            dir.direction,
            fixed4_err(dir.specialising, dir.specialising_err),
            fixed4_err(dir.mu, dir.mu_err),
            fixed4(dir.r_overlap2),
            dir.classifier,
            fixed4(dir.threshold)
        );
    }
    t
}

/// What a group's configurational temperature `t` ± `err` says against the sampler's T
/// (docs/langevin.md, "The summary, field by field"): it is ≈ T at equilibrium, above T by
/// the step's bias (unadjusted Langevin), below T — even negative — while the group's ⟨θ²⟩
/// still grows, and noisy where the data term is large.
fn temperature_note(t: Option<f64>, err: Option<f64>, temperature: f64, frozen: bool) -> String {
    let Some(t) = t else {
        return String::new();
    };
    if frozen {
        // Held fixed: no equipartition to check (the line says "frozen").
        return String::new();
    }
    match err {
        Some(e) if e > 0.0 && (t - temperature).abs() <= 3.0 * e => {
            if t < 0.0 {
                format!("  (negative, but within 3 errors of T = {temperature}: noise)")
            } else {
                String::new()
            }
        }
        Some(_) if t > temperature => format!(
            "  (above T = {temperature} by > 3 errors: the step's bias, or ⟨θ²⟩ still shrinking)"
        ),
        Some(_) => format!(
            "  (below T = {temperature} by > 3 errors: not equilibrated, ⟨θ²⟩ still growing)"
        ),
        None if t < 0.0 => format!(
            "  (negative, no error bar: ≈ T = {temperature} at equilibrium; not equilibrated or noise)"
        ),
        None => String::new(),
    }
}

/// The energy halves, the autocorrelation times and effective sample sizes, and each
/// parameter group's temperature (with its error and what it says) and second moment.
fn diagnostic_lines(s: &Summary, temperature: f64) -> String {
    let mut t = String::new();
    let dg = &s.diagnostics;
    t += &format!(
        "energy             {}  (first half {}, second half {})\n",
        fixed4(dg.energy_mean),
        fixed4(dg.energy_first_half),
        fixed4(dg.energy_second_half)
    );
    t += &format!(
        "IAT / ESS          alignment {} / {}, R {} / {}\n",
        fixed4(dg.iat_alignment),
        fixed4(dg.ess_alignment),
        fixed4(dg.iat_r_overlap2),
        fixed4(dg.ess_r_overlap2)
    );
    for g in &dg.groups {
        t += &format!(
            "  {:<8} temperature {}  ⟨θ²⟩ {} (prior {}){}{}\n",
            g.group,
            fixed4_err(g.temperature, g.temperature_err),
            fixed4(g.second_moment),
            fixed4(g.prior_variance),
            if g.frozen {
                "  frozen (not sampled: its temperature is not T)"
            } else {
                ""
            },
            temperature_note(g.temperature, g.temperature_err, temperature, g.frozen)
        );
    }
    if !dg.metric.groups.is_empty() {
        let spread: Vec<String> = dg
            .metric
            .groups
            .iter()
            .map(|m| {
                let name = dg.groups.get(m.group).map_or("?", |g| g.group.as_str());
                format!("{name} {:.3e} / {:.3e} / {:.3e}", m.min, m.median, m.max)
            })
            .collect();
        t += &format!(
            "metric             {} (min / median / max): {}\n",
            dg.metric.kind,
            spread.join(", ")
        );
    }
    t
}

/// The replica-exchange ladder, swap acceptance and round trips (empty without tempering).
fn tempering_lines(s: &Summary) -> String {
    let Some(tp) = &s.tempering else {
        return String::new();
    };
    let mut t = String::new();
    t += &format!(
        "tempering          {} replicas, β = {}{}
",
        tp.replicas,
        super::three_decimals(&tp.betas),
        if tp.adapted { " (adapted)" } else { "" }
    );
    t += &format!(
        "  swaps            acceptance per pair {}, barrier Λ {:.2} (suggests {} replicas)
",
        super::three_decimals(&tp.swap_acceptance),
        tp.barrier,
        tp.suggested_replicas
    );
    t += &format!(
        "  round trips      {} ({:.3} per chain per 1000 steps; per round {:.4}, DEO limit {:.4})
",
        tp.round_trips,
        tp.round_trips_per_1000_steps,
        tp.round_trip_rate,
        tp.predicted_round_trip_rate
    );
    t
}

/// The hot start's observables and whether they agree with the cold start (empty without one).
fn hot_start_line(s: &Summary) -> String {
    let Some(h) = &s.hot_start else {
        return String::new();
    };
    format!(
        "hot start          alignment {}, R {}, outliers {}  → {}\n",
        fixed4_err(h.alignment, h.alignment_err),
        fixed4_err(h.r_overlap2, h.r_overlap2_err),
        fixed4(h.outliers_layer1),
        match (&s.coupling, s.equilibrated) {
            (Some(c), _) => coupling_phrase(c),
            (None, Some(true)) => "cold and hot agree".into(),
            (None, Some(false)) => "NOT EQUILIBRATED: cold and hot starts disagree".into(),
            (None, None) => "no error bars to compare".into(),
        }
    )
}

/// Coupled starts are no independent evidence: what they certify is how many chains' hot and
/// cold copies met, and by when.
fn coupling_phrase(c: &CouplingCertificate) -> String {
    let by = c
        .last_meeting_step
        .map_or(String::new(), |t| format!(", the last by step {t}"));
    format!(
        "coupled starts, not compared: {} of {} chains met (relative distance ≤ {:e}){by}",
        c.met, c.compared, c.tolerance
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A negative or off temperature is never printed without what it means.
    #[test]
    fn temperature_note_explains_values_away_from_t() {
        assert_eq!(temperature_note(Some(1.02), Some(0.05), 1.0, false), "");
        assert!(temperature_note(Some(-0.5), Some(0.6), 1.0, false).contains("noise"));
        assert!(temperature_note(Some(-3.9231), Some(0.4), 1.0, false).contains("not equilibrated"));
        assert!(temperature_note(Some(-3.9231), None, 1.0, false).contains("no error bar"));
        assert!(temperature_note(Some(1.8), Some(0.1), 1.0, false).contains("bias"));
        assert_eq!(temperature_note(Some(5.0), Some(0.1), 1.0, true), "");
        assert_eq!(temperature_note(None, None, 1.0, false), "");
    }
}
