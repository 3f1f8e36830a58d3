//! Monomials Π s^e with exact rational exponents, over named symbols (scales such as `d`,
//! `N1`, and free parameters such as `M`, `beta`). Constants are dropped: the scaling
//! heuristic (paper §4–5) only tracks how quantities grow, so `2·M·d` and `M·d` are the same
//! monomial.

use std::collections::BTreeMap;
use std::fmt;

use num_integer::Integer;
use num_traits::{One, Signed, Zero};

/// Exact rational numbers used for every exponent.
pub type Q = num_rational::Ratio<i64>;

/// Formats a rational as `3`, `-1/2`.
pub fn fmt_q(q: &Q) -> String {
    if q.is_integer() {
        q.numer().to_string()
    } else {
        format!("{}/{}", q.numer(), q.denom())
    }
}

/// A product of symbols raised to rational powers (zero exponents are never stored).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Monomial {
    exps: BTreeMap<String, Q>,
}

impl Monomial {
    /// The constant monomial 1.
    pub fn one() -> Self {
        Monomial::default()
    }

    /// The symbol `name` to the first power.
    pub fn symbol(name: &str) -> Self {
        Monomial::power(name, Q::one())
    }

    /// `name^e`.
    pub fn power(name: &str, e: Q) -> Self {
        let mut m = Monomial::one();
        if !e.is_zero() {
            m.exps.insert(name.to_string(), e);
        }
        m
    }

    /// The exponent of `name` (0 if absent).
    pub fn exponent(&self, name: &str) -> Q {
        self.exps.get(name).copied().unwrap_or_else(Q::zero)
    }

    /// Iterates over (symbol, exponent) pairs with non-zero exponent, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Q)> {
        self.exps.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// True for the constant monomial.
    pub fn is_one(&self) -> bool {
        self.exps.is_empty()
    }

    /// The product `self · other` (exponents add).
    pub fn mul(&self, other: &Monomial) -> Monomial {
        let mut out = self.clone();
        for (k, v) in &other.exps {
            let e = out.exponent(k) + v;
            if e.is_zero() {
                out.exps.remove(k);
            } else {
                out.exps.insert(k.clone(), e);
            }
        }
        out
    }

    /// `self^p` (exponents scale by p).
    pub fn pow(&self, p: Q) -> Monomial {
        if p.is_zero() {
            return Monomial::one();
        }
        Monomial {
            exps: self.exps.iter().map(|(k, v)| (k.clone(), v * p)).collect(),
        }
    }

    /// `1/self`.
    pub fn inv(&self) -> Monomial {
        self.pow(-Q::one())
    }

    /// `self / other`.
    pub fn div(&self, other: &Monomial) -> Monomial {
        self.mul(&other.inv())
    }

    /// Replaces each symbol that `subst` knows by its monomial (e.g. `N → d^2`).
    pub fn substitute(&self, subst: &BTreeMap<String, Monomial>) -> Monomial {
        let mut out = Monomial::one();
        for (k, e) in &self.exps {
            match subst.get(k) {
                Some(m) => out = out.mul(&m.pow(*e)),
                None => out = out.mul(&Monomial::power(k, *e)),
            }
        }
        out
    }

    /// Symbols with a non-zero exponent.
    pub fn symbols(&self) -> impl Iterator<Item = &str> {
        self.exps.keys().map(|k| k.as_str())
    }
}

/// Display order of symbols: the paper writes `N1*N2*d`, `M2*d`, `N1*beta/M1`: scales and
/// parameters alphabetically (capitals first), with `d` last.
fn symbol_order(a: &str, b: &str) -> std::cmp::Ordering {
    (a == "d", a).cmp(&(b == "d", b))
}

fn join_factors(factors: &[(&str, Q)]) -> String {
    factors
        .iter()
        .map(|(s, e)| {
            if e.is_one() {
                s.to_string()
            } else if *e == Q::new(1, 2) {
                format!("sqrt({s})")
            } else if e.is_integer() {
                format!("{s}^{}", e.numer())
            } else {
                format!("{s}^({})", fmt_q(e))
            }
        })
        .collect::<Vec<_>>()
        .join("*")
}

/// `num/den` from signed integer-or-rational exponents: `N2^2/(N1*d)`, `N/M`, `1/d`.
fn quotient(entries: &[(&str, Q)]) -> String {
    let num: Vec<(&str, Q)> = entries
        .iter()
        .filter(|(_, e)| e.is_positive())
        .cloned()
        .collect();
    let den: Vec<(&str, Q)> = entries
        .iter()
        .filter(|(_, e)| e.is_negative())
        .map(|(s, e)| (*s, -e))
        .collect();
    let num_s = if num.is_empty() {
        "1".to_string()
    } else {
        join_factors(&num)
    };
    match den.len() {
        0 => num_s,
        1 => format!("{num_s}/{}", join_factors(&den)),
        _ => format!("{num_s}/({})", join_factors(&den)),
    }
}

