//! The HTTP client beneath rmcp's Streamable HTTP transport, for sessions
//! that must outlive this process: a 2025-11-25 server keeps its tasks per
//! session, so a call it runs as its task can be followed again after
//! agentgate restarts only in the session that made it.
//!
//! ```text
//! new session:  initialize ─▶ server ─▶ Mcp-Session-Id ─▶ SessionHandle::id (saved with the task)
//! saved one:    initialize ─▶ answered here from the saved id and version (never sent)
//!               notifications/initialized ─▶ swallowed (the server had it long ago)
//!               tasks/result, tasks/get … ─▶ server, under the saved Mcp-Session-Id
//! close:        DELETE the session, unless a task of the server's still runs in it (kept)
//! a POST refused at the HTTP level (404, or 400: a session the server forgot)
//!               ─▶ SessionHandle::refused: the call is lost (rmcp would wait for ever)
//! ```
//!
//! rmcp's transport has no way into an existing session (it refuses
//! `Mcp-Session-Id` as a custom header and takes the id from the answer to
//! its `initialize`), so re-entering one is done beneath it, in the
//! [`StreamableHttpClient`] it sends through. Everything else is reqwest's
//! client as rmcp drives it, with its size limits, and no redirects
//! followed: a token goes only to the URL the operator configured.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, Implementation, InitializeResult,
    ProtocolVersion, ServerCapabilities, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use rmcp_reqwest::header::{HeaderName, HeaderValue};
use sse_stream::Sse;
use tokio_util::sync::CancellationToken;

use crate::upstream::lock;

/// A saved session to enter again: what the server said at `initialize`
/// that the rest of the connection depends on.
#[derive(Debug, Clone)]
pub(crate) struct SavedSession {
    /// The server's `Mcp-Session-Id`.
    pub(crate) id: String,
    /// The server's name (for the connection's peer info).
    pub(crate) server: String,
}

/// What a connection's HTTP client knows of its session, shared with the
/// call that uses it.
#[derive(Default)]
pub(crate) struct SessionHandle {
    id: Mutex<Option<Arc<str>>>,
    /// Set while a task of the server's runs in the session: closing the
    /// connection then leaves the session for a later process.
    keep: AtomicBool,
    /// Why the server refused a request of the session at the HTTP level
    /// (a session it no longer knows gets 404, or 400 from some servers),
    /// once it did: rmcp leaves a request whose answer names no request
    /// waiting for ever.
    refused: Mutex<Option<String>>,
    refused_now: CancellationToken,
    /// The DELETE rmcp asked for while the session was kept, for
    /// [`SessionHandle::end`].
    deferred: Mutex<Option<DeferredDelete>>,
}

impl std::fmt::Debug for SessionHandle {
    // Not the deferred DELETE: it holds the bearer token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("id", &self.id())
            .field("keep", &self.keep.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

/// A DELETE of the session, as rmcp would have sent it.
struct DeferredDelete {
    http: rmcp_reqwest::Client,
    uri: Arc<str>,
    session_id: Arc<str>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
}

impl SessionHandle {
    /// The session's id, once the server gave one.
    pub(crate) fn id(&self) -> Option<String> {
        lock(&self.id).as_deref().map(str::to_owned)
    }

    /// Whether closing the connection ends the session (DELETE).
    pub(crate) fn keep(&self, keep: bool) {
        self.keep.store(keep, Ordering::SeqCst);
    }

    /// Ends a session that was kept when its connection closed: the DELETE
    /// rmcp asked for then is sent now, within `within` (errors ignored: the
    /// server ends unused sessions on its own terms).
    pub(crate) async fn end(&self, within: std::time::Duration) {
        let deferred = lock(&self.deferred).take();
        if let Some(d) = deferred {
            let delete =
                d.http
                    .delete_session(d.uri, d.session_id, d.auth_header, d.custom_headers);
            let _ = tokio::time::timeout(within, delete).await;
        }
    }

    /// Resolves, with why, once the server refused a request of the
    /// session at the HTTP level.
    pub(crate) async fn refused(&self) -> String {
        self.refused_now.cancelled().await;
        lock(&self.refused).clone().unwrap_or_default()
    }

    /// Notes a request the server refused as one of a session it does not
    /// know: 404 (the spec's answer), 400, or a JSON-RPC error that names
    /// no request (server-everything answers an unknown session with 400
    /// and such an error). Other failures (a reset connection, a 5xx) are
    /// left to the request that met them.
    fn check(
        &self,
        answer: &Result<StreamableHttpPostResponse, StreamableHttpError<rmcp_reqwest::Error>>,
    ) {
        let unknown_session = |status: Option<u16>| matches!(status, Some(400 | 404));
        let why = match answer {
            Err(StreamableHttpError::SessionExpired) => {
                "the server no longer knows the session (it restarted, or ended it)".to_owned()
            }
            Err(StreamableHttpError::Client(error))
                if unknown_session(error.status().map(|status| status.as_u16())) =>
            {
                format!(
                    "the server refused a request of the session: {}",
                    crate::upstream::causes(error)
                )
            }
            Err(StreamableHttpError::HttpStatus(error)) if unknown_session(Some(error.status)) => {
                format!(
                    "the server refused a request of the session with HTTP {}",
                    error.status
                )
            }
            Err(_) => return,
            Ok(StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(error), _))
                if error.id.is_none() =>
            {
                format!(
                    "the server refused a request of the session: {}",
                    crate::upstream::capped(&error.error.message)
                )
            }
            Ok(_) => return,
        };
        lock(&self.refused).get_or_insert(why);
        self.refused_now.cancel();
    }
}

/// reqwest's Streamable HTTP client, recording the session's id and able
/// to enter a saved session.
#[derive(Clone)]
pub(crate) struct SessionClient {
    http: rmcp_reqwest::Client,
    enter: Option<Arc<SavedSession>>,
    handle: Arc<SessionHandle>,
}

impl SessionClient {
    /// A client for a new session, or for entering `enter`.
    pub(crate) fn new(enter: Option<SavedSession>) -> Result<Self, rmcp_reqwest::Error> {
        let http = rmcp_reqwest::Client::builder()
            // rmcp's own default: a pooled idle connection stalls the next
            // request by ~40 ms on some servers.
            .pool_max_idle_per_host(0)
            .redirect(rmcp_reqwest::redirect::Policy::none())
            .build()?;
        let handle = SessionHandle::default();
        if let Some(saved) = &enter {
            *lock(&handle.id) = Some(Arc::from(saved.id.as_str()));
        }
        Ok(Self {
            http,
            enter: enter.map(Arc::new),
            handle: Arc::new(handle),
        })
    }

