//! A client that closes its `subscriptions/listen` stream is how a listen
//! ends: the server logs no ERROR for it.

use std::time::Duration;

use agentgate_testkit::{GateBuilder, eventually};

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

#[tokio::test]
async fn closing_a_listen_stream_logs_no_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = GateBuilder::agentgate(BIN, dir.path())
        .env("RUST_LOG", "info")
        .start()
        .await;
    let url = server.url.clone();

    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 41, "method": "subscriptions/listen",
        "params": {
            "notifications": {"taskIds": ["no-such-task"]},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":
                    {"extensions": {"io.modelcontextprotocol/tasks": {}}}
            }
        }
    });
    let mut response = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .expect("POST subscriptions/listen");
    assert_eq!(response.status(), 200);
    let mut seen = String::new();
    while !seen.contains("notifications/subscriptions/acknowledged") {
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
            .await
            .expect("no acknowledgement within 30 s")
            .expect("stream")
            .expect("stream ended before the acknowledgement");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    // The client goes away.
    drop(response);

    // Wait (bounded) until the server has ended that stream's session.
    eventually("the session to end", Duration::from_secs(30), || {
        server.stderr().contains("serve finished")
    })
    .await;
    server.terminate();
    let (_, text) = server.wait_with_stderr().await;
    assert!(
        !text.contains("ERROR"),
        "closing a listen stream logged an error:\n{text}"
    );
}
