//! The Copilot tools end to end: the real `agentgate` binary, the GitHub
//! emulator (GraphQL + REST, a simulated Copilot agent) in this test process,
//! and rmcp's client over stdio and HTTP.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentgate_sim::github::{COPILOT_LOGIN, GithubConfig, GithubSim, Scenario};
use agentgate_testkit::*;
use rmcp::model::{
    CallToolResult, CancelTaskParams, ClientCapabilities, ProtocolVersion, TaskPayload,
};
use serde_json::{Map, Value, json};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");
const NOT_AVAILABLE: &str = "copilot isn't available as an assignee for this issue. Please inform the user to visit https://docs.github.com/en/copilot/concepts/agents/cloud-agent/about-cloud-agent for more information.";

/// The emulator on a free port, ten times faster than real time, with a log
/// of the watcher's batched queries (those that read `rateLimit`); its
/// answer hold is `gh.emulator.hold`.
struct Gh {
    emulator: Emulator<GithubSim>,
    sim: GithubSim,
    watch_queries: Arc<Mutex<Vec<Instant>>>,
}

async fn start_github() -> Gh {
    let watch_queries = Arc::new(Mutex::new(Vec::new()));
    let log = watch_queries.clone();
    let emulator = emulators::github(GithubConfig {
        time_scale: 0.1,
        ..GithubConfig::default()
    })
    .layer(move |router| {
        router.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let log = log.clone();
                async move {
                    let (parts, body) = request.into_parts();
                    let bytes = axum::body::to_bytes(body, 4 << 20)
                        .await
                        .unwrap_or_default();
                    if parts.uri.path().ends_with("graphql")
                        && String::from_utf8_lossy(&bytes).contains("rateLimit{")
                    {
                        log.lock().expect("lock").push(Instant::now());
                    }
                    next.run(axum::extract::Request::from_parts(parts, bytes.into()))
                        .await
                }
            },
        ))
    })
    .start()
    .await;
    Gh {
        sim: emulator.sim.clone(),
        emulator,
        watch_queries,
    }
}

/// `agentgate serve` in `dir`, pointed at the emulator; `set` overrides.
fn gateway(gh: &Gh, dir: &Path, set: &[(&str, &str)]) -> GateBuilder {
    GateBuilder::agentgate(BIN, dir)
        .upstream(&gh.emulator)
        .envs(set.iter().copied())
}

/// `agentgate serve --stdio`, for [`TestClient::stdio`].
fn over_stdio(gh: &Gh, dir: &Path, set: &[(&str, &str)]) -> Command {
    gateway(gh, dir, set).no_listen().arg("--stdio").command()
}

async fn over_http(gh: &Gh, dir: &Path) -> (Client, Gate) {
    let server = gateway(gh, dir, &[]).start().await;
    (TestClient::tasks().http(&server.url).await, server)
}

/// [`over_http`] with the shortest lease the binary accepts, for the tests
/// that kill it: the next instance takes the dead one's tasks over when its
/// lease runs out, and the default lease would be half a minute of waiting.
async fn over_http_to_kill(gh: &Gh, dir: &Path) -> (Client, Gate) {
    let server = gateway(gh, dir, &[]).config(SHORTEST_LEASE).start().await;
    (TestClient::tasks().http(&server.url).await, server)
}

const SHORTEST_LEASE: &str = "[engine]\nlease_seconds = 3\n";

fn legacy() -> TestClient {
    TestClient::new(ClientCapabilities::default(), ProtocolVersion::V_2025_11_25)
}

fn assign(owner_repo: &str, number: u64) -> Value {
    let (owner, repo) = owner_repo.split_once('/').expect("owner/repo");
    json!({"owner": owner, "repo": repo, "issue_number": number})
}

/// Follows a task to its end, collecting every status message seen.
async fn follow(client: &Client, id: &str) -> (Map<String, Value>, Vec<String>) {
    let mut messages: Vec<String> = Vec::new();
    let got = watch_task(client, id, Duration::from_secs(90), |got| {
        if let Some(m) = &got.task.task.status_message
            && messages.last() != Some(m)
        {
            messages.push(m.clone());
        }
        match &got.task.payload {
            TaskPayload::Completed { .. } => true,
            TaskPayload::Working | TaskPayload::InputRequired { .. } => false,
            other => panic!("task {id} ended {other:?}; statuses {messages:?}"),
        }
    })
    .await;
    let TaskPayload::Completed { result } = got.task.payload else {
        unreachable!("watched until completed")
    };
    (result, messages)
}

/// Follows a task until it is cancelled; its last status message.
async fn cancelled_status(client: &Client, id: &str) -> String {
    watch_task(client, id, Duration::from_secs(60), |got| {
        matches!(got.task.payload, TaskPayload::Cancelled)
    })
    .await
    .task
    .task
    .status_message
    .unwrap_or_default()
}

fn structured(result: &Map<String, Value>) -> &Value {
    &result["structuredContent"]
}

