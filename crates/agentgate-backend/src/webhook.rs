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
}
