//! `QBusinessQueryTool` end to end: the real `agentgate` binary, the real AWS
//! SDK inside it, the Q Business emulator (SigV4-verified ChatSync) in this
//! test process, and rmcp's client over stdio and HTTP.

use std::collections::BTreeMap;
use std::path::Path;

use agentgate_sim::qbusiness::{
    DEFAULT_ACCESS_KEY_ID, DEFAULT_APPLICATION_ID, DEFAULT_SECRET_ACCESS_KEY, QBusinessConfig,
    QBusinessSim, SIGNIN_PLUGIN_ID, TICKET_PLUGIN_ID,
};
use agentgate_testkit::*;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ElicitationAction, InputRequest,
    InputResponses, ProtocolVersion, TaskPayload, UpdateTaskParams,
};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentgate");

/// The emulator on a free loopback port (its answer hold: `sim.hold`).
type Sim = Emulator<QBusinessSim>;

async fn start_sim() -> Sim {
    emulators::qbusiness(QBusinessConfig::default())
        .start()
        .await
}

/// The emulator in the conservative reading of `clientToken`: a repeated
/// token is a new request, so a repeated action runs again.
async fn start_sim_without_replay() -> Sim {
    emulators::qbusiness(QBusinessConfig {
        client_token_replay: false,
        ..QBusinessConfig::default()
    })
    .start()
    .await
}

/// `agentgate serve` on the SQLite file `store` with the environment a
/// user would set, pointed at the emulator. `drop` names variables to
/// leave out; `set` overrides.
fn gateway(sim: &Sim, store: &Path, drop: &[&str], set: &[(&str, &str)]) -> GateBuilder {
    let dir = store.parent().expect("a store file in a directory");
    let mut gateway = GateBuilder::agentgate(BIN, dir)
        .sqlite(store)
        .upstream(sim)
        .envs(set.iter().copied());
    for key in drop {
        gateway = gateway.env_remove(key);
    }
    gateway
}

async fn over_stdio(
    client: TestClient,
    sim: &Sim,
    store: &Path,
    drop: &[&str],
    set: &[(&str, &str)],
) -> Client {
    let command = gateway(sim, store, drop, set)
        .no_listen()
        .arg("--stdio")
        .command();
    client.stdio(command).await
}

async fn over_http(client: TestClient, sim: &Sim, store: &Path) -> (Client, Gate) {
    let server = gateway(sim, store, &[], &[]).start().await;
    (client.http(&server.url).await, server)
}

/// [`over_http`] with the shortest lease the binary accepts, for the tests
/// that kill it: the next instance takes the dead one's tasks over when its
/// lease runs out, and the default lease would be half a minute of waiting.
async fn over_http_to_kill(sim: &Sim, store: &Path) -> (Client, Gate) {
    let server = gateway(sim, store, &[], &[])
        .config("[engine]\nlease_seconds = 3\n")
        .start()
        .await;
    (TestClient::tasks().http(&server.url).await, server)
}

fn legacy() -> TestClient {
    TestClient::new(ClientCapabilities::default(), ProtocolVersion::V_2025_11_25)
}

