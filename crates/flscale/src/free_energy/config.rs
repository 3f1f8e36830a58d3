//! The `[free_energy]` table of an experiment file (spec 07, "Outputs"): which order parameter
//! the umbrella windows restrain, over which range, with how many windows of which stiffness,
//! and how finely the profile is binned.
//!
//! ```toml
//! [free_energy]
//! order_parameter = "neuron_overlap"   # or "aligned_fraction", "projected_fraction"
//! neuron = 0                           # neuron_overlap only
//! coordinates = [0, 1]                 # projected_fraction only
//! range = [-1.0, 1.0]                  # optional: the order parameter's whole range
//! windows = 16
//! kappa = 200.0                        # optional: see `FreeEnergyConfig::kappa`
//! bins = 40                            # optional
//! flatten = true                       # optional: a pilot stage first (default true)
//! pilot_windows = 61                   # optional: see `FreeEnergyConfig::pilot_windows`
//! pilot_kappa = 3600.0                 # optional: see `FreeEnergyConfig::pilot_kappa`
//! ```
//!
//! Parsing checks types and refuses unknown fields; [`FreeEnergyConfig::validate`] checks the
//! values against the model's weight rows ([`WeightRows`]) and refuses fields the chosen order
//! parameter does not read, each refusal one sentence naming the field, its value and what is
//! allowed (exit code 2 through [`crate::Error::invalid`]).

use serde::{Deserialize, Serialize};

use super::profile::Bins;
use super::umbrella::Umbrella;
use crate::activation::Activation;
use crate::sim::config::{ExperimentConfig, ModelKind};
use crate::sim::order::{check_coordinates, OrderKind, OrderParameter, WeightRows};
use crate::{Error, Result};

/// Most windows a table may ask for: a guard against typos (each window is a full run).
pub const MAX_WINDOWS: usize = 4096;

/// Most bins a profile may have: a guard against typos.
pub const MAX_BINS: usize = 100_000;

/// Bins of the profile when the table gives none.
pub const DEFAULT_BINS: usize = 40;

/// The pilot windows' default stiffness in units of kT/Δ_p², Δ_p their spacing
/// ([`FreeEnergyConfig::pilot_kappa`]).
pub const PILOT_STIFFNESS: f64 = 4.0;

/// Pilot windows per interval between two umbrella windows ([`FreeEnergyConfig::pilot_windows`]).
pub const PILOT_DENSITY: usize = 4;

/// The order parameters a table can name ([`OrderKind`] without its teacher data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderParameterName {
    /// s_i = w_i·w\*/|w_i| of the neuron (or CNN filter) `neuron`.
    NeuronOverlap,
    /// m_i = w_i·w\* of the neuron (or CNN filter) `neuron` ([`OrderKind::NeuronProjection`]).
    NeuronProjection,
    /// Q = Σ_i (w_i·w\*)² / Σ_i |w_i|².
    AlignedFraction,
    /// Q with (w_i·w\*)² replaced by |P w_i|², P the projector onto `coordinates`.
    ProjectedFraction,
    /// c_i = φ·y/(|φ||y|) of the FCN's first-layer neuron `neuron` on the training set
    /// ([`OrderKind::LabelCorrelation`]).
    LabelCorrelation,
}

impl OrderParameterName {
    /// The name as written in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderParameterName::NeuronOverlap => "neuron_overlap",
            OrderParameterName::NeuronProjection => "neuron_projection",
            OrderParameterName::AlignedFraction => "aligned_fraction",
            OrderParameterName::ProjectedFraction => "projected_fraction",
            OrderParameterName::LabelCorrelation => "label_correlation",
        }
    }

    /// The interval the order parameter lives in ([`OrderParameter::range`]).
    pub fn range(self) -> (f64, f64) {
        match self {
            OrderParameterName::NeuronOverlap | OrderParameterName::LabelCorrelation => (-1.0, 1.0),
            OrderParameterName::NeuronProjection => (f64::NEG_INFINITY, f64::INFINITY),
            _ => (0.0, 1.0),
        }
    }
}

