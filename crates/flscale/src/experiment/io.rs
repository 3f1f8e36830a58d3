//! The floor of the results store: files written atomically, text and JSON read and written
//! with errors that name the path, the one CSV number format and its parser, and the clock and
//! machine descriptions of `timing.json`. Imports nothing else from `experiment`.

use std::path::Path;

use serde_json::{json, Value as Json};

use crate::error::{Error, Result};

/// The error of a failed write to `path`.
pub fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("cannot write {}: {e}", path.display()))
}

/// Writes a file atomically: a temporary file named after this process, then a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|e| io_err(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_err(path, e))
}

/// The text of `path`; an unreadable file is bad input.
pub fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| Error::invalid(format!("cannot read {}: {e}", path.display())))
}

/// Pretty-printed JSON with a final newline.
pub fn pretty(v: &Json) -> Result<String> {
    serde_json::to_string_pretty(v)
        .map(|s| s + "\n")
        .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))
}

/// A CSV number: full precision (shortest round-trip form), empty for NaN/∞ and null.
pub fn num(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => String::new(),
    }
}

/// Why a number cell is refused by [`parse_cell`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadCell {
    /// A number, but NaN or ±∞ (which [`num`] never writes).
    NonFinite,
    /// Not a number at all.
    NotANumber,
}

/// A number cell as [`num`] writes it: empty is None (null), anything else must be a finite
/// number.
pub fn parse_cell(cell: &str) -> std::result::Result<Option<f64>, BadCell> {
    if cell.is_empty() {
        return Ok(None);
    }
    match cell.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(Some(x)),
        Ok(_) => Err(BadCell::NonFinite),
        Err(_) => Err(BadCell::NotANumber),
    }
}

/// UTC time as RFC 3339 (`2026-11-30T09:28:34Z`), from the system clock.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    utc_string(secs)
}

/// Formats Unix seconds as RFC 3339 UTC (days-from-civil inverse, H. Hinnant's algorithm).
pub fn utc_string(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// This host's name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}

/// The machine description of `timing.json`.
pub fn machine() -> Json {
    let host = Some(hostname()).filter(|h| !h.is_empty());
    json!({
        "hostname": host,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "rayon_threads": rayon::current_num_threads(),
        "rayon_num_threads_env": std::env::var("RAYON_NUM_THREADS").ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting_matches_known_dates() {
        assert_eq!(utc_string(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_string(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_string(1_796_031_714), "2026-11-30T09:41:54Z");
    }

    #[test]
    fn csv_numbers_round_trip_and_hide_non_finite() {
        for x in [0.1, 1.0 / 3.0, 1e-300, -2.5e10] {
            assert_eq!(num(Some(x)).parse::<f64>().unwrap(), x);
            assert_eq!(parse_cell(&num(Some(x))), Ok(Some(x)));
        }
        assert_eq!(num(Some(f64::NAN)), "");
        assert_eq!(num(None), "");
        assert_eq!(parse_cell(""), Ok(None));
    }

    #[test]
    fn cells_that_num_never_writes_are_refused_by_kind() {
        for bad in ["NaN", "inf", "-inf", "1e999"] {
            assert_eq!(parse_cell(bad), Err(BadCell::NonFinite), "{bad}");
        }
        for bad in ["x", "1,5", " 1"] {
            assert_eq!(parse_cell(bad), Err(BadCell::NotANumber), "{bad}");
        }
    }
}
