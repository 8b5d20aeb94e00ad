//! Per-principal limits over real Streamable HTTP with rmcp's client: a
//! gateway with chosen [`Limits`] on a SQLite store wrapped to count reads,
//! a manual clock (time moves by the test, never by sleeping), and two
//! principals, each on its own route.
//!
//! The runtime runs no steps (unless a test asks), so created tasks stay `working` until the
//! clock passes their TTL: what is counted and cached is fixed by the test.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{Event, Job, JobContext, Owner, Step, StepResult, ToolPolicy, ToolSpec};
use agentgate_core::auth::Principal;
use agentgate_core::clock::ManualClock;
use agentgate_core::engine::EngineConfig;
use agentgate_core::mcp::limits::LIMITED;
use agentgate_core::mcp::{HttpOptions, Limits, TransportKind, http_router};
use agentgate_core::store::{SqliteStore, TaskStore};
use agentgate_testkit::engine::{ManualRuntime, T0};
use agentgate_testkit::spy::StoreSpy;
use agentgate_testkit::{Client, TestClient, call, start_task};
use rmcp::model::{
    CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities, ContentBlock,
    ElicitRequest, ElicitRequestParams, ErrorData, GetTaskParams, InputRequest, ProtocolVersion,
    UpdateTaskParams,
};
use rmcp::service::ServiceError;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// `PollPolicy::default()`'s interval for a young `working` task.
const WORKING_POLL_MS: u64 = 500;

#[derive(Debug, Deserialize, JsonSchema)]
struct Args {}

/// Never run (the engine is not started); it only gives the tool a shape.
#[derive(Clone)]
struct Idle;

impl Job for Idle {
    type Args = Args;
    type State = ();

    async fn start(&self, _: Args, _: &JobContext) -> StepResult<()> {
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text("done"),
        ])))
    }

    async fn resume(&self, _: (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text("done"),
        ])))
    }
}

/// Asks one question, then completes.
#[derive(Clone)]
struct Ask;

impl Job for Ask {
    type Args = Args;
    type State = ();

    async fn start(&self, _: Args, _: &JobContext) -> StepResult<()> {
        let schema = serde_json::from_value(json!({
            "type": "object",
            "properties": {"note": {"type": "string"}},
        }))
        .expect("schema");
        let request = InputRequest::Elicitation(ElicitRequest::new(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: "a note?".to_owned(),
                requested_schema: schema,
            },
        ));
        Ok(Step::Ask {
            state: (),
            status: Some("asking".into()),
            requests: BTreeMap::from([("note".to_owned(), request)]),
        })
    }

    async fn resume(&self, _: (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text("noted"),
        ])))
    }
}

struct Setup {
    clock: ManualClock,
    anonymous_url: String,
    store: Arc<StoreSpy<SqliteStore>>,
    /// Anonymous, as every HTTP caller is without authentication.
    anonymous: Client,
    /// Authenticated as `bob` by a layer, as the auth middleware would.
    bob: Client,
    /// Stops the runtime and the servers when the test ends.
    _runtime: ManualRuntime,
}

impl Setup {
    fn gets(&self) -> u64 {
        self.store.calls("get")
    }
}

async fn setup(limits: Limits) -> Setup {
    setup_with(limits, false).await
}

/// `run`: also run the scheduler, so tasks make progress.
async fn setup_with(limits: Limits, run: bool) -> Setup {
    let store = Arc::new(StoreSpy::new(
        SqliteStore::open("sqlite::memory:").await.expect("store"),
    ));
    let runtime = ManualRuntime::on(store.clone(), |runtime| {
        runtime
            .tool(ToolSpec::new(
                "idle",
                "a task that stays working",
                ToolPolicy::default(),
                Idle,
            ))
            .tool(ToolSpec::new(
                "ask",
                "asks for a note",
                ToolPolicy::default(),
                Ask,
            ))
            .limits(limits)
            .run_steps(run)
    });
    let gateway = runtime
        .runtime()
        .gateway(TransportKind::Http)
        .await
        .expect("gateway");
    let stop = runtime.runtime().shutdown_token().clone();
    let anonymous = http_router(gateway.clone(), HttpOptions::default(), stop.clone());
    let bob = http_router(gateway, HttpOptions::default(), stop.clone()).layer(
        axum::middleware::from_fn(
            |mut request: axum::extract::Request, next: axum::middleware::Next| async move {
                request
                    .extensions_mut()
                    .insert(Principal::new(Owner::new("bob")));
                next.run(request).await
            },
        ),
    );
    let anonymous = serve(anonymous, stop.clone()).await;
    let bob = serve(bob, stop.clone()).await;
    Setup {
        clock: runtime.clock().clone(),
        store,
        anonymous: TestClient::tasks().http(&anonymous).await,
        anonymous_url: anonymous,
        bob: TestClient::tasks().http(&bob).await,
        _runtime: runtime,
    }
}

