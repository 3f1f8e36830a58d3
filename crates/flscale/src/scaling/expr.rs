//! A small expression language for power-law energies (spec 01 §1, "generic calculator").
//!
//! ```text
//! sum      := product ('+' product)*
//! product  := power (('*' | '/') power)*
//! power    := primary ('^' exponent)?
//! primary  := number | symbol | 'sqrt' '(' sum ')' | '(' sum ')'
//! exponent := ['-'] number | '(' ['-'] number ['/' number] ')'
//! ```
//!
//! Numbers are constants and drop out (only scaling is tracked). Exponents are exact
//! rationals (`d^1.5` is `d^(3/2)`). Because only scaling matters, a power of a sum scales
//! like the sum of the powers, (a + b)^p ≍ a^p + b^p for p > 0, and a product of sums is
//! expanded. Subtraction, division by a sum and negative powers of a sum are rejected: their
//! scaling is not a posynomial (e.g. 1/(a + b) ≍ min(1/a, 1/b)).
//!
//! Every error names the column (1-based) where the problem is.

use num_traits::{Signed, Zero};

use super::monomial::{Monomial, Q};
use crate::error::{Error, Result};

/// Largest numerator/denominator accepted in an exponent; keeps the exact LP arithmetic far
/// from integer overflow.
pub const MAX_EXPONENT_PART: i64 = 10_000;

/// Deepest nesting of parentheses (and `sqrt(`) accepted. The parser descends once per level,
/// so without a bound a few kilobytes of `((((…` overflow the stack of whatever thread parses
/// them (a server worker's 2 MiB died at depth ~2000). No energy or regime needs more than a
/// handful of levels.
pub const MAX_NESTING: usize = 200;

/// Most distinct terms an expression may expand to: a product of sums expands, so
/// `(a+b+…)*(a+b+…)*…` of a few hundred characters could otherwise ask for billions of terms.
pub const MAX_TERMS: usize = 1_000;

/// Longest quotation of the user's expression inside an error message (characters); the
/// column number locates the problem in the full text.
const MAX_QUOTED: usize = 60;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(String),
    Ident(String),
    Op(char),
    LParen,
    RParen,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    col: usize,
}

fn err(src: &str, col: usize, msg: impl std::fmt::Display) -> Error {
    Error::invalid(format!("in \"{}\" at column {col}: {msg}", quoted(src)))
}

/// `src` cut to [`MAX_QUOTED`] characters (with an ellipsis), so that a message about a long
/// expression stays one readable sentence.
fn quoted(src: &str) -> String {
    if src.chars().count() <= MAX_QUOTED {
        return src.to_string();
    }
    let mut out: String = src.chars().take(MAX_QUOTED).collect();
    out.push('…');
    out
}

fn tokenize(src: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Num(chars[start..i].iter().collect()),
                col,
            });
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Ident(chars[start..i].iter().collect()),
                col,
            });
        } else if "+-*/^".contains(c) {
            out.push(Token {
                tok: Tok::Op(c),
                col,
            });
            i += 1;
        } else if c == '(' {
            out.push(Token {
                tok: Tok::LParen,
                col,
            });
            i += 1;
        } else if c == ')' {
            out.push(Token {
                tok: Tok::RParen,
                col,
            });
            i += 1;
        } else {
            return Err(err(src, col, format!("unexpected character '{c}'; allowed are symbols, numbers, + * / ^ ( ) and sqrt(...)")));
        }
    }
    Ok(out)
}

