//! Order parameters s(θ) of one chain's first-layer weights, with their gradients ∇_θ s (spec
//! 07, "Order parameters"): the collective variables along which umbrella windows restrain the
//! sampler, so that a bias V(s(θ)) adds V′(s)·∇_θ s to the force of any kernel.
//!
//! Every order parameter here reads the `rows` × `row_len` weight rows w_i of one parameter
//! group (row-major, row i at i·row_len) and compares them with the teacher's relevant
//! subspace through its orthogonal projector P:
//!
//! * **neuron overlap** s_i = w_i·w\* / |w_i| ∈ [−1, 1] of one row i (w\* a unit teacher
//!   direction, P = w\*w\*ᵀ): the signed cosine of neuron i with the teacher (spec 07, "the signed
//!   overlap of one chosen neuron", used by the sign-symmetry test);
//! * **aligned fraction** Q = Σ_i |P w_i|² / Σ_i |w_i|² ∈ [0, 1], with P = w\*w\*ᵀ (so
//!   |P w_i|² = (w_i·w\*)²) for a single-index teacher, or P the projector onto a list of input
//!   coordinates for parity / multi-index targets (spec 07: "Q with w\* replaced by the projector
//!   onto the relevant coordinates").
//!
//! Layouts (read from `sim/model/fcn.rs` and `sim/model/cnn.rs`):
//!
//! * FCN of any depth: group 0 is the first layer, N₁ × d row-major (neuron i's weights at
//!   i·d … (i+1)·d), first in a chain's flat θ ([`WeightRows::fcn_first_layer`]).
//! * CNN with non-overlapping patches: group 0 is the N shared filters, N × S row-major, first
//!   in θ, and every patch's label uses the same teacher filter w\* ∈ R^S
//!   ([`WeightRows::cnn_filters`]). Spec 07 asks for Q per patch, then averaged; because the
//!   filters and the teacher filter are the same in every patch, each patch's Q is the filters'
//!   Q against w\*, and so is their average: the CNN's order parameter is the aligned fraction
//!   of its filter rows.
//! * Attention (spec 07: the query/key weights against the target's token direction) is not
//!   here: its parameters are not rows against an input-space teacher.
//!
//! Zero weights: s_i is undefined at w_i = 0 and Q at w = 0 (every row zero); both return
//! s = 0 with a zero gradient there. The Gaussian prior gives these points probability zero,
//! so a chain never samples them, and a zero bias force there is the harmless choice.
//!
//! Values are clamped to the order parameter's range ([`OrderParameter::range`]) against
//! rounding (|P w|² may exceed |w|² by an ulp); the gradient is that of the unclamped formula.

use crate::activation::Activation;
use crate::sim::num::real::Real;
use crate::{Error, Result};

/// What the weight rows are, for messages ("the first layer has 4 neurons").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowUnits {
    /// An FCN's first-layer neurons; their rows live in input space R^d.
    Neurons,
    /// A CNN's shared filters; their rows live in patch space R^S.
    Filters,
}

impl RowUnits {
    /// "neuron" or "filter".
    pub fn singular(self) -> &'static str {
        match self {
            RowUnits::Neurons => "neuron",
            RowUnits::Filters => "filter",
        }
    }
}

/// Where the weight rows an order parameter reads sit in one chain's parameters: parameter
/// group `group`, which starts at `offset` in the chain's flat θ (groups stored one after the
/// other), holding `rows` rows of `row_len` weights, row-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightRows {
    /// The parameter group (0 for both FCN and CNN).
    pub group: usize,
    /// Index of the group's first entry in the flat θ.
    pub offset: usize,
    /// Number of rows (neurons N₁ or filters N).
    pub rows: usize,
    /// Weights per row (d or S).
    pub row_len: usize,
    /// What the rows are, for messages.
    pub units: RowUnits,
}

impl WeightRows {
    /// An FCN's first layer: group 0, N₁ × d, at the start of θ (`sim/model/fcn.rs`).
    pub fn fcn_first_layer(neurons: usize, d: usize) -> WeightRows {
        WeightRows {
            group: 0,
            offset: 0,
            rows: neurons,
            row_len: d,
            units: RowUnits::Neurons,
        }
    }

    /// A CNN's filters: group 0, N × S, at the start of θ (`sim/model/cnn.rs`).
    pub fn cnn_filters(channels: usize, patch: usize) -> WeightRows {
        WeightRows {
            group: 0,
            offset: 0,
            rows: channels,
            row_len: patch,
            units: RowUnits::Filters,
        }
    }

    /// rows · row_len.
    pub fn len(&self) -> usize {
        self.rows * self.row_len
    }

