//! Hostile and broken input gets a clear error, and the server stays up.

use rmcp::model::{ClientCapabilities, ErrorCode, ProtocolVersion};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use crate::common::*;

/// Posts one raw JSON-RPC body with 2026-07-28 headers; returns the status
/// and the JSON-RPC message (from JSON or the first SSE event).
async fn post(url: &str, method: &str, name: Option<&str>, body: String) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let response = request.body(body).send().await.expect("POST");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    let json_text = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .unwrap_or(text.trim());
    (
        status,
        serde_json::from_str(json_text).unwrap_or(Value::String(text)),
    )
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

#[tokio::test]
async fn broken_requests_get_clear_errors_and_never_crash_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = serve_http(&dir.path().join("t.db"), &[]).await;
    let url = &fixture.url;

    let (status, body) = post(url, "tools/call", Some("greet"), "{not json".into()).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], json!(-32700), "{body}");

    let unknown_method =
        json!({"jsonrpc": "2.0", "id": 1, "method": "no/such", "params": {"_meta": meta()}});
    let (status, body) = post(url, "no/such", None, unknown_method.to_string()).await;
    assert_eq!(
        body["error"]["code"],
        json!(-32601),
        "status {status}: {body}"
    );

    let huge = "x".repeat(5 * 1024 * 1024);
    let oversized = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": huge}, "_meta": meta()}});
    let (status, _) = post(url, "tools/call", Some("greet"), oversized.to_string()).await;
    assert_eq!(status, 413);

    // The server is still there and answers properly typed calls.
    let client = TestClient::new(ClientCapabilities::default(), ProtocolVersion::V_2026_07_28)
        .http(url)
        .await;
    match client.call_tool_once(call("no_such_tool", json!({}))).await {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains("no_such_tool"), "{}", e.message);
        }
        other => panic!("expected -32602 for an unknown tool, got {other:?}"),
    }
    let wrong = client
        .call_tool(call("slow_compute", json!({"seconds": "soon"})))
        .await
        .expect("tools/call");
    assert_eq!(wrong.is_error, Some(true));
    let text = wrong.content[0]
        .as_text()
        .map(|t| t.text.clone())
        .unwrap_or_default();
    assert!(
        text.contains("`seconds`"),
        "the error must name the field: {text}"
    );
    client.cancel().await.expect("close");
}

/// Request `_meta` of a 2026-07-28 client that declares the tasks extension.
fn tasks_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    })
}

/// A `tasks/get` body for `id` at 2026-07-28.
fn tasks_get(id: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
        "params": {"taskId": id, "_meta": tasks_meta()}})
    .to_string()
}

#[tokio::test]
async fn a_missing_mcp_name_on_tasks_is_accepted_and_a_mismatched_one_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = serve_http(&dir.path().join("t.db"), &[]).await;
    let url = &fixture.url;
    // No header: served (here: the id is unknown, -32602, not a header error).
    let (_, body) = post(url, "tasks/get", None, tasks_get("no-such-task")).await;
    assert_eq!(body["error"]["code"], json!(-32602), "{body}");
    // An id that needs the header's Base64 form is served too.
    let (_, body) = post(url, "tasks/get", None, tasks_get(" spaced\tid ")).await;
    assert_eq!(body["error"]["code"], json!(-32602), "{body}");
    // A header that disagrees with the body is still refused.
    let (_, body) = post(
        url,
        "tasks/get",
        Some("another-task"),
        tasks_get("no-such-task"),
    )
    .await;
    assert_eq!(body["error"]["code"], json!(-32020), "{body}");
    for method in ["tasks/update", "tasks/cancel"] {
        let request = json!({"jsonrpc": "2.0", "id": 4, "method": method,
            "params": {"taskId": "no-such-task", "inputResponses": {}, "_meta": tasks_meta()}});
        let (_, body) = post(url, method, None, request.to_string()).await;
        assert_eq!(body["error"]["code"], json!(-32602), "{method}: {body}");
    }
}

#[tokio::test]
async fn strict_headers_refuse_a_missing_mcp_name_on_tasks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = serve_http(&dir.path().join("t.db"), &["--strict-headers"]).await;
    let (_, body) = post(&fixture.url, "tasks/get", None, tasks_get("no-such-task")).await;
    assert_eq!(body["error"]["code"], json!(-32020), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Mcp-Name"), "{message}");
}
