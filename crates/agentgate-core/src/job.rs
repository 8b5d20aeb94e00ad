//! Jobs and tools: the backend SDK's types ([`agentgate_backend`]), which
//! the engine runs, and the error object it stores for failed tasks.

use serde_json::Value;

pub use agentgate_backend::engine::{InlineRequest, Input};
pub use agentgate_backend::{
    BoxFuture, Event, InlineTask, Job, JobContext, JobError, Step, StepResult, SyncView, ToolSpec,
    input_schema, parse_args,
};

/// A JSON-RPC error object as stored in a failed task.
pub fn error_object(code: i32, message: impl Into<String>) -> Value {
    serde_json::json!({ "code": code, "message": message.into() })
}
