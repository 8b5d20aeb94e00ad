//! The task wire of MCP 2025-11-25 over raw Streamable HTTP: what a
//! 2025-11-25 client (VS Code, the SDKs' 1.x tasks clients) sends, byte for
//! byte, to a gateway on SQLite with its scheduler running, and two
//! principals, each on its own route.
//!
//! Raw JSON, not rmcp's client: rmcp's model has no 2025-11-25 task types,
//! and the point is the exact wire (`capabilities.tasks`,
//! `execution.taskSupport`, `{task: {...}}`, `ttl`, `pollInterval`, the
//! refusals' codes).

use std::sync::Arc;

use agentgate_backend::{Event, Job, JobContext, Owner, Step, StepResult, ToolPolicy, ToolSpec};
use agentgate_core::auth::Principal;
use agentgate_core::mcp::{HttpOptions, TransportKind, http_router};
use agentgate_core::runtime::Runtime;
use agentgate_core::store::SqliteStore;
use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, ErrorData};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Deserialize, JsonSchema)]
struct Args {
    #[serde(default)]
    word: Option<String>,
}

/// Answers at once with the word it was given.
#[derive(Clone)]
struct Echo;

impl Job for Echo {
    type Args = Args;
    type State = ();

    async fn start(&self, args: Args, _: &JobContext) -> StepResult<()> {
        Ok(Step::Done(CallToolResult::success(vec![
            ContentBlock::text(args.word.unwrap_or_else(|| "done".into())),
        ])))
    }

    async fn resume(&self, _: (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::cancelled())
    }
}

/// Fails at the protocol level.
#[derive(Clone)]
struct Broken;

impl Job for Broken {
    type Args = Args;
    type State = ();

    async fn start(&self, _: Args, _: &JobContext) -> StepResult<()> {
        Ok(Step::Fail(ErrorData::new(
            ErrorCode(-32050),
            "the upstream refused",
            Some(json!({"upstream": "down"})),
        )))
    }

    async fn resume(&self, _: (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::cancelled())
    }
}

/// Waits until cancelled.
#[derive(Clone)]
struct Slow;

impl Job for Slow {
    type Args = Args;
    type State = ();

    async fn start(&self, _: Args, _: &JobContext) -> StepResult<()> {
        Ok(Step::Wait {
            state: (),
            status: Some("still going".into()),
            after: std::time::Duration::from_secs(3600),
        })
    }

    async fn resume(&self, _: (), _: Event, _: &JobContext) -> StepResult<()> {
        Ok(Step::Wait {
            state: (),
            status: Some("still going".into()),
            after: std::time::Duration::from_secs(3600),
        })
    }

    async fn cancel(&self, _: (), _: &JobContext) -> StepResult<()> {
        Ok(Step::cancelled())
    }
}

struct Setup {
    anonymous: String,
    bob: String,
    _stop: tokio_util::sync::DropGuard,
    /// The store's directory, kept as long as the test runs.
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let store = Arc::new(SqliteStore::open(&url).await.expect("store"));
    let runtime = Runtime::builder(store)
        .tool(ToolSpec::new("echo", "echoes", ToolPolicy::default(), Echo))
        .tool(ToolSpec::new(
            "broken",
            "fails",
            ToolPolicy::default(),
            Broken,
        ))
        .tool(ToolSpec::new("slow", "waits", ToolPolicy::default(), Slow))
        .start()
        .expect("start");
    let gateway = runtime.gateway(TransportKind::Http).await.expect("gateway");
    // The setup's drop guard stops the runtime with the servers.
    let stop = runtime.shutdown_token().clone();
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
    Setup {
        anonymous: serve(anonymous, stop.clone()).await,
        bob: serve(bob, stop.clone()).await,
        _stop: stop.drop_guard(),
        _dir: dir,
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

/// A legacy (initialize) session at one protocol version, spoken in raw JSON.
struct Session {
    http: reqwest::Client,
    url: String,
    id: String,
    version: &'static str,
    next: u64,
    /// The `initialize` result.
    init: Value,
}

/// The one JSON-RPC response in a body, JSON or SSE.
fn response_of(body: &str) -> Value {
    if let Ok(message) = serde_json::from_str::<Value>(body) {
        return message;
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
        .unwrap_or_else(|| panic!("no response in: {body}"))
}

impl Session {
    async fn open(url: &str, version: &'static str) -> Self {
        let http = reqwest::Client::new();
        let response = http
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                }}),
            )
            .send()
            .await
            .expect("initialize");
        let id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_owned();
        let init = response_of(&response.text().await.expect("body"));
        let session = Self {
            http,
            url: url.to_owned(),
            id,
            version,
            next: 1,
            init,
        };
        session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        session
    }

    async fn post(&self, message: Value) -> String {
        self.http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", self.version)
            .json(&message)
            .send()
            .await
            .expect("request")
            .text()
            .await
            .expect("body")
    }

    /// Sends a request; returns its whole response message.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let message =
            json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        response_of(&self.post(message).await)
    }
}

fn result(message: &Value) -> &Value {
    assert!(message.get("error").is_none(), "an error: {message}");
    &message["result"]
}

/// `message`'s result, which must be a `name` of the vendored 2025-11-25
/// schema (`contracts/mcp/2025-11-25/schema.json`).
fn result_as<'a>(name: &str, message: &'a Value) -> &'a Value {
    let result = result(message);
    let problems = agentgate_testkit::contracts::mcp_2025_11_25().problems(name, result);
    assert!(problems.is_empty(), "{problems:#?}\nin {message}");
    result
}

