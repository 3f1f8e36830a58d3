//! The feature-propagation rule engine for fully connected networks of any depth
//! (paper §5.1–5.2, App. C.3–C.5, E.1.1; spec 01 §2).
//!
//! For each hidden layer the engine tracks the RKHS norm R_l(He_k Φ\*) of the features
//! He_1 … He_m of the teacher direction, as lists of *routes* (alternative monomials; the
//! norm scale is their minimum, spec 01 "Several routes, one norm"). A pattern assigns one
//! behaviour to every layer; the energy is Ẽ_q = a_y + Σ_l Δ_l (paper eq. 11 / App. C.4).

use super::activation::HermiteStructure;
use crate::activation::Activation;
use crate::error::{Error, Result};
use crate::scaling::{Constraint, Monomial, Q};

/// What one hidden layer does in a pattern (paper §5.1, Fig. 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    /// Lazy / Gaussian process: q = prior GP, Δ = 0.
    Gp,
    /// Gaussian feature learning: variance along a feature amplified by D (App. C.3 item 5).
    Gfl,
    /// M neurons with an O(1) mean along a feature (App. C.3 item 1).
    Sp,
    /// O(1) neurons with mean μ·F (App. E.2).
    MuSp,
    /// All neurons with a small mean ±√(β/N_l)·F (§6.1, Corollary 2).
    Mag,
}

impl LayerKind {
    /// Short name used in pattern names (`GP`, `GFL`, `Sp`, `muSp`, `Mag`).
    pub fn short(self) -> &'static str {
        match self {
            LayerKind::Gp => "GP",
            LayerKind::Gfl => "GFL",
            LayerKind::Sp => "Sp",
            LayerKind::MuSp => "muSp",
            LayerKind::Mag => "Mag",
        }
    }

    /// Base name of the layer's free parameter (`D`, `M`, `mu`, `beta`; empty for GP).
    pub fn parameter_base(self) -> &'static str {
        match self {
            LayerKind::Gp => "",
            LayerKind::Gfl => "D",
            LayerKind::Sp => "M",
            LayerKind::MuSp => "mu",
            LayerKind::Mag => "beta",
        }
    }

    /// Words for the one-line reading.
    pub fn describe(self) -> &'static str {
        match self {
            LayerKind::Gp => "lazy (GP)",
            LayerKind::Gfl => "Gaussian feature learning",
            LayerKind::Sp => "specialization",
            LayerKind::MuSp => "mu-specialization",
            LayerKind::Mag => "magnetization",
        }
    }
}

/// One layer's choice within a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerChoice {
    /// 1-based hidden-layer index.
    pub layer: usize,
    /// Behaviour.
    pub kind: LayerKind,
    /// Hermite degree j of the feature He_j(Φ\*) acted on (None for GP).
    pub feature: Option<usize>,
    /// Name of the free parameter (M, D, beta, mu with the layer index in deep networks).
    pub parameter: Option<String>,
}

/// Name of feature He_j(Φ\*): Φ for j = 1.
pub fn feature_name(j: usize) -> String {
    if j == 1 {
        "Phi".to_string()
    } else {
        format!("He{j}")
    }
}

/// One energy term with its alternative routes (the term's scale is the minimum over them).
#[derive(Debug, Clone)]
pub struct TermChoices {
    /// `Delta_1`, `Delta_2`, …, `a_y`.
    pub label: String,
    /// (monomial, how the norm in it was obtained, bitmask of the layers whose mechanism
    /// the route uses).
    pub options: Vec<Route>,
}

/// One alternative for a norm or an energy part: (monomial, how it arose, bitmask of the
/// hidden layers whose mechanism — spike, amplification, magnetization — it relies on).
pub type Route = (Monomial, String, u32);

