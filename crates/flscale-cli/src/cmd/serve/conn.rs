//! Connections of `flscale serve`: the accept loop, driving hyper directly
//! because `axum::serve` sets no timeouts (2000 slow-loris sockets stayed open for ever).
//!
//! * **Connection cap**: at most `max_connections` at once. One more is answered a JSON 503
//!   and closed at once, so a flood of idle sockets cannot exhaust the descriptors.
//! * **Header timeout**: a request head (or, between requests, the next one) must arrive
//!   within `header_timeout`, else hyper closes the connection. The body has its own timeout,
//!   applied where a handler reads it (`http::read_body`).
//! * **Stall timeout**: a response that the client stops reading for `stall_timeout` (a
//!   stalled download) ends its connection.
//! * **JSON for hyper's own answers**: hyper answers a malformed request (400), an over-long
//!   URI (414) or oversized headers (431) itself, with an empty body, before any handler sees
//!   it. [`Guarded`] rewrites exactly those canned answers into the API's JSON errors (with
//!   the security headers), so every error of the server is `{"error": "…"}`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::headers::error_head_and_body;

/// Largest request head (request line and headers) hyper buffers; beyond it: 431.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Timeouts and the cap of the connection layer.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Time for a request head to arrive.
    pub header_timeout: Duration,
    /// Time for a request body to arrive (applied by the handlers that read one).
    pub body_timeout: Duration,
    /// Longest a response may wait for the client to read it.
    pub stall_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

/// Default cap on open connections: 128, or fewer where the descriptor limit is low (each
/// connection may hold a socket and a file being streamed, and the process needs some for
/// itself).
pub fn default_max_connections() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and reads nothing else.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        // rlim_t is u64 on Linux but not everywhere.
        #[allow(clippy::unnecessary_cast)]
        let cur = lim.rlim_cur as u64;
        cur
    } else {
        1024
    };
    (soft.saturating_sub(32) / 2).clamp(4, 128) as usize
}

/// Accepts connections on `listener` and serves `app` on each until the process ends.
pub async fn serve(listener: TcpListener, app: Router, limits: ConnLimits) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _peer)) => stream,
            // Out of descriptors (EMFILE) or a connection reset before accept: wait a moment
            // (connections that end free descriptors) and go on, as axum::serve does.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            refuse_over_cap(&stream, limits.max_connections);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(Guarded::new(stream, limits.stall_timeout));
        let conn = http1.serve_connection(io, TowerToHyperService::new(app.clone()));
        tokio::spawn(async move {
            // Errors here are the client's (a reset, a timeout); the connection just ends.
            let _ = conn.await;
            drop(permit);
        });
    }
}

/// Answers a connection beyond the cap with a JSON 503, without waiting for it: one
/// non-blocking write into the fresh socket's empty send buffer, then close.
fn refuse_over_cap(stream: &TcpStream, cap: usize) {
    let msg = format!(
        "the server has {cap} open connections, its limit; close some or try again in a few seconds"
    );
    let (head, body) = error_head_and_body(503, "Service Unavailable", &msg);
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    let _ = stream.try_write(&bytes);
}

/// A TCP stream with a stall timeout on writes and the rewriting of hyper's canned error
/// answers into JSON (see the module's documentation).
struct Guarded {
    inner: TcpStream,
    stall_timeout: Duration,
    /// Running while a write waits for the client to read.
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The rest of a rewritten answer, written before anything else.
    pending: Vec<u8>,
}

impl Guarded {
    fn new(inner: TcpStream, stall_timeout: Duration) -> Self {
        Guarded {
            inner,
            stall_timeout,
            stall: None,
            pending: Vec::new(),
        }
    }

    /// A pending write: arms the stall timer, or fails once it has run out.
    fn stalled(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let timeout = self.stall_timeout;
        let sleep = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Writes `buf` to the socket under the stall timeout.
    fn write_raw(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(r) => {
                self.stall = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.stalled(cx),
        }
    }

    /// Writes what is left of a rewritten answer; ready once it is all out.
    fn drain_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            let r = self.write_raw(cx, &pending);
            match r {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => self.pending = pending[n..].to_vec(),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    self.pending = pending;
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// hyper's automatic answer to a request it could not parse: the status line of a 400, 414 or
/// 431 and `content-length: 0`, the whole head in one write (hyper flattens its buffers for a
/// stream that is not vectored, and this answer is the last thing on its connection). The
/// handlers never send an empty 4xx (their errors carry JSON), so nothing else matches.
fn canned_error(buf: &[u8]) -> Option<(u16, &'static str, &'static str)> {
    let text = std::str::from_utf8(buf).ok()?;
    if !text.ends_with("\r\n\r\n")
        || !text
            .to_ascii_lowercase()
            .contains("\r\ncontent-length: 0\r\n")
    {
        return None;
    }
    let line = text.split("\r\n").next()?;
    match line {
        "HTTP/1.1 400 Bad Request" => Some((
            400,
            "Bad Request",
            "the request is not valid HTTP/1.1 (a malformed request line or header)",
        )),
        "HTTP/1.1 414 URI Too Long" => Some((414, "URI Too Long", "the request's URL is too long")),
        "HTTP/1.1 431 Request Header Fields Too Large" => Some((
            431,
            "Request Header Fields Too Large",
            "the request's headers are too large (at most 16 KiB and 100 headers)",
        )),
        _ => None,
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.drain_pending(cx))?;
        if let Some((status, reason, message)) = canned_error(buf) {
            let (head, body) = error_head_and_body(status, reason, message);
            this.pending = [head.as_bytes(), body.as_bytes()].concat();
            // hyper's bytes are consumed; ours go out now or on the next flush.
            return match this.drain_pending(cx) {
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                _ => Poll::Ready(Ok(buf.len())),
            };
        }
        this.write_raw(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.drain_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.drain_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
