//! Local emulators of agentgate's backends, speaking their real wire protocols, for the
//! tests and `agentgate sim` / `agentgate demo`.
//!
//! Layout:
//! - [`qbusiness`]: an Amazon Q Business ChatSync emulator (restJson1, SigV4-verified)
//!   with a BM25-ranked document corpus, two plugins (ticket, sign-in) and fault knobs;
//! - [`github`]: a GitHub emulator (the GraphQL subset and REST routes a Copilot cloud
//!   agent client uses, agent tasks) with a simulated Copilot agent driven by seeded
//!   scenarios, rate limits and fault knobs;
//! - [`a2a`]: an Agent2Agent (A2A) protocol v1.0 agent (JSON-RPC binding, SSE) with
//!   scripted agents selected by skill, fault knobs and per-messageId effect counters;
//! - [`mcp`]: a plain MCP server with one slow tool (progress, an elicitation), the
//!   "any MCP server" behind `[[mcp.servers]]` in the demo and the tests;
//! - `cli`: [`SimArgs`] and [`run`], what `agentgate sim` calls.

// GitHub's pull request object is one `json!` of about fifty fields.
#![recursion_limit = "256"]

pub mod a2a;
pub mod github;
pub mod mcp;
pub mod oauth;
pub mod qbusiness;

mod cli;

pub use cli::{SimArgs, run};
