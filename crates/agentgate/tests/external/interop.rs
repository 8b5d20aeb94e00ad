//! Third-party MCP clients drive the real `agentgate` binary: clients that
//! are neither ours nor rmcp, pinned in `interop/` (Python: fastmcp with
//! fastmcp-tasks, the official `mcp` SDK; TypeScript: the official SDK 1.x,
//! and the 2.x client with the official tasks requester), each over stdio and
//! over Streamable HTTP.
//!
//! Each client runs the same four scenarios (`interop/README.md`) against
//! emulators in this process: a question answered with citations, a plugin
//! action approved, Copilot followed to its finished pull request, and a
//! cancel. Its driver prints one JSON line per scenario; this test checks
//! those lines, and the emulators' own records of what happened upstream
//! (exactly one ticket, one assignment per issue).
//!
//! A third test puts an agent built on the official A2A SDK (`a2a-sdk`
//! 1.3.0, `interop/a2a/server.py`) behind agentgate as `[[a2a.agents]]` and
//! drives it with the same Python clients: a quick answer, an input round
//! trip and a cancel, so agentgate's A2A client and its A2A emulator cannot
//! agree on a private dialect.
//!
//! A fifth runs the upstream server agentgate's `QBusinessQueryTool`
//! replaces (`awslabs.amazon-qbusiness-anonymous-mcp-server`) beside
//! agentgate against one emulator, and compares their answers byte for byte.
//!
//! The clients are installed by `scripts/interop-setup.sh` (`.ci/run` runs
//! it). Without them the tests are reported ignored, with the reason, unless
//! `AGENTGATE_REQUIRE_INTEROP=1` (set in CI), where they fail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agentgate_sim::github::{GithubConfig, GithubSim};
use agentgate_sim::qbusiness::{QBusinessConfig, QBusinessSim};
use agentgate_testkit::{Emulator, Gate, GateBuilder, emulators, harness};
use serde_json::Value;
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");
/// A whole driver run (four scenarios, ~15 s) must end well within this.
const DRIVER_TIMEOUT: Duration = Duration::from_secs(300);

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop")
}

/// A third-party client, and the command that runs its driver.
struct Driver {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    /// Whether it speaks the tasks extension (2026-07-28), or is a legacy
    /// (2025-11-25) client that uses agentgate's task tools.
    tasks: bool,
}

/// Every pinned client, or why they cannot run here.
fn drivers() -> Result<Vec<Driver>, String> {
    let dir = interop_dir();
    let python = dir.join("python/.venv/bin/python");
    let node_modules = dir.join("typescript/node_modules");
    if !python.exists() || !node_modules.exists() {
        return Err(format!(
            "the third-party clients are not installed ({} or {} is missing): run scripts/interop-setup.sh",
            python.display(),
            node_modules.display()
        ));
    }
    let py = |name: &'static str, tasks| Driver {
        name,
        program: python.clone(),
        args: vec![
            dir.join("python/drive.py").display().to_string(),
            name.to_owned(),
        ],
        tasks,
    };
    let node = |name: &'static str, tasks| Driver {
        name,
        program: PathBuf::from("node"),
        args: vec![
            dir.join("typescript/drive.mjs").display().to_string(),
            name.to_owned(),
        ],
        tasks,
    };
    Ok(vec![
        py("fastmcp-tasks", true),
        py("mcp-legacy", false),
        node("sdk-legacy", false),
        node("ext-tasks", true),
    ])
}

/// Both emulators on free loopback ports, the Copilot agent 20× faster than
/// real time.
struct Upstreams {
    qbusiness: Emulator<QBusinessSim>,
    github: Emulator<GithubSim>,
}

async fn start_upstreams() -> Upstreams {
    let qbusiness = emulators::qbusiness(QBusinessConfig::default())
        .start()
        .await;
    let github = emulators::github(GithubConfig {
        time_scale: 0.05,
        ..GithubConfig::default()
    })
    .start()
    .await;
    Upstreams { qbusiness, github }
}

/// The environment of a driver that spawns the server over stdio: the
/// emulators' settings, and nothing of the developer's AWS setup.
fn server_env(cmd: &mut Command, up: &Upstreams, dir: &Path) {
    let empty = dir.join("aws-empty");
    std::fs::write(&empty, "").expect("write an empty AWS config");
    cmd.env("AWS_CONFIG_FILE", &empty)
        .env("AWS_SHARED_CREDENTIALS_FILE", &empty)
        .env("RUST_LOG", "warn")
        .envs(up.qbusiness.env())
        .envs(up.github.env());
}

