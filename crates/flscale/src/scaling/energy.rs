//! Energies (sums of labelled monomials), regimes (scales as powers of d) and their exact
//! minimisation over free parameters, with the symbolic optimum printed the way the paper
//! writes it (spec 01 §1; paper §4–5, Table 1).

use std::collections::{BTreeMap, BTreeSet};

use num_traits::{One, Signed, Zero};

use super::expr::{parse_monomial, Constraint};
use super::lp::{minimise_t, solve_square, LpSolution, Row};
use super::monomial::{fmt_q, Monomial, Q};
use crate::error::{Error, Result};

/// The large parameter every scale is a power of.
pub const BASE: &str = "d";

/// Half-width of the box that keeps the LP bounded; optima that touch it are reported as
/// unbounded (0 or ∞) rather than as numbers.
const BOX: i64 = 1_000_000;

/// Every scale as a rational power of d (paper: "N ∝ d", "N2 = d^5", ...).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Regime {
    exps: BTreeMap<String, Q>,
}

impl Regime {
    /// A regime with only d itself.
    pub fn new() -> Self {
        let mut exps = BTreeMap::new();
        exps.insert(BASE.to_string(), Q::one());
        Regime { exps }
    }

    /// Sets `scale = d^e`.
    pub fn set(&mut self, scale: &str, e: Q) {
        if scale != BASE {
            self.exps.insert(scale.to_string(), e);
        }
    }

    /// The power of d that `value` (e.g. `d^2`, `sqrt(d)`, `d^(1/3)`, `1`, or a product with
    /// scales already set) gives `scale`; what is wrong is left for the caller to word in its
    /// own syntax (a TOML `[regime]` line or an `--at` entry).
    fn exponent_of(&self, scale: &str, value: &str) -> std::result::Result<Q, BadValue> {
        if scale == BASE {
            return Err(BadValue::Base);
        }
        if !is_symbol(scale) {
            return Err(BadValue::NotSymbol);
        }
        let m = parse_monomial(value).map_err(BadValue::Parse)?;
        let mut e = Q::zero();
        for (s, p) in m.iter() {
            match s {
                BASE => e += p,
                other => match self.exps.get(other) {
                    Some(v) if other != scale => e += v * p,
                    _ => return Err(BadValue::Mentions(other.to_string())),
                },
            }
        }
        Ok(e)
    }

    /// Parses `value` (e.g. `d^2`, `sqrt(d)`, `d^(1/3)`, `1`) as a power of d and sets it;
    /// messages are worded for a TOML `[regime]` table.
    pub fn set_str(&mut self, scale: &str, value: &str) -> Result<()> {
        let e = self.exponent_of(scale, value).map_err(|bad| match bad {
            BadValue::Base => Error::invalid(format!(
                "the regime cannot set '{BASE}': every other scale is a power of {BASE}"
            )),
            BadValue::NotSymbol => Error::invalid(format!(
                "'{scale}' is not a scale name; use letters, digits and '_' starting with a letter"
            )),
            BadValue::Parse(e) => e.context(format!("regime value for {scale}")),
            BadValue::Mentions(other) => Error::invalid(format!(
                "regime value for {scale} = \"{value}\" mentions '{other}'; write it as a power of {BASE}, e.g. {scale} = \"{BASE}^2\""
            )),
        })?;
        self.set(scale, e);
        Ok(())
    }

