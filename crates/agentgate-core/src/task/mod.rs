//! The task as the engine keeps it: the stored record, its lease fence,
//! and what the engine writes to the store (a new task, the outcome of a
//! step). What a task *is* to a backend (its id, owner, status, policy) is
//! the backend SDK's, [`agentgate_backend`], used from there.
//!
//! Everything here is plain data. A [`TaskRecord`] is exactly what the store
//! persists; runtime handles (leases in flight, notifiers) live in the
//! scheduler, never in the record, so any process can pick a task up.

mod record;

pub use record::{Fence, NewTask, Outcome, TaskRecord};
