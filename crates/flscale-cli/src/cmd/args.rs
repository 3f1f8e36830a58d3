//! Command-line checks shared by every subcommand: numbers beyond the range
//! in which f64 arithmetic means anything are refused before parsing, usage errors are one
//! line, and no non-finite number is ever printed as a result.

use std::ffi::OsString;

use flscale::{Error, Result};

/// Magnitudes accepted for any number on the command line ([`flscale::limits::MAX_MAGNITUDE`],
/// 10^±100): beyond them products of two or three inputs (κ·Ẽ, s_a²·ρ², u·d) overflow to ∞ or
/// underflow to 0 and results become inf or NaN. Zero is always allowed; the subcommands check
/// their own, narrower ranges after parsing.
use flscale::limits::MAX_MAGNITUDE;

/// Refuses an argument (or the value of `--flag=value`, or an entry of a comma- or
/// colon-separated list) that reads as a number beyond ±[`MAX_MAGNITUDE`], below
/// 1/[`MAX_MAGNITUDE`] in magnitude, infinite or NaN.
pub fn check_numbers(args: &[OsString]) -> Result<()> {
    let mut flag: Option<String> = None;
    for arg in args.iter().skip(1) {
        let Some(text) = arg.to_str() else {
            flag = None;
            continue;
        };
        let (name, value) = match text.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (Some(f.to_string()), v),
            _ => (flag.clone(), text),
        };
        for part in value.split([',', ':']) {
            if let Some(bad) = out_of_range(part.trim()) {
                let shown: String = part.trim().chars().take(40).collect();
                let place = name
                    .as_deref()
                    .map_or("a command-line argument".to_string(), |n| n.to_string());
                return Err(Error::invalid(format!(
                    "{place} {shown} is not allowed; {bad}: numbers must be finite, with magnitude between 1e-100 and 1e100, or 0"
                )));
            }
        }
        flag = text
            .starts_with("--")
            .then(|| text.split('=').next().unwrap_or(text).to_string())
            .filter(|_| !text.contains('='));
    }
    Ok(())
}

pub(crate) fn out_of_range(part: &str) -> Option<&'static str> {
    let looks_numeric = part
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.'))
        || part.eq_ignore_ascii_case("nan")
        || part
            .trim_start_matches(['-', '+'])
            .to_ascii_lowercase()
            .starts_with("inf");
    if !looks_numeric {
        return None;
    }
    let v: f64 = part.parse().ok()?;
    if v.is_nan() {
        Some("it is not a number")
    } else if v.is_infinite() || v.abs() > MAX_MAGNITUDE {
        Some("it is too large")
    } else if v != 0.0 && v.abs() < 1.0 / MAX_MAGNITUDE {
        Some("it is too small")
    } else {
        None
    }
}

/// clap's rendered usage error as one line: its first line with the lines listed beneath it
/// (the missing required arguments, e.g. `--out <DIR>`), its tips joined on, and where to read
/// more (the subcommand of the usage line, else `command`: errors about a value have no usage
/// line).
pub fn one_line_usage_error(rendered: &str, command: &str) -> String {
    let mut raw = rendered.lines().map(str::trim);
    let first = raw.find(|l| !l.is_empty()).unwrap_or_default();
    // A command group called without its subcommand renders its help instead of an error.
    let mut msg = if first.starts_with("error:") {
        // clap lists what the first line announces (the required arguments not provided) on
        // the lines right beneath it, up to the first blank line; a one-line rendering that
        // kept only the first line printed an empty list.
        let listed: Vec<&str> = raw.by_ref().take_while(|l| !l.is_empty()).collect();
        if listed.is_empty() {
            first.to_string()
        } else {
            format!("{} {}", first, listed.join(", "))
        }
    } else {
        "error: a subcommand is missing".to_string()
    };
    let mut command = command.to_string();
    for l in raw.filter(|l| !l.is_empty()) {
        if let Some(tip) = l.strip_prefix("tip:") {
            msg += &format!("; {}", tip.trim());
        } else if let Some(usage) = l.strip_prefix("Usage:") {
            command = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect::<Vec<_>>()
                .join(" ");
        }
    }
    format!("{msg} (see `{command} --help`)")
}

