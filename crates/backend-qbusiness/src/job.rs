//! `QBusinessQueryTool` as a job: one ChatSync per step, with plugin action
//! reviews and sign-in challenges as input requests.
//!
//! ```text
//! start ──ChatSync──┬─ answer ─────────────────────────────▶ Done
//!                   ├─ actionReview ──▶ Ask(form) ──accept──▶ ChatSync(actionExecution) ─▶ …
//!                   │                            └decline──▶ Done (action not executed)
//!                   └─ authChallengeRequest ──▶ Ask(url) ──accept──▶ ChatSync(the question again) ─▶ …
//!                                                        └decline──▶ Done (sign-in declined)
//! ```
//!
//! An approved action is sent once per attempt (no SDK retries) after
//! ListMessages shows it has not run yet: AWS does not document that a
//! repeated `clientToken` is replayed, so a step repeated after a crash or a
//! lost answer reads the conversation instead of executing twice. After a
//! plugin sign-in the question is asked again: AWS documents no
//! `authChallengeResponse.responseMap` keys, and the OAuth redirect returns
//! to the application's web experience, not to agentgate.
//!
//! Every ChatSync sends `clientToken = <task id>-<step>`: a step repeated after a
//! crash repeats the same token. The service model marks it an idempotency token,
//! so a repeated question may be answered from the first turn; nothing relies on
//! that beyond not asking twice where Q Business does replay it. Transient failures (still throttled or 5xx after the SDK's own attempts, a
//! timeout, the endpoint unreachable) are retryable job errors: the task stays
//! `working` with a status saying when it retries, and the retry sends the same
//! token.
//! Every other failure is an `isError` result.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{AccessToken, Event, Health, Job, JobContext, Owner, Step, StepResult};
use aws_sdk_qbusiness::Client;
use aws_sdk_qbusiness::error::SdkError;
use aws_sdk_qbusiness::operation::chat_sync::ChatSyncOutput;
use aws_sdk_qbusiness::types::{
    ActionExecution, ChatModeConfiguration, MessageType, PluginConfiguration,
};
use rmcp::model::{ElicitRequest, ElicitRequestParams, InputRequest, InputRequests};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::answer::{Answer, QueryOutcome};
use crate::args::{ChatModeArg, QueryArgs};
use crate::error::{self, ChatError};
use crate::identity::Identities;
use crate::review::ReviewForm;
use crate::sessions::{IdentitySessions, SessionError};
use crate::settings::{Settings, SettingsError};

