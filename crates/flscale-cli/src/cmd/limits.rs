//! The resource check every run passes before it starts (docs/limits.md): the
//! library's estimate against the memory limit of this machine (or `--max-memory`), the work
//! against the confirmation threshold (or `--yes`), and a one-line announcement of long runs.

use flscale::limits::{mem_available, Estimate};
use flscale::Result;

use super::Ctx;

/// The memory limit in bytes and where it came from: `--max-memory`, else `MemAvailable` of
/// `/proc/meminfo`, else no limit (a machine without /proc: the allocator's exit is the net).
pub fn memory_limit(ctx: &Ctx) -> (f64, &'static str) {
    if let Some(bytes) = ctx.max_memory {
        return (bytes, "--max-memory");
    }
    match std::fs::read_to_string("/proc/meminfo")
        .ok()
        .as_deref()
        .and_then(mem_available)
    {
        Some(bytes) => (
            bytes,
            "MemAvailable in /proc/meminfo; --max-memory sets another limit",
        ),
        None => (f64::INFINITY, "no limit known"),
    }
}

/// Refuses `estimate` when it does not fit or is too much work unconfirmed; announces it on
/// stderr (unless `-q`) when it is long. `what` names the run in messages ("this run",
/// "grid point run-00012 of exp.toml").
pub fn check(estimate: &Estimate, what: &str, ctx: &Ctx) -> Result<()> {
    let (limit, source) = memory_limit(ctx);
    estimate.check_memory(what, limit, source)?;
    estimate.check_work(what, ctx.yes)?;
    if !ctx.quiet {
        if let Some(line) = estimate.announcement(what) {
            eprintln!("note: {line}");
        }
    }
    Ok(())
}
