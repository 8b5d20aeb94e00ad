//! The emulator driven by the real `aws-sdk-qbusiness` client: answers and citations,
//! conversations, plugins, SigV4 failures, validation, idempotency and injected faults.

use std::time::Duration;

use agentgate_sim::qbusiness::{
    DEFAULT_ACCESS_KEY_ID, DEFAULT_APPLICATION_ID, DEFAULT_REGION, DEFAULT_SECRET_ACCESS_KEY,
    NO_ANSWER, SIGNIN_PLUGIN_ID, TICKET_PLUGIN_ID,
};
use aws_sdk_qbusiness::config::retry::RetryConfig;
use aws_sdk_qbusiness::error::ProvideErrorMetadata;
use aws_sdk_qbusiness::operation::chat_sync::{ChatSyncError, ChatSyncOutput};
use aws_sdk_qbusiness::types::{
    ActionExecution, ActionExecutionPayloadField, AuthChallengeResponse, ChatMode,
    ChatModeConfiguration, MessageType, PluginConfiguration,
};
use aws_smithy_types::Document;

use crate::common::{Harness, start};

const APP: &str = DEFAULT_APPLICATION_ID;

fn service_error<E, R>(err: aws_sdk_qbusiness::error::SdkError<E, R>) -> E
where
    E: std::fmt::Debug,
    R: std::fmt::Debug,
{
    match err {
        aws_sdk_qbusiness::error::SdkError::ServiceError(e) => e.into_err(),
        other => panic!("expected a service error, got {other:?}"),
    }
}

async fn ask(h: &Harness, user: &str, question: &str) -> ChatSyncOutput {
    h.client()
        .chat_sync()
        .application_id(APP)
        .user_id(user)
        .user_message(question)
        .send()
        .await
        .expect("chat_sync")
}

fn plugin_mode(plugin: &str) -> ChatModeConfiguration {
    ChatModeConfiguration::PluginConfiguration(
        PluginConfiguration::builder()
            .plugin_id(plugin)
            .build()
            .expect("plugin configuration"),
    )
}

#[tokio::test]
async fn answer_cites_sentences_whose_offsets_slice_the_system_message() {
    let h = start().await;
    let out = ask(&h, "alice", "How many vacation days do I get per year?").await;
    let text = out.system_message().expect("system message");
    assert!(text.contains("25 days of paid vacation"), "{text}");
    assert!(text.len() <= 2048);
    assert_eq!(out.conversation_id().map(str::len), Some(36));
    assert_eq!(out.system_message_id().map(str::len), Some(36));
    assert_eq!(out.user_message_id().map(str::len), Some(36));

    let attributions: Vec<_> = out.source_attributions().iter().flatten().collect();
    assert!(!attributions.is_empty());
    let first = attributions[0];
    assert_eq!(first.citation_number(), Some(1));
    assert_eq!(first.title(), Some("Holiday and vacation policy"));
    assert_eq!(
        first.url(),
        Some("https://intranet.northwind.example/holiday-policy")
    );
    assert_eq!(first.document_id(), Some("nwr-hr-0001"));
    assert!(first.index_id().is_some() && first.datasource_id().is_some());
    assert!(first.updated_at().is_some_and(|t| t.secs() > 1_700_000_000));
    for a in &attributions {
        assert!(!a.text_message_segments().is_empty());
        for segment in a.text_message_segments() {
            let begin = usize::try_from(segment.begin_offset().expect("begin")).expect("offset");
            let end = usize::try_from(segment.end_offset().expect("end")).expect("offset");
            let sentence = &text[begin..end];
            let excerpt = segment
                .snippet_excerpt()
                .and_then(|e| e.text())
                .expect("excerpt");
            assert_eq!(sentence, excerpt);
            assert!(sentence.ends_with('.'), "{sentence:?}");
            let marker = format!(" [{}]", a.citation_number().expect("number"));
            assert!(
                text[end..].starts_with(&marker),
                "marker after {sentence:?}"
            );
        }
    }
}