    pub(crate) fn handle(&self) -> Arc<SessionHandle> {
        self.handle.clone()
    }

    /// The answer to `message` when entering a saved session and it is the
    /// handshake, which the server had when the session began.
    fn answered_here(&self, message: &ClientJsonRpcMessage) -> Option<StreamableHttpPostResponse> {
        let saved = self.enter.as_ref()?;
        match message {
            ClientJsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::InitializeRequest(_)) =>
            {
                // Only 2025-11-25 sessions are saved: the version whose
                // tasks live in a session.
                let result = InitializeResult::new(ServerCapabilities::default())
                    .with_protocol_version(ProtocolVersion::V_2025_11_25)
                    .with_server_info(Implementation::new(saved.server.clone(), String::new()));
                let answer = ServerJsonRpcMessage::response(
                    ServerResult::InitializeResult(result),
                    request.id.clone(),
                );
                Some(StreamableHttpPostResponse::Json(
                    answer,
                    Some(saved.id.clone()),
                ))
            }
            ClientJsonRpcMessage::Notification(notification)
                if matches!(
                    notification.notification,
                    ClientNotification::InitializedNotification(_)
                ) =>
            {
                Some(StreamableHttpPostResponse::Accepted)
            }
            _ => None,
        }
    }
}

impl StreamableHttpClient for SessionClient {
    type Error = rmcp_reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        if let Some(answer) = self.answered_here(&message) {
            return Ok(answer);
        }
        if let Some(id) = &session_id {
            *lock(&self.handle.id) = Some(id.clone());
        }
        let answer = self
            .http
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.handle.check(&answer);
        let answer = answer?;
        // The answer to `initialize` names the new session.
        let given = match &answer {
            StreamableHttpPostResponse::Json(_, Some(id))
            | StreamableHttpPostResponse::Sse(_, Some(id)) => Some(id.as_str()),
            _ => None,
        };
        if let Some(id) = given {
            *lock(&self.handle.id) = Some(Arc::from(id));
        }
        Ok(answer)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        if self.handle.keep.load(Ordering::SeqCst) {
            *lock(&self.handle.deferred) = Some(DeferredDelete {
                http: self.http.clone(),
                uri,
                session_id,
                auth_header,
                custom_headers,
            });
            return Ok(());
        }
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        // A server need not offer the session's stream (405), so its
        // refusal is no news about the session.
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        ClientConfig, InitializeRequest, InitializedNotification, ListToolsRequest, NumberOrString,
    };

    use super::*;

    fn initialize() -> ClientJsonRpcMessage {
        ClientJsonRpcMessage::request(
            ClientRequest::InitializeRequest(InitializeRequest::new(ClientConfig::default())),
            NumberOrString::Number(0),
        )
    }

    #[test]
    fn entering_a_saved_session_answers_its_handshake_here() {
        let saved = SavedSession {
            id: "session-1".to_owned(),
            server: "everything".to_owned(),
        };
        let client = SessionClient::new(Some(saved)).expect("a client");
        assert_eq!(client.handle().id().as_deref(), Some("session-1"));
        let Some(StreamableHttpPostResponse::Json(answer, Some(id))) =
            client.answered_here(&initialize())
        else {
            panic!("initialize is answered here, with the saved session's id")
        };
        assert_eq!(id, "session-1");
        let answer = serde_json::to_value(answer).expect("json");
        assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(answer["id"], 0);
        let initialized = ClientJsonRpcMessage::notification(
            ClientNotification::InitializedNotification(InitializedNotification::default()),
        );
        assert!(matches!(
            client.answered_here(&initialized),
            Some(StreamableHttpPostResponse::Accepted)
        ));
        let list = ClientJsonRpcMessage::request(
            ClientRequest::ListToolsRequest(ListToolsRequest::default()),
            NumberOrString::Number(1),
        );
        assert!(
            client.answered_here(&list).is_none(),
            "everything else goes to the server"
        );
    }

    #[test]
    fn a_new_session_sends_its_handshake() {
        let client = SessionClient::new(None).expect("a client");
        assert!(client.answered_here(&initialize()).is_none());
        assert_eq!(client.handle().id(), None);
    }
}
