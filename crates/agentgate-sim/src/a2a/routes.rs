//! The routes and the front door: the public Agent Card, JSON-RPC at `/` behind the
//! bearer token and the `A2A-Version` check (§3.6.2: an absent or empty version is
//! 0.3, which is refused with VersionNotSupportedError -32009), and the sign-in page
//! of `needs-auth` tasks (no token and no version header: it stands for the page a
//! person opens in a browser, out of band, §7.6), and the OAuth token endpoint
//! (`oauth`). JSON-RPC errors are answered with HTTP 200 (the official Python SDK's
//! server does the same); only a missing, wrong or expired token (401) and injected
//! faults (503, 500) change the HTTP status.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use std::collections::HashMap;

use super::card::{AGENT_CARD_PATH, agent_card};
use super::errors::RpcError;
use super::{A2aSim, PROTOCOL_VERSION, rpc};
use crate::oauth::{self, TOKEN_PATH};

/// The largest request body accepted (an A2A message with inline files fits).
pub(super) const MAX_BODY: usize = 4 * 1024 * 1024;

/// The service-parameter header (§3.2.6) and query parameter (§3.6.1) naming the version.
const VERSION_HEADER: &str = "a2a-version";
const VERSION_QUERY: &str = "A2A-Version";

pub(crate) fn router(sim: A2aSim) -> Router {
    Router::new()
        .route(AGENT_CARD_PATH, get(card))
        .route("/", post(jsonrpc))
        .route("/auth/{task_id}", get(sign_in))
        .route(TOKEN_PATH, post(token))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(sim)
}

/// `public_base_url`, else `http://` and the Host the client used.
fn base_url(sim: &A2aSim, headers: &HeaderMap) -> String {
    if let Some(base) = &sim.config().public_base_url {
        return base.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

async fn card(State(sim): State<A2aSim>, headers: HeaderMap) -> Response {
    axum::Json(agent_card(sim.config(), &base_url(&sim, &headers))).into_response()
}

async fn sign_in(State(sim): State<A2aSim>, Path(task_id): Path<String>) -> Response {
    if sim.sign_in(&task_id) {
        (StatusCode::OK, "Signed in. You can close this page.\n").into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            "No task waits for a sign-in under this id.\n",
        )
            .into_response()
    }
}

async fn token(State(sim): State<A2aSim>, headers: HeaderMap, body: Bytes) -> Response {
    let mut store = sim.inner.store();
    let store = &mut *store;
    let (response, issued) = oauth::token_request(
        sim.config().oauth.as_ref(),
        super::OAUTH_SCOPE,
        &mut store.tokens,
        &headers,
        &body,
    );
    if issued {
        store.stats.tokens_issued += 1;
    } else {
        store.stats.token_errors += 1;
    }
    response
}

/// Whether `Authorization` carries the configured bearer token or a valid access
/// token from the token endpoint (anything goes when neither is configured).
fn authorized(sim: &A2aSim, headers: &HeaderMap) -> bool {
    let config = sim.config();
    if config.token.is_none() && config.oauth.is_none() {
        return true;
    }
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
    else {
        return false;
    };
    if config
        .token
        .iter()
        .chain(&config.user_tokens)
        .any(|token| given.as_bytes() == token.as_bytes())
    {
        return true;
    }
    config.oauth.is_some() && sim.inner.store().tokens.valid(given)
}

/// The version the request names: the header, else the query parameter, else "0.3".
fn requested_version(headers: &HeaderMap, query: &HashMap<String, String>) -> String {
    let value = headers
        .get(VERSION_HEADER)
        .and_then(|h| h.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .or_else(|| {
            query
                .get(VERSION_QUERY)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
        });
    value.unwrap_or("0.3").to_owned()
}

/// Major.Minor equality; a patch number is ignored (§3.6).
fn version_supported(version: &str) -> bool {
    let mut parts = version.split('.');
    let major_minor = (parts.next(), parts.next());
    major_minor == (Some("1"), Some("0")) && parts.all(|p| p.chars().all(|c| c.is_ascii_digit()))
        || version == PROTOCOL_VERSION
}

async fn jsonrpc(
    State(sim): State<A2aSim>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&sim, &headers) {
        sim.inner.store().stats.unauthorized += 1;
        return (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                "Bearer realm=\"agentgate-sim-a2a\"",
            )],
            axum::Json(json!({
                "error": "missing, wrong or expired bearer token: send `Authorization: Bearer \
                          <token>` as the card's securitySchemes say"
            })),
        )
            .into_response();
    }
    let envelope = match rpc::Envelope::parse(&body) {
        Ok(envelope) => envelope,
        Err((id, error)) => return rpc::error_response(&id, &error),
    };
    let version = requested_version(&headers, &query);
    if !version_supported(&version) {
        return rpc::error_response(&envelope.id, &RpcError::version_not_supported(&version));
    }
    sim.inner.store().stats.rpc_requests += 1;
    if sim.faults().take_failure() {
        sim.inner.store().stats.faults_injected += 1;
        let error = RpcError::internal("service unavailable (injected fault)");
        let mut response = rpc::error_response(&envelope.id, &error);
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        return response;
    }
    rpc::dispatch(sim.clone(), base_url(&sim, &headers), envelope).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_major_minor() {
        assert!(version_supported("1.0"));
        assert!(version_supported("1.0.2"));
        assert!(!version_supported("0.3"));
        assert!(!version_supported("1.1"));
        assert!(!version_supported("1"));
    }

    #[test]
    fn an_absent_version_is_0_3() {
        assert_eq!(requested_version(&HeaderMap::new(), &HashMap::new()), "0.3");
        let mut headers = HeaderMap::new();
        headers.insert("A2A-Version", " 1.0 ".parse().expect("header"));
        assert_eq!(requested_version(&headers, &HashMap::new()), "1.0");
        let query = HashMap::from([(VERSION_QUERY.to_owned(), "1.0".to_owned())]);
        assert_eq!(requested_version(&HeaderMap::new(), &query), "1.0");
    }
}
