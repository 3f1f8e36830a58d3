//! `flscale energy`: minimise a power-law energy over free parameters, exactly.

use flscale::scaling::report::EnergyProblem;
use flscale::scaling::Monomial;
use flscale::{Error, Result};

use super::{out, out_json, Ctx};

/// Arguments of `flscale energy`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  flscale energy \"M*d + N/M\" --free M --constraint \"1<=M<=N\" --at N=d^3
  flscale energy \"N*D + (d/D)^3\" --free D --constraint \"D>=1\" --at N=d --json
  flscale energy \"M1*d + N1*beta/M1 + N2/beta\" --free M1,beta --at N1=d,N2=d

Expressions: products, quotients, powers with rational exponents (d^(1/3), d^1.5), sums,
sqrt(...); numbers are constants and drop out. Every symbol that is not --free needs a value
in --at (d itself is the base). At most 6 free parameters (the exact minimisation grows about
8× per parameter; docs/limits.md).")]
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

/// Adds to an error about input that writes a power Python's way (`M**2`) how to write it
/// here (`M^2`): the parser's own message names only the character it stopped at.
pub fn power_hint(e: Error, inputs: &[&str]) -> Error {
    match (e, inputs.iter().find(|t| t.contains("**"))) {
        (Error::InvalidInput(m), Some(text)) => {
            let fixed = text.replace("**", "^");
            Error::InvalidInput(format!(
                "{m}; powers are written with ^, not **: \"{fixed}\""
            ))
        }
        (e, _) => e,
    }
}

/// Runs `flscale energy`.
pub fn run(args: EnergyArgs, _ctx: &Ctx) -> Result<()> {
    flscale::limits::check_cap(
        "the number of --free parameters",
        args.free.len(),
        flscale::limits::MAX_ENERGY_FREE,
        "the exact minimisation grows about 8× per free parameter: 7 take half a minute",
    )?;
    let problem = EnergyProblem {
        expr: args.expr.clone(),
        free: args.free.clone(),
        constraints: args.constraints.clone(),
        at: args.at.clone().unwrap_or_default(),
    };
    let (regime, min) = problem.solve().map_err(|e| {
        let mut inputs = vec![args.expr.as_str()];
        inputs.extend(args.constraints.iter().map(String::as_str));
        inputs.extend(args.at.as_deref());
        power_hint(e, &inputs)
    })?;
    if args.json {
        return out_json(&problem.to_json(&regime, &min));
    }
    let scale = Monomial::power("d", min.exponent);
    let argmin_text = |name: &str| match (min.argmin_symbolic.get(name), min.argmin.get(name)) {
        (Some(s), Some(r)) if r.lo.is_some() && r.lo == r.hi => format!("{s} ∝ {}", r.describe()),
        (_, Some(r)) => r.describe(),
        _ => "?".to_string(),
    };
    let mut text = format!("min over {{{}}} of {}\n", args.free.join(", "), args.expr);
    if !regime.describe().is_empty() {
        text.push_str(&format!("regime: {}\n", regime.describe()));
    }
    text.push_str(&format!(
        "\n  optimum   = {}  ∝ {scale}\n",
        min.energy_symbolic
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