/// Parses a decimal literal such as `3`, `0.25`, `1.5` into an exact rational.
pub fn parse_decimal(s: &str) -> Option<Q> {
    let (int, frac) = match s.split_once('.') {
        Some((a, b)) => (a, b),
        None => (s, ""),
    };
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') || int.len() + frac.len() > 15 {
        return None;
    }
    let digits = format!("{int}{frac}");
    let n: i64 = digits.parse().ok()?;
    let den = 10i64.checked_pow(frac.len() as u32)?;
    Some(Q::new(n, den))
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    /// Open parentheses around the current position (bounded by [`MAX_NESTING`]).
    depth: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    fn col(&self) -> usize {
        self.toks
            .get(self.pos)
            .map(|t| t.col)
            .unwrap_or_else(|| self.src.chars().count() + 1)
    }

    /// Parses `sum ')'` after an opening parenthesis at column `open` (the only place where
    /// the grammar recurses), refusing nesting deeper than [`MAX_NESTING`].
    fn nested_sum(&mut self, open: usize) -> Result<Vec<Monomial>> {
        if self.depth >= MAX_NESTING {
            return Err(Error::invalid(format!(
                "the expression \"{}\" nests deeper than {MAX_NESTING} parentheses at column {open}; flatten it",
                quoted(self.src)
            )));
        }
        self.depth += 1;
        let inner = self.sum();
        self.depth -= 1;
        let inner = inner?;
        self.expect_rparen(open)?;
        Ok(inner)
    }

    /// Refuses a result whose exponents left ±[`MAX_EXPONENT_PART`] in numerator or
    /// denominator. Every operation then starts from parts of at most 10⁴, so none can
    /// overflow i64 (`((d^9999)^9999)^9999` or sixty nested `sqrt` would).
    fn bounded(&self, col: usize, terms: Vec<Monomial>) -> Result<Vec<Monomial>> {
        for t in &terms {
            for (sym, q) in t.iter() {
                if q.numer().abs() > MAX_EXPONENT_PART || *q.denom() > MAX_EXPONENT_PART {
                    return Err(err(
                        self.src,
                        col,
                        format!("the exponent of {sym} becomes {q}, too complex; numerator and denominator must stay at most {MAX_EXPONENT_PART}"),
                    ));
                }
            }
        }
        Ok(terms)
    }

    fn sum(&mut self) -> Result<Vec<Monomial>> {
        let mut terms = self.product()?;
        loop {
            match self.peek() {
                Some(Tok::Op('+')) => {
                    self.pos += 1;
                    for t in self.product()? {
                        if !terms.contains(&t) {
                            terms.push(t);
                        }
                    }
                }
                Some(Tok::Op('-')) => {
                    return Err(err(
                        self.src,
                        self.col(),
                        "subtraction has no power-law scaling; write the energy as a sum of positive terms",
                    ))
                }
                _ => return Ok(terms),
            }
        }
    }

    fn product(&mut self) -> Result<Vec<Monomial>> {
        let mut acc = self.power()?;
        loop {
            match self.peek() {
                Some(Tok::Op('*')) => {
                    self.pos += 1;
                    let col = self.col();
                    let rhs = self.power()?;
                    if acc.len().saturating_mul(rhs.len()) > MAX_TERMS {
                        return Err(err(
                            self.src,
                            col,
                            format!(
                                "this product of sums expands to {} × {} terms; at most {MAX_TERMS} are allowed",
                                acc.len(),
                                rhs.len()
                            ),
                        ));
                    }
                    acc = self.bounded(col, expand_product(&acc, &rhs))?;
                }
                Some(Tok::Op('/')) => {
                    self.pos += 1;
                    let col = self.col();
                    let rhs = self.power()?;
                    if rhs.len() != 1 {
                        return Err(err(
                            self.src,
                            col,
                            "division by a sum has no power-law scaling (1/(a+b) ≍ min(1/a, 1/b)); divide by a single product",
                        ));
                    }
                    let inv = rhs[0].inv();
                    acc = self.bounded(col, acc.iter().map(|t| t.mul(&inv)).collect())?;
                }
                _ => return Ok(acc),
            }
        }
    }

    fn power(&mut self) -> Result<Vec<Monomial>> {
        let base = self.primary()?;
        if let Some(Tok::Op('^')) = self.peek() {
            self.pos += 1;
            let col = self.col();
            let e = self.exponent()?;
            if base.len() > 1 && e.is_negative() {
                return Err(err(
                    self.src,
                    col,
                    "a negative power of a sum has no power-law scaling; raise single products only",
                ));
            }
            return self.bounded(col, base.iter().map(|t| t.pow(e)).collect());
        }
        Ok(base)
    }

    fn exponent(&mut self) -> Result<Q> {
        let col = self.col();
        let paren = matches!(self.peek(), Some(Tok::LParen));
        if paren {
            self.pos += 1;
        }
        let neg = matches!(self.peek(), Some(Tok::Op('-')));
        if neg {
            self.pos += 1;
        }
        let mut q = self.number_literal()?;
        if paren {
            if let Some(Tok::Op('/')) = self.peek() {
                self.pos += 1;
                let den_col = self.col();
                let den = self.number_literal()?;
                if den.is_zero() {
                    return Err(err(self.src, den_col, "division by zero in an exponent"));
                }
                q /= den;
            }
            self.expect_rparen(col)?;
        }
        if neg {
            q = -q;
        }
        if q.numer().abs() > MAX_EXPONENT_PART || *q.denom() > MAX_EXPONENT_PART {
            return Err(err(
                self.src,
                col,
                format!("exponent {q} is too complex; numerator and denominator must be at most {MAX_EXPONENT_PART}"),
            ));
        }
        Ok(q)
    }

    fn number_literal(&mut self) -> Result<Q> {
        let col = self.col();
        match self.toks.get(self.pos).map(|t| t.tok.clone()) {
            Some(Tok::Num(s)) => {
                self.pos += 1;
                parse_decimal(&s)
                    .ok_or_else(|| err(self.src, col, format!("'{s}' is not a number")))
            }
            _ => Err(err(
                self.src,
                col,
                "expected a number (an exponent such as 2, -1, 1.5 or (1/3))",
            )),
        }
    }

    fn expect_rparen(&mut self, open_col: usize) -> Result<()> {
        match self.peek() {
            Some(Tok::RParen) => {
                self.pos += 1;
                Ok(())
            }
            _ => Err(err(
                self.src,
                self.col(),
                format!("expected ')' to close the '(' at column {open_col}"),
            )),
        }
    }

    fn primary(&mut self) -> Result<Vec<Monomial>> {
        let col = self.col();
        match self.toks.get(self.pos).map(|t| t.tok.clone()) {
            Some(Tok::Num(s)) => {
                self.pos += 1;
                let q = parse_decimal(&s)
                    .ok_or_else(|| err(self.src, col, format!("'{s}' is not a number")))?;
                if !q.is_positive() {
                    return Err(err(
                        self.src,
                        col,
                        "a zero constant has no scaling; constants must be > 0",
                    ));
                }
                Ok(vec![Monomial::one()])
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                if name == "sqrt" {
                    if !matches!(self.peek(), Some(Tok::LParen)) {
                        return Err(err(self.src, self.col(), "expected '(' after sqrt"));
                    }
                    let open = self.col();
                    self.pos += 1;
                    let inner = self.nested_sum(open)?;
                    return self.bounded(open, inner.iter().map(|t| t.pow(Q::new(1, 2))).collect());
                }
                if matches!(self.peek(), Some(Tok::LParen)) {
                    return Err(err(
                        self.src,
                        col,
                        format!("unknown function '{name}'; only sqrt(...) is supported"),
                    ));
                }
                Ok(vec![Monomial::symbol(&name)])
            }
            Some(Tok::LParen) => {
                self.pos += 1;
                self.nested_sum(col)
            }
            Some(Tok::Op(c)) => Err(err(
                self.src,
                col,
                format!("unexpected '{c}'; expected a symbol, a number or '('"),
            )),
            Some(Tok::RParen) => Err(err(self.src, col, "unexpected ')'")),
            None => Err(err(self.src, col, "unexpected end of expression")),
        }
    }
}

