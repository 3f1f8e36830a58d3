//! Routing of `flscale serve`: embedded pages, the JSON API and the results files, with the
//! rules every response follows :
//!
//! * every error is `{"error": "<one sentence>"}` — axum's own rejections (bad query, bad
//!   path, 405, 413) are rewritten by [`finish`], hyper's (400, 414, 431) by `conn`;
//! * every response carries [`SECURITY_HEADERS`] and a Content-Security-Policy: the app's
//!   [`APP_CSP`], or for a results file [`FILE_CSP`] (a sandbox: an SVG with a script inside
//!   a results store cannot run it with the app's origin);
//! * the Host must name this server ([`HostRule`]: DNS rebinding), and a POST must come from
//!   the same origin;
//! * computations run in the bounded classes of `work`, under a time limit.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use flscale::{Error, Result};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, ReadBuf};

use super::api::{self, PredictRequest};
use super::conn::{self, ConnLimits};
use super::error::{secs, ApiError, ApiResult};
use super::headers::{APP_CSP, FILE_CSP, SECURITY_HEADERS};
use super::results::ResultDirs;
use super::work::{Class, Pools};
use super::{kernel, ldt};

/// Longest a computation may take (waiting for a slot included) before the request answers
/// 503 and the computation is told to stop.
pub const COMPUTE_LIMIT: Duration = Duration::from_secs(10);
/// Time for a request head, and for a request body, to arrive.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a response may wait for the client to read it.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest request body (the architecture TOML is capped at 64 KiB inside it).
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Chunk of a streamed results file.
const FILE_CHUNK: usize = 64 * 1024;

const INDEX_HTML: &str = include_str!("../../../web/index.html");
const APP_JS: &str = include_str!("../../../web/app.js");
const PLOT_JS: &str = include_str!("../../../web/plot.js");
const STYLE_CSS: &str = include_str!("../../../web/style.css");

/// Everything a server needs besides its listener.
#[derive(Debug, Clone)]
pub struct Config {
    /// Which Host headers name this server.
    pub hosts: HostRule,
    /// Timeouts and the connection cap.
    pub conn: ConnLimits,
    /// Time limit of one computation.
    pub compute_limit: Duration,
}

impl Config {
    /// The defaults: the loopback names and IP literals, the constants above.
    pub fn new(hosts: HostRule) -> Self {
        Config {
            hosts,
            conn: ConnLimits {
                header_timeout: READ_TIMEOUT,
                body_timeout: READ_TIMEOUT,
                stall_timeout: STALL_TIMEOUT,
                max_connections: conn::default_max_connections(),
            },
            compute_limit: COMPUTE_LIMIT,
        }
    }
}

/// Which `Host` headers name this server. A page whose domain was re-pointed at this machine
/// (DNS rebinding) sends its own domain as Host; it is refused. Allowed, compared without
/// case and with any port: `localhost`, any IP literal (`127.0.0.2`, `[::1]`, the address of a
/// `--host 0.0.0.0` server as typed by its users: an IP cannot be re-pointed), and the names
/// given with `--allow-host`.
#[derive(Debug, Clone, Default)]
pub struct HostRule {
    names: Vec<String>,
}

impl HostRule {
    /// The rule with `names` allowed besides localhost and IP literals.
    pub fn new(names: &[String]) -> Self {
        HostRule {
            names: names
                .iter()
                .map(|n| n.trim().to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether `host` (a Host header: name or IP, optional port) names this server.
    pub fn allows(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else {
            return false;
        };
        let name = name.strip_suffix('.').unwrap_or(&name).to_string();
        name == "localhost" || name.parse::<IpAddr>().is_ok() || self.names.contains(&name)
    }
}

/// The name of a Host header, lowercase, without the port (an IPv6 literal without its
/// brackets); `None` when it is not of the form `name`, `name:port`, `[v6]` or `[v6]:port`.
fn host_name(host: &str) -> Option<String> {
    let host = host.trim().to_ascii_lowercase();
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        v6.parse::<std::net::Ipv6Addr>().ok()?;
        (v6.to_string(), after.strip_prefix(':').map(str::to_string))
    } else {
        match host.split_once(':') {
            Some((n, p)) => (n.to_string(), Some(p.to_string())),
            None => (host.clone(), None),
        }
    };
    if let Some(p) = port {
        p.parse::<u16>().ok()?;
    }
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
    valid.then_some(name)
}

/// The state every handler sees.
#[derive(Debug)]
struct AppState {
    dirs: ResultDirs,
    pools: Pools,
    hosts: HostRule,
    body_timeout: Duration,
}

/// Binds the listening socket, naming the address in the error.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        Error::invalid(format!(
            "cannot listen on {addr}: {e}; choose another --port (0 picks a free one)"
        ))
    })
}

