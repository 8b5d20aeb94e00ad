//! Issue 32: a task's TTL counts from its last progress, so a backend that
//! keeps working outlives its first TTL; and a task that does expire has
//! its backend's cancel run, so the upstream work stops. On a manual clock:
//! hours pass the moment the test moves it, and the engine's sweeper (which
//! sleeps on the same clock) runs as it would.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentgate_backend::{
    Event, Job, JobContext, Millis, Owner, Step, StepResult, TaskId, TaskPhase, ToolPolicy,
    ToolSpec,
};
use agentgate_core::clock::Clock as _;
use agentgate_core::store::{SqliteStore, TaskStore as _};
use agentgate_core::task::TaskRecord;
use agentgate_testkit::engine::{ManualRuntime, T0};
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams, InputRequest, InputRequests,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Notify;

const TTL: Duration = Duration::from_secs(3600);
/// Each step of a working task comes this long after the last: longer than
/// half the TTL, so three of them outlast it.
const BETWEEN_STEPS: Duration = Duration::from_secs(40 * 60);

#[derive(Debug, Deserialize, JsonSchema)]
struct Args {
    /// Steps before the result; 0: ask a question nobody answers.
    steps: u32,
}

/// Works `steps` steps, each [`BETWEEN_STEPS`] after the last, or asks a
/// question; counts the cancels its backend ran.
#[derive(Clone, Default)]
struct Agent {
    cancels: Arc<AtomicUsize>,
    cancelled: Arc<Notify>,
}

impl Job for Agent {
    type Args = Args;
    type State = u32;

    async fn start(&self, args: Args, _: &JobContext) -> StepResult<u32> {
        if args.steps > 0 {
            return Ok(Step::Wait {
                state: args.steps,
                status: Some(format!("{} steps to go", args.steps)),
                after: BETWEEN_STEPS,
            });
        }
        let schema =
            serde_json::from_value(json!({"type": "object", "properties": {}})).expect("schema");
        let mut requests = InputRequests::new();
        requests.insert(
            "go".to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(
                ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: "Go on?".to_owned(),
                    requested_schema: schema,
                },
            )),
        );
        Ok(Step::Ask {
            state: 0,
            status: Some("asking".to_owned()),
            requests,
        })
    }

    async fn resume(&self, left: u32, _: Event, _: &JobContext) -> StepResult<u32> {
        if left <= 1 {
            return Ok(Step::Done(CallToolResult::success(vec![
                ContentBlock::text("done"),
            ])));
        }
        Ok(Step::Wait {
            state: left - 1,
            status: Some(format!("{} steps to go", left - 1)),
            after: BETWEEN_STEPS,
        })
    }

    async fn cancel(&self, _: u32, _: &JobContext) -> StepResult<u32> {
        self.cancels.fetch_add(1, Ordering::SeqCst);
        self.cancelled.notify_one();
        Ok(Step::cancelled())
    }
}

/// The `agent` tool on a manual clock, with the store kept to read tasks
/// as they were (an expired task is hidden from the task service).
struct Running {
    runtime: ManualRuntime,
    store: Arc<SqliteStore>,
    agent: Agent,
}

async fn running() -> Running {
    let store = Arc::new(SqliteStore::open("sqlite::memory:").await.expect("store"));
    let agent = Agent::default();
    let policy = ToolPolicy::default().ttl(Some(TTL));
    let spec = ToolSpec::new("agent", "test", policy, agent.clone());
    let runtime = ManualRuntime::on(store.clone(), |runtime| runtime.tool(spec));
    Running {
        runtime,
        store,
        agent,
    }
}

impl Running {
    async fn create(&self, owner: &Owner, steps: u32) -> TaskId {
        let args = json!({ "steps": steps });
        self.runtime.create(owner, "agent", args).await.id
    }

    /// `owner`'s task `id` as the store holds it at `at`.
    async fn stored(&self, owner: &Owner, id: &TaskId, at: Millis) -> Option<TaskRecord> {
        self.store.get(owner, id, at).await.expect("get")
    }
}

#[tokio::test]
async fn a_task_that_keeps_making_progress_outlives_its_first_ttl() {
    let r = running().await;
    let owner = Owner::new("alice");
    let id = r.create(&owner, 4).await;
    // Read at every change, as a client polls: the task must stay visible.
    let driven = r.runtime.drive_to_end(&owner, &id).await;
    let lived = driven.task.updated_at.since(driven.task.created_at);
    assert!(
        lived > TTL * 2,
        "it ran {lived:?}, past two TTLs from creation"
    );
    assert_eq!(
        driven.task.status,
        TaskPhase::Completed,
        "{:?}",
        driven.task
    );
    assert_eq!(
        driven.task.expires_at,
        Some(driven.task.updated_at.saturating_add(TTL)),
        "its result is kept for its TTL after it ended"
    );
    assert_eq!(
        driven.task.ttl_from_creation_ms(),
        Some(u64::try_from((lived + TTL).as_millis()).expect("ms")),
        "the wire's ttl, from creation, grew with it"
    );
    assert_eq!(r.agent.cancels.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_expired_task_runs_its_backends_cancel() {
    let r = running().await;
    let owner = Owner::new("alice");
    let id = r.create(&owner, 0).await;
    let mut changes = r.runtime.tasks().watch(&owner, vec![id.clone()]);
    let asked = async {
        loop {
            let task = (r.stored(&owner, &id, r.runtime.clock().now()).await).expect("the task");
            if task.status == TaskPhase::InputRequired {
                return task;
            }
            changes.next_change().await;
        }
    };
    let asked = tokio::time::timeout(Duration::from_secs(30), asked)
        .await
        .expect("the question is asked");
    assert_eq!(asked.expires_at, Some(T0.saturating_add(TTL)));
    // Nobody answers. Past the TTL the sweeper (every 30 s on this clock)
    // expires the task and the agent's cancel runs.
    r.runtime
        .clock()
        .set(T0.saturating_add(TTL + Duration::from_secs(60)));
    tokio::time::timeout(Duration::from_secs(30), r.agent.cancelled.notified())
        .await
        .expect("the backend's cancel ran");
    assert_eq!(r.agent.cancels.load(Ordering::SeqCst), 1);
    let gone = r.stored(&owner, &id, r.runtime.clock().now()).await;
    assert!(gone.is_none(), "an expired task answers as unknown");
    // Read as of before its expiry: the store kept why.
    let ended = async {
        loop {
            let task = r.stored(&owner, &id, T0).await.expect("still stored");
            if task.status.is_terminal() {
                return task;
            }
            changes.next_change().await;
        }
    };
    let ended = tokio::time::timeout(Duration::from_secs(30), ended)
        .await
        .expect("the cancel is saved");
    assert_eq!(ended.status, TaskPhase::Cancelled);
    assert!(
        ended
            .status_message
            .as_deref()
            .is_some_and(|m| m.starts_with("expired")),
        "{ended:?}"
    );
}
