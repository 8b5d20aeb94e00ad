//! Task status push: `subscriptions/listen` with `taskIds` delivers
//! `notifications/tasks` (the full task, as `tasks/get` returns it) whenever
//! a listened task changes, on whichever instance the change happened.
//!
//! rmcp 3.11 serves `subscriptions/listen` (validation, the acknowledgement,
//! the stream's lifetime) but its `SubscriptionFilter` has no `taskIds`: the
//! field is dropped when the request is parsed. So the pieces meet at the
//! HTTP layer:
//!
//! ```text
//! POST /mcp {method: subscriptions/listen, params.notifications.taskIds}
//!   inspect (axum layer, before rmcp):
//!     bad taskIds ──────────────────────────────▶ -32602, names the field
//!     no tasks extension declared ──────────────▶ -32021 (HTTP 400)
//!     else: ListenTaskIds into the request's extensions, forward to rmcp
//!   rmcp: validates headers, sends the acknowledgement, calls
//!     Gateway::listen ─▶ push_task_status: the current state of each task,
//!       then one notification per visible change, until the client leaves
//!   response body: the acknowledgement gets `taskIds` added (rmcp cannot
//!     name them), every other byte passes through
//! ```
//!
//! Changes reach the stream through [`Engine::subscribe`]: steps saved here,
//! and on PostgreSQL every other instance's saves, answers and cancels
//! (LISTEN/NOTIFY). Only the caller's own tasks are reported, so an id of
//! somebody else's task behaves like an unknown one: it never produces a
//! notification. Over stdio the stdio guard ([`super::transport::stdio`]) plays the
//! HTTP layer's part: it inspects the line the same way, files the ids in
//! [`stdio_listens`] under the request's id (one stdio client per process),
//! and adds them to the acknowledgement on its way out.
//!
//! [`Engine::subscribe`]: crate::engine::Engine::subscribe

use std::collections::HashMap;

