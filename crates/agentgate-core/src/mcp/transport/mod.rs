//! The transports: MCP over stdio, and the axum router serving Streamable
//! HTTP at `/mcp`, with what agentgate puts around rmcp's (the handlers are
//! in the folder above). Both take the shutdown token as an argument.
//!
//! - [`stdio`]: the guard in front of rmcp on stdio (size limit, parse
//!   errors answered with `"id": null`).
//! - [`connections`]: the HTTP accept loop and its bounds (connection cap,
//!   a peer's share, header read and idle timeouts).
//! - [`sessions`]: legacy sessions counted per principal and in all.
//! - [`sse_patch`]: rewriting one event of an SSE stream on its way out.

mod connections;
mod sessions;
pub(crate) mod sse_patch;
pub(crate) mod stdio;

pub use connections::{ConnectionLimits, serve_http_with};
pub use sessions::SessionLimits;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt as _};
use tokio_util::sync::CancellationToken;

use crate::mcp::error::{Unread, unread_refusal};
use crate::mcp::{Gateway, listen, tasks_2025};

/// Serves one client on this process's stdin/stdout until it disconnects or
/// `shutdown` fires. `handler` is usually a [`Gateway`].
/// Input passes through [`stdio`] first, which answers what is not a
/// JSON message itself.
pub async fn serve_stdio<H: ServerHandler + 'static>(
    handler: H,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    // Only a `Gateway` serves the 2025-11-25 task wire (see `http_router`).
    let tasks_2025 = (&handler as &dyn std::any::Any).is::<Gateway>();
    let (input, output, guard) = stdio::guard(
        tokio::io::stdin(),
        tokio::io::stdout(),
        MAX_STDIO_MESSAGE_BYTES,
        tasks_2025,
    );
    let guard = tokio::spawn(guard);
    let service = handler
        .serve((input, output))
        .await
        .map_err(|e| std::io::Error::other(format!("stdio handshake failed: {e}")))?;
    let cancel = service.cancellation_token();
    tokio::select! {
        done = service.waiting() => {
            done.map_err(|e| std::io::Error::other(format!("stdio service stopped: {e}")))?;
        }
        () = shutdown.cancelled() => cancel.cancel(),
    }
    guard.abort();
    Ok(())
}

/// The largest message read from stdin: the HTTP body limit's default.
pub(super) const MAX_STDIO_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Serves `router` on `listener` until `shutdown` fires, within the default
/// [`ConnectionLimits`] (see
/// [`serve_http_with`]).
///
/// Accepted sockets get `TCP_NODELAY`: a Streamable HTTP answer is written
/// in several small pieces (headers, the SSE event, the end of the stream),
/// and with Nagle's algorithm the last piece waits for the client's delayed
/// ACK, adding up to 40 ms to a sub-millisecond `tasks/get` (seen in
/// `agentgate-bench` as p99 ≈ 45 ms on every server but the one-write echo).
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    serve_http_with(listener, router, ConnectionLimits::default(), shutdown).await
}

/// HTTP settings for `/mcp`.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Accepted `Host` header values (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// Accepted browser `Origin`s; requests without `Origin` always pass.
    pub allowed_origins: Vec<String>,
    pub max_body_bytes: usize,
    /// Request body bytes held at once across all of `/mcp`'s requests
    /// (default 64 MiB): a body that would pass it is answered 503 with
    /// `Retry-After` instead of being buffered, so many connections (and
    /// HTTP/2 streams) sending large bodies cannot exhaust memory.
    pub max_buffered_body_bytes: usize,
    /// Who may call `/mcp` ([`crate::auth`]); `None`: everyone, as `anonymous`.
    pub auth: Option<std::sync::Arc<crate::auth::Authenticator>>,
    /// Refuse `tasks/get`, `tasks/update` and `tasks/cancel` without an
    /// `Mcp-Name` header (`-32020`), as the 2026-07-28 transport requires.
    /// Off by default: agentgate needs no routing header (any instance
    /// answers any task), and some clients do not send it. A header that is
    /// present must match the body either way.
    pub strict_headers: bool,
    /// How many legacy sessions may be open, per principal and in all
    /// ([`sessions`]).
    pub sessions: SessionLimits,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: loopback_origins(),
            max_body_bytes: 4 * 1024 * 1024,
            max_buffered_body_bytes: 64 * 1024 * 1024,
            auth: None,
            strict_headers: false,
            sessions: SessionLimits::default(),
        }
    }
}

