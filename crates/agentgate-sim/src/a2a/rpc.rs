//! JSON-RPC 2.0 dispatch (§9): the envelope, the params of each method as `wire`
//! types (unknown fields refused, the offending field named), and the answers —
//! `{"jsonrpc":"2.0","id":…,"result":…}` or `…"error":…` with HTTP 200, or an SSE
//! stream for `SendStreamingMessage` and `SubscribeToTask`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::A2aSim;
use super::errors::RpcError;
use super::push;
use super::send::{self, SendReply};
use super::stream;
use super::wire::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    StreamResponse, SubscribeToTaskRequest, TaskState,
};

/// The default and largest ListTasks page.
const DEFAULT_PAGE_SIZE: i32 = 50;
const MAX_PAGE_SIZE: i32 = 100;

/// A parsed JSON-RPC request.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub id: Value,
    pub method: String,
    pub params: Value,
}

impl Envelope {
    /// Parses the body; on failure, the id to answer with (null when unknown) and why.
    pub(super) fn parse(body: &[u8]) -> Result<Self, (Value, RpcError)> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| (Value::Null, RpcError::parse_error(e)))?;
        let Value::Object(mut object) = value else {
            return Err((
                Value::Null,
                RpcError::invalid_request("the body must be one JSON-RPC request object"),
            ));
        };
        let id = object.remove("id").unwrap_or(Value::Null);
        if !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
            return Err((
                Value::Null,
                RpcError::invalid_request("`id` must be a string, a number or null"),
            ));
        }
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err((id, RpcError::invalid_request("`jsonrpc` must be \"2.0\"")));
        }
        let Some(Value::String(method)) = object.remove("method") else {
            return Err((id, RpcError::invalid_request("`method` must be a string")));
        };
        let params = object.remove("params").unwrap_or(Value::Null);
        if let Some(extra) = object.keys().find(|k| k.as_str() != "jsonrpc") {
            return Err((
                id,
                RpcError::invalid_request(format!("unknown member `{extra}`")),
            ));
        }
        Ok(Self { id, method, params })
    }
}

/// A JSON-RPC answer with HTTP 200.
fn json_response(body: Value) -> Response {
    (StatusCode::OK, axum::Json(body)).into_response()
}

/// A JSON-RPC error answer with HTTP 200.
pub(crate) fn error_response(id: &Value, error: &RpcError) -> Response {
    json_response(json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }))
}

fn result_response(id: &Value, result: Result<Value, RpcError>) -> Response {
    match result {
        Ok(result) => json_response(json!({ "jsonrpc": "2.0", "id": id, "result": result })),
        Err(error) => error_response(id, &error),
    }
}

/// The params as `T`; absent params are `{}`. The error names the field at fault.
fn params<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    let params = match params {
        Value::Null => Value::Object(Map::new()),
        other => other,
    };
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "params".to_owned()
        } else {
            path
        };
        RpcError::invalid_params(&field, e.into_inner().to_string())
    })
}

fn to_value(value: impl serde::Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::internal(e.to_string()))
}

/// Runs one method.
pub(crate) async fn dispatch(sim: A2aSim, base_url: String, envelope: Envelope) -> Response {
    let Envelope {
        id,
        method,
        params: raw,
    } = envelope;
    match method.as_str() {
        "SendMessage" | "SendStreamingMessage" => {
            let streaming = method == "SendStreamingMessage";
            let request: SendMessageRequest = match params(raw) {
                Ok(request) => request,
                Err(error) => return error_response(&id, &error),
            };
            let outcome = match send::send_message(&sim, &base_url, request).await {
                Ok(outcome) => outcome,
                Err(error) => return error_response(&id, &error),
            };
            if streaming {
                return match outcome {
                    SendReply::Message(message) => {
                        stream::single(&id, StreamResponse::Message(message))
                    }
                    SendReply::Task {
                        snapshot, events, ..
                    } => stream::task_stream(&sim, id, snapshot, events),
                };
            }
            let result = match outcome {
                SendReply::Message(message) => to_value(StreamResponse::Message(message)),
                SendReply::Task {
                    snapshot,
                    events,
                    blocking,
                    history_length,
                } => {
                    let task = if blocking {
                        send::settled(&sim, snapshot, events).await
                    } else {
                        snapshot
                    };
                    to_value(StreamResponse::Task(task.with_history(history_length)))
                }
            };
            if sim.faults().take_lost_answer() {
                sim.inner.store().stats.answers_lost += 1;
                let error = RpcError::internal("the answer was lost (injected fault)");
                let mut response = error_response(&id, &error);
                *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                return response;
            }
            result_response(&id, result)
        }
        "GetTask" => result_response(&id, get_task(&sim, raw)),
        "ListTasks" => result_response(&id, list_tasks(&sim, raw)),
        "CancelTask" => result_response(&id, cancel_task(&sim, raw)),
        "SubscribeToTask" => {
            let request: SubscribeToTaskRequest = match params(raw) {
                Ok(request) => request,
                Err(error) => return error_response(&id, &error),
            };
            let subscription = sim.inner.store().subscribe(&request.id);
            match subscription {
                None => error_response(&id, &RpcError::task_not_found(&request.id)),
                Some((snapshot, _)) if snapshot.status.state.is_terminal() => error_response(
                    &id,
                    &RpcError::unsupported(format!(
                        "task {} is in a terminal state; use GetTask",
                        request.id
                    )),
                ),
                Some((snapshot, events)) => stream::task_stream(&sim, id, snapshot, events),
            }
        }
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig"
            if !sim.config().push_notifications =>
        {
            error_response(&id, &RpcError::push_not_supported())
        }
        "CreateTaskPushNotificationConfig" => result_response(
            &id,
            params(raw).and_then(|config| push::create(&sim, config)),
        ),
        "GetTaskPushNotificationConfig" => result_response(
            &id,
            params(raw).and_then(|request| push::get(&sim, request)),
        ),
        "ListTaskPushNotificationConfigs" => result_response(
            &id,
            params(raw).and_then(|request| push::list(&sim, request)),
        ),
        "DeleteTaskPushNotificationConfig" => result_response(
            &id,
            params(raw).and_then(|request| push::delete(&sim, request)),
        ),
        "GetExtendedAgentCard" => error_response(
            &id,
            &RpcError::unsupported("capabilities.extendedAgentCard is false"),
        ),
        other => error_response(&id, &RpcError::method_not_found(other)),
    }
}

