//! The task wire of MCP 2025-11-25 (tasks in the core spec), which VS Code's
//! Copilot Chat and the official SDKs' 1.x clients speak, served on the same
//! engine and store as the 2026-07-28 tasks extension.
//!
//! rmcp 3.11 knows only the extension: its `ServerCapabilities` has no
//! `tasks` field, its `Tool` no `execution`, its `tools/call` parameters drop
//! `task`, and it parses `tasks/get`/`tasks/cancel` as the extension's
//! requests (refused `-32021` to a client that did not declare it). So the
//! pieces meet at the HTTP layer, as for [`super::listen`]:
//!
//! ```text
//! POST /mcp, session at MCP-Protocol-Version 2025-11-25:
//!   route (axum layer, before rmcp):
//!     tools/call with params.task, tasks/get|result|cancel|list
//!       ──▶ renamed io.agentgate/2025-11-25/<method> (an rmcp custom request)
//!     initialize answered at 2025-11-25 ──▶ + capabilities.tasks
//!     tools/list ──▶ + execution.taskSupport on every tool
//!   rmcp ─▶ Gateway::on_custom_request ─▶ Gateway::serve_2025
//!     tools/call ──▶ Tasks::create (the same durable, owned task) ─▶ {task}
//!     tasks/get ───▶ Tasks::get ─▶ Task
//!     tasks/result ─▶ Tasks::watch until the task ends ─▶ CallToolResult
//!                     or its JSON-RPC error (input_required: elicitation/create
//!                     tied to the task, answers through Tasks::answer; each
//!                     change meanwhile: notifications/tasks/status)
//!     tasks/cancel ─▶ Tasks::cancel ─▶ Task
//!     tasks/list ──▶ Tasks::list (the caller's own, newest first) ─▶ a page
//! ```
//!
//! Only the session's declared version selects this wire, so a 2026-07-28
//! client sees exactly what it saw before. Ownership is the gateway's usual
//! rule: another owner's id is answered exactly like an unknown one.

use agentgate_backend::{Owner, TaskId, TaskPhase};
use axum::body::{Body, Bytes};
use futures::StreamExt as _;
use http::HeaderMap;
use rmcp::model::{
    CustomRequest, CustomResult, ElicitRequestParams, ErrorData, InputRequest, InputResponses,
    JsonObject, RequestMetaObject,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::GatewayError;
use super::follower::{TaskFollower, Turn};
use super::gateway::Gateway;
use super::render;
use super::transport::sse_patch::FirstEventPatch;
use crate::task::TaskRecord;

/// The protocol version whose task wire this module serves.
pub(crate) const VERSION: &str = "2025-11-25";

/// The custom method names the HTTP layer gives the 2025-11-25 task
/// requests, so rmcp hands them to [`Gateway::serve_2025`] whole.
pub(crate) const PREFIX: &str = "io.agentgate/2025-11-25/";

/// What a client's own request for a [`PREFIX`] method is renamed to: those
/// names are reserved for the requests this module renamed, after the HTTP
/// layer checked the original method's and tool's OAuth scopes, so one sent
/// as such would skip those checks. The gateway answers it `-32601`.
pub(crate) const RESERVED: &str = "io.agentgate/reserved/";

/// The `_meta` key tying a message to its task (2025-11-25).
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// What the HTTP layer does with one request for the 2025-11-25 task wire.
pub(crate) enum Route {
    /// Not part of it: untouched.
    Pass,
    /// A task request, renamed for [`Gateway::serve_2025`]: the new body.
    Rewrite(Bytes),
    /// `initialize`: add `capabilities.tasks` if 2025-11-25 was negotiated.
    Initialize,
    /// `tools/list` of a 2025-11-25 session: add `execution.taskSupport`.
    ToolsList,
}

/// Decides the route of a parsed request `method` with body `bytes`.
pub(crate) fn route(headers: &HeaderMap, method: Option<&str>, bytes: &Bytes) -> Route {
    let Some(method) = method else {
        return Route::Pass;
    };
    if method.starts_with(PREFIX) {
        return rename(bytes, &format!("{RESERVED}{method}"));
    }
    if method == "initialize" {
        return Route::Initialize;
    }
    let session_2025 = headers
        .get("mcp-protocol-version")
        .is_some_and(|v| v.as_bytes() == VERSION.as_bytes());
    if !session_2025 {
        return Route::Pass;
    }
    match method {
        "tools/list" => Route::ToolsList,
        "tools/call" | "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/list" => {
            rename(bytes, &format!("{PREFIX}{method}"))
        }
        _ => Route::Pass,
    }
}

/// The request in `bytes` with its method renamed to `to`; a `tools/call`
/// without `task` is an ordinary call (served inline) and passes.
fn rename(bytes: &Bytes, to: &str) -> Route {
    let Ok(mut message) = serde_json::from_slice::<Value>(bytes) else {
        return Route::Pass;
    };
    if message.get("method").and_then(Value::as_str) == Some("tools/call")
        && message.pointer("/params/task").is_none()
    {
        return Route::Pass;
    }
    message["method"] = Value::String(to.to_owned());
    match serde_json::to_vec(&message) {
        Ok(body) => Route::Rewrite(Bytes::from(body)),
        Err(_) => Route::Pass,
    }
}

/// `capabilities.tasks` for an `initialize` answered at 2025-11-25: task
/// augmentation of `tools/call`, `tasks/list` and `tasks/cancel`.
fn patch_initialize(message: &mut Value) {
    let Some(result) = message.get_mut("result") else {
        return;
    };
    if result.get("protocolVersion").and_then(Value::as_str) != Some(VERSION) {
        return;
    }
    if let Some(capabilities) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        capabilities.insert(
            "tasks".into(),
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        );
    }
}