/// github-mcp-server's `outputSchema` for `assign_copilot_to_issue`
/// (`contracts/github/mcp-server/`), with its `additionalProperties: false`
/// lifted: upstream's fields must all be there with upstream's types; the
/// extra ones are ours and declared in our own output schema.
fn upstream_output_schema(strict: bool) -> jsonschema::Validator {
    fn lift(schema: &mut Value) {
        if let Value::Object(map) = schema {
            map.remove("additionalProperties");
            map.values_mut().for_each(lift);
        }
    }
    let mut schema = upstream_output_schema_json();
    if !strict {
        lift(&mut schema);
    }
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

/// The vendored schema, as published.
fn upstream_output_schema_json() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../contracts/github/mcp-server/assign_copilot_to_issue.output-schema.json"
    );
    let text = std::fs::read_to_string(path).expect("the vendored output schema");
    serde_json::from_str(&text).expect("JSON")
}

/// `structured` has upstream's typed fields (extra fields allowed).
fn assert_upstream_shape(structured: &Value) {
    let errors: Vec<String> = upstream_output_schema(false)
        .iter_errors(structured)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:?} in {structured}");
}

#[tokio::test]
async fn assign_follows_copilot_to_its_finished_pull_request_and_keeps_assignees() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;

    let mut args = assign("acme/widgets", 1);
    args["base_ref"] = json!("release-2");
    args["custom_instructions"] = json!("Keep the flag hidden from --help.");
    args["custom_agent"] = json!("docs-writer");
    args["model"] = json!("claude-sonnet-4.6");
    args["issue_number"] = json!("1");
    let task = start_task(&client, "assign_copilot_to_issue", args).await;
    let second = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 2),
    )
    .await;

    let (result, statuses) = follow(&client, &task.task.task_id).await;
    assert_ne!(result["isError"], json!(true), "{result:?}");
    let content = structured(&result);
    assert_eq!(content["outcome"], json!("finished"), "{content}");
    let pr = &content["pull_request"];
    let number = pr["number"].as_u64().expect("PR number");
    assert_eq!(pr["draft"], json!(false));
    assert_eq!(pr["state"], json!("OPEN"));
    assert!(
        pr["url"]
            .as_str()
            .is_some_and(|u| u.ends_with(&format!("/pull/{number}")))
    );
    assert!(
        first_text(&result).contains("ready for review"),
        "{result:?}"
    );
    assert!(
        statuses
            .iter()
            .any(|s| s.contains(&format!("opened pull request #{number} (draft)"))),
        "the status follows the agent: {statuses:?}"
    );
    let pull = gh.sim.pull_request("acme/widgets", number).expect("the PR");
    assert_eq!(pull.base_ref, "release-2");

    let recorded = gh.sim.stats().agent_assignments;
    let ours = recorded
        .iter()
        .find(|a| a.issue == 1)
        .expect("assignment recorded");
    assert_eq!(ours.base_ref.as_deref(), Some("release-2"));
    assert_eq!(
        ours.custom_instructions.as_deref(),
        Some("Keep the flag hidden from --help.")
    );
    assert_eq!(ours.custom_agent.as_deref(), Some("docs-writer"));
    assert_eq!(ours.model.as_deref(), Some("claude-sonnet-4.6"));
    assert_eq!(gh.sim.stats().assignments_for("acme/widgets", 1), 1);

    assert_upstream_shape(content);
    let (result, _) = follow(&client, &second.task.task_id).await;
    assert_eq!(structured(&result)["outcome"], json!("finished"));
    assert_upstream_shape(structured(&result));
    let assignees = gh.sim.issue_assignees("acme/widgets", 2);
    for login in ["octocat", "hubot", COPILOT_LOGIN] {
        assert!(
            assignees.iter().any(|a| a == login),
            "{login} in {assignees:?}"
        );
    }
    client.cancel().await.expect("close");
}

/// `tools/list` declares an output schema that keeps every field of
/// upstream's with upstream's type and upstream's required list; a result
/// that is only upstream's fields passes the strict upstream schema.
#[tokio::test]
async fn the_declared_output_schema_keeps_upstreams_typed_fields() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let tool = tools
        .iter()
        .find(|t| t.name == "assign_copilot_to_issue")
        .expect("the tool");
    let ours = Value::Object(
        tool.output_schema
            .as_ref()
            .expect("an output schema")
            .as_ref()
            .clone(),
    );
    let upstream = upstream_output_schema_json();
    assert_eq!(ours["required"], upstream["required"]);
    for (name, field) in upstream["properties"].as_object().expect("properties") {
        assert_eq!(ours["properties"][name]["type"], field["type"], "{name}");
    }
    for (name, field) in upstream["properties"]["pull_request"]["properties"]
        .as_object()
        .expect("pull_request properties")
    {
        assert_eq!(
            ours["properties"]["pull_request"]["properties"][name]["type"], field["type"],
            "pull_request.{name}"
        );
    }
    assert_eq!(
        ours["properties"]["pull_request"]["required"],
        upstream["properties"]["pull_request"]["required"]
    );
    // The strict schema is live: upstream's fields alone pass, an extra fails.
    let only_upstream = json!({"issue_number": 1, "issue_url": "u", "message": "m",
        "owner": "o", "repo": "r", "pull_request": {"number": 2, "state": "OPEN", "title": "t", "url": "u"}});
    assert!(upstream_output_schema(true).is_valid(&only_upstream));
    let mut extra = only_upstream.clone();
    extra["outcome"] = json!("finished");
    assert!(!upstream_output_schema(true).is_valid(&extra));
    assert!(upstream_output_schema(false).is_valid(&extra));
    let mut mistyped = only_upstream;
    mistyped["issue_number"] = json!("1");
    assert!(!upstream_output_schema(false).is_valid(&mistyped));
    client.cancel().await.expect("close");
}