/// A candidate pattern ready for minimisation.
#[derive(Debug, Clone)]
pub struct PatternSpec {
    /// E.g. `GP-Sp`, `Sp-Mag`, `GFL-GP`.
    pub name: String,
    /// Per-layer choices (empty for catalog entries).
    pub layers: Vec<LayerChoice>,
    /// Energy terms.
    pub terms: Vec<TermChoices>,
    /// Free parameters.
    pub free: Vec<String>,
    /// Constraints (spec 01 §1: 1 <= M <= N_l, D >= 1, beta <= N_l, mu >= 1, user ones).
    pub constraints: Vec<Constraint>,
    /// Why the pattern cannot align with the target, if it cannot.
    pub infinite_reason: Option<String>,
    /// Bitmask of the layers whose mechanism the chosen routes must use: a route combination
    /// that ignores a layer's feature learning is that layer being lazy at extra cost, i.e. a
    /// different (simpler) pattern, so it does not count for this one.
    pub required_layers: u32,
}

/// Readout scaling (App. E.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parametrization {
    /// Readout prior variance σ²/N: a_y = R_{L−1}(y).
    Standard,
    /// Readout prior variance σ²/N²: a_y = N_{L−1}·R_{L−1}(y) (alignment enhanced by χ = O(N)).
    MeanField,
}

/// A fully connected network and its target y = He_m(w\*·x).
#[derive(Debug, Clone)]
pub struct FcnSpec {
    /// σ.
    pub activation: Activation,
    /// One scale symbol per hidden layer.
    pub widths: Vec<String>,
    /// Readout scaling.
    pub parametrization: Parametrization,
    /// Target degree m.
    pub target_degree: usize,
}

/// Routes to the norm of each feature He_1 … He_m (index 0 unused).
type Norms = Vec<Vec<Route>>;

fn push_route(list: &mut Vec<Route>, m: Monomial, how: String, uses: u32) {
    if !list.iter().any(|(x, _, u)| *x == m && *u == uses) {
        list.push((m, how, uses));
    }
}

fn param_name(base: &str, layer: usize, depth: usize) -> String {
    if depth == 1 {
        base.to_string()
    } else {
        format!("{base}{layer}")
    }
}

/// Enumerates every pattern assignment of an FCN (spec 01 §2): each hidden layer is GP, or
/// GFL / Sp / muSp / Mag on a feature that has a finite norm in the previous layer's kernel.
pub fn enumerate_patterns(spec: &FcnSpec) -> Result<Vec<PatternSpec>> {
    let m = spec.target_degree;
    if m == 0 {
        return Err(Error::invalid(
            "target.hermite = 0 is not allowed; the target degree must be between 1 and 12",
        ));
    }
    if spec.widths.is_empty() {
        return Err(Error::invalid("network.widths is empty; give one width symbol per hidden layer, e.g. [\"N1\", \"N2\"]"));
    }
    if spec.widths.len() > 6 {
        return Err(Error::invalid(format!(
            "network.widths has {} layers; at most 6 hidden layers are supported (the pattern count grows exponentially)",
            spec.widths.len()
        )));
    }
    let hs = HermiteStructure::new(spec.activation, m)?;
    // Input kernel K_0 = x·x'/d: R_0(Φ) = d, higher Hermite features are not expressible.
    let mut input: Norms = vec![Vec::new(); m + 1];
    input[1].push((
        Monomial::symbol("d"),
        "input kernel x.x'/d: R_0(Phi) = d".to_string(),
        0,
    ));
    let mut out = Vec::new();
    let mut prefix = Vec::new();
    recurse(spec, &hs, &input, 0, &mut prefix, &mut out);
    Ok(out)
}

struct Partial {
    choice: LayerChoice,
    cost: Option<TermChoices>,
    constraints: Vec<Constraint>,
}