/// The application: every route of the server, with the host/origin guard and the rules of
/// [`finish`].
pub fn router(dirs: ResultDirs, config: &Config) -> Router {
    let state = Arc::new(AppState {
        dirs,
        pools: Pools::new(config.compute_limit),
        hosts: config.hosts.clone(),
        body_timeout: config.conn.body_timeout,
    });
    let page = || get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) });
    Router::new()
        .route("/", page())
        .route("/model", page())
        .route("/engine", page())
        .route("/ldt", page())
        .route("/kernel", page())
        .route("/results", page())
        .route("/results/{index}", page())
        .route(
            "/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/plot.js",
            get(|| async { asset("text/javascript; charset=utf-8", PLOT_JS) }),
        )
        .route(
            "/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }),
        )
        .route("/api/cavity/view", get(cavity_view))
        .route("/api/ldt/view", get(ldt_view))
        .route("/api/kernel/view", get(kernel_view))
        .route("/api/presets", get(|| async { json_ok(api::presets()) }))
        .route("/api/presets/{name}", get(preset))
        .route("/api/predict", post(predict))
        .route("/api/results", get(results_list))
        .route("/api/results/{index}", get(results_summary))
        .route("/results/{index}/files/{*path}", get(results_file))
        .fallback(|req: Request| async move {
            error_response(&ApiError::not_found(format!(
                "no such page or API route: {}",
                shorten(req.uri().path(), 80)
            )))
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .layer(axum::middleware::from_fn(finish))
        .with_state(state)
}

/// Serves `router` on `listener` until the process ends (timeouts and the connection cap of
/// `conn`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    dirs: ResultDirs,
    config: Config,
) -> Result<()> {
    let app = router(dirs, &config);
    conn::serve(listener, app, config.conn).await;
    Ok(())
}

/// Refuses a request whose Host does not name this server (403), a POST from another origin
/// (403), and a cross-site read of the API or of a results file (403: the browser says
/// `Sec-Fetch-Site`; pages may still be linked from anywhere).
async fn guard(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !st.hosts.allows(host) {
        return forbidden(format!(
            "Host \"{}\" is not allowed; this server answers to localhost, an IP address or a name given with --allow-host",
            shorten(host, 80)
        ));
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !same_origin(origin, host) {
                return forbidden(format!(
                    "a {} from the origin \"{}\" is refused; only pages of this server (http://{}) may send one",
                    req.method(),
                    shorten(origin, 80),
                    shorten(host, 80)
                ));
            }
        }
    }
    let path = req.uri().path();
    let data = path.starts_with("/api/") || path.contains("/files/");
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if (data || !safe) && matches!(site, "cross-site" | "same-site") {
        return forbidden(format!(
            "a {site} request for {} is refused; open the page of this server instead",
            shorten(path, 80)
        ));
    }
    next.run(req).await
}

/// Whether `origin` (an Origin header) is `http://` + `host` (a Host header), comparing
/// without case and with the default port made explicit.
fn same_origin(origin: &str, host: &str) -> bool {
    let norm = |authority: &str| {
        let a = authority.trim().to_ascii_lowercase();
        match a.strip_suffix(":80") {
            Some(bare) => bare.to_string(),
            None => a,
        }
    };
    origin
        .strip_prefix("http://")
        .is_some_and(|authority| norm(authority) == norm(host))
}

fn forbidden(message: String) -> Response {
    error_response(&ApiError {
        status: 403,
        message,
    })
}

