//! `agentgate demo --no-serve`: the walkthrough runs against the real
//! binary's emulators and gateway, and its output shows every step.

use std::process::Stdio;
use std::time::Duration;

use agentgate_testkit::{TestClient, contracts};

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

#[tokio::test]
async fn the_walkthrough_shows_every_step_and_exits_zero() {
    // Hold a port, so the demo has to say it picked another one.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let run = tokio::process::Command::new(BIN)
        .args([
            "demo",
            "--no-serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the demo finished within two minutes")
        .expect("run agentgate demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let expect = |needle: &str| {
        assert!(
            stdout.contains(needle),
            "missing {needle:?} in the demo's output:\n{stdout}"
        );
    };
    expect(&format!(
        "port {port} is taken; the gateway listens on 127.0.0.1:"
    ));
    // 1: an answer with a citation.
    expect("answer: Full-time employees get 25 days of paid vacation");
    expect("cited: Holiday and vacation policy <https://");
    // 2: the follow-up stayed in the conversation.
    expect("ok   Follow up in the same conversation: answered in the same conversation");
    // 3: the action was asked for, approved, and executed.
    expect("status: input required");
    expect("approving with tasks/update");
    expect("answer: Created ticket NWR-");
    // 4: Copilot followed live to its pull request.
    expect("status: working (Copilot opened pull request #");
    expect("pull request: https://github.com/acme/widgets/pull/");
    // 5: the cancelled task.
    expect("tasks/cancel ");
    expect("status: cancelled");
    // 6: the A2A agent's question, answered in its task.
    expect("input_required [a2a-input-");
    expect("What is your name?");
    expect("answering \"Ada\" with tasks/update");
    expect("the agent answered: Hello, Ada!");
    // 7: another MCP server's tool, its question answered in the task.
    expect("example_countdown {\"seconds\": 3, \"ask\": true}");
    expect("Who should I greet?");
    expect("answering \"Grace\" with tasks/update");
    expect("the MCP server answered: Hello, Grace!");
    expect("All 7 steps worked");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    // Not a terminal: no colour codes, no spinner.
    assert!(!stdout.contains('\u{1b}'), "escape codes in plain output");
    drop(taken);
}

#[tokio::test]
async fn the_demo_keeps_serving_and_its_connect_snippets_work() {
    use tokio::io::AsyncBufReadExt as _;

    let mut demo = tokio::process::Command::new(BIN)
        .args(["demo", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agentgate demo");
    let mut lines = tokio::io::BufReader::new(demo.stdout.take().expect("stdout")).lines();
    let mut url = None;
    let mut printed = Vec::new();
    let read_all = async {
        while let Some(line) = lines.next_line().await.expect("read demo output") {
            if let Some(rest) = line.trim().strip_prefix("Streamable HTTP: ") {
                url = Some(rest.to_owned());
            }
            let done = line.contains("Ctrl-C stops the demo");
            printed.push(line);
            if done {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), read_all)
        .await
        .expect("the demo printed its connect snippets within two minutes");
    let text = printed.join("\n");
    assert!(
        text.contains("\"mcpServers\""),
        "Claude Desktop JSON:\n{text}"
    );
    assert!(text.contains("\"type\": \"http\""), "VS Code JSON:\n{text}");
    assert!(text.contains("serve --stdio --store sqlite://"), "{text}");
    let url = url.expect("the demo printed its URL");

    // The printed URL serves a real client, with the demo's emulators.
    let state = tempfile::tempdir().expect("tempdir");
    let call = tokio::process::Command::new(BIN)
        .args([
            "call",
            "--url",
            &url,
            "QBusinessQueryTool",
            "--arg",
            "query=Where is the Berlin office?",
        ])
        .env("AGENTGATE_CLIENT_STATE", state.path())
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run agentgate call");
    let answer = String::from_utf8_lossy(&call.stdout);
    assert_eq!(call.status.code(), Some(0), "{answer}");
    assert!(answer.contains("Qbiz response:"), "{answer}");

    // Every tool it lists (all three backends' and the built-ins) passes
    // MCP Inspector's portability rules: no bare boolean schema, no type
    // array, in the input or the output schema.
    let client = TestClient::tasks().http(&url).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.len() >= 6, "{tools:?}");
    for tool in &tools {
        let mut schemas = vec![serde_json::Value::Object(
            tool.input_schema.as_ref().clone(),
        )];
        schemas.extend(
            tool.output_schema
                .as_ref()
                .map(|s| serde_json::Value::Object(s.as_ref().clone())),
        );
        for schema in schemas {
            let problems = contracts::schema_portability_problems(&schema);
            assert!(problems.is_empty(), "{}: {problems:?}", tool.name);
        }
    }
    client.cancel().await.expect("close");

    // SIGTERM (what `kill`, systemd and scripts send, to the demo alone)
    // stops it cleanly, and its gateway child with it: nothing listens at
    // the gateway's address afterwards.
    let pid = i32::try_from(demo.id().expect("running")).expect("a pid fits an i32");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = tokio::time::timeout(Duration::from_secs(60), demo.wait())
        .await
        .expect("the demo stopped within a minute of SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    let gateway = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let refused = tokio::net::TcpStream::connect(&gateway).await;
    assert!(
        refused.is_err(),
        "the demo's gateway still listens at {gateway} after the demo stopped"
    );
}
