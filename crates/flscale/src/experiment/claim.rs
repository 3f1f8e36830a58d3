//! Atomic claims on runs, so that two sweeps writing into one directory (two identical
//! commands, misconfigured shards, a requeued Slurm task beside its first attempt) never
//! compute the same run; and the cleaning of temporary
//! files that killed processes left behind.
//!
//! A claim is the file `runs/.claim-<id>`, created with `O_CREAT | O_EXCL` (`create_new`),
//! which is atomic on local file systems and on NFSv3+ and Lustre: of two processes, exactly
//! one creates it. It names its owner (host, pid, Slurm job) and is touched while the run
//! progresses (a heartbeat). It is removed when the run is written or abandoned; one left by a
//! killed process is stale when its owner is gone from this host, when it belongs to an earlier
//! attempt of the same Slurm job (a requeue), or when its heartbeat is older than
//! [`STALE_AFTER`] (an owner on another node that died).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{json, Value as Json};

use super::io::{hostname, utc_now};
use crate::error::{Error, Result};

/// A claim without a heartbeat for this long is stale. The owner touches it at least every
/// [`HEARTBEAT`] while its run progresses; a progress callback comes after every block of
/// steps, far more often than this at every size the sampler runs in practice.
pub const STALE_AFTER: Duration = Duration::from_secs(15 * 60);

/// How often a live claim is touched.
pub const HEARTBEAT: Duration = Duration::from_secs(30);

/// A temporary file or partial directory this old is left over from a killed process even if
/// its pid cannot be checked (another host on a shared file system): they live for the
/// milliseconds of one write.
const TEMP_STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// One whose pid is not alive on this host is stale once it is this old (a guard against a
/// same-named process of another host writing it right now).
const TEMP_GRACE: Duration = Duration::from_secs(5);

fn pid_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        // Without /proc the pid cannot be checked: rely on the age rules.
        true
    }
}

/// The Slurm job (`<array job>_<task>` or the job id) this process runs in, if any.
pub fn slurm_job() -> Option<String> {
    let var = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
    match (var("SLURM_ARRAY_JOB_ID"), var("SLURM_ARRAY_TASK_ID")) {
        (Some(a), Some(t)) => Some(format!("{a}_{t}")),
        _ => var("SLURM_JOB_ID"),
    }
}

fn age(path: &Path) -> Option<Duration> {
    let m = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    SystemTime::now().duration_since(m).ok()
}

/// Who holds a claim, read back from its file.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    /// Host name.
    pub host: String,
    /// Process id on that host.
    pub pid: u32,
    /// Slurm job of the owner, if any.
    pub slurm_job: Option<String>,
    /// Time since the last heartbeat.
    pub since_heartbeat: Option<Duration>,
}

impl Owner {
    /// Whether the owner may still be computing (see the module documentation).
    pub fn alive(&self) -> bool {
        if self.since_heartbeat.is_some_and(|a| a > STALE_AFTER) {
            return false;
        }
        if self.host == hostname() {
            if !pid_alive(self.pid) {
                return false;
            }
            if self.pid == std::process::id() {
                return true;
            }
        }
        // A requeued Slurm task runs under the same job id as its killed first attempt.
        !(self.slurm_job.is_some() && self.slurm_job == slurm_job())
    }
}

fn claim_path(runs: &Path, id: &str) -> PathBuf {
    runs.join(format!(".claim-{id}"))
}

/// The owner of the claim on run `id` under `runs`, if there is a claim.
pub fn owner(runs: &Path, id: &str) -> Option<Owner> {
    let path = claim_path(runs, id);
    let text = std::fs::read_to_string(&path).ok()?;
    let v: Json = serde_json::from_str(&text).unwrap_or(Json::Null);
    Some(Owner {
        host: v.get("host").and_then(Json::as_str).unwrap_or("").into(),
        pid: v.get("pid").and_then(Json::as_u64).unwrap_or(0) as u32,
        slurm_job: v.get("slurm_job").and_then(Json::as_str).map(String::from),
        since_heartbeat: age(&path),
    })
}

/// A held claim; dropping it releases the run.
#[derive(Debug)]
pub struct Claim {
    path: PathBuf,
    last_beat: SystemTime,
}

