//! The error object the engine stores for failed tasks. Jobs and tools
//! themselves are the backend SDK's types ([`agentgate_backend`]), used from
//! there.

use serde_json::Value;

/// A JSON-RPC error object as stored in a failed task.
pub fn error_object(code: i32, message: impl Into<String>) -> Value {
    serde_json::json!({ "code": code, "message": message.into() })
}