/// `[free_energy]` (module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FreeEnergyConfig {
    /// The order parameter s the windows restrain.
    pub order_parameter: OrderParameterName,
    /// neuron_overlap: the first-layer neuron (CNN: filter) i, 0-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neuron: Option<usize>,
    /// projected_fraction: the relevant input coordinates (0-based, distinct).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinates: Option<Vec<usize>>,
    /// [lo, hi] the window centres span, both ends included; default the order parameter's
    /// whole range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    /// Number of umbrella windows K ≥ 2.
    pub windows: usize,
    /// Stiffness κ of every window's restraint ½κ(s − s_k)²; default from the window spacing
    /// ([`FreeEnergyConfig::kappa`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kappa: Option<f64>,
    /// Bins of the profile F(s) over the range; default [`DEFAULT_BINS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bins: Option<usize>,
    /// Run a pilot stage of stiff windows first and flatten the windows with its estimate of
    /// F ([`super::flatten`]); default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flatten: Option<bool>,
    /// Number of pilot windows over the same range; default [`PILOT_DENSITY`]·(K − 1) + 1
    /// ([`FreeEnergyConfig::pilot_windows`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pilot_windows: Option<usize>,
    /// Stiffness of the pilot windows; default [`PILOT_STIFFNESS`]·kT/Δ_p²
    /// ([`FreeEnergyConfig::pilot_kappa`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pilot_kappa: Option<f64>,
}

/// The document around the table: every other table of the experiment file is left to
/// [`ExperimentConfig`].
#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    free_energy: Option<FreeEnergyConfig>,
}

impl FreeEnergyConfig {
    /// The `[free_energy]` table of an experiment file's text (`None` if it has none), parsed
    /// but not validated; a syntax or type error is one line naming `source`, line and column.
    pub fn from_toml(text: &str, source: &str) -> Result<Option<FreeEnergyConfig>> {
        let doc: Document =
            toml::from_str(text).map_err(|e| crate::error::toml_error(source, text, &e))?;
        Ok(doc.free_energy)
    }

    /// The window range [lo, hi]: the table's, or the order parameter's whole range.
    pub fn range(&self) -> (f64, f64) {
        match self.range {
            Some([lo, hi]) => (lo, hi),
            None => self.order_parameter.range(),
        }
    }

    /// Spacing Δ = (hi − lo)/(K − 1) of the window centres.
    pub fn spacing(&self) -> f64 {
        let (lo, hi) = self.range();
        (hi - lo) / (self.windows.max(2) - 1) as f64
    }

    /// κ: the table's, or κ = kT/Δ² at the runs' temperature kT. The restraint alone confines
    /// s to a Gaussian of standard deviation √(kT/κ) about the centre, so the default makes that
    /// width equal to the spacing Δ and neighbouring windows overlap by about one width (the
    /// usual umbrella-sampling choice: the restrained distributions must overlap for MBAR to
    /// join them; Shirts & Chodera 2008, sec. II.C). With kT = 1, width = 1/√κ ≈ Δ.
    pub fn kappa(&self, temperature: f64) -> f64 {
        self.kappa
            .unwrap_or_else(|| temperature / self.spacing().powi(2))
    }

    /// Whether a pilot stage flattens the windows (default true).
    pub fn flatten(&self) -> bool {
        self.flatten.unwrap_or(true)
    }

    /// The pilot windows: the table's count, or [`PILOT_DENSITY`]·(K − 1) + 1, so that the
    /// pilot's centres include the umbrella windows' and the mean force is sampled every
    /// Δ/[`PILOT_DENSITY`]. Umbrella integration interpolates F′ between the pilot windows with
    /// Gaussian weights of their widths, so structure of F narrower than the pilot's spacing is
    /// smoothed away, and the umbrella windows then meet it unflattened (measured: at one erf
    /// neuron with ridge 0.1, 16 pilot windows left wells of many kT near s = 0 that trapped the
    /// umbrella windows' chains; 61 did not).
    pub fn pilot_windows(&self) -> usize {
        self.pilot_windows
            .unwrap_or(PILOT_DENSITY * (self.windows.max(2) - 1) + 1)
    }

