//! A client that closes its `subscriptions/listen` stream is how a listen
//! ends: the server logs no ERROR for it.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

#[tokio::test]
async fn closing_a_listen_stream_logs_no_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_path = dir.path().join("server.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut server = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(format!("sqlite://{}", dir.path().join("t.db").display()))
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn");
    let mut first = String::new();
    BufReader::new(server.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("read the listening line");
    let url = first
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();

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
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = std::fs::read_to_string(&log_path).expect("read log");
        if text.contains("serve finished") {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the session never ended:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(server.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = server.wait();
    let text = std::fs::read_to_string(&log_path).unwrap_or(text);
    assert!(
        !text.contains("ERROR"),
        "closing a listen stream logged an error:\n{text}"
    );
}
