//! `agentgate call` and `agentgate task` as a script meets them: the real
//! client binary against the real `agentgate serve` (over HTTP and stdio),
//! whose Q Business tool talks to the emulator in this test process. Each
//! test keeps its task list in its own directory (`AGENTGATE_CLIENT_STATE`).

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use agentgate_sim::qbusiness::{QBusinessConfig, QBusinessSim, TICKET_PLUGIN_ID};
use agentgate_testkit::{Emulator, Gate, GateBuilder, emulators};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");
const TICKET: &str = "Open a ticket: my laptop battery is swollen";

/// The emulator, a temporary directory, and (for HTTP) a running gateway.
struct World {
    q: Emulator<QBusinessSim>,
    sim: QBusinessSim,
    dir: tempfile::TempDir,
}

impl World {
    async fn new() -> Self {
        let q = emulators::qbusiness(QBusinessConfig::default())
            .start()
            .await;
        Self {
            sim: q.sim.clone(),
            q,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn store(&self) -> String {
        agentgate_testkit::process::sqlite_url(&self.dir.path().join("tasks.db"))
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("client-state")
    }

    /// The environment `agentgate serve` needs to reach the emulator; set on
    /// the client too, so a server it spawns over stdio inherits it.
    fn env(&self, cmd: &mut Command) {
        let empty = self.dir.path().join("aws-empty");
        std::fs::write(&empty, "").expect("write empty AWS config");
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("AWS_CONFIG_FILE", &empty)
            .env("AWS_SHARED_CREDENTIALS_FILE", &empty)
            .env("RUST_LOG", "warn")
            .envs(self.q.env())
            .env("AGENTGATE_CLIENT_STATE", self.state());
    }

    /// `agentgate serve --listen 127.0.0.1:0`, and its MCP URL.
    async fn serve_http(&self) -> (Gate, String) {
        let server = GateBuilder::agentgate(BIN, self.dir.path())
            .upstream(&self.q)
            .env("AGENTGATE_CLIENT_STATE", self.state())
            .start()
            .await;
        let url = server.url.clone();
        (server, url)
    }

    /// The `--stdio` value that runs a gateway on this world's store.
    fn stdio_server(&self) -> String {
        format!("{BIN} serve --stdio --store {}", self.store())
    }

    fn client(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        self.env(&mut cmd);
        cmd.args(args).kill_on_drop(true);
        cmd
    }

    /// Runs the client with `stdin` piped in (then closed).
    async fn run(&self, args: &[&str], stdin: &str) -> Run {
        let mut child = self
            .client(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agentgate client");
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(stdin.as_bytes()).await.expect("write stdin");
        drop(pipe);
        let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("the client did not finish in 120 s")
            .expect("client output");
        Run::from(out)
    }
}

/// What a client run printed and how it exited.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Self {
        Self {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "{self:#?}");
        self
    }
}

fn task_records(state: &Path) -> Vec<Value> {
    std::fs::read_dir(state)
        .map(|entries| {
            entries
                .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
                .filter_map(|b| serde_json::from_slice(&b).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn call_follows_a_task_over_http_to_its_answer_and_records_it() {
    let world = World::new().await;
    let (_server, url) = world.serve_http().await;
    let run = world
        .run(
            &[
                "call",
                "--url",
                &url,
                "QBusinessQueryTool",
                "--arg",
                "query=How do I set up the VPN?",
            ],
            "",
        )
        .await;
    run.expect_code(0);
    assert!(run.stdout.starts_with("Qbiz response: "), "{run:#?}");
    assert!(
        !run.stdout.contains("\"conversationId\""),
        "a person gets the text, not the structured JSON: {run:#?}"
    );
    assert!(
        run.stderr.contains(": completed"),
        "plain progress lines off a terminal: {run:#?}"
    );
    let records = task_records(&world.state());
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["tool"], "QBusinessQueryTool");
    assert_eq!(records[0]["last_status"], "completed");
    assert_eq!(records[0]["server"]["http"]["url"], url.as_str());
    assert_eq!(world.sim.stats().chat_sync_effects, 1);

    // --structured adds the structured content after the text.
    let run = world
        .run(
            &[
                "call",
                "--url",
                &url,
                "QBusinessQueryTool",
                "--arg",
                "query=vacation days",
                "--structured",
            ],
            "",
        )
        .await;
    run.expect_code(0);
    assert!(run.stdout.starts_with("Qbiz response: "), "{run:#?}");
    assert!(
        run.stdout.contains("\"conversationId\""),
        "--structured prints the structured content: {run:#?}"
    );

    // --json prints the raw CallToolResult.
    let run = world
        .run(
            &[
                "call",
                "--url",
                &url,
                "QBusinessQueryTool",
                "--args",
                r#"{"query": "vacation days"}"#,
                "--json",
            ],
            "",
        )
        .await;
    run.expect_code(0);
    let raw: Value = serde_json::from_str(&run.stdout).expect("stdout is JSON");
    assert!(raw["structuredContent"]["answer"].is_string(), "{raw}");
}

#[tokio::test]
async fn call_over_stdio_spawns_the_server_and_follows_the_task() {
    let world = World::new().await;
    let server = world.stdio_server();
    let run = world
        .run(
            &[
                "call",
                "--stdio",
                &server,
                "QBusinessQueryTool",
                "--arg",
                "query=vacation days",
            ],
            "",
        )
        .await;
    run.expect_code(0);
    assert!(run.stdout.starts_with("Qbiz response: "), "{run:#?}");
    let records = task_records(&world.state());
    assert_eq!(records[0]["server"]["stdio"]["command"], server.as_str());
}

#[tokio::test]
async fn input_request_is_answered_from_piped_stdin_lines() {
    let world = World::new().await;
    let (_server, url) = world.serve_http().await;
    let run = world
        .run(
            &[
                "call",
                "--url",
                &url,
                "QBusinessQueryTool",
                "--arg",
                &format!("query={TICKET}"),
                "--arg",
                &format!("plugin_id={TICKET_PLUGIN_ID}"),
            ],
            "summary=Swollen laptop battery\npriority=high\n\n",
        )
        .await;
    run.expect_code(0);
    assert!(run.stdout.contains("Created ticket NWR-"), "{run:#?}");
    assert!(run.stderr.contains("input required"), "{run:#?}");
    let tickets = world.sim.tickets();
    assert_eq!(tickets.len(), 1);
    assert_eq!(tickets[0].summary, "Swollen laptop battery");
    assert_eq!(
        tickets[0].priority, "HIGH",
        "matched by value or title, any case"
    );
}

#[tokio::test]
async fn malformed_piped_answer_names_the_line_and_the_fields() {
    let world = World::new().await;
    let (_server, url) = world.serve_http().await;
    let run = world
        .run(
            &[
                "call",
                "--url",
                &url,
                "QBusinessQueryTool",
                "--arg",
                &format!("query={TICKET}"),
                "--arg",
                &format!("plugin_id={TICKET_PLUGIN_ID}"),
            ],
            "priority=urgent\n",
        )
        .await;
    run.expect_code(2);
    assert!(run.stderr.contains("stdin line 1"), "{run:#?}");
    assert!(
        run.stderr.contains("`priority`") && run.stderr.contains("HIGH"),
        "{run:#?}"
    );
    assert!(
        run.stderr.contains("agentgate task wait"),
        "says how to resume: {run:#?}"
    );
    assert!(world.sim.tickets().is_empty());
}

#[tokio::test]
async fn input_flags_answer_without_reading_stdin() {
    let world = World::new().await;
    let (_server, url) = world.serve_http().await;
    // stdin stays open and empty: reading it would hang past the timeout.
    let mut child = world
        .client(&[
            "call",
            "--url",
            &url,
            "QBusinessQueryTool",
            "--arg",
            &format!("query={TICKET}"),
            "--arg",
            &format!("plugin_id={TICKET_PLUGIN_ID}"),
            "--input",
            "priority=LOW",
            "--input",
            "summary=Battery",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let _stdin = child.stdin.take();
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("finished without stdin")
        .expect("output");
    let run = Run::from(out);
    run.expect_code(0);
    let tickets = world.sim.tickets();
    assert_eq!(tickets.len(), 1, "{run:#?}");
    assert_eq!(
        (tickets[0].summary.as_str(), tickets[0].priority.as_str()),
        ("Battery", "LOW")
    );
}

#[tokio::test]
async fn no_wait_returns_the_id_and_task_wait_follows_it_in_a_new_process() {
    let world = World::new().await;
    let (_server, url) = world.serve_http().await;
    let run = world
        .run(
            &[
                "call",
                "--url",
                &url,
                "--no-wait",
                "QBusinessQueryTool",
                "--arg",
                "query=vacation days",
            ],
            "",
        )
        .await;
    run.expect_code(0);
    let id = run.stdout.trim().to_owned();
    assert!(
        !id.is_empty() && !id.contains(char::is_whitespace),
        "{run:#?}"
    );
    assert!(
        run.stderr.contains(&format!("agentgate task wait {id}")),
        "{run:#?}"
    );

    let list = world.run(&["task", "list"], "").await;
    list.expect_code(0);
    assert!(
        list.stdout.contains(&id) && list.stdout.contains("QBusinessQueryTool"),
        "{list:#?}"
    );

    // No --url: the server comes from the local task list.
    let wait = world.run(&["task", "wait", &id], "").await;
    wait.expect_code(0);
    assert!(wait.stdout.starts_with("Qbiz response: "), "{wait:#?}");

    let get = world.run(&["task", "get", &id, "--json"], "").await;
    get.expect_code(0);
    let detailed: Value = serde_json::from_str(&get.stdout).expect("JSON");
    assert_eq!(detailed["status"], "completed");
    assert_eq!(detailed["taskId"], id.as_str());

    let list = world.run(&["task", "list", "--json"], "").await;
    let records: Value = serde_json::from_str(&list.stdout).expect("JSON");
    assert_eq!(records[0]["last_status"], "completed", "{records}");
}

#[tokio::test]
async fn exit_status_is_1_for_a_tool_error_and_2_for_cancelled_or_protocol_errors() {
    let world = World::new().await;
    let (_server, url) = world.serve_http().await;

    let tool_error = world
        .run(
            &[
                "call",
                "--url",
                &url,
                "QBusinessQueryTool",
                "--arg",
                "query=",
            ],
            "",
        )
        .await;
    tool_error.expect_code(1);
    assert!(
        tool_error.stdout.contains("Query cannot be empty"),
        "{tool_error:#?}"
    );
    assert!(
        tool_error.stderr.contains("reported an error"),
        "{tool_error:#?}"
    );

    let unknown = world
        .run(&["call", "--url", &url, "no_such_tool"], "")
        .await;
    unknown.expect_code(2);
    assert!(
        unknown.stderr.contains("unknown tool `no_such_tool`"),
        "{unknown:#?}"
    );

    // A ticket task waits for its form; cancel it from another process.
    let started = world
        .run(
            &[
                "call",
                "--url",
                &url,
                "--no-wait",
                "QBusinessQueryTool",
                "--arg",
                &format!("query={TICKET}"),
                "--arg",
                &format!("plugin_id={TICKET_PLUGIN_ID}"),
            ],
            "",
        )
        .await;
    started.expect_code(0);
    let id = started.stdout.trim().to_owned();
    let cancel = world.run(&["task", "cancel", &id], "").await;
    cancel.expect_code(0);
    assert!(cancel.stderr.contains("cancel requested"), "{cancel:#?}");
    let wait = world.run(&["task", "wait", &id], "").await;
    wait.expect_code(2);
    assert!(wait.stderr.contains("cancelled"), "{wait:#?}");
    assert!(world.sim.tickets().is_empty());

    let malformed = world
        .run(
            &[
                "call",
                "--url",
                &url,
                "QBusinessQueryTool",
                "--arg",
                "query",
            ],
            "",
        )
        .await;
    malformed.expect_code(2);
    assert!(
        malformed.stderr.contains("--arg \"query\" is malformed"),
        "{malformed:#?}"
    );

    let unknown_task = world.run(&["task", "wait", "nope"], "").await;
    unknown_task.expect_code(2);
    assert!(
        unknown_task.stderr.contains("--url URL"),
        "{unknown_task:#?}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn ctrl_c_in_a_script_detaches_and_the_task_can_be_resumed() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let world = World::new().await;
    let (_server, url) = world.serve_http().await;
    let mut child = world
        .client(&[
            "call",
            "--url",
            &url,
            "QBusinessQueryTool",
            "--arg",
            &format!("query={TICKET}"),
            "--arg",
            &format!("plugin_id={TICKET_PLUGIN_ID}"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // stdin stays open and silent: the client sits waiting for the answer.
    let _stdin = child.stdin.take();
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = String::new();
    while !seen.contains("input required") {
        let line = tokio::time::timeout(Duration::from_secs(60), stderr.next_line())
            .await
            .expect("the task asked for input")
            .expect("stderr")
            .expect("a progress line");
        seen.push_str(&line);
        seen.push('\n');
    }
    let pid = Pid::from_raw(i32::try_from(child.id().expect("pid")).expect("a pid fits an i32"));
    kill(pid, Signal::SIGINT).expect("SIGINT");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exited on Ctrl-C")
        .expect("status");
    let mut rest = String::new();
    while let Ok(Some(line)) = stderr.next_line().await {
        rest.push_str(&line);
        rest.push('\n');
    }
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    assert!(
        rest.contains("detached") && rest.contains("agentgate task wait"),
        "{rest}"
    );

    let record = &task_records(&world.state())[0];
    let id = record["task_id"].as_str().expect("id").to_owned();
    let wait = world
        .run(&["task", "wait", &id, "--input", "priority=MEDIUM"], "")
        .await;
    wait.expect_code(0);
    assert!(wait.stdout.contains("Created ticket NWR-"), "{wait:#?}");
    assert_eq!(world.sim.tickets()[0].priority, "MEDIUM");
}

/// The ticket plugin's call, whose action review waits for an approval.
fn ticket_call(url: &str) -> Vec<String> {
    [
        "call",
        "--url",
        url,
        "QBusinessQueryTool",
        "--arg",
        &format!("query={TICKET}"),
        "--arg",
        &format!("plugin_id={TICKET_PLUGIN_ID}"),
    ]
    .map(str::to_owned)
    .to_vec()
}

fn assert_nothing_approved(world: &World, run: &Run) {
    assert_ne!(run.code, Some(0), "{run:#?}");
    assert!(
        run.stderr.contains("was not answered") && run.stderr.contains("--yes"),
        "says why and how to answer: {run:#?}"
    );
    assert!(
        run.stderr.contains("agentgate task wait"),
        "says how to resume: {run:#?}"
    );
    assert!(
        world.sim.tickets().is_empty(),
        "no ticket was created: {:?}",
        world.sim.tickets()
    );
}

#[tokio::test]
async fn the_end_of_stdin_never_approves_an_action() {
    let world = World::new().await;
    let (_server, url) = world.serve_http().await;
    let args = ticket_call(&url);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    // stdin empty at once (`</dev/null`, cron, CI).
    let run = world.run(&args, "").await;
    assert_nothing_approved(&world, &run);

    // stdin closed altogether.
    let mut closed = Command::new("sh");
    world.env(&mut closed);
    closed
        .arg("-c")
        .arg("exec 0<&- \"$0\" \"$@\"")
        .arg(BIN)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), closed.output())
        .await
        .expect("finished")
        .expect("output");
    let run = Run::from(out);
    assert_nothing_approved(&world, &run);

    // `task wait` in a script: the task still waits for its answer.
    let id = world
        .run(&["task", "list", "--json"], "")
        .await
        .stdout
        .clone();
    let records: Value = serde_json::from_str(&id).expect("JSON");
    let id = records[0]["task_id"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let wait = world.run(&["task", "wait", &id], "").await;
    assert_nothing_approved(&world, &wait);

    // --yes is the explicit approval off a terminal.
    let yes = world.run(&["task", "wait", &id, "--yes"], "").await;
    yes.expect_code(0);
    assert_eq!(world.sim.tickets().len(), 1, "{yes:#?}");
}

/// The client on a terminal (a pseudo-terminal from util-linux's `script`),
/// typing `keys`.
async fn on_a_terminal(world: &World, args: &[String], keys: &str) -> Run {
    let line = std::iter::once(BIN.to_owned())
        .chain(args.iter().map(|a| format!("'{a}'")))
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = Command::new("script");
    world.env(&mut cmd);
    let mut child = cmd
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("script(1) from util-linux");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(keys.as_bytes()).await.expect("type");
    drop(pipe);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("finished")
        .expect("output");
    Run::from(out)
}

#[tokio::test]
async fn on_a_terminal_enter_alone_never_approves_without_the_final_yes() {
    let world = World::new().await;
    let (_server, url) = world.serve_http().await;
    let args = ticket_call(&url);
    // The ticket form has four fields (summary, priority, description,
    // notify_me), each with a default or optional: four Enters, then Enter
    // at "Send it? [y/N]".
    let run = on_a_terminal(&world, &args, "\n\n\n\n\n").await;
    assert!(run.stdout.contains("Send it? [y/N]"), "{run:#?}");
    assert!(run.stdout.contains("Declined"), "{run:#?}");
    assert!(world.sim.tickets().is_empty(), "declined: {run:#?}");
    // The same, answered `y`.
    let run = on_a_terminal(&world, &args, "\n\n\n\ny\n").await;
    run.expect_code(0);
    assert_eq!(world.sim.tickets().len(), 1, "{run:#?}");
}

#[tokio::test]
async fn the_server_log_at_the_default_level_is_agentgate_s_own_plain_text() {
    let world = World::new().await;
    // No RUST_LOG: the default filter is what is under test. stderr is a
    // pipe, as when it goes to a file or journald.
    let server = GateBuilder::agentgate(BIN, world.dir.path())
        .upstream(&world.q)
        .env_remove("RUST_LOG")
        .start()
        .await;
    let run = world
        .run(
            &[
                "call",
                "--url",
                &server.url,
                "QBusinessQueryTool",
                "--arg",
                "query=vacation days",
            ],
            "",
        )
        .await;
    run.expect_code(0);
    // The end line is written before the answer goes out; the test's copy
    // of stderr may trail it by a read.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !server.stderr().contains("task ended") && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let log = server.stderr();
    assert!(
        log.contains("task created"),
        "agentgate's own INFO lines are kept: {log}"
    );
    let ended: Vec<&str> = log.lines().filter(|l| l.contains("task ended")).collect();
    assert_eq!(ended.len(), 1, "one line per task end: {log}");
    assert!(
        ended[0].contains("outcome=completed") && ended[0].contains("duration_ms="),
        "{}",
        ended[0]
    );
    let rmcp_info: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("rmcp") && (l.contains("INFO") || l.contains("DEBUG")))
        .collect();
    assert!(
        rmcp_info.is_empty(),
        "rmcp logs at warn by default: {rmcp_info:#?}"
    );
    assert!(
        !log.contains("\x1b["),
        "no colour escapes when stderr is not a terminal: {log:?}"
    );
}

/// Runs the client at the default log level (no RUST_LOG), as a person
/// would, with `env` added.
async fn run_as_a_person(world: &World, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = world.client(args);
    cmd.env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the client did not finish in 60 s")
        .expect("client output");
    Run::from(out)
}

/// What a person reads has none of rmcp's or Rust's internals in it.
fn assert_no_internals(run: &Run) {
    for internal in [
        "WorkerTransport",
        "reqwest::",
        " { ",
        "Error {",
        "ErrorData",
        "backtrace",
        "ERROR",
    ] {
        assert!(
            !run.stderr.contains(internal),
            "`{internal}` reached the user: {run:#?}"
        );
    }
}

#[tokio::test]
async fn connection_failures_say_what_is_wrong_and_what_to_do() {
    let world = World::new().await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };

    let url = format!("http://127.0.0.1:{closed}/mcp");
    let run = run_as_a_person(&world, &["call", "--url", &url, "t"], &[]).await;
    run.expect_code(2);
    assert_eq!(
        run.stderr,
        format!(
            "error: cannot connect to {url}: connection refused — is `agentgate serve` running?\n"
        )
    );

    let bare = format!("127.0.0.1:{closed}/mcp");
    let run = run_as_a_person(&world, &["call", "--url", &bare, "t"], &[]).await;
    run.expect_code(2);
    assert_eq!(
        run.stderr,
        format!(
            "error: cannot connect to {bare}: the URL has no scheme — add http:// or https://, \
             e.g. http://{bare}\n"
        )
    );

    let (server, mcp) = world.serve_http().await;
    let root = mcp.trim_end_matches("/mcp").to_owned() + "/";
    let run = run_as_a_person(&world, &["call", "--url", &root, "t"], &[]).await;
    run.expect_code(2);
    assert_eq!(
        run.stderr,
        format!(
            "error: cannot connect to {root}: the server answered HTTP 404 — the MCP endpoint is \
             usually …/mcp, e.g. {mcp}\n"
        )
    );

    let run = run_as_a_person(&world, &["task", "wait", "nope", "--url", &mcp], &[]).await;
    run.expect_code(2);
    assert!(
        run.stderr.starts_with(&format!(
            "error: the server at {mcp} does not know task nope (it may have expired after its \
             ttl, or belong to another server): "
        )) && run.stderr.lines().count() == 1,
        "{run:#?}"
    );
    assert!(
        !run.stderr.contains("resume with"),
        "nothing to resume: {run:#?}"
    );
    assert_no_internals(&run);
    drop(server);

    for run in [
        run_as_a_person(&world, &["call", "--url", &url, "t"], &[]).await,
        run_as_a_person(&world, &["call", "--url", &bare, "t"], &[]).await,
    ] {
        assert_no_internals(&run);
    }
}

#[tokio::test]
async fn a_missing_or_refused_token_says_to_set_agentgate_token_and_never_prints_it() {
    let world = World::new().await;
    let server = GateBuilder::agentgate(BIN, world.dir.path())
        .upstream(&world.q)
        .config(
            "[auth]\nmode = \"tokens\"\n[[auth.tokens]]\nprincipal = \"alice\"\n\
             token_env = \"ALICE_TOKEN\"\n",
        )
        .env("ALICE_TOKEN", "agt_the-right-token-for-alice")
        .start()
        .await;
    let url = server.url.clone();

    let run = run_as_a_person(&world, &["call", "--url", &url, "t"], &[]).await;
    run.expect_code(2);
    assert_eq!(
        run.stderr,
        format!(
            "error: cannot connect to {url}: the server requires authentication (401): set \
             AGENTGATE_TOKEN to a token the server accepts\n"
        )
    );

    let wrong = "agt_a-wrong-token-that-must-not-be-shown";
    let run = run_as_a_person(
        &world,
        &["call", "--url", &url, "t"],
        &[("AGENTGATE_TOKEN", wrong)],
    )
    .await;
    run.expect_code(2);
    assert_eq!(
        run.stderr,
        format!(
            "error: cannot connect to {url}: the server refused the token in AGENTGATE_TOKEN \
             (401): set AGENTGATE_TOKEN to a token the server accepts\n"
        )
    );
    assert!(!run.stderr.contains(wrong) && !run.stdout.contains(wrong));
    assert_no_internals(&run);

    // The right token gets through to the tool.
    let run = run_as_a_person(
        &world,
        &["call", "--url", &url, "no_such_tool"],
        &[("AGENTGATE_TOKEN", "agt_the-right-token-for-alice")],
    )
    .await;
    run.expect_code(2);
    assert!(
        run.stderr.contains("unknown tool `no_such_tool`"),
        "{run:#?}"
    );
}

#[tokio::test]
async fn a_failure_while_following_says_its_cause_before_how_to_resume() {
    let world = World::new().await;
    let (_server, url) = world.serve_http().await;
    let args = ticket_call(&url);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_as_a_person(&world, &args, &[]).await;
    run.expect_code(2);
    let error = run
        .stderr
        .lines()
        .skip_while(|line| !line.starts_with("error: "))
        .collect::<Vec<_>>();
    assert!(
        error
            .first()
            .is_some_and(|l| l.contains("was not answered")),
        "the cause comes first: {run:#?}"
    );
    let id = task_records(&world.state())[0]["task_id"]
        .as_str()
        .expect("a task id")
        .to_owned();
    assert_eq!(
        error.last().copied(),
        Some(
            format!("task {id} is still on the server; resume with: agentgate task wait {id}")
                .as_str()
        ),
        "the resume hint comes last: {run:#?}"
    );
    assert_no_internals(&run);
}

#[tokio::test]
async fn a_server_that_stops_mid_task_is_reported_as_such_with_the_resume_hint() {
    let world = World::new().await;
    // A slow tool: the emulators' plain MCP server's, behind the gateway.
    let server = GateBuilder::agentgate(BIN, world.dir.path())
        .config(&format!(
            "[[mcp.servers]]\nname = \"slow\"\ncommand = {BIN:?}\nargs = [\"sim\", \"--mcp-stdio\"]\n"
        ))
        .start()
        .await;
    let mut child = world
        .client(&[
            "call",
            "--url",
            &server.url,
            "countdown",
            "--arg",
            "seconds=600",
        ])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    // The task is running and being followed once a progress line shows.
    let first = tokio::time::timeout(Duration::from_secs(60), stderr.next_line())
        .await
        .expect("a progress line")
        .expect("stderr")
        .expect("a line");
    assert!(first.contains("working"), "{first}");
    let id = first
        .strip_prefix("task ")
        .and_then(|rest| rest.split(':').next())
        .expect("`task ID: …`")
        .to_owned();
    server.kill_and_wait().await;
    let mut rest = Vec::new();
    while let Some(line) = tokio::time::timeout(Duration::from_secs(60), stderr.next_line())
        .await
        .expect("the client noticed")
        .expect("stderr")
    {
        rest.push(line);
    }
    let status = child.wait().await.expect("status");
    assert_eq!(status.code(), Some(2), "{rest:#?}");
    let error: Vec<&str> = rest
        .iter()
        .map(String::as_str)
        .skip_while(|line| !line.starts_with("error: "))
        .collect();
    let url = server_url_of(&world);
    assert_eq!(
        error,
        [
            format!(
                "error: lost the connection to {url}: connection refused — is `agentgate serve` \
                 running?"
            )
            .as_str(),
            format!("task {id} is still on the server; resume with: agentgate task wait {id}")
                .as_str(),
        ],
        "{rest:#?}"
    );
}

/// The URL the local task list recorded for the one task of `world`.
fn server_url_of(world: &World) -> String {
    task_records(&world.state())[0]["server"]["http"]["url"]
        .as_str()
        .expect("an HTTP server")
        .to_owned()
}
