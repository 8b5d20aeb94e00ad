//! The built-in `task_status` tool: how clients without the tasks extension
//! follow a task. It answers from the store with the same ownership rule as
//! `tasks/get`, and can long-poll until the task changes.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::TaskId;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, Tool};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::time::Instant;

use super::Caller;
use crate::engine::TaskError;
use crate::mcp::error::GatewayError;
use crate::mcp::render;

pub(super) const NAME: &str = "task_status";

/// Longest wait between store reads during a long poll: another instance
/// may be the one running the task.
const RECHECK: Duration = Duration::from_secs(1);

/// Longest long-poll a caller may ask for.
const MAX_WAIT_SECONDS: f64 = 60.0;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The task id a tool call returned.
    task_id: String,
    /// Wait up to this many seconds (at most 60) for the task's status to
    /// change before answering. 0 or absent answers at once.
    #[serde(default)]
    wait_seconds: Option<f64>,
}

pub(super) fn tool() -> Tool {
    let mut tool = Tool::new(
        NAME,
        "Show the status of a task started by another tool, and its result once it has one. \
         Pass wait_seconds (up to 60) to wait for the next change instead of polling.",
        rmcp::handler::server::common::schema_for_type::<Args>(),
    );
    tool.output_schema = Some(Arc::new(output_schema()));
    tool
}

fn output_schema() -> rmcp::model::JsonObject {
    let schema = serde_json::json!({
        "type": "object",
        "description": "The task, as the tasks/get method of the MCP tasks extension returns it.",
        "properties": {
            "taskId": {"type": "string"},
            "status": {"type": "string", "enum": ["working", "input_required", "completed", "failed", "cancelled"]},
            "statusMessage": {"type": "string"},
            "createdAt": {"type": "string"},
            "lastUpdatedAt": {"type": "string"},
            "ttlMs": {"type": ["integer", "null"]},
            "pollIntervalMs": {"type": "integer"},
            "inputRequests": {"type": "object"},
            "result": {"type": "object"},
            "error": {"type": "object"}
        },
        "required": ["taskId", "status", "createdAt", "lastUpdatedAt"]
    });
    match schema {
        serde_json::Value::Object(map) => map,
        _ => rmcp::model::JsonObject::new(),
    }
}

fn error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("Error: {text}"))])
}

/// Answers a `task_status` call.
pub(super) async fn call(
    caller: &Caller<'_>,
    request: CallToolRequestParams,
) -> Result<CallToolResult, ErrorData> {
    let args = request.arguments.unwrap_or_default();
    let args: Args = match agentgate_backend::parse_args(&args) {
        Ok(args) => args,
        Err(problem) => return Ok(error(format!("invalid arguments for `{NAME}`: {problem}"))),
    };
    let wait = match args.wait_seconds {
        None => 0.0,
        Some(w) if (0.0..=MAX_WAIT_SECONDS).contains(&w) => w,
        Some(w) => {
            return Ok(error(format!(
                "field `wait_seconds` must be between 0 and {MAX_WAIT_SECONDS}, got {w}"
            )));
        }
    };
    let owner = caller.owner.clone();
    let id = TaskId::from_client(args.task_id);
    let mut watch = caller.tasks.watch(&owner, vec![id.clone()]);
    let mut record = match watch.read(&id).await {
        Ok(record) => record,
        Err(TaskError::UnknownTask) => {
            return Ok(error(format!("unknown or expired task id `{id}`")));
        }
        Err(e) => return Err(e.into()),
    };
    let seen = (record.status, record.status_message.clone());
    let deadline = Instant::now() + Duration::from_secs_f64(wait);
    while !record.status.is_terminal() && Instant::now() < deadline {
        tokio::select! {
            _ = watch.changed(RECHECK) => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = caller.cancelled.cancelled() => break,
        }
        record = match watch.read(&id).await {
            Ok(record) => record,
            Err(TaskError::UnknownTask) => {
                return Ok(error(format!("unknown or expired task id `{id}`")));
            }
            Err(e) => return Err(e.into()),
        };
        if (record.status, record.status_message.clone()) != seen {
            break;
        }
    }
    let detailed = render::to_detailed_task(&record, &caller.tasks.tools(), caller.tasks.now())?;
    let structured = serde_json::to_value(&detailed)
        .map_err(|e| GatewayError::Internal(format!("rendering task {id}: {e}")))?;
    let mut text = format!("Task {id}: {}", record.status);
    if let Some(message) = &record.status_message {
        text.push_str(&format!(" ({message})"));
    }
    if record.status == agentgate_backend::TaskPhase::InputRequired {
        for (key, request) in &record.input_requests {
            let params = &request["params"];
            let message = params["message"].as_str().unwrap_or("(no message)");
            text.push_str(&format!("\nWaiting for input `{key}`: {message}"));
            if let Some(schema) = params.get("requestedSchema") {
                text.push_str(&format!("\n  fields: {schema}"));
            }
            if let Some(url) = params["url"].as_str() {
                text.push_str(&format!("\n  open: {url}"));
            }
        }
        text.push_str(&format!(
            "\nAsk the user, then answer with the `task_answer` tool: {{\"task_id\": \
             \"{id}\", \"responses\": {{<key>: {{\"action\": \"accept\", \"content\": \
             {{…}}}}}}}}; or stop the task with `task_cancel`."
        ));
    }
    if let Some(result) = &record.result {
        text.push_str(&format!("\nResult: {result}"));
    }
    if let Some(error) = &record.error {
        text.push_str(&format!("\nError: {error}"));
    }
    let mut result = CallToolResult::structured(structured);
    result.content = vec![ContentBlock::text(text)];
    Ok(result)
}
