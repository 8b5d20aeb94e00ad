//! A2A agents through the real `agentgate` binary, against the A2A emulator
//! in this process:
//!
//! - the inline path, for clients without the tasks extension: a legacy
//!   client answers the agent's question through `elicitation/create`, a
//!   2026-07-28 client through MRTR, progress notifications carry the agent's
//!   status messages, and a call that outlives its sync budget is followed,
//!   answered and cancelled with `task_status`, `task_answer`, `task_cancel`;
//! - OAuth client credentials from the agent's card, renewed after a 401,
//!   the secret and tokens nowhere in the logs or the store;
//! - push notifications to the HTTP server's `/hooks/a2a`;
//! - SIGKILL between the agent acting on a message and the checkpoint: the
//!   restarted server finds the task and does not send the message again
//!   (with `client_context_ids`), and the residual risk without it.

use std::path::Path;
use std::time::Duration;

use agentgate_sim::a2a::{A2aConfig, A2aSim, OAuthClient};
use agentgate_testkit::*;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, InputResponses, ProtocolVersion,
    TaskPayload,
};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");
const TOOL: &str = "emu_send_message";

type Agent = Emulator<A2aSim>;

async fn agent(config: A2aConfig) -> Agent {
    emulators::a2a(config).start().await
}

fn quick() -> A2aConfig {
    A2aConfig {
        step_delay: Duration::from_millis(20),
        ..A2aConfig::default()
    }
}

/// `[a2a]` with this agent as `emu`, quick polling, and `section` /
/// `agent_extra` lines.
fn config(up: &Agent, section: &str, agent_extra: &str) -> String {
    format!(
        "[a2a]\npoll_interval_ms = 50\nrefresh_seconds = 0\n{section}\n{}",
        up.a2a_agent("emu", agent_extra)
    )
}

fn gateway(up: &Agent, dir: &Path, section: &str, agent_extra: &str) -> GateBuilder {
    GateBuilder::agentgate(BIN, dir).config(&config(up, section, agent_extra))
}

fn legacy(caps: ClientCapabilities) -> TestClient {
    TestClient::new(caps, ProtocolVersion::V_2025_11_25)
}

