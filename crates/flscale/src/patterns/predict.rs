//! Minimises every candidate pattern in a regime and compares them (spec 01 §1 "Comparison",
//! §6 "Output"): the winner has the smallest exponent of d; exact ties are all winners.

use super::fcn::{LayerChoice, LayerKind, PatternSpec};
use crate::error::{Error, Result};
use crate::scaling::energy::BASE;
use crate::scaling::{minimise, Constraint, Minimum, Monomial, Regime, Term, Q};

/// Upper limit on route combinations tried for one pattern.
const MAX_ROUTE_COMBINATIONS: usize = 4096;

/// One pattern, minimised.
#[derive(Debug, Clone)]
pub struct PatternResult {
    /// E.g. `GP-Sp`.
    pub name: String,
    /// Per-layer choices (empty for catalog entries).
    pub layers: Vec<LayerChoice>,
    /// The energy's parts for the winning routes: (label, monomial).
    pub terms: Vec<(String, Monomial)>,
    /// For each part, how its norm arose (spec 01: "say which route set each norm").
    pub routes: Vec<(String, String)>,
    /// Free parameters.
    pub free: Vec<String>,
    /// Constraints imposed on them.
    pub constraints: Vec<Constraint>,
    /// The exact minimum; `None` when the pattern cannot align with the target.
    pub minimum: Option<Minimum>,
    /// Why the pattern has infinite energy, if it does.
    pub infinite_reason: Option<String>,
    /// A description from a catalog file.
    pub description: Option<String>,
}

