//! Property tests: hostile JSON-RPC through the real `/mcp` router.
//!
//! The gateway (over an in-memory SQLite store and a running engine) is
//! served by [`http_router`], and every generated message is sent to it with
//! tower's `oneshot`, exactly as axum would hand it over from a socket.
//! Generated input ranges from garbage bytes and arbitrary JSON to
//! near-valid messages of every method (right shape, wrong types, missing and
//! extra fields, huge strings, deep nesting, unknown task ids) and batches.
//!
//! Properties:
//! - every request is answered within [`CASE_TIMEOUT`] (a hang fails the test);
//! - every answer is a well-formed HTTP response, and every JSON-RPC error in
//!   it has an integer code and a non-empty message;
//! - `tasks/update` with arbitrary `inputResponses` never corrupts a task: it
//!   can still be answered properly afterwards, and ended tasks keep their
//!   result.
//!
//! `PROPTEST_CASES` raises the (CI-sized) case counts for long local runs.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{
    Event, Job, JobContext, PollPolicy, Step, StepResult, ToolPolicy, ToolSpec,
};
use agentgate_core::engine::EngineConfig;
use agentgate_core::mcp::{HttpOptions, TransportKind, http_router};
use agentgate_core::runtime::Runtime;
use agentgate_core::store::SqliteStore;
use agentgate_testkit::prop::{self as shared, config};
use axum::body::Body;
use futures::StreamExt as _;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams, InputRequest, InputRequests,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// A request that takes longer than this counts as a hang.
const CASE_TIMEOUT: Duration = Duration::from_secs(20);
const MODERN: &str = "2026-07-28";
const TASKS_EXT: &str = "io.modelcontextprotocol/tasks";

// ---------------------------------------------------------------------------
// Jobs behind the router

#[derive(Debug, Deserialize, JsonSchema)]
struct EchoArgs {
    /// Echoed back.
    text: String,
    /// How many times.
    #[serde(default)]
    times: Option<u8>,
}

/// Completes at once with its arguments.
#[derive(Debug)]
struct Echo;

impl Job for Echo {
    type Args = EchoArgs;
    type State = ();

