//! The A2A backend against the real A2A emulator over HTTP: every scripted
//! skill end to end through the job, driven step by step as the engine
//! does, with every request checked against the vendored a2a.proto.

use agentgate_backend::engine::Input;
use agentgate_backend::{Backend, Event, JobError, Step};
use agentgate_sim::a2a::A2aConfig as SimConfig;
use backend_a2a::job::message_id;
use rmcp::model::{
    ContentBlock, ElicitRequestParams, InputRequest, InputRequests, InputResponses,
    ResourceContents,
};
use serde_json::{Value, json};

use crate::common::*;

fn accept(requests: &InputRequests, content: Value) -> InputResponses {
    requests
        .keys()
        .map(|k| (k.clone(), json!({"action": "accept", "content": content})))
        .collect()
}

fn form_message(requests: &InputRequests) -> String {
    match requests.values().next() {
        Some(InputRequest::Elicitation(e)) => match &e.params {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            other => panic!("expected a form elicitation, got {other:?}"),
        },
        other => panic!("expected an elicitation, got {other:?}"),
    }
}

#[tokio::test]
async fn quick_answer_maps_text_file_and_data_and_keeps_the_whole_task() {
    let emulator = Emulator::quick().await;
    let (tool, counts) = tool_for(&emulator).await;
    assert_eq!(tool.tool.name, "emu_send_message");
    let description = tool.tool.description.as_deref().unwrap_or_default();
    for skill in ["quick-answer", "ask-input", "needs-auth", "refuses-cancel"] {
        assert!(
            description.contains(skill),
            "skill {skill} missing: {description}"
        );
    }

    let mut driver = Driver::new(&tool);
    let result = driver
        .run(args("What is the answer?", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert!(texts(&result).contains("The answer is 42."), "{result:?}");
    let file = result.content.iter().find_map(|c| match c {
        ContentBlock::Resource(r) => Some(r.resource.clone()),
        _ => None,
    });
    match file {
        Some(ResourceContents::TextResourceContents {
            uri,
            text,
            mime_type,
            ..
        }) => {
            assert!(uri.ends_with("/answer.txt"), "{uri}");
            assert!(uri.starts_with("a2a://emu/tasks/"), "{uri}");
            assert!(text.contains("Question: What is the answer?"), "{text}");
            assert_eq!(mime_type.as_deref(), Some("text/plain"));
        }
        other => panic!("the file part is not an embedded text resource: {other:?}"),
    }
    let structured = result.structured_content.expect("structured content");
    assert_eq!(structured["data"][0]["data"]["answer"], 42);
    assert_eq!(
        structured["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(structured["task"]["artifacts"][0]["name"], "answer");

    let stats = emulator.sim.stats();
    assert_eq!(stats.max_effects_per_message_id(), 1);
    assert_eq!(emulator.sent_of("SendMessage").len(), 1);
    let send = &emulator.sent_of("SendMessage")[0].body["params"];
    assert_eq!(send["configuration"]["returnImmediately"], true);
    assert_eq!(
        send["message"]["messageId"],
        message_id(&agentgate_backend::JobContext::new(
            driver.task_id.clone(),
            agentgate_backend::Owner::new("token:alice"),
            0,
            agentgate_backend::Millis::EPOCH,
        ))
    );
    assert_eq!(counts.get("SendMessage", "ok"), 1);
    assert_eq!(counts.get("GetAgentCard", "ok"), 1);
    assert_eq!(
        counts.get("GetTask", "ok"),
        emulator.sent_of("GetTask").len() as u64
    );
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn a_direct_message_is_the_answer_without_a_task() {
    let emulator = Emulator::quick().await;
    let (tool, _) = tool_for(&emulator).await;
    let result = Driver::new(&tool)
        .run(args("hello there", "direct-message"), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(false));
    assert_eq!(texts(&result), "You said: hello there");
    let structured = result.structured_content.expect("structured");
    assert_eq!(structured["message"]["role"], "ROLE_AGENT");
    assert!(emulator.sent_of("GetTask").is_empty(), "no task to poll");
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn input_required_asks_a_form_and_the_answer_continues_the_same_task() {
    let emulator = Emulator::quick().await;
    let (tool, _) = tool_for(&emulator).await;
    let mut driver = Driver::new(&tool);
    let result = driver
        .run(args("greet me", "ask-input"), |requests| {
            assert!(form_message(requests).contains("What is your name?"));
            accept(requests, json!({"answer": "Ada"}))
        })
        .await
        .result();
    assert_eq!(texts(&result), "Hello, Ada!");
    assert_eq!(driver.trace.asks.len(), 1, "asked once");

    let sends = emulator.sent_of("SendMessage");
    assert_eq!(sends.len(), 2);
    let task_id = result.structured_content.expect("structured")["task"]["id"].clone();
    let answer = &sends[1].body["params"]["message"];
    assert_eq!(answer["taskId"], task_id);
    assert!(answer["contextId"].as_str().is_some_and(|c| !c.is_empty()));
    assert_eq!(answer["parts"][0]["text"], "Ada");
    assert_ne!(
        answer["messageId"],
        sends[0].body["params"]["message"]["messageId"]
    );
    assert_eq!(emulator.sim.stats().max_effects_per_message_id(), 1);
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn a_declined_question_cancels_the_agent_task_and_says_so() {
    let emulator = Emulator::quick().await;
    let (tool, _) = tool_for(&emulator).await;
    let result = Driver::new(&tool)
        .run(args("greet me", "ask-input"), |requests| {
            requests
                .keys()
                .map(|k| (k.clone(), json!({"action": "decline"})))
                .collect()
        })
        .await
        .result();
    assert_eq!(result.is_error, Some(true));
    assert!(texts(&result).contains("declined"), "{result:?}");
    assert_eq!(emulator.sent_of("CancelTask").len(), 1);
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn auth_required_with_a_url_is_a_url_elicitation_and_the_task_goes_on_after_sign_in() {
    let emulator = Emulator::quick().await;
    let (tool, _) = tool_for(&emulator).await;
    let mut driver = Driver::new(&tool);
    let mut step = driver.step(args("my calendar", "needs-auth")).await;
    // Poll until the agent asks for the sign-in.
    let requests = loop {
        match step.expect("no error") {
            Step::Wait { state, .. } => {
                step = driver.step(Input::Resume(state, Event::Tick)).await;
            }
            Step::Ask { requests, .. } => break requests,
            other => panic!("expected a sign-in request, got {other:?}"),
        }
    };
    let url = match requests.values().next() {
        Some(InputRequest::Elicitation(e)) => match &e.params {
            ElicitRequestParams::UrlElicitationParams { url, message, .. } => {
                assert!(message.contains("Sign in at"), "{message}");
                url.clone()
            }
            other => panic!("expected a URL elicitation, got {other:?}"),
        },
        other => panic!("expected an elicitation, got {other:?}"),
    };
    assert!(url.starts_with(&format!("{}/auth/", emulator.url)), "{url}");
    // The user opens the page out of band ...
    let page = reqwest::get(&url).await.expect("the sign-in page");
    assert_eq!(page.status(), 200);
    // ... and accepts the elicitation; the job polls until the agent is done.
    let state = driver.state.clone().expect("checkpoint");
    let result = driver
        .run(
            Input::Resume(state, Event::Input(accept(&requests, Value::Null))),
            no_answers,
        )
        .await
        .result();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let structured = result.structured_content.expect("structured");
    assert_eq!(structured["data"][0]["data"]["next"], "Design review");
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn long_running_status_follows_the_agent_progress() {
    let emulator = Emulator::quick().await;
    let (tool, _) = tool_for(&emulator).await;
    let mut driver = Driver::new(&tool);
    let result = driver
        .run(
            Input::Start(
                json!({"message": "work", "metadata": {"skill": "long-running", "steps": 3}}),
            ),
            no_answers,
        )
        .await
        .result();
    assert_eq!(texts(&result), "Finished 3 steps.");
    // Each progress message is reported as it was seen; at least one was.
    assert!(
        driver
            .trace
            .statuses
            .iter()
            .any(|s| s.starts_with("step ") || s.starts_with("Starting 3 steps")),
        "{:?}",
        driver.trace.statuses
    );
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn failed_and_rejected_tasks_are_error_results_with_the_agent_message() {
    let emulator = Emulator::quick().await;
    let (tool, _) = tool_for(&emulator).await;
    for (skill, said) in [
        (
            "fails",
            "Simulated failure: the downstream service answered 500.",
        ),
        ("rejects", "I do not take requests like this one."),
    ] {
        let result = Driver::new(&tool)
            .run(args("try", skill), no_answers)
            .await
            .result();
        assert_eq!(result.is_error, Some(true), "{skill}: {result:?}");
        assert!(texts(&result).contains(said), "{skill}: {result:?}");
        assert!(texts(&result).contains("`emu`"), "{skill}: names the agent");
    }
    emulator.assert_requests_conform();
}

/// Starts `skill` with many steps and returns the driver after its first wait.
async fn started<'a>(tool: &'a agentgate_backend::ToolSpec, skill: &str) -> Driver<'a> {
    let mut driver = Driver::new(tool);
    let step = driver
        .step(Input::Start(
            json!({"message": "work", "metadata": {"skill": skill, "steps": 100}}),
        ))
        .await
        .expect("started");
    assert!(matches!(step, Step::Wait { .. }), "{step:?}");
    driver
}

#[tokio::test]
async fn cancel_cancels_the_agent_task() {
    let emulator = Emulator::quick().await;
    let (tool, _) = tool_for(&emulator).await;
    let mut driver = started(&tool, "long-running").await;
    let state = driver.state.clone().expect("checkpoint");
    let step = driver.step(Input::Cancel(state)).await.expect("cancel");
    assert!(matches!(step, Step::Cancelled { .. }), "{step:?}");
    assert_eq!(emulator.sent_of("CancelTask").len(), 1);
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn a_refused_cancel_keeps_the_task_running_and_saying_so_until_it_ends() {
    let emulator = Emulator::start(SimConfig {
        step_delay: std::time::Duration::from_millis(5),
        ..SimConfig::default()
    })
    .await;
    let (tool, _) = tool_for(&emulator).await;
    let mut driver = started(&tool, "refuses-cancel").await;
    let state = driver.state.clone().expect("checkpoint");
    let step = driver.step(Input::Cancel(state)).await.expect("cancel");
    match step {
        Step::Wait { status, .. } => {
            let status = status.unwrap_or_default();
            assert!(status.contains("refused to cancel"), "{status}");
        }
        other => panic!("expected the task to keep running, got {other:?}"),
    }
    // The engine keeps running cancel steps while the cancel is requested.
    let mut ended = None;
    for _ in 0..2_000 {
        let state = driver.state.clone().expect("checkpoint");
        match driver
            .step(Input::Cancel(state))
            .await
            .expect("cancel step")
        {
            Step::Wait { after, .. } => tokio::time::sleep(after).await,
            other => {
                ended = Some(other);
                break;
            }
        }
    }
    match ended {
        Some(Step::Done(result)) => assert_eq!(texts(&result), "Finished 100 steps."),
        other => panic!("expected the agent's answer, got {other:?}"),
    }
    assert_eq!(
        emulator.sent_of("CancelTask").len(),
        1,
        "refused once, not asked again"
    );
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn a_lost_answer_and_a_repeated_step_start_one_run() {
    let emulator = Emulator::quick().await;
    let (tool, counts) = tool_for(&emulator).await;
    let mut driver = Driver::new(&tool);
    let cx = driver.cx();
    emulator.sim.faults().lose_next_answers(1);
    let lost = driver.step(args("once", "long-running")).await;
    assert!(matches!(lost, Err(JobError::Retryable { .. })), "{lost:?}");
    // The retry (same step, same key) and a repeat after a "crash" before the
    // checkpoint: both send the same messageId.
    let first = driver
        .step(args("once", "long-running"))
        .await
        .expect("retry");
    driver.step = 0;
    let again = driver
        .step(args("once", "long-running"))
        .await
        .expect("repeat");
    let task_of = |step: &Step<Value>| match step {
        Step::Wait { state, .. } => state["task_id"].clone(),
        other => panic!("expected a wait, got {other:?}"),
    };
    assert_eq!(task_of(&first), task_of(&again), "one A2A task");
    let stats = emulator.sim.stats();
    let id = message_id(&cx);
    assert_eq!(stats.sends_by_message_id(&id), 3);
    assert_eq!(stats.effects_by_message_id(&id), 1, "one run");
    assert_eq!(stats.answers_lost, 1);
    assert_eq!(counts.get("SendMessage", "server_error"), 1);
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn a_lost_answer_to_the_input_reply_is_not_sent_twice() {
    let emulator = Emulator::quick().await;
    let (tool, _) = tool_for(&emulator).await;
    let mut driver = Driver::new(&tool);
    let mut lost_once = false;
    let result = driver
        .run(args("greet me", "ask-input"), |requests| {
            if !lost_once {
                emulator.sim.faults().lose_next_answers(1);
                lost_once = true;
            }
            accept(requests, json!({"answer": "Grace"}))
        })
        .await
        .result();
    assert_eq!(texts(&result), "Hello, Grace!");
    let stats = emulator.sim.stats();
    assert_eq!(stats.answers_lost, 1);
    assert_eq!(stats.max_effects_per_message_id(), 1);
    let replies: Vec<_> = emulator
        .sent_of("SendMessage")
        .into_iter()
        .filter(|s| s.body["params"]["message"]["taskId"].is_string())
        .collect();
    // The retry read the task first: the agent had the answer, so it was not
    // sent again (nothing relies on the agent's messageId deduplication).
    assert_eq!(replies.len(), 1, "the reply was sent once: {replies:?}");
    emulator.assert_requests_conform();
}

/// An agent that does not deduplicate: the retried reply step reads the
/// task, sees its answer in the history, and sends nothing.
#[tokio::test]
async fn without_deduplication_a_repeated_answer_step_is_not_sent_again() {
    let emulator = Emulator::start(SimConfig {
        dedupe_message_ids: false,
        step_delay: std::time::Duration::from_millis(5),
        ..SimConfig::default()
    })
    .await;
    let (tool, _) = tool_for(&emulator).await;
    let mut driver = Driver::new(&tool);
    let mut lost_once = false;
    let result = driver
        .run(args("greet me", "ask-input"), |requests| {
            if !lost_once {
                emulator.sim.faults().lose_next_answers(1);
                lost_once = true;
            }
            accept(requests, json!({"answer": "Lin"}))
        })
        .await
        .result();
    assert_eq!(texts(&result), "Hello, Lin!");
    let stats = emulator.sim.stats();
    assert_eq!(stats.answers_lost, 1);
    assert_eq!(
        stats.max_effects_per_message_id(),
        1,
        "no message ran twice"
    );
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn transport_faults_are_retryable_and_json_rpc_errors_are_fatal_naming_agent_and_code() {
    let emulator = Emulator::quick().await;
    let (tool, _) = tool_for(&emulator).await;
    let mut driver = Driver::new(&tool);
    emulator.sim.faults().fail_next(1);
    let failed = driver.step(args("x", "quick-answer")).await;
    match failed {
        Err(JobError::Retryable { message, .. }) => {
            assert!(
                message.contains("`emu`") && message.contains("503"),
                "{message}"
            );
        }
        other => panic!("expected a retryable error, got {other:?}"),
    }
    let bad = driver.step(args("x", "no-such-skill")).await;
    match bad {
        Err(JobError::Fatal(e)) => {
            assert!(e.message.contains("`emu`"), "{}", e.message);
            assert!(e.message.contains("-32602"), "{}", e.message);
        }
        other => panic!("expected a fatal error, got {other:?}"),
    }
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn a_bearer_token_from_its_variable_is_sent_and_never_shown() {
    let emulator = Emulator::start(SimConfig {
        token: Some("tok-very-secret".into()),
        step_delay: std::time::Duration::from_millis(5),
        ..SimConfig::default()
    })
    .await;
    let env = |name: &str| (name == "EMU_TOKEN").then(|| "tok-very-secret".to_owned());
    let (backend, _) = backend(
        json!([
            {"name": "with", "url": emulator.url, "token_env": "EMU_TOKEN"},
            {"name": "without", "url": emulator.url},
        ]),
        &env,
    )
    .await;
    assert!(!format!("{backend:?}").contains("tok-very-secret"));
    let tools = backend.tools();
    let result = Driver::new(&tools[0])
        .run(args("q", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert!(
        emulator
            .sent()
            .iter()
            .all(|s| s.authorization.as_deref() == Some("Bearer tok-very-secret")),
        "every call of `with` carries the token"
    );
    let refused = Driver::new(&tools[1])
        .run(args("q", "quick-answer"), no_answers)
        .await;
    match refused {
        Ending::Failed(e) => {
            assert!(
                e.message.contains("401") && e.message.contains("token_env"),
                "{}",
                e.message
            );
            assert!(!e.message.contains("tok-very"));
        }
        other => panic!("expected an authentication failure, got {other:?}"),
    }
    emulator.assert_requests_conform();
}

/// Issue 29: a principal with its own token at an agent reaches it as
/// itself on every call of its task (send, stream or poll); others keep
/// the agent's token.
#[tokio::test]
async fn a_principals_own_token_carries_every_call_of_its_tasks() {
    let emulator = Emulator::start(SimConfig {
        token: Some("shared-token".into()),
        user_tokens: vec!["alice-own-token".into()],
        step_delay: std::time::Duration::from_millis(5),
        ..SimConfig::default()
    })
    .await;
    let env = |name: &str| match name {
        "EMU_TOKEN" => Some("shared-token".to_owned()),
        "ALICE_AT_EMU" => Some("alice-own-token".to_owned()),
        _ => None,
    };
    let (backend, _) = backend(
        json!([{
            "name": "emu", "url": emulator.url, "token_env": "EMU_TOKEN",
            "principal_tokens": {"token:alice": "ALICE_AT_EMU"},
        }]),
        &env,
    )
    .await;
    assert!(!format!("{backend:?}").contains("alice-own-token"));
    let tools = backend.tools();
    let work = || {
        Input::Start(json!({"message": "work", "metadata": {"skill": "long-running", "steps": 3}}))
    };
    let mut bob = Driver::new(&tools[0]);
    bob.owner = agentgate_backend::Owner::new("token:bob");
    let result = bob.run(work(), no_answers).await.result();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let bobs = emulator.sent().len();
    let result = Driver::new(&tools[0])
        .run(work(), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let sent = emulator.sent();
    let tokens = |calls: &[Sent]| {
        calls
            .iter()
            .map(|s| {
                (
                    s.method().to_owned(),
                    s.authorization.clone().unwrap_or_default(),
                )
            })
            .collect::<Vec<_>>()
    };
    let (of_bob, of_alice) = sent.split_at(bobs);
    assert!(
        of_bob.len() > 1
            && of_bob
                .iter()
                .all(|s| s.authorization.as_deref() == Some("Bearer shared-token")),
        "bob's task calls with the agent's token: {:?}",
        tokens(of_bob)
    );
    assert!(
        of_alice.len() > 1
            && of_alice
                .iter()
                .all(|s| s.authorization.as_deref() == Some("Bearer alice-own-token")),
        "alice's task calls with her own token: {:?}",
        tokens(of_alice)
    );
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn an_unreadable_card_makes_only_its_tool_answer_with_the_reason() {
    let emulator = Emulator::quick().await;
    // A port nothing listens on: bound, then closed.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let dead = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    let (backend, counts) = backend(
        json!([
            {"name": "dead", "url": dead},
            {"name": "alive", "url": emulator.url},
            {"name": "notcard", "url": format!("{}/nope.json", emulator.url)},
        ]),
        &no_env,
    )
    .await;
    let status = backend.card_status();
    assert!(
        status[0]
            .1
            .as_deref()
            .is_some_and(|w| w.contains("could not be read")),
        "{status:?}"
    );
    assert_eq!(status[1].1, None);
    assert!(
        status[2]
            .1
            .as_deref()
            .is_some_and(|w| w.contains("HTTP 404")),
        "{status:?}"
    );
    assert!(counts.get("GetAgentCard", "transport_error") >= 1);

    let tools = backend.tools();
    assert!(
        tools[0]
            .tool
            .description
            .as_deref()
            .is_some_and(|d| d.contains("could not be read")),
    );
    for tool in [&tools[0], &tools[2]] {
        let result = Driver::new(tool)
            .run(args("q", "quick-answer"), no_answers)
            .await
            .result();
        assert_eq!(result.is_error, Some(true));
        assert!(texts(&result).contains("is unavailable"), "{result:?}");
    }
    let result = Driver::new(&tools[1])
        .run(args("q", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(false), "the other agent works");
    emulator.assert_requests_conform();
}

#[tokio::test]
async fn a_card_unreadable_at_start_is_read_again_by_the_refresh_and_by_a_call() {
    let emulator = Emulator::quick().await;
    emulator.card_down(true);
    let (backend, counts) = backend(json!([{"name": "emu", "url": emulator.url}]), &no_env).await;
    let why = backend.card_status()[0].1.clone();
    assert!(
        why.as_deref().is_some_and(|w| w.contains("HTTP 503")),
        "{why:?}"
    );
    assert_eq!(counts.get("GetAgentCard", "server_error"), 1);
    let tools = backend.tools();
    // A call reads the card again first; still down, it answers why.
    let result = Driver::new(&tools[0])
        .run(args("q", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(true));
    assert!(texts(&result).contains("HTTP 503"), "{result:?}");
    assert_eq!(counts.get("GetAgentCard", "server_error"), 2);

    emulator.card_down(false);
    backend.refresh_cards().await;
    assert_eq!(backend.card_status()[0].1, None, "the refresh read it");
    // A card that fails later keeps the last good one.
    emulator.card_down(true);
    backend.refresh_cards().await;
    assert_eq!(
        backend.card_status()[0].1,
        None,
        "the last good card is kept"
    );
    let result = Driver::new(&tools[0])
        .run(args("q", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    emulator.assert_requests_conform();
}

#[test]
fn the_request_types_conform_and_the_contract_check_bites() {
    use agentgate_testkit::contracts::a2a;
    use backend_a2a::wire::{OutMessage, OutPart, SendConfiguration, SendMessageRequest};
    let mut message = OutMessage::user(
        "agentgate-t-0".into(),
        vec![OutPart::text("hi"), OutPart::data(json!({"k": 1}))],
    );
    message.task_id = "t1".into();
    message.context_id = "c1".into();
    let request = serde_json::to_value(SendMessageRequest {
        message,
        configuration: SendConfiguration {
            return_immediately: true,
            task_push_notification_config: None,
        },
    })
    .expect("serializes");
    assert_eq!(
        a2a().problems("SendMessageRequest", &request),
        Vec::<String>::new()
    );
    let secret = backend_a2a::config::Secret::new("0123456789abcdef0123456789abcdef");
    let push = backend_a2a::push::config(
        &backend_a2a::config::PushSettings {
            base: url::Url::parse("https://gw.example/hooks/a2a").expect("url"),
            secret,
        },
        &agentgate_backend::TaskId::generate(),
    );
    let mut with_push = request.clone();
    with_push["configuration"]["taskPushNotificationConfig"] =
        serde_json::to_value(&push).expect("serializes");
    assert_eq!(
        a2a().problems("SendMessageRequest", &with_push),
        Vec::<String>::new()
    );
    let list = serde_json::to_value(backend_a2a::wire::ListTasksRequest {
        context_id: "c1".into(),
        page_size: 20,
        history_length: None,
    })
    .expect("serializes");
    assert_eq!(
        a2a().problems("ListTasksRequest", &list),
        Vec::<String>::new()
    );
    // The same request with a wrong enum name or a misspelt field is refused.
    let mut wrong_role = request.clone();
    wrong_role["message"]["role"] = json!("user");
    assert!(!a2a().problems("SendMessageRequest", &wrong_role).is_empty());
    let mut misspelt = request;
    misspelt["configuration"]["returnImmediatly"] = json!(true);
    assert!(!a2a().problems("SendMessageRequest", &misspelt).is_empty());
}

/// The limit of what a client can do without a context it chose: an agent
/// that does not deduplicate messageIds (as the official Python SDK's
/// server) runs a send whose answer was lost twice. The emulator's
/// `dedupe_message_ids = false` plays one.
#[tokio::test]
async fn without_deduplication_by_the_agent_a_lost_answer_runs_twice() {
    let emulator = Emulator::start(SimConfig {
        dedupe_message_ids: false,
        step_delay: std::time::Duration::from_millis(5),
        ..SimConfig::default()
    })
    .await;
    let (tool, _) = tool_for(&emulator).await;
    let mut driver = Driver::new(&tool);
    let cx = driver.cx();
    emulator.sim.faults().lose_next_answers(1);
    let result = driver
        .run(args("once", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(false));
    let stats = emulator.sim.stats();
    assert_eq!(
        stats.sends_by_message_id(&message_id(&cx)),
        2,
        "the same messageId twice"
    );
    assert_eq!(
        stats.effects_by_message_id(&message_id(&cx)),
        2,
        "and two runs"
    );
}

/// With `client_context_ids`, the same agent runs it once: the retried step
/// looks in the context it chose (ListTasks) and finds the task.
#[tokio::test]
async fn with_client_context_ids_a_lost_answer_runs_once_without_deduplication() {
    let emulator = Emulator::start(SimConfig {
        dedupe_message_ids: false,
        step_delay: std::time::Duration::from_millis(5),
        ..SimConfig::default()
    })
    .await;
    let (tool, _) = tool_with(&emulator, json!({"client_context_ids": true})).await;
    let mut driver = Driver::new(&tool);
    let cx = driver.cx();
    emulator.sim.faults().lose_next_answers(1);
    let result = driver
        .run(args("once", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let stats = emulator.sim.stats();
    let context = backend_a2a::job::context_id(&cx);
    assert_eq!(stats.sends_by_message_id(&message_id(&cx)), 1, "sent once");
    assert_eq!(stats.effects_by_message_id(&message_id(&cx)), 1, "one run");
    assert_eq!(stats.tasks_in_context(&context), 1);
    assert_eq!(
        stats.lists_of_context(&context),
        2,
        "looked before each send"
    );
    let structured = result.structured_content.expect("structured");
    assert_eq!(structured["task"]["contextId"], context.as_str());
    emulator.assert_requests_conform();
}

/// A follow-up in the caller's context: the lookup finds the task by its
/// messageId in the history, so a lost answer still runs once.
#[tokio::test]
async fn a_follow_up_whose_answer_was_lost_is_found_by_its_message_id() {
    let emulator = Emulator::start(SimConfig {
        dedupe_message_ids: false,
        step_delay: std::time::Duration::from_millis(5),
        ..SimConfig::default()
    })
    .await;
    let (tool, _) = tool_for(&emulator).await;
    let first = Driver::new(&tool)
        .run(args("first", "quick-answer"), no_answers)
        .await
        .result();
    let context = first.structured_content.expect("structured")["task"]["contextId"]
        .as_str()
        .expect("a context")
        .to_owned();
    let mut driver = Driver::new(&tool);
    let cx = driver.cx();
    emulator.sim.faults().lose_next_answers(1);
    let result = driver
        .run(
            Input::Start(json!({"message": "again", "context_id": context,
                "metadata": {"skill": "quick-answer"}})),
            no_answers,
        )
        .await
        .result();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let stats = emulator.sim.stats();
    assert_eq!(stats.effects_by_message_id(&message_id(&cx)), 1, "one run");
    assert_eq!(
        stats.tasks_in_context(&context),
        2,
        "the first call's and this one"
    );
    emulator.assert_requests_conform();
}

/// An agent that refuses contextIds it did not make (§3.4.1 MUST) gets a
/// clear error naming the setting that chose one.
#[tokio::test]
async fn an_agent_refusing_client_context_ids_names_the_setting() {
    let emulator = Emulator::start(SimConfig {
        accept_client_context_ids: false,
        ..SimConfig::default()
    })
    .await;
    let (tool, _) = tool_with(&emulator, json!({"client_context_ids": true})).await;
    match Driver::new(&tool)
        .run(args("x", "quick-answer"), no_answers)
        .await
    {
        Ending::Failed(e) => {
            assert!(e.message.contains("-32602"), "{}", e.message);
            assert!(
                e.message.contains("agents[0].client_context_ids = true"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    emulator.assert_requests_conform();
}

fn oauth_sim(ttl_secs: u64) -> SimConfig {
    SimConfig {
        oauth: Some(agentgate_sim::a2a::OAuthClient {
            client_id: "agentgate-test".into(),
            client_secret: "client-secret-value".into(),
            token_ttl: std::time::Duration::from_secs(ttl_secs),
        }),
        step_delay: std::time::Duration::from_millis(5),
        ..SimConfig::default()
    }
}

fn oauth_env(name: &str) -> Option<String> {
    (name == "EMU_CLIENT_SECRET").then(|| "client-secret-value".to_owned())
}

/// OAuth client credentials from the card: one token for many calls, a new
/// one after the agent answers 401, the secret and tokens shown nowhere.
#[tokio::test]
async fn oauth_client_credentials_from_the_card_are_cached_and_renewed_on_401() {
    let emulator = Emulator::start(oauth_sim(3600)).await;
    let (backend, counts) = backend(
        json!([{"name": "emu", "url": emulator.url,
            "oauth": {"client_id": "agentgate-test", "client_secret_env": "EMU_CLIENT_SECRET",
                      "scopes": ["a2a.invoke"]}}]),
        &oauth_env,
    )
    .await;
    assert!(!format!("{backend:?}").contains("client-secret-value"));
    let tools = backend.tools();
    for i in 0..2 {
        let result = Driver::new(&tools[0])
            .run(args(&format!("q{i}"), "quick-answer"), no_answers)
            .await
            .result();
        assert_eq!(result.is_error, Some(false), "{result:?}");
    }
    assert_eq!(emulator.sim.stats().tokens_issued, 1, "one token, cached");
    assert_eq!(counts.get("OAuthToken", "ok"), 1);
    let bearer: Vec<String> = emulator
        .sent()
        .iter()
        .filter_map(|s| s.authorization.clone())
        .collect();
    assert!(!bearer.is_empty() && bearer.iter().all(|b| b.starts_with("Bearer sim-at-")));

    // The agent forgets every token: the next call is refused once, a new
    // token is fetched and the call goes through.
    emulator.sim.revoke_tokens();
    let result = Driver::new(&tools[0])
        .run(args("after revoke", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let stats = emulator.sim.stats();
    assert_eq!(stats.tokens_issued, 2, "renewed after the 401");
    assert_eq!(stats.unauthorized, 1);
    assert_eq!(
        counts.get("SendMessage", "client_error"),
        1,
        "the 401, counted"
    );
    emulator.assert_requests_conform();
}

/// A token whose `expires_in` ran out is not sent again: a new one is
/// fetched before the call.
#[tokio::test]
async fn an_expired_token_is_replaced_before_the_call() {
    // 1 s tokens: the margin keeps each for half of that.
    let emulator = Emulator::start(oauth_sim(1)).await;
    let (tool, _) = {
        let (backend, counts) = backend(
            json!([{"name": "emu", "url": emulator.url,
                "oauth": {"client_id": "agentgate-test", "client_secret_env": "EMU_CLIENT_SECRET",
                          "token_url": format!("{}{}", emulator.url, agentgate_sim::a2a::TOKEN_PATH),
                          "scopes": ["a2a.invoke"]}}]),
            &oauth_env,
        )
        .await;
        (backend.tools().remove(0), counts)
    };
    let first = Driver::new(&tool)
        .run(args("one", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(first.is_error, Some(false));
    assert_eq!(emulator.sim.stats().tokens_issued, 1);
    // Expiry is what this test is about: the token must age past its
    // `expires_in` (1 s); nothing else is waited for.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = Driver::new(&tool)
        .run(args("two", "quick-answer"), no_answers)
        .await
        .result();
    assert_eq!(second.is_error, Some(false));
    let stats = emulator.sim.stats();
    assert_eq!(stats.tokens_issued, 2);
    assert_eq!(stats.unauthorized, 0, "the expired token was never sent");
}

/// A wrong client secret fails the call with the RFC 6749 error code and
/// what to check, never the secret; a token endpoint that answers 5xx is
/// worth a retry.
#[tokio::test]
async fn refused_client_credentials_name_the_fix_and_not_the_secret() {
    let emulator = Emulator::start(oauth_sim(3600)).await;
    let wrong = |name: &str| (name == "EMU_CLIENT_SECRET").then(|| "wrong-secret-xyz".to_owned());
    let (backend, counts) = backend(
        json!([{"name": "emu", "url": emulator.url,
            "oauth": {"client_id": "agentgate-test", "client_secret_env": "EMU_CLIENT_SECRET",
                      "scopes": ["a2a.invoke"]}}]),
        &wrong,
    )
    .await;
    let tools = backend.tools();
    match Driver::new(&tools[0])
        .run(args("q", "quick-answer"), no_answers)
        .await
    {
        Ending::Failed(e) => {
            assert!(e.message.contains("invalid_client"), "{}", e.message);
            assert!(
                e.message.contains("agents[0].oauth.client_id"),
                "{}",
                e.message
            );
            assert!(e.message.contains("EMU_CLIENT_SECRET"), "{}", e.message);
            assert!(!e.message.contains("wrong-secret-xyz"), "{}", e.message);
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    // A refused client secret is the operator's credential failing: the
    // gateway counts it (and warns about it) as a rejection.
    assert_eq!(counts.get("OAuthToken", "rejected"), 1);
    assert!(
        emulator.sent_of("SendMessage").is_empty(),
        "nothing sent without a token"
    );
}