fn texts(result: &CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn ask(query: &str) -> Value {
    json!({"query": query})
}

/// The checks every successful answer must pass.
fn assert_full_answer(result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let structured = result
        .structured_content
        .clone()
        .expect("structuredContent");
    let answer = structured["answer"].as_str().expect("answer").to_owned();
    assert_eq!(
        texts(result)[0],
        format!("Qbiz response: {answer}"),
        "upstream's text form"
    );
    let citations = structured["citations"].as_array().expect("citations");
    assert!(!citations.is_empty(), "{structured}");
    for citation in citations {
        for segment in citation["segments"].as_array().expect("segments") {
            let (b, e) = (
                segment["beginOffset"].as_u64().expect("b"),
                segment["endOffset"].as_u64().expect("e"),
            );
            let slice: String = answer
                .chars()
                .skip(usize::try_from(b).expect("offset"))
                .take(usize::try_from(e - b).expect("length"))
                .collect();
            assert_eq!(segment["text"], json!(slice));
        }
    }
    let links = result
        .content
        .iter()
        .filter(|c| matches!(c, rmcp::model::ContentBlock::ResourceLink(_)))
        .count();
    assert!(links >= 1, "each cited URL is a resource_link");
    assert_eq!(
        structured["conversationId"].as_str().map(str::len),
        Some(36)
    );
    structured
}

#[tokio::test]
async fn answers_with_citations_and_follows_up_over_stdio_without_tasks() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let client = over_stdio(legacy(), &sim, &dir.path().join("t.db"), &[], &[]).await;
    let first = client
        .call_tool(call(
            "QBusinessQueryTool",
            ask("How many vacation days do employees get?"),
        ))
        .await
        .expect("tools/call");
    let structured = assert_full_answer(&first);
    let follow = client
        .call_tool(call(
            "QBusinessQueryTool",
            json!({"query": "And can unused days be carried over?",
                   "conversation_id": structured["conversationId"],
                   "parent_message_id": structured["systemMessageId"]}),
        ))
        .await
        .expect("follow-up");
    assert_ne!(follow.is_error, Some(true), "{follow:?}");
    let again = follow.structured_content.expect("structured");
    assert_eq!(
        again["conversationId"], structured["conversationId"],
        "same conversation"
    );
    assert_ne!(again["systemMessageId"], structured["systemMessageId"]);

    let empty = client
        .call_tool(call("QBusinessQueryTool", ask("")))
        .await
        .expect("call");
    assert_eq!(
        texts(&empty),
        vec!["Error: Query cannot be empty".to_owned()],
        "upstream's text, byte for byte"
    );
    assert_eq!(empty.is_error, Some(true));
    let bad = client
        .call_tool(call(
            "QBusinessQueryTool",
            json!({"query": "x", "conversation_id": "nope"}),
        ))
        .await
        .expect("call");
    assert!(texts(&bad)[0].contains("`parent_message_id`"), "{bad:?}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn tasks_client_gets_the_answer_as_a_task_over_http_with_one_chatsync() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(TestClient::tasks(), &sim, &dir.path().join("t.db")).await;
    let task = start_task(
        &client,
        "QBusinessQueryTool",
        ask("How do I set up the VPN?"),
    )
    .await;
    let id = task.task.task_id.clone();
    let TaskPayload::Completed { result } = poll_until(&client, &id, is_terminal).await else {
        panic!("expected completed")
    };
    let result: CallToolResult = serde_json::from_value(Value::Object(result)).expect("result");
    assert_full_answer(&result);
    let stats = sim.sim.stats();
    assert_eq!(
        stats.requests_by_client_token(&format!("{id}-0")),
        1,
        "clientToken is task id + step"
    );
    assert_eq!(stats.chat_sync_effects, 1);
    client.cancel().await.expect("close");
}

fn ticket_query() -> Value {
    json!({"query": "Open a ticket: my laptop battery is swollen", "plugin_id": TICKET_PLUGIN_ID})
}

/// Starts the ticket action and waits for its review: the task id, the
/// request's key and the request.
async fn review_pending(client: &Client) -> (String, String, InputRequest) {
    let task = start_task(client, "QBusinessQueryTool", ticket_query()).await;
    let id = task.task.task_id;
    let TaskPayload::InputRequired { input_requests } = poll_until(client, &id, |p| {
        p.status() != rmcp::model::TaskStatus::Working
    })
    .await
    else {
        panic!("expected input_required")
    };
    let (key, request) = input_requests.into_iter().next().expect("one request");
    (id, key, request)
}

async fn approve(client: &Client, id: &str, key: &str) {
    let mut answer = BTreeMap::new();
    answer.insert(
        key.to_owned(),
        json!({"action": "accept", "content": {"summary": "Swollen laptop battery", "priority": "HIGH"}}),
    );
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.to_owned(), answer))
        .await
        .expect("tasks/update");
}

