//! The Slurm job array of a sweep: the experiment file's `[slurm]` table and the
//! sbatch script `flscale sweep --emit-slurm N` writes.
//!
//! ```toml
//! [slurm]                      # every key optional; command-line flags override them
//! partition = "cpu"
//! time = "04:00:00"            # per array task
//! cpus_per_task = 8            # also RAYON_NUM_THREADS of each task
//! mem = "8G"
//! sbatch = ["--account=proj42", "--qos=normal"]   # extra #SBATCH lines
//! ```
//!
//! Array task i runs shard i/N into the one results directory. The script asks Slurm to
//! requeue a task whose node fails (`--requeue`) and to send SIGTERM two minutes before the
//! time limit (`--signal=B:TERM@120`); `flscale sweep` stops cleanly on SIGTERM (the run in
//! progress is dropped, finished runs are kept, its claim released), so the next attempt — a
//! requeue or a resubmission — resumes with the runs still missing.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// `[slurm]`: the knobs of the sbatch script.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmSpec {
    /// `--partition`.
    #[serde(default)]
    pub partition: Option<String>,
    /// `--time` (Slurm's syntax: `MM`, `HH:MM:SS`, `D-HH`, …).
    #[serde(default)]
    pub time: Option<String>,
    /// `--cpus-per-task` (default 4).
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
    /// `--mem` (e.g. `8G`).
    #[serde(default)]
    pub mem: Option<String>,
    /// Extra `#SBATCH` options, one per line (e.g. `--account=proj42`).
    #[serde(default)]
    pub sbatch: Vec<String>,
}

/// Seconds before the time limit at which Slurm sends SIGTERM (`--signal=B:TERM@…`): enough for
/// the sweep to finish its current block of steps and exit.
pub const TERM_GRACE_S: u32 = 120;

/// Default `--cpus-per-task`.
pub const DEFAULT_CPUS: u32 = 4;

impl SlurmSpec {
    /// `other`'s values where it has them, else `self`'s (flags over the experiment file).
    pub fn overridden_by(&self, other: &SlurmSpec) -> SlurmSpec {
        SlurmSpec {
            partition: other.partition.clone().or_else(|| self.partition.clone()),
            time: other.time.clone().or_else(|| self.time.clone()),
            cpus_per_task: other.cpus_per_task.or(self.cpus_per_task),
            mem: other.mem.clone().or_else(|| self.mem.clone()),
            sbatch: self.sbatch.iter().chain(&other.sbatch).cloned().collect(),
        }
    }

    /// Checks the values: one line each, no shell quoting characters, cpus ≥ 1.
    pub fn validate(&self, place: &str) -> Result<()> {
        let fields = [
            ("partition", self.partition.as_deref()),
            ("time", self.time.as_deref()),
            ("mem", self.mem.as_deref()),
        ];
        for (name, v) in fields {
            if let Some(v) = v {
                check_word(place, name, v)?;
            }
        }
        for (i, line) in self.sbatch.iter().enumerate() {
            if !line.starts_with('-') || line.contains('\n') || line.trim().is_empty() {
                return Err(Error::invalid(format!(
                    "{place}: sbatch[{i}] = {line:?} is not allowed; give one sbatch option such as \"--account=proj42\""
                )));
            }
        }
        if self.cpus_per_task == Some(0) {
            return Err(Error::invalid(format!(
                "{place}: cpus_per_task = 0 is not allowed; give a whole number >= 1"
            )));
        }
        Ok(())
    }
}

fn check_word(place: &str, name: &str, v: &str) -> Result<()> {
    let ok = !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_:.,+=@%".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{place}: {name} = {v:?} is not allowed; use letters, digits and - _ : . , + = @ % only"
        )))
    }
}

/// What the script runs.
#[derive(Debug, Clone)]
pub struct ScriptInputs<'a> {
    /// Absolute path of the flscale binary.
    pub exe: &'a str,
    /// Absolute path of the experiment file.
    pub experiment: &'a str,
    /// Absolute path of the results directory.
    pub dir: &'a str,
    /// Array tasks (shards).
    pub tasks: usize,
    /// `--quick`.
    pub quick: bool,
    /// `--format` of the tables.
    pub format: &'a str,
}

