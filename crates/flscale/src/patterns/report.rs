//! The prediction as a table for people (like the paper's Table 1, for any architecture) and
//! as one JSON object for programs (spec 01 §6).

use serde_json::{json, Map, Value};

use super::fcn::feature_name;
use super::predict::{PatternResult, Prediction};
use crate::scaling::energy::{exponent_strings, BASE};
use crate::scaling::{fmt_q, Minimum, Monomial, Q};

fn argmin_text(min: &Minimum, name: &str) -> String {
    match (min.argmin_symbolic.get(name), min.argmin.get(name)) {
        (Some(sym), Some(r)) if r.lo.is_some() && r.lo == r.hi => sym.to_string(),
        (_, Some(r)) => r.describe(),
        _ => "?".to_string(),
    }
}

fn pattern_json(p: &PatternResult, paper: &[String]) -> Value {
    let layers: Vec<Value> = p
        .layers
        .iter()
        .map(|l| {
            json!({
                "layer": l.layer,
                "kind": l.kind.short(),
                "feature": l.feature.map(feature_name),
                "parameter": l.parameter,
            })
        })
        .collect();
    let mut obj = Map::new();
    obj.insert("name".into(), json!(p.name));
    obj.insert("paper".into(), json!(paper.contains(&p.name)));
    obj.insert("paper_kind".into(), json!(Prediction::is_paper_kind(p)));
    obj.insert("layers".into(), Value::Array(layers));
    if let Some(d) = &p.description {
        obj.insert("description".into(), json!(d));
    }
    let terms: Map<String, Value> = p
        .terms
        .iter()
        .map(|(l, m)| (l.clone(), json!(m.to_string())))
        .collect();
    obj.insert("terms".into(), Value::Object(terms));
    let routes: Map<String, Value> = p
        .routes
        .iter()
        .map(|(l, r)| (l.clone(), json!(r)))
        .collect();
    obj.insert("routes".into(), Value::Object(routes));
    obj.insert("energy".into(), json!(p.energy_expression()));
    obj.insert("free".into(), json!(p.free));
    obj.insert(
        "constraints".into(),
        json!(p
            .constraints
            .iter()
            .map(|c| c.text.clone())
            .collect::<Vec<_>>()),
    );
    match &p.minimum {
        Some(min) => {
            let (e, f) = exponent_strings(&min.exponent);
            obj.insert("exponent".into(), json!(e));
            obj.insert("exponent_float".into(), json!(f));
            obj.insert("optimum".into(), json!(min.energy_symbolic.to_string()));
            let argmin: Map<String, Value> = p
                .free
                .iter()
                .map(|n| (n.clone(), json!(argmin_text(min, n))))
                .collect();
            obj.insert("argmin".into(), Value::Object(argmin));
            let argexp: Map<String, Value> = min
                .argmin
                .iter()
                .map(|(n, r)| {
                    (
                        n.clone(),
                        json!({"lo": r.lo.map(|q| fmt_q(&q)), "hi": r.hi.map(|q| fmt_q(&q))}),
                    )
                })
                .collect();
            obj.insert("argmin_exponents".into(), Value::Object(argexp));
            let te: Map<String, Value> = min
                .term_exponents
                .iter()
                .map(|(l, q)| (l.clone(), json!(fmt_q(q))))
                .collect();
            obj.insert("term_exponents".into(), Value::Object(te));
            obj.insert("active".into(), json!(min.active));
            obj.insert("binding".into(), json!(min.binding));
            obj.insert("tight".into(), json!(min.tight));
            obj.insert("valid_when".into(), json!(min.valid_when));
            obj.insert("infinite".into(), Value::Null);
        }
        None => {
            obj.insert("exponent".into(), Value::Null);
            obj.insert("exponent_float".into(), Value::Null);
            obj.insert("optimum".into(), json!("infinite"));
            obj.insert("argmin".into(), json!({}));
            obj.insert("binding".into(), json!([]));
            obj.insert("infinite".into(), json!(p.infinite_reason));
        }
    }
    Value::Object(obj)
}

