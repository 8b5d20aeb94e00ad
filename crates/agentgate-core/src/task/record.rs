use std::collections::BTreeMap;

use agentgate_backend::{Millis, Owner, TaskId, TaskPhase, TaskView};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// A task as stored: plain data, readable by any process. Runtime handles
/// (leases in flight, notifiers) live in the engine, never in the record,
/// so any process can pick a task up. A backend sees a [`TaskView`] of it.
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
            .map(|at| agentgate_backend::engine::wire_ms(at.since(self.created_at)))
    }
}

impl From<&TaskRecord> for TaskView {
    fn from(record: &TaskRecord) -> Self {
        TaskView::new(
            record.id.clone(),
            record.status,
            record.status_message.clone(),
            record.job_state.clone(),
            record.result.clone(),
            record.error.clone(),
        )
    }
}

/// The fencing token of a task's lease: every claim takes the next one, and
/// a worker's write lands only while the task still holds its token. It is
/// not a count of failures ([`TaskRecord::failures`]
/// is).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
#[derive(sqlx::Type)]
#[sqlx(transparent)]
pub struct Fence(i64);

impl Fence {
    /// The token of a task never claimed.
    pub const UNCLAIMED: Self = Self(0);

    /// The token a store keeps as `raw`.
    pub const fn from_raw(raw: i64) -> Self {
        Self(raw)
    }

    /// The token as a store keeps it.
    pub const fn raw(self) -> i64 {
        self.0
    }

    /// The token of the next claim (saturating: a counter at `i64::MAX`
    /// stays there rather than wrap to a token some old worker held).
    #[must_use]
    pub fn next(self) -> Self {
        Self(self.0.saturating_add(1))
    }
}

impl std::fmt::Display for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_fence_never_wraps() {
        assert_eq!(Fence::UNCLAIMED.next(), Fence::from_raw(1));
        assert_eq!(Fence::from_raw(i64::MAX).next(), Fence::from_raw(i64::MAX));
    }

    #[test]
    fn a_fence_serializes_as_a_plain_number() {
        let json = serde_json::to_string(&Fence::from_raw(3)).expect("serializes");
        assert_eq!(json, "3");
    }
}
