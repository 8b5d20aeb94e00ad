//! The one test harness of agentgate's tests, so test files keep only their
//! scenarios:
//!
//! - here: an rmcp client with chosen capabilities that records what the
//!   server sent (progress, elicitations) and answers elicitations, plus
//!   task polling that honours `pollIntervalMs` ([`poll_until`]);
//! - [`process`]: `agentgate serve` / the conformance fixture as a process
//!   (config, env, store, stdout lines, stderr, signals, exit status);
//! - [`emulators`]: the Q Business and GitHub emulators on loopback ports,
//!   with late answers, a door, an answer hold, restarts;
//! - [`pg`]: a PostgreSQL database per test, dropped even on panic, and the
//!   visible skip when no server answers;
//! - [`poll`]: waiting for a predicate instead of sleeping;
//! - [`engine`]: a runtime on a manual clock, driven through a task's waits;
//! - [`spy`]: a counting wrapper of any `TaskStore`;
//! - [`sse`]: JSON-RPC messages off an SSE response;
//! - [`prop`]: the property tests' config, generators and canned upstream;
//! - [`contracts`]: the upstreams' published contracts as validators;
//! - [`faults`], [`hold`]: real faults (full disk, stopped PostgreSQL) and a
//!   swallowed answer; [`power_cut`]: a SQLite VFS that loses what was
//!   never synced;
//! - [`harness`]: test binaries whose tests need what a machine may lack
//!   (PostgreSQL, root, the interop clients) and report them *ignored, with
//!   the reason* when it does.
//!
//! The [`guide`] (`docs/testing.md`) says how to run the tests, what they
//! cover, and how to add one with this harness (its example is compiled).

pub mod contracts;
pub mod emulators;
pub mod engine;
pub mod faults;
#[doc = include_str!("../../../docs/testing.md")]
pub mod guide {}
pub mod harness;
pub mod hold;
pub mod pg;
pub mod poll;
pub mod power_cut;
pub mod process;
pub mod prop;
pub mod spy;
pub mod sse;

pub use emulators::Emulator;
pub use poll::{eventually, eventually_async};
pub use process::{Gate, GateBuilder};

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, CreateTaskResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, GetTaskParams, GetTaskResult,
    Implementation, ProgressNotificationParam, ProtocolVersion, TaskPayload,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt as _, NotificationContext, RequestContext, RunningService,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use tokio::process::Command;

/// What the test client saw from the server.
#[derive(Debug, Default)]
pub struct Seen {
    pub progress: Vec<ProgressNotificationParam>,
    pub elicitations: Vec<String>,
    /// The text of each `sampling/createMessage`'s last message.
    pub samplings: Vec<String>,
    /// How many `notifications/tools/list_changed` arrived (outside any
    /// `subscriptions/listen`).
    pub tool_list_changes: usize,
}

/// An rmcp client handler with chosen capabilities, which records progress
/// and accepts every elicitation with `answer`.
#[derive(Debug, Clone)]
pub struct TestClient {
    pub config: ClientConfig,
    pub seen: Arc<Mutex<Seen>>,
    /// The content sent when accepting a form elicitation.
    pub answer: Value,
    /// How elicitations are answered (accept by default).
    pub action: ElicitationAction,
    /// Open the URL of an accepted URL-mode elicitation, as a user's browser would.
    pub visit_urls: bool,
}

impl TestClient {
    pub fn new(caps: ClientCapabilities, version: ProtocolVersion) -> Self {
        let config = ClientConfig::new(caps, Implementation::new("agentgate-tests", "0"))
            .with_protocol_version(version);
        Self {
            config,
            seen: Arc::default(),
            answer: json!({"confirm": true}),
            action: ElicitationAction::Accept,
            visit_urls: false,
        }
    }

    /// A 2026-07-28 client that declares the tasks extension.
    pub fn tasks() -> Self {
        Self::new(
            ClientCapabilities::builder().enable_tasks().build(),
            ProtocolVersion::V_2026_07_28,
        )
    }

    pub fn lifecycle(&self) -> ClientLifecycleMode {
        if self.config.protocol_version == ProtocolVersion::V_2026_07_28 {
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            }
        } else {
            ClientLifecycleMode::Initialize
        }
    }

    pub async fn http(self, url: &str) -> RunningService<RoleClient, TestClient> {
        let lifecycle = self.lifecycle();
        let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
        self.serve_with_lifecycle(transport, lifecycle)
            .await
            .expect("connect over HTTP")
    }

    /// As [`http`](Self::http), sending `Authorization: Bearer <token>`.
    pub async fn http_with_token(
        self,
        url: &str,
        token: &str,
    ) -> RunningService<RoleClient, TestClient> {
        let lifecycle = self.lifecycle();
        let transport = StreamableHttpClientTransport::from_config(
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                url.to_owned(),
            )
            .auth_header(token.to_owned()),
        );
        self.serve_with_lifecycle(transport, lifecycle)
            .await
            .expect("connect over HTTP with a bearer token")
    }

    /// Spawns `command` (an MCP server on stdio) and connects to it.
    pub async fn stdio(self, command: Command) -> RunningService<RoleClient, TestClient> {
        let lifecycle = self.lifecycle();
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn stdio fixture");
        self.serve_with_lifecycle(transport, lifecycle)
            .await
            .expect("connect over stdio")
    }
}

