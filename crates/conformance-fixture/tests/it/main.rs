//! The fixture's integration tests, one binary (one link of rmcp, sqlx and
//! the engine instead of one per file), each against the real
//! `conformance-fixture` binary:
//!
//! - `tasks_e2e`: every task path of the Tasks extension, over stdio and HTTP;
//! - `inline_clients`: clients without the tasks extension;
//! - `bad_input`: hostile and broken input;
//! - `restart`: tasks survive a SIGKILLed server;
//! - `listen`: task status push through `subscriptions/listen`.
//!
//! `postgres_instances` is a binary of its own: it runs on
//! `agentgate_testkit::harness`, so a machine without PostgreSQL reports it
//! ignored. Both binaries share `tests/common/`.

mod bad_input;
mod inline_clients;
mod listen;
mod restart;
mod tasks_e2e;

// Shared with postgres_instances, so it stays in tests/common/.
#[path = "../common/mod.rs"]
mod common;
