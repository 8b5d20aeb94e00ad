//! The MCP backend (`[[mcp.servers]]`, issue 35) in front of MCP servers we
//! did not write, pinned in `interop/typescript/package-lock.json` and
//! installed by `scripts/interop-setup.sh`:
//!
//! - the reference server `@modelcontextprotocol/server-everything`
//!   2026.8.31, over stdio and over Streamable HTTP: progress becomes
//!   `statusMessage`, its elicitation becomes `input_required` answered with
//!   `tasks/update`, a cancel, results as it gave them;
//! - the upstream Q Business MCP server, against the emulator, beside
//!   agentgate's own `QBusinessQueryTool`;
//! - `interop/typescript/counting-server.mjs`, ours, on the official
//!   TypeScript SDK, which counts the calls it receives: agentgate killed
//!   with SIGKILL during a call repeats an idempotent tool once and never a
//!   tool that is not; a server that dies mid-call, hangs or cannot start
//!   gets a clear error and leaves the gateway serving.

use std::path::PathBuf;
use std::time::Duration;

use agentgate_sim::qbusiness::QBusinessConfig;
use agentgate_testkit::{
    Client, Gate, GateBuilder, TestClient, emulators, harness, is_terminal, poll_until, start_task,
    watch_task,
};
use rmcp::model::{
    CancelTaskParams, ClientCapabilities, InputResponses, ProtocolVersion, TaskPayload,
    UpdateTaskParams,
};
use serde_json::{Value, json};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

fn typescript_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop/typescript")
}

/// The reference server's entry point, or skip (fail where CI requires it).
fn everything() -> PathBuf {
    let path =
        typescript_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !path.exists() {
        harness::skip(
            harness::Need::Interop,
            &format!(
                "{} is missing: run scripts/interop-setup.sh",
                path.display()
            ),
        );
    }
    path
}

fn counting_server() -> PathBuf {
    // It needs the SDK from the same node_modules.
    let _ = everything();
    typescript_dir().join("counting-server.mjs")
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string")
}

/// `[[mcp.servers]]` for a stdio server run with node.
fn stdio_server(name: &str, script: &std::path::Path, args: &[&str], extra: &str) -> String {
    let mut all = vec![toml_str(&script.display().to_string())];
    all.extend(args.iter().map(|a| toml_str(a)));
    format!(
        "[[mcp.servers]]\nname = \"{name}\"\ncommand = \"node\"\nargs = [{}]\npass_env = [\"PATH\"]\n{extra}\n",
        all.join(", ")
    )
}

async fn tasks_client(gate: &Gate) -> Client {
    TestClient::tasks().http(&gate.url).await
}

fn status_message(got: &rmcp::model::GetTaskResult) -> String {
    got.task.task.status_message.clone().unwrap_or_default()
}

/// Waits until task `id` reports progress from its server.
async fn until_progress(client: &Client, id: &str) {
    watch_task(client, id, Duration::from_secs(30), |got| {
        status_message(got).starts_with("progress ")
    })
    .await;
}

/// Starts `tool` with `args`, cancels its task once its server reports
/// progress, and checks that it ended `cancelled`.
async fn cancel_while_working(client: &Client, tool: &str, args: Value) {
    let task = start_task(client, tool, args).await;
    let id = task.task.task_id.clone();
    until_progress(client, &id).await;
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel");
    let ended = poll_until(client, &id, is_terminal).await;
    assert!(matches!(ended, TaskPayload::Cancelled), "{ended:?}");
}