/// Quotes a path for bash (single quotes; an embedded `'` becomes `'\''`).
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The sbatch script of a job array over `inputs.tasks` shards.
pub fn sbatch_script(spec: &SlurmSpec, inputs: &ScriptInputs) -> String {
    let n = inputs.tasks;
    let dir = inputs.dir;
    let mut s = format!(
        "#!/bin/bash\n\
# Slurm job array for `flscale sweep` ({n} shards). Submit with: sbatch {dir}/sweep.sbatch\n\
# All shards write into one results directory; finished runs are never recomputed and each run\n\
# is claimed by one task, so a failed task can simply be resubmitted: `flscale status {dir}`\n\
# prints the command. After the array: flscale merge {dir}\n\
#SBATCH --job-name=flscale-sweep\n\
#SBATCH --array=0-{last}\n\
#SBATCH --cpus-per-task={cpus}\n\
#SBATCH --output={dir}/slurm-%A_%a.out\n\
#SBATCH --requeue\n\
#SBATCH --signal=B:TERM@{TERM_GRACE_S}\n",
        last = n - 1,
        cpus = spec.cpus_per_task.unwrap_or(DEFAULT_CPUS),
    );
    if let Some(p) = &spec.partition {
        s += &format!("#SBATCH --partition={p}\n");
    }
    if let Some(t) = &spec.time {
        s += &format!("#SBATCH --time={t}\n");
    }
    if let Some(m) = &spec.mem {
        s += &format!("#SBATCH --mem={m}\n");
    }
    for line in &spec.sbatch {
        s += &format!("#SBATCH {}\n", line.trim());
    }
    s += &format!(
        "set -euo pipefail\n\
export RAYON_NUM_THREADS=\"${{SLURM_CPUS_PER_TASK:-1}}\"\n\
# exec: flscale itself receives Slurm's SIGTERM and stops cleanly.\n\
exec {exe} -q sweep {exp} --out {dirq}{quick} --format {format} --shard \"${{SLURM_ARRAY_TASK_ID}}/{n}\"\n",
        exe = sh_quote(inputs.exe),
        exp = sh_quote(inputs.experiment),
        dirq = sh_quote(dir),
        quick = if inputs.quick { " --quick" } else { "" },
        format = inputs.format,
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_carries_the_knobs_and_flags_override_the_file() {
        let file = SlurmSpec {
            partition: Some("cpu".into()),
            time: Some("01:00:00".into()),
            cpus_per_task: Some(8),
            mem: None,
            sbatch: vec!["--account=a1".into()],
        };
        let flags = SlurmSpec {
            time: Some("02:00:00".into()),
            mem: Some("4G".into()),
            sbatch: vec!["--qos=low".into()],
            ..SlurmSpec::default()
        };
        let spec = file.overridden_by(&flags);
        spec.validate("x").unwrap();
        let inputs = ScriptInputs {
            exe: "/opt/flscale",
            experiment: "/e/it's.toml",
            dir: "/r",
            tasks: 3,
            quick: true,
            format: "csv",
        };
        let s = sbatch_script(&spec, &inputs);
        for want in [
            "#SBATCH --array=0-2\n",
            "#SBATCH --cpus-per-task=8\n",
            "#SBATCH --partition=cpu\n",
            "#SBATCH --time=02:00:00\n",
            "#SBATCH --mem=4G\n",
            "#SBATCH --account=a1\n#SBATCH --qos=low\n",
            "#SBATCH --requeue\n",
            "'/e/it'\\''s.toml' --out '/r' --quick --format csv --shard \"${SLURM_ARRAY_TASK_ID}/3\"",
        ] {
            assert!(s.contains(want), "{want}\n{s}");
        }
        let bad = SlurmSpec {
            time: Some("1:00; rm -rf /".into()),
            ..SlurmSpec::default()
        };
        assert!(bad
            .validate("exp.toml [slurm]")
            .unwrap_err()
            .to_string()
            .contains("time"));
    }
}
