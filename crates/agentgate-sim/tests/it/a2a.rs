//! The A2A emulator over real HTTP: every scripted agent, the version and token
//! checks, cancel, input and auth round trips, streaming, faults and exactly-once by
//! messageId. Every answer (card, JSON-RPC bodies, SSE events) is held to the
//! vendored `a2a.proto` by the strict validator of `agentgate_testkit::contracts`.

use std::time::Duration;

use agentgate_sim::a2a::{A2aConfig, A2aSim, AGENT_CARD_PATH, Skill, serve};
use agentgate_testkit::contracts::{A2aContract, a2a};
use base64::Engine as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A running emulator; stops when dropped.
struct Harness {
    sim: A2aSim,
    base: String,
    http: reqwest::Client,
    token: Option<String>,
    shutdown: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start() -> Harness {
    start_with(A2aConfig {
        step_delay: Duration::from_millis(5),
        ..A2aConfig::default()
    })
    .await
}

async fn start_with(config: A2aConfig) -> Harness {
    let token = config.token.clone();
    let sim = A2aSim::new(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(listener, sim.router(), shutdown.clone()));
    Harness {
        sim,
        base,
        http: reqwest::Client::new(),
        token,
        shutdown,
    }
}

fn assert_conforms(method: &str, body: &Value) {
    let problems = a2a().response_problems(method, body);
    assert!(problems.is_empty(), "{method}: {problems:?}\n{body:#}");
}

/// A user message; `metadata` may select the skill.
fn message(id: &str, text: &str, metadata: Option<Value>) -> Value {
    let mut message = json!({
        "messageId": id,
        "role": "ROLE_USER",
        "parts": [{ "text": text }],
    });
    if let Some(metadata) = metadata {
        message["metadata"] = metadata;
    }
    message
}

fn new_id() -> String {
    format!("msg-{}", rand_suffix())
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Harness {
    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let request = self
            .http
            .post(format!("{}/", self.base))
            .header("A2A-Version", "1.0")
            .json(body);
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// One JSON-RPC call answered with HTTP 200; the body, checked against the contract.
    async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
        let response = self.post(&body).send().await.expect("POST");
        assert_eq!(response.status(), 200, "{method}");
        let body: Value = response.json().await.expect("JSON body");
        assert_conforms(method, &body);
        assert_eq!(body["id"], 7);
        body
    }

    async fn result(&self, method: &str, params: Value) -> Value {
        let body = self.rpc(method, params).await;
        assert!(body.get("error").is_none(), "{method}: {body:#}");
        body["result"].clone()
    }

    async fn error_code(&self, method: &str, params: Value) -> i64 {
        let body = self.rpc(method, params).await;
        body["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method}: expected an error, got {body:#}"))
    }

    /// A blocking SendMessage whose answer is a task.
    async fn send(&self, message: Value) -> Value {
        let result = self
            .result("SendMessage", json!({ "message": message }))
            .await;
        result["task"].clone()
    }

    async fn get_task(&self, id: &str, history_length: Option<i32>) -> Value {
        let mut params = json!({ "id": id });
        if let Some(n) = history_length {
            params["historyLength"] = json!(n);
        }
        self.result("GetTask", params).await
    }

    /// An SSE call read to its end: the events' `result`s, each checked, and whether
    /// the body ended cleanly.
    async fn stream(&self, method: &str, params: Value) -> (Vec<Value>, bool) {
        let body = json!({ "jsonrpc": "2.0", "id": "s1", "method": method, "params": params });
        let mut response = self.post(&body).send().await.expect("POST");
        assert_eq!(response.status(), 200);
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        let mut text = String::new();
        let clean = loop {
            match response.chunk().await {
                Ok(Some(chunk)) => text.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(None) => break true,
                Err(_) => break false,
            }
        };
        let events = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| {
                let event: Value = serde_json::from_str(data.trim()).expect("event JSON");
                assert_conforms(method, &event);
                assert_eq!(event["id"], "s1");
                event["result"].clone()
            })
            .collect();
        (events, clean)
    }
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn skill(id: &str) -> Option<Value> {
    Some(json!({ "skill": id }))
}