/// The assignment lands but its answer is lost, as when the server dies
/// between the mutation and its checkpoint: the repeated step finds Copilot
/// in `assignedActors` (GitHub never lists bots in `assignees`) and does not
/// assign again; the people already assigned stay.
#[tokio::test]
async fn an_assignment_whose_answer_was_lost_is_not_made_twice() {
    let gh = start_github().await;
    gh.sim.faults().lose_next_writes(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    let task = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 2),
    )
    .await;
    let (result, _) = follow(&client, &task.task.task_id).await;
    assert_eq!(
        structured(&result)["outcome"],
        json!("finished"),
        "{result:?}"
    );
    let stats = gh.sim.stats();
    assert_eq!(stats.answers_lost, 1, "the mutation's answer was lost");
    // Sent once: GitHub documents nothing about assigning an assigned Copilot
    // again, so a second mutation could start a second run.
    assert_eq!(
        stats.agent_assignments.len(),
        1,
        "{:?}",
        stats.agent_assignments
    );
    assert_eq!(stats.repeat_assignments, 0);
    assert_eq!(stats.assignments_for("acme/widgets", 2), 1);
    assert_eq!(
        gh.sim.issue_assignees("acme/widgets", 2),
        vec!["octocat", "hubot", COPILOT_LOGIN]
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_assignment_is_made_once_when_agentgate_dies_after_the_mutation() {
    let gh = start_github().await;
    let assigned = gh.emulator.hold.arm("POST", "/graphql", "updateIssue");
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, server) = over_http_to_kill(&gh, dir.path()).await;
    let task = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 2),
    )
    .await;
    let id = task.task.task_id.clone();
    assigned.await.expect("the mutation reached GitHub");
    // Copilot is assigned and its run started; agentgate never hears of it.
    server.kill_and_wait().await;

    let (client, _server) = over_http_to_kill(&gh, dir.path()).await;
    let (result, _) = follow(&client, &id).await;
    assert_eq!(
        structured(&result)["outcome"],
        json!("finished"),
        "{result:?}"
    );
    let stats = gh.sim.stats();
    assert_eq!(
        stats.agent_assignments.len(),
        1,
        "{:?}",
        stats.agent_assignments
    );
    assert_eq!(stats.assignments_for("acme/widgets", 2), 1);
    assert_eq!(
        gh.sim.issue_assignees("acme/widgets", 2),
        vec!["octocat", "hubot", COPILOT_LOGIN]
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn assigning_copilot_again_follows_its_existing_pull_request_without_a_second_run() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    let first = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 1),
    )
    .await;
    let (first, _) = follow(&client, &first.task.task_id).await;
    assert_eq!(
        structured(&first)["outcome"],
        json!("finished"),
        "{first:?}"
    );

    // Copilot holds the issue and has finished its pull request: a second
    // call says so with that pull request instead of waiting for a new one.
    let again = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 1),
    )
    .await;
    let (again, statuses) = follow(&client, &again.task.task_id).await;
    assert_eq!(
        structured(&again)["outcome"],
        json!("finished"),
        "{again:?}"
    );
    assert_eq!(
        structured(&again)["pull_request"],
        structured(&first)["pull_request"]
    );
    assert!(
        statuses.iter().any(|m| m.contains("already assigned")),
        "{statuses:?}"
    );
    let stats = gh.sim.stats();
    assert_eq!(stats.agent_assignments.len(), 1, "no second assignment");
    assert_eq!(stats.assignments_for("acme/widgets", 1), 1);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn copilot_is_found_on_page_two_and_its_absence_is_upstreams_error() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    let task = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/crowded", 1),
    )
    .await;
    let (result, _) = follow(&client, &task.task.task_id).await;
    assert_eq!(
        structured(&result)["outcome"],
        json!("finished"),
        "{result:?}"
    );

    let task = start_task(&client, "assign_copilot_to_issue", assign("acme/legacy", 1)).await;
    let (result, _) = follow(&client, &task.task.task_id).await;
    assert_eq!(result["isError"], json!(true));
    assert_eq!(first_text(&result), NOT_AVAILABLE);
    assert_eq!(gh.sim.stats().assignments_for("acme/legacy", 1), 0);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn failing_agents_end_as_tool_errors_with_the_reason() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    let no_start = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 3),
    )
    .await;
    let failure = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 4),
    )
    .await;

    let (result, _) = follow(&client, &no_start.task.task_id).await;
    assert_eq!(result["isError"], json!(true));
    assert_eq!(structured(&result)["outcome"], json!("failed_to_start"));
    assert!(
        first_text(&result).contains("unable to start working"),
        "{result:?}"
    );

    let (result, _) = follow(&client, &failure.task.task_id).await;
    assert_eq!(result["isError"], json!(true));
    assert_eq!(
        structured(&result)["outcome"],
        json!("finished_with_failure"),
        "{result:?}"
    );
    assert!(structured(&result)["pull_request"]["number"].is_u64());
    client.cancel().await.expect("close");
}

