//! The job behind an agent's tool: one A2A task followed to its end.
//!
//! ```text
//! start:  [lookup: ListTasks(contextId) finds the task a repeated step started ─▶ follow]
//!         SendMessage(returnImmediately, messageId = "agentgate-" + idempotency key,
//!                     contextId = the caller's | "agentgate-" + task id (client_context_ids),
//!                     push config when push is on)
//!           └─ task id, context id and endpoint checkpointed ─▶ follow
//! resume(Tick):  GetTask ─▶ follow
//! follow: WORKING/SUBMITTED ─▶ Wait (status = the agent's status message; how long: see below)
//!         INPUT_REQUIRED    ─▶ Ask (form: `answer`) ─▶ resume(Input): GetTask, and unless the
//!                              answer is already in (a repeated step): SendMessage in the task
//!         AUTH_REQUIRED     ─▶ Ask (URL elicitation) when the agent's message carries a URL,
//!                              else Done(isError); after the user accepts: Wait while it signs in
//!         COMPLETED         ─▶ Done(artifacts)      FAILED / REJECTED ─▶ Done(isError)
//!         CANCELED          ─▶ Cancelled
//! cancel: CancelTask ─▶ Cancelled, or (TaskNotCancelable) Wait saying the agent refused,
//!         then GetTask on each later cancel step until the task ends on its own
//! ```
//!
//! **How long a working task waits** before its next read: with a stream
//! held for it (the [`Follower`], when the card says `capabilities.streaming`)
//! or push notifications asked for, the longest interval (a safety read; the
//! stream's events and the notifications nudge it sooner); otherwise the
//! polling interval, which starts at `poll_interval_ms` and doubles every
//! minute of the task's age up to `max_poll_interval_ms`.
//!
//! **Exactly once.** A repeated step repeats its `SendMessage` with the same
//! messageId (the idempotency key is the same), so an agent that
//! deduplicates by messageId (§3.3.1 allows it) runs the message once. For
//! agents that do not (the official Python SDK's server), a step first looks
//! for what an earlier attempt of it did, where the protocol lets it:
//! - a first message in a context agentgate chose (`client_context_ids`):
//!   any task `ListTasks` shows in that context is the one it started;
//! - a first message in the caller's context: a task of that context whose
//!   history holds the messageId (agents keep the user's message in the
//!   history in practice; §3.7 does not promise it);
//! - an answer to a question: `GetTask` first; the answer is not sent again
//!   when the history holds it or the task no longer asks that question.
//!
//! What is left (README "Exactly once"): an agent that answers with a direct
//! message (no task to find), a first message without either context, an
//! agent whose history leaves the message out, and an earlier attempt the
//! agent has not acted on yet when the lookup runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use agentgate_backend::{
    Event, Job, JobContext, JobError, Millis, PollPolicy, Step, StepResult, TaskPhase,
};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ErrorData, InputRequest, InputRequests, InputResponses,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::client::{AgentClient, CallError, TASK_NOT_CANCELABLE, TASK_NOT_FOUND};
use crate::config::{AgentSettings, PushSettings};
use crate::result;
use crate::streams::Follower;
use crate::wire::{
    AgentCard, ListTasksRequest, Message, OutMessage, OutPart, SendConfiguration,
    SendMessageRequest, SendOutcome, TaskSnapshot, TaskState,
};

/// JSON-RPC's InvalidParams.
const INVALID_PARAMS: i64 = -32602;

/// Tasks looked at per `ListTasks` lookup (the first page, newest first).
const LOOKUP_PAGE: i32 = 20;

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
    /// The agent's own credentials: the card, and every principal without
    /// a token of its own.
    pub client: AgentClient,
    /// Principals with their own token (`principal_tokens`): their tasks
    /// call through these, so the agent sees that person.
    by_principal: std::collections::HashMap<String, AgentClient>,
    card: RwLock<CardState>,
    /// The agent answered ListTasks with MethodNotFound / Unsupported: no
    /// more lookups (each would fail the same way).
    no_list: AtomicBool,
}

