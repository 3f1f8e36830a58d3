//! One error type for the whole library.
//!
//! Two kinds matter to a caller: *bad input* (the user can fix it; the CLI exits with code 2)
//! and *runtime failure* (the computation could not finish, e.g. every Langevin chain diverged;
//! exit code 1). Messages are one sentence that names the thing that is wrong, the bad value
//! and what is allowed. Beside the two message variants, typed variants carry what a caller
//! branches on: a file that could not be read or written (with the operating system's error
//! as the [`std::error::Error::source`]), a divergence, an interrupt.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Errors returned by every fallible flscale computation.
///
/// [`Error::kind`] sorts every variant into one of the two kinds; the typed variants exist for
/// callers that branch on what happened (an interrupt, a failed file, a divergence).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The input is invalid; the message says which field/value and what is allowed.
    #[error("{0}")]
    InvalidInput(String),
    /// The computation ran but could not produce a trustworthy result.
    #[error("{0}")]
    Runtime(String),
    /// Reading or writing `path` failed: a file the user named that cannot be read is bad
    /// input, a file the program writes that cannot be written a runtime failure.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// Reading or writing.
        op: IoOp,
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The computation left the finite numbers; the message says where.
    #[error("{0}")]
    Diverged(String),
    /// The caller asked to stop (Ctrl-C, a time limit) before step `steps` was reached.
    #[error("interrupted at step {at_step} of {steps}")]
    Interrupted {
        /// The last step completed.
        at_step: usize,
        /// The steps asked for.
        steps: usize,
    },
    /// A typed error with a prefix naming where it happened (see [`Error::context`]).
    #[error("{context}: {source}")]
    Context {
        /// The prefix, e.g. the file name.
        context: String,
        /// The error itself.
        #[source]
        source: Box<Error>,
    },
}

/// The two kinds of [`Error`] a caller needs (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The user can fix it (exit code 2).
    InvalidInput,
    /// The computation could not finish (exit code 1).
    Runtime,
}

/// The operation of an [`Error::Io`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    /// Reading a file.
    Read,
    /// Writing a file.
    Write,
}

impl fmt::Display for IoOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoOp::Read => "read",
            IoOp::Write => "write",
        })
    }
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

    /// `path` could not be read.
    pub fn read(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op: IoOp::Read,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// `path` could not be written.
    pub fn write(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op: IoOp::Write,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// Bad input or runtime failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::Io { op: IoOp::Read, .. } => ErrorKind::InvalidInput,
            Error::Runtime(_)
            | Error::Io {
                op: IoOp::Write, ..
            }
            | Error::Diverged(_)
            | Error::Interrupted { .. } => ErrorKind::Runtime,
            Error::Context { source, .. } => source.kind(),
        }
    }

    /// The process exit code the CLI uses for this error (2 bad input, 1 runtime failure).
    pub fn exit_code(&self) -> i32 {
        match self.kind() {
            ErrorKind::InvalidInput => 2,
            ErrorKind::Runtime => 1,
        }
    }

    /// Prefixes the message with context, e.g. the file name. The two message kinds stay
    /// messages; a typed error keeps its type inside [`Error::Context`].
    pub fn context(self, ctx: impl fmt::Display) -> Self {
        match self {
            Error::InvalidInput(m) => Error::InvalidInput(format!("{ctx}: {m}")),
            Error::Runtime(m) => Error::Runtime(format!("{ctx}: {m}")),
            typed => Error::Context {
                context: ctx.to_string(),
                source: Box::new(typed),
            },
        }
    }

    /// The error without its [`Error::Context`] prefixes.
    pub fn innermost(&self) -> &Error {
        match self {
            Error::Context { source, .. } => source.innermost(),
            e => e,
        }
    }
}

/// Equal kind and message (an I/O error's source compares by its message).
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind()
            && std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

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
pub(crate) fn shorten(s: &str, max: usize) -> String {
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
    fn typed_errors_keep_their_kind_message_and_source() {
        use std::error::Error as _;
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let read = Error::read("a/b.toml", missing);
        assert_eq!(read.to_string(), "cannot read a/b.toml: No such file");
        assert_eq!(read.exit_code(), 2);
        assert_eq!(read.source().unwrap().to_string(), "No such file");
        let denied = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        assert_eq!(Error::write("out.csv", denied).exit_code(), 1);
        let stop = Error::Interrupted {
            at_step: 40,
            steps: 100,
        };
        assert_eq!(stop.to_string(), "interrupted at step 40 of 100");
        assert_eq!(stop.exit_code(), 1);
        // Context prefixes the message and keeps the type and the chain.
        let ctx = read.clone().context("sweep.toml");
        assert_eq!(
            ctx.to_string(),
            "sweep.toml: cannot read a/b.toml: No such file"
        );
        assert_eq!(ctx.exit_code(), 2);
        assert_eq!(ctx.innermost(), &read);
        assert_eq!(
            ctx.source().unwrap().source().unwrap().to_string(),
            "No such file"
        );
        let plain = Error::invalid("bad").context("f");
        assert_eq!(plain, Error::InvalidInput("f: bad".into()));
        assert_ne!(Error::runtime("x"), Error::Diverged("x".into()));
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