    /// The pilot windows' stiffness: the table's, or [`PILOT_STIFFNESS`]·kT/Δ_p² for their
    /// spacing Δ_p, a width √(kT/κ) of half the spacing. A pilot window must stay on one side of
    /// a barrier rather than slide into a basin, so its κ must exceed the steepest downward
    /// curvature −F″ it sits on (Kästner & Thiel, J. Chem. Phys. 123, 144104 (2005), sec. II:
    /// each window is then close to a Gaussian, which umbrella integration assumes); with 61
    /// windows over [−1, 1] that is κ = 3600 kT, above the −F″ ≈ 2000 kT of a 300 kT barrier
    /// over half the range.
    pub fn pilot_kappa(&self, temperature: f64) -> f64 {
        self.pilot_kappa.unwrap_or_else(|| {
            let (lo, hi) = self.range();
            let spacing = (hi - lo) / (self.pilot_windows().max(2) - 1) as f64;
            PILOT_STIFFNESS * temperature / spacing.powi(2)
        })
    }

    /// Bins of the profile.
    pub fn bins(&self) -> usize {
        self.bins.unwrap_or(DEFAULT_BINS)
    }

    /// Checks every field against the model's weight rows `rows` (module docs). Each refusal
    /// is one sentence naming the field, the value and what is allowed.
    pub fn validate(&self, rows: &WeightRows) -> Result<()> {
        self.validate_fields(rows)?;
        self.validate_windows()
    }

    /// The fields that depend on the order parameter: neuron and coordinates.
    fn validate_fields(&self, rows: &WeightRows) -> Result<()> {
        let name = self.order_parameter.as_str();
        let wants_neuron = matches!(
            self.order_parameter,
            OrderParameterName::NeuronOverlap
                | OrderParameterName::NeuronProjection
                | OrderParameterName::LabelCorrelation
        );
        let wants_coordinates = self.order_parameter == OrderParameterName::ProjectedFraction;
        match (self.neuron, wants_neuron) {
            (Some(i), false) => {
                return Err(Error::invalid(format!(
                    "free_energy.neuron = {i} does not apply to order_parameter = \"{name}\"; \
                     remove it (only \"neuron_overlap\", \"neuron_projection\" and \"label_correlation\" read it)"
                )))
            }
            (None, true) => {
                return Err(Error::invalid(format!(
                    "free_energy.neuron is missing; order_parameter = \"{name}\" needs \
                     the neuron to follow ({})",
                    rows.count_phrase()
                )))
            }
            (Some(i), true) if i >= rows.rows => {
                return Err(Error::invalid(format!(
                    "free_energy.neuron = {i} is out of range; {}",
                    rows.count_phrase()
                )))
            }
            _ => {}
        }
        match (&self.coordinates, wants_coordinates) {
            (Some(c), false) => Err(Error::invalid(format!(
                "free_energy.coordinates = {c:?} does not apply to order_parameter = \"{name}\"; \
                 remove it (only \"projected_fraction\" reads it)"
            ))),
            (None, true) => Err(Error::invalid(format!(
                "free_energy.coordinates is missing; order_parameter = \"projected_fraction\" \
                 needs the relevant input coordinates, e.g. [0, 1] ({})",
                rows.coordinate_phrase()
            ))),
            (Some(c), true) => check_coordinates("free_energy.coordinates", c, rows),
            (None, false) => Ok(()),
        }
    }

