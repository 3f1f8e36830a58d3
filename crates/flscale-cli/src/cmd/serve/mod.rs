//! `flscale serve` — an interactive explorer in the browser: the solvable model's
//! potential and phases (blog Fig. 4.1), the scaling engine on an editable architecture, and
//! the sweep stores named by `--results`. Pages and scripts are compiled into the binary;
//! nothing is fetched from elsewhere. The HTTP layer (`http`) only routes: the JSON objects
//! come from `api` and `results`, which call the same functions as the CLI's `--json`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use flscale::{Error, Result};

use super::Ctx;

pub mod api;
mod bench;
mod conn;
mod error;
mod headers;
mod http;
mod kernel;
mod ldt;
pub mod results;
mod wells;
mod work;

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

The server listens on 127.0.0.1 only: other machines cannot reach it. --host 0.0.0.0
--allow-remote opens it to the network (with a warning): there is no authentication, and anyone
who can reach the port can make the server compute and read the --results directories. Requests
must name the server in their Host header (localhost, an IP address, or a name given with
--allow-host); docs/serve.md lists the limits and timeouts.")]
pub struct ServeArgs {
    /// TCP port (0: any free port; the address is printed).
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// Address to listen on. Anything but a loopback address exposes the server to the network
    /// and needs --allow-remote.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub host: IpAddr,
    /// Confirms a --host that other machines can reach (there is no authentication).
    #[arg(long)]
    pub allow_remote: bool,
    /// A host name (besides localhost and IP addresses) by which browsers may reach the
    /// server, e.g. the machine's DNS name with --allow-remote (repeatable). Other names are
    /// refused (403), which stops DNS rebinding.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_host: Vec<String>,
    /// Seconds a request head, and a request body, may take to arrive (tests use less).
    #[arg(long, value_name = "SECONDS", hide = true)]
    pub read_timeout: Option<f64>,
    /// Seconds a computation may take before the request answers 503 and it stops.
    #[arg(long, value_name = "SECONDS", hide = true)]
    pub compute_limit: Option<f64>,
    /// Connections served at once (default: 128, fewer under a low descriptor limit).
    #[arg(long, value_name = "N", hide = true)]
    pub max_connections: Option<usize>,
    /// A results directory of `flscale sweep` to browse (repeatable).
    #[arg(long = "results", value_name = "DIR")]
    pub results: Vec<PathBuf>,
    /// Instead of serving: answer N slider moves of the model page (GET /api/cavity/view at
    /// the blog's defaults, u stepping through the transition) over HTTP on this machine and
    /// print the latencies.
    #[arg(long, value_name = "N")]
    pub bench: Option<usize>,
}

/// Seconds from a hidden tuning flag, checked.
fn seconds(flag: &str, v: Option<f64>, default: Duration) -> Result<Duration> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && (0.01..=3600.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(Error::invalid(format!(
            "{flag} {s} is not allowed; give between 0.01 and 3600 seconds"
        ))),
    }
}

/// The server's configuration from the command line.
fn config(args: &ServeArgs) -> Result<http::Config> {
    for name in &args.allow_host {
        let ok = !name.is_empty()
            && name.len() <= 253
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !ok {
            return Err(Error::invalid(format!(
                "--allow-host \"{}\" is not a host name; give a name such as lab-machine.example.org",
                name.chars().take(80).collect::<String>()
            )));
        }
    }
    let mut c = http::Config::new(http::HostRule::new(&args.allow_host));
    let read = seconds("--read-timeout", args.read_timeout, http::READ_TIMEOUT)?;
    c.conn.header_timeout = read;
    c.conn.body_timeout = read;
    c.compute_limit = seconds("--compute-limit", args.compute_limit, http::COMPUTE_LIMIT)?;
    if let Some(n) = args.max_connections {
        if !(1..=100_000).contains(&n) {
            return Err(Error::invalid(format!(
                "--max-connections {n} is not allowed; give between 1 and 100000"
            )));
        }
        c.conn.max_connections = n;
    }
    Ok(c)
}

/// Runs `flscale serve`.
pub fn run(args: ServeArgs, ctx: &Ctx) -> Result<()> {
    let dirs = results::ResultDirs::new(&args.results)?;
    let config = config(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(work::BLOCKING_THREADS)
        .build()
        .map_err(|e| Error::runtime(format!("cannot start the server's runtime: {e}")))?;
    if let Some(n) = args.bench {
        if n == 0 || n > 100_000 {
            return Err(Error::invalid(format!(
                "--bench {n} is not allowed; give between 1 and 100000 requests"
            )));
        }
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        return runtime.block_on(bench::run(addr, dirs, config, n));
    }
    let remote = !args.host.is_loopback();
    if remote && !args.allow_remote {
        return Err(Error::invalid(format!(
            "--host {} can be reached from other machines, and the server has no authentication; add --allow-remote to confirm, or leave --host out for 127.0.0.1",
            args.host
        )));
    }
    let addr = SocketAddr::new(args.host, args.port);
    runtime.block_on(async move {
        let listener = http::bind(addr).await?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::runtime(format!("cannot read the listening address: {e}")))?;
        if remote {
            eprintln!(
                "warning: listening on {local}, which other machines can reach; the server has no authentication and computes for, and shows the --results directories to, anyone who connects"
            );
        }
        let url = format!("http://{local}/");
        super::out(&format!("flscale serve: listening on {url}\n"))?;
        if !ctx.quiet {
            eprintln!("open {url} in a browser; Ctrl-C stops the server");
        }
        http::serve(listener, dirs, config).await
    })
}