/// Browser origins on this machine, any port.
pub(super) fn loopback_origins() -> Vec<String> {
    ["http", "https"]
        .iter()
        .flat_map(|scheme| {
            ["localhost", "127.0.0.1", "[::1]"]
                .iter()
                .map(move |host| format!("{scheme}://{host}:*"))
        })
        .collect()
}

/// The router: Streamable HTTP at `/mcp` (both protocol eras on one endpoint)
/// and a liveness probe at `/healthz`. With `options.auth`, `/mcp` needs a
/// bearer token (checked before anything else reads the request) and, in
/// OAuth mode, the protected-resource metadata is served; `/healthz` stays
/// open. `handler` is usually a
/// [`Gateway`]; only a `Gateway` also serves the task wire
/// of MCP 2025-11-25 ([`tasks_2025`]), which needs its handler's
/// methods: any other handler (the conformance fixture, the benchmark
/// baseline) keeps rmcp's wire as it is.
pub fn http_router<H: ServerHandler + Clone + 'static>(
    handler: H,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> axum::Router {
    let max_body = options.max_body_bytes;
    let tasks_2025 = (&handler as &dyn std::any::Any).is::<Gateway>();
    let budget = std::sync::Arc::new(tokio::sync::Semaphore::new(
        options
            .max_buffered_body_bytes
            .min(tokio::sync::Semaphore::MAX_PERMITS),
    ));
    let strict_headers = options.strict_headers;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(options.allowed_hosts)
        .with_allowed_origins(options.allowed_origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(max_body)
        // A request answered by one message gets it as `application/json`
        // (the transport allows either when the client accepts both): no SSE
        // stream to set up, frame and close for a `tasks/get`. A handler
        // that sends anything before its answer (progress, an elicitation)
        // still gets an SSE stream, so nothing is lost.
        .with_json_response(true)
        .with_cancellation_token(shutdown);
    let manager = std::sync::Arc::new(LocalSessionManager::default());
    let sessions = std::sync::Arc::new(sessions::Sessions::new(
        std::sync::Arc::clone(&manager),
        options.sessions,
    ));
    let service = StreamableHttpService::new(move || Ok(handler.clone()), manager, config);
    // Only when a method or a tool has scopes of its own does the body
    // reader check them: it is the one place that has parsed the message.
    let call_scopes = options.auth.clone().filter(|auth| auth.has_call_scopes());
    let mut mcp = axum::Router::new()
        .fallback_service(service)
        .layer(axum::middleware::from_fn(move |request, next| {
            let body = BodyLimits {
                max: max_body,
                budget: budget.clone(),
            };
            json_rpc_body(
                request,
                next,
                body,
                strict_headers,
                call_scopes.clone(),
                sessions.clone(),
                tasks_2025,
            )
        }));
    if let Some(auth) = &options.auth {
        mcp = auth.protect(mcp);
    }
    let router = axum::Router::new()
        .nest("/mcp", mcp)
        .route("/healthz", axum::routing::get(|| async { "ok" }));
    match options
        .auth
        .as_ref()
        .and_then(|auth| auth.metadata_router())
    {
        Some(metadata) => router.merge(metadata),
        None => router,
    }
}

/// Answers bodies that are too large or not JSON with a JSON-RPC error object
/// (`-32600` / `-32700`) instead of a bare text status, so every client gets
/// an error it can parse, and carries a `subscriptions/listen` request's
/// `taskIds` past rmcp (see [`listen`]). A legacy session's DELETE is
/// answered 204 (rmcp says 202). With `call_scopes` (OAuth scopes per
/// method or tool), a message the principal lacks a scope for is answered
/// 403 `insufficient_scope` (see [`crate::auth::scopes`]). An `initialize`
/// that would open a legacy session is counted against the caller's and the
/// server's session caps ([`sessions`]). Other requests pass through
/// untouched.
async fn json_rpc_body(
    request: axum::extract::Request,
    next: axum::middleware::Next,
    limits: BodyLimits,
    strict_headers: bool,
    call_scopes: Option<std::sync::Arc<crate::auth::Authenticator>>,
    sessions: std::sync::Arc<sessions::Sessions>,
    serves_tasks_2025: bool,
) -> axum::response::Response {
    use axum::http::{Method, StatusCode};
    use axum::response::IntoResponse as _;

    if request.method() == Method::DELETE {
        // rmcp answers the DELETE that ends a legacy session with 202, though
        // the session is closed by then; the official Python SDK takes only
        // 200, 204 or 405 and reports any other status as a failure.
        let mut response = next.run(request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
            *response.body_mut() = axum::body::Body::empty();
        }
        return response;
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let max_body = limits.max;
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, read_body(body, &limits)).await;
    // Held until the request is answered: its bytes are in use until then.
    let (bytes, _held) = match read {
        Ok(Ok(read)) => read,
        Ok(Err(BodyError::Busy)) => {
            let message = "the server is holding too many request bodies at once \
                           (server.max_buffered_body_bytes); retry shortly";
            let mut response = (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(unread_refusal(Unread::Busy, message)),
            )
                .into_response();
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
            return response;
        }
        Err(_) | Ok(Err(BodyError::Cut)) => {
            // The accept loop's own deadline (`body_read_timeout`) ends a
            // trickled body as a read error; either way it did not arrive.
            let message = format!(
                "the request body did not arrive whole (in time: within {} s)",
                BODY_READ_TIMEOUT.as_secs()
            );
            return (
                StatusCode::REQUEST_TIMEOUT,
                axum::Json(unread_refusal(Unread::Invalid, &message)),
            )
                .into_response();
        }
        Ok(Err(BodyError::TooLarge)) => {
            let message =
                format!("request body exceeds the {max_body}-byte limit (server.max_body_bytes)");
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                axum::Json(unread_refusal(Unread::Invalid, &message)),
            )
                .into_response();
        }
    };
    let method = match serde_json::from_slice::<Envelope<'_>>(&bytes) {
        Ok(envelope) => {
            if !strict_headers {
                supply_task_name(&mut parts.headers, &envelope);
            }
            // Owned: the body may be replaced below (`tasks_2025::route`).
            envelope.method.map(std::borrow::Cow::into_owned)
        }
        // Valid JSON that is not one request object (a batch, say): rmcp's call.
        Err(_) if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok() => None,
        Err(e) => {
            let message = format!("Parse error: the body is not valid JSON ({e})");
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(unread_refusal(Unread::NotJson, &message)),
            )
                .into_response();
        }
    };
    if let Some(auth) = &call_scopes {
        // Parsed again, as a value, only here: a batch or an odd message
        // must not slip past the check because `Envelope` did not fit it.
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let calls = crate::auth::scopes::Call::all_in(&body);
        if let Some(refusal) = auth.authorize_calls(&parts.extensions, &calls) {
            return refusal;
        }
    }
    // The 2025-11-25 task wire: its requests renamed for the gateway, its
    // capability and tool annotations added to rmcp's answers.
    let tasks_2025 = if serves_tasks_2025 {
        tasks_2025::route(&parts.headers, method.as_deref(), &bytes)
    } else {
        tasks_2025::Route::Pass
    };
    let bytes = match &tasks_2025 {
        tasks_2025::Route::Rewrite(renamed) => renamed.clone(),
        _ => bytes,
    };
    let mut listen = None;
    if method.as_deref() == Some("subscriptions/listen") {
        let request: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        match listen::inspect(&request) {
            listen::Inspection::PassThrough => {}
            listen::Inspection::Listen(ids) => listen = Some(ids),
            listen::Inspection::Refuse(status, body) => {
                return (status, axum::Json(body)).into_response();
            }
        }
    }
    let opens_session =
        method.as_deref() == Some("initialize") && !parts.headers.contains_key("mcp-session-id");
    if opens_session {
        let owner = session_owner(&parts.extensions);
        if let Err(refusal) = sessions.admit(&owner).await {
            return refusal;
        }
        let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
        let response = next.run(request).await;
        sessions.opened(&owner, &response);
        return tasks_2025::patch_response(&tasks_2025, response).await;
    }
    let mut request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    match listen {
        None => tasks_2025::patch_response(&tasks_2025, next.run(request).await).await,
        Some(ids) => {
            request.extensions_mut().insert(ids.clone());
            listen::acknowledge_task_ids(next.run(request).await, ids)
        }
    }
}

