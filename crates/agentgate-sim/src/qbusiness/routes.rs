//! HTTP routes and the front door.
//!
//! | method and path | operation |
//! |---|---|
//! | `POST /applications/{applicationId}/conversations?sync` | ChatSync |
//! | `POST /applications/{applicationId}/conversations` (no `sync`) | streaming Chat: refused, `ValidationException` / `UNKNOWN_OPERATION` |
//! | `GET /applications/{applicationId}/conversations` | ListConversations |
//! | `GET /applications/{applicationId}/conversations/{conversationId}` | ListMessages |
//! | `DELETE /applications/{applicationId}/conversations/{conversationId}` | DeleteConversation |
//! | `GET /oauth/authorize?state=...` | the Calendar plugin's sign-in page (no SigV4) |
//! | `POST /token?aws_iam=t` | SSO OIDC `CreateTokenWithIAM` (signing name `sso-oauth`) |
//! | `POST /` (form `Action=AssumeRole`) | STS `AssumeRole` (signing name `sts`) |
//! | anything else | 404 `UnknownOperationException` |
//!
//! The front door (a middleware) runs for every request: it waits the configured latency,
//! reads the body (at most [`MAX_BODY`] bytes), verifies SigV4 (except for `/oauth/`;
//! Q Business accepts the operator's key and the session keys STS issued, SSO OIDC and
//! STS only the operator's, and STS answers its errors in XML),
//! may lose a successful answer after the fact (`Faults::set_lost_rate`), and stamps
//! `x-amzn-RequestId` on every response.

use std::time::SystemTime;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Extension, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use super::QBusinessSim;
use super::chat;
use super::errors::{ApiError, RESOURCE_CONVERSATION};
use super::identity_center::{self, SSO_OIDC_SERVICE, STS_SERVICE};
use super::ids::{ID_PATTERN, is_resource_id, new_uuid};
use super::plugins;
use super::request::{Query, next_token};
use super::sigv4::{Received, SERVICE, Signer};
use super::wire::ConversationSummary;

/// Largest request body accepted (five 10 MB attachments, base64-encoded, fit).
pub const MAX_BODY: usize = 72 * 1024 * 1024;

/// All routes of the emulator.
pub(crate) fn router(sim: QBusinessSim) -> Router {
    Router::new()
        .route(
            "/applications/{application_id}/conversations",
            get(list_conversations).post(post_conversations),
        )
        .route(
            "/applications/{application_id}/conversations/{conversation_id}",
            get(list_messages).delete(delete_conversation),
        )
        .route("/oauth/authorize", get(authorize))
        .route("/token", post(create_token_with_iam))
        .route("/", post(sts))
        .fallback(no_such_operation)
        .method_not_allowed_fallback(no_such_operation)
        .layer(middleware::from_fn_with_state(sim.clone(), front_door))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(sim)
}

