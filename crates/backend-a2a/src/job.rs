//! The job behind an agent's tool: one A2A task followed to its end.
//!
//! ```text
//! start:  SendMessage(returnImmediately, messageId = "agentgate-" + idempotency key)
//!           └─ task id, context id and endpoint checkpointed ─▶ follow
//! resume(Tick):  GetTask ─▶ follow
//! follow: WORKING/SUBMITTED ─▶ Wait (status = the agent's status message)
//!         INPUT_REQUIRED    ─▶ Ask (form: `answer`) ─▶ resume(Input): SendMessage in the same task
//!         AUTH_REQUIRED     ─▶ Ask (URL elicitation) when the agent's message carries a URL,
//!                              else Done(isError); after the user accepts: Wait while it signs in
//!         COMPLETED         ─▶ Done(artifacts)      FAILED / REJECTED ─▶ Done(isError)
//!         CANCELED          ─▶ Cancelled
//! cancel: CancelTask ─▶ Cancelled, or (TaskNotCancelable) Wait saying the agent refused,
//!         then GetTask on each later cancel step until the task ends on its own
//! ```
//!
//! A repeated step repeats its `SendMessage` with the same messageId (the
//! idempotency key is the same), so an agent that deduplicates by messageId
//! (§3.3.1 allows it) runs the message once. One that does not cannot be
//! protected by the protocol: A2A has no other idempotency mechanism.

use std::sync::{Arc, PoisonError, RwLock};

use agentgate_backend::{Event, Job, JobContext, JobError, Step, StepResult};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ErrorData, InputRequest, InputRequests, InputResponses,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::client::{AgentClient, CallError, TASK_NOT_CANCELABLE};
use crate::config::AgentSettings;
use crate::result;
use crate::wire::{
    AgentCard, Message, OutMessage, OutPart, SendConfiguration, SendMessageRequest, SendOutcome,
    TaskSnapshot, TaskState,
};

/// A2A's TaskNotFoundError.
const TASK_NOT_FOUND: i64 = -32001;

/// The agent's card as last read.
#[derive(Debug, Clone)]
pub(crate) enum CardState {
    Ready(AgentCard),
    Unreadable(String),
}

/// One configured agent: its settings, client and card.
#[derive(Debug)]
pub(crate) struct Agent {
    pub settings: AgentSettings,
    pub client: AgentClient,
    card: RwLock<CardState>,
}

impl Agent {
    pub fn new(settings: AgentSettings, client: AgentClient) -> Self {
        Self {
            settings,
            client,
            card: RwLock::new(CardState::Unreadable("the card was not read yet".into())),
        }
    }

    pub fn card(&self) -> CardState {
        self.card
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reads the card again. A card that was readable before and fails now
    /// is kept (its endpoint most likely still works); the failure is logged.
    pub async fn refresh(&self) {
        let read = self.client.card(&self.settings.card_url).await;
        let mut card = self.card.write().unwrap_or_else(PoisonError::into_inner);
        match read {
            Ok(new) => *card = CardState::Ready(new),
            Err(why) => {
                tracing::warn!(agent = %self.settings.name, reason = %why, "A2A agent card unreadable");
                if !matches!(*card, CardState::Ready(_)) {
                    *card = CardState::Unreadable(why);
                }
            }
        }
    }

    /// The JSON-RPC endpoint, reading the card first if it was unreadable.
    async fn endpoint(&self) -> Result<String, String> {
        if let CardState::Unreadable(_) = self.card() {
            self.refresh().await;
        }
        match self.card() {
            CardState::Ready(card) => card
                .jsonrpc_url()
                .map(str::to_owned)
                .ok_or_else(|| "its card lists no JSONRPC interface".to_owned()),
            CardState::Unreadable(why) => Err(why),
        }
    }
}

/// The tool's arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    /// The text to send to the agent.
    pub message: String,
    /// Structured input, sent as a data part beside the text.
    #[serde(default)]
    pub data: Option<Map<String, Value>>,
    /// Continue the conversation (A2A contextId) of an earlier call.
    #[serde(default)]
    pub context_id: Option<String>,
    /// A2A message metadata, passed through as is (some agents select a skill
    /// or options by it).
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// What the job is waiting for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Polling the task.
    Following,
    /// The client was asked the agent's question under `key`.
    AwaitingInput { key: String, question_id: String },
    /// The client was shown the sign-in URL under `key`.
    AwaitingSignIn { key: String },
    /// The user went to sign in; polling until the agent goes on.
    SigningIn,
    /// A cancel was sent (and, with `refused`, refused by the agent); polling
    /// until the task ends.
    Cancelling { refused: Option<String> },
}

