//! The A2A backend's integration tests, one binary (one link of the SDK,
//! the engine and the emulator instead of one per file):
//!
//! - `emulator`: every scripted skill of the A2A emulator through the job,
//!   every request checked against the vendored a2a.proto;
//! - `engine`: the tools in agentgate's real scheduler and SQLite store;
//! - `streams`: streams, polling and push notifications through the runtime;
//! - `hostile`: agents whose cards try to steer agentgate's credentials and
//!   requests, and (`hostile::limits`) agents whose answers never end.
//!
//! `common` is their shared harness.

mod common;
mod emulator;
mod engine;
mod hostile;
mod streams;
