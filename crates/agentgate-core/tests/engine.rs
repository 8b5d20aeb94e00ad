//! The scheduler with real jobs on an in-memory store: retries, give-up, and
//! fencing of a worker whose lease was taken over.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentgate_core::clock::{Clock as _, SystemClock};
use agentgate_core::job::{Event, Job, JobContext, JobError, Step, StepResult, ToolSpec};
use agentgate_core::registry::ToolRegistry;
use agentgate_core::scheduler::{Engine, EngineConfig};
use agentgate_core::store::{SqliteStore, TaskStore};
use agentgate_core::task::{
    NewTask, Owner, RetryPolicy, TaskId, TaskRecord, TaskStatus, ToolPolicy,
};
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Deserialize, JsonSchema)]
struct Args {
    /// Fail this many times (retryably) before succeeding.
    failures: usize,
}

/// Counts its runs; fails retryably `failures` times, then completes.
#[derive(Clone, Default)]
struct Flaky(Arc<AtomicUsize>);

impl Job for Flaky {
    type Args = Args;
    type State = usize;

    async fn start(&self, args: Args, cx: &JobContext) -> StepResult<usize> {
        self.resume(args.failures, Event::Tick, cx).await
    }

    async fn resume(&self, failures: usize, _: Event, _: &JobContext) -> StepResult<usize> {
        let run = self.0.fetch_add(1, Ordering::SeqCst);
        if run < failures {
            return Err(JobError::Retryable {
                message: format!("upstream said 503 (run {run})"),
                retry_after: None,
            });
        }
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text(format!("ok after {run} failures")),
        ])))
    }
}

async fn engine(job: Flaky, max_retries: i64) -> (Engine, CancellationToken) {
    engine_with(job, max_retries, ToolPolicy::default()).await
}

async fn engine_with(
    job: Flaky,
    max_retries: i64,
    policy: ToolPolicy,
) -> (Engine, CancellationToken) {
    let store = SqliteStore::open("sqlite::memory:").await.expect("store");
    let tools = ToolRegistry::new().with(ToolSpec::new("flaky", "test", policy, job));
    let config = EngineConfig {
        max_retries,
        idle_poll: Duration::from_millis(50),
        ..EngineConfig::default()
    };
    let engine = Engine::new(Arc::new(store), tools, Arc::new(SystemClock), config);
    let shutdown = CancellationToken::new();
    tokio::spawn(engine.clone().run(shutdown.clone()));
    (engine, shutdown)
}

async fn create(engine: &Engine, failures: usize) -> TaskId {
    let id = TaskId::generate();
    engine
        .store()
        .create(NewTask {
            id: id.clone(),
            owner: Owner::new("t"),
            tool: "flaky".into(),
            args: json!({ "failures": failures }),
            status_message: None,
            ttl_ms: None,
            now: engine.clock().now(),
        })
        .await
        .expect("create");
    engine.wake();
    id
}

/// Waits for the engine to announce changes until the task ends.
async fn until_terminal(engine: &Engine, id: &TaskId) -> TaskRecord {
    let mut changes = engine.subscribe();
    loop {
        let task = engine
            .store()
            .get(&Owner::new("t"), id, engine.clock().now())
            .await
            .expect("get")
            .expect("task");
        if task.status.is_terminal() {
            return task;
        }
        // Retries back off by whole seconds: allow for that, bounded.
        tokio::time::timeout(Duration::from_secs(20), changes.recv())
            .await
            .expect("no change within 20s")
            .expect("engine alive");
    }
}

#[tokio::test]
async fn retryable_failures_are_retried_then_succeed() {
    let job = Flaky::default();
    let (engine, shutdown) = engine(job.clone(), 5).await;
    let id = create(&engine, 1).await;
    let task = until_terminal(&engine, &id).await;
    assert_eq!(task.status, TaskStatus::Completed);
    assert_eq!(
        task.result.expect("result")["content"][0]["text"],
        json!("ok after 1 failures")
    );
    assert_eq!(job.0.load(Ordering::SeqCst), 2, "one failure, one success");
    shutdown.cancel();
}

#[tokio::test]
async fn too_many_retryable_failures_fail_the_task_with_the_reason() {
    let job = Flaky::default();
    let (engine, shutdown) = engine(job.clone(), 2).await;
    let id = create(&engine, 10).await;
    let task = until_terminal(&engine, &id).await;
    assert_eq!(task.status, TaskStatus::Failed);
    let message = task.error.expect("error")["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("gave up after 2 attempts"), "{message}");
    assert!(message.contains("upstream said 503"), "{message}");
    assert_eq!(job.0.load(Ordering::SeqCst), 2);
    shutdown.cancel();
}

#[tokio::test]
async fn a_tools_retry_policy_sets_its_backoff_and_its_cap() {
    let job = Flaky::default();
    let retry = RetryPolicy::default()
        .first_backoff(Duration::from_millis(20))
        .max_failures(Some(3));
    // The engine would allow 50 failures; the tool allows 3.
    let (engine, shutdown) = engine_with(job.clone(), 50, ToolPolicy::default().retry(retry)).await;
    let id = create(&engine, 100).await;
    let task = until_terminal(&engine, &id).await;
    shutdown.cancel();
    assert_eq!(
        task.status,
        TaskStatus::Failed,
        "{task:?} after {} runs",
        job.0.load(Ordering::SeqCst)
    );
    assert_eq!(
        job.0.load(Ordering::SeqCst),
        3,
        "three runs, then it gave up"
    );
    let message = task.error.expect("error")["message"]
        .as_str()
        .expect("message")
        .to_owned();
    assert!(message.starts_with("gave up after 3 attempts"), "{message}");
}

#[tokio::test]
async fn shutdown_releases_leases_for_other_workers() {
    let store: Arc<dyn TaskStore> =
        Arc::new(SqliteStore::open("sqlite::memory:").await.expect("store"));
    let now = SystemClock.now();
    let id = TaskId::generate();
    store
        .create(NewTask {
            id: id.clone(),
            owner: Owner::new("t"),
            tool: "flaky".into(),
            args: json!({"failures": 0}),
            status_message: None,
            ttl_ms: None,
            now,
        })
        .await
        .expect("create");
    let held = store
        .claim("dead-worker", 1, Duration::from_secs(600), now)
        .await
        .expect("claim");
    assert_eq!(held.len(), 1);
    assert!(
        store
            .claim("other", 1, Duration::from_secs(1), now)
            .await
            .expect("claim")
            .is_empty()
    );
    assert_eq!(
        store
            .release_all("dead-worker", now)
            .await
            .expect("release"),
        1
    );
    let job = Flaky::default();
    let tools = ToolRegistry::new().with(ToolSpec::new("flaky", "t", ToolPolicy::default(), job));
    let engine = Engine::new(store, tools, Arc::new(SystemClock), EngineConfig::default());
    let shutdown = CancellationToken::new();
    tokio::spawn(engine.clone().run(shutdown.clone()));
    engine.wake();
    let task = until_terminal(&engine, &id).await;
    assert_eq!(task.status, TaskStatus::Completed);
    shutdown.cancel();
}
