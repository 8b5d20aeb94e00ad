//! The slow-tool MCP server over real Streamable HTTP, driven by rmcp's
//! client (the test kit's): progress each second, one elicitation, the
//! greeting; bad arguments refused by name.

use std::time::Duration;

use agentgate_sim::mcp;
use agentgate_testkit::{TestClient, call};
use rmcp::model::{
    ClientCapabilities, NumberOrString, ProgressToken, ProtocolVersion, RequestMetaObject,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Serves the router on a free port; the URL of its MCP endpoint.
async fn start(shutdown: &CancellationToken) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "http://{}{}",
        listener.local_addr().expect("address"),
        mcp::MCP_PATH
    );
    let router = mcp::McpSim::new(None).router(shutdown.clone());
    let stop = shutdown.clone();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    });
    url
}

fn client() -> TestClient {
    let mut client = TestClient::new(
        ClientCapabilities::builder().enable_elicitation().build(),
        ProtocolVersion::V_2025_11_25,
    );
    client.answer = json!({"name": "Ada"});
    client
}

#[tokio::test]
async fn countdown_reports_progress_asks_and_greets() {
    let shutdown = CancellationToken::new();
    let url = start(&shutdown).await;
    let client = client();
    let seen = client.seen.clone();
    let client = client.http(&url).await;

    let tools = client.list_all_tools().await.expect("tools/list");
    let tool = tools
        .iter()
        .find(|t| t.name == mcp::TOOL)
        .expect("countdown");
    let hints = tool.annotations.as_ref().expect("annotations");
    assert_eq!(hints.read_only_hint, Some(true), "{tool:?}");

    let mut params = call(mcp::TOOL, json!({"seconds": 2, "ask": true}));
    let mut meta = RequestMetaObject::default();
    meta.set_progress_token(ProgressToken(NumberOrString::Number(1)));
    params.meta = Some(meta);
    let started = tokio::time::Instant::now();
    let result = client.call_tool(params).await.expect("tools/call");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let text = result.content[0]
        .as_text()
        .expect("a text block")
        .text
        .clone();
    assert_eq!(text, "Hello, Ada!");
    // It counted: two one-second waits, not none.
    assert!(started.elapsed() >= Duration::from_secs(2));

    let (messages, elicitations) = {
        let seen = seen.lock().expect("lock");
        let messages: Vec<_> = seen
            .progress
            .iter()
            .map(|p| (p.progress, p.total, p.message.clone().unwrap_or_default()))
            .collect();
        (messages, seen.elicitations.clone())
    };
    assert_eq!(
        messages,
        [
            (0.0, Some(2.0), "2 s left".to_owned()),
            (1.0, Some(2.0), "1 s left".to_owned())
        ]
    );
    assert_eq!(elicitations, ["Who should I greet?"]);
    client.cancel().await.expect("close");
    shutdown.cancel();
}

#[tokio::test]
async fn bad_arguments_are_refused_by_name() {
    let shutdown = CancellationToken::new();
    let url = start(&shutdown).await;
    let client = client().http(&url).await;

    let err = client
        .call_tool(call(mcp::TOOL, json!({"secs": 2})))
        .await
        .expect_err("an unknown field");
    assert!(err.to_string().contains("unknown field `secs`"), "{err}");

    let too_long = client
        .call_tool(call(mcp::TOOL, json!({"seconds": mcp::MAX_SECONDS + 1})))
        .await
        .expect("a tool error, not a protocol error");
    assert_eq!(too_long.is_error, Some(true));
    let text = &too_long.content[0].as_text().expect("a text block").text;
    assert!(text.contains("field `seconds`"), "{text}");

    let unknown = client
        .call_tool(call("count", json!({})))
        .await
        .expect_err("an unknown tool");
    assert!(
        unknown.to_string().contains("this server has `countdown`"),
        "{unknown}"
    );
    client.cancel().await.expect("close");
    shutdown.cancel();
}
