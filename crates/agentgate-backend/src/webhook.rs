//! Webhooks: HTTP requests an upstream sends *to* agentgate (an agent's push
//! notification that a task changed), handed to the backend that asked for
//! them.
//!
//! ```text
//! upstream ─POST /hooks/{backend}/{path}─▶ agentgate's HTTP server (core)
//!                                            └─▶ Backend::webhook().handle(WebhookRequest)
//!                                                  └─ checks the sender, then usually Nudge
//! ```
//!
//! The engine mounts every backend's webhook on the HTTP server it serves MCP
//! on (outside `/mcp`'s authentication: a webhook authenticates its senders
//! itself, e.g. by a per-task token the backend handed the upstream). The
//! types are plain data, so a backend needs no HTTP framework and tests can
//! call a webhook directly.
//!
//! The server asks [`Webhook::check_sender`] with the path and headers
//! before it reads a body, and reads at most [`Webhook::max_body_bytes`]
//! within a few seconds: webhooks are open to anyone who can reach the
//! server, and a stranger must not make it buffer megabytes, or hold a
//! connection with a body that never ends, before being told no.

use crate::BoxFuture;

/// The path prefix webhooks are served under: `/hooks/{backend}/…`.
pub const WEBHOOK_PREFIX: &str = "/hooks";

/// One `POST /hooks/{backend}/{path}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    /// What follows `/hooks/{backend}/`, without a leading `/`.
    pub path: String,
    /// The headers, names in lower case; a header that is not UTF-8 is left
    /// out, a repeated one appears once per value.
    pub headers: Vec<(String, String)>,
    /// The request body, as sent.
    pub body: Vec<u8>,
}

impl WebhookRequest {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The answer to a webhook request: a status and a short text body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookResponse {
    /// The HTTP status.
    pub status: u16,
    /// A short text saying why (for the sender's logs).
    pub body: String,
}

impl WebhookResponse {
    /// An answer with `status` and `body`.
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            body: body.into(),
        }
    }
}

/// A backend's handler of the requests its upstream sends to agentgate.
pub trait Webhook: Send + Sync + 'static {
    /// Answers one request: checks who sent it, then acts (usually a
    /// [`Nudge`](crate::Nudge) of the task it names).
    fn handle(&self, request: WebhookRequest) -> BoxFuture<'_, WebhookResponse>;

    /// Checks who sent a request from its path and headers alone (its
    /// `body` is empty: not read yet). `Some(answer)` refuses it without
    /// reading the body; `None` reads the body and calls
    /// [`handle`](Self::handle), which must check the sender again (a test
    /// or another server may call it directly). The default accepts every
    /// sender here: a webhook whose senders sign their bodies can only
    /// check them in `handle`.
    fn check_sender(&self, head: &WebhookRequest) -> Option<WebhookResponse> {
        let _ = head;
        None
    }

    /// The longest body read; a longer one is answered 413 unread. The
    /// default is 1 MiB.
    fn max_body_bytes(&self) -> usize {
        1024 * 1024
    }
}
