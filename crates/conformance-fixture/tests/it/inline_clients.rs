//! Clients without the tasks extension: the same jobs, followed inline.

use rmcp::model::{
    CallToolResponse, ClientCapabilities, ErrorCode, InputResponses, ProtocolVersion,
};
use rmcp::service::ServiceError;
use serde_json::json;

use crate::common::*;

fn legacy(caps: ClientCapabilities) -> TestClient {
    TestClient::new(caps, ProtocolVersion::V_2025_11_25)
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn legacy_client_gets_a_synchronous_result_with_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = legacy(ClientCapabilities::default())
        .stdio(stdio_command(&dir.path().join("t.db"), &[]))
        .await;
    let seen = client.service().seen.clone();
    let mut params = call("slow_compute", json!({"seconds": 1.2, "label": "sync"}));
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::Number(7),
    ));
    params.meta = Some(meta);
    let result = client.call_tool(params).await.expect("tools/call");
    assert_eq!(text_of(&result), "slow_compute(sync) done after 1.2s");
    let progress = seen.lock().expect("lock").progress.clone();
    assert!(
        !progress.is_empty(),
        "a progressToken must bring progress notifications"
    );
    assert!(progress.windows(2).all(|w| w[0].progress < w[1].progress));
    assert!(
        progress.iter().any(|p| p
            .message
            .as_deref()
            .is_some_and(|m| m.contains("computing sync"))),
        "{progress:?}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn legacy_client_with_elicitation_answers_inline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    let client = legacy(caps)
        .stdio(stdio_command(&dir.path().join("t.db"), &[]))
        .await;
    let seen = client.service().seen.clone();
    let result = client
        .call_tool(call("confirm_delete", json!({"filename": "b.txt"})))
        .await
        .expect("tools/call");
    assert_eq!(text_of(&result), "confirm_delete(b.txt): confirmed = true");
    assert_eq!(
        seen.lock().expect("lock").elicitations,
        vec!["Delete b.txt?".to_owned()]
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn client_without_elicitation_is_told_what_input_is_needed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = legacy(ClientCapabilities::default())
        .stdio(stdio_command(&dir.path().join("t.db"), &[]))
        .await;
    let result = client
        .call_tool(call("confirm_delete", json!({"filename": "c.txt"})))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true));
    let text = text_of(&result);
    assert!(text.contains("`confirm`: Delete c.txt?"), "{text}");
    let pending = result
        .structured_content
        .expect("the pending request is described");
    assert_eq!(pending["status"], json!("input_required"));
    assert_eq!(
        pending["inputRequests"]["confirm"]["params"]["message"],
        json!("Delete c.txt?")
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn modern_client_without_tasks_gets_mrtr_and_finishes_with_request_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = serve_http(&dir.path().join("t.db"), &[]).await;
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    let client = TestClient::new(caps, ProtocolVersion::V_2026_07_28)
        .http(&fixture.url)
        .await;
    let first = client
        .call_tool_once(call("confirm_delete", json!({"filename": "d.txt"})))
        .await
        .expect("round 1");
    let CallToolResponse::InputRequired(round1) = first else {
        panic!("expected InputRequiredResult, got {first:?}")
    };
    let requests = round1.input_requests.expect("inputRequests");
    assert!(requests.contains_key("confirm"));
    let state = round1.request_state.expect("requestState");

    // A tampered state is refused with a clear error.
    let mut tampered = call("confirm_delete", json!({"filename": "d.txt"}));
    tampered.request_state = Some(format!("{state}x"));
    match client.call_tool_once(tampered).await {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains("requestState"), "{}", e.message);
        }
        other => panic!("expected -32602 for a tampered state, got {other:?}"),
    }

    let mut responses = InputResponses::new();
    responses.insert(
        "confirm".into(),
        json!({"action": "accept", "content": {"confirm": false}}),
    );
    let mut second = call("confirm_delete", json!({"filename": "d.txt"}));
    second.request_state = Some(state);
    second.input_responses = Some(responses);
    match client.call_tool_once(second).await.expect("round 2") {
        CallToolResponse::Complete(result) => {
            assert_eq!(text_of(&result), "confirm_delete(d.txt): confirmed = false");
        }
        other => panic!("expected a final result, got {other:?}"),
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn work_beyond_the_sync_budget_continues_as_a_task_followed_by_task_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = legacy(ClientCapabilities::default())
        .stdio(stdio_command(
            &dir.path().join("t.db"),
            &["--sync-budget-seconds", "1"],
        ))
        .await;
    let result = client
        .call_tool(call(
            "slow_compute",
            json!({"seconds": 2.5, "label": "long"}),
        ))
        .await
        .expect("tools/call");
    assert_ne!(result.is_error, Some(true));
    let id = result
        .meta
        .as_ref()
        .and_then(|m| m.0.get("io.agentgate/taskId"))
        .and_then(|v| v.as_str())
        .expect("the result carries the task id")
        .to_owned();
    assert!(text_of(&result).contains(&id));

    let mut status = String::new();
    for _ in 0..10 {
        let polled = client
            .call_tool(call(
                "task_status",
                json!({"task_id": id, "wait_seconds": 5}),
            ))
            .await
            .expect("task_status");
        let structured = polled.structured_content.expect("structured task");
        status = structured["status"].as_str().unwrap_or_default().to_owned();
        if status == "completed" {
            assert_eq!(
                structured["result"]["content"][0]["text"],
                json!("slow_compute(long) done after 2.5s")
            );
            break;
        }
    }
    assert_eq!(status, "completed");

    let bad = client
        .call_tool(call(
            "task_status",
            json!({"task_id": id, "wait_seconds": 600}),
        ))
        .await
        .expect("task_status");
    assert_eq!(bad.is_error, Some(true));
    assert!(text_of(&bad).contains("wait_seconds"));
    let unknown = client
        .call_tool(call("task_status", json!({"task_id": "nope"})))
        .await
        .expect("task_status");
    assert!(text_of(&unknown).contains("unknown or expired task id"));
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn task_only_tool_without_the_extension_is_refused_with_32021() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = serve_http(&dir.path().join("t.db"), &[]).await;
    let client = TestClient::new(ClientCapabilities::default(), ProtocolVersion::V_2026_07_28)
        .http(&fixture.url)
        .await;
    match client.call_tool_once(call("failing_job", json!({}))).await {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code.0, -32021);
            let data = e.data.expect("data");
            assert!(
                data["requiredCapabilities"]["extensions"]
                    .get("io.modelcontextprotocol/tasks")
                    .is_some()
            );
        }
        other => panic!("expected -32021, got {other:?}"),
    }
    client.cancel().await.expect("close");
}

