//! The tests that need something outside this crate, in one binary on
//! `agentgate_testkit::harness` (`harness = false`), so a test whose need is
//! missing is reported as skipped, or fails where CI requires it:
//!
//! - [`failover`]: `agentgate serve` instances sharing a PostgreSQL server,
//!   one of them killed;
//! - [`store_outage`]: a store that fills up, stops or does not sync, under
//!   a running gateway;
//! - [`interop`]: MCP and A2A clients and servers we did not write;
//! - [`mcp_backend`]: MCP servers behind agentgate's `[[mcp.servers]]`.
//!
//! The tests that need nothing outside are in `tests/it`.

mod failover;
mod interop;
mod mcp_backend;
mod store_outage;

fn main() -> std::process::ExitCode {
    let tests = agentgate_testkit::harness::Tests::new();
    let tests = failover::register(tests);
    let tests = store_outage::register(tests);
    let tests = interop::register(tests);
    mcp_backend::register(tests).run()
}
