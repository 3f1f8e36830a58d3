//! `flscale serve` — an interactive explorer in the browser (issue 20): the solvable model's
//! potential and phases (blog Fig. 4.1), the scaling engine on an editable architecture, and
//! the sweep stores named by `--results`. Pages and scripts are compiled into the binary;
//! nothing is fetched from elsewhere. The HTTP layer (`http`) only routes: the JSON objects
//! come from `api` and `results`, which call the same functions as the CLI's `--json`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use flscale::{Error, Result};

use super::Ctx;

pub mod api;
mod bench;
mod http;
pub mod results;

/// Arguments of `flscale serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  flscale serve                                   # http://127.0.0.1:8787/ — the solvable model
  flscale serve --results runs/fig2b --results runs/blog-quick
  flscale serve --port 0                          # any free port (printed)
  flscale serve --bench 200                       # time 200 slider moves through HTTP, then exit

Pages: /model (sliders for u, b, c, σ_w², or D, N, P, T, s_a² for the finite-size potential;
every state is in the URL, so a view can be shared), /engine (a preset or your own TOML: the
patterns table, the winners, P*'s exponent, a phase map over two regime exponents) and
/results/I (the I-th --results directory: its observable vs P with error bars, P* vs the group
variable with the fitted and the predicted exponent, the run table; reload to see new runs).
The JSON API under /api/ is described in docs/serve.md.

The server listens on 127.0.0.1 only: other machines cannot reach it. --host 0.0.0.0 opens it
to the network (with a warning): there is no authentication, and anyone who can reach the port
can make the server compute and read the --results directories.")]
pub struct ServeArgs {
    /// TCP port (0: any free port; the address is printed).
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// Address to listen on. Anything but a loopback address exposes the server to the network.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub host: IpAddr,
    /// A results directory of `flscale sweep` to browse (repeatable).
    #[arg(long = "results", value_name = "DIR")]
    pub results: Vec<PathBuf>,
    /// Instead of serving: answer N slider moves of the model page (GET /api/cavity/view at
    /// the blog's defaults, u stepping through the transition) over HTTP on this machine and
    /// print the latencies.
    #[arg(long, value_name = "N")]
    pub bench: Option<usize>,
}

/// Runs `flscale serve`.
pub fn run(args: ServeArgs, ctx: &Ctx) -> Result<()> {
    let dirs = results::ResultDirs::new(&args.results)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(http::COMPUTE_THREADS)
        .build()
        .map_err(|e| Error::runtime(format!("cannot start the server's runtime: {e}")))?;
    if let Some(n) = args.bench {
        if n == 0 || n > 100_000 {
            return Err(Error::invalid(format!(
                "--bench {n} is not allowed; give between 1 and 100000 requests"
            )));
        }
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        return runtime.block_on(bench::run(addr, dirs, n));
    }
    let addr = SocketAddr::new(args.host, args.port);
    if !args.host.is_loopback() {
        eprintln!(
            "warning: listening on {addr}, which other machines can reach; the server has no authentication and computes for, and shows the --results directories to, anyone who connects"
        );
    }
    runtime.block_on(async move {
        let listener = http::bind(addr).await?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::runtime(format!("cannot read the listening address: {e}")))?;
        let url = format!("http://{local}/");
        super::out(&format!("flscale serve: listening on {url}\n"))?;
        if !ctx.quiet {
            eprintln!("open {url} in a browser; Ctrl-C stops the server");
        }
        http::serve(listener, dirs).await
    })
}
