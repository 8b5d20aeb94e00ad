//! What a task *is*: its id, its owner, its status and the per-tool policy that
//! decides its lifetime and how often clients should poll it.
//!
//! Everything here is plain data. A [`TaskRecord`] is exactly what the store
//! persists; runtime handles (leases in flight, notifiers) live in the
//! scheduler, never in the record, so any process can pick a task up.

mod id;
mod policy;
mod record;

pub use id::{Owner, TaskId};
pub use policy::{PollPolicy, ToolPolicy};
pub use record::{NewTask, Outcome, TaskRecord, TaskStatus};