/// The gateway's `/metrics` page.
async fn metrics_of(gate: &Gate) -> String {
    reqwest::get(gate.url.replace("/mcp", "/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text")
}

fn text_of(result: &serde_json::Map<String, Value>) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The reference server behind a gateway configured with `server`.
async fn through_everything(server: &str, gate_dir: &std::path::Path) {
    let gate = GateBuilder::agentgate(BIN, gate_dir)
        .config(server)
        .start()
        .await;
    let client = tasks_client(&gate).await;

    // Listed as the server lists them, under the prefix.
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let structured = tools
        .iter()
        .find(|t| t.name == "ev_get-structured-content")
        .unwrap_or_else(|| panic!("not listed: {tools:?}"));
    assert!(
        structured.output_schema.is_some(),
        "the upstream's outputSchema is carried over: {structured:?}"
    );
    let long = tools
        .iter()
        .find(|t| t.name == "ev_trigger-long-running-operation")
        .expect("listed");
    assert_eq!(
        long.annotations.as_ref().and_then(|a| a.idempotent_hint),
        Some(true),
        "annotations carried over"
    );

    // Progress becomes the status message; the result is the server's.
    let task = start_task(
        &client,
        "ev_trigger-long-running-operation",
        json!({"duration": 3, "steps": 3}),
    )
    .await;
    let id = task.task.task_id.clone();
    let mut statuses = Vec::new();
    let done = watch_task(&client, &id, Duration::from_secs(60), |got| {
        statuses.push(status_message(got));
        is_terminal(&got.task.payload)
    })
    .await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("expected completed: {:?}", done.task.payload)
    };
    assert_eq!(
        text_of(result),
        "Long running operation completed. Duration: 3 seconds, Steps: 3."
    );
    assert!(
        statuses
            .iter()
            .any(|s| s.starts_with("progress ") && s.contains("/3")),
        "progress seen as status messages: {statuses:?}"
    );

    // structuredContent kept as given.
    let task = start_task(
        &client,
        "ev_get-structured-content",
        json!({"location": "New York"}),
    )
    .await;
    let TaskPayload::Completed { result } =
        poll_until(&client, &task.task.task_id, is_terminal).await
    else {
        panic!("expected completed")
    };
    assert_eq!(
        result["structuredContent"]["temperature"], 33,
        "structuredContent: {result:?}"
    );

    // The server's question becomes input_required; the answer goes back.
    let task = start_task(&client, "ev_trigger-elicitation-request", json!({})).await;
    let id = task.task.task_id.clone();
    let asked = poll_until(&client, &id, |p| {
        matches!(p, TaskPayload::InputRequired { .. }) || is_terminal(p)
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = asked else {
        panic!("expected input_required, got {asked:?}")
    };
    let (key, request) = input_requests.iter().next().expect("one request");
    let request = serde_json::to_value(request).expect("json");
    assert_eq!(
        request["params"]["message"], "Please provide inputs for the following fields:",
        "the server's own question: {request}"
    );
    let mut answers = InputResponses::new();
    answers.insert(
        key.clone(),
        json!({"action": "accept", "content": {"name": "Ada Lovelace", "check": true}}),
    );
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), answers))
        .await
        .expect("tasks/update");
    let TaskPayload::Completed { result } = poll_until(&client, &id, is_terminal).await else {
        panic!("expected completed")
    };
    let text = text_of(&result);
    assert!(
        text.contains("Ada Lovelace"),
        "the answer reached the server: {text}"
    );

    // A tool the server runs only as a 2025-11-25 task (`taskSupport:
    // "required"`): called as one, its question (asked over `tasks/result`)
    // answered in ours, its report our result.
    let task = start_task(
        &client,
        "ev_simulate-research-query",
        json!({"topic": "python", "ambiguous": true}),
    )
    .await;
    let id = task.task.task_id.clone();
    let asked = poll_until(&client, &id, |p| {
        matches!(p, TaskPayload::InputRequired { .. }) || is_terminal(p)
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = asked else {
        panic!("expected input_required, got {asked:?}")
    };
    let (key, request) = input_requests.iter().next().expect("one request");
    let request = serde_json::to_value(request).expect("json");
    assert!(
        request["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("could have multiple interpretations")),
        "the server's own question: {request}"
    );
    let mut answers = InputResponses::new();
    answers.insert(
        key.clone(),
        json!({"action": "accept", "content": {"interpretation": "snake"}}),
    );
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), answers))
        .await
        .expect("tasks/update");
    let TaskPayload::Completed { result } = poll_until(&client, &id, is_terminal).await else {
        panic!("expected completed")
    };
    let text = text_of(&result);
    assert!(
        text.contains("# Research Report: python (snake)"),
        "the answer reached the server's task: {text}"
    );

    // Cancelled while the server's task works: the server is sent
    // tasks/cancel (counted below).
    let task = start_task(
        &client,
        "ev_simulate-research-query",
        json!({"topic": "tides"}),
    )
    .await;
    let id = task.task.task_id.clone();
    watch_task(&client, &id, Duration::from_secs(30), |got| {
        status_message(got).ends_with("...")
    })
    .await;
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel");
    let ended = poll_until(&client, &id, is_terminal).await;
    assert!(matches!(ended, TaskPayload::Cancelled), "{ended:?}");

    // A cancel while the server works.
    cancel_while_working(
        &client,
        "ev_trigger-long-running-operation",
        json!({"duration": 60, "steps": 60}),
    )
    .await;

    // A client without the tasks extension gets the same tools inline: the
    // server's question reaches it as elicitation/create, its answer goes
    // back upstream.
    let mut inline = TestClient::new(
        ClientCapabilities::builder().enable_elicitation().build(),
        ProtocolVersion::V_2025_06_18,
    );
    inline.answer = json!({"name": "Grace Hopper", "check": true});
    let seen = inline.seen.clone();
    let inline = inline.http(&gate.url).await;
    let result = inline
        .call_tool(agentgate_testkit::call(
            "ev_trigger-elicitation-request",
            json!({}),
        ))
        .await
        .expect("an inline call");
    let result = serde_json::to_value(&result).expect("json");
    let text = text_of(result.as_object().expect("an object"));
    assert!(
        text.contains("Grace Hopper"),
        "inline answer reached the server: {text}"
    );
    assert_eq!(
        seen.lock().expect("seen").elicitations,
        ["Please provide inputs for the following fields:"],
        "the server's own question, asked inline"
    );
    inline.cancel().await.expect("close");

    // Each upstream request counted, by MCP method: the tools listed at
    // start, and once more on the connection that hears of changes (the
    // server declares `tools.listChanged`), which it holds from then on.
    let lists =
        "agentgate_upstream_calls_total{backend=\"mcp\",operation=\"tools/list\",outcome=\"ok\"} ";
    let metrics = agentgate_testkit::eventually_async(
        "the follower's listing counted",
        Duration::from_secs(30),
        || async {
            let metrics = metrics_of(&gate).await;
            let listed: u64 = metrics
                .lines()
                .find_map(|l| l.strip_prefix(lists))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            (listed >= 2).then_some(metrics)
        },
    )
    .await;
    for line in [
        "agentgate_upstream_calls_total{backend=\"mcp\",operation=\"tools/call\",outcome=\"ok\"} 5",
        "agentgate_upstream_calls_total{backend=\"mcp\",operation=\"tasks/cancel\",outcome=\"ok\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    client.cancel().await.expect("close");
}

async fn the_reference_server_over_stdio_through_agentgate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = stdio_server("everything", &everything(), &["stdio"], "prefix = \"ev_\"");
    through_everything(&server, dir.path()).await;
}

/// The reference server over Streamable HTTP, and its `/mcp` URL.
async fn everything_over_http() -> (tokio::process::Child, String) {
    // A port found free can be taken by a parallel test before the server
    // binds it; the server then exits, and connecting would reach the
    // other test's process: so the server must still run once it answers.
    let mut started = None;
    for _ in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        if let Some(upstream) = everything_at(port).await {
            started = Some((upstream, port));
            break;
        }
    }
    let (upstream, port) = started.expect("the reference server started on one of three ports");
    (upstream, format!("http://127.0.0.1:{port}/mcp"))
}