fn task_id_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .structured_content
        .as_ref()
        .and_then(|s| s["taskId"].as_str())
        .map(str::to_owned)
        .or_else(|| {
            result
                .meta
                .as_ref()
                .and_then(|m| m.0.get("io.agentgate/taskId"))
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        })
        .expect("the result carries the task id")
}

/// Follows task `id` with the `task_status` tool (long polls of up to 5 s,
/// ten at most) until its status is `status`; returns the structured task
/// and the text of that answer.
async fn follow_with_task_status(
    client: &Client,
    id: &str,
    status: &str,
) -> (serde_json::Value, String) {
    let mut last = serde_json::Value::Null;
    for _ in 0..10 {
        let polled = client
            .call_tool(call(
                "task_status",
                json!({"task_id": id, "wait_seconds": 5}),
            ))
            .await
            .expect("task_status");
        let text = text_of(&polled);
        last = polled.structured_content.expect("structured task");
        if last["status"] == status {
            return (last, text);
        }
    }
    panic!("task {id} did not become {status}; last: {last}");
}

#[tokio::test]
async fn a_legacy_client_follows_answers_and_gets_the_result_through_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = legacy(ClientCapabilities::default())
        .stdio(stdio_command(
            &dir.path().join("t.db"),
            &["--sync-budget-seconds", "1"],
        ))
        .await;
    let tools = client.list_all_tools().await.expect("tools/list");
    for name in ["task_status", "task_answer", "task_cancel"] {
        assert!(tools.iter().any(|t| t.name == name), "{name} is listed");
    }
    // The job asks a question this client cannot take inline: the result
    // hands over the task and names the tool that answers it.
    let handed = client
        .call_tool(call("confirm_delete", json!({"filename": "e.txt"})))
        .await
        .expect("tools/call");
    let id = task_id_of(&handed);
    assert!(
        text_of(&handed).contains("task_answer"),
        "{}",
        text_of(&handed)
    );

    // task_status shows the pending request and its fields.
    let status = client
        .call_tool(call("task_status", json!({"task_id": id})))
        .await
        .expect("task_status");
    let text = text_of(&status);
    assert!(text.contains("input_required"), "{text}");
    assert!(text.contains("Waiting for input `confirm`"), "{text}");
    assert!(text.contains("fields:"), "{text}");
    assert!(text.contains("task_answer"), "{text}");

    // A wrong answer is refused, naming the field; the task still waits.
    let wrong = client
        .call_tool(call(
            "task_answer",
            json!({"task_id": id, "responses": {"confirm": {"action": "accept", "content": {"confirm": "yes"}}}}),
        ))
        .await
        .expect("task_answer");
    assert_eq!(wrong.is_error, Some(true));
    assert!(
        text_of(&wrong).contains("content.confirm"),
        "{}",
        text_of(&wrong)
    );
    let unknown_key = client
        .call_tool(call(
            "task_answer",
            json!({"task_id": id, "responses": {"nope": {"action": "accept", "content": {}}}}),
        ))
        .await
        .expect("task_answer");
    assert!(
        text_of(&unknown_key).contains("`confirm`"),
        "{}",
        text_of(&unknown_key)
    );

    // Another principal's view is not ours to test on stdio; an unknown id is.
    let stranger = client
        .call_tool(call(
            "task_answer",
            json!({"task_id": "no-such-task", "responses": {"confirm": {"action": "decline"}}}),
        ))
        .await
        .expect("task_answer");
    assert!(text_of(&stranger).contains("unknown or expired task id"));

    let answered = client
        .call_tool(call(
            "task_answer",
            json!({"task_id": id, "responses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        ))
        .await
        .expect("task_answer");
    assert_ne!(answered.is_error, Some(true), "{}", text_of(&answered));
    assert_eq!(
        answered.structured_content.expect("ack")["complete"],
        json!(true)
    );

    let (last, _) = follow_with_task_status(&client, &id, "completed").await;
    assert_eq!(
        last["result"]["content"][0]["text"],
        json!("confirm_delete(e.txt): confirmed = true")
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_legacy_client_answers_a_question_asked_after_its_call_ran_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = legacy(ClientCapabilities::default())
        .stdio(stdio_command(
            &dir.path().join("t.db"),
            &["--sync-budget-seconds", "1"],
        ))
        .await;
    // The job works for 2 s before it asks: the 1 s budget runs out while it
    // is still working, so the call hands over the task without a question.
    let handed = client
        .call_tool(call(
            "confirm_delete",
            json!({"filename": "late.txt", "ask_after_seconds": 2}),
        ))
        .await
        .expect("tools/call");
    let id = task_id_of(&handed);
    let handed_text = text_of(&handed);
    assert_ne!(handed.is_error, Some(true), "{handed_text}");
    assert!(handed_text.contains("still running"), "{handed_text}");
    assert!(handed_text.contains("task_status"), "{handed_text}");

    // Follow with task_status until the question arrives.
    let (_, text) = follow_with_task_status(&client, &id, "input_required").await;
    assert!(text.contains("task_answer"), "{text}");

    let answered = client
        .call_tool(call(
            "task_answer",
            json!({"task_id": id, "responses": {"confirm": {"action": "accept", "content": {"confirm": false}}}}),
        ))
        .await
        .expect("task_answer");
    assert_ne!(answered.is_error, Some(true), "{}", text_of(&answered));

    let (last, _) = follow_with_task_status(&client, &id, "completed").await;
    assert_eq!(
        last["result"]["content"][0]["text"],
        json!("confirm_delete(late.txt): confirmed = false")
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_legacy_client_cancels_a_task_that_outlived_its_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = legacy(ClientCapabilities::default())
        .stdio(stdio_command(
            &dir.path().join("t.db"),
            &["--sync-budget-seconds", "1"],
        ))
        .await;
    let handed = client
        .call_tool(call(
            "slow_compute",
            json!({"seconds": 60, "label": "long"}),
        ))
        .await
        .expect("tools/call");
    let id = task_id_of(&handed);
    assert!(
        text_of(&handed).contains("task_cancel"),
        "{}",
        text_of(&handed)
    );
    let cancelled = client
        .call_tool(call("task_cancel", json!({"task_id": id})))
        .await
        .expect("task_cancel");
    assert_ne!(cancelled.is_error, Some(true), "{}", text_of(&cancelled));
    follow_with_task_status(&client, &id, "cancelled").await;
    let unknown = client
        .call_tool(call("task_cancel", json!({"task_id": "no-such-task"})))
        .await
        .expect("task_cancel");
    assert!(text_of(&unknown).contains("unknown or expired task id"));
    client.cancel().await.expect("close");
}
