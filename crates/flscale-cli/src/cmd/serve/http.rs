//! Routing of `flscale serve`: embedded pages, the JSON API and the results files. Every
//! computation runs on a bounded pool of blocking threads under a time limit, so a slow
//! request answers 503 instead of holding the server.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use flscale::{Error, Result};
use serde_json::{json, Value};

use super::api::{self, ApiError, ApiResult, Params, PredictRequest};
use super::results::ResultDirs;

/// Threads that may compute at once; further requests wait for one.
pub const COMPUTE_THREADS: usize = 4;
/// Longest a computation may take before the request answers 503.
pub const COMPUTE_LIMIT: Duration = Duration::from_secs(10);
/// Largest request body (the architecture TOML is capped at 64 KiB inside it).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

const INDEX_HTML: &str = include_str!("../../../web/index.html");
const APP_JS: &str = include_str!("../../../web/app.js");
const PLOT_JS: &str = include_str!("../../../web/plot.js");
const STYLE_CSS: &str = include_str!("../../../web/style.css");

/// Binds the listening socket, naming the address in the error.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        Error::invalid(format!(
            "cannot listen on {addr}: {e}; choose another --port (0 picks a free one)"
        ))
    })
}

/// The application: every route of the server.
pub fn router(dirs: ResultDirs) -> Router {
    let page = || get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) });
    Router::new()
        .route("/", page())
        .route("/model", page())
        .route("/engine", page())
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
        .route("/api/presets", get(|| async { json_ok(api::presets()) }))
        .route("/api/presets/{name}", get(preset))
        .route("/api/predict", post(predict))
        .route("/api/results", get(results_list))
        .route("/api/results/{index}", get(results_summary))
        .route("/results/{index}/files/{*path}", get(results_file))
        .fallback(|| async { error_response(&ApiError::not_found("no such page or API route")) })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(Arc::new(dirs))
}

/// Serves `router` on `listener` until the process ends. On a loopback address only requests
/// that name a loopback host are answered: a web page whose domain was re-pointed at 127.0.0.1
/// (DNS rebinding) sends its own name as Host and gets 403.
pub async fn serve(listener: tokio::net::TcpListener, dirs: ResultDirs) -> Result<()> {
    let loopback = listener.local_addr().is_ok_and(|a| a.ip().is_loopback());
    let mut app = router(dirs);
    if loopback {
        app = app.layer(axum::middleware::from_fn(loopback_host_only));
    }
    axum::serve(listener, app)
        .await
        .map_err(|e| Error::runtime(format!("the server stopped: {e}")))
}

async fn loopback_host_only(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    if matches!(name, "127.0.0.1" | "localhost" | "[::1]") {
        next.run(req).await
    } else {
        error_response(&ApiError {
            status: 403,
            message: format!(
                "Host \"{}\" is not allowed; this server answers only http://127.0.0.1 or http://localhost",
                host.chars().take(80).collect::<String>()
            ),
        })
    }
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
    (status, axum::Json(json!({ "error": e.message }))).into_response()
}

/// Runs `f` on the blocking pool under [`COMPUTE_LIMIT`]; a panic inside is a 500, never a
/// dead server.
async fn compute<F>(f: F) -> Response
where
    F: FnOnce() -> ApiResult<Value> + Send + 'static,
{
    let job = tokio::task::spawn_blocking(f);
    match tokio::time::timeout(COMPUTE_LIMIT, job).await {
        Ok(Ok(Ok(v))) => json_ok(v),
        Ok(Ok(Err(e))) => error_response(&e),
        Ok(Err(_)) => error_response(&ApiError {
            status: 500,
            message: "the computation failed unexpectedly; please report the request".into(),
        }),
        Err(_) => error_response(&ApiError {
            status: 503,
            message: format!(
                "the computation took longer than {} s; ask for a smaller grid",
                COMPUTE_LIMIT.as_secs()
            ),
        }),
    }
}

async fn cavity_view(Query(q): Query<BTreeMap<String, String>>) -> Response {
    compute(move || api::cavity_view(&Params(q))).await
}

async fn preset(Path(name): Path<String>) -> Response {
    match api::preset(&name) {
        Ok(v) => json_ok(v),
        Err(e) => error_response(&e),
    }
}

/// The body must be declared JSON: a page on another site can then only send it after a
/// CORS preflight, which this server never grants.
async fn predict(headers: HeaderMap, body: Bytes) -> Response {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return error_response(&ApiError {
            status: 415,
            message: "POST /api/predict needs Content-Type: application/json".into(),
        });
    }
    let req: PredictRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error_response(&ApiError::bad(format!(
                "the request body is not a valid predict request: {e}; send {{\"toml\": …}} or {{\"preset\": …}}"
            )))
        }
    };
    compute(move || api::predict(&req)).await
}

async fn results_list(State(dirs): State<Arc<ResultDirs>>) -> Response {
    json_ok(dirs.list())
}

async fn results_summary(
    State(dirs): State<Arc<ResultDirs>>,
    Path(index): Path<usize>,
) -> Response {
    compute(move || dirs.summary(index)).await
}

async fn results_file(
    State(dirs): State<Arc<ResultDirs>>,
    Path((index, path)): Path<(usize, String)>,
) -> Response {
    let file = match dirs.resolve_file(index, &path) {
        Ok(f) => f,
        Err(e) => return error_response(&e),
    };
    let content_type = match file.extension().and_then(|e| e.to_str()) {
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("csv" | "txt" | "toml") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    };
    match std::fs::read(&file) {
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            bytes,
        )
            .into_response(),
        Err(e) => error_response(&ApiError::not_found(format!(
            "cannot read {path} in results directory #{index}: {e}"
        ))),
    }
}