/// The checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct State {
    /// The JSON-RPC endpoint the task lives at (fixed for its life, whatever
    /// later card reads say).
    pub endpoint: String,
    pub task_id: String,
    pub context_id: String,
    pub phase: Phase,
    /// The messageId of the agent's last question that was answered: an
    /// agent that still shows it right after the answer has not read the
    /// answer yet, and is polled instead of asking the client again.
    #[serde(default)]
    pub answered_question: String,
}

/// The job of one agent's tool.
#[derive(Debug, Clone)]
pub struct AgentJob {
    pub(crate) agent: Arc<Agent>,
}

/// The messageId of the message a step sends: the same when the step repeats.
pub fn message_id(cx: &JobContext) -> String {
    format!("agentgate-{}", cx.idempotency_key())
}

impl AgentJob {
    fn name(&self) -> &str {
        &self.agent.settings.name
    }

    fn wait(&self, state: State, status: String) -> Step<State> {
        Step::Wait {
            state,
            status: Some(status),
            after: self.agent.settings.poll_interval,
        }
    }

    fn fail(&self, method: &'static str) -> impl FnOnce(CallError) -> JobError + '_ {
        move |e| e.into_job_error(self.name(), method)
    }

    async fn send(&self, endpoint: &str, message: OutMessage) -> Result<SendOutcome, JobError> {
        let request = SendMessageRequest {
            message,
            configuration: SendConfiguration {
                return_immediately: true,
            },
        };
        self.agent
            .client
            .send_message(endpoint, &request)
            .await
            .map_err(self.fail("SendMessage"))
    }

    /// The step for a task as `snapshot` shows it.
    fn follow(&self, mut state: State, snapshot: &TaskSnapshot, cx: &JobContext) -> Step<State> {
        let task = &snapshot.task;
        let said = task
            .status
            .message
            .as_ref()
            .map(Message::text)
            .filter(|t| !t.trim().is_empty());
        let name = self.name();
        let refused = match &state.phase {
            Phase::Cancelling { refused } => Some(refused.clone()),
            _ => None,
        };
        match task.status.state {
            TaskState::Completed => Step::Done(result::completed(name, snapshot)),
            TaskState::Failed => Step::Done(result::unsuccessful(name, "failed", snapshot)),
            TaskState::Rejected => {
                Step::Done(result::unsuccessful(name, "rejected the request", snapshot))
            }
            TaskState::Canceled => Step::Cancelled,
            TaskState::InputRequired | TaskState::AuthRequired if refused.is_some() => {
                Step::Done(result::unsuccessful(
                    name,
                    "was asked to cancel, went on, and now waits for the client; the call ends here",
                    snapshot,
                ))
            }
            TaskState::InputRequired
                if !state.answered_question.is_empty()
                    && task.status.message.as_ref().map(|m| m.message_id.as_str())
                        == Some(state.answered_question.as_str()) =>
            {
                self.wait(state, format!("the agent `{name}` is reading the answer"))
            }
            TaskState::InputRequired => {
                let key = format!("a2a-input-{}", cx.step);
                let question =
                    said.unwrap_or_else(|| format!("The agent `{name}` needs more input."));
                match input_form(&question) {
                    Ok(request) => {
                        state.phase = Phase::AwaitingInput {
                            key: key.clone(),
                            question_id: task
                                .status
                                .message
                                .as_ref()
                                .map(|m| m.message_id.clone())
                                .unwrap_or_default(),
                        };
                        Step::Ask {
                            state,
                            status: Some(question),
                            requests: InputRequests::from([(key, request)]),
                        }
                    }
                    Err(e) => Step::Fail(e),
                }
            }
            TaskState::AuthRequired if state.phase == Phase::SigningIn => self.wait(
                state,
                said.unwrap_or_else(|| "waiting for the sign-in to reach the agent".into()),
            ),
            TaskState::AuthRequired => {
                let Some(url) = task.status.message.as_ref().and_then(sign_in_url) else {
                    return Step::Done(result::unsuccessful(
                        name,
                        "needs authorization, and its message names no sign-in URL \
                         (MCP forbids asking for credentials in a form)",
                        snapshot,
                    ));
                };
                let key = format!("a2a-sign-in-{}", cx.step);
                let message =
                    said.unwrap_or_else(|| format!("The agent `{name}` needs a sign-in."));
                state.phase = Phase::AwaitingSignIn { key: key.clone() };
                Step::Ask {
                    state,
                    status: Some(message.clone()),
                    requests: InputRequests::from([(
                        key.clone(),
                        InputRequest::Elicitation(ElicitRequest::new(
                            ElicitRequestParams::UrlElicitationParams {
                                meta: None,
                                message,
                                url,
                                elicitation_id: key,
                            },
                        )),
                    )]),
                }
            }
            TaskState::Submitted | TaskState::Working | TaskState::Unknown => {
                // Past the sign-in: a later AUTH_REQUIRED is a new one, asked again.
                if state.phase == Phase::SigningIn {
                    state.phase = Phase::Following;
                }
                let working = said.unwrap_or_else(|| format!("the agent `{name}` is working"));
                let status = match refused {
                    Some(Some(why)) => {
                        format!(
                            "the agent `{name}` refused to cancel ({why}); still working: {working}"
                        )
                    }
                    Some(None) => format!("cancel requested; waiting for the agent: {working}"),
                    None => working,
                };
                self.wait(state, status)
            }
        }
    }

    async fn poll(&self, state: State, cx: &JobContext) -> StepResult<State> {
        let snapshot = self
            .agent
            .client
            .get_task(&state.endpoint, &state.task_id)
            .await
            .map_err(self.fail("GetTask"))?;
        Ok(self.follow(state, &snapshot, cx))
    }

    /// The client declined: the A2A task is canceled (best effort) and the
    /// call ends with an error saying so.
    async fn declined(&self, state: &State, what: &str) -> StepResult<State> {
        if let Err(e) = self
            .agent
            .client
            .cancel_task(&state.endpoint, &state.task_id)
            .await
        {
            tracing::info!(agent = %self.name(), error = %e, "cancel after a declined answer failed");
        }
        Ok(Step::Done(result::tool_error(format!(
            "The {what} of the A2A agent `{}` was declined or dismissed; its task {} was canceled.",
            self.name(),
            state.task_id
        ))))
    }
}

impl Job for AgentJob {
    type Args = SendArgs;
    type State = State;