/// Extends `prefix` by every choice for hidden layer `layer_idx + 1` and recurses; a full
/// prefix becomes a pattern in `out`. `prev` holds the norm routes of the previous kernel.
fn recurse(
    spec: &FcnSpec,
    hs: &HermiteStructure,
    prev: &Norms,
    layer_idx: usize,
    prefix: &mut Vec<Partial>,
    out: &mut Vec<PatternSpec>,
) {
    let depth = spec.widths.len();
    if layer_idx == depth {
        out.push(finish(spec, prev, prefix));
        return;
    }
    let layer = layer_idx + 1;
    let m = spec.target_degree;
    for (kind, feature) in layer_options(prev, m) {
        let mut next: Norms = vec![Vec::new(); m + 1];
        lazy_routes(hs, prev, layer, &mut next);
        let mut partial = Partial {
            choice: LayerChoice {
                layer,
                kind,
                feature,
                parameter: None,
            },
            cost: None,
            constraints: Vec::new(),
        };
        if let Some(j) = feature {
            let p = param_name(kind.parameter_base(), layer, depth);
            let step = FeatureStep {
                hs,
                prev,
                layer,
                j,
                width: Monomial::symbol(&spec.widths[layer_idx]),
                param: Monomial::symbol(&p),
                param_name: p.clone(),
            };
            partial.choice.parameter = Some(p);
            let cost_options = match kind {
                LayerKind::Gfl => {
                    step.gaussian_feature_learning(&mut next, &mut partial.constraints)
                }
                LayerKind::Sp | LayerKind::MuSp => {
                    step.specialisation(kind, &mut next, &mut partial.constraints)
                }
                LayerKind::Mag => step.magnetisation(&mut next, &mut partial.constraints),
                // GP layers carry no feature and never reach this branch.
                LayerKind::Gp => Vec::new(),
            };
            partial.cost = Some(TermChoices {
                label: format!("Delta_{layer}"),
                options: cost_options,
            });
        }
        prefix.push(partial);
        recurse(spec, hs, &next, layer_idx + 1, prefix, out);
        prefix.pop();
    }
}

/// The choices for one layer: GP, then GFL, Sp, muSp and Mag on every feature with a finite
/// norm in the previous kernel `prev`.
fn layer_options(prev: &Norms, m: usize) -> Vec<(LayerKind, Option<usize>)> {
    let finite: Vec<usize> = (1..=m).filter(|&j| !prev[j].is_empty()).collect();
    let mut options: Vec<(LayerKind, Option<usize>)> = vec![(LayerKind::Gp, None)];
    for kind in [
        LayerKind::Gfl,
        LayerKind::Sp,
        LayerKind::MuSp,
        LayerKind::Mag,
    ] {
        for &j in &finite {
            options.push((kind, Some(j)));
        }
    }
    options
}

/// One hidden layer learning feature He_j(Φ\*): what its cost and the norms it passes on
/// depend on.
struct FeatureStep<'a> {
    hs: &'a HermiteStructure,
    /// Norm routes in the previous layer's kernel.
    prev: &'a Norms,
    /// 1-based hidden-layer index.
    layer: usize,
    /// Hermite degree of the feature.
    j: usize,
    /// The layer's width N_l.
    width: Monomial,
    /// The layer's free parameter (D, M, mu or beta) as a monomial, and its name.
    param: Monomial,
    param_name: String,
}

