//! agentgate's engine: durable MCP tasks for long-running agents.
//!
//! # Layout
//! - [`task`]: the task as stored ([`task::TaskRecord`], its lease fence) and
//!   what the engine writes; what a task is to a backend (id, owner, status,
//!   policy) and the [`Job`](agentgate_backend::Job) trait are the backend
//!   SDK's, [`agentgate_backend`], used from there (one path per type).
//! - [`store`]: the [`store::TaskStore`] trait, its semantics, the SQLite store
//!   and the suite every store must pass.
//! - [`job`]: the error object stored for a failed task.
//! - [`registry`]: the tools a gateway serves, their schemas made portable
//!   by [`schema`].
//! - [`engine`]: the engine (crate-private), which claims due tasks under a
//!   lease, runs one step each, and saves the result; and its task service,
//!   [`engine::Tasks`] (create, get, answer, cancel, watch), the one door
//!   for task changes.
//! - [`runtime`]: [`runtime::Runtime`], the engine with every backend's
//!   background work under one shutdown tree, the gateways serving it, its
//!   [`engine::Tasks`] and its [`runtime::Probes`] (readiness, metrics).
//! - [`mcp`]: the MCP side, an rmcp `ServerHandler` (the [`mcp::Gateway`]) and
//!   the stdio / Streamable HTTP entry points; every JSON-RPC error code is
//!   chosen in `mcp/error.rs`.
//! - [`auth`]: who an HTTP caller is (tokens, OAuth), as a [`auth::Principal`].
//! - [`metrics`]: Prometheus metrics (steps, leases, upstream calls, polls).
//! - [`clock`]: injectable time.
//! - [`docs`]: the project's pages under `docs/` (user guide, operations,
//!   architecture, backends, conformance), compiled so their examples are checked.
//!
//! A request flows transport → [`mcp::Gateway`] → [`engine::Tasks`] → [`store::TaskStore`]; the scheduler runs the tool's job.

pub mod auth;
mod catalog;
pub mod clock;
pub mod docs;
pub mod engine;
pub mod job;
pub mod mcp;
pub mod metrics;
pub mod registry;
pub mod runtime;
pub mod schema;
pub mod store;
pub mod task;