    /// Whether there are no weights.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// "the first layer has 4 neurons (0 to 3)", for messages about a row index.
    pub fn count_phrase(&self) -> String {
        let last = self.rows.saturating_sub(1);
        match self.units {
            RowUnits::Neurons => format!("the first layer has {} neurons (0 to {last})", self.rows),
            RowUnits::Filters => format!("the CNN has {} filters (0 to {last})", self.rows),
        }
    }

    /// "the inputs have d = 8 coordinates (0 to 7)", for messages about a coordinate.
    pub fn coordinate_phrase(&self) -> String {
        let last = self.row_len.saturating_sub(1);
        match self.units {
            RowUnits::Neurons => format!(
                "the inputs have d = {} coordinates (0 to {last})",
                self.row_len
            ),
            RowUnits::Filters => format!(
                "the filters have S = {} coordinates (0 to {last})",
                self.row_len
            ),
        }
    }
}

/// Which order parameter, with its teacher data.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderKind {
    /// s_i = w_i·w\*/|w_i| ∈ [−1, 1] of row `neuron`.
    NeuronOverlap {
        /// The row i.
        neuron: usize,
        /// The teacher direction w\* (unit).
        direction: Vec<f64>,
    },
    /// m_i = w_i·w\* of row `neuron`: the overlap before normalisation, unbounded. Its sign is
    /// that of s_i, and unlike s_i it is smooth where the row shrinks to zero (s_i is undefined
    /// at w_i = 0 and its gradient grows as 1/|w_i| near it, so a bias on s_i acts on a
    /// switched-off neuron with an arbitrarily large force and whatever sign of s it has).
    NeuronProjection {
        /// The row i.
        neuron: usize,
        /// The teacher direction w\* (unit).
        direction: Vec<f64>,
    },
    /// Q = Σ_i (w_i·w\*)² / Σ_i |w_i|² ∈ [0, 1].
    AlignedFraction {
        /// The teacher direction w\* (unit).
        direction: Vec<f64>,
    },
    /// Q = Σ_i |P w_i|² / Σ_i |w_i|² ∈ [0, 1], P the projector onto the listed coordinates.
    ProjectedFraction {
        /// The relevant input coordinates (distinct, each < row_len).
        coordinates: Vec<usize>,
    },
    /// c_i = φ·y / (|φ| |y|) ∈ [−1, 1], φ_μ = σ(w_i·x_μ) on the training inputs: the
    /// correlation of row `neuron`'s outputs with the labels. With the readout integrated out,
    /// the likelihood of a one-neuron network depends on w only through c and |φ| (the
    /// readout fits y along φ; paper App. A.1), so a bias on c acts on the coordinate the data
    /// term sees — where a bias on the overlap s leaves the sign of c free, and with P not ≫ d
    /// that sign has a barrier of its own under the top of F(s) (docs/free-energy.md, "Hidden
    /// barriers").
    LabelCorrelation {
        /// The row i.
        neuron: usize,
        /// σ of the hidden layer.
        activation: Activation,
        /// The training inputs x_μ, P × row_len row-major.
        inputs: Vec<f64>,
        /// The labels y_μ (P of them).
        labels: Vec<f64>,
    },
}

/// One order parameter of a model: data, evaluated by one code path (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct OrderParameter {
    kind: OrderKind,
    rows: WeightRows,
}

/// The teacher's relevant subspace as a projector P on R^row_len.
enum Projector<'a> {
    /// P = u uᵀ.
    Direction(&'a [f64]),
    /// P = Σ_{j ∈ coordinates} e_j e_jᵀ.
    Coordinates(&'a [usize]),
}

impl Projector<'_> {
    /// |P w|².
    fn norm_sq<T: Real>(&self, w: &[T]) -> f64 {
        match self {
            Projector::Direction(u) => dot(w, u).powi(2),
            Projector::Coordinates(c) => c.iter().map(|&j| w[j].f64().powi(2)).sum(),
        }
    }

    /// out += a · P w.
    fn add_scaled<T: Real>(&self, w: &[T], a: f64, out: &mut [T]) {
        match self {
            Projector::Direction(u) => {
                let c = a * dot(w, u);
                for (o, &uj) in out.iter_mut().zip(u.iter()) {
                    *o = T::of(o.f64() + c * uj);
                }
            }
            Projector::Coordinates(c) => {
                for &j in c.iter() {
                    out[j] = T::of(out[j].f64() + a * w[j].f64());
                }
            }
        }
    }
}

fn dot<T: Real>(w: &[T], u: &[f64]) -> f64 {
    w.iter().zip(u).map(|(a, b)| a.f64() * b).sum()
}