/// The reference server over Streamable HTTP at `port`, once it listens;
/// none if it exited instead (the port was taken).
async fn everything_at(port: u16) -> Option<tokio::process::Child> {
    let mut upstream = Command::new("node")
        .arg(everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the reference server");
    agentgate_testkit::poll::eventually(
        "the reference server to listen or exit",
        Duration::from_secs(30),
        || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                || matches!(upstream.try_wait(), Ok(Some(_)))
        },
    )
    .await;
    matches!(upstream.try_wait(), Ok(None)).then_some(upstream)
}

async fn the_reference_server_over_http_through_agentgate() {
    let (mut upstream, url) = everything_over_http().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server =
        format!("[[mcp.servers]]\nname = \"everything\"\nurl = \"{url}\"\nprefix = \"ev_\"\n");
    through_everything(&server, dir.path()).await;
    let _ = upstream.kill().await;
}

/// The lines of the counting server's file: one per call it received.
fn counted(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.starts_with("cancelled "))
        .map(str::to_owned)
        .collect()
}

/// The cancels the counting server saw, with their reasons.
fn cancels(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("cancelled "))
        .map(str::to_owned)
        .collect()
}

/// agentgate killed with SIGKILL while a call is open: an idempotent tool
/// is called again (once) and completes; one that is not ends
/// "interrupted" and was called exactly once.
async fn a_lost_call_is_repeated_only_when_the_tool_says_it_is_safe() {
    let script = counting_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let count = dir.path().join("calls");
    // A short lease: the killed process's tasks are claimed again soon.
    let config = "[engine]\nlease_seconds = 3\n".to_owned()
        + &stdio_server(
            "counting",
            &script,
            &[],
            &format!(
                "env = {{ COUNT_FILE = {} }}\ntakeover_after_seconds = 1",
                toml_str(&count.display().to_string())
            ),
        );
    let start = || {
        GateBuilder::agentgate(BIN, dir.path())
            .config(&config)
            .start()
    };

    let gate = start().await;
    let client = tasks_client(&gate).await;
    let write = start_task(&client, "slow_write", json!({"seconds": 30})).await;
    // Long enough to be running still when the kill comes.
    let read = start_task(&client, "slow_read", json!({"seconds": 8})).await;
    for id in [&write.task.task_id, &read.task.task_id] {
        until_progress(&client, id).await;
    }
    drop(client);
    let _ = gate.kill_and_wait().await;
    let mut before = counted(&count);
    before.sort();
    assert_eq!(
        before,
        ["slow_read", "slow_write"],
        "one call each before the kill"
    );

    let gate = start().await;
    let client = tasks_client(&gate).await;
    let TaskPayload::Completed { result } =
        poll_until(&client, &read.task.task_id, is_terminal).await
    else {
        panic!("the idempotent call completes after the restart")
    };
    assert_eq!(text_of(&result), "slow_read done after 8s");
    let TaskPayload::Failed { error } = poll_until(&client, &write.task.task_id, is_terminal).await
    else {
        panic!("the other one fails")
    };
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("interrupted; not repeated because the tool is not marked idempotent"),
        "{message}"
    );
    assert!(
        message.contains("Last status: progress"),
        "the progress it saw: {message}"
    );
    let mut after = counted(&count);
    after.sort();
    assert_eq!(
        after,
        ["slow_read", "slow_read", "slow_write"],
        "slow_read called again once, slow_write never"
    );
    client.cancel().await.expect("close");
}

/// A server that dies during a call, one that hangs past its time limit and
/// one that cannot start: each a clear error, and the gateway still serves.
async fn broken_servers_get_clear_errors_and_a_healthy_gateway() {
    let script = counting_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let count = dir.path().join("calls");
    let config = format!(
        "{}[[mcp.servers]]\nname = \"missing\"\ncommand = \"/nonexistent/mcp-server\"\n",
        stdio_server(
            "counting",
            &script,
            &[],
            &format!(
                "env = {{ COUNT_FILE = {} }}\ncall_timeout_seconds = 2",
                toml_str(&count.display().to_string())
            ),
        ),
    );
    let gate = GateBuilder::agentgate(BIN, dir.path())
        .config(&config)
        .start()
        .await;
    let client = tasks_client(&gate).await;

    let died = start_task(&client, "die_midway", json!({})).await;
    let TaskPayload::Failed { error } = poll_until(&client, &died.task.task_id, is_terminal).await
    else {
        panic!("a server that died fails the task")
    };
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("interrupted; not repeated")
            && message.contains("connection to the server closed"),
        "{message}"
    );

    let hung = start_task(&client, "slow_write", json!({"seconds": 60})).await;
    let TaskPayload::Failed { error } = poll_until(&client, &hung.task.task_id, is_terminal).await
    else {
        panic!("a call past its time limit fails")
    };
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("did not answer `slow_write` within 2s (call_timeout_seconds)"),
        "{message}"
    );
    assert_eq!(counted(&count), ["die_midway", "slow_write"]);
    agentgate_testkit::poll::eventually(
        "the server to see the timed-out call cancelled",
        Duration::from_secs(10),
        || !cancels(&count).is_empty(),
    )
    .await;
    assert_eq!(
        cancels(&count),
        ["cancelled slow_write: agentgate: the call timed out"],
        "the server was told why"
    );

    // A cancel reaches the server as notifications/cancelled.
    cancel_while_working(&client, "slow_read", json!({"seconds": 60})).await;
    agentgate_testkit::poll::eventually(
        "the server to see the cancel",
        Duration::from_secs(10),
        || cancels(&count).len() == 2,
    )
    .await;
    assert_eq!(
        cancels(&count)[1],
        "cancelled slow_read: agentgate: the task was cancelled"
    );

    // The server that cannot start serves no tools and says why.
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    assert!(
        tools.iter().any(|t| t.name == "slow_read"),
        "the healthy server's tools stay"
    );
    let check = std::process::Command::new(BIN)
        .arg("--config")
        .arg(dir.path().join("agentgate.toml"))
        .arg("check")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .output()
        .expect("agentgate check");
    let said = String::from_utf8_lossy(&check.stdout).to_string()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(
        said.contains("MCP server \"missing\"") && said.contains("/nonexistent/mcp-server"),
        "check names the server and its command: {said}"
    );

    // And the gateway goes on serving.
    let again = start_task(&client, "slow_read", json!({"seconds": 0})).await;
    let TaskPayload::Completed { result } =
        poll_until(&client, &again.task.task_id, is_terminal).await
    else {
        panic!("still serving")
    };
    assert_eq!(text_of(&result), "slow_read done after 0s");
    client.cancel().await.expect("close");
    drop(gate);
}