impl Agent {
    pub(crate) fn new(settings: AgentSettings, client: AgentClient) -> Self {
        let by_principal = settings
            .principal_tokens
            .iter()
            .map(|(principal, token)| {
                let auth = crate::auth::Auth::bearer(token.clone());
                (principal.clone(), client.with_auth(auth))
            })
            .collect();
        Self {
            settings,
            client,
            by_principal,
            card: RwLock::new(CardState::Unreadable("the card was not read yet".into())),
            no_list: AtomicBool::new(false),
        }
    }

    /// The client a task of `owner` calls through: with its own token when
    /// `principal_tokens` gives it one, else with the agent's credentials.
    /// Every call of a task (send, poll, stream, answer, cancel) goes
    /// through it, so an agent that scopes tasks to its callers finds them.
    pub(crate) fn client_for(&self, owner: &agentgate_backend::Owner) -> &AgentClient {
        self.by_principal
            .get(owner.as_str())
            .unwrap_or(&self.client)
    }

    pub(crate) fn card(&self) -> CardState {
        self.card
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reads the card again. A card that was readable before and fails now
    /// is kept (its endpoint most likely still works); the failure is logged.
    pub(crate) async fn refresh(&self) {
        let read = self.client.card(&self.settings.card_url).await;
        let mut card = self.card.write().unwrap_or_else(PoisonError::into_inner);
        match read {
            Ok(new) => {
                self.client.auth().card_flow(new.client_credentials());
                *card = CardState::Ready(new);
            }
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
            CardState::Ready(card) => {
                let raw = card
                    .jsonrpc_url()
                    .ok_or_else(|| "its card lists no JSONRPC interface".to_owned())?;
                // Checked before anything is sent: the card must not steer
                // the credentials to another origin.
                self.client
                    .guard()
                    .endpoint(raw)
                    .map(|_| raw.to_owned())
                    .map_err(|refused| refused.0)
            }
            CardState::Unreadable(why) => Err(why),
        }
    }

    /// Whether the card (as last read) says the agent streams / pushes.
    fn card_says(&self, what: fn(&AgentCard) -> bool) -> bool {
        match &*self.card.read().unwrap_or_else(PoisonError::into_inner) {
            CardState::Ready(card) => what(card),
            CardState::Unreadable(_) => false,
        }
    }
}

/// What every agent's jobs share: the follower, push and the longest wait.
#[derive(Debug)]
pub(crate) struct Shared {
    pub follower: Arc<Follower>,
    pub push: Option<PushSettings>,
    pub max_poll_interval: Duration,
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
    /// Following the task.
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
pub struct Checkpoint {
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
    /// When the task was started (its polling interval grows with age).
    #[serde(default)]
    pub since: Millis,
    /// Whether the agent was asked to push this task's updates.
    #[serde(default)]
    pub push: bool,
}

/// The job of one agent's tool.
#[derive(Debug, Clone)]
pub struct AgentJob {
    pub(crate) agent: Arc<Agent>,
    pub(crate) shared: Arc<Shared>,
}

/// The messageId of the message a step sends: the same when the step repeats.
pub fn message_id(cx: &JobContext) -> String {
    format!("agentgate-{}", cx.idempotency_key())
}

/// The contextId agentgate chooses for a call without one, when the agent
/// takes client-chosen contextIds: derived from the task, so a repeated
/// step uses (and can look up) the same one.
pub fn context_id(cx: &JobContext) -> String {
    format!("agentgate-{}", cx.task_id)
}

/// How a first message's earlier attempt can be found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// A context only this task uses: any task in it.
    OwnContext,
    /// The caller's context: the task whose history holds the message.
    ByMessage,
}

/// The polling interval of an agent's working tasks: `first`, doubling
/// every minute of age, up to `max`.
pub(crate) fn poll_policy(first: Duration, max: Duration) -> PollPolicy {
    PollPolicy::default()
        .working(first)
        .grow_every(Some(Duration::from_secs(60)))
        .max(max.max(first))
}

impl AgentJob {
    fn name(&self) -> &str {
        &self.agent.settings.name
    }

