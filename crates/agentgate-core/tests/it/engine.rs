//! The scheduler with real jobs on an in-memory store and a manual clock:
//! retries wait exactly their backoff (no real time passes), a tool's retry
//! policy sets its curve and its cap, and give-up names the reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentgate_backend::{
    Event, Job, JobContext, JobError, Owner, RetryPolicy, Step, StepResult, TaskPhase, ToolPolicy,
    ToolSpec,
};
use agentgate_core::engine::EngineConfig;
use agentgate_testkit::engine::{Driven, ManualRuntime};
use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Deserialize, JsonSchema)]
struct Args {
    /// Fail this many times (retryably) before succeeding.
    failures: usize,
    /// Each failure's `Retry-After`, in milliseconds.
    retry_after_ms: Option<u64>,
}

/// Counts its runs; fails retryably `failures` times, then completes.
#[derive(Clone, Default)]
struct Flaky(Arc<AtomicUsize>);

impl Job for Flaky {
    type Args = Args;
    type State = (usize, Option<u64>);

    async fn start(&self, args: Args, cx: &JobContext) -> StepResult<Self::State> {
        self.resume((args.failures, args.retry_after_ms), Event::Tick, cx)
            .await
    }

    async fn resume(
        &self,
        (failures, retry_after_ms): Self::State,
        _: Event,
        _: &JobContext,
    ) -> StepResult<Self::State> {
        let run = self.0.fetch_add(1, Ordering::SeqCst);
        if run < failures {
            return Err(JobError::Retryable {
                message: format!("upstream said 503 (run {run})"),
                retry_after: retry_after_ms.map(Duration::from_millis),
            });
        }
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text(format!("ok after {run} failures")),
        ])))
    }
}

/// An engine on an in-memory store and a clock that stands still until
/// the test moves it, serving the `flaky` tool.
struct Running(ManualRuntime);

async fn engine(job: Flaky, max_retries: i64) -> Running {
    engine_with(job, max_retries, ToolPolicy::default()).await
}

async fn engine_with(job: Flaky, max_retries: i64, policy: ToolPolicy) -> Running {
    let config = EngineConfig {
        max_retries,
        ..EngineConfig::default()
    };
    Running(
        ManualRuntime::start(|runtime| {
            runtime
                .config(config)
                .tool(ToolSpec::new("flaky", "test", policy, job))
        })
        .await,
    )
}

impl Running {
    /// Creates a `flaky` task and drives it to its end.
    async fn run(&self, failures: usize) -> Driven {
        self.run_with(failures, None).await
    }

    async fn run_with(&self, failures: usize, retry_after_ms: Option<u64>) -> Driven {
        let owner = Owner::new("t");
        let args = json!({ "failures": failures, "retry_after_ms": retry_after_ms });
        let task = self.0.create(&owner, "flaky", args).await;
        self.0.drive_to_end(&owner, &task.id).await
    }
}

#[tokio::test]
async fn retryable_failures_are_retried_then_succeed() {
    let job = Flaky::default();
    let running = engine(job.clone(), 5).await;
    let Driven { task, waits } = running.run(1).await;
    assert_eq!(task.status, TaskPhase::Completed);
    assert_eq!(
        task.result.expect("result")["content"][0]["text"],
        json!("ok after 1 failures")
    );
    assert_eq!(job.0.load(Ordering::SeqCst), 2, "one failure, one success");
    assert_eq!(
        waits,
        [Duration::from_secs(1)],
        "the default policy's first backoff, waited once"
    );
}

#[tokio::test]
async fn too_many_retryable_failures_fail_the_task_with_the_reason() {
    let job = Flaky::default();
    let running = engine(job.clone(), 2).await;
    let Driven { task, waits } = running.run(10).await;
    assert_eq!(task.status, TaskPhase::Failed);
    let message = task.error.expect("error")["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("gave up after 2 attempts"), "{message}");
    assert!(message.contains("upstream said 503"), "{message}");
    assert_eq!(job.0.load(Ordering::SeqCst), 2);
    assert_eq!(waits.len(), 1, "one backoff between the two attempts");
}

#[tokio::test]
async fn a_tools_retry_policy_sets_its_backoff_and_its_cap() {
    let job = Flaky::default();
    let retry = RetryPolicy::default()
        .first_backoff(Duration::from_millis(20))
        .max_failures(Some(4));
    // The engine would allow 50 failures; the tool allows 4.
    let running = engine_with(job.clone(), 50, ToolPolicy::default().retry(retry)).await;
    let Driven { task, waits } = running.run(100).await;
    assert_eq!(
        task.status,
        TaskPhase::Failed,
        "{task:?} after {} runs",
        job.0.load(Ordering::SeqCst)
    );
    assert_eq!(
        job.0.load(Ordering::SeqCst),
        4,
        "four runs, then it gave up"
    );
    assert_eq!(
        waits,
        [20, 40, 80].map(Duration::from_millis),
        "the tool's first backoff, doubling"
    );
    let message = task.error.expect("error")["message"]
        .as_str()
        .expect("message")
        .to_owned();
    assert!(message.starts_with("gave up after 4 attempts"), "{message}");
}

#[tokio::test]
async fn an_upstream_retry_after_longer_than_the_backoff_wins() {
    let job = Flaky::default();
    let retry = RetryPolicy::default().first_backoff(Duration::from_millis(20));
    let running = engine_with(job.clone(), 50, ToolPolicy::default().retry(retry)).await;
    let Driven { task, waits } = running.run_with(2, Some(5_000)).await;
    assert_eq!(task.status, TaskPhase::Completed);
    assert_eq!(
        waits,
        [Duration::from_secs(5), Duration::from_secs(5)],
        "Retry-After (5 s) over the 20 ms and 40 ms backoffs"
    );
}
