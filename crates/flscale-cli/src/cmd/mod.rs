//! One module per subcommand, plus the output helpers they share.

use std::io::Write;

use flscale::{Error, Result};

pub mod args;
pub mod bench;
pub mod cavity;
pub mod emit;
pub mod energy;
pub mod fit;
pub mod free_energy;
pub mod kernel;
pub mod ldt;
pub mod limits;
pub mod merge;
pub mod plot;
pub mod predict;
pub mod presets;
pub mod pstar;
pub mod reproduce;
pub mod sample;
pub mod serve;
pub mod signals;
pub mod status;
pub mod sweep;

/// Global options every subcommand may consult.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `-q`: no progress bars, no informational output on stderr.
    pub quiet: bool,
    /// `--max-memory` in bytes; None: MemAvailable of /proc/meminfo.
    pub max_memory: Option<f64>,
    /// `--yes`: run even when the work estimate is above the confirmation threshold.
    pub yes: bool,
}

/// Writes `text` to stdout. A closed pipe (`flscale … | head`) is not an error: the reader
/// has what it wanted, so the output simply stops.
pub fn out(text: &str) -> Result<()> {
    args::refuse_non_finite(text)?;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::runtime(format!("cannot write to stdout: {e}"))),
    }
}

/// Writes lines to stdout as they are produced (a long listing is not built in memory first),
/// with [`out`]'s rules: non-finite numbers refused, a closed pipe ends the output quietly.
pub fn out_lines(lines: impl Iterator<Item = String>) -> Result<()> {
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    for line in lines {
        args::refuse_non_finite(&line)?;
        match writeln!(stdout, "{line}") {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(Error::runtime(format!("cannot write to stdout: {e}"))),
        }
    }
    match stdout.flush() {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::runtime(format!("cannot write to stdout: {e}"))),
    }
}

/// Pretty-prints a JSON value on stdout, followed by a newline.
pub fn out_json(value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?;
    out(&(text + "\n"))
}

/// Numbers such as a ladder's β's or its swap acceptances, three decimals, space-separated.
pub fn three_decimals(v: &[f64]) -> String {
    v.iter()
        .map(|b| format!("{b:.3}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reads a text file, naming it in the error.
pub fn read_file(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| Error::invalid(format!("cannot read {}: {e}", path.display())))
}

/// The git revision of the flscale checkout this binary was built from, if it is still there.
pub fn git_revision() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}