#[tokio::test]
async fn the_agent_card_follows_the_contract_and_lists_every_skill() {
    let h = start().await;
    let card: Value = h
        .http
        .get(format!("{}{AGENT_CARD_PATH}", h.base))
        .send()
        .await
        .expect("GET card")
        .json()
        .await
        .expect("card JSON");
    let problems = a2a().problems("AgentCard", &card);
    assert!(problems.is_empty(), "{problems:?}\n{card:#}");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{}/", h.base)
    );
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    let ids: Vec<&str> = card["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, Skill::ALL.map(Skill::id));
    assert!(card.get("securitySchemes").is_none());
}

#[tokio::test]
async fn a_request_without_a2a_version_is_taken_as_0_3_and_refused() {
    let h = start().await;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": { "id": "x" } });
    for version in [None, Some("0.3"), Some("1.1")] {
        let mut request = h.http.post(format!("{}/", h.base)).json(&body);
        if let Some(v) = version {
            request = request.header("A2A-Version", v);
        }
        let answer: Value = request
            .send()
            .await
            .expect("POST")
            .json()
            .await
            .expect("JSON");
        assert_conforms("GetTask", &answer);
        assert_eq!(answer["error"]["code"], -32009, "{version:?}: {answer}");
    }
    // The query parameter of §3.6.1 counts too; then the task is simply unknown.
    let answer: Value = h
        .http
        .post(format!("{}/?A2A-Version=1.0", h.base))
        .json(&body)
        .send()
        .await
        .expect("POST")
        .json()
        .await
        .expect("JSON");
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    assert_eq!(h.sim.stats().rpc_requests, 1);
}

#[tokio::test]
async fn the_bearer_token_is_required_when_set_and_the_card_declares_it() {
    let h = start_with(A2aConfig {
        token: Some("a2a-test-token".into()),
        ..A2aConfig::default()
    })
    .await;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": { "id": "x" } });
    for auth in [None, Some("Bearer wrong")] {
        let mut request = h
            .http
            .post(format!("{}/", h.base))
            .header("A2A-Version", "1.0")
            .json(&body);
        if let Some(auth) = auth {
            request = request.header("Authorization", auth);
        }
        let response = request.send().await.expect("POST");
        assert_eq!(response.status(), 401, "{auth:?}");
        assert!(response.headers().contains_key("www-authenticate"));
        let text = response.text().await.expect("body");
        assert!(!text.contains("a2a-test-token"), "{text}");
    }
    assert_eq!(h.error_code("GetTask", json!({ "id": "x" })).await, -32001);
    let card: Value = h
        .http
        .get(format!("{}{AGENT_CARD_PATH}", h.base))
        .send()
        .await
        .expect("GET card")
        .json()
        .await
        .expect("card");
    assert!(a2a().problems("AgentCard", &card).is_empty());
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
}

#[tokio::test]
async fn quick_answer_completes_with_text_data_and_file_parts_and_history_is_trimmed() {
    let h = start().await;
    let id = new_id();
    let task = h.send(message(&id, "what is six times seven?", None)).await;
    assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task:#}");
    let parts = &task["artifacts"][0]["parts"];
    assert_eq!(parts[0]["text"], "The answer is 42.");
    assert_eq!(parts[1]["data"]["answer"], 42);
    assert_eq!(parts[2]["filename"], "answer.txt");
    let file = base64::engine::general_purpose::STANDARD
        .decode(parts[2]["raw"].as_str().expect("raw"))
        .expect("base64");
    assert!(String::from_utf8_lossy(&file).contains("six times seven"));
    assert_eq!(task["history"][0]["messageId"], id);
    assert_eq!(task["history"][0]["taskId"], task["id"]);

    let task_id = task["id"].as_str().expect("id");
    let all = h.get_task(task_id, None).await;
    let history = all["history"].as_array().expect("history").len();
    assert!(history >= 2, "{all:#}");
    let none = h.get_task(task_id, Some(0)).await;
    assert!(none.get("history").is_none(), "{none:#}");
    let last = h.get_task(task_id, Some(1)).await;
    assert_eq!(last["history"].as_array().expect("history").len(), 1);
    assert_eq!(last["history"][0], all["history"][history - 1]);
    assert_eq!(
        h.error_code("GetTask", json!({ "id": task_id, "historyLength": -1 }))
            .await,
        -32602
    );
}

#[tokio::test]
async fn direct_message_answers_with_a_message_and_no_task() {
    let h = start().await;
    let result = h
        .result(
            "SendMessage",
            json!({ "message": message(&new_id(), "direct-message hello", None) }),
        )
        .await;
    assert!(result.get("task").is_none(), "{result:#}");
    assert_eq!(result["message"]["role"], "ROLE_AGENT");
    assert!(
        result["message"]["parts"][0]["text"]
            .as_str()
            .expect("text")
            .contains("hello")
    );
    let listed = h.result("ListTasks", json!({})).await;
    assert_eq!(listed["totalSize"], 0);
}