fn error(message: &Value) -> (i64, String) {
    let error = &message["error"];
    assert!(error.is_object(), "not an error: {message}");
    (
        error["code"].as_i64().unwrap_or_default(),
        error["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2025_11_25_client_gets_a_task_at_once_and_its_result() {
    let setup = setup().await;
    let mut client = Session::open(&setup.anonymous, "2025-11-25").await;
    // The capability VS Code looks for before it sends `task`.
    assert_eq!(
        client.init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{}",
        client.init
    );
    let problems = agentgate_testkit::contracts::mcp_2025_11_25()
        .problems("InitializeResult", &client.init["result"]);
    assert!(problems.is_empty(), "{problems:#?}");
    let tools = client.request("tools/list", json!({})).await;
    result_as("ListToolsResult", &tools);
    let support = |name: &str| {
        result(&tools)["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == name))
            .map(|t| t["execution"]["taskSupport"].clone())
    };
    assert_eq!(support("echo"), Some(json!("optional")), "{tools}");
    assert_eq!(support("task_status"), Some(json!("forbidden")), "{tools}");

    let created = client
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"word": "hello"}, "task": {"ttl": 60000}}),
        )
        .await;
    let task = &result_as("CreateTaskResult", &created)["task"];
    let id = task["taskId"].as_str().expect("taskId").to_owned();
    assert_eq!(task["status"], "working", "{created}");
    assert!(task["createdAt"].is_string() && task["lastUpdatedAt"].is_string());
    assert!(
        task.get("ttl").is_some(),
        "ttl is always present: {created}"
    );

    let got = client.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(
        result_as("GetTaskResult", &got)["taskId"],
        id.as_str(),
        "{got}"
    );

    let answer = client.request("tasks/result", json!({"taskId": id})).await;
    // tasks/result answers what the request would have: a CallToolResult.
    let answer = result_as("CallToolResult", &answer);
    assert_eq!(answer["content"][0]["text"], "hello", "{answer}");
    assert_eq!(
        answer["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    let ended = client.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(
        result_as("GetTaskResult", &ended)["status"],
        "completed",
        "{ended}"
    );
    let listed = client.request("tasks/list", json!({})).await;
    let listed = result_as("ListTasksResult", &listed);
    assert_eq!(listed["tasks"][0]["taskId"], id.as_str(), "{listed}");

    // Cancelling an ended task is refused, as 2025-11-25 requires.
    let (code, message) = error(&client.request("tasks/cancel", json!({"taskId": id})).await);
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("terminal"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_owners_task_is_answered_like_an_unknown_one() {
    let setup = setup().await;
    let mut anonymous = Session::open(&setup.anonymous, "2025-11-25").await;
    let mut bob = Session::open(&setup.bob, "2025-11-25").await;
    let created = anonymous
        .request("tools/call", json!({"name": "slow", "task": {}}))
        .await;
    let id = result(&created)["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let foreign = error(&bob.request(method, json!({"taskId": id})).await);
        let unknown = error(&bob.request(method, json!({"taskId": "no-such-task"})).await);
        assert_eq!(foreign, unknown, "{method}");
        assert_eq!(foreign.0, -32602, "{method}: {}", foreign.1);
    }
    // Bob's cancel did nothing; the owner's does.
    let cancelled = anonymous
        .request("tasks/cancel", json!({"taskId": id}))
        .await;
    assert_eq!(
        result_as("CancelTaskResult", &cancelled)["taskId"],
        id.as_str(),
        "{cancelled}"
    );
    let answer = anonymous
        .request("tasks/result", json!({"taskId": id}))
        .await;
    assert_eq!(result(&answer)["isError"], true, "{answer}");
    let ended = anonymous.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(
        result_as("GetTaskResult", &ended)["status"],
        "cancelled",
        "{ended}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_result_of_a_failed_task_is_its_json_rpc_error() {
    let setup = setup().await;
    let mut client = Session::open(&setup.anonymous, "2025-11-25").await;
    let created = client
        .request("tools/call", json!({"name": "broken", "task": {}}))
        .await;
    let id = result(&created)["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    let answer = client.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(error(&answer), (-32050, "the upstream refused".to_owned()));
    assert_eq!(answer["error"]["data"]["upstream"], "down", "{answer}");
    // A built-in does not run as a task.
    let (code, message) = error(
        &client
            .request(
                "tools/call",
                json!({"name": "task_status", "arguments": {"task_id": id}, "task": {}}),
            )
            .await,
    );
    assert_eq!(code, -32601, "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn other_versions_see_no_2025_11_25_task_wire() {
    let setup = setup().await;
    let mut client = Session::open(&setup.anonymous, "2025-06-18").await;
    assert!(
        client.init["result"]["capabilities"].get("tasks").is_none(),
        "{}",
        client.init
    );
    let tools = client.request("tools/list", json!({})).await;
    assert!(
        result(&tools)["tools"][0].get("execution").is_none(),
        "{tools}"
    );
    // `task` is not honoured: the call runs inline.
    let answer = client
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"word": "inline"}, "task": {}}),
        )
        .await;
    assert_eq!(result(&answer)["content"][0]["text"], "inline", "{answer}");
    // The gateway's internal name for the call cannot be sent directly (it
    // would skip the scope checks made on `tools/call`), at any version.
    for version in ["2025-06-18", "2025-11-25"] {
        let mut client = Session::open(&setup.anonymous, version).await;
        let forged = client
            .request(
                "io.agentgate/2025-11-25/tools/call",
                json!({"name": "echo", "task": {}}),
            )
            .await;
        assert_eq!(error(&forged).0, -32601, "{version}: {forged}");
    }
}
