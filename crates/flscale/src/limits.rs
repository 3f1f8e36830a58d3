//! The caps on run sizes and search spaces, and the comparison of an [`Estimate`] with the
//! memory available and the work a user confirms.
//!
//! Every run is sized before it starts, so that a run that cannot fit is refused with the
//! estimate and the sizes to reduce instead of aborting half-way with "memory allocation
//! failed". Each subsystem counts its own memory and work (the Langevin sampler in
//! [`crate::sim::memory`], the kernel propagation in [`crate::kernels::propagate`]); this
//! module holds what they share: the [`Estimate`] they fill in, its checks, and the caps. The
//! functions are pure: the caller (the CLI) supplies the memory limit, read from
//! `/proc/meminfo` or `--max-memory`.

use crate::error::{Error, Result};

/// `sampler.steps` above this is refused: at the engine's best measured speed (about 10⁵
/// ensemble steps per second for the smallest models, BENCHMARKS.md) 10⁹ steps are already
/// hours, and every `thin`-th step adds a stored measurement per chain.
pub const MAX_STEPS: usize = 1_000_000_000;

/// Floating-point rate assumed when converting work into time: about a third of the 2-core
/// build machine's measured f32 GEMM rate (≈ 180 GFLOP/s, BENCHMARKS.md "Fig. 2 speed"), since
/// small problems and f64 run slower.
pub const ASSUMED_FLOPS_PER_SECOND: f64 = 5e10;

/// Work above which a run is refused unless the user confirms it (`--yes`): 30 days at
/// [`ASSUMED_FLOPS_PER_SECOND`]. Typos (an extra three zeros on `steps` or `chains`) land here.
pub const MAX_UNCONFIRMED_FLOPS: f64 = ASSUMED_FLOPS_PER_SECOND * 86_400.0 * 30.0;

/// Work above which the CLI prints the estimate before starting (about ten minutes).
pub const ANNOUNCE_FLOPS: f64 = ASSUMED_FLOPS_PER_SECOND * 600.0;

/// Grid points per axis of `predict --phase N1,N2 --grid` (the map solves one LP per pattern
/// per cell: 200² cells are 40 000 predictions, about a minute for the FCN presets).
pub const MAX_PHASE_GRID: usize = 200;

/// Free parameters of `flscale energy`: the exact minimisation enumerates the vertices of the
/// LP's feasible set over every choice of active terms, which grows about 8× per parameter
/// (31 s at 7 free parameters); 6 keeps every problem within a few seconds.
pub const MAX_ENERGY_FREE: usize = 6;

/// Grid points of a sweep: every point is a run directory with its own files, and the grid is
/// expanded (one validated configuration per point) before the first run starts; 10⁵ points
/// expand in a few seconds and a few hundred MB.
pub const MAX_SWEEP_POINTS: usize = 100_000;

/// Magnitudes accepted for the real numbers of an experiment file and of the command line:
/// 10^±100. f64 reaches 10^±308, but the engine multiplies two or three of them (κ·T, η·∇U,
/// σ²·d, s_a²·P²/T²), so values beyond 10^±100 end in ∞, 0 or NaN instead of an answer.
pub const MAX_MAGNITUDE: f64 = 1e100;

/// One named part of a memory estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryTerm {
    /// What the array holds, e.g. "training inputs (P × d)".
    pub what: String,
    /// Bytes (f64 so that absurd sizes do not overflow).
    pub bytes: f64,
    /// The configuration fields that make it large, e.g. "data.p, data.d".
    pub sizes: String,
}

/// Memory and work of one computation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Estimate {
    /// The parts of the memory, largest first.
    pub memory: Vec<MemoryTerm>,
    /// Floating-point operations of the whole run.
    pub flops: f64,
    /// The configuration fields that make the work large.
    pub work_sizes: String,
}

impl Estimate {
    /// Total bytes.
    pub fn bytes(&self) -> f64 {
        self.memory.iter().map(|t| t.bytes).sum()
    }

    pub(crate) fn add(&mut self, what: impl Into<String>, bytes: f64, sizes: &str) {
        self.memory.push(MemoryTerm {
            what: what.into(),
            bytes,
            sizes: sizes.to_string(),
        });
    }

    pub(crate) fn sort(mut self) -> Self {
        self.memory.sort_by(|a, b| b.bytes.total_cmp(&a.bytes));
        self
    }

    /// Refuses the run when its memory exceeds `limit_bytes` (`limit_source` says where the
    /// limit came from, e.g. "MemAvailable in /proc/meminfo"), naming the estimate, its two
    /// largest parts and the sizes to reduce.
    pub fn check_memory(&self, what: &str, limit_bytes: f64, limit_source: &str) -> Result<()> {
        let total = self.bytes();
        if total <= limit_bytes {
            return Ok(());
        }
        let parts: Vec<String> = self
            .memory
            .iter()
            .take(2)
            .map(|t| format!("{} {} (reduce {})", t.what, format_bytes(t.bytes), t.sizes))
            .collect();
        Err(Error::invalid(format!(
            "{what} needs about {} of memory but {} is available ({limit_source}); the largest parts are {}",
            format_bytes(total),
            format_bytes(limit_bytes),
            parts.join(" and ")
        )))
    }

