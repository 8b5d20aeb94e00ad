//! The example backend end to end: its own binary over stdio, driven by a
//! tasks-capable rmcp client: progress, a question, the answer, the result;
//! and a cancel.

use std::collections::BTreeMap;

use agentgate_testkit::{TestClient, first_text, is_terminal, poll_until, start_task};
use rmcp::model::{CancelTaskParams, TaskPayload, TaskStatus, UpdateTaskParams};
use serde_json::json;
use tokio::process::Command;

fn countdown(store: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentgate-example-countdown"));
    command
        .arg("--stdio")
        .arg("--store")
        .arg(format!("sqlite://{}", store.display()));
    command
}

#[tokio::test]
async fn counts_down_asks_and_greets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = TestClient::tasks()
        .stdio(countdown(&dir.path().join("t.db")))
        .await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "countdown"), "{tools:?}");

    let task = start_task(&client, "countdown", json!({"seconds": 1, "ask": true})).await;
    let id = task.task.task_id;
    let payload = poll_until(&client, &id, |p| p.status() == TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = payload else {
        panic!("expected input_required")
    };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["who"]);
    let mut answer = BTreeMap::new();
    answer.insert(
        "who".to_owned(),
        json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), answer))
        .await
        .expect("tasks/update");
    match poll_until(&client, &id, is_terminal).await {
        TaskPayload::Completed { result } => assert_eq!(first_text(&result), "Hello, Ada!"),
        other => panic!("expected completed, got {other:?}"),
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_countdown_is_cancelled_and_a_too_long_one_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = TestClient::tasks()
        .stdio(countdown(&dir.path().join("t.db")))
        .await;
    let task = start_task(&client, "countdown", json!({"seconds": 500})).await;
    let id = task.task.task_id;
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel");
    assert_eq!(
        poll_until(&client, &id, is_terminal).await.status(),
        TaskStatus::Cancelled
    );
    let task = start_task(&client, "countdown", json!({"seconds": 100000})).await;
    match poll_until(&client, &task.task.task_id, is_terminal).await {
        TaskPayload::Completed { result } => {
            assert_eq!(result["isError"], json!(true));
            assert!(
                first_text(&result).contains("field `seconds`"),
                "{result:?}"
            );
        }
        other => panic!("expected a tool error, got {other:?}"),
    }
    client.cancel().await.expect("close");
}
