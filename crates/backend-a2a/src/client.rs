//! The HTTP side: reads an agent's card and makes the JSON-RPC calls (§9 of
//! the specification) the jobs need — `SendMessage`, `GetTask`, `ListTasks`,
//! `CancelTask`, and `SubscribeToTask` as a Server-Sent Events stream — each
//! with `A2A-Version: 1.0` and the agent's credentials ([`Auth`]), each
//! counted in [`UpstreamMetrics`] under its method name.
//!
//! Errors are sorted for the scheduler: no answer, HTTP 429 or 5xx, an
//! unavailable token endpoint are worth retrying; any other HTTP status and
//! every JSON-RPC error object are not (the caller may still look at the
//! code, e.g. TaskNotCancelable). A 401 from an agent whose token is an OAuth
//! access token is answered by fetching a new token and calling once more.
//!
//! Every call first asks the agent's [`Guard`] whether its endpoint may be
//! called (a checkpointed endpoint is checked again, as config may have
//! changed); a refusal, and a 3xx answer (never followed: the request
//! carries credentials), fail the call without a retry.

use std::time::Duration;

use agentgate_backend::{JobError, UpstreamMetrics, UpstreamOutcome};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use rmcp::model::ErrorData;
use serde::Serialize;
use serde_json::{Value, json};

use crate::auth::{Auth, AuthError};
use crate::guard::{Guard, Refused, origin_of, refused_in};
use crate::wire::{
    AgentCard, ListTasksRequest, Message, SendOutcome, Task, TaskList, TaskSnapshot,
};

/// The protocol version header (§3.2.6) and the version this backend speaks.
pub const VERSION_HEADER: &str = "A2A-Version";
pub const PROTOCOL_VERSION: &str = "1.0";

/// A2A's TaskNotFoundError, TaskNotCancelableError and
/// UnsupportedOperationError (§5.4), and JSON-RPC's MethodNotFound.
pub const TASK_NOT_FOUND: i64 = -32001;
pub const TASK_NOT_CANCELABLE: i64 = -32002;
pub const UNSUPPORTED_OPERATION: i64 = -32004;
pub const METHOD_NOT_FOUND: i64 = -32601;

/// What went wrong with one call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// No HTTP answer (refused, reset, timed out).
    #[error("no answer: {0}")]
    Transport(String),
    /// An HTTP status other than 200.
    #[error("HTTP {status}{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Http {
        status: u16,
        retry_after: Option<Duration>,
        detail: Option<String>,
    },
    /// A JSON-RPC error object.
    #[error("JSON-RPC error {code}: {message}")]
    Rpc { code: i64, message: String },
    /// An answer that is not what the method returns.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// No credentials could be got (the OAuth token endpoint).
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// agentgate does not send this request (`guard.rs`): nothing was sent.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// A 3xx answer. Never followed: the request carried the agent's
    /// credentials, and the card, not the answer, says where the agent is.
    #[error(
        "HTTP {status}, redirecting to {to}; agentgate does not follow redirects of JSON-RPC \
         calls (they carry the agent's credentials)"
    )]
    Redirect { status: u16, to: String },
}

impl CallError {
    /// The job error for a call of `method` to `agent` that failed so.
    pub fn into_job_error(self, agent: &str, method: &str) -> JobError {
        let message = format!("A2A agent `{agent}`: {method} failed: {self}");
        match self {
            CallError::Transport(_) | CallError::Auth(AuthError::Unavailable { .. }) => {
                JobError::Retryable {
                    message,
                    retry_after: None,
                }
            }
            CallError::Http {
                status,
                retry_after,
                ..
            } if status == 429 || status >= 500 => JobError::Retryable {
                message,
                retry_after,
            },
            CallError::Http { status, .. } => {
                let hint = match status {
                    401 | 403 => " (check the agent's `token_env` token or `[oauth]` client)",
                    _ => "",
                };
                JobError::Fatal(ErrorData::internal_error(
                    format!("{message}{hint}"),
                    Some(json!({"agent": agent, "method": method, "httpStatus": status})),
                ))
            }
            CallError::Rpc { code, .. } => JobError::Fatal(ErrorData::internal_error(
                message,
                Some(json!({"agent": agent, "method": method, "code": code})),
            )),
            CallError::Malformed(_)
            | CallError::Auth(_)
            | CallError::Refused(_)
            | CallError::Redirect { .. } => JobError::Fatal(ErrorData::internal_error(
                message,
                Some(json!({"agent": agent, "method": method})),
            )),
        }
    }

