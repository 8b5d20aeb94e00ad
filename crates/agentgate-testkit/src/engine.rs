//! A runtime on a [`ManualClock`] ([`ManualRuntime`]), and driving its
//! tasks: time moves only when the test's task waits, and exactly as far as
//! it waits.
//!
//! The engine measures every wait on its clock (see
//! `agentgate_core::clock`), so with a manual one a retry backoff, a
//! `Step::Wait`, a lease or a TTL passes the moment the test moves the
//! clock, never in real time. [`drive_to_end`] moves it for one task: while
//! the task sits between steps waiting for a later time, the clock jumps to
//! that time; while a step runs, it waits for the engine to announce the
//! task's next change. What the task waited for is returned, so a test can
//! check a backoff curve exactly.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{Millis, Owner, TaskId};
use agentgate_core::clock::{Clock as _, ManualClock};
use agentgate_core::engine::{Changed, TaskQuota, Tasks};
use agentgate_core::runtime::{Runtime, RuntimeBuilder};
use agentgate_core::store::{SqliteStore, TaskStore};
use agentgate_core::task::TaskRecord;
use serde_json::Value;

/// Where a [`ManualRuntime`]'s clock starts: a fixed instant, so expected
/// times in a test are constants.
pub const T0: Millis = Millis::from_unix_ms(1_800_000_000_000);

/// A [`Runtime`] whose clock stands still until the test moves it, the
/// way engine tests run: built with the test's tools and settings, stopped
/// when dropped.
pub struct ManualRuntime {
    runtime: Runtime,
    clock: ManualClock,
}

impl std::fmt::Debug for ManualRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualRuntime")
            .field("runtime", &self.runtime)
            .finish_non_exhaustive()
    }
}

impl ManualRuntime {
    /// A runtime on an in-memory SQLite store, configured by `configure`
    /// (tools, settings, `run_steps`) and started.
    pub async fn start(configure: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder) -> Self {
        let store = SqliteStore::open("sqlite::memory:")
            .await
            .expect("an in-memory store");
        Self::on(Arc::new(store), configure)
    }

    /// A runtime on `store` (a spy, a faulty store, PostgreSQL), configured
    /// by `configure` and started.
    pub fn on(
        store: Arc<dyn TaskStore>,
        configure: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
    ) -> Self {
        let clock = ManualClock::starting_at(T0);
        let builder = Runtime::builder(store).clock(Arc::new(clock.clone()));
        let runtime = configure(builder).start().expect("the runtime starts");
        Self { runtime, clock }
    }

    /// The runtime, for its gateways and probes.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The task service: the way a test creates, answers and cancels.
    pub fn tasks(&self) -> Tasks {
        self.runtime.tasks()
    }

    /// The clock the test moves.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// Creates a task of `tool` for `owner` with `args` (a JSON object),
    /// with no quota.
    pub async fn create(&self, owner: &Owner, tool: &str, args: Value) -> TaskRecord {
        let tasks = self.tasks();
        let tools = tasks.tools();
        let spec = tools
            .get(tool)
            .unwrap_or_else(|| panic!("the runtime serves no tool `{tool}`"));
        let Value::Object(args) = args else {
            panic!("a tool's arguments are a JSON object, not {args}");
        };
        tasks
            .create(owner.clone(), spec, args, &TaskQuota::default())
            .await
            .expect("create the task")
    }

    /// Drives `owner`'s task `id` to its end (see [`drive_to_end`]).
    pub async fn drive_to_end(&self, owner: &Owner, id: &TaskId) -> Driven {
        drive_to_end(&self.tasks(), &self.clock, owner, id).await
    }
}

impl Drop for ManualRuntime {
    fn drop(&mut self) {
        self.runtime.shutdown_token().cancel();
    }
}

/// Real time a driven task may go without a change before the test fails
/// (a bound for a broken engine, not a wait anything relies on).
const STUCK: Duration = Duration::from_secs(30);

/// A task driven to its end.
#[derive(Debug)]
pub struct Driven {
    /// The task as it ended.
    pub task: TaskRecord,
    /// Each wait between steps that moved the clock, in order: how far
    /// ahead of the clock the task was due.
    pub waits: Vec<Duration>,
}

/// Moves `clock` whenever `id` waits for a later time, until it ends. For
/// tasks that need no input: one waiting for an answer fails the test after
/// a while without a change.
pub async fn drive_to_end(
    tasks: &Tasks,
    clock: &ManualClock,
    owner: &Owner,
    id: &TaskId,
) -> Driven {
    let mut waits = Vec::new();
    // Watched before the first read, so no change between a read and the
    // wait for the next one is missed.
    let mut watch = tasks.watch(owner, vec![id.clone()]);
    loop {
        let now = clock.now();
        let task = watch.read(id).await.expect("read the driven task");
        if task.status.is_terminal() {
            return Driven { task, waits };
        }
        if task.lease_owner.is_none()
            && let Some(due) = task.due_at.filter(|due| *due > now)
        {
            waits.push(due.since(now));
            clock.set(due);
            continue;
        }
        // Either answer (this task changed, or changes were missed) means
        // "read again", which the loop does.
        let _: Changed = tokio::time::timeout(STUCK, watch.next_change())
            .await
            .unwrap_or_else(|_| panic!("task {id} did not change within {STUCK:?}: {task:?}"));
    }
}
