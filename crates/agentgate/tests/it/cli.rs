//! The `agentgate` binary as a user meets it: help, errors, and a real MCP
//! client over stdio and HTTP.

use std::process::{Command, Stdio};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::ClientLifecycleMode;
use rmcp::service::ClientServiceExt as _;
use rmcp::transport::TokioChildProcess;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run agentgate")
}

/// The settings of the two tools with an upstream interface: made up, and
/// never used (nothing is called).
const CONFIGURED: [(&str, &str); 3] = [
    ("AWS_REGION", "us-east-1"),
    ("QBUSINESS_APPLICATION_ID", "app-0123"),
    ("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_not_a_real_token"),
];

/// [`run`] with the settings in [`CONFIGURED`] as a user sets them.
fn run_configured(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .envs(CONFIGURED)
        .output()
        .expect("run agentgate")
}

/// [`run`] with none of them, and a config file holding `toml`.
fn run_unconfigured(dir: &std::path::Path, toml: &str, args: &[&str]) -> std::process::Output {
    let config = dir.join("agentgate.toml");
    std::fs::write(&config, toml).expect("write the config");
    let mut command = Command::new(BIN);
    command.arg("--config").arg(&config).args(args);
    for (name, _) in CONFIGURED {
        command.env_remove(name);
    }
    command.output().expect("run agentgate")
}

#[test]
fn help_describes_every_serve_option() {
    let out = run(&["serve", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--stdio",
        "--listen",
        "--store",
        "--config",
        "--log-format",
        "--allowed-origin",
    ] {
        assert!(help.contains(flag), "serve --help lacks {flag}:\n{help}");
    }
}

#[tokio::test]
async fn migrate_creates_the_schema_and_exits() {
    use sqlx::Connection as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let out = run(&["migrate", "--store", &url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("migrated {url}\n")
    );
    let mut conn = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("open the migrated file");
    let tasks: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks")
        .fetch_one(&mut conn)
        .await
        .expect("the tasks table exists");
    assert_eq!(tasks, 0);
    let again = run(&["migrate", "--store", &url]);
    assert!(again.status.success(), "migrating twice is a no-op");
    let status = run(&["migrate", "--status", "--store", &url]);
    assert!(status.status.success(), "{status:?}");
    let listed = String::from_utf8_lossy(&status.stdout);
    let lines: Vec<&str> = listed.lines().collect();
    assert!(lines.len() > 1, "{listed}");
    assert!(
        lines[..lines.len() - 1]
            .iter()
            .all(|l| l.starts_with("applied")),
        "{listed}"
    );
    assert!(
        listed.ends_with(&format!("{url} is up to date\n")),
        "{listed}"
    );

    let bad = run(&["migrate", "--store", "mysql://db/x"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("sqlite://PATH"));
}

#[test]
fn migrate_status_lists_pending_migrations_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("new.db");
    let url = format!("sqlite://{}", path.display());
    let out = run(&["migrate", "--status", "--store", &url]);
    assert!(!out.status.success(), "pending migrations fail the status");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.starts_with("pending     1  tasks\n"), "{listed}");
    assert!(!listed.contains("applied"), "{listed}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pending migration(s): run `agentgate migrate`"),
        "{err}"
    );
    assert!(!path.exists(), "the status created the store");
}

#[test]
fn serve_without_a_transport_says_how_to_choose_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite://{}", dir.path().join("t.db").display());
    let out = run(&["serve", "--store", &store]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--stdio") && err.contains("--listen"), "{err}");
}