/// `execution.taskSupport` on every tool: `"optional"` for a backend tool,
/// `"forbidden"` for the built-ins, which answer at once and create no task.
fn patch_tools_list(message: &mut Value) {
    let Some(tools) = message
        .pointer_mut("/result/tools")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for tool in tools {
        let builtin = tool
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|name| super::builtin::NAMES.contains(&name));
        let support = if builtin { "forbidden" } else { "optional" };
        if let Some(tool) = tool.as_object_mut() {
            tool.insert("execution".into(), json!({ "taskSupport": support }));
        }
    }
}

/// Applies the patch `route` calls for to the answer rmcp gave.
pub(crate) async fn patch_response(
    route: &Route,
    response: axum::response::Response,
) -> axum::response::Response {
    let patch: fn(&mut Value) = match route {
        Route::Initialize => patch_initialize,
        Route::ToolsList => patch_tools_list,
        Route::Pass | Route::Rewrite(_) => return response,
    };
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let (mut parts, body) = response.into_parts();
    if content_type.starts_with("application/json") {
        // One JSON-RPC message, written by rmcp (so of bounded size).
        let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
            return axum::response::Response::from_parts(parts, Body::empty());
        };
        let patched = match serde_json::from_slice::<Value>(&bytes) {
            Ok(mut message) => {
                patch(&mut message);
                serde_json::to_vec(&message).map_or(bytes, Bytes::from)
            }
            Err(_) => bytes,
        };
        parts.headers.remove(http::header::CONTENT_LENGTH);
        return axum::response::Response::from_parts(parts, Body::from(patched));
    }
    if content_type.starts_with("text/event-stream") {
        let mut patcher = FirstEventPatch::new(move |event: &[u8]| patch_event(event, patch));
        let stream = body
            .into_data_stream()
            .map(move |chunk| chunk.map(|bytes| patcher.feed(bytes)));
        return axum::response::Response::from_parts(parts, Body::from_stream(stream));
    }
    axum::response::Response::from_parts(parts, body)
}

/// The event rewritten, if its `data:` line is the response.
fn patch_event(event: &[u8], patch: fn(&mut Value)) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(event).ok()?;
    let mut out = String::with_capacity(text.len() + 64);
    let mut patched = false;
    for line in text.split_inclusive('\n') {
        if let Some(data) = line.strip_prefix("data:")
            && let Ok(mut message) = serde_json::from_str::<Value>(data.trim())
            && message.get("result").is_some()
        {
            patch(&mut message);
            out.push_str("data: ");
            out.push_str(&message.to_string());
            out.push('\n');
            patched = true;
        } else {
            out.push_str(line);
        }
    }
    patched.then(|| out.into_bytes())
}