/// Writes a monomial the way the paper does: `sqrt(N2*d)`, `(N1*N2*d)^(1/3)`,
/// `(N2^2/(N1*d))^(1/3)`, `d^(3/2)`, `N/M`, `1/d`.
///
/// The exponents are factored as r·(integers) with r the largest positive rational that
/// divides them all; the integer-exponent inner monomial is then raised to r.
impl fmt::Display for Monomial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exps.is_empty() {
            return f.write_str("1");
        }
        let mut entries: Vec<(&str, Q)> = self.iter().collect();
        entries.sort_by(|a, b| symbol_order(a.0, b.0));
        if entries.len() == 1 {
            let (s, e) = entries[0];
            return if e.is_one() {
                f.write_str(s)
            } else if e == -Q::one() {
                write!(f, "1/{s}")
            } else if e == Q::new(1, 2) {
                write!(f, "sqrt({s})")
            } else if e.is_integer() {
                write!(f, "{s}^{}", e.numer())
            } else {
                write!(f, "{s}^({})", fmt_q(&e))
            };
        }
        // With an integer exponent among them, factor-wise reads best (`d^(3/2)/L`).
        if entries.iter().any(|(_, e)| e.is_integer()) {
            return f.write_str(&quotient(&entries));
        }
        // r = gcd(numerators) / lcm(denominators) > 0.
        let g_num = entries.iter().fold(0i64, |g, (_, e)| g.gcd(e.numer()));
        let l_den = entries.iter().fold(1i64, |l, (_, e)| l.lcm(e.denom()));
        let r = Q::new(g_num.abs(), l_den);
        let scaled: Vec<(&str, Q)> = entries.iter().map(|(s, e)| (*s, e / r)).collect();
        let inner = quotient(&scaled);
        if r.is_one() {
            f.write_str(&inner)
        } else if r == Q::new(1, 2) {
            write!(f, "sqrt({inner})")
        } else {
            write!(f, "({inner})^({})", fmt_q(&r))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(parts: &[(&str, i64, i64)]) -> Monomial {
        parts.iter().fold(Monomial::one(), |acc, (s, n, d)| {
            acc.mul(&Monomial::power(s, Q::new(*n, *d)))
        })
    }

    #[test]
    fn prints_like_the_paper() {
        assert_eq!(m(&[("N2", 1, 2), ("d", 1, 2)]).to_string(), "sqrt(N2*d)");
        assert_eq!(
            m(&[("N1", 1, 3), ("N2", 1, 3), ("d", 1, 3)]).to_string(),
            "(N1*N2*d)^(1/3)"
        );
        assert_eq!(
            m(&[("N2", 2, 3), ("N1", -1, 3), ("d", -1, 3)]).to_string(),
            "(N2^2/(N1*d))^(1/3)"
        );
        assert_eq!(m(&[("N2", 1, 2), ("d", -1, 2)]).to_string(), "sqrt(N2/d)");
        assert_eq!(m(&[("d", 3, 2)]).to_string(), "d^(3/2)");
        assert_eq!(m(&[("d", 3, 1)]).to_string(), "d^3");
        assert_eq!(m(&[("N", 1, 1), ("M", -1, 1)]).to_string(), "N/M");
        assert_eq!(m(&[("d", -1, 1)]).to_string(), "1/d");
        assert_eq!(m(&[("N", 2, 3), ("d", 2, 3)]).to_string(), "(N*d)^(2/3)");
        assert_eq!(m(&[("M1", 1, 1), ("d", 1, 1)]).to_string(), "M1*d");
        assert_eq!(Monomial::one().to_string(), "1");
    }

    #[test]
    fn algebra_laws() {
        let a = m(&[("d", 1, 2), ("N", 3, 1)]);
        let b = m(&[("d", -1, 3), ("M", 1, 1)]);
        assert_eq!(a.mul(&b).exponent("d"), Q::new(1, 6));
        assert_eq!(a.mul(&a.inv()), Monomial::one());
        assert_eq!(a.pow(Q::new(2, 1)), a.mul(&a));
        assert_eq!(
            a.mul(&b).pow(Q::new(1, 3)),
            a.pow(Q::new(1, 3)).mul(&b.pow(Q::new(1, 3)))
        );
    }
}
