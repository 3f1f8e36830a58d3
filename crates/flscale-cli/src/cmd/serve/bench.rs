//! `flscale serve --bench N`: the latency of a slider move, measured through HTTP — the
//! server on a free local port, a client on another thread sending `GET /api/cavity/view`
//! exactly as the model page does while u is dragged through the transition.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use flscale::{Error, Result};

use super::http;
use super::results::ResultDirs;

/// The page's request at the blog's Fig. 4.1 defaults (σ_w² = 0.5, b = 0.3, c = −0.3,
/// D = 20, 301 ρ points, 201 diagram rows) with u = `u`.
fn slider_query(u: f64) -> String {
    format!("/api/cavity/view?sigma_w2=0.5&b=0.3&c=-0.3&d=20&u={u}&points=301&diagram_points=201")
}

/// One GET on a fresh connection; returns the status code and the body's length.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, usize)> {
    let mut s = TcpStream::connect(addr)?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let head = String::from_utf8_lossy(&buf[..buf.len().min(16)]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, buf.len()))
}

/// Serves on `addr`, sends `n` slider moves from a client thread and prints the latencies.
pub async fn run(addr: SocketAddr, dirs: ResultDirs, config: http::Config, n: usize) -> Result<()> {
    let listener = http::bind(addr).await?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::runtime(format!("cannot read the listening address: {e}")))?;
    let server = tokio::spawn(http::serve(listener, dirs, config));
    let client = tokio::task::spawn_blocking(move || -> Result<Vec<f64>> {
        let fail = |e: std::io::Error| Error::runtime(format!("benchmark request failed: {e}"));
        // One warm-up request (first touches of the code and the allocator).
        get(local, &slider_query(25.0)).map_err(fail)?;
        let mut ms = Vec::with_capacity(n);
        for i in 0..n {
            // u sweeps 15 … 35, across the fold, coexistence and the spinodal.
            let u = 15.0 + 20.0 * (i % 101) as f64 / 100.0;
            let t = Instant::now();
            let (status, bytes) = get(local, &slider_query(u)).map_err(fail)?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            if status != 200 || bytes < 1000 {
                return Err(Error::runtime(format!(
                    "benchmark request at u = {u} answered {status} ({bytes} bytes)"
                )));
            }
        }
        Ok(ms)
    });
    let mut ms = client
        .await
        .map_err(|e| Error::runtime(format!("benchmark client stopped: {e}")))??;
    server.abort();
    ms.sort_by(f64::total_cmp);
    let q = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
    super::super::out(&format!(
        "slider move (GET /api/cavity/view, blog defaults), {n} requests over HTTP on {local}:\n  median {:.2} ms, p95 {:.2} ms, max {:.2} ms\n",
        q(0.5),
        q(0.95),
        q(1.0)
    ))
}
