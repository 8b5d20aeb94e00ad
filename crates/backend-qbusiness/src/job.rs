//! `QBusinessQueryTool` as a job: one ChatSync per step, with plugin action
//! reviews and sign-in challenges as input requests.
//!
//! ```text
//! start ──ChatSync──┬─ answer ─────────────────────────────▶ Done
//!                   ├─ actionReview ──▶ Ask(form) ──accept──▶ ChatSync(actionExecution) ─▶ …
//!                   │                            └decline──▶ Done (action not executed)
//!                   └─ authChallengeRequest ──▶ Ask(url) ──accept──▶ ChatSync(authChallengeResponse) ─▶ …
//!                                                        └decline──▶ Done (sign-in declined)
//! ```
//!
//! Every ChatSync sends `clientToken = <task id>-<step>`: a step repeated after a
//! crash repeats the same token, and Q Business treats it as the same request.
//! Transient failures (still throttled or 5xx after the SDK's own attempts, a
//! timeout, the endpoint unreachable) are retryable job errors: the task stays
//! `working` with a status saying when it retries, and the retry sends the same
//! token, so a turn whose answer was lost is replayed rather than repeated.
//! Every other failure is an `isError` result.

use std::time::Duration;

use agentgate_core::job::{Event, Job, JobContext, JobError, Step, StepResult};
use aws_sdk_qbusiness::Client;
use aws_sdk_qbusiness::operation::chat_sync::ChatSyncOutput;
use aws_sdk_qbusiness::types::{
    ActionExecution, AuthChallengeResponse, ChatModeConfiguration, PluginConfiguration,
};
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams, InputRequest, InputRequests,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::answer::{Answer, Outcome};
use crate::args::{ChatModeArg, QueryArgs};
use crate::error;
use crate::review::ReviewForm;
use crate::settings::Settings;

/// The `QBusinessQueryTool` job. Settings come from the environment on first
/// use unless given explicitly.
#[derive(Debug, Default)]
pub struct QBusinessQuery {
    settings: Option<Settings>,
    client: OnceCell<(Settings, Client)>,
    /// Where ChatSync requests are counted, if anywhere.
    upstream: Option<agentgate_core::metrics::UpstreamMetrics>,
}

impl QBusinessQuery {
    /// Reads `AWS_REGION`, `QBUSINESS_APPLICATION_ID` and `AWS_PROFILE` when
    /// the tool is first called (as upstream does).
    pub fn from_env() -> Self {
        Self::default()
    }

    /// Uses these settings instead of the environment.
    pub fn with_settings(settings: Settings) -> Self {
        Self {
            settings: Some(settings),
            client: OnceCell::new(),
            upstream: None,
        }
    }

    /// Counts every ChatSync request (each SDK attempt) into `upstream`.
    pub fn with_upstream_metrics(
        mut self,
        upstream: agentgate_core::metrics::UpstreamMetrics,
    ) -> Self {
        self.upstream = Some(upstream);
        self
    }

    /// Uses this SDK client (built, say, with [`Settings::fixed_client`]).
    pub fn with_client(settings: Settings, client: Client) -> Self {
        Self {
            settings: Some(settings.clone()),
            client: OnceCell::new_with(Some((settings, client))),
            upstream: None,
        }
    }

    async fn client(&self) -> Result<&(Settings, Client), String> {
        self.client
            .get_or_try_init(|| async {
                let settings = match &self.settings {
                    Some(s) => s.clone(),
                    None => Settings::from_env().map_err(|e| format!("Error: {e}"))?,
                };
                let client = settings.client_counted(self.upstream.clone()).await;
                Ok((settings, client))
            })
            .await
    }
}

/// Who is asking, for identity-aware applications, and through which plugin.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Turn {
    user_id: Option<String>,
    user_groups: Vec<String>,
    chat_mode: Option<ChatModeArg>,
    plugin_id: Option<String>,
}

/// What the task waits for between steps.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "waitingFor", rename_all = "snake_case")]
pub enum State {
    ActionReview {
        key: String,
        form: ReviewForm,
        answer: Answer,
        turn: Turn,
    },
    SignIn {
        key: String,
        authorization_url: String,
        answer: Answer,
        turn: Turn,
    },
}

/// One ChatSync request beyond the first turn.
enum Follow {
    Execute(ActionExecution),
    SignedIn(AuthChallengeResponse),
}

fn tool_error(text: String) -> Step<State> {
    Step::Done(CallToolResult::error(vec![ContentBlock::text(text)]))
}