/// `[[mcp.servers]]` for the emulators' plain MCP server (`agentgate sim
/// --mcp-stdio`): one slow tool, `countdown`, served under its own name.
fn slow_tool_server() -> String {
    format!(
        "[[mcp.servers]]\nname = \"slow\"\ncommand = {BIN:?}\nargs = [\"sim\", \"--mcp-stdio\"]\n"
    )
}

/// A server that runs the call as its own task (the tasks extension over
/// HTTP; here a second agentgate, serving the emulators' slow `countdown`):
/// agentgate follows the server's task by id, forwards its question, and
/// after a SIGKILL the restarted gateway re-attaches to the same task,
/// which the server ran exactly once.
async fn an_upstream_task_is_followed_across_a_restart() {
    let inner_dir = tempfile::tempdir().expect("tempdir");
    let inner = GateBuilder::agentgate(BIN, inner_dir.path())
        .config(&slow_tool_server())
        .start()
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "[engine]\nlease_seconds = 3\n[[mcp.servers]]\nname = \"inner\"\nurl = \"{}\"\nprefix = \"inner_\"\n",
        inner.url
    );
    let start = || {
        GateBuilder::agentgate(BIN, dir.path())
            .config(&config)
            .start()
    };

    let gate = start().await;
    let client = tasks_client(&gate).await;
    let task = start_task(
        &client,
        "inner_countdown",
        json!({"seconds": 4, "ask": true}),
    )
    .await;
    let id = task.task.task_id.clone();
    watch_task(&client, &id, Duration::from_secs(30), |got| {
        status_message(got).contains("runs the call as its task")
            || status_message(got).ends_with("s left")
    })
    .await;
    drop(client);
    let _ = gate.kill_and_wait().await;

    let gate = start().await;
    let client = tasks_client(&gate).await;
    let asked = poll_until(&client, &id, |p| {
        matches!(p, TaskPayload::InputRequired { .. }) || is_terminal(p)
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = asked else {
        panic!("the server's question, through the restarted gateway: {asked:?}")
    };
    let key = input_requests.keys().next().expect("one question").clone();
    // The inner gateway's key for the slow server's elicitation, marked
    // as the server's, in its first round.
    assert_eq!(key, "upstream.r1.a1q1-elicitation");
    let mut answers = InputResponses::new();
    answers.insert(key, json!({"action": "accept", "content": {"name": "Ada"}}));
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), answers))
        .await
        .expect("tasks/update");
    let TaskPayload::Completed { result } = poll_until(&client, &id, is_terminal).await else {
        panic!("completed")
    };
    assert_eq!(text_of(&result), "Hello, Ada!");

    // The server ran one countdown, not two.
    let metrics = metrics_of(&inner).await;
    let mut countdowns: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("agentgate_tasks{tool=\"countdown\""))
        .collect();
    countdowns.sort_unstable();
    assert_eq!(
        countdowns,
        [
            "agentgate_tasks{tool=\"countdown\",status=\"cancelled\"} 0",
            "agentgate_tasks{tool=\"countdown\",status=\"completed\"} 1",
            "agentgate_tasks{tool=\"countdown\",status=\"failed\"} 0",
            "agentgate_tasks{tool=\"countdown\",status=\"input_required\"} 0",
            "agentgate_tasks{tool=\"countdown\",status=\"working\"} 0",
        ],
        "{metrics}"
    );
    client.cancel().await.expect("close");
}

/// A gateway in front of the reference server at `url`, quick to take over
/// a call after a restart (lease 3 s, takeover 2 s).
fn restartable_config(url: &str) -> String {
    format!(
        "[engine]\nlease_seconds = 3\n[[mcp.servers]]\nname = \"everything\"\nurl = \"{url}\"\n\
         prefix = \"ev_\"\ntakeover_after_seconds = 2\n"
    )
}

/// Starts the reference server's research on `topic` and waits until the
/// server runs it as its task (our status names the task, or shows the
/// server's first stage, which replaces that within a second).
async fn research_in_its_task(client: &Client, topic: &str) -> String {
    let id = start_task(
        client,
        "ev_simulate-research-query",
        json!({"topic": topic}),
    )
    .await
    .task
    .task_id;
    watch_task(client, &id, Duration::from_secs(30), |got| {
        let status = status_message(got);
        status.contains("runs the call as its task") || status.ends_with("...")
    })
    .await;
    id
}

/// The gateway's counts of MCP requests sent upstream, other than tool
/// listings, that are not zero, sorted.
fn calls_besides_listing(metrics: &str) -> Vec<&str> {
    let mut calls: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("agentgate_upstream_calls_total{backend=\"mcp\""))
        .filter(|l| !l.contains("operation=\"tools/list\""))
        .filter(|l| !l.ends_with(" 0"))
        .collect();
    calls.sort_unstable();
    calls
}