    /// Whether the agent does not offer the method (MethodNotFound or
    /// UnsupportedOperation).
    pub fn unsupported(&self) -> bool {
        matches!(self, CallError::Rpc { code, .. }
            if *code == METHOD_NOT_FOUND || *code == UNSUPPORTED_OPERATION)
    }
}

/// Calls one agent.
#[derive(Debug, Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    /// For the card: a GET without credentials, whose redirects are
    /// followed (within the guard's rules).
    cards: reqwest::Client,
    /// For streams: no overall timeout (a stream lives as long as its
    /// task), a read timeout instead.
    streams: reqwest::Client,
    auth: Auth,
    guard: Guard,
    metrics: UpstreamMetrics,
}

/// The origin a 3xx answer's `Location` points at, for messages.
pub(crate) fn location_origin(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|to| response.url().join(to).ok())
        .map_or_else(|| "no readable Location".to_owned(), |to| origin_of(&to))
}

/// An HTTP response's status, `Retry-After` and JSON-RPC error message.
async fn http_error(response: reqwest::Response) -> CallError {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let detail = response.json::<Value>().await.ok().and_then(|b| {
        b.pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    CallError::Http {
        status,
        retry_after,
        detail,
    }
}

/// The `result` of a JSON-RPC answer, or its error.
fn result_of(body: &Value) -> Result<Value, CallError> {
    if let Some(error) = body.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)")
            .to_owned();
        return Err(CallError::Rpc { code, message });
    }
    body.get("result")
        .cloned()
        .ok_or_else(|| CallError::Malformed("neither `result` nor `error`".into()))
}

fn rpc_outcome(code: i64) -> UpstreamOutcome {
    if code == -32603 {
        UpstreamOutcome::ServerError
    } else {
        UpstreamOutcome::ClientError
    }
}

/// The HTTP clients of one agent: each carries the agent's guarded
/// resolver; `http` and `streams` follow no redirects.
#[derive(Debug, Clone)]
pub struct Clients {
    /// JSON-RPC calls (carries the request timeout).
    pub http: reqwest::Client,
    /// Card reads.
    pub cards: reqwest::Client,
    /// `SubscribeToTask` streams.
    pub streams: reqwest::Client,
}

