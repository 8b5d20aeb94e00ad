//! The emulators' integration tests, one binary (one link of the emulators,
//! the AWS SDK and the contracts instead of one per file):
//!
//! - `a2a`: the A2A emulator over real HTTP, every answer held to `a2a.proto`;
//! - `github`: the GitHub emulator over real HTTP;
//! - `mcp`: the slow-tool MCP server over real HTTP, through rmcp's client;
//! - `qbusiness_sdk`: the Q Business emulator driven by the real
//!   `aws-sdk-qbusiness` client (`common` starts it and builds the clients).
//!
//! `a2a_interop` (the official A2A SDK as a client) is a binary of its own:
//! it runs on `agentgate_testkit::harness`, so a machine without the SDK
//! reports it ignored.

mod a2a;
mod common;
mod github;
mod mcp;
mod qbusiness_sdk;