/// Issue 33: a GITHUB_API_URL whose host does not resolve, before GitHub
/// ever answered, is a setting to fix: the task fails at once naming it,
/// instead of being retried as an outage for an hour.
#[tokio::test]
async fn a_github_api_url_that_does_not_resolve_fails_at_once_naming_the_setting() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // `.invalid` never resolves (RFC 2606).
    let set = [("GITHUB_API_URL", "https://github.invalid/api/v3")];
    let server = gateway(&gh, dir.path(), &set).start().await;
    let client = TestClient::tasks().http(&server.url).await;
    let task = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 1),
    )
    .await;
    let got = watch_task(
        &client,
        &task.task.task_id,
        Duration::from_secs(30),
        |got| {
            !matches!(
                got.task.payload,
                TaskPayload::Working | TaskPayload::InputRequired { .. }
            )
        },
    )
    .await;
    // A tool error, as the upstream tool reports its failures.
    let TaskPayload::Completed { result } = got.task.payload else {
        panic!("the task did not end with a result: {:?}", got.task)
    };
    assert_eq!(result["isError"], json!(true), "{result:?}");
    let message = first_text(&result);
    assert!(
        message.contains("cannot reach GitHub at https://github.invalid/api/v3/")
            && message.contains("host name does not resolve")
            && message.contains("check GITHUB_API_URL"),
        "{message}"
    );
    assert_eq!(
        gh.sim.stats().graphql_requests,
        0,
        "nothing reached the emulator"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn clients_without_tasks_get_upstreams_json_progress_and_the_task_id() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let client = legacy().stdio(over_stdio(&gh, dir.path(), &[])).await;
    let seen = client.service().seen.clone();

    let mut params = call("assign_copilot_to_issue", assign("acme/widgets", 1));
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::Number(1),
    ));
    params.meta = Some(meta);
    let result = client.call_tool(params).await.expect("tools/call");
    let body: Value = serde_json::from_str(&text(&result)).expect("upstream's JSON");
    assert_eq!(
        body["message"],
        json!("successfully assigned copilot to issue - pull request created")
    );
    // The same object as structured content, in upstream's typed shape.
    assert_eq!(result.structured_content.as_ref(), Some(&body));
    assert_upstream_shape(&body);
    assert_eq!(body["issue_number"], json!(1));
    assert_eq!(body["owner"], json!("acme"));
    assert_eq!(body["repo"], json!("widgets"));
    assert!(
        body["issue_url"]
            .as_str()
            .is_some_and(|u| u.ends_with("/acme/widgets/issues/1"))
    );
    assert!(body["pull_request"]["number"].is_u64());
    assert_eq!(body["pull_request"]["state"], json!("OPEN"));
    let task_id = body["task_id"].as_str().expect("task id").to_owned();
    // Notifications are handled on their own tasks: wait for them to land.
    let expected = [
        "Copilot assigned to issue, waiting for PR creation...",
        "Waiting for Copilot to create PR... (attempt 1/9)",
    ];
    let progress = eventually(
        "upstream's progress messages",
        Duration::from_secs(10),
        || {
            let progress = seen.lock().expect("lock").progress.clone();
            let has = |m: &str| progress.iter().any(|p| p.message.as_deref() == Some(m));
            expected.iter().all(|m| has(m)).then_some(progress)
        },
    )
    .await;
    let first = progress
        .iter()
        .find(|p| p.message.as_deref() == Some(expected[0]));
    assert_eq!(first.map(|p| p.progress), Some(0.0));
    assert_eq!(first.and_then(|p| p.total), Some(9.0));

    // An agent that never opens its PR: nine attempts, then "pending".
    let number = gh
        .sim
        .add_issue("acme/widgets", "Stuck agent", Scenario::Never);
    let started = Instant::now();
    let result = client
        .call_tool(call(
            "assign_copilot_to_issue",
            assign("acme/widgets", number),
        ))
        .await
        .expect("tools/call");
    assert!(
        started.elapsed() >= Duration::from_secs(8),
        "upstream waits 9 attempts x 1 s"
    );
    let body: Value = serde_json::from_str(&text(&result)).expect("upstream's JSON");
    assert_eq!(
        body["message"],
        json!("successfully assigned copilot to issue - pull request pending")
    );
    assert_eq!(result.structured_content.as_ref(), Some(&body));
    assert_upstream_shape(&body);
    assert!(
        body["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("The pull request may still be in progress."))
    );
    assert!(body.get("pull_request").is_none());

    // task_status follows the first task to its end.
    let status = client
        .call_tool(call(
            "task_status",
            json!({"task_id": task_id, "wait_seconds": 30}),
        ))
        .await
        .expect("task_status");
    assert!(text(&status).contains("ready for review"), "{status:?}");

    let result = client
        .call_tool(call("assign_copilot_to_issue", assign("acme/legacy", 1)))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text(&result), NOT_AVAILABLE);
    client.cancel().await.expect("close");
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