/// The prediction as one JSON object: `regime`, `patterns`, `winners` (every pattern tied at
/// the smallest exponent), `simplest_winners` (those the `reading` names: of the paper's kinds
/// when any is tied, with the fewest feature-learning layers), `paper_patterns`,
/// `p_star_exponent`, `no_winner_reason`, ...
pub fn to_json(p: &Prediction) -> Value {
    let regime: Map<String, Value> = p
        .regime
        .iter()
        .map(|(k, v)| (k.to_string(), json!(fmt_q(&v))))
        .collect();
    let (pe, pf) = match &p.p_star_exponent {
        Some(q) => {
            let (s, f) = exponent_strings(q);
            (json!(s), json!(f))
        }
        None => (Value::Null, Value::Null),
    };
    json!({
        "title": p.title,
        "source": p.source,
        "parsed": p.parsed,
        "regime": regime,
        "patterns": p.patterns.iter().map(|x| pattern_json(x, &p.paper_patterns)).collect::<Vec<_>>(),
        "winners": p.winners,
        "simplest_winners": p.simplest_winners().iter().map(|w| w.name.clone()).collect::<Vec<_>>(),
        "paper_table": p.paper_table,
        "paper_patterns": p.paper_patterns,
        "p_star_exponent": pe,
        "p_star_exponent_float": pf,
        "no_winner_reason": p.no_winner_reason,
        "reading": p.reading(),
    })
}

fn render_table(rows: &[Vec<String>]) -> String {
    let ncol = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..ncol)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let line: Vec<String> = (0..ncol)
            .map(|c| {
                let s = r.get(c).cloned().unwrap_or_default();
                let pad = widths[c] - s.chars().count();
                format!("{s}{}", " ".repeat(pad))
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            out.push_str(
                &widths
                    .iter()
                    .map(|w| "-".repeat(*w))
                    .collect::<Vec<_>>()
                    .join("  "),
            );
            out.push('\n');
        }
    }
    out
}

/// Whether a pattern belongs in the compact table: the paper's kinds (GP, GFL, Sp on Φ,
/// Mag on the target) and catalog entries; muSp and patterns on other features are shown
/// with `all`.
fn in_compact_view(p: &PatternResult) -> bool {
    p.layers.is_empty() || Prediction::is_paper_kind(p)
}

/// The lines under the table on ties and on the patterns it leaves out: `winners` patterns
/// tie at the smallest exponent `exponent`; `hidden` patterns with a finite energy are not
/// shown, `hidden_tied` of them winners. Empty when there is nothing to say (at most one
/// winner and every pattern shown); a count of one reads as one pattern, not "1 patterns".
fn ties_and_hidden(
    winners: usize,
    exponent: Option<Q>,
    hidden: usize,
    hidden_tied: usize,
) -> String {
    let more = "muSp, or feature learning on features other than Phi / the target; `--all` lists them, docs/scaling.md explains the names";
    match exponent {
        Some(exp) if winners > 1 => {
            let shown = match winners - hidden_tied {
                0 => "none".to_string(),
                n => n.to_string(),
            };
            let rest = match (hidden, hidden_tied) {
                (0, _) => String::new(),
                (1, 1) => format!(", and the one pattern not shown ({more})"),
                (1, _) => format!("; the one pattern not shown does not tie ({more})"),
                (2, 0) => format!("; neither of the 2 patterns not shown ties ({more})"),
                (h, 0) => format!("; none of the {h} patterns not shown ties ({more})"),
                (2, 2) => format!(", and both patterns not shown ({more})"),
                (h, t) if t == h => format!(", and all {h} patterns not shown ({more})"),
                (h, t) => format!(", and {t} of the {h} patterns not shown ({more})"),
            };
            format!(
                "\n* {winners} patterns tie at the smallest exponent, Ẽ ∝ {}: {shown} in this table{rest}\n",
                Monomial::power(BASE, exp),
            )
        }
        _ => match (hidden, hidden_tied) {
            (0, _) => String::new(),
            (1, 0) => format!("\n1 more pattern is not shown ({more})\n"),
            (1, _) => format!("\n1 more pattern, the winner, is not shown ({more})\n"),
            (h, 0) => format!("\n{h} more patterns are not shown ({more})\n"),
            (h, _) => {
                format!("\n{h} more patterns are not shown, the winner among them ({more})\n")
            }
        },
    }
}

