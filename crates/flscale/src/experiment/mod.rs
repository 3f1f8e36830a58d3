//! Sweeps, the results store, P\* and exponent fits, and the paper's figures (spec 03; paper
//! App. F.0.1, F.1, F.2 and Figs. 2, 3, 7, 8).
//!
//! * [`sweep`]: the `[sweep]` and `[analysis]` tables of an experiment file; a grid is expanded
//!   into one [`crate::sim::ExperimentConfig`] per point, each validated by the Langevin
//!   engine's own loader before any run starts.
//! * [`store`]: the results directory — a deterministic `manifest.json`, one directory per
//!   finished run (written atomically), the long-format `results` table (one row per run and
//!   observable), `chains`, `histograms` — as Parquet, or CSV on request ([`table`]) — and
//!   `timing.json` for everything that is not reproducible (clock times, machine). Resume,
//!   shards and merge live here.
//! * [`starts`]: the hot/cold verdicts as columns of `results`, the runs the analysis uses.
//! * [`specialised`]: which rule (side peak or 3σ₁/√d cut) identified the neurons behind μ
//!   and M, as a column of `results` and a sentence in the reports.
//! * [`integrity`]: per-run checksums and the verification every reader runs; [`claim`]:
//!   atomic claims so that two sweeps into one directory never compute the same run.
//! * [`analysis`]: threshold crossing in log P (P\*), least-squares log-log exponents and the
//!   bootstrap over chains; the scaling engine's prediction for the same architecture.
//! * [`pstar`]: the crossing with its bracket on the grid, the bootstrap over seeds and chains
//!   combined with the bracket, and which crossings are only bracketed.
//! * [`refine`]: `--refine-pstar`, bisection of the brackets in log P into the same store.
//! * [`figures`]: alignment vs P, P\* vs d, outliers vs N, −log overlap histograms, test MSE vs
//!   alignment with the (1 − A_f)² bound.
//! * [`presets`]: the paper's figures as experiment files (`flscale reproduce`).
//!
//! Reproducibility: runs are executed one after the other in grid order, each one is
//! bit-identical for any thread count (see [`crate::sim`]), and every aggregate file is rebuilt
//! from the finished run directories in grid order, so resuming, sharding and merging give the
//! same bytes as one uninterrupted run. The bootstrap uses a fixed-seed ChaCha8 stream.

pub mod analysis;
pub mod claim;
pub mod fields;
pub mod figures;
pub mod integrity;
pub mod io;
pub mod layout;
pub mod merge;
pub mod presets;
pub mod pstar;
pub mod refine;
pub mod results;
pub mod runner;
pub mod slurm;
pub mod specialised;
pub mod starts;
pub mod stats;
pub mod status;
pub mod store;
pub mod sweep;
pub mod table;

pub use pstar::threshold_crossing;
pub use runner::{run_sweep, Silent, SweepObserver, SweepOutcome};
pub use stats::{loglog_fit, Bootstrap, LinearFit};
pub use store::{Store, StoreData};
pub use sweep::{AnalysisSpec, RunPlan, Sweep};
pub use table::{ResultsFormat, Table};
