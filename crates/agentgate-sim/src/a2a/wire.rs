//! The A2A v1.0 data model in its ProtoJSON form (`contracts/a2a/a2a.proto`, package
//! `lf.a2a.v1`): camelCase field names, enums as their proto names, `bytes` as base64,
//! timestamps as RFC 3339 UTC strings with milliseconds.
//!
//! The same structs are read from requests and written into answers. Reading refuses
//! unknown fields (ProtoJSON parsers do by default) and accepts camelCase names only,
//! the form the specification (§5.5) requires of JSON bindings. Writing omits empty
//! repeated fields and unset optional ones, as ProtoJSON printers do.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `lf.a2a.v1.TaskState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::enum_variant_names)]
pub(super) enum TaskState {
    /// `TASK_STATE_UNSPECIFIED`: never written by the emulator; accepted as "no filter".
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    /// `TASK_STATE_SUBMITTED`.
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    /// `TASK_STATE_WORKING`.
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    /// `TASK_STATE_COMPLETED`.
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    /// `TASK_STATE_FAILED`.
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    /// `TASK_STATE_CANCELED`.
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    /// `TASK_STATE_INPUT_REQUIRED`.
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    /// `TASK_STATE_REJECTED`.
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    /// `TASK_STATE_AUTH_REQUIRED`.
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    /// Completed, failed, canceled or rejected: the task takes no more messages.
    pub(super) fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Rejected
        )
    }

    /// Input or auth required: the agent waits for the client (§3.2.2 "interrupted").
    pub(super) fn is_interrupted(self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }
}

/// `lf.a2a.v1.Role`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Role {
    /// `ROLE_UNSPECIFIED`: refused in requests.
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    /// `ROLE_USER`: the client.
    #[serde(rename = "ROLE_USER")]
    User,
    /// `ROLE_AGENT`: the emulated agent.
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

/// `lf.a2a.v1.Part`: exactly one of `text`, `raw`, `url`, `data` (checked by
/// [`Part::content_count`], serde cannot express a flattened oneof with unknown-field
/// refusal).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Part {
    /// Plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// File bytes, standard base64 (ProtoJSON `bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// A file by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Structured data (`google.protobuf.Value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// `google.protobuf.Struct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// File name of `raw` or `url` content.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub filename: String,
    /// Media type of the content.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub media_type: String,
}

impl Part {
    /// A text part.
    pub(super) fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// How many of the oneof members are set (a valid part has exactly one).
    pub(super) fn content_count(&self) -> usize {
        usize::from(self.text.is_some())
            + usize::from(self.raw.is_some())
            + usize::from(self.url.is_some())
            + usize::from(self.data.is_some())
    }
}

/// `lf.a2a.v1.Message`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Message {
    /// Client- or agent-chosen id; the emulator's idempotency key (see `agents`).
    pub message_id: String,
    /// The conversation.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context_id: String,
    /// The task this message continues, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    /// Who wrote it.
    pub role: Role,
    /// The content, at least one part.
    pub parts: Vec<Part>,
    /// `google.protobuf.Struct`; `skill` here selects a scripted agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Extension URIs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// Tasks this message refers to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// An agent message in a task.
    pub(super) fn agent(task_id: &str, context_id: &str, text: impl Into<String>) -> Self {
        Self {
            message_id: super::ids::new_id(),
            context_id: context_id.to_owned(),
            task_id: task_id.to_owned(),
            role: Role::Agent,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    /// The text parts, joined by newlines.
    pub(super) fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| p.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `lf.a2a.v1.TaskStatus`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// What the agent says about it (the question for INPUT_REQUIRED, the sign-in URL
    /// for AUTH_REQUIRED, progress for WORKING).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// When the state was entered (RFC 3339, UTC, milliseconds).
    pub timestamp: String,
}

/// `lf.a2a.v1.Artifact`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Artifact {
    /// Unique within the task.
    pub artifact_id: String,
    /// Human-readable name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// What it is.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The content.
    pub parts: Vec<Part>,
}

/// `lf.a2a.v1.Task`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Task {
    /// Server-generated id.
    pub id: String,
    /// The conversation.
    pub context_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// Outputs so far.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// The messages of the task, oldest first: the user's, and the agent's earlier
    /// status messages.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
}

