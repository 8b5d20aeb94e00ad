//! `[limits]` in the config file reaches the real `agentgate serve` binary:
//! a tiny request budget is enforced over HTTP with the documented error,
//! and bad settings stop the server at start with the key named.
//! (Each limit's behaviour is tested in agentgate-core's `tests/limits.rs`.)

use std::path::Path;
use std::time::Duration;

use agentgate_testkit::{GateBuilder, TestClient};
use rmcp::service::ServiceError;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

fn serve(dir: &Path, config: &str) -> GateBuilder {
    GateBuilder::agentgate(BIN, dir).config(config)
}

#[tokio::test]
async fn configured_request_rate_is_enforced_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One token a day: the burst is all there is during the test.
    let config = "[limits]\nrequests_per_second = 0.00001\nrequest_burst = 3\n";
    let server = serve(dir.path(), config).start().await;
    let client = TestClient::tasks().http(&server.url).await;
    for _ in 0..3 {
        client.peer().list_tools(None).await.expect("tools/list");
    }
    let error = match client.peer().list_tools(None).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    };
    assert_eq!(error.code, agentgate_core::mcp::limits::LIMITED);
    assert!(
        error.message.contains("too many requests")
            && error.message.contains("limits.requests_per_second")
            && error.message.contains("burst 3"),
        "{}",
        error.message
    );
    let data = error.data.expect("data");
    assert_eq!(data["configKey"], "limits.requests_per_second");
    assert!(
        data["retryAfterMs"].as_u64().is_some_and(|ms| ms > 0),
        "{data}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn bad_limits_stop_the_server_naming_the_key() {
    for (config, key) in [
        ("[limits]\nrequest_burst = 0\n", "limits.request_burst"),
        (
            "[limits]\nrequests_per_second = -1.0\n",
            "limits.requests_per_second",
        ),
        ("[limits]\nmax_tasks = 3\n", "max_tasks"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = tokio::time::timeout(
            Duration::from_secs(30),
            serve(dir.path(), config).command().output(),
        )
        .await
        .expect("agentgate did not exit")
        .expect("run agentgate");
        assert!(!output.status.success(), "{config} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(key),
            "{key} not named for {config:?}: {stderr}"
        );
    }
}