    /// Parses `N1=d^2,N2=d` (the `--at` syntax) on top of this regime. `option` is what the
    /// text was given as (`--at`, `at`): every message names it once, with the entry at fault.
    pub fn apply_assignments(&mut self, text: &str, option: &str) -> Result<()> {
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            // Quoted up to 60 characters: a pathological entry (60 000 parentheses) must not
            // turn the one-sentence error into a page.
            let entry = format!("{option} entry \"{}\"", crate::error::shorten(part, 60));
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| Error::invalid(format!("{entry} has no '='; write e.g. N1=d^2")))?;
            let (k, v) = (k.trim(), v.trim());
            let e = self.exponent_of(k, v).map_err(|bad| match bad {
                BadValue::Base => Error::invalid(format!(
                    "{entry} sets '{BASE}', the base that every other scale is a power of; give the other scales instead, e.g. N1=d^2"
                )),
                BadValue::NotSymbol => Error::invalid(format!(
                    "{entry}: '{k}' is not a scale name; use letters, digits and '_' starting with a letter"
                )),
                BadValue::Parse(e) => e.context(entry.clone()),
                BadValue::Mentions(other) => Error::invalid(format!(
                    "{entry} mentions '{other}', which has no value; write the value as a power of {BASE}, e.g. {k}={BASE}^2"
                )),
            })?;
            self.set(k, e);
        }
        Ok(())
    }

    /// The exponent of d of `scale`, if known.
    pub fn get(&self, scale: &str) -> Option<Q> {
        self.exps.get(scale).copied()
    }

    /// All scales with their exponents (d included).
    pub fn iter(&self) -> impl Iterator<Item = (&str, Q)> {
        self.exps.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Substitution map scale → d^e, for turning monomials into powers of d.
    pub fn as_substitution(&self) -> BTreeMap<String, Monomial> {
        self.exps
            .iter()
            .filter(|(k, _)| k.as_str() != BASE)
            .map(|(k, v)| (k.clone(), Monomial::power(BASE, *v)))
            .collect()
    }

    /// Human form: `N1 = d, N2 = d^2`.
    pub fn describe(&self) -> String {
        self.exps
            .iter()
            .filter(|(k, _)| k.as_str() != BASE)
            .map(|(k, v)| format!("{k} = {}", Monomial::power(BASE, *v)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why a regime value cannot be set ([`Regime::exponent_of`]).
enum BadValue {
    /// The value is for d itself.
    Base,
    /// The scale's name is not a symbol.
    NotSymbol,
    /// The value does not parse as a monomial.
    Parse(Error),
    /// The value mentions a name that is neither d nor a scale set before.
    Mentions(String),
}

/// True for a valid symbol name.
pub fn is_symbol(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_alphabetic() || f == '_')
        && c.all(|ch| ch.is_alphanumeric() || ch == '_')
}

/// One labelled part of an energy (Δ₁, Δ₂, a_y, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// Where the term comes from, e.g. `Delta_1` or `a_y`.
    pub label: String,
    /// Its scaling.
    pub monomial: Monomial,
}

/// A free parameter's optimal log-exponent range (exponent of d); `None` bounds are 0 / ∞.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgRange {
    /// Lower end of the optimal exponent, `None` = −∞ (the parameter → 0).
    pub lo: Option<Q>,
    /// Upper end, `None` = +∞.
    pub hi: Option<Q>,
}

impl ArgRange {
    /// Human form: `d^(1/3)`, `between 1 and d`, `any value >= d`.
    pub fn describe(&self) -> String {
        match (self.lo, self.hi) {
            (Some(a), Some(b)) if a == b => Monomial::power(BASE, a).to_string(),
            (Some(a), Some(b)) => format!(
                "between {} and {}",
                Monomial::power(BASE, a),
                Monomial::power(BASE, b)
            ),
            (Some(a), None) => format!("any value >= {}", Monomial::power(BASE, a)),
            (None, Some(b)) => format!("any value <= {}", Monomial::power(BASE, b)),
            (None, None) => "any value".to_string(),
        }
    }
}

/// The exact minimum of an energy in a regime.
#[derive(Debug, Clone)]
pub struct Minimum {
    /// Ẽ ∝ d^exponent at the optimum.
    pub exponent: Q,
    /// Optimal exponent (of d) of every free parameter; a range when the optimum is a face.
    pub argmin: BTreeMap<String, ArgRange>,
    /// The optimal energy as a monomial in the scales (from the balance equations).
    pub energy_symbolic: Monomial,
    /// Free parameters that the balance equations determine, as monomials in the scales.
    pub argmin_symbolic: BTreeMap<String, Monomial>,
    /// Labels of the terms that balance at the optimum (the active set).
    pub active: Vec<String>,
    /// Constraints whose removal would lower the optimum.
    pub binding: Vec<String>,
    /// Constraints that hold with equality at the optimum without changing it.
    pub tight: Vec<String>,
    /// Conditions on the scales under which the symbolic answer holds (e.g. `N2 >= d`).
    pub valid_when: Vec<String>,
    /// Each term's exponent of d at the optimum (at the centre of the optimal face).
    pub term_exponents: Vec<(String, Q)>,
}

/// Minimises Σ terms over the `free` parameters subject to `constraints`, exactly.
///
/// Errors when a symbol is neither free nor in the regime, when the constraints cannot all
/// hold, or when the energy decreases without bound.
pub fn minimise(
    terms: &[Term],
    free: &[String],
    constraints: &[Constraint],
    regime: &Regime,
) -> Result<Minimum> {
    if terms.is_empty() {
        return Err(Error::invalid("the energy has no terms"));
    }
    let lp = LogProgram::new(terms, free, constraints, regime)?;
    let k = lp.k;
    let sol = lp.solve_checked(free, constraints, regime)?;
    let t_star = sol.value;
    let centre = face_centre(&sol, k);
    let argmin = argmin_ranges(&sol, free);
    let active_idx: Vec<usize> = (0..terms.len())
        .filter(|&i| dot(&lp.term_rows[i].g, &centre) == lp.term_rows[i].h)
        .collect();
    let (binding_idx, tight) = lp.binding_and_tight(constraints, &centre, t_star);
    let symbolic = symbolic_solution(
        terms,
        free,
        constraints,
        &active_idx,
        &binding_idx,
        &lp.term_rows,
        &lp.cons_rows,
        k,
    );
    let term_exponents = terms
        .iter()
        .zip(&lp.term_rows)
        .map(|(t, r)| (t.label.clone(), dot(&r.g[..k], &centre[..k]) - r.h))
        .collect();
    Ok(Minimum {
        exponent: t_star,
        argmin,
        energy_symbolic: symbolic
            .energy
            .unwrap_or_else(|| Monomial::power(BASE, t_star)),
        argmin_symbolic: symbolic.params,
        active: active_idx.iter().map(|&i| terms[i].label.clone()).collect(),
        binding: binding_idx
            .iter()
            .map(|&i| constraints[i].text.clone())
            .collect(),
        tight,
        valid_when: symbolic.valid_when,
        term_exponents,
    })
}

/// The energy minimisation as an LP in log space over (x, t), x the exponents of the `k` free
/// parameters: every term's exponent is at most t, every constraint holds.
struct LogProgram {
    k: usize,
    term_rows: Vec<Row>,
    cons_rows: Vec<Row>,
}

impl LogProgram {
    /// The rows of every term and constraint, with the regime's exponents as constants.
    fn new(
        terms: &[Term],
        free: &[String],
        constraints: &[Constraint],
        regime: &Regime,
    ) -> Result<Self> {
        let k = free.len();
        let idx: BTreeMap<&str, usize> = free
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), i))
            .collect();
        // Log-space affine form of a monomial: coefficients on x and the regime constant.
        let affine = |m: &Monomial, what: &str| -> Result<(Vec<Q>, Q)> {
            let mut a = vec![Q::zero(); k];
            let mut b = Q::zero();
            for (s, e) in m.iter() {
                if let Some(&i) = idx.get(s) {
                    a[i] += e;
                } else if let Some(v) = regime.get(s) {
                    b += v * e;
                } else {
                    return Err(Error::invalid(format!(
                        "{what} uses '{s}', which is neither a free parameter nor a scale of the regime; give it a value (e.g. --at {s}=d) or declare it free (--free {s})"
                    )));
                }
            }
            Ok((a, b))
        };
        let mut term_rows = Vec::with_capacity(terms.len());
        for t in terms {
            let (a, b) = affine(&t.monomial, &format!("term {} = {}", t.label, t.monomial))?;
            let mut g = a;
            g.push(-Q::one());
            term_rows.push(Row { g, h: -b });
        }
        let mut cons_rows = Vec::with_capacity(constraints.len());
        for c in constraints {
            let (al, bl) = affine(&c.lhs, &format!("constraint {}", c.text))?;
            let (ar, br) = affine(&c.rhs, &format!("constraint {}", c.text))?;
            let mut g: Vec<Q> = al.iter().zip(&ar).map(|(l, r)| l - r).collect();
            g.push(Q::zero());
            cons_rows.push(Row { g, h: br - bl });
        }
        Ok(LogProgram {
            k,
            term_rows,
            cons_rows,
        })
    }

    /// The optimum with constraint `skip` left out, in the box |x| ≤ `bound`.
    fn solve(&self, skip: Option<usize>, bound: i64) -> Option<LpSolution> {
        let rows: Vec<Row> = self
            .term_rows
            .iter()
            .cloned()
            .chain(
                self.cons_rows
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| Some(*i) != skip)
                    .map(|(_, r)| r.clone()),
            )
            .collect();
        minimise_t(&rows, self.k, Q::from_integer(bound))
    }

    /// The optimum in the box of half-width [`BOX`]; an error when the constraints cannot all
    /// hold, or when doubling the box lowers the optimum (the energy is unbounded below).
    fn solve_checked(
        &self,
        free: &[String],
        constraints: &[Constraint],
        regime: &Regime,
    ) -> Result<LpSolution> {
        let sol = self.solve(None, BOX).ok_or_else(|| {
            Error::invalid(format!(
                "the constraints [{}] cannot all hold in the regime {{{}}}",
                constraints
                    .iter()
                    .map(|c| c.text.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
                regime.describe()
            ))
        })?;
        if let Some(big) = self.solve(None, 2 * BOX) {
            if big.value != sol.value {
                return Err(Error::invalid(format!(
                    "the energy decreases without bound over the free parameters [{}]; add a constraint (e.g. \"1 <= M <= N\")",
                    free.join(", ")
                )));
            }
        }
        Ok(sol)
    }

    /// The constraint indices that hold with equality at `centre` and whose removal lowers the
    /// optimum `t_star` (binding), and the texts of the other equalities (tight).
    fn binding_and_tight(
        &self,
        constraints: &[Constraint],
        centre: &[Q],
        t_star: Q,
    ) -> (Vec<usize>, Vec<String>) {
        let mut binding_idx = Vec::new();
        let mut tight = Vec::new();
        for (i, r) in self.cons_rows.iter().enumerate() {
            if dot(&r.g, centre) == r.h {
                let relaxed = self.solve(Some(i), BOX).map(|s| s.value);
                if relaxed.is_some_and(|v| v < t_star) {
                    binding_idx.push(i);
                } else {
                    tight.push(constraints[i].text.clone());
                }
            }
        }
        (binding_idx, tight)
    }
}

