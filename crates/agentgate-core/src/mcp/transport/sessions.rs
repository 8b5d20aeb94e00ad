//! Legacy sessions (protocol ≤ 2025-11-25, started by `initialize`),
//! counted per principal and in all, so no caller can fill the server with
//! them.
//!
//! rmcp keeps each session (a worker task and its channels) in its
//! `LocalSessionManager` until the client deletes it or it has been idle
//! for the keep-alive; nothing bounds how many a caller opens. The body
//! reader ([`super`]) asks [`Sessions::admit`] before an
//! `initialize` that would open one, and hands the answer to
//! [`Sessions::opened`], which files the new session id under the caller:
//!
//! ```text
//! POST /mcp initialize (no Mcp-Session-Id)
//!   admit: forget the caller's sessions rmcp has closed, then
//!          ≥ limits.max_sessions of the caller's ─▶ 429 -32029
//!          ≥ server.max_sessions in all ─────────▶ 503 -32029
//!   rmcp opens the session ─▶ opened: its Mcp-Session-Id filed under the caller
//! ```
//!
//! 2026-07-28 clients open no session (`server/discover`), so they are not
//! counted. Counts are per instance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentgate_backend::Owner;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse as _, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::json;

use crate::mcp::error::LIMITED;

/// How many legacy sessions may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// In all, on this instance; 0 = no cap.
    pub total: usize,
    /// Per principal, on this instance; 0 = no cap.
    pub per_principal: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            total: 4096,
            per_principal: 64,
        }
    }
}

/// The open sessions of each principal.
pub(crate) struct Sessions {
    manager: Arc<LocalSessionManager>,
    limits: SessionLimits,
    by_principal: Mutex<HashMap<Owner, Vec<String>>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    pub(crate) fn new(manager: Arc<LocalSessionManager>, limits: SessionLimits) -> Self {
        Self {
            manager,
            limits,
            by_principal: Mutex::default(),
        }
    }

    /// Whether `owner` may open one more session; the refusal otherwise.
    pub(crate) async fn admit(&self, owner: &Owner) -> Result<(), Response> {
        let (open, total) = {
            let live = self.manager.sessions.read().await;
            let mut by_principal = self
                .by_principal
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // rmcp removes a session it closed (deleted, idle, failed).
            by_principal.retain(|_, ids| {
                ids.retain(|id| live.contains_key(id.as_str()));
                !ids.is_empty()
            });
            (by_principal.get(owner).map_or(0, Vec::len), live.len())
        };
        let per_principal = self.limits.per_principal;
        if per_principal > 0 && open >= per_principal {
            return Err(refusal(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "too many sessions: this principal has {open} open, the most allowed \
                     (limits.max_sessions); close one (DELETE /mcp with its Mcp-Session-Id) or \
                     let an idle one expire"
                ),
                "limits.max_sessions",
            ));
        }
        if self.limits.total > 0 && total >= self.limits.total {
            return Err(refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the server has {total} sessions open, the most it keeps \
                     (server.max_sessions); retry shortly"
                ),
                "server.max_sessions",
            ));
        }
        Ok(())
    }

    /// Files the session `response` opened (its `Mcp-Session-Id`) under
    /// `owner`.
    pub(crate) fn opened(&self, owner: &Owner, response: &Response) {
        let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        else {
            return;
        };
        self.by_principal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(owner.clone())
            .or_default()
            .push(id.to_owned());
    }
}

/// A JSON-RPC error (`id: null`: the session was not opened, so there is no
/// request to answer in it) with a `Retry-After`.
fn refusal(status: StatusCode, message: String, config_key: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": LIMITED.0,
            "message": message,
            "data": {"configKey": config_key, "retryAfterMs": 1000},
        },
    });
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}
