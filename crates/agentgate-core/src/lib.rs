//! agentgate's engine: durable MCP tasks for long-running agents.
//!
//! # Layout
//! - [`task`]: what a task is (id, owner, status, per-tool policy), as plain data.
//! - [`store`]: the [`store::TaskStore`] trait, its semantics, the SQLite store
//!   and the suite every store must pass.
//! - [`job`]: the [`job::Job`] trait, work as checkpointed steps.
//! - [`registry`]: the tools a gateway serves.
//! - [`scheduler`]: the [`scheduler::Engine`], which claims due tasks under a
//!   lease, runs one step each, and saves the result.
//! - [`mcp`]: the MCP side, an rmcp `ServerHandler` (the [`mcp::Gateway`]) and
//!   the stdio / Streamable HTTP entry points.
//! - [`metrics`]: Prometheus metrics (steps, leases, upstream calls, polls).
//! - [`clock`]: injectable time.
//!
//! A request flows transport → [`mcp::Gateway`] → [`scheduler::Engine`] →
//! [`store::TaskStore`] / the tool's job.

pub mod auth;
pub mod clock;
pub mod job;
pub mod mcp;
pub mod metrics;
pub mod registry;
pub mod scheduler;
pub mod store;
pub mod task;