/// The last guard before stdout: text that would print `inf`, `-inf` or `NaN` as a value is
/// refused instead. The inputs then lie where the computation leaves f64's range.
pub fn refuse_non_finite(text: &str) -> Result<()> {
    let bad = text
        .split(|c: char| c.is_whitespace() || ",;=()[]{}:|\"'`".contains(c))
        .find(|t| matches!(*t, "inf" | "-inf" | "+inf" | "NaN" | "-NaN" | "nan"));
    match bad {
        None => Ok(()),
        Some(t) => Err(Error::invalid(format!(
            "these inputs drive the result out of f64's range (it would print {t}); use parameters of moderate magnitude (docs/limits.md)"
        ))),
    }
}

/// Checks that `value` of the option `name` lies in [lo, hi] (finite), naming the range and
/// why (`reason`).
pub fn in_range(name: &str, value: f64, lo: f64, hi: f64, reason: &str) -> Result<()> {
    if value.is_finite() && value >= lo && value <= hi {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{name} {value} is not allowed; it must be between {lo:e} and {hi:e} ({reason})"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        std::iter::once("flscale")
            .chain(list.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn numbers_beyond_the_range_are_refused_with_their_flag() {
        let e = check_numbers(&args(&["ldt", "rate", "--kappa=1e308"])).unwrap_err();
        assert!(
            e.to_string().starts_with("--kappa 1e308 is not allowed"),
            "{e}"
        );
        let e = check_numbers(&args(&["cavity", "potential", "--d", "1e-308"])).unwrap_err();
        assert!(e.to_string().starts_with("--d 1e-308"), "{e}");
        let e =
            check_numbers(&args(&["cavity", "fixed-points", "--b-range", "0,inf"])).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        assert!(check_numbers(&args(&["x", "--kappa", "NaN"])).is_err());
        for ok in [
            &["bench", "--sampling", "--seed=18446744073709551615"][..],
            &["predict", "--range", "0:11/2", "--at", "N1=d^2"],
            &[
                "cavity",
                "potential",
                "--d",
                "20",
                "--kappa",
                "0.05",
                "--c",
                "-0.3",
            ],
            &["energy", "M*d + N/M", "--free", "M"],
            &["sample", "run-1e400.toml"],
        ] {
            assert!(check_numbers(&args(ok)).is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn usage_errors_become_one_line_naming_the_help() {
        // No usage line (an invalid value): the subcommand the arguments named is used.
        assert_eq!(
            one_line_usage_error(
                "error: invalid value 'x' for '--seed <SEED>': invalid digit found in string\n\nFor more information, try '--help'.\n",
                "flscale bench"
            ),
            "error: invalid value 'x' for '--seed <SEED>': invalid digit found in string (see `flscale bench --help`)"
        );
        let rendered = "error: unexpected argument '--foo' found\n\n  tip: a similar argument exists: '--for'\n\nUsage: flscale cavity potential [OPTIONS]\n\nFor more information, try '--help'.\n";
        let line = one_line_usage_error(rendered, "flscale");
        assert_eq!(
            line,
            "error: unexpected argument '--foo' found; a similar argument exists: '--for' (see `flscale cavity potential --help`)"
        );
    }

    /// Issue 40: the list under "the following required arguments were not provided:" was
    /// dropped, so the message named nothing.
    #[test]
    fn a_missing_required_argument_is_named() {
        let rendered = "error: the following required arguments were not provided:\n  --out <DIR>\n  --seed <N>\n\nUsage: flscale sample --out <DIR> --seed <N> <EXP.toml>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line_usage_error(rendered, "flscale"),
            "error: the following required arguments were not provided: --out <DIR>, --seed <N> (see `flscale sample --help`)"
        );
    }

    #[test]
    fn non_finite_values_are_never_printed() {
        assert!(refuse_non_finite("P* = inf\n").is_err());
        assert!(refuse_non_finite("u  NaN, 3\n").is_err());
        assert!(refuse_non_finite("[1.0,-inf]").is_err());
        assert!(refuse_non_finite("information infinite ∞ none\n").is_ok());
    }
}
