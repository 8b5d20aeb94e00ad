//! The official A2A Python SDK (`a2a-sdk` 1.3.0, pinned in
//! `interop/a2a/requirements.txt`) drives the A2A emulator as a client:
//! `interop/a2a/client.py` resolves the Agent Card and runs a blocking send,
//! GetTask, a non-blocking send and CancelTask, a refused cancel, the
//! INPUT_REQUIRED round trip, a streamed send and ListTasks through the SDK's
//! JSON-RPC transport, printing one JSON line per step. Where the emulator and the
//! real SDK disagree on the wire, a step fails here.
//!
//! The SDK is installed by `scripts/interop-setup.sh` into `interop/a2a/.venv`.
//! Without it the test is reported ignored, with the reason, unless
//! `AGENTGATE_REQUIRE_INTEROP=1` (set in CI), where it fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentgate_sim::a2a::{A2aConfig, A2aSim, serve};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The whole client run (about a second) must end well within this.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/a2a")
}

/// The venv's python, or why the test cannot run.
fn python() -> Result<PathBuf, String> {
    let python = interop_dir().join(".venv/bin/python");
    if python.exists() {
        Ok(python)
    } else {
        Err(format!(
            "the official A2A SDK is not installed ({} is missing): run scripts/interop-setup.sh",
            python.display()
        ))
    }
}