/// The action ran once and the task reports it, whatever was lost.
async fn assert_one_ticket(client: &Client, sim: &Sim, id: &str) {
    let TaskPayload::Completed { result } = poll_until(client, id, is_terminal).await else {
        panic!("expected completed")
    };
    assert_eq!(
        result["structuredContent"]["outcome"],
        json!("action_executed"),
        "{result:?}"
    );
    let tickets = sim.sim.tickets();
    assert_eq!(tickets.len(), 1, "the action ran once: {tickets:?}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with(&format!("Qbiz response: Created ticket {}", tickets[0].id)),
        "{text}"
    );
}

#[tokio::test]
async fn action_review_accepted_through_tasks_update_creates_one_ticket() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(TestClient::tasks(), &sim, &dir.path().join("t.db")).await;
    let (id, key, request) = review_pending(&client).await;
    let InputRequest::Elicitation(form) = request else {
        panic!("expected a form")
    };
    let schema = serde_json::to_value(&form.params).expect("json")["requestedSchema"].clone();
    assert!(
        schema["required"]
            .as_array()
            .expect("required")
            .contains(&json!("summary"))
    );
    assert!(
        schema["properties"]["priority"]["oneOf"]
            .as_array()
            .is_some_and(|o| o.len() == 3),
        "{schema}"
    );
    assert!(
        schema["properties"]["summary"]["default"].is_string(),
        "current values are defaults"
    );
    approve(&client, &id, &key).await;
    assert_one_ticket(&client, &sim, &id).await;
    assert_eq!(sim.sim.tickets()[0].priority, "HIGH");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_approved_action_whose_answer_was_lost_runs_once_without_token_replay() {
    let sim = start_sim_without_replay().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(TestClient::tasks(), &sim, &dir.path().join("t.db")).await;
    let (id, key, _) = review_pending(&client).await;
    sim.sim.faults().lose_next_answers(1);
    approve(&client, &id, &key).await;
    assert_one_ticket(&client, &sim, &id).await;
    assert_eq!(sim.sim.stats().answers_lost, 1);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_approved_action_runs_once_when_agentgate_dies_after_sending_it() {
    let sim = start_sim_without_replay().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("t.db");
    let (client, mut server) = over_http_to_kill(&sim, &store).await;
    let (id, key, _) = review_pending(&client).await;
    let executed = sim.hold.arm("POST", "/conversations", "actionExecution");
    approve(&client, &id, &key).await;
    executed.await.expect("the action reached Q Business");
    // The ticket exists; agentgate never hears of it.
    server.kill();
    server.wait().await;
    assert_eq!(sim.sim.tickets().len(), 1);

    let (client, _server) = over_http_to_kill(&sim, &store).await;
    assert_one_ticket(&client, &sim, &id).await;
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn action_review_declined_through_mrtr_executes_nothing() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    let client = TestClient::new(caps, ProtocolVersion::V_2026_07_28);
    let (client, _server) = over_http(client, &sim, &dir.path().join("t.db")).await;
    let round1 = client
        .call_tool_once(call("QBusinessQueryTool", ticket_query()))
        .await
        .expect("round 1");
    let CallToolResponse::InputRequired(round1) = round1 else {
        panic!("expected MRTR, got {round1:?}")
    };
    let key = round1
        .input_requests
        .as_ref()
        .and_then(|r| r.keys().next().cloned())
        .expect("key");
    let mut responses = InputResponses::new();
    responses.insert(key, json!({"action": "decline"}));
    let mut retry = call("QBusinessQueryTool", ticket_query());
    retry.request_state = round1.request_state.clone();
    retry.input_responses = Some(responses);
    let CallToolResponse::Complete(result) = client.call_tool_once(retry).await.expect("round 2")
    else {
        panic!("expected a final result")
    };
    let structured = result.structured_content.clone().expect("structured");
    assert_eq!(structured["outcome"], json!("action_not_executed"));
    assert!(
        structured["actionReview"]["fields"].is_array(),
        "the declined action is described"
    );
    assert!(texts(&result).iter().any(|t| t.contains("NOT executed")));
    assert!(sim.sim.tickets().is_empty());
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn action_review_through_legacy_elicitation_accept_and_decline() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    let mut accepting = TestClient::new(caps.clone(), ProtocolVersion::V_2025_11_25);
    accepting.answer = json!({"summary": "Battery", "priority": "LOW"});
    let client = over_stdio(accepting, &sim, &dir.path().join("a.db"), &[], &[]).await;
    let result = client
        .call_tool(call("QBusinessQueryTool", ticket_query()))
        .await
        .expect("call");
    assert!(
        texts(&result)[0].starts_with("Qbiz response: Created ticket NWR-"),
        "{result:?}"
    );
    client.cancel().await.expect("close");

    let mut declining = TestClient::new(caps, ProtocolVersion::V_2025_11_25);
    declining.action = ElicitationAction::Decline;
    let client = over_stdio(declining, &sim, &dir.path().join("b.db"), &[], &[]).await;
    let result = client
        .call_tool(call("QBusinessQueryTool", ticket_query()))
        .await
        .expect("call");
    assert_eq!(
        result.structured_content.clone().expect("structured")["outcome"],
        json!("action_not_executed"),
        "{result:?}"
    );
    assert_eq!(
        sim.sim.tickets().len(),
        1,
        "only the accepted action made a ticket"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn client_that_cannot_answer_gets_the_pending_action_described() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let client = over_stdio(legacy(), &sim, &dir.path().join("t.db"), &[], &[]).await;
    let result = client
        .call_tool(call("QBusinessQueryTool", ticket_query()))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(true));
    let pending = result.structured_content.clone().expect("structured");
    let requests = pending["inputRequests"].as_object().expect("inputRequests");
    let form = requests.values().next().expect("one request");
    let schema = &form["params"]["requestedSchema"];
    assert!(schema["properties"]["priority"].is_object(), "{pending}");
    assert!(texts(&result)[0].contains("Amazon Q Business wants to run a CUSTOM action"));
    assert!(sim.sim.tickets().is_empty());
    client.cancel().await.expect("close");
}

/// Asks the calendar plugin and waits for its sign-in request: the task id,
/// the request's key and the sign-in URL.
async fn sign_in_pending(client: &Client) -> (String, String, String) {
    let task = start_task(
        client,
        "QBusinessQueryTool",
        json!({"query": "What is my next meeting?", "plugin_id": SIGNIN_PLUGIN_ID}),
    )
    .await;
    let id = task.task.task_id;
    let TaskPayload::InputRequired { input_requests } = poll_until(client, &id, |p| {
        p.status() != rmcp::model::TaskStatus::Working
    })
    .await
    else {
        panic!("expected input_required")
    };
    let (key, request) = input_requests.iter().next().expect("request");
    let json = serde_json::to_value(request).expect("json");
    assert_eq!(json["params"]["mode"], json!("url"), "{json}");
    let url = json["params"]["url"].as_str().expect("url").to_owned();
    (id, key.clone(), url)
}

async fn accept_and_finish(client: &Client, id: &str, key: &str) -> serde_json::Map<String, Value> {
    let mut answer = BTreeMap::new();
    answer.insert(key.to_owned(), json!({"action": "accept"}));
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.to_owned(), answer))
        .await
        .expect("update");
    let TaskPayload::Completed { result } = poll_until(client, id, is_terminal).await else {
        panic!("expected completed")
    };
    result
}

