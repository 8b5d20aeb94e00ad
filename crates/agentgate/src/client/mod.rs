//! A scriptable MCP client for servers that answer with durable tasks
//! (`agentgate call`, `agentgate task`), reusable by other commands.
//!
//! ```text
//! Connection::http(url) / Connection::stdio("CMD ARGS")
//!   │  rmcp client, protocol 2026-07-28 (server/discover), declaring the tasks
//!   │  extension and form + URL elicitation in every request's _meta
//!   ▼
//! call(tool, args, input) ─┬─ CallToolResult ─────────────▶ CallOutcome::Done
//!                          ├─ InputRequiredResult (MRTR): input answers, retry
//!                          └─ CreateTaskResult ───────────▶ CallOutcome::Task
//!                                                              │ TaskBook::save (local, durable)
//! follow(id, observer, input) ◀────────────────────────────────┘
//!   loop: tasks/get ─▶ observer.status(task) on each change
//!         input_required ─▶ input.answer(new requests) ─▶ tasks/update
//!         completed | failed | cancelled ─▶ FinalState
//!         otherwise sleep pollIntervalMs
//! cancel(id) ─▶ tasks/cancel (cooperative: keep following to see the end)
//! ```
//!
//! - [`connection`]: where the server is ([`Server`]), connecting, the four
//!   requests, and following a task.
//! - [`input`]: the [`InputSource`] seam and the command line's answers
//!   (`--input`, `--yes`, prompts on a terminal, lines on piped stdin).
//! - [`form`]: an elicitation's `requestedSchema` as typed fields, and
//!   reading a field's value from text.
//! - [`render`]: the [`FollowObserver`] seam, a TTY-aware progress display,
//!   and printing results.
//! - [`state`]: the local task list that survives restarts ([`TaskBook`]).
//! - [`cli`]: the `call` and `task` subcommands and their exit statuses.

pub(crate) mod cli;
pub(crate) mod connection;
pub(crate) mod form;
pub(crate) mod input;
pub(crate) mod render;
pub(crate) mod state;

// The short paths other commands (`agentgate demo`) use.
#[allow(unused_imports)]
pub(crate) use connection::{CallOutcome, Connection, FinalState, Server};
#[allow(unused_imports)]
pub(crate) use input::{Answers, InputSource};
#[allow(unused_imports)]
pub(crate) use render::{FollowObserver, Progress, Quiet};
#[allow(unused_imports)]
pub(crate) use state::TaskBook;