fn norm_sq<T: Real>(w: &[T]) -> f64 {
    w.iter().map(|a| a.f64().powi(2)).sum()
}

impl OrderParameter {
    /// Checks the teacher data against the rows: a direction of length row_len and nonzero
    /// finite norm (normalised here, so w\* need only be parallel to the teacher), a neuron
    /// below `rows`, coordinates distinct, non-empty and below row_len.
    pub fn new(kind: OrderKind, rows: WeightRows) -> Result<OrderParameter> {
        if rows.is_empty() {
            return Err(Error::invalid(format!(
                "an order parameter needs at least one {} with at least one weight, got {} × {}",
                rows.units.singular(),
                rows.rows,
                rows.row_len
            )));
        }
        let kind = match kind {
            OrderKind::NeuronOverlap { neuron, direction } => {
                if neuron >= rows.rows {
                    return Err(Error::invalid(format!(
                        "neuron = {neuron} is out of range; {}",
                        rows.count_phrase()
                    )));
                }
                OrderKind::NeuronOverlap {
                    neuron,
                    direction: unit(direction, rows.row_len)?,
                }
            }
            OrderKind::NeuronProjection { neuron, direction } => {
                if neuron >= rows.rows {
                    return Err(Error::invalid(format!(
                        "neuron = {neuron} is out of range; {}",
                        rows.count_phrase()
                    )));
                }
                OrderKind::NeuronProjection {
                    neuron,
                    direction: unit(direction, rows.row_len)?,
                }
            }
            OrderKind::AlignedFraction { direction } => OrderKind::AlignedFraction {
                direction: unit(direction, rows.row_len)?,
            },
            OrderKind::ProjectedFraction { coordinates } => {
                check_coordinates("coordinates", &coordinates, &rows)?;
                OrderKind::ProjectedFraction { coordinates }
            }
            OrderKind::LabelCorrelation {
                neuron,
                activation,
                inputs,
                labels,
            } => {
                if neuron >= rows.rows {
                    return Err(Error::invalid(format!(
                        "neuron = {neuron} is out of range; {}",
                        rows.count_phrase()
                    )));
                }
                check_training_set(&inputs, &labels, rows.row_len)?;
                OrderKind::LabelCorrelation {
                    neuron,
                    activation,
                    inputs,
                    labels,
                }
            }
        };
        Ok(OrderParameter { kind, rows })
    }

    /// The order parameter and its teacher data.
    pub fn kind(&self) -> &OrderKind {
        &self.kind
    }

    /// The weight rows it reads.
    pub fn rows(&self) -> WeightRows {
        self.rows
    }

    /// The interval s always lies in: [−1, 1] for a neuron overlap, [0, 1] for a fraction, the
    /// whole line for a projection.
    pub fn range(&self) -> (f64, f64) {
        match self.kind {
            OrderKind::NeuronOverlap { .. } | OrderKind::LabelCorrelation { .. } => (-1.0, 1.0),
            OrderKind::NeuronProjection { .. } => (f64::NEG_INFINITY, f64::INFINITY),
            _ => (0.0, 1.0),
        }
    }