/// The stdio side of the 2025-11-25 wire: a stdio session has no
/// `MCP-Protocol-Version` header, so the stdio guard
/// ([`super::transport::stdio`]) remembers the version `initialize` was answered at and
/// which answers to patch, and renames and patches as the HTTP layer does.
#[derive(Default)]
pub(crate) struct StdioWire {
    /// Off for a handler that is not a [`Gateway`].
    enabled: bool,
    /// `initialize` was answered at 2025-11-25.
    negotiated: bool,
    /// The patch each outstanding `initialize` or `tools/list` answer
    /// needs, by the JSON text of its request id.
    patches: std::collections::HashMap<String, Patch>,
}

/// Which answer a stdio request will get.
#[derive(Clone, Copy)]
enum Patch {
    Initialize,
    ToolsList,
}

impl StdioWire {
    pub(crate) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            ..Self::default()
        }
    }

    /// A client message on its way to rmcp; true when it was changed.
    pub(crate) fn inbound(&mut self, message: &mut Value) -> bool {
        if !self.enabled {
            return false;
        }
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            return false;
        };
        if method.starts_with(PREFIX) {
            // Reserved, as over HTTP (see [`RESERVED`]).
            message["method"] = Value::String(format!("{RESERVED}{method}"));
            return true;
        }
        let id = message.get("id").map(Value::to_string);
        match (method, id) {
            ("initialize", Some(id)) => {
                self.negotiated = false;
                self.patches.insert(id, Patch::Initialize);
                false
            }
            ("tools/list", Some(id)) if self.negotiated => {
                self.patches.insert(id, Patch::ToolsList);
                false
            }
            ("tools/call", Some(_)) if self.negotiated => {
                // Only a task-augmented call; a plain one is served inline.
                if message.pointer("/params/task").is_none() {
                    return false;
                }
                message["method"] = Value::String(format!("{PREFIX}tools/call"));
                true
            }
            ("tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/list", Some(_))
                if self.negotiated =>
            {
                message["method"] = Value::String(format!("{PREFIX}{method}"));
                true
            }
            _ => false,
        }
    }

    /// A message from rmcp on its way to the client; true when it was
    /// changed.
    pub(crate) fn outbound(&mut self, message: &mut Value) -> bool {
        if !self.enabled || message.get("method").is_some() {
            return false;
        }
        let Some(patch) = message
            .get("id")
            .map(Value::to_string)
            .and_then(|id| self.patches.remove(&id))
        else {
            return false;
        };
        match patch {
            Patch::Initialize => {
                self.negotiated = message
                    .pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
                    == Some(VERSION);
                patch_initialize(message);
            }
            Patch::ToolsList => patch_tools_list(message),
        }
        true
    }
}

/// A task as 2025-11-25 writes it (`Task`): `ttl` and `pollInterval` in
/// milliseconds, `ttl` null when the task never expires.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Task2025 {
    task_id: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_message: Option<String>,
    created_at: String,
    last_updated_at: String,
    ttl: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    poll_interval: Option<u64>,
}

/// Tasks per `tasks/list` page.
const LIST_PAGE: u32 = 50;

/// A `tasks/list` cursor: where the previous page ended, as the opaque
/// `nextCursor` string (base64url of `<createdAt ms>.<taskId>`). It names
/// only a position in the caller's own list: a cursor made up or taken from
/// someone else lists the caller's own tasks from there, nothing more.
struct NextCursor(crate::store::ListCursor);

impl NextCursor {
    fn after(last: &TaskRecord) -> Self {
        Self(crate::store::ListCursor {
            created_at: last.created_at,
            id: last.id.clone(),
        })
    }

    fn encode(&self) -> String {
        use base64::Engine as _;
        let position = format!("{}.{}", self.0.created_at.unix_ms(), self.0.id.as_str());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(position)
    }