async fn serve(router: axum::Router, stop: CancellationToken) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    tokio::spawn(agentgate_core::mcp::serve_http(listener, router, stop));
    url
}

/// The JSON-RPC error of a refused request.
fn refusal(result: Result<impl std::fmt::Debug, ServiceError>) -> ErrorData {
    match result {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

async fn get(client: &Client, id: &str) -> Result<rmcp::model::GetTaskResult, ServiceError> {
    client
        .peer()
        .get_task(GetTaskParams::new(id.to_owned()))
        .await
}

#[tokio::test]
async fn fast_polls_are_answered_from_memory_then_refused_with_the_interval() {
    let limits = Limits {
        poll_burst: 3,
        ..Limits::default()
    };
    let s = setup(limits).await;
    let task = start_task(&s.anonymous, "idle", json!({})).await;
    let id = task.task.task_id.clone();
    assert_eq!(task.task.poll_interval_ms, Some(WORKING_POLL_MS));

    let first = get(&s.anonymous, &id).await.expect("tasks/get");
    let reads = s.gets();
    // Two more polls inside the interval: answered, without a store read.
    for _ in 0..2 {
        let again = get(&s.anonymous, &id).await.expect("tasks/get");
        assert_eq!(again.task, first.task);
    }
    assert_eq!(s.gets(), reads, "polls within the interval read the store");

    // The fourth poll within one interval is refused, saying what to do.
    let error = refusal(get(&s.anonymous, &id).await);
    assert_eq!(error.code, LIMITED);
    for part in [
        "polled too fast",
        "limits.poll_burst",
        "500 ms",
        "slow down",
    ] {
        assert!(
            error.message.contains(part),
            "{part:?} in {}",
            error.message
        );
    }
    let data = error.data.expect("data");
    assert_eq!(data["pollIntervalMs"], json!(WORKING_POLL_MS));
    assert_eq!(data["retryAfterMs"], json!(WORKING_POLL_MS));
    assert_eq!(s.gets(), reads);

    // Another principal's poll of the id is not served from the cache.
    let foreign = refusal(get(&s.bob, &id).await);
    assert_eq!(foreign.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert_eq!(s.gets(), reads + 1);

    // After one interval the store is read again and polling is allowed.
    s.clock.advance(Duration::from_millis(WORKING_POLL_MS));
    get(&s.anonymous, &id)
        .await
        .expect("tasks/get after the interval");
    assert_eq!(s.gets(), reads + 2);
    get(&s.anonymous, &id).await.expect("tasks/get, cached");
    assert_eq!(s.gets(), reads + 2);

    // A change to the task drops its cached answer at once.
    s.anonymous
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel");
    get(&s.anonymous, &id)
        .await
        .expect("tasks/get after a change");
    assert_eq!(s.gets(), reads + 3, "a changed task is read from the store");
}

#[tokio::test]
async fn active_tasks_are_capped_per_principal_and_ttl_is_clamped() {
    let limits = Limits {
        max_active_tasks: 2,
        max_ttl: Some(Duration::from_secs(60)),
        ..Limits::default()
    };
    let s = setup(limits).await;
    for _ in 0..2 {
        let task = start_task(&s.anonymous, "idle", json!({})).await;
        // The tool asks for 24 h; the cap is 60 s, and the task says so.
        assert_eq!(task.task.ttl_ms, Some(60_000));
    }
    let error = refusal(s.anonymous.call_tool_once(call("idle", json!({}))).await);
    assert_eq!(error.code, LIMITED);
    for part in [
        "too many active tasks",
        "2 working or input_required",
        "limit is 2",
        "limits.max_active_tasks",
        "tasks/cancel",
    ] {
        assert!(
            error.message.contains(part),
            "{part:?} in {}",
            error.message
        );
    }
    let data = error.data.expect("data");
    assert_eq!(
        (data["limit"].clone(), data["active"].clone()),
        (json!(2), json!(2))
    );

    // The cap is per principal: bob is not affected by anonymous's tasks.
    start_task(&s.bob, "idle", json!({})).await;

    // Once the tasks are past their TTL they no longer count.
    s.clock.advance(Duration::from_secs(60));
    start_task(&s.anonymous, "idle", json!({})).await;
}

#[tokio::test]
async fn racing_creates_cannot_pass_the_active_task_cap_on_one_instance() {
    let limits = Limits {
        max_active_tasks: 5,
        ..Limits::default()
    };
    let s = setup(limits).await;
    // 40 creates at once from one principal, through HTTP: exactly 5 win.
    let calls = (0..40).map(|_| s.anonymous.call_tool_once(call("idle", json!({}))));
    let outcomes = futures::future::join_all(calls).await;
    let (created, refused): (Vec<_>, Vec<_>) = outcomes.into_iter().partition(|o| o.is_ok());
    assert_eq!(
        created.len(),
        5,
        "the cap of 5 held against 40 racing creates"
    );
    for outcome in refused {
        assert_eq!(refusal(outcome).code, LIMITED);
    }
}

#[tokio::test]
async fn requests_over_the_rate_are_refused_until_tokens_refill() {
    let limits = Limits {
        requests_per_second: 1.0,
        request_burst: 3,
        ..Limits::default()
    };
    let s = setup(limits).await;
    // The client's handshake (server/discover or initialize) took one.
    for _ in 0..2 {
        s.anonymous
            .peer()
            .list_tools(None)
            .await
            .expect("tools/list");
    }
    let error = refusal(s.anonymous.peer().list_tools(None).await);
    assert_eq!(error.code, LIMITED);
    for part in [
        "too many requests",
        "limits.requests_per_second",
        "burst 3",
        "retry in 1000 ms",
    ] {
        assert!(
            error.message.contains(part),
            "{part:?} in {}",
            error.message
        );
    }
    assert_eq!(error.data.expect("data")["retryAfterMs"], json!(1000));
    // Every request kind is charged, not only tools/list.
    let refused = refusal(s.anonymous.call_tool_once(call("idle", json!({}))).await);
    assert_eq!(refused.code, LIMITED);

    // Another principal has its own bucket.
    s.bob
        .peer()
        .list_tools(None)
        .await
        .expect("bob's tools/list");

    s.clock.advance(Duration::from_secs(1));
    s.anonymous
        .peer()
        .list_tools(None)
        .await
        .expect("a token refilled");
    assert!(s.anonymous.peer().list_tools(None).await.is_err());
}

#[tokio::test]
async fn oversized_input_responses_are_refused_naming_the_field() {
    let limits = Limits {
        max_input_response_bytes: 100,
        ..Limits::default()
    };
    let s = setup(limits).await;
    let id = start_task(&s.anonymous, "idle", json!({}))
        .await
        .task
        .task_id;
    let answer = |text: &str| {
        BTreeMap::from([(
            "confirm".to_owned(),
            json!({"action": "accept", "content": {"note": text}}),
        )])
    };
    let big = UpdateTaskParams::new(id.clone(), answer(&"x".repeat(200)));
    let error = refusal(s.anonymous.peer().update_task(big).await);
    assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    for part in [
        "`inputResponses`",
        "100-byte limit",
        "limits.max_input_response_bytes",
    ] {
        assert!(
            error.message.contains(part),
            "{part:?} in {}",
            error.message
        );
    }
    // Under the cap the update is accepted (ignored: nothing was asked).
    let small = UpdateTaskParams::new(id, answer("ok"));
    s.anonymous
        .peer()
        .update_task(small)
        .await
        .expect("tasks/update under the cap");
}

#[tokio::test]
async fn oversized_input_responses_in_an_mrtr_retry_are_refused() {
    let limits = Limits {
        max_input_response_bytes: 100,
        ..Limits::default()
    };
    let s = setup_with(limits, true).await;
    // A 2026-07-28 client without the tasks extension that can answer
    // elicitations: input comes back as an MRTR retry of the tools/call.
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    let client = TestClient::new(caps, ProtocolVersion::V_2026_07_28)
        .http(&s.anonymous_url)
        .await;
    let first = client
        .call_tool_once(call("ask", json!({})))
        .await
        .expect("tools/call");
    let CallToolResponse::InputRequired(asked) = first else {
        panic!("expected an InputRequiredResult, got {first:?}");
    };
    let state = asked.request_state.expect("requestState");
    let retry = |note: &str| {
        let mut params = call("ask", json!({})).with_input_responses(BTreeMap::from([(
            "note".to_owned(),
            json!({"action": "accept", "content": {"note": note}}),
        )]));
        params.request_state = Some(state.clone());
        params
    };
    let error = refusal(client.call_tool_once(retry(&"x".repeat(200))).await);
    assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert!(
        error.message.contains("`inputResponses`") && error.message.contains("100-byte limit"),
        "{}",
        error.message
    );
    match client
        .call_tool_once(retry("ok"))
        .await
        .expect("retry under the cap")
    {
        CallToolResponse::Complete(result) => assert_ne!(result.is_error, Some(true)),
        other => panic!("expected the tool's result, got {other:?}"),
    }
}

/// Waits (in real time: the engine runs the steps) until `owner`'s task has
/// ended.
async fn ended(s: &Setup, owner: &Owner, id: &str) {
    let id = agentgate_backend::TaskId::from_client(id);
    for _ in 0..1_000 {
        let task = s.store.get(owner, &id, T0).await.expect("get");
        if task.is_some_and(|t| t.status.is_terminal()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} did not end within 10 s");
}

#[tokio::test]
async fn stored_tasks_are_capped_per_principal_ended_ones_included() {
    let limits = Limits {
        max_stored_tasks: 3,
        ..Limits::default()
    };
    let s = setup_with(limits, true).await;
    // Create-then-cancel: each task ends at once, so the live-task cap
    // never bites, but every ended task stays stored until it is swept.
    for _ in 0..3 {
        let id = start_task(&s.anonymous, "idle", json!({}))
            .await
            .task
            .task_id;
        let _ = s
            .anonymous
            .peer()
            .cancel_task(CancelTaskParams::new(id.clone()))
            .await;
        ended(&s, &Owner::anonymous(), &id).await;
    }
    let error = refusal(s.anonymous.call_tool_once(call("idle", json!({}))).await);
    assert_eq!(error.code, LIMITED);
    for part in [
        "storage quota reached",
        "3 tasks stored",
        "quota is 3",
        "limits.max_stored_tasks",
        "engine.retention_hours",
    ] {
        assert!(
            error.message.contains(part),
            "{part:?} in {}",
            error.message
        );
    }
    let data = error.data.expect("data");
    assert_eq!(data["configKey"], json!("limits.max_stored_tasks"));
    assert_eq!(
        (data["limit"].clone(), data["stored"].clone()),
        (json!(3), json!(3))
    );
    // The oldest ended task (ended at T0) is deleted once the retention
    // window is over, at the next sweep.
    let config = EngineConfig::default();
    let retry = config.retention + config.sweep_every;
    assert_eq!(
        data["retryAfterMs"],
        json!(u64::try_from(retry.as_millis()).expect("ms"))
    );

    // A client without the tasks extension (inline call) is refused alike.
    let inline = TestClient::new(ClientCapabilities::default(), ProtocolVersion::V_2026_07_28)
        .http(&s.anonymous_url)
        .await;
    let error = refusal(inline.call_tool_once(call("idle", json!({}))).await);
    assert_eq!(error.code, LIMITED);
    assert!(
        error.message.contains("limits.max_stored_tasks"),
        "{}",
        error.message
    );

    // Another principal keeps creating.
    for _ in 0..3 {
        start_task(&s.bob, "idle", json!({})).await;
    }

    // Once the sweeper deleted the ended tasks there is room again.
    let swept = s
        .store
        .sweep(T0.saturating_add(retry), config.retention, None)
        .await
        .expect("sweep");
    assert!(swept.deleted >= 3, "{swept:?}");
    start_task(&s.anonymous, "idle", json!({})).await;
}

#[tokio::test]
async fn stored_bytes_are_capped_per_principal() {
    let limits = Limits {
        max_stored_bytes: 10_000,
        ..Limits::default()
    };
    let s = setup(limits).await;
    let big = json!({ "blob": "x".repeat(20_000) });
    start_task(&s.anonymous, "idle", big.clone()).await;
    let error = refusal(s.anonymous.call_tool_once(call("idle", json!({}))).await);
    assert_eq!(error.code, LIMITED);
    for part in [
        "storage quota reached",
        "bytes of stored tasks",
        "quota is 10000",
        "limits.max_stored_bytes",
        "engine.retention_hours",
    ] {
        assert!(
            error.message.contains(part),
            "{part:?} in {}",
            error.message
        );
    }
    let data = error.data.expect("data");
    assert_eq!(data["configKey"], json!("limits.max_stored_bytes"));
    let stored = data["stored"].as_u64().expect("stored bytes");
    assert!((20_000..21_000).contains(&stored), "{stored}");
    assert!(data["retryAfterMs"].as_u64().expect("retryAfterMs") > 0);
    // The quota is per principal.
    start_task(&s.bob, "idle", big).await;
}

#[tokio::test]
async fn a_create_reads_storage_use_only_while_a_storage_quota_is_on() {
    let off = Limits {
        max_stored_tasks: 0,
        max_stored_bytes: 0,
        ..Limits::default()
    };
    let s = setup(off).await;
    start_task(&s.anonymous, "idle", json!({})).await;
    s.anonymous
        .call_tool_once(call("idle", json!({})))
        .await
        .expect("a second create");
    assert_eq!(
        s.store.calls("stored_usage"),
        0,
        "both quotas off: no query"
    );
    assert_eq!(s.store.calls("oldest_ended"), 0);

    // The defaults have both on: one bounded read per create, and the
    // oldest ended task is looked up only for a refusal.
    let s = setup(Limits::default()).await;
    start_task(&s.anonymous, "idle", json!({})).await;
    assert_eq!(s.store.calls("stored_usage"), 1);
    assert_eq!(s.store.calls("oldest_ended"), 0);
}
