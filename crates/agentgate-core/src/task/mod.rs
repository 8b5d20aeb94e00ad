//! What a task *is*: its id, its owner, its status and the per-tool policy
//! that decides its lifetime and how often clients should poll it (the
//! backend SDK's types), and what the engine writes to the store: a new
//! task and the outcome of a step.
//!
//! Everything here is plain data. A [`TaskRecord`] is exactly what the store
//! persists; runtime handles (leases in flight, notifiers) live in the
//! scheduler, never in the record, so any process can pick a task up.

mod record;

pub use agentgate_backend::engine::{Fence, TaskRecord};
pub use agentgate_backend::{
    Owner, PollPolicy, RetryPolicy, TaskId, TaskPhase, TaskView, ToolPolicy,
};
pub use record::{NewTask, Outcome};