impl FeatureStep<'_> {
    /// GFL: the cost N_l·D, the amplified feature's powers in `next` and D ≥ 1; returns the
    /// cost routes.
    fn gaussian_feature_learning(
        &self,
        next: &mut Norms,
        constraints: &mut Vec<Constraint>,
    ) -> Vec<Route> {
        let (hs, layer, j) = (self.hs, self.layer, self.j);
        let (pm, p) = (&self.param, &self.param_name);
        let m = next.len() - 1;
        let fname = feature_name(j);
        // App. C.3 item 6: Δ_{l,i} = ½(D − 1) per neuron → N_l·D.
        let cost_options = vec![(
            self.width.mul(pm),
            format!("N_{layer}*D: each of the N_{layer} neurons pays (D-1)/2 (App. C.3)"),
            0,
        )];
        // Claim (ii): R'(F) = R(F)/D, so F^i gets (R(F)/D)^i.
        for i in 1..=m / j {
            let carries = if i == 1 {
                hs.has_coefficient(1)
            } else {
                hs.has_coefficient(i)
            };
            if !carries {
                continue;
            }
            for (r, _, uses) in self.prev[j].clone() {
                let norm = r.div(pm).pow(Q::from_integer(i as i64));
                push_route(
                    &mut next[j * i],
                    norm,
                    format!("GFL in layer {layer} amplifies {fname} by {p}; claim (ii) gives ({fname}'s norm/{p})^{i}"),
                    uses | (1u32 << layer),
                );
            }
        }
        constraints.push(Constraint::le(Monomial::one(), pm.clone()));
        cost_options
    }

    /// Sp (M neurons with an O(1) mean) or muSp (O(1) neurons with mean μ): the cost routes,
    /// the spike's norm N_l/M (or N_l/μ²) for every overlapping feature in `next`, and the
    /// parameter's bounds.
    fn specialisation(
        &self,
        kind: LayerKind,
        next: &mut Norms,
        constraints: &mut Vec<Constraint>,
    ) -> Vec<Route> {
        let (layer, j, pm, width) = (self.layer, self.j, &self.param, &self.width);
        let m = next.len() - 1;
        let fname = feature_name(j);
        let one = Monomial::one();
        let (factor, spike) = if kind == LayerKind::Sp {
            (pm.clone(), width.div(pm))
        } else {
            (
                pm.pow(Q::from_integer(2)),
                width.div(&pm.pow(Q::from_integer(2))),
            )
        };
        // App. C.3 item 2: Δ = ½ μ² ⟨F, K⁻¹, F⟩ per specialised neuron.
        let cost_options = self.prev[j]
            .iter()
            .map(|(r, how, uses)| {
                (
                    factor.mul(r),
                    format!("{} x R_{}({fname}) [{how}]", factor, layer - 1),
                    *uses,
                )
            })
            .collect();
        // Claim (i), Corollary 1: the spike σ(F) gives every overlapping G the norm N_l/M.
        for k in 1..=m {
            if self.hs.spike_reaches(j, k) {
                push_route(
                    &mut next[k],
                    spike.clone(),
                    format!("spike sigma({fname}) of the specialised neurons in layer {layer} (claim i, Corollary 1)"),
                    1u32 << layer,
                );
            }
        }
        if kind == LayerKind::Sp {
            constraints.push(Constraint::le(one, pm.clone()));
            constraints.push(Constraint::le(pm.clone(), width.clone()));
        } else {
            constraints.push(Constraint::le(one, pm.clone()));
        }
        cost_options
    }

    /// Mag (all neurons with a small mean): the cost routes β·R_{l−1}(F), the norm N_l/β of F in
    /// `next` when σ has a linear part, and β ≤ N_l.
    fn magnetisation(&self, next: &mut Norms, constraints: &mut Vec<Constraint>) -> Vec<Route> {
        let (layer, j, pm, width) = (self.layer, self.j, &self.param, &self.width);
        let fname = feature_name(j);
        let cost_options = self.prev[j]
            .iter()
            .map(|(r, how, uses)| {
                (
                    pm.mul(r),
                    format!("beta x R_{}({fname}) [{how}]", layer - 1),
                    *uses,
                )
            })
            .collect();
        // Corollary 2: small means act linearly, R_l(F) = N_l/β (needs a linear part).
        if self.hs.has_coefficient(1) {
            push_route(
                &mut next[j],
                width.div(pm),
                format!("magnetization of all N_{layer} neurons along {fname} (Corollary 2)"),
                1u32 << layer,
            );
        }
        constraints.push(Constraint::le(pm.clone(), width.clone()));
        cost_options
    }
}

/// Rule (iii) (claim iii and its D = 1 case of claim ii): a lazy layer keeps every finite
/// norm (if σ has a linear part) and maps R(Φ) to R(Φ)^k for He_k when σ's Hermite
/// coefficient of order k is non-zero.
fn lazy_routes(hs: &HermiteStructure, prev: &Norms, layer: usize, next: &mut Norms) {
    let m = prev.len() - 1;
    for k in 1..=m {
        if hs.has_coefficient(1) {
            for (r, how, uses) in &prev[k] {
                let how = if how.starts_with("kept by lazy") {
                    how.clone()
                } else {
                    format!("kept by lazy neurons of layer {layer} (claim iii) from: {how}")
                };
                push_route(&mut next[k], r.clone(), how, *uses);
            }
        }
        if k >= 2 && hs.has_coefficient(k) {
            for (r, _, uses) in &prev[1] {
                push_route(
                    &mut next[k],
                    r.pow(Q::from_integer(k as i64)),
                    format!("lazy layer {layer}: R(He{k}) = R(Phi)^{k} (rule iii)"),
                    *uses,
                );
            }
        }
    }
}

