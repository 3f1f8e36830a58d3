//! The API's failure type: an HTTP status and one sentence for the page. The bottom of
//! serve/: `api`, `work`, `results` and `http` all answer with it.

use std::time::Duration;

use flscale::{Error, ErrorKind};

/// An API failure: an HTTP status and one sentence for the page.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// 400 bad input, 404 unknown thing, 422 a computation that could not finish.
    pub status: u16,
    /// One sentence naming the parameter, the value and what is allowed.
    pub message: String,
}

impl ApiError {
    /// A 400 with `message`.
    pub fn bad(message: impl Into<String>) -> Self {
        ApiError {
            status: 400,
            message: message.into(),
        }
    }

    /// A 404 with `message`.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError {
            status: 404,
            message: message.into(),
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let status = match e.kind() {
            ErrorKind::InvalidInput => 400,
            ErrorKind::Runtime => 422,
        };
        ApiError {
            status,
            message: e.to_string(),
        }
    }
}

/// Result of an API function.
pub type ApiResult<T> = std::result::Result<T, ApiError>;

/// A duration as "10 s" or "0.5 s".
pub fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s} s")
    }
}
