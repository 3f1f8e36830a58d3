//! Sweeps, the results store, P\* and exponent fits, and the paper's figures (spec 03; paper
//! App. F.0.1, F.1, F.2 and Figs. 2, 3, 7, 8).
//!
//! * [`sweep`]: the `[sweep]` and `[analysis]` tables of an experiment file; a grid is expanded
//!   into one [`crate::sim::ExperimentConfig`] per point, each validated by the Langevin
//!   engine's own loader before any run starts.
//! * [`store`]: the results directory — a deterministic `manifest.json`, one directory per
//!   finished run (written atomically) and `timing.json` for everything that is not
//!   reproducible (clock times, machine) — and [`StoreData`], the runs read back.
//! * [`results`]: the aggregate tables derived from the runs — the long-format `results`
//!   (one row per run and observable), `chains`, `histograms` — as Parquet, or CSV on request
//!   ([`table`]), and the verified read of `results`.
//! * [`starts`]: the hot/cold verdicts as columns of `results`, the runs the analysis uses.
//! * [`specialised`]: which rule (side peak or 3σ₁/√d cut) identified the neurons behind μ
//!   and M, as a column of `results` and a sentence in the reports.
//! * [`integrity`]: per-run checksums and the verification every reader runs; [`claim`]:
//!   atomic claims so that two sweeps into one directory never compute the same run.
//! * [`runner`], [`merge`], [`status`]: running a grid (resume, shards), merging stores,
//!   where a sweep stands; [`slurm`]: the sbatch script of a job array.
//! * [`stats`]: least-squares log-log exponents and the bootstrap over seeds and chains.
//! * [`pstar`]: threshold crossing in log P (P\*) with its bracket on the grid, the bootstrap
//!   combined with the bracket, and which crossings are only bracketed.
//! * [`analysis`]: exponent fits of observables and of P\*, the sentence each claims, and the
//!   scaling engine's prediction for the same architecture.
//! * [`refine`]: `--refine-pstar`, bisection of the brackets in log P into the same store.
//! * [`figures`]: alignment vs P, P\* vs d, outliers vs N, −log overlap histograms, test MSE vs
//!   alignment with the (1 − A_f)² bound.
//! * [`presets`]: the paper's figures as experiment files (`flscale reproduce`).
//!
//! Layers, bottom to top: a file imports only from files in lower layers (test modules
//! excepted), so the store can be read and tested without the planner or the analysis.
//!
//! 0. `io` (atomic writes, the CSV number format and cell parser, clock, host)
//! 1. `table`, `fields`, `slurm`, `layout` (run directory names, `refine.json`), `presets`
//! 2. `sweep`, `claim`
//! 3. `integrity`
//! 4. `store`
//! 5. `starts`, `specialised` (they add methods to [`StoreData`] that the layers above call)
//! 6. `stats`, `results`
//! 7. `pstar`
//! 8. `analysis`, `merge`, `runner`, `status`
//! 9. `refine`, `figures`
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
pub use sweep::{AnalysisSpec, FreeEnergyCell, PstarSource, RunPlan, Sweep};
pub use table::{ResultsFormat, Table};