impl AgentClient {
    /// A client calling through `clients`, authenticating with `auth`,
    /// sending only where `guard` lets it.
    pub fn new(clients: Clients, auth: Auth, guard: Guard, metrics: UpstreamMetrics) -> Self {
        Self {
            http: clients.http,
            cards: clients.cards,
            streams: clients.streams,
            auth,
            guard,
            metrics,
        }
    }

    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// Reads the Agent Card at `url`; the error says why in one line.
    pub async fn card(&self, url: &url::Url) -> Result<AgentCard, String> {
        const OPERATION: &str = "GetAgentCard";
        let response = match self
            .cards
            .get(url.clone())
            .header(VERSION_HEADER, PROTOCOL_VERSION)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                self.metrics.record(OPERATION, UpstreamOutcome::Transport);
                return Err(format!(
                    "the card at {url} could not be read: {}",
                    plain(&e)
                ));
            }
        };
        let status = response.status().as_u16();
        self.metrics
            .record(OPERATION, UpstreamOutcome::from_status(status));
        if status != 200 {
            return Err(format!("the card at {url} answered HTTP {status}"));
        }
        let card: AgentCard = response
            .json()
            .await
            .map_err(|e| format!("the card at {url} is not an Agent Card: {}", plain(&e)))?;
        if card.jsonrpc_url().is_none() {
            return Err(format!(
                "the card at {url} lists no JSONRPC interface of protocol version 1.x \
                 (this backend speaks the JSON-RPC binding of A2A 1.0)"
            ));
        }
        Ok(card)
    }

    /// Sends one JSON-RPC request (through `http`), with the credentials;
    /// on a 401 with an OAuth token, once more with a new token. Counts each
    /// HTTP request; returns the 200 response.
    async fn post(
        &self,
        http: &reqwest::Client,
        endpoint: &str,
        method: &str,
        params: &impl Serialize,
        accept: Option<&'static str>,
    ) -> Result<reqwest::Response, CallError> {
        // Checked on every call, not only when the card is read: a task's
        // endpoint is checkpointed, and the config may have changed since.
        let endpoint = self.guard.endpoint(endpoint)?;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut renewed = false;
        loop {
            let authorization = self.auth.header(&self.metrics).await?;
            let mut request = http
                .post(endpoint.clone())
                .header(VERSION_HEADER, PROTOCOL_VERSION)
                .json(&body);
            if let Some(value) = &authorization {
                request = request.header(AUTHORIZATION, value.clone());
            }
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            let response = match request.send().await {
                Ok(r) => r,
                Err(e) => {
                    if let Some(refused) = refused_in(&e) {
                        return Err(CallError::Refused(refused));
                    }
                    self.metrics.record(method, UpstreamOutcome::Transport);
                    return Err(CallError::Transport(plain(&e)));
                }
            };
            let status = response.status().as_u16();
            if status == 200 {
                return Ok(response);
            }
            self.metrics
                .record(method, UpstreamOutcome::from_status(status));
            if response.status().is_redirection() {
                return Err(CallError::Redirect {
                    status,
                    to: location_origin(&response),
                });
            }
            if status == 401
                && !renewed
                && self.auth.renews()
                && let Some(sent) = &authorization
            {
                // The token may have been revoked or expired early: get a
                // new one and try once more.
                self.auth.rejected(sent).await;
                renewed = true;
                continue;
            }
            return Err(http_error(response).await);
        }
    }

    /// One JSON-RPC call; the `result` member.
    async fn call(
        &self,
        endpoint: &str,
        method: &str,
        params: impl Serialize,
    ) -> Result<Value, CallError> {
        let response = self
            .post(&self.http, endpoint, method, &params, None)
            .await?;
        let body: Value = match response.json().await {
            Ok(body) => body,
            Err(e) => {
                self.metrics.record(method, UpstreamOutcome::Transport);
                return Err(CallError::Transport(format!(
                    "the answer was cut: {}",
                    plain(&e)
                )));
            }
        };
        match result_of(&body) {
            Ok(result) => {
                self.metrics.record(method, UpstreamOutcome::Ok);
                Ok(result)
            }
            Err(e) => {
                if let CallError::Rpc { code, .. } = &e {
                    self.metrics.record(method, rpc_outcome(*code));
                }
                Err(e)
            }
        }
    }

    /// `SendMessage`: a task, or a direct message.
    pub async fn send_message(
        &self,
        endpoint: &str,
        request: &crate::wire::SendMessageRequest,
    ) -> Result<SendOutcome, CallError> {
        let result = self.call(endpoint, "SendMessage", request).await?;
        if let Some(task) = result.get("task") {
            return Ok(SendOutcome::Task(snapshot(task.clone())?));
        }
        if let Some(raw) = result.get("message") {
            let message: Message = serde_json::from_value(raw.clone())
                .map_err(|e| CallError::Malformed(format!("`message`: {e}")))?;
            return Ok(SendOutcome::Message {
                message,
                raw: raw.clone(),
            });
        }
        Err(CallError::Malformed(
            "a SendMessageResponse holds neither `task` nor `message`".into(),
        ))
    }

    /// `GetTask`.
    pub async fn get_task(&self, endpoint: &str, id: &str) -> Result<TaskSnapshot, CallError> {
        let request = crate::wire::TaskIdRequest { id: id.to_owned() };
        snapshot(self.call(endpoint, "GetTask", &request).await?)
    }

    /// `ListTasks` of one context: its first page, newest first (§3.1.4).
    pub async fn list_tasks(
        &self,
        endpoint: &str,
        request: &ListTasksRequest,
    ) -> Result<TaskList, CallError> {
        let result = self.call(endpoint, "ListTasks", request).await?;
        let tasks = result
            .get("tasks")
            .and_then(Value::as_array)
            .ok_or_else(|| CallError::Malformed("a ListTasksResponse without `tasks`".into()))?;
        Ok(TaskList {
            tasks: tasks
                .iter()
                .cloned()
                .map(snapshot)
                .collect::<Result<_, _>>()?,
        })
    }

    /// `CancelTask`.
    pub async fn cancel_task(&self, endpoint: &str, id: &str) -> Result<TaskSnapshot, CallError> {
        let request = crate::wire::TaskIdRequest { id: id.to_owned() };
        snapshot(self.call(endpoint, "CancelTask", &request).await?)
    }

    /// `SubscribeToTask`: the task's events as they happen (the first is the
    /// task as it is now).
    pub async fn subscribe(&self, endpoint: &str, id: &str) -> Result<EventStream, CallError> {
        const METHOD: &str = "SubscribeToTask";
        let request = crate::wire::TaskIdRequest { id: id.to_owned() };
        let response = self
            .post(
                &self.streams,
                endpoint,
                METHOD,
                &request,
                Some("text/event-stream"),
            )
            .await?;
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_stream {
            // A JSON-RPC error (a terminal task, streaming not offered).
            let body: Value = response
                .json()
                .await
                .map_err(|e| CallError::Malformed(format!("not an event stream: {}", plain(&e))))?;
            let error = match result_of(&body) {
                Err(e) => e,
                Ok(_) => CallError::Malformed("a JSON answer where a stream was due".into()),
            };
            if let CallError::Rpc { code, .. } = &error {
                self.metrics.record(METHOD, rpc_outcome(*code));
            }
            return Err(error);
        }
        self.metrics.record(METHOD, UpstreamOutcome::Ok);
        Ok(EventStream {
            response,
            buffer: Vec::new(),
        })
    }
}

