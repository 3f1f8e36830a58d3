//! A hostile client against `flscale serve` (issue 35 §2), loopback only, bounded in count and
//! time (each test ends within about a minute and stops its server): deep nesting, malformed
//! and oversized requests, slow-loris sockets, stalled downloads, a burst of heavy requests.
//! Every error must be `{"error": "<one sentence>"}` with the right status and the security
//! headers, and the server must keep serving — the slider within a second.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// `N1=((((…d))))` nested `depth` deep: the `--at` of the hostile-client review.
fn deep_at(depth: usize) -> String {
    format!("N1={}d{}", "(".repeat(depth), ")".repeat(depth))
}

/// The CLI died with a stack overflow at depth 60000 (SIGABRT); now it exits 2 with one line
/// that names the limit and the column.
#[test]
fn predict_refuses_a_60000_deep_at_with_one_sentence() {
    let at = deep_at(60_000);
    let o = Command::new(env!("CARGO_BIN_EXE_flscale"))
        .args(["predict", "--preset", "fcn3-erf-he3", "--at", &at])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("nests deeper than 200 parentheses at column 201; flatten it"),
        "{err}"
    );
    assert!(err.len() < 400, "{} bytes: {err}", err.len());
    // The deepest accepted nesting still predicts.
    let o = Command::new(env!("CARGO_BIN_EXE_flscale"))
        .args(["predict", "--preset", "fcn3-erf-he3", "--at", &deep_at(200)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

// ------------------------------------------------------------------------ the server

/// The server process, killed when the test ends, passing or not.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `flscale serve --port 0` with `args` and reads the address it prints.
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flscale"))
            .args(["-q", "serve", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("flscale serve: listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .trim_end_matches('/')
            .parse()
            .unwrap();
        Server { child, addr }
    }

    /// The server's resident memory in KiB (Linux).
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

/// An answer: status, headers (lowercase names) and the de-chunked body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// An error of the API: the status, JSON with one sentence, and the security headers.
    fn assert_error(&self, status: u16, needle: &str, what: &str) {
        assert_eq!(self.status, status, "{what}: {self:?}");
        assert!(
            self.header("content-type").starts_with("application/json"),
            "{what}: {self:?}"
        );
        let v = self.json();
        let msg = v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: {self:?}"));
        assert!(
            !msg.is_empty() && !msg.contains('\n') && msg.len() < 400,
            "{what}: {msg}"
        );
        assert!(msg.contains(needle), "{what}: {msg}");
        assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{what}: {v}");
        self.assert_security_headers(what);
    }

    fn assert_security_headers(&self, what: &str) {
        assert_eq!(self.header("x-content-type-options"), "nosniff", "{what}");
        let csp = self.header("content-security-policy");
        assert!(
            csp.contains("frame-ancestors 'none'")
                && (csp.contains("script-src 'self'") || csp.starts_with("sandbox")),
            "{what}: {csp}"
        );
    }
}

/// Sends `raw` on a fresh connection and reads the answer to its end (the server closes).
fn raw(addr: SocketAddr, raw: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // A server may answer (413, 431) before reading everything; a reset write is fine then.
    let _ = s.write_all(raw);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    parse_answer(&buf)
}

fn parse_answer(buf: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(buf).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Answer {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out += &rest[..n];
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn get(addr: SocketAddr, path: &str) -> Answer {
    raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn post(addr: SocketAddr, path: &str, ctype: &str, body: &[u8]) -> Answer {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    raw(addr, &req)
}

fn predict(addr: SocketAddr, body: &Value) -> Answer {
    post(
        addr,
        "/api/predict",
        "application/json",
        body.to_string().as_bytes(),
    )
}

const SLIDER: &str =
    "/api/cavity/view?sigma_w2=0.5&b=0.3&c=-0.3&d=20&u=25&points=301&diagram_points=201";

/// Deep nesting over the API (the POST that killed the server), then every kind of error the
/// server gives: each JSON with one sentence, the right status and the security headers; the
/// pages and files carry the headers too. The server answers the slider at the end.
#[test]
fn every_error_is_json_and_deep_nesting_does_not_kill_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    std::fs::create_dir_all(store.join("figures")).unwrap();
    std::fs::write(
        store.join("figures/evil.svg"),
        r#"<svg xmlns="http://www.w3.org/2000/svg"><script>document.title = "pwned"</script></svg>"#,
    )
    .unwrap();
    std::fs::write(store.join("runs.json"), "{\"a\": 1}").unwrap();
    // Request heads and bodies get 2 s (the slow body below waits for it).
    let server = Server::start(&["--results", store.to_str().unwrap(), "--read-timeout", "2"]);
    let addr = server.addr;

    for depth in [2_000, 60_000] {
        let a = predict(
            addr,
            &json!({"preset": "fcn3-erf-he3", "at": deep_at(depth)}),
        );
        if depth == 2_000 {
            a.assert_error(400, "nests deeper than 200 parentheses", "deep at");
        } else {
            // 120 KB of parentheses fit the 256 KiB body limit.
            a.assert_error(400, "nests deeper than 200 parentheses", "very deep at");
        }
    }
    let preset = flscale::patterns::arch::preset_text("fcn3-erf-he3").unwrap();
    let deep_toml = preset.replace(
        "N1 = \"d\"",
        &format!("N1 = \"{}d{}\"", "(".repeat(5_000), ")".repeat(5_000)),
    );
    assert_ne!(deep_toml, preset);
    predict(addr, &json!({ "toml": deep_toml })).assert_error(400, "nests deeper", "deep TOML");
    // Deeply nested TOML and JSON structure (not expressions) are refused by their parsers.
    let nested_toml = format!("x = {}1{}", "[".repeat(5_000), "]".repeat(5_000));
    assert_eq!(predict(addr, &json!({ "toml": nested_toml })).status, 400);
    let nested_json = format!("{}1{}", "[".repeat(50_000), "]".repeat(50_000));
    post(
        addr,
        "/api/predict",
        "application/json",
        nested_json.as_bytes(),
    )
    .assert_error(400, "not a valid predict request", "nested JSON");

    let host = addr.to_string();
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("unknown route", get_raw("/nope", &host), 404, "no such page"),
        (
            "wrong method",
            format!("POST /api/presets HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").into_bytes(),
            405,
            "POST is not allowed on /api/presets; use GET",
        ),
        (
            "bad path parameter",
            get_raw("/api/results/abc", &host),
            400,
            "/api/results/abc",
        ),
        (
            "bad query string",
            get_raw("/api/cavity/view?points=-3", &host),
            400,
            "points",
        ),
        (
            "1e308 as the API's u",
            get_raw("/api/cavity/view?u=1e308", &host),
            400,
            "parameter u",
        ),
        (
            "σ_w² beyond the CLI's range",
            get_raw("/api/cavity/view?sigma_w2=1e9", &host),
            400,
            "parameter sigma_w2 = 1000000000 is not allowed",
        ),
        (
            "foreign Host",
            b"GET /api/presets HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n".to_vec(),
            403,
            "Host \"evil.example\" is not allowed",
        ),
        (
            "foreign Origin",
            format!("POST /api/predict HTTP/1.1\r\nHost: {host}\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}").into_bytes(),
            403,
            "origin \"http://evil.example\" is refused",
        ),
        (
            "cross-site read",
            format!("GET /api/presets HTTP/1.1\r\nHost: {host}\r\nSec-Fetch-Site: cross-site\r\nConnection: close\r\n\r\n").into_bytes(),
            403,
            "cross-site request",
        ),
        (
            "malformed request line",
            b"GARBAGE\r\n\r\n".to_vec(),
            400,
            "not valid HTTP/1.1",
        ),
        (
            "oversized headers",
            format!("GET / HTTP/1.1\r\nHost: {host}\r\nX-Big: {}\r\n\r\n", "a".repeat(20_000)).into_bytes(),
            431,
            "headers are too large",
        ),
        (
            "a file outside the store",
            get_raw("/results/0/files/../secret.txt", &host),
            404,
            "",
        ),
    ];
    for (what, req, status, needle) in cases {
        let a = raw(addr, &req);
        a.assert_error(status, needle, what);
        if status == 405 {
            assert_eq!(a.header("allow"), "GET,HEAD", "{a:?}");
        }
    }
    raw(
        addr,
        format!("GET /api/predict HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .assert_error(
        405,
        "GET is not allowed on /api/predict; use POST",
        "GET of a POST route",
    );
    let predict_cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        (
            "application/jsonfoo",
            "application/jsonfoo",
            b"{\"preset\":\"fcn3-erf-he3\"}".to_vec(),
            415,
            "Content-Type: application/json",
        ),
        (
            "text/plain",
            "text/plain",
            b"{\"preset\":\"fcn3-erf-he3\"}".to_vec(),
            415,
            "Content-Type",
        ),
        (
            "bad JSON",
            "application/json",
            b"{not json".to_vec(),
            400,
            "not a valid predict request",
        ),
        (
            "too large",
            "application/json",
            vec![b' '; 1 << 20],
            413,
            "larger than 256 KiB",
        ),
        (
            "unknown scale in at",
            "application/json",
            br#"{"preset":"fcn3-erf-he3","at":"K=d^2"}"#.to_vec(),
            400,
            "names the scale 'K'",
        ),
        (
            "unknown scale in phase",
            "application/json",
            br#"{"preset":"fcn3-erf-he3","phase":"N1,Q"}"#.to_vec(),
            400,
            "names the scale 'Q'",
        ),
    ];
    for (what, ctype, body, status, needle) in predict_cases {
        post(addr, "/api/predict", ctype, &body).assert_error(status, needle, what);
    }
    // A slow body: 100 bytes declared, 11 sent, then silence: 408 after the body timeout.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "POST /api/predict HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"preset\":").unwrap();

    // Pages, scripts, the API and store files: the headers; a store file is sandboxed.
    for path in ["/", "/model", "/app.js", "/style.css", "/api/presets"] {
        let a = get(addr, path);
        assert_eq!(a.status, 200, "{path}");
        a.assert_security_headers(path);
        assert!(a
            .header("content-security-policy")
            .contains("default-src 'self'"));
    }
    let svg = get(addr, "/results/0/files/figures/evil.svg");
    assert_eq!(svg.status, 200);
    assert!(svg.body.contains("<script>"), "the file is served as it is");
    assert!(
        svg.header("content-security-policy").starts_with("sandbox"),
        "{svg:?}"
    );
    svg.assert_security_headers("store SVG");
    let data = get(addr, "/results/0/files/runs.json");
    assert_eq!(data.body, "{\"a\": 1}");
    assert!(
        data.header("content-disposition").starts_with("attachment"),
        "{data:?}"
    );
    assert!(data
        .header("content-security-policy")
        .starts_with("sandbox"));

    let t = Instant::now();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    parse_answer(&rest).assert_error(408, "did not arrive", "slow body");
    assert!(t.elapsed() < Duration::from_secs(20));

    let a = get(addr, SLIDER);
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.json()["phase"]["u_coexist"]["u"].as_f64().unwrap() > 0.0);
}

fn get_raw(path: &str, host: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").into_bytes()
}

/// Slow-loris sockets are closed by the header timeout (1 s here), connections beyond the cap
/// are answered 503 at once, stalled downloads of a large store file hold a chunk each, not
/// the file, and the server answers normally afterwards.
#[test]
fn slow_loris_sockets_are_released_and_downloads_are_streamed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    // 64 MiB, sparse: no disk used, but a server that reads files whole would hold 64 MiB per
    // download.
    let big = std::fs::File::create(store.join("big.bin")).unwrap();
    big.set_len(64 << 20).unwrap();
    let server = Server::start(&[
        "--results",
        store.to_str().unwrap(),
        "--read-timeout",
        "1",
        "--max-connections",
        "24",
    ]);
    let addr = server.addr;
    let host = addr.to_string();

    // 16 slow-loris sockets: a request head that never ends, one byte now and then.
    let mut loris: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            write!(s, "GET / HTTP/1.1\r\nHost: {host}\r\n").unwrap();
            s
        })
        .collect();
    // Beyond the cap (16 held + 8 idle = 24): the next connection gets a JSON 503 at once.
    let idle: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    get(addr, "/api/presets").assert_error(503, "open connections", "over the cap");
    assert!(t.elapsed() < Duration::from_secs(2));
    // Dripping bytes does not extend the header deadline: all are closed within a few seconds.
    let t = Instant::now();
    for s in &mut loris {
        let _ = s.write_all(b"X");
    }
    for s in &mut loris {
        let mut buf = Vec::new();
        // The server closes without an answer (EOF) or resets; either way the read ends.
        let _ = s.read_to_end(&mut buf);
    }
    let closed_after = t.elapsed();
    assert!(
        closed_after < Duration::from_secs(5),
        "slow-loris sockets held for {closed_after:?}"
    );
    drop(idle);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(get(addr, "/api/presets").status, 200);

    // 8 stalled downloads of the 64 MiB file: each reads its head and stops.
    let before = server.rss_kib();
    let stalled: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            write!(
                s,
                "GET /results/0/files/big.bin HTTP/1.1\r\nHost: {host}\r\n\r\n"
            )
            .unwrap();
            let mut head = [0u8; 4096];
            let n = s.read(&mut head).unwrap();
            let text = String::from_utf8_lossy(&head[..n]).to_ascii_lowercase();
            assert!(text.starts_with("http/1.1 200"), "{text}");
            assert!(text.contains("content-length: 67108864"), "{text}");
            assert!(text.contains("content-disposition: attachment"), "{text}");
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let grown_mib = server.rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 48,
        "8 stalled downloads of a 64 MiB file grew the server by {grown_mib} MiB"
    );
    // One complete download has every byte.
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /results/0/files/big.bin HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let body_at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(all.len() - body_at, 64 << 20);
    drop(stalled);
}