    /// range, windows, kappa and bins.
    fn validate_windows(&self) -> Result<()> {
        let (min, max) = self.order_parameter.range();
        let name = self.order_parameter.as_str();
        if self.range.is_none() && !(min.is_finite() && max.is_finite()) {
            return Err(Error::invalid(format!(
                "free_energy.range is missing; order_parameter = \"{name}\" is unbounded, so \
                 the windows need a range, e.g. [-1.5, 1.5]"
            )));
        }
        if let Some([lo, hi]) = self.range {
            if !(lo.is_finite() && hi.is_finite() && min <= lo && lo < hi && hi <= max) {
                return Err(Error::invalid(format!(
                    "free_energy.range = [{lo}, {hi}] is not allowed; {name} lies in \
                     [{min}, {max}], so the range must satisfy {min} ≤ lo < hi ≤ {max}"
                )));
            }
        }
        if !(2..=MAX_WINDOWS).contains(&self.windows) {
            return Err(Error::invalid(format!(
                "free_energy.windows = {} is not allowed; it must be between 2 and {MAX_WINDOWS}",
                self.windows
            )));
        }
        if let Some(k) = self.kappa {
            if !(k.is_finite() && k > 0.0) {
                return Err(Error::invalid(format!(
                    "free_energy.kappa = {k} is not allowed; it must be a finite number > 0 \
                     (or left out for kT/spacing²)"
                )));
            }
        }
        if let Some(n) = self.pilot_windows {
            if !(2..=MAX_WINDOWS).contains(&n) {
                return Err(Error::invalid(format!(
                    "free_energy.pilot_windows = {n} is not allowed; it must be between 2 and {MAX_WINDOWS}"
                )));
            }
            if !self.flatten() {
                return Err(Error::invalid(format!(
                    "free_energy.pilot_windows = {n} does not apply with flatten = false; remove \
                     it or set flatten = true"
                )));
            }
        }
        if let Some(k) = self.pilot_kappa {
            if !(k.is_finite() && k > 0.0) {
                return Err(Error::invalid(format!(
                    "free_energy.pilot_kappa = {k} is not allowed; it must be a finite number > 0 \
                     (or left out for {PILOT_STIFFNESS}·kT/pilot spacing²)"
                )));
            }
            if !self.flatten() {
                return Err(Error::invalid(format!(
                    "free_energy.pilot_kappa = {k} does not apply with flatten = false; remove \
                     it or set flatten = true"
                )));
            }
        }
        if let Some(b) = self.bins {
            if !(2..=MAX_BINS).contains(&b) {
                return Err(Error::invalid(format!(
                    "free_energy.bins = {b} is not allowed; it must be between 2 and {MAX_BINS}"
                )));
            }
        }
        Ok(())
    }

    /// The order parameter on `rows` with the teacher direction `teacher` (w\* of the data set;
    /// the CNN's teacher filter), after [`FreeEnergyConfig::validate`].
    pub fn order_parameter(&self, rows: WeightRows, teacher: &[f64]) -> Result<OrderParameter> {
        self.order_parameter_on(rows, teacher, None)
    }

    /// [`FreeEnergyConfig::order_parameter`] with the FCN's training set (inputs P × d
    /// row-major, labels, the hidden activation), which `label_correlation` reads.
    pub fn order_parameter_on(
        &self,
        rows: WeightRows,
        teacher: &[f64],
        training: Option<(&[f64], &[f64], Activation)>,
    ) -> Result<OrderParameter> {
        self.validate(&rows)?;
        let kind = match self.order_parameter {
            OrderParameterName::NeuronOverlap => OrderKind::NeuronOverlap {
                neuron: self.neuron.unwrap_or_default(),
                direction: teacher.to_vec(),
            },
            OrderParameterName::NeuronProjection => OrderKind::NeuronProjection {
                neuron: self.neuron.unwrap_or_default(),
                direction: teacher.to_vec(),
            },
            OrderParameterName::AlignedFraction => OrderKind::AlignedFraction {
                direction: teacher.to_vec(),
            },
            OrderParameterName::ProjectedFraction => OrderKind::ProjectedFraction {
                coordinates: self.coordinates.clone().unwrap_or_default(),
            },
            OrderParameterName::LabelCorrelation => {
                let Some((inputs, labels, activation)) = training else {
                    return Err(Error::invalid(
                        "free_energy.order_parameter = \"label_correlation\" reads a fully connected network's first layer on its training set; use model.kind = \"fcn\" or another order parameter".to_string(),
                    ));
                };
                OrderKind::LabelCorrelation {
                    neuron: self.neuron.unwrap_or_default(),
                    activation,
                    inputs: inputs.to_vec(),
                    labels: labels.to_vec(),
                }
            }
        };
        OrderParameter::new(kind, rows)
    }