async fn wait_for_status(client: &Client, id: &str, needle: &str) {
    watch_task(client, id, Duration::from_secs(60), |got| {
        assert!(
            !is_terminal(&got.task.payload),
            "ended early: {:?}",
            got.task.payload
        );
        got.task
            .task
            .status_message
            .as_deref()
            .is_some_and(|m| m.contains(needle))
    })
    .await;
}

#[tokio::test]
async fn cancel_stops_the_watch_and_unassigns_only_when_configured() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agentgate.toml");
    std::fs::write(&config, "[copilot]\nunassign_on_cancel = true\n").expect("config");
    let keep = gh
        .sim
        .add_issue("acme/widgets", "Keep me assigned", Scenario::Never);
    let drop = gh
        .sim
        .add_issue("acme/widgets", "Unassign me", Scenario::Never);

    let plain = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, plain.path()).await;
    let task = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", keep),
    )
    .await;
    wait_for_status(
        &client,
        &task.task.task_id,
        "waiting for it to open a pull request",
    )
    .await;
    client
        .peer()
        .cancel_task(CancelTaskParams::new(task.task.task_id.clone()))
        .await
        .expect("tasks/cancel");
    // Cancelled here, not on GitHub: the status says the run goes on.
    let said = cancelled_status(&client, &task.task.task_id).await;
    assert!(
        said.starts_with(&format!("cancelled; Copilot's run on acme/widgets#{keep} goes on on GitHub (agentgate cannot stop it")),
        "{said}"
    );
    assert!(!said.contains("removed"), "{said}");
    assert!(
        gh.sim
            .issue_assignees("acme/widgets", keep)
            .iter()
            .any(|a| a == COPILOT_LOGIN)
    );

    let configured = gateway(&gh, dir.path(), &[])
        .config_file(&config)
        .start()
        .await;
    let client2 = TestClient::tasks().http(&configured.url).await;
    let task = start_task(
        &client2,
        "assign_copilot_to_issue",
        assign("acme/widgets", drop),
    )
    .await;
    wait_for_status(
        &client2,
        &task.task.task_id,
        "waiting for it to open a pull request",
    )
    .await;
    client2
        .peer()
        .cancel_task(CancelTaskParams::new(task.task.task_id.clone()))
        .await
        .expect("tasks/cancel");
    let said = cancelled_status(&client2, &task.task.task_id).await;
    assert!(
        said.ends_with("; Copilot was removed from the issue's assignees"),
        "{said}"
    );
    let assignees = gh.sim.issue_assignees("acme/widgets", drop);
    assert!(
        !assignees.iter().any(|a| a == COPILOT_LOGIN),
        "{assignees:?}"
    );
    client.cancel().await.expect("close");
    client2.cancel().await.expect("close");
}