impl Claim {
    /// Claims run `id` under `runs`: `None` when a live process holds it. A stale claim is
    /// taken over (removed, then claimed atomically again, so two takers still get one claim).
    pub fn acquire(runs: &Path, id: &str) -> Result<Option<Claim>> {
        let path = claim_path(runs, id);
        let body = serde_json::to_string(&json!({
            "host": hostname(),
            "pid": std::process::id(),
            "slurm_job": slurm_job(),
            "claimed": utc_now(),
        }))
        .map_err(|e| Error::runtime(format!("cannot encode JSON: {e}")))?;
        for _ in 0..2 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    use std::io::Write;
                    f.write_all(body.as_bytes()).map_err(|e| {
                        Error::runtime(format!("cannot write {}: {e}", path.display()))
                    })?;
                    return Ok(Some(Claim {
                        path,
                        last_beat: SystemTime::now(),
                    }));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    match owner(runs, id) {
                        Some(o) if o.alive() => return Ok(None),
                        // Written but not yet filled in by its creator: treat as live.
                        Some(o) if o.pid == 0 && age(&path).is_some_and(|a| a < TEMP_GRACE) => {
                            return Ok(None)
                        }
                        _ => {
                            let _ = std::fs::remove_file(&path);
                        }
                    }
                }
                Err(e) => {
                    return Err(Error::runtime(format!(
                        "cannot create {}: {e}",
                        path.display()
                    )))
                }
            }
        }
        Ok(None)
    }

    /// Touches the claim when the last heartbeat is older than [`HEARTBEAT`].
    pub fn heartbeat(&mut self) {
        let now = SystemTime::now();
        if now.duration_since(self.last_beat).unwrap_or_default() >= HEARTBEAT {
            if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&self.path) {
                let _ = f.set_modified(now);
            }
            self.last_beat = now;
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The pid at the end of a temporary name (`.x.tmp-<pid>`, `.partial-<id>-<pid>`).
fn trailing_pid(name: &str) -> Option<u32> {
    name.rsplit('-').next().and_then(|p| p.parse().ok())
}

/// Whether a temporary file or partial directory was left by a killed process.
fn temp_is_stale(path: &Path, name: &str) -> bool {
    let Some(a) = age(path) else { return false };
    if a > TEMP_STALE_AFTER {
        return true;
    }
    let dead = trailing_pid(name).is_some_and(|p| p != std::process::id() && !pid_alive(p));
    dead && a > TEMP_GRACE
}

/// Removes the temporary files (`.*.tmp-<pid>`) in `dir` and `dir/runs`, the partial run
/// directories (`runs/.partial-*`) and the stale claims that killed processes left. Returns the
/// names removed.
pub fn clean_leftovers(dir: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    let runs = dir.join("runs");
    for d in [dir, runs.as_path()] {
        let Ok(entries) = std::fs::read_dir(d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let path = e.path();
            let temp = name.starts_with('.') && name.contains(".tmp-");
            let partial = d == runs.as_path() && name.starts_with(".partial-");
            if (temp || partial) && temp_is_stale(&path, &name) {
                let gone = if path.is_dir() {
                    std::fs::remove_dir_all(&path).is_ok()
                } else {
                    std::fs::remove_file(&path).is_ok()
                };
                if gone {
                    removed.push(name);
                }
            } else if d == runs.as_path() && name.starts_with(".claim-") {
                let id = &name[".claim-".len()..];
                if owner(&runs, id).is_some_and(|o| !o.alive())
                    && std::fs::remove_file(&path).is_ok()
                {
                    removed.push(name);
                }
            }
        }
    }
    removed.sort();
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_of_two_claims_wins_and_a_dead_owner_is_taken_over() {
        let tmp = tempfile::tempdir().unwrap();
        let runs = tmp.path();
        let first = Claim::acquire(runs, "run-00001").unwrap();
        assert!(first.is_some());
        // This process holds it: a second claim (another sweep of the same process) is refused.
        assert!(Claim::acquire(runs, "run-00001").unwrap().is_none());
        drop(first);
        assert!(owner(runs, "run-00001").is_none());
        // A claim of a pid that does not exist on this host is stale.
        std::fs::write(
            runs.join(".claim-run-00002"),
            format!("{{\"host\": \"{}\", \"pid\": 4000000000}}", hostname()),
        )
        .unwrap();
        assert!(!owner(runs, "run-00002").unwrap().alive());
        assert!(Claim::acquire(runs, "run-00002").unwrap().is_some());
        // Another host's claim is live until its heartbeat is older than STALE_AFTER.
        let other = runs.join(".claim-run-00003");
        std::fs::write(&other, "{\"host\": \"elsewhere\", \"pid\": 1}").unwrap();
        assert!(Claim::acquire(runs, "run-00003").unwrap().is_none());
        let old = SystemTime::now() - STALE_AFTER - Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(&other)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(Claim::acquire(runs, "run-00003").unwrap().is_some());
    }

    #[test]
    fn leftovers_of_dead_processes_are_removed_and_live_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("runs/.partial-run-00000-4000000000")).unwrap();
        let dead = dir.join(".timing.json.tmp-4000000000");
        let own = dir.join(format!(".timing.json.tmp-{}", std::process::id()));
        std::fs::write(&dead, "x").unwrap();
        std::fs::write(&own, "x").unwrap();
        // Fresh files of a dead pid are kept for a moment (another host may be writing them).
        assert!(clean_leftovers(dir).is_empty());
        let old = SystemTime::now() - Duration::from_secs(60);
        for p in [&dead, &own] {
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let partial = dir.join("runs/.partial-run-00000-4000000000");
        std::fs::File::open(&partial)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let removed = clean_leftovers(dir);
        assert_eq!(
            removed,
            [
                ".partial-run-00000-4000000000",
                ".timing.json.tmp-4000000000"
            ]
        );
        assert!(own.exists());
    }
}