    /// The K windows spread evenly over the range (both ends included) with stiffness
    /// [`FreeEnergyConfig::kappa`] at temperature kT, after [`FreeEnergyConfig::validate`].
    pub fn umbrella(&self, rows: &WeightRows, temperature: f64) -> Result<Umbrella> {
        self.validate(rows)?;
        let (lo, hi) = self.range();
        Ok(Umbrella::spread(
            lo,
            hi,
            self.windows,
            self.kappa(temperature),
        )?)
    }

    /// The profile's bins over the range, after [`FreeEnergyConfig::validate`].
    pub fn profile_bins(&self, rows: &WeightRows) -> Result<Bins> {
        self.validate(rows)?;
        let (lo, hi) = self.range();
        Ok(Bins::new(lo, hi, self.bins())?)
    }
}

/// The weight rows the order parameters of a validated experiment read: the FCN's first layer
/// (N₁ × d) or the CNN's filters (N × S). Attention models have no such rows (module docs of
/// [`super::order`]) and are refused.
pub fn weight_rows(cfg: &ExperimentConfig) -> Result<WeightRows> {
    let d = cfg.data.d;
    let first = cfg.model.widths.first().copied().unwrap_or(0);
    match cfg.model.kind() {
        ModelKind::Fcn => Ok(WeightRows::fcn_first_layer(first, d)),
        ModelKind::Cnn => Ok(WeightRows::cnn_filters(
            first,
            cfg.model.patch().unwrap_or(d),
        )),
        ModelKind::Attention => Err(Error::invalid(
            "[free_energy] is not available for model.kind = \"attention\"; its order \
             parameters are defined for \"fcn\" and \"cnn\" only",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(table: &str) -> FreeEnergyConfig {
        FreeEnergyConfig::from_toml(&format!("[free_energy]\n{table}"), "exp.toml")
            .unwrap()
            .expect("the table is there")
    }

    fn refusal(table: &str, rows: &WeightRows) -> String {
        let err = parse(table).validate(rows).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        err.to_string()
    }

    const FCN: WeightRows = WeightRows {
        group: 0,
        offset: 0,
        rows: 4,
        row_len: 8,
        units: crate::sim::order::RowUnits::Neurons,
    };

    #[test]
    fn the_example_table_parses_and_builds_its_windows() {
        let text = r#"
            [model]
            kind = "fcn"
            [free_energy]
            order_parameter = "neuron_overlap"
            neuron = 0
            range = [-1.0, 1.0]
            windows = 16
            kappa = 200.0
            bins = 40
        "#;
        let cfg = FreeEnergyConfig::from_toml(text, "exp.toml")
            .unwrap()
            .unwrap();
        cfg.validate(&FCN).unwrap();
        let u = cfg.umbrella(&FCN, 1.0).unwrap();
        assert_eq!(u.windows(), 16);
        assert_eq!(u.kappa, 200.0);
        assert_eq!((u.centres[0], u.centres[15]), (-1.0, 1.0));
        let bins = cfg.profile_bins(&FCN).unwrap();
        assert_eq!((bins.lo, bins.hi, bins.count), (-1.0, 1.0, 40));
        // A file without the table.
        assert_eq!(
            FreeEnergyConfig::from_toml("[model]\nkind = 1", "e").unwrap(),
            None
        );
    }

    #[test]
    fn defaults_follow_the_documented_rules() {
        let cfg = parse("order_parameter = \"aligned_fraction\"\nwindows = 11");
        assert_eq!(cfg.range(), (0.0, 1.0));
        assert!((cfg.spacing() - 0.1).abs() < 1e-15);
        // Window width √(kT/κ) equals the spacing.
        assert!((cfg.kappa(1.0) - 100.0).abs() < 1e-9);
        assert!((cfg.kappa(2.0) - 200.0).abs() < 1e-9);
        assert!(((2.0 / cfg.kappa(2.0)).sqrt() - cfg.spacing()).abs() < 1e-12);
        assert_eq!(cfg.bins(), DEFAULT_BINS);
        let cfg = parse("order_parameter = \"neuron_overlap\"\nneuron = 1\nwindows = 5");
        assert_eq!(cfg.range(), (-1.0, 1.0));
        assert!((cfg.kappa(1.0) - 4.0).abs() < 1e-12);
        // Integer range entries are read as numbers.
        let cfg =
            parse("order_parameter = \"neuron_overlap\"\nneuron = 1\nwindows = 5\nrange = [-1, 0]");
        assert_eq!(cfg.range(), (-1.0, 0.0));
    }

    #[test]
    fn the_order_parameter_is_built_from_the_table() {
        let teacher = [0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let cfg = parse("order_parameter = \"neuron_overlap\"\nneuron = 3\nwindows = 4");
        let op = cfg.order_parameter(FCN, &teacher).unwrap();
        let mut theta = vec![0.0; 32 + 5];
        theta[3 * 8 + 1] = -0.5;
        assert_eq!(op.value(&theta), -1.0);
        let cfg = parse("order_parameter = \"projected_fraction\"\ncoordinates = [1]\nwindows = 4");
        let op = cfg.order_parameter(FCN, &teacher).unwrap();
        theta[0] = 0.5;
        assert!((op.value(&theta) - 0.5).abs() < 1e-15);
        assert_eq!(op.range(), (0.0, 1.0));
    }

    #[test]
    fn every_bad_field_is_refused_in_one_sentence() {
        let cases: &[(&str, &str)] = &[
            (
                "order_parameter = \"neuron_overlap\"\nneuron = 7\nwindows = 4",
                "free_energy.neuron = 7 is out of range; the first layer has 4 neurons (0 to 3)",
            ),
            (
                "order_parameter = \"neuron_overlap\"\nwindows = 4",
                "free_energy.neuron is missing",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nneuron = 0\nwindows = 4",
                "free_energy.neuron = 0 does not apply to order_parameter = \"aligned_fraction\"",
            ),
            (
                "order_parameter = \"neuron_overlap\"\nneuron = 0\ncoordinates = [0]\nwindows = 4",
                "free_energy.coordinates = [0] does not apply to order_parameter = \"neuron_overlap\"",
            ),
            (
                "order_parameter = \"projected_fraction\"\nwindows = 4",
                "free_energy.coordinates is missing",
            ),
            (
                "order_parameter = \"projected_fraction\"\ncoordinates = [0, 8]\nwindows = 4",
                "free_energy.coordinates[1] = 8 is out of range; the inputs have d = 8 coordinates (0 to 7)",
            ),
            (
                "order_parameter = \"projected_fraction\"\ncoordinates = [2, 2]\nwindows = 4",
                "free_energy.coordinates[1] = 2 repeats an earlier entry",
            ),
            (
                "order_parameter = \"projected_fraction\"\ncoordinates = []\nwindows = 4",
                "free_energy.coordinates = [] is empty",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nrange = [-0.5, 1.0]\nwindows = 4",
                "free_energy.range = [-0.5, 1] is not allowed; aligned_fraction lies in [0, 1]",
            ),
            (
                "order_parameter = \"neuron_overlap\"\nneuron = 0\nrange = [0.5, 0.5]\nwindows = 4",
                "free_energy.range = [0.5, 0.5] is not allowed",
            ),
            (
                "order_parameter = \"neuron_overlap\"\nneuron = 0\nrange = [-1.0, 1.5]\nwindows = 4",
                "free_energy.range = [-1, 1.5] is not allowed; neuron_overlap lies in [-1, 1]",
            ),
            (
                "order_parameter = \"neuron_overlap\"\nneuron = 0\nrange = [-1.0, nan]\nwindows = 4",
                "free_energy.range = [-1, NaN] is not allowed",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nwindows = 1",
                "free_energy.windows = 1 is not allowed; it must be between 2 and 4096",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nwindows = 100000",
                "free_energy.windows = 100000 is not allowed",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nwindows = 4\nkappa = 0.0",
                "free_energy.kappa = 0 is not allowed; it must be a finite number > 0",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nwindows = 4\nkappa = inf",
                "free_energy.kappa = inf is not allowed",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nwindows = 4\nkappa = -3.0",
                "free_energy.kappa = -3 is not allowed",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nwindows = 4\nbins = 1",
                "free_energy.bins = 1 is not allowed; it must be between 2 and 100000",
            ),
        ];
        for (table, want) in cases {
            let got = refusal(table, &FCN);
            assert!(
                got.starts_with(want),
                "{table}:\n got  {got}\n want {want}…"
            );
            assert!(!got.contains('\n'), "{got}");
        }
        // The label correlation needs the FCN's training set, which a bare table does not have.
        let got = parse("order_parameter = \"label_correlation\"\nneuron = 0\nwindows = 4")
            .order_parameter(FCN, &[1.0; 8])
            .unwrap_err()
            .to_string();
        assert!(got.contains("model.kind = \"fcn\""), "{got}");
        // The CNN's rows are named as filters.
        let cnn = WeightRows::cnn_filters(2, 3);
        let got = refusal(
            "order_parameter = \"neuron_overlap\"\nneuron = 2\nwindows = 4",
            &cnn,
        );
        assert_eq!(
            got,
            "free_energy.neuron = 2 is out of range; the CNN has 2 filters (0 to 1)"
        );
        let got = refusal(
            "order_parameter = \"projected_fraction\"\ncoordinates = [3]\nwindows = 4",
            &cnn,
        );
        assert!(
            got.contains("the filters have S = 3 coordinates (0 to 2)"),
            "{got}"
        );
        // The builders validate too.
        let cfg = parse("order_parameter = \"aligned_fraction\"\nwindows = 1");
        assert!(cfg.umbrella(&FCN, 1.0).is_err());
        assert!(cfg.profile_bins(&FCN).is_err());
        assert!(cfg.order_parameter(FCN, &[1.0; 8]).is_err());
    }

    #[test]
    fn the_rows_come_from_the_experiment() {
        let text = r#"
            [model]
            kind = "fcn"
            widths = [6, 3]
            [data]
            d = 20
            p = 10
            n_test = 10
            [target]
            hermite = 1
            [sampler]
            kappa = 1.0
            step = 1e-3
            steps = 10
            burn_in = 0
            thin = 1
            chains = 1
            seed = 1
        "#;
        let mut cfg = ExperimentConfig::from_toml(text, "exp.toml").unwrap();
        assert_eq!(
            weight_rows(&cfg).unwrap(),
            WeightRows::fcn_first_layer(6, 20)
        );
        cfg.model.architecture = crate::sim::config::NetworkVariant::Cnn { patch: 5 };
        cfg.model.widths = vec![4];
        assert_eq!(weight_rows(&cfg).unwrap(), WeightRows::cnn_filters(4, 5));
        cfg.model.architecture = crate::sim::config::NetworkVariant::Attention { heads: 1 };
        let err = weight_rows(&cfg).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("model.kind = \"attention\""));
    }

    #[test]
    fn parse_errors_are_one_line_with_the_place() {
        let cases = [
            ("order_parameter = \"angle\"\nwindows = 4", "line 2"),
            (
                "order_parameter = \"aligned_fraction\"\nwindows = 4\nwidth = 3",
                "width",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nwindows = -4",
                "line 3",
            ),
            (
                "order_parameter = \"aligned_fraction\"\nwindows = 4\nrange = [0.0]",
                "line 4",
            ),
            ("windows = 4", "order_parameter"),
        ];
        for (table, want) in cases {
            let err = FreeEnergyConfig::from_toml(&format!("[free_energy]\n{table}"), "exp.toml")
                .unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
            let msg = err.to_string();
            assert!(msg.starts_with("exp.toml") && msg.contains(want), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }

    /// A value for one of the table's keys: right or wrong type, in or out of range.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            (-5i64..100_000).prop_map(|v| v.to_string()),
            prop_oneof![
                Just(f64::NAN),
                Just(f64::INFINITY),
                -1e3f64..1e3,
                Just(0.0),
                Just(-1.0),
                Just(1.0)
            ]
            .prop_map(|v| format!("{v:?}").replace("NaN", "nan")),
            prop::collection::vec(-3i64..12, 0..4).prop_map(|v| format!("{v:?}")),
            prop::collection::vec(-2.0f64..2.0, 0..4).prop_map(|v| format!("{v:?}")),
            prop_oneof![
                Just("neuron_overlap"),
                Just("aligned_fraction"),
                Just("projected_fraction"),
                Just("layer2_overlap"),
            ]
            .prop_map(|s| format!("\"{s}\"")),
            "[ -~]{0,12}",
        ]
    }

    /// The table's two required keys, mostly well typed (so that validation is reached), and
    /// any of the others (distinct keys, so that the text is not refused for duplicates alone).
    fn table() -> impl Strategy<Value = Vec<(&'static str, String)>> {
        let name = prop_oneof![
            3 => prop_oneof![
                Just("neuron_overlap"),
                Just("aligned_fraction"),
                Just("projected_fraction"),
            ]
            .prop_map(|s| format!("\"{s}\"")),
            1 => value(),
        ];
        let windows = prop_oneof![3 => (0usize..40).prop_map(|w| w.to_string()), 1 => value()];
        let others = prop::collection::btree_map(
            prop_oneof![
                Just("neuron"),
                Just("coordinates"),
                Just("range"),
                Just("kappa"),
                Just("bins"),
                Just("spacing"),
            ],
            value(),
            0..5,
        );
        (name, windows, others).prop_map(|(n, w, others)| {
            let mut entries = vec![("order_parameter", n), ("windows", w)];
            entries.extend(others);
            entries
        })
    }

    proptest! {
        #[test]
        fn arbitrary_tables_give_ok_or_one_sentence(
            entries in table(),
            neurons in 1usize..6,
            d in 1usize..6,
        ) {
            let mut text = String::from("[free_energy]\n");
            for (k, v) in &entries {
                text += &format!("{k} = {v}\n");
            }
            let rows = WeightRows::fcn_first_layer(neurons, d);
            let outcome = FreeEnergyConfig::from_toml(&text, "exp.toml").and_then(|cfg| match cfg {
                Some(cfg) => {
                    let teacher = vec![1.0; d];
                    cfg.order_parameter(rows, &teacher)?;
                    cfg.profile_bins(&rows)?;
                    cfg.umbrella(&rows, 1.0).map(|_| ())
                }
                None => Ok(()),
            });
            if let Err(e) = outcome {
                let msg = e.to_string();
                prop_assert!(!msg.is_empty() && !msg.contains('\n'), "{}", msg);
                prop_assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
            }
        }
    }
}