/// The `QBusinessQueryTool` job. Settings come from the environment on first
/// use unless given explicitly.
#[derive(Debug, Default, Clone)]
pub struct QBusinessQuery {
    settings: Option<Settings>,
    client: OnceCell<(Settings, Client)>,
    /// Where ChatSync requests are counted, if anywhere.
    upstream: Option<agentgate_backend::UpstreamMetrics>,
    /// Who each principal speaks to Q Business as.
    identities: Arc<Identities>,
    /// Identity-aware sessions, when `[qbusiness.identity_center]` is set.
    sessions: Option<Arc<IdentitySessions>>,
    /// Whether Q Business answered since start: until it has, a name that
    /// does not resolve or a refused connection is a setting to fix.
    contact: agentgate_backend::FirstContact,
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
            ..Self::default()
        }
    }

    /// Speaks to Q Business as `identities` says for each principal (by
    /// default as nobody in particular: no `userId`).
    pub fn with_identities(mut self, identities: Identities) -> Self {
        self.identities = Arc::new(identities);
        self
    }

    /// Speaks to Q Business with each principal's identity-aware session
    /// (see [`crate::sessions`]) instead of the gateway's own identity.
    pub fn with_sessions(mut self, sessions: IdentitySessions) -> Self {
        self.sessions = Some(Arc::new(sessions));
        self
    }

    /// Renews `owner`'s identity-aware session from `token` when one is
    /// due; nothing without `[qbusiness.identity_center]`. A settings error
    /// waits for the step, which reports it.
    pub async fn renew_session(&self, owner: &Owner, token: &AccessToken) {
        let Some(sessions) = &self.sessions else {
            return;
        };
        if let Ok((settings, _)) = self.client().await {
            sessions.renew(settings, owner, token).await;
        }
    }

    /// The settings it was given, else those of the environment.
    fn settings(&self) -> Result<Settings, SettingsError> {
        match &self.settings {
            Some(settings) => Ok(settings.clone()),
            None => Settings::from_env(),
        }
    }

    /// Whether `AWS_REGION` and `QBUSINESS_APPLICATION_ID` name an
    /// application, read without asking AWS anything.
    pub fn configured(&self) -> Health {
        match self.settings() {
            Ok(settings) => Health::Ready(format!(
                "application {} in {}{}",
                settings.application_id,
                settings.region,
                if self.sessions.is_some() {
                    ", as each signed-in user (identity-aware sessions)"
                } else {
                    ""
                }
            )),
            Err(SettingsError::MissingRegion) => Health::NotConfigured(
                "AWS_REGION is not set: set it and QBUSINESS_APPLICATION_ID to the application's \
                 region and id"
                    .to_owned(),
            ),
            Err(SettingsError::MissingApplicationId) => Health::NotConfigured(
                "QBUSINESS_APPLICATION_ID is not set: set it to the application's id".to_owned(),
            ),
        }
    }

    /// What `agentgate check` shows: the settings, and who the AWS
    /// credentials are (STS `GetCallerIdentity`, which needs no
    /// permission), without asking Q Business anything.
    pub async fn health(&self) -> Health {
        let settings = match self.client().await {
            Ok((settings, _)) => settings,
            Err(e) => {
                let text = e.to_string();
                return Health::NotConfigured(text.trim_start_matches("Error: ").to_owned());
            }
        };
        let shared = settings.shared_config().await;
        // The answer is bounded like every other AWS answer: a check that
        // talks to a misconfigured endpoint must not buffer what it sends.
        let sts = aws_sdk_sts::Client::from_conf(
            aws_sdk_sts::config::Builder::from(&shared)
                .interceptor(crate::upstream::CapAnswer)
                .build(),
        );
        let who = match sts.get_caller_identity().send().await {
            Ok(out) => out.arn().unwrap_or("an unnamed identity").to_owned(),
            Err(e) => {
                if let Some(missing) = credential_problem(&e, settings).await {
                    return Health::Broken(missing.to_string());
                }
                return Health::Broken(format!(
                    "AWS did not say who the credentials are (STS GetCallerIdentity: {}). Check \
                     AWS_PROFILE, the AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY pair, or the \
                     instance role.",
                    error::aws_reason(&e)
                ));
            }
        };
        let sessions = if self.sessions.is_some() {
            "; OAuth principals speak through identity-aware sessions"
        } else {
            ""
        };
        Health::Ready(format!(
            "application {} in {}, as {who}{sessions}",
            settings.application_id, settings.region
        ))
    }

    /// The client `owner`'s calls go through: with sessions on, one that
    /// signs with the principal's identity-aware session (the SDK client's
    /// HTTP stack is shared); otherwise `client` itself.
    fn client_for(&self, client: &Client, owner: &Owner) -> Result<Client, ChatError> {
        let Some(sessions) = &self.sessions else {
            return Ok(client.clone());
        };
        let credentials = sessions.credentials(owner).map_err(|e| match e {
            SessionError::Missing => ChatError::Transient(e.to_string()),
            SessionError::Unavailable(reason) => ChatError::Transient(reason),
            SessionError::Refused(reason) => ChatError::Final(reason),
        })?;
        Ok(Client::from_conf(
            client
                .config()
                .to_builder()
                .credentials_provider(credentials)
                .build(),
        ))
    }

    /// Counts every ChatSync request (each SDK attempt) into `upstream`.
    pub fn with_upstream_metrics(mut self, upstream: agentgate_backend::UpstreamMetrics) -> Self {
        self.upstream = Some(upstream);
        self
    }

    /// Uses this SDK client (built, say, with [`Settings::fixed_client`]).
    pub fn with_client(settings: Settings, client: Client) -> Self {
        Self {
            settings: Some(settings.clone()),
            client: OnceCell::new_with(Some((settings, client))),
            ..Self::default()
        }
    }

    async fn client(&self) -> Result<&(Settings, Client), ChatError> {
        self.client
            .get_or_try_init(|| async {
                let settings = self
                    .settings()
                    .map_err(|e| ChatError::Final(format!("Error: {e}")))?;
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
    /// The user's message, asked again after a plugin sign-in.
    #[serde(default)]
    question: Option<String>,
}

/// What the task waits for between steps.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "waitingFor", rename_all = "snake_case")]
pub enum Waiting {
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

/// A call that found no usable credentials, said by the source that failed
/// (the SDK's own error goes on through every provider of its chain and
/// ends blaming the last one tried, the instance metadata service):
/// - `AWS_PROFILE` names a profile the shared files do not define;
/// - only one of `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` is set (the
///   SDK then skips the environment without a word);
/// - `AWS_WEB_IDENTITY_TOKEN_FILE` names a file that is not there.
///
/// `None` for any other failure, which keeps the SDK's account.
async fn credential_problem<E, R>(error: &SdkError<E, R>, settings: &Settings) -> Option<ChatError>
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    // Found before any request: not an answer of the service.
    let no_credentials = !matches!(error, SdkError::ServiceError(_))
        && aws_sdk_qbusiness::error::DisplayErrorContext(error)
            .to_string()
            .contains("credentials");
    if !no_credentials {
        return None;
    }
    let why = if let Some(profile) = settings.profile.as_deref()
        && crate::settings::profile_defined(profile).await == Some(false)
    {
        format!(
            "AWS_PROFILE names the profile `{profile}`, which neither ~/.aws/config nor \
             ~/.aws/credentials defines (nor the files AWS_CONFIG_FILE and \
             AWS_SHARED_CREDENTIALS_FILE name). Add it (`aws configure --profile {profile}`, or \
             `aws configure sso`), or unset AWS_PROFILE to use the other credential sources."
        )
    } else {
        credential_source_problem(|name| std::env::var_os(name).filter(|v| !v.is_empty()))?
    };
    Some(ChatError::Final(format!(
        "Error: no usable AWS credentials: {why}"
    )))
}

/// What is wrong with the credential sources the environment `var`
/// configures, when something plainly is.
fn credential_source_problem(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<String> {
    match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
        (Some(_), None) => {
            return Some(
                "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not, so the SDK skipped \
                 the pair and found no other credentials. Set both (and AWS_SESSION_TOKEN for \
                 temporary credentials), or unset AWS_ACCESS_KEY_ID."
                    .to_owned(),
            );
        }
        (None, Some(_)) => {
            return Some(
                "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not, so the SDK skipped \
                 the pair and found no other credentials. Set both, or unset \
                 AWS_SECRET_ACCESS_KEY."
                    .to_owned(),
            );
        }
        _ => {}
    }
    let token_file = var("AWS_WEB_IDENTITY_TOKEN_FILE")?;
    if std::path::Path::new(&token_file).exists() {
        return None;
    }
    Some(format!(
        "AWS_WEB_IDENTITY_TOKEN_FILE names {}, which does not exist, so no role could be \
         assumed with it. Fix the path (on EKS, the pod's service account must be annotated with \
         the role), or unset it.",
        token_file.to_string_lossy()
    ))
}

fn tool_error(text: String) -> Step<Waiting> {
    Step::Done(crate::answer::error_result(text))
}

impl QBusinessQuery {
    /// Sends one ChatSync.
    async fn chat(
        &self,
        cx: &JobContext,
        turn: &Turn,
        message: Option<&str>,
        query: Option<&crate::args::ValidQuery>,
        conversation: Option<(&str, &str)>,
        execution: Option<ActionExecution>,
    ) -> Result<ChatSyncOutput, ChatError> {
        if let Some((conversation_id, _)) = conversation {
            // Every principal speaks through the gateway's credentials (and,
            // without a user id, as the same Q Business user): a
            // conversation id alone must not let one continue another's.
            let owned = cx
                .upstream_ids()
                .owns(CONVERSATIONS, conversation_id)
                .await
                .map_err(|e| ChatError::Transient(e.to_string()))?;
            if !owned {
                return Err(ChatError::Final(not_your_conversation(conversation_id)));
            }
        }
        let (settings, client) = self.client().await?;
        let client = self.client_for(client, &cx.owner)?;
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
                Err(e) => return Err(ChatError::Final(format!("Error: invalid plugin_id: {e}"))),
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
        let executes = execution.is_some();
        request = request.set_action_execution(execution);
        let endpoint = endpoint_hint(settings);
        let sent = if executes {
            // Sent once per attempt: the SDK's own retries would repeat an
            // action whose answer was lost (a repeated `clientToken` is not
            // documented to be replayed). The step's retry reads the
            // conversation first instead (`executed_before`).
            request
                .customize()
                .config_override(
                    aws_sdk_qbusiness::config::Builder::default()
                        .retry_config(aws_sdk_qbusiness::config::retry::RetryConfig::disabled()),
                )
                .send()
                .await
        } else {
            request.send().await
        };
        // Q Business answered (a result, its own error, an answer cut off).
        if matches!(
            sent,
            Ok(_) | Err(SdkError::ServiceError(_) | SdkError::ResponseError(_))
        ) {
            self.contact.saw_answer();
        }
        let output = match sent {
            Ok(output) => output,
            Err(e) => {
                if let Some(missing) = credential_problem(&e, settings).await {
                    return Err(missing);
                }
                if !self.contact.answered()
                    && let Some(unreachable) = error::unreachable(&e, &endpoint)
                {
                    return Err(ChatError::Final(unreachable));
                }
                let attempts = if executes { 1 } else { error::SDK_ATTEMPTS };
                return Err(ChatError::chat_sync(
                    &e,
                    &settings.application_id,
                    &endpoint,
                    attempts,
                ));
            }
        };
        if let Some(conversation_id) = output.conversation_id() {
            // A repeated step binds the same id again, which is a no-op.
            let ours = cx
                .upstream_ids()
                .bind(CONVERSATIONS, conversation_id)
                .await
                .map_err(|e| ChatError::Transient(e.to_string()))?;
            if !ours {
                return Err(ChatError::Final(
                    "Error: Amazon Q Business answered in a conversation that another principal \
                     of this gateway started; the answer is withheld. Ask again without \
                     conversation_id to start a conversation of your own."
                        .to_owned(),
                ));
            }
        }
        Ok(output)
    }

    /// Turns a ChatSync answer into the next step.
    fn next(
        &self,
        output: ChatSyncOutput,
        turn: Turn,
        cx: &JobContext,
        outcome: QueryOutcome,
    ) -> Step<Waiting> {
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
                state: Waiting::ActionReview {
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
                        message: SIGN_IN_PROMPT.to_owned(),
                        url: url.clone(),
                        elicitation_id: key.clone(),
                    },
                )),
            );
            return Step::Ask {
                state: Waiting::SignIn {
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
    /// Executes an approved action in the conversation it was proposed in.
    async fn execute(
        &self,
        cx: &JobContext,
        turn: Turn,
        answer: &Answer,
        execution: ActionExecution,
    ) -> StepResult<Waiting> {
        let sent = match conversation_of(answer) {
            Ok((conversation, parent)) => {
                self.chat(
                    cx,
                    &turn,
                    None,
                    None,
                    Some((&conversation, &parent)),
                    Some(execution),
                )
                .await
            }
            Err(e) => Err(e),
        };
        match sent {
            Ok(output) => Ok(self.next(output, turn, cx, QueryOutcome::ActionExecuted)),
            Err(e) => e.into_step(),
        }
    }
}

impl QBusinessQuery {
    /// Whether an approved action already ran: this step may have sent it
    /// before and died before its checkpoint (or lost the answer). AWS does
    /// not document that a repeated `clientToken` replays a ChatSync, so the
    /// conversation is read instead (ListMessages shows each executed action
    /// on its USER message): a USER message with `actionExecution` for this
    /// plugin after the review means it ran, and the SYSTEM message after it
    /// is its answer.
    async fn executed_before(
        &self,
        turn: &Turn,
        review: &Answer,
        plugin_id: &str,
        owner: &Owner,
    ) -> Result<Option<Answer>, ChatError> {
        let (settings, client) = self.client().await?;
        let client = self.client_for(client, owner)?;
        let (conversation, review_message) = conversation_of(review)?;
        let pages = client
            .list_messages()
            .application_id(&settings.application_id)
            .conversation_id(&conversation)
            .set_user_id(turn.user_id.clone())
            .max_results(100)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await;
        let mut messages = match pages {
            Ok(messages) => messages,
            Err(e) => {
                let (text, transient) = error::describe_list_messages(&e, &endpoint_hint(settings));
                if transient {
                    return Err(ChatError::Transient(text));
                }
                return Err(ChatError::Final(format!(
                    "{text}\nThe approved action was not sent: before sending it, agentgate \
                     reads the conversation (qbusiness:ListMessages) to make sure it has not \
                     run already, and that read failed."
                )));
            }
        };
        // The order of ListMessages is not documented: sort by time, keeping
        // the listed order among equal times.
        messages.sort_by_key(|m| m.time().map(|t| (t.secs(), t.subsec_nanos())));
        let Some(review_at) = messages
            .iter()
            .position(|m| m.message_id() == Some(review_message.as_str()))
        else {
            return Ok(None);
        };
        let later = &messages[review_at + 1..];
        let Some(executed_at) = later.iter().position(|m| {
            m.r#type() == Some(&MessageType::User)
                && m.action_execution()
                    .is_some_and(|a| a.plugin_id() == plugin_id)
        }) else {
            return Ok(None);
        };
        let executed = &later[executed_at];
        let reply = later[executed_at + 1..]
            .iter()
            .find(|m| m.r#type() == Some(&MessageType::System));
        let output = ChatSyncOutput::builder()
            .conversation_id(conversation)
            .set_user_message_id(executed.message_id().map(str::to_owned))
            .set_system_message_id(reply.and_then(|m| m.message_id()).map(str::to_owned))
            .system_message(reply.and_then(|m| m.body()).unwrap_or(
                "The action was executed (the conversation shows it), but Amazon Q \
                 Business's answer to it was lost.",
            ))
            .set_source_attributions(reply.map(|m| m.source_attribution().to_vec()))
            .build();
        Ok(Some(Answer::from_output(
            &output,
            QueryOutcome::ActionExecuted,
        )))
    }
}

/// Where requests go, for error messages: the endpoint override or the region.
fn endpoint_hint(settings: &Settings) -> String {
    std::env::var("AWS_ENDPOINT_URL_QBUSINESS")
        .unwrap_or_else(|_| format!("region {}", settings.region))
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

/// The namespace of Q Business conversation ids in the book of upstream ids.
const CONVERSATIONS: &str = "qbusiness/conversation";

/// The answer to a `conversation_id` the caller does not own: the same for
/// another principal's conversation and for one that never was, so it tells
/// nothing about other principals' conversations.
fn not_your_conversation(conversation_id: &str) -> String {
    format!(
        "Error: `conversation_id` {conversation_id:?} is not a conversation you started through \
         this gateway. Pass the conversationId (and systemMessageId as parent_message_id) of an \
         answer you received here, or leave both out to start a new conversation."
    )
}

/// What the user is told when a plugin asks for a sign-in.
const SIGN_IN_PROMPT: &str = "An Amazon Q Business plugin needs you to sign in. Open the link, \
     sign in, then accept: agentgate then asks your question again.";

/// Why a second sign-in request is not passed on as another prompt.
const SIGN_IN_NOT_SEEN: &str = "Amazon Q Business still asks for the plugin sign-in. AWS does \
     not document how a client of the API completes a plugin's OAuth sign-in (the sign-in \
     normally returns to the application's web experience), so agentgate only asks the question \
     again once you have signed in. Sign in to the plugin once in the application's web \
     experience, then ask again.";

impl Job for QBusinessQuery {
    type Args = QueryArgs;
    type State = Waiting;

    async fn start(&self, args: QueryArgs, cx: &JobContext) -> StepResult<Waiting> {
        let query = match args.validate() {
            Ok(q) => q,
            Err(text) => return Ok(tool_error(text)),
        };
        let identity = match self.identities.for_call(&cx.owner, &query) {
            Ok(identity) => identity,
            Err(text) => return Ok(tool_error(text)),
        };
        let turn = Turn {
            user_id: identity.user_id,
            user_groups: identity.user_groups,
            chat_mode: query.chat_mode,
            plugin_id: query.plugin_id.clone(),
            question: Some(query.query.clone()),
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
            .await
        {
            Ok(output) => Ok(self.next(output, turn, cx, QueryOutcome::Answered)),
            Err(e) => e.into_step(),
        }
    }

    async fn resume(&self, state: Waiting, event: Event, cx: &JobContext) -> StepResult<Waiting> {
        let Event::Input(responses) = event else {
            // Nothing to do until the client answers; look again later.
            return Ok(Step::Wait {
                state,
                status: None,
                after: Duration::from_secs(3600),
            });
        };
        match state {
            Waiting::ActionReview {
                key,
                form,
                mut answer,
                turn,
            } => {
                let Some(content) = accepted(responses.get(&key)) else {
                    answer.outcome = QueryOutcome::ActionNotExecuted;
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
                match self
                    .executed_before(&turn, &answer, &form.plugin_id, &cx.owner)
                    .await
                {
                    Ok(Some(done)) => return Ok(with_review(Step::Done(done.into_result()), form)),
                    Ok(None) => {}
                    Err(e) => return e.into_step(),
                }
                let step = self.execute(cx, turn, &answer, execution).await?;
                Ok(with_review(step, form))
            }
            Waiting::SignIn {
                key,
                authorization_url: _,
                mut answer,
                turn,
            } => {
                if accepted(responses.get(&key)).is_none() {
                    answer.outcome = QueryOutcome::SignInDeclined;
                    return Ok(Step::Done(answer.into_result()));
                }
                self.ask_again(cx, turn, answer).await
            }
        }
    }
}

impl QBusinessQuery {
    /// After the user signed in, the question is asked again in the same
    /// conversation: no `authChallengeResponse` is sent, since AWS documents
    /// none of its `responseMap` keys and the OAuth redirect goes to the web
    /// experience, not to agentgate.
    async fn ask_again(
        &self,
        cx: &JobContext,
        turn: Turn,
        mut answer: Answer,
    ) -> StepResult<Waiting> {
        let Some(question) = turn.question.clone() else {
            answer.outcome = QueryOutcome::SignInNotSeen;
            return Ok(Step::Done(answer.into_result()));
        };
        let (conversation, parent) = match conversation_of(&answer) {
            Ok(ids) => ids,
            Err(e) => return e.into_step(),
        };
        let output = match self
            .chat(
                cx,
                &turn,
                Some(&question),
                None,
                Some((&conversation, &parent)),
                None,
            )
            .await
        {
            Ok(output) => output,
            Err(e) => return e.into_step(),
        };
        if output.auth_challenge_request().is_some() {
            let mut again = Answer::from_output(&output, QueryOutcome::SignInNotSeen);
            again.answer = format!("{} {SIGN_IN_NOT_SEEN}", again.answer)
                .trim()
                .to_owned();
            return Ok(Step::Done(again.into_result()));
        }
        Ok(self.next(output, turn, cx, QueryOutcome::Answered))
    }
}

/// The conversation a review or challenge happened in.
fn conversation_of(answer: &Answer) -> Result<(String, String), ChatError> {
    match (&answer.conversation_id, &answer.system_message_id) {
        (Some(c), Some(m)) if crate::args::is_message_id(c) && crate::args::is_message_id(m) => {
            Ok((c.clone(), m.clone()))
        }
        // The service model makes both 36-character ids; anything else is
        // no id to answer in. Sent on, a long one made the SDK panic
        // building ListMessages' URI (found by the property test).
        (Some(c), Some(m)) => Err(ChatError::Final(format!(
            "Error: Amazon Q Business answered with a conversation id or message id that is \
             not one (the service model makes them 36 letters, digits or dashes; got {} and {} \
             characters), so the action it asked to review cannot be answered; nothing was sent.",
            c.chars().count(),
            m.chars().count()
        ))),
        _ => Err(ChatError::NoConversation),
    }
}

/// Keeps the reviewed action in the final structured result.
fn with_review(step: Step<Waiting>, form: ReviewForm) -> Step<Waiting> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::IdentityCenter;

    #[test]
    fn with_sessions_on_a_principal_without_one_waits_for_its_next_request() {
        let settings = Settings {
            region: "us-east-1".into(),
            application_id: "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d".into(),
            profile: None,
        };
        let client = settings.fixed_client("http://127.0.0.1:9", "AKID", "SECRET", None);
        let plain = QBusinessQuery::with_client(settings.clone(), client.clone());
        let alice = Owner::new("oauth:https://issuer#alice");
        assert!(
            plain.client_for(&client, &alice).is_ok(),
            "no sessions: the gateway's identity"
        );
        let job = plain.with_sessions(IdentitySessions::new(
            IdentityCenter {
                application_arn: "arn:aws:sso::111122223333:application/ssoins-1/apl-2".into(),
                role_arn: "arn:aws:iam::111122223333:role/QBusinessUsers".into(),
                session_seconds: 3600,
            },
            None,
        ));
        match job.client_for(&client, &alice) {
            Err(ChatError::Transient(text)) => {
                assert!(text.contains("waiting for your next request"), "{text}");
            }
            Err(other) => panic!("expected a retry, got {other:?}"),
            Ok(_) => panic!("expected a retry, got a client"),
        }
    }

    #[test]
    fn a_half_set_key_pair_and_a_missing_token_file_are_named() {
        use std::ffi::OsString;
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let only_id = credential_source_problem(env(&[("AWS_ACCESS_KEY_ID", "AKID")]));
        assert!(
            only_id.as_deref().is_some_and(
                |t| t.starts_with("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
            ),
            "{only_id:?}"
        );
        let only_secret = credential_source_problem(env(&[("AWS_SECRET_ACCESS_KEY", "s")]));
        assert!(
            only_secret.as_deref().is_some_and(
                |t| t.starts_with("AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not")
            ),
            "{only_secret:?}"
        );
        let token = credential_source_problem(env(&[(
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "/nonexistent/agentgate/token",
        )]));
        assert!(
            token
                .as_deref()
                .is_some_and(|t| t.contains("/nonexistent/agentgate/token, which does not exist")),
            "{token:?}"
        );
        // A whole pair, or nothing configured: the SDK's own account stands.
        let pair = credential_source_problem(env(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
        ]));
        assert_eq!(pair, None);
        assert_eq!(credential_source_problem(env(&[])), None);
    }
}
