//! Stored task records in the Tasks extension's wire shapes.

use agentgate_backend::{Millis, TaskId, TaskPhase};
use rmcp::model::{
    CallToolResult, ContentBlock, DetailedTask, ErrorData, InputRequests, JsonObject, Task,
    TaskPayload, TaskStatus as WireStatus,
};
use serde_json::Value;

use super::GatewayError;
use crate::clock::iso8601;
use crate::registry::ToolRegistry;
use crate::task::TaskRecord;

pub(crate) fn wire_status(status: TaskPhase) -> WireStatus {
    match status {
        TaskPhase::Working => WireStatus::Working,
        TaskPhase::InputRequired => WireStatus::InputRequired,
        TaskPhase::Completed => WireStatus::Completed,
        TaskPhase::Failed => WireStatus::Failed,
        TaskPhase::Cancelled => WireStatus::Cancelled,
    }
}

/// The `Task` fields of a record: ids, status, timestamps, TTL and the poll
/// interval the tool's policy suggests for the task's state and age.
pub(crate) fn task_fields(record: &TaskRecord, tools: &ToolRegistry, now: Millis) -> Task {
    let mut task = Task::new(
        record.id.as_str(),
        wire_status(record.status),
        iso8601(record.created_at),
        iso8601(record.updated_at),
    );
    task.status_message = record.status_message.clone();
    // From creation, as the wire counts it: it grows with the task's progress.
    task.ttl_ms = record.ttl_from_creation_ms();
    let age = now.since(record.created_at);
    task.poll_interval_ms = tools
        .get(&record.tool)
        .and_then(|spec| spec.policy.poll.interval(record.status, age))
        .map(agentgate_backend::engine::wire_ms);
    task
}

/// The record as `tasks/get` returns it.
pub fn to_detailed_task(
    record: &TaskRecord,
    tools: &ToolRegistry,
    now: Millis,
) -> Result<DetailedTask, ErrorData> {
    let task = task_fields(record, tools, now);
    let payload = match record.status {
        TaskPhase::Working => TaskPayload::Working,
        TaskPhase::Cancelled => TaskPayload::Cancelled,
        TaskPhase::InputRequired => TaskPayload::InputRequired {
            input_requests: input_requests(record)?,
        },
        TaskPhase::Completed => TaskPayload::Completed {
            result: object(record.result.clone(), "result")?,
        },
        TaskPhase::Failed => TaskPayload::Failed {
            error: object(record.error.clone(), "error")?,
        },
    };
    Ok(DetailedTask::new(task, payload))
}

pub(crate) fn input_requests(record: &TaskRecord) -> Result<InputRequests, ErrorData> {
    record
        .input_requests
        .iter()
        .map(|(key, raw)| {
            serde_json::from_value(raw.clone())
                .map(|request| (key.clone(), request))
                .map_err(|e| corrupt(&record.id, &format!("input request `{key}`: {e}")))
        })
        .collect()
}

/// The stored `CallToolResult` (`result`) of completed task `id`.
pub(crate) fn tool_result(
    id: &TaskId,
    result: Option<&Value>,
) -> Result<CallToolResult, ErrorData> {
    let raw = result.cloned().unwrap_or(Value::Null);
    serde_json::from_value(raw).map_err(|e| corrupt(id, &format!("result: {e}")))
}

/// How a task that ended answers the `tools/call` that started it, for a
/// client that followed it inline: its result, its error, or a tool error
/// saying it was cancelled.
pub(crate) fn ended_call(record: &TaskRecord) -> Result<CallToolResult, ErrorData> {
    match record.status {
        TaskPhase::Failed => Err(task_error(record.error.as_ref())),
        TaskPhase::Cancelled => Ok(CallToolResult::error(vec![ContentBlock::text(
            cancelled_text(&record.id),
        )])),
        _ => tool_result(&record.id, record.result.as_ref()),
    }
}

/// What a call or `tasks/result` says of a task that was cancelled.
pub(crate) fn cancelled_text(id: &TaskId) -> String {
    format!("Error: task {id} was cancelled before it finished")
}

/// The stored JSON-RPC error (`error`) of a failed task.
pub(crate) fn task_error(error: Option<&Value>) -> ErrorData {
    error
        .cloned()
        .and_then(|raw| serde_json::from_value(raw).ok())
        .unwrap_or_else(|| {
            GatewayError::Internal("the task failed without an error".to_owned()).into()
        })
}

fn object(value: Option<Value>, what: &str) -> Result<JsonObject, ErrorData> {
    match value {
        Some(Value::Object(map)) => Ok(map),
        other => Err(GatewayError::Internal(format!(
            "stored task {what} is not an object: {other:?}"
        ))
        .into()),
    }
}

fn corrupt(id: &TaskId, detail: &str) -> ErrorData {
    GatewayError::Internal(format!("stored task {id} is unreadable: {detail}")).into()
}
