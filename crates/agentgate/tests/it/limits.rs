//! `[limits]` in the config file reaches the real `agentgate serve` binary:
//! a tiny request budget is enforced over HTTP with the documented error,
//! and bad settings stop the server at start with the key named; request
//! bodies held at once are capped across connections
//! (`server.max_buffered_body_bytes`).
//! (Each limit's behaviour is tested in agentgate-core's `tests/limits.rs`.)

use std::path::Path;
use std::time::Duration;

use agentgate_testkit::{GateBuilder, TestClient};
use rmcp::service::ServiceError;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

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
    // The client's server/discover took one.
    for _ in 0..2 {
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
        (
            "[server]\nmax_buffered_body_bytes = 1024\n",
            "server.max_buffered_body_bytes",
        ),
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

/// A POST /mcp head of a `server/discover` declaring `length` body bytes,
/// at protocol 2026-07-28 (stateless: answered without a session).
fn post_head(length: usize) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: server/discover\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// Sends `head` and `body` on a new connection and returns the answer's
/// status code (bounded: a missing answer fails the test).
async fn status_of(addr: &str, head: &str, body: &[u8]) -> u16 {
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    socket.write_all(head.as_bytes()).await.expect("write");
    socket.write_all(body).await.expect("write");
    read_status(&mut socket).await
}

async fn read_status(socket: &mut tokio::net::TcpStream) -> u16 {
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        while answer.len() < 12 {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("an answer");
    let text = String::from_utf8_lossy(&answer);
    text.get(9..12)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"))
}

/// Opens a connection and sends a POST declaring 4096 body bytes, but only
/// 4000 of them: the server holds them while it waits for the rest.
async fn hold_body(addr: &str) -> tokio::net::TcpStream {
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    socket
        .write_all(post_head(4096).as_bytes())
        .await
        .expect("write");
    socket.write_all(&[b' '; 4000]).await.expect("write");
    socket
}

/// Whether a held body was answered already; only a 503 (the budget was
/// spent when it arrived) may answer a body still being sent.
fn was_refused(socket: &tokio::net::TcpStream) -> bool {
    let mut buf = [0u8; 12];
    match socket.try_read(&mut buf) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Ok(n) => {
            let head = String::from_utf8_lossy(&buf[..n]);
            assert!(
                n == 0 || head.starts_with("HTTP/1.1 503"),
                "a held body was answered {head:?}"
            );
            true
        }
        Err(e) => panic!("a held connection failed: {e}"),
    }
}

/// Issue 30: bodies being received are held in memory; across all
/// connections at most `max_buffered_body_bytes` are. Two trickled bodies
/// hold the budget: another request gets 503 at once, and is served again
/// once they are answered.
#[tokio::test]
async fn request_bodies_held_at_once_are_capped_across_connections() {
    let dir = tempfile::tempdir().expect("tempdir");
    // No request rate limit: the probe below asks in a loop until the held
    // bodies are read, and a 429 would hide the 503 it waits for.
    let config = "[server]\nmax_body_bytes = 4096\nmax_buffered_body_bytes = 8192\n\
                  [limits]\nrequests_per_second = 0\n";
    let server = serve(dir.path(), config).start().await;
    let addr = server
        .url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .expect("an http://…/mcp URL")
        .to_owned();
    // A whole request of 300 bytes, more than the 192 left once two bodies
    // are held. Answered 200 while the budget is free (checked first, so
    // the probe below cannot mistake a refusal of its own for the limit).
    let mut small = br#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{}}}}"#
        .to_vec();
    small.resize(300, b' ');
    let small = &small[..];
    assert_eq!(
        status_of(&addr, &post_head(small.len()), small).await,
        200,
        "the probe request is served while no body is held"
    );
    // Two bodies of 4000 bytes each, 96 short of their declared length.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(hold_body(&addr).await);
    }
    // Served (200) until the server has read both held bodies, then 503. A
    // held body the server reads while a probe is in flight does not fit
    // either, and is itself refused (503, rightly): it then holds nothing,
    // so it is sent again on a new connection.
    let mut served = 0u32;
    let refused = async {
        loop {
            match status_of(&addr, &post_head(small.len()), small).await {
                503 => return,
                200 => served += 1,
                other => panic!("answered {other} after {served} answers of 200"),
            }
            for socket in &mut held {
                if was_refused(socket) {
                    *socket = hold_body(&addr).await;
                }
            }
        }
    };
    if tokio::time::timeout(Duration::from_secs(10), refused)
        .await
        .is_err()
    {
        panic!(
            "a request past max_buffered_body_bytes is answered 503; {served} were answered \
             200 in 10 s"
        );
    }
    // The held bodies finish (not JSON: 400) and free the budget.
    for socket in &mut held {
        socket.write_all(&[b' '; 96]).await.expect("write");
        assert_eq!(read_status(socket).await, 400);
    }
    let status = status_of(&addr, &post_head(small.len()), small).await;
    assert_eq!(status, 200, "the budget is free again");
    server.kill_and_wait().await;
}

/// A raw `initialize` (protocol 2025-11-25, which opens a session), as a
/// legacy client sends it: its HTTP status, body and session id.
async fn initialize(url: &str) -> (u16, String, Option<String>) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            serde_json::json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "0"}}
            })
            .to_string(),
        )
        .send()
        .await
        .expect("POST initialize");
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, response.text().await.unwrap_or_default(), session)
}

#[tokio::test]
async fn legacy_sessions_are_capped_per_principal_and_freed_when_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = serve(dir.path(), "[limits]\nmax_sessions = 2\n")
        .start()
        .await;
    let (first, _, one) = initialize(&server.url).await;
    let (second, _, _) = initialize(&server.url).await;
    assert_eq!((first, second), (200, 200));
    let (third, body, none) = initialize(&server.url).await;
    assert_eq!(third, 429, "{body}");
    assert!(none.is_none(), "no session was opened");
    assert!(
        body.contains("-32029") && body.contains("limits.max_sessions"),
        "{body}"
    );
    // Closing one makes room for another.
    let closed = reqwest::Client::new()
        .delete(&server.url)
        .header("mcp-session-id", one.expect("a session id"))
        .send()
        .await
        .expect("DELETE");
    assert!(closed.status().is_success(), "{closed:?}");
    let (fourth, body, _) = initialize(&server.url).await;
    assert_eq!(fourth, 200, "{body}");
}