fn finish(spec: &FcnSpec, last: &Norms, prefix: &[Partial]) -> PatternSpec {
    let m = spec.target_degree;
    let depth = spec.widths.len();
    let name = prefix
        .iter()
        .map(|p| {
            let k = p.choice.kind;
            match p.choice.feature {
                // Default features (the paper's convention, Table 1): Φ for GFL/Sp/muSp, the
                // target He_m for magnetization; others are written in brackets.
                Some(j) if (k == LayerKind::Mag && j != m) || (k != LayerKind::Mag && j != 1) => {
                    format!("{}[{}]", k.short(), feature_name(j))
                }
                _ => k.short().to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("-");
    let mut terms: Vec<TermChoices> = prefix.iter().filter_map(|p| p.cost.clone()).collect();
    let readout_width = Monomial::symbol(&spec.widths[depth - 1]);
    let a_y: Vec<Route> = last[m]
        .iter()
        .map(|(r, how, uses)| match spec.parametrization {
            Parametrization::Standard => (r.clone(), format!("R_{depth}(He{m}) [{how}]"), *uses),
            Parametrization::MeanField => (
                readout_width.mul(r),
                format!("mean-field readout: N_{depth} x R_{depth}(He{m}) (App. E.1.1) [{how}]"),
                *uses,
            ),
        })
        .collect();
    let infinite_reason = a_y.is_empty().then(|| {
        format!(
            "He{m} has no finite norm in the last hidden layer's kernel under this pattern ({} cannot build it)",
            spec.activation.name()
        )
    });
    terms.push(TermChoices {
        label: "a_y".to_string(),
        options: a_y,
    });
    PatternSpec {
        name,
        layers: prefix.iter().map(|p| p.choice.clone()).collect(),
        free: prefix
            .iter()
            .filter_map(|p| p.choice.parameter.clone())
            .collect(),
        constraints: prefix.iter().flat_map(|p| p.constraints.clone()).collect(),
        terms,
        infinite_reason,
        required_layers: prefix
            .iter()
            .filter(|p| p.choice.kind != LayerKind::Gp)
            .fold(0, |acc, p| acc | (1u32 << p.choice.layer)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fcn(widths: &[&str], m: usize) -> FcnSpec {
        FcnSpec {
            activation: Activation::Erf,
            widths: widths.iter().map(|s| s.to_string()).collect(),
            parametrization: Parametrization::Standard,
            target_degree: m,
        }
    }

    #[test]
    fn two_layer_has_the_paper_patterns() {
        let p = enumerate_patterns(&fcn(&["N"], 3)).unwrap();
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["GP", "GFL", "Sp", "muSp", "Mag[Phi]"]);
        let sp = &p[2];
        assert_eq!(sp.terms[0].options[0].0.to_string(), "M*d");
        assert_eq!(
            sp.terms[1]
                .options
                .iter()
                .map(|o| o.0.to_string())
                .collect::<Vec<_>>(),
            ["d^3", "N/M"]
        );
        let gfl = &p[1];
        assert!(gfl.terms[1]
            .options
            .iter()
            .any(|o| o.0.to_string() == "d^3/D^3"));
    }

    #[test]
    fn three_layer_counts() {
        // Layer 1: GP + 4 kinds on Φ. Layer 2: GP + 4 kinds on each finite feature (Φ, He3).
        let p = enumerate_patterns(&fcn(&["N1", "N2"], 3)).unwrap();
        assert_eq!(p.len(), 5 * 9);
        assert!(p.iter().any(|p| p.name == "Sp-Mag"));
        assert!(p.iter().any(|p| p.name == "Sp-GP"));
        assert!(p.iter().any(|p| p.name == "GFL-GP"));
    }
}