/// The last word on every response: an error that is not JSON yet (axum's rejections: a bad
/// query or path, 405, 413) becomes `{"error": …}` with the same status, and the security
/// headers are added (a results file keeps its own, stricter, policy).
async fn finish(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let mut res = next.run(req).await;
    let status = res.status();
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if (status.is_client_error() || status.is_server_error()) && !is_json {
        let (_, body) = res.into_parts();
        let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let detail = text.lines().next().unwrap_or("").trim();
        let message = match status {
            // axum adds its `Allow` header outside this layer; the router has one POST route.
            StatusCode::METHOD_NOT_ALLOWED => format!(
                "{method} is not allowed on {}; use {}",
                shorten(&path, 80),
                if path == "/api/predict" {
                    "POST"
                } else {
                    "GET"
                }
            ),
            StatusCode::PAYLOAD_TOO_LARGE => format!(
                "the request body is larger than {} KiB, the limit",
                MAX_BODY_BYTES / 1024
            ),
            StatusCode::NOT_FOUND => format!("no such page or API route: {}", shorten(&path, 80)),
            _ if !detail.is_empty() => format!(
                "the request for {} is not valid: {}",
                shorten(&path, 80),
                shorten(detail, 200)
            ),
            _ => format!(
                "the request for {} failed: {}",
                shorten(&path, 80),
                status.canonical_reason().unwrap_or("error")
            ),
        };
        res = error_response(&ApiError {
            status: status.as_u16(),
            message,
        });
    }
    let h = res.headers_mut();
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(APP_CSP),
        );
    }
    for (name, value) in SECURITY_HEADERS {
        h.insert(*name, HeaderValue::from_static(value));
    }
    res
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

fn json_ok(v: Value) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], axum::Json(v)).into_response()
}

fn error_response(e: &ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(json!({ "error": e.message })),
    )
        .into_response()
}

fn answer(r: ApiResult<Value>) -> Response {
    match r {
        Ok(v) => json_ok(v),
        Err(e) => error_response(&e),
    }
}

/// The first `max` characters of a user's text, for quoting it in a message.
fn shorten(s: &str, max: usize) -> String {
    let mut out: String = s.chars().take(max).collect();
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

async fn cavity_view(
    State(st): State<Arc<AppState>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    answer(
        st.pools
            .run(Class::Slider, move |_| api::cavity_view(&api::Params(q)))
            .await,
    )
}

/// The large-deviation page's computation runs with the heavy ones, so that it cannot delay
/// the model page's slider.
async fn ldt_view(
    State(st): State<Arc<AppState>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    answer(
        st.pools
            .run(Class::Heavy, move |_| ldt::ldt_view(&api::Params(q)))
            .await,
    )
}

/// Kernel propagation is a heavy computation (seconds at the largest sizes allowed).
async fn kernel_view(
    State(st): State<Arc<AppState>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    answer(
        st.pools
            .run(Class::Heavy, move |_| kernel::kernel_view(&api::Params(q)))
            .await,
    )
}

async fn preset(Path(name): Path<String>) -> Response {
    answer(api::preset(&name))
}

/// Whether a Content-Type is JSON: its media type (before any `;` parameter) is exactly
/// `application/json` (`application/jsonfoo` is not).
fn is_json_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The request body, read within the body timeout and the size limit (408, 413).
async fn read_body(req: Request, timeout: Duration) -> std::result::Result<Bytes, ApiError> {
    let too_large = || ApiError {
        status: 413,
        message: format!(
            "the request body is larger than {} KiB, the limit",
            MAX_BODY_BYTES / 1024
        ),
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(
        timeout,
        axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES),
    )
    .await
    {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) if e.to_string().contains("length limit") => Err(too_large()),
        Ok(Err(e)) => Err(ApiError::bad(format!(
            "the request body could not be read: {}",
            shorten(&e.to_string(), 120)
        ))),
        Err(_) => Err(ApiError {
            status: 408,
            message: format!(
                "the request body did not arrive within {}; send it at once",
                secs(timeout)
            ),
        }),
    }
}

/// The body must be declared JSON: a page on another site can then only send it after a
/// CORS preflight, which this server never grants.
async fn predict(State(st): State<Arc<AppState>>, req: Request) -> Response {
    if !is_json_type(req.headers()) {
        return error_response(&ApiError {
            status: 415,
            message: "POST /api/predict needs Content-Type: application/json".into(),
        });
    }
    let body = match read_body(req, st.body_timeout).await {
        Ok(b) => b,
        Err(e) => return error_response(&e),
    };
    let req: PredictRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error_response(&ApiError::bad(format!(
                "the request body is not a valid predict request: {}; send {{\"toml\": …}} or {{\"preset\": …}}",
                shorten(&e.to_string(), 160)
            )))
        }
    };
    answer(
        st.pools
            .run(Class::Heavy, move |cancel| api::predict(&req, cancel))
            .await,
    )
}