    async fn start(&self, args: EchoArgs, _: &JobContext) -> StepResult<()> {
        let times = usize::from(args.times.unwrap_or(1));
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text(args.text.repeat(times.min(3))),
        ])))
    }

    async fn resume(&self, _: (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::Done(CallToolResult::success(vec![])))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AskArgs {}

/// Asks one form elicitation (`confirm`: boolean), then reports the answer.
#[derive(Debug)]
struct Ask;

const ASK_KEY: &str = "confirm";

impl Job for Ask {
    type Args = AskArgs;
    type State = ();

    async fn start(&self, _: AskArgs, _: &JobContext) -> StepResult<()> {
        let schema = json!({
            "type": "object",
            "properties": {"confirm": {"type": "boolean"}},
            "required": ["confirm"]
        });
        let requested_schema = serde_json::from_value(schema).map_err(|e| {
            agentgate_backend::JobError::Fatal(rmcp::model::ErrorData::internal_error(
                e.to_string(),
                None,
            ))
        })?;
        let mut requests = InputRequests::new();
        requests.insert(
            ASK_KEY.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(
                ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: "Confirm?".to_owned(),
                    requested_schema,
                },
            )),
        );
        Ok(Step::Ask {
            state: (),
            status: Some("waiting for confirmation".to_owned()),
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
        // Whatever the client sent, the job answers with a result that says
        // what it understood.
        let response = responses.get(ASK_KEY);
        let action = response
            .and_then(|r| r.get("action"))
            .and_then(Value::as_str);
        let confirmed = response
            .and_then(|r| r.get("content"))
            .and_then(|c| c.get("confirm"))
            .and_then(Value::as_bool);
        Ok(Step::Done(match (action, confirmed) {
            (Some("accept"), Some(confirmed)) => CallToolResult::success(vec![ContentBlock::text(
                format!("confirmed = {confirmed}"),
            )]),
            (Some("accept"), None) => CallToolResult::error(vec![ContentBlock::text(
                "Error: field `content.confirm` must be a boolean",
            )]),
            (Some(other), _) => CallToolResult::success(vec![ContentBlock::text(format!(
                "not confirmed ({other})"
            ))]),
            (None, _) => CallToolResult::error(vec![ContentBlock::text(
                "Error: field `action` is missing; expected accept, decline or cancel",
            )]),
        }))
    }
}

// ---------------------------------------------------------------------------
// The harness

struct Harness {
    rt: tokio::runtime::Runtime,
    router: axum::Router,
    shutdown: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn harness() -> Harness {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (router, shutdown) = rt.block_on(async {
        let store = SqliteStore::open("sqlite::memory:").await.expect("store");
        let policy = ToolPolicy::default()
            .ttl(Some(Duration::from_secs(3600)))
            .poll(PollPolicy::fixed(Duration::from_millis(100)))
            .sync_budget(Duration::from_secs(2))
            .step_timeout(Duration::from_secs(10))
            .sync_fallback(true);
        let config = EngineConfig {
            idle_poll: Duration::from_millis(50),
            ..EngineConfig::default()
        };
        let runtime = Runtime::builder(Arc::new(store))
            .config(config)
            .tool(ToolSpec::new("echo", "Echoes text.", policy.clone(), Echo))
            .tool(ToolSpec::new("ask", "Asks for confirmation.", policy, Ask))
            .start()
            .expect("start");
        let gateway = runtime.gateway(TransportKind::Http).await.expect("gateway");
        // Stopped by cancelling its token when the harness is dropped.
        let stop = runtime.shutdown_token().clone();
        let router = http_router(gateway, HttpOptions::default(), stop.clone());
        (router, stop)
    });
    Harness {
        rt,
        router,
        shutdown,
    }
}

/// What the router answered.
#[derive(Debug)]
struct Reply {
    status: u16,
    content_type: String,
    /// JSON-RPC messages: the JSON body, or the SSE events' data.
    messages: Vec<Value>,
    /// The body as text when it was neither.
    text: String,
}

/// Headers a generated request carries.
#[derive(Debug, Clone)]
struct Headers {
    protocol: Option<&'static str>,
    method: Option<String>,
    /// Send `Mcp-Name` (derived from the body, as clients must).
    name: bool,
    accept: &'static str,
    content_type: &'static str,
}

impl Headers {
    fn modern(method: &str) -> Self {
        Self {
            protocol: Some(MODERN),
            method: Some(method.to_owned()),
            name: true,
            accept: "application/json, text/event-stream",
            content_type: "application/json",
        }
    }
}

/// POSTs `body` to `/mcp` and reads the answer: the whole body, or for an
/// event stream, events until a JSON-RPC response arrives or (for
/// `subscriptions/listen`, which stays open by design) the first message.
async fn post(router: &axum::Router, headers: &Headers, body: Vec<u8>) -> Reply {
    let mut request = http::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", "localhost")
        .header("accept", headers.accept)
        .header("content-type", headers.content_type);
    if let Some(protocol) = headers.protocol {
        request = request.header("mcp-protocol-version", protocol);
    }
    if let Some(method) = headers
        .method
        .as_deref()
        .and_then(|m| http::HeaderValue::from_str(m).ok())
    {
        request = request.header("mcp-method", method);
    }
    if let Some(name) = mcp_name(&body).filter(|_| headers.name)
        && let Ok(value) = http::HeaderValue::from_str(&name)
    {
        request = request.header("mcp-name", value);
    }
    let request = request.body(Body::from(body)).expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let listen = headers.method.as_deref() == Some("subscriptions/listen");
    let mut stream = response.into_body().into_data_stream();
    let mut raw = Vec::new();
    let mut messages = Vec::new();
    if content_type.starts_with("text/event-stream") {
        let mut buffered = String::new();
        'read: while let Some(chunk) = stream.next().await {
            let Ok(chunk) = chunk else { break };
            buffered.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffered.find("\n\n") {
                let event: String = buffered.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                let message =
                    serde_json::from_str::<Value>(&data).unwrap_or(Value::String(data.clone()));
                let is_response = message.get("id").is_some()
                    && (message.get("result").is_some() || message.get("error").is_some());
                messages.push(message);
                if is_response || listen {
                    break 'read;
                }
            }
        }
        return Reply {
            status,
            content_type,
            messages,
            text: buffered,
        };
    }
    while let Some(Ok(chunk)) = stream.next().await {
        raw.extend_from_slice(&chunk);
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    match serde_json::from_slice::<Value>(&raw) {
        Ok(Value::Array(batch)) => messages.extend(batch),
        Ok(message) => messages.push(message),
        Err(_) => {}
    }
    Reply {
        status,
        content_type,
        messages,
        text,
    }
}

/// The `Mcp-Name` header a client derives from the body: `params.name` for
/// `tools/call`, `params.taskId` for `tasks/*`, Base64-wrapped when it is not
/// plain visible ASCII.
fn mcp_name(body: &[u8]) -> Option<String> {
    use base64::Engine as _;
    let message: Value = serde_json::from_slice(body).ok()?;
    let key = match message.get("method")?.as_str()? {
        "tools/call" => "name",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    let name = message.get("params")?.get(key)?.as_str()?;
    let plain = !name.starts_with([' ', '\t'])
        && !name.ends_with([' ', '\t'])
        && !name.starts_with("=?base64?")
        && name.chars().all(|c| (' '..='~').contains(&c));
    Some(if plain {
        name.to_owned()
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(name);
        format!("=?base64?{encoded}?=")
    })
}

/// Checks that every JSON-RPC error in `reply` is well-formed and that an
/// HTTP error says something.
fn check_reply(reply: &Reply) -> Result<(), TestCaseError> {
    prop_assert!(
        (100..600).contains(&reply.status),
        "bad status {}",
        reply.status
    );
    if reply.status >= 400 {
        prop_assert!(
            !reply.messages.is_empty() || !reply.text.trim().is_empty(),
            "HTTP {} with an empty body",
            reply.status
        );
    }
    if reply.content_type.starts_with("application/json") {
        prop_assert!(
            !reply.messages.is_empty() || reply.text.is_empty(),
            "a JSON body that is not JSON: {:?}",
            reply.text
        );
    }
    for message in &reply.messages {
        let Some(error) = message.get("error") else {
            continue;
        };
        prop_assert!(
            error.get("code").is_some_and(Value::is_i64),
            "error without an integer code: {message}"
        );
        let text = error.get("message").and_then(Value::as_str).unwrap_or("");
        prop_assert!(
            !text.trim().is_empty(),
            "error without a message: {message}"
        );
    }
    Ok(())
}

/// `post` within [`CASE_TIMEOUT`]; a hang fails the case.
fn send(h: &Harness, headers: &Headers, body: Vec<u8>) -> Result<Reply, TestCaseError> {
    h.rt.block_on(async {
        tokio::time::timeout(CASE_TIMEOUT, post(&h.router, headers, body)).await
    })
    .map_err(|_| TestCaseError::fail(format!("no answer within {CASE_TIMEOUT:?}: hang")))
}

fn meta(tasks: bool) -> Value {
    let extensions = if tasks {
        json!({ TASKS_EXT: {} })
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions}
    })
}

/// A well-formed modern request.
fn request(method: &str, mut params: Value, tasks: bool) -> (Headers, Vec<u8>) {
    if let Value::Object(map) = &mut params {
        map.insert("_meta".to_owned(), meta(tasks));
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    (Headers::modern(method), body.to_string().into_bytes())
}

/// The single JSON-RPC response in `reply`, or the reason there is none.
fn response(reply: &Reply) -> Result<&Value, TestCaseError> {
    reply
        .messages
        .iter()
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
        .ok_or_else(|| TestCaseError::fail(format!("no JSON-RPC response in {reply:?}")))
}

/// Creates an `ask` task and waits until it asks for input; returns its id.
fn ask_task(h: &Harness) -> Result<String, TestCaseError> {
    let (headers, body) = request("tools/call", json!({"name": "ask", "arguments": {}}), true);
    let reply = send(h, &headers, body)?;
    let answer = response(&reply)?;
    let id = answer["result"]["task"]["taskId"]
        .as_str()
        .or_else(|| answer["result"]["taskId"].as_str())
        .ok_or_else(|| TestCaseError::fail(format!("no task id in {answer}")))?
        .to_owned();
    until(h, &id, |status| status == "input_required")?;
    Ok(id)
}

/// `tasks/get` for `id`.
fn get(h: &Harness, id: &str) -> Result<Value, TestCaseError> {
    let (headers, body) = request("tasks/get", json!({"taskId": id}), true);
    let reply = send(h, &headers, body)?;
    let answer = response(&reply)?;
    prop_assert!(answer.get("error").is_none(), "tasks/get failed: {answer}");
    Ok(answer["result"].clone())
}

/// Polls `tasks/get` until the status satisfies `done` (10 s at most).
fn until(h: &Harness, id: &str, done: impl Fn(&str) -> bool) -> Result<Value, TestCaseError> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let task = get(h, id)?;
        if done(task["status"].as_str().unwrap_or_default()) {
            return Ok(task);
        }
        if std::time::Instant::now() > deadline {
            return Err(TestCaseError::fail(format!("task {id} stuck: {task}")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------
// Generators

fn nasty_string() -> BoxedStrategy<String> {
    shared::nasty_string(&[])
}

/// Arbitrary JSON, objects keyed mostly by names the server knows.
fn any_json() -> BoxedStrategy<Value> {
    shared::any_json(nasty_string(), field_name().boxed(), 4)
}

/// Field names: mostly ones the server knows, so wrong values reach it.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "jsonrpc", "id", "method", "params", "name", "arguments", "taskId", "_meta",
            "inputResponses", "requestState", "notifications", "taskIds", "text", "times",
            "action", "content", "confirm", "protocolVersion", "capabilities", "clientInfo",
            "io.modelcontextprotocol/protocolVersion",
            "io.modelcontextprotocol/clientCapabilities", "extensions", "cursor", "ttl",
        ])
        .prop_map(str::to_owned),
        1 => ".{0,12}",
    ]
}

/// JSON nested `depth` levels deep, as text (deeper than any parser limit).
fn deep_nesting() -> impl Strategy<Value = Vec<u8>> {
    (1usize..5000, any::<bool>()).prop_map(|(depth, objects)| {
        let (open, close) = if objects {
            ("{\"a\":", "}")
        } else {
            ("[", "]")
        };
        let mut s = String::new();
        s.push_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":");
        s.push_str(&open.repeat(depth));
        s.push('1');
        s.push_str(&close.repeat(depth));
        s.push('}');
        s.into_bytes()
    })
}