/// The exact dot product of a row's coefficients with a point.
fn dot(g: &[Q], z: &[Q]) -> Q {
    g.iter()
        .zip(z)
        .map(|(a, b)| a * b)
        .fold(Q::zero(), |s, x| s + x)
}

/// The centre of the optimal face: the mean of its vertices, (x, t) of length k + 1.
fn face_centre(sol: &LpSolution, k: usize) -> Vec<Q> {
    let nv = Q::from_integer(sol.vertices.len() as i64);
    (0..=k)
        .map(|j| {
            sol.vertices
                .iter()
                .map(|v| v[j])
                .fold(Q::zero(), |s, x| s + x)
                / nv
        })
        .collect()
}

/// Each free parameter's optimal exponent range over the face's vertices; an end on the box
/// is reported as unbounded (`None`).
fn argmin_ranges(sol: &LpSolution, free: &[String]) -> BTreeMap<String, ArgRange> {
    let box_q = Q::from_integer(BOX);
    let mut argmin = BTreeMap::new();
    for (j, name) in free.iter().enumerate() {
        let lo = sol
            .vertices
            .iter()
            .map(|v| v[j])
            .min()
            .unwrap_or_else(Q::zero);
        let hi = sol
            .vertices
            .iter()
            .map(|v| v[j])
            .max()
            .unwrap_or_else(Q::zero);
        argmin.insert(
            name.clone(),
            ArgRange {
                lo: (lo > -box_q).then_some(lo),
                hi: (hi < box_q).then_some(hi),
            },
        );
    }
    argmin
}