/// A `text/event-stream` of JSON-RPC answers, each `result` a
/// `StreamResponse` (§9.4.2).
#[derive(Debug)]
pub struct EventStream {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl EventStream {
    /// The next event's `result`; `Ok(None)` when the agent closed the
    /// stream cleanly; an error when it broke off or sent an error object.
    pub async fn next(&mut self) -> Result<Option<Value>, CallError> {
        loop {
            if let Some(event) = self.take_event() {
                if let SseBlock::Data(data) = event {
                    let body: Value = serde_json::from_str(&data)
                        .map_err(|e| CallError::Malformed(format!("an event is not JSON: {e}")))?;
                    return result_of(&body).map(Some);
                }
                continue;
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                Ok(None) => return Ok(None),
                Err(e) => return Err(CallError::Transport(plain(&e))),
            }
        }
    }

    /// One whole event off the buffer, `None` when none is whole.
    fn take_event(&mut self) -> Option<SseBlock> {
        let text = &self.buffer;
        let end = (0..text.len()).find_map(|i| {
            if text[i..].starts_with(b"\n\n") {
                Some((i, 2))
            } else if text[i..].starts_with(b"\r\n\r\n") {
                Some((i, 4))
            } else {
                None
            }
        })?;
        let block: Vec<u8> = self.buffer.drain(..end.0 + end.1).collect();
        let block = String::from_utf8_lossy(&block[..end.0]).into_owned();
        Some(sse_data(&block).map_or(SseBlock::NoData, SseBlock::Data))
    }
}

/// One event block of a stream.
#[derive(Debug)]
enum SseBlock {
    /// Its `data`.
    Data(String),
    /// A block without data (a keep-alive comment).
    NoData,
}

/// The `data` of one SSE event block: its `data:` lines joined by newlines.
fn sse_data(block: &str) -> Option<String> {
    let lines: Vec<&str> = block
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|rest| rest.strip_prefix(' ').unwrap_or(rest))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

fn snapshot(raw: Value) -> Result<TaskSnapshot, CallError> {
    let task: Task = serde_json::from_value(raw.clone())
        .map_err(|e| CallError::Malformed(format!("not a Task: {e}")))?;
    if task.id.is_empty() {
        return Err(CallError::Malformed("the task has no `id`".into()));
    }
    Ok(TaskSnapshot { task, raw })
}

/// A reqwest error without its URL's query (none is sent) and with its
/// causes, on one line.
pub(crate) fn plain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_blocks_join_their_data_lines_and_skip_comments() {
        assert_eq!(
            sse_data("data: {\"a\":\ndata: 1}").as_deref(),
            Some("{\"a\":\n1}")
        );
        assert_eq!(sse_data(": keep-alive"), None);
        assert_eq!(sse_data("event: x\ndata:{}").as_deref(), Some("{}"));
    }
}