/// The prediction as text: the title with what was parsed, a Table-1-like table sorted by Ẽ
/// (ties: fewer feature-learning layers first) with the winners marked `*` and the paper's
/// rows named, how many patterns tie and where the rest are, the binding constraints and a
/// one-line reading. `all = false` shows the paper's kinds of pattern only and counts the
/// rest.
pub fn to_text(p: &Prediction, all: bool) -> String {
    let shown = |x: &PatternResult| all || in_compact_view(x);
    let mut labels: Vec<String> = Vec::new();
    for pat in &p.patterns {
        for (l, _) in &pat.terms {
            if !labels.contains(l) {
                labels.push(l.clone());
            }
        }
    }
    // a_y last, as in the paper's table.
    labels.sort_by_key(|l| (l.starts_with("a_y"), l.clone()));
    let mut order: Vec<&PatternResult> = p
        .patterns
        .iter()
        .filter(|x| x.minimum.is_some() && shown(x))
        .collect();
    order.sort_by_key(|x| {
        (
            x.minimum.as_ref().map(|m| m.exponent),
            Prediction::feature_learning_layers(x),
        )
    });
    let mut rows = vec![{
        let mut h = vec!["pattern".to_string()];
        h.extend(labels.iter().cloned());
        h.extend([
            "minimising parameters".to_string(),
            "Ẽ".to_string(),
            "Ẽ ∝".to_string(),
        ]);
        if p.paper_table.is_some() {
            h.push("paper".to_string());
        }
        h
    }];
    for pat in &order {
        let Some(min) = &pat.minimum else { continue };
        let mark = if p.winners.contains(&pat.name) {
            "* "
        } else {
            "  "
        };
        let mut row = vec![format!("{mark}{}", pat.name)];
        for l in &labels {
            row.push(
                pat.terms
                    .iter()
                    .find(|(x, _)| x == l)
                    .map_or("0".to_string(), |(_, m)| m.to_string()),
            );
        }
        let params: Vec<String> = pat
            .free
            .iter()
            .map(|n| format!("{n} = {}", argmin_text(min, n)))
            .collect();
        row.push(if params.is_empty() {
            "-".to_string()
        } else {
            params.join(", ")
        });
        row.push(min.energy_symbolic.to_string());
        row.push(Monomial::power(BASE, min.exponent).to_string());
        if let Some(table) = &p.paper_table {
            row.push(if p.paper_patterns.contains(&pat.name) {
                table.clone()
            } else {
                String::new()
            });
        }
        rows.push(row);
    }
    let regime = p.regime.describe();
    let mut out = format!("{}\n", p.title);
    if !p.parsed.is_empty() && p.parsed != p.title {
        out.push_str(&format!("parsed: {}\n", p.parsed));
    }
    if !p.source.is_empty() {
        out.push_str(&format!("from: {}\n", p.source));
    }
    out.push_str(&format!(
        "regime: {}\n\n",
        if regime.is_empty() { "d" } else { &regime }
    ));
    if order.is_empty() {
        out.push_str(if p.p_star_exponent.is_none() {
            "no pattern has a finite energy, so there is no table\n"
        } else {
            "no pattern of the paper's kinds has a finite energy; --all shows the others\n"
        });
    } else {
        out.push_str(&render_table(&rows));
    }
    let hidden: Vec<&PatternResult> = p
        .patterns
        .iter()
        .filter(|x| x.minimum.is_some() && !shown(x))
        .collect();
    let hidden_tied = hidden
        .iter()
        .filter(|x| p.winners.contains(&x.name))
        .count();
    out.push_str(&ties_and_hidden(
        p.winners.len(),
        p.p_star_exponent,
        hidden.len(),
        hidden_tied,
    ));
    if let (Some(table), false) = (&p.paper_table, order.is_empty()) {
        out.push_str(&format!(
            "paper: the rows of the paper's {table} for this network and target ({})\n",
            p.paper_patterns.join(", ")
        ));
    }
    let infinite: Vec<&str> = p
        .patterns
        .iter()
        .filter(|x| x.minimum.is_none() && shown(x))
        .map(|x| x.name.as_str())
        .collect();
    if !infinite.is_empty() {
        out.push_str(&format!(
            "\ncannot align with the target (infinite Ẽ): {}\n",
            infinite.join(", ")
        ));
    }
    out.push('\n');
    for w in p.simplest_winners() {
        let Some(min) = &w.minimum else { continue };
        if !min.binding.is_empty() {
            out.push_str(&format!(
                "{}: binding constraint(s) {}\n",
                w.name,
                min.binding.join(", ")
            ));
        }
        if !min.valid_when.is_empty() {
            out.push_str(&format!(
                "{}: the symbolic optimum holds while {}\n",
                w.name,
                min.valid_when.join(", ")
            ));
        }
    }
    out.push_str(&p.reading());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sentence under the table for 0, 1, 2 and many patterns left out, with and without
    /// ties: no "1 patterns", no "1 among the 1", nothing at all when nothing is left out.
    #[test]
    fn the_tie_and_hidden_sentence_reads_for_every_count() {
        let d = Some(Q::from_integer(1));
        let more = "(muSp, or feature learning";
        // One winner (or none), nothing hidden: nothing to say.
        assert_eq!(ties_and_hidden(1, d, 0, 0), "");
        assert_eq!(ties_and_hidden(0, None, 0, 0), "");
        let one = ties_and_hidden(1, d, 1, 0);
        assert!(
            one.starts_with("\n1 more pattern is not shown (muSp"),
            "{one}"
        );
        let the_winner = ties_and_hidden(1, d, 1, 1);
        assert!(
            the_winner.starts_with("\n1 more pattern, the winner, is not shown"),
            "{the_winner}"
        );
        let two = ties_and_hidden(1, d, 2, 0);
        assert!(
            two.starts_with("\n2 more patterns are not shown (muSp"),
            "{two}"
        );
        let many = ties_and_hidden(1, d, 24, 1);
        assert!(
            many.starts_with("\n24 more patterns are not shown, the winner among them (muSp"),
            "{many}"
        );
        // Ties: the count in the table, then what the hidden patterns hold.
        let head = "\n* 5 patterns tie at the smallest exponent, Ẽ ∝ d: ";
        assert_eq!(
            ties_and_hidden(5, d, 0, 0),
            format!("{head}5 in this table\n")
        );
        let cases = [
            (
                1,
                0,
                "5 in this table; the one pattern not shown does not tie ",
            ),
            (1, 1, "4 in this table, and the one pattern not shown "),
            (
                2,
                0,
                "5 in this table; neither of the 2 patterns not shown ties ",
            ),
            (2, 1, "4 in this table, and 1 of the 2 patterns not shown "),
            (2, 2, "3 in this table, and both patterns not shown "),
            (
                24,
                0,
                "5 in this table; none of the 24 patterns not shown ties ",
            ),
        ];
        for (hidden, tied, text) in cases {
            let s = ties_and_hidden(5, d, hidden, tied);
            assert!(s.starts_with(&format!("{head}{text}{more}")), "{s}");
            assert!(s.ends_with("the names)\n"), "{s}");
        }
        let many = ties_and_hidden(20, d, 24, 15);
        assert!(
            many.starts_with(
                "\n* 20 patterns tie at the smallest exponent, Ẽ ∝ d: 5 in this table, and 15 of the 24 patterns not shown (muSp"
            ),
            "{many}"
        );
        let all_hidden = ties_and_hidden(3, d, 3, 3);
        assert!(
            all_hidden.contains(": none in this table, and all 3 patterns not shown ("),
            "{all_hidden}"
        );
        for s in [one, two, many, all_hidden] {
            assert!(
                !s.contains("1 patterns") && !s.contains("pattern(s)"),
                "{s}"
            );
        }
    }
}