async fn front_door(State(sim): State<QBusinessSim>, request: Request, next: Next) -> Response {
    let request_id = new_uuid();
    let delay = sim.faults().delay();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut response = if request.uri().path().starts_with("/oauth/") {
        next.run(request).await
    } else {
        let (parts, body) = request.into_parts();
        match axum::body::to_bytes(body, MAX_BODY).await {
            Err(_) => ApiError::too_large(MAX_BODY).into_response(),
            Ok(bytes) => {
                let received = Received {
                    method: parts.method.as_str(),
                    path_and_query: parts.uri.path_and_query().map_or("/", |p| p.as_str()),
                    authority: parts.uri.authority().map(|a| a.as_str()),
                    headers: &parts.headers,
                    body: &bytes,
                };
                let service = match parts.uri.path() {
                    "/token" => SSO_OIDC_SERVICE,
                    "/" => STS_SERVICE,
                    _ => SERVICE,
                };
                let verified = sim
                    .inner
                    .verifier
                    .verify(&received, SystemTime::now(), service, &|key| {
                        sim.inner.state().identity.session(key)
                    })
                    .and_then(|signer| match (&signer, service) {
                        (Signer::Session { .. }, SERVICE) | (Signer::Operator, _) => Ok(signer),
                        // The role grants Q Business, not a token exchange.
                        (Signer::Session { .. }, _) => Err(ApiError::access_denied(
                            "A role session may not call this operation.",
                        )),
                    });
                match verified {
                    Err(e) if service == STS_SERVICE => identity_center::sts_error(
                        e.status(),
                        identity_center::sts_code(e.code()),
                        e.message(),
                    ),
                    Err(e) => {
                        tracing::debug!(code = e.code(), "request refused: {}", e.message());
                        e.into_response()
                    }
                    Ok(signer) => {
                        let chat_sync =
                            parts.method == axum::http::Method::POST && service == SERVICE;
                        let mut parts = parts;
                        if let Signer::Session { user } = signer {
                            parts.extensions.insert(SessionUser(user));
                        }
                        let response = next
                            .run(Request::from_parts(parts, Body::from(bytes)))
                            .await;
                        if response.status().is_success() && sim.faults().lose_answer(chat_sync) {
                            // The effect stays applied; only the answer is lost.
                            sim.inner.state().stats.answers_lost += 1;
                            ApiError::internal("An internal error occurred. Retry the request.")
                                .into_response()
                        } else {
                            response
                        }
                    }
                }
            }
        }
    };
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-amzn-RequestId", value);
    }
    response
}

/// The Identity Center user whose identity-aware session signed the request.
#[derive(Clone, Debug)]
struct SessionUser(String);

/// The request's query, with the session's user as the caller.
fn caller_query(raw: Option<&str>, session: Option<Extension<SessionUser>>) -> Query {
    let mut query = Query::parse(raw);
    query.session_user = session.map(|Extension(SessionUser(user))| user);
    query
}

async fn create_token_with_iam(
    State(sim): State<QBusinessSim>,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    identity_center::create_token_with_iam(&sim.inner, raw.as_deref(), &body).await
}

async fn sts(State(sim): State<QBusinessSim>, body: Bytes) -> Response {
    identity_center::sts(&sim.inner, &body)
}

async fn no_such_operation() -> ApiError {
    ApiError::no_such_operation()
}

fn label(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(p)| p)
        .map_err(|e| ApiError::cannot_parse(format!("Could not parse the request path: {e}")))
}

fn labels(
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, String), ApiError> {
    path.map(|Path(p)| p)
        .map_err(|e| ApiError::cannot_parse(format!("Could not parse the request path: {e}")))
}