    /// Refuses work above [`MAX_UNCONFIRMED_FLOPS`] unless `confirmed` (`--yes`).
    pub fn check_work(&self, what: &str, confirmed: bool) -> Result<()> {
        if confirmed || self.flops <= MAX_UNCONFIRMED_FLOPS {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "{what} needs about {:.1e} floating-point operations, {} at {:.0} GFLOP/s; reduce {} or pass --yes to run it anyway",
            self.flops,
            format_duration(self.seconds()),
            ASSUMED_FLOPS_PER_SECOND / 1e9,
            self.work_sizes
        )))
    }

    /// Estimated seconds at [`ASSUMED_FLOPS_PER_SECOND`].
    pub fn seconds(&self) -> f64 {
        self.flops / ASSUMED_FLOPS_PER_SECOND
    }

    /// One line announcing a long run, or None when it is short (below [`ANNOUNCE_FLOPS`]).
    pub fn announcement(&self, what: &str) -> Option<String> {
        (self.flops > ANNOUNCE_FLOPS).then(|| {
            format!(
                "{what}: about {:.1e} floating-point operations (roughly {} at {:.0} GFLOP/s) and {} of memory",
                self.flops,
                format_duration(self.seconds()),
                ASSUMED_FLOPS_PER_SECOND / 1e9,
                format_bytes(self.bytes())
            )
        })
    }
}

/// "12.8 GB", "512 MB", "3 kB" (decimal units, as `free -h --si`).
pub fn format_bytes(bytes: f64) -> String {
    let units = [
        (1e18, "EB"),
        (1e15, "PB"),
        (1e12, "TB"),
        (1e9, "GB"),
        (1e6, "MB"),
        (1e3, "kB"),
    ];
    if !bytes.is_finite() {
        return "more than 10^300 bytes".to_string();
    }
    for (scale, unit) in units {
        if bytes >= scale {
            return format!("{:.1} {unit}", bytes / scale);
        }
    }
    format!("{bytes:.0} B")
}

/// "3 s", "12 min", "5.2 h", "41 days", "3.1e4 years".
pub fn format_duration(seconds: f64) -> String {
    if seconds < 120.0 {
        format!("{seconds:.0} s")
    } else if seconds < 7200.0 {
        format!("{:.0} min", seconds / 60.0)
    } else if seconds < 3.0 * 86_400.0 {
        format!("{:.1} h", seconds / 3600.0)
    } else if seconds < 3.0e7 {
        format!("{:.0} days", seconds / 86_400.0)
    } else {
        format!("{:.1e} years", seconds / 3.15e7)
    }
}

/// Parses a memory size: a number of bytes with an optional unit k, M, G, T (powers of 1000)
/// or Ki, Mi, Gi, Ti (powers of 1024), optionally followed by B: `8G`, `500MB`, `16GiB`.
pub fn parse_memory(text: &str) -> Result<f64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let unit = unit.strip_suffix(['B', 'b']).unwrap_or(unit);
    let scale = match unit {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" | "m" => 1e6,
        "G" | "g" => 1e9,
        "T" | "t" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0f64.powi(2),
        "Gi" => 1024.0f64.powi(3),
        "Ti" => 1024.0f64.powi(4),
        _ => f64::NAN,
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && scale.is_finite() && v * scale <= 1e18 => {
            Ok(v * scale)
        }
        _ => Err(Error::invalid(format!(
            "--max-memory {text} is not allowed; give a size such as 8G, 500M or 16GiB (at most 1000 PB)"
        ))),
    }
}

/// Parses `MemAvailable` (kB) out of the text of `/proc/meminfo`, in bytes.
pub fn mem_available(meminfo: &str) -> Option<f64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        let kb: f64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb * 1024.0)
    })
}

/// Refuses `sampler.steps` above [`MAX_STEPS`].
pub fn check_steps(steps: usize) -> Result<()> {
    if steps > MAX_STEPS {
        return Err(Error::invalid(format!(
            "sampler.steps = {steps} is not allowed; it must be at most {MAX_STEPS} (10^9 steps are hours even for the smallest model; see docs/limits.md)"
        )));
    }
    Ok(())
}

/// Refuses `count` above `cap`, naming the option, the value and the documented reason.
pub fn check_cap(option: &str, count: usize, cap: usize, reason: &str) -> Result<()> {
    if count > cap {
        return Err(Error::invalid(format!(
            "{option} = {count} is not allowed; it must be at most {cap} ({reason})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_parse_and_print() {
        assert_eq!(parse_memory("8G").unwrap(), 8e9);
        assert_eq!(parse_memory("500MB").unwrap(), 5e8);
        assert_eq!(parse_memory("2GiB").unwrap(), 2.0 * 1024f64.powi(3));
        for bad in ["", "G", "-1G", "1e400", "8X", "nan"] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
        assert_eq!(format_bytes(12.8e9), "12.8 GB");
        assert_eq!(format_bytes(512.0), "512 B");
        let meminfo = "MemTotal:       24000000 kB\nMemAvailable:   22000000 kB\n";
        assert_eq!(mem_available(meminfo), Some(22000000.0 * 1024.0));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }
}
