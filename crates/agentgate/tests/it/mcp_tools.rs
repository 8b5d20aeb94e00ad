//! `[[mcp.servers]]` whose tool lists change while the gateway serves: a
//! server that comes up after the gateway, and one that announces
//! `notifications/tools/list_changed`. The gateway serves the new list at
//! once and tells its own clients: a legacy session on its stream, a
//! 2026-07-28 client on its `subscriptions/listen`.
//!
//! The server is the emulators' plain MCP server ([`McpSim`]) over
//! Streamable HTTP, in this process, so the test changes its tools.

use std::time::Duration;

use agentgate_sim::mcp::McpSim;
use agentgate_testkit::{
    Client, GateBuilder, TestClient, eventually, is_terminal, poll_until, start_task,
};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ProtocolVersion, ServerNotification,
    SubscriptionFilter, TaskPayload,
};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

/// The names `tools/list` shows.
async fn listed(client: &Client) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

/// Waits for the legacy client's `changes`-th list change.
async fn until_changes(client: &Client, changes: usize) {
    eventually(
        format!("tools/list_changed #{changes} on the legacy session"),
        Duration::from_secs(30),
        || {
            client
                .service()
                .seen
                .lock()
                .expect("lock")
                .tool_list_changes
                >= changes
        },
    )
    .await;
}

/// Waits for the next `notifications/tools/list_changed` on `subscription`.
async fn next_change(subscription: &mut rmcp::service::Subscription) {
    let next = tokio::time::timeout(Duration::from_secs(30), subscription.next())
        .await
        .expect("a tool list change within 30 s")
        .expect("the listen stream");
    assert!(
        matches!(
            next,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{next:?}"
    );
}

#[tokio::test]
async fn the_gateway_follows_an_upstream_tool_list_and_tells_its_clients() {
    // A port with nothing behind it yet: the server comes up later.
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = free.local_addr().expect("address");
    drop(free);
    let dir = tempfile::tempdir().expect("tempdir");
    let gate = GateBuilder::agentgate(BIN, dir.path())
        .config(&format!(
            "[[mcp.servers]]\nname = \"late\"\nurl = \"http://{addr}/mcp\"\nprefix = \"late_\"\n\
             connect_timeout_seconds = 5\n"
        ))
        .start()
        .await;

    let legacy = TestClient::new(ClientCapabilities::default(), ProtocolVersion::V_2025_11_25)
        .http(&gate.url)
        .await;
    let tasks = TestClient::tasks().http(&gate.url).await;
    let info = legacy.peer_info().expect("initialize result");
    assert_eq!(
        info.capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed),
        Some(true),
        "the gateway announces tools.listChanged"
    );
    let mut subscription = tasks
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("subscriptions/listen");
    assert_eq!(
        subscription.acknowledged().tools_list_changed,
        Some(true),
        "toolsListChanged accepted"
    );
    assert!(
        !listed(&legacy).await.iter().any(|n| n.starts_with("late_")),
        "no tools of a server that is not there"
    );

    // The server comes up: its tools are served, and both clients hear.
    let sim = McpSim::default();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let listener = tokio::net::TcpListener::bind(addr).await.expect("rebind");
    let router = sim.router(shutdown.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    until_changes(&legacy, 1).await;
    next_change(&mut subscription).await;
    let now = listed(&legacy).await;
    assert!(now.contains(&"late_countdown".to_owned()), "{now:?}");
    assert!(!now.contains(&"late_greet".to_owned()), "{now:?}");
    let task = start_task(&tasks, "late_countdown", json!({"seconds": 0})).await;
    let TaskPayload::Completed { result } =
        poll_until(&tasks, &task.task.task_id, is_terminal).await
    else {
        panic!("late_countdown completed")
    };
    assert_eq!(result["content"][0]["text"], "Done counting.");

    // It adds a tool and says so: the gateway lists it again and serves it.
    assert!(
        sim.offer_greet(true).await >= 1,
        "the gateway keeps a session open to hear of changes"
    );
    until_changes(&legacy, 2).await;
    next_change(&mut subscription).await;
    let now = listed(&tasks).await;
    assert!(now.contains(&"late_greet".to_owned()), "{now:?}");
    let task = start_task(&tasks, "late_greet", json!({"name": "Ada"})).await;
    let TaskPayload::Completed { result } =
        poll_until(&tasks, &task.task.task_id, is_terminal).await
    else {
        panic!("late_greet completed")
    };
    assert_eq!(result["content"][0]["text"], "Hello, Ada!");

    // And takes it away: no longer listed, and a call names it unknown.
    sim.offer_greet(false).await;
    until_changes(&legacy, 3).await;
    next_change(&mut subscription).await;
    assert!(!listed(&legacy).await.contains(&"late_greet".to_owned()));
    let refused = legacy
        .call_tool(
            CallToolRequestParams::new("late_greet").with_arguments(
                json!({"name": "Ada"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await;
    let error = format!("{refused:?}");
    assert!(refused.is_err() && error.contains("late_greet"), "{error}");

    legacy.cancel().await.expect("close");
    shutdown.cancel();
}
