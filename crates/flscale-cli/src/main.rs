//! `flscale`: predict and measure feature learning from the command line.
//!
//! The binary is thin: each subcommand (one file under `cmd/`) parses its flags, builds the
//! library's typed inputs, calls `flscale` and prints. Exit codes: 0 success, 2 bad input,
//! 1 runtime failure (e.g. every Langevin chain diverged). Errors are one sentence on stderr.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod alloc;
mod cmd;

/// Every allocation goes through [`alloc::ExitOnFailure`]: an allocation that the resource
/// estimates missed ends the process with exit code 1 and one sentence instead of SIGABRT.
#[global_allocator]
static GLOBAL: alloc::ExitOnFailure = alloc::ExitOnFailure;

/// Predict and measure when and how neural networks learn features.
///
/// flscale implements the scaling heuristic of Rubin, Davidovich & Ringel, "Mitigating the
/// Curse of Detail" (arXiv 2512.04165): it enumerates feature-learning patterns, minimises
/// their variational energies exactly and predicts the sample complexity P* ∝ κ·Ẽ; and it
/// measures the same quantities in Bayesian networks sampled by Langevin dynamics.
#[derive(Debug, Parser)]
#[command(
    name = "flscale",
    version,
    propagate_version = true,
    after_help = "Start here:\n  flscale predict --preset fcn3-erf-he3     # the paper's Table 1\n  flscale presets                            # every built-in setup\n  flscale energy \"M*d + N/M\" --free M --at N=d"
)]
struct Cli {
    /// More log output on stderr (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Only errors on stderr; hides progress bars.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Memory a run may use, e.g. 8G, 500M, 16GiB (default: MemAvailable in /proc/meminfo).
    /// A run whose estimate exceeds it is refused with exit code 2 (docs/limits.md).
    #[arg(long, global = true, value_name = "SIZE")]
    max_memory: Option<String>,
    /// Run even when the work estimate exceeds 30 days at the assumed speed (docs/limits.md).
    #[arg(long, global = true)]
    yes: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Predict the winning feature-learning pattern and the P* scaling of an architecture.
    Predict(cmd::predict::PredictArgs),
    /// Minimise a power-law energy over free parameters exactly (a generic calculator).
    Energy(cmd::energy::EnergyArgs),
    /// List the built-in presets (architectures and experiments of the paper).
    Presets(cmd::presets::PresetsArgs),
    /// Show a preset's TOML so that it can be copied and edited.
    Preset(cmd::presets::PresetArgs),
    /// The solvable two-layer model: cavity potential, phases, adaptive kernel.
    Cavity(cmd::cavity::CavityArgs),
    /// Large deviations of the prior alignment (paper App. B.3).
    Ldt(cmd::ldt::LdtArgs),
    /// Kernel feature propagation (paper App. C.5) and NNGP kernels.
    Kernel(cmd::kernel::KernelArgs),
    /// Sample a Bayesian network ensemble by Langevin dynamics.
    Sample(cmd::sample::SampleArgs),
    /// Measure the Langevin engine's speed in the paper's Fig. 2 setting.
    Bench(cmd::bench::BenchArgs),
    /// Free energy along an order parameter: umbrella windows, basin weights, barrier.
    FreeEnergy(cmd::free_energy::FreeEnergyArgs),
    /// Run a grid of experiments into a results directory (resumable, shardable).
    Sweep(cmd::sweep::SweepArgs),
    /// Merge the results directories of sweep shards.
    Merge(cmd::merge::MergeArgs),
    /// Where a sweep stands: runs done, running, failed, missing; the resubmit command.
    Status(cmd::status::StatusArgs),
    /// Extract P* (the sample size where the alignment crosses a threshold) from a sweep.
    Pstar(cmd::pstar::PstarArgs),
    /// Fit a power-law exponent to a sweep's results, beside the scaling engine's prediction.
    Fit(cmd::fit::FitArgs),
    /// Draw a sweep's figures (PNG and SVG).
    Plot(cmd::plot::PlotArgs),
    /// Reproduce a figure of the paper end to end.
    Reproduce(cmd::reproduce::ReproduceArgs),
    /// An interactive explorer in the browser: the solvable model, the scaling engine, results.
    Serve(cmd::serve::ServeArgs),
}

fn init_logging(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLSCALE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}

/// The subcommand the arguments name (`flscale cavity phase`), for the usage errors whose
/// rendering has no usage line (an invalid or missing value).
fn command_path(args: &[std::ffi::OsString]) -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["flscale".to_string()];
    for a in args.iter().skip(1).filter_map(|a| a.to_str()) {
        if a.starts_with('-') {
            continue;
        }
        if let Some(sub) = cmd.find_subcommand(a).cloned() {
            path.push(a.to_string());
            cmd = sub;
        }
    }
    path.join(" ")
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Err(e) = cmd::args::check_numbers(&args) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            eprintln!(
                "{}",
                cmd::args::one_line_usage_error(&e.render().to_string(), &command_path(&args))
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            // Help and version go to stdout with exit 0.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    init_logging(cli.verbose, cli.quiet);
    let max_memory = match cli.max_memory.as_deref().map(flscale::limits::parse_memory) {
        None => None,
        Some(Ok(bytes)) => Some(bytes),
        Some(Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let ctx = cmd::Ctx {
        quiet: cli.quiet,
        max_memory,
        yes: cli.yes,
    };
    let result = match cli.command {
        Command::Predict(a) => cmd::predict::run(a, &ctx),
        Command::Energy(a) => cmd::energy::run(a, &ctx),
        Command::Presets(a) => cmd::presets::run_list(a, &ctx),
        Command::Preset(a) => cmd::presets::run_show(a, &ctx),
        Command::Cavity(a) => cmd::cavity::run(a, &ctx),
        Command::Ldt(a) => cmd::ldt::run(a, &ctx),
        Command::Kernel(a) => cmd::kernel::run(a, &ctx),
        Command::Sample(a) => cmd::sample::run(a, &ctx),
        Command::Bench(a) => cmd::bench::run(a, &ctx),
        Command::FreeEnergy(a) => cmd::free_energy::run(a, &ctx),
        Command::Sweep(a) => cmd::sweep::run(a, &ctx),
        Command::Merge(a) => cmd::merge::run(a, &ctx),
        Command::Status(a) => cmd::status::run(a, &ctx),
        Command::Pstar(a) => cmd::pstar::run(a, &ctx),
        Command::Fit(a) => cmd::fit::run(a, &ctx),
        Command::Plot(a) => cmd::plot::run(a, &ctx),
        Command::Reproduce(a) => cmd::reproduce::run(a, &ctx),
        Command::Serve(a) => cmd::serve::run(a, &ctx),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