fn expand_product(a: &[Monomial], b: &[Monomial]) -> Vec<Monomial> {
    let mut out: Vec<Monomial> = Vec::with_capacity(a.len() * b.len());
    for x in a {
        for y in b {
            let p = x.mul(y);
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Parses an energy expression into its distinct terms (a posynomial, constants dropped).
pub fn parse_posynomial(src: &str) -> Result<Vec<Monomial>> {
    let toks = tokenize(src)?;
    if toks.is_empty() {
        return Err(Error::invalid(format!(
            "the expression \"{src}\" is empty; write e.g. \"M*d + N/M\""
        )));
    }
    let mut p = Parser {
        src,
        toks,
        pos: 0,
        depth: 0,
    };
    let terms = p.sum()?;
    if p.pos < p.toks.len() {
        return Err(err(
            src,
            p.col(),
            "unexpected text after the end of the expression",
        ));
    }
    Ok(terms)
}

/// Parses an expression that must be a single monomial (a regime value such as `d^(3/2)`, or a
/// side of a constraint).
pub fn parse_monomial(src: &str) -> Result<Monomial> {
    let terms = parse_posynomial(src)?;
    if terms.len() != 1 {
        return Err(Error::invalid(format!(
            "\"{}\" is a sum of {} terms; a single product of powers is required here",
            quoted(src),
            terms.len()
        )));
    }
    Ok(terms.into_iter().next().unwrap_or_else(Monomial::one))
}

/// A constraint `lhs <= rhs` between monomials (in log-space a linear inequality).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// Smaller side.
    pub lhs: Monomial,
    /// Larger side.
    pub rhs: Monomial,
    /// How the user (or the rule engine) wrote it, for reports.
    pub text: String,
}

impl Constraint {
    /// `lhs <= rhs`.
    pub fn le(lhs: Monomial, rhs: Monomial) -> Self {
        let text = format!("{lhs} <= {rhs}");
        Constraint { lhs, rhs, text }
    }
}

/// Parses a chain of comparisons such as `1 <= M <= N`, `D >= 1`, `beta <= N2` into
/// constraints of the form `lhs <= rhs` (strict and non-strict comparisons mean the same for
/// scaling; `=` gives two constraints).
pub fn parse_constraints(src: &str) -> Result<Vec<Constraint>> {
    let chars: Vec<char> = src.chars().collect();
    let mut parts: Vec<(String, usize)> = Vec::new();
    let mut ops: Vec<(String, usize)> = Vec::new();
    let mut cur = String::new();
    let mut cur_col = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '<' || c == '>' || c == '=' {
            let mut op = c.to_string();
            if i + 1 < chars.len() && chars[i + 1] == '=' {
                op.push('=');
                i += 1;
            }
            parts.push((std::mem::take(&mut cur), cur_col));
            ops.push((op, i + 1));
            cur_col = i + 2;
        } else {
            cur.push(c);
        }
        i += 1;
    }
    parts.push((cur, cur_col));
    if ops.is_empty() {
        return Err(Error::invalid(format!(
            "constraint \"{}\" has no comparison; write e.g. \"1 <= M <= N\" or \"D >= 1\"",
            quoted(src)
        )));
    }
    let mut sides = Vec::with_capacity(parts.len());
    for (text, col) in &parts {
        if text.trim().is_empty() {
            return Err(Error::invalid(format!(
                "in constraint \"{}\" at column {col}: a side of the comparison is empty",
                quoted(src)
            )));
        }
        let m = parse_monomial(text).map_err(|e| {
            e.context(format!(
                "in constraint \"{}\" (side starting at column {col})",
                quoted(src)
            ))
        })?;
        sides.push((m, text.trim().to_string()));
    }
    let mut out = Vec::new();
    for (k, (op, _col)) in ops.iter().enumerate() {
        let (a, at) = &sides[k];
        let (b, bt) = &sides[k + 1];
        let mk = |lo: &Monomial, lt: &str, hi: &Monomial, ht: &str| Constraint {
            lhs: lo.clone(),
            rhs: hi.clone(),
            text: format!("{lt} <= {ht}"),
        };
        match op.as_str() {
            "<" | "<=" => out.push(mk(a, at, b, bt)),
            ">" | ">=" => out.push(mk(b, bt, a, at)),
            "=" | "==" => {
                out.push(mk(a, at, b, bt));
                out.push(mk(b, bt, a, at));
            }
            other => {
                return Err(Error::invalid(format!(
                    "constraint \"{}\": unknown comparison '{other}'",
                    quoted(src)
                )))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_energies() {
        let t = parse_posynomial("M*d + N/M").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].to_string(), "M*d");
        assert_eq!(t[1].to_string(), "N/M");
        let t = parse_posynomial("2*sqrt(N2*d) + d^3").unwrap();
        assert_eq!(t[0].to_string(), "sqrt(N2*d)");
        assert_eq!(t[1].to_string(), "d^3");
        let t = parse_posynomial("(N1*N2*d)^(1/3)").unwrap();
        assert_eq!(t[0].to_string(), "(N1*N2*d)^(1/3)");
        let t = parse_posynomial("d^1.5 * L^-1").unwrap();
        assert_eq!(t[0].to_string(), "d^(3/2)/L");
        // Products of sums expand; powers of sums distribute (scaling only).
        let t = parse_posynomial("(a + b)*(c + d)").unwrap();
        assert_eq!(t.len(), 4);
        let t = parse_posynomial("(N + d)^2").unwrap();
        assert_eq!(
            t.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
            ["N^2", "d^2"]
        );
    }

    #[test]
    fn errors_name_the_column() {
        let e = parse_posynomial("M*d - N").unwrap_err().to_string();
        assert!(e.contains("column 5") && e.contains("subtraction"), "{e}");
        let e = parse_posynomial("M*(d + N").unwrap_err().to_string();
        assert!(e.contains("column 9") && e.contains("')'"), "{e}");
        let e = parse_posynomial("N/(M + d)").unwrap_err().to_string();
        assert!(
            e.contains("column 3") && e.contains("division by a sum"),
            "{e}"
        );
        let e = parse_posynomial("d^x").unwrap_err().to_string();
        assert!(e.contains("column 3"), "{e}");
        let e = parse_posynomial("d $ 2").unwrap_err().to_string();
        assert!(e.contains("column 3") && e.contains("'$'"), "{e}");
        assert!(parse_posynomial("").is_err());
        assert!(parse_posynomial("0*d").is_err());
        assert!(parse_posynomial("d^(1/0)").is_err());
        assert!(parse_posynomial("log(d)").is_err());
    }

    #[test]
    fn parses_constraints() {
        let c = parse_constraints("1 <= M <= N").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].lhs, Monomial::one());
        assert_eq!(c[0].rhs, Monomial::symbol("M"));
        assert_eq!(c[1].rhs, Monomial::symbol("N"));
        let c = parse_constraints("D >= 1").unwrap();
        assert_eq!(c[0].lhs, Monomial::one());
        assert_eq!(c[0].rhs, Monomial::symbol("D"));
        assert!(parse_constraints("M").is_err());
        assert!(parse_constraints("<= M").is_err());
        assert!(parse_constraints("M + d <= N").is_err());
    }

    /// The `i`-th opening of [`nested`]: `sqrt(` at every 16th level when `sqrt` is set (13
    /// halvings in 200 levels keep the exponent's denominator under 10⁴), else `(`.
    fn opening(i: usize, sqrt: bool) -> &'static str {
        if sqrt && i % 16 == 1 {
            "sqrt("
        } else {
            "("
        }
    }

    /// `depth` nested parentheses around `d` (some of them `sqrt(`, see [`opening`]).
    fn nested(depth: usize, sqrt: bool) -> String {
        let open: String = (0..depth).map(|i| opening(i, sqrt)).collect();
        format!("{open}d{}", ")".repeat(depth))
    }

    /// The deepest accepted nesting parses on a thread with the 2 MiB stack of a server's
    /// blocking pool, and anything far deeper is one short sentence, not a stack overflow.
    #[test]
    fn nesting_is_bounded_and_the_bound_fits_a_small_stack() {
        let ok = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                parse_monomial(&nested(MAX_NESTING, true)).map(|m| m.to_string())?;
                parse_constraints(&format!("1 <= {}", nested(MAX_NESTING, false)))?;
                parse_monomial(&nested(MAX_NESTING + 1, false)).map(|m| m.to_string())
            })
            .unwrap()
            .join()
            .unwrap();
        let e = ok.unwrap_err().to_string();
        assert!(
            e.contains("nests deeper than 200 parentheses at column 201; flatten it"),
            "{e}"
        );
        for depth in [2_000, 60_000] {
            let e = parse_monomial(&format!("N1*{}", nested(depth, false)))
                .unwrap_err()
                .to_string();
            assert!(e.contains("at column 204"), "{e}");
            assert!(
                e.chars().count() < 250,
                "{} characters: {e}",
                e.chars().count()
            );
        }
        let e = parse_constraints(&format!("M <= {}", nested(5_000, true)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nests deeper") && e.chars().count() < 400, "{e}");
    }

    #[test]
    fn exponents_and_expansions_stay_bounded() {
        for src in ["((d^9999)^9999)^9999", "(d^100)^101", "(d^(1/100))^(1/101)"] {
            let e = parse_posynomial(src).unwrap_err().to_string();
            assert!(e.contains("too complex"), "{src}: {e}");
        }
        assert_eq!(
            parse_monomial("(d^100)^100").unwrap().exponent("d"),
            Q::from_integer(10_000)
        );
        let sum = (0..12)
            .map(|i| format!("a{i}"))
            .collect::<Vec<_>>()
            .join("+");
        let src = vec![format!("({sum})"); 8].join("*");
        let t = std::time::Instant::now();
        let e = parse_posynomial(&src).unwrap_err().to_string();
        assert!(e.contains("at most 1000 are allowed"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }

    proptest! {
        /// Nesting up to the bound gives the inner expression's scaling (each `sqrt` halves the
        /// exponent, plain parentheses change nothing); beyond it, an error naming the column of
        /// the first parenthesis too many.
        #[test]
        fn nesting_depth_is_accepted_up_to_the_bound(depth in 0usize..(MAX_NESTING + 60), sqrt in any::<bool>(), lead in 0usize..4) {
            let prefix = "M*".repeat(lead);
            let src = format!("{prefix}{}", nested(depth, sqrt));
            match parse_monomial(&src) {
                Ok(m) => {
                    prop_assert!(depth <= MAX_NESTING);
                    let halvings = (0..depth).filter(|&i| opening(i, sqrt) != "(").count();
                    prop_assert_eq!(m.exponent("d"), Q::new(1, 1i64 << halvings));
                    prop_assert_eq!(m.exponent("M"), Q::from_integer(lead as i64));
                }
                Err(e) => {
                    prop_assert!(depth > MAX_NESTING, "{}", e);
                    // Column of the (MAX_NESTING + 1)-th opening's parenthesis.
                    let col = 2 * lead + (0..=MAX_NESTING).map(|i| opening(i, sqrt).len()).sum::<usize>();
                    let needle = format!("nests deeper than {MAX_NESTING} parentheses at column {col}; flatten it");
                    let msg = e.to_string();
                    prop_assert!(msg.contains(&needle), "{}", msg);
                }
            }
        }

        #[test]
        fn random_text_never_panics(s in "\\PC{0,40}") {
            let _ = parse_posynomial(&s);
            let _ = parse_constraints(&s);
        }

        #[test]
        fn grammar_shaped_text_never_panics(s in "[a-zA-Z0-9_ +*/^().<=>-]{0,40}") {
            if let Err(e) = parse_posynomial(&s) {
                prop_assert!(e.to_string().contains("column") || e.to_string().contains("empty") || e.to_string().contains("sum of"));
            }
            let _ = parse_constraints(&s);
        }

        #[test]
        fn product_exponents_add(a in -20i64..20, b in -20i64..20, c in 1i64..9, e in 1i64..9) {
            let src = format!("d^({a}/{c}) * d^({b}/{e})");
            let m = parse_monomial(&src).unwrap();
            prop_assert_eq!(m.exponent("d"), Q::new(a, c) + Q::new(b, e));
        }
    }
}