/// A tool the reference server runs only as a 2025-11-25 task
/// (`simulate-research-query`, not marked idempotent), over HTTP: the task
/// lives in the server's session, which agentgate saves with ours. Killed
/// with SIGKILL once the server made its task (which works for seconds,
/// mostly while agentgate is down), the restarted gateway enters that
/// session again and gets the server's report, with no new `tools/call`
/// (a repeat would have been refused as "interrupted"). A task whose
/// server asked a question before the kill is cancelled in the session by
/// the restarted gateway.
async fn a_2025_11_25_task_is_followed_across_a_restart() {
    let (mut upstream, url) = everything_over_http().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = restartable_config(&url);
    let start = || {
        GateBuilder::agentgate(BIN, dir.path())
            .config(&config)
            .start()
    };

    let gate = start().await;
    let client = tasks_client(&gate).await;
    let asking = start_task(
        &client,
        "ev_simulate-research-query",
        json!({"topic": "python", "ambiguous": true}),
    )
    .await
    .task
    .task_id;
    let asked = poll_until(&client, &asking, |p| {
        matches!(p, TaskPayload::InputRequired { .. }) || is_terminal(p)
    })
    .await;
    assert!(
        matches!(asked, TaskPayload::InputRequired { .. }),
        "{asked:?}"
    );
    // Killed once the server made its task: its result, if it comes
    // before the kill, is read again in the session, which is kept.
    let working = research_in_its_task(&client, "tides").await;
    drop(client);
    let _ = gate.kill_and_wait().await;

    let gate = start().await;
    let client = tasks_client(&gate).await;
    client
        .peer()
        .cancel_task(CancelTaskParams::new(asking.clone()))
        .await
        .expect("tasks/cancel");
    let ended = poll_until(&client, &asking, is_terminal).await;
    assert!(matches!(ended, TaskPayload::Cancelled), "{ended:?}");
    let got = client
        .peer()
        .get_task(rmcp::model::GetTaskParams::new(asking.clone()))
        .await
        .expect("tasks/get");
    assert!(
        !status_message(&got).contains("could not be cancelled"),
        "cancelled in the server's session: {}",
        status_message(&got)
    );

    let TaskPayload::Completed { result } = poll_until(&client, &working, is_terminal).await else {
        panic!("the server's task, followed again after the restart, completed")
    };
    let text = text_of(&result);
    assert!(
        text.contains("# Research Report: tides"),
        "the server's own report: {text}"
    );

    // The restarted gateway sent no tools/call: it read the task's result
    // in its session, and cancelled the other one there.
    let metrics = metrics_of(&gate).await;
    assert_eq!(
        calls_besides_listing(&metrics),
        [
            "agentgate_upstream_calls_total{backend=\"mcp\",operation=\"tasks/cancel\",outcome=\"ok\"} 1",
            "agentgate_upstream_calls_total{backend=\"mcp\",operation=\"tasks/result\",outcome=\"ok\"} 1",
        ],
        "{metrics}"
    );
    client.cancel().await.expect("close");
    let _ = upstream.kill().await;
}

/// The same, when the server restarted meanwhile and no longer knows the
/// session: entering it fails, and after three entries without news of
/// its task the call is lost, so the crash rules decide: the tool is not
/// marked idempotent, so it is not called again.
async fn a_session_the_server_forgot_ends_the_call_under_the_crash_rules() {
    let (mut upstream, url) = everything_over_http().await;
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .expect("the server's port");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = restartable_config(&url);
    let start = || {
        GateBuilder::agentgate(BIN, dir.path())
            .config(&config)
            .start()
    };

    let gate = start().await;
    let client = tasks_client(&gate).await;
    let id = research_in_its_task(&client, "tides").await;
    drop(client);
    let _ = gate.kill_and_wait().await;
    let _ = upstream.kill().await;
    let _ = upstream.wait().await;
    let mut upstream = everything_at(port)
        .await
        .expect("the reference server started again on its port");

    let gate = start().await;
    let client = tasks_client(&gate).await;
    let ended = poll_until(&client, &id, is_terminal).await;
    let TaskPayload::Failed { error } = ended else {
        panic!("expected failed, got {ended:?}")
    };
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("interrupted; not repeated because the tool is not marked idempotent")
            && message.contains("entered again 3 times"),
        "{message}"
    );
    // Three entries into the session, each refused, and nothing else.
    let metrics = metrics_of(&gate).await;
    assert_eq!(
        calls_besides_listing(&metrics),
        [
            "agentgate_upstream_calls_total{backend=\"mcp\",operation=\"tasks/result\",outcome=\"transport_error\"} 3"
        ],
        "{metrics}"
    );
    client.cancel().await.expect("close");
    let _ = upstream.kill().await;
}