fn check_history_length(field: &str, history_length: Option<i32>) -> Result<(), RpcError> {
    match history_length {
        Some(n) if n < 0 => Err(RpcError::invalid_params(
            field,
            format!("{n} is negative; send 0 for no history or leave it out for all"),
        )),
        _ => Ok(()),
    }
}

fn get_task(sim: &A2aSim, raw: Value) -> Result<Value, RpcError> {
    let request: GetTaskRequest = params(raw)?;
    check_history_length("historyLength", request.history_length)?;
    let store = sim.inner.store();
    let record = store
        .tasks
        .get(&request.id)
        .ok_or_else(|| RpcError::task_not_found(&request.id))?;
    to_value(record.task.with_history(request.history_length))
}

fn cancel_task(sim: &A2aSim, raw: Value) -> Result<Value, RpcError> {
    let request: CancelTaskRequest = params(raw)?;
    let mut store = sim.inner.store();
    let record = store
        .tasks
        .get(&request.id)
        .ok_or_else(|| RpcError::task_not_found(&request.id))?;
    let state = record.task.status.state;
    if state.is_terminal() {
        let name = to_value(state)?;
        return Err(RpcError::task_not_cancelable(
            &request.id,
            &format!("it is already {}", name.as_str().unwrap_or("terminal")),
        ));
    }
    if !record.cancelable {
        return Err(RpcError::task_not_cancelable(
            &request.id,
            "this agent's work cannot be interrupted (skill refuses-cancel)",
        ));
    }
    store.set_status(
        &request.id,
        TaskState::Canceled,
        Some("Canceled at the client's request.".into()),
    );
    store.stats.cancels += 1;
    let record = store
        .tasks
        .get(&request.id)
        .ok_or_else(|| RpcError::task_not_found(&request.id))?;
    to_value(&record.task)
}

fn list_tasks(sim: &A2aSim, raw: Value) -> Result<Value, RpcError> {
    let request: ListTasksRequest = params(raw)?;
    check_history_length("historyLength", request.history_length)?;
    let page_size = request.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
        return Err(RpcError::invalid_params(
            "pageSize",
            format!("{page_size} is not from 1 to {MAX_PAGE_SIZE}"),
        ));
    }
    let offset: usize = if request.page_token.is_empty() {
        0
    } else {
        request.page_token.parse().map_err(|_| {
            RpcError::invalid_params(
                "pageToken",
                "not a token this server issued; send the previous answer's nextPageToken",
            )
        })?
    };
    let after = match &request.status_timestamp_after {
        None => None,
        Some(text) => Some(chrono::DateTime::parse_from_rfc3339(text).map_err(|e| {
            RpcError::invalid_params(
                "statusTimestampAfter",
                format!("{text:?} is not an RFC 3339 timestamp: {e}"),
            )
        })?),
    };
    let status = request.status.filter(|s| *s != TaskState::Unspecified);
    let mut store = sim.inner.store();
    if !request.context_id.is_empty() {
        *store
            .stats
            .lists_by_context_id
            .entry(request.context_id.clone())
            .or_default() += 1;
    }
    let mut matching: Vec<_> = store
        .tasks
        .values()
        .filter(|r| request.context_id.is_empty() || r.task.context_id == request.context_id)
        .filter(|r| status.is_none_or(|s| r.task.status.state == s))
        .filter(|r| {
            after.is_none_or(|after| {
                chrono::DateTime::parse_from_rfc3339(&r.task.status.timestamp)
                    .is_ok_and(|t| t >= after)
            })
        })
        .collect();
    // §3.1.4: most recently updated first.
    matching.sort_by_key(|r| std::cmp::Reverse(r.updated));
    let total = matching.len();
    let page = usize::try_from(page_size).unwrap_or(1);
    let tasks: Vec<_> = matching
        .iter()
        .skip(offset)
        .take(page)
        .map(|r| {
            let mut task = r.task.with_history(request.history_length);
            if !request.include_artifacts.unwrap_or(false) {
                task.artifacts.clear();
            }
            task
        })
        .collect();
    let next = offset + tasks.len();
    to_value(ListTasksResponse {
        tasks,
        next_page_token: if next < total {
            next.to_string()
        } else {
            String::new()
        },
        page_size,
        total_size: i32::try_from(total).unwrap_or(i32::MAX),
    })
}
