//! What the fixture's tests share beyond agentgate-testkit: the real
//! `conformance-fixture` binary (our engine and SQLite store) started through
//! the testkit's process builder, a store backdating helper, and a raw
//! `subscriptions/listen` client.

#![allow(dead_code)] // `it` and `postgres_instances` each use part of it

use std::path::Path;

use agentgate_testkit::sse::SseReader;
pub(crate) use agentgate_testkit::*;
use tokio::process::Command;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_conformance-fixture");

/// The fixture over HTTP on a free port, on the SQLite file `store_path`.
pub(crate) async fn serve_http(store_path: &Path, extra: &[&str]) -> Gate {
    let dir = store_path.parent().expect("a store file in a directory");
    GateBuilder::fixture(BIN, dir)
        .sqlite(store_path)
        .args(extra)
        .start()
        .await
}

/// The fixture over HTTP on any store URL (PostgreSQL), working in `dir`.
pub(crate) async fn serve_http_on(store: &str, dir: &Path, extra: &[&str]) -> Gate {
    GateBuilder::fixture(BIN, dir)
        .store(store)
        .args(extra)
        .start()
        .await
}

pub(crate) fn store_url(path: &Path) -> String {
    process::sqlite_url(path)
}

/// The fixture on stdio, on `store_path`, ready for [`TestClient::stdio`].
pub(crate) fn stdio_command(store_path: &Path, extra: &[&str]) -> Command {
    let dir = store_path.parent().expect("a store file in a directory");
    GateBuilder::fixture(BIN, dir)
        .sqlite(store_path)
        .no_listen()
        .arg("--stdio")
        .args(extra)
        .command()
}

/// Moves a task's creation and expiry `ms` into the past, straight in the
/// SQLite file, to test expiry without waiting for it (the expiry is its TTL
/// after its last progress, so moving the creation alone is not enough).
pub(crate) async fn backdate(store_path: &Path, id: &str, ms: i64) {
    use sqlx::Connection as _;
    let mut conn = sqlx::SqliteConnection::connect(&store_url(store_path))
        .await
        .expect("open store file");
    let done = sqlx::query(
        "UPDATE tasks SET created_at = created_at - ?1, expires_at = expires_at - ?1 WHERE id = ?2",
    )
    .bind(ms)
    .bind(id)
    .execute(&mut conn)
    .await
    .expect("backdate");
    assert_eq!(done.rows_affected(), 1);
}

/// A raw `subscriptions/listen` stream over HTTP (rmcp's client cannot send
/// `taskIds`): the response's SSE events, one JSON-RPC message at a time.
pub(crate) struct TaskListener {
    pub status: u16,
    events: SseReader,
}

impl TaskListener {
    /// Opens a listen stream for `task_ids`; `tasks_extension` says whether
    /// the request declares the tasks extension.
    pub(crate) async fn open(url: &str, task_ids: &[&str], tasks_extension: bool) -> Self {
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
            events: SseReader::new(response),
        }
    }

    /// The next JSON-RPC message on the stream (SSE events without data,
    /// like the priming event, are skipped). Panics after 30 s.
    pub(crate) async fn next(&mut self) -> serde_json::Value {
        self.events.next().await
    }

    /// The next `notifications/tasks` whose status is `status`, skipping
    /// earlier ones for other states; returns its params.
    pub(crate) async fn until_status(&mut self, status: &str) -> serde_json::Value {
        loop {
            let message = self.next().await;
            assert_eq!(message["method"], "notifications/tasks", "{message}");
            if message["params"]["status"] == status {
                return message["params"].clone();
            }
        }
    }

    /// The whole body, for a listen request that was refused.
    pub(crate) async fn error_body(self) -> serde_json::Value {
        let text = self.events.into_response().text().await.expect("body");
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
    }
}