const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "tasks/list",
    "tasks/result",
    "subscriptions/listen",
    "server/discover",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "resources/list",
    "no/such",
];

/// A `_meta`: valid (with or without tasks), or broken in one place.
fn meta_strategy() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        12 => any::<bool>().prop_map(|t| Some(meta(t))),
        1 => Just(None),
        2 => (prop::sample::select(vec![MODERN, "2025-06-18", "1999-01-01", "", "2026-07-28x"]),
              any_json())
            .prop_map(|(v, caps)| Some(json!({
                "io.modelcontextprotocol/protocolVersion": v,
                "io.modelcontextprotocol/clientCapabilities": caps
            }))),
        1 => any_json().prop_map(Some),
    ]
}

/// Parameters shaped for `method`, with wrong values mixed in.
fn params_for(method: &'static str, task_ids: Vec<String>) -> BoxedStrategy<Value> {
    let task_id = {
        let known = task_ids.clone();
        prop_oneof![
            3 => prop::sample::select(known).prop_map(Value::from),
            2 => nasty_string().prop_map(Value::from),
            1 => any_json(),
        ]
    };
    match method {
        "tools/call" => (
            prop_oneof![
                3 => prop::sample::select(vec!["echo", "ask", "task_status", "nope"])
                    .prop_map(Value::from),
                1 => any_json(),
            ],
            prop_oneof![
                2 => (any_json(), proptest::option::of(any_json()))
                    .prop_map(|(text, times)| {
                        let mut args = json!({"text": text});
                        if let Some(times) = times {
                            args["times"] = times;
                        }
                        args
                    }),
                1 => Just(json!({"text": "hi", "times": 2})),
                1 => task_id.clone().prop_map(|id| json!({"taskId": id})),
                1 => any_json(),
            ],
            prop_oneof![6 => Just(None), 1 => any_json().prop_map(Some)],
        )
            .prop_map(|(name, arguments, state)| {
                let mut params = json!({"name": name, "arguments": arguments});
                if let Some(state) = state {
                    params["requestState"] = state;
                    params["inputResponses"] = json!({"confirm": {"action": "accept"}});
                }
                params
            })
            .boxed(),
        "tasks/get" | "tasks/cancel" | "tasks/result" => {
            task_id.prop_map(|id| json!({"taskId": id})).boxed()
        }
        "tasks/update" => (task_id, input_responses())
            .prop_map(|(id, responses)| json!({"taskId": id, "inputResponses": responses}))
            .boxed(),
        "subscriptions/listen" => prop_oneof![
            prop::collection::vec(task_id, 0..5)
                .prop_map(|ids| json!({"notifications": {"taskIds": ids}})),
            any_json().prop_map(|n| json!({"notifications": n})),
        ]
        .boxed(),
        "initialize" => (
            prop::sample::select(vec![MODERN, "2025-06-18", "2025-11-25", "bogus"]),
            any_json(),
        )
            .prop_map(|(version, caps)| {
                json!({
                    "protocolVersion": version,
                    "capabilities": caps,
                    "clientInfo": {"name": "prop", "version": "0"}
                })
            })
            .boxed(),
        _ => prop_oneof![4 => Just(json!({})), 1 => any_json()].boxed(),
    }
}

