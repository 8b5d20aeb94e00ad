//! The scheduler when the store fails under it: a save that fails briefly
//! is saved when the store answers (the step does not run again), a save
//! the store refuses (not an outage) fails the task instead of running the
//! step again, a result the store could not hold (a NUL on PostgreSQL, one
//! over the size limit) ends the task after one run, failing claims back
//! off, and a PostgreSQL restart under load loses no task and repeats no
//! side effect. A step whose heartbeats fail is stopped by its own
//! instance before its lease runs out.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use agentgate_backend::{
    Event, Job, JobContext, Millis, Owner, Step, StepResult, TaskId, TaskPhase, ToolPolicy,
    ToolSpec,
};
use agentgate_core::clock::{Clock, ManualClock, SystemClock};
use agentgate_core::engine::{EngineConfig, TaskError, TaskQuota, Tasks};
use agentgate_core::runtime::Runtime;
use agentgate_core::store::{
    Claimed, InputAck, ListCursor, SqliteStore, StoreError, StoreResult, StoredUsage, SweepReport,
    TaskCount, TaskStore,
};
use agentgate_core::task::{Fence, NewTask, Outcome, TaskRecord};
use agentgate_testkit::spy::{StoreSpy, outage};
use async_trait::async_trait;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// A SQLite store whose next `fail` checkpoints fail the way an outage
/// would, and the `corrupt` ones after them with an error no retry cures.
async fn faulty(fail: usize, corrupt: usize) -> Arc<StoreSpy<SqliteStore>> {
    let store = StoreSpy::new(SqliteStore::open("sqlite::memory:").await.expect("store"));
    store.fail_next("checkpoint", fail, outage);
    store.fail_next("checkpoint", corrupt, || StoreError::Corrupt {
        task: "injected".into(),
        reason: "injected".into(),
    });
    Arc::new(store)
}

/// Counts its runs and completes at once.
#[derive(Clone, Default)]
struct Once(Arc<AtomicUsize>);

impl Job for Once {
    type Args = serde_json::Map<String, Value>;
    type State = ();

    async fn start(&self, _: Self::Args, _: &JobContext) -> StepResult<()> {
        let run = self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text(format!("run {run}")),
        ])))
    }

    async fn resume(&self, _: (), _: Event, cx: &JobContext) -> StepResult<()> {
        self.start(Default::default(), cx).await
    }
}

/// This instance's name in leases.
const WORKER: &str = "here";

/// A runtime on `store` on `clock` serving one tool, `spec`.
fn start(
    store: Arc<dyn TaskStore>,
    spec: ToolSpec,
    config: EngineConfig,
    clock: Arc<dyn Clock>,
) -> Runtime {
    let config = EngineConfig {
        worker_id: WORKER.to_owned(),
        ..config
    };
    Runtime::builder(store)
        .clock(clock)
        .config(config)
        .tool(spec)
        .start()
        .expect("start")
}

/// [`start`] with `job` as the `once` tool, on the wall clock.
fn engine(store: Arc<StoreSpy<SqliteStore>>, job: Once) -> Runtime {
    let config = EngineConfig {
        idle_poll: Duration::from_millis(50),
        ..EngineConfig::default()
    };
    let spec = ToolSpec::new("once", "test", ToolPolicy::default(), job);
    start(store, spec, config, Arc::new(SystemClock))
}

/// Creates a task of the runtime's one tool for `t`.
async fn create(tasks: &Tasks) -> Result<TaskId, TaskError> {
    let tools = tasks.tools();
    let spec = tools.iter().next().expect("a tool");
    let args = serde_json::Map::new();
    let task = tasks
        .create(Owner::new("t"), spec, args, &TaskQuota::default())
        .await?;
    Ok(task.id)
}

