//! The engine's task service (`create`, `get`, `answer`, `cancel`, `watch`)
//! on a real SQLite store: each operation's store write and its
//! notifications happen together, scoped to the caller's owner. And the
//! runtime around it: stopping frees leases at once for another worker, a
//! worker whose lease was taken over cannot save, a tool served twice is
//! refused.
//!
//! The engine's clock is a manual one that no test moves: nothing here waits
//! for time to pass, every wait is for an event (a wake-up, a change, an
//! interrupt), and a lease or timeout cannot run out by accident on a slow
//! machine.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{
    Backend, BoxFuture, ConfiguredBackend, Event, Job, JobContext, Nudge, Owner, Step, StepResult,
    TaskId, TaskPhase, ToolPolicy, ToolSpec, UpstreamMetrics,
};
use agentgate_core::clock::ManualClock;
use agentgate_core::engine::{Changed, EngineConfig, TaskError, TaskQuota, Tasks};
use agentgate_core::runtime::Runtime;
use agentgate_core::store::{SqliteStore, TaskStore};
use agentgate_core::task::TaskRecord;
use agentgate_testkit::engine::{ManualRuntime, T0};
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams, InputRequest, InputRequests,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Deserialize, JsonSchema)]
struct Args {
    /// `ask`: ask one question; `hang`: a step that never ends by itself;
    /// `gate`: a step that finishes when the test says so.
    mode: String,
}

/// Asks one question and echoes the answer, or hangs in its first step
/// (telling `started` it is there) until the engine interrupts it.
#[derive(Clone, Default)]
struct Probe {
    started: Arc<Notify>,
    /// `gate` steps wait for this, then finish.
    release: Arc<Notify>,
}

impl Job for Probe {
    type Args = Args;
    type State = ();

    async fn start(&self, args: Args, _: &JobContext) -> StepResult<()> {
        if args.mode == "hang" {
            self.started.notify_one();
            std::future::pending::<()>().await;
        }
        if args.mode == "gate" {
            self.started.notify_one();
            self.release.notified().await;
            return Ok(Step::Done(CallToolResult::success(vec![
                ContentBlock::text("the first worker's result"),
            ])));
        }
        let schema = serde_json::from_value(json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"]
        }))
        .expect("schema");
        let mut requests = InputRequests::new();
        requests.insert(
            "who".to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(
                ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: "Who?".to_owned(),
                    requested_schema: schema,
                },
            )),
        );
        Ok(Step::Ask {
            state: (),
            status: Some("asking".to_owned()),
            requests,
        })
    }

    async fn resume(&self, _: (), event: Event, _: &JobContext) -> StepResult<()> {
        let Event::Input(responses) = event else {
            return Ok(Step::Wait {
                state: (),
                status: None,
                after: Duration::from_secs(3600),
            });
        };
        let name = responses["who"]["content"]["name"].as_str().unwrap_or("?");
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text(format!("hello {name}")),
        ])))
    }
}

struct Fixture {
    /// Stops the runtime when the fixture is dropped.
    _runtime: ManualRuntime,
    tasks: Tasks,
    probe: Probe,
}

/// This worker's name in leases.
const WORKER: &str = "here";

/// A runtime whose tool has a 2-hour TTL and an hour-long step timeout (so
/// only an interrupt ends a hanging step); `run` says whether it runs steps.
async fn fixture(run: bool) -> Fixture {
    fixture_with(run, EngineConfig::default().concurrency).await
}

/// [`fixture`] with `concurrency` step slots.
async fn fixture_with(run: bool, concurrency: usize) -> Fixture {
    let probe = Probe::default();
    let policy = ToolPolicy::default()
        .ttl(Some(Duration::from_secs(7200)))
        .step_timeout(Duration::from_secs(3600));
    let spec = ToolSpec::new("probe", "test", policy, probe.clone());
    let config = EngineConfig {
        worker_id: WORKER.to_owned(),
        concurrency,
        ..EngineConfig::default()
    };
    let runtime =
        ManualRuntime::start(|runtime| runtime.config(config).tool(spec).run_steps(run)).await;
    Fixture {
        tasks: runtime.tasks(),
        _runtime: runtime,
        probe,
    }
}

