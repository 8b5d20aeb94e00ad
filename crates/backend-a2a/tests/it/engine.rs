//! The A2A backend's tools in agentgate's real scheduler over a real SQLite
//! store, against the emulator: a question answered through the engine, a
//! quick answer, and a refused cancel that ends with the agent's answer.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{Owner, TaskId, TaskPhase, ToolSpec};
use agentgate_core::engine::{EngineConfig, TaskQuota, Tasks};
use agentgate_core::runtime::Runtime;
use agentgate_core::store::SqliteStore;
use agentgate_core::task::TaskRecord;
use agentgate_sim::a2a::A2aConfig as SimConfig;
use serde_json::{Map, Value, json};

use crate::common::*;

struct Running {
    tasks: Tasks,
    tool: ToolSpec,
    owner: Owner,
    /// Stops the runtime when the test ends.
    _stop: tokio_util::sync::DropGuard,
}

async fn running(emulator: &Emulator) -> Running {
    let (tool, _) = tool_for(emulator).await;
    let store = SqliteStore::open("sqlite::memory:")
        .await
        .expect("an in-memory store");
    let config = EngineConfig {
        idle_poll: Duration::from_millis(20),
        ..EngineConfig::default()
    };
    let runtime = Runtime::builder(Arc::new(store))
        .config(config)
        .tool(tool.clone())
        .start()
        .expect("start");
    Running {
        tasks: runtime.tasks(),
        tool,
        owner: Owner::new("a2a-test"),
        _stop: runtime.shutdown_token().clone().drop_guard(),
    }
}

impl Running {
    async fn create(&self, args: Value) -> TaskId {
        let Value::Object(args) = args else {
            panic!("arguments are an object")
        };
        self.tasks
            .create(
                self.owner.clone(),
                &self.tool,
                args as Map<String, Value>,
                &TaskQuota::default(),
            )
            .await
            .expect("task created")
            .id
    }

    /// Waits, on the engine's change notifications, until `done` holds.
    async fn until(
        &self,
        id: &TaskId,
        what: &str,
        done: impl Fn(&TaskRecord) -> bool,
    ) -> TaskRecord {
        let mut watch = self.tasks.watch(&self.owner, vec![id.clone()]);
        let wait = async {
            loop {
                let record = watch.read(id).await.expect("the task");
                if done(&record) {
                    return record;
                }
                watch.changed(Duration::from_millis(200)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .unwrap_or_else(|_| panic!("the task never reached: {what}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_through_the_engine_and_the_result_is_stored() {
    let emulator = Emulator::quick().await;
    let run = running(&emulator).await;
    let id = run
        .create(json!({"message": "hi", "metadata": {"skill": "ask-input"}}))
        .await;
    let asking = run
        .until(&id, "input_required", |r| {
            r.status == TaskPhase::InputRequired
        })
        .await;
    assert!(
        asking
            .status_message
            .as_deref()
            .is_some_and(|m| m.contains("What is your name?")),
        "{asking:?}"
    );
    let key = asking
        .input_requests
        .keys()
        .next()
        .expect("one request")
        .clone();
    let responses = [(
        key,
        json!({"action": "accept", "content": {"answer": "Lin"}}),
    )]
    .into_iter()
    .collect();
    run.tasks
        .answer(&run.owner, &id, responses)
        .await
        .expect("answer recorded");
    let done = run
        .until(&id, "completed", |r| r.status.is_terminal())
        .await;
    assert_eq!(done.status, TaskPhase::Completed, "{done:?}");
    let result = done.result.expect("a stored result");
    assert_eq!(result["content"][0]["text"], "Hello, Lin!");
    assert_eq!(
        result["structuredContent"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(emulator.sim.stats().max_effects_per_message_id(), 1);
    emulator.assert_requests_conform();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_cancel_through_the_engine_ends_with_the_agents_answer() {
    let emulator = Emulator::start(SimConfig {
        step_delay: Duration::from_millis(10),
        ..SimConfig::default()
    })
    .await;
    let run = running(&emulator).await;
    let id = run
        .create(json!({"message": "work", "metadata": {"skill": "refuses-cancel", "steps": 20}}))
        .await;
    run.until(&id, "working at the agent", |r| r.job_state.is_some())
        .await;
    run.tasks
        .cancel(&run.owner, &id)
        .await
        .expect("cancel requested");
    run.until(&id, "the refusal reported", |r| {
        r.status_message
            .as_deref()
            .is_some_and(|m| m.contains("refused to cancel"))
            || r.status.is_terminal()
    })
    .await;
    let done = run
        .until(&id, "completed", |r| r.status.is_terminal())
        .await;
    assert_eq!(done.status, TaskPhase::Completed, "{done:?}");
    let result = done.result.expect("a stored result");
    assert_eq!(result["content"][0]["text"], "Finished 20 steps.");
    assert_eq!(emulator.sent_of("CancelTask").len(), 1);
    emulator.assert_requests_conform();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_the_engine_cancels_the_agent_task() {
    let emulator = Emulator::quick().await;
    let run = running(&emulator).await;
    let id = run
        .create(json!({"message": "work", "metadata": {"skill": "long-running", "steps": 100}}))
        .await;
    run.until(&id, "working at the agent", |r| r.job_state.is_some())
        .await;
    run.tasks
        .cancel(&run.owner, &id)
        .await
        .expect("cancel requested");
    let done = run
        .until(&id, "cancelled", |r| r.status.is_terminal())
        .await;
    assert_eq!(done.status, TaskPhase::Cancelled, "{done:?}");
    assert_eq!(emulator.sent_of("CancelTask").len(), 1);
    emulator.assert_requests_conform();
}
