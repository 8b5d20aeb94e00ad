//! The `agentgate` binary's integration tests, one module per area, in one
//! test executable: each `tests/*.rs` file used to be its own binary linking
//! the whole gateway, the AWS SDK and rmcp, and linking them was most of
//! CI's time. Tests that need what a machine may lack (PostgreSQL, root,
//! the interop clients) are in the one `harness = false` binary `external`
//! (`tests/external/`: failover, store outages, interop).
//!
//! `cargo test -p agentgate --test it qbusiness::` runs one module.

mod a2a;
mod auth;
mod call;
mod chaos;
mod check;
mod cli;
mod copilot;
mod demo;
mod limits;
mod listen_close;
mod mcp_tools;
mod metrics;
mod qbusiness;
mod secrets;