use agentgate_backend::TaskId;
use axum::body::Body;
use axum::http::StatusCode;
use futures::StreamExt as _;
use rmcp::model::{
    ErrorData, GetMeta as _, Notification, ServerNotification, TaskStatusNotificationParams,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;

use super::error::{invalid_field, tasks_extension_required};
use super::gateway::Gateway;
use super::render;
use super::transport::sse_patch::FirstEventPatch;
use crate::engine::{Changed, TaskError, TaskWatch};

/// The `taskIds` of stdio listen requests, by the JSON text of their
/// request id: filed by the stdio guard, read by [`Gateway::push_task_status`]
/// (which forgets them when the stream ends) and by the guard to complete
/// the acknowledgement. A process serves at most one stdio client.
pub(crate) fn stdio_listens() -> std::sync::MutexGuard<'static, HashMap<String, ListenTaskIds>> {
    static LISTENS: std::sync::LazyLock<std::sync::Mutex<HashMap<String, ListenTaskIds>>> =
        std::sync::LazyLock::new(Default::default);
    LISTENS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Adds a stdio listen's `taskIds` to its acknowledgement (`message`, one
/// JSON-RPC message); returns whether it did.
pub(crate) fn acknowledge_stdio(message: &mut Value) -> bool {
    if message.get("method").and_then(Value::as_str) != Some(ACKNOWLEDGED) {
        return false;
    }
    let Some(subscription) = message
        .pointer("/params/_meta/io.modelcontextprotocol~1subscriptionId")
        .map(Value::to_string)
    else {
        return false;
    };
    let Some(ids) = stdio_listens().get(&subscription).cloned() else {
        return false;
    };
    match message
        .pointer_mut("/params/notifications")
        .and_then(Value::as_object_mut)
    {
        Some(filter) => {
            filter.insert("taskIds".to_owned(), Value::from(ids.0));
            true
        }
        None => false,
    }
}

/// Most task ids one listen request may name.
pub const MAX_LISTEN_TASK_IDS: usize = 1000;

const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// The `taskIds` of a `subscriptions/listen` request, carried from the HTTP
/// layer to [`Gateway::push_task_status`] in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenTaskIds(pub Vec<String>);

/// What the HTTP layer does with a request body.
#[derive(Debug, PartialEq)]
pub(crate) enum Inspection {
    /// Not a task listen: rmcp handles it as it is.
    PassThrough,
    /// A task listen to forward, with its ids attached.
    Listen(ListenTaskIds),
    /// Refused before rmcp sees it: the HTTP status and JSON-RPC error body.
    Refuse(StatusCode, Value),
}

/// Looks at a `subscriptions/listen` request (`request`, already parsed) for
/// `params.notifications.taskIds`.
pub(crate) fn inspect(request: &Value) -> Inspection {
    let Some(ids) = request.pointer("/params/notifications/taskIds") else {
        return Inspection::PassThrough;
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let invalid = |message: String| {
        let error = invalid_field("params.notifications.taskIds", message, None);
        Inspection::Refuse(StatusCode::OK, error_body(id.clone(), error))
    };
    let Some(list) = ids.as_array() else {
        return invalid(
            "`params.notifications.taskIds` must be an array of task id strings".to_owned(),
        );
    };
    if list.len() > MAX_LISTEN_TASK_IDS {
        return invalid(format!(
            "`params.notifications.taskIds` names {} tasks; at most {MAX_LISTEN_TASK_IDS} \
             per listen request, so split them over several streams",
            list.len()
        ));
    }
    let mut task_ids = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        match item.as_str() {
            Some(s) => task_ids.push(s.to_owned()),
            None => {
                return invalid(format!(
                    "`params.notifications.taskIds[{i}]` must be a task id string, got {item}"
                ));
            }
        }
    }
    let declares_tasks = request
        .pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities/extensions")
        .and_then(|extensions| extensions.get(TASKS_EXTENSION))
        .is_some();
    if !declares_tasks {
        let error = tasks_extension_required(Some(format!(
            "`taskIds` in subscriptions/listen needs the {TASKS_EXTENSION} extension: declare \
             it in _meta.io.modelcontextprotocol/clientCapabilities.extensions"
        )));
        // rmcp answers -32021 with 400 on the modern path; so do we.
        return Inspection::Refuse(StatusCode::BAD_REQUEST, error_body(id, error));
    }
    Inspection::Listen(ListenTaskIds(task_ids))
}

fn error_body(id: Value, error: ErrorData) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

/// Adds `taskIds` to the acknowledgement on a listen response's SSE stream;
/// every other byte passes through unchanged. A response that is not an
/// event stream (an error) is returned as it is.
pub(crate) fn acknowledge_task_ids(
    response: axum::response::Response,
    ids: ListenTaskIds,
) -> axum::response::Response {
    let is_stream = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_stream {
        return response;
    }
    let (parts, body) = response.into_parts();
    let ids = ids.0;
    let mut patcher = FirstEventPatch::new(move |event: &[u8]| patch_event(event, &ids));
    let stream = body
        .into_data_stream()
        .map(move |chunk| chunk.map(|bytes| patcher.feed(bytes)));
    axum::response::Response::from_parts(parts, Body::from_stream(stream))
}

/// The event with `taskIds` added, if it is the acknowledgement.
fn patch_event(event: &[u8], ids: &[String]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(event).ok()?;
    let mut out = String::with_capacity(text.len() + 64);
    let mut patched = false;
    for line in text.split_inclusive('\n') {
        let data = line
            .strip_prefix("data:")
            .map(|d| d.trim_start_matches(' ').trim_end_matches('\n'));
        if let Some(data) = data
            && let Ok(mut message) = serde_json::from_str::<Value>(data)
            && message.get("method").and_then(Value::as_str) == Some(ACKNOWLEDGED)
            && let Some(filter) = message
                .pointer_mut("/params/notifications")
                .and_then(Value::as_object_mut)
        {
            filter.insert("taskIds".to_owned(), Value::from(ids.to_vec()));
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

/// The key a stdio listen's ids are filed under: its request id as JSON.
fn stdio_key(request: &RequestContext<RoleServer>) -> String {
    serde_json::to_value(&request.id)
        .map(|v| v.to_string())
        .unwrap_or_default()
}

impl Gateway {
    /// The task ids this `subscriptions/listen` request names, as the HTTP
    /// layer or the stdio guard found them; `None` when it names none.
    pub(crate) fn listen_task_ids(
        &self,
        request: &RequestContext<RoleServer>,
    ) -> Option<ListenTaskIds> {
        let from_http = request
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<ListenTaskIds>())
            .cloned();
        match from_http {
            Some(ids) => Some(ids),
            None if matches!(self.transport(), super::TransportKind::Stdio(_)) => {
                stdio_listens().get(&stdio_key(request)).cloned()
            }
            None => None,
        }
    }

    /// Streams `notifications/tasks` for the task ids the HTTP layer found in
    /// this `subscriptions/listen` request: first each task's current state,
    /// then every change, until the request is cancelled (the client went
    /// away, or the server is shutting down). Returns at once when the
    /// request named no task ids.
    pub async fn push_task_status(&self, request: RequestContext<RoleServer>) {
        let stdio_key = stdio_key(&request);
        let Some(ids) = self.listen_task_ids(&request) else {
            return;
        };
        // A stdio listen's ids are forgotten when its stream ends.
        struct Forget(Option<String>);
        impl Drop for Forget {
            fn drop(&mut self) {
                if let Some(key) = self.0.take() {
                    stdio_listens().remove(&key);
                }
            }
        }
        let _forget =
            Forget(matches!(self.transport(), super::TransportKind::Stdio(_)).then_some(stdio_key));
        let owner = self.owner(&request);
        let ids: Vec<TaskId> = ids.0.into_iter().map(TaskId::from_client).collect();
        let mut watch = self.tasks.watch(&owner, ids.clone());
        let mut sent: HashMap<TaskId, Value> = HashMap::new();
        for id in &ids {
            if !self.send_if_changed(&request, &watch, id, &mut sent).await {
                return;
            }
        }
        loop {
            let changed = tokio::select! {
                () = request.ct.cancelled() => return,
                changed = watch.next_change() => changed,
            };
            let to_check: Vec<TaskId> = match changed {
                Changed::Task(id) => vec![id],
                // Missed some changes: look at every listened task again.
                Changed::Any => ids.clone(),
            };
            for id in &to_check {
                if !self.send_if_changed(&request, &watch, id, &mut sent).await {
                    return;
                }
            }
        }
    }

    /// Sends the task's state unless it is what this stream last sent.
    /// Returns false once the stream is gone.
    async fn send_if_changed(
        &self,
        request: &RequestContext<RoleServer>,
        watch: &TaskWatch,
        id: &TaskId,
        sent: &mut HashMap<TaskId, Value>,
    ) -> bool {
        let now = self.tasks.now();
        let record = match watch.read(id).await {
            Ok(record) => record,
            // Unknown, expired or another principal's: nothing to say.
            Err(TaskError::UnknownTask) => return true,
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "task status push: store read failed");
                return true;
            }
        };
        let detailed = match render::to_detailed_task(&record, &self.tasks.tools(), now) {
            Ok(detailed) => detailed,
            Err(e) => {
                tracing::warn!(task = %id, error = %e.message, "task status push: unreadable task");
                return true;
            }
        };
        // The poll interval moves with the task's age; it alone is no news.
        let mut fingerprint = serde_json::to_value(&detailed).unwrap_or(Value::Null);
        if let Some(map) = fingerprint.as_object_mut() {
            map.remove("pollIntervalMs");
        }
        if sent.get(id) == Some(&fingerprint) {
            return true;
        }
        let mut notification = ServerNotification::TaskStatusNotification(Notification::new(
            TaskStatusNotificationParams::new(detailed),
        ));
        notification
            .get_meta_mut()
            .set_subscription_id(request.id.clone());
        if let Err(e) = request.peer.send_notification(notification).await {
            tracing::debug!(task = %id, error = %e, "task status push: stream closed");
            return false;
        }
        sent.insert(id.clone(), fingerprint);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
    use serde_json::json;

    fn listen(notifications: Value, with_tasks: bool) -> Value {
        let extensions = if with_tasks {
            json!({ TASKS_EXTENSION: {} })
        } else {
            json!({})
        };
        json!({
            "jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {
                "notifications": notifications,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": { "extensions": extensions }
                }
            }
        })
    }

    #[test]
    fn a_listen_without_task_ids_is_left_to_rmcp() {
        let request = listen(json!({ "toolsListChanged": true }), false);
        assert_eq!(inspect(&request), Inspection::PassThrough);
    }

    #[test]
    fn task_ids_are_carried_to_the_handler() {
        let request = listen(json!({ "taskIds": ["a", "b"] }), true);
        assert_eq!(
            inspect(&request),
            Inspection::Listen(ListenTaskIds(vec!["a".into(), "b".into()]))
        );
    }

    #[test]
    fn task_ids_without_the_tasks_extension_get_32021() {
        let request = listen(json!({ "taskIds": ["a"] }), false);
        let Inspection::Refuse(status, body) = inspect(&request) else {
            panic!("expected a refusal");
        };
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["id"], 7);
        assert_eq!(body["error"]["code"], -32021);
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(TASKS_EXTENSION), "{message}");
    }

    #[test]
    fn malformed_task_ids_name_the_field() {
        for (ids, field) in [
            (json!("abc"), "`params.notifications.taskIds`"),
            (json!(["ok", 3]), "`params.notifications.taskIds[1]`"),
        ] {
            let Inspection::Refuse(status, body) =
                inspect(&listen(json!({ "taskIds": ids }), true))
            else {
                panic!("expected a refusal");
            };
            assert_eq!(status, StatusCode::OK);
            assert_eq!(body["error"]["code"], -32602);
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(field), "{message}");
        }
        let many: Vec<String> = (0..=MAX_LISTEN_TASK_IDS).map(|i| i.to_string()).collect();
        let Inspection::Refuse(_, body) = inspect(&listen(json!({ "taskIds": many }), true)) else {
            panic!("expected a refusal");
        };
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("at most"))
        );
    }

    #[test]
    fn the_acknowledgement_gets_the_task_ids_even_split_across_chunks() {
        let ack = json!({
            "jsonrpc": "2.0", "method": ACKNOWLEDGED,
            "params": { "notifications": {}, "_meta": { "io.modelcontextprotocol/subscriptionId": 7 } }
        });
        let stream = format!("data:\nretry: 3000\n\ndata: {ack}\n\ndata: {{\"later\":1}}\n\n");
        let bytes = stream.as_bytes();
        let ids = vec!["t1".to_owned()];
        let mut patcher = FirstEventPatch::new(|event: &[u8]| patch_event(event, &ids));
        let mut out = Vec::new();
        for chunk in bytes.chunks(17) {
            out.extend_from_slice(&patcher.feed(Bytes::copy_from_slice(chunk)));
        }
        let out = String::from_utf8(out).unwrap_or_default();
        let events: Vec<&str> = out.split("\n\n").filter(|e| !e.is_empty()).collect();
        assert_eq!(events.len(), 3, "{out}");
        assert_eq!(events[0], "data:\nretry: 3000");
        let data = events[1].strip_prefix("data: ").unwrap_or_default();
        let patched: Value = serde_json::from_str(data).unwrap_or_default();
        assert_eq!(patched["params"]["notifications"]["taskIds"], json!(["t1"]));
        assert_eq!(
            patched["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            7
        );
        assert_eq!(events[2], "data: {\"later\":1}");
    }
}