    /// The wait of a working task (see the module docs).
    fn wait(&self, state: Checkpoint, status: String, cx: &JobContext) -> Step<Checkpoint> {
        let settings = &self.agent.settings;
        let longest = self.shared.max_poll_interval.max(settings.poll_interval);
        let streamed = settings.streaming
            && self.agent.card_says(AgentCard::streams)
            && self.shared.follower.watch(
                &cx.task_id,
                self.agent.client_for(&cx.owner),
                &state.endpoint,
                &state.task_id,
                settings.poll_interval,
            );
        let after = if streamed || state.push {
            longest
        } else {
            poll_policy(settings.poll_interval, longest)
                .interval(TaskPhase::Working, cx.now.since(state.since))
                .unwrap_or(longest)
        };
        Step::Wait {
            state,
            status: Some(status),
            after,
        }
    }

    /// A step that leaves the working state: nothing to follow any more.
    fn settle(&self, step: Step<Checkpoint>, cx: &JobContext) -> Step<Checkpoint> {
        if !matches!(step, Step::Wait { .. }) {
            self.shared.follower.forget(&cx.task_id);
        }
        step
    }

    fn fail(&self, method: &'static str) -> impl FnOnce(CallError) -> JobError + '_ {
        move |e| e.into_job_error(self.name(), method)
    }

    /// Whether this call asks the agent for push notifications.
    fn pushes(&self) -> bool {
        self.shared.push.is_some()
            && self.agent.settings.push
            && self.agent.card_says(AgentCard::pushes)
    }

    async fn send(
        &self,
        endpoint: &str,
        message: OutMessage,
        push: bool,
        cx: &JobContext,
    ) -> Result<SendOutcome, CallError> {
        let request = SendMessageRequest {
            message,
            configuration: SendConfiguration {
                return_immediately: true,
                task_push_notification_config: self
                    .shared
                    .push
                    .as_ref()
                    .filter(|_| push)
                    .map(|settings| crate::push::config(settings, &cx.task_id)),
            },
        };
        self.agent
            .client_for(&cx.owner)
            .send_message(endpoint, &request)
            .await
    }

    /// The task an earlier attempt of this step started, if the agent shows
    /// it (see the module docs). `None` when there is none, or the agent
    /// lists no tasks.
    async fn find(
        &self,
        endpoint: &str,
        context_id: &str,
        lookup: Lookup,
        message_id: &str,
        cx: &JobContext,
    ) -> Result<Option<TaskSnapshot>, JobError> {
        let client = self.agent.client_for(&cx.owner);
        if self.agent.no_list.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let request = ListTasksRequest {
            context_id: context_id.to_owned(),
            page_size: LOOKUP_PAGE,
            history_length: None,
        };
        let listed = match client.list_tasks(endpoint, &request).await {
            Ok(listed) => listed,
            Err(e) if e.unsupported() => {
                tracing::warn!(agent = %self.name(), error = %e,
                    "the agent lists no tasks: a step repeated after a crash may send its message twice");
                self.agent.no_list.store(true, Ordering::Relaxed);
                return Ok(None);
            }
            Err(e) => return Err(e.into_job_error(self.name(), "ListTasks")),
        };
        let found = listed.tasks.into_iter().find(|t| match lookup {
            Lookup::OwnContext => t.task.context_id == context_id,
            Lookup::ByMessage => t.task.has_message(message_id),
        });
        let Some(found) = found else {
            return Ok(None);
        };
        tracing::info!(agent = %self.name(), task = %found.task.id,
            "a repeated step found the task its earlier attempt started; not sending again");
        // ListTasks leaves the artifacts out (§3.1.4): read the whole task.
        let snapshot = client
            .get_task(endpoint, &found.task.id)
            .await
            .map_err(self.fail("GetTask"))?;
        Ok(Some(snapshot))
    }

    /// The step for a task as `snapshot` shows it.
    fn follow(
        &self,
        state: Checkpoint,
        snapshot: &TaskSnapshot,
        cx: &JobContext,
    ) -> Step<Checkpoint> {
        let step = self.map(state, snapshot, cx);
        self.settle(step, cx)
    }

    fn map(
        &self,
        mut state: Checkpoint,
        snapshot: &TaskSnapshot,
        cx: &JobContext,
    ) -> Step<Checkpoint> {
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
            TaskState::Canceled => Step::cancelled(),
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
                self.wait(
                    state,
                    format!("the agent `{name}` is reading the answer"),
                    cx,
                )
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
                cx,
            ),
            TaskState::AuthRequired => {
                let url = match task.status.message.as_ref().and_then(sign_in_url) {
                    Some(Ok(url)) => url,
                    Some(Err(refused)) => {
                        // Not the task's raw JSON either: it holds the URL.
                        return Step::Done(result::tool_error(format!(
                            "The A2A agent `{name}` asked for a sign-in at a URL agentgate does \
                             not forward: {refused}. Its task {} stays waiting for a sign-in.",
                            task.id
                        )));
                    }
                    None => {
                        return Step::Done(result::unsuccessful(
                            name,
                            "needs authorization, and its message names no sign-in URL \
                             (MCP forbids asking for credentials in a form)",
                            snapshot,
                        ));
                    }
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
                self.wait(state, status, cx)
            }
        }
    }

