//! Architecture files, catalog files and presets (spec 01 §3, §6).
//!
//! An architecture is data: either an FCN described by activation, widths, parametrization
//! and target (the rule engine derives its patterns), or a *catalog* entry whose patterns'
//! energies are written in a TOML file with their derivation and citation. Built-in catalog
//! entries and user files are treated alike.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::activation::parse_activation;
use super::fcn::{enumerate_patterns, FcnSpec, Parametrization, PatternSpec, TermChoices};
use super::predict::{compare, Prediction};
use crate::error::{toml_error, Error, Result};
use crate::scaling::energy::is_symbol;
use crate::scaling::{parse_constraints, parse_posynomial, Regime};

/// `[network]` of an architecture file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSection {
    /// `fcn` (rule engine) or `catalog` (energies from a data file).
    pub kind: String,
    /// FCN activation: erf | relu | tanh | linear | poly.
    pub activation: Option<String>,
    /// FCN: one scale symbol per hidden layer, e.g. ["N1", "N2"].
    pub widths: Option<Vec<String>>,
    /// FCN readout scaling: standard | mean-field (default standard).
    pub parametrization: Option<String>,
    /// Catalog: a built-in entry name (see `flscale presets`) or a path to a catalog TOML file
    /// (relative paths are resolved against the architecture file's folder).
    pub catalog: Option<String>,
}

/// `[target]` of an architecture file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSection {
    /// Degree m of y = He_m(w\*·x).
    pub hermite: i64,
}

/// A whole architecture file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchitectureFile {
    /// Optional one-line description.
    pub title: Option<String>,
    /// The network.
    pub network: NetworkSection,
    /// The target (FCN only).
    pub target: Option<TargetSection>,
    /// Every scale as a power of d, e.g. N1 = "d", N2 = "d^2".
    #[serde(default)]
    pub regime: BTreeMap<String, String>,
}

/// One pattern of a catalog file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogPattern {
    /// Pattern name (GP, GFL, Sp, ...).
    pub name: String,
    /// What the pattern is, in words.
    pub description: Option<String>,
    /// Energy parts: label → expression (a posynomial in scales and free parameters).
    pub terms: BTreeMap<String, String>,
    /// Free parameters the pattern chooses.
    #[serde(default)]
    pub free: Vec<String>,
    /// Constraints such as "1 <= M <= N".
    #[serde(default)]
    pub constraints: Vec<String>,
}

/// `[catalog]` header of a catalog file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogHeader {
    /// Short name.
    pub name: String,
    /// Title.
    pub title: String,
    /// Paper section the energies come from.
    pub source: String,
    /// Which target the entry assumes and why.
    pub target: String,
    /// The derivation of every energy, in words.
    pub derivation: String,
    /// Scale symbols the energies use (besides d).
    pub scales: Vec<String>,
}

/// A catalog file: energies of an architecture that the FCN rules do not cover.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogFile {
    /// Header.
    pub catalog: CatalogHeader,
    /// Default regime.
    #[serde(default)]
    pub regime: BTreeMap<String, String>,
    /// Patterns.
    #[serde(rename = "pattern")]
    pub patterns: Vec<CatalogPattern>,
}

/// Built-in catalog entries: (name, TOML text).
pub const BUILTIN_CATALOG: &[(&str, &str)] = &[
    (
        "cnn-patches",
        include_str!("../../../../catalog/cnn-patches.toml"),
    ),
    (
        "attention-softmax",
        include_str!("../../../../catalog/attention-softmax.toml"),
    ),
    (
        "relu-parity",
        include_str!("../../../../catalog/relu-parity.toml"),
    ),
];

/// Built-in architecture presets: (name, one-line summary, TOML text).
pub const PRESETS: &[(&str, &str, &str)] = &[
    (
        "fcn2-erf-he1",
        "two-layer erf FCN, He1 target, N = d (App. E.1.1, m = 1)",
        include_str!("../../../../presets/fcn2-erf-he1.toml"),
    ),
    (
        "fcn2-erf-he3",
        "two-layer erf FCN, He3 target, N = d (App. E.1.1, Fig. 2)",
        include_str!("../../../../presets/fcn2-erf-he3.toml"),
    ),
    (
        "fcn2-erf-he3-meanfield",
        "two-layer erf FCN, He3, mean-field readout, N = d (App. E.1.1)",
        include_str!("../../../../presets/fcn2-erf-he3-meanfield.toml"),
    ),
    (
        "fcn3-erf-he3",
        "three-layer erf FCN, He3, N1 = N2 = d (Sec. 6.1, Table 1)",
        include_str!("../../../../presets/fcn3-erf-he3.toml"),
    ),
    (
        "cnn-patches",
        "CNN with non-overlapping patches, N = Nw = S = sqrt(d) (App. E.1.2)",
        include_str!("../../../../presets/cnn-patches.toml"),
    ),
    (
        "attention-softmax",
        "softmax attention layer, L and H fixed powers of d (App. E.3)",
        include_str!("../../../../presets/attention-softmax.toml"),
    ),
    (
        "fcn2-relu-parity",
        "two-layer ReLU network on a sign/parity task, N = d (App. E.2)",
        include_str!("../../../../presets/fcn2-relu-parity.toml"),
    ),
];