#[tokio::test]
async fn a_watch_survives_sigkill_and_completes_after_restart() {
    let gh = start_github().await;
    gh.sim
        .set_timings(Duration::from_secs(3), Duration::from_secs(120));
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, server) = over_http_to_kill(&gh, dir.path()).await;
    let task = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 1),
    )
    .await;
    let id = task.task.task_id.clone();
    wait_for_status(&client, &id, "opened pull request").await;
    server.kill_and_wait().await;

    let (client, _server) = over_http_to_kill(&gh, dir.path()).await;
    let (result, _) = follow(&client, &id).await;
    assert_eq!(
        structured(&result)["outcome"],
        json!("finished"),
        "{result:?}"
    );
    assert_eq!(
        gh.sim.stats().assignments_for("acme/widgets", 1),
        1,
        "assigned once"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn rate_limits_are_waited_out() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    // The primary limit for two seconds (HTTP 200, RATE_LIMITED, remaining 0,
    // x-ratelimit-reset), then one secondary limit (403 + retry-after).
    gh.sim
        .faults()
        .set_primary_limited(Some(Duration::from_secs(2)));
    gh.sim
        .faults()
        .try_script(["secondary_rate_limit"])
        .expect("script");
    let task = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 1),
    )
    .await;
    let (result, _) = follow(&client, &task.task.task_id).await;
    assert_eq!(
        structured(&result)["outcome"],
        json!("finished"),
        "{result:?}"
    );
    assert_eq!(gh.sim.faults().pending_script(), 0);
    assert!(gh.sim.stats().faults_injected >= 2);
    assert_eq!(gh.sim.stats().assignments_for("acme/widgets", 1), 1);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_hundred_watched_tasks_share_batched_queries() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    let mut ids = Vec::new();
    for n in 0..100 {
        let number = gh
            .sim
            .add_issue("acme/widgets", &format!("Chore {n}"), Scenario::Never);
        let task = start_task(
            &client,
            "assign_copilot_to_issue",
            assign("acme/widgets", number),
        )
        .await;
        ids.push(task.task.task_id);
    }
    for id in &ids {
        wait_for_status(&client, id, "waiting for it to open a pull request").await;
    }
    // Watch a few ticks once every task is registered: wait until the log
    // shows the watcher's sixth poll cycle begin, so five are complete.
    let from = Instant::now();
    let bursts_since = |from: Instant| {
        let stamps: Vec<Instant> = gh
            .watch_queries
            .lock()
            .expect("lock")
            .iter()
            .copied()
            .filter(|t| *t >= from)
            .collect();
        // Requests of one tick come back to back; ticks are a second apart.
        let mut bursts: Vec<usize> = Vec::new();
        for (i, stamp) in stamps.iter().enumerate() {
            let gap = i
                .checked_sub(1)
                .map(|j| stamp.duration_since(stamps[j]) > Duration::from_millis(300));
            match (gap, bursts.last_mut()) {
                (Some(false), Some(last)) => *last += 1,
                _ => bursts.push(1),
            }
        }
        bursts
    };
    eventually(
        "six poll cycles of the watcher",
        Duration::from_secs(30),
        || bursts_since(from).len() >= 6,
    )
    .await;
    let mut bursts = bursts_since(from);
    // The sixth may still be under way; the five before it are whole.
    bursts.truncate(5);
    assert!(!bursts.is_empty(), "the watcher polls");
    let limit = 100usize.div_ceil(25) + 1;
    assert!(
        bursts.iter().all(|&b| b <= limit),
        "at most {limit} GraphQL requests per poll cycle, saw {bursts:?}"
    );
    assert_eq!(
        gh.sim.stats().max_graphql_targets,
        25,
        "25 aliases per request"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn request_changes_comments_once_and_follows_the_cycle() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    let task = start_task(
        &client,
        "assign_copilot_to_issue",
        assign("acme/widgets", 1),
    )
    .await;
    let (result, _) = follow(&client, &task.task.task_id).await;
    let number = structured(&result)["pull_request"]["number"]
        .as_u64()
        .expect("PR");

    let task = start_task(
        &client,
        "request_copilot_changes",
        json!({"owner": "acme", "repo": "widgets", "pull_number": number,
               "instructions": "Also print the commit hash."}),
    )
    .await;
    let (result, _) = follow(&client, &task.task.task_id).await;
    assert_ne!(result["isError"], json!(true), "{result:?}");
    assert_eq!(structured(&result)["outcome"], json!("finished"));
    assert_eq!(
        gh.sim.stats().comments_on("acme/widgets", number),
        1,
        "one comment"
    );
    assert_rest_calls_documented(&gh);
    let timeline = gh.sim.timeline("acme/widgets", number);
    assert!(
        timeline.iter().any(|e| e.event == "commented"
            && e.detail.starts_with("@copilot Also print the commit hash."))
    );
    assert!(
        timeline
            .iter()
            .filter(|e| e.event == "copilot_work_finished")
            .count()
            >= 2
    );

    let missing = start_task(
        &client,
        "request_copilot_changes",
        json!({"owner": "acme", "repo": "widgets", "pull_number": 999, "instructions": "x"}),
    )
    .await;
    let (result, _) = follow(&client, &missing.task.task_id).await;
    assert_eq!(result["isError"], json!(true));
    assert!(first_text(&result).contains("does not exist"), "{result:?}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn create_pull_request_follows_the_agent_task_to_its_end() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    let ok = start_task(
        &client,
        "create_pull_request_with_copilot",
        json!({"owner": "acme", "repo": "widgets", "problem_statement": "Add a CONTRIBUTING.md",
               "title": "Contributing guide", "base_ref": "main", "model": "gpt-5.4"}),
    )
    .await;
    let failed = start_task(
        &client,
        "create_pull_request_with_copilot",
        json!({"owner": "acme", "repo": "widgets", "problem_statement": "Break things [sim:failed]"}),
    )
    .await;
    let (result, _) = follow(&client, &ok.task.task_id).await;
    assert_ne!(result["isError"], json!(true), "{result:?}");
    assert_eq!(structured(&result)["outcome"], json!("completed"));
    let session = &structured(&result)["agent_task"]["sessions"][0];
    assert_eq!(session["model"], json!("gpt-5.4"));
    let prompt = session["prompt"].as_str().unwrap_or_default();
    assert!(
        prompt.starts_with("Contributing guide\n\nAdd a CONTRIBUTING.md"),
        "{prompt}"
    );
    assert!(
        prompt.ends_with(&format!("<!-- agentgate:task {} -->", ok.task.task_id)),
        "{prompt}"
    );
    // Issue 33: the pull request is named, not only the agent task's ids.
    let pull = &structured(&result)["pull_request"];
    let number = pull["number"].as_u64().expect("a pull request number");
    let url = pull["url"].as_str().expect("its url");
    assert!(
        url.ends_with(&format!("/acme/widgets/pull/{number}")),
        "{pull}"
    );
    assert_eq!(pull["state"], json!("OPEN"), "{pull}");
    let title = pull["title"].as_str().expect("its title");
    assert!(!title.is_empty(), "{pull}");
    assert!(
        first_text(&result).contains(&format!("Pull request #{number} \"{title}\"")),
        "{result:?}"
    );
    let artifact = &structured(&result)["agent_task"]["artifacts"][0];
    assert_eq!(
        artifact["type"],
        json!("pull"),
        "the one GitHub listed: {artifact}"
    );

    let (result, _) = follow(&client, &failed.task.task_id).await;
    assert_eq!(result["isError"], json!(true));
    assert_eq!(structured(&result)["outcome"], json!("failed"));
    assert!(
        first_text(&result).contains("tests did not pass"),
        "{result:?}"
    );
    assert_eq!(
        gh.sim.stats().agent_tasks_created,
        2,
        "one agent task per call"
    );
    assert_rest_calls_documented(&gh);
    client.cancel().await.expect("close");
}