/// The model a [`TestClient`] that declares sampling answers as.
pub const TEST_MODEL: &str = "agentgate-test-model";

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    /// Answers "completion of: PROMPT" as [`TEST_MODEL`], when the client
    /// declared sampling.
    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        if self.config.capabilities.sampling.is_none() {
            return Err(ErrorData::invalid_request(
                "this test client did not declare sampling",
                None,
            ));
        }
        let prompt = params
            .messages
            .last()
            .and_then(|m| serde_json::to_value(m).ok())
            .and_then(|m| m["content"]["text"].as_str().map(str::to_owned))
            .unwrap_or_default();
        self.seen
            .lock()
            .expect("lock")
            .samplings
            .push(prompt.clone());
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text(format!("completion of: {prompt}")),
            TEST_MODEL.to_owned(),
        )
        .with_stop_reason(rmcp::model::CreateMessageResult::STOP_REASON_END_TURN))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.seen.lock().expect("lock").progress.push(params);
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.seen.lock().expect("lock").tool_list_changes += 1;
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let is_form = matches!(request, ElicitRequestParams::FormElicitationParams { .. });
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. }
            | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
            _ => String::new(),
        };
        self.seen.lock().expect("lock").elicitations.push(message);
        if let ElicitRequestParams::UrlElicitationParams { url, .. } = &request
            && self.visit_urls
            && self.action == ElicitationAction::Accept
        {
            let page = reqwest::get(url.as_str())
                .await
                .map_err(|e| ErrorData::internal_error(format!("visiting {url}: {e}"), None))?;
            if !page.status().is_success() {
                return Err(ErrorData::internal_error(
                    format!("{url} answered {}", page.status()),
                    None,
                ));
            }
        }
        let mut result = ElicitResult::new(self.action.clone());
        if is_form && self.action == ElicitationAction::Accept {
            result.content = Some(self.answer.clone());
        }
        Ok(result)
    }
}

pub type Client = RunningService<RoleClient, TestClient>;

pub fn call(name: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(map)
}

/// Calls a tool and expects a task handle.
pub async fn start_task(client: &Client, name: &str, args: Value) -> CreateTaskResult {
    match client
        .call_tool_once(call(name, args))
        .await
        .expect("tools/call")
    {
        CallToolResponse::Task(task) => task,
        other => panic!("expected a CreateTaskResult, got {other:?}"),
    }
}

/// Polls `tasks/get`, honouring `pollIntervalMs`, until `done` holds or 60 s pass.
pub async fn poll_until(
    client: &Client,
    id: &str,
    done: impl Fn(&TaskPayload) -> bool,
) -> TaskPayload {
    watch_task(client, id, Duration::from_secs(60), |got| {
        done(&got.task.payload)
    })
    .await
    .task
    .payload
}

/// Polls `tasks/get` (at the server's `pollIntervalMs`, or every 500 ms
/// when that is longer, at most ten times per interval) and shows each answer to `seen` until it returns `true`; panics
/// after `timeout`. `seen` may collect (status messages) or assert (no
/// early end) on the way.
pub async fn watch_task(
    client: &Client,
    id: &str,
    timeout: Duration,
    mut seen: impl FnMut(&GetTaskResult) -> bool,
) -> GetTaskResult {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let got = client
            .peer()
            .get_task(GetTaskParams::new(id.to_owned()))
            .await
            .expect("tasks/get");
        if seen(&got) {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} did not get there in {timeout:?}; last: {:?} ({:?})",
            got.task.payload,
            got.task.task.status_message
        );
        // Faster than the server asks while its interval is short, but never
        // more than ten polls per interval, well under the default
        // `limits.poll_burst` (20) that refuses a client polling too fast.
        let interval = got.task.task.poll_interval_ms.unwrap_or(100);
        let wait = interval.min((interval / 10).max(500));
        tokio::time::sleep(Duration::from_millis(wait)).await;
    }
}

pub fn is_terminal(payload: &TaskPayload) -> bool {
    payload.status().is_terminal()
}

/// The first text block of a stored `CallToolResult`.
pub fn first_text(result: &serde_json::Map<String, Value>) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
