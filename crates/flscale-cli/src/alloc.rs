//! The global allocator: the system allocator, except that a failed allocation ends the
//! process with one sentence on stderr and exit code 1 instead of Rust's default abort
//! (SIGABRT, "memory allocation of N bytes failed" and a core dump).
//!
//! Why an allocator wrapper rather than `std::alloc::set_alloc_error_hook`: the hook is
//! unstable, and catching the abort from outside would need a second process. The resource
//! estimates of `flscale::limits` refuse runs that cannot fit before they start; this is the
//! safety net for what they miss (e.g. memory taken by another process meanwhile).
//!
//! The failure path allocates nothing: the size is formatted into a stack buffer and written
//! with one `write` to the unbuffered stderr.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;

/// [`System`], exiting with code 1 on allocation failure.
pub struct ExitOnFailure;

// SAFETY: every method forwards to `System` with the same arguments and returns its result
// unchanged when it succeeds; on failure the process exits and never returns.
unsafe impl GlobalAlloc for ExitOnFailure {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged (the caller upholds `GlobalAlloc::alloc`'s contract).
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds the rest.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            out_of_memory(new_size);
        }
        p
    }
}

/// Writes "error: out of memory: …" and exits with code 1, allocating nothing.
fn out_of_memory(size: usize) -> ! {
    let mut buf = [0u8; 256];
    let mut len = 0;
    let mut push = |bytes: &[u8]| {
        let n = bytes.len().min(buf.len() - len);
        buf[len..len + n].copy_from_slice(&bytes[..n]);
        len += n;
    };
    push(b"error: out of memory: an allocation of ");
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = size;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    push(&digits[i..]);
    push(b" bytes failed; reduce the sizes of the run (see docs/limits.md) or free memory\n");
    let _ = std::io::stderr().write_all(&buf[..len]);
    std::process::exit(1)
}
