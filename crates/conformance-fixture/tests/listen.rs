//! Task status push: `subscriptions/listen` with `taskIds` streams
//! `notifications/tasks`, each the task exactly as `tasks/get` returns it.

mod common;

use std::collections::BTreeMap;

use common::*;
use rmcp::model::{GetTaskParams, UpdateTaskParams};
use serde_json::{Value, json};

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
    let fixture = Fixture::http(&dir.path().join("t.db"), &[]).await;
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
    let fixture = Fixture::http(&dir.path().join("t.db"), &[]).await;

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
