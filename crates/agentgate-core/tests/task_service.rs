//! The engine's task service (`create`, `get`, `answer`, `cancel`, `watch`)
//! on a real SQLite store: each operation's store write and its
//! notifications happen together, scoped to the caller's owner.

use std::sync::Arc;
use std::time::Duration;

use agentgate_core::clock::SystemClock;
use agentgate_core::job::{Event, Job, JobContext, Step, StepResult, ToolSpec};
use agentgate_core::registry::ToolRegistry;
use agentgate_core::scheduler::{Changed, Engine, EngineConfig, TaskError, TaskQuota};
use agentgate_core::store::SqliteStore;
use agentgate_core::task::{Owner, TaskId, TaskRecord, TaskStatus, ToolPolicy};
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
    /// `ask`: ask one question; `hang`: a step that never ends by itself.
    mode: String,
}

/// Asks one question and echoes the answer, or hangs in its first step
/// (telling `started` it is there) until the engine interrupts it.
#[derive(Clone, Default)]
struct Probe {
    started: Arc<Notify>,
}

impl Job for Probe {
    type Args = Args;
    type State = ();

    async fn start(&self, args: Args, _: &JobContext) -> StepResult<()> {
        if args.mode == "hang" {
            self.started.notify_one();
            std::future::pending::<()>().await;
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
    engine: Engine,
    probe: Probe,
    shutdown: CancellationToken,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// An engine whose tool has a 2-hour TTL and an hour-long step timeout (so
/// only an interrupt ends a hanging step); `run` starts its scheduler.
async fn fixture(run: bool) -> Fixture {
    let store = SqliteStore::open("sqlite::memory:").await.expect("store");
    let probe = Probe::default();
    let policy = ToolPolicy::default()
        .ttl(Some(Duration::from_secs(7200)))
        .step_timeout(Duration::from_secs(3600));
    let tools = ToolRegistry::new().with(ToolSpec::new("probe", "test", policy, probe.clone()));
    let engine = Engine::new(
        Arc::new(store),
        tools,
        Arc::new(SystemClock),
        EngineConfig {
            idle_poll: Duration::from_millis(50),
            ..EngineConfig::default()
        },
    );
    let shutdown = CancellationToken::new();
    if run {
        tokio::spawn(engine.clone().run(shutdown.clone()));
    }
    Fixture {
        engine,
        probe,
        shutdown,
    }
}

fn args(mode: &str) -> Map<String, serde_json::Value> {
    let mut args = Map::new();
    args.insert("mode".to_owned(), json!(mode));
    args
}

async fn create(engine: &Engine, owner: &str, mode: &str, quota: &TaskQuota) -> TaskRecord {
    let spec = engine.tools().get("probe").expect("probe tool");
    engine
        .create(Owner::new(owner), spec, args(mode), quota)
        .await
        .expect("create")
}

/// Follows `id` through the engine's own watch until `done` holds.
async fn until(
    engine: &Engine,
    owner: &str,
    id: &TaskId,
    done: impl Fn(&TaskRecord) -> bool,
) -> TaskRecord {
    let mut watch = engine.watch(&Owner::new(owner), vec![id.clone()]);
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
    };
    let first = create(&f.engine, "alice", "ask", &quota).await;
    assert_eq!(first.ttl_ms, Some(60_000), "the tool's 2 h TTL is clamped");
    assert_eq!(first.status_message.as_deref(), Some("queued"));
    create(&f.engine, "alice", "ask", &quota).await;
    let spec = f.engine.tools().get("probe").expect("probe tool");
    let refused = f
        .engine
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
    create(&f.engine, "bob", "ask", &quota).await;
    let free = create(&f.engine, "alice", "ask", &TaskQuota::default()).await;
    assert_eq!(free.ttl_ms, Some(7_200_000), "the tool's own TTL");
}

#[tokio::test]
async fn another_owners_task_is_an_unknown_one_for_every_operation() {
    let f = fixture(false).await;
    let task = create(&f.engine, "alice", "ask", &TaskQuota::default()).await;
    let mallory = Owner::new("mallory");
    assert!(matches!(
        f.engine.get(&mallory, &task.id).await,
        Err(TaskError::UnknownTask)
    ));
    assert!(matches!(
        f.engine.cancel(&mallory, &task.id).await,
        Err(TaskError::UnknownTask)
    ));
    let answer = [(
        "who".to_owned(),
        json!({"action": "accept", "content": {"name": "m"}}),
    )]
    .into_iter()
    .collect();
    assert!(matches!(
        f.engine.answer(&mallory, &task.id, answer).await,
        Err(TaskError::UnknownTask)
    ));
    let unknown = TaskId::from_client("no-such-task".to_owned());
    assert!(matches!(
        f.engine.get(&Owner::new("alice"), &unknown).await,
        Err(TaskError::UnknownTask)
    ));
    // Alice's task is untouched.
    let still = f
        .engine
        .get(&Owner::new("alice"), &task.id)
        .await
        .expect("get");
    assert!(!still.cancel_requested);
}

#[tokio::test]
async fn answer_publishes_and_wakes_so_the_task_finishes() {
    let f = fixture(true).await;
    let task = create(&f.engine, "alice", "ask", &TaskQuota::default()).await;
    until(&f.engine, "alice", &task.id, |r| {
        r.status == TaskStatus::InputRequired
    })
    .await;
    let mut watch = f.engine.watch(&Owner::new("alice"), vec![task.id.clone()]);
    let ack = f
        .engine
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
    let done = until(&f.engine, "alice", &task.id, |r| r.status.is_terminal()).await;
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(
        done.result.expect("result")["content"][0]["text"],
        "hello ada"
    );
    // A second answer to the same request counts for nothing.
    let again = f
        .engine
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
    let task = create(&f.engine, "alice", "hang", &TaskQuota::default()).await;
    started.await;
    f.engine
        .cancel(&Owner::new("alice"), &task.id)
        .await
        .expect("cancel");
    // The step would hang for its hour-long timeout; only the interrupt
    // lets the cancel step run.
    let done = until(&f.engine, "alice", &task.id, |r| r.status.is_terminal()).await;
    assert_eq!(done.status, TaskStatus::Cancelled);
}

#[tokio::test]
async fn a_watch_wakes_for_its_own_tasks_only() {
    let f = fixture(false).await;
    let mine = create(&f.engine, "alice", "ask", &TaskQuota::default()).await;
    let other = create(&f.engine, "alice", "ask", &TaskQuota::default()).await;
    let mut watch = f.engine.watch(&Owner::new("alice"), vec![mine.id.clone()]);
    // Virtual time from here: the recheck below passes without waiting.
    tokio::time::pause();
    f.engine.publish(&other.id);
    assert_eq!(
        watch.changed(Duration::from_secs(3600)).await,
        Changed::Any,
        "another task's change does not end the wait; the recheck does"
    );
    f.engine.publish(&other.id);
    f.engine.publish(&mine.id);
    assert_eq!(
        watch.changed(Duration::from_secs(3600)).await,
        Changed::Task(mine.id.clone())
    );
}
