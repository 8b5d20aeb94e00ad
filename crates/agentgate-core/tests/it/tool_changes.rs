//! A backend whose tools change while the runtime runs
//! ([`Nudge::tools_changed`]): the runtime serves the new list, and a task
//! of a tool that is not served waits for it while the backend says its
//! tools may be missing yet ([`Backend::tools_pending`]), else fails.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentgate_backend::{
    Backend, BoxFuture, ConfiguredBackend, Event, Job, JobContext, JobError, Nudge, Owner, Step,
    StepResult, TaskPhase, ToolPolicy, ToolSpec, UpstreamMetrics,
};
use agentgate_core::clock::Clock as _;
use agentgate_core::engine::EngineConfig;
use agentgate_core::store::{SqliteStore, TaskStore};
use agentgate_testkit::engine::ManualRuntime;
use agentgate_testkit::eventually;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

/// Answers "echoed" at once; fails retryably first while `fail_once`.
#[derive(Clone)]
struct Echo {
    fail_once: Arc<AtomicBool>,
}

impl Job for Echo {
    type Args = Map<String, Value>;
    type State = ();

    async fn start(&self, _: Map<String, Value>, _: &JobContext) -> StepResult<()> {
        if self.fail_once.swap(false, Ordering::SeqCst) {
            return Err(JobError::Retryable {
                message: "not yet".to_owned(),
                retry_after: None,
            });
        }
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text("echoed"),
        ])))
    }

    async fn resume(&self, (): (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::cancelled())
    }
}

/// Waits 10 s, then answers "twice".
#[derive(Clone)]
struct Twice;

impl Job for Twice {
    type Args = Map<String, Value>;
    type State = ();

    async fn start(&self, _: Map<String, Value>, _: &JobContext) -> StepResult<()> {
        Ok(Step::Wait {
            state: (),
            status: Some("first step done".to_owned()),
            after: Duration::from_secs(10),
        })
    }

    async fn resume(&self, (): (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text("twice"),
        ])))
    }
}

/// Serves `echo` and `twice` while `serves`; its tools may be missing while `pending`;
/// hands the test its nudge.
#[derive(Clone, Default)]
struct Changing {
    serves: Arc<AtomicBool>,
    pending: Arc<AtomicBool>,
    fail_once: Arc<AtomicBool>,
    nudge: Arc<Mutex<Option<Nudge>>>,
}

impl Backend for Changing {
    fn tools(&self) -> Vec<ToolSpec> {
        if self.serves.load(Ordering::SeqCst) {
            let echo = Echo {
                fail_once: self.fail_once.clone(),
            };
            vec![
                ToolSpec::new("echo", "echoes", ToolPolicy::default(), echo),
                ToolSpec::new("twice", "waits, then answers", ToolPolicy::default(), Twice),
            ]
        } else {
            Vec::new()
        }
    }

    fn tools_pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }

    fn run(&self, nudge: Nudge, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
        *self.nudge.lock().expect("lock") = Some(nudge);
        Box::pin(async move { shutdown.cancelled().await })
    }
}

impl ConfiguredBackend for Changing {
    const NAME: &'static str = "changing";
    type Config = ();

    async fn from_config(
        (): (),
        _: UpstreamMetrics,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Err("built by its tests".into())
    }
}

/// A task of `echo`, created (not run) by a runtime that served it, on a
/// store the next runtime opens.
async fn task_left_from_before(owner: &Owner) -> (Arc<dyn TaskStore>, agentgate_backend::TaskId) {
    let store: Arc<dyn TaskStore> =
        Arc::new(SqliteStore::open("sqlite::memory:").await.expect("store"));
    let before = Changing::default();
    before.serves.store(true, Ordering::SeqCst);
    // On the same clock as the runtimes below, so the task is not expired.
    let runtime = ManualRuntime::on(store.clone(), |builder| {
        builder.backend(before).run_steps(false)
    });
    let task = runtime
        .create(owner, "echo", Value::Object(Map::new()))
        .await;
    runtime.runtime().shutdown_token().cancel();
    (store, task.id)
}

#[tokio::test]
async fn a_task_waits_for_a_tool_its_backend_has_not_listed_yet() {
    let owner = Owner::new("alice");
    let (store, id) = task_left_from_before(&owner).await;
    let backend = Changing::default();
    backend.pending.store(true, Ordering::SeqCst);
    let runtime = ManualRuntime::on(store, |builder| builder.backend(backend.clone()));
    let tasks = runtime.tasks();
    assert!(tasks.tools().get("echo").is_none());

    // Its first step finds no tool, and waits, saying so.
    let mut watch = tasks.watch(&owner, vec![id.clone()]);
    let waiting = loop {
        let task = watch.read(&id).await.expect("read");
        if task.steps > 0 || task.failures > 0 {
            break task;
        }
        watch.changed(Duration::from_secs(30)).await;
    };
    assert_eq!(waiting.status, TaskPhase::Working, "{waiting:?}");
    assert_eq!(
        waiting.status_message.as_deref(),
        Some(
            "waiting for tool `echo`: its server has not listed its tools since this instance \
             started"
        )
    );

    // The backend lists it: served at once, and the task completes at its
    // next look, 5 s later.
    backend.serves.store(true, Ordering::SeqCst);
    backend.pending.store(false, Ordering::SeqCst);
    let nudge = eventually("the backend's nudge", Duration::from_secs(10), || {
        backend.nudge.lock().expect("lock").clone()
    })
    .await;
    nudge.tools_changed();
    assert!(tasks.tools().get("echo").is_some(), "echo served again");
    let driven = runtime.drive_to_end(&owner, &id).await;
    assert_eq!(driven.task.status, TaskPhase::Completed, "{driven:?}");
    assert_eq!(driven.waits, vec![Duration::from_secs(5)]);
}

