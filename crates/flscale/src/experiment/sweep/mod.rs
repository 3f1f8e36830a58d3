//! The sweep tables of an experiment file (spec 03 "Experiment files and sweeps").
//!
//! An experiment file is the Langevin engine's file (`[model]`, `[data]`, `[target]`,
//! `[sampler]`, `[priors]`, see [`crate::sim::config`]) plus three optional tables that only
//! sweeps read:
//!
//! ```toml
//! [sweep]                      # lists over any experiment field: the grid is their product
//! data.d = [10, 20, 40]
//! data.p_over_d = [5, 10, 20]  # derived field: P = round(ratio · d)
//! sampler.seed = [1, 2]
//! follow = { "model.widths" = "data.d" }   # every hidden width equals d at each point (N = d)
//!
//! [analysis]                   # defaults of `flscale pstar | fit | plot`
//! x = "p"                      # crossing variable of P*
//! group = "d"                  # one P* per value of this
//! threshold = 0.1              # A_f = 0.1 (paper App. F.0.1)
//! fit = { y = "pstar", x = "d" }
//! predict = { preset = "fcn2-erf-he3", at = "N=d" }
//!
//! [quick]                      # `--quick`: smaller sizes (tests, a first look)
//! set = { "sampler.steps" = 2000, "sampler.burn_in" = 1000 }
//! sweep = { "data.d" = [8, 12, 16] }
//! ```
//!
//! `[free_energy]` (the umbrella windows of `flscale free-energy`, [`crate::free_energy::config`])
//! is taken out and kept beside the grid the same way.
//!
//! The engine's own tables use `deny_unknown_fields`, so these tables are removed before each
//! grid point is handed to
//! [`ExperimentConfig::from_toml`](crate::sim::ExperimentConfig::from_toml): every run is
//! validated by the same loader as `flscale sample`, and all of them are validated before the
//! first run starts.
//!
//! Files, bottom to top: `value` (TOML values and dotted field paths) → `spec` (`[analysis]`),
//! `axis` (swept fields and their checks), `plan` (one grid point) → `grid` (the product of the
//! axes, resolved and validated) → `parse` (the file's tables), `cells` (the free-energy plan of
//! each point).

use toml::Table;

use crate::free_energy::config::FreeEnergyConfig;

mod axis;
mod cells;
mod grid;
mod parse;
mod plan;
mod spec;
mod value;

#[cfg(test)]
mod tests;

pub use axis::Axis;
pub use cells::FreeEnergyCell;
pub use plan::RunPlan;
pub use spec::{AnalysisSpec, FitSpec, PredictSpec, PstarSource, DEFAULT_RESOLUTION};
pub use value::{as_f64, show_value, toml_to_json};

/// A parsed sweep: the base experiment, the grid and every run.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Name of the source in messages.
    pub source: String,
    /// The experiment without `[sweep]`, `[analysis]`, `[quick]` (and with quick overrides
    /// applied when asked).
    pub base: Table,
    /// The grid axes, in the order they appear after sorting by path.
    pub axes: Vec<Axis>,
    /// `target ← source` field links applied at every point.
    pub follow: Vec<(String, String)>,
    /// Analysis defaults.
    pub analysis: AnalysisSpec,
    /// Every grid point.
    pub runs: Vec<RunPlan>,
    /// Whether the `[quick]` overrides were applied.
    pub quick: bool,
    /// `[slurm]`: knobs of the sbatch script of `--emit-slurm` ([`super::slurm`]).
    pub slurm: super::slurm::SlurmSpec,
    /// `[free_energy]`: the umbrella windows of `flscale free-energy`, parsed but not yet
    /// checked against the model ([`crate::free_energy::window::FreeEnergyPlan::new`] does).
    /// The other commands ignore it.
    pub free_energy: Option<FreeEnergyConfig>,
}