#[tokio::test]
async fn ask_input_asks_and_the_next_message_in_the_task_answers() {
    let h = start().await;
    let task = h
        .send(message(&new_id(), "greet me", skill("ask-input")))
        .await;
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task:#}");
    assert!(status_text(&task).contains("name"), "{task:#}");
    let task_id = task["id"].as_str().expect("id").to_owned();
    let context_id = task["contextId"].as_str().expect("contextId").to_owned();

    let mut wrong_context = message(&new_id(), "Ada", None);
    wrong_context["taskId"] = json!(task_id);
    wrong_context["contextId"] = json!("another-context");
    assert_eq!(
        h.error_code("SendMessage", json!({ "message": wrong_context }))
            .await,
        -32602
    );
    let mut unknown = message(&new_id(), "Ada", None);
    unknown["taskId"] = json!("no-such-task");
    assert_eq!(
        h.error_code("SendMessage", json!({ "message": unknown }))
            .await,
        -32001
    );

    let mut reply = message(&new_id(), "Ada", None);
    reply["taskId"] = json!(task_id);
    reply["contextId"] = json!(context_id);
    let done = h.send(reply).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done:#}");
    assert_eq!(done["id"], task_id.as_str());
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "Hello, Ada!");

    let mut late = message(&new_id(), "again", None);
    late["taskId"] = json!(task_id);
    assert_eq!(
        h.error_code("SendMessage", json!({ "message": late }))
            .await,
        -32004
    );
}

#[tokio::test]
async fn needs_auth_waits_for_the_sign_in_url_and_keeps_the_stream_open() {
    let h = start().await;
    let task = h
        .send(message(&new_id(), "needs-auth read my calendar", None))
        .await;
    assert_eq!(state(&task), "TASK_STATE_AUTH_REQUIRED", "{task:#}");
    let task_id = task["id"].as_str().expect("id").to_owned();
    let text = status_text(&task);
    let url = text
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {text:?}"))
        .to_owned();
    assert_eq!(url, format!("{}/auth/{task_id}", h.base));

    // A message meanwhile is taken (§7.6.1) and the agent still waits.
    let mut meanwhile = message(&new_id(), "what do you need?", None);
    meanwhile["taskId"] = json!(task_id);
    let still = h.send(meanwhile).await;
    assert_eq!(state(&still), "TASK_STATE_AUTH_REQUIRED");

    let body = json!({ "jsonrpc": "2.0", "id": "s1", "method": "SubscribeToTask", "params": { "id": task_id } });
    let mut stream = h.post(&body).send().await.expect("subscribe");
    assert_eq!(stream.status(), 200);
    // The subscription exists once the headers are back; now sign in.
    let signed = h.http.get(&url).send().await.expect("sign in");
    assert_eq!(signed.status(), 200);
    let mut text = String::new();
    while let Some(chunk) = stream.chunk().await.expect("stream") {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).expect("event"))
        .collect();
    for event in &events {
        assert_conforms("SubscribeToTask", event);
    }
    assert_eq!(
        state(&events[0]["result"]["task"]),
        "TASK_STATE_AUTH_REQUIRED"
    );
    let last = &events[events.len() - 1]["result"]["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED", "{text}");
    assert!(
        events
            .iter()
            .any(|e| e["result"]["artifactUpdate"]["artifact"]["name"] == "calendar")
    );
    // The URL is spent.
    let again = h.http.get(&url).send().await.expect("sign in again");
    assert_eq!(again.status(), 404);
}