fn create_pr(prompt: &str) -> Value {
    json!({"owner": "acme", "repo": "widgets", "problem_statement": prompt})
}

#[tokio::test]
async fn an_agent_task_is_started_once_when_agentgate_dies_after_the_post() {
    let gh = start_github().await;
    let posted = gh
        .emulator
        .hold
        .arm("POST", "/agents/repos/acme/widgets/tasks", "");
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, server) = over_http_to_kill(&gh, dir.path()).await;
    let task = start_task(
        &client,
        "create_pull_request_with_copilot",
        create_pr("Add a CONTRIBUTING.md"),
    )
    .await;
    let id = task.task.task_id.clone();
    posted.await.expect("the POST reached GitHub");
    // GitHub has started the agent task; agentgate never hears of it.
    server.kill_and_wait().await;
    assert_eq!(gh.sim.stats().agent_tasks_created, 1);

    let (client, _server) = over_http_to_kill(&gh, dir.path()).await;
    let (result, _) = follow(&client, &id).await;
    assert_eq!(
        structured(&result)["outcome"],
        json!("completed"),
        "{result:?}"
    );
    let stats = gh.sim.stats();
    assert_eq!(stats.agent_tasks_created, 1, "adopted, not started again");
    // Adoption read the candidates one by one: list items carry no sessions.
    assert!(stats.rest_requests_for("GET /agents/repos/{owner}/{repo}/tasks/{task_id}") >= 2);
    let prompt = structured(&result)["agent_task"]["sessions"][0]["prompt"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        prompt.ends_with(&format!("<!-- agentgate:task {id} -->")),
        "{prompt}"
    );
    assert_rest_calls_documented(&gh);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_lost_post_answer_is_adopted_among_other_recent_agent_tasks() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    // Someone else's agent task, created moments before ours.
    let other = start_task(
        &client,
        "create_pull_request_with_copilot",
        create_pr("Someone else's task"),
    )
    .await;
    eventually("the first agent task", Duration::from_secs(30), || {
        gh.sim.stats().agent_tasks_created >= 1
    })
    .await;
    gh.sim.faults().lose_next_writes(1);
    let ours = start_task(
        &client,
        "create_pull_request_with_copilot",
        create_pr("Our task"),
    )
    .await;
    let (result, _) = follow(&client, &ours.task.task_id).await;
    assert_eq!(
        structured(&result)["outcome"],
        json!("completed"),
        "{result:?}"
    );
    let prompt = structured(&result)["agent_task"]["sessions"][0]["prompt"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(prompt.starts_with("Our task"), "{prompt}");
    let (result, _) = follow(&client, &other.task.task_id).await;
    assert_eq!(
        structured(&result)["outcome"],
        json!("completed"),
        "{result:?}"
    );
    let stats = gh.sim.stats();
    assert_eq!(stats.answers_lost, 1);
    assert_eq!(stats.agent_tasks_created, 2, "one agent task per call");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_idle_agent_task_is_reported_as_idle_and_followed_on() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(&gh, dir.path()).await;
    let task = start_task(
        &client,
        "create_pull_request_with_copilot",
        create_pr("Tidy the README [sim:idle]"),
    )
    .await;
    let id = task.task.task_id.clone();
    wait_for_status(&client, &id, "is idle").await;
    let (result, _) = follow(&client, &id).await;
    assert_eq!(
        structured(&result)["outcome"],
        json!("completed"),
        "{result:?}"
    );
    client.cancel().await.expect("close");
}

/// Every REST request the client sent is an operation GitHub documents, and
/// every body it wrote validates (strictly) against that operation's request
/// schema (`contracts/github/rest/operations.json`).
fn assert_rest_calls_documented(gh: &Gh) {
    let rest = contracts::github_rest();
    let stats = gh.sim.stats();
    assert!(!stats.rest_requests.is_empty(), "the client used REST");
    let undocumented: Vec<&String> = stats
        .rest_requests
        .keys()
        .filter(|label| !rest.documents(label))
        .collect();
    assert!(
        undocumented.is_empty(),
        "undocumented REST calls: {undocumented:?}"
    );
    for (label, body) in &stats.rest_bodies {
        let problems = rest.request_problems(label, body);
        assert!(problems.is_empty(), "{label} sent {body}: {problems:?}");
    }
}

#[tokio::test]
async fn bad_tokens_and_bad_arguments_get_clear_errors_without_the_token() {
    let gh = start_github().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = "ghp_ThisTokenIsWrong0000000000000000000";
    let client = legacy()
        .stdio(over_stdio(
            &gh,
            dir.path(),
            &[("GITHUB_PERSONAL_ACCESS_TOKEN", secret)],
        ))
        .await;
    let result = client
        .call_tool(call("assign_copilot_to_issue", assign("acme/widgets", 1)))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true));
    let message = text(&result);
    assert!(
        message.starts_with("failed to get suggested actors: "),
        "{message}"
    );
    assert!(message.contains("Bad credentials"), "{message}");
    assert!(!message.contains(secret));

    let result = client
        .call_tool(call(
            "assign_copilot_to_issue",
            json!({"owner": "acme", "repo": "widgets", "issue_number": "seven"}),
        ))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("issue_number"), "{result:?}");
    client.cancel().await.expect("close");

    let client = legacy().stdio(over_stdio(&gh, dir.path(), &[])).await;
    let result = client
        .call_tool(call("assign_copilot_to_issue", assign("acme/nope", 1)))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("Could not resolve to a Repository"),
        "{result:?}"
    );
    client.cancel().await.expect("close");
}