/// Many principals on one gateway, each reaching an upstream server as
/// itself (`principal_tokens`): the server (a second agentgate with bearer
/// tokens) owns each call's task by the caller's own upstream identity, so
/// one principal's upstream task is not another's.
async fn each_principal_reaches_the_server_as_itself() {
    let inner_dir = tempfile::tempdir().expect("tempdir");
    let inner = GateBuilder::agentgate(BIN, inner_dir.path())
        .config(&format!(
            "{}[auth]\nmode = \"tokens\"\n\
             [[auth.tokens]]\nprincipal = \"gateway\"\ntoken_env = \"AT_INNER_GATEWAY\"\n\
             [[auth.tokens]]\nprincipal = \"alice\"\ntoken_env = \"AT_INNER_ALICE\"\n\
             [[auth.tokens]]\nprincipal = \"bob\"\ntoken_env = \"AT_INNER_BOB\"\n",
            slow_tool_server()
        ))
        .env("AT_INNER_GATEWAY", "inner-gateway-token-0123456789")
        .env("AT_INNER_ALICE", "inner-alice-token-0123456789")
        .env("AT_INNER_BOB", "inner-bob-token-0123456789")
        .start()
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "[auth]\nmode = \"tokens\"\n\
         [[auth.tokens]]\nprincipal = \"alice\"\ntoken_env = \"OUTER_ALICE\"\n\
         [[auth.tokens]]\nprincipal = \"bob\"\ntoken_env = \"OUTER_BOB\"\n\
         [[mcp.servers]]\nname = \"inner\"\nurl = \"{}\"\nprefix = \"inner_\"\n\
         bearer_token_env = \"INNER_GATEWAY\"\n\
         principal_tokens = {{ \"token:alice\" = \"INNER_ALICE\", \"token:bob\" = \"INNER_BOB\" }}\n",
        inner.url
    );
    let gate = GateBuilder::agentgate(BIN, dir.path())
        .config(&config)
        .env("OUTER_ALICE", "outer-alice-token-0123456789")
        .env("OUTER_BOB", "outer-bob-token-0123456789")
        .env("INNER_GATEWAY", "inner-gateway-token-0123456789")
        .env("INNER_ALICE", "inner-alice-token-0123456789")
        .env("INNER_BOB", "inner-bob-token-0123456789")
        .start()
        .await;

    // Each principal's call, through the gateway: the id of the task the
    // server made for it, read from the status message that names it.
    let mut upstream_ids = Vec::new();
    for who in ["alice", "bob"] {
        let client = TestClient::tasks()
            .http_with_token(&gate.url, &format!("outer-{who}-token-0123456789"))
            .await;
        let task = start_task(&client, "inner_countdown", json!({"seconds": 2})).await;
        let mut upstream_id = None;
        let done = watch_task(
            &client,
            &task.task.task_id,
            Duration::from_secs(30),
            |got| {
                let status = status_message(got);
                if let Some(id) = status.split("runs the call as its task ").nth(1) {
                    upstream_id = Some(id.to_owned());
                }
                is_terminal(&got.task.payload)
            },
        )
        .await;
        assert!(
            matches!(done.task.payload, TaskPayload::Completed { .. }),
            "{who}: {:?}",
            done.task.payload
        );
        upstream_ids.push(upstream_id.unwrap_or_else(|| panic!("{who}: the server's task id")));
        client.cancel().await.expect("close");
    }

    // At the server, alice's task is alice's and bob's is bob's.
    let alice = TestClient::tasks()
        .http_with_token(&inner.url, "inner-alice-token-0123456789")
        .await;
    let bob = TestClient::tasks()
        .http_with_token(&inner.url, "inner-bob-token-0123456789")
        .await;
    for (client, own, other, who) in [
        (&alice, &upstream_ids[0], &upstream_ids[1], "alice"),
        (&bob, &upstream_ids[1], &upstream_ids[0], "bob"),
    ] {
        let get = |id: &str| {
            client
                .peer()
                .get_task(rmcp::model::GetTaskParams::new(id.to_owned()))
        };
        assert!(get(own).await.is_ok(), "{who}'s own upstream task");
        assert!(
            get(other).await.is_err(),
            "the other's upstream task is not {who}'s"
        );
    }
    // The tokens went to the server, and into nothing the gateway wrote.
    let log = gate.stderr();
    for token in [
        "inner-gateway-token",
        "inner-alice-token",
        "inner-bob-token",
    ] {
        assert!(!log.contains(token), "{token} in the gateway's log:\n{log}");
    }
}

/// Many principals on one gateway, each running a stdio server as itself
/// (`principal_env`): alice's calls start the counting server with her own
/// `COUNT_FILE`, bob (not listed) gets the shared `env`, and alice's value
/// appears in nothing the gateway wrote.
async fn each_principal_runs_the_stdio_server_with_its_own_environment() {
    let script = counting_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let shared = dir.path().join("shared-calls");
    let alices = dir.path().join("alice-calls");
    let config = format!(
        "[auth]\nmode = \"tokens\"\n\
         [[auth.tokens]]\nprincipal = \"alice\"\ntoken_env = \"OUTER_ALICE\"\n\
         [[auth.tokens]]\nprincipal = \"bob\"\ntoken_env = \"OUTER_BOB\"\n{}",
        stdio_server(
            "counting",
            &script,
            &[],
            &format!(
                "env = {{ COUNT_FILE = {} }}\n\
                 principal_env = {{ \"token:alice\" = {{ COUNT_FILE = \"ALICE_COUNT_FILE\" }} }}",
                toml_str(&shared.display().to_string())
            ),
        )
    );
    let gate = GateBuilder::agentgate(BIN, dir.path())
        .config(&config)
        .env("OUTER_ALICE", "outer-alice-token-0123456789")
        .env("OUTER_BOB", "outer-bob-token-0123456789")
        .env("ALICE_COUNT_FILE", alices.display().to_string())
        .start()
        .await;
    for (who, tool) in [("alice", "slow_read"), ("bob", "slow_write")] {
        let client = TestClient::tasks()
            .http_with_token(&gate.url, &format!("outer-{who}-token-0123456789"))
            .await;
        let task = start_task(&client, tool, json!({"seconds": 0})).await;
        let done = poll_until(&client, &task.task.task_id, is_terminal).await;
        assert!(
            matches!(done, TaskPayload::Completed { .. }),
            "{who}: {done:?}"
        );
        client.cancel().await.expect("close");
    }
    assert_eq!(counted(&alices), ["slow_read"], "alice's call, in her file");
    assert_eq!(
        counted(&shared),
        ["slow_write"],
        "bob's call, in the shared one"
    );
    let log = gate.stderr();
    assert!(
        !log.contains("alice-calls"),
        "alice's value in the gateway's log:\n{log}"
    );
}