#[tokio::test]
async fn unknown_topics_get_a_polite_answer_without_citations() {
    let h = start().await;
    let out = ask(&h, "alice", "Explain quantum chromodynamics").await;
    assert_eq!(out.system_message(), Some(NO_ANSWER));
    assert!(out.source_attributions().is_empty());
}

#[tokio::test]
async fn creator_mode_answers_without_retrieval() {
    let h = start().await;
    let out = h
        .client()
        .chat_sync()
        .application_id(APP)
        .chat_mode(ChatMode::CreatorMode)
        .user_message("a welcome note for new engineers")
        .send()
        .await
        .expect("chat_sync");
    assert!(
        out.system_message()
            .is_some_and(|m| m.contains("a welcome note for new engineers"))
    );
    assert!(out.source_attributions().is_empty());
}

#[tokio::test]
async fn follow_up_sees_the_previous_turn() {
    let h = start().await;
    let client = h.client();
    let first = ask(&h, "bob", "Tell me about parental leave").await;
    let conversation = first.conversation_id().expect("conversation");
    let parent = first.system_message_id().expect("system id");

    let follow = client
        .chat_sync()
        .application_id(APP)
        .user_id("bob")
        .conversation_id(conversation)
        .parent_message_id(parent)
        .user_message("And how long does it last?")
        .send()
        .await
        .expect("follow-up");
    assert_eq!(follow.conversation_id(), Some(conversation));
    let cited: Vec<_> = follow
        .source_attributions()
        .iter()
        .flatten()
        .filter_map(|a| a.document_id())
        .collect();
    assert_eq!(cited.first(), Some(&"nwr-hr-0006"), "{cited:?}");

    // A stale parent (not the latest system message) is refused, as the service does.
    let err = client
        .chat_sync()
        .application_id(APP)
        .user_id("bob")
        .conversation_id(conversation)
        .parent_message_id(parent)
        .user_message("again")
        .send()
        .await
        .expect_err("stale parent");
    let ChatSyncError::ValidationException(e) = service_error(err) else {
        panic!("expected ValidationException");
    };
    assert_eq!(e.fields()[0].name(), "parentMessageId");

    // Another user cannot continue bob's conversation.
    let err = client
        .chat_sync()
        .application_id(APP)
        .user_id("mallory")
        .conversation_id(conversation)
        .parent_message_id(follow.system_message_id().expect("id"))
        .user_message("hi")
        .send()
        .await
        .expect_err("foreign conversation");
    let ChatSyncError::ResourceNotFoundException(e) = service_error(err) else {
        panic!("expected ResourceNotFoundException");
    };
    assert_eq!(e.resource_id(), conversation);
}