impl QBusinessQuery {
    /// Sends one ChatSync; `Err` is the tool error text.
    async fn chat(
        &self,
        cx: &JobContext,
        turn: &Turn,
        message: Option<&str>,
        query: Option<&crate::args::ValidQuery>,
        conversation: Option<(&str, &str)>,
        follow: Option<Follow>,
    ) -> Result<Result<ChatSyncOutput, String>, JobError> {
        let (settings, client) = match self.client().await {
            Ok(c) => c,
            Err(text) => return Ok(Err(text)),
        };
        let mut request = client
            .chat_sync()
            .application_id(&settings.application_id)
            .client_token(cx.idempotency_key())
            .set_user_id(turn.user_id.clone())
            .set_user_message(message.map(str::to_owned));
        if !turn.user_groups.is_empty() {
            request = request.set_user_groups(Some(turn.user_groups.clone()));
        }
        if let Some(mode) = turn.chat_mode {
            request = request.chat_mode(mode.to_sdk());
        }
        if let Some(plugin) = &turn.plugin_id {
            let config = match PluginConfiguration::builder().plugin_id(plugin).build() {
                Ok(config) => config,
                Err(e) => return Ok(Err(format!("Error: invalid plugin_id: {e}"))),
            };
            request =
                request.chat_mode_configuration(ChatModeConfiguration::PluginConfiguration(config));
        }
        if let Some((conversation_id, parent)) = conversation {
            request = request
                .conversation_id(conversation_id)
                .parent_message_id(parent);
        }
        if let Some(filter) = query.and_then(|q| q.attribute_filter.clone()) {
            request = request.attribute_filter(filter);
        }
        request = match follow {
            Some(Follow::Execute(execution)) => request.action_execution(execution),
            Some(Follow::SignedIn(response)) => request.auth_challenge_response(response),
            None => request,
        };
        let endpoint = std::env::var("AWS_ENDPOINT_URL_QBUSINESS")
            .unwrap_or_else(|_| format!("region {}", settings.region));
        match request.send().await {
            Ok(output) => Ok(Ok(output)),
            Err(e) => {
                let text = error::describe(&e, &settings.application_id, &endpoint);
                if error::is_transient(&e) {
                    Err(JobError::Retryable {
                        message: text,
                        retry_after: None,
                    })
                } else {
                    Ok(Err(text))
                }
            }
        }
    }

    /// Turns a ChatSync answer into the next step.
    fn next(
        &self,
        output: ChatSyncOutput,
        turn: Turn,
        cx: &JobContext,
        outcome: Outcome,
    ) -> Step<State> {
        let answer = Answer::from_output(&output, outcome);
        if let Some(review) = output.action_review() {
            let form = ReviewForm::from_review(review);
            let key = format!("action-review-{}", cx.step);
            let request = match form.to_elicitation(&answer.answer) {
                Ok(request) => request,
                Err(e) => return tool_error(format!("Error: {e}")),
            };
            let mut requests = InputRequests::new();
            requests.insert(key.clone(), request);
            return Step::Ask {
                state: State::ActionReview {
                    key,
                    form,
                    answer,
                    turn,
                },
                status: Some("waiting for approval of a plugin action".to_owned()),
                requests,
            };
        }
        if let Some(challenge) = output.auth_challenge_request() {
            let url = challenge.authorization_url().to_owned();
            let key = format!("sign-in-{}", cx.step);
            let mut requests = InputRequests::new();
            requests.insert(
                key.clone(),
                InputRequest::Elicitation(ElicitRequest::new(
                    ElicitRequestParams::UrlElicitationParams {
                        meta: None,
                        message:
                            "An Amazon Q Business plugin needs you to sign in. Open the link, \
                              sign in, then accept."
                                .to_owned(),
                        url: url.clone(),
                        elicitation_id: key.clone(),
                    },
                )),
            );
            return Step::Ask {
                state: State::SignIn {
                    key,
                    authorization_url: url,
                    answer,
                    turn,
                },
                status: Some("waiting for the user to sign in to a plugin".to_owned()),
                requests,
            };
        }
        Step::Done(answer.into_result())
    }
}

impl QBusinessQuery {
    /// Answers a review or challenge in the conversation it came from.
    async fn follow_up(
        &self,
        cx: &JobContext,
        turn: Turn,
        answer: &Answer,
        follow: Follow,
        outcome: Outcome,
    ) -> StepResult<State> {
        let (conversation, parent) = conversation_of(answer)?;
        match self
            .chat(
                cx,
                &turn,
                None,
                None,
                Some((&conversation, &parent)),
                Some(follow),
            )
            .await?
        {
            Ok(output) => Ok(self.next(output, turn, cx, outcome)),
            Err(text) => Ok(tool_error(text)),
        }
    }
}