fn texts(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ask(skill: &str, extra: Value) -> Value {
    let mut metadata = json!({"skill": skill});
    if let (Some(m), Some(e)) = (metadata.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    json!({"message": "hello", "metadata": metadata})
}

#[tokio::test]
async fn a_legacy_client_answers_the_agents_question_through_elicitation() {
    let up = agent(quick()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut client = legacy(ClientCapabilities::builder().enable_elicitation().build());
    client.answer = json!({"answer": "Ada"});
    let seen = client.seen.clone();
    let command = gateway(&up, dir.path(), "", "")
        .no_listen()
        .arg("--stdio")
        .command();
    let client = client.stdio(command).await;
    let result = client
        .call_tool(call(TOOL, ask("ask-input", json!({}))))
        .await
        .expect("tools/call");
    assert_eq!(texts(&result), "Hello, Ada!", "{result:?}");
    let asked = seen.lock().expect("lock").elicitations.clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("What is your name?"), "{asked:?}");
    assert_eq!(up.sim.stats().max_effects_per_message_id(), 1);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_2026_client_without_tasks_answers_through_mrtr() {
    let up = agent(quick()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = gateway(&up, dir.path(), "", "").start().await;
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    let client = TestClient::new(caps, ProtocolVersion::V_2026_07_28)
        .http(&server.url)
        .await;
    let args = ask("ask-input", json!({}));
    let round1 = client
        .call_tool_once(call(TOOL, args.clone()))
        .await
        .expect("round 1");
    let CallToolResponse::InputRequired(round1) = round1 else {
        panic!("expected MRTR, got {round1:?}")
    };
    let key = round1
        .input_requests
        .as_ref()
        .and_then(|r| r.keys().next().cloned())
        .expect("one request");
    let mut responses = InputResponses::new();
    responses.insert(
        key,
        json!({"action": "accept", "content": {"answer": "Grace"}}),
    );
    let mut retry = call(TOOL, args);
    retry.request_state = round1.request_state.clone();
    retry.input_responses = Some(responses);
    let CallToolResponse::Complete(result) = client.call_tool_once(retry).await.expect("round 2")
    else {
        panic!("expected the final result")
    };
    assert_eq!(texts(&result), "Hello, Grace!", "{result:?}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn progress_notifications_carry_the_agents_status_messages() {
    let up = agent(A2aConfig {
        step_delay: Duration::from_millis(150),
        ..A2aConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let client = legacy(ClientCapabilities::default());
    let seen = client.seen.clone();
    let command = gateway(&up, dir.path(), "max_streams = 0", "")
        .no_listen()
        .arg("--stdio")
        .command();
    let client = client.stdio(command).await;
    let mut params = call(TOOL, ask("long-running", json!({"steps": 4})));
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::Number(7),
    ));
    params.meta = Some(meta);
    let result = client.call_tool(params).await.expect("tools/call");
    assert_eq!(texts(&result), "Finished 4 steps.");
    let progress = eventually("the agent's progress", Duration::from_secs(10), || {
        let progress = seen.lock().expect("lock").progress.clone();
        progress
            .iter()
            .any(|p| p.message.as_deref().is_some_and(|m| m.starts_with("step ")))
            .then_some(progress)
    })
    .await;
    assert!(
        progress.windows(2).all(|w| w[0].progress <= w[1].progress),
        "progress only grows: {progress:?}"
    );
    client.cancel().await.expect("close");
}

/// `task_status` with a long poll, until the task ends.
async fn follow_status(client: &Client, id: &str) -> CallToolResult {
    for _ in 0..30 {
        let status = client
            .call_tool(call(
                "task_status",
                json!({"task_id": id, "wait_seconds": 5}),
            ))
            .await
            .expect("task_status");
        let done = status
            .structured_content
            .as_ref()
            .and_then(|s| s["status"].as_str())
            .is_some_and(|s| matches!(s, "completed" | "failed" | "cancelled"));
        if done {
            return status;
        }
    }
    panic!("task {id} did not end")
}

/// Issue 32: a task that makes no progress within its TTL (a question
/// nobody answers) expires, and its A2A task is canceled at the agent: the
/// upstream work does not go on for a task nobody can see.
#[tokio::test]
async fn an_expired_task_is_canceled_at_the_agent() {
    let up = agent(quick()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = GateBuilder::agentgate(BIN, dir.path())
        .config(&format!(
            "{}\n[limits]\nmax_ttl_seconds = 1\n[engine]\nsweep_seconds = 1\n",
            config(&up, "", "")
        ))
        .start()
        .await;
    let client = TestClient::tasks().http(&server.url).await;
    let task = start_task(&client, TOOL, ask("ask-input", json!({}))).await;
    eventually(
        "the A2A task to be canceled",
        Duration::from_secs(30),
        || (up.sim.stats().cancels == 1).then_some(()),
    )
    .await;
    let gone = client
        .peer()
        .get_task(rmcp::model::GetTaskParams::new(task.task.task_id.clone()))
        .await;
    assert!(
        gone.is_err(),
        "an expired task answers as unknown: {gone:?}"
    );
    client.cancel().await.expect("close");
}

/// A call that outlives its sync budget is handed over with its task id;
/// `task_status` follows it, `task_answer` answers the agent's question on
/// behalf of a client that cannot elicit, `task_cancel` cancels it upstream.
#[tokio::test]
async fn after_the_sync_budget_the_task_tools_follow_answer_and_cancel() {
    let up = agent(quick()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let command = gateway(&up, dir.path(), "sync_budget_seconds = 1", "")
        .no_listen()
        .arg("--stdio")
        .command();
    let client = legacy(ClientCapabilities::default()).stdio(command).await;

    // No elicitation: the question comes back as an error naming the task.
    let asked = client
        .call_tool(call(TOOL, ask("ask-input", json!({}))))
        .await
        .expect("tools/call");
    assert_eq!(asked.is_error, Some(true));
    let pending = asked.structured_content.clone().expect("structured");
    let task_id = pending["taskId"].as_str().expect("task id").to_owned();
    let key = pending["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .expect("a request key");
    let answered = client
        .call_tool(call(
            "task_answer",
            json!({"task_id": task_id, "responses": {key: {"action": "accept",
                   "content": {"answer": "Lin"}}}}),
        ))
        .await
        .expect("task_answer");
    assert_ne!(answered.is_error, Some(true), "{answered:?}");
    let status = follow_status(&client, &task_id).await;
    assert!(texts(&status).contains("Hello, Lin!"), "{status:?}");

    // Longer than the budget: handed over, then cancelled at the agent.
    let long = client
        .call_tool(call(TOOL, ask("long-running", json!({"steps": 100}))))
        .await
        .expect("tools/call");
    let meta = serde_json::to_value(&long.meta).expect("meta");
    let long_id = meta["io.agentgate/taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task id in {long:?}"))
        .to_owned();
    let cancel = client
        .call_tool(call("task_cancel", json!({"task_id": long_id})))
        .await
        .expect("task_cancel");
    assert_ne!(cancel.is_error, Some(true), "{cancel:?}");
    let status = follow_status(&client, &long_id).await;
    let task = status.structured_content.clone().expect("structured");
    assert_eq!(task["status"], "cancelled", "{status:?}");
    eventually(
        "the A2A task to be canceled",
        Duration::from_secs(10),
        || (up.sim.stats().cancels == 1).then_some(()),
    )
    .await;
    client.cancel().await.expect("close");
}

fn oauth_agent() -> A2aConfig {
    A2aConfig {
        step_delay: Duration::from_millis(20),
        oauth: Some(OAuthClient {
            client_id: "agentgate-e2e".into(),
            client_secret: "e2e-client-secret-zzz".into(),
            token_ttl: Duration::from_secs(3600),
        }),
        ..A2aConfig::default()
    }
}

/// OAuth client credentials found on the card: calls work, a 401 after the
/// agent forgot its tokens is cured by a new one, and neither the secret
/// nor an access token reaches stderr or the store.
#[tokio::test]
async fn oauth_from_the_card_works_and_no_secret_reaches_logs_or_store() {
    let up = agent(oauth_agent()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("tasks.db");
    let server = gateway(
        &up,
        dir.path(),
        "",
        "[a2a.agents.oauth]\nclient_id = \"agentgate-e2e\"\nclient_secret_env = \"EMU_SECRET\"\n\
         scopes = [\"a2a.invoke\"]\n",
    )
    .sqlite(&store)
    .env("EMU_SECRET", "e2e-client-secret-zzz")
    .env("RUST_LOG", "debug")
    .start()
    .await;
    let client = TestClient::tasks().http(&server.url).await;
    for i in 0..2 {
        if i == 1 {
            up.sim.revoke_tokens();
        }
        let task = start_task(&client, TOOL, ask("quick-answer", json!({}))).await;
        let TaskPayload::Completed { result } =
            poll_until(&client, &task.task.task_id, is_terminal).await
        else {
            panic!("expected completed")
        };
        assert_eq!(first_text(&result), "The answer is 42.");
    }
    let stats = up.sim.stats();
    assert_eq!(stats.tokens_issued, 2, "one token, then one after the 401");
    assert_eq!(stats.unauthorized, 1);
    client.cancel().await.expect("close");
    let stderr = server.stderr();
    drop(server);
    assert!(!stderr.contains("e2e-client-secret-zzz"), "{stderr}");
    assert!(!stderr.contains("sim-at-"), "an access token in the logs");
    for file in std::fs::read_dir(dir.path()).expect("dir").flatten() {
        let bytes = std::fs::read(file.path()).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("e2e-client-secret-zzz") && !text.contains("sim-at-"),
            "a secret in {}",
            file.path().display()
        );
    }
}

/// A free port to listen on (the push URL must be known before the server
/// starts).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// With streams off and a 30 s poll, the agent's push notifications to the
/// server's `/hooks/a2a` end the task within seconds.
#[tokio::test]
async fn push_notifications_reach_the_servers_hook_and_end_the_task() {
    let up = agent(A2aConfig {
        step_delay: Duration::from_millis(100),
        push_notifications: true,
        ..A2aConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let section = format!(
        "max_streams = 0\npoll_interval_ms = 30000\nmax_poll_interval_ms = 30000\n\
         push_url = \"http://127.0.0.1:{port}/hooks/a2a\"\npush_secret_env = \"PUSH_SECRET\""
    );
    let server = GateBuilder::agentgate(BIN, dir.path())
        .config(&format!(
            "[a2a]\nrefresh_seconds = 0\n{section}\n{}",
            up.a2a_agent("emu", "")
        ))
        .env("PUSH_SECRET", "push-secret-for-the-e2e-test-0123456789")
        .no_listen()
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .start()
        .await;
    let client = TestClient::tasks().http(&server.url).await;
    let started = std::time::Instant::now();
    let task = start_task(&client, TOOL, ask("long-running", json!({"steps": 3}))).await;
    let TaskPayload::Completed { result } =
        poll_until(&client, &task.task.task_id, is_terminal).await
    else {
        panic!("expected completed")
    };
    assert_eq!(first_text(&result), "Finished 3 steps.");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the task waited for its 30 s poll"
    );
    let stats = up.sim.stats();
    assert!(stats.pushes_delivered >= 3, "{stats:?}");
    assert_eq!(stats.pushes_failed, 0, "{stats:?}");
    client.cancel().await.expect("close");
}

/// SIGKILL after the agent acted on the first message and before agentgate
/// saw the answer (it comes 3 s late). The agent does not deduplicate.
/// Returns the task's end, the messageId's runs, and the context's tasks.
async fn killed_between_send_and_checkpoint(client_context_ids: bool) -> (String, u64, u64) {
    let up = emulators::a2a(A2aConfig {
        dedupe_message_ids: false,
        step_delay: Duration::from_millis(20),
        ..A2aConfig::default()
    })
    .answer_late(Duration::from_secs(3))
    .start()
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!("client_context_ids = {client_context_ids}");
    let section = "[engine]\nlease_seconds = 3\n";
    let start = || {
        GateBuilder::agentgate(BIN, dir.path()).config(&format!(
            "{section}{}",
            config(&up, "max_streams = 0", &extra)
        ))
    };
    let first = start().start().await;
    let client = TestClient::tasks().http(&first.url).await;
    let task = start_task(&client, TOOL, ask("quick-answer", json!({}))).await;
    let id = task.task.task_id.clone();
    let message = format!("agentgate-{id}-0");
    // The agent has acted on it; its answer is still on the way.
    eventually(
        "the agent to act on the message",
        Duration::from_secs(20),
        || (up.sim.stats().effects_by_message_id(&message) == 1).then_some(()),
    )
    .await;
    first.kill_and_wait().await;
    drop(client);
    let second = start().start().await;
    let client = TestClient::tasks().http(&second.url).await;
    let TaskPayload::Completed { result } = poll_until(&client, &id, is_terminal).await else {
        panic!("expected completed")
    };
    client.cancel().await.expect("close");
    let stats = up.sim.stats();
    (
        first_text(&result),
        stats.effects_by_message_id(&message),
        stats.tasks_in_context(&format!("agentgate-{id}")),
    )
}

#[tokio::test]
async fn a_restart_after_sigkill_finds_the_started_task_instead_of_sending_again() {
    let (text, runs, tasks) = killed_between_send_and_checkpoint(true).await;
    assert_eq!(text, "The answer is 42.");
    assert_eq!(runs, 1, "the message was sent once");
    assert_eq!(tasks, 1, "one task in the context agentgate chose");
}

/// The residual risk, documented: without a context agentgate chose, an
/// agent that does not deduplicate runs the repeated message twice.
#[tokio::test]
async fn without_client_context_ids_a_non_deduplicating_agent_runs_it_twice() {
    let (text, runs, _) = killed_between_send_and_checkpoint(false).await;
    assert_eq!(text, "The answer is 42.");
    assert_eq!(runs, 2, "the repeated step sent the message again");
}

#[tokio::test]
async fn an_unset_oauth_secret_is_refused_at_start_by_its_field() {
    let up = agent(oauth_agent()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let output = gateway(
        &up,
        dir.path(),
        "",
        "[a2a.agents.oauth]\nclient_id = \"x\"\nclient_secret_env = \"NOT_SET_ANYWHERE\"\n",
    )
    .command()
    .output()
    .await
    .expect("run agentgate");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("agents[0].oauth.client_secret_env") && stderr.contains("NOT_SET_ANYWHERE"),
        "{stderr}"
    );
}

/// The contextId of an answer (`structuredContent.task.contextId`).
fn context_of(result: &CallToolResult) -> String {
    result.structured_content.as_ref().expect("structured")["task"]["contextId"]
        .as_str()
        .expect("a contextId")
        .to_owned()
}

#[tokio::test]
async fn contexts_and_agents_belong_to_their_principals() {
    let up = agent(quick()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let auth = "[auth]\nmode = \"tokens\"\n\
                [[auth.tokens]]\nprincipal = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n\
                [[auth.tokens]]\nprincipal = \"bob\"\ntoken_env = \"BOB_TOKEN\"\n\
                [[auth.tokens]]\nprincipal = \"carol\"\ntoken_env = \"CAROL_TOKEN\"\n";
    let server = GateBuilder::agentgate(BIN, dir.path())
        .config(&format!(
            "{auth}\n{}",
            config(&up, "", "principals = [\"token:alice\", \"token:bob\"]")
        ))
        .envs([
            ("ALICE_TOKEN", "alice-secret"),
            ("BOB_TOKEN", "bob-secret"),
            ("CAROL_TOKEN", "carol-secret"),
        ])
        .start()
        .await;
    let caps = ClientCapabilities::default;
    let alice = legacy(caps())
        .http_with_token(&server.url, "alice-secret")
        .await;
    let bob = legacy(caps())
        .http_with_token(&server.url, "bob-secret")
        .await;
    let carol = legacy(caps())
        .http_with_token(&server.url, "carol-secret")
        .await;

    let first = alice
        .call_tool(call(TOOL, ask("quick-answer", json!({}))))
        .await
        .expect("tools/call");
    assert_ne!(first.is_error, Some(true), "{first:?}");
    let context = context_of(&first);
    let in_context = |context: &str| {
        let mut args = ask("quick-answer", json!({}));
        args["context_id"] = json!(context);
        args
    };
    let sent_before = up.sim.stats().rpc_requests;

    // Bob and a made-up id get the same refusal; the agent hears nothing.
    let hers = bob
        .call_tool(call(TOOL, in_context(&context)))
        .await
        .expect("call");
    let unknown = "ctx-that-nobody-started";
    let nobodys = bob
        .call_tool(call(TOOL, in_context(unknown)))
        .await
        .expect("call");
    assert_eq!(hers.is_error, Some(true), "{hers:?}");
    assert_eq!(
        texts(&hers),
        texts(&nobodys).replace(unknown, &context),
        "the same answer, but for the id it echoes"
    );
    assert!(texts(&hers).contains("`context_id`"), "{hers:?}");
    // Carol may not use the agent at all.
    let refused = carol
        .call_tool(call(TOOL, ask("quick-answer", json!({}))))
        .await
        .expect("call");
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert!(
        texts(&refused).contains("a2a.agents[0].principals"),
        "names the setting: {refused:?}"
    );
    assert_eq!(
        up.sim.stats().rpc_requests,
        sent_before,
        "nothing reached the agent"
    );

    // Alice continues her own context.
    let again = alice
        .call_tool(call(TOOL, in_context(&context)))
        .await
        .expect("call");
    assert_ne!(again.is_error, Some(true), "{again:?}");
    assert_eq!(context_of(&again), context);
    for client in [alice, bob, carol] {
        client.cancel().await.expect("close");
    }
}