#[tokio::test]
async fn long_running_streams_a_task_then_progress_then_the_artifact_then_completion() {
    let h = start().await;
    let (events, clean) = h
        .stream(
            "SendStreamingMessage",
            json!({ "message": message(&new_id(), "long-running", Some(json!({ "steps": 3 }))) }),
        )
        .await;
    assert!(clean);
    assert_eq!(state(&events[0]["task"]), "TASK_STATE_SUBMITTED");
    let texts: Vec<String> = events
        .iter()
        .filter_map(|e| e["statusUpdate"]["status"]["message"]["parts"][0]["text"].as_str())
        .map(str::to_owned)
        .collect();
    assert_eq!(
        texts,
        [
            "Starting 3 steps.",
            "step 1/3",
            "step 2/3",
            "step 3/3",
            "Done."
        ]
    );
    let n = events.len();
    assert_eq!(
        events[n - 2]["artifactUpdate"]["artifact"]["name"],
        "report"
    );
    assert_eq!(
        events[n - 1]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let task_id = events[0]["task"]["id"].as_str().expect("id");
    assert!(events.iter().skip(1).all(|e| {
        let update = e
            .get("statusUpdate")
            .or_else(|| e.get("artifactUpdate"))
            .expect("update");
        update["taskId"] == task_id
    }));
    // A finished task cannot be subscribed to (§9.4.6).
    assert_eq!(
        h.error_code("SubscribeToTask", json!({ "id": task_id }))
            .await,
        -32004
    );
}

#[tokio::test]
async fn a_streamed_direct_message_is_one_event() {
    let h = start().await;
    let (events, clean) = h
        .stream(
            "SendStreamingMessage",
            json!({ "message": message(&new_id(), "hi", skill("direct-message")) }),
        )
        .await;
    assert!(clean);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["message"]["role"], "ROLE_AGENT");
}