    async fn start(&self, args: SendArgs, cx: &JobContext) -> StepResult<State> {
        let endpoint = match self.agent.endpoint().await {
            Ok(endpoint) => endpoint,
            Err(why) => {
                return Ok(Step::Done(result::tool_error(format!(
                    "The A2A agent `{}` is unavailable: {why}",
                    self.name()
                ))));
            }
        };
        let mut parts = Vec::new();
        if !args.message.is_empty() {
            parts.push(OutPart::text(args.message));
        }
        if let Some(data) = args.data {
            parts.push(OutPart::data(Value::Object(data)));
        }
        if parts.is_empty() {
            return Ok(Step::Done(result::tool_error(
                "Error: field `message` is empty and no `data` is given; send some text or data.",
            )));
        }
        let mut message = OutMessage::user(message_id(cx), parts);
        message.context_id = args.context_id.unwrap_or_default();
        message.metadata = args.metadata;
        match self.send(&endpoint, message).await? {
            SendOutcome::Message { message, raw } => {
                Ok(Step::Done(result::direct(self.name(), &message, &raw)))
            }
            SendOutcome::Task(snapshot) => {
                let state = State {
                    endpoint,
                    task_id: snapshot.task.id.clone(),
                    context_id: snapshot.task.context_id.clone(),
                    phase: Phase::Following,
                    answered_question: String::new(),
                };
                Ok(self.follow(state, &snapshot, cx))
            }
        }
    }