/// `accept` with its content, or `None` for decline / cancel.
fn accepted(response: Option<&Value>) -> Option<serde_json::Map<String, Value>> {
    let response = response?;
    if response.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    Some(
        response
            .get("content")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    )
}

/// The `responseMap` sent back after a sign-in: the query parameters of the
/// authorization URL that identify the challenge (`state`, the OAuth
/// correlation value), or all of them when there is no `state`. The user's
/// credentials never pass through agentgate: they go to the plugin's
/// sign-in page, and Q Business matches the completed sign-in by `state`.
fn response_map(authorization_url: &str) -> Result<AuthChallengeResponse, String> {
    let url = url::Url::parse(authorization_url)
        .map_err(|e| format!("Error: the sign-in URL from Amazon Q Business is invalid: {e}"))?;
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let chosen: Vec<(String, String)> = match pairs.iter().find(|(k, _)| k == "state") {
        Some(state) => vec![state.clone()],
        None => pairs,
    };
    let mut builder = AuthChallengeResponse::builder();
    for (key, value) in chosen {
        builder = builder.response_map(key, value);
    }
    builder
        .build()
        .map_err(|e| format!("Error: cannot answer the sign-in challenge: {e}"))
}

impl Job for QBusinessQuery {
    type Args = QueryArgs;
    type State = State;

    async fn start(&self, args: QueryArgs, cx: &JobContext) -> StepResult<State> {
        let query = match args.validate() {
            Ok(q) => q,
            Err(text) => return Ok(tool_error(text)),
        };
        let turn = Turn {
            user_id: query.user_id.clone(),
            user_groups: query.user_groups.clone(),
            chat_mode: query.chat_mode,
            plugin_id: query.plugin_id.clone(),
        };
        let conversation = query
            .conversation
            .as_ref()
            .map(|(c, p)| (c.as_str(), p.as_str()));
        match self
            .chat(
                cx,
                &turn,
                Some(&query.query),
                Some(&query),
                conversation,
                None,
            )
            .await?
        {
            Ok(output) => Ok(self.next(output, turn, cx, Outcome::Answered)),
            Err(text) => Ok(tool_error(text)),
        }
    }

    async fn resume(&self, state: State, event: Event, cx: &JobContext) -> StepResult<State> {
        let Event::Input(responses) = event else {
            // Nothing to do until the client answers; look again later.
            return Ok(Step::Wait {
                state,
                status: None,
                after: Duration::from_secs(3600),
            });
        };
        match state {
            State::ActionReview {
                key,
                form,
                mut answer,
                turn,
            } => {
                let Some(content) = accepted(responses.get(&key)) else {
                    answer.outcome = Outcome::ActionNotExecuted;
                    answer.action_review = Some(form);
                    return Ok(Step::Done(answer.into_result()));
                };
                let execution = match form.execution(&content) {
                    Ok(e) => e,
                    Err(e) => {
                        return Ok(tool_error(format!(
                            "Error: the approved action is invalid: {e}"
                        )));
                    }
                };
                let step = self
                    .follow_up(
                        cx,
                        turn,
                        &answer,
                        Follow::Execute(execution),
                        Outcome::ActionExecuted,
                    )
                    .await?;
                Ok(with_review(step, form))
            }
            State::SignIn {
                key,
                authorization_url,
                mut answer,
                turn,
            } => {
                if accepted(responses.get(&key)).is_none() {
                    answer.outcome = Outcome::SignInDeclined;
                    return Ok(Step::Done(answer.into_result()));
                }
                let response = match response_map(&authorization_url) {
                    Ok(r) => r,
                    Err(text) => return Ok(tool_error(text)),
                };
                self.follow_up(
                    cx,
                    turn,
                    &answer,
                    Follow::SignedIn(response),
                    Outcome::Answered,
                )
                .await
            }
        }
    }
}

/// The conversation a review or challenge happened in.
fn conversation_of(answer: &Answer) -> Result<(String, String), JobError> {
    match (&answer.conversation_id, &answer.system_message_id) {
        (Some(c), Some(m)) => Ok((c.clone(), m.clone())),
        _ => Err(JobError::Fatal(rmcp::model::ErrorData::internal_error(
            "Amazon Q Business asked for input without a conversation id to answer in",
            None,
        ))),
    }
}

/// Keeps the reviewed action in the final structured result.
fn with_review(step: Step<State>, form: ReviewForm) -> Step<State> {
    match step {
        Step::Done(mut result) => {
            if let Some(Value::Object(map)) = result.structured_content.as_mut()
                && !map.contains_key("actionReview")
            {
                map.insert(
                    "actionReview".to_owned(),
                    serde_json::to_value(&form).unwrap_or(Value::Null),
                );
            }
            Step::Done(result)
        }
        other => other,
    }
}
