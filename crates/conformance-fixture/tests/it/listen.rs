//! Task status push: `subscriptions/listen` with `taskIds` streams
//! `notifications/tasks`, each the task exactly as `tasks/get` returns it.

use std::collections::BTreeMap;

use rmcp::model::{GetTaskParams, UpdateTaskParams};
use serde_json::{Value, json};

use crate::common::*;

/// `tasks/get`'s answer as JSON, without the poll interval (it moves with
/// the task's age, so two reads a moment apart may differ in it).
async fn get_json(client: &Client, id: &str) -> Value {
    let got = client
        .peer()
        .get_task(GetTaskParams::new(id.to_owned()))
        .await
        .expect("tasks/get");
    let mut value = serde_json::to_value(&got.task).expect("json");
    strip_poll_interval(&mut value);
    value
}

fn strip_poll_interval(value: &mut Value) {
    if let Some(map) = value.as_object_mut() {
        map.remove("pollIntervalMs");
        map.remove("_meta");
    }
}

#[tokio::test]
async fn a_listener_hears_every_status_change_of_its_tasks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = serve_http(&dir.path().join("t.db"), &[]).await;
    let client = TestClient::tasks().http(&fixture.url).await;

    let ask = start_task(&client, "confirm_delete", json!({"filename": "a.txt"})).await;
    let id = ask.task.task_id.clone();
    let mut listener = TaskListener::open(&fixture.url, &[&id, "no-such-task"], true).await;
    assert_eq!(listener.status, 200);

    let ack = listener.next().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([id, "no-such-task"]),
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 41,
        "{ack}"
    );

    // The task asks for confirmation; the stream says so with the request.
    let mut asking = listener.until_status("input_required").await;
    assert_eq!(asking["taskId"], json!(id));
    assert_eq!(
        asking["_meta"]["io.modelcontextprotocol/subscriptionId"],
        41
    );
    assert!(asking["inputRequests"]["confirm"].is_object(), "{asking}");
    strip_poll_interval(&mut asking);
    assert_eq!(asking, get_json(&client, &id).await);

    let mut answer = BTreeMap::new();
    answer.insert(
        "confirm".to_owned(),
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), answer))
        .await
        .expect("tasks/update");

    let mut done = listener.until_status("completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"], "confirm_delete(a.txt): confirmed = true",
        "{done}"
    );
    strip_poll_interval(&mut done);
    assert_eq!(done, get_json(&client, &id).await);
    // Every message on the stream was about the listened, existing task.
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn task_ids_need_the_tasks_extension_and_well_formed_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = serve_http(&dir.path().join("t.db"), &[]).await;

    let refused = TaskListener::open(&fixture.url, &["any"], false).await;
    assert_eq!(refused.status, 400);
    let body = refused.error_body().await;
    assert_eq!(body["error"]["code"], -32021, "{body}");
    assert_eq!(body["id"], 41, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("io.modelcontextprotocol/tasks")),
        "{body}"
    );

    let response = reqwest::Client::new()
        .post(&fixture.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(
            json!({
                "jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
                "params": {
                    "notifications": {"taskIds": [1, 2]},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities":
                            {"extensions": {"io.modelcontextprotocol/tasks": {}}}
                    }
                }
            })
            .to_string(),
        )
        .send()
        .await
        .expect("POST");
    let body: Value = response.json().await.expect("JSON error body");
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("taskIds[0]")),
        "{body}"
    );
}

/// A raw JSON-lines MCP client on the fixture's stdin/stdout.
struct StdioPeer {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl StdioPeer {
    fn meta() -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        })
    }

    async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt as _;
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write");
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("no message within 30 s")
            .expect("read")
            .expect("the fixture closed stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// The next message that answers request `id`, skipping notifications
    /// (collected into `seen`).
    async fn answer(&mut self, id: i64, seen: &mut Vec<Value>) -> Value {
        loop {
            let message = self.next().await;
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
            seen.push(message);
        }
    }
}

#[tokio::test]
async fn a_stdio_listener_hears_every_status_change_equal_to_tasks_get() {
    use tokio::io::AsyncBufReadExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut command = stdio_command(&dir.path().join("t.db"), &[]);
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let mut peer = StdioPeer {
        child,
        stdin,
        lines: tokio::io::BufReader::new(stdout).lines(),
    };
    let mut seen = Vec::new();
    peer.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "confirm_delete", "arguments": {"filename": "s.txt"}, "_meta": StdioPeer::meta()}}),
    )
    .await;
    let created = peer.answer(1, &mut seen).await;
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task handle: {created}"))
        .to_owned();

    peer.send(
        json!({"jsonrpc": "2.0", "id": 41, "method": "subscriptions/listen", "params": {
        "notifications": {"taskIds": [id, "no-such-task"]}, "_meta": StdioPeer::meta()}}),
    )
    .await;
    let ack = peer.next().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([id, "no-such-task"]),
        "{ack}"
    );

    // Pushed states until the task asks; each equals tasks/get at the time.
    let mut asking = loop {
        let note = peer.next().await;
        assert_eq!(note["method"], "notifications/tasks", "{note}");
        assert_eq!(
            note["params"]["taskId"],
            json!(id),
            "only listened tasks: {note}"
        );
        if note["params"]["status"] == "input_required" {
            break note["params"].clone();
        }
    };
    assert!(asking["inputRequests"]["confirm"].is_object(), "{asking}");
    peer.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {
        "taskId": id, "_meta": StdioPeer::meta()}}),
    )
    .await;
    let mut got = peer.answer(2, &mut seen).await["result"].clone();
    strip_poll_interval(&mut got);
    got.as_object_mut().map(|m| m.remove("resultType"));
    strip_poll_interval(&mut asking);
    assert_eq!(asking, got, "the push equals tasks/get");

    peer.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/update", "params": {
        "taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}},
        "_meta": StdioPeer::meta()}}))
        .await;
    peer.answer(3, &mut seen).await;
    let done = loop {
        let note = match seen.pop() {
            Some(note) if note["params"]["status"] == "completed" => note,
            _ => peer.next().await,
        };
        if note["method"] == "notifications/tasks" && note["params"]["status"] == "completed" {
            break note["params"].clone();
        }
    };
    assert_eq!(
        done["result"]["content"][0]["text"],
        json!("confirm_delete(s.txt): confirmed = true")
    );
    let _ = peer.child.kill().await;
}
