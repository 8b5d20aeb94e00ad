//! The A2A v1.0 types this backend sends and reads, in their ProtoJSON form
//! (`contracts/a2a/a2a.proto`, package `lf.a2a.v1`: camelCase names, enums
//! by their proto names, `bytes` as base64).
//!
//! Requests are written strictly (only fields the proto has, empty ones
//! left out, as ProtoJSON printers do); the tests check them against the
//! vendored proto. Answers are read leniently (unknown fields ignored, every
//! field optional) since agents add fields across minor versions; the raw
//! JSON of a task is kept beside the parsed view so nothing is lost.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `lf.a2a.v1.Part`, as sent (text or data only).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OutPart {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub media_type: String,
}

impl OutPart {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            data: None,
            media_type: String::new(),
        }
    }

    pub fn data(data: Value) -> Self {
        Self {
            text: None,
            data: Some(data),
            media_type: "application/json".into(),
        }
    }
}

/// `lf.a2a.v1.Message`, as sent: always `ROLE_USER`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OutMessage {
    pub message_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub context_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    pub role: &'static str,
    pub parts: Vec<OutPart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl OutMessage {
    pub fn user(message_id: String, parts: Vec<OutPart>) -> Self {
        Self {
            message_id,
            context_id: String::new(),
            task_id: String::new(),
            role: "ROLE_USER",
            parts,
            metadata: None,
        }
    }
}

/// `lf.a2a.v1.SendMessageConfiguration`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SendConfiguration {
    pub return_immediately: bool,
    /// Where the agent pushes the new task's updates (its `taskId` left empty,
    /// as the proto says for SendMessage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_push_notification_config: Option<PushConfig>,
}

/// `lf.a2a.v1.AuthenticationInfo`: the `Authorization` header the agent puts
/// on each notification.
#[derive(Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    pub scheme: String,
    pub credentials: String,
}

impl std::fmt::Debug for AuthenticationInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthenticationInfo")
            .field("scheme", &self.scheme)
            .field("credentials", &"<redacted>")
            .finish()
    }
}

/// `lf.a2a.v1.TaskPushNotificationConfig`, as sent in a SendMessage.
#[derive(Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PushConfig {
    pub url: String,
    /// The same secret as `authentication`: some agents (the official Python
    /// SDK) send it as `X-A2A-Notification-Token`.
    pub token: String,
    pub authentication: AuthenticationInfo,
}

impl std::fmt::Debug for PushConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConfig")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .field("authentication", &self.authentication)
            .finish()
    }
}

/// `lf.a2a.v1.ListTasksRequest` (the filters this backend uses).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    pub context_id: String,
    pub page_size: i32,
    /// Unset: the agent's default history (all of it, usually): a user's
    /// message is looked for there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
}

/// `lf.a2a.v1.SendMessageRequest`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    pub message: OutMessage,
    pub configuration: SendConfiguration,
}

/// `lf.a2a.v1.GetTaskRequest` and `lf.a2a.v1.CancelTaskRequest` (both take
/// the task's `id` and nothing else this backend needs).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdRequest {
    pub id: String,
}

/// `lf.a2a.v1.TaskState`, as read.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
pub enum TaskState {
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
    /// `TASK_STATE_UNSPECIFIED`, or a state a later version adds: treated as
    /// still working (polled again), the conservative reading.
    #[default]
    #[serde(other)]
    Unknown,
}

/// `lf.a2a.v1.Part`, as read.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Part {
    pub text: Option<String>,
    /// File bytes, base64.
    pub raw: Option<String>,
    /// A file by reference.
    pub url: Option<String>,
    pub data: Option<Value>,
    pub filename: String,
    pub media_type: String,
}

/// `lf.a2a.v1.Message`, as read.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Message {
    pub message_id: String,
    pub context_id: String,
    pub task_id: String,
    pub role: String,
    pub parts: Vec<Part>,
}

impl Message {
    /// The text parts, joined by newlines.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| p.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `lf.a2a.v1.TaskStatus`, as read.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskStatus {
    pub state: TaskState,
    pub message: Option<Message>,
}

/// `lf.a2a.v1.Artifact`, as read.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Artifact {
    pub artifact_id: String,
    pub name: String,
    pub description: String,
    pub parts: Vec<Part>,
}

/// `lf.a2a.v1.Task`, as read.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    pub artifacts: Vec<Artifact>,
    /// The messages of the task, as much as the agent keeps (§3.7: not
    /// guaranteed to hold every message).
    pub history: Vec<Message>,
}