/// Every request the GitHub emulator received: its bearer token and body.
type Wire = Arc<Mutex<Vec<(String, String)>>>;

const ALICE_GITHUB_TOKEN: &str = "ghp_AliceOwnTokenForAgentgateTests00001";

/// A shared gateway in front of the emulator: Alice may use acme/widgets
/// with her own GitHub token; Bob only acme/gadgets, with the gateway's.
async fn shared_gateway(dir: &Path) -> (Emulator<GithubSim>, Wire, Gate) {
    let wire: Wire = Arc::default();
    let log = wire.clone();
    let emulator = emulators::github(GithubConfig {
        time_scale: 0.1,
        more_tokens: vec![ALICE_GITHUB_TOKEN.to_owned()],
        ..GithubConfig::default()
    })
    .layer(move |router| {
        router.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let log = log.clone();
                async move {
                    let (parts, body) = request.into_parts();
                    let bytes = axum::body::to_bytes(body, 4 << 20)
                        .await
                        .unwrap_or_default();
                    let token = parts
                        .headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.split_once(' '))
                        .map(|(_, t)| t.trim().to_owned())
                        .unwrap_or_default();
                    let text = format!("{} {}", parts.uri, String::from_utf8_lossy(&bytes));
                    log.lock().expect("lock").push((token, text));
                    next.run(axum::extract::Request::from_parts(parts, bytes.into()))
                        .await
                }
            },
        ))
    })
    .start()
    .await;
    let config = "[auth]\nmode = \"tokens\"\n\
                  [[auth.tokens]]\nprincipal = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n\
                  [[auth.tokens]]\nprincipal = \"bob\"\ntoken_env = \"BOB_TOKEN\"\n\
                  [copilot.principals.\"token:alice\"]\nrepositories = [\"acme/widgets\"]\n\
                  token_env = \"ALICE_GITHUB_TOKEN\"\n\
                  [copilot.principals.\"token:bob\"]\nrepositories = [\"acme/gadgets\"]\n";
    let server = GateBuilder::agentgate(BIN, dir)
        .upstream(&emulator)
        .config(config)
        .envs([
            ("ALICE_TOKEN", "alice-secret"),
            ("BOB_TOKEN", "bob-secret"),
            ("ALICE_GITHUB_TOKEN", ALICE_GITHUB_TOKEN),
        ])
        .start()
        .await;
    (emulator, wire, server)
}

#[tokio::test]
async fn a_principal_touches_only_its_repositories_and_acts_with_its_own_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (gh, wire, server) = shared_gateway(dir.path()).await;
    let alice = TestClient::tasks()
        .http_with_token(&server.url, "alice-secret")
        .await;
    let bob = TestClient::tasks()
        .http_with_token(&server.url, "bob-secret")
        .await;

    // Bob asks for a repository he was not given: refused by name, and
    // GitHub hears nothing of it.
    let task = start_task(&bob, "assign_copilot_to_issue", assign("acme/widgets", 1)).await;
    let TaskPayload::Completed { result } = poll_until(&bob, &task.task.task_id, is_terminal).await
    else {
        panic!("expected completed")
    };
    assert_eq!(result["isError"], json!(true), "{result:?}");
    let text = first_text(&result);
    assert!(
        text.contains("acme/widgets")
            && text.contains("copilot.principals.\"token:bob\".repositories"),
        "names the repository and the setting: {text}"
    );
    assert!(
        !wire
            .lock()
            .expect("lock")
            .iter()
            .any(|(_, text)| text.contains("widgets")),
        "no request about acme/widgets reached GitHub"
    );
    assert_eq!(gh.sim.stats().assignments, 0);

    // Alice assigns Copilot in her repository, as herself.
    let task = start_task(&alice, "assign_copilot_to_issue", assign("acme/widgets", 1)).await;
    let (result, _) = follow(&alice, &task.task.task_id).await;
    assert_ne!(result["isError"], json!(true), "{result:?}");
    assert_eq!(gh.sim.stats().assignments_for("acme/widgets", 1), 1);
    let wire = wire.lock().expect("lock").clone();
    let mutations: Vec<&String> = wire
        .iter()
        .filter(|(_, text)| text.contains("updateIssue"))
        .map(|(token, _)| token)
        .collect();
    assert!(!mutations.is_empty(), "the assignment was seen on the wire");
    assert!(
        mutations.iter().all(|token| *token == ALICE_GITHUB_TOKEN),
        "the assignment went out with Alice's token, not the gateway's"
    );
    alice.cancel().await.expect("close");
    bob.cancel().await.expect("close");
}
