//! The security headers every answer of `flscale serve` carries, and the raw error answer for
//! the places that write to the socket themselves (the connection layer, below the router).

use serde_json::json;

/// The policy of the app's pages and API: scripts, styles and images from this server only,
/// no plugins, no framing by other sites.
pub const APP_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
/// The policy of a file from a results store: a sandbox (an opaque origin, no scripts), so a
/// document opened from a store cannot read the app or its API.
pub const FILE_CSP: &str = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'none'";
/// Headers added to every response.
pub const SECURITY_HEADERS: &[(&str, &str)] = &[
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-resource-policy", "same-origin"),
    ("cross-origin-opener-policy", "same-origin"),
];

/// A complete HTTP/1.1 error answer as raw text, for the places that write to the socket
/// themselves (`conn`: over the connection cap, hyper's canned answers): the head (JSON
/// type, length, `connection: close`, the security headers) and the body.
pub fn error_head_and_body(status: u16, reason: &str, message: &str) -> (String, String) {
    let body = json!({ "error": message }).to_string();
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\ncache-control: no-store\r\ncontent-security-policy: {APP_CSP}\r\n",
        body.len()
    );
    for (name, value) in SECURITY_HEADERS {
        head += &format!("{name}: {value}\r\n");
    }
    head += "\r\n";
    (head, body)
}
