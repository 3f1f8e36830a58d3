//! One error type for the whole library.
//!
//! Two kinds matter to a caller: *bad input* (the user can fix it; the CLI exits with code 2)
//! and *runtime failure* (the computation could not finish, e.g. every Langevin chain diverged;
//! exit code 1). Messages are one sentence that names the thing that is wrong, the bad value
//! and what is allowed.

use std::fmt;

/// Errors returned by every fallible flscale computation.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The input is invalid; the message says which field/value and what is allowed.
    InvalidInput(String),
    /// The computation ran but could not produce a trustworthy result.
    Runtime(String),
}

impl Error {
    /// Bad input: `field` names where it came from (a file and field, a flag, a parameter).
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    /// A failure of the computation itself.
    pub fn runtime(msg: impl Into<String>) -> Self {
        Error::Runtime(msg.into())
    }

    /// The process exit code the CLI uses for this error (2 bad input, 1 runtime failure).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::InvalidInput(_) => 2,
            Error::Runtime(_) => 1,
        }
    }

    /// Prefixes the message with context, e.g. the file name.
    pub fn context(self, ctx: impl fmt::Display) -> Self {
        match self {
            Error::InvalidInput(m) => Error::InvalidInput(format!("{ctx}: {m}")),
            Error::Runtime(m) => Error::Runtime(format!("{ctx}: {m}")),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidInput(m) | Error::Runtime(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

/// A TOML syntax or type error in the user's file, as one line: `file, line L, column C:
/// what is wrong` (the toml crate's own rendering spans several lines and repeats the source).
pub fn toml_error(source_name: &str, text: &str, e: &toml::de::Error) -> Error {
    let msg = one_line(e.message());
    match e.span() {
        Some(span) => {
            let before = &text[..floor_char_boundary(text, span.start)];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            Error::invalid(format!("{source_name}, line {line}, column {col}: {msg}"))
        }
        None => Error::invalid(format!("{source_name}: {msg}")),
    }
}

/// A TOML error in text the program generated from the user's file (a sweep's grid point):
/// its line numbers would point into text the user never saw, so the message quotes the
/// offending line instead (shortened), after `where_`, which names the file and grid point.
pub fn generated_toml_error(where_: &str, text: &str, e: &toml::de::Error) -> Error {
    let msg = shorten(&one_line(e.message()), 200);
    let quoted = e.span().and_then(|span| {
        let start = floor_char_boundary(text, span.start);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line = text[line_start..].lines().next()?.trim();
        (!line.is_empty()).then(|| shorten(line, 60))
    });
    match quoted {
        Some(line) => Error::invalid(format!("{where_}: {msg} (at `{line}`)")),
        None => Error::invalid(format!("{where_}: {msg}")),
    }
}

fn one_line(s: &str) -> String {
    s.trim().replace('\n', " ")
}

/// At most `max` characters, with an ellipsis when cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max).collect();
        out.push('…');
        out
    }
}

fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut i = index.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Result alias used across the library.
pub type Result<T> = std::result::Result<T, Error>;

/// Checks that a named parameter is finite and strictly positive.
pub fn require_positive(name: &str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(Error::invalid(format!(
            "{name} = {value} is not allowed; it must be a finite number > 0"
        )))
    }
}

/// Checks that a named parameter is finite.
pub fn require_finite(name: &str, value: f64) -> Result<f64> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(Error::invalid(format!(
            "{name} = {value} is not allowed; it must be a finite number"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Sampler {
        chains: usize,
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct File {
        sampler: Sampler,
    }

    #[test]
    fn user_file_errors_give_line_and_column_on_one_line() {
        let text = "# comment\n[sampler]\nchains = \"many\"\n";
        let e = toml::from_str::<File>(text).unwrap_err();
        let msg = toml_error("exp.toml", text, &e).to_string();
        assert!(msg.starts_with("exp.toml, line 3, column 10: "), "{msg}");
        assert!(msg.contains("expected usize"), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn generated_text_errors_quote_the_line_instead_of_its_number() {
        let huge = "1".repeat(300);
        let text = format!("[sampler]\nchains = {huge}.0\n");
        let e = toml::from_str::<File>(&text).unwrap_err();
        let err = generated_toml_error("exp.toml at the grid point data.d = 4", &text, &e);
        assert_eq!(err.exit_code(), 2);
        let msg = err.to_string();
        assert!(
            msg.starts_with("exp.toml at the grid point data.d = 4: "),
            "{msg}"
        );
        assert!(!msg.contains("line 2"), "{msg}");
        // The quoted line is cut to 60 characters, the message to 200.
        assert!(msg.contains("(at `chains = 1111"), "{msg}");
        assert!(
            msg.chars().count() < 320,
            "{} characters: {msg}",
            msg.chars().count()
        );
        let missing = "[sampler]\n";
        let e = toml::from_str::<File>(missing).unwrap_err();
        let msg = generated_toml_error("g", missing, &e).to_string();
        assert!(msg.contains("missing field `chains`"), "{msg}");
    }
}
