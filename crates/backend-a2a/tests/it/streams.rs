//! Following tasks without a connection each, through agentgate's real
//! runtime (scheduler, SQLite store, the backend's background work and its
//! webhook on a real HTTP port) against the emulator: a bounded number of
//! `SubscribeToTask` streams nudge their tasks, the rest are polled; a
//! dropped stream falls back to polling; push notifications nudge tasks that
//! neither stream nor poll often, and a forged notification is refused.
//!
//! Each test makes the slow path slow on purpose (a long safety read), so a
//! task that ends quickly shows the fast path worked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentgate_backend::{Backend, Owner, TaskId, TaskPhase, ToolSpec};
use agentgate_core::engine::{EngineConfig, TaskQuota};
use agentgate_core::runtime::Runtime;
use agentgate_core::store::SqliteStore;
use agentgate_core::task::TaskRecord;
use agentgate_sim::a2a::A2aConfig as SimConfig;
use backend_a2a::A2aBackend;
use serde_json::{Map, Value, json};

use crate::common::*;

const PUSH_SECRET: &str = "push-secret-0123456789abcdef0123456789";

struct Running {
    runtime: Option<Runtime>,
    tool: ToolSpec,
    backend: A2aBackend,
    owner: Owner,
}

impl Running {
    async fn start(backend: A2aBackend, webhooks: Option<tokio::net::TcpListener>) -> Self {
        let tool = backend.tools().remove(0);
        let store = SqliteStore::open("sqlite::memory:")
            .await
            .expect("an in-memory store");
        let runtime = Runtime::builder(Arc::new(store))
            .config(EngineConfig {
                idle_poll: Duration::from_millis(20),
                ..EngineConfig::default()
            })
            .backend(backend.clone())
            .start()
            .expect("the runtime starts");
        if let Some(listener) = webhooks {
            let router = runtime.webhook_router();
            let shutdown = runtime.shutdown_token().clone();
            tokio::spawn(agentgate_core::mcp::serve_http(listener, router, shutdown));
        }
        Self {
            runtime: Some(runtime),
            tool,
            backend,
            owner: Owner::new("a2a-follow"),
        }
    }

    fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("running")
    }

    async fn create(&self, args: Value) -> TaskId {
        let Value::Object(args) = args else {
            panic!("arguments are an object")
        };
        self.runtime()
            .tasks()
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

    /// Waits, on the engine's change notifications, until the task ends.
    async fn finished(&self, id: &TaskId, limit: Duration) -> TaskRecord {
        let mut watch = self.runtime().tasks().watch(&self.owner, vec![id.clone()]);
        let wait = async {
            loop {
                let record = watch.read(id).await.expect("the task");
                if record.status.is_terminal() {
                    return record;
                }
                watch.changed(Duration::from_millis(200)).await;
            }
        };
        tokio::time::timeout(limit, wait)
            .await
            .unwrap_or_else(|_| panic!("task {id} did not end within {limit:?}"))
    }

    async fn stop(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.stop().await.expect("the runtime stops cleanly");
        }
    }
}

fn long_running(steps: u64) -> Value {
    json!({"message": "work", "metadata": {"skill": "long-running", "steps": steps}})
}

fn assert_finished(record: &TaskRecord, steps: u64) {
    assert_eq!(record.status, TaskPhase::Completed, "{record:?}");
    let result = record.result.as_ref().expect("a result");
    assert_eq!(
        result["content"][0]["text"],
        format!("Finished {steps} steps.")
    );
}

/// Eight tasks, three streams: the streamed tasks end long before their
/// 30 s safety read (their stream's events nudged them), the others are
/// polled, and never more than three streams are open at the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_max_streams_are_held_and_the_other_tasks_are_polled() {
    let emulator = Emulator::start(SimConfig {
        step_delay: Duration::from_millis(150),
        ..SimConfig::default()
    })
    .await;
    let (backend, _) = backend_with(
        json!([{"name": "emu", "url": emulator.url}]),
        json!({"max_streams": 3, "poll_interval_ms": 100, "max_poll_interval_ms": 30_000}),
        &no_env,
    )
    .await;
    let run = Running::start(backend, None).await;
    let started = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(run.create(long_running(6)).await);
    }
    for id in &ids {
        assert_finished(&run.finished(id, Duration::from_secs(25)).await, 6);
    }
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the streamed tasks did not wait for their 30 s safety read"
    );
    let stats = run.backend.follower_stats();
    let sim = emulator.sim.stats();
    assert!(stats.opened >= 3, "{stats:?}");
    assert!(stats.max_held <= 3, "{stats:?}");
    assert!(sim.max_open_streams <= 3, "{sim:?}");
    assert!(stats.nudges >= 3, "{stats:?}");
    assert!(
        emulator.sent_of("GetTask").len() > 8,
        "the tasks without a stream were polled"
    );
    run.stop().await;
    emulator.assert_requests_conform();
}

