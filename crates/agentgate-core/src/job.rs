//! The error object the engine stores for failed tasks. Jobs and tools
//! themselves are the backend SDK's types ([`agentgate_backend`]), used from
//! there.

use serde_json::Value;

/// The JSON-RPC error object stored in a task the engine itself fails (a
/// step that timed out, retries given up, a result the store refused, a
/// tool this instance does not serve, a job that broke the rules): always
/// an internal error (-32603), the code chosen here and nowhere else. A
/// job's own failure keeps the code the job chose.
pub fn engine_failure(message: impl Into<String>) -> Value {
    serde_json::json!({
        "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
        "message": message.into(),
    })
}
