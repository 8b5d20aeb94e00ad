//! The backend SDK: what a crate needs to put an agent behind agentgate as
//! durable MCP tasks, and nothing of the engine (no database, no HTTP
//! server, no MCP transport).
//!
//! A backend is a [`Backend`]: it names its tools ([`ToolSpec`], each a
//! [`Job`] plus its [`ToolPolicy`]) and may run background work until
//! shutdown (say, a watcher that polls its upstream and [`Nudge`]s a task
//! whose upstream changed). The engine runs each job one checkpointed step
//! at a time, so a task survives restarts and moves between instances:
//!
//! ```text
//! tools/call ─▶ tasks.create ─▶ Job::start(args)       ─▶ Step::Wait / Ask / Done / Fail
//!               scheduler     ─▶ Job::resume(state, ev) ─▶ … (state saved after every step)
//!               tasks/cancel  ─▶ Job::cancel(state)     ─▶ Step::Cancelled
//! ```
//!
//! The [`guide`] (`docs/backends/write-a-backend.md`) walks through one,
//! and `examples/countdown-backend` is a complete backend to copy.
//!
//! Everything a backend author uses is at the crate root:
//! - jobs: [`Job`], [`Step`], [`Event`], [`JobError`], [`JobContext`], [`ToolSpec`];
//! - policies: [`ToolPolicy`], [`PollPolicy`], [`RetryPolicy`];
//! - tasks: [`TaskId`], [`Owner`], [`TaskPhase`], [`TaskView`]; [`AccessToken`];
//! - [`SyncView`]: a tool's own answer for clients without the tasks extension;
//! - [`Nudge`] and [`UpstreamMetrics`], what a backend may hold of the engine;
//! - [`UpstreamIds`]: which upstream conversations and contexts are a principal's;
//! - the [`Backend`] trait and its config section ([`ConfiguredBackend`]);
//! - [`read_bounded`]: an upstream's answer read through a cap;
//! - [`ConnectFailure`], [`FirstContact`]: a mistyped upstream URL told from an outage;
//! - [`Webhook`]: requests an upstream sends to agentgate (push notifications).
//!
//! What only the engine (`agentgate-core`) uses, a job's erased input and
//! the traits it implements, is in [`engine`]; a backend never needs it. The
//! task as stored is the engine's own (`agentgate_core::task::TaskRecord`).

// The SDK is what backend authors read: every public item says what it is.
// (Set here, not in Cargo.toml: a crate that takes the workspace's lints
// cannot add its own there.)
#![warn(missing_docs)]

mod backend;
mod body;
mod connect;
#[doc = include_str!("../../../docs/backends/write-a-backend.md")]
pub mod guide {}
mod handles;
mod id;
mod job;
pub mod oauth;
mod ownership;
mod policy;
mod sync_view;
mod task;
mod time;
mod webhook;

/// What the engine (`agentgate-core`) uses of this crate and a backend
/// never needs: a job's erased input, and the traits the engine implements
/// behind a backend's handles.
pub mod engine {
    pub use crate::handles::{NudgeTasks, UpstreamRecorder};
    pub use crate::job::Input;
    pub use crate::ownership::UpstreamIdBook;
    pub use crate::sync_view::InlineRequest;
    pub use crate::time::wire_ms;
}

pub use backend::{Backend, ConfigError, ConfiguredBackend, Health, parse_section};
pub use body::{BodyError, Size, TooLarge, read_bounded};
pub use connect::{ConnectFailure, FirstContact};
pub use handles::{Nudge, NudgeError, UpstreamMetrics, UpstreamOutcome};
pub use id::{AccessToken, Owner, TaskId};
pub use job::{
    Event, Job, JobContext, JobError, Step, StepResult, ToolSpec, input_schema, parse_args,
};
pub use ownership::{InMemoryUpstreamIds, OwnershipError, UpstreamIds};
pub use policy::{PollPolicy, RetryPolicy, ToolPolicy};
pub use sync_view::{BoxFuture, InlineTask, SyncView};
pub use task::{TaskPhase, TaskView};
pub use time::Millis;
pub use webhook::{WEBHOOK_PREFIX, Webhook, WebhookRequest, WebhookResponse};
