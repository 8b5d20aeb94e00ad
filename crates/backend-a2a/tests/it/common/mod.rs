//! The harness of the A2A backend's tests: the real A2A emulator on a real
//! port, behind a recording layer that keeps every JSON-RPC request (headers
//! and body) so a test can check them against the vendored proto; a
//! backend built from config; a step driver standing in for the engine.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentgate_backend::engine::{Input, UpstreamRecorder};
use agentgate_backend::{
    Backend, JobContext, JobError, Step, TaskId, ToolSpec, UpstreamMetrics, UpstreamOutcome,
};
use agentgate_sim::a2a::{A2aConfig as SimConfig, A2aSim};
use agentgate_testkit::contracts::{A2aContract, a2a};
use axum::body::Body;
use axum::http::Request;
use axum::middleware::Next;
use axum::response::Response;
use backend_a2a::{A2aBackend, A2aConfig};
use rmcp::model::{CallToolResult, InputRequests, InputResponses};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// One request the emulator received.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    pub version: Option<String>,
    pub authorization: Option<String>,
    pub body: Value,
}

impl Sent {
    pub(crate) fn method(&self) -> &str {
        self.body["method"].as_str().unwrap_or_default()
    }
}

/// A running emulator.
pub(crate) struct Emulator {
    pub sim: A2aSim,
    pub url: String,
    sent: Arc<Mutex<Vec<Sent>>>,
    card_down: Arc<AtomicBool>,
    shutdown: CancellationToken,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn record(
    sent: Arc<Mutex<Vec<Sent>>>,
    card_down: Arc<AtomicBool>,
    request: Request<Body>,
    next: Next,
) -> Response {
    if request.uri().path() == agentgate_sim::a2a::AGENT_CARD_PATH
        && card_down.load(Ordering::SeqCst)
    {
        return Response::builder()
            .status(503)
            .body(Body::from("card store down"))
            .unwrap_or_default();
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 8 * 1024 * 1024)
        .await
        .unwrap_or_default();
    // JSON-RPC only: the OAuth token endpoint takes a form, not A2A.
    if parts.method == axum::http::Method::POST
        && parts.uri.path() != agentgate_sim::a2a::TOKEN_PATH
    {
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        sent.lock().expect("recording lock").push(Sent {
            version: header("a2a-version"),
            authorization: header("authorization"),
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        });
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

impl Emulator {
    pub(crate) async fn start(config: SimConfig) -> Self {
        let sim = A2aSim::new(config);
        let sent = Arc::new(Mutex::new(Vec::new()));
        let recorder = sent.clone();
        let card_down = Arc::new(AtomicBool::new(false));
        let down = card_down.clone();
        let router = sim
            .router()
            .layer(axum::middleware::from_fn(move |request, next| {
                record(recorder.clone(), down.clone(), request, next)
            }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the emulator");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let shutdown = CancellationToken::new();
        tokio::spawn(agentgate_sim::a2a::serve(
            listener,
            router,
            shutdown.clone(),
        ));
        Self {
            sim,
            url,
            sent,
            card_down,
            shutdown,
        }
    }

    /// Makes the card answer 503 (`true`) or be served again.
    pub(crate) fn card_down(&self, down: bool) {
        self.card_down.store(down, Ordering::SeqCst);
    }

    /// The default emulator, with quick progress steps.
    pub(crate) async fn quick() -> Self {
        Self::start(SimConfig {
            step_delay: Duration::from_millis(20),
            ..SimConfig::default()
        })
        .await
    }

    pub(crate) fn sent(&self) -> Vec<Sent> {
        self.sent.lock().expect("recording lock").clone()
    }

    pub(crate) fn sent_of(&self, method: &str) -> Vec<Sent> {
        self.sent()
            .into_iter()
            .filter(|s| s.method() == method)
            .collect()
    }

    /// Every request so far: a JSON-RPC 2.0 envelope of an A2A method, with
    /// `A2A-Version: 1.0` and params valid against the vendored a2a.proto.
    pub(crate) fn assert_requests_conform(&self) {
        let sent = self.sent();
        assert!(!sent.is_empty(), "no request was sent");
        for (n, request) in sent.iter().enumerate() {
            assert_eq!(
                request.version.as_deref(),
                Some("1.0"),
                "request {n}: {request:?}"
            );
            assert_eq!(request.body["jsonrpc"], "2.0", "request {n}: {request:?}");
            assert!(request.body.get("id").is_some(), "request {n}: no id");
            let method = request.method();
            let params = A2aContract::params_message(method)
                .unwrap_or_else(|| panic!("request {n}: {method} is not an A2A method"));
            let problems = a2a().problems(params, &request.body["params"]);
            assert!(
                problems.is_empty(),
                "request {n} ({method}): {problems:?}\n{request:?}"
            );
        }
    }
}

/// Counts of upstream calls by (operation, outcome).
#[derive(Debug, Default)]
pub(crate) struct Counts(Mutex<BTreeMap<(String, &'static str), u64>>);

impl UpstreamRecorder for Counts {
    fn record(&self, backend: &str, operation: &str, outcome: UpstreamOutcome) {
        assert_eq!(backend, "a2a");
        *self
            .0
            .lock()
            .expect("counts lock")
            .entry((operation.to_owned(), outcome.as_str()))
            .or_default() += 1;
    }
}

impl Counts {
    pub(crate) fn get(&self, operation: &str, outcome: &str) -> u64 {
        self.0
            .lock()
            .expect("counts lock")
            .iter()
            .filter(|((op, out), _)| op == operation && *out == outcome)
            .map(|(_, n)| *n)
            .sum()
    }
}

/// A backend over `agents` (each `{name, url, ...}`), polling every 10 ms.
pub(crate) async fn backend(
    agents: Value,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> (A2aBackend, Arc<Counts>) {
    backend_with(agents, json!({}), env).await
}

/// [`backend`] with more `[a2a]` keys (`section`, an object).
pub(crate) async fn backend_with(
    agents: Value,
    section: Value,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> (A2aBackend, Arc<Counts>) {
    let mut table = json!({
        "agents": agents,
        "poll_interval_ms": 10,
        "refresh_seconds": 0,
        "request_timeout_seconds": 10,
    });
    if let (Some(table), Some(extra)) = (table.as_object_mut(), section.as_object()) {
        table.extend(extra.clone());
    }
    let config: A2aConfig = A2aBackend::parse(Some(table)).expect("the test config parses");
    let counts = Arc::new(Counts::default());
    let metrics = UpstreamMetrics::new("a2a", counts.clone());
    let backend = A2aBackend::with_env(config, metrics, env)
        .await
        .expect("the backend builds");
    (backend, counts)
}

pub(crate) fn no_env(_: &str) -> Option<String> {
    None
}

/// The one tool of a one-agent backend over `emulator`.
pub(crate) async fn tool_for(emulator: &Emulator) -> (ToolSpec, Arc<Counts>) {
    tool_with(emulator, json!({})).await
}

/// The one tool of a one-agent backend over `emulator`, the agent's table
/// with `extra` keys (an object).
pub(crate) async fn tool_with(emulator: &Emulator, extra: Value) -> (ToolSpec, Arc<Counts>) {
    let mut agent = json!({"name": "emu", "url": emulator.url});
    if let (Some(agent), Some(extra)) = (agent.as_object_mut(), extra.as_object()) {
        agent.extend(extra.clone());
    }
    let (backend, counts) = backend(json!([agent]), &no_env).await;
    let mut tools = backend.tools();
    assert_eq!(tools.len(), 1);
    (tools.remove(0), counts)
}

/// How a driven task ended.
#[derive(Debug)]
pub(crate) enum Ending {
    Done(CallToolResult),
    Cancelled,
    Failed(rmcp::model::ErrorData),
}

impl Ending {
    pub(crate) fn result(self) -> CallToolResult {
        match self {
            Ending::Done(result) => result,
            other => panic!("expected a tool result, got {other:?}"),
        }
    }
}

/// What a driven task went through.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    pub statuses: Vec<String>,
    pub asks: Vec<InputRequests>,
}

/// Steps one task the way the engine does: Wait → (after its delay) Tick,
/// Ask → `answer`'s responses. A retryable error is retried at once with
/// the same step number (so the same idempotency key), as the engine's
/// retry does. Ends at Done / Cancelled / Fail.
pub(crate) struct Driver<'a> {
    pub spec: &'a ToolSpec,
    /// Whose task it is (`token:alice` unless set).
    pub owner: agentgate_backend::Owner,
    pub task_id: TaskId,
    pub step: i64,
    pub state: Option<Value>,
    pub trace: Trace,
}

impl<'a> Driver<'a> {
    pub(crate) fn new(spec: &'a ToolSpec) -> Self {
        Self {
            spec,
            owner: agentgate_backend::Owner::new("token:alice"),
            task_id: TaskId::generate(),
            step: 0,
            state: None,
            trace: Trace::default(),
        }
    }

    pub(crate) fn cx(&self) -> JobContext {
        // One book for the whole test binary, as the engine's store is: a
        // follow-up finds the context an earlier call bound to its owner.
        static BOOK: std::sync::LazyLock<Arc<agentgate_backend::InMemoryUpstreamIds>> =
            std::sync::LazyLock::new(Default::default);
        JobContext::new(
            self.task_id.clone(),
            self.owner.clone(),
            self.step,
            agentgate_backend::Millis::EPOCH,
        )
        .with_upstream_ids(BOOK.clone())
    }

    /// Runs one step; on a checkpoint, keeps the state and counts the step.
    pub(crate) async fn step(&mut self, input: Input) -> Result<Step<Value>, JobError> {
        let cx = self.cx();
        let step = self.spec.step(input, &cx).await?;
        Ok(match step {
            Step::Wait {
                state,
                status,
                after,
            } => {
                self.state = Some(state.clone());
                self.step += 1;
                self.trace.statuses.extend(status.clone());
                Step::Wait {
                    state,
                    status,
                    after,
                }
            }
            Step::Ask {
                state,
                status,
                requests,
            } => {
                self.state = Some(state.clone());
                self.step += 1;
                self.trace.statuses.extend(status.clone());
                self.trace.asks.push(requests.clone());
                Step::Ask {
                    state,
                    status,
                    requests,
                }
            }
            other => other,
        })
    }

    /// Runs from `first` to the end.
    pub(crate) async fn run(
        &mut self,
        first: Input,
        mut answer: impl FnMut(&InputRequests) -> InputResponses,
    ) -> Ending {
        let mut input = first;
        for _ in 0..2_000 {
            let step = match self.step(input.clone()).await {
                Ok(step) => step,
                Err(JobError::Retryable { .. }) => continue,
                Err(JobError::Fatal(e)) => return Ending::Failed(e),
                Err(other) => panic!("a job error this harness does not know: {other}"),
            };
            let state = || self.state.clone().expect("a checkpoint");
            input = match step {
                Step::Done(result) => return Ending::Done(result),
                Step::Cancelled { .. } => return Ending::Cancelled,
                Step::Fail(e) => return Ending::Failed(e),
                Step::Wait { after, .. } => {
                    // Pacing only, as the engine's timer would: nothing waits for a side effect.
                    tokio::time::sleep(after).await;
                    Input::Resume(state(), agentgate_backend::Event::Tick)
                }
                Step::Ask { requests, .. } => {
                    Input::Resume(state(), agentgate_backend::Event::Input(answer(&requests)))
                }
            };
        }
        panic!(
            "the task did not end in 2000 steps; statuses: {:?}",
            self.trace.statuses
        );
    }
}

/// Answers nothing: for tasks that must not ask.
pub(crate) fn no_answers(requests: &InputRequests) -> InputResponses {
    panic!("unexpected question: {requests:?}")
}

/// The tool arguments choosing `skill` of the emulator.
pub(crate) fn args(text: &str, skill: &str) -> Input {
    Input::Start(json!({"message": text, "metadata": {"skill": skill}}))
}

/// All text blocks of a result, joined.
pub(crate) fn texts(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}