    fn projector(&self) -> Projector<'_> {
        match &self.kind {
            OrderKind::NeuronOverlap { direction, .. }
            | OrderKind::NeuronProjection { direction, .. }
            | OrderKind::AlignedFraction { direction } => Projector::Direction(direction),
            OrderKind::ProjectedFraction { coordinates } => Projector::Coordinates(coordinates),
            OrderKind::LabelCorrelation { .. } => {
                unreachable!("a label correlation has no projector")
            }
        }
    }

    fn clamp(&self, s: f64) -> f64 {
        let (lo, hi) = self.range();
        s.clamp(lo, hi)
    }

    /// s of one chain's weight rows `w` (rows × row_len, the group's slice of that chain).
    pub fn value_rows<T: Real>(&self, w: &[T]) -> f64 {
        self.add_gradient_rows(w, |_| 0.0, None)
    }

    /// s of the rows `w`; adds dv(s) · ∇_w s to `grad` (same layout as `w`) and returns s (dv
    /// sees the returned, clamped s).
    /// With dv = V′ this is the bias force term of spec 07 on the group's gradient, in one pass
    /// over the rows for the value and one for the gradient; entries of rows that s does not
    /// read are left alone.
    ///
    /// ∇_{w_i} s_i = w\*/|w_i| − s_i w_i/|w_i|² (only row i); ∇_{w_i} m_i = w\* (only row i);
    /// ∇_{w_i} Q = 2 (P w_i − Q w_i) / Σ_j |w_j|² (every row), from the quotient rule on
    /// Q = Σ|P w_j|² / Σ|w_j|² with ∇|P w|² = 2 P w (P symmetric and idempotent).
    pub fn add_scaled_gradient_rows<T: Real>(
        &self,
        w: &[T],
        dv: impl FnOnce(f64) -> f64,
        grad: &mut [T],
    ) -> f64 {
        self.add_gradient_rows(w, dv, Some(grad))
    }

    fn add_gradient_rows<T: Real>(
        &self,
        w: &[T],
        dv: impl FnOnce(f64) -> f64,
        grad: Option<&mut [T]>,
    ) -> f64 {
        let (n, d) = (self.rows.rows, self.rows.row_len);
        assert_eq!(w.len(), n * d, "weight rows: expected {n} × {d} entries");
        if let OrderKind::LabelCorrelation {
            neuron,
            activation,
            inputs,
            labels,
        } = &self.kind
        {
            let row = &w[neuron * d..(neuron + 1) * d];
            let grad = grad.map(|g| &mut g[neuron * d..(neuron + 1) * d]);
            return label_correlation(row, *activation, inputs, labels, dv, grad);
        }
        let p = self.projector();
        match &self.kind {
            OrderKind::NeuronOverlap { neuron, .. } => {
                let row = &w[neuron * d..(neuron + 1) * d];
                let r2 = norm_sq(row);
                if r2 == 0.0 {
                    return 0.0;
                }
                let r = r2.sqrt();
                let Projector::Direction(u) = p else {
                    unreachable!("a neuron overlap has a direction")
                };
                let s = dot(row, u) / r;
                if let Some(grad) = grad {
                    let a = dv(self.clamp(s));
                    let g = &mut grad[neuron * d..(neuron + 1) * d];
                    for ((gj, &wj), &uj) in g.iter_mut().zip(row).zip(u.iter()) {
                        *gj = T::of(gj.f64() + a * (uj / r - s * wj.f64() / r2));
                    }
                }
                self.clamp(s)
            }
            OrderKind::NeuronProjection { neuron, .. } => {
                let row = &w[neuron * d..(neuron + 1) * d];
                let Projector::Direction(u) = p else {
                    unreachable!("a neuron projection has a direction")
                };
                let m = dot(row, u);
                if let Some(grad) = grad {
                    let a = dv(m);
                    let g = &mut grad[neuron * d..(neuron + 1) * d];
                    for (gj, &uj) in g.iter_mut().zip(u.iter()) {
                        *gj = T::of(gj.f64() + a * uj);
                    }
                }
                m
            }
            _ => {
                let (mut aligned, mut total) = (0.0, 0.0);
                for row in w.chunks_exact(d) {
                    aligned += p.norm_sq(row);
                    total += norm_sq(row);
                }
                if total == 0.0 {
                    return 0.0;
                }
                let q = aligned / total;
                if let Some(grad) = grad {
                    let a = 2.0 * dv(self.clamp(q)) / total;
                    for (g, row) in grad.chunks_exact_mut(d).zip(w.chunks_exact(d)) {
                        p.add_scaled(row, a, g);
                        for (gj, &wj) in g.iter_mut().zip(row) {
                            *gj = T::of(gj.f64() - a * q * wj.f64());
                        }
                    }
                }
                self.clamp(q)
            }
        }
    }

    /// The rows' slice of one chain's flat θ (groups one after the other).
    fn rows_range(&self, theta_len: usize) -> std::ops::Range<usize> {
        let range = self.rows.offset..self.rows.offset + self.rows.len();
        assert!(
            range.end <= theta_len,
            "θ has {theta_len} entries; the order parameter reads {range:?}"
        );
        range
    }

    /// s of one chain's flat θ.
    pub fn value<T: Real>(&self, theta: &[T]) -> f64 {
        self.value_rows(&theta[self.rows_range(theta.len())])
    }

    /// s of one chain's flat θ, and ∇_θ s written into `grad` (θ's length; zero outside the
    /// rows s reads).
    pub fn value_and_gradient<T: Real>(&self, theta: &[T], grad: &mut [T]) -> f64 {
        assert_eq!(grad.len(), theta.len(), "gradient and θ differ in length");
        let range = self.rows_range(theta.len());
        grad.fill(T::zero());
        self.add_scaled_gradient_rows(&theta[range.clone()], |_| 1.0, &mut grad[range])
    }
}