#[test]
fn unknown_store_scheme_is_refused_with_the_fix() {
    let out = run(&["serve", "--stdio", "--store", "mysql://db/x"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sqlite://PATH"), "{err}");
}

/// Issue 33: a mistyped SQLite path is refused, naming the directory; it
/// used to create the directories and an empty store, and the real store's
/// tasks seemed to have vanished.
#[test]
fn a_store_path_in_a_missing_directory_is_refused_not_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let typo = dir.path().join("agentgat/tasks.db");
    let store = format!("sqlite://{}", typo.display());
    for args in [
        vec!["serve", "--stdio", "--store", store.as_str()],
        vec!["migrate", "--store", store.as_str()],
    ] {
        let out = run(&args);
        assert!(!out.status.success(), "{args:?} started");
        let err = String::from_utf8_lossy(&out.stderr);
        let missing = dir.path().join("agentgat");
        assert!(
            err.contains(&format!("{} does not exist", missing.display()))
                && err.contains("mkdir -p"),
            "{err}"
        );
        assert!(!missing.exists(), "nothing was created");
    }
}

#[test]
fn config_file_typos_name_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("agentgate.toml");
    std::fs::write(&path, "[server]\nlisen = \"127.0.0.1:1\"\n").expect("write config");
    let out = run(&["--config", path.to_str().expect("utf8"), "serve", "--stdio"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lisen"), "{err}");
}

#[tokio::test]
async fn stdio_server_discovers_and_lists_task_status_and_logs_to_stderr_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("nested")).expect("mkdir");
    let db = dir.path().join("nested/tasks.db");
    let mut command = tokio::process::Command::new(BIN);
    command
        .args(["serve", "--stdio", "--store"])
        .arg(format!("sqlite://{}", db.display()));
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let config = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("cli-test", "0"),
    );
    let client = config
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover over stdio");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "task_status"));
    client.cancel().await.expect("close");
    assert!(db.exists(), "the store file is created on first use");
    let mut log = String::new();
    if let Some(mut stderr) = stderr {
        use tokio::io::AsyncReadExt as _;
        let _ = tokio::time::timeout(Duration::from_secs(5), stderr.read_to_string(&mut log)).await;
    }
    assert!(
        log.contains("task store ready"),
        "startup is logged on stderr: {log}"
    );
    assert!(
        log.contains(&db.display().to_string()),
        "the store path is logged: {log}"
    );
}

#[test]
fn json_log_format_writes_one_json_object_per_line_on_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite://{}", dir.path().join("t.db").display());
    // stdin is closed at once: the stdio server starts, logs, and ends.
    let out = Command::new(BIN)
        .args([
            "--log-format",
            "json",
            "serve",
            "--stdio",
            "--store",
            &store,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run agentgate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "expected log lines on stderr");
    for line in &lines {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(parsed.get("level").is_some(), "{line}");
    }
    assert!(
        out.stdout.is_empty(),
        "stdout belongs to MCP: {:?}",
        out.stdout
    );
}

#[tokio::test]
async fn http_server_answers_liveness_and_readiness() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = agentgate_testkit::GateBuilder::agentgate(BIN, dir.path())
        .start()
        .await;
    let base = server.url.trim_end_matches("/mcp").to_owned();
    for (path, body) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let response = reqwest::get(format!("{base}{path}")).await.expect(path);
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.text().await.expect("body").trim(), body);
    }
}

#[test]
fn stdio_answers_every_unreadable_message_and_a_last_message_without_newline() {
    use std::io::{Read as _, Write as _};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite://{}", dir.path().join("t.db").display());
    let mut child = Command::new(BIN)
        .args(["serve", "--stdio", "--store", &store])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    // A line over the 4 MiB limit, invalid UTF-8, 100 000-deep nesting, not
    // JSON, then an initialize request as the last bytes, with no newline.
    let mut input = vec![b'x'; 5 * 1024 * 1024];
    input.push(b'\n');
    input.extend_from_slice(b"\xc3\x28 \xff\n");
    input.extend(std::iter::repeat_n(b'[', 100_000));
    input.push(b'\n');
    input.extend_from_slice(b"{not json\n");
    input.extend_from_slice(
        br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
    );
    stdin.write_all(&input).expect("write");
    drop(stdin);
    let status = child.wait().expect("wait");
    let out = reader.join().expect("reader");
    assert!(status.success(), "the server ends cleanly at end of input");
    let replies: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let errors: Vec<(i64, bool)> = replies
        .iter()
        .filter(|r| r.get("error").is_some())
        .map(|r| (r["error"]["code"].as_i64().unwrap_or(0), r["id"].is_null()))
        .collect();
    assert_eq!(
        errors,
        [
            (-32600, true),
            (-32700, true),
            (-32700, true),
            (-32700, true)
        ],
        "one error per unreadable message, each with id null: {out}"
    );
    let init = replies
        .iter()
        .find(|r| r["id"] == 1)
        .unwrap_or_else(|| panic!("the last message was answered: {out}"));
    assert_eq!(init["result"]["serverInfo"]["name"], "agentgate");
}

