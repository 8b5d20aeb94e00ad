//! agentgate-core's integration tests, one module per area, in one test
//! executable (each file used to be a binary of its own, and linking them
//! was much of CI's time). The tests that need what a machine may lack
//! (PostgreSQL, root) or drive time and faults by hand are in the one
//! `harness = false` binary `external` (`tests/external/`: the PostgreSQL
//! store suite, store faults, engine faults).
//!
//! `cargo test -p agentgate-core --test it task_service::` runs one module.

mod connections;
mod engine;
mod limits;
mod prop_jsonrpc;
mod store_sqlite;
mod task_service;
mod tasks_2025;
mod tool_changes;
mod ttl;
