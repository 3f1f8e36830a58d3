//! `flscale energy`: minimise a power-law energy over free parameters, exactly.

use flscale::scaling::energy::exponent_strings;
use flscale::scaling::{fmt_q, minimise, parse_constraints, parse_posynomial, Regime, Term};
use flscale::{Error, Result};
use serde_json::json;

use super::{out, out_json, Ctx};

/// Arguments of `flscale energy`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  flscale energy \"M*d + N/M\" --free M --constraint \"1<=M<=N\" --at N=d^3
  flscale energy \"N*D + (d/D)^3\" --free D --constraint \"D>=1\" --at N=d --json
  flscale energy \"M1*d + N1*beta/M1 + N2/beta\" --free M1,beta --at N1=d,N2=d

Expressions: products, quotients, powers with rational exponents (d^(1/3), d^1.5), sums,
sqrt(...); numbers are constants and drop out. Every symbol that is not --free needs a value
in --at (d itself is the base).")]
pub struct EnergyArgs {
    /// The energy, e.g. "M*d + N/M".
    #[arg(value_name = "EXPR")]
    pub expr: String,
    /// Free parameters to minimise over (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub free: Vec<String>,
    /// Constraints such as "1<=M<=N" or "D>=1" (repeatable).
    #[arg(long = "constraint", value_name = "C")]
    pub constraints: Vec<String>,
    /// Values of the scales as powers of d, e.g. N=d^3,L=sqrt(d).
    #[arg(long, value_name = "N=d^3,...")]
    pub at: Option<String>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `flscale energy`.
pub fn run(args: EnergyArgs, _ctx: &Ctx) -> Result<()> {
    let monomials = parse_posynomial(&args.expr)?;
    let terms: Vec<Term> = monomials
        .into_iter()
        .map(|m| Term {
            label: m.to_string(),
            monomial: m,
        })
        .collect();
    let mut constraints = Vec::new();
    for c in &args.constraints {
        constraints.extend(parse_constraints(c)?);
    }
    let mut regime = Regime::new();
    if let Some(at) = &args.at {
        regime
            .apply_assignments(at)
            .map_err(|e| e.context("--at"))?;
    }
    for f in &args.free {
        if f == "d" || regime.get(f).is_some() {
            return Err(Error::invalid(format!("--free {f}: '{f}' is a scale with a value in --at; a free parameter must not have one")));
        }
    }
    let min = minimise(&terms, &args.free, &constraints, &regime)?;
    let (e, ef) = exponent_strings(&min.exponent);
    let argmin_text = |name: &str| match (min.argmin_symbolic.get(name), min.argmin.get(name)) {
        (Some(s), Some(r)) if r.lo.is_some() && r.lo == r.hi => format!("{s} ∝ {}", r.describe()),
        (_, Some(r)) => r.describe(),
        _ => "?".to_string(),
    };
    if args.json {
        let argmin: serde_json::Map<String, serde_json::Value> = args
            .free
            .iter()
            .map(|n| {
                let r = &min.argmin[n];
                (
                    n.clone(),
                    json!({
                        "symbolic": min.argmin_symbolic.get(n).map(|m| m.to_string()),
                        "exponent_lo": r.lo.map(|q| fmt_q(&q)),
                        "exponent_hi": r.hi.map(|q| fmt_q(&q)),
                        "value": r.describe(),
                    }),
                )
            })
            .collect();
        return out_json(&json!({
            "expression": args.expr,
            "regime": regime.iter().map(|(k, v)| (k.to_string(), json!(fmt_q(&v)))).collect::<serde_json::Map<_, _>>(),
            "exponent": e,
            "exponent_float": ef,
            "optimum": min.energy_symbolic.to_string(),
            "argmin": argmin,
            "active": min.active,
            "binding": min.binding,
            "tight": min.tight,
            "valid_when": min.valid_when,
        }));
    }
    let mut text = format!("min over {{{}}} of {}\n", args.free.join(", "), args.expr);
    if !regime.describe().is_empty() {
        text.push_str(&format!("regime: {}\n", regime.describe()));
    }
    text.push_str(&format!(
        "\n  optimum   = {}  ∝ d^{}\n",
        min.energy_symbolic, e
    ));
    for n in &args.free {
        text.push_str(&format!("  {n:<9} = {}\n", argmin_text(n)));
    }
    text.push_str(&format!("  active    : {}\n", min.active.join(", ")));
    text.push_str(&format!(
        "  binding   : {}\n",
        if min.binding.is_empty() {
            "none".to_string()
        } else {
            min.binding.join(", ")
        }
    ));
    if !min.valid_when.is_empty() {
        text.push_str(&format!("  valid when {}\n", min.valid_when.join(", ")));
    }
    out(&text)
}