/// Waits for the task's changes until it ends (bounded, well under the
/// 30 s lease, so a lease running out cannot be what ends it).
async fn until_terminal(tasks: &Tasks, id: &TaskId) -> TaskRecord {
    let mut watch = tasks.watch(&Owner::new("t"), vec![id.clone()]);
    loop {
        let task = watch.read(id).await.expect("get");
        if task.status.is_terminal() {
            return task;
        }
        tokio::time::timeout(Duration::from_secs(15), watch.next_change())
            .await
            .expect("no change within 15 s");
    }
}

async fn a_save_that_fails_briefly_is_saved_when_the_store_answers_and_the_step_runs_once() {
    let store = faulty(3, 0).await;
    let job = Once::default();
    let runtime = engine(store.clone(), job.clone());
    let id = create(&runtime.tasks()).await.expect("create");
    let task = until_terminal(&runtime.tasks(), &id).await;
    assert_eq!(task.status, TaskPhase::Completed);
    assert_eq!(job.0.load(Ordering::SeqCst), 1, "the step ran once");
    assert_eq!(store.calls("checkpoint"), 4, "3 failed saves, then one");
    assert_eq!(store.calls("release"), 0);
    assert_eq!(task.fence, Fence::from_raw(1), "never claimed again");
    runtime.stop().await.expect("stop");
}

async fn a_save_the_store_refuses_fails_the_task_and_the_step_runs_once() {
    // Not an outage: saving the same result again would be refused again.
    let store = faulty(0, 1).await;
    let job = Once::default();
    let runtime = engine(store.clone(), job.clone());
    let id = create(&runtime.tasks()).await.expect("create");
    let task = until_terminal(&runtime.tasks(), &id).await;
    assert_eq!(task.status, TaskPhase::Failed, "{task:?}");
    let message = task.error.as_ref().and_then(|e| e["message"].as_str());
    assert_eq!(
        message,
        Some("the step's result could not be stored: corrupt task row injected: injected")
    );
    assert_eq!(job.0.load(Ordering::SeqCst), 1, "the step ran once");
    assert_eq!(store.calls("checkpoint"), 2, "the result, then the failure");
    assert_eq!(store.calls("release"), 0, "the lease was not given up");
    assert_eq!(task.fence, Fence::from_raw(1), "never claimed again");
    runtime.stop().await.expect("stop");
}

/// When even the task's failure cannot be stored, the lease is not given
/// up: the step runs again only once the lease has run out, not at once.
async fn a_task_whose_failure_cannot_be_stored_either_waits_out_its_lease() {
    const T0: Millis = Millis::from_unix_ms(1_800_000_000_000);
    let store = faulty(0, 2).await;
    let job = Once::default();
    let spec = ToolSpec::new("once", "test", ToolPolicy::default(), job.clone());
    let clock = ManualClock::starting_at(T0);
    let lease = Duration::from_secs(30);
    let config = EngineConfig {
        lease,
        ..EngineConfig::default()
    };
    let runtime = start(store.clone(), spec, config, Arc::new(clock.clone()));
    let id = create(&runtime.tasks()).await.expect("create");
    let bound = Duration::from_secs(15);
    agentgate_testkit::poll::eventually("the result and the failure refused", bound, || {
        store.calls("checkpoint") >= 2
    })
    .await;
    let task = store
        .get(&Owner::new("t"), &id, clock.now())
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.lease_owner.as_deref(), Some(WORKER));
    assert_eq!(store.calls("release"), 0, "the lease was kept");
    assert_eq!(job.0.load(Ordering::SeqCst), 1, "the step ran once");

    // Once the lease has run out, the task is claimed again and its step
    // (the store now saving) completes it.
    clock.set(T0.saturating_add(lease));
    let task = until_terminal(&runtime.tasks(), &id).await;
    assert_eq!(task.status, TaskPhase::Completed, "{task:?}");
    assert_eq!(job.0.load(Ordering::SeqCst), 2, "once per lease");
    assert_eq!(task.fence, Fence::from_raw(2));
    assert_eq!(store.calls("release"), 0, "the lease ran out by itself");
    runtime.stop().await.expect("the engine stops");
}