/// The TOML text of a preset.
pub fn preset_text(name: &str) -> Result<&'static str> {
    PRESETS
        .iter()
        .find(|p| p.0 == name)
        .map(|p| p.2)
        .ok_or_else(|| {
            Error::invalid(format!(
                "preset \"{name}\" does not exist; available: {}",
                PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
            ))
        })
}

/// A parsed, validated architecture ready to predict.
#[derive(Debug, Clone)]
pub struct Architecture {
    /// Name shown in reports: the file's `title`, or a description of what was parsed.
    pub title: String,
    /// Where it came from, for messages: `preset NAME`, the file's path, or `architecture`.
    pub source: String,
    /// What was parsed, in words (network, activation, widths, target, scaling), whatever the
    /// `title` says: an edited copy of a preset keeps the preset's title.
    pub parsed: String,
    /// The FCN the rule engine enumerated (None for catalog entries).
    pub fcn: Option<FcnSpec>,
    /// Candidate patterns.
    pub patterns: Vec<PatternSpec>,
    /// Default regime from the file.
    pub regime: Regime,
    /// Descriptions of catalog patterns, by name.
    pub descriptions: BTreeMap<String, String>,
    /// Catalog derivation / citation text (empty for FCNs).
    pub notes: Vec<String>,
}

impl Architecture {
    /// Loads a built-in preset.
    pub fn from_preset(name: &str) -> Result<Self> {
        Self::from_toml(preset_text(name)?, &format!("preset {name}"), None)
    }