async fn the_official_python_sdk_completes_send_get_cancel_input_and_stream() {
    let python = match python() {
        Ok(python) => python,
        Err(why) => {
            agentgate_testkit::harness::skip(agentgate_testkit::harness::Need::Interop, &why)
        }
    };
    let token = "interop-a2a-token";
    let sim = A2aSim::new(A2aConfig {
        token: Some(token.into()),
        step_delay: Duration::from_millis(5),
        ..A2aConfig::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    tokio::spawn(serve(listener, sim.router(), shutdown));

    let output = tokio::time::timeout(
        CLIENT_TIMEOUT,
        tokio::process::Command::new(&python)
            .arg(interop_dir().join("client.py"))
            .arg(&base)
            .arg(token)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the SDK client finishes in time")
    .expect("the SDK client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let steps: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(
        output.status.success(),
        "the official client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let names: Vec<&str> = steps.iter().filter_map(|s| s["step"].as_str()).collect();
    assert_eq!(
        names,
        [
            "card",
            "send-blocking",
            "get-task",
            "cancel",
            "cancel-refused",
            "input-required",
            "input-answered",
            "stream",
            "list-tasks"
        ],
        "{stdout}"
    );
    assert!(steps.iter().all(|s| s["ok"] == true), "{stdout}");
    assert_eq!(steps[4]["error"], "TaskNotCancelableError");
    // What the SDK decoded is what the emulator sent.
    assert_eq!(
        steps[1]["kinds"],
        serde_json::json!(["text", "data", "raw"])
    );
    assert_eq!(steps[6]["text"], "Hello, Grace!");
    // Every send the SDK made was a new messageId that ran once.
    assert_eq!(sim.stats().max_effects_per_message_id(), 1);
}

/// The SDK's own server (`interop/a2a/server.py`), answering the requests the
/// emulator's tests send: each answer must pass the strict validator, so the
/// validator is no stricter than the official implementation, and the emulator's
/// error codes and shapes match the SDK's where both answer the same request.
async fn the_official_python_sdk_server_passes_the_same_validator() {
    use agentgate_testkit::contracts::a2a;
    use serde_json::json;
    use tokio::io::AsyncBufReadExt as _;

    let python = match python() {
        Ok(python) => python,
        Err(why) => {
            agentgate_testkit::harness::skip(agentgate_testkit::harness::Need::Interop, &why)
        }
    };
    // A free port for the Python server (released just before it binds it).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut server = tokio::process::Command::new(&python)
        .arg(interop_dir().join("server.py"))
        .arg(port.to_string())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the SDK server starts");
    let stdout = server.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(CLIENT_TIMEOUT, lines.next_line())
        .await
        .expect("the SDK server is ready in time")
        .expect("stdout");
    assert_eq!(ready.as_deref(), Some("READY"));
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();

    let card: Value = http
        .get(format!("{base}/.well-known/agent-card.json"))
        .send()
        .await
        .expect("card")
        .json()
        .await
        .expect("card JSON");
    let problems = a2a().problems("AgentCard", &card);
    assert!(problems.is_empty(), "{problems:?}\n{card:#}");

    let call = |method: &'static str, params: Value, version: Option<&'static str>| {
        let http = http.clone();
        let base = base.clone();
        async move {
            let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
            let mut request = http.post(format!("{base}/")).json(&body);
            if let Some(version) = version {
                request = request.header("A2A-Version", version);
            }
            let text = request
                .send()
                .await
                .expect("POST")
                .text()
                .await
                .expect("body");
            // JSON, or SSE `data:` lines for the streaming methods.
            let bodies: Vec<Value> = if text.trim_start().starts_with('{') {
                vec![serde_json::from_str(&text).expect("JSON")]
            } else {
                text.lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| serde_json::from_str(d.trim()).expect("event JSON"))
                    .collect()
            };
            for body in &bodies {
                let problems = a2a().response_problems(method, body);
                assert!(problems.is_empty(), "{method}: {problems:?}\n{body:#}");
            }
            bodies
        }
    };
    let message = |id: &str, text: &str| json!({ "messageId": id, "role": "ROLE_USER", "parts": [{ "text": text }] });
    let v1 = Some("1.0");

    let refused = call("GetTask", json!({ "id": "x" }), None).await;
    assert_eq!(refused[0]["error"]["code"], -32009, "{refused:#?}");
    let unknown = call("GetTask", json!({ "id": "no-such-task" }), v1).await;
    assert_eq!(unknown[0]["error"]["code"], -32001, "{unknown:#?}");

    let answered = call(
        "SendMessage",
        json!({ "message": message("r1", "quick") }),
        v1,
    )
    .await;
    let task = &answered[0]["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task:#}");
    let task_id = task["id"].as_str().expect("id").to_owned();
    call("GetTask", json!({ "id": task_id, "historyLength": 1 }), v1).await;
    let ended = call("CancelTask", json!({ "id": task_id }), v1).await;
    assert_eq!(ended[0]["error"]["code"], -32002, "{ended:#?}");

    let asked = call(
        "SendMessage",
        json!({ "message": message("r2", "ask-input") }),
        v1,
    )
    .await;
    let asked = &asked[0]["result"]["task"];
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let mut reply = message("r3", "Ada");
    reply["taskId"] = asked["id"].clone();
    reply["contextId"] = asked["contextId"].clone();
    let greeted = call("SendMessage", json!({ "message": reply }), v1).await;
    assert_eq!(
        greeted[0]["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    let events = call(
        "SendStreamingMessage",
        json!({ "message": message("r4", "long-running") }),
        v1,
    )
    .await;
    assert!(events.len() >= 4, "{events:#?}");
    assert_eq!(
        events[events.len() - 1]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    call(
        "SendMessage",
        json!({ "message": message("r5", "fails") }),
        v1,
    )
    .await;
    // The SDK's server does not deduplicate by messageId (§3.3.1 makes it optional):
    // the same messageId again is a second task. The emulator's
    // `dedupe_message_ids: false` is this behaviour.
    let again = call(
        "SendMessage",
        json!({ "message": message("r1", "quick") }),
        v1,
    )
    .await;
    assert_ne!(
        again[0]["result"]["task"]["id"],
        task_id.as_str(),
        "{again:#?}"
    );
    call("ListTasks", json!({}), v1).await;
    let _ = server.kill().await;
}

fn main() -> std::process::ExitCode {
    agentgate_testkit::harness::Tests::new()
        .test(
            "the_official_python_sdk_completes_send_get_cancel_input_and_stream",
            the_official_python_sdk_completes_send_get_cancel_input_and_stream,
        )
        .test(
            "the_official_python_sdk_server_passes_the_same_validator",
            the_official_python_sdk_server_passes_the_same_validator,
        )
        .run()
}