/// c = φ·y/(|φ||y|) of one row w, φ_μ = σ(w·x_μ); adds dv(c)·∇_w c to `grad` and returns c.
/// By the quotient rule, ∂c/∂φ_μ = y_μ/(|φ||y|) − c φ_μ/|φ|², and ∇_w c = Σ_μ (∂c/∂φ_μ) σ′(w·x_μ) x_μ.
/// Zero (no force) where φ = 0, e.g. w = 0 with an odd σ.
fn label_correlation<T: Real>(
    w: &[T],
    activation: Activation,
    inputs: &[f64],
    labels: &[f64],
    dv: impl FnOnce(f64) -> f64,
    grad: Option<&mut [T]>,
) -> f64 {
    let d = w.len();
    let h: Vec<f64> = inputs.chunks_exact(d).map(|x| dot(w, x)).collect();
    let (mut phi, mut dphi) = (vec![0.0; h.len()], vec![0.0; h.len()]);
    activation.apply::<f64>(&h, &mut phi, &mut dphi);
    let phi_norm = phi.iter().map(|v| v * v).sum::<f64>().sqrt();
    let y_norm = labels.iter().map(|v| v * v).sum::<f64>().sqrt();
    if phi_norm == 0.0 {
        return 0.0;
    }
    let c = (phi.iter().zip(labels).map(|(a, b)| a * b).sum::<f64>() / (phi_norm * y_norm))
        .clamp(-1.0, 1.0);
    if let Some(grad) = grad {
        let a = dv(c);
        for (((x, &p), &dp), &y) in inputs.chunks_exact(d).zip(&phi).zip(&dphi).zip(labels) {
            let coefficient = a * (y / (phi_norm * y_norm) - c * p / (phi_norm * phi_norm)) * dp;
            if coefficient != 0.0 {
                for (g, &xj) in grad.iter_mut().zip(x) {
                    *g = T::of(g.f64() + coefficient * xj);
                }
            }
        }
    }
    c
}

/// A training set for [`OrderKind::LabelCorrelation`]: inputs of `row_len` columns, as many
/// rows as labels (at least two), finite, labels not all zero.
fn check_training_set(inputs: &[f64], labels: &[f64], row_len: usize) -> Result<()> {
    if labels.len() < 2 || inputs.len() != labels.len() * row_len {
        return Err(Error::invalid(format!(
            "a label correlation needs at least 2 training samples with {row_len} inputs each, got {} labels and {} input entries",
            labels.len(),
            inputs.len()
        )));
    }
    if inputs.iter().chain(labels).any(|v| !v.is_finite()) {
        return Err(Error::invalid(
            "a label correlation needs finite training inputs and labels".to_string(),
        ));
    }
    if labels.iter().all(|&y| y == 0.0) {
        return Err(Error::invalid(
            "a label correlation needs labels that are not all zero".to_string(),
        ));
    }
    Ok(())
}

/// `direction` scaled to unit length, if it has `len` finite entries and a nonzero norm.
fn unit(direction: Vec<f64>, len: usize) -> Result<Vec<f64>> {
    if direction.len() != len {
        return Err(Error::invalid(format!(
            "the teacher direction has {} entries; the weight rows have {len}",
            direction.len()
        )));
    }
    let norm = direction.iter().map(|v| v * v).sum::<f64>().sqrt();
    if !(norm.is_finite() && norm > 0.0) {
        return Err(Error::invalid(format!(
            "the teacher direction has norm {norm}; it must be finite and nonzero"
        )));
    }
    Ok(direction.into_iter().map(|v| v / norm).collect())
}

