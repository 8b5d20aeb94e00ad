//! Test binaries whose tests need something a machine may lack (a
//! PostgreSQL server, root and PostgreSQL's server binaries, the interop
//! clients), and report a test that could not run as **ignored, with the
//! reason** — never as `ok`.
//!
//! libtest decides `#[ignore]` at compile time, so such a file is a test
//! binary of its own harness (`harness = false` in Cargo.toml) built on
//! `libtest-mimic`, which takes the same arguments and prints the same
//! report as `cargo test`'s:
//!
//! ```no_run
//! # async fn two_instances_never_share_a_task() {}
//! # async fn failover_under_load() {}
//! fn main() -> std::process::ExitCode {
//!     agentgate_testkit::harness::Tests::new()
//!         .test("two_instances_never_share_a_task", two_instances_never_share_a_task)
//!         .multi_thread("failover_under_load", failover_under_load)
//!         .run()
//! }
//! ```
//!
//! A test body stays a plain `async fn`. Where it finds that it cannot run,
//! it calls [`skip`] (the PostgreSQL and fault helpers do it for it):
//! that ends the test at once, and the harness reports it
//! `ignored, <reason>`. When the variable named by the [`Need`] is `1` (as
//! `.ci/run` sets them all), [`skip`] fails the test instead, so CI can never
//! pass a test that did not run.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::process::ExitCode;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// What a test may need that a machine may lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A PostgreSQL server (`AGENTGATE_TEST_POSTGRES_URL`).
    Postgres,
    /// Real faults: root (to mount a tmpfs) and PostgreSQL's server binaries.
    Faults,
    /// The pinned third-party clients of `scripts/interop-setup.sh`.
    Interop,
}

impl Need {
    /// The variable that, set to `1`, makes a missing need a failure.
    pub fn required_by(self) -> &'static str {
        match self {
            Self::Postgres => "AGENTGATE_REQUIRE_POSTGRES",
            Self::Faults => "AGENTGATE_REQUIRE_FAULTS",
            Self::Interop => "AGENTGATE_REQUIRE_INTEROP",
        }
    }

    /// Whether this machine must have it (the variable is `1`).
    pub fn required(self) -> bool {
        std::env::var(self.required_by()).is_ok_and(|v| v == "1")
    }

    /// What to do to have it.
    fn remedy(self) -> &'static str {
        match self {
            Self::Postgres => "run .ci/postgres.sh or set AGENTGATE_TEST_POSTGRES_URL",
            Self::Faults => "run as root with PostgreSQL's server binaries installed",
            Self::Interop => "run scripts/interop-setup.sh",
        }
    }
}

/// The payload [`skip`] unwinds with; the harness turns it into "ignored".
#[derive(Debug)]
struct Skipped(String);

/// Ends the current test because `need` is missing, saying `why`: the
/// harness reports it ignored with that reason, or, when `need` is
/// [required](Need::required), the test fails.
///
/// Only for tests run by [`Tests`]: under libtest's own harness this would
/// be a failure.
pub fn skip(need: Need, why: &str) -> ! {
    let remedy = need.remedy();
    let reason = if why.contains(remedy) {
        why.to_owned()
    } else {
        format!("{why}; {remedy}")
    };
    assert!(
        !need.required(),
        "{reason}, and {}=1 requires this test to run",
        need.required_by()
    );
    // `resume_unwind`, not `panic!`: no panic message, since this is not a
    // failure.
    resume_unwind(Box::new(Skipped(reason)))
}

type TestFn = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// The tests of one test binary.
#[derive(Default)]
pub struct Tests {
    trials: Vec<Trial>,
}

impl std::fmt::Debug for Tests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tests")
            .field("trials", &self.trials.len())
            .finish()
    }
}

impl Tests {
    pub fn new() -> Self {
        Self::default()
    }

    /// An async test on a current-thread runtime (as `#[tokio::test]`).
    #[must_use]
    pub fn test<F, Fut>(self, name: &str, test: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.add(
            name,
            Flavor::CurrentThread,
            Box::new(move || Box::pin(test())),
        )
    }

    /// An async test on a multi-thread runtime (as
    /// `#[tokio::test(flavor = "multi_thread")]`).
    #[must_use]
    pub fn multi_thread<F, Fut>(self, name: &str, test: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.add(
            name,
            Flavor::MultiThread,
            Box::new(move || Box::pin(test())),
        )
    }

    /// An async test on a current-thread runtime whose clock is paused (as
    /// `#[tokio::test(start_paused = true)]`): `tokio::time` moves only when
    /// every task waits, and then at once.
    #[must_use]
    pub fn paused<F, Fut>(self, name: &str, test: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.add(name, Flavor::Paused, Box::new(move || Box::pin(test())))
    }

