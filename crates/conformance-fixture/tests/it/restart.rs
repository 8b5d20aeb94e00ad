//! Durability: tasks survive a SIGKILLed server and finish after a restart.

use rmcp::model::{TaskPayload, TaskStatus};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn tasks_survive_sigkill_and_complete_after_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.db");
    // A short lease so the restarted process takes the dead one's tasks over
    // quickly; the restart must still wait for every lease to run out.
    let flags = ["--lease-seconds", "3"];
    let mut first = serve_http(&store, &flags).await;
    let client = TestClient::tasks().http(&first.url).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let task = start_task(
            &client,
            "slow_compute",
            json!({"seconds": 2, "label": format!("t{i}")}),
        )
        .await;
        ids.push(task.task.task_id);
    }
    // Mid-way: every task has been picked up and is still working.
    for id in &ids {
        let payload = poll_until(&client, id, |p| {
            matches!(p, TaskPayload::Working) || p.status().is_terminal()
        })
        .await;
        assert_eq!(
            payload.status(),
            TaskStatus::Working,
            "task {id} ended too early"
        );
    }
    first.kill();
    first.wait().await;
    drop(client);

    let second = serve_http(&store, &flags).await;
    let client = TestClient::tasks().http(&second.url).await;
    for (i, id) in ids.iter().enumerate() {
        match poll_until(&client, id, is_terminal).await {
            TaskPayload::Completed { result } => {
                assert_eq!(
                    first_text(&result),
                    format!("slow_compute(t{i}) done after 2s")
                );
            }
            other => panic!("task {id} ended {other:?}"),
        }
    }
    client.cancel().await.expect("close");
}