#[tokio::test]
async fn list_messages_list_conversations_and_delete() {
    let h = start().await;
    let client = h.client();
    let first = ask(&h, "carol", "How do I get a VPN profile?").await;
    let conversation = first.conversation_id().expect("id").to_owned();
    client
        .chat_sync()
        .application_id(APP)
        .user_id("carol")
        .conversation_id(&conversation)
        .parent_message_id(first.system_message_id().expect("id"))
        .user_message("When does the profile expire?")
        .send()
        .await
        .expect("second turn");
    let other = ask(&h, "carol", "What is the hotel limit?").await;

    let messages = client
        .list_messages()
        .application_id(APP)
        .user_id("carol")
        .conversation_id(&conversation)
        .send()
        .await
        .expect("list_messages");
    let types: Vec<_> = messages
        .messages()
        .iter()
        .map(|m| m.r#type().cloned())
        .collect();
    assert_eq!(
        types,
        vec![
            Some(MessageType::User),
            Some(MessageType::System),
            Some(MessageType::User),
            Some(MessageType::System)
        ]
    );
    assert_eq!(
        messages.messages()[0].body(),
        Some("How do I get a VPN profile?")
    );
    assert_eq!(
        messages.messages()[1].message_id(),
        first.system_message_id()
    );
    assert!(!messages.messages()[1].source_attribution().is_empty());
    assert!(messages.messages()[1].time().is_some());

    let page = client
        .list_messages()
        .application_id(APP)
        .user_id("carol")
        .conversation_id(&conversation)
        .max_results(3)
        .send()
        .await
        .expect("page 1");
    assert_eq!(page.messages().len(), 3);
    let rest = client
        .list_messages()
        .application_id(APP)
        .user_id("carol")
        .conversation_id(&conversation)
        .next_token(page.next_token().expect("next token"))
        .send()
        .await
        .expect("page 2");
    assert_eq!(rest.messages().len(), 1);
    assert!(rest.next_token().is_none());

    let conversations = client
        .list_conversations()
        .application_id(APP)
        .user_id("carol")
        .send()
        .await
        .expect("list_conversations");
    let ids: Vec<_> = conversations
        .conversations()
        .iter()
        .filter_map(|c| c.conversation_id())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&conversation.as_str()));
    assert!(ids.contains(&other.conversation_id().expect("id")));
    let titled = conversations
        .conversations()
        .iter()
        .find(|c| c.conversation_id() == Some(conversation.as_str()))
        .expect("listed");
    assert_eq!(titled.title(), Some("How do I get a VPN profile?"));
    assert!(titled.start_time().is_some());

    client
        .delete_conversation()
        .application_id(APP)
        .user_id("carol")
        .conversation_id(&conversation)
        .send()
        .await
        .expect("delete");
    let err = client
        .list_messages()
        .application_id(APP)
        .user_id("carol")
        .conversation_id(&conversation)
        .send()
        .await
        .expect_err("deleted");
    assert_eq!(err.code(), Some("ResourceNotFoundException"));
    let err = client
        .delete_conversation()
        .application_id(APP)
        .user_id("carol")
        .conversation_id(&conversation)
        .send()
        .await
        .expect_err("already deleted");
    assert_eq!(err.code(), Some("ResourceNotFoundException"));
    let left = client
        .list_conversations()
        .application_id(APP)
        .user_id("carol")
        .send()
        .await
        .expect("list");
    assert_eq!(left.conversations().len(), 1);
}

fn ticket_execution(priority: &str) -> ActionExecution {
    let field = |v: Document| {
        ActionExecutionPayloadField::builder()
            .value(v)
            .build()
            .expect("field")
    };
    ActionExecution::builder()
        .plugin_id(TICKET_PLUGIN_ID)
        .payload_field_name_separator(".")
        .payload(
            "summary",
            field(Document::String("VPN drops every hour".into())),
        )
        .payload("priority", field(Document::String(priority.into())))
        .payload("notify_me", field(Document::Bool(false)))
        .build()
        .expect("action execution")
}