/// Completes at once with `text` as its result, counting its runs.
#[derive(Clone)]
struct Says {
    runs: Arc<AtomicUsize>,
    text: String,
}

impl Says {
    fn new(text: impl Into<String>) -> Self {
        Self {
            runs: Arc::default(),
            text: text.into(),
        }
    }
}

impl Job for Says {
    type Args = serde_json::Map<String, Value>;
    type State = ();

    async fn start(&self, _: Self::Args, _: &JobContext) -> StepResult<()> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text(self.text.clone()),
        ])))
    }

    async fn resume(&self, _: (), _: Event, cx: &JobContext) -> StepResult<()> {
        self.start(Default::default(), cx).await
    }
}

/// Runs a `once` task of `job` on `store` to its end.
async fn run_says(store: Arc<dyn TaskStore>, job: Says, config: EngineConfig) -> TaskRecord {
    let spec = ToolSpec::new("once", "test", ToolPolicy::default(), job);
    let runtime = start(store, spec, config, Arc::new(SystemClock));
    let id = create(&runtime.tasks()).await.expect("create");
    let task = until_terminal(&runtime.tasks(), &id).await;
    runtime.stop().await.expect("the engine stops");
    task
}

/// The first text block of a completed task's result.
fn result_text(task: &TaskRecord) -> Option<&str> {
    task.result.as_ref()?["content"][0]["text"].as_str()
}

async fn a_result_with_a_nul_completes_on_postgres_and_the_step_runs_once() {
    let schema = agentgate_testkit::pg::TestSchema::create("agentgate_test").await;
    let store = agentgate_core::store::PostgresStore::connect_with(
        schema.options(),
        sqlx::postgres::PgPoolOptions::new().max_connections(4),
    )
    .await
    .expect("open store in test schema");
    let job = Says::new("agent status: ready\u{0}");
    let config = EngineConfig {
        idle_poll: Duration::from_millis(50),
        ..EngineConfig::default()
    };
    let task = run_says(Arc::new(store), job.clone(), config).await;
    assert_eq!(task.status, TaskPhase::Completed, "{task:?}");
    assert_eq!(result_text(&task), Some("agent status: ready\u{FFFD}"));
    assert_eq!(job.runs.load(Ordering::SeqCst), 1, "the step ran once");
    assert_eq!(task.fence, Fence::from_raw(1), "never claimed again");
}

async fn an_oversized_result_fails_the_task_naming_the_limit() {
    let store = faulty(0, 0).await;
    let job = Says::new("x".repeat(2_000));
    let config = EngineConfig {
        idle_poll: Duration::from_millis(50),
        max_result_bytes: 1_000,
        ..EngineConfig::default()
    };
    let task = run_says(store.clone(), job.clone(), config).await;
    assert_eq!(task.status, TaskPhase::Failed, "{task:?}");
    let message = task
        .error
        .as_ref()
        .and_then(|e| e["message"].as_str())
        .unwrap_or_default();
    assert!(
        message.contains("over the gateway's limit of 1000 bytes (engine.max_result_bytes)"),
        "{message}"
    );
    assert!(task.result.is_none(), "nothing of the result is kept");
    assert_eq!(job.runs.load(Ordering::SeqCst), 1, "the step ran once");
    assert_eq!(store.calls("checkpoint"), 1);
    assert_eq!(store.calls("release"), 0);
}

/// Once started, never ends by itself: says when it started and when its
/// future was dropped (the engine stopped it).
#[derive(Clone, Default)]
struct Hangs {
    started: Arc<tokio::sync::Notify>,
    stopped: Arc<tokio::sync::Notify>,
    was_stopped: Arc<std::sync::atomic::AtomicBool>,
}

/// Tells the test when the step holding it is dropped.
struct Stopped(Hangs);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.was_stopped.store(true, Ordering::SeqCst);
        self.0.stopped.notify_one();
    }
}

impl Job for Hangs {
    type Args = serde_json::Map<String, Value>;
    type State = ();