#[tokio::test]
async fn cancel_cancels_a_long_task_and_refuses_for_refuses_cancel_and_ended_tasks() {
    let h = start_with(A2aConfig {
        step_delay: Duration::from_secs(3600),
        ..A2aConfig::default()
    })
    .await;
    let nonblocking = |text: &str| json!({ "message": message(&new_id(), text, None), "configuration": { "returnImmediately": true } });
    let task = h.result("SendMessage", nonblocking("long-running")).await["task"].clone();
    let task_id = task["id"].as_str().expect("id");
    let canceled = h.result("CancelTask", json!({ "id": task_id })).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED", "{canceled:#}");
    assert_eq!(
        state(&h.get_task(task_id, None).await),
        "TASK_STATE_CANCELED"
    );
    assert_eq!(
        h.error_code("CancelTask", json!({ "id": task_id })).await,
        -32002
    );

    let stubborn = h.result("SendMessage", nonblocking("refuses-cancel")).await["task"].clone();
    let stubborn_id = stubborn["id"].as_str().expect("id");
    let body = h.rpc("CancelTask", json!({ "id": stubborn_id })).await;
    assert_eq!(body["error"]["code"], -32002, "{body:#}");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("refuses-cancel")
    );
    let still = h.get_task(stubborn_id, None).await;
    assert!(
        matches!(state(&still), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"),
        "{still:#}"
    );
    assert_eq!(
        h.error_code("CancelTask", json!({ "id": "no-such-task" }))
            .await,
        -32001
    );
}

#[tokio::test]
async fn fails_and_rejects_end_in_their_states_with_a_reason() {
    let h = start().await;
    let failed = h.send(message(&new_id(), "fails", None)).await;
    assert_eq!(state(&failed), "TASK_STATE_FAILED");
    assert!(status_text(&failed).contains("failure"));
    let rejected = h.send(message(&new_id(), "x", skill("rejects"))).await;
    assert_eq!(state(&rejected), "TASK_STATE_REJECTED");
    assert!(!status_text(&rejected).is_empty());
}

#[tokio::test]
async fn list_tasks_filters_pages_newest_first_and_omits_artifacts_by_default() {
    let h = start().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let mut m = message(&new_id(), &format!("question {i}"), None);
        m["contextId"] = json!("ctx-list");
        ids.push(h.send(m).await["id"].as_str().expect("id").to_owned());
    }
    h.send(message(&new_id(), "fails", None)).await;

    let first = h
        .result(
            "ListTasks",
            json!({ "contextId": "ctx-list", "pageSize": 2 }),
        )
        .await;
    assert_eq!(first["totalSize"], 3);
    assert_eq!(first["pageSize"], 2);
    let page: Vec<&str> = first["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(page, [ids[2].as_str(), ids[1].as_str()]);
    assert!(first["tasks"][0].get("artifacts").is_none());
    let token = first["nextPageToken"].as_str().expect("token");
    assert!(!token.is_empty());
    let second = h
        .result(
            "ListTasks",
            json!({ "contextId": "ctx-list", "pageSize": 2, "pageToken": token, "includeArtifacts": true }),
        )
        .await;
    assert_eq!(second["tasks"][0]["id"], ids[0].as_str());
    assert_eq!(second["nextPageToken"], "");
    assert!(second["tasks"][0]["artifacts"].is_array());

    let failed = h
        .result("ListTasks", json!({ "status": "TASK_STATE_FAILED" }))
        .await;
    assert_eq!(failed["totalSize"], 1);
    assert_eq!(
        h.error_code("ListTasks", json!({ "status": "failed" }))
            .await,
        -32602
    );
    assert_eq!(
        h.error_code("ListTasks", json!({ "pageToken": "bogus" }))
            .await,
        -32602
    );
}

#[tokio::test]
async fn a_repeated_message_id_starts_nothing_new() {
    let h = start().await;
    let id = new_id();
    let first = h.send(message(&id, "quick", None)).await;
    let again = h.send(message(&id, "quick", None)).await;
    assert_eq!(first["id"], again["id"]);
    let (events, _) = h
        .stream(
            "SendStreamingMessage",
            json!({ "message": message(&id, "quick", None) }),
        )
        .await;
    assert_eq!(events[0]["task"]["id"], first["id"]);
    let stats = h.sim.stats();
    assert_eq!(stats.sends_by_message_id(&id), 3);
    assert_eq!(stats.effects_by_message_id(&id), 1);
    assert_eq!(h.result("ListTasks", json!({})).await["totalSize"], 1);
}

#[tokio::test]
async fn without_deduplication_a_repeated_message_id_runs_again_and_the_counter_shows_it() {
    let h = start_with(A2aConfig {
        dedupe_message_ids: false,
        step_delay: Duration::from_millis(5),
        ..A2aConfig::default()
    })
    .await;
    let id = new_id();
    let first = h.send(message(&id, "quick", None)).await;
    let again = h.send(message(&id, "quick", None)).await;
    assert_ne!(first["id"], again["id"]);
    assert_eq!(h.sim.stats().effects_by_message_id(&id), 2);
    assert_eq!(h.sim.stats().max_effects_per_message_id(), 2);
}

#[tokio::test]
async fn injected_503s_do_nothing_and_a_lost_answer_is_recovered_by_resending_the_message_id() {
    let h = start().await;
    let id = new_id();
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": { "message": message(&id, "quick", None) } });

    h.sim.faults().fail_next(2);
    for _ in 0..2 {
        let response = h.post(&body).send().await.expect("POST");
        assert_eq!(response.status(), 503);
        let answer: Value = response.json().await.expect("JSON");
        assert_conforms("SendMessage", &answer);
    }
    assert_eq!(h.sim.stats().effects_by_message_id(&id), 0);
    assert_eq!(h.sim.stats().faults_injected, 2);

    h.sim.faults().lose_next_answers(1);
    let response = h.post(&body).send().await.expect("POST");
    assert_eq!(response.status(), 500);
    assert_eq!(h.sim.stats().answers_lost, 1);
    // The effect happened: the retry with the same messageId gets the same task.
    assert_eq!(h.sim.stats().effects_by_message_id(&id), 1);
    let task = h.send(message(&id, "quick", None)).await;
    assert_eq!(state(&task), "TASK_STATE_COMPLETED");
    let stats = h.sim.stats();
    assert_eq!(stats.effects_by_message_id(&id), 1);
    assert_eq!(stats.max_effects_per_message_id(), 1);
    assert_eq!(h.result("ListTasks", json!({})).await["totalSize"], 1);
}

/// Reads SSE `data:` events from `response` until `n` arrived; each checked.
async fn read_events(response: &mut reqwest::Response, method: &str, n: usize) -> Vec<Value> {
    let mut text = String::new();
    loop {
        let events: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| serde_json::from_str(d.trim()).expect("event"))
            .collect();
        if events.len() >= n {
            for event in &events {
                assert_conforms(method, event);
            }
            return events;
        }
        let chunk = response
            .chunk()
            .await
            .expect("stream")
            .unwrap_or_else(|| panic!("the stream ended after {} events", events.len()));
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// Reads `response` to its end: the rest of the text, and whether it ended cleanly.
async fn read_rest(response: &mut reqwest::Response) -> (String, bool) {
    let mut text = String::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => text.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(None) => return (text, true),
            Err(_) => return (text, false),
        }
    }
}