/// A burst of heavy requests (phase maps) is bounded — a few run, the rest are answered 503 at
/// once — and the slider, which has its own threads, answers within a second meanwhile. A map
/// whose estimate exceeds the time limit is refused up front, with the estimate.
#[test]
fn the_slider_stays_responsive_during_a_burst_of_heavy_requests() {
    let server = Server::start(&[]);
    let addr = server.addr;
    // Warm up both paths once.
    assert_eq!(get(addr, SLIDER).status, 200);
    assert_eq!(
        predict(addr, &json!({"preset": "fcn3-erf-he3"})).status,
        200
    );
    // Calibrate: the time of one prediction on this machine, from a 41 × 41 map (its answer,
    // or the estimate in its refusal); the burst's maps then take about 2 s each, so that they
    // are running while the slider is moved.
    let t = Instant::now();
    let probe = predict(
        addr,
        &json!({"preset": "fcn3-erf-he3", "phase": "N1,N2", "grid": 41}),
    );
    let one_ms = match probe.status {
        200 => t.elapsed().as_secs_f64() * 1e3 / 1681.0,
        _ => {
            probe.assert_error(503, "would take about", "calibration");
            let msg = probe.json()["error"].as_str().unwrap().to_string();
            let ms = msg.split(" ms each").next().unwrap();
            ms.rsplit(' ').next().unwrap().parse::<f64>().unwrap()
        }
    };
    let grid = ((2000.0 / one_ms).sqrt() as usize).clamp(2, 41);
    eprintln!("one prediction: {one_ms:.2} ms; burst of 24 maps of {grid} × {grid}");
    let heavy = json!({"preset": "fcn3-erf-he3", "phase": "N1,N2", "grid": grid});
    let burst: Vec<_> = (0..24)
        .map(|_| {
            let body = heavy.clone();
            std::thread::spawn(move || predict(addr, &body))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut slowest = Duration::ZERO;
    for u in [20, 25, 30] {
        let t = Instant::now();
        let a = get(addr, &SLIDER.replace("u=25", &format!("u={u}")));
        slowest = slowest.max(t.elapsed());
        assert_eq!(a.status, 200, "{a:?}");
    }
    let answers: Vec<Answer> = burst.into_iter().map(|h| h.join().unwrap()).collect();
    let busy = answers.iter().filter(|a| a.status == 503).count();
    let done = answers.iter().filter(|a| a.status == 200).count();
    eprintln!("burst: {done} maps drawn, {busy} answered 503; slowest slider move {slowest:?}");
    assert!(done >= 1, "no map of the burst ran: {answers:?}");
    for a in &answers {
        if a.status == 200 {
            assert!(a.json()["phase_map"]["cells"].is_array(), "{a:?}");
        } else {
            a.assert_error(503, "", "heavy burst");
        }
    }
    assert!(
        busy >= 24 - 8,
        "only {busy} of 24 heavy requests were turned away: {answers:?}"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "a slider move took {slowest:?} during the burst"
    );

    // With a 0.05 s limit, a 41 × 41 map (1681 predictions) cannot fit: refused before it
    // starts, naming its estimate.
    let strict = Server::start(&["--compute-limit", "0.05"]);
    let t = Instant::now();
    predict(
        strict.addr,
        &json!({"preset": "fcn3-erf-he3", "phase": "N1,N2", "grid": 41}),
    )
    .assert_error(503, "would take about", "over-estimate");
    assert!(t.elapsed() < Duration::from_secs(2));
}