    async fn start(&self, _: Self::Args, _: &JobContext) -> StepResult<()> {
        let _stopped = Stopped(self.clone());
        self.started.notify_one();
        std::future::pending().await
    }

    async fn resume(&self, _: (), _: Event, cx: &JobContext) -> StepResult<()> {
        self.start(Default::default(), cx).await
    }
}

async fn a_step_whose_lease_cannot_be_renewed_stops_before_the_lease_ends() {
    const T0: Millis = Millis::from_unix_ms(1_800_000_000_000);
    let store = faulty(0, 0).await;
    store.fail_next("heartbeat", 1_000, outage);
    let job = Hangs::default();
    let spec = ToolSpec::new("once", "test", ToolPolicy::default(), job.clone());
    let clock = ManualClock::starting_at(T0);
    let lease = Duration::from_secs(30);
    let config = EngineConfig {
        lease,
        ..EngineConfig::default()
    };
    let runtime = start(store.clone(), spec, config, Arc::new(clock.clone()));
    let id = create(&runtime.tasks()).await.expect("create");
    let bound = Duration::from_secs(15);
    tokio::time::timeout(bound, job.started.notified())
        .await
        .expect("the step started");
    let leased = store
        .get(&Owner::new("t"), &id, T0)
        .await
        .expect("get")
        .expect("task");
    assert_eq!(leased.lease_until, Some(T0.saturating_add(lease)));

    // 26.999 s in: the first heartbeat (due at 10 s) fails, and the step
    // still runs, 3 s before its lease ends.
    clock.set(T0.saturating_add(Duration::from_millis(26_999)));
    agentgate_testkit::poll::eventually("a heartbeat", bound, || store.calls("heartbeat") >= 1)
        .await;
    assert!(!job.was_stopped.load(Ordering::SeqCst), "stopped too early");

    // 27 s in, a tenth of the lease before it ends: the step is stopped by
    // its own instance, before any other may claim the task.
    clock.set(T0.saturating_add(Duration::from_secs(27)));
    tokio::time::timeout(bound, job.stopped.notified())
        .await
        .expect("the step was stopped before its lease ended");
    assert!(clock.now() < T0.saturating_add(lease));
    assert_eq!(
        store.calls("checkpoint"),
        0,
        "the stopped step saved nothing"
    );
    let task = store
        .get(&Owner::new("t"), &id, clock.now())
        .await
        .expect("get")
        .expect("task");
    assert_eq!(task.status, TaskPhase::Working);
    assert_eq!(task.steps, 0, "no step was saved");
    assert_eq!(
        task.lease_until,
        Some(T0.saturating_add(lease)),
        "no heartbeat reached the store"
    );
    runtime.stop().await.expect("the engine stops");
}

/// A store on which every claim fails while reads say a task is overdue,
/// as on a full disk; counts the claims and the looks for the next due
/// task. Nothing here touches a database, so paused time moves only when
/// the engine waits.
#[derive(Debug, Default)]
struct Full {
    claims: AtomicU64,
    /// A task the first claim hands out, if any (later claims fail).
    running: std::sync::Mutex<Option<Claimed>>,
    next_dues: AtomicU64,
}

/// `next_due` answers after which [`Full`] says nothing is due: a claim
/// loop that spins stops there, so a test sees the count instead of
/// hanging.
const SPIN: u64 = 1_000;