    fn decode(cursor: &str) -> Result<Self, ErrorData> {
        use base64::Engine as _;
        let position = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(cursor)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok());
        let parsed = position
            .as_deref()
            .and_then(|p| p.split_once('.'))
            .and_then(|(ms, id)| Some((ms.parse::<i64>().ok()?, id)));
        match parsed {
            Some((ms, id)) if !id.is_empty() => Ok(Self(crate::store::ListCursor {
                created_at: agentgate_backend::Millis::from_unix_ms(ms),
                id: TaskId::from_client(id.to_owned()),
            })),
            _ => Err(GatewayError::BadParams(
                "tasks/list: `cursor` is not one a tasks/list answer gave as nextCursor; list \
                 again without a cursor to start from the newest task"
                    .to_owned(),
            )
            .into()),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskParams {
    task_id: String,
}

#[derive(Deserialize)]
struct CallParams {
    name: String,
    #[serde(default)]
    arguments: Option<serde_json::Map<String, Value>>,
}

fn params<T: serde::de::DeserializeOwned>(
    request: &CustomRequest,
    method: &str,
) -> Result<T, ErrorData> {
    let raw = request.params.clone().unwrap_or(Value::Null);
    serde_json::from_value(raw)
        .map_err(|e| GatewayError::BadParams(format!("{method}: {e}")).into())
}

fn to_value<T: Serialize>(value: &T) -> Result<Value, ErrorData> {
    serde_json::to_value(value).map_err(|e| GatewayError::Internal(e.to_string()).into())
}

impl Gateway {
    fn task_2025(&self, record: &TaskRecord) -> Task2025 {
        let task = render::task_fields(record, &self.tasks.tools(), self.tasks.now());
        Task2025 {
            task_id: task.task_id,
            status: record.status.as_str(),
            status_message: task.status_message,
            created_at: task.created_at,
            last_updated_at: task.last_updated_at,
            ttl: task.ttl_ms,
            poll_interval: task.poll_interval_ms,
        }
    }

    /// Serves one request renamed by [`route`] (`method` without [`PREFIX`]).
    pub(super) async fn serve_2025(
        &self,
        method: &str,
        request: CustomRequest,
        cx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let owner = self.enter(&cx).await?;
        let value = match method {
            "tools/call" => {
                let call: CallParams = params(&request, method)?;
                let tools = self.tasks.tools();
                let spec = tools
                    .get(&call.name)
                    .ok_or_else(|| GatewayError::UnknownTool(call.name.clone()))
                    .map_err(|e| match self.tools().iter().any(|t| t.name == call.name) {
                        // A built-in: its execution.taskSupport is "forbidden".
                        true => GatewayError::NoTaskSupport(call.name.clone()),
                        false => e,
                    })?;
                let args = call.arguments.unwrap_or_default();
                spec.check_args(&args)
                    .map_err(|problem| GatewayError::BadParams(format!("arguments: {problem}")))?;
                // The client's `task.ttl` is a wish; the tool's TTL (under
                // `limits.max_ttl_seconds`) is what the task gets, and the
                // answer says so.
                let record = self.tasks.create(owner, spec, args, &self.quota()).await?;
                json!({ "task": to_value(&self.task_2025(&record))? })
            }
            "tasks/get" => {
                let TaskParams { task_id } = params(&request, method)?;
                let record = self
                    .tasks
                    .get(&owner, &TaskId::from_client(task_id))
                    .await?;
                to_value(&self.task_2025(&record))?
            }
            "tasks/cancel" => {
                let TaskParams { task_id } = params(&request, method)?;
                let id = TaskId::from_client(task_id);
                let record = self.tasks.get(&owner, &id).await?;
                if record.status.is_terminal() {
                    return Err(GatewayError::TaskEnded(record.status.as_str()).into());
                }
                self.tasks.cancel(&owner, &id).await?;
                // Cancelling is cooperative: the job decides how it ends, so
                // the answer is the task as it is now.
                to_value(&self.task_2025(&self.tasks.get(&owner, &id).await?))?
            }
            "tasks/result" => {
                let TaskParams { task_id } = params(&request, method)?;
                self.task_result(TaskId::from_client(task_id), &cx).await?
            }
            "tasks/list" => self.task_list(&owner, &request).await?,
            _ => return Err(GatewayError::UnknownMethod(format!("{PREFIX}{method}")).into()),
        };
        Ok(CustomResult::new(value))
    }

    /// `notifications/tasks/status` with the task as it is now, on the
    /// stream of the `tasks/result` that is waiting for it: a change of its
    /// status or status message while it runs (VS Code shows the message as
    /// progress). Best effort, as the spec makes it: a client that is gone
    /// still polls `tasks/get`.
    async fn notify_status(&self, cx: &RequestContext<RoleServer>, record: &TaskRecord) {
        let Ok(task) = serde_json::to_value(self.task_2025(record)) else {
            return;
        };
        let notification =
            rmcp::model::CustomNotification::new("notifications/tasks/status", Some(task));
        if let Err(e) = cx
            .peer
            .send_notification(rmcp::model::ServerNotification::CustomNotification(
                notification,
            ))
            .await
        {
            tracing::debug!(task = %record.id, error = %e, "a task status notification was not sent");
        }
    }

    /// `tasks/list`: a page of the caller's own tasks (never another
    /// principal's), newest first, and `nextCursor` while more are left.
    async fn task_list(&self, owner: &Owner, request: &CustomRequest) -> Result<Value, ErrorData> {
        let cursor = match request.params.as_ref().and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(NextCursor::decode(cursor)?),
            Some(_) => {
                return Err(GatewayError::BadParams(
                    "tasks/list: `cursor` must be the string a tasks/list answer gave as \
                     nextCursor"
                        .to_owned(),
                )
                .into());
            }
        };
        // One more than a page: whether another page follows.
        let mut page = self
            .tasks
            .list(owner, cursor.as_ref().map(|c| &c.0), LIST_PAGE + 1)
            .await?;
        let more = page.len() > LIST_PAGE as usize;
        page.truncate(LIST_PAGE as usize);
        let tasks: Vec<Task2025> = page.iter().map(|record| self.task_2025(record)).collect();
        let mut answer = json!({ "tasks": to_value(&tasks)? });
        if let (true, Some(last)) = (more, page.last()) {
            answer["nextCursor"] = Value::String(NextCursor::after(last).encode());
        }
        Ok(answer)
    }

    /// `tasks/result`: waits until the task ends, then answers what the
    /// `tools/call` would have: its `CallToolResult` or its JSON-RPC error.
    /// While the task is `input_required`, its questions go to the client
    /// as `elicitation/create` tied to the task, once per question, and the
    /// answers go to [`Tasks::answer`](crate::engine::Tasks::answer),
    /// as `tasks/update` does.
    async fn task_result(
        &self,
        id: TaskId,
        cx: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let owner = self.owner(cx);
        let watch = self.tasks.watch(&owner, vec![id.clone()]);
        let mut follower = TaskFollower::new(&id, watch, cx);
        let mut asked: Vec<String> = Vec::new();
        let mut seen: Option<(TaskPhase, Option<String>)> = None;
        loop {
            let turn = follower.next().await?;
            let (Turn::Ended(record)
            | Turn::NeedsInput(record)
            | Turn::Working(record)
            | Turn::OutOfTime(record)) = &turn;
            let now = (record.status, record.status_message.clone());
            if seen.as_ref().is_some_and(|before| *before != now) {
                self.notify_status(cx, record).await;
            }
            seen = Some(now);
            match turn {
                Turn::Ended(record) => return ended_result(&record),
                Turn::NeedsInput(record) => {
                    let requests = render::input_requests(&record)?;
                    let fresh: Vec<_> = requests
                        .iter()
                        .filter(|(key, _)| !asked.contains(key))
                        .collect();
                    let caps = cx.client_capabilities().unwrap_or_default();
                    if !fresh.is_empty() {
                        let mut responses = InputResponses::new();
                        for (key, request) in fresh {
                            // Each question once; one the client cannot be
                            // asked waits for `tasks/update` (or task_answer).
                            asked.push(key.clone());
                            let answer = match request {
                                InputRequest::Elicitation(elicit) if caps.elicitation.is_some() => {
                                    let mut params = elicit.params.clone();
                                    tie_to_task(&mut params, &id);
                                    to_value(&cx.peer.create_elicitation(params).await.map_err(
                                        |e| {
                                            GatewayError::Internal(format!(
                                                "elicitation `{key}` failed: {e}"
                                            ))
                                        },
                                    )?)?
                                }
                                #[allow(deprecated)]
                                InputRequest::CreateMessage(sample) if caps.sampling.is_some() => {
                                    let mut params = sample.params.clone();
                                    params
                                        .meta
                                        .get_or_insert_with(|| {
                                            RequestMetaObject::from(JsonObject::new())
                                        })
                                        .insert(
                                            RELATED_TASK.into(),
                                            json!({ "taskId": id.as_str() }),
                                        );
                                    to_value(&cx.peer.create_message(params).await.map_err(
                                        |e| {
                                            GatewayError::Internal(format!(
                                                "sampling `{key}` failed: {e}"
                                            ))
                                        },
                                    )?)?
                                }
                                _ => continue,
                            };
                            responses.insert(key.clone(), answer);
                        }
                        if !responses.is_empty() {
                            self.check_input_size(&responses)?;
                            self.tasks.answer(&owner, &id, responses).await?;
                            follower.read_again();
                        }
                    }
                }
                // No deadline was set: a `tasks/result` waits as long as the task lives.
                Turn::Working(_) | Turn::OutOfTime(_) => {}
            }
        }
    }
}

/// What `tasks/result` answers for a task that ended: the stored
/// `CallToolResult` as it was given (nothing in it dropped), or the task's
/// JSON-RPC error, tied to the task by `_meta`.
fn ended_result(record: &TaskRecord) -> Result<Value, ErrorData> {
    let related = json!({ "taskId": record.id.as_str() });
    let mut result = match record.status {
        TaskPhase::Failed => return Err(render::task_error(record.error.as_ref())),
        TaskPhase::Cancelled => json!({
            "content": [{"type": "text", "text": render::cancelled_text(&record.id)}],
            "isError": true,
        }),
        _ => record.result.clone().unwrap_or_else(|| json!({})),
    };
    if let Some(object) = result.as_object_mut() {
        let meta = object.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RELATED_TASK.into(), related);
        }
    }
    Ok(result)
}