/// `inputResponses`: near-valid answers to `confirm` and arbitrary maps.
fn input_responses() -> impl Strategy<Value = Value> {
    let answer = prop_oneof![
        3 => (
            prop::sample::select(vec!["accept", "decline", "cancel", "", "ACCEPT"]),
            prop_oneof![
                any::<bool>().prop_map(|b| json!({"confirm": b})),
                any_json().prop_map(|v| json!({"confirm": v})),
                any_json(),
            ],
        )
            .prop_map(|(action, content)| json!({"action": action, "content": content})),
        1 => any_json().prop_map(|a| json!({"action": a})),
        2 => any_json(),
    ];
    prop_oneof![
        3 => prop::collection::btree_map(
            prop_oneof![3 => Just(ASK_KEY.to_owned()), 1 => nasty_string()],
            answer,
            0..4,
        )
        .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => any_json(),
    ]
}

/// One JSON-RPC message: mostly well-formed envelopes with hostile params.
fn message(task_ids: Vec<String>) -> impl Strategy<Value = (String, Value)> {
    (
        prop::sample::select(METHODS.to_vec()),
        prop_oneof![
            12 => any::<i64>().prop_map(Value::from),
            1 => nasty_string().prop_map(Value::from),
            1 => Just(Value::Null),
            1 => any_json(),
        ],
        prop_oneof![12 => Just(json!("2.0")), 1 => any_json()],
        prop::bool::weighted(0.2),
        meta_strategy(),
    )
        .prop_flat_map(move |(method, id, version, notification, meta)| {
            params_for(method, task_ids.clone()).prop_map(move |mut params| {
                if let (Value::Object(map), Some(meta)) = (&mut params, meta.clone()) {
                    map.insert("_meta".to_owned(), meta);
                }
                let mut message = json!({"jsonrpc": version, "method": method, "params": params});
                if !(notification || method.starts_with("notifications/")) {
                    message["id"] = id.clone();
                }
                (method.to_owned(), message)
            })
        })
}