#[test]
fn a_config_error_prints_its_cause_and_no_backtrace_whatever_rust_backtrace_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("agentgate.toml");
    std::fs::write(&path, "[server]\nlisen = \"127.0.0.1:1\"\n").expect("write config");
    let out = Command::new(BIN)
        .args(["--config", path.to_str().expect("utf8"), "serve", "--stdio"])
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run agentgate");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: parsing config file") && err.contains("lisen"),
        "{err}"
    );
    assert!(
        !err.to_lowercase().contains("stack backtrace"),
        "a user error is not a bug to trace: {err}"
    );
    assert!(
        !err.contains("Caused by"),
        "one line, cause chain included: {err}"
    );
}

#[test]
fn tools_lists_what_serve_would_serve_and_shows_one_definition() {
    let out = run_configured(&["tools"]);
    assert!(out.status.success(), "{out:?}");
    let list = String::from_utf8_lossy(&out.stdout);
    for line in [
        "QBusinessQueryTool                Ask Amazon Q Business",
        "assign_copilot_to_issue           Assign Copilot to issue",
        "task_status ",
    ] {
        assert!(list.contains(line), "{line:?} in:\n{list}");
    }

    let out = run_configured(&["tools", "QBusinessQueryTool"]);
    assert!(out.status.success(), "{out:?}");
    let tool: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one tool as JSON");
    assert_eq!(tool["name"], "QBusinessQueryTool");
    assert_eq!(
        tool["inputSchema"]["required"],
        serde_json::json!(["query"])
    );

    let out = run_configured(&["tools", "--json"]);
    let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON list");
    assert_eq!(
        all.len(),
        list.lines().count(),
        "the list and the JSON agree"
    );

    let out = run_configured(&["tools", "QBusinessQuery"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no tool is named `QBusinessQuery`; the tools are: QBusinessQueryTool,"),
        "{err}"
    );
}

#[test]
fn tools_of_a_backend_not_set_up_or_turned_off_are_not_listed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_unconfigured(dir.path(), "", &["tools"]);
    assert!(out.status.success(), "{out:?}");
    let list = String::from_utf8_lossy(&out.stdout);
    let notes = String::from_utf8_lossy(&out.stderr);
    for hidden in ["QBusinessQueryTool", "assign_copilot_to_issue"] {
        assert!(!list.contains(hidden), "{hidden} listed:\n{list}");
    }
    assert!(list.contains("task_status "), "{list}");
    for note in [
        "qbusiness: not set up, its tools are not listed: AWS_REGION is not set",
        "copilot: not set up, its tools are not listed: GITHUB_PERSONAL_ACCESS_TOKEN is not set",
    ] {
        assert!(notes.contains(note), "{note:?} in:\n{notes}");
    }

    // Every backend takes `enabled`: off whatever its settings.
    let toml = "[copilot]\nenabled = false\n";
    let config = dir.path().join("agentgate.toml");
    std::fs::write(&config, toml).expect("write the config");
    let config = config.to_str().expect("a UTF-8 path");
    let out = run_configured(&["--config", config, "tools"]);
    assert!(out.status.success(), "{out:?}");
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(!list.contains("assign_copilot_to_issue"), "{list}");
    assert!(list.contains("QBusinessQueryTool"), "{list}");
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(
        notes.contains("copilot: off: [copilot] enabled = false"),
        "{notes}"
    );

    let out = run_unconfigured(dir.path(), "[copilot]\nenabled = \"no\"\n", &["tools"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[copilot] enabled: expected true or false, found \"no\""),
        "{err}"
    );
    // A typo in a section that is off is still a typo.
    let out = run_unconfigured(
        dir.path(),
        "[copilot]\nenabled = false\nmax_watch_minute = 5\n",
        &["tools"],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[copilot] max_watch_minute"), "{err}");
}

#[tokio::test]
async fn read_only_serves_no_tool_that_may_change_something() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentgate.toml");
    let config = config.to_str().expect("a UTF-8 path");
    // None of this build's own tools is marked readOnlyHint: Q Business may
    // run plugin actions, Copilot writes to GitHub. Read-only leaves the
    // task tools.
    std::fs::write(config, "[server]\nread_only = true\n").expect("write");
    let out = run_configured(&["--config", config, "tools"]);
    assert!(out.status.success(), "{out:?}");
    let list = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = list
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        ["task_status", "task_answer", "task_cancel"],
        "{list}"
    );
    // Off, they are all there.
    std::fs::write(config, "").expect("write");
    let out = run_configured(&["--config", config, "tools"]);
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(
        list.contains("QBusinessQueryTool") && list.contains("assign_copilot_to_issue"),
        "{list}"
    );
    // `serve --read-only` turns it on over the file.
    let mut command = tokio::process::Command::new(BIN);
    command
        .args([
            "--config",
            config,
            "serve",
            "--stdio",
            "--read-only",
            "--store",
        ])
        .arg(format!("sqlite://{}", dir.path().join("r.db").display()))
        .envs(CONFIGURED);
    let client = agentgate_testkit::TestClient::new(
        ClientCapabilities::default(),
        ProtocolVersion::V_2026_07_28,
    )
    .stdio(command)
    .await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    assert_eq!(names, ["task_status", "task_answer", "task_cancel"]);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_tool_selection_serves_only_what_it_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentgate.toml");
    let config = config.to_str().expect("a UTF-8 path");
    // A backend's name selects all of its tools.
    std::fs::write(config, "[server]\ntools = [\"copilot\"]\n").expect("write");
    let out = run_configured(&["--config", config, "tools"]);
    assert!(out.status.success(), "{out:?}");
    let list = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = list
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        [
            "assign_copilot_to_issue",
            "create_pull_request_with_copilot",
            "request_copilot_changes",
            "task_status",
            "task_answer",
            "task_cancel"
        ]
    );

    std::fs::write(config, "[server]\ntools = [\"QBusinessQuery\"]\n").expect("write");
    let out = run_configured(&["--config", config, "tools"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "the tool selection names `QBusinessQuery`, which is neither a tool nor a backend"
        ) && err.contains("the tools are: QBusinessQueryTool,"),
        "{err}"
    );

    // `--tools` wins over the file; a tool left out is not served at all.
    let mut command = tokio::process::Command::new(BIN);
    command
        .args(["--config", config, "serve", "--stdio", "--tools"])
        .arg("QBusinessQueryTool")
        .arg("--store")
        .arg(format!("sqlite://{}", dir.path().join("t.db").display()))
        .envs(CONFIGURED);
    let client = agentgate_testkit::TestClient::new(
        ClientCapabilities::default(),
        ProtocolVersion::V_2026_07_28,
    )
    .stdio(command)
    .await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    assert_eq!(
        names,
        [
            "QBusinessQueryTool",
            "task_status",
            "task_answer",
            "task_cancel"
        ]
    );
    let refused = client
        .call_tool(agentgate_testkit::call(
            "assign_copilot_to_issue",
            serde_json::json!({"owner": "acme", "repo": "widgets", "issue_number": 1}),
        ))
        .await;
    let text = match refused {
        Err(e) => e.to_string(),
        Ok(result) => format!("{result:?}"),
    };
    assert!(text.contains("assign_copilot_to_issue"), "{text}");
    assert!(
        text.to_lowercase().contains("unknown tool") || text.contains("not found"),
        "{text}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn serve_says_at_start_what_each_backend_can_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = agentgate_testkit::GateBuilder::agentgate(BIN, dir.path())
        .env("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_not_a_real_token")
        .env("GITHUB_API_URL", "https://github.example.com/api/v3")
        .env_remove("AWS_REGION")
        // The default level of `agentgate serve` (the kit's is `warn`).
        .env_remove("RUST_LOG")
        .start()
        .await;
    let expected = [
        "backend not set up, its tools are not listed: AWS_REGION is not set",
        "backend ready: GitHub at https://github.example.com/api/v3",
        "backend not set up, its tools are not listed: no agents",
        "backend not set up, its tools are not listed: no servers: add [[mcp.servers]] to the config",
    ];
    agentgate_testkit::eventually(
        "a start-up line per backend",
        Duration::from_secs(10),
        || {
            let log = server.stderr();
            expected.iter().all(|line| log.contains(line)).then_some(())
        },
    )
    .await;
    assert!(
        !server.stderr().contains("ghp_not_a_real_token"),
        "no token in the log"
    );
}