/// Where the sign-in page is reached: the configured public URL, else the address the
/// client used for this request.
fn base_url(sim: &QBusinessSim, headers: &HeaderMap, uri: &Uri) -> String {
    if let Some(url) = &sim.inner.config.public_base_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

async fn post_conversations(
    State(sim): State<QBusinessSim>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
    session: Option<Extension<SessionUser>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let application_id = label(path)?;
    let query = caller_query(raw.as_deref(), session);
    if !query.sync {
        return Err(ApiError::unknown_operation(
            "Only ChatSync (POST /applications/{applicationId}/conversations?sync) is emulated; \
             the streaming Chat operation is not supported by this emulator.",
        ));
    }
    let base = base_url(&sim, &headers, &uri);
    chat::chat_sync(&sim.inner, &application_id, &query, &body, &base).map(Json)
}

fn check_conversation_id(id: &str) -> Result<(), ApiError> {
    if is_resource_id(id) {
        Ok(())
    } else {
        Err(ApiError::field(
            "conversationId",
            format!("Member must satisfy regular expression pattern: {ID_PATTERN}"),
        ))
    }
}

async fn list_conversations(
    State(sim): State<QBusinessSim>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
    session: Option<Extension<SessionUser>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let application_id = label(path)?;
    if let Some(err) = sim.faults().random_fault() {
        return Err(err);
    }
    sim.inner.check_application(&application_id)?;
    let query = caller_query(raw.as_deref(), session);
    let mut errors = Vec::new();
    query.validate_user(&mut errors);
    let (size, offset) = query.page(&mut errors);
    if !errors.is_empty() {
        return Err(ApiError::field_validation(errors));
    }
    let st = sim.inner.state();
    let mut all: Vec<ConversationSummary> = st
        .conversations
        .get(&query.owner())
        .map(|list| {
            list.iter()
                .map(|c| ConversationSummary {
                    conversation_id: c.id.clone(),
                    title: c.title.clone(),
                    start_time: c.start_time,
                })
                .collect()
        })
        .unwrap_or_default();
    all.reverse(); // newest first
    let page: Vec<_> = all.iter().skip(offset).take(size).cloned().collect();
    let mut body = json!({ "conversations": page });
    if offset + size < all.len() {
        body["nextToken"] = json!(next_token(offset + size));
    }
    Ok(Json(body))
}

async fn list_messages(
    State(sim): State<QBusinessSim>,
    path: Result<Path<(String, String)>, PathRejection>,
    RawQuery(raw): RawQuery,
    session: Option<Extension<SessionUser>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (application_id, conversation_id) = labels(path)?;
    if let Some(err) = sim.faults().random_fault() {
        return Err(err);
    }
    sim.inner.check_application(&application_id)?;
    check_conversation_id(&conversation_id)?;
    let query = caller_query(raw.as_deref(), session);
    let mut errors = Vec::new();
    query.validate_user(&mut errors);
    let (size, offset) = query.page(&mut errors);
    if !errors.is_empty() {
        return Err(ApiError::field_validation(errors));
    }
    let st = sim.inner.state();
    let conversation = st
        .conversation(&query.owner(), &conversation_id)
        .ok_or_else(|| ApiError::not_found(RESOURCE_CONVERSATION, &conversation_id))?;
    let page: Vec<_> = conversation
        .messages
        .iter()
        .skip(offset)
        .take(size)
        .cloned()
        .collect();
    let mut body = json!({ "messages": page });
    if offset + size < conversation.messages.len() {
        body["nextToken"] = json!(next_token(offset + size));
    }
    Ok(Json(body))
}

async fn delete_conversation(
    State(sim): State<QBusinessSim>,
    path: Result<Path<(String, String)>, PathRejection>,
    RawQuery(raw): RawQuery,
    session: Option<Extension<SessionUser>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (application_id, conversation_id) = labels(path)?;
    if let Some(err) = sim.faults().random_fault() {
        return Err(err);
    }
    sim.inner.check_application(&application_id)?;
    check_conversation_id(&conversation_id)?;
    let query = caller_query(raw.as_deref(), session);
    let mut errors = Vec::new();
    query.validate_user(&mut errors);
    if !errors.is_empty() {
        return Err(ApiError::field_validation(errors));
    }
    if sim
        .inner
        .state()
        .remove_conversation(&query.owner(), &conversation_id)
    {
        Ok(Json(json!({})))
    } else {
        Err(ApiError::not_found(RESOURCE_CONVERSATION, &conversation_id))
    }
}

async fn authorize(State(sim): State<QBusinessSim>, RawQuery(raw): RawQuery) -> Response {
    let state = form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned());
    let mut st = sim.inner.state();
    match state.and_then(|s| st.sign_ins.get_mut(&s)) {
        Some(pending) => {
            pending.visited = true;
            // As the web experience's OAuth callback would: Q Business now
            // holds the user's token for the plugin.
            let user = pending.user.clone();
            st.signed_in.insert(user);
            Html(plugins::signed_in_page()).into_response()
        }
        None => (StatusCode::BAD_REQUEST, Html(plugins::unknown_state_page())).into_response(),
    }
}