fn args(mode: &str) -> Map<String, serde_json::Value> {
    let mut args = Map::new();
    args.insert("mode".to_owned(), json!(mode));
    args
}

async fn create(tasks: &Tasks, owner: &str, mode: &str, quota: &TaskQuota) -> TaskRecord {
    let tools = tasks.tools();
    let spec = tools.get("probe").expect("probe tool");
    tasks
        .create(Owner::new(owner), spec, args(mode), quota)
        .await
        .expect("create")
}

/// Follows `id` through the task service's watch until `done` holds.
async fn until(
    tasks: &Tasks,
    owner: &str,
    id: &TaskId,
    done: impl Fn(&TaskRecord) -> bool,
) -> TaskRecord {
    let mut watch = tasks.watch(&Owner::new(owner), vec![id.clone()]);
    let wait = async {
        loop {
            let record = watch.read(id).await.expect("read");
            if done(&record) {
                return record;
            }
            watch.changed(Duration::from_secs(1)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("the task got there within 30 s")
}

#[tokio::test]
async fn create_enforces_the_live_task_cap_per_owner_and_clamps_the_ttl() {
    let f = fixture(false).await;
    let quota = TaskQuota {
        max_live: 2,
        max_ttl: Some(Duration::from_secs(60)),
        ..TaskQuota::default()
    };
    let first = create(&f.tasks, "alice", "ask", &quota).await;
    assert_eq!(first.ttl_ms, Some(60_000), "the tool's 2 h TTL is clamped");
    assert_eq!(first.status_message.as_deref(), Some("queued"));
    create(&f.tasks, "alice", "ask", &quota).await;
    let tools = f.tasks.tools();
    let spec = tools.get("probe").expect("probe tool");
    let refused = f
        .tasks
        .create(Owner::new("alice"), spec, args("ask"), &quota)
        .await
        .expect_err("a third live task is over the cap");
    assert!(
        matches!(
            refused,
            TaskError::TooManyTasks {
                limit: 2,
                active: 2
            }
        ),
        "{refused:?}"
    );
    // Another owner has a cap of its own; no quota caps nothing.
    create(&f.tasks, "bob", "ask", &quota).await;
    let free = create(&f.tasks, "alice", "ask", &TaskQuota::default()).await;
    assert_eq!(free.ttl_ms, Some(7_200_000), "the tool's own TTL");
}

#[tokio::test]
async fn another_owners_task_is_an_unknown_one_for_every_operation() {
    let f = fixture(false).await;
    let task = create(&f.tasks, "alice", "ask", &TaskQuota::default()).await;
    let mallory = Owner::new("mallory");
    assert!(matches!(
        f.tasks.get(&mallory, &task.id).await,
        Err(TaskError::UnknownTask)
    ));
    assert!(matches!(
        f.tasks.cancel(&mallory, &task.id).await,
        Err(TaskError::UnknownTask)
    ));
    let answer = [(
        "who".to_owned(),
        json!({"action": "accept", "content": {"name": "m"}}),
    )]
    .into_iter()
    .collect();
    assert!(matches!(
        f.tasks.answer(&mallory, &task.id, answer).await,
        Err(TaskError::UnknownTask)
    ));
    let unknown = TaskId::from_client("no-such-task".to_owned());
    assert!(matches!(
        f.tasks.get(&Owner::new("alice"), &unknown).await,
        Err(TaskError::UnknownTask)
    ));
    // Alice's task is untouched.
    let still = f
        .tasks
        .get(&Owner::new("alice"), &task.id)
        .await
        .expect("get");
    assert!(!still.cancel_requested);
}

#[tokio::test]
async fn answer_publishes_and_wakes_so_the_task_finishes() {
    let f = fixture(true).await;
    let task = create(&f.tasks, "alice", "ask", &TaskQuota::default()).await;
    until(&f.tasks, "alice", &task.id, |r| {
        r.status == TaskPhase::InputRequired
    })
    .await;
    let mut watch = f.tasks.watch(&Owner::new("alice"), vec![task.id.clone()]);
    let ack = f
        .tasks
        .answer(
            &Owner::new("alice"),
            &task.id,
            [(
                "who".to_owned(),
                json!({"action": "accept", "content": {"name": "ada"}}),
            )]
            .into_iter()
            .collect(),
        )
        .await
        .expect("answer");
    assert_eq!(ack.accepted, ["who"]);
    assert!(ack.complete);
    // The answer itself is announced (not only the step it leads to).
    assert_eq!(
        watch.changed(Duration::from_secs(3600)).await,
        Changed::Task(task.id.clone())
    );
    let done = until(&f.tasks, "alice", &task.id, |r| r.status.is_terminal()).await;
    assert_eq!(done.status, TaskPhase::Completed);
    assert_eq!(
        done.result.expect("result")["content"][0]["text"],
        "hello ada"
    );
    // A second answer to the same request counts for nothing.
    let again = f
        .tasks
        .answer(
            &Owner::new("alice"),
            &task.id,
            [("who".to_owned(), json!({"action": "decline"}))]
                .into_iter()
                .collect(),
        )
        .await
        .expect("answer");
    assert!(again.accepted.is_empty());
}

#[tokio::test]
async fn cancel_interrupts_a_running_step() {
    let f = fixture(true).await;
    let started = f.probe.started.notified();
    let task = create(&f.tasks, "alice", "hang", &TaskQuota::default()).await;
    started.await;
    f.tasks
        .cancel(&Owner::new("alice"), &task.id)
        .await
        .expect("cancel");
    // The step would hang for its hour-long timeout; only the interrupt
    // lets the cancel step run.
    let done = until(&f.tasks, "alice", &task.id, |r| r.status.is_terminal()).await;
    assert_eq!(done.status, TaskPhase::Cancelled);
}

#[tokio::test]
async fn a_watch_wakes_for_its_own_tasks_only() {
    let f = fixture(false).await;
    let mine = create(&f.tasks, "alice", "ask", &TaskQuota::default()).await;
    let other = create(&f.tasks, "alice", "ask", &TaskQuota::default()).await;
    let mut watch = f.tasks.watch(&Owner::new("alice"), vec![mine.id.clone()]);
    let alice = Owner::new("alice");
    // The change is announced before the wait starts; the watch keeps it.
    f.tasks.cancel(&alice, &other.id).await.expect("cancel");
    // Virtual time for the wait only (the store's pool would time out on
    // it): the recheck passes without waiting.
    tokio::time::pause();
    assert_eq!(
        watch.changed(Duration::from_secs(3600)).await,
        Changed::Any,
        "another task's change does not end the wait; the recheck does"
    );
    tokio::time::resume();
    f.tasks
        .cancel(&alice, &other.id)
        .await
        .expect("cancel again");
    f.tasks.cancel(&alice, &mine.id).await.expect("cancel");
    assert_eq!(
        watch.changed(Duration::from_secs(3600)).await,
        Changed::Task(mine.id.clone())
    );
}

/// A backend serving the probe tool, whose background work records that it
/// ran and that it returned.
struct ProbeBackend {
    probe: Probe,
    ran: Arc<Notify>,
    returned: Arc<std::sync::atomic::AtomicBool>,
}

impl Backend for ProbeBackend {
    fn tools(&self) -> Vec<ToolSpec> {
        let policy = ToolPolicy::default().step_timeout(Duration::from_secs(3600));
        vec![ToolSpec::new("probe", "test", policy, self.probe.clone())]
    }

    fn run(&self, _: Nudge, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
        let (ran, returned) = (self.ran.clone(), self.returned.clone());
        Box::pin(async move {
            ran.notify_one();
            shutdown.cancelled().await;
            returned.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    }
}

/// The runtime names a backend by its config section; this one is built
/// by the tests, never from a config.
impl ConfiguredBackend for ProbeBackend {
    const NAME: &'static str = "probe";
    type Config = ();

    async fn from_config(
        (): (),
        _: UpstreamMetrics,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Err("the probe backend is built by its tests".into())
    }
}

#[tokio::test]
async fn stopping_a_runtime_interrupts_its_steps_and_frees_their_leases_at_once() {
    let store: Arc<dyn TaskStore> =
        Arc::new(SqliteStore::open("sqlite::memory:").await.expect("store"));
    let backend = ProbeBackend {
        probe: Probe::default(),
        ran: Arc::new(Notify::new()),
        returned: Arc::default(),
    };
    let (started, ran, returned) = (
        backend.probe.started.clone(),
        backend.ran.clone(),
        backend.returned.clone(),
    );
    let runtime = Runtime::builder(store.clone())
        .clock(Arc::new(ManualClock::starting_at(T0)))
        .config(EngineConfig {
            worker_id: "first".to_owned(),
            // A long lease: only releasing it lets another worker in now.
            lease: Duration::from_secs(3600),
            ..EngineConfig::default()
        })
        .backend(backend)
        .start()
        .expect("start");
    ran.notified().await;
    let tasks = runtime.tasks();
    let tools = tasks.tools();
    let spec = tools.get("probe").expect("probe tool");
    let task = tasks
        .create(
            Owner::new("alice"),
            spec,
            args("hang"),
            &TaskQuota::default(),
        )
        .await
        .expect("create");
    started.notified().await;
    runtime.stop().await.expect("stop");
    assert!(
        returned.load(std::sync::atomic::Ordering::SeqCst),
        "the backend's background work returned before stop did"
    );
    // Another worker claims the task at once, from where it was: the
    // interrupted step left no checkpoint, so it starts again.
    let claimed = store
        .claim("second", 10, Duration::from_secs(30), tasks.now())
        .await
        .expect("claim");
    let again = claimed
        .iter()
        .find(|c| c.task.id == task.id)
        .expect("the task is free for another worker now");
    assert_eq!(again.taken_over_from, None, "released, not expired");
    assert_eq!(again.task.status, TaskPhase::Working);
    assert_eq!(again.task.job_state, None);
    assert_eq!(again.task.steps, 0);
}

#[tokio::test]
async fn a_tool_served_twice_is_refused_naming_both() {
    let store: Arc<dyn TaskStore> =
        Arc::new(SqliteStore::open("sqlite::memory:").await.expect("store"));
    let backend = || ProbeBackend {
        probe: Probe::default(),
        ran: Arc::new(Notify::new()),
        returned: Arc::default(),
    };
    let refused = Runtime::builder(store)
        .backend(backend())
        .backend(backend())
        .start()
        .expect_err("two `probe` tools");
    let text = refused.to_string();
    assert!(
        text.contains("tool `probe` is served by both backend `probe` and backend `probe`"),
        "{text}"
    );
}

#[tokio::test]
async fn a_worker_whose_lease_was_taken_over_cannot_save_its_step() {
    let store: Arc<dyn TaskStore> =
        Arc::new(SqliteStore::open("sqlite::memory:").await.expect("store"));
    let backend = ProbeBackend {
        probe: Probe::default(),
        ran: Arc::new(Notify::new()),
        returned: Arc::default(),
    };
    let (started, release) = (backend.probe.started.clone(), backend.probe.release.clone());
    let runtime = Runtime::builder(store.clone())
        .clock(Arc::new(ManualClock::starting_at(T0)))
        .config(EngineConfig {
            worker_id: "stalled".to_owned(),
            // No heartbeat falls due during the test.
            lease: Duration::from_secs(3600),
            ..EngineConfig::default()
        })
        .backend(backend)
        .start()
        .expect("start");
    let tasks = runtime.tasks();
    let tools = tasks.tools();
    let spec = tools.get("probe").expect("probe tool");
    let task = tasks
        .create(
            Owner::new("alice"),
            spec,
            args("gate"),
            &TaskQuota::default(),
        )
        .await
        .expect("create");
    started.notified().await;
    // Two hours later, as another worker sees it, the lease has run out:
    // it takes the task over.
    let later = tasks.now().saturating_add(Duration::from_secs(2 * 3600));
    let taken = store
        .claim("thief", 10, Duration::from_secs(30), later)
        .await
        .expect("claim");
    let taken = taken
        .iter()
        .find(|c| c.task.id == task.id)
        .expect("taken over");
    assert_eq!(taken.taken_over_from.as_deref(), Some("stalled"));
    // The stalled worker's step now finishes, and the runtime stops, which
    // waits for the step's save attempt. Whichever reaches the save first,
    // the step's result or the shutdown's interruption, it is refused:
    // another worker holds the lease.
    release.notify_one();
    runtime.stop().await.expect("stop");
    let now = store
        .get(&Owner::new("alice"), &task.id, later)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(now.status, TaskPhase::Working, "{now:?}");
    assert_eq!(now.result, None, "the fenced result was not saved");
    assert_eq!(
        now.lease_owner.as_deref(),
        Some("thief"),
        "the new lease holds"
    );
    assert_eq!(now.fence, taken.task.fence);
}

/// A task created while the scheduler runs and has slots free starts at
/// once, leased to this worker by the `INSERT` itself (no claim); with the
/// slots taken it is queued and claimed when one frees up; with no scheduler
/// running it is simply queued.
#[tokio::test]
async fn a_task_created_here_starts_at_once_unless_the_slots_are_taken() {
    let idle = fixture(false).await;
    let queued = create(&idle.tasks, "alice", "ask", &TaskQuota::default()).await;
    assert_eq!(queued.lease_owner, None, "no scheduler: queued for a claim");

    let f = fixture_with(true, 4).await;
    let first = create(&f.tasks, "alice", "gate", &TaskQuota::default()).await;
    assert_eq!(
        first.lease_owner.as_deref(),
        Some(WORKER),
        "created leased to this worker"
    );
    assert_eq!(first.fence, agentgate_core::task::Fence::from_raw(1));
    f.probe.started.notified().await;
    // 3 of 4 slots free is more than a quarter: this one starts at once too.
    let second = create(&f.tasks, "alice", "gate", &TaskQuota::default()).await;
    assert!(second.lease_owner.is_some());
    f.probe.started.notified().await;
    // 2 of 4 free: still more than a quarter.
    let third = create(&f.tasks, "alice", "gate", &TaskQuota::default()).await;
    assert!(third.lease_owner.is_some());
    f.probe.started.notified().await;
    // 1 of 4 free is a quarter: the slot stays with the claim loop, which
    // claims the queued task itself.
    let fourth = create(&f.tasks, "alice", "gate", &TaskQuota::default()).await;
    assert_eq!(fourth.lease_owner, None, "queued: {fourth:?}");
    f.probe.started.notified().await;
    let claimed = f
        .tasks
        .get(&Owner::new("alice"), &fourth.id)
        .await
        .expect("get");
    assert_eq!(claimed.lease_owner.as_deref(), Some(WORKER), "claimed");
    for task in [&first, &second, &third, &fourth] {
        f.probe.release.notify_one();
        let done = until(&f.tasks, "alice", &task.id, |t| t.status.is_terminal()).await;
        assert_eq!(done.status, TaskPhase::Completed, "{done:?}");
    }
}
