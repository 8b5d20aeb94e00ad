use std::collections::BTreeMap;

use serde_json::Value;

use super::{Owner, TaskId};
use crate::clock::Millis;

/// What `create` needs to persist a task.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub id: TaskId,
    pub owner: Owner,
    pub tool: String,
    /// The validated tool arguments, as the client sent them.
    pub args: Value,
    pub status_message: Option<String>,
    pub ttl_ms: Option<u64>,
    pub now: Millis,
}

impl NewTask {
    /// When the new task's handle expires: its TTL after creation.
    pub fn expires_at(&self) -> Option<Millis> {
        self.ttl_ms.map(|ttl| {
            self.now
                .saturating_add(std::time::Duration::from_millis(ttl))
        })
    }
}

/// What one step produced; the store turns it into the next task state.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Ended with a tool result (tool errors are `isError` results).
    Completed { result: Value },
    /// Ended with a protocol-level error object.
    Failed { error: Value },
    /// Ended by a cancel; `status_message` replaces the default
    /// "cancelled" (what the upstream goes on with).
    Cancelled { status_message: Option<String> },
    /// Still working; run again at `due_at` (sooner if cancel is requested).
    Waiting {
        state: Value,
        status_message: Option<String>,
        due_at: Millis,
    },
    /// Waiting for the client to answer `requests`.
    InputRequired {
        state: Value,
        status_message: Option<String>,
        requests: BTreeMap<String, Value>,
    },
    /// The step was interrupted (a cancel arrived, or shutdown): release the
    /// lease and run again at once, from the same checkpoint.
    Interrupted,
    /// The step failed in a way worth retrying; the checkpoint is unchanged.
    Retry {
        status_message: Option<String>,
        due_at: Millis,
    },
}

impl Outcome {
    /// [`Outcome::Cancelled`] with the default status, "cancelled".
    pub fn cancelled() -> Self {
        Outcome::Cancelled {
            status_message: None,
        }
    }
}