/// The reference server's sampling and roots tools, which it offers only
/// to a client that declares those capabilities: behind a server entry
/// without `sampling`/`roots` they are not there; with `sampling =
/// "caller"` the server's `sampling/createMessage` is asked of the caller
/// (a task's `input_required`, answered with `tasks/update`; a client
/// before 2026-07-28 inline, as a request of its own) and with `roots` the
/// server reads the operator's roots.
async fn sampling_and_roots_follow_the_operators_settings() {
    let script = everything();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = stdio_server("plain", &script, &["stdio"], "prefix = \"plain_\"")
        + &stdio_server(
            "everything",
            &script,
            &["stdio"],
            "prefix = \"ev_\"\nsampling = \"caller\"\n\
             roots = [{ uri = \"file:///srv/agentgate-test\", name = \"test root\" }]",
        );
    let gate = GateBuilder::agentgate(BIN, dir.path())
        .config(&config)
        .start()
        .await;
    let mut caps = ClientCapabilities::builder().enable_tasks().build();
    caps.sampling = Some(Default::default());
    let client = TestClient::new(caps, ProtocolVersion::V_2026_07_28);
    let seen = client.seen.clone();
    let client = client.http(&gate.url).await;

    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    for (tool, listed) in [
        ("plain_trigger-sampling-request", false),
        ("plain_get-roots-list", false),
        ("ev_trigger-sampling-request", true),
        ("ev_get-roots-list", true),
    ] {
        assert_eq!(names.contains(&tool), listed, "{tool}: {names:?}");
    }

    // Roots: the operator's, read by the server.
    let task = start_task(&client, "ev_get-roots-list", json!({})).await;
    let TaskPayload::Completed { result } =
        poll_until(&client, &task.task.task_id, is_terminal).await
    else {
        panic!("completed")
    };
    let text = text_of(&result);
    assert!(
        text.contains("Current MCP Roots (1 total)")
            && text.contains("test root")
            && text.contains("file:///srv/agentgate-test"),
        "{text}"
    );

    // Sampling, as a task: the server's request is the caller's question.
    let task = start_task(
        &client,
        "ev_trigger-sampling-request",
        json!({"prompt": "name a colour"}),
    )
    .await;
    let id = task.task.task_id.clone();
    let asked = poll_until(&client, &id, |p| {
        matches!(p, TaskPayload::InputRequired { .. }) || is_terminal(p)
    })
    .await;
    let TaskPayload::InputRequired { input_requests } = asked else {
        panic!("the server's sampling request as a question: {asked:?}")
    };
    let (key, request) = input_requests.iter().next().expect("one request");
    let request = serde_json::to_value(request).expect("json");
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    let mut answers = InputResponses::new();
    answers.insert(
        key.clone(),
        json!({"role": "assistant", "content": {"type": "text", "text": "teal"},
               "model": "the-callers-model", "stopReason": "endTurn"}),
    );
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), answers))
        .await
        .expect("tasks/update");
    let TaskPayload::Completed { result } = poll_until(&client, &id, is_terminal).await else {
        panic!("completed")
    };
    let text = text_of(&result);
    assert!(
        text.starts_with("LLM sampling result:")
            && text.contains("teal")
            && text.contains("the-callers-model"),
        "{text}"
    );
    client.cancel().await.expect("close");

    // A client before 2026-07-28, inline: asked by a request of its own.
    let mut caps = ClientCapabilities::default();
    caps.sampling = Some(Default::default());
    let legacy = TestClient::new(caps, ProtocolVersion::V_2025_06_18);
    let legacy_seen = legacy.seen.clone();
    let legacy = legacy.http(&gate.url).await;
    let result = legacy
        .call_tool(agentgate_testkit::call(
            "ev_trigger-sampling-request",
            json!({"prompt": "name a fruit"}),
        ))
        .await
        .expect("tools/call");
    let text = serde_json::to_value(&result).expect("json")["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        text.contains("completion of: Resource trigger-sampling-request context: name a fruit")
            && text.contains(agentgate_testkit::TEST_MODEL),
        "{text}"
    );
    assert_eq!(
        legacy_seen.lock().expect("lock").samplings,
        ["Resource trigger-sampling-request context: name a fruit"]
    );
    assert!(
        seen.lock().expect("lock").samplings.is_empty(),
        "the task client was asked by tasks/update only"
    );
    legacy.cancel().await.expect("close");
}