/// Coordinates of a projector: non-empty, distinct, each below the row length; `field` names
/// the list in messages.
pub(crate) fn check_coordinates(
    field: &str,
    coordinates: &[usize],
    rows: &WeightRows,
) -> Result<()> {
    if coordinates.is_empty() {
        return Err(Error::invalid(format!(
            "{field} = [] is empty; list at least one input coordinate ({})",
            rows.coordinate_phrase()
        )));
    }
    for (k, &j) in coordinates.iter().enumerate() {
        if j >= rows.row_len {
            return Err(Error::invalid(format!(
                "{field}[{k}] = {j} is out of range; {}",
                rows.coordinate_phrase()
            )));
        }
        if coordinates[..k].contains(&j) {
            return Err(Error::invalid(format!(
                "{field}[{k}] = {j} repeats an earlier entry; list each coordinate once"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn gaussian_vec(n: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
        (0..n).map(|_| f64::standard_normal(rng)).collect()
    }

    /// Every kind on an FCN layout with `n` neurons in R^`d` placed after a 3-entry group
    /// (so the gradient must be zero outside the rows), teacher from `rng`.
    fn all_kinds(n: usize, d: usize, rng: &mut ChaCha8Rng) -> Vec<OrderParameter> {
        let rows = WeightRows {
            offset: 3,
            ..WeightRows::fcn_first_layer(n, d)
        };
        let direction = gaussian_vec(d, rng);
        let kinds = vec![
            OrderKind::NeuronOverlap {
                neuron: n - 1,
                direction: direction.clone(),
            },
            OrderKind::NeuronProjection {
                neuron: n - 1,
                direction: direction.clone(),
            },
            OrderKind::AlignedFraction { direction },
            OrderKind::ProjectedFraction {
                // Not every coordinate: then Q = 1 identically.
                coordinates: if d >= 3 { vec![d - 1, 0] } else { vec![0] },
            },
            OrderKind::LabelCorrelation {
                neuron: n - 1,
                activation: Activation::Erf,
                inputs: gaussian_vec(6 * d, rng),
                labels: gaussian_vec(6, rng),
            },
            OrderKind::LabelCorrelation {
                neuron: 0,
                activation: Activation::Tanh,
                inputs: gaussian_vec(5 * d, rng),
                labels: gaussian_vec(5, rng),
            },
        ];
        kinds
            .into_iter()
            .map(|k| OrderParameter::new(k, rows).unwrap())
            .collect()
    }

    #[test]
    fn gradients_match_central_differences_at_random_theta() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for (n, d) in [(1, 2), (3, 5), (4, 7)] {
            for op in all_kinds(n, d, &mut rng) {
                for _ in 0..5 {
                    let theta = gaussian_vec(3 + n * d + 2, &mut rng);
                    let mut grad = vec![f64::NAN; theta.len()];
                    let s = op.value_and_gradient(&theta, &mut grad);
                    assert_eq!(s, op.value(&theta));
                    let scale = grad.iter().fold(0.0f64, |m, g| m.max(g.abs()));
                    assert!(scale > 0.0, "{op:?}: zero gradient");
                    let h = 1e-6;
                    for j in 0..theta.len() {
                        let (mut up, mut down) = (theta.clone(), theta.clone());
                        up[j] += h;
                        down[j] -= h;
                        let fd = (op.value(&up) - op.value(&down)) / (2.0 * h);
                        let err = (fd - grad[j]).abs() / scale;
                        assert!(err < 1e-6, "{op:?}, θ[{j}]: ∇s = {} vs {fd}", grad[j]);
                        let outside = j < 3 || j >= 3 + n * d;
                        assert!(!outside || grad[j] == 0.0, "θ[{j}] is not read");
                    }
                }
            }
        }
    }

    /// With σ linear, c is the cosine between Xw and y, by hand; with the odd erf, w → −w
    /// flips its sign (the symmetry of the sign case).
    #[test]
    fn the_label_correlation_is_the_cosine_of_outputs_and_labels() {
        let rows = WeightRows::fcn_first_layer(2, 2);
        let (inputs, labels) = (vec![1.0, 0.0, 0.0, 2.0, 1.0, 1.0], vec![1.0, -1.0, 2.0]);
        let op = |activation| {
            OrderParameter::new(
                OrderKind::LabelCorrelation {
                    neuron: 1,
                    activation,
                    inputs: inputs.clone(),
                    labels: labels.clone(),
                },
                rows,
            )
            .unwrap()
        };
        // Row 1 = (0.5, −1): Xw = (0.5, −2, −0.5), Xw·y = 0.5 + 2 − 1 = 1.5,
        // |Xw| = √4.5, |y| = √6.
        let theta = [9.0, 9.0, 0.5, -1.0];
        let c = op(Activation::Linear).value(&theta);
        assert!(
            (c - 1.5 / (4.5f64.sqrt() * 6f64.sqrt())).abs() < 1e-14,
            "{c}"
        );
        let erf = op(Activation::Erf);
        let flipped = [9.0, 9.0, -0.5, 1.0];
        assert!((erf.value(&theta) + erf.value(&flipped)).abs() < 1e-14);
        assert_eq!(erf.value(&[9.0, 9.0, 0.0, 0.0]), 0.0);
        assert_eq!(erf.range(), (-1.0, 1.0));
    }

    #[test]
    fn a_label_correlation_without_a_usable_training_set_is_refused() {
        let rows = WeightRows::fcn_first_layer(1, 2);
        let make = |inputs: Vec<f64>, labels: Vec<f64>| {
            OrderParameter::new(
                OrderKind::LabelCorrelation {
                    neuron: 0,
                    activation: Activation::Erf,
                    inputs,
                    labels,
                },
                rows,
            )
        };
        assert!(make(vec![1.0; 3], vec![1.0, 2.0]).is_err());
        assert!(make(vec![1.0; 4], vec![0.0, 0.0]).is_err());
        assert!(make(vec![1.0, f64::NAN, 0.0, 1.0], vec![1.0, 2.0]).is_err());
        assert!(make(vec![1.0; 4], vec![1.0, 2.0]).is_ok());
    }

    /// m = w_i·w\* with w\* normalised, defined (and smooth) at w_i = 0, of either sign.
    #[test]
    fn the_neuron_projection_is_the_unnormalised_overlap() {
        let rows = WeightRows::fcn_first_layer(2, 3);
        let m = OrderParameter::new(
            OrderKind::NeuronProjection {
                neuron: 1,
                direction: vec![3.0, 4.0, 0.0],
            },
            rows,
        )
        .unwrap();
        assert_eq!(m.range(), (f64::NEG_INFINITY, f64::INFINITY));
        let v = m.value(&[9.0, 9.0, 9.0, -1.2, -1.6, 5.0]);
        assert!((v + 2.0).abs() < 1e-12, "{v}");
        assert_eq!(m.value(&[1.0, 2.0, 3.0, 0.0, 0.0, 0.0]), 0.0);
        let mut grad = vec![0.0; 6];
        m.value_and_gradient(&[0.0; 6], &mut grad);
        assert_eq!(grad, vec![0.0, 0.0, 0.0, 0.6, 0.8, 0.0]);
    }

    #[test]
    fn the_neuron_overlap_gradient_touches_only_its_row() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let op = &all_kinds(3, 4, &mut rng)[0];
        let theta = gaussian_vec(3 + 12, &mut rng);
        let mut grad = vec![0.0; theta.len()];
        op.value_and_gradient(&theta, &mut grad);
        // Row 2 (the last neuron) is θ[3 + 8 .. 3 + 12].
        assert!(grad[..11].iter().all(|&g| g == 0.0));
        assert!(grad[11..].iter().any(|&g| g != 0.0));
    }

    #[test]
    fn exact_values_at_hand_built_weights() {
        let u = vec![0.6, 0.8, 0.0];
        let rows = WeightRows::fcn_first_layer(2, 3);
        let overlap = |neuron| {
            OrderParameter::new(
                OrderKind::NeuronOverlap {
                    neuron,
                    direction: u.clone(),
                },
                rows,
            )
            .unwrap()
        };
        let q = OrderParameter::new(
            OrderKind::AlignedFraction {
                direction: vec![3.0, 4.0, 0.0], // normalised to u by `new`
            },
            rows,
        )
        .unwrap();
        // Neuron 0 along w* (scaled), neuron 1 orthogonal to it.
        let theta = [1.2, 1.6, 0.0, -0.8, 0.6, 2.0];
        assert!((overlap(0).value(&theta) - 1.0).abs() < 1e-15);
        assert_eq!(overlap(1).value(&theta), 0.0);
        // Q = 2² / (2² + 1 + 4).
        assert!((q.value(&theta) - 4.0 / 9.0).abs() < 1e-15);
        // Anti-aligned: −1.
        assert!((overlap(0).value(&[-0.3, -0.4, 0.0, 1.0, 0.0, 0.0]) + 1.0).abs() < 1e-15);
        // Every neuron along ±w*: Q = 1.
        assert!((q.value(&[0.6, 0.8, 0.0, -1.8, -2.4, 0.0]) - 1.0).abs() < 1e-15);
        // The projector onto e_0, e_2: |Pw|² = 1.2² + 0 + 0.8² + 2² over |w|² = 4 + 5.
        let pq = OrderParameter::new(
            OrderKind::ProjectedFraction {
                coordinates: vec![0, 2],
            },
            rows,
        )
        .unwrap();
        assert!((pq.value(&theta) - (1.44 + 0.64 + 4.0) / 9.0).abs() < 1e-15);
        // Projector onto every coordinate: Q = 1.
        let all = OrderParameter::new(
            OrderKind::ProjectedFraction {
                coordinates: vec![2, 0, 1],
            },
            rows,
        )
        .unwrap();
        assert!((all.value(&theta) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn zero_weights_give_zero_and_a_zero_gradient() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for op in all_kinds(2, 3, &mut rng) {
            let mut theta = vec![1.0; 3 + 6];
            theta[3..].fill(0.0);
            let mut grad = vec![f64::NAN; theta.len()];
            assert_eq!(op.value_and_gradient(&theta, &mut grad), 0.0);
            // The projection is linear: its gradient is w* everywhere, zero weights included.
            if !matches!(op.kind(), OrderKind::NeuronProjection { .. }) {
                assert!(grad.iter().all(|&g| g == 0.0), "{op:?}: {grad:?}");
            }
        }
        // Only the chosen neuron zero: its overlap and projection are 0, Q is still defined.
        let ops = all_kinds(2, 3, &mut rng);
        let theta = [0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0];
        assert_eq!(ops[0].value(&theta), 0.0);
        assert_eq!(ops[1].value(&theta), 0.0);
        assert!(ops[2].value(&theta) > 0.0);
    }

    #[test]
    fn the_cnn_filters_are_the_rows_at_the_start_of_theta() {
        // 2 filters of S = 2, then a 2 × 2 readout (N_w = 2): Q of the filters alone.
        let op = OrderParameter::new(
            OrderKind::AlignedFraction {
                direction: vec![1.0, 0.0],
            },
            WeightRows::cnn_filters(2, 2),
        )
        .unwrap();
        let theta = [1.0, 0.0, 0.0, 1.0, 9.0, 9.0, 9.0, 9.0];
        assert!((op.value(&theta) - 0.5).abs() < 1e-15);
        let mut grad = vec![0.0; 8];
        op.value_and_gradient(&theta, &mut grad);
        assert!(grad[4..].iter().all(|&g| g == 0.0));
    }

    #[test]
    fn the_scaled_gradient_is_added_with_the_factor_at_s() {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        for op in all_kinds(3, 4, &mut rng) {
            let w = gaussian_vec(12, &mut rng);
            let mut plain = vec![0.0; 16];
            let s =
                op.value_and_gradient(&[vec![0.0; 3], w.clone(), vec![0.0]].concat(), &mut plain);
            let before = gaussian_vec(12, &mut rng);
            let mut grad = before.clone();
            let mut seen = f64::NAN;
            let got = op.add_scaled_gradient_rows(
                &w,
                |x| {
                    seen = x;
                    3.0 * x
                },
                &mut grad,
            );
            assert_eq!((got, seen), (s, s));
            for j in 0..12 {
                assert!((grad[j] - before[j] - 3.0 * s * plain[3 + j]).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn f32_weights_give_the_f64_values() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for op in all_kinds(2, 3, &mut rng) {
            let theta: Vec<f32> = (0..9).map(|_| rng.random_range(-1.0..1.0)).collect();
            let wide: Vec<f64> = theta.iter().map(|&v| v as f64).collect();
            assert!((op.value(&theta) - op.value(&wide)).abs() < 1e-12);
        }
    }

    #[test]
    fn bad_teacher_data_is_refused() {
        let rows = WeightRows::fcn_first_layer(4, 3);
        let refuse = |kind| OrderParameter::new(kind, rows).unwrap_err().to_string();
        assert!(refuse(OrderKind::NeuronOverlap {
            neuron: 4,
            direction: vec![1.0, 0.0, 0.0]
        })
        .contains("neuron = 4 is out of range; the first layer has 4 neurons (0 to 3)"));
        assert!(refuse(OrderKind::AlignedFraction {
            direction: vec![1.0, 0.0]
        })
        .contains("has 2 entries"));
        assert!(refuse(OrderKind::AlignedFraction {
            direction: vec![0.0; 3]
        })
        .contains("norm 0"));
        assert!(refuse(OrderKind::ProjectedFraction {
            coordinates: vec![0, 3]
        })
        .contains("coordinates[1] = 3 is out of range"));
        assert!(refuse(OrderKind::ProjectedFraction {
            coordinates: vec![1, 1]
        })
        .contains("repeats"));
        assert!(refuse(OrderKind::ProjectedFraction {
            coordinates: vec![]
        })
        .contains("empty"));
    }

    proptest! {
        #[test]
        fn values_stay_in_range(
            n in 1usize..4,
            d in 1usize..5,
            seed in any::<u64>(),
            scale in prop_oneof![Just(1e-100), Just(1e-3), Just(1.0), Just(1e100)],
            sparse in any::<u16>(),
        ) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            // Some entries exactly zero (whole rows too), the rest Gaussian at `scale`.
            let theta: Vec<f64> = (0..3 + n * d + 2)
                .map(|j| if sparse >> (j % 16) & 1 == 1 { 0.0 } else { scale * f64::standard_normal(&mut rng) })
                .collect();
            for op in all_kinds(n, d, &mut rng) {
                let (lo, hi) = op.range();
                let mut grad = vec![0.0; theta.len()];
                let s = op.value_and_gradient(&theta, &mut grad);
                prop_assert!(lo <= s && s <= hi, "{:?}: s = {}", op.kind(), s);
                prop_assert!(grad.iter().all(|g| g.is_finite()));
            }
        }
    }
}