/// A whole request: headers and body.
fn hostile_request(task_ids: Vec<String>) -> impl Strategy<Value = (Headers, Vec<u8>)> {
    // Mostly what a modern client sends, so the body reaches the handler;
    // otherwise one or more headers wrong or missing.
    let correct = (
        Just(Some(MODERN)),
        Just("application/json, text/event-stream"),
        Just("application/json"),
        Just(true),
        Just(true),
    );
    let mutated = (
        prop_oneof![
            Just(Some(MODERN)),
            Just(None),
            Just(Some("2025-06-18")),
            Just(Some("garbage")),
        ],
        prop_oneof![
            Just("application/json, text/event-stream"),
            Just("application/json"),
            Just("text/html"),
        ],
        prop_oneof![Just("application/json"), Just("text/plain")],
        any::<bool>(),
        any::<bool>(),
    );
    let headers = prop_oneof![6 => correct, 1 => mutated];
    let body = prop_oneof![
        16 => message(task_ids.clone()).prop_map(|(m, v)| (Some(m), v.to_string().into_bytes())),
        2 => prop::collection::vec(message(task_ids), 0..4).prop_map(|batch| {
            let values: Vec<Value> = batch.into_iter().map(|(_, v)| v).collect();
            (None, Value::Array(values).to_string().into_bytes())
        }),
        2 => any_json().prop_map(|v| (None, v.to_string().into_bytes())),
        1 => prop::collection::vec(any::<u8>(), 0..512).prop_map(|b| (None, b)),
        1 => deep_nesting().prop_map(|b| (Some("tools/call".to_owned()), b)),
    ];
    (headers, body).prop_map(
        |((protocol, accept, content_type, method_header, name), (method, body))| {
            let method = if method_header { method } else { None };
            (
                Headers {
                    protocol,
                    method,
                    name,
                    accept,
                    content_type,
                },
                body,
            )
        },
    )
}

