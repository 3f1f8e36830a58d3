//! `flscale sweep --emit-slurm N`: the sbatch script of a job array, with the
//! `[slurm]` knobs of the experiment file overridden by flags.

use std::path::{Path, PathBuf};

use flscale::experiment::io::write_atomic;
use flscale::experiment::slurm::{self, ScriptInputs, SlurmSpec};
use flscale::experiment::status::SLURM_JSON;
use flscale::experiment::{store, ResultsFormat, Store, Sweep};
use flscale::{Error, Result};

use super::git_revision;

/// The sbatch knobs of `flscale sweep --emit-slurm N` (override the file's `[slurm]`).
#[derive(Debug, Default, clap::Args)]
pub struct SlurmFlags {
    /// sbatch --partition of the job array.
    #[arg(long, requires = "emit_slurm")]
    pub partition: Option<String>,
    /// sbatch --time per array task (e.g. 04:00:00).
    #[arg(long, requires = "emit_slurm")]
    pub time: Option<String>,
    /// sbatch --cpus-per-task (also the threads of each task; default 4).
    #[arg(long, requires = "emit_slurm")]
    pub cpus_per_task: Option<u32>,
    /// sbatch --mem per task (e.g. 8G).
    #[arg(long, requires = "emit_slurm")]
    pub mem: Option<String>,
    /// An extra #SBATCH option (repeatable), e.g. --sbatch=--account=proj42.
    #[arg(
        long = "sbatch",
        value_name = "OPTION",
        requires = "emit_slurm",
        allow_hyphen_values = true
    )]
    pub sbatch: Vec<String>,
}

impl SlurmFlags {
    fn spec(&self) -> SlurmSpec {
        SlurmSpec {
            partition: self.partition.clone(),
            time: self.time.clone(),
            cpus_per_task: self.cpus_per_task,
            mem: self.mem.clone(),
            sbatch: self.sbatch.clone(),
        }
    }
}

fn absolute(path: &Path) -> Result<String> {
    path.canonicalize()
        .map(|p| p.display().to_string())
        .map_err(|e| Error::invalid(format!("cannot read {}: {e}", path.display())))
}

/// What `--emit-slurm` takes from the `sweep` command line.
#[derive(Debug, Clone, Copy)]
pub struct EmitInputs<'a> {
    /// The sbatch knobs given as flags.
    pub slurm: &'a SlurmFlags,
    /// The results directory (`--out`).
    pub out: &'a Path,
    /// The experiment file.
    pub experiment: &'a Path,
    /// The format of the aggregate tables each task writes.
    pub format: ResultsFormat,
    /// `--quick`: the file's `[quick]` overrides.
    pub quick: bool,
}

/// Writes `DIR/sweep.sbatch` for `n` array tasks, creates the results directory (manifest and
/// `runs/`, so that `flscale status DIR` works before the first task starts) and records the
/// array size in `DIR/slurm.json`. Returns the script's path.
pub fn emit(args: &EmitInputs, sweep: &Sweep, text: &str, n: usize) -> Result<PathBuf> {
    if n == 0 {
        return Err(Error::invalid(
            "--emit-slurm 0 is not allowed; give the number of array tasks, e.g. 4",
        ));
    }
    let spec = sweep.slurm.overridden_by(&args.slurm.spec());
    spec.validate("--emit-slurm")?;
    let manifest = store::manifest(sweep, text, git_revision().as_deref());
    Store::create(args.out, &manifest)?;
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "flscale".into());
    let format = args.format.ext();
    let script = slurm::sbatch_script(
        &spec,
        &ScriptInputs {
            exe: &exe,
            experiment: &absolute(args.experiment)?,
            dir: &absolute(args.out)?,
            tasks: n,
            quick: args.quick,
            format,
        },
    );
    let path = args.out.join("sweep.sbatch");
    write_atomic(&path, script.as_bytes())?;
    let info = serde_json::json!({"array_tasks": n, "script": "sweep.sbatch"});
    write_atomic(
        &args.out.join(SLURM_JSON),
        (info.to_string() + "\n").as_bytes(),
    )?;
    Ok(path)
}