#[tokio::test]
async fn a_dropped_stream_ends_unclean_while_the_task_and_other_streams_go_on() {
    // Steps that never come: the task stays WORKING until canceled.
    let h = start_with(A2aConfig {
        step_delay: Duration::from_secs(3600),
        ..A2aConfig::default()
    })
    .await;
    h.sim.faults().drop_next_streams(1, 2);
    let send = json!({ "jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage",
                       "params": { "message": message(&new_id(), "long-running", None) } });
    let mut dropped = h.post(&send).send().await.expect("stream");
    let events = read_events(&mut dropped, "SendStreamingMessage", 2).await;
    assert_eq!(h.sim.stats().streams_dropped, 1);
    let task_id = events[0]["result"]["task"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(
        events[1]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );

    // A second stream of the same task starts from a fresh snapshot, still working.
    let subscribe = json!({ "jsonrpc": "2.0", "id": "s1", "method": "SubscribeToTask", "params": { "id": task_id } });
    let mut second = h.post(&subscribe).send().await.expect("subscribe");
    let first = read_events(&mut second, "SubscribeToTask", 1).await;
    assert_eq!(state(&first[0]["result"]["task"]), "TASK_STATE_WORKING");

    // The next event (the cancel) cuts the first stream and reaches the second.
    let canceled = h.result("CancelTask", json!({ "id": task_id })).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    let (rest, clean) = read_rest(&mut dropped).await;
    assert!(
        !clean,
        "the cut stream must end with an error, got {rest:?}"
    );
    assert!(!rest.contains("data:"), "no event after the cut: {rest:?}");
    let (rest, clean) = read_rest(&mut second).await;
    assert!(clean, "{rest}");
    let last: Value = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).expect("event"))
        .next_back()
        .expect("an event after the snapshot");
    assert_conforms("SubscribeToTask", &last);
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
}

#[tokio::test]
async fn bad_requests_get_json_rpc_errors_naming_the_field() {
    let h = start().await;
    let mut unknown_field = message(&new_id(), "hi", None);
    unknown_field["kind"] = json!("message");
    let body = h
        .rpc("SendMessage", json!({ "message": unknown_field }))
        .await;
    assert_eq!(body["error"]["code"], -32602);
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("kind"),
        "{body:#}"
    );
    let mut no_id = message("", "hi", None);
    no_id["messageId"] = json!("");
    assert_eq!(
        h.error_code("SendMessage", json!({ "message": no_id }))
            .await,
        -32602
    );
    let mut agent_role = message(&new_id(), "hi", None);
    agent_role["role"] = json!("ROLE_AGENT");
    assert_eq!(
        h.error_code("SendMessage", json!({ "message": agent_role }))
            .await,
        -32602
    );
    assert_eq!(
        h.error_code(
            "SendMessage",
            json!({ "message": message(&new_id(), "hi", skill("nope")) })
        )
        .await,
        -32602
    );
    assert_eq!(
        h.error_code(
            "SendMessage",
            json!({ "message": message(&new_id(), "hi", None),
                    "configuration": { "taskPushNotificationConfig": { "url": "http://127.0.0.1:1/" } } })
        )
        .await,
        -32003
    );
    assert_eq!(
        h.error_code(
            "CreateTaskPushNotificationConfig",
            json!({ "taskId": "t", "url": "http://127.0.0.1:1/" })
        )
        .await,
        -32003
    );
    assert_eq!(
        h.error_code("GetExtendedAgentCard", json!({})).await,
        -32004
    );
    // Method names of 0.3 are gone in 1.0.
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {} });
    let answer: Value = h
        .post(&body)
        .send()
        .await
        .expect("POST")
        .json()
        .await
        .expect("JSON");
    assert_eq!(answer["error"]["code"], -32601);
    let answer: Value = h
        .http
        .post(format!("{}/", h.base))
        .header("A2A-Version", "1.0")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("POST")
        .json()
        .await
        .expect("JSON");
    assert_eq!(answer["error"]["code"], -32700);
    assert!(answer["id"].is_null());
}

#[test]
fn the_validator_knows_every_method_the_emulator_serves() {
    for method in [
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ] {
        let result = A2aContract::result_message(method).expect("known");
        assert!(a2a().message(result).is_some(), "{result}");
        let params = A2aContract::params_message(method).expect("known");
        assert!(a2a().message(params).is_some(), "{params}");
    }
}

fn oauth_config() -> A2aConfig {
    A2aConfig {
        step_delay: Duration::from_millis(5),
        oauth: Some(agentgate_sim::a2a::OAuthClient {
            client_id: "client-1".into(),
            client_secret: "s3cret&=:".into(),
            token_ttl: Duration::from_secs(60),
        }),
        ..A2aConfig::default()
    }
}

