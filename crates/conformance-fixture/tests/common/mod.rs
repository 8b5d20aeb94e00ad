//! Test harness: starts the real `conformance-fixture` binary (our engine and
//! SQLite store) and connects rmcp's client to it over stdio or HTTP.

#![allow(dead_code)] // each test file uses a different part of the harness

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, CreateTaskResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, GetTaskParams, Implementation,
    ProgressNotificationParam, ProtocolVersion, TaskPayload,
};
use rmcp::service::ClientServiceExt as _;
use rmcp::service::{ClientLifecycleMode, NotificationContext, RequestContext, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

pub const BIN: &str = env!("CARGO_BIN_EXE_conformance-fixture");

/// A fixture process on a SQLite file in a temporary directory.
pub struct Fixture {
    pub child: Child,
    pub url: String,
    pub store_path: PathBuf,
}

impl Fixture {
    /// Starts the fixture over HTTP on a free port, on `store_path`.
    pub async fn http(store_path: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--store")
            .arg(store_url(store_path))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn fixture");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        // The fixture prints its URL on stdout once it accepts connections.
        let url = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("fixture did not start in 30s")
            .expect("read stdout")
            .expect("fixture exited before listening");
        let url = url
            .trim()
            .strip_prefix("listening ")
            .unwrap_or(&url)
            .to_owned();
        Self {
            child,
            url,
            store_path: store_path.to_owned(),
        }
    }

    pub fn kill(&mut self) {
        let pid = self.child.id().expect("running") as i32;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("SIGKILL");
    }
}

pub fn store_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// What the test client saw from the server.
#[derive(Debug, Default)]
pub struct Seen {
    pub progress: Vec<ProgressNotificationParam>,
    pub elicitations: Vec<String>,
}

/// An rmcp client handler with chosen capabilities, which records progress
/// and accepts every elicitation with `answer`.
#[derive(Clone)]
pub struct TestClient {
    pub config: ClientConfig,
    pub seen: Arc<Mutex<Seen>>,
    pub answer: Value,
}

impl TestClient {
    pub fn new(caps: ClientCapabilities, version: ProtocolVersion) -> Self {
        let config = ClientConfig::new(caps, Implementation::new("agentgate-tests", "0"))
            .with_protocol_version(version);
        Self {
            config,
            seen: Arc::default(),
            answer: json!({"confirm": true}),
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

    pub async fn stdio(
        self,
        store_path: &Path,
        extra: &[&str],
    ) -> RunningService<RoleClient, TestClient> {
        let lifecycle = self.lifecycle();
        let mut command = Command::new(BIN);
        command
            .arg("--stdio")
            .arg("--store")
            .arg(store_url(store_path))
            .args(extra);
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn stdio fixture");
        self.serve_with_lifecycle(transport, lifecycle)
            .await
            .expect("connect over stdio")
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.seen.lock().expect("lock").progress.push(params);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.seen
                .lock()
                .expect("lock")
                .elicitations
                .push(message.clone());
        }
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(self.answer.clone());
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
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = client
            .peer()
            .get_task(GetTaskParams::new(id.to_owned()))
            .await
            .expect("tasks/get");
        if done(&got.task.payload) {
            return got.task.payload;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} did not get there in 60s; last: {:?}",
            got.task.payload
        );
        let wait = got.task.task.poll_interval_ms.unwrap_or(100);
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

/// Moves a task's creation time `ms` into the past, straight in the SQLite
/// file, to test expiry without waiting for it.
pub async fn backdate(store_path: &Path, id: &str, ms: i64) {
    use sqlx::Connection as _;
    let mut conn = sqlx::SqliteConnection::connect(&store_url(store_path))
        .await
        .expect("open store file");
    let done = sqlx::query("UPDATE tasks SET created_at = created_at - ? WHERE id = ?")
        .bind(ms)
        .bind(id)
        .execute(&mut conn)
        .await
        .expect("backdate");
    assert_eq!(done.rows_affected(), 1);
}
