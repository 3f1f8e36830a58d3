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