#[tokio::test]
async fn a_task_of_a_tool_no_backend_will_serve_fails_at_once() {
    let owner = Owner::new("alice");
    let (store, id) = task_left_from_before(&owner).await;
    let runtime = ManualRuntime::on(store, |builder| builder.backend(Changing::default()));
    let driven = runtime.drive_to_end(&owner, &id).await;
    assert_eq!(driven.task.status, TaskPhase::Failed, "{driven:?}");
    assert!(driven.waits.is_empty(), "{driven:?}");
    let error = driven.task.error.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        error.contains("tool `echo` is not served by this instance"),
        "{error}"
    );
}

#[tokio::test]
async fn a_task_stops_waiting_for_its_tool_after_retry_for() {
    let owner = Owner::new("alice");
    let (store, id) = task_left_from_before(&owner).await;
    let backend = Changing::default();
    backend.pending.store(true, Ordering::SeqCst);
    let config = EngineConfig {
        retry_for: Duration::from_secs(20),
        ..EngineConfig::default()
    };
    let runtime = ManualRuntime::on(store, |builder| builder.config(config).backend(backend));
    let driven = runtime.drive_to_end(&owner, &id).await;
    assert_eq!(driven.task.status, TaskPhase::Failed, "{driven:?}");
    assert_eq!(driven.waits, vec![Duration::from_secs(5); 4]);
    let error = driven.task.error.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        error
            .contains("tool `echo` is not served by this instance: it has not been listed for 20s"),
        "{error}"
    );
}

#[tokio::test]
async fn looks_for_a_pending_tool_are_not_failures_of_its_job() {
    let owner = Owner::new("alice");
    let (store, id) = task_left_from_before(&owner).await;
    let backend = Changing::default();
    backend.pending.store(true, Ordering::SeqCst);
    // Two failures in a row end a task: three looks for the tool would,
    // were they counted against its job.
    let config = EngineConfig {
        max_retries: 2,
        ..EngineConfig::default()
    };
    let runtime = ManualRuntime::on(store, |builder| {
        builder.config(config).backend(backend.clone())
    });
    let tasks = runtime.tasks();
    let mut watch = tasks.watch(&owner, vec![id.clone()]);
    loop {
        let task = watch.read(&id).await.expect("read");
        if task.failures >= 3 {
            break;
        }
        if let Some(due) = task.due_at.filter(|due| *due > runtime.clock().now()) {
            runtime.clock().set(due);
        }
        watch.changed(Duration::from_secs(30)).await;
    }
    // The tool comes back, as a job that fails once, retryably: that is
    // its first failure, so it is retried and completes.
    backend.fail_once.store(true, Ordering::SeqCst);
    backend.serves.store(true, Ordering::SeqCst);
    backend.pending.store(false, Ordering::SeqCst);
    let nudge = backend.nudge.lock().expect("lock").clone().expect("nudge");
    nudge.tools_changed();
    let driven = runtime.drive_to_end(&owner, &id).await;
    assert_eq!(driven.task.status, TaskPhase::Completed, "{driven:?}");
    assert!(
        !backend.fail_once.load(Ordering::SeqCst),
        "the job failed once before it completed"
    );
}

#[tokio::test]
async fn a_task_waits_for_a_tool_its_server_stopped_listing_for_a_while() {
    let owner = Owner::new("alice");
    let store: Arc<dyn TaskStore> =
        Arc::new(SqliteStore::open("sqlite::memory:").await.expect("store"));
    let backend = Changing::default();
    backend.serves.store(true, Ordering::SeqCst);
    let runtime = ManualRuntime::on(store, |builder| builder.backend(backend.clone()));
    let tasks = runtime.tasks();
    let task = runtime
        .create(&owner, "twice", Value::Object(Map::new()))
        .await;
    let id = task.id;
    let mut watch = tasks.watch(&owner, vec![id.clone()]);
    let waiting = loop {
        let task = watch.read(&id).await.expect("read");
        if task.steps > 0 {
            break task;
        }
        watch.changed(Duration::from_secs(30)).await;
    };

    // Its server stops listing it while the task waits for its next step.
    backend.serves.store(false, Ordering::SeqCst);
    let nudge = eventually("the backend's nudge", Duration::from_secs(10), || {
        backend.nudge.lock().expect("lock").clone()
    })
    .await;
    nudge.tools_changed();
    assert!(tasks.tools().get("twice").is_none());
    runtime
        .clock()
        .set(waiting.due_at.expect("a waiting task is due"));
    let looked = loop {
        let task = watch.read(&id).await.expect("read");
        if task.failures > 0 {
            break task;
        }
        watch.changed(Duration::from_secs(30)).await;
    };
    assert_eq!(looked.status, TaskPhase::Working, "{looked:?}");
    assert_eq!(
        looked.status_message.as_deref(),
        Some("waiting for tool `twice`: its server no longer lists it")
    );

    // It lists it again: the task goes on from its checkpoint.
    backend.serves.store(true, Ordering::SeqCst);
    nudge.tools_changed();
    let driven = runtime.drive_to_end(&owner, &id).await;
    assert_eq!(driven.task.status, TaskPhase::Completed, "{driven:?}");
    assert_eq!(driven.task.steps, 2, "{driven:?}");
}