impl PatternResult {
    /// Ẽ as the symbolic sum of its parts, e.g. `M1*d + N1*beta/M1 + N2/beta`.
    pub fn energy_expression(&self) -> String {
        if self.minimum.is_none() {
            return "infinite".to_string();
        }
        self.terms
            .iter()
            .map(|(_, m)| m.to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// The comparison of all patterns in one regime.
#[derive(Debug, Clone)]
pub struct Prediction {
    /// What was predicted (preset or file name and a title).
    pub title: String,
    /// The regime used.
    pub regime: Regime,
    /// Every pattern.
    pub patterns: Vec<PatternResult>,
    /// Names of all patterns tied at the smallest exponent.
    pub winners: Vec<String>,
    /// The winners' exponent: P\*/κ ∝ d^p_star_exponent (None if nothing can align).
    pub p_star_exponent: Option<Q>,
    /// Where the architecture came from (`preset NAME`, a file path); empty from [`compare`].
    pub source: String,
    /// What was parsed (network, activation, widths, target, scaling), whatever `title` says.
    pub parsed: String,
    /// Where the paper lists patterns of this network and target (e.g. `Table 1`), if it does.
    pub paper_table: Option<String>,
    /// The patterns the paper lists there (e.g. GP-GP, GP-Sp, Sp-Mag for Table 1).
    pub paper_patterns: Vec<String>,
    /// Why no pattern can align with the target, when none can (one sentence).
    pub no_winner_reason: Option<String>,
}

impl Prediction {
    /// The pattern called `name`.
    pub fn pattern(&self, name: &str) -> Option<&PatternResult> {
        self.patterns.iter().find(|p| p.name == name)
    }

    /// Whether a pattern is of the paper's kinds: GP, GFL, Sp and Mag on the default features
    /// (Φ, and the target for Mag), or a catalog entry. muSp and feature learning on other
    /// features (`Sp[He3]`, `Mag[Phi]`) are further patterns the rule engine enumerates.
    pub fn is_paper_kind(p: &PatternResult) -> bool {
        !p.name.contains('[') && p.layers.iter().all(|l| l.kind != LayerKind::MuSp)
    }

    /// Number of layers of a pattern that are not lazy.
    pub fn feature_learning_layers(p: &PatternResult) -> usize {
        p.layers.iter().filter(|l| l.kind != LayerKind::Gp).count()
    }

    /// The winners with the fewest feature-learning layers (Occam's choice among ties), of
    /// the paper's kinds when there are such, in enumeration order.
    pub fn simplest_winners(&self) -> Vec<&PatternResult> {
        let ws: Vec<&PatternResult> = self
            .winners
            .iter()
            .filter_map(|w| self.pattern(w))
            .collect();
        // Prefer the paper's kinds (no muSp, default features) when they are among the winners.
        let ws: Vec<&PatternResult> = if ws.iter().any(|p| Self::is_paper_kind(p)) {
            ws.into_iter().filter(|p| Self::is_paper_kind(p)).collect()
        } else {
            ws
        };
        let least = ws
            .iter()
            .map(|p| Self::feature_learning_layers(p))
            .min()
            .unwrap_or(0);
        ws.into_iter()
            .filter(|p| Self::feature_learning_layers(p) == least)
            .collect()
    }

    fn describe_pattern(p: &PatternResult) -> String {
        let Some(min) = &p.minimum else {
            return p.name.clone();
        };
        let mut words = Vec::new();
        for l in &p.layers {
            if l.kind == LayerKind::Gp {
                continue;
            }
            let param = l.parameter.clone().unwrap_or_default();
            let size = min
                .argmin
                .get(&param)
                .map(|r| r.describe())
                .unwrap_or_default();
            let feature = l.feature.map(super::fcn::feature_name).unwrap_or_default();
            words.push(match l.kind {
                LayerKind::Sp => format!("{param} ∝ {size} neurons of layer {} specialise on {feature}", l.layer),
                LayerKind::MuSp => format!("O(1) neurons of layer {} specialise on {feature} with magnitude {param} ∝ {size}", l.layer),
                LayerKind::Gfl => format!("layer {} amplifies {feature} by {param} ∝ {size} (GFL)", l.layer),
                LayerKind::Mag => format!("all neurons of layer {} magnetise along {feature} with {param} ∝ {size}", l.layer),
                LayerKind::Gp => String::new(),
            });
        }
        if p.layers.is_empty() {
            let params: Vec<String> = min
                .argmin
                .iter()
                .map(|(k, r)| format!("{k} ∝ {}", r.describe()))
                .collect();
            if !params.is_empty() {
                words.push(params.join(", "));
            }
        }
        if words.is_empty() {
            words.push("lazy learning".to_string());
        }
        format!("{}: {}", p.name, words.join("; "))
    }

    /// One sentence a researcher reads first, e.g. "GP-Sp: M2 ∝ 1 neurons of layer 2
    /// specialise on Phi; P*/kappa ∝ d."
    pub fn reading(&self) -> String {
        let Some(exp) = self.p_star_exponent else {
            return match &self.no_winner_reason {
                Some(why) => format!("No pattern can align with the target: {why}."),
                None => {
                    "No pattern can align with the target: every pattern has an infinite energy."
                        .to_string()
                }
            };
        };
        let pstar = Monomial::power(BASE, exp);
        let simplest = self.simplest_winners();
        let described: Vec<String> = simplest.iter().map(|p| Self::describe_pattern(p)).collect();
        if self.winners.len() == 1 {
            format!("Winner {}; P*/kappa ∝ {pstar}.", described.join(""))
        } else if simplest.len() == self.winners.len() {
            format!(
                "{} patterns tie at P*/kappa ∝ {pstar}: {}.",
                self.winners.len(),
                described.join(" | ")
            )
        } else {
            format!(
                "{} patterns tie at P*/kappa ∝ {pstar}; the simplest (fewest feature-learning layers): {}.",
                self.winners.len(),
                described.join(" | ")
            )
        }
    }
}

fn combos(counts: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for &c in counts {
        let mut next = Vec::with_capacity(out.len() * c);
        for prefix in &out {
            for i in 0..c {
                let mut p = prefix.clone();
                p.push(i);
                next.push(p);
            }
        }
        out = next;
    }
    out
}

/// Minimises one pattern over its free parameters and its norm routes.
///
/// The energy is increasing in every norm, so taking the minimum over routes term by term
/// (E(min(a, b)) = min(E(a), E(b))) is exact: each combination of routes is an ordinary
/// posynomial, minimised by the rational LP, and the best combination is kept. Ties between
/// combinations go to the one whose parameters are all determined and whose parts balance
/// most (the mechanism the pattern names is actually used).
pub fn evaluate_pattern(spec: &PatternSpec, regime: &Regime) -> Result<PatternResult> {
    let mut result = PatternResult {
        name: spec.name.clone(),
        layers: spec.layers.clone(),
        terms: Vec::new(),
        routes: Vec::new(),
        free: spec.free.clone(),
        constraints: spec.constraints.clone(),
        minimum: None,
        infinite_reason: spec.infinite_reason.clone(),
        description: None,
    };
    if spec.infinite_reason.is_some() || spec.terms.iter().any(|t| t.options.is_empty()) {
        if result.infinite_reason.is_none() {
            result.infinite_reason = Some("a part of the energy has no finite route".to_string());
        }
        return Ok(result);
    }
    let counts: Vec<usize> = spec.terms.iter().map(|t| t.options.len()).collect();
    let total: usize = counts.iter().product();
    if total > MAX_ROUTE_COMBINATIONS {
        return Err(Error::invalid(format!(
            "pattern {} has {total} route combinations (more than {MAX_ROUTE_COMBINATIONS}); use fewer layers or a lower target degree",
            spec.name
        )));
    }
    type Score = (Q, usize, i64);
    let mut best: Option<(Score, Vec<usize>, Minimum)> = None;
    for choice in combos(&counts) {
        let uses = spec
            .terms
            .iter()
            .zip(&choice)
            .fold(0u32, |acc, (t, &i)| acc | t.options[i].2);
        if uses & spec.required_layers != spec.required_layers {
            continue;
        }
        let terms: Vec<Term> = spec
            .terms
            .iter()
            .zip(&choice)
            .map(|(t, &i)| Term {
                label: t.label.clone(),
                monomial: t.options[i].0.clone(),
            })
            .collect();
        let min = minimise(&terms, &spec.free, &spec.constraints, regime)
            .map_err(|e| e.context(format!("pattern {}", spec.name)))?;
        let undetermined = min
            .argmin
            .values()
            .filter(|r| r.lo.is_none() || r.hi.is_none() || r.lo != r.hi)
            .count();
        let score: Score = (min.exponent, undetermined, -(min.active.len() as i64));
        if best.as_ref().is_none_or(|(s, _, _)| score < *s) {
            best = Some((score, choice, min));
        }
    }
    if best.is_none() {
        let missing: Vec<String> = spec
            .layers
            .iter()
            .filter(|l| spec.required_layers & (1 << l.layer) != 0)
            .map(|l| l.layer.to_string())
            .collect();
        result.infinite_reason = Some(format!(
            "the feature learning of layer(s) {} never reaches the target, so this pattern is a simpler one at extra cost",
            missing.join(", ")
        ));
    }
    if let Some((_, choice, min)) = best {
        for (t, &i) in spec.terms.iter().zip(&choice) {
            result.terms.push((t.label.clone(), t.options[i].0.clone()));
            result
                .routes
                .push((t.label.clone(), t.options[i].1.clone()));
        }
        result.minimum = Some(min);
    }
    Ok(result)
}

/// Evaluates all patterns and picks the winners.
pub fn compare(title: &str, specs: &[PatternSpec], regime: &Regime) -> Result<Prediction> {
    let patterns: Vec<PatternResult> = specs
        .iter()
        .map(|s| evaluate_pattern(s, regime))
        .collect::<Result<_>>()?;
    let best = patterns
        .iter()
        .filter_map(|p| p.minimum.as_ref().map(|m| m.exponent))
        .min();
    let winners = match best {
        Some(b) => patterns
            .iter()
            .filter(|p| p.minimum.as_ref().is_some_and(|m| m.exponent == b))
            .map(|p| p.name.clone())
            .collect(),
        None => Vec::new(),
    };
    Ok(Prediction {
        title: title.to_string(),
        regime: regime.clone(),
        patterns,
        winners,
        p_star_exponent: best,
        source: String::new(),
        parsed: String::new(),
        paper_table: None,
        paper_patterns: Vec::new(),
        no_winner_reason: None,
    })
}
