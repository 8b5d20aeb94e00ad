//! The tests that need something outside this crate, in one binary on
//! `agentgate_testkit::harness` (`harness = false`), so a test whose need is
//! missing is reported as skipped, or fails where CI requires it:
//!
//! - [`store_postgres`]: the shared store suite on a PostgreSQL server, and
//!   several instances claiming from one table;
//! - [`store_faults`]: real faults (a tmpfs that fills up, a simulated power
//!   cut, a PostgreSQL that does not sync);
//! - [`engine_faults`]: the engine under a failing store, a PostgreSQL
//!   restart included.
//!
//! The tests that need nothing outside are in `tests/it`.

mod engine_faults;
mod store_faults;
mod store_postgres;

fn main() -> std::process::ExitCode {
    let tests = agentgate_testkit::harness::Tests::new();
    let tests = store_postgres::register(tests);
    let tests = store_faults::register(tests);
    engine_faults::register(tests).run()
}