#[tokio::test]
async fn ticket_plugin_review_then_execution_creates_one_ticket_even_when_repeated() {
    let h = start().await;
    let client = h.client();
    let review = client
        .chat_sync()
        .application_id(APP)
        .user_id("dave")
        .chat_mode(ChatMode::PluginMode)
        .chat_mode_configuration(plugin_mode(TICKET_PLUGIN_ID))
        .user_message("VPN drops every hour")
        .send()
        .await
        .expect("review");
    assert_eq!(
        review.system_message(),
        Some("I can open an IT help desk ticket for you. Please review the details.")
    );
    let action = review.action_review().expect("action review");
    assert_eq!(action.plugin_id(), Some(TICKET_PLUGIN_ID));
    assert_eq!(action.plugin_type().map(|t| t.as_str()), Some("CUSTOM"));
    assert_eq!(action.payload_field_name_separator(), Some("."));
    let payload = action.payload().expect("payload");
    assert_eq!(payload.len(), 4);
    let summary = &payload["summary"];
    assert_eq!(summary.required(), Some(true));
    assert_eq!(
        summary.value(),
        Some(&Document::String("VPN drops every hour".into()))
    );
    let priority = &payload["priority"];
    assert_eq!(priority.allowed_values().len(), 3);
    assert_eq!(priority.r#type().map(|t| t.as_str()), Some("STRING"));
    assert_eq!(
        payload["notify_me"].r#type().map(|t| t.as_str()),
        Some("BOOLEAN")
    );
    assert_eq!(h.sim.stats().tickets_created, 0);

    let conversation = review.conversation_id().expect("conversation");
    // An invalid priority names the field and creates nothing.
    let err = client
        .chat_sync()
        .application_id(APP)
        .user_id("dave")
        .conversation_id(conversation)
        .parent_message_id(review.system_message_id().expect("id"))
        .action_execution(ticket_execution("URGENT"))
        .send()
        .await
        .expect_err("bad priority");
    let ChatSyncError::ValidationException(e) = service_error(err) else {
        panic!("expected ValidationException");
    };
    assert_eq!(e.fields()[0].name(), "actionExecution.payload.priority");
    assert_eq!(h.sim.stats().tickets_created, 0);

    let execute = || {
        client
            .chat_sync()
            .application_id(APP)
            .user_id("dave")
            .conversation_id(conversation)
            .parent_message_id(review.system_message_id().expect("id"))
            .client_token("ticket-execution-1")
            .action_execution(ticket_execution("HIGH"))
            .send()
    };
    let created = execute().await.expect("execution");
    assert_eq!(
        created.system_message(),
        Some("Created ticket NWR-1001: VPN drops every hour (priority HIGH).")
    );
    let again = execute().await.expect("repeated execution");
    assert_eq!(again.system_message(), created.system_message());
    assert_eq!(again.system_message_id(), created.system_message_id());

    let stats = h.sim.stats();
    assert_eq!(stats.tickets_created, 1);
    assert_eq!(stats.requests_by_client_token("ticket-execution-1"), 2);
    assert_eq!(stats.chat_sync_effects, 2, "review + one execution");
    let tickets = h.sim.tickets();
    assert_eq!(tickets.len(), 1);
    assert_eq!(tickets[0].id, "NWR-1001");
    assert_eq!(tickets[0].priority, "HIGH");
    assert!(!tickets[0].notify_me);
    assert_eq!(tickets[0].user, "dave");

    // The conversation shows the execution once.
    let messages = client
        .list_messages()
        .application_id(APP)
        .user_id("dave")
        .conversation_id(conversation)
        .send()
        .await
        .expect("messages");
    assert_eq!(messages.messages().len(), 4);
    assert!(messages.messages()[1].action_review().is_some());
    assert!(messages.messages()[2].action_execution().is_some());
}

#[tokio::test]
async fn signin_plugin_challenge_then_sign_in_then_answer() {
    let h = start().await;
    let client = h.client();
    let calendar = || {
        client
            .chat_sync()
            .application_id(APP)
            .user_id("erin")
            .chat_mode(ChatMode::PluginMode)
            .chat_mode_configuration(plugin_mode(SIGNIN_PLUGIN_ID))
            .user_message("When is my next meeting?")
            .send()
    };
    let first = calendar().await.expect("challenge");
    let url = first
        .auth_challenge_request()
        .map(|c| c.authorization_url())
        .expect("authorization url")
        .to_owned();
    assert!(
        url.starts_with(&format!("{}/oauth/authorize?state=", h.endpoint)),
        "{url}"
    );
    let state = url.rsplit_once("state=").expect("state").1.to_owned();
    let conversation = first.conversation_id().expect("id").to_owned();

    let respond = |state: &str, parent: &str| {
        client
            .chat_sync()
            .application_id(APP)
            .user_id("erin")
            .conversation_id(&conversation)
            .parent_message_id(parent)
            .auth_challenge_response(
                AuthChallengeResponse::builder()
                    .response_map("state", state)
                    .build()
                    .expect("response"),
            )
            .send()
    };

    // Not signed in yet: a new challenge.
    let again = respond(&state, first.system_message_id().expect("id"))
        .await
        .expect("second challenge");
    let url = again
        .auth_challenge_request()
        .map(|c| c.authorization_url())
        .expect("new challenge")
        .to_owned();
    let state = url.rsplit_once("state=").expect("state").1.to_owned();

    // The user signs in.
    let page = reqwest::get(&url).await.expect("sign-in page");
    assert_eq!(page.status(), 200);
    assert!(page.text().await.expect("html").contains("Signed in"));

    let answer = respond(&state, again.system_message_id().expect("id"))
        .await
        .expect("answer");
    assert!(answer.auth_challenge_request().is_none());
    assert!(
        answer
            .system_message()
            .is_some_and(|m| m.starts_with("Your next meeting is")),
        "{:?}",
        answer.system_message()
    );

    // An unknown state names the field.
    let err = respond("not-a-state", answer.system_message_id().expect("id"))
        .await
        .expect_err("unknown state");
    let ChatSyncError::ValidationException(e) = service_error(err) else {
        panic!("expected ValidationException");
    };
    assert_eq!(
        e.fields()[0].name(),
        "authChallengeResponse.responseMap.state"
    );

    // Signed in: the next calendar question is answered at once.
    let direct = calendar().await.expect("direct");
    assert!(direct.auth_challenge_request().is_none());

    let bad = reqwest::get(format!("{}/oauth/authorize?state=nope", h.endpoint))
        .await
        .expect("page");
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn wrong_secret_is_invalid_signature() {
    let h = start().await;
    let client = h.client_with(
        DEFAULT_ACCESS_KEY_ID,
        "wrong-secret",
        RetryConfig::disabled(),
    );
    let err = client
        .chat_sync()
        .application_id(APP)
        .user_message("hi")
        .send()
        .await
        .expect_err("bad signature");
    assert_eq!(err.code(), Some("InvalidSignatureException"));
    assert!(
        err.message()
            .is_some_and(|m| m.starts_with("The request signature we calculated does not match"))
    );
    assert_eq!(h.sim.stats().chat_sync_requests, 0, "refused at the door");
}

#[tokio::test]
async fn unknown_access_key_is_unrecognized_client() {
    let h = start().await;
    let client = h.client_with(
        "AKIDSOMEONEELSE0001",
        DEFAULT_SECRET_ACCESS_KEY,
        RetryConfig::disabled(),
    );
    let err = client
        .list_conversations()
        .application_id(APP)
        .send()
        .await
        .expect_err("unknown key");
    assert_eq!(err.code(), Some("UnrecognizedClientException"));
    assert_eq!(
        err.message(),
        Some("The security token included in the request is invalid.")
    );
}

#[tokio::test]
async fn raw_requests_get_aws_shaped_errors() {
    let h = start().await;
    let path = format!("/applications/{APP}/conversations?sync");
    let unsigned = reqwest::Client::new()
        .post(format!("{}{path}", h.endpoint))
        .body("{}")
        .send()
        .await
        .expect("unsigned");
    assert_eq!(unsigned.status(), 403);
    assert_eq!(
        unsigned.headers()["x-amzn-errortype"],
        "MissingAuthenticationTokenException"
    );
    assert!(unsigned.headers().contains_key("x-amzn-requestid"));
    let body: serde_json::Value = unsigned.json().await.expect("json");
    assert_eq!(body["message"], "Missing Authentication Token");

    // The streaming Chat operation is refused with a clear message.
    let chat = h
        .signed("POST", &format!("/applications/{APP}/conversations"), "{}")
        .send()
        .await
        .expect("chat");
    assert_eq!(chat.status(), 400);
    assert_eq!(chat.headers()["x-amzn-errortype"], "ValidationException");
    let body: serde_json::Value = chat.json().await.expect("json");
    assert_eq!(body["reason"], "UNKNOWN_OPERATION");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("ChatSync"))
    );

    // Unparseable body.
    let garbage = h
        .signed("POST", &path, "{not json")
        .send()
        .await
        .expect("garbage");
    assert_eq!(garbage.status(), 400);
    let body: serde_json::Value = garbage.json().await.expect("json");
    assert_eq!(body["reason"], "CANNOT_PARSE");

    // Unknown operation.
    let unknown = h
        .signed("GET", "/applications", "")
        .send()
        .await
        .expect("unknown");
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        unknown.headers()["x-amzn-errortype"],
        "UnknownOperationException"
    );
}

