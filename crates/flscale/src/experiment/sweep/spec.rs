//! `[analysis]`: the defaults of `flscale pstar | fit | plot` (the crossing variable, the
//! group, the threshold, the default fit and the prediction printed beside it).

use serde::{Deserialize, Serialize};

/// What `flscale fit` fits by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitSpec {
    /// `"pstar"` (P\* per group) or an observable with per-chain values: alignment, test_mse,
    /// r_overlap2, outliers.
    #[serde(default = "default_fit_y")]
    pub y: String,
    /// The variable of the fit, e.g. `d` or `n1`.
    #[serde(default = "default_group")]
    pub x: String,
}

/// Which exponent of the scaling engine is printed beside the measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictSpec {
    /// A built-in architecture preset (`flscale presets`), e.g. `fcn2-erf-he3`.
    pub preset: String,
    /// Regime assignments, e.g. `N=d` (the `--at` syntax of `flscale predict`).
    #[serde(default)]
    pub at: Option<String>,
    /// `"pstar"` (the exponent of P\* in d) or the name of a free parameter of the winning
    /// pattern (e.g. `M`, the number of specialising neurons).
    #[serde(default = "default_fit_y")]
    pub quantity: String,
    /// The scale whose exponent is read from the parameter's optimal monomial (e.g. `N`).
    #[serde(default = "default_scale")]
    pub scale: String,
}

/// The bracket factor x_hi/x_lo below which a crossing counts as resolved (the default of
/// `flscale sweep --refine-pstar`): its uniform-in-log uncertainty is then ≤ 2.8 % of P\*.
pub const DEFAULT_RESOLUTION: f64 = 1.1;

/// `[analysis]`: defaults for `pstar`, `fit` and `plot`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalysisSpec {
    /// Variable in which the threshold crossing is interpolated (log scale), default `p`.
    #[serde(default = "default_x")]
    pub x: String,
    /// One P\* per value of this variable (default `d`).
    #[serde(default = "default_group")]
    pub group: String,
    /// Observable that crosses the threshold (default `alignment`).
    #[serde(default = "default_observable")]
    pub observable: String,
    /// Threshold (default 0.1, the paper's A_f = 0.1 of App. F.0.1).
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// The observable falls as `x` grows (default false): the crossing is then the first
    /// downward one — A_f against `sqrt_ld3_over_p` = √(L·d³)/P in paper Fig. 3(b).
    #[serde(default)]
    pub falling: bool,
    /// Bracket factor x_hi/x_lo at or below which a P\* crossing counts as resolved (default
    /// 1.1, [`DEFAULT_RESOLUTION`]); coarser brackets are reported and `--refine-pstar` bisects
    /// them. Left out of the manifest at its default, so that stores written before it existed
    /// still resume.
    #[serde(
        default = "default_pstar_resolution",
        skip_serializing_if = "is_default_pstar_resolution"
    )]
    pub pstar_resolution: f64,
    /// Where P\* comes from (default `"crossing"`, the threshold crossing of `observable`);
    /// `"coexistence"` takes P\*\_coex and both spinodals from the free energy at every grid
    /// point ([`crate::free_energy::coexistence`]) and needs a `[free_energy]` table. Left out
    /// of the manifest at its default, as `pstar_resolution`.
    #[serde(default, skip_serializing_if = "PstarSource::is_crossing")]
    pub pstar: PstarSource,
    /// Default fit.
    #[serde(default)]
    pub fit: Option<FitSpec>,
    /// The engine's prediction for the same architecture.
    #[serde(default)]
    pub predict: Option<PredictSpec>,
}

/// Where `pstar`, `fit` and `plot` take P\* from (`[analysis] pstar`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PstarSource {
    /// The crossing of `observable` through `threshold` in `x` (paper App. F.0.1).
    #[default]
    Crossing,
    /// The free energies of the `[free_energy]` windows at every grid point: the coexistence
    /// P\*\_coex and the spinodals of the lazy and the specialised basin, each fitted against
    /// the group variable.
    Coexistence,
}

impl PstarSource {
    fn is_crossing(&self) -> bool {
        *self == PstarSource::Crossing
    }
}

fn default_fit_y() -> String {
    "pstar".into()
}
fn default_group() -> String {
    "d".into()
}
fn default_scale() -> String {
    "d".into()
}
fn default_x() -> String {
    "p".into()
}
fn default_observable() -> String {
    "alignment".into()
}
fn default_pstar_resolution() -> f64 {
    DEFAULT_RESOLUTION
}
fn is_default_pstar_resolution(r: &f64) -> bool {
    *r == DEFAULT_RESOLUTION
}
fn default_threshold() -> f64 {
    0.1
}

impl Default for AnalysisSpec {
    fn default() -> Self {
        AnalysisSpec {
            x: default_x(),
            group: default_group(),
            observable: default_observable(),
            threshold: default_threshold(),
            falling: false,
            pstar_resolution: default_pstar_resolution(),
            pstar: PstarSource::Crossing,
            fit: None,
            predict: None,
        }
    }
}
