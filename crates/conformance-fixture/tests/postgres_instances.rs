//! Several fixture processes on one PostgreSQL database form one task space:
//! any instance answers for any task, `tasks/update` / `tasks/cancel` sent to
//! one instance take effect on the task another one runs, and a
//! `subscriptions/listen` stream on one instance hears what another changed.
//!
//! Needs a PostgreSQL server (`AGENTGATE_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`); without one the test is reported
//! ignored, with the reason, unless `AGENTGATE_REQUIRE_POSTGRES=1` (then it fails).

mod common;

use std::collections::BTreeMap;

use agentgate_testkit::pg::TestDatabase;
use common::*;
use rmcp::model::{CancelTaskParams, GetTaskParams, TaskPayload, TaskStatus, UpdateTaskParams};
use serde_json::json;

const INSTANCES: usize = 3;

async fn three_instances_on_one_database_share_every_task() {
    let db = TestDatabase::create("agentgate_it").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut fixtures = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..INSTANCES {
        // The fixture takes any store URL; `store_path` is unused here.
        let fixture = serve_http_on(db.url(), dir.path(), &[]).await;
        clients.push(TestClient::tasks().http(&fixture.url).await);
        fixtures.push(fixture);
    }

    // Tasks created round-robin: each visible, identically, on every instance.
    let mut ids = Vec::new();
    for i in 0..300 {
        let client = &clients[i % INSTANCES];
        let task = start_task(
            client,
            "slow_compute",
            json!({"seconds": 0.3, "label": format!("t{i}")}),
        )
        .await;
        ids.push(task.task.task_id);
    }
    for (i, id) in ids.iter().enumerate() {
        let payload = poll_until(&clients[(i + 1) % INSTANCES], id, is_terminal).await;
        let TaskPayload::Completed { result } = &payload else {
            panic!("task {id}: {payload:?}");
        };
        assert_eq!(
            first_text(result),
            format!("slow_compute(t{i}) done after 0.3s")
        );
        let mut seen = Vec::new();
        for client in &clients {
            let got = client
                .peer()
                .get_task(GetTaskParams::new(id.clone()))
                .await
                .expect("tasks/get");
            seen.push(serde_json::to_value(&got.task).expect("json"));
        }
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:?}");
    }

    // Cancel sent to another instance than the one that created the task.
    let long = start_task(&clients[0], "slow_compute", json!({"seconds": 600})).await;
    clients[1]
        .peer()
        .cancel_task(CancelTaskParams::new(long.task.task_id.clone()))
        .await
        .expect("tasks/cancel");
    let payload = poll_until(&clients[2], &long.task.task_id, is_terminal).await;
    assert!(matches!(payload, TaskPayload::Cancelled), "{payload:?}");

    // Input answered through another instance.
    let ask = start_task(&clients[2], "confirm_delete", json!({"filename": "a.txt"})).await;
    let id = ask.task.task_id;
    poll_until(&clients[0], &id, |p| {
        p.status() == TaskStatus::InputRequired
    })
    .await;
    let mut answer = BTreeMap::new();
    answer.insert(
        "confirm".to_owned(),
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    clients[1]
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), answer))
        .await
        .expect("tasks/update");
    match poll_until(&clients[0], &id, is_terminal).await {
        TaskPayload::Completed { result } => {
            assert_eq!(
                first_text(&result),
                "confirm_delete(a.txt): confirmed = true"
            );
        }
        other => panic!("{other:?}"),
    }

    for client in clients {
        client.cancel().await.expect("close");
    }
    drop(fixtures);
    drop(db);
}

async fn a_listener_hears_changes_another_instance_makes() {
    let db = TestDatabase::create("agentgate_it").await;
    let dir = tempfile::tempdir().expect("tempdir");
    // The front instance runs no steps, so every change its listener hears
    // was made by the worker instance and arrived by NOTIFY.
    let front = serve_http_on(db.url(), dir.path(), &["--concurrency", "0"]).await;
    let worker = serve_http_on(db.url(), dir.path(), &[]).await;
    let front_client = TestClient::tasks().http(&front.url).await;
    let worker_client = TestClient::tasks().http(&worker.url).await;

    let ask = start_task(
        &front_client,
        "confirm_delete",
        json!({"filename": "b.txt"}),
    )
    .await;
    let long = start_task(&front_client, "slow_compute", json!({"seconds": 600})).await;
    let (ask, long) = (ask.task.task_id, long.task.task_id);
    let mut listener = TaskListener::open(&front.url, &[&ask, &long], true).await;
    let ack = listener.next().await;
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([ask, long])
    );

    let mut statuses: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // The worker runs the confirmation step until it asks.
    loop {
        let message = listener.next().await;
        record(&mut statuses, &message);
        if message["params"]["taskId"] == json!(ask)
            && message["params"]["status"] == "input_required"
        {
            break;
        }
    }
    let mut answer = BTreeMap::new();
    answer.insert(
        "confirm".to_owned(),
        json!({"action": "accept", "content": {"confirm": false}}),
    );
    worker_client
        .peer()
        .update_task(UpdateTaskParams::new(ask.clone(), answer))
        .await
        .expect("tasks/update");
    worker_client
        .peer()
        .cancel_task(CancelTaskParams::new(long.clone()))
        .await
        .expect("tasks/cancel");
    let ended = |s: &BTreeMap<String, Vec<String>>, id: &str, status: &str| {
        s.get(id)
            .is_some_and(|v| v.last().is_some_and(|l| l == status))
    };
    while !(ended(&statuses, &ask, "completed") && ended(&statuses, &long, "cancelled")) {
        let message = listener.next().await;
        if message["params"]["taskId"] == json!(ask) && message["params"]["status"] == "completed" {
            assert_eq!(
                message["params"]["result"]["content"][0]["text"],
                "confirm_delete(b.txt): confirmed = false",
                "{message}"
            );
        }
        record(&mut statuses, &message);
    }
    assert_eq!(statuses[&long].first().map(String::as_str), Some("working"));

    front_client.cancel().await.expect("close");
    worker_client.cancel().await.expect("close");
    drop((front, worker));
    drop(db);
}

/// Notes a `notifications/tasks` message's status under its task id.
fn record(statuses: &mut BTreeMap<String, Vec<String>>, message: &serde_json::Value) {
    assert_eq!(message["method"], "notifications/tasks", "{message}");
    let params = &message["params"];
    statuses
        .entry(params["taskId"].as_str().unwrap_or_default().to_owned())
        .or_default()
        .push(params["status"].as_str().unwrap_or_default().to_owned());
}

fn main() -> std::process::ExitCode {
    harness::Tests::new()
        .test(
            "three_instances_on_one_database_share_every_task",
            three_instances_on_one_database_share_every_task,
        )
        .test(
            "a_listener_hears_changes_another_instance_makes",
            a_listener_hears_changes_another_instance_makes,
        )
        .run()
}