    async fn resume(&self, mut state: State, event: Event, cx: &JobContext) -> StepResult<State> {
        let responses = match event {
            Event::Tick => return self.poll(state, cx).await,
            Event::Input(responses) => responses,
        };
        match state.phase.clone() {
            Phase::AwaitingInput { key, question_id } => {
                let Some(answer) = accepted(&responses, &key) else {
                    return self.declined(&state, "question").await;
                };
                let text = answer
                    .get("answer")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let mut message = OutMessage::user(message_id(cx), vec![OutPart::text(text)]);
                message.task_id = state.task_id.clone();
                message.context_id = state.context_id.clone();
                state.phase = Phase::Following;
                state.answered_question = question_id;
                match self.send(&state.endpoint, message).await? {
                    SendOutcome::Task(snapshot) => Ok(self.follow(state, &snapshot, cx)),
                    SendOutcome::Message { message, raw } => {
                        Ok(Step::Done(result::direct(self.name(), &message, &raw)))
                    }
                }
            }
            Phase::AwaitingSignIn { key } => {
                if accepted(&responses, &key).is_none() {
                    return self.declined(&state, "sign-in").await;
                }
                state.phase = Phase::SigningIn;
                self.poll(state, cx).await
            }
            // Input nobody asked for (the step that asked was superseded).
            _ => self.poll(state, cx).await,
        }
    }

    async fn cancel(&self, mut state: State, cx: &JobContext) -> StepResult<State> {
        if let Phase::Cancelling { .. } = state.phase {
            return self.poll(state, cx).await;
        }
        match self
            .agent
            .client
            .cancel_task(&state.endpoint, &state.task_id)
            .await
        {
            Ok(snapshot) => {
                state.phase = Phase::Cancelling { refused: None };
                Ok(self.follow(state, &snapshot, cx))
            }
            Err(CallError::Rpc { code, message }) if code == TASK_NOT_CANCELABLE => {
                state.phase = Phase::Cancelling {
                    refused: Some(message),
                };
                self.poll(state, cx).await
            }
            Err(CallError::Rpc { code, .. }) if code == TASK_NOT_FOUND => Ok(Step::Cancelled),
            Err(e) => Err(e.into_job_error(self.name(), "CancelTask")),
        }
    }
}

/// The accepted content of the answer under `key`.
fn accepted<'a>(responses: &'a InputResponses, key: &str) -> Option<&'a Value> {
    let response = responses.get(key)?;
    if response.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    Some(response.get("content").unwrap_or(&Value::Null))
}

/// A form asking for the agent's question's answer as text.
fn input_form(question: &str) -> Result<InputRequest, ErrorData> {
    let schema = json!({
        "type": "object",
        "properties": {"answer": {"type": "string", "title": "Answer", "description": "Your answer to the agent"}},
        "required": ["answer"],
    });
    let requested_schema = serde_json::from_value(schema).map_err(|e| {
        ErrorData::internal_error(format!("the answer form's schema is invalid: {e}"), None)
    })?;
    Ok(InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question.to_owned(),
            requested_schema,
        },
    )))
}