#[tokio::test]
async fn validation_errors_name_their_fields() {
    let h = start().await;
    let client = h.client();
    let err = client
        .chat_sync()
        .application_id(APP)
        .user_id("frank")
        .conversation_id("not-a-conversation")
        .parent_message_id("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
        .client_token("t".repeat(101))
        .user_message("hi")
        .send()
        .await
        .expect_err("invalid");
    let ChatSyncError::ValidationException(e) = service_error(err) else {
        panic!("expected ValidationException");
    };
    assert_eq!(e.reason().as_str(), "FIELD_VALIDATION_FAILED");
    let names: Vec<_> = e.fields().iter().map(|f| f.name()).collect();
    assert_eq!(names, vec!["conversationId", "clientToken"]);
    assert!(e.message().starts_with("2 validation errors detected"));

    let err = client
        .chat_sync()
        .application_id(APP)
        .chat_mode(ChatMode::PluginMode)
        .user_message("open a ticket")
        .send()
        .await
        .expect_err("missing plugin");
    let ChatSyncError::ValidationException(e) = service_error(err) else {
        panic!("expected ValidationException");
    };
    assert_eq!(e.fields()[0].name(), "chatModeConfiguration");

    let err = client
        .chat_sync()
        .application_id(APP)
        .send()
        .await
        .expect_err("no message");
    let ChatSyncError::ValidationException(e) = service_error(err) else {
        panic!("expected ValidationException");
    };
    assert_eq!(e.fields()[0].name(), "userMessage");
    assert_eq!(h.sim.stats().chat_sync_effects, 0);
}

#[tokio::test]
async fn unknown_application_is_resource_not_found() {
    let h = start().await;
    let other = "ffffffff-ffff-4fff-8fff-ffffffffffff";
    let err = h
        .client()
        .chat_sync()
        .application_id(other)
        .user_message("hi")
        .send()
        .await
        .expect_err("unknown application");
    let ChatSyncError::ResourceNotFoundException(e) = service_error(err) else {
        panic!("expected ResourceNotFoundException");
    };
    assert_eq!(e.resource_id(), other);
    assert_eq!(e.resource_type(), "APPLICATION");
}

#[tokio::test]
async fn each_scripted_error_arrives_as_its_variant() {
    let h = start().await;
    let client = h.client();
    h.sim.faults().script([
        "ValidationException",
        "LicenseNotFoundException",
        "AccessDeniedException",
        "ResourceNotFoundException",
        "ConflictException",
        "ExternalResourceException",
        "ThrottlingException",
        "InternalServerException",
        "ok",
    ]);
    let mut variants = Vec::new();
    for _ in 0..8 {
        let err = client
            .chat_sync()
            .application_id(APP)
            .user_message("How many vacation days do I get?")
            .send()
            .await
            .expect_err("scripted");
        let e = service_error(err);
        variants.push(match &e {
            ChatSyncError::ValidationException(_) => "ValidationException",
            ChatSyncError::LicenseNotFoundException(_) => "LicenseNotFoundException",
            ChatSyncError::AccessDeniedException(a) => {
                assert!(a.message().contains("qbusiness:ChatSync"));
                "AccessDeniedException"
            }
            ChatSyncError::ResourceNotFoundException(_) => "ResourceNotFoundException",
            ChatSyncError::ConflictException(_) => "ConflictException",
            ChatSyncError::ExternalResourceException(_) => "ExternalResourceException",
            ChatSyncError::ThrottlingException(_) => "ThrottlingException",
            ChatSyncError::InternalServerException(_) => "InternalServerException",
            other => panic!("unexpected {other:?}"),
        });
    }
    assert_eq!(
        variants,
        vec![
            "ValidationException",
            "LicenseNotFoundException",
            "AccessDeniedException",
            "ResourceNotFoundException",
            "ConflictException",
            "ExternalResourceException",
            "ThrottlingException",
            "InternalServerException",
        ]
    );
    ask(&h, "anonymous", "How many vacation days do I get?").await;
    let stats = h.sim.stats();
    assert_eq!(stats.chat_sync_requests, 9);
    assert_eq!(stats.faults_injected, 8);
    assert_eq!(stats.chat_sync_effects, 1);
    assert_eq!(h.sim.faults().pending_script(), 0);
}

#[tokio::test]
async fn injected_throttle_then_ok_succeeds_with_the_standard_retry() {
    let h = start().await;
    let retry = RetryConfig::standard()
        .with_max_attempts(3)
        .with_initial_backoff(Duration::from_millis(10));
    let client = h.client_with(DEFAULT_ACCESS_KEY_ID, DEFAULT_SECRET_ACCESS_KEY, retry);
    h.sim.faults().script(["ThrottlingException", "ok"]);
    let out = client
        .chat_sync()
        .application_id(APP)
        .client_token("retry-me")
        .user_message("How do I get a VPN profile?")
        .send()
        .await
        .expect("retried to success");
    assert!(!out.source_attributions().is_empty());
    let stats = h.sim.stats();
    assert_eq!(stats.chat_sync_requests, 2);
    assert_eq!(stats.requests_by_client_token("retry-me"), 2);
    assert_eq!(stats.chat_sync_effects, 1);
}

#[tokio::test]
async fn random_rates_fail_every_operation() {
    let h = start().await;
    h.sim.faults().set_rates(0.0, 1.0);
    let err = h
        .client()
        .list_conversations()
        .application_id(APP)
        .send()
        .await
        .expect_err("throttled");
    assert_eq!(err.code(), Some("ThrottlingException"));
    h.sim.faults().set_rates(1.0, 0.0);
    let err = h
        .client()
        .chat_sync()
        .application_id(APP)
        .user_message("hi")
        .send()
        .await
        .expect_err("500");
    assert!(matches!(
        service_error(err),
        ChatSyncError::InternalServerException(_)
    ));
    h.sim.faults().set_rates(0.0, 0.0);
    ask(&h, "gina", "hi").await;
}

#[tokio::test]
async fn aws_config_loader_reaches_the_emulator() {
    let h = start().await;
    let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(&h.endpoint)
        .region(aws_config::Region::new(DEFAULT_REGION))
        .credentials_provider(aws_sdk_qbusiness::config::Credentials::new(
            DEFAULT_ACCESS_KEY_ID,
            DEFAULT_SECRET_ACCESS_KEY,
            Some("session-token".into()),
            None,
            "test",
        ))
        .load()
        .await;
    let client = aws_sdk_qbusiness::Client::new(&shared);
    let out = client
        .chat_sync()
        .application_id(APP)
        .user_id("hank@example.com")
        .user_groups("engineering")
        .user_groups("on call/primary")
        .user_message("Who decides disagreements in code review?")
        .send()
        .await
        .expect("chat_sync through aws-config with a session token");
    assert!(
        out.system_message()
            .is_some_and(|m| m.contains("tech lead")),
        "{:?}",
        out.system_message()
    );
}

#[tokio::test]
async fn every_answer_and_error_follows_the_service_model() {
    let h = start().await;
    let (client, recorder) = h.recording_client();
    // An answer with citations, then a follow-up in its conversation.
    let first = client
        .chat_sync()
        .application_id(APP)
        .user_id("erin")
        .user_message("How many vacation days do I get per year?")
        .send()
        .await
        .expect("answer");
    let conversation = first.conversation_id().expect("conversation").to_owned();
    let review = client
        .chat_sync()
        .application_id(APP)
        .user_id("erin")
        .conversation_id(&conversation)
        .parent_message_id(first.system_message_id().expect("id"))
        .chat_mode(ChatMode::PluginMode)
        .chat_mode_configuration(plugin_mode(TICKET_PLUGIN_ID))
        .user_message("VPN drops every hour")
        .send()
        .await
        .expect("an action review");
    client
        .chat_sync()
        .application_id(APP)
        .user_id("erin")
        .conversation_id(&conversation)
        .parent_message_id(review.system_message_id().expect("id"))
        .action_execution(ticket_execution("HIGH"))
        .send()
        .await
        .expect("the action executed");
    client
        .chat_sync()
        .application_id(APP)
        .user_id("erin")
        .chat_mode(ChatMode::PluginMode)
        .chat_mode_configuration(plugin_mode(SIGNIN_PLUGIN_ID))
        .user_message("What is my next meeting?")
        .send()
        .await
        .expect("a sign-in challenge");
    client
        .chat_sync()
        .application_id(APP)
        .user_id("erin")
        .chat_mode(ChatMode::CreatorMode)
        .user_message("Write a haiku about Mondays")
        .send()
        .await
        .expect("creator mode");
    client
        .list_conversations()
        .application_id(APP)
        .user_id("erin")
        .send()
        .await
        .expect("conversations");
    client
        .list_messages()
        .application_id(APP)
        .user_id("erin")
        .conversation_id(&conversation)
        .send()
        .await
        .expect("messages");
    // Every error ChatSync declares, then a real validation failure.
    h.sim.faults().script([
        "ValidationException",
        "LicenseNotFoundException",
        "AccessDeniedException",
        "ResourceNotFoundException",
        "ConflictException",
        "ExternalResourceException",
        "ThrottlingException",
        "InternalServerException",
    ]);
    for _ in 0..8 {
        ask_expecting_error(&client).await;
    }
    client
        .chat_sync()
        .application_id(APP)
        .user_id("erin")
        .conversation_id("not-a-conversation")
        .user_message("?")
        .send()
        .await
        .expect_err("an invalid conversation id");
    client
        .delete_conversation()
        .application_id(APP)
        .user_id("erin")
        .conversation_id(&conversation)
        .send()
        .await
        .expect("deleted");

    let model = agentgate_testkit::contracts::qbusiness_model();
    let exchanges = recorder.exchanges();
    assert_eq!(exchanges.len(), 17, "{exchanges:?}");
    assert!(exchanges.iter().all(|e| !e.body.is_null()), "{exchanges:?}");
    let errors = exchanges.iter().filter(|e| e.status >= 400).count();
    assert_eq!(errors, 9);
    let problems: Vec<String> = exchanges
        .iter()
        .flat_map(|e| {
            model
                .response_problems(&e.operation, e.status, e.error_type.as_deref(), &e.body)
                .into_iter()
                .map(move |p| format!("{} {} {:?}: {p}", e.operation, e.status, e.error_type))
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

async fn ask_expecting_error(client: &aws_sdk_qbusiness::Client) {
    client
        .chat_sync()
        .application_id(APP)
        .user_message("How many vacation days do I get?")
        .send()
        .await
        .expect_err("scripted");
}

#[test]
fn the_service_model_check_refuses_undocumented_members() {
    let model = agentgate_testkit::contracts::qbusiness_model();
    let id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
    let ok = serde_json::json!({ "conversationId": id, "systemMessage": "hi" });
    assert_eq!(
        model.response_problems("ChatSync", 200, None, &ok),
        Vec::<String>::new()
    );
    let short = serde_json::json!({ "conversationId": "c" });
    assert_eq!(
        model.response_problems("ChatSync", 200, None, &short).len(),
        1
    );
    let extra = serde_json::json!({ "conversationId": id, "replayed": true });
    assert_eq!(
        model.response_problems("ChatSync", 200, None, &extra).len(),
        1
    );
    let wrong_type = serde_json::json!({ "systemMessage": 7 });
    assert_eq!(
        model
            .response_problems("ChatSync", 200, None, &wrong_type)
            .len(),
        1
    );
    let undeclared = serde_json::json!({ "message": "m" });
    assert!(
        !model
            .response_problems("ChatSync", 400, Some("NoSuchException"), &undeclared)
            .is_empty()
    );
}