#[tokio::test]
async fn sign_in_challenge_becomes_a_url_elicitation_then_the_answer() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(TestClient::tasks(), &sim, &dir.path().join("t.db")).await;
    let (id, key, url) = sign_in_pending(&client).await;
    // The user signs in in a browser.
    let page = reqwest::get(&url).await.expect("GET sign-in page");
    assert!(page.status().is_success());
    let result = accept_and_finish(&client, &id, &key).await;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Qbiz response: Your next meeting"),
        "{text}"
    );
    assert_eq!(result["structuredContent"]["outcome"], json!("answered"));
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn accepting_a_sign_in_that_did_not_happen_says_what_aws_leaves_undocumented() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, _server) = over_http(TestClient::tasks(), &sim, &dir.path().join("t.db")).await;
    let (id, key, _url) = sign_in_pending(&client).await;
    // Accepted without opening the link: Q Business asks again.
    let result = accept_and_finish(&client, &id, &key).await;
    assert_eq!(
        result["structuredContent"]["outcome"],
        json!("sign_in_not_seen"),
        "{result:?}"
    );
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("AWS does not document"), "{text}");
    assert!(
        result["structuredContent"]["conversationId"].is_string(),
        "the conversation is kept: {result:?}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn legacy_client_signs_in_through_url_elicitation() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let caps = ClientCapabilities::builder().enable_elicitation().build();
    let mut client = TestClient::new(caps, ProtocolVersion::V_2025_11_25);
    client.visit_urls = true;
    let seen = client.seen.clone();
    let client = over_stdio(client, &sim, &dir.path().join("t.db"), &[], &[]).await;
    let result = client
        .call_tool(call(
            "QBusinessQueryTool",
            json!({"query": "What is my next meeting?", "plugin_id": SIGNIN_PLUGIN_ID}),
        ))
        .await
        .expect("call");
    assert!(
        texts(&result)[0].starts_with("Qbiz response: Your next meeting"),
        "{result:?}"
    );
    let asked = seen.lock().expect("lock").elicitations.clone();
    assert!(asked.iter().any(|m| m.contains("sign in")), "{asked:?}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn every_chatsync_error_type_says_what_to_fix() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let client = over_stdio(legacy(), &sim, &dir.path().join("t.db"), &[], &[]).await;
    let cases: [(&[&str], &str, &str); 6] = [
        (
            &["ValidationException"],
            "ValidationException",
            "Invalid fields",
        ),
        (
            &["AccessDeniedException"],
            "AccessDeniedException",
            "qbusiness:ChatSync",
        ),
        (
            &["ResourceNotFoundException"],
            "ResourceNotFoundException",
            DEFAULT_APPLICATION_ID,
        ),
        (
            &["LicenseNotFoundException"],
            "LicenseNotFoundException",
            "subscription",
        ),
        (
            &["ExternalResourceException"],
            "ExternalResourceException",
            "data source or plugin",
        ),
        (&["ConflictException"], "ConflictException", "concurrently"),
    ];
    for (script, code, fix) in cases {
        sim.sim.faults().script(script.iter().copied());
        let result = client
            .call_tool(call("QBusinessQueryTool", ask("vacation days")))
            .await
            .expect("call");
        assert_eq!(result.is_error, Some(true), "{code}");
        let text = &texts(&result)[0];
        assert!(
            text.starts_with(&format!("Error: Amazon Q Business API error An error occurred ({code}) when calling the ChatSync operation: ")),
            "{text}"
        );
        assert!(text.contains(fix), "{code}: {text}");
    }
    // Throttled once, then answered: the SDK's retry absorbs it.
    sim.sim.faults().script(["ThrottlingException", "ok"]);
    let result = client
        .call_tool(call("QBusinessQueryTool", ask("vacation days")))
        .await
        .expect("call");
    assert_full_answer(&result);
    // Throttling and internal errors are transient: past the SDK's 3 attempts
    // the task retries the step later (same clientToken) and is answered.
    for code in ["ThrottlingException", "InternalServerException"] {
        sim.sim.faults().script([code; 3]);
        let result = client
            .call_tool(call("QBusinessQueryTool", ask("vacation days")))
            .await
            .expect("call");
        assert_full_answer(&result);
        assert_eq!(sim.sim.faults().pending_script(), 0, "{code}");
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn aws_profile_picks_credentials_from_the_shared_files() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = dir.path().join("credentials");
    std::fs::write(
        &credentials,
        format!(
            "[agentgate-test]\naws_access_key_id = {DEFAULT_ACCESS_KEY_ID}\n\
             aws_secret_access_key = {DEFAULT_SECRET_ACCESS_KEY}\n"
        ),
    )
    .expect("write credentials");
    let path = credentials.to_str().expect("utf8 path");
    let client = over_stdio(
        legacy(),
        &sim,
        &dir.path().join("t.db"),
        &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
        &[
            ("AWS_PROFILE", "agentgate-test"),
            ("AWS_SHARED_CREDENTIALS_FILE", path),
        ],
    )
    .await;
    let result = client
        .call_tool(call("QBusinessQueryTool", ask("vacation days")))
        .await
        .expect("call");
    assert_full_answer(&result);
    client.cancel().await.expect("close");
}

/// Variables to drop, variables to set, and the text the error must contain.
type EnvCase = (
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
    &'static str,
);

#[tokio::test]
async fn configuration_and_credential_problems_are_clear() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("t.db");
    // An endpoint that never answered since start is a setting to fix (the
    // last two cases); one that answered once and then went away is an
    // outage, retried: see tests/chaos.rs.
    let cases: [EnvCase; 8] = [
        (
            &["QBUSINESS_APPLICATION_ID"],
            &[],
            "Error: QBUSINESS_APPLICATION_ID environment variable is not set",
        ),
        (
            &["AWS_REGION"],
            &[],
            "Error: Failed to create Q Business client: AWS_REGION environment variable is not set",
        ),
        (
            &[],
            &[("AWS_SECRET_ACCESS_KEY", "wrong-secret")],
            "InvalidSignatureException",
        ),
        (
            &[],
            &[("AWS_ACCESS_KEY_ID", "AKIDUNKNOWN")],
            "UnrecognizedClientException",
        ),
        // Issue 33: a profile that does not exist is named, not blamed on
        // the instance metadata service.
        (
            &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
            &[
                ("AWS_PROFILE", "work"),
                ("AWS_EC2_METADATA_DISABLED", "true"),
            ],
            "AWS_PROFILE names the profile `work`, which neither ~/.aws/config nor \
             ~/.aws/credentials defines",
        ),
        // Half a key pair is named, not blamed on the instance metadata
        // service (the shared files point nowhere, so no profile helps).
        (
            &["AWS_SECRET_ACCESS_KEY"],
            &[
                ("AWS_EC2_METADATA_DISABLED", "true"),
                (
                    "AWS_SHARED_CREDENTIALS_FILE",
                    "/nonexistent/agentgate/credentials",
                ),
                ("AWS_CONFIG_FILE", "/nonexistent/agentgate/config"),
            ],
            "Error: no usable AWS credentials: AWS_ACCESS_KEY_ID is set but \
             AWS_SECRET_ACCESS_KEY is not",
        ),
        // `.invalid` never resolves (RFC 2606).
        (
            &[],
            &[("AWS_ENDPOINT_URL_QBUSINESS", "http://qbusiness.invalid")],
            "its host name does not resolve, and nothing has answered there since agentgate \
             started. Check AWS_REGION",
        ),
        // Nothing listens on loopback's port 1.
        (
            &[],
            &[("AWS_ENDPOINT_URL_QBUSINESS", "http://127.0.0.1:1")],
            "nothing accepts connections there (connection refused), and nothing has answered",
        ),
    ];
    for (drop, set, expected) in cases {
        let client = over_stdio(legacy(), &sim, &store, drop, set).await;
        // Without the application's settings the tool is not offered, but
        // a call by name still gets upstream's words for what is missing.
        let listed = client
            .list_all_tools()
            .await
            .expect("tools/list")
            .iter()
            .any(|tool| tool.name == "QBusinessQueryTool");
        let configured = !drop
            .iter()
            .any(|name| ["AWS_REGION", "QBUSINESS_APPLICATION_ID"].contains(name));
        assert_eq!(listed, configured, "listed without {drop:?}");
        let result = client
            .call_tool(call("QBusinessQueryTool", ask("vacation")))
            .await
            .expect("call");
        assert_eq!(result.is_error, Some(true));
        let text = &texts(&result)[0];
        assert!(text.contains(expected), "expected {expected:?} in {text}");
        assert!(
            !text.contains(DEFAULT_SECRET_ACCESS_KEY) && !text.contains("wrong-secret"),
            "no secrets: {text}"
        );
        client.cancel().await.expect("close");
    }
}

/// A shared gateway: two principals with bearer tokens, Alice mapped to a
/// Q Business user, Bob to none.
async fn shared_gateway(sim: &Sim, store: &Path) -> Gate {
    let config = "[auth]\nmode = \"tokens\"\n\
                  [[auth.tokens]]\nprincipal = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n\
                  [[auth.tokens]]\nprincipal = \"bob\"\ntoken_env = \"BOB_TOKEN\"\n\
                  [qbusiness.users.\"token:alice\"]\nuser_id = \"alice@corp.example\"\n\
                  user_groups = [\"Engineering\"]\n";
    gateway(
        sim,
        store,
        &[],
        &[("ALICE_TOKEN", "alice-secret"), ("BOB_TOKEN", "bob-secret")],
    )
    .config(config)
    .start()
    .await
}

#[tokio::test]
async fn a_principal_speaks_as_its_configured_identity_never_as_its_arguments_say() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = shared_gateway(&sim, &dir.path().join("t.db")).await;
    let alice = legacy().http_with_token(&server.url, "alice-secret").await;
    let bob = legacy().http_with_token(&server.url, "bob-secret").await;

    for (field, args) in [
        (
            "user_id",
            json!({"query": "salaries?", "user_id": "cfo@corp.example"}),
        ),
        (
            "user_groups",
            json!({"query": "salaries?", "user_groups": ["Finance-Admins"]}),
        ),
    ] {
        let refused = bob
            .call_tool(call("QBusinessQueryTool", args))
            .await
            .expect("call");
        assert_eq!(refused.is_error, Some(true), "{refused:?}");
        let text = &texts(&refused)[0];
        assert!(
            text.contains(&format!("`{field}`")) && text.contains("[qbusiness.users]"),
            "names the field and the setting: {text}"
        );
    }
    assert_eq!(sim.sim.stats().chat_sync_requests, 0, "nothing was sent");
    // Nor do the fields appear in the schema a model reads.
    let tools = bob.list_all_tools().await.expect("tools/list");
    let schema = &tools
        .iter()
        .find(|t| t.name == "QBusinessQueryTool")
        .expect("the tool")
        .input_schema;
    assert!(
        !schema["properties"]
            .as_object()
            .expect("properties")
            .contains_key("user_id")
    );

    let answered = alice
        .call_tool(call("QBusinessQueryTool", ask("How many vacation days?")))
        .await
        .expect("call");
    assert_full_answer(&answered);
    let answered = bob
        .call_tool(call("QBusinessQueryTool", ask("How many vacation days?")))
        .await
        .expect("call");
    assert_full_answer(&answered);
    let seen = sim.sim.stats().identities;
    assert_eq!(
        seen,
        vec![
            agentgate_sim::qbusiness::SeenIdentity {
                user_id: Some("alice@corp.example".into()),
                user_groups: vec!["Engineering".into()],
                session_user: None,
            },
            agentgate_sim::qbusiness::SeenIdentity::default(),
        ],
        "on the wire: Alice as her mapped user, Bob as nobody in particular"
    );
    alice.cancel().await.expect("close");
    bob.cancel().await.expect("close");
}