/// RFC 6749 §2.3.1: Basic credentials are the form-urlencoded id and secret.
fn basic(id: &str, secret: &str) -> String {
    let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", encode(id), encode(secret)))
}

#[tokio::test]
async fn the_oauth_card_names_a_token_endpoint_whose_tokens_json_rpc_takes() {
    let mut h = start_with(oauth_config()).await;
    let card: Value = h
        .http
        .get(format!("{}{AGENT_CARD_PATH}", h.base))
        .send()
        .await
        .expect("GET card")
        .json()
        .await
        .expect("card");
    assert!(a2a().problems("AgentCard", &card).is_empty(), "{card:#}");
    let flow =
        &card["securitySchemes"]["oauth"]["oauth2SecurityScheme"]["flows"]["clientCredentials"];
    let token_url = flow["tokenUrl"].as_str().expect("tokenUrl").to_owned();
    assert_eq!(
        token_url,
        format!("{}{}", h.base, agentgate_sim::a2a::TOKEN_PATH)
    );
    assert_eq!(
        card["securityRequirements"][0]["schemes"]["oauth"]["list"][0],
        agentgate_sim::a2a::OAUTH_SCOPE
    );

    let token = |secret: &'static str, body: &'static str| {
        let http = h.http.clone();
        let url = token_url.clone();
        async move {
            http.post(url)
                .header(
                    "Authorization",
                    format!("Basic {}", basic("client-1", secret)),
                )
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await
                .expect("POST token")
        }
    };
    let granted = token(
        "s3cret&=:",
        "grant_type=client_credentials&scope=a2a.invoke",
    )
    .await;
    assert_eq!(granted.status(), 200);
    assert_eq!(
        granted
            .headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("no-store"),
        "§5.1: tokens are not cached by intermediaries"
    );
    let granted: Value = granted.json().await.expect("JSON");
    assert_eq!(granted["token_type"], "Bearer");
    assert_eq!(granted["expires_in"], 60);
    let access = granted["access_token"]
        .as_str()
        .expect("a token")
        .to_owned();

    let refused = token("wrong", "grant_type=client_credentials").await;
    assert_eq!(refused.status(), 401);
    assert!(refused.headers().contains_key("www-authenticate"));
    let refused: Value = refused.json().await.expect("JSON");
    assert_eq!(refused["error"], "invalid_client");
    let bad_grant = token("s3cret&=:", "grant_type=authorization_code").await;
    assert_eq!(bad_grant.status(), 400);
    let bad_grant: Value = bad_grant.json().await.expect("JSON");
    assert_eq!(bad_grant["error"], "unsupported_grant_type");

    // JSON-RPC with the access token; none, or a revoked one, is 401.
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": { "id": "x" } });
    assert_eq!(h.post(&body).send().await.expect("POST").status(), 401);
    h.token = Some(access);
    assert_eq!(h.error_code("GetTask", json!({ "id": "x" })).await, -32001);
    h.sim.revoke_tokens();
    assert_eq!(h.post(&body).send().await.expect("POST").status(), 401);
    let stats = h.sim.stats();
    assert_eq!(stats.tokens_issued, 1);
    assert_eq!(stats.token_errors, 2);
    assert_eq!(stats.unauthorized, 2);
}

/// A webhook on a port of its own that records what it receives and
/// answers `status`.
async fn webhook(
    status: u16,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(axum::http::HeaderMap, Value)>>>,
    CancellationToken,
) {
    let seen: std::sync::Arc<std::sync::Mutex<Vec<(axum::http::HeaderMap, Value)>>> =
        std::sync::Arc::default();
    let kept = seen.clone();
    let router = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    kept.lock().expect("lock").push((headers, body));
                    axum::http::StatusCode::from_u16(status).expect("status")
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, router, stop.clone()));
    (url, seen, stop)
}

