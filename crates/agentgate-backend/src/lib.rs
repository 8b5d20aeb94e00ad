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
//! Modules:
//! - [`job`]: [`Job`], [`Step`], [`Event`], [`JobError`], [`JobContext`], [`ToolSpec`];
//! - [`policy`]: [`ToolPolicy`], [`PollPolicy`], [`RetryPolicy`];
//! - [`task`]: [`TaskId`], [`Owner`], [`TaskPhase`], [`TaskRecord`]; [`AccessToken`];
//! - [`sync_view`]: a tool's own answer for clients without the tasks extension;
//! - [`handles`]: [`Nudge`] and [`UpstreamMetrics`], what a backend may hold of the engine;
//! - [`ownership`]: [`UpstreamIds`], which upstream conversations and contexts are a principal's;
//! - [`backend`]: the [`Backend`] trait and its config section;
//! - [`body`]: [`read_bounded`], an upstream's answer read through a cap;
//! - [`webhook`]: [`Webhook`], requests an upstream sends to agentgate (push notifications).

// The SDK is what backend authors read: every public item says what it is.
// (Set here, not in Cargo.toml: a crate that takes the workspace's lints
// cannot add its own there.)
#![warn(missing_docs)]

pub mod backend;
pub mod body;
#[doc = include_str!("../../../docs/backends/write-a-backend.md")]
pub mod guide {}
pub mod handles;
mod id;
pub mod job;
pub mod ownership;
pub mod policy;
pub mod sync_view;
pub mod task;
pub mod time;
pub mod webhook;

pub use backend::{Backend, ConfigError, ConfiguredBackend, Health, parse_section};
pub use body::{BodyError, Size, TooLarge, read_bounded};
pub use handles::{
    Nudge, NudgeError, NudgeTasks, UpstreamMetrics, UpstreamOutcome, UpstreamRecorder,
};
pub use id::{AccessToken, Owner, TaskId};
pub use job::{
    Event, Input, Job, JobContext, JobError, Step, StepResult, ToolSpec, input_schema, parse_args,
};
pub use ownership::{InMemoryUpstreamIds, OwnershipError, UpstreamIdBook, UpstreamIds};
pub use policy::{PollPolicy, RetryPolicy, ToolPolicy};
pub use sync_view::{BoxFuture, InlineRequest, InlineTask, SyncView};
pub use task::{TaskPhase, TaskRecord};
pub use time::{Fence, Millis};
pub use webhook::{WEBHOOK_PREFIX, Webhook, WebhookRequest, WebhookResponse};