struct Symbolic {
    energy: Option<Monomial>,
    params: BTreeMap<String, Monomial>,
    valid_when: Vec<String>,
}

/// Solves the balance equations of the optimal basis with the scales left symbolic
/// (spec 01 §1 "Symbolic answers"). Row operations on exponent vectors are monomial
/// operations, so the right-hand sides are carried as monomials in the scales.
#[allow(clippy::too_many_arguments)]
fn symbolic_solution(
    terms: &[Term],
    free: &[String],
    constraints: &[Constraint],
    active: &[usize],
    binding: &[usize],
    term_rows: &[Row],
    cons_rows: &[Row],
    k: usize,
) -> Symbolic {
    let free_set: BTreeSet<&str> = free.iter().map(String::as_str).collect();
    let scale_part = |m: &Monomial| -> Monomial {
        m.iter()
            .filter(|(s, _)| !free_set.contains(s))
            .fold(Monomial::one(), |acc, (s, e)| {
                acc.mul(&Monomial::power(s, e))
            })
    };
    // Candidate equations: binding constraints first (they must hold), then active terms.
    // Equation form: g·(x, t) = rhs, with rhs a monomial in the scales (log-space vector).
    let mut eqs: Vec<(Vec<Q>, Monomial)> = Vec::new();
    for &i in binding {
        let c = &constraints[i];
        eqs.push((
            cons_rows[i].g.clone(),
            scale_part(&c.rhs).div(&scale_part(&c.lhs)),
        ));
    }
    for &i in active {
        eqs.push((term_rows[i].g.clone(), scale_part(&terms[i].monomial).inv()));
    }
    // Pick a maximal linearly independent subset, in order.
    let mut chosen: Vec<(Vec<Q>, Monomial)> = Vec::new();
    for e in eqs {
        let mut trial: Vec<Vec<Q>> = chosen.iter().map(|c| c.0.clone()).collect();
        trial.push(e.0.clone());
        if rank(&trial) == trial.len() {
            chosen.push(e);
        }
        if chosen.len() == k + 1 {
            break;
        }
    }
    let mut out = Symbolic {
        energy: None,
        params: BTreeMap::new(),
        valid_when: Vec::new(),
    };
    if chosen.len() != k + 1 {
        return out; // The optimum is a face: only the numeric ranges are reported.
    }
    let a: Vec<Vec<Q>> = chosen.iter().map(|c| c.0.clone()).collect();
    // Solve column by column of the inverse: z = A⁻¹ rhs, with rhs monomials combined by the
    // same coefficients.
    let n = k + 1;
    let mut inv_cols = Vec::with_capacity(n);
    for j in 0..n {
        let mut e = vec![Q::zero(); n];
        e[j] = Q::one();
        match solve_square(&a, &e) {
            Some(col) => inv_cols.push(col),
            None => return out,
        }
    }
    let value = |var: usize| -> Monomial {
        (0..n).fold(Monomial::one(), |acc, j| {
            acc.mul(&chosen[j].1.pow(inv_cols[j][var]))
        })
    };
    // The rows were g·(x,t) = h with h = −b for terms (t enters with −1): x and t come out
    // as exponents, i.e. x_var = Σ_j (A⁻¹)_{var,j} · log(rhs_j).
    for (j, name) in free.iter().enumerate() {
        out.params.insert(name.clone(), value(j));
    }
    let energy = value(k);
    // Validity: every other row must still hold at the symbolic solution.
    let subst: BTreeMap<String, Monomial> = out.params.clone();
    let mut conds = BTreeSet::new();
    for (i, t) in terms.iter().enumerate() {
        if !active.contains(&i) {
            let ratio = t.monomial.substitute(&subst).div(&energy);
            if let Some(c) = condition(&ratio) {
                conds.insert(c);
            }
        }
    }
    for (i, c) in constraints.iter().enumerate() {
        if !binding.contains(&i) {
            let ratio = c.lhs.substitute(&subst).div(&c.rhs.substitute(&subst));
            if let Some(s) = condition(&ratio) {
                conds.insert(s);
            }
        }
    }
    out.energy = Some(energy);
    out.valid_when = conds.into_iter().collect();
    out
}