/// Whose session an `initialize` opens: the authenticated principal, or
/// `anonymous` (as [`Gateway::owner`] decides).
fn session_owner(extensions: &http::Extensions) -> agentgate_backend::Owner {
    extensions
        .get::<crate::auth::Principal>()
        .map_or_else(agentgate_backend::Owner::anonymous, |p| p.owner.clone())
}

/// How long a request body may take to arrive: a client trickling one
/// holds its connection, which the idle timeout does not close while a
/// request is being read.
const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The body bounds of `/mcp`: per request, and across all of them.
#[derive(Clone)]
struct BodyLimits {
    max: usize,
    /// One permit per body byte held (`max_buffered_body_bytes`).
    budget: std::sync::Arc<tokio::sync::Semaphore>,
}

/// Why a body was not read.
enum BodyError {
    /// Every byte of `max_buffered_body_bytes` is held by other bodies.
    Busy,
    /// Longer than the limit.
    TooLarge,
    /// The connection failed or the body's deadline passed mid-body.
    Cut,
}

/// Reads a body of at most `limits.max` bytes, taking a permit of the
/// budget for every byte kept (returned with the bytes; `Busy` at once
/// when the budget is spent, rather than waiting while holding a
/// connection). A longer body is read on (and dropped, unbudgeted) up to a
/// bound before `Err`, so the client finishes sending and reads the 413
/// instead of meeting a closed socket mid-write.
async fn read_body(
    body: axum::body::Body,
    limits: &BodyLimits,
) -> Result<(axum::body::Bytes, Option<tokio::sync::OwnedSemaphorePermit>), BodyError> {
    use http_body_util::BodyExt as _;
    let max = limits.max;
    let drain_limit = max.saturating_mul(4).max(16 * 1024 * 1024);
    let mut body = body;
    let mut kept = Vec::new();
    let mut held: Option<tokio::sync::OwnedSemaphorePermit> = None;
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(if seen > max {
                BodyError::TooLarge
            } else {
                BodyError::Cut
            });
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen <= max {
            let permit = u32::try_from(data.len())
                .ok()
                .and_then(|n| limits.budget.clone().try_acquire_many_owned(n).ok())
                .ok_or(BodyError::Busy)?;
            match &mut held {
                Some(held) => held.merge(permit),
                None => held = Some(permit),
            }
            kept.extend_from_slice(&data);
        } else if seen > drain_limit {
            break;
        }
    }
    if seen > max {
        Err(BodyError::TooLarge)
    } else {
        Ok((axum::body::Bytes::from(kept), held))
    }
}