    async fn poll(&self, state: Checkpoint, cx: &JobContext) -> StepResult<Checkpoint> {
        let snapshot = self
            .agent
            .client_for(&cx.owner)
            .get_task(&state.endpoint, &state.task_id)
            .await
            .map_err(self.fail("GetTask"))?;
        Ok(self.follow(state, &snapshot, cx))
    }

    /// The client declined: the A2A task is canceled (best effort) and the
    /// call ends with an error saying so.
    async fn declined(
        &self,
        state: &Checkpoint,
        what: &str,
        cx: &JobContext,
    ) -> StepResult<Checkpoint> {
        self.shared.follower.forget(&cx.task_id);
        if let Err(e) = self
            .agent
            .client_for(&cx.owner)
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

    /// Sends the answer to the agent's question, unless an earlier attempt
    /// of this step already did (see the module docs).
    async fn answer(
        &self,
        mut state: Checkpoint,
        question_id: String,
        text: String,
        cx: &JobContext,
    ) -> StepResult<Checkpoint> {
        let id = message_id(cx);
        let now = self
            .agent
            .client_for(&cx.owner)
            .get_task(&state.endpoint, &state.task_id)
            .await
            .map_err(self.fail("GetTask"))?;
        state.phase = Phase::Following;
        state.answered_question = question_id.clone();
        let still_asking = now.task.status.state == TaskState::InputRequired
            && now
                .task
                .status
                .message
                .as_ref()
                .map_or(String::new(), |m| m.message_id.clone())
                == question_id
            && !now.task.has_message(&id);
        if !still_asking {
            tracing::info!(agent = %self.name(), task = %state.task_id,
                "the agent already has this answer (a repeated step); not sending it again");
            return Ok(self.follow(state, &now, cx));
        }
        let mut message = OutMessage::user(id, vec![OutPart::text(text)]);
        message.task_id = state.task_id.clone();
        message.context_id = state.context_id.clone();
        match self
            .send(&state.endpoint, message, false, cx)
            .await
            .map_err(self.fail("SendMessage"))?
        {
            SendOutcome::Task(snapshot) => Ok(self.follow(state, &snapshot, cx)),
            SendOutcome::Message { message, raw } => {
                self.shared.follower.forget(&cx.task_id);
                Ok(Step::Done(result::direct(self.name(), &message, &raw)))
            }
        }
    }
}

impl AgentJob {
    /// The namespace of this agent's contextIds in the book of upstream ids.
    fn contexts(&self) -> String {
        format!("a2a/{}/context", self.name())
    }

    /// Binds the context the agent answered in to the task's owner. `Some`
    /// is the step that ends the call instead: the agent put the message in
    /// a context another principal started, so its answer is not shown.
    async fn bind_context(
        &self,
        cx: &JobContext,
        context: &str,
    ) -> Result<Option<Step<Checkpoint>>, JobError> {
        if context.is_empty() {
            return Ok(None);
        }
        let ours = cx
            .upstream_ids()
            .bind(&self.contexts(), context)
            .await
            .map_err(retry_ownership)?;
        Ok((!ours).then(|| {
            self.shared.follower.forget(&cx.task_id);
            Step::Done(result::tool_error(format!(
                "Error: the A2A agent `{}` answered in a context that another principal of \
                 this gateway started; the answer is withheld. Call again without context_id \
                 to start a conversation of your own.",
                self.name()
            )))
        }))
    }
}

/// The record of who owns which context could not be read or written: the
/// step runs again later.
fn retry_ownership(error: agentgate_backend::OwnershipError) -> JobError {
    JobError::Retryable {
        message: error.to_string(),
        retry_after: None,
    }
}

impl Job for AgentJob {
    type Args = SendArgs;
    type State = Checkpoint;

