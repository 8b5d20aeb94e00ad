//! Error responses exactly as Amazon Q Business sends them.
//!
//! Every error is an HTTP status, `Content-Type: application/json`, the header
//! `x-amzn-ErrorType: <ShapeName>` (which is what the Rust SDK reads first to pick the
//! error variant) and a JSON object body with `message` plus the shape's members. The
//! `x-amzn-RequestId` header is added for every response by the router's middleware.
//!
//! Modeled ChatSync errors (wire-apis.md §1.4) and the unmodeled authentication
//! errors of the AWS front door (`MissingAuthenticationTokenException`,
//! `UnrecognizedClientException`, `InvalidSignatureException`,
//! `IncompleteSignatureException`) are all built here, so each knows how to render itself.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// One entry of `ValidationException.fields`: the JSON path of the member and why it failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// Path of the offending member, e.g. `actionExecution.payload.priority`.
    pub name: String,
    /// Why it failed, in the service's "Member must ..." style.
    pub message: String,
}

impl FieldError {
    /// A field error for `name`.
    pub fn new(name: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            message: message.into(),
        }
    }
}

/// An error response of the emulated service, ready to render.
#[derive(Clone, Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    members: Map<String, Value>,
    retry_after: Option<u32>,
}

/// The `ResourceNotFoundException.resourceType` of an application.
pub(super) const RESOURCE_APPLICATION: &str = "APPLICATION";
/// The `resourceType` used for conversations.
pub(super) const RESOURCE_CONVERSATION: &str = "CONVERSATION";
/// The `resourceType` used for plugins.
pub(super) const RESOURCE_PLUGIN: &str = "PLUGIN";

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        let mut members = Map::new();
        members.insert("message".into(), Value::String(message.into()));
        Self {
            status,
            code,
            members,
            retry_after: None,
        }
    }

    fn with(mut self, key: &str, value: Value) -> Self {
        self.members.insert(key.into(), value);
        self
    }

    /// The error shape name sent in `x-amzn-ErrorType`.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The `message` member.
    pub fn message(&self) -> &str {
        self.members
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// 400 `ValidationException` with reason `FIELD_VALIDATION_FAILED`. The message
    /// follows the service: `N validation error(s) detected: Value at 'x' failed to
    /// satisfy constraint: ...; ...`.
    pub fn field_validation(fields: Vec<FieldError>) -> Self {
        let details: Vec<String> = fields
            .iter()
            .map(|f| {
                format!(
                    "Value at '{}' failed to satisfy constraint: {}",
                    f.name, f.message
                )
            })
            .collect();
        let noun = if fields.len() == 1 { "error" } else { "errors" };
        let message = format!(
            "{} validation {noun} detected: {}",
            fields.len(),
            details.join("; ")
        );
        Self::new(StatusCode::BAD_REQUEST, "ValidationException", message)
            .with("reason", json!("FIELD_VALIDATION_FAILED"))
            .with("fields", json!(fields))
    }

    /// A single-field `ValidationException`.
    pub fn field(name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::field_validation(vec![FieldError::new(name, message)])
    }

    /// 400 `ValidationException` with reason `CANNOT_PARSE`.
    pub fn cannot_parse(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "ValidationException", message)
            .with("reason", json!("CANNOT_PARSE"))
    }

    /// 400 `ValidationException` with reason `UNKNOWN_OPERATION`.
    pub fn unknown_operation(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "ValidationException", message)
            .with("reason", json!("UNKNOWN_OPERATION"))
    }

    /// 404 `UnknownOperationException`, what the AWS front door answers for a path or
    /// method that no operation uses.
    pub fn no_such_operation() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "UnknownOperationException",
            "The requested operation is not supported by this endpoint.",
        )
    }

    /// 404 `ResourceNotFoundException` naming the resource.
    pub fn not_found(resource_type: &str, resource_id: &str) -> Self {
        let what = match resource_type {
            RESOURCE_APPLICATION => "Application",
            RESOURCE_CONVERSATION => "Conversation",
            RESOURCE_PLUGIN => "Plugin",
            other => other,
        };
        Self::new(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            format!("{what} {resource_id} not found."),
        )
        .with("resourceId", json!(resource_id))
        .with("resourceType", json!(resource_type))
    }

    /// 409 `ConflictException`.
    pub fn conflict(message: impl Into<String>, resource_type: &str, resource_id: &str) -> Self {
        Self::new(StatusCode::CONFLICT, "ConflictException", message)
            .with("resourceId", json!(resource_id))
            .with("resourceType", json!(resource_type))
    }

    /// 403 `AccessDeniedException`.
    pub fn access_denied(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "AccessDeniedException", message)
    }

    /// 400 `LicenseNotFoundException`.
    pub fn license_not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "LicenseNotFoundException", message)
    }

    /// 424 `ExternalResourceException`.
    pub fn external_resource(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FAILED_DEPENDENCY,
            "ExternalResourceException",
            message,
        )
    }

    /// 429 `ThrottlingException` with `Retry-After: 1`.
    pub fn throttling() -> Self {
        let mut err = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "ThrottlingException",
            "Rate exceeded",
        );
        err.retry_after = Some(1);
        err
    }

    /// 500 `InternalServerException`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerException",
            message,
        )
    }

    /// 413 for bodies over the emulator's cap (API Gateway's shape).
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLargeException",
            format!("Request must be smaller than {limit} bytes."),
        )
    }

    /// 403 `MissingAuthenticationTokenException`: no `Authorization` header.
    pub fn missing_authentication_token() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        )
    }

    /// 403 `UnrecognizedClientException`: the access key id is unknown.
    pub fn unrecognized_client() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        )
    }

    /// 403 `ExpiredTokenException`: session credentials past their expiry.
    pub fn expired_token() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "ExpiredTokenException",
            "The security token included in the request is expired",
        )
    }

    /// 403 `InvalidSignatureException` with the given message.
    pub fn invalid_signature(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "InvalidSignatureException", message)
    }

    /// 403 `InvalidSignatureException` for a signature that does not match.
    pub fn signature_mismatch() -> Self {
        Self::invalid_signature(
            "The request signature we calculated does not match the signature you provided. \
             Check your AWS Secret Access Key and signing method. \
             Consult the service documentation for details.",
        )
    }

    /// 403 `IncompleteSignatureException`: an `Authorization` header that is not SigV4.
    pub fn incomplete_signature(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "IncompleteSignatureException",
            message,
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message())
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Value::Object(self.members).to_string();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert("x-amzn-ErrorType", HeaderValue::from_static(self.code));
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_message_names_every_field() {
        let err = ApiError::field_validation(vec![
            FieldError::new("conversationId", "Member must be 36 characters"),
            FieldError::new(
                "clientToken",
                "Member must have length less than or equal to 100",
            ),
        ]);
        assert_eq!(err.status(), StatusCode::BAD_REQUEST);
        assert!(err.message().starts_with("2 validation errors detected: "));
        assert!(err.message().contains("'conversationId'"));
        assert!(err.message().contains("'clientToken'"));
    }

    #[test]
    fn throttling_carries_retry_after() {
        let response = ApiError::throttling().into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            response.headers().get("retry-after").map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        assert_eq!(
            response
                .headers()
                .get("x-amzn-errortype")
                .map(|v| v.as_bytes()),
            Some(&b"ThrottlingException"[..])
        );
    }
}