/// Just enough of a JSON-RPC message to route it; parsing it also checks
/// that the whole body is well-formed JSON.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<EnvelopeParams<'a>>,
}

#[derive(serde::Deserialize)]
struct EnvelopeParams<'a> {
    #[serde(borrow, default, rename = "taskId")]
    task_id: Option<std::borrow::Cow<'a, str>>,
}

/// Supplies a missing `Mcp-Name` on `tasks/get|update|cancel` from the body's
/// `taskId`, so rmcp's header check passes for clients that do not send it
/// (see [`HttpOptions::strict_headers`]). A header that is present is left
/// for rmcp to compare, so a mismatch is still refused.
fn supply_task_name(headers: &mut http::HeaderMap, envelope: &Envelope<'_>) {
    use base64::Engine as _;
    let is_task_method = matches!(
        envelope.method.as_deref(),
        Some("tasks/get" | "tasks/update" | "tasks/cancel")
    );
    if !is_task_method || headers.contains_key("mcp-name") {
        return;
    }
    let Some(task_id) = envelope.params.as_ref().and_then(|p| p.task_id.as_deref()) else {
        return;
    };
    // The transport's Base64 form carries any id, whatever its characters.
    let encoded = format!(
        "=?base64?{}?=",
        base64::engine::general_purpose::STANDARD.encode(task_id)
    );
    if let Ok(value) = http::HeaderValue::from_str(&encoded) {
        headers.insert("mcp-name", value);
    }
}