#[async_trait]
impl TaskStore for Full {
    async fn create(&self, _: NewTask) -> StoreResult<TaskRecord> {
        Err(outage())
    }
    async fn create_claimed(&self, _: NewTask, _: &str, _: Duration) -> StoreResult<TaskRecord> {
        Err(outage())
    }
    async fn get(&self, _: &Owner, _: &TaskId, _: Millis) -> StoreResult<Option<TaskRecord>> {
        Ok(None)
    }
    async fn record_input(
        &self,
        _: &Owner,
        _: &TaskId,
        _: BTreeMap<String, Value>,
        _: Millis,
    ) -> StoreResult<InputAck> {
        Err(outage())
    }
    async fn request_cancel(&self, _: &Owner, _: &TaskId, _: Millis) -> StoreResult<()> {
        Err(outage())
    }
    async fn claim(&self, _: &str, _: usize, _: Duration, _: Millis) -> StoreResult<Vec<Claimed>> {
        if let Some(task) = self.running.lock().expect("running").take() {
            return Ok(vec![task]);
        }
        self.claims.fetch_add(1, Ordering::SeqCst);
        Err(outage())
    }
    async fn heartbeat(
        &self,
        _: &TaskId,
        _: &str,
        _: Fence,
        _: Duration,
        _: Millis,
    ) -> StoreResult<()> {
        Err(outage())
    }
    async fn checkpoint(
        &self,
        _: &TaskId,
        _: &str,
        _: Fence,
        _: Outcome,
        _: Millis,
    ) -> StoreResult<TaskRecord> {
        Err(outage())
    }
    async fn release(&self, _: &TaskId, _: &str, _: Fence, _: Millis) -> StoreResult<()> {
        Err(outage())
    }
    async fn nudge(&self, _: &TaskId, _: Millis) -> StoreResult<bool> {
        Err(outage())
    }
    async fn release_all(&self, _: &str, _: Millis) -> StoreResult<u64> {
        Err(outage())
    }
    async fn next_due(&self) -> StoreResult<Option<Millis>> {
        let looks = self.next_dues.fetch_add(1, Ordering::SeqCst);
        Ok((looks < SPIN).then_some(Millis::EPOCH))
    }
    async fn count_by_tool_and_status(&self) -> StoreResult<Vec<TaskCount>> {
        Ok(Vec::new())
    }
    async fn count_active(&self, _: &Owner, _: Millis, _: u64) -> StoreResult<u64> {
        Ok(0)
    }
    async fn list(
        &self,
        _: &Owner,
        _: Millis,
        _: Option<&ListCursor>,
        _: u32,
    ) -> StoreResult<Vec<TaskRecord>> {
        Ok(Vec::new())
    }
    async fn stored_usage(&self, _: &Owner, _: u64) -> StoreResult<StoredUsage> {
        Ok(StoredUsage::default())
    }
    async fn history(
        &self,
        _: &Owner,
        _: &TaskId,
        _: Millis,
    ) -> StoreResult<Option<Vec<agentgate_core::store::TaskEvent>>> {
        Ok(None)
    }
    async fn oldest_ended(&self, _: &Owner) -> StoreResult<Option<Millis>> {
        Ok(None)
    }
    async fn sweep(&self, _: Millis, _: Duration, _: Option<Duration>) -> StoreResult<SweepReport> {
        Err(outage())
    }
    async fn secret(&self, _: &str, _: Vec<u8>) -> StoreResult<Vec<u8>> {
        Err(outage())
    }
    async fn replace_secret(&self, _: &str, _: &[u8], _: Vec<u8>) -> StoreResult<bool> {
        Err(outage())
    }
    async fn bind_upstream_id(&self, _: &str, _: &str, _: &Owner, _: Millis) -> StoreResult<Owner> {
        Err(outage())
    }
    async fn upstream_id_owner(&self, _: &str, _: &str) -> StoreResult<Option<Owner>> {
        Err(outage())
    }
}

async fn failing_claims_back_off_instead_of_spinning() {
    let store = Arc::new(Full::default());
    let spec = ToolSpec::new("once", "test", ToolPolicy::default(), Once::default());
    let config = EngineConfig::default();
    let runtime = start(store.clone(), spec, config, Arc::new(SystemClock));
    // Ten seconds of virtual time with every claim failing and a task
    // overdue: the loop waits 100 ms doubling to 5 s between tries, so it
    // tries at 0, 0.1, 0.3, 0.7, 1.5, 3.1 and 6.3 s. Spinning would be
    // thousands.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(store.claims.load(Ordering::SeqCst), 7);
    runtime.stop().await.expect("the engine stops");
}

