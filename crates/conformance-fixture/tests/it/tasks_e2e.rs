//! End to end, over stdio and over Streamable HTTP, with rmcp's client against
//! the real fixture binary: every task path the Tasks extension defines.

use std::collections::BTreeMap;

use agentgate_backend::{Owner, TaskId};
use agentgate_core::clock::{Clock as _, SystemClock};
use agentgate_core::store::{SqliteStore, TaskStore as _};
use agentgate_core::task::NewTask;
use rmcp::model::{
    CancelTaskParams, ErrorCode, GetTaskParams, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::ServiceError;
use serde_json::json;

use crate::common::*;

/// One scenario, run against a client connected over some transport.
async fn create_poll_complete(client: &Client) {
    let task = start_task(
        client,
        "slow_compute",
        json!({"seconds": 0.3, "label": "x"}),
    )
    .await;
    assert_eq!(task.task.status, TaskStatus::Working);
    assert_eq!(task.task.task_id.len(), 27, "ids carry 160 random bits");
    assert!(task.task.poll_interval_ms.is_some());
    assert_eq!(task.task.ttl_ms, Some(3_600_000));
    match poll_until(client, &task.task.task_id, is_terminal).await {
        TaskPayload::Completed { result } => {
            assert_eq!(first_text(&result), "slow_compute(x) done after 0.3s");
        }
        other => panic!("expected completed, got {other:?}"),
    }
}

async fn input_required_then_update(client: &Client) {
    let task = start_task(client, "confirm_delete", json!({"filename": "a.txt"})).await;
    let id = task.task.task_id;
    let payload = poll_until(client, &id, |p| p.status() == TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = payload else {
        panic!("expected input_required")
    };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), vec!["confirm"]);
    let mut answer = BTreeMap::new();
    answer.insert(
        "confirm".to_owned(),
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    answer.insert("not-asked".to_owned(), json!({"action": "accept"}));
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), answer))
        .await
        .expect("tasks/update");
    match poll_until(client, &id, is_terminal).await {
        TaskPayload::Completed { result } => {
            assert_eq!(
                first_text(&result),
                "confirm_delete(a.txt): confirmed = true"
            );
        }
        other => panic!("expected completed, got {other:?}"),
    }
}

async fn cancel_ends_cancelled(client: &Client) {
    let task = start_task(client, "slow_compute", json!({"seconds": 600})).await;
    let id = task.task.task_id;
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel");
    let payload = poll_until(client, &id, is_terminal).await;
    assert_eq!(payload.status(), TaskStatus::Cancelled);
}

async fn tool_error_completes_with_is_error(client: &Client) {
    let task = start_task(client, "failing_job", json!({})).await;
    match poll_until(client, &task.task.task_id, is_terminal).await {
        TaskPayload::Completed { result } => {
            assert_eq!(result["isError"], json!(true));
            assert!(first_text(&result).contains("intentional tool execution error"));
        }
        other => panic!("expected completed with isError, got {other:?}"),
    }
}

async fn protocol_error_fails(client: &Client) {
    let task = start_task(client, "protocol_error_job", json!({})).await;
    match poll_until(client, &task.task.task_id, is_terminal).await {
        TaskPayload::Failed { error } => {
            assert_eq!(error["code"], json!(ErrorCode::INTERNAL_ERROR.0));
            assert!(
                error["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("protocol-level"))
            );
        }
        other => panic!("expected failed, got {other:?}"),
    }
}

fn invalid_params_code(result: Result<impl std::fmt::Debug, ServiceError>) -> String {
    match result {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
            e.message.to_string()
        }
        other => panic!("expected -32602, got {other:?}"),
    }
}

/// Expired, unknown and foreign ids all answer -32602 with one message.
async fn expired_and_foreign_ids_look_unknown(client: &Client, store_path: &std::path::Path) {
    let store = SqliteStore::open(&store_url(store_path))
        .await
        .expect("open store");
    let task = start_task(client, "slow_compute", json!({"seconds": 600})).await;
    let id = task.task.task_id;

    // Someone else's task, written into the same store.
    let foreign = TaskId::generate();
    let now = SystemClock.now();
    store
        .create(NewTask {
            id: foreign.clone(),
            owner: Owner::new("someone-else"),
            tool: "slow_compute".into(),
            args: json!({"seconds": 600}),
            status_message: None,
            ttl_ms: None,
            now,
        })
        .await
        .expect("create foreign task");
    let unknown = invalid_params_code(
        client
            .peer()
            .get_task(GetTaskParams::new(TaskId::generate().to_string()))
            .await,
    );
    let other = invalid_params_code(
        client
            .peer()
            .get_task(GetTaskParams::new(foreign.to_string()))
            .await,
    );
    assert_eq!(
        unknown, other,
        "a foreign task must look exactly like an unknown id"
    );
    let cancel = client
        .peer()
        .cancel_task(CancelTaskParams::new(foreign.to_string()))
        .await;
    assert_eq!(invalid_params_code(cancel), unknown);

    // Expire ours by moving its creation time back past its TTL.
    backdate(store_path, &id, 3_600_001).await;
    let expired = invalid_params_code(client.peer().get_task(GetTaskParams::new(id)).await);
    assert_eq!(expired, unknown);
}

async fn all_scenarios(client: Client, store_path: &std::path::Path) {
    create_poll_complete(&client).await;
    input_required_then_update(&client).await;
    cancel_ends_cancelled(&client).await;
    tool_error_completes_with_is_error(&client).await;
    protocol_error_fails(&client).await;
    expired_and_foreign_ids_look_unknown(&client, store_path).await;
    client.cancel().await.expect("close client");
}

#[tokio::test]
async fn task_paths_over_http() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.db");
    let fixture = serve_http(&store, &[]).await;
    let client = TestClient::tasks().http(&fixture.url).await;
    all_scenarios(client, &store).await;
}

#[tokio::test]
async fn task_paths_over_stdio() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.db");
    let client = TestClient::tasks().stdio(stdio_command(&store, &[])).await;
    all_scenarios(client, &store).await;
}