/// `agentgate serve --listen 127.0.0.1:0`, and its URL.
async fn serve_http(up: &Upstreams, dir: &Path) -> (Gate, String) {
    let server = GateBuilder::agentgate(BIN, dir)
        .upstream(&up.qbusiness)
        .upstream(&up.github)
        .start()
        .await;
    let url = server.url.clone();
    (server, url)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Transport {
    Stdio,
    Http,
}

/// Runs one driver over one transport against fresh emulators and a fresh
/// store, checks its four scenarios and what reached the emulators.
async fn drive(driver: &Driver, transport: Transport) {
    let what = format!("{} over {transport:?}", driver.name);
    let dir = tempfile::tempdir().expect("tempdir");
    let up = start_upstreams().await;
    let mut cmd = Command::new(&driver.program);
    cmd.args(&driver.args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    server_env(&mut cmd, &up, dir.path());
    let _server = match transport {
        Transport::Http => {
            let (child, url) = serve_http(&up, dir.path()).await;
            cmd.args(["--url", &url]);
            Some(child)
        }
        Transport::Stdio => {
            cmd.args(["--stdio", BIN, "serve", "--stdio", "--store"])
                .arg(format!(
                    "sqlite://{}",
                    dir.path().join("tasks.db").display()
                ));
            None
        }
    };
    let run = cmd.spawn().expect("spawn the driver");
    let output = tokio::time::timeout(DRIVER_TIMEOUT, run.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what}: the driver did not finish"))
        .expect("driver output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what}: the driver failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    // The official Python SDK logs this when a session's DELETE gets a
    // status it does not take (rmcp's 202; agentgate answers 204).
    assert!(
        !stderr.contains("Session termination failed"),
        "{what}: closing the session was reported as failed:\n{stderr}"
    );
    let scenarios: BTreeMap<String, Value> = stdout
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{what}: not a JSON line ({e}): {line}"));
            (value["scenario"].as_str().unwrap_or("?").to_owned(), value)
        })
        .collect();
    let get = |name: &str| {
        scenarios
            .get(name)
            .unwrap_or_else(|| panic!("{what}: no `{name}` scenario in:\n{stdout}\n{stderr}"))
    };
    for name in ["qbusiness", "approval", "copilot", "cancel"] {
        check_client(driver, &what, get(name));
    }
    check_question(&what, get("qbusiness"));
    check_approval(&what, get("approval"), &up);
    check_copilot(&what, get("copilot"), &up);
    check_cancel(driver, &what, get("cancel"), &up);
}

/// The client negotiated what it claims to speak, and the work ran as a
/// task exactly when it declared the extension.
fn check_client(driver: &Driver, what: &str, line: &Value) {
    let (protocol, as_task) = if driver.tasks {
        ("2026-07-28", true)
    } else {
        ("2025-11-25", false)
    };
    assert_eq!(line["protocol"], protocol, "{what}: {line}");
    assert_eq!(line["asTask"], as_task, "{what}: {line}");
    if driver.tasks {
        // A task handle at once, before the work was done.
        assert_eq!(line["created"], "working", "{what}: {line}");
        assert!(
            line["taskId"].as_str().is_some_and(|id| id.len() >= 22),
            "{what}: {line}"
        );
    }
}

fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn check_question(what: &str, line: &Value) {
    assert_eq!(line["status"], "completed", "{what}: {line}");
    let result = &line["result"];
    assert_ne!(result["isError"], true, "{what}: {line}");
    assert!(
        text(result).starts_with("Qbiz response: "),
        "{what}: {line}"
    );
    let structured = &result["structuredContent"];
    assert!(
        structured["citations"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{what}: citations kept: {line}"
    );
    assert!(
        structured["conversationId"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{what}: {line}"
    );
    assert_eq!(line["inputRequests"], 0, "{what}: {line}");
}

fn check_approval(what: &str, line: &Value, up: &Upstreams) {
    assert_eq!(line["status"], "completed", "{what}: {line}");
    // The client was asked once, with a form, and accepted it as proposed.
    assert_eq!(line["inputRequests"], 1, "{what}: {line}");
    let result = &line["result"];
    assert_ne!(result["isError"], true, "{what}: {line}");
    let tickets = up.qbusiness.sim.tickets();
    assert_eq!(tickets.len(), 1, "{what}: exactly one ticket: {tickets:?}");
    assert!(
        text(result).contains(&format!("Created ticket {}", tickets[0].id)),
        "{what}: {line}"
    );
}

fn check_copilot(what: &str, line: &Value, up: &Upstreams) {
    assert_eq!(line["status"], "completed", "{what}: {line}");
    let result = &line["result"];
    assert_ne!(result["isError"], true, "{what}: {line}");
    let structured = &result["structuredContent"];
    assert_eq!(structured["outcome"], "finished", "{what}: {line}");
    let number = structured["pull_request"]["number"]
        .as_u64()
        .unwrap_or_else(|| panic!("{what}: no pull request: {line}"));
    let pr = up
        .github
        .sim
        .pull_request("acme/widgets", number)
        .unwrap_or_else(|| panic!("{what}: the emulator has no PR #{number}"));
    assert!(!pr.is_draft, "{what}: the PR is finished: {pr:?}");
    assert_eq!(
        up.github.sim.stats().assignments_for("acme/widgets", 1),
        1,
        "{what}: Copilot assigned once"
    );
}

fn check_cancel(driver: &Driver, what: &str, line: &Value, up: &Upstreams) {
    assert_eq!(line["status"], "cancelled", "{what}: {line}");
    // Cancelled while the agent worked, not before it started.
    if driver.tasks {
        assert!(
            line["cancelledWhile"]
                .as_str()
                .is_some_and(|m| m.contains("opened pull request")),
            "{what}: {line}"
        );
    } else {
        // The inline call handed the task over; `task_cancel` took it.
        assert!(
            text(&line["inline"]).contains("pull request created"),
            "{what}: {line}"
        );
        assert!(line["taskId"].as_str().is_some(), "{what}: {line}");
        assert_eq!(line["cancelAnswer"]["isError"], false, "{what}: {line}");
    }
    assert_eq!(
        up.github.sim.stats().assignments_for("acme/widgets", 5),
        1,
        "{what}: Copilot assigned once"
    );
}

/// Drives every client over `transport`, or says why none can run.
async fn each_client(transport: Transport) {
    let drivers = match drivers() {
        Ok(drivers) => drivers,
        Err(why) => harness::skip(harness::Need::Interop, &why),
    };
    for driver in &drivers {
        drive(driver, transport).await;
    }
}

async fn third_party_clients_over_stdio() {
    each_client(Transport::Stdio).await;
}

async fn third_party_clients_over_http() {
    each_client(Transport::Http).await;
}

/// The official A2A SDK's server on a free port; killed when dropped.
async fn a2a_sdk_agent() -> Result<(tokio::process::Child, u16), String> {
    a2a_sdk_agent_with(&[]).await
}

/// [`a2a_sdk_agent`], with more arguments to `server.py`.
async fn a2a_sdk_agent_with(args: &[&str]) -> Result<(tokio::process::Child, u16), String> {
    use tokio::io::AsyncBufReadExt as _;
    let dir = interop_dir().join("a2a");
    let python = dir.join(".venv/bin/python");
    if !python.exists() {
        return Err(format!(
            "the official A2A SDK is not installed ({} is missing): run scripts/interop-setup.sh",
            python.display()
        ));
    }
    // A port found free can be taken by a parallel test before the agent
    // binds it (the agent then exits without READY): try another.
    for _ in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = Command::new(&python)
            .arg(dir.join("server.py"))
            .arg(port.to_string())
            .args(args)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the SDK agent starts");
        let stdout = server.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(DRIVER_TIMEOUT, lines.next_line())
            .await
            .expect("the SDK agent is ready in time")
            .expect("stdout");
        match ready.as_deref() {
            Some("READY") => return Ok((server, port)),
            // It exited: try another port.
            None => {}
            Some(other) => panic!("the SDK agent said {other:?} instead of READY"),
        }
    }
    panic!("the SDK agent exited before READY three times (ports taken?)")
}

/// The SDK agent behind `agentgate serve --listen` (streams, push to the
/// server's own `/hooks/a2a`, contexts it chooses), driven by fastmcp-tasks
/// (a task client) and the official `mcp` SDK (inline, then the task tools).
async fn the_official_a2a_sdk_agent_through_agentgate() {
    let drivers = drivers().unwrap_or_else(|why| harness::skip(harness::Need::Interop, &why));
    let (_agent, agent_port) = a2a_sdk_agent()
        .await
        .unwrap_or_else(|why| harness::skip(harness::Need::Interop, &why));
    for driver in drivers
        .iter()
        .filter(|d| d.name.contains("fastmcp") || d.name == "mcp-legacy")
    {
        let what = format!("{} against the A2A SDK agent", driver.name);
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let config = format!(
            "[a2a]\npoll_interval_ms = 200\nsync_budget_seconds = 2\nrefresh_seconds = 0\n\
             push_url = \"http://127.0.0.1:{port}/hooks/a2a\"\npush_secret_env = \"PUSH_SECRET\"\n\
             [[a2a.agents]]\nname = \"sdk\"\nurl = \"http://127.0.0.1:{agent_port}\"\n\
             client_context_ids = true\n"
        );
        let server = GateBuilder::agentgate(BIN, dir.path())
            .config(&config)
            .env("PUSH_SECRET", "interop-push-secret-0123456789abcdef")
            .no_listen()
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .start()
            .await;
        let output = tokio::time::timeout(
            DRIVER_TIMEOUT,
            Command::new(&driver.program)
                .args(&driver.args)
                .args(["--scenarios", "a2a", "--url", &server.url])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{what}: the driver did not finish"))
        .expect("driver output");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{what}: the driver failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}\nagentgate:\n{}",
            output.status,
            server.stderr()
        );
        let lines: BTreeMap<String, Value> = stdout
            .lines()
            .map(|line| {
                let value: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{what}: not a JSON line ({e}): {line}"));
                (value["scenario"].as_str().unwrap_or("?").to_owned(), value)
            })
            .collect();
        let get = |name: &str| {
            lines
                .get(name)
                .unwrap_or_else(|| panic!("{what}: no `{name}` in:\n{stdout}\n{stderr}"))
        };
        let quick = get("a2a-quick");
        assert_eq!(quick["status"], "completed", "{what}: {quick}");
        let result = &quick["result"];
        assert_ne!(result["isError"], true, "{what}: {quick}");
        assert!(
            text(result).contains("The answer is 42."),
            "{what}: {quick}"
        );
        // The SDK's data parts are protobuf `Struct`s: numbers are doubles.
        assert_eq!(
            result["structuredContent"]["data"][0]["data"]["answer"].as_f64(),
            Some(42.0),
            "{what}: the data part: {quick}"
        );
        assert!(
            result["structuredContent"]["task"]["contextId"]
                .as_str()
                .is_some_and(|c| c.starts_with("agentgate-")),
            "{what}: the SDK kept the contextId agentgate chose: {quick}"
        );
        let input = get("a2a-input");
        assert_eq!(input["status"], "completed", "{what}: {input}");
        assert_eq!(input["inputRequests"], 1, "{what}: asked once: {input}");
        assert!(
            text(&input["result"]).contains("Hello, Grace!"),
            "{what}: {input}"
        );
        let cancel = get("a2a-cancel");
        assert_eq!(cancel["status"], "cancelled", "{what}: {cancel}");
        // The SDK's streams and push notifications reached agentgate.
        let metrics = reqwest::get(server.url.replace("/mcp", "/metrics"))
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("metrics");
        let count = |operation: &str| -> f64 {
            metrics
                .lines()
                .filter(|l| {
                    l.starts_with("agentgate_upstream_calls_total{backend=\"a2a\"")
                        && l.contains(&format!("operation=\"{operation}\",outcome=\"ok\""))
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        assert!(
            count("SubscribeToTask") >= 1.0,
            "{what}: no stream opened:\n{metrics}"
        );
        assert!(
            count("PushNotification") >= 1.0,
            "{what}: no push received:\n{metrics}"
        );
        assert!(
            count("ListTasks") >= 3.0,
            "{what}: a lookup before each first send"
        );
        drop(server);
    }
}

/// A card built with the official SDK's own types points its JSON-RPC
/// interface and OAuth token URL at another origin and asks for another
/// API's scope: agentgate refuses the card, and the other origin receives
/// no request at all (so no client secret, no token, no message).
async fn a_hostile_sdk_card_gets_nothing_sent_elsewhere() {
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let elsewhere_url = format!("http://{}", elsewhere.local_addr().expect("addr"));
    let received: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let log = received.clone();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let log = log.clone();
        async move {
            log.lock()
                .expect("lock")
                .push(format!("{} {}", request.method(), request.uri()));
            axum::Json(serde_json::json!({"access_token": "stolen", "token_type": "Bearer"}))
        }
    });
    let stop = tokio_util::sync::CancellationToken::new();
    let until = stop.clone();
    tokio::spawn(async move {
        axum::serve(elsewhere, app)
            .with_graceful_shutdown(until.cancelled_owned())
            .await
    });
    let (_agent, agent_port) = a2a_sdk_agent_with(&["--card-points-at", &elsewhere_url])
        .await
        .unwrap_or_else(|why| harness::skip(harness::Need::Interop, &why));
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = "sdk-client-secret-must-stay-home";
    let config = format!(
        "[a2a]\nrefresh_seconds = 0\n[[a2a.agents]]\nname = \"sdk\"\n\
         url = \"http://127.0.0.1:{agent_port}\"\n\
         [a2a.agents.oauth]\nclient_id = \"agentgate\"\nclient_secret_env = \"SDK_SECRET\"\n"
    );
    let mut server = GateBuilder::agentgate(BIN, dir.path())
        .config(&config)
        .env("SDK_SECRET", secret)
        .env("RUST_LOG", "debug")
        .start()
        .await;
    let client = agentgate_testkit::TestClient::new(
        rmcp::model::ClientCapabilities::default(),
        rmcp::model::ProtocolVersion::V_2025_11_25,
    )
    .http(&server.url)
    .await;
    let result = client
        .call_tool(agentgate_testkit::call(
            "sdk_send_message",
            serde_json::json!({"message": "quick-answer"}),
        ))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = format!("{:?}", result.content);
    assert!(
        text.contains("allowed_endpoints"),
        "the refusal names the setting that would allow it: {text}"
    );
    assert!(!text.contains(secret), "{text}");
    client.cancel().await.expect("close");
    server.kill();
    let (_, stderr) = server.wait_with_stderr().await;
    assert!(!stderr.contains(secret), "the secret is in no log line");
    stop.cancel();
    assert_eq!(
        received.lock().expect("lock").as_slice(),
        &[] as &[String],
        "the other origin received no request at all"
    );
}

/// The official TypeScript SDK 1.x's tasks client (`client.experimental.tasks`,
/// `interop/typescript/tasks-2025.mjs`) on the 2025-11-25 task wire, the one
/// VS Code speaks, over Streamable HTTP: it decides to call each seed tool as
/// a task by VS Code's rule (the server's `tasks.requests.tools.call` and the
/// tool's `execution.taskSupport`), gets a task handle at once, polls
/// `tasks/get`, takes the result from `tasks/result` (answering the plugin
/// approval as `elicitation/create` tied to the task), and cancels Copilot
/// while it works. Over Streamable HTTP and over stdio.
async fn the_sdk_1x_tasks_client_on_the_2025_11_25_task_wire() {
    for transport in [Transport::Http, Transport::Stdio] {
        sdk_1x_tasks_client(Sdk1x::TypeScript, transport).await;
    }
}

/// The same scenarios with the official Python SDK 1.x (`mcp` 1.30.0,
/// `session.experimental`; `interop/python-1x/tasks_2025.py`), the other
/// 1.x client of the 2025-11-25 task wire, under the same assertions.
async fn the_python_sdk_1x_tasks_client_on_the_2025_11_25_task_wire() {
    for transport in [Transport::Http, Transport::Stdio] {
        sdk_1x_tasks_client(Sdk1x::Python, transport).await;
    }
}

/// The Python SDK 1.x client starts Copilot on an issue as a task and ends
/// its session; the server restarts (a graceful stop over HTTP; over stdio
/// the client's own server process ends with it and a new one starts on the
/// same store); a new session of a new client process finds the task by id
/// and takes its result from `tasks/result`: a task handle outlives the
/// session and the process that made it, and the agent was assigned once.
async fn the_python_sdk_1x_client_reattaches_after_a_restart() {
    for transport in [Transport::Http, Transport::Stdio] {
        python_reattach(transport).await;
    }
}

async fn python_reattach(transport: Transport) {
    let what = &format!("Python sdk 1.x re-attach over {transport:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let up = start_upstreams().await;
    let store = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let run = async |mode: &[&str]| -> Value {
        let mut cmd = match Sdk1x::Python.command() {
            Ok(cmd) => cmd,
            Err(why) => harness::skip(harness::Need::Interop, &why),
        };
        cmd.args(mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        server_env(&mut cmd, &up, dir.path());
        let server = match transport {
            Transport::Http => {
                let (server, url) = serve_http(&up, dir.path()).await;
                cmd.args(["--url", &url]);
                Some(server)
            }
            Transport::Stdio => {
                cmd.args(["--stdio", BIN, "serve", "--stdio", "--store", &store]);
                None
            }
        };
        let output = tokio::time::timeout(DRIVER_TIMEOUT, cmd.output())
            .await
            .unwrap_or_else(|_| panic!("{what}: the driver did not finish"))
            .expect("driver output");
        if let Some(mut server) = server {
            // A restart: SIGTERM ends the server and releases its leases.
            server.terminate();
            server.wait().await;
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{what}: the driver failed ({})\nstdout:\n{stdout}\nstderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(stdout.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{what}: not a JSON line ({e}): {stdout}"))
    };
    let started = run(&["--start-only"]).await;
    assert_eq!(started["scenario"], "started", "{what}: {started}");
    assert_eq!(started["asTask"], true, "{what}: {started}");
    assert_eq!(started["status"], "working", "{what}: {started}");
    let id = started["taskId"].as_str().expect("a task id").to_owned();

    let attached = run(&["--attach", &id]).await;
    assert_eq!(attached["scenario"], "attached", "{what}: {attached}");
    assert_eq!(attached["taskId"], id.as_str(), "{what}: {attached}");
    assert_eq!(attached["status"], "completed", "{what}: {attached}");
    assert!(attached["error"].is_null(), "{what}: {attached}");
    let result = &attached["result"];
    assert_ne!(result["isError"], true, "{what}: {attached}");
    assert_eq!(
        result["structuredContent"]["outcome"], "finished",
        "{what}: {attached}"
    );
    assert_eq!(
        up.github.sim.stats().assignments_for("acme/widgets", 2),
        1,
        "{what}: Copilot assigned once, across the restart"
    );
}

/// An official SDK's 1.x client of the 2025-11-25 task wire, driven by a
/// script that prints one JSON line per scenario.
#[derive(Debug, Clone, Copy)]
enum Sdk1x {
    TypeScript,
    Python,
}

impl Sdk1x {
    /// The driver, or the skip reason when it is not installed.
    fn command(self) -> Result<Command, String> {
        let (installed, program, script) = match self {
            Sdk1x::TypeScript => (
                interop_dir().join("typescript/node_modules/@modelcontextprotocol/sdk"),
                PathBuf::from("node"),
                interop_dir().join("typescript/tasks-2025.mjs"),
            ),
            Sdk1x::Python => {
                let python = interop_dir().join("python-1x/.venv/bin/python");
                (
                    python.clone(),
                    python,
                    interop_dir().join("python-1x/tasks_2025.py"),
                )
            }
        };
        if !installed.exists() {
            return Err(format!(
                "the {self:?} SDK 1.x is not installed ({} is missing): run \
                 scripts/interop-setup.sh",
                installed.display()
            ));
        }
        let mut cmd = Command::new(program);
        cmd.arg(script);
        Ok(cmd)
    }
}

async fn sdk_1x_tasks_client(sdk: Sdk1x, transport: Transport) {
    let mut cmd = match sdk.command() {
        Ok(cmd) => cmd,
        Err(why) => harness::skip(harness::Need::Interop, &why),
    };
    let what = &format!("{sdk:?} sdk 1.x tasks client over {transport:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let up = start_upstreams().await;
    // An A2A agent too, served as `helper_send_message`.
    let agent = emulators::a2a(agentgate_sim::a2a::A2aConfig::default())
        .start()
        .await;
    let config = dir.path().join("agentgate-a2a.toml");
    // And the reference MCP server, whose sampling the caller answers.
    let everything = interop_dir()
        .join("typescript/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let everything = format!(
        "[[mcp.servers]]\nname = \"everything\"\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\
         pass_env = [\"PATH\"]\nprefix = \"ev_\"\nsampling = \"caller\"\n\
         tools = [\"trigger-sampling-request\"]\n",
        everything.display().to_string()
    );
    std::fs::write(
        &config,
        format!("{}\n{everything}", agent.a2a_agent("helper", "")),
    )
    .expect("write the config");
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    server_env(&mut cmd, &up, dir.path());
    let _server = match transport {
        Transport::Http => {
            let server = GateBuilder::agentgate(BIN, dir.path())
                .upstream(&up.qbusiness)
                .upstream(&up.github)
                .config_file(&config)
                .start()
                .await;
            cmd.args(["--url", &server.url]);
            Some(server)
        }
        Transport::Stdio => {
            cmd.args(["--stdio", BIN, "--config"])
                .arg(&config)
                .args(["serve", "--stdio", "--store"])
                .arg(format!(
                    "sqlite://{}",
                    dir.path().join("tasks.db").display()
                ));
            None
        }
    };
    let output = cmd.output();
    let output = tokio::time::timeout(DRIVER_TIMEOUT, output)
        .await
        .unwrap_or_else(|_| panic!("{what}: the driver did not finish"))
        .expect("driver output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what}: the driver failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let scenarios: BTreeMap<String, Value> = stdout
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{what}: not a JSON line ({e}): {line}"));
            (value["scenario"].as_str().unwrap_or("?").to_owned(), value)
        })
        .collect();
    let get = |name: &str| {
        scenarios
            .get(name)
            .unwrap_or_else(|| panic!("{what}: no `{name}` scenario in:\n{stdout}\n{stderr}"))
    };
    for name in ["qbusiness", "approval", "copilot"] {
        let line = get(name);
        assert_eq!(line["protocol"], "2025-11-25", "{what}: {line}");
        // VS Code's rule chose a task, and the handle came at once.
        assert_eq!(
            line["capability"]["requests"]["tools"]["call"],
            serde_json::json!({})
        );
        assert_eq!(line["taskSupport"], "optional", "{what}: {line}");
        assert_eq!(line["asTask"], true, "{what}: {line}");
        assert_eq!(line["created"], "working", "{what}: {line}");
        assert!(
            line["taskId"].as_str().is_some_and(|id| id.len() >= 22),
            "{what}: {line}"
        );
        assert!(line["error"].is_null(), "{what}: {line}");
    }
    check_question(what, get("qbusiness"));
    let approval = get("approval");
    check_approval(what, approval, &up);
    // The question came during tasks/result, tied to its task.
    assert_eq!(
        approval["forms"][0]["relatedTask"]["taskId"], approval["taskId"],
        "{what}: {approval}"
    );
    // While tasks/result waited, each change came as notifications/tasks/status:
    // back to work after the answer, then the end.
    let notified: Vec<&str> = approval["notified"]
        .as_array()
        .map(|n| n.iter().filter_map(|n| n["status"].as_str()).collect())
        .unwrap_or_default();
    assert!(notified.contains(&"working"), "{what}: {approval}");
    assert_eq!(notified.last(), Some(&"completed"), "{what}: {approval}");
    check_copilot(what, get("copilot"), &up);
    let cancel = get("cancel");
    assert_eq!(cancel["status"], "cancelled", "{what}: {cancel}");
    assert!(
        cancel["cancelledWhile"]
            .as_str()
            .is_some_and(|m| m.contains("opened pull request")),
        "{what}: {cancel}"
    );
    assert_eq!(cancel["cancelAnswer"], "task", "{what}: {cancel}");
    // Cancelling it again is refused: it has ended.
    assert_eq!(cancel["cancelAgain"]["code"], -32602, "{what}: {cancel}");
    assert_eq!(
        up.github.sim.stats().assignments_for("acme/widgets", 5),
        1,
        "{what}: Copilot assigned once"
    );
    // tasks/list: declared, and every task of the run, newest first, once.
    let list = get("list");
    assert_eq!(
        list["listCapability"],
        serde_json::json!({}),
        "{what}: {list}"
    );
    let created: Vec<&Value> = ["cancel", "copilot", "approval", "qbusiness"]
        .iter()
        .map(|name| &get(name)["taskId"])
        .collect();
    let listed: Vec<&Value> = list["taskIds"]
        .as_array()
        .map(|ids| ids.iter().collect())
        .unwrap_or_default();
    assert_eq!(listed, created, "{what}: {list}");
    assert_eq!(list["statuses"][0], "cancelled", "{what}: {list}");
    assert_eq!(list["badCursor"]["code"], -32602, "{what}: {list}");
    // The TypeScript driver also calls an MCP server's tool that asks for
    // sampling: answered by the driver's "model" during tasks/result, tied
    // to the task, and the server's result carries the completion.
    if let Sdk1x::TypeScript = sdk {
        let sampling = get("sampling");
        assert_eq!(sampling["asTask"], true, "{what}: {sampling}");
        assert_eq!(sampling["status"], "completed", "{what}: {sampling}");
        assert_eq!(
            sampling["samplings"][0]["relatedTask"]["taskId"], sampling["taskId"],
            "{what}: {sampling}"
        );
        let answer = text(&sampling["result"]);
        assert!(
            answer.starts_with("LLM sampling result:")
                && answer.contains("teal")
                && answer.contains("sdk-1x-model"),
            "{what}: {sampling}"
        );
    }
    // The Python driver also asks the A2A agent, after the list.
    if let Sdk1x::Python = sdk {
        let a2a = get("a2a");
        assert_eq!(a2a["taskSupport"], "optional", "{what}: {a2a}");
        assert_eq!(a2a["asTask"], true, "{what}: {a2a}");
        assert_eq!(a2a["created"], "working", "{what}: {a2a}");
        assert_eq!(a2a["status"], "completed", "{what}: {a2a}");
        assert_ne!(a2a["result"]["isError"], true, "{what}: {a2a}");
        assert!(!text(&a2a["result"]).is_empty(), "{what}: {a2a}");
        let stats = agent.sim.stats();
        assert_eq!(
            (
                stats.effects_by_message_id_count(),
                stats.max_effects_per_message_id()
            ),
            (1, 1),
            "{what}: one message reached the agent, acted on once"
        );
    }
}

/// This file's tests, for the binary's `main`.
pub(crate) fn register(tests: harness::Tests) -> harness::Tests {
    tests
        .multi_thread(
            "third_party_clients_over_stdio",
            third_party_clients_over_stdio,
        )
        .multi_thread(
            "third_party_clients_over_http",
            third_party_clients_over_http,
        )
        .multi_thread(
            "the_official_a2a_sdk_agent_through_agentgate",
            the_official_a2a_sdk_agent_through_agentgate,
        )
        .multi_thread(
            "a_hostile_sdk_card_gets_nothing_sent_elsewhere",
            a_hostile_sdk_card_gets_nothing_sent_elsewhere,
        )
        .multi_thread(
            "the_sdk_1x_tasks_client_on_the_2025_11_25_task_wire",
            the_sdk_1x_tasks_client_on_the_2025_11_25_task_wire,
        )
        .multi_thread(
            "the_python_sdk_1x_tasks_client_on_the_2025_11_25_task_wire",
            the_python_sdk_1x_tasks_client_on_the_2025_11_25_task_wire,
        )
        .multi_thread(
            "the_python_sdk_1x_client_reattaches_after_a_restart",
            the_python_sdk_1x_client_reattaches_after_a_restart,
        )
        .multi_thread(
            "the_upstream_qbusiness_server_and_agentgate_answer_alike",
            the_upstream_qbusiness_server_and_agentgate_answer_alike,
        )
}

/// The upstream server agentgate's `QBusinessQueryTool` replaces
/// (`awslabs.amazon-qbusiness-anonymous-mcp-server` 0.1.1, pinned in
/// `interop/python/requirements.txt`) and agentgate, each asked the same
/// question over stdio against the same emulator: a client written against
/// upstream's typed output must read the same `structuredContent.result`,
/// and the same first text block, byte for byte.
async fn the_upstream_qbusiness_server_and_agentgate_answer_alike() {
    let upstream =
        interop_dir().join("python/.venv/bin/awslabs.amazon-qbusiness-anonymous-mcp-server");
    if !upstream.exists() {
        harness::skip(
            harness::Need::Interop,
            &format!(
                "the upstream Q Business MCP server is not installed ({} is missing): run \
                 scripts/interop-setup.sh",
                upstream.display()
            ),
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let up = start_upstreams().await;
    let client = || {
        agentgate_testkit::TestClient::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::ProtocolVersion::V_2025_06_18,
        )
    };
    let question = || {
        agentgate_testkit::call(
            "QBusinessQueryTool",
            serde_json::json!({"query": "How many vacation days do employees get?"}),
        )
    };

    let mut theirs = Command::new(&upstream);
    server_env(&mut theirs, &up, dir.path());
    let theirs = client().stdio(theirs).await;
    let their_answer = theirs
        .call_tool(question())
        .await
        .expect("upstream answers");
    theirs.cancel().await.expect("close upstream");

    let mut ours = Command::new(BIN);
    ours.args(["serve", "--stdio", "--store"]).arg(format!(
        "sqlite://{}",
        dir.path().join("tasks.db").display()
    ));
    server_env(&mut ours, &up, dir.path());
    let ours = client().stdio(ours).await;
    let our_answer = ours.call_tool(question()).await.expect("agentgate answers");
    ours.cancel().await.expect("close agentgate");

    let theirs = serde_json::to_value(&their_answer).expect("upstream result");
    let ours = serde_json::to_value(&our_answer).expect("our result");
    let result = |v: &Value| v["structuredContent"]["result"].as_str().map(str::to_owned);
    let their_result = result(&theirs).unwrap_or_else(|| panic!("upstream: {theirs}"));
    assert!(their_result.starts_with("Qbiz response: "), "{theirs}");
    assert_eq!(
        result(&ours).as_deref(),
        Some(their_result.as_str()),
        "ours: {ours}"
    );
    assert_eq!(
        ours["content"][0]["text"], theirs["content"][0]["text"],
        "{ours}\n{theirs}"
    );
    assert_eq!(
        up.qbusiness.sim.stats().chat_sync_effects,
        2,
        "one ChatSync each"
    );
}
