//! Test harness: starts the real `conformance-fixture` binary (our engine and
//! SQLite store) and connects rmcp's client to it over stdio or HTTP.

#![allow(dead_code)] // each test file uses a different part of the harness

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

pub use agentgate_testkit::*;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

pub const BIN: &str = env!("CARGO_BIN_EXE_conformance-fixture");

/// The store key of fixtures on PostgreSQL (a test key, used nowhere else).
const SHARED_STORE_KEY: &str = "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";

/// A fixture process on a SQLite file in a temporary directory.
pub struct Fixture {
    pub child: Child,
    pub url: String,
    pub store_path: PathBuf,
}

impl Fixture {
    /// Starts the fixture over HTTP on a free port, on `store_path`.
    pub async fn http(store_path: &Path, extra: &[&str]) -> Self {
        Self::start(&store_url(store_path), store_path, extra).await
    }

    /// Starts the fixture over HTTP on any store URL (PostgreSQL).
    pub async fn http_with_store(url: &str, dir: &Path, extra: &[&str]) -> Self {
        Self::start(url, dir, extra).await
    }

    async fn start(store: &str, store_path: &Path, extra: &[&str]) -> Self {
        let mut command = Command::new(BIN);
        if !store.starts_with("sqlite:") {
            // Instances sharing a PostgreSQL store need one store key (a
            // SQLite store's key file sits beside the database).
            command.env("AGENTGATE_STORE_KEY", SHARED_STORE_KEY);
        }
        let mut child = command
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--store")
            .arg(store)
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

/// The fixture on stdio, on `store_path`, ready for [`TestClient::stdio`].
pub fn stdio_command(store_path: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("--stdio")
        .arg("--store")
        .arg(store_url(store_path))
        .args(extra);
    command
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

/// A raw `subscriptions/listen` stream over HTTP (rmcp's client cannot send
/// `taskIds`): the response's SSE events, one JSON-RPC message at a time.
pub struct TaskListener {
    pub status: u16,
    response: reqwest::Response,
    buffered: String,
}

impl TaskListener {
    /// Opens a listen stream for `task_ids`; `tasks_extension` says whether
    /// the request declares the tasks extension.
    pub async fn open(url: &str, task_ids: &[&str], tasks_extension: bool) -> Self {
        let extensions = if tasks_extension {
            serde_json::json!({"io.modelcontextprotocol/tasks": {}})
        } else {
            serde_json::json!({})
        };
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 41, "method": "subscriptions/listen",
            "params": {
                "notifications": {"taskIds": task_ids},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions}
                }
            }
        });
        let response = reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .body(body.to_string())
            .send()
            .await
            .expect("POST subscriptions/listen");
        Self {
            status: response.status().as_u16(),
            response,
            buffered: String::new(),
        }
    }

    /// The next JSON-RPC message on the stream (SSE events without data,
    /// like the priming event, are skipped). Panics after 30 s.
    pub async fn next(&mut self) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            while let Some(end) = self.buffered.find("\n\n") {
                let event: String = self.buffered.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if !data.is_empty() {
                    return serde_json::from_str(&data).expect("SSE data is JSON");
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .expect("no message on the listen stream within 30 s")
                .expect("read listen stream")
                .expect("listen stream ended");
            self.buffered.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next `notifications/tasks` whose status is `status`, skipping
    /// earlier ones for other states; returns its params.
    pub async fn until_status(&mut self, status: &str) -> serde_json::Value {
        loop {
            let message = self.next().await;
            assert_eq!(message["method"], "notifications/tasks", "{message}");
            if message["params"]["status"] == status {
                return message["params"].clone();
            }
        }
    }

    /// The whole body, for a listen request that was refused.
    pub async fn error_body(self) -> serde_json::Value {
        let text = self.response.text().await.expect("body");
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
    }
}
