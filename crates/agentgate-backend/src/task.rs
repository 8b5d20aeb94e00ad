//! What a task *is*, as a backend sees it: its status, and a view of it.
//! The task as stored is the engine's (`agentgate_core::task::TaskRecord`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::TaskId;

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
/// build one (the engine makes it from its stored record).
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

impl TaskView {
    /// The view of a stored task: the engine makes one, a backend reads it.
    pub fn new(
        id: TaskId,
        status: TaskPhase,
        status_message: Option<String>,
        job_state: Option<Value>,
        result: Option<Value>,
        error: Option<Value>,
    ) -> Self {
        Self {
            id,
            status,
            status_message,
            job_state,
            result,
            error,
        }
    }
}