    async fn start(&self, args: SendArgs, cx: &JobContext) -> StepResult<Checkpoint> {
        if let Some(allowed) = &self.agent.settings.principals
            && !allowed.iter().any(|p| p == cx.owner.as_str())
        {
            return Ok(Step::Done(result::tool_error(format!(
                "Error: your principal ({}) may not use the A2A agent `{}`: it is not in \
                 a2a.{}.principals. Ask the operator to add it. Nothing was sent to the agent.",
                cx.owner,
                self.name(),
                self.agent.settings.at
            ))));
        }
        if let Some(theirs) = args.context_id.as_deref().filter(|c| !c.is_empty()) {
            // Every principal reaches the agent with the same credentials,
            // so a contextId alone must not let one join another's context.
            let owned = cx
                .upstream_ids()
                .owns(&self.contexts(), theirs)
                .await
                .map_err(retry_ownership)?;
            if !owned {
                return Ok(Step::Done(result::tool_error(format!(
                    "Error: `context_id` {theirs:?} is not a context you started through this \
                     gateway with the A2A agent `{}`. Pass the contextId of an answer you \
                     received here, or leave context_id out to start a new conversation.",
                    self.name()
                ))));
            }
        }
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
        let id = message_id(cx);
        let (context, lookup) = match args.context_id.filter(|c| !c.is_empty()) {
            Some(theirs) => (theirs, Some(Lookup::ByMessage)),
            None if self.agent.settings.client_context_ids => {
                (context_id(cx), Some(Lookup::OwnContext))
            }
            None => (String::new(), None),
        };
        let push = self.pushes();
        let state = |snapshot: &TaskSnapshot| Checkpoint {
            endpoint: endpoint.clone(),
            task_id: snapshot.task.id.clone(),
            context_id: snapshot.task.context_id.clone(),
            phase: Phase::Following,
            answered_question: String::new(),
            since: cx.now,
            push,
        };
        if let Some(lookup) = lookup
            && let Some(found) = self.find(&endpoint, &context, lookup, &id, cx).await?
        {
            if let Some(withheld) = self.bind_context(cx, &found.task.context_id).await? {
                return Ok(withheld);
            }
            return Ok(self.follow(state(&found), &found, cx));
        }
        let chosen = lookup == Some(Lookup::OwnContext);
        let mut message = OutMessage::user(id, parts);
        message.context_id = context;
        message.metadata = args.metadata;
        let sent = match self.send(&endpoint, message, push, cx).await {
            Err(CallError::Rpc { code, message }) if chosen && code == INVALID_PARAMS => {
                // §3.4.1: an agent that does not take a client's contextId
                // MUST refuse the request; say which setting asked for it.
                return Err(JobError::Fatal(ErrorData::internal_error(
                    format!(
                        "A2A agent `{}`: SendMessage failed: JSON-RPC error {code}: {message}. \
                         agentgate chose the message's contextId because \
                         `{}.client_context_ids = true`; an agent that does not accept \
                         client-chosen contextIds needs `client_context_ids = false`",
                        self.name(),
                        self.agent.settings.at
                    ),
                    Some(json!({"agent": self.name(), "method": "SendMessage", "code": code})),
                )));
            }
            other => other.map_err(self.fail("SendMessage"))?,
        };
        let answered_in = match &sent {
            SendOutcome::Message { message, .. } => message.context_id.clone(),
            SendOutcome::Task(snapshot) => snapshot.task.context_id.clone(),
        };
        if let Some(withheld) = self.bind_context(cx, &answered_in).await? {
            return Ok(withheld);
        }
        match sent {
            SendOutcome::Message { message, raw } => {
                Ok(Step::Done(result::direct(self.name(), &message, &raw)))
            }
            SendOutcome::Task(snapshot) => Ok(self.follow(state(&snapshot), &snapshot, cx)),
        }
    }

