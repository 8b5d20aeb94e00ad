//! The HTTP side: reads an agent's card and makes the JSON-RPC calls
//! (§9 of the specification) the jobs need, `SendMessage`, `GetTask` and
//! `CancelTask`, each with `A2A-Version: 1.0` and the agent's bearer token,
//! each counted in [`UpstreamMetrics`] under its method name.
//!
//! Errors are sorted for the scheduler: no answer, HTTP 429 or 5xx are
//! worth retrying; any other HTTP status and every JSON-RPC error object are
//! not (the caller may still look at the code, e.g. TaskNotCancelable).

use std::time::Duration;

use agentgate_backend::{JobError, UpstreamMetrics, UpstreamOutcome};
use reqwest::header::{AUTHORIZATION, HeaderValue, RETRY_AFTER};
use rmcp::model::ErrorData;
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::BearerToken;
use crate::wire::{AgentCard, Message, SendOutcome, Task, TaskSnapshot};

/// The protocol version header (§3.2.6) and the version this backend speaks.
pub const VERSION_HEADER: &str = "A2A-Version";
pub const PROTOCOL_VERSION: &str = "1.0";

/// A2A's TaskNotCancelableError (§5.4).
pub const TASK_NOT_CANCELABLE: i64 = -32002;

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
}

impl CallError {
    /// The job error for a call of `method` to `agent` that failed so.
    pub fn into_job_error(self, agent: &str, method: &str) -> JobError {
        let message = format!("A2A agent `{agent}`: {method} failed: {self}");
        match self {
            CallError::Transport(_) => JobError::Retryable {
                message,
                retry_after: None,
            },
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
                    401 | 403 => " (check the agent's `token_env` token)",
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
            CallError::Malformed(_) => JobError::Fatal(ErrorData::internal_error(
                message,
                Some(json!({"agent": agent, "method": method})),
            )),
        }
    }
}

/// Calls one agent.
#[derive(Debug, Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    token: Option<BearerToken>,
    metrics: UpstreamMetrics,
}

impl AgentClient {
    pub fn new(
        http: reqwest::Client,
        token: Option<BearerToken>,
        metrics: UpstreamMetrics,
    ) -> Self {
        Self {
            http,
            token,
            metrics,
        }
    }

    /// Reads the Agent Card at `url`; the error says why in one line.
    pub async fn card(&self, url: &url::Url) -> Result<AgentCard, String> {
        const OPERATION: &str = "GetAgentCard";
        let response = match self
            .http
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

    /// One JSON-RPC call; the `result` member.
    async fn call(
        &self,
        endpoint: &str,
        method: &str,
        params: impl Serialize,
    ) -> Result<Value, CallError> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = self
            .http
            .post(endpoint)
            .header(VERSION_HEADER, PROTOCOL_VERSION)
            .json(&body);
        if let Some(token) = &self.token {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                    CallError::Malformed("the bearer token is not a valid header value".into())
                })?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                self.metrics.record(method, UpstreamOutcome::Transport);
                return Err(CallError::Transport(plain(&e)));
            }
        };
        let status = response.status().as_u16();
        if status != 200 {
            self.metrics
                .record(method, UpstreamOutcome::from_status(status));
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
            return Err(CallError::Http {
                status,
                retry_after,
                detail,
            });
        }
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
        if let Some(error) = body.get("error") {
            let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
            self.metrics.record(
                method,
                if code == -32603 {
                    UpstreamOutcome::ServerError
                } else {
                    UpstreamOutcome::ClientError
                },
            );
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_owned();
            return Err(CallError::Rpc { code, message });
        }
        self.metrics.record(method, UpstreamOutcome::Ok);
        body.get("result")
            .cloned()
            .ok_or_else(|| CallError::Malformed("neither `result` nor `error`".into()))
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

    /// `CancelTask`.
    pub async fn cancel_task(&self, endpoint: &str, id: &str) -> Result<TaskSnapshot, CallError> {
        let request = crate::wire::TaskIdRequest { id: id.to_owned() };
        snapshot(self.call(endpoint, "CancelTask", &request).await?)
    }
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
fn plain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
