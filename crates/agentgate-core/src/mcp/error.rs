//! Where every JSON-RPC error code of the MCP side is chosen.
//!
//! The engine says *why* it refused ([`TaskError`]); the gateway's own
//! refusals say it with [`GatewayError`]. Both become an [`ErrorData`] here
//! and nowhere else, so the same cause gets the same code on every path
//! (`tasks/get`, `tools/call`, the task tools, a sync view). A store outage
//! is always an internal error that says to retry, never "unknown task".

use std::time::Duration;

use rmcp::model::{ErrorCode, ErrorData};
use serde_json::json;

use crate::engine::TaskError;
use crate::store::StoreError;

/// The JSON-RPC error code of a request refused for load (too many requests,
/// polls or live tasks): in the implementation-defined server-error range,
/// "29" as in HTTP 429. Retrying after `data.retryAfterMs` may succeed.
pub const LIMITED: ErrorCode = ErrorCode(-32029);

/// How long a client is asked to wait before retrying a request that met a
/// store outage.
const OUTAGE_RETRY_AFTER_SECONDS: u64 = 5;

/// The gateway's own refusals, beside the engine's [`TaskError`].
/// `#[non_exhaustive]`: more may come.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// An engine refusal.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// `tools/call` named a tool this server does not serve.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// A sealed MRTR `requestState` that does not open for this caller and
    /// tool (forged, expired, or someone else's).
    #[error("requestState is not valid for this caller and tool: {0}")]
    InvalidRequestState(String),
    /// The client cancelled the request; the task itself runs on.
    #[error("request cancelled; task {0} keeps running")]
    RequestCancelled(agentgate_backend::TaskId),
    /// A load limit refused the request.
    #[error("{message}")]
    Limited {
        message: String,
        retry_after: Duration,
        config_key: &'static str,
    },
    /// Something inside agentgate failed (a job's malformed state, a value
    /// that would not serialize).
    #[error("{0}")]
    Internal(String),
    /// A request's parameters do not have the shape its method needs.
    #[error("invalid params: {0}")]
    BadParams(String),
    /// A 2025-11-25 task-augmented `tools/call` of a tool whose
    /// `execution.taskSupport` is `"forbidden"` (the built-ins).
    #[error("tool `{0}` cannot run as a task")]
    NoTaskSupport(String),
    /// A 2025-11-25 `tasks/cancel` of a task that has already ended (its
    /// status named).
    #[error("task already {0}")]
    TaskEnded(&'static str),
    /// A method this server does not serve.
    #[error("method not found: {0}")]
    UnknownMethod(String),
}

impl From<GatewayError> for ErrorData {
    fn from(e: GatewayError) -> Self {
        match e {
            GatewayError::Task(e) => e.into(),
            GatewayError::UnknownTool(name) => ErrorData::invalid_params(
                format!("unknown tool `{name}`; tools/list shows the tools this server offers"),
                None,
            ),
            GatewayError::InvalidRequestState(why) => ErrorData::invalid_params(
                format!(
                    "requestState is not valid for this caller and tool ({why}); call the tool \
                     again without requestState to start over"
                ),
                None,
            ),
            e @ GatewayError::RequestCancelled(_) => ErrorData::internal_error(e.to_string(), None),
            GatewayError::Limited {
                message,
                retry_after,
                config_key,
            } => ErrorData::new(
                LIMITED,
                message,
                Some(json!({
                    "retryAfterMs": u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX),
                    "configKey": config_key,
                })),
            ),
            GatewayError::Internal(message) => ErrorData::internal_error(message, None),
            GatewayError::BadParams(why) => ErrorData::invalid_params(why, None),
            // 2025-11-25: a server SHOULD answer -32601 when a client asks
            // for a task from a tool that forbids it.
            GatewayError::NoTaskSupport(name) => ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "tool `{name}` does not run as a task (its execution.taskSupport is \
                     \"forbidden\"); call it without `task`"
                ),
                None,
            ),
            // 2025-11-25: cancelling a task in a terminal status is -32602.
            GatewayError::TaskEnded(status) => ErrorData::invalid_params(
                format!("Cannot cancel task: already in terminal status `{status}`"),
                None,
            ),
            GatewayError::UnknownMethod(method) => {
                ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method, None)
            }
        }
    }
}

impl From<TaskError> for ErrorData {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::UnknownTask => unknown_task(),
            TaskError::TooManyTasks { limit, active } => {
                let mut error: ErrorData = GatewayError::Limited {
                    message: format!(
                        "too many active tasks: this principal has {active} working or \
                         input_required tasks and the limit is {limit} \
                         (limits.max_active_tasks); wait for one to finish or cancel one with \
                         tasks/cancel, then try again"
                    ),
                    retry_after: Duration::from_secs(1),
                    config_key: "limits.max_active_tasks",
                }
                .into();
                if let Some(data) = error.data.as_mut().and_then(|d| d.as_object_mut()) {
                    data.insert("limit".into(), json!(limit));
                    data.insert("active".into(), json!(active));
                }
                error
            }
            TaskError::StorageFull {
                what,
                limit,
                seen,
                retry_after,
            } => super::limits::storage_full(what, limit, seen, retry_after),
            TaskError::Store(e) => store_error(e),
        }
    }
}

impl From<StoreError> for ErrorData {
    fn from(e: StoreError) -> Self {
        TaskError::from(e).into()
    }
}

/// The error every task request gets for an unknown, expired or foreign id.
fn unknown_task() -> ErrorData {
    ErrorData::invalid_params(
        "unknown or expired task id; task ids come from a tools/call CreateTaskResult",
        None,
    )
}

