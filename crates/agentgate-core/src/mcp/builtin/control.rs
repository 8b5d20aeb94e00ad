//! `task_answer` and `task_cancel`: what `tasks/update` and `tasks/cancel`
//! do, as tools, for clients without the tasks extension (most desktop hosts
//! today). With `task_status` they let such a client follow, answer and stop
//! a task that outlived its inline call.
//!
//! Both take the caller's owner exactly as the task methods do, so another
//! principal's task is answered like an unknown one, and both make their
//! change through the same store call and notifications as the methods.

use agentgate_backend::{TaskId, TaskPhase};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ElicitRequestParams, ErrorData,
    InputRequest, InputResponses, Tool,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::Caller;
use crate::engine::TaskError;
use crate::mcp::render;

pub(super) const ANSWER: &str = "task_answer";
pub(super) const CANCEL: &str = "task_cancel";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AnswerArgs {
    /// The task id a tool call returned.
    task_id: String,
    /// One answer per input request, keyed by the request's key as
    /// `task_status` shows it. A form request is answered with
    /// `{"action": "accept", "content": {<field>: <value>, …}}`, or
    /// `{"action": "decline"}` / `{"action": "cancel"}` to refuse.
    responses: serde_json::Map<String, Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CancelArgs {
    /// The task id a tool call returned.
    task_id: String,
}

pub(super) fn tools() -> [Tool; 2] {
    [
        Tool::new(
            ANSWER,
            "Answer the questions a task is waiting on. Call this when `task_status` (or a \
             tool's result) says the task is `input_required`: pass the task id and, for each \
             input request key it lists, the answer - usually {\"action\": \"accept\", \
             \"content\": {...}} with the fields the request's schema asks for. Ask the user \
             for the values; never make them up. The task then continues; follow it with \
             `task_status`.",
            rmcp::handler::server::common::schema_for_type::<AnswerArgs>(),
        ),
        Tool::new(
            CANCEL,
            "Stop a task that is still running or waiting for input, when the user asks to \
             stop it. The backend is asked to stop too (it may take a moment); `task_status` \
             shows the task as cancelled once it has stopped. Cancelling an ended task changes \
             nothing.",
            rmcp::handler::server::common::schema_for_type::<CancelArgs>(),
        ),
    ]
}

fn error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("Error: {text}"))])
}

fn parse<T: serde::de::DeserializeOwned>(
    request: &CallToolRequestParams,
    tool: &str,
) -> Result<T, CallToolResult> {
    let args = Value::Object(request.arguments.clone().unwrap_or_default());
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        error(format!(
            "invalid arguments for `{tool}` at `{path}`: {}; tools/list shows its inputSchema",
            e.inner()
        ))
    })
}

/// The tool result for an unknown, expired or foreign task, or the error
/// for anything else (a store outage is not "unknown").
/// An unknown task is the caller's mistake, told as a tool error a model
/// can read; anything else (a store outage) is a JSON-RPC error.
fn unknown_or(e: TaskError, id: &TaskId) -> Result<CallToolResult, ErrorData> {
    match e {
        TaskError::UnknownTask => Ok(error(format!("unknown or expired task id `{id}`"))),
        e => Err(e.into()),
    }
}

