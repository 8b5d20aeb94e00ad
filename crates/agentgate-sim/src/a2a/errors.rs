//! JSON-RPC error objects: the standard codes of JSON-RPC 2.0 and the A2A-specific
//! ones of the specification's §5.4 table, each with `data` as the §9.5 array of
//! `google.rpc` detail objects (`ErrorInfo` with an A2A reason, `BadRequest` for
//! invalid parameters).

use serde_json::{Value, json};

/// The `domain` of every `ErrorInfo` (the one the specification's example uses).
const DOMAIN: &str = "a2a-protocol.org";

/// A JSON-RPC error the emulator answers with.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RpcError {
    /// The JSON-RPC `code`.
    pub code: i64,
    /// The human-readable `message`.
    pub message: String,
    /// The `data` array.
    pub data: Vec<Value>,
}

impl RpcError {
    fn info(code: i64, reason: &str, message: String, metadata: Value) -> Self {
        Self {
            code,
            message,
            data: vec![json!({
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": DOMAIN,
                "metadata": metadata,
            })],
        }
    }

    /// -32700: the body is not JSON.
    pub(super) fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::info(
            -32700,
            "JSON_PARSE_ERROR",
            format!("Invalid JSON payload: {detail}"),
            json!({}),
        )
    }

    /// -32600: not a JSON-RPC 2.0 request object.
    pub(super) fn invalid_request(detail: impl Into<String>) -> Self {
        Self::info(
            -32600,
            "INVALID_REQUEST",
            format!("Request payload validation error: {}", detail.into()),
            json!({}),
        )
    }

    /// -32601.
    pub(super) fn method_not_found(method: &str) -> Self {
        Self::info(
            -32601,
            "METHOD_NOT_FOUND",
            format!(
                "Method not found: `{method}` (A2A v1.0 methods are PascalCase, e.g. SendMessage)"
            ),
            json!({ "method": method }),
        )
    }

    /// -32602 naming the field and what is wrong with it.
    pub(super) fn invalid_params(field: &str, description: impl Into<String>) -> Self {
        let description = description.into();
        Self {
            code: -32602,
            message: format!("Invalid parameters: {field}: {description}"),
            data: vec![json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{ "field": field, "description": description }],
            })],
        }
    }

    /// -32603.
    pub(super) fn internal(detail: impl Into<String>) -> Self {
        Self::info(
            -32603,
            "INTERNAL",
            format!("Internal error: {}", detail.into()),
            json!({}),
        )
    }

    /// -32001 TaskNotFoundError.
    pub(super) fn task_not_found(task_id: &str) -> Self {
        Self::info(
            -32001,
            "TASK_NOT_FOUND",
            format!("Task not found: {task_id}"),
            json!({ "taskId": task_id }),
        )
    }

    /// -32002 TaskNotCancelableError.
    pub(super) fn task_not_cancelable(task_id: &str, why: &str) -> Self {
        Self::info(
            -32002,
            "TASK_NOT_CANCELABLE",
            format!("Task {task_id} cannot be canceled: {why}"),
            json!({ "taskId": task_id }),
        )
    }

    /// -32003 PushNotificationNotSupportedError.
    pub(super) fn push_not_supported() -> Self {
        Self::info(
            -32003,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "Push notifications are not supported (capabilities.pushNotifications is false)".into(),
            json!({}),
        )
    }

    /// -32004 UnsupportedOperationError.
    pub(super) fn unsupported(detail: impl Into<String>) -> Self {
        Self::info(
            -32004,
            "UNSUPPORTED_OPERATION",
            format!("Unsupported operation: {}", detail.into()),
            json!({}),
        )
    }

    /// -32009 VersionNotSupportedError.
    pub(super) fn version_not_supported(requested: &str) -> Self {
        Self::info(
            -32009,
            "VERSION_NOT_SUPPORTED",
            format!(
                "A2A protocol version {requested} is not supported; send the header `A2A-Version: 1.0` \
                 (a request without it is taken as 0.3)"
            ),
            json!({ "requestedVersion": requested, "supportedVersions": "1.0" }),
        )
    }

    /// The JSON-RPC `error` member.
    pub(super) fn to_json(&self) -> Value {
        json!({ "code": self.code, "message": self.message, "data": self.data })
    }
}