impl Task {
    /// A copy with at most the `history_length` newest messages (§3.2.4: unset = all,
    /// 0 = none).
    pub(super) fn with_history(&self, history_length: Option<i32>) -> Self {
        let mut task = self.clone();
        if let Some(n) = history_length {
            let keep = usize::try_from(n.max(0)).unwrap_or(0);
            let skip = task.history.len().saturating_sub(keep);
            task.history.drain(..skip);
        }
        task
    }
}

/// `lf.a2a.v1.TaskStatusUpdateEvent`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TaskStatusUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its context.
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
}

/// `lf.a2a.v1.TaskArtifactUpdateEvent`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TaskArtifactUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its context.
    pub context_id: String,
    /// The whole artifact (the emulator never sends chunks).
    pub artifact: Artifact,
    /// Always true: each artifact is sent whole, in one event.
    pub last_chunk: bool,
}

/// `lf.a2a.v1.StreamResponse` (and, with its first two members, `SendMessageResponse`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum StreamResponse {
    /// A task snapshot.
    Task(Task),
    /// A direct message (no task).
    Message(Message),
    /// A status change.
    StatusUpdate(TaskStatusUpdateEvent),
    /// A new artifact.
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamResponse {
    /// Whether a stream ends after this event: a message, or a status that is terminal
    /// or INPUT_REQUIRED (the turn is over; the client answers with a new message).
    /// AUTH_REQUIRED keeps the stream open: §7.6.1 says the agent SHOULD keep streams
    /// while the credential arrives out of band.
    pub(super) fn closes_stream(&self) -> bool {
        let state = match self {
            Self::Message(_) => return true,
            Self::Task(task) => task.status.state,
            Self::StatusUpdate(update) => update.status.state,
            Self::ArtifactUpdate(_) => return false,
        };
        state.is_terminal() || state == TaskState::InputRequired
    }
}

/// `lf.a2a.v1.SendMessageConfiguration`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SendMessageConfiguration {
    /// Accepted output media types (recorded, not enforced: every scripted agent
    /// answers in text, JSON and a text file).
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub accepted_output_modes: Vec<String>,
    /// Where to push this task's updates (refused with PushNotificationNotSupported
    /// unless the emulator serves push notifications).
    #[serde(default)]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
    /// History in the answered task.
    #[serde(default)]
    pub history_length: Option<i32>,
    /// Non-blocking send.
    #[serde(default)]
    pub return_immediately: bool,
}

/// `lf.a2a.v1.SendMessageRequest`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SendMessageRequest {
    /// Ignored: the emulator serves one tenant (its card declares none).
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub tenant: String,
    /// The message.
    pub message: Message,
    /// Options.
    #[serde(default)]
    pub configuration: Option<SendMessageConfiguration>,
    /// Request metadata; `skill` here selects a scripted agent too.
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// `lf.a2a.v1.GetTaskRequest`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct GetTaskRequest {
    /// Ignored (one tenant).
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub tenant: String,
    /// The task id.
    pub id: String,
    /// History to include.
    #[serde(default)]
    pub history_length: Option<i32>,
}

/// `lf.a2a.v1.CancelTaskRequest`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CancelTaskRequest {
    /// Ignored (one tenant).
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub tenant: String,
    /// The task id.
    pub id: String,
    /// Recorded nowhere.
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub metadata: Option<Map<String, Value>>,
}

/// `lf.a2a.v1.SubscribeToTaskRequest`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SubscribeToTaskRequest {
    /// Ignored (one tenant).
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub tenant: String,
    /// The task id.
    pub id: String,
}

/// `lf.a2a.v1.ListTasksRequest`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListTasksRequest {
    /// Ignored (one tenant).
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub tenant: String,
    /// Only tasks of this context.
    #[serde(default)]
    pub context_id: String,
    /// Only tasks in this state.
    #[serde(default)]
    pub status: Option<TaskState>,
    /// 1..=100, default 50.
    #[serde(default)]
    pub page_size: Option<i32>,
    /// The previous answer's `nextPageToken`.
    #[serde(default)]
    pub page_token: String,
    /// History per task.
    #[serde(default)]
    pub history_length: Option<i32>,
    /// Only tasks whose status changed at or after this time (RFC 3339).
    #[serde(default)]
    pub status_timestamp_after: Option<String>,
    /// Include artifacts (default: omitted, §3.1.4).
    #[serde(default)]
    pub include_artifacts: Option<bool>,
}