#[tokio::test]
async fn push_notifications_deliver_every_update_in_order_with_the_configured_auth() {
    let h = start_with(A2aConfig {
        step_delay: Duration::from_millis(5),
        push_notifications: true,
        ..A2aConfig::default()
    })
    .await;
    let (url, seen, stop) = webhook(204).await;
    let result = h
        .result(
            "SendMessage",
            json!({
                "message": message(&new_id(), "work", Some(json!({ "skill": "long-running", "steps": 2 }))),
                "configuration": {
                    "returnImmediately": true,
                    "taskPushNotificationConfig": {
                        "url": url, "token": "tok-1",
                        "authentication": { "scheme": "Bearer", "credentials": "cred-1" },
                    },
                },
            }),
        )
        .await;
    let task_id = result["task"]["id"].as_str().expect("id").to_owned();
    let delivered = agentgate_testkit::eventually(
        "the completion to be pushed",
        Duration::from_secs(10),
        || {
            let seen = seen.lock().expect("lock").clone();
            seen.iter()
                .any(|(_, b)| b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
                .then_some(seen)
        },
    )
    .await;
    // Starting, step 1/2, step 2/2, the artifact, completed: in order.
    let kinds: Vec<String> = delivered
        .iter()
        .map(|(_, b)| {
            b["statusUpdate"]["status"]["state"]
                .as_str()
                .map_or_else(|| "artifact".to_owned(), str::to_owned)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "TASK_STATE_WORKING",
            "TASK_STATE_WORKING",
            "TASK_STATE_WORKING",
            "artifact",
            "TASK_STATE_COMPLETED"
        ],
        "{delivered:#?}"
    );
    for (headers, body) in &delivered {
        let problems = a2a().problems("StreamResponse", body);
        assert!(problems.is_empty(), "{problems:?}\n{body:#}");
        let header = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(header("authorization").as_deref(), Some("Bearer cred-1"));
        assert_eq!(header("x-a2a-notification-token").as_deref(), Some("tok-1"));
        assert_eq!(
            header("content-type").as_deref(),
            Some("application/a2a+json")
        );
        let id = body["statusUpdate"]["taskId"]
            .as_str()
            .or_else(|| body["artifactUpdate"]["taskId"].as_str());
        assert_eq!(id, Some(task_id.as_str()));
    }
    // The config methods answer per the contract.
    let listed = h
        .result(
            "ListTaskPushNotificationConfigs",
            json!({ "taskId": task_id }),
        )
        .await;
    let config_id = listed["configs"][0]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    assert_eq!(listed["configs"][0]["url"], url.as_str());
    h.result(
        "GetTaskPushNotificationConfig",
        json!({ "taskId": task_id, "id": config_id }),
    )
    .await;
    h.result(
        "DeleteTaskPushNotificationConfig",
        json!({ "taskId": task_id, "id": config_id }),
    )
    .await;
    let listed = h
        .result(
            "ListTaskPushNotificationConfigs",
            json!({ "taskId": task_id }),
        )
        .await;
    assert!(
        listed
            .get("configs")
            .is_none_or(|c| c.as_array().is_some_and(Vec::is_empty))
    );
    assert_eq!(h.sim.stats().pushes_delivered, 5);
    stop.cancel();
}

#[tokio::test]
async fn a_failing_webhook_is_retried_then_given_up_and_dropped_pushes_are_counted() {
    let h = start_with(A2aConfig {
        step_delay: Duration::from_millis(5),
        push_notifications: true,
        ..A2aConfig::default()
    })
    .await;
    let (url, seen, stop) = webhook(500).await;
    // Created after the task exists, through the config method.
    let task = h
        .result(
            "SendMessage",
            json!({
                "message": message(&new_id(), "hi", Some(json!({ "skill": "ask-input" }))),
                "configuration": { "returnImmediately": true },
            }),
        )
        .await["task"]
        .clone();
    let task_id = task["id"].as_str().expect("id").to_owned();
    let created = h
        .result(
            "CreateTaskPushNotificationConfig",
            json!({ "taskId": task_id, "url": url }),
        )
        .await;
    assert!(created["id"].as_str().is_some_and(|id| !id.is_empty()));
    h.sim.faults().drop_next_pushes(1);
    let mut reply = message(&new_id(), "Ada", None);
    reply["taskId"] = json!(task_id);
    h.result("SendMessage", json!({ "message": reply })).await;
    let stats =
        agentgate_testkit::eventually("the pushes to be given up", Duration::from_secs(20), || {
            let stats = h.sim.stats();
            // Three updates (working, the greeting, completed): one dropped, two
            // given up.
            (stats.pushes_failed == 2 && stats.pushes_dropped == 1).then_some(stats)
        })
        .await;
    assert_eq!(stats.pushes_delivered, 0);
    assert_eq!(
        stats.push_attempts,
        4 * stats.pushes_failed,
        "each failed notification was tried four times: {stats:?}"
    );
    assert_eq!(seen.lock().expect("lock").len() as u64, stats.push_attempts);
    stop.cancel();
}