    /// Loads an architecture file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?;
        Self::from_toml(&text, &path.display().to_string(), path.parent())
    }

    /// Parses architecture TOML; `source` names it in errors; `base_dir` resolves catalog paths.
    pub fn from_toml(text: &str, source: &str, base_dir: Option<&Path>) -> Result<Self> {
        let file: ArchitectureFile =
            toml::from_str(text).map_err(|e| toml_error(source, text, &e))?;
        let mut arch = match file.network.kind.as_str() {
            "fcn" => Self::fcn_from_file(&file, source)?,
            "catalog" => Self::catalog_from_file(&file, source, base_dir)?,
            other => {
                return Err(Error::invalid(format!(
                    "{source}: network.kind = \"{other}\" is not allowed; use fcn or catalog"
                )))
            }
        };
        for (k, v) in &file.regime {
            arch.regime
                .set_str(k, v)
                .map_err(|e| e.context(format!("{source}: regime.{k}")))?;
        }
        Ok(arch)
    }

    /// The architecture of a `kind = "fcn"` file: its fields checked, its patterns enumerated
    /// by the rule engine; the regime is d alone (the file's `[regime]` is applied after).
    fn fcn_from_file(file: &ArchitectureFile, source: &str) -> Result<Self> {
        let net = &file.network;
        if net.catalog.is_some() {
            return Err(Error::invalid(format!(
                "{source}: network.catalog is only used with kind = \"catalog\""
            )));
        }
        let activation = parse_activation(net.activation.as_deref().ok_or_else(|| {
            Error::invalid(format!("{source}: network.activation is missing; allowed are erf, relu, tanh, linear, poly"))
        })?)
        .map_err(|e| e.context(format!("{source}: network.activation")))?;
        let widths = net.widths.clone().ok_or_else(|| {
            Error::invalid(format!("{source}: network.widths is missing; give one scale symbol per hidden layer, e.g. [\"N1\", \"N2\"]"))
        })?;
        for w in &widths {
            if !is_symbol(w) || w == "d" {
                return Err(Error::invalid(format!(
                    "{source}: network.widths entry \"{w}\" is not allowed; use a scale name such as N1 (letters/digits, not d)"
                )));
            }
        }
        let parametrization = match net.parametrization.as_deref().unwrap_or("standard") {
            "standard" => Parametrization::Standard,
            "mean-field" | "meanfield" | "mean_field" => Parametrization::MeanField,
            other => {
                return Err(Error::invalid(format!(
                    "{source}: network.parametrization = \"{other}\" is not allowed; use standard or mean-field"
                )))
            }
        };
        let target = file.target.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "{source}: [target] is missing; write e.g. [target] hermite = 3"
            ))
        })?;
        if !(1..=12).contains(&target.hermite) {
            return Err(Error::invalid(format!(
                "{source}: target.hermite = {} is not allowed; it must be between 1 and 12",
                target.hermite
            )));
        }
        let spec = FcnSpec {
            activation,
            widths: widths.clone(),
            parametrization,
            target_degree: target.hermite as usize,
        };
        let patterns = enumerate_patterns(&spec).map_err(|e| e.context(source))?;
        let parsed = format!(
            "{}-layer {} FCN (widths {}), target He{}, {} scaling",
            widths.len() + 1,
            activation.name(),
            widths.join(", "),
            target.hermite,
            if parametrization == Parametrization::Standard {
                "standard"
            } else {
                "mean-field"
            }
        );
        Ok(Architecture {
            title: file.title.clone().unwrap_or_else(|| parsed.clone()),
            source: source.to_string(),
            parsed,
            fcn: Some(spec),
            patterns,
            regime: Regime::new(),
            descriptions: BTreeMap::new(),
            notes: Vec::new(),
        })
    }

    /// The architecture of a `kind = "catalog"` file: the built-in entry or catalog file it
    /// names (relative paths against `base_dir`), with the file's title if it has one.
    fn catalog_from_file(
        file: &ArchitectureFile,
        source: &str,
        base_dir: Option<&Path>,
    ) -> Result<Self> {
        let net = &file.network;
        for (field, present) in [
            ("network.activation", net.activation.is_some()),
            ("network.widths", net.widths.is_some()),
            ("network.parametrization", net.parametrization.is_some()),
            ("[target]", file.target.is_some()),
        ] {
            if present {
                return Err(Error::invalid(format!(
                    "{source}: {field} is only used with kind = \"fcn\"; a catalog file states its own energies and target"
                )));
            }
        }
        let name = net.catalog.as_deref().ok_or_else(|| {
            Error::invalid(format!(
                "{source}: network.catalog is missing; give a built-in entry ({}) or a file path",
                builtin_names()
            ))
        })?;
        let (cat_text, cat_source) = match BUILTIN_CATALOG.iter().find(|c| c.0 == name) {
            Some(c) => (c.1.to_string(), format!("catalog {name}")),
            None => {
                let p = match base_dir {
                    Some(b) if Path::new(name).is_relative() => b.join(name),
                    _ => Path::new(name).to_path_buf(),
                };
                let t = std::fs::read_to_string(&p).map_err(|e| {
                    Error::invalid(format!(
                        "{source}: network.catalog = \"{name}\" is neither a built-in entry ({}) nor a readable file ({e})",
                        builtin_names()
                    ))
                })?;
                (t, p.display().to_string())
            }
        };
        let arch = Architecture::from_catalog_toml(&cat_text, &cat_source)?;
        Ok(Architecture {
            title: file.title.clone().unwrap_or(arch.title),
            source: source.to_string(),
            ..arch
        })
    }

    /// Parses a catalog file into an architecture.
    pub fn from_catalog_toml(text: &str, source: &str) -> Result<Self> {
        let file: CatalogFile = toml::from_str(text).map_err(|e| toml_error(source, text, &e))?;
        if file.patterns.is_empty() {
            return Err(Error::invalid(format!(
                "{source}: the catalog has no [[pattern]] entries"
            )));
        }
        let mut regime = Regime::new();
        for (k, v) in &file.regime {
            regime
                .set_str(k, v)
                .map_err(|e| e.context(format!("{source}: regime.{k}")))?;
        }
        let mut patterns = Vec::new();
        let mut descriptions = BTreeMap::new();
        for (i, p) in file.patterns.iter().enumerate() {
            let here = format!("{source}: pattern {} (\"{}\")", i + 1, p.name);
            if p.terms.is_empty() {
                return Err(Error::invalid(format!(
                    "{here}: terms is empty; give at least one part, e.g. a_y = \"d^3\""
                )));
            }
            for f in &p.free {
                if !is_symbol(f) || f == "d" || file.catalog.scales.contains(f) {
                    return Err(Error::invalid(format!("{here}: free parameter \"{f}\" must be a new symbol name (not d or a scale)")));
                }
            }
            let mut terms = Vec::new();
            for (label, expr) in &p.terms {
                let monomials = parse_posynomial(expr)
                    .map_err(|e| e.context(format!("{here}: terms.{label}")))?;
                let many = monomials.len() > 1;
                for (j, m) in monomials.into_iter().enumerate() {
                    let l = if many {
                        format!("{label}.{}", j + 1)
                    } else {
                        label.clone()
                    };
                    terms.push(TermChoices {
                        label: l,
                        options: vec![(m, format!("{} (catalog)", file.catalog.source), 0)],
                    });
                }
            }
            let mut constraints = Vec::new();
            for c in &p.constraints {
                constraints.extend(
                    parse_constraints(c).map_err(|e| e.context(format!("{here}: constraints")))?,
                );
            }
            if let Some(dsc) = &p.description {
                descriptions.insert(p.name.clone(), dsc.clone());
            }
            patterns.push(PatternSpec {
                name: p.name.clone(),
                layers: Vec::new(),
                terms,
                free: p.free.clone(),
                constraints,
                infinite_reason: None,
                required_layers: 0,
            });
        }
        let c = &file.catalog;
        Ok(Architecture {
            title: format!("{} ({})", c.title, c.source),
            source: source.to_string(),
            parsed: format!(
                "{source}: {} patterns with the energies of {}",
                patterns.len(),
                c.source
            ),
            fcn: None,
            patterns,
            regime,
            descriptions,
            notes: vec![
                format!("Target: {}", c.target.trim()),
                format!("Derivation: {}", c.derivation.trim()),
            ],
        })
    }

    /// Predicts in the file's regime, overridden by `at` (the `--at N1=d^2,...` syntax).
    pub fn predict(&self, at: Option<&str>) -> Result<Prediction> {
        let mut regime = self.regime.clone();
        if let Some(a) = at {
            regime.apply_assignments(a, "at")?;
        }
        self.predict_in(&regime)
    }

    /// Predicts in a given regime.
    pub fn predict_in(&self, regime: &Regime) -> Result<Prediction> {
        let mut p = compare(&self.title, &self.patterns, regime)?;
        for r in &mut p.patterns {
            r.description = self.descriptions.get(&r.name).cloned();
        }
        p.source = self.source.clone();
        p.parsed = self.parsed.clone();
        if let Some(spec) = &self.fcn {
            if let Some((table, names)) = paper_patterns(spec) {
                p.paper_table = Some(table.to_string());
                p.paper_patterns = names.iter().map(|n| n.to_string()).collect();
            }
            if p.p_star_exponent.is_none() {
                p.no_winner_reason = Some(no_winner_reason(spec)?);
            }
        }
        Ok(p)
    }
}