/// `lf.a2a.v1.AuthenticationInfo`: what the agent puts in a webhook request's
/// `Authorization` header (`{scheme} {credentials}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AuthenticationInfo {
    /// An HTTP authentication scheme, e.g. `Bearer` (REQUIRED).
    pub scheme: String,
    /// The credentials for that scheme.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub credentials: String,
}

/// `lf.a2a.v1.TaskPushNotificationConfig`: a webhook for one task's updates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TaskPushNotificationConfig {
    /// Ignored (one tenant).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The config's id (the emulator assigns one when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The task it belongs to (empty inside a SendMessage that creates the task).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    /// Where notifications are POSTed (REQUIRED).
    pub url: String,
    /// A token for this task or session, sent as `X-A2A-Notification-Token` (the
    /// official Python SDK's header for it; the specification names none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// The `Authorization` header of every notification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// `lf.a2a.v1.GetTaskPushNotificationConfigRequest` and
/// `DeleteTaskPushNotificationConfigRequest`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PushConfigIdRequest {
    /// Ignored (one tenant).
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub tenant: String,
    /// The task.
    pub task_id: String,
    /// The config.
    pub id: String,
}

/// `lf.a2a.v1.ListTaskPushNotificationConfigsRequest`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListPushConfigsRequest {
    /// Ignored (one tenant).
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub tenant: String,
    /// The task.
    pub task_id: String,
    /// Ignored: a task has few configs, all on one page.
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub page_size: i32,
    /// Ignored (one page).
    #[serde(default)]
    #[allow(dead_code)] // read so that an ignored field is not an unknown one
    pub page_token: String,
}

/// `lf.a2a.v1.ListTaskPushNotificationConfigsResponse`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListPushConfigsResponse {
    /// Every config of the task.
    pub configs: Vec<TaskPushNotificationConfig>,
    /// Always empty: one page.
    pub next_page_token: String,
}

/// `lf.a2a.v1.ListTasksResponse`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListTasksResponse {
    /// The page, newest status first.
    pub tasks: Vec<Task>,
    /// Always present; empty on the last page (§3.1.4).
    pub next_page_token: String,
    /// The page size used.
    pub page_size: i32,
    /// Tasks matching the filter, all pages.
    pub total_size: i32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(state: TaskState) -> TaskStatus {
        TaskStatus {
            state,
            message: None,
            timestamp: "2025-10-28T10:30:00.000Z".into(),
        }
    }

    #[test]
    fn stream_responses_are_oneof_objects_with_camel_case_members() {
        let update = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: status(TaskState::InputRequired),
        });
        assert_eq!(
            serde_json::to_value(&update).expect("JSON"),
            json!({ "statusUpdate": { "taskId": "t", "contextId": "c",
                "status": { "state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2025-10-28T10:30:00.000Z" } } })
        );
        assert!(update.closes_stream());
        let auth = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: status(TaskState::AuthRequired),
        });
        assert!(!auth.closes_stream());
    }

    #[test]
    fn requests_refuse_unknown_fields_and_lowercase_enums() {
        let ok: Result<Message, _> = serde_json::from_value(
            json!({ "messageId": "m", "role": "ROLE_USER", "parts": [{ "text": "hi" }] }),
        );
        assert!(ok.is_ok());
        let unknown: Result<Message, _> = serde_json::from_value(
            json!({ "messageId": "m", "role": "ROLE_USER", "parts": [], "kind": "message" }),
        );
        assert!(unknown.is_err());
        let lowercase: Result<Message, _> =
            serde_json::from_value(json!({ "messageId": "m", "role": "user", "parts": [] }));
        assert!(lowercase.is_err());
    }

    #[test]
    fn history_length_keeps_the_newest_messages() {
        let message = |id: &str| Message {
            message_id: id.into(),
            context_id: String::new(),
            task_id: String::new(),
            role: Role::User,
            parts: vec![Part::text(id)],
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        };
        let task = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: status(TaskState::Working),
            artifacts: Vec::new(),
            history: vec![message("a"), message("b"), message("c")],
        };
        assert_eq!(task.with_history(None).history.len(), 3);
        assert!(task.with_history(Some(0)).history.is_empty());
        let last = task.with_history(Some(2));
        assert_eq!(last.history[0].message_id, "b");
        assert_eq!(last.history[1].message_id, "c");
    }
}