#[tokio::test]
async fn another_principals_conversation_is_refused_exactly_like_an_unknown_one() {
    // No user ids at all (the seed's anonymous application): upstream
    // cannot tell the principals apart, so agentgate must.
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = "[auth]\nmode = \"tokens\"\n\
                  [[auth.tokens]]\nprincipal = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n\
                  [[auth.tokens]]\nprincipal = \"bob\"\ntoken_env = \"BOB_TOKEN\"\n";
    let server = gateway(
        &sim,
        &dir.path().join("t.db"),
        &[],
        &[("ALICE_TOKEN", "alice-secret"), ("BOB_TOKEN", "bob-secret")],
    )
    .config(config)
    .start()
    .await;
    let alice = legacy().http_with_token(&server.url, "alice-secret").await;
    let bob = legacy().http_with_token(&server.url, "bob-secret").await;

    let first = alice
        .call_tool(call("QBusinessQueryTool", ask("How many vacation days?")))
        .await
        .expect("call");
    let structured = assert_full_answer(&first);
    let conversation = structured["conversationId"]
        .as_str()
        .expect("id")
        .to_owned();
    let parent = structured["systemMessageId"]
        .as_str()
        .expect("id")
        .to_owned();
    let follow_up = |conversation: &str| {
        json!({"query": "And can unused days be carried over?",
               "conversation_id": conversation, "parent_message_id": parent})
    };
    let sent_before = sim.sim.stats().chat_sync_requests;

    let hers = bob
        .call_tool(call("QBusinessQueryTool", follow_up(&conversation)))
        .await
        .expect("call");
    let unknown = "c0ffee00-0000-4000-8000-000000000000";
    let nobodys = bob
        .call_tool(call("QBusinessQueryTool", follow_up(unknown)))
        .await
        .expect("call");
    assert_eq!(hers.is_error, Some(true), "{hers:?}");
    assert_eq!(nobodys.is_error, Some(true), "{nobodys:?}");
    assert_eq!(
        texts(&hers)[0],
        texts(&nobodys)[0].replace(unknown, &conversation),
        "the same answer, but for the id it echoes"
    );
    assert!(texts(&hers)[0].contains("`conversation_id`"), "{hers:?}");
    assert_eq!(
        sim.sim.stats().chat_sync_requests,
        sent_before,
        "neither reached Q Business"
    );

    // Alice herself continues it.
    let hers = alice
        .call_tool(call("QBusinessQueryTool", follow_up(&conversation)))
        .await
        .expect("call");
    assert_ne!(hers.is_error, Some(true), "{hers:?}");
    assert_eq!(
        hers.structured_content.expect("structured")["conversationId"],
        json!(conversation)
    );
    alice.cancel().await.expect("close");
    bob.cancel().await.expect("close");
}

