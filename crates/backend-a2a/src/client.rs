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
//!
//! Every answer is read through a cap ([`read_bounded`]): a card
//! ([`CARD_CAP`]), a JSON-RPC answer ([`ANSWER_CAP`]), an error body
//! ([`ERROR_BODY_CAP`]), one event of a stream ([`EVENT_CAP`]). An answer
//! over its cap fails the call without a retry ([`CallError::TooLarge`]):
//! the agent would answer the same again. A stream is scanned for event
//! boundaries only where new bytes arrived, so a long event costs linear,
//! not quadratic, time.

use std::time::Duration;

use agentgate_backend::{
    BodyError, JobError, TooLarge, UpstreamMetrics, UpstreamOutcome, read_bounded,
};
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

/// The most of an Agent Card read: a card lists skills and interfaces, a
/// few KiB in practice; 256 KiB leaves room for a large skill list.
pub const CARD_CAP: usize = 256 * 1024;
/// The most of one JSON-RPC answer read: a task with its history and
/// artifacts (which may embed files) fits; more is not an answer to relay.
pub const ANSWER_CAP: usize = 8 * 1024 * 1024;
/// The most of an error answer read (only its `error.message` is used).
pub const ERROR_BODY_CAP: usize = 64 * 1024;
/// The most one `SubscribeToTask` event may hold (an event carries one
/// task, status or artifact update: [`ANSWER_CAP`] applies to it too).
pub const EVENT_CAP: usize = ANSWER_CAP;

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
    /// An answer (`what`: "the answer", "one stream event") over its cap;
    /// the rest was not read.
    #[error("{what} is {limit}")]
    TooLarge { what: &'static str, limit: TooLarge },
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
            // Not retried: an agent that answers too much answers the same
            // again, and each try would read up to the cap once more.
            CallError::Malformed(_)
            | CallError::Auth(_)
            | CallError::Refused(_)
            | CallError::Redirect { .. }
            | CallError::TooLarge { .. } => JobError::Fatal(ErrorData::internal_error(
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
    // Only a message is wanted: a body over the cap (or cut) leaves none.
    let detail = read_bounded(response, ERROR_BODY_CAP)
        .await
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|b| {
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

    /// This client, authenticating with `auth` instead (a principal's own
    /// token): the same connections, guard and metrics.
    pub fn with_auth(&self, auth: Auth) -> Self {
        Self {
            auth,
            ..self.clone()
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
        let bytes = read_bounded(response, CARD_CAP)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge(limit) => format!("the card at {url} is {limit}"),
                BodyError::Cut(e) => format!("the card at {url} was cut: {}", plain(&e)),
            })?;
        let card: AgentCard = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the card at {url} is not an Agent Card: {e}"))?;
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
            let renewing = status == 401 && !renewed && self.auth.renews();
            let outcome = match UpstreamOutcome::from_status(status) {
                // An OAuth token that expired early is renewed below, not a
                // credential the operator must fix: counted as a client
                // error unless the renewed one is refused too.
                UpstreamOutcome::Rejected if renewing => UpstreamOutcome::ClientError,
                outcome => outcome,
            };
            self.metrics.record(method, outcome);
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
        let body = self
            .read_answer(response, method, "the answer", ANSWER_CAP)
            .await?;
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

    /// The JSON body of a 200 `response` to `method`, read up to `cap`.
    async fn read_answer(
        &self,
        response: reqwest::Response,
        method: &str,
        what: &'static str,
        cap: usize,
    ) -> Result<Value, CallError> {
        let bytes = match read_bounded(response, cap).await {
            Ok(bytes) => bytes,
            Err(BodyError::TooLarge(limit)) => {
                // The agent answered, with too much: its fault, not the
                // network's.
                self.metrics.record(method, UpstreamOutcome::ServerError);
                return Err(CallError::TooLarge { what, limit });
            }
            Err(BodyError::Cut(e)) => {
                self.metrics.record(method, UpstreamOutcome::Transport);
                return Err(CallError::Transport(format!(
                    "the answer was cut: {}",
                    plain(&e)
                )));
            }
        };
        serde_json::from_slice(&bytes)
            .map_err(|e| CallError::Malformed(format!("the answer is not JSON: {e}")))
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
            let body = self
                .read_answer(response, METHOD, "the answer", ERROR_BODY_CAP)
                .await
                .map_err(|e| match e {
                    CallError::Malformed(why) => {
                        CallError::Malformed(format!("not an event stream: {why}"))
                    }
                    other => other,
                })?;
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
            buffer: SseBuffer::new(EVENT_CAP),
        })
    }
}

/// A `text/event-stream` of JSON-RPC answers, each `result` a
/// `StreamResponse` (§9.4.2).
#[derive(Debug)]
pub struct EventStream {
    response: reqwest::Response,
    buffer: SseBuffer,
}

impl EventStream {
    /// The next event's `result`; `Ok(None)` when the agent closed the
    /// stream cleanly; an error when it broke off, sent an error object or
    /// an event over [`EVENT_CAP`] (the stream is then of no further use:
    /// the caller drops it, which closes the connection).
    pub async fn next(&mut self) -> Result<Option<Value>, CallError> {
        loop {
            if let Some(event) = self.buffer.take_event()? {
                if let SseBlock::Data(data) = event {
                    let body: Value = serde_json::from_str(&data)
                        .map_err(|e| CallError::Malformed(format!("an event is not JSON: {e}")))?;
                    return result_of(&body).map(Some);
                }
                continue;
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffer.push(&chunk),
                Ok(None) => return Ok(None),
                Err(e) => return Err(CallError::Transport(plain(&e))),
            }
        }
    }
}

/// The bytes of a stream not yet taken as events, scanned for event
/// boundaries once each: `scanned` is where the last search stopped, so a
/// long event arriving in many chunks is searched in linear time.
#[derive(Debug)]
struct SseBuffer {
    bytes: Vec<u8>,
    /// Where the next event starts (taken events before it are dropped
    /// lazily, so many small events in one chunk are not each a copy of
    /// the rest).
    start: usize,
    /// Bytes from `start` up to here hold no boundary.
    scanned: usize,
    /// The most one event may hold.
    cap: usize,
    /// Every byte any search looked at, so a test can see none is looked at
    /// again and again.
    examined: u64,
}

impl SseBuffer {
    fn new(cap: usize) -> Self {
        Self {
            bytes: Vec::new(),
            start: 0,
            scanned: 0,
            cap,
            examined: 0,
        }
    }

    fn too_large(&self, read: usize) -> CallError {
        CallError::TooLarge {
            what: "one stream event",
            limit: TooLarge {
                read: u64::try_from(read).unwrap_or(u64::MAX),
                declared: None,
                cap: u64::try_from(self.cap).unwrap_or(u64::MAX),
            },
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 {
            // Only when no whole event is left (`take_event` said `None`):
            // each byte is moved at most once this way.
            self.bytes.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.bytes.extend_from_slice(chunk);
    }

    /// One whole event off the buffer, `None` when none is whole yet; an
    /// error when the event being received is already over the cap.
    fn take_event(&mut self) -> Result<Option<SseBlock>, CallError> {
        // A boundary (`\n\n`, `\r\n\r\n`) may straddle the last search's
        // end: look again at up to three bytes before it.
        let from = self.scanned.saturating_sub(3).max(self.start);
        let text = &self.bytes[from..];
        self.examined += u64::try_from(text.len()).unwrap_or(u64::MAX);
        let found = (0..text.len()).find_map(|i| {
            if text[i..].starts_with(b"\n\n") {
                Some((from + i, 2))
            } else if text[i..].starts_with(b"\r\n\r\n") {
                Some((from + i, 4))
            } else {
                None
            }
        });
        let Some((end, boundary)) = found else {
            self.scanned = self.bytes.len();
            let pending = self.bytes.len() - self.start;
            return if pending > self.cap {
                Err(self.too_large(pending))
            } else {
                Ok(None)
            };
        };
        if end - self.start > self.cap {
            // Whole, but over the cap all the same (it came in one chunk).
            return Err(self.too_large(end - self.start));
        }
        let block = String::from_utf8_lossy(&self.bytes[self.start..end]).into_owned();
        self.start = end + boundary;
        self.scanned = self.start;
        if self.start == self.bytes.len() {
            self.bytes.clear();
            self.start = 0;
            self.scanned = 0;
        }
        Ok(Some(
            sse_data(&block).map_or(SseBlock::NoData, SseBlock::Data),
        ))
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

    fn data(block: Option<SseBlock>) -> String {
        match block {
            Some(SseBlock::Data(data)) => data,
            other => panic!("expected an event with data, got {other:?}"),
        }
    }

    #[test]
    fn events_split_across_chunks_are_found_and_no_byte_is_scanned_twice() {
        let mut buffer = SseBuffer::new(EVENT_CAP);
        // A boundary split in its middle, in both spellings.
        buffer.push(b"data: 1\n");
        assert!(buffer.take_event().expect("under the cap").is_none());
        buffer.push(b"\ndata: 2\r\n\r");
        assert_eq!(data(buffer.take_event().expect("under the cap")), "1");
        assert!(buffer.take_event().expect("under the cap").is_none());
        buffer.push(b"\n: keep-alive\n\ndata: 3\n\n");
        assert_eq!(data(buffer.take_event().expect("under the cap")), "2");
        assert!(matches!(
            buffer.take_event().expect("under the cap"),
            Some(SseBlock::NoData)
        ));
        assert_eq!(data(buffer.take_event().expect("under the cap")), "3");
        assert!(buffer.take_event().expect("under the cap").is_none());

        // One 1 MiB event in 4 KiB chunks: each chunk is searched once
        // (plus three bytes of the one before), not the whole event again.
        let mut buffer = SseBuffer::new(EVENT_CAP);
        buffer.push(b"data: ");
        let chunk = [b'x'; 4096];
        for _ in 0..256 {
            buffer.push(&chunk);
            assert!(buffer.take_event().expect("under the cap").is_none());
        }
        buffer.push(b"\n\n");
        let event = data(buffer.take_event().expect("under the cap"));
        assert_eq!(event.len(), 256 * 4096);
        let total = 6 + 256 * 4096 + 2;
        assert!(
            buffer.examined <= total + 3 * 258,
            "{} bytes examined for {total} received",
            buffer.examined
        );
    }

    #[test]
    fn an_event_over_the_cap_is_an_error_before_it_ends() {
        let mut buffer = SseBuffer::new(1024);
        buffer.push(b"data: ");
        buffer.push(&[b'x'; 1000]);
        assert!(buffer.take_event().expect("under the cap").is_none());
        buffer.push(&[b'x'; 100]);
        let error = buffer.take_event().expect_err("over the cap");
        assert!(matches!(error, CallError::TooLarge { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "one stream event is over the 1 KiB cap (stopped after reading 1106 bytes)"
        );
        // Whole events each under the cap pass, however many there are.
        let mut buffer = SseBuffer::new(1024);
        for _ in 0..100 {
            buffer.push(&[b"data: ", &[b'y'; 900][..], b"\n\n"].concat());
            assert_eq!(data(buffer.take_event().expect("under the cap")).len(), 900);
        }
        // And one whole event over the cap, in one chunk, does not.
        buffer.push(&[b"data: ", &[b'z'; 2000][..], b"\n\n"].concat());
        assert!(buffer.take_event().is_err());
    }
}