/// A stream cut after its first event: the task is nudged, polls, and ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_falls_back_to_polling_and_the_task_ends() {
    let emulator = Emulator::start(SimConfig {
        step_delay: Duration::from_millis(100),
        ..SimConfig::default()
    })
    .await;
    let (backend, _) = backend_with(
        json!([{"name": "emu", "url": emulator.url}]),
        json!({"max_streams": 4, "poll_interval_ms": 200, "max_poll_interval_ms": 30_000}),
        &no_env,
    )
    .await;
    emulator.sim.faults().drop_next_streams(1, 1);
    let run = Running::start(backend, None).await;
    let id = run.create(long_running(8)).await;
    assert_finished(&run.finished(&id, Duration::from_secs(20)).await, 8);
    assert_eq!(emulator.sim.stats().streams_dropped, 1);
    let stats = run.backend.follower_stats();
    assert!(
        stats.failed >= 1,
        "the broken stream was noticed: {stats:?}"
    );
    run.stop().await;
    emulator.assert_requests_conform();
}

/// Push only (no streams, a 30 s poll): the agent's notifications nudge the
/// task, which ends in a few seconds; a notification with a wrong token is
/// refused and nudges nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_notifications_nudge_the_task_and_a_forged_one_is_refused() {
    let emulator = Emulator::start(SimConfig {
        step_delay: Duration::from_millis(100),
        push_notifications: true,
        ..SimConfig::default()
    })
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the webhook port");
    let hooks = format!("http://{}", listener.local_addr().expect("address"));
    let env = |name: &str| (name == "PUSH_SECRET").then(|| PUSH_SECRET.to_owned());
    let (backend, _) = backend_with(
        json!([{"name": "emu", "url": emulator.url}]),
        json!({"max_streams": 0, "poll_interval_ms": 30_000, "max_poll_interval_ms": 30_000,
               "push_url": format!("{hooks}/hooks/a2a"), "push_secret_env": "PUSH_SECRET"}),
        &env,
    )
    .await;
    let run = Running::start(backend, Some(listener)).await;
    let started = Instant::now();
    let id = run.create(long_running(4)).await;
    assert_finished(&run.finished(&id, Duration::from_secs(20)).await, 4);
    assert!(started.elapsed() < Duration::from_secs(20));
    let sim = emulator.sim.stats();
    assert!(sim.pushes_delivered >= 4, "{sim:?}");
    assert_eq!(sim.pushes_failed, 0, "{sim:?}");
    let push = run.backend.push_stats().expect("push is on");
    assert!(push.nudges >= 1, "{push:?}");
    assert_eq!(push.refused, 0);
    // The SendMessage asked for push with a token bound to the task.
    let send = &emulator.sent_of("SendMessage")[0].body["params"]["configuration"];
    let config = &send["taskPushNotificationConfig"];
    assert_eq!(
        config["url"],
        format!("{hooks}/hooks/a2a/{}", id.as_str()).as_str()
    );
    assert_eq!(config["authentication"]["scheme"], "Bearer");
    let token = config["authentication"]["credentials"]
        .as_str()
        .expect("a token");
    assert!(
        !token.contains(PUSH_SECRET),
        "the secret itself is not sent"
    );

    // Someone else's notification: refused, whatever it says.
    let http = reqwest::Client::new();
    let forged = http
        .post(format!("{hooks}/hooks/a2a/{}", id.as_str()))
        .header("Authorization", "Bearer not-the-token")
        .json(&json!({"statusUpdate": {"taskId": "x", "contextId": "y",
            "status": {"state": "TASK_STATE_COMPLETED"}}}))
        .send()
        .await
        .expect("POST");
    assert_eq!(forged.status(), 401);
    // The right token for another task is the wrong token for this one.
    let other = http
        .post(format!("{hooks}/hooks/a2a/{}", TaskId::generate().as_str()))
        .header("Authorization", format!("Bearer {token}"))
        .json(&json!({"task": {"id": "x"}}))
        .send()
        .await
        .expect("POST");
    assert_eq!(other.status(), 401);
    let not_json = http
        .post(format!("{hooks}/hooks/a2a/{}", id.as_str()))
        .header("Authorization", format!("Bearer {token}"))
        .body("hello")
        .send()
        .await
        .expect("POST");
    assert_eq!(not_json.status(), 400);
    assert_eq!(run.backend.push_stats().expect("push").refused, 3);
    run.stop().await;
    emulator.assert_requests_conform();
}
