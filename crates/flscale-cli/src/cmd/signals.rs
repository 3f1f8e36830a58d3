//! SIGTERM and SIGINT during a sweep: Slurm sends SIGTERM before a task's time limit, on
//! `scancel` and before a requeue. The handler only sets a flag; the sweep asks it after every
//! block of steps, drops the run in progress, releases its claim and exits, so finished runs
//! stay and the next attempt resumes.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static RECEIVED: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work here: two atomic stores.
    SIGNAL.store(sig, Ordering::SeqCst);
    RECEIVED.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGTERM and SIGINT.
pub fn install() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: `on_signal` is async-signal-safe (atomic stores only) and has the signature
    // `signal` expects.
    unsafe {
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
}

/// The signal received since [`install`], if any (its name).
pub fn received() -> Option<&'static str> {
    if !RECEIVED.load(Ordering::SeqCst) {
        return None;
    }
    Some(match SIGNAL.load(Ordering::SeqCst) {
        libc::SIGINT => "SIGINT",
        _ => "SIGTERM",
    })
}