#[test]
fn the_long_version_says_the_commit_and_the_protocol_versions() {
    let out = run(&["--version"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("agentgate "), "{text}");
    assert!(
        text.contains("(commit ") && !text.contains("(commit )"),
        "{text}"
    );
    assert!(
        text.contains("2025-11-25") && text.contains("2026-07-28"),
        "{text}"
    );
}

#[test]
fn bash_completes_subcommands_and_flags_with_the_printed_script() {
    let out = run(&["completions", "bash"]);
    assert!(out.status.success(), "{out:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("agentgate.bash");
    std::fs::write(&script, &out.stdout).expect("write the script");
    // As bash's programmable completion calls it: the words so far, the
    // index of the word being completed, then (command, word, previous word).
    let complete = |words: &str, cword: usize, word: &str, previous: &str| {
        let program = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _agentgate agentgate {word} {previous}; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let out = Command::new("bash")
            .args(["-c", &program])
            .output()
            .expect("run bash");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(complete("agentgate ch", 1, "ch", "agentgate"), "check");
    let flags = complete("agentgate serve --sto", 2, "--sto", "serve");
    assert!(flags.split(' ').any(|f| f == "--store"), "{flags}");
}

/// `auth list` names who may call without showing a token; `auth revoke`
/// removes one principal's entries and keeps the rest of the file as
/// written; after a restart the revoked token is refused and the others
/// still work.
#[tokio::test]
async fn auth_revoke_removes_one_principal_and_keeps_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = "# the team's gateway\n[auth]\nmode = \"tokens\"\n\n\
                [[auth.tokens]]\nprincipal = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n\n\
                [[auth.tokens]]\nprincipal = \"ci\"\ntoken_env = \"CI_TOKEN\"   # the CI system\n";
    std::fs::write(dir.path().join("agentgate.toml"), toml).expect("write");
    let config = dir.path().join("agentgate.toml");
    let status = |url: String, token: &'static str| async move {
        reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .expect("POST /mcp")
            .status()
    };
    let gate = agentgate_testkit::GateBuilder::agentgate(BIN, dir.path())
        .config_file(&config)
        .env("ALICE_TOKEN", "alice-secret-token-0123456789")
        .env("CI_TOKEN", "ci-secret-token-0123456789")
        .start()
        .await;
    assert_ne!(
        status(gate.url.clone(), "alice-secret-token-0123456789").await,
        401
    );
    drop(gate);

    let listed = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .args(["auth", "list"])
        .env("ALICE_TOKEN", "alice-secret-token-0123456789")
        .output()
        .expect("auth list");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("token:alice") && listed.contains("$ALICE_TOKEN (set)"),
        "{listed}"
    );
    assert!(listed.contains("$CI_TOKEN (not set)"), "{listed}");
    assert!(!listed.contains("secret-token"), "no token shown: {listed}");

    let unknown = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .args(["auth", "revoke", "--principal", "bob"])
        .output()
        .expect("auth revoke bob");
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&unknown.stderr)
            .contains("no token of \"bob\"; its principals are: alice, ci"),
        "{unknown:?}"
    );
    let revoked = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .args(["auth", "revoke", "--principal", "alice"])
        .output()
        .expect("auth revoke alice");
    assert!(revoked.status.success(), "{revoked:?}");
    assert!(
        String::from_utf8_lossy(&revoked.stdout).contains("Restart `agentgate serve`"),
        "{revoked:?}"
    );
    let edited = std::fs::read_to_string(&config).expect("read");
    assert_eq!(
        edited,
        "# the team's gateway\n[auth]\nmode = \"tokens\"\n\n\
         [[auth.tokens]]\nprincipal = \"ci\"\ntoken_env = \"CI_TOKEN\"   # the CI system\n"
    );

    let gate = agentgate_testkit::GateBuilder::agentgate(BIN, dir.path())
        .config_file(&config)
        .env("ALICE_TOKEN", "alice-secret-token-0123456789")
        .env("CI_TOKEN", "ci-secret-token-0123456789")
        .start()
        .await;
    assert_eq!(
        status(gate.url.clone(), "alice-secret-token-0123456789").await,
        401
    );
    assert_ne!(
        status(gate.url.clone(), "ci-secret-token-0123456789").await,
        401
    );
}