/// A task is overdue but cannot be claimed (here: every step slot is
/// busy; on PostgreSQL also a lease live by the server's clock while this
/// instance's says it ran out): the claim loop looks again after
/// `idle_poll` or when a step ends, not at once and for ever.
async fn a_due_task_that_cannot_be_claimed_does_not_make_the_claim_loop_spin() {
    // The task the store hands out, leased to this engine, never run.
    let claimed = Claimed {
        task: TaskRecord {
            id: TaskId::generate(),
            owner: Owner::new("t"),
            tool: "hang".into(),
            args: json!({}),
            status: TaskPhase::Working,
            status_message: None,
            job_state: None,
            input_requests: BTreeMap::new(),
            input_responses: BTreeMap::new(),
            used_input_keys: Vec::new(),
            cancel_requested: false,
            result: None,
            error: None,
            created_at: Millis::EPOCH,
            updated_at: Millis::EPOCH,
            ttl_ms: None,
            expires_at: None,
            due_at: Some(Millis::EPOCH),
            lease_owner: Some("w".into()),
            lease_until: None,
            fence: Fence::from_raw(1),
            steps: 0,
            failures: 0,
        },
        taken_over_from: None,
    };
    let store = Arc::new(Full {
        running: std::sync::Mutex::new(Some(claimed)),
        ..Full::default()
    });
    let job = Hangs::default();
    let spec = ToolSpec::new("hang", "test", ToolPolicy::default(), job.clone());
    let config = EngineConfig {
        concurrency: 1,
        idle_poll: Duration::from_secs(1),
        ..EngineConfig::default()
    };
    let runtime = start(store.clone(), spec, config, Arc::new(SystemClock));
    job.started.notified().await;
    // Ten seconds of virtual time with the one slot busy and a task
    // overdue: a look a second, not thousands.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let looks = store.next_dues.load(Ordering::SeqCst);
    assert!(looks <= 15, "the claim loop looked {looks} times in 10 s");
    runtime.stop().await.expect("the engine stops");
}

/// Does its side effect (counted per task) in its first step, waits, then
/// completes: a task has two checkpoints for an outage to fall between.
#[derive(Clone, Default)]
struct Effect(Arc<std::sync::Mutex<std::collections::HashMap<TaskId, u32>>>);

impl Job for Effect {
    type Args = serde_json::Map<String, Value>;
    type State = ();

    async fn start(&self, _: Self::Args, cx: &JobContext) -> StepResult<()> {
        *self
            .0
            .lock()
            .expect("effects")
            .entry(cx.task_id.clone())
            .or_default() += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(Step::Wait {
            state: (),
            status: Some("effect done".into()),
            after: Duration::from_millis(100),
        })
    }

    async fn resume(&self, _: (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text("done"),
        ])))
    }
}