    fn add(mut self, name: &str, flavor: Flavor, test: TestFn) -> Self {
        self.trials
            .push(Trial::ignorable_test(name, move || run(flavor, test)));
        self
    }

    /// Runs the tests the command line selects, as `cargo test` would, and
    /// returns the exit status to end `main` with.
    ///
    /// Without `--test-threads`, `RUST_TEST_THREADS` says how many run at
    /// once, as it does for libtest (libtest-mimic itself reads only the
    /// flag); a value that is not a positive number is refused, not ignored.
    pub fn run(self) -> ExitCode {
        let mut args = Arguments::from_args();
        if args.test_threads.is_none() {
            match test_threads_from_env() {
                Ok(threads) => args.test_threads = threads,
                Err(message) => {
                    eprintln!("{message}");
                    return ExitCode::FAILURE;
                }
            }
        }
        libtest_mimic::run(&args, self.trials).exit_code()
    }
}

/// `RUST_TEST_THREADS`, read as libtest reads it.
fn test_threads_from_env() -> Result<Option<usize>, String> {
    match std::env::var("RUST_TEST_THREADS") {
        Err(_) => Ok(None),
        Ok(value) => match value.trim().parse::<usize>() {
            Ok(threads) if threads > 0 => Ok(Some(threads)),
            _ => Err(format!(
                "RUST_TEST_THREADS is {value:?}: it must be a positive number of tests to run at once"
            )),
        },
    }
}

#[derive(Debug, Clone, Copy)]
enum Flavor {
    CurrentThread,
    Paused,
    MultiThread,
}

fn run(flavor: Flavor, test: TestFn) -> Result<Completion, Failed> {
    let runtime = match flavor {
        Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Flavor::Paused => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build(),
        Flavor::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
    .map_err(|e| Failed::from(format!("cannot build a runtime: {e}")))?;
    let ran = catch_unwind(AssertUnwindSafe(|| runtime.block_on(test())));
    // Dropping the runtime here, not during the unwind, so a test's
    // leftovers (drop guards of databases and processes) run on a live one.
    drop(runtime);
    match ran {
        Ok(()) => Ok(Completion::Completed),
        Err(payload) => match payload.downcast::<Skipped>() {
            Ok(skipped) => Ok(Completion::ignored_with(skipped.0)),
            // A real failure: libtest-mimic reports the panic's message,
            // which the panic hook has already printed with its location.
            Err(payload) => resume_unwind(payload),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Every `[[test]]` with `harness = false` in the workspace, as its
    /// files.
    fn own_harness_test_files(root: &Path) -> Vec<PathBuf> {
        let workspace: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
            .expect("workspace Cargo.toml")
            .parse()
            .expect("workspace Cargo.toml parses");
        let members = workspace["workspace"]["members"]
            .as_array()
            .expect("workspace members");
        let mut files = Vec::new();
        for member in members {
            let dir = root.join(member.as_str().expect("member path"));
            let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))
                .expect("member Cargo.toml")
                .parse()
                .expect("member Cargo.toml parses");
            let tests = manifest.get("test").and_then(|t| t.as_array());
            for test in tests.into_iter().flatten() {
                if test.get("harness").and_then(toml::Value::as_bool) == Some(false) {
                    let name = test["name"].as_str().expect("test name");
                    let main = match test.get("path").and_then(toml::Value::as_str) {
                        Some(path) => dir.join(path),
                        None => dir.join("tests").join(format!("{name}.rs")),
                    };
                    // A `tests/<name>/main.rs` binary: every file of it.
                    if main.ends_with("main.rs") {
                        let folder = main.parent().expect("a folder");
                        for entry in std::fs::read_dir(folder).expect("the test's folder") {
                            let file = entry.expect("an entry").path();
                            if file.extension().is_some_and(|e| e == "rs") {
                                files.push(file);
                            }
                        }
                    } else {
                        files.push(main);
                    }
                }
            }
        }
        files
    }

    /// Under `harness = false` libtest's attributes compile to nothing: a
    /// `#[test]` or `#[tokio::test]` there would never run, silently.
    #[test]
    fn no_test_on_our_harness_is_marked_for_libtest() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let files = own_harness_test_files(&root);
        assert!(
            files.len() >= 8,
            "the PostgreSQL, fault and interop tests run on this harness: {files:?}"
        );
        for file in files {
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for marker in ["#[test]", "#[tokio::test"] {
                assert!(
                    !text.contains(marker),
                    "{} runs on agentgate_testkit::harness (harness = false), where `{marker}` \
                     is never run: register the test in its `main` instead",
                    file.display()
                );
            }
        }
    }
}