/// Marks an elicitation sent during `tasks/result` as the task's
/// (`_meta["io.modelcontextprotocol/related-task"]`), as 2025-11-25 requires
/// of every message a task causes.
fn tie_to_task(params: &mut ElicitRequestParams, id: &TaskId) {
    let meta = match params {
        ElicitRequestParams::FormElicitationParams { meta, .. }
        | ElicitRequestParams::UrlElicitationParams { meta, .. } => meta,
        _ => return,
    };
    meta.get_or_insert_with(|| RequestMetaObject::from(JsonObject::new()))
        .insert(RELATED_TASK.into(), json!({ "taskId": id.as_str() }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_cursor_round_trips_and_a_made_up_one_is_invalid_params() {
        let cursor = NextCursor(crate::store::ListCursor {
            created_at: agentgate_backend::Millis::from_unix_ms(1_800_000_000_123),
            id: TaskId::from_client("a.b-c_d"),
        });
        let back = NextCursor::decode(&cursor.encode()).expect("decodes");
        assert_eq!(back.0, cursor.0);
        for bad in ["", "!!", "bm9kb3Q", "MTIzLg"] {
            let error = NextCursor::decode(bad).err().expect("refused");
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{bad}");
            assert!(error.message.contains("nextCursor"), "{}", error.message);
        }
    }

    #[test]
    fn tasks_list_is_routed_and_declared_on_2025_11_25_only() {
        let list = Bytes::from(
            json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/list", "params": {}}).to_string(),
        );
        assert!(rewritten(route(&headers(VERSION), Some("tasks/list"), &list)).is_some());
        assert!(rewritten(route(&HeaderMap::new(), Some("tasks/list"), &list)).is_none());
        let mut answer = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": VERSION, "capabilities": {}}});
        patch_initialize(&mut answer);
        assert_eq!(answer["result"]["capabilities"]["tasks"]["list"], json!({}));
    }

    fn headers(version: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            "mcp-protocol-version",
            http::HeaderValue::from_str(version).expect("header"),
        );
        headers
    }

    fn rewritten(route: Route) -> Option<Value> {
        match route {
            Route::Rewrite(bytes) => serde_json::from_slice(&bytes).ok(),
            _ => None,
        }
    }

    #[test]
    fn only_2025_11_25_task_requests_are_renamed() {
        let call = Bytes::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "t", "task": {"ttl": 1000}}})
            .to_string(),
        );
        let renamed = rewritten(route(&headers(VERSION), Some("tools/call"), &call));
        assert_eq!(
            renamed.as_ref().and_then(|m| m["method"].as_str()),
            Some("io.agentgate/2025-11-25/tools/call")
        );
        assert!(rewritten(route(&headers("2026-07-28"), Some("tools/call"), &call)).is_none());
        let plain = Bytes::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}})
                .to_string(),
        );
        assert!(rewritten(route(&headers(VERSION), Some("tools/call"), &plain)).is_none());
        let get = Bytes::from(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "x"}})
                .to_string(),
        );
        assert!(rewritten(route(&headers(VERSION), Some("tasks/get"), &get)).is_some());
        assert!(rewritten(route(&HeaderMap::new(), Some("tasks/get"), &get)).is_none());
        // A client cannot send the renamed form itself (it would skip the
        // scope checks made on the original method), at any version.
        let forged = Bytes::from(
            json!({"jsonrpc": "2.0", "id": 3, "method": "io.agentgate/2025-11-25/tools/call",
                   "params": {"name": "t", "task": {}}})
            .to_string(),
        );
        for headers in [headers(VERSION), HeaderMap::new()] {
            let renamed = rewritten(route(
                &headers,
                Some("io.agentgate/2025-11-25/tools/call"),
                &forged,
            ));
            assert_eq!(
                renamed.as_ref().and_then(|m| m["method"].as_str()),
                Some("io.agentgate/reserved/io.agentgate/2025-11-25/tools/call")
            );
        }
    }

    #[test]
    fn initialize_at_2025_11_25_declares_tasks_and_other_versions_do_not() {
        let mut answer = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": VERSION, "capabilities": {"tools": {}}}});
        patch_initialize(&mut answer);
        assert_eq!(
            answer["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
        let mut older = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}});
        patch_initialize(&mut older);
        assert!(older["result"]["capabilities"].get("tasks").is_none());
    }

    #[test]
    fn stdio_follows_the_version_initialize_was_answered_at() {
        for (version, served) in [(VERSION, true), ("2025-06-18", false)] {
            let mut wire = StdioWire::new(true);
            let mut init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                  "params": {"protocolVersion": version}});
            assert!(!wire.inbound(&mut init));
            let mut answer = json!({"jsonrpc": "2.0", "id": 0, "result": {
                "protocolVersion": version, "capabilities": {}}});
            assert!(wire.outbound(&mut answer));
            assert_eq!(
                answer["result"]["capabilities"].get("tasks").is_some(),
                served,
                "{version}"
            );
            let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": "t", "task": {}}});
            assert_eq!(wire.inbound(&mut call), served, "{version}");
            let mut get = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
                                 "params": {"taskId": "x"}});
            assert_eq!(wire.inbound(&mut get), served, "{version}");
            if served {
                assert_eq!(get["method"], "io.agentgate/2025-11-25/tasks/get");
            }
        }
        // Not a gateway: nothing changes.
        let mut wire = StdioWire::new(false);
        let mut init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize"});
        assert!(!wire.inbound(&mut init));
    }

    #[test]
    fn an_sse_response_is_patched_across_chunks() {
        let mut patcher = FirstEventPatch::new(|event: &[u8]| patch_event(event, patch_tools_list));
        let event = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"q\"},{\"name\":\"task_status\"}]}}\n\n";
        let (a, b) = event.split_at(30);
        let mut out = patcher.feed(Bytes::from(a.to_owned())).to_vec();
        out.extend_from_slice(&patcher.feed(Bytes::from(b.to_owned())));
        let text = String::from_utf8(out).expect("utf-8");
        let data = text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .expect("data line");
        let message: Value = serde_json::from_str(data).expect("json");
        assert_eq!(
            message["result"]["tools"][0]["execution"]["taskSupport"],
            "optional"
        );
        assert_eq!(
            message["result"]["tools"][1]["execution"]["taskSupport"],
            "forbidden"
        );
    }
}