/// Answers a `task_answer` call.
pub(super) async fn answer(
    caller: &Caller<'_>,
    request: CallToolRequestParams,
) -> Result<CallToolResult, ErrorData> {
    let args: AnswerArgs = match parse(&request, ANSWER) {
        Ok(args) => args,
        Err(result) => return Ok(result),
    };
    let owner = caller.owner.clone();
    let id = TaskId::from_client(args.task_id);
    let responses: InputResponses = args.responses.into_iter().collect();
    caller.check_input_size(&responses)?;
    let record = match caller.tasks.get(&owner, &id).await {
        Ok(record) => record,
        Err(e) => return unknown_or(e, &id),
    };
    if record.status != TaskPhase::InputRequired {
        return Ok(error(format!(
            "task `{id}` is {} and waits for no input; `task_status` shows it",
            record.status
        )));
    }
    let requests = render::input_requests(&record)?;
    if let Err(problem) = check_answers(&requests, &responses) {
        return Ok(error(format!("task `{id}`: {problem}")));
    }
    let ack = match caller.tasks.answer(&owner, &id, responses).await {
        Ok(ack) => ack,
        Err(e) => return unknown_or(e, &id),
    };
    let text = if ack.complete {
        format!(
            "Answered ({}). Task {id} continues; call `task_status` with {{\"task_id\": \
             \"{id}\", \"wait_seconds\": 30}} to follow it.",
            ack.accepted.join(", ")
        )
    } else if ack.accepted.is_empty() {
        format!("Task {id} was already answered; `task_status` shows where it is.")
    } else {
        format!(
            "Answered ({}); task {id} still waits for its other input requests \
             (`task_status` lists them).",
            ack.accepted.join(", ")
        )
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(serde_json::json!({
        "taskId": id.as_str(),
        "accepted": ack.accepted,
        "complete": ack.complete,
    }));
    Ok(result)
}

/// Answers a `task_cancel` call.
pub(super) async fn cancel(
    caller: &Caller<'_>,
    request: CallToolRequestParams,
) -> Result<CallToolResult, ErrorData> {
    let args: CancelArgs = match parse(&request, CANCEL) {
        Ok(args) => args,
        Err(result) => return Ok(result),
    };
    let owner = caller.owner.clone();
    let id = TaskId::from_client(args.task_id);
    if let Err(e) = caller.tasks.cancel(&owner, &id).await {
        return unknown_or(e, &id);
    }
    Ok(CallToolResult::success(vec![ContentBlock::text(format!(
        "Cancellation of task {id} requested. Call `task_status` with {{\"task_id\": \
         \"{id}\", \"wait_seconds\": 30}} to see it stop."
    ))]))
}

/// Checks answers against the task's outstanding requests: every key is
/// one of them, and an accepted form carries what its schema requires, of
/// the right types. Says what is wrong, naming the key and the field.
fn check_answers(
    requests: &rmcp::model::InputRequests,
    responses: &InputResponses,
) -> Result<(), String> {
    if responses.is_empty() {
        return Err(format!(
            "`responses` is empty; answer one of: {}",
            keys(requests)
        ));
    }
    for (key, response) in responses {
        let Some(request) = requests.get(key) else {
            return Err(format!(
                "no input request `{key}` is outstanding; answer one of: {}",
                keys(requests)
            ));
        };
        let InputRequest::Elicitation(elicit) = request else {
            continue;
        };
        let action = response.get("action").and_then(Value::as_str);
        match action {
            Some("decline" | "cancel") => continue,
            Some("accept") => {}
            _ => {
                return Err(format!(
                    "`responses.{key}.action` must be \"accept\", \"decline\" or \"cancel\""
                ));
            }
        }
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = &elicit.params
        else {
            continue;
        };
        let schema = serde_json::to_value(requested_schema).unwrap_or(Value::Null);
        let content = response.get("content").cloned().unwrap_or(Value::Null);
        check_form(key, &schema, &content)?;
    }
    Ok(())
}

fn keys(requests: &rmcp::model::InputRequests) -> String {
    let keys: Vec<String> = requests.keys().map(|k| format!("`{k}`")).collect();
    keys.join(", ")
}

/// A form's content against its (flat, primitive) requested schema.
fn check_form(key: &str, schema: &Value, content: &Value) -> Result<(), String> {
    let Some(fields) = content.as_object() else {
        return Err(format!(
            "`responses.{key}.content` must be an object of the form's fields"
        ));
    };
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for name in &required {
        if !fields.contains_key(*name) {
            return Err(format!(
                "`responses.{key}.content.{name}` is required by the form"
            ));
        }
    }
    for (name, value) in fields {
        let Some(property) = properties.get(name) else {
            let known: Vec<&String> = properties.keys().collect();
            return Err(format!(
                "`responses.{key}.content.{name}` is not a field of the form (its fields: {known:?})"
            ));
        };
        let wanted = property.get("type").and_then(Value::as_str);
        let fits = match wanted {
            Some("string") => value.is_string(),
            Some("number") => value.is_number(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("boolean") => value.is_boolean(),
            Some("array") => value.is_array(),
            _ => true,
        };
        if !fits {
            return Err(format!(
                "`responses.{key}.content.{name}` must be a {}, got {value}",
                wanted.unwrap_or("value")
            ));
        }
        if let Some(choices) = property.get("enum").and_then(Value::as_array)
            && !choices.contains(value)
        {
            return Err(format!(
                "`responses.{key}.content.{name}` must be one of {}",
                Value::Array(choices.clone())
            ));
        }
    }
    Ok(())
}