#[tokio::test]
async fn a_rejected_aws_credential_is_warned_about_once_and_counted() {
    let sim = start_sim().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = gateway(
        &sim,
        &dir.path().join("t.db"),
        &[],
        &[("AWS_ACCESS_KEY_ID", "AKIDUNKNOWN"), ("RUST_LOG", "info")],
    )
    .start()
    .await;
    let client = legacy().http(&server.url).await;
    for _ in 0..2 {
        let result = client
            .call_tool(call("QBusinessQueryTool", ask("vacation")))
            .await
            .expect("call");
        assert_eq!(result.is_error, Some(true), "{result:?}");
    }
    client.cancel().await.expect("close");
    let metrics = reqwest::get(server.url.replace("/mcp", "/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("agentgate_upstream_calls_total")
                && l.contains("backend=\"qbusiness\"")
                && l.contains("outcome=\"rejected\"")),
        "{metrics}"
    );
    let log = server.stderr();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("rejected the gateway's credential"))
        .collect();
    assert_eq!(warnings.len(), 1, "once, not per call: {log}");
    assert!(
        warnings[0].contains("WARN") && warnings[0].contains("qbusiness"),
        "{}",
        warnings[0]
    );
    assert!(
        !log.contains(DEFAULT_SECRET_ACCESS_KEY),
        "no secret in the log"
    );
}