impl Task {
    /// Whether the history holds the message `message_id`.
    pub fn has_message(&self, message_id: &str) -> bool {
        self.history.iter().any(|m| m.message_id == message_id)
    }
}

/// A task as parsed, with the JSON it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSnapshot {
    pub task: Task,
    pub raw: Value,
}

/// `lf.a2a.v1.SendMessageResponse`: a task, or a direct message.
#[derive(Debug, Clone, PartialEq)]
pub enum SendOutcome {
    Task(TaskSnapshot),
    Message { message: Message, raw: Value },
}

/// `lf.a2a.v1.ListTasksResponse`, as read: the tasks as parsed, with their
/// JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskList {
    pub tasks: Vec<TaskSnapshot>,
}

/// The parts of an Agent Card this backend uses (`lf.a2a.v1.AgentCard`).
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub version: String,
    pub supported_interfaces: Vec<AgentInterface>,
    pub skills: Vec<AgentSkill>,
    pub default_input_modes: Vec<String>,
    pub capabilities: AgentCapabilities,
    pub security_schemes: std::collections::BTreeMap<String, SecurityScheme>,
    pub security_requirements: Vec<SecurityRequirement>,
}

/// `lf.a2a.v1.AgentCapabilities`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCapabilities {
    pub streaming: Option<bool>,
    pub push_notifications: Option<bool>,
}

/// `lf.a2a.v1.SecurityScheme` (the OAuth 2.0 member; the others are only
/// told apart from it).
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct SecurityScheme {
    pub oauth2_security_scheme: Option<OAuth2SecurityScheme>,
}

/// `lf.a2a.v1.OAuth2SecurityScheme`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct OAuth2SecurityScheme {
    pub flows: OAuthFlows,
}

/// `lf.a2a.v1.OAuthFlows` (the client-credentials member).
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct OAuthFlows {
    pub client_credentials: Option<ClientCredentialsFlow>,
}

/// `lf.a2a.v1.ClientCredentialsOAuthFlow`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientCredentialsFlow {
    pub token_url: String,
    pub scopes: std::collections::BTreeMap<String, String>,
}

/// `lf.a2a.v1.SecurityRequirement`: scheme name → the scopes it needs.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct SecurityRequirement {
    pub schemes: std::collections::BTreeMap<String, StringList>,
}

/// `lf.a2a.v1.StringList`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct StringList {
    pub list: Vec<String>,
}

/// `lf.a2a.v1.AgentInterface`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: String,
}

/// `lf.a2a.v1.AgentSkill`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
}

impl AgentCard {
    /// The token URL and scopes of the card's OAuth 2.0 client-credentials
    /// flow: the first such scheme a security requirement names (with the
    /// scopes it names), else any such scheme (no scopes asked for).
    pub fn client_credentials(&self) -> Option<(String, Vec<String>)> {
        let flow = |name: &str| {
            self.security_schemes
                .get(name)
                .and_then(|s| s.oauth2_security_scheme.as_ref())
                .and_then(|s| s.flows.client_credentials.as_ref())
                .filter(|f| !f.token_url.is_empty())
        };
        for requirement in &self.security_requirements {
            for (name, scopes) in &requirement.schemes {
                if let Some(flow) = flow(name) {
                    return Some((flow.token_url.clone(), scopes.list.clone()));
                }
            }
        }
        self.security_schemes
            .keys()
            .find_map(|name| flow(name))
            .map(|flow| (flow.token_url.clone(), Vec::new()))
    }

    /// Whether the card says the agent streams (`capabilities.streaming`).
    pub fn streams(&self) -> bool {
        self.capabilities.streaming == Some(true)
    }

    /// Whether the card says the agent pushes (`capabilities.pushNotifications`).
    pub fn pushes(&self) -> bool {
        self.capabilities.push_notifications == Some(true)
    }

    /// The JSON-RPC endpoint: the first `JSONRPC` interface whose protocol
    /// version is 1.x (or unstated), in the card's order of preference.
    pub fn jsonrpc_url(&self) -> Option<&str> {
        self.supported_interfaces
            .iter()
            .find(|i| {
                i.protocol_binding.eq_ignore_ascii_case("JSONRPC")
                    && (i.protocol_version.is_empty() || i.protocol_version.starts_with("1."))
                    && !i.url.is_empty()
            })
            .map(|i| i.url.as_str())
    }
}
