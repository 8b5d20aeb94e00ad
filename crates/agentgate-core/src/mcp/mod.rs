//! The MCP side: an rmcp `ServerHandler` over the engine, and the transports.
//!
//! ```text
//! stdio / Streamable HTTP ──▶ Gateway (ServerHandler)
//!   tools/call ─┬─ ≥2026-07-28 request declaring the tasks extension:
//!               │    tasks.create (durable) ──▶ CreateTaskResult; scheduler runs it
//!               └─ otherwise: same task, followed inline up to the tool's sync
//!                    budget (progress, MRTR or elicitation for input)
//!   tasks/get|update|cancel ──▶ Tasks (create/get/answer/cancel/watch),
//!                               scoped to the caller's owner
//! ```
//!
//! - [`gateway`]: the handler and its request path.
//! - [`error`]: every JSON-RPC error code, chosen in one place.
//! - [`render`]: stored records → the Tasks extension's wire shapes.
//! - [`follower`]: the one loop that follows a task for one request (the
//!   inline call and 2025-11-25's `tasks/result`).
//! - [`inline`]: driving a task for clients without the tasks extension.
//! - [`inline_task`]: the gateway's side of a tool's own answer for such
//!   clients ([`agentgate_backend::SyncView`]), where its upstream had a contract to
//!   keep ("poll 9 times, then say pending").
//! - [`builtin`]: the built-in tools `task_status`, `task_answer` and
//!   `task_cancel`: `tasks/get|update|cancel` as tools for clients without
//!   the tasks extension.
//! - [`tasks_2025`]: the task wire of MCP 2025-11-25 (`params.task` on
//!   `tools/call`, `tasks/get|result|cancel`) on the same engine.
//! - [`listen`]: `subscriptions/listen` with `taskIds` → `notifications/tasks`.
//! - [`limits`]: per-principal limits (live tasks, request rate, fast
//!   `tasks/get` polling) and caps (`inputResponses` size, task TTL).
//! - [`transport`] (a folder): `serve_stdio`, the axum router for `/mcp`, and
//!   what agentgate puts around rmcp's transports (the stdio guard, the HTTP
//!   accept loop and its bounds, legacy-session caps, SSE patching).

mod builtin;
mod error;
mod follower;
mod gateway;
mod inline;
mod inline_task;
pub mod limits;
mod listen;
mod render;
mod tasks_2025;
mod transport;

pub use error::GatewayError;
pub use gateway::{Gateway, TransportKind};
pub use limits::Limits;
pub use listen::MAX_LISTEN_TASK_IDS;
pub use render::to_detailed_task;
pub use transport::{
    ConnectionLimits, HttpOptions, SessionLimits, http_router, serve_http, serve_http_with,
    serve_stdio,
};