    async fn resume(
        &self,
        state: Checkpoint,
        event: Event,
        cx: &JobContext,
    ) -> StepResult<Checkpoint> {
        let responses = match event {
            Event::Tick => return self.poll(state, cx).await,
            Event::Input(responses) => responses,
        };
        match state.phase.clone() {
            Phase::AwaitingInput { key, question_id } => {
                let Some(answer) = accepted(&responses, &key) else {
                    return self.declined(&state, "question", cx).await;
                };
                let text = answer
                    .get("answer")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.answer(state, question_id, text, cx).await
            }
            Phase::AwaitingSignIn { key } => {
                if accepted(&responses, &key).is_none() {
                    return self.declined(&state, "sign-in", cx).await;
                }
                let mut state = state;
                state.phase = Phase::SigningIn;
                self.poll(state, cx).await
            }
            // Input nobody asked for (the step that asked was superseded).
            _ => self.poll(state, cx).await,
        }
    }

    async fn cancel(&self, mut state: Checkpoint, cx: &JobContext) -> StepResult<Checkpoint> {
        if let Phase::Cancelling { .. } = state.phase {
            return self.poll(state, cx).await;
        }
        match self
            .agent
            .client_for(&cx.owner)
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
            Err(CallError::Rpc { code, .. }) if code == TASK_NOT_FOUND => {
                self.shared.follower.forget(&cx.task_id);
                Ok(Step::cancelled())
            }
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
/// first http(s) URL in its text (trailing punctuation dropped). `Err` says
/// why it is not forwarded: a URL elicitation sends the user to it, so only
/// `https` (or `http` to loopback, a local sign-in page) is; never `file:`,
/// `javascript:`, `data:` or plain http across the network.
fn sign_in_url(message: &Message) -> Option<Result<String, String>> {
    let found = message
        .parts
        .iter()
        .find_map(|p| p.url.clone())
        .or_else(|| {
            message
                .text()
                .split_whitespace()
                .map(|word| word.trim_end_matches(['.', ',', ';', ':', ')', '!', '?', '"', '\'']))
                .find(|word| {
                    url::Url::parse(word).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
                })
                .map(str::to_owned)
        })?;
    let Ok(url) = url::Url::parse(&found) else {
        return Some(Err("it is not a URL".into()));
    };
    Some(match url.scheme() {
        "https" if url.has_host() => Ok(found),
        "http" if crate::guard::is_loopback(&url) => Ok(found),
        "http" => Err("it is plain http to another machine (only https is)".into()),
        other => Err(format!(
            "its scheme is `{other}:` (only https, or http to loopback, is)"
        )),
    })
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

    fn url_part(url: &str) -> Message {
        Message {
            parts: vec![Part {
                url: Some(url.into()),
                ..Part::default()
            }],
            ..Message::default()
        }
    }

    #[test]
    fn the_sign_in_url_is_found_in_the_text_or_a_url_part() {
        assert_eq!(
            sign_in_url(&text(
                "Sign in at http://127.0.0.1:1/auth/t1 to let me read."
            )),
            Some(Ok("http://127.0.0.1:1/auth/t1".into()))
        );
        assert_eq!(sign_in_url(&text("Sign in with your badge.")), None);
        assert_eq!(sign_in_url(&text("see ftp://h/x")), None);
        assert_eq!(
            sign_in_url(&url_part("https://idp/x")),
            Some(Ok("https://idp/x".into()))
        );
    }

    #[test]
    fn only_https_or_loopback_http_sign_in_urls_are_forwarded() {
        for bad in [
            "javascript:alert(document.cookie)",
            "file:///etc/passwd",
            "data:text/html,<script>x</script>",
            "http://idp.example.com/login",
        ] {
            assert!(
                matches!(sign_in_url(&url_part(bad)), Some(Err(_))),
                "{bad} was forwarded"
            );
        }
        assert_eq!(
            sign_in_url(&text("Sign in at http://idp.example.com/x")),
            Some(Err(
                "it is plain http to another machine (only https is)".into()
            ))
        );
        assert!(matches!(
            sign_in_url(&url_part("http://localhost:8080/sign-in")),
            Some(Ok(_))
        ));
    }

    #[test]
    fn a_javascript_sign_in_url_is_a_tool_error_not_an_elicitation() {
        let mut auth = snapshot(TaskState::AuthRequired, "Sign in please", "m1");
        if let Some(message) = auth.task.status.message.as_mut() {
            message.parts.push(Part {
                url: Some("javascript:alert(1)".into()),
                ..Part::default()
            });
        }
        match job().follow(state(Phase::Following), &auth, &cx(1)) {
            Step::Done(result) => {
                assert_eq!(result.is_error, Some(true));
                let text = format!("{:?}", result.content);
                assert!(text.contains("`javascript:`"), "{text}");
                assert!(!text.contains("alert(1)"), "the URL is not shown: {text}");
                assert!(result.structured_content.is_none(), "{result:?}");
            }
            other => panic!("expected a tool error, got {other:?}"),
        }
    }

    fn job() -> AgentJob {
        let settings = AgentSettings {
            name: "t".into(),
            tool_name: "t_send_message".into(),
            card_url: url::Url::parse("http://127.0.0.1:9/").expect("url"),
            credentials: crate::config::Credentials::None,
            poll_interval: Duration::from_secs(1),
            client_context_ids: false,
            streaming: true,
            push: true,
            allowed_endpoints: Vec::new(),
            allow_http: false,
            allow_private_network: false,
            principals: None,
            principal_tokens: Default::default(),
            at: "agents[0]".into(),
        };
        let guard = crate::guard::Guard::new(&settings);
        let client = AgentClient::new(
            crate::client::Clients {
                http: reqwest::Client::new(),
                cards: reqwest::Client::new(),
                streams: reqwest::Client::new(),
            },
            crate::auth::Auth::new(
                &crate::config::Credentials::None,
                "agents[0]",
                reqwest::Client::new(),
                guard.clone(),
            ),
            guard,
            agentgate_backend::UpstreamMetrics::detached("a2a"),
        );
        AgentJob {
            agent: Arc::new(Agent::new(settings, client)),
            shared: Arc::new(Shared {
                follower: Arc::new(Follower::new(4, Duration::from_secs(30))),
                push: None,
                max_poll_interval: Duration::from_secs(30),
            }),
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
                history: Vec::new(),
            },
            raw: json!({"id": "task-1"}),
        }
    }

    fn state(phase: Phase) -> Checkpoint {
        Checkpoint {
            endpoint: "http://127.0.0.1:9/".into(),
            task_id: "task-1".into(),
            context_id: "ctx-1".into(),
            phase,
            answered_question: String::new(),
            since: Millis::EPOCH,
            push: false,
        }
    }

    fn cx(step: i64) -> JobContext {
        JobContext::new(
            agentgate_backend::TaskId::generate(),
            agentgate_backend::Owner::new("token:alice"),
            step,
            Millis::EPOCH,
        )
    }

    #[test]
    fn a_second_sign_in_after_work_resumed_is_asked_again() {
        let job = job();
        let signing = state(Phase::SigningIn);
        let auth = snapshot(TaskState::AuthRequired, "Sign in at https://idp/x", "m1");
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
        let again = snapshot(TaskState::AuthRequired, "Sign in at https://idp/y", "m3");
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

#[cfg(test)]
mod poll_tests {
    use super::*;

    #[test]
    fn the_poll_interval_doubles_every_minute_up_to_the_cap() {
        let policy = poll_policy(Duration::from_secs(1), Duration::from_secs(30));
        let at = |secs| {
            policy
                .interval(TaskPhase::Working, Duration::from_secs(secs))
                .expect("working")
        };
        assert_eq!(at(0), Duration::from_secs(1));
        assert_eq!(at(61), Duration::from_secs(2));
        assert_eq!(at(181), Duration::from_secs(8));
        assert_eq!(at(3600), Duration::from_secs(30));
    }
}