/// A `url` server behind OAuth client credentials (the emulators' slow
/// tool server with its own token endpoint): agentgate fetches a token,
/// reuses it, fetches a new one once after the server answers 401 (all
/// tokens revoked), and a wrong secret is named as such without the
/// secret appearing anywhere.
async fn a_server_behind_oauth_client_credentials() {
    let secret = "sim-client-secret-0123456789";
    let sim = agentgate_sim::mcp::McpSim::new(Some(agentgate_sim::oauth::OAuthClient {
        client_id: "agentgate".into(),
        client_secret: secret.into(),
        token_ttl: Duration::from_secs(3600),
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let router = sim.router(shutdown.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let config = |secret_env: &str| {
        format!(
            "[[mcp.servers]]\nname = \"secured\"\nurl = \"{base}/mcp\"\nprefix = \"sec_\"\n\
             oauth = {{ token_url = \"{base}/oauth/token\", client_id = \"agentgate\", \
             client_secret_env = \"{secret_env}\", scopes = [\"mcp\"] }}\n"
        )
    };

    let dir = tempfile::tempdir().expect("tempdir");
    let gate = GateBuilder::agentgate(BIN, dir.path())
        .config(&config("SIM_MCP_SECRET"))
        .env("SIM_MCP_SECRET", secret)
        .start()
        .await;
    let client = tasks_client(&gate).await;
    for round in ["first", "after every token was revoked"] {
        let task = start_task(&client, "sec_countdown", json!({"seconds": 0})).await;
        let TaskPayload::Completed { result } =
            poll_until(&client, &task.task.task_id, is_terminal).await
        else {
            panic!("{round}: completed")
        };
        assert_eq!(text_of(&result), "Done counting.", "{round}");
        sim.revoke_tokens();
    }
    // One token for the tool list and the first call, one after the 401.
    assert_eq!(sim.tokens_issued(), 2, "{}", gate.stderr());
    client.cancel().await.expect("close");
    assert!(!gate.stderr().contains(secret), "the secret in the log");

    // A wrong secret: the endpoint's refusal, named by setting.
    let dir = tempfile::tempdir().expect("tempdir");
    let wrong = GateBuilder::agentgate(BIN, dir.path())
        .config(&config("SIM_MCP_WRONG_SECRET"))
        .env("SIM_MCP_WRONG_SECRET", "not-the-secret-0123456789")
        .start()
        .await;
    let log =
        agentgate_testkit::eventually("the refusal in the log", Duration::from_secs(10), || {
            let log = wrong.stderr();
            log.contains("refused the client credentials")
                .then_some(log)
        })
        .await;
    assert!(
        log.contains("invalid_client")
            && log.contains(
                "check servers[0].oauth.client_id and the secret in `SIM_MCP_WRONG_SECRET`"
            ),
        "{log}"
    );
    assert!(!log.contains("not-the-secret"), "the secret in the log");
    shutdown.cancel();
}

/// The upstream server agentgate's own `QBusinessQueryTool` replaces
/// (`awslabs.amazon-qbusiness-anonymous-mcp-server`, pinned in
/// `interop/python/requirements.txt`), run by agentgate as a stdio MCP
/// server against the Q Business emulator and called as a durable task: its
/// answer reads as agentgate's own backend's answer to the same question.
async fn the_upstream_qbusiness_server_as_a_durable_task() {
    let upstream = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../interop/python/.venv/bin/awslabs.amazon-qbusiness-anonymous-mcp-server");
    if !upstream.exists() {
        harness::skip(
            harness::Need::Interop,
            &format!(
                "{} is missing: run scripts/interop-setup.sh",
                upstream.display()
            ),
        );
    }
    let qbusiness = emulators::qbusiness(QBusinessConfig::default())
        .start()
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("aws-empty");
    std::fs::write(&empty, "").expect("an empty AWS config");
    let mut env: Vec<String> = qbusiness
        .env()
        .into_iter()
        .map(|(k, v)| format!("{k} = {}", toml_str(&v)))
        .collect();
    for var in ["AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"] {
        env.push(format!(
            "{var} = {}",
            toml_str(&empty.display().to_string())
        ));
    }
    let config = format!(
        "[[mcp.servers]]\nname = \"awslabs\"\ncommand = {}\npass_env = [\"PATH\"]\nenv = {{ {} }}\nprefix = \"awslabs_\"\n",
        toml_str(&upstream.display().to_string()),
        env.join(", ")
    );
    let gate = GateBuilder::agentgate(BIN, dir.path())
        .config(&config)
        .upstream(&qbusiness)
        .start()
        .await;
    let client = tasks_client(&gate).await;
    let question = json!({"query": "How many vacation days do employees get?"});
    let mut answers = Vec::new();
    for tool in ["awslabs_QBusinessQueryTool", "QBusinessQueryTool"] {
        let task = start_task(&client, tool, question.clone()).await;
        let TaskPayload::Completed { result } =
            poll_until(&client, &task.task.task_id, is_terminal).await
        else {
            panic!("{tool} completes")
        };
        answers.push(result);
    }
    let (theirs, ours) = (&answers[0], &answers[1]);
    let their_result = theirs["structuredContent"]["result"]
        .as_str()
        .unwrap_or_else(|| panic!("upstream through agentgate: {theirs:?}"));
    assert!(their_result.starts_with("Qbiz response: "), "{theirs:?}");
    assert_eq!(
        ours["structuredContent"]["result"].as_str(),
        Some(their_result),
        "ours: {ours:?}"
    );
    assert_eq!(ours["content"][0]["text"], theirs["content"][0]["text"]);
    assert_eq!(
        qbusiness.sim.stats().chat_sync_effects,
        2,
        "one ChatSync each"
    );
    client.cancel().await.expect("close");
}

/// Read-only mode keeps an MCP server's tools marked `readOnlyHint` and
/// nothing else that could change something upstream.
async fn read_only_mode_keeps_the_tools_marked_read_only() {
    let script = counting_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentgate.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nread_only = true\n{}",
            stdio_server(
                "counting",
                &script,
                &[],
                &format!(
                    "env = {{ COUNT_FILE = {} }}",
                    toml_str(&dir.path().join("calls").display().to_string())
                )
            )
        ),
    )
    .expect("write the config");
    let out = std::process::Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .arg("tools")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .output()
        .expect("agentgate tools");
    assert!(out.status.success(), "{out:?}");
    let list = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = list
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        ["slow_read", "task_status", "task_answer", "task_cancel"],
        "{list}"
    );
}

/// This file's tests, for the binary's `main`.
pub(crate) fn register(tests: harness::Tests) -> harness::Tests {
    tests
        .multi_thread(
            "the_reference_server_over_stdio_through_agentgate",
            the_reference_server_over_stdio_through_agentgate,
        )
        .multi_thread(
            "the_reference_server_over_http_through_agentgate",
            the_reference_server_over_http_through_agentgate,
        )
        .multi_thread(
            "a_lost_call_is_repeated_only_when_the_tool_says_it_is_safe",
            a_lost_call_is_repeated_only_when_the_tool_says_it_is_safe,
        )
        .multi_thread(
            "an_upstream_task_is_followed_across_a_restart",
            an_upstream_task_is_followed_across_a_restart,
        )
        .multi_thread(
            "a_2025_11_25_task_is_followed_across_a_restart",
            a_2025_11_25_task_is_followed_across_a_restart,
        )
        .multi_thread(
            "a_session_the_server_forgot_ends_the_call_under_the_crash_rules",
            a_session_the_server_forgot_ends_the_call_under_the_crash_rules,
        )
        .multi_thread(
            "read_only_mode_keeps_the_tools_marked_read_only",
            read_only_mode_keeps_the_tools_marked_read_only,
        )
        .multi_thread(
            "each_principal_reaches_the_server_as_itself",
            each_principal_reaches_the_server_as_itself,
        )
        .multi_thread(
            "each_principal_runs_the_stdio_server_with_its_own_environment",
            each_principal_runs_the_stdio_server_with_its_own_environment,
        )
        .multi_thread(
            "sampling_and_roots_follow_the_operators_settings",
            sampling_and_roots_follow_the_operators_settings,
        )
        .multi_thread(
            "a_server_behind_oauth_client_credentials",
            a_server_behind_oauth_client_credentials,
        )
        .multi_thread(
            "the_upstream_qbusiness_server_as_a_durable_task",
            the_upstream_qbusiness_server_as_a_durable_task,
        )
        .multi_thread(
            "broken_servers_get_clear_errors_and_a_healthy_gateway",
            broken_servers_get_clear_errors_and_a_healthy_gateway,
        )
}
