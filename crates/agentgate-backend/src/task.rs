//! What a task *is*, as a backend sees it: its status and its record.
//!
//! Everything here is plain data. A [`TaskRecord`] is exactly what the store
//! persists; runtime handles (leases in flight, notifiers) live in the
//! engine, never in the record, so any process can pick a task up.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::Fence;
use crate::{Millis, Owner, TaskId};

/// The five task states of the Tasks extension, as the engine and the
/// stores keep them. Named apart from the wire's `rmcp::model::TaskStatus`
/// (which the MCP side maps it to, one to one) and from A2A's `TaskStatus`
/// message, so no file has to alias one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskPhase {
    /// The job is running or waiting for its next step.
    Working,
    /// The job waits for answers to its input requests.
    InputRequired,
    /// Ended with a tool result (which may be an `isError` one).
    Completed,
    /// Ended with a protocol error.
    Failed,
    /// Ended by a cancel.
    Cancelled,
}

impl TaskPhase {
    /// Whether the task has ended (nothing changes it any more).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// The state as the wire and the stores spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The state spelled `raw`, if it is one.
    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }
}

impl std::fmt::Display for TaskPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task as a backend's code sees it (a [`SyncView`](crate::SyncView)
/// following its own task): where it is, and what its job saved and
/// returned. `#[non_exhaustive]`: fields may be added; read them, never
/// build one.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskView {
    /// The task's id.
    pub id: TaskId,
    /// Where it is in its life.
    pub status: TaskPhase,
    /// The `statusMessage` clients see.
    pub status_message: Option<String>,
    /// The job's checkpoint; `None` until the first step ran.
    pub job_state: Option<Value>,
    /// The `CallToolResult` of a completed task.
    pub result: Option<Value>,
    /// The JSON-RPC error object of a failed task.
    pub error: Option<Value>,
}

impl From<&TaskRecord> for TaskView {
    fn from(record: &TaskRecord) -> Self {
        Self {
            id: record.id.clone(),
            status: record.status,
            status_message: record.status_message.clone(),
            job_state: record.job_state.clone(),
            result: record.result.clone(),
            error: record.error.clone(),
        }
    }
}

/// A task as stored: plain data, readable by any process. The engine's;
/// a backend sees a [`TaskView`].
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// The task's id.
    pub id: TaskId,
    /// Who may see and change it.
    pub owner: Owner,
    /// The tool it runs.
    pub tool: String,
    /// The call's arguments, as sent.
    pub args: Value,
    /// Where it is in its life.
    pub status: TaskPhase,
    /// The `statusMessage` clients see.
    pub status_message: Option<String>,
    /// The job's checkpoint; `None` until the first step ran.
    pub job_state: Option<Value>,
    /// Input requests still waiting for an answer, keyed as on the wire.
    pub input_requests: BTreeMap<String, Value>,
    /// Answers received and not yet handed to the job.
    pub input_responses: BTreeMap<String, Value>,
    /// Every input key this task ever asked for: keys are unique per task.
    pub used_input_keys: Vec<String>,
    /// A cancel arrived and the job has not yet ended.
    pub cancel_requested: bool,
    /// The `CallToolResult` of a completed task.
    pub result: Option<Value>,
    /// The JSON-RPC error object of a failed task.
    pub error: Option<Value>,
    /// When the task was created.
    pub created_at: Millis,
    /// When it last changed.
    pub updated_at: Millis,
    /// How long its handle lives after its last progress (`None`: until
    /// swept): the TTL the tool or the client asked for.
    pub ttl_ms: Option<u64>,
    /// When its handle stops answering: `ttl_ms` after the last step that
    /// got somewhere (its creation, an answer, a checkpoint, its end), so a
    /// task whose backend keeps making progress never expires by the clock
    /// alone. `None`: no TTL.
    pub expires_at: Option<Millis>,
    /// When the scheduler should run the next step; `None` while the task
    /// waits for input or has ended.
    pub due_at: Option<Millis>,
    /// The worker running its step now, if any.
    pub lease_owner: Option<String>,
    /// When that worker's lease runs out unless it heartbeats.
    pub lease_until: Option<Millis>,
    /// The fencing token of the current lease; every claim takes the next.
    pub fence: Fence,
    /// Steps checkpointed so far; jobs use it to derive idempotency keys.
    pub steps: i64,
    /// Consecutive retryable failures of the current step.
    pub failures: i64,
}

impl TaskRecord {
    /// True once `expires_at` has passed: the id then answers as unknown.
    pub fn is_expired(&self, now: Millis) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// The TTL as the wire reports it, from creation (the task protocols
    /// count `ttl` from `createdAt`): it grows as the task makes progress.
    pub fn ttl_from_creation_ms(&self) -> Option<u64> {
        self.expires_at
            .map(|at| crate::time::wire_ms(at.since(self.created_at)))
    }
}