async fn postgres_stopped_and_restarted_under_load_loses_no_task_and_repeats_no_effect() {
    use agentgate_testkit::faults::{PgCluster, unavailable};
    let pg = PgCluster::start().unwrap_or_else(|why| unavailable(&why));
    let store: Arc<dyn TaskStore> = Arc::new(
        agentgate_core::store::PostgresStore::open(&pg.url())
            .await
            .expect("open"),
    );
    let job = Effect::default();
    let spec = ToolSpec::new("effect", "test", ToolPolicy::default(), job.clone());
    let config = EngineConfig {
        idle_poll: Duration::from_millis(50),
        concurrency: 16,
        ..EngineConfig::default()
    };
    let runtime = start(store.clone(), spec, config, Arc::new(SystemClock));

    // Four clients create tasks throughout; the database is stopped
    // one second in and started again 3.5 s later (longer than the pool's 2 s
    // acquire timeout, so some creates are refused).
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut creators = Vec::new();
    for _ in 0..4 {
        let (tasks, stop) = (runtime.tasks(), stop.clone());
        creators.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut refused = 0u32;
            while !stop.load(Ordering::Relaxed) {
                match create(&tasks).await {
                    Ok(id) => acked.push(id),
                    Err(TaskError::Store(e)) => {
                        assert!(e.outage().is_some(), "a refusal names the outage: {e}");
                        refused += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(other) => panic!("a create was refused for another reason: {other}"),
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (acked, refused)
        }));
    }
    // pg_ctl blocks: it runs on a thread of its own while the creators and
    // the engine go on.
    let pg = Arc::new(pg);
    let control = {
        let pg = pg.clone();
        tokio::task::spawn_blocking(move || {
            std::thread::sleep(Duration::from_secs(1));
            pg.stop("fast").expect("stop PostgreSQL");
            std::thread::sleep(Duration::from_millis(3500));
            pg.start_again().expect("start PostgreSQL again");
        })
    };
    control.await.expect("pg_ctl thread");
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    let mut refused = 0;
    for creator in creators {
        let (a, r) = creator.await.expect("creator");
        acked.extend(a);
        refused += r;
    }
    assert!(refused > 0, "no create met the outage");
    assert!(acked.len() > 20, "only {} tasks were created", acked.len());

    // Every acknowledged task completes (a claim whose answer was lost in
    // the outage waits for its 30 s lease), each with its effect done once.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    for id in &acked {
        loop {
            let task = store
                .get(&Owner::new("t"), id, SystemClock.now())
                .await
                .expect("get")
                .unwrap_or_else(|| panic!("acknowledged task {id} was lost"));
            if task.status.is_terminal() {
                assert_eq!(task.status, TaskPhase::Completed, "{id}: {task:?}");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{id} did not complete: {task:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let effects = job.0.lock().expect("effects").clone();
    for id in &acked {
        assert_eq!(
            effects.get(id),
            Some(&1),
            "{id}: side effect not done exactly once"
        );
    }
    let repeated: Vec<_> = effects.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "side effects repeated: {repeated:?}");
    runtime.stop().await.expect("engine");
}

/// This file's tests, for the binary's `main`.
pub(crate) fn register(
    tests: agentgate_testkit::harness::Tests,
) -> agentgate_testkit::harness::Tests {
    tests
        .test(
            "a_save_that_fails_briefly_is_saved_when_the_store_answers_and_the_step_runs_once",
            a_save_that_fails_briefly_is_saved_when_the_store_answers_and_the_step_runs_once,
        )
        .test(
            "a_save_the_store_refuses_fails_the_task_and_the_step_runs_once",
            a_save_the_store_refuses_fails_the_task_and_the_step_runs_once,
        )
        .test(
            "a_task_whose_failure_cannot_be_stored_either_waits_out_its_lease",
            a_task_whose_failure_cannot_be_stored_either_waits_out_its_lease,
        )
        .test(
            "a_result_with_a_nul_completes_on_postgres_and_the_step_runs_once",
            a_result_with_a_nul_completes_on_postgres_and_the_step_runs_once,
        )
        .test(
            "an_oversized_result_fails_the_task_naming_the_limit",
            an_oversized_result_fails_the_task_naming_the_limit,
        )
        .test(
            "a_step_whose_lease_cannot_be_renewed_stops_before_the_lease_ends",
            a_step_whose_lease_cannot_be_renewed_stops_before_the_lease_ends,
        )
        .paused(
            "failing_claims_back_off_instead_of_spinning",
            failing_claims_back_off_instead_of_spinning,
        )
        .paused(
            "a_due_task_that_cannot_be_claimed_does_not_make_the_claim_loop_spin",
            a_due_task_that_cannot_be_claimed_does_not_make_the_claim_loop_spin,
        )
        .test(
            "postgres_stopped_and_restarted_under_load_loses_no_task_and_repeats_no_effect",
            postgres_stopped_and_restarted_under_load_loses_no_task_and_repeats_no_effect,
        )
}