/// Turns `ratio <= 1` into a readable condition `big >= small` with integer exponents.
fn condition(ratio: &Monomial) -> Option<String> {
    // Scales grow (each is at least O(1)), so a ratio with only negative exponents is <= 1
    // in every regime and says nothing.
    if ratio.is_one() || ratio.iter().all(|(_, e)| e.is_negative()) {
        return None;
    }
    // Normalise so that the smallest |exponent| denominator pattern becomes integers.
    let l = ratio
        .iter()
        .fold(1i64, |l, (_, e)| num_integer::Integer::lcm(&l, e.denom()));
    let g = ratio.iter().fold(0i64, |g, (_, e)| {
        num_integer::Integer::gcd(&g, &(e * Q::from_integer(l)).to_integer())
    });
    let scale = Q::new(l, g.abs().max(1));
    let r = ratio.pow(scale);
    let num = r
        .iter()
        .filter(|(_, e)| e.is_positive())
        .fold(Monomial::one(), |a, (s, e)| a.mul(&Monomial::power(s, e)));
    let den = r
        .iter()
        .filter(|(_, e)| e.is_negative())
        .fold(Monomial::one(), |a, (s, e)| a.mul(&Monomial::power(s, -e)));
    Some(format!("{den} >= {num}"))
}

fn rank(rows: &[Vec<Q>]) -> usize {
    let mut m = rows.to_vec();
    let cols = m.first().map_or(0, |r| r.len());
    let mut r = 0;
    for c in 0..cols {
        let Some(p) = (r..m.len()).find(|&i| !m[i][c].is_zero()) else {
            continue;
        };
        m.swap(r, p);
        for i in 0..m.len() {
            if i != r && !m[i][c].is_zero() {
                let f = m[i][c] / m[r][c];
                for j in 0..cols {
                    let s = f * m[r][j];
                    m[i][j] -= s;
                }
            }
        }
        r += 1;
    }
    r
}