/// The sign-in URL an AUTH_REQUIRED message carries: a `url` part, else the
/// first http(s) URL in its text (trailing punctuation dropped).
fn sign_in_url(message: &Message) -> Option<String> {
    if let Some(url) = message.parts.iter().find_map(|p| p.url.clone()) {
        return Some(url);
    }
    message
        .text()
        .split_whitespace()
        .map(|word| word.trim_end_matches(['.', ',', ';', ':', ')', '!', '?', '"', '\'']))
        .find(|word| url::Url::parse(word).is_ok_and(|u| matches!(u.scheme(), "http" | "https")))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Part;

    fn text(t: &str) -> Message {
        Message {
            parts: vec![Part {
                text: Some(t.into()),
                ..Part::default()
            }],
            ..Message::default()
        }
    }

    #[test]
    fn the_sign_in_url_is_found_in_the_text_or_a_url_part() {
        assert_eq!(
            sign_in_url(&text("Sign in at http://h:1/auth/t1 to let me read.")).as_deref(),
            Some("http://h:1/auth/t1")
        );
        assert_eq!(sign_in_url(&text("Sign in with your badge.")), None);
        assert_eq!(sign_in_url(&text("see ftp://h/x")), None);
        let with_part = Message {
            parts: vec![Part {
                url: Some("https://idp/x".into()),
                ..Part::default()
            }],
            ..Message::default()
        };
        assert_eq!(sign_in_url(&with_part).as_deref(), Some("https://idp/x"));
    }

    fn job() -> AgentJob {
        let settings = AgentSettings {
            name: "t".into(),
            tool_name: "t_send_message".into(),
            card_url: url::Url::parse("http://127.0.0.1:9/").expect("url"),
            token: None,
            poll_interval: std::time::Duration::from_secs(1),
        };
        let client = AgentClient::new(
            reqwest::Client::new(),
            None,
            agentgate_backend::UpstreamMetrics::detached("a2a"),
        );
        AgentJob {
            agent: Arc::new(Agent::new(settings, client)),
        }
    }

    fn snapshot(state: TaskState, said: &str, message_id: &str) -> TaskSnapshot {
        let mut message = text(said);
        message.message_id = message_id.into();
        TaskSnapshot {
            task: crate::wire::Task {
                id: "task-1".into(),
                context_id: "ctx-1".into(),
                status: crate::wire::TaskStatus {
                    state,
                    message: Some(message),
                },
                artifacts: Vec::new(),
            },
            raw: json!({"id": "task-1"}),
        }
    }

    fn state(phase: Phase) -> State {
        State {
            endpoint: "http://127.0.0.1:9/".into(),
            task_id: "task-1".into(),
            context_id: "ctx-1".into(),
            phase,
            answered_question: String::new(),
        }
    }

    fn cx(step: i64) -> JobContext {
        JobContext {
            task_id: agentgate_backend::TaskId::generate(),
            step,
            now: 0,
        }
    }

    #[test]
    fn a_second_sign_in_after_work_resumed_is_asked_again() {
        let job = job();
        let signing = state(Phase::SigningIn);
        let auth = snapshot(TaskState::AuthRequired, "Sign in at http://idp/x", "m1");
        assert!(matches!(
            job.follow(signing.clone(), &auth, &cx(3)),
            Step::Wait { .. }
        ));
        let Step::Wait { state: after, .. } = job.follow(
            signing,
            &snapshot(TaskState::Working, "reading", "m2"),
            &cx(4),
        ) else {
            panic!("working is a wait")
        };
        assert_eq!(after.phase, Phase::Following);
        let again = snapshot(TaskState::AuthRequired, "Sign in at http://idp/y", "m3");
        match job.follow(after, &again, &cx(5)) {
            Step::Ask { requests, .. } => assert!(requests.contains_key("a2a-sign-in-5")),
            other => panic!("expected a new sign-in request, got {other:?}"),
        }
    }

    #[test]
    fn the_answered_question_still_showing_is_polled_not_asked_again() {
        let job = job();
        let mut answered = state(Phase::Following);
        answered.answered_question = "q1".into();
        let same = snapshot(TaskState::InputRequired, "Your name?", "q1");
        assert!(matches!(
            job.follow(answered.clone(), &same, &cx(2)),
            Step::Wait { .. }
        ));
        let next = snapshot(TaskState::InputRequired, "Your city?", "q2");
        match job.follow(answered, &next, &cx(3)) {
            Step::Ask {
                state, requests, ..
            } => {
                assert!(requests.contains_key("a2a-input-3"));
                assert_eq!(
                    state.phase,
                    Phase::AwaitingInput {
                        key: "a2a-input-3".into(),
                        question_id: "q2".into()
                    }
                );
            }
            other => panic!("expected the new question, got {other:?}"),
        }
    }

    #[test]
    fn auth_required_without_a_url_is_an_error_result_naming_the_need() {
        let auth = snapshot(TaskState::AuthRequired, "Send me your password.", "m1");
        match job().follow(state(Phase::Following), &auth, &cx(1)) {
            Step::Done(result) => {
                assert_eq!(result.is_error, Some(true));
                let text = format!("{:?}", result.content);
                assert!(
                    text.contains("no sign-in URL") && text.contains("Send me your password."),
                    "{text}"
                );
            }
            other => panic!("expected an error result, got {other:?}"),
        }
    }

    #[test]
    fn only_an_accepted_answer_counts() {
        let responses = InputResponses::from([
            (
                "a".to_owned(),
                json!({"action": "accept", "content": {"answer": "Ada"}}),
            ),
            ("b".to_owned(), json!({"action": "decline"})),
        ]);
        assert_eq!(accepted(&responses, "a"), Some(&json!({"answer": "Ada"})));
        assert_eq!(accepted(&responses, "b"), None);
        assert_eq!(accepted(&responses, "c"), None);
    }
}