async fn results_list(State(st): State<Arc<AppState>>) -> Response {
    json_ok(st.dirs.list())
}

async fn results_summary(State(st): State<Arc<AppState>>, Path(index): Path<usize>) -> Response {
    let job = st.clone();
    answer(
        st.pools
            .run(Class::Heavy, move |_| job.dirs.summary(index))
            .await,
    )
}

/// A file of a results store, streamed in chunks (never read whole), with the sandbox policy;
/// anything but a figure is a download (`Content-Disposition: attachment`).
async fn results_file(
    State(st): State<Arc<AppState>>,
    Path((index, path)): Path<(usize, String)>,
) -> Response {
    let file = match st.dirs.resolve_file(index, &path) {
        Ok(f) => f,
        Err(e) => return error_response(&e),
    };
    let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
    let content_type = match ext {
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        "csv" | "txt" | "toml" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    };
    let name: String = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let disposition = if matches!(ext, "svg" | "png") {
        format!("inline; filename=\"{name}\"")
    } else {
        format!("attachment; filename=\"{name}\"")
    };
    let opened = match tokio::fs::File::open(&file).await {
        Ok(f) => f,
        Err(e) => {
            return error_response(&ApiError::not_found(format!(
                "cannot read {} in results directory #{index}: {e}",
                shorten(&path, 80)
            )))
        }
    };
    let len = match opened.metadata().await {
        Ok(m) => m.len(),
        Err(e) => {
            return error_response(&ApiError::not_found(format!(
                "cannot read {} in results directory #{index}: {e}",
                shorten(&path, 80)
            )))
        }
    };
    let mut res = Body::new(FileBody {
        file: opened,
        left: len,
        buf: vec![0; FILE_CHUNK],
    })
    .into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(FILE_CSP),
    );
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    res
}

/// A file as a response body: one chunk of at most [`FILE_CHUNK`] bytes at a time, read when
/// the connection can take it (a stalled client holds one chunk, not the file), with the
/// length known up front (`Content-Length`).
struct FileBody {
    file: tokio::fs::File,
    left: u64,
    buf: Vec<u8>,
}

impl HttpBody for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.left == 0 {
            return Poll::Ready(None);
        }
        let want = (this.left.min(FILE_CHUNK as u64)) as usize;
        let mut rb = ReadBuf::new(&mut this.buf[..want]);
        match Pin::new(&mut this.file).poll_read(cx, &mut rb) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                if n == 0 {
                    // The file shrank while it was sent: end with an error, not short data.
                    return Poll::Ready(Some(Err(std::io::ErrorKind::UnexpectedEof.into())));
                }
                this.left -= n as u64;
                let chunk = Bytes::copy_from_slice(rb.filled());
                Poll::Ready(Some(Ok(hyper::body::Frame::data(chunk))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_matched_without_case_and_with_any_port() {
        let rule = HostRule::new(&["Explorer.Lab".to_string()]);
        for ok in [
            "localhost",
            "LOCALHOST:8787",
            "LocalHost.",
            "127.0.0.1:8787",
            "127.0.0.2",
            "[::1]",
            "[::1]:8787",
            "10.1.2.3:80",
            "explorer.lab:8787",
        ] {
            assert!(rule.allows(ok), "{ok}");
        }
        for bad in [
            "",
            "evil.example",
            "evil.example:8787",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "[::1",
            "::1",
            "localhost:99999",
            "localhost:abc",
            "local host",
        ] {
            assert!(!rule.allows(bad), "{bad}");
        }
    }

    #[test]
    fn origins_must_equal_the_host() {
        assert!(same_origin("http://127.0.0.1:8787", "127.0.0.1:8787"));
        assert!(same_origin("http://LOCALHOST:8787", "localhost:8787"));
        assert!(same_origin("http://localhost", "localhost:80"));
        assert!(!same_origin("http://localhost:8788", "localhost:8787"));
        assert!(!same_origin("null", "localhost:8787"));
        assert!(!same_origin("https://localhost:8787", "localhost:8787"));
        assert!(!same_origin("http://evil.example", "localhost:8787"));
    }

    #[test]
    fn json_content_types_are_matched_exactly() {
        let mut h = HeaderMap::new();
        for (v, ok) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("application/jsonfoo", false),
            ("application/json-patch+json", false),
            ("text/plain", false),
        ] {
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(v));
            assert_eq!(is_json_type(&h), ok, "{v}");
        }
    }
}