// ---------------------------------------------------------------------------
// Properties

#[test]
fn hostile_json_rpc_gets_an_answer_and_clear_errors() {
    let h = harness();
    let waiting = ask_task(&h).expect("an input_required task");
    let mut runner = TestRunner::new(config(3000));
    let task_ids = vec![waiting.clone(), "no-such-task".to_owned()];
    // What the answers were, so a generator that never gets past the
    // transport shows up as a failure rather than a green run.
    let outcomes = std::sync::Mutex::new(std::collections::BTreeMap::<String, usize>::new());
    runner
        .run(&hostile_request(task_ids), |(headers, body)| {
            let reply = send(&h, &headers, body)?;
            check_reply(&reply)?;
            let outcome = match reply.messages.first() {
                Some(m) if m.get("result").is_some() => "result".to_owned(),
                Some(m) if m.get("error").is_some() => format!("error {}", m["error"]["code"]),
                Some(_) => "other message".to_owned(),
                None => format!("HTTP {}", reply.status),
            };
            *outcomes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(outcome)
                .or_default() += 1;
            Ok(())
        })
        .expect("property");
    let outcomes = outcomes.into_inner().unwrap_or_else(|p| p.into_inner());
    eprintln!("outcomes: {outcomes:#?}");
    assert!(
        outcomes.get("result").copied().unwrap_or(0) > 0,
        "no generated request got a result: {outcomes:?}"
    );
    assert!(
        outcomes.get("error -32602").copied().unwrap_or(0) > 0,
        "no generated request reached parameter validation: {outcomes:?}"
    );

    // The server still works: a proper call gets its answer.
    let (headers, body) = request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "still here"}}),
        false,
    );
    let reply = send(&h, &headers, body).expect("answer");
    let answer = response(&reply).expect("response");
    assert_eq!(
        answer["result"]["content"][0]["text"],
        json!("still here"),
        "{answer}"
    );
}

#[test]
fn arbitrary_input_responses_never_corrupt_a_task() {
    let h = harness();
    // One ended task, for updates against a task that asks nothing.
    let ended = ask_task(&h).expect("task");
    let (headers, body) = request(
        "tasks/update",
        json!({"taskId": ended, "inputResponses":
            {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        true,
    );
    check_reply(&send(&h, &headers, body).expect("update")).expect("clear reply");
    let ended_result =
        until(&h, &ended, |s| s == "completed").expect("completed")["result"].clone();
    assert_eq!(
        ended_result["content"][0]["text"],
        json!("confirmed = true")
    );

    let mut runner = TestRunner::new(config(600));
    runner
        .run(&(input_responses(), input_responses()), |(first, again)| {
            let id = ask_task(&h)?;
            for (target, responses) in [(&id, &first), (&ended, &again)] {
                let (headers, body) = request(
                    "tasks/update",
                    json!({"taskId": target, "inputResponses": responses}),
                    true,
                );
                check_reply(&send(&h, &headers, body)?)?;
            }
            // The ended task is untouched.
            let task = get(&h, &ended)?;
            prop_assert_eq!(&task["status"], &json!("completed"));
            prop_assert_eq!(&task["result"], &ended_result);
            // The asking task is either still asking (then a proper answer
            // finishes it) or finished with a result saying what it got.
            let task = until(&h, &id, |s| s != "working")?;
            match task["status"].as_str() {
                Some("input_required") => {
                    let (headers, body) = request(
                        "tasks/update",
                        json!({"taskId": id, "inputResponses":
                            {"confirm": {"action": "accept", "content": {"confirm": false}}}}),
                        true,
                    );
                    let reply = send(&h, &headers, body)?;
                    check_reply(&reply)?;
                    let done = until(&h, &id, |s| s == "completed")?;
                    prop_assert_eq!(
                        &done["result"]["content"][0]["text"],
                        &json!("confirmed = false")
                    );
                }
                Some("completed") => {
                    let text = task["result"]["content"][0]["text"].as_str().unwrap_or("");
                    prop_assert!(!text.is_empty(), "completed without a message: {}", task);
                }
                other => prop_assert!(false, "unexpected status {:?}: {}", other, task),
            }
            Ok(())
        })
        .expect("property");
}