/// The patterns the paper lists for this network and target, and where: Table 1 (Sec. 6.1)
/// for the three-layer erf network on He3 in standard scaling, App. E.1.1 for two-layer erf
/// networks (GP, GFL and M-specialisation; standard or mean-field readout). Decided by what
/// was parsed, not by a preset's name, so that an edited copy is marked only while it is
/// still the paper's setup.
pub fn paper_patterns(spec: &FcnSpec) -> Option<(&'static str, &'static [&'static str])> {
    use crate::activation::Activation;
    if spec.activation != Activation::Erf {
        return None;
    }
    match (spec.widths.len(), spec.parametrization, spec.target_degree) {
        (2, Parametrization::Standard, 3) => Some(("Table 1", &["GP-GP", "GP-Sp", "Sp-Mag"])),
        (1, Parametrization::Standard, _) => Some(("App. E.1.1", &["GP", "GFL", "Sp"])),
        (1, Parametrization::MeanField, _) => {
            Some(("App. E.1.1, mean-field", &["GP", "GFL", "Sp"]))
        }
        _ => None,
    }
}

/// Why no pattern of an FCN can align with its target, in one sentence: the Hermite
/// coefficients that would carry the target's parity vanish for this activation (erf and tanh
/// are odd: an even target such as He2 or He4 is out of reach of every pattern).
pub fn no_winner_reason(spec: &FcnSpec) -> Result<String> {
    let m = spec.target_degree;
    let hs = super::activation::HermiteStructure::new(spec.activation, m)?;
    let name = spec.activation.name();
    let same_parity: Vec<usize> = (1..=m).filter(|k| k % 2 == m % 2).collect();
    let (parity, of) = if m % 2 == 0 {
        ("even", "odd")
    } else {
        ("odd", "even")
    };
    Ok(if same_parity.iter().all(|&k| !hs.has_coefficient(k)) {
        format!(
            "{name} is {of} (its Hermite coefficients of {parity} order vanish), so no layer can \
             build the {parity} target He{m} from w*.x and every pattern's energy is infinite"
        )
    } else {
        format!(
            "{name}'s Hermite coefficients that would carry He{m} from w*.x vanish (it has no \
             coefficient of order {}), so every pattern's energy is infinite",
            (2..=m)
                .filter(|&k| k % 2 == m % 2 && !hs.has_coefficient(k))
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

fn builtin_names() -> String {
    BUILTIN_CATALOG
        .iter()
        .map(|c| c.0)
        .collect::<Vec<_>>()
        .join(", ")
}