/// The JSON-RPC error for a store failure. An outage (disk full, read-only,
/// database away) says so and how long to wait, in `data`
/// (`{"reason": "disk_full", "retryAfterSeconds": 5}`), so a client can tell
/// "try again" from "you asked for something that does not exist".
fn store_error(e: StoreError) -> ErrorData {
    match e {
        StoreError::NotFound => unknown_task(),
        StoreError::Unavailable { cause, ref source } => {
            tracing::warn!(reason = cause.as_str(), error = %source, "task store unavailable");
            ErrorData::internal_error(
                format!(
                    "the task store cannot take this request now: {cause}; the request was not \
                     carried out; retry in {OUTAGE_RETRY_AFTER_SECONDS} s (reads of existing \
                     tasks may still work)"
                ),
                Some(json!({
                    "reason": cause.as_str(),
                    "retryAfterSeconds": OUTAGE_RETRY_AFTER_SECONDS,
                })),
            )
        }
        other => {
            tracing::error!(error = %other, "task store error");
            ErrorData::internal_error("the task store failed this request; try again", None)
        }
    }
}

/// A request argument the caller must change: `-32602` naming `field`, with
/// `data` saying what was wrong (`field` is added to it).
pub(crate) fn invalid_field(
    field: &str,
    message: String,
    data: Option<serde_json::Value>,
) -> ErrorData {
    let mut data = data.unwrap_or_else(|| json!({}));
    if let Some(object) = data.as_object_mut() {
        object.insert("field".into(), json!(field));
    }
    ErrorData::invalid_params(message, Some(data))
}

/// A request only a client with the tasks extension may make: `-32021`,
/// rmcp's missing-capability error, naming the extension; `message`
/// replaces rmcp's generic text where the request needs a word of its own.
pub(crate) fn tasks_extension_required(message: Option<String>) -> ErrorData {
    let mut error = ErrorData::missing_required_client_capability(
        rmcp::model::ClientCapabilities::builder()
            .enable_tasks()
            .build(),
    );
    if let Some(message) = message {
        error.message = message.into();
    }
    error
}

/// Why a message was refused before rmcp read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unread {
    /// Not JSON (or not UTF-8): `-32700`.
    NotJson,
    /// Not a message this server will read: too large, too slow to arrive:
    /// `-32600`.
    Invalid,
    /// The server is too busy to read it now: `-32603` (the HTTP status
    /// and `Retry-After` say when to retry).
    Busy,
}

/// The JSON-RPC response to a message refused unread: `"id": null`, since
/// the id of a message that was not read whole cannot be trusted.
pub(crate) fn unread_refusal(why: Unread, message: &str) -> serde_json::Value {
    let code = match why {
        Unread::NotJson => ErrorCode::PARSE_ERROR,
        Unread::Invalid => ErrorCode::INVALID_REQUEST,
        Unread::Busy => ErrorCode::INTERNAL_ERROR,
    };
    json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code.0, "message": message }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Outage;

    fn outage() -> StoreError {
        StoreError::Unavailable {
            cause: Outage::DiskFull,
            source: sqlx::Error::PoolTimedOut,
        }
    }

    #[test]
    fn a_store_outage_is_an_internal_error_that_says_retry_never_unknown_task() {
        for error in [
            ErrorData::from(TaskError::from(outage())),
            ErrorData::from(outage()),
            ErrorData::from(GatewayError::Task(TaskError::Store(outage()))),
        ] {
            assert_eq!(error.code, ErrorCode::INTERNAL_ERROR, "{error:?}");
            assert!(!error.message.contains("unknown"), "{}", error.message);
            assert!(error.message.contains("retry"), "{}", error.message);
            let data = error.data.expect("data");
            assert_eq!(data["reason"], "disk_full");
            assert_eq!(data["retryAfterSeconds"], OUTAGE_RETRY_AFTER_SECONDS);
        }
    }

    #[test]
    fn not_found_and_a_foreign_id_are_the_same_unknown_task() {
        let a = ErrorData::from(TaskError::from(StoreError::NotFound));
        let b = ErrorData::from(TaskError::UnknownTask);
        assert_eq!(a.code, ErrorCode::INVALID_PARAMS);
        assert_eq!((a.code, &a.message), (b.code, &b.message));
        assert!(a.message.contains("unknown or expired task id"));
    }

    #[test]
    fn too_many_tasks_is_limited_with_its_numbers_and_config_key() {
        let e = ErrorData::from(TaskError::TooManyTasks {
            limit: 3,
            active: 3,
        });
        assert_eq!(e.code, LIMITED);
        let data = e.data.expect("data");
        assert_eq!(data["limit"], 3);
        assert_eq!(data["active"], 3);
        assert_eq!(data["configKey"], "limits.max_active_tasks");
        assert_eq!(data["retryAfterMs"], 1000);
    }

    #[test]
    fn a_message_refused_unread_has_a_null_id_and_the_code_of_its_reason() {
        for (why, code) in [
            (Unread::NotJson, ErrorCode::PARSE_ERROR),
            (Unread::Invalid, ErrorCode::INVALID_REQUEST),
            (Unread::Busy, ErrorCode::INTERNAL_ERROR),
        ] {
            let body = unread_refusal(why, "why");
            assert_eq!(body["id"], serde_json::Value::Null, "{why:?}");
            assert_eq!(body["error"]["code"], code.0, "{why:?}");
            assert_eq!(body["error"]["message"], "why");
        }
    }

    #[test]
    fn an_invalid_field_names_the_field_beside_its_data() {
        let e = invalid_field(
            "inputResponses",
            "too big".to_owned(),
            Some(json!({"limit": 1})),
        );
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        let data = e.data.expect("data");
        assert_eq!(data["field"], "inputResponses");
        assert_eq!(data["limit"], 1);
        let bare = invalid_field("x", "bad".to_owned(), None);
        assert_eq!(bare.data.expect("data")["field"], "x");
    }
}
