//! Jobs and tools: the backend SDK's types ([`agentgate_backend`]), which
//! the engine runs, and the error objects it stores for failed tasks.

use rmcp::model::ErrorCode;
use serde_json::Value;

pub use agentgate_backend::{
    BoxFuture, Event, InlineRequest, InlineTask, Input, Job, JobContext, JobError, Step,
    StepResult, SyncView, ToolSpec, input_schema, parse_args,
};

/// A JSON-RPC error object as stored in a failed task.
pub fn error_object(code: i32, message: impl Into<String>) -> Value {
    serde_json::json!({ "code": code, "message": message.into() })
}

/// The error a task ends with when its TTL passes while it still runs.
pub fn expired_error() -> Value {
    error_object(
        ErrorCode::INTERNAL_ERROR.0,
        "task expired: its TTL passed before the work finished",
    )
}