/// Exponent string (`"4/3"`) and float of a rational.
pub fn exponent_strings(q: &Q) -> (String, f64) {
    (fmt_q(q), *q.numer() as f64 / *q.denom() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::expr::{parse_constraints, parse_posynomial};

    fn terms(src: &str) -> Vec<Term> {
        parse_posynomial(src)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(i, m)| Term {
                label: format!("t{}", i + 1),
                monomial: m,
            })
            .collect()
    }

    fn regime(pairs: &[(&str, &str)]) -> Regime {
        let mut r = Regime::new();
        for (k, v) in pairs {
            r.set_str(k, v).unwrap();
        }
        r
    }

    #[test]
    fn two_layer_specialisation_balances() {
        // App. E.1.1: Ẽ = dM + N/M, M = sqrt(N/d), Ẽ = sqrt(dN).
        let c = parse_constraints("1 <= M <= N").unwrap();
        let m = minimise(
            &terms("M*d + N/M"),
            &["M".into()],
            &c,
            &regime(&[("N", "d^2")]),
        )
        .unwrap();
        assert_eq!(m.exponent, Q::new(3, 2));
        assert_eq!(m.energy_symbolic.to_string(), "sqrt(N*d)");
        assert_eq!(m.argmin_symbolic["M"].to_string(), "sqrt(N/d)");
        assert_eq!(
            m.argmin["M"],
            ArgRange {
                lo: Some(Q::new(1, 2)),
                hi: Some(Q::new(1, 2))
            }
        );
        assert!(m.binding.is_empty());
        assert_eq!(m.valid_when, vec!["N >= d".to_string()]);
    }

    #[test]
    fn lower_bound_binds_for_narrow_networks() {
        // N = d^(1/2): the balance would need M = d^(-1/4) < 1, so 1 <= M binds.
        let c = parse_constraints("1 <= M <= N").unwrap();
        let m = minimise(
            &terms("M*d + N/M"),
            &["M".into()],
            &c,
            &regime(&[("N", "d^(1/2)")]),
        )
        .unwrap();
        assert_eq!(m.exponent, Q::one());
        assert_eq!(m.binding, vec!["1 <= M".to_string()]);
        assert_eq!(m.argmin["M"].lo, Some(Q::zero()));
        assert_eq!(m.active, vec!["t1".to_string()]);
        assert_eq!(m.energy_symbolic.to_string(), "d");
    }

    #[test]
    fn unbounded_and_infeasible_are_errors() {
        let e = minimise(&terms("N/M"), &["M".into()], &[], &regime(&[("N", "d")])).unwrap_err();
        assert!(e.to_string().contains("without bound"), "{e}");
        let c = parse_constraints("N <= M <= d").unwrap();
        let e = minimise(&terms("M"), &["M".into()], &c, &regime(&[("N", "d^2")])).unwrap_err();
        assert!(e.to_string().contains("cannot all hold"), "{e}");
        let e = minimise(&terms("M*K"), &["M".into()], &[], &regime(&[])).unwrap_err();
        assert!(e.to_string().contains("'K'"), "{e}");
    }

    #[test]
    fn flat_directions_are_ranges() {
        // d + M with 1 <= M <= d: any M in [1, d] is optimal.
        let c = parse_constraints("1 <= M <= d").unwrap();
        let m = minimise(&terms("d + M"), &["M".into()], &c, &regime(&[])).unwrap();
        assert_eq!(m.exponent, Q::one());
        assert_eq!(
            m.argmin["M"],
            ArgRange {
                lo: Some(Q::zero()),
                hi: Some(Q::one())
            }
        );
    }

    #[test]
    fn regime_parsing() {
        let mut r = Regime::new();
        r.apply_assignments("N1=d^2, N2=sqrt(d)", "--at").unwrap();
        assert_eq!(r.get("N1"), Some(Q::from_integer(2)));
        assert_eq!(r.get("N2"), Some(Q::new(1, 2)));
        assert!(r.apply_assignments("N1", "--at").is_err());
        assert!(r.apply_assignments("d=N", "--at").is_err());
        assert!(r.apply_assignments("N3=K^2", "--at").is_err());
    }

    /// Each message of a bad `--at` entry names the option once, with the entry at fault, in
    /// the entry's own syntax (`N1=d^2`, not the TOML `N1 = "d^2"` of `[regime]`).
    #[test]
    fn a_bad_assignment_names_the_option_once() {
        let message = |text: &str| {
            Regime::new()
                .apply_assignments(text, "--at")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            message("N1=d, N2"),
            "--at entry \"N2\" has no '='; write e.g. N1=d^2"
        );
        assert_eq!(
            message("N3=K^2"),
            "--at entry \"N3=K^2\" mentions 'K', which has no value; write the value as a power of d, e.g. N3=d^2"
        );
        assert!(message("d=N").starts_with("--at entry \"d=N\" sets 'd', the base"));
        assert!(message("3x=d").starts_with("--at entry \"3x=d\": '3x' is not a scale name"));
        assert!(message("N1=d^(").starts_with("--at entry \"N1=d^(\": "));
        for text in ["N1", "N3=K^2", "d=N", "3x=d", "N1=d^("] {
            assert_eq!(
                message(text).matches("--at").count(),
                1,
                "{}",
                message(text)
            );
        }
        // The TOML wording of `[regime]` is its own.
        let e = Regime::new().set_str("N3", "K^2").unwrap_err().to_string();
        assert!(
            e.starts_with("regime value for N3 = \"K^2\" mentions 'K'"),
            "{e}"
        );
    }
}
