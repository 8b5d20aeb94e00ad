//! One upstream tool as a job: one `tools/call` per task, followed step by
//! step, never issued twice unless the tool says that is safe.
//!
//! ```text
//! start ─▶ save {holder: this process, issued: false}      (nothing sent yet)
//! step  ─▶ holder here, not issued ─▶ Calls::arm (in memory) ─▶ save {issued: true}
//!       ─▶ holder here, issued, armed here ─▶ send the call (LiveCall::start), then follow:
//!            progress → statusMessage, a question → input_required,
//!            the end → the result (or the error) as the server gave it
//!       ─▶ holder here, issued, nothing here ─▶ lost (below)
//!       ─▶ holder elsewhere or gone ─▶ wait up to takeover_after, then:
//!            idempotent tool → issue again (a new attempt);  otherwise → "interrupted; not repeated"
//! cancel ─▶ the call here: cancelled upstream;  elsewhere: said so
//!
//! the server made the call its own task (tasks extension, HTTP servers):
//! save {upstream_task: id} ─▶ every later step, on any process: tasks/update (answers), tasks/get
//!       ─▶ working / input_required / the end, as the server says;  cancel ─▶ tasks/cancel
//!
//! a 2025-11-25 HTTP server runs the call as its task, in its session:
//! save {session_task: (session, id)} ─▶ followed on the connection as above;
//!       the call lost (a restart, a takeover, a broken connection) ─▶ enter the
//!       session again (Calls::arm, then Call { enter }): tasks/result, tasks/get
//!       ─▶ the same task, nothing sent twice;  cancel ─▶ tasks/cancel in the session
//! ```
//!
//! The call is sent only by a step that starts from a saved state naming
//! this process as its holder and saying `issued`, and that finds the entry
//! this process armed before that save: a crash or a failed save can lose a
//! call (then the rules below decide), never send it twice.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{Event, Job, JobContext, JobError, Millis, Owner, Step, StepResult};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ElicitRequestParams, InputRequest, InputResponses, JsonObject, TaskPayload,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::calls::unserved;
use crate::calls::{Call, CallEnd, Calls, Seen, SessionTask};
use crate::upstream::{TaskAction, TaskRead, Upstream, capped};

/// How long a step follows its call before it saves and lets the next step
/// go on (the task's `statusMessage` and the takeover clock move then).
const FOLLOW: Duration = Duration::from_secs(10);
/// How often a step not holding the call looks again.
const RECHECK: Duration = Duration::from_secs(1);
/// How often an idempotent tool's call is issued again after it was lost.
const MAX_ATTEMPTS: u32 = 3;
/// How often a server that cannot be reached is tried before the task
/// fails (with backoffs of 2, 4, … 32 s between).
const MAX_UNREACHED: u32 = 6;
/// What an upstream task's input request keys start with here, so they
/// can never meet the keys of questions asked on a connection.
const UPSTREAM_KEY: &str = "upstream.";
/// Polls of an upstream task: as the server suggests, within these.
const MIN_POLL: Duration = Duration::from_millis(500);
const MAX_POLL: Duration = Duration::from_secs(30);

fn poll_after(suggested: Option<Duration>) -> Duration {
    suggested
        .unwrap_or(Duration::from_secs(1))
        .clamp(MIN_POLL, MAX_POLL)
}

/// One tool of one server.
pub struct UpstreamToolJob {
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) calls: Arc<Calls>,
    pub(crate) permits: Arc<Semaphore>,
    /// The tool's name at the server.
    pub(crate) tool: String,
    /// Safe to call again after a lost call (the server's
    /// `idempotentHint`/`readOnlyHint`, or the operator's override).
    pub(crate) repeatable: bool,
}

/// What is saved between steps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallState {
    args: JsonObject,
    attempt: u32,
    /// The process that issues (or issued) the attempt's call.
    holder: String,
    issued: bool,
    /// Tries in a row that could not reach the server.
    #[serde(default)]
    unreached: u32,
    /// When a step not holding the call first saw it (the takeover clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    foreign_since: Option<Millis>,
    /// The last status message, for the "interrupted" error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    /// Rounds of questions the server's own task asked (keys are unique
    /// per round).
    #[serde(default)]
    upstream_round: u32,
    /// The server's keys answered in the last round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    answered: Vec<String>,
    /// Answers taken by a step not holding the call, for the holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answers: Option<InputResponses>,
    /// The server's own task for the call, once it made one: followed by
    /// its id from any process, so the call outlives agentgate's restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    upstream_task: Option<String>,
    /// The server's 2025-11-25 task for the call and the HTTP session it
    /// lives in: entered again when the call is lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session_task: Option<SessionTask>,
    /// Times the session was entered again since the call last showed
    /// news (bounded: a session the server forgot fails each time).
    #[serde(default)]
    reentered: u32,
    /// Times the session was entered again in all, never reset: each
    /// entry's question keys are its own.
    #[serde(default)]
    entries: u32,
}

impl std::fmt::Debug for UpstreamToolJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamToolJob")
            .field("server", &self.upstream.settings.name)
            .field("tool", &self.tool)
            .field("repeatable", &self.repeatable)
            .finish_non_exhaustive()
    }
}

impl UpstreamToolJob {
    fn server(&self) -> &str {
        &self.upstream.settings.name
    }

    fn may_call(&self, cx: &JobContext) -> bool {
        self.upstream
            .settings
            .principals
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|p| p == cx.owner.as_str()))
    }

    /// A step on the holder of the call.
    async fn follow(
        &self,
        mut state: CallState,
        answers: Option<InputResponses>,
        cx: &JobContext,
    ) -> StepResult<CallState> {
        state.foreign_since = None;
        if !state.issued {
            // Arm, and save `issued` before anything is sent: the module's
            // doc says why.
            self.calls.arm(&cx.task_id, format!("a{}", state.attempt));
            state.issued = true;
            return Ok(Step::Wait {
                status: state.status.clone(),
                after: Duration::ZERO,
                state,
            });
        }
        let Some(live) = self.calls.get(&cx.task_id) else {
            return self.reenter(state, "agentgate no longer holds the call", answers, cx);
        };
        if !live.sent() {
            let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                return Ok(Step::Wait {
                    status: Some(format!(
                        "waiting for a free call slot at MCP server \"{}\" (max_calls = {})",
                        self.server(),
                        self.upstream.settings.max_calls
                    )),
                    after: RECHECK,
                    state,
                });
            };
            let call = Call {
                upstream: self.upstream.clone(),
                owner: cx.owner.clone(),
                tool: self.tool.clone(),
                args: state.args.clone(),
                enter: state.session_task.clone(),
            };
            live.start(call, permit);
        }
        if let Some(answers) = answers.or_else(|| state.answers.take()) {
            live.answer(&answers);
            state.status = Some(format!("answer sent to MCP server \"{}\"", self.server()));
        }
        let seen = live.next(FOLLOW).await;
        if state.session_task.is_none() {
            state.session_task = live.session_task();
        }
        if live.take_heard() || matches!(seen, Seen::Progress(_) | Seen::Asked(_)) {
            state.reentered = 0;
        }
        match seen {
            Seen::Quiet => Ok(Step::Wait {
                status: state.status.clone(),
                after: Duration::ZERO,
                state,
            }),
            Seen::Progress(status) => {
                state.status = Some(status.clone());
                Ok(Step::Wait {
                    status: Some(status),
                    after: Duration::ZERO,
                    state,
                })
            }
            Seen::Asked(requests) => {
                let message = requests
                    .values()
                    .find_map(|request| match request {
                        InputRequest::Elicitation(ask) => Some(match &ask.params {
                            ElicitRequestParams::FormElicitationParams { message, .. }
                            | ElicitRequestParams::UrlElicitationParams { message, .. } => {
                                Some(message.clone())
                            }
                            _ => None,
                        })
                        .flatten(),
                        _ => None,
                    })
                    .unwrap_or_else(|| "input needed".to_owned());
                Ok(Step::Ask {
                    status: Some(format!(
                        "MCP server \"{}\" asks: {}",
                        self.server(),
                        capped(&message)
                    )),
                    requests,
                    state,
                })
            }
            Seen::Ended(end) => self.ended(state, end, cx),
        }
    }

    fn ended(&self, state: CallState, end: CallEnd, cx: &JobContext) -> StepResult<CallState> {
        match end {
            CallEnd::Answered(result) => Ok(Step::Done(result)),
            CallEnd::Refused(mut error) => {
                error.message =
                    format!("MCP server \"{}\": {}", self.server(), error.message).into();
                Ok(Step::Fail(error))
            }
            CallEnd::NotSent(why) => {
                // Nothing reached the server: armed again, so a later step
                // sends it, after a backoff of its own.
                if let Some(live) = self.calls.get(&cx.task_id) {
                    live.rearm();
                }
                let mut state = state;
                state.unreached += 1;
                if state.unreached >= MAX_UNREACHED {
                    return Ok(Step::Fail(ErrorData::internal_error(
                        format!("gave up after {} tries: {why}", state.unreached),
                        None,
                    )));
                }
                let after = Duration::from_secs(1 << state.unreached.min(6));
                let status = format!("{why}; trying again in {}s", after.as_secs());
                Ok(Step::Wait {
                    status: Some(status),
                    after,
                    state,
                })
            }
            CallEnd::Lost(why) => self.reenter(state, &why, None, cx),
            CallEnd::TimedOut(after) => Ok(Step::Fail(ErrorData::internal_error(
                format!(
                    "MCP server \"{}\" did not answer `{}` within {}s (call_timeout_seconds); the \
                     call was cancelled",
                    self.server(),
                    self.tool,
                    after.as_secs()
                ),
                None,
            ))),
            CallEnd::Cancelled => Ok(Step::cancelled()),
            CallEnd::Task { id, poll } => {
                // The call is the server's task now, followed by its id (the
                // entry stays until swept, for a step whose save failed).
                let mut state = state;
                let status = format!(
                    "MCP server \"{}\" runs the call as its task {id}",
                    self.server()
                );
                state.upstream_task = Some(id);
                state.status = Some(status.clone());
                Ok(Step::Wait {
                    status: Some(status),
                    after: poll_after(poll),
                    state,
                })
            }
        }
    }

    /// A step of a call the server runs as its own task: answers go with
    /// `tasks/update`, the state is read with `tasks/get`.
    async fn follow_task(
        &self,
        mut state: CallState,
        id: String,
        answers: Option<InputResponses>,
        cx: &JobContext,
    ) -> StepResult<CallState> {
        if let Some(answers) = answers.or_else(|| state.answers.take()) {
            // Answers go in a step of their own, saved before the task is
            // read again: a `tasks/get` the server answers from before the
            // update (its store is eventually consistent) then finds them
            // recorded instead of asking the same questions anew.
            let round = format!("{UPSTREAM_KEY}r{}.", state.upstream_round);
            let theirs: InputResponses = answers
                .into_iter()
                .filter_map(|(key, answer)| {
                    key.strip_prefix(&round)
                        .map(|theirs| (theirs.to_owned(), answer))
                })
                .collect();
            if !theirs.is_empty() {
                let keys: Vec<String> = theirs.keys().cloned().collect();
                match self
                    .upstream
                    .task_request(&id, TaskAction::Update(theirs), &cx.owner)
                    .await
                {
                    TaskRead::Got(_) | TaskRead::Done => {}
                    TaskRead::Refused(error) => return Ok(Step::Fail(self.task_error(&id, error))),
                    TaskRead::Unreachable(message) => {
                        return Err(JobError::Retryable {
                            message,
                            retry_after: None,
                        });
                    }
                }
                state.answered = keys;
                return Ok(Step::Wait {
                    status: state.status.clone(),
                    after: Duration::ZERO,
                    state,
                });
            }
        }
        let got = match self
            .upstream
            .task_request(&id, TaskAction::Get, &cx.owner)
            .await
        {
            TaskRead::Got(got) => got,
            TaskRead::Done => {
                return Err(JobError::Retryable {
                    message: format!(
                        "MCP server \"{}\" sent no task for tasks/get",
                        self.server()
                    ),
                    retry_after: None,
                });
            }
            TaskRead::Refused(error) => return Ok(Step::Fail(self.task_error(&id, error))),
            TaskRead::Unreachable(message) => {
                return Err(JobError::Retryable {
                    message,
                    retry_after: None,
                });
            }
        };
        // The server's words, cut like its progress messages are.
        let status = got.task.task.status_message.as_deref().map(capped);
        let poll = got.task.task.poll_interval_ms.map(Duration::from_millis);
        match got.task.payload {
            TaskPayload::Working => {
                state.status = status.clone().or(state.status);
                Ok(Step::Wait {
                    status: state.status.clone(),
                    after: poll_after(poll),
                    state,
                })
            }
            TaskPayload::InputRequired { input_requests } => {
                let sampling = self.upstream.settings.sampling;
                if let Some(kind) = input_requests
                    .values()
                    .find_map(|request| unserved(request, sampling))
                {
                    return Ok(Step::Fail(ErrorData::internal_error(
                        format!(
                            "MCP server \"{}\" asked for {kind} in its task {id}, which agentgate \
                             does not serve to upstream servers",
                            self.server()
                        ),
                        None,
                    )));
                }
                if input_requests
                    .keys()
                    .all(|key| state.answered.contains(key))
                {
                    // Questions already answered: the server has not caught
                    // up with the update yet.
                    return Ok(Step::Wait {
                        status: state.status.clone(),
                        after: poll_after(poll),
                        state,
                    });
                }
                state.upstream_round += 1;
                state.answered.clear();
                let round = format!("{UPSTREAM_KEY}r{}.", state.upstream_round);
                let requests = input_requests
                    .into_iter()
                    .map(|(key, request)| (format!("{round}{key}"), request))
                    .collect();
                Ok(Step::Ask {
                    status: status.or_else(|| {
                        Some(format!("MCP server \"{}\" asks for input", self.server()))
                    }),
                    requests,
                    state,
                })
            }
            TaskPayload::Completed { result } => {
                match serde_json::from_value::<CallToolResult>(Value::Object(result)) {
                    Ok(result) => Ok(Step::Done(result)),
                    Err(e) => Ok(Step::Fail(ErrorData::internal_error(
                        format!(
                            "MCP server \"{}\" completed its task {id} with a result that is \
                             not a tool result: {e}",
                            self.server()
                        ),
                        None,
                    ))),
                }
            }
            TaskPayload::Failed { error } => {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the task failed");
                Ok(Step::Fail(ErrorData::new(
                    rmcp::model::ErrorCode(i32::try_from(code).unwrap_or(-32603)),
                    format!("MCP server \"{}\": {message}", self.server()),
                    error.get("data").cloned(),
                )))
            }
            TaskPayload::Cancelled => Ok(Step::cancelled_saying(format!(
                "MCP server \"{}\" cancelled its task {id}",
                self.server()
            ))),
            _ => Ok(Step::Wait {
                status: state.status.clone(),
                after: poll_after(poll),
                state,
            }),
        }
    }

    /// The call is gone, but the server's task it became lives on in the
    /// server's session, if it became one: the session is entered again to
    /// follow it (by the next step, from a saved state naming this process
    /// as the holder). Else, or when entering keeps failing, [`Self::lost`].
    fn reenter(
        &self,
        mut state: CallState,
        why: &str,
        answers: Option<InputResponses>,
        cx: &JobContext,
    ) -> StepResult<CallState> {
        let Some(saved) = state.session_task.clone() else {
            return self.lost(state, why, cx);
        };
        if state.reentered >= MAX_ATTEMPTS {
            let why = format!(
                "{why}; its session was entered again {} times without news of the task",
                state.reentered
            );
            return self.lost(state, &why, cx);
        }
        // An entry of this process still following it (a step that came
        // back after another process took over) is dropped without
        // cancelling the server's task, which is followed from here on.
        self.calls.abandon(&cx.task_id);
        state.reentered += 1;
        state.entries += 1;
        state.holder = self.calls.holder().to_owned();
        state.issued = true;
        state.foreign_since = None;
        // Each entry's questions have keys of their own: an answer to a
        // question asked on a lost connection can never answer a new one.
        self.calls
            .arm(&cx.task_id, format!("a{}e{}", state.attempt, state.entries));
        let mut status = format!(
            "following MCP server \"{}\"'s task {} again in its session ({why})",
            self.server(),
            saved.task
        );
        if answers.or_else(|| state.answers.take()).is_some() {
            // The server asked on the connection that was lost, and waits
            // for the answer there: said, not silently dropped.
            status.push_str(
                "; the answer given could not be passed on: the server asked on the lost \
                 connection",
            );
        }
        state.status = Some(status.clone());
        Ok(Step::Wait {
            status: Some(status),
            after: Duration::ZERO,
            state,
        })
    }

    /// The call is gone and its outcome unknown: issue it again when that
    /// is safe, else say so.
    fn lost(&self, mut state: CallState, why: &str, cx: &JobContext) -> StepResult<CallState> {
        self.calls.forget(&cx.task_id);
        let seen = state
            .status
            .as_deref()
            .map(|s| format!(" Last status: {s}."))
            .unwrap_or_default();
        if !self.repeatable {
            return Ok(Step::Fail(ErrorData::internal_error(
                format!(
                    "interrupted; not repeated because the tool is not marked idempotent: the call \
                     of `{}` at MCP server \"{}\" was lost ({why}), and it may or may not have \
                     done its work.{seen}",
                    self.tool,
                    self.server()
                ),
                None,
            )));
        }
        if state.attempt >= MAX_ATTEMPTS {
            return Ok(Step::Fail(ErrorData::internal_error(
                format!(
                    "the call of `{}` at MCP server \"{}\" was lost {} times; the last time: \
                     {why}.{seen}",
                    self.tool,
                    self.server(),
                    state.attempt
                ),
                None,
            )));
        }
        state.attempt += 1;
        state.holder = self.calls.holder().to_owned();
        state.issued = false;
        state.foreign_since = None;
        state.session_task = None;
        state.reentered = 0;
        let status = format!(
            "calling again (attempt {}): the call was lost ({why}) and the tool is marked safe to \
             repeat",
            state.attempt
        );
        state.status = Some(status.clone());
        Ok(Step::Wait {
            status: Some(status),
            after: Duration::ZERO,
            state,
        })
    }

    /// A step on a process that does not hold the call: give the holder
    /// `takeover_after` to come back, then take over.
    fn elsewhere(
        &self,
        mut state: CallState,
        answers: Option<InputResponses>,
        cx: &JobContext,
    ) -> StepResult<CallState> {
        if let Some(answers) = answers {
            state.answers.get_or_insert_default().extend(answers);
        }
        let since = *state.foreign_since.get_or_insert(cx.now);
        let takeover = self.upstream.settings.takeover_after;
        if cx.now.since(since) < takeover {
            return Ok(Step::Wait {
                status: Some(format!(
                    "the call is held by another agentgate process; taking it over if it is not \
                     back within {}s",
                    takeover.as_secs()
                )),
                after: RECHECK,
                state,
            });
        }
        self.reenter(
            state,
            "the agentgate process that held it stopped",
            None,
            cx,
        )
    }
}

impl UpstreamToolJob {
    /// The server's error about its task `id`, saying whose it is.
    fn task_error(&self, id: &str, mut error: ErrorData) -> ErrorData {
        error.message = format!(
            "MCP server \"{}\" (its task {id}): {}",
            self.server(),
            error.message
        )
        .into();
        error
    }

    /// `tasks/cancel` for the server's 2025-11-25 task, sent in the saved
    /// session it lives in.
    async fn cancel_in_session(&self, state: &CallState, cx: &JobContext) -> StepResult<CallState> {
        let Some(saved) = &state.session_task else {
            return Ok(Step::cancelled());
        };
        match crate::calls::cancel_in_session(&self.upstream, &cx.owner, saved).await {
            Ok(()) => Ok(Step::cancelled()),
            Err(why) => Ok(Step::cancelled_saying(format!(
                "cancelled; MCP server \"{}\"'s task {} could not be cancelled in its session: \
                 {why}",
                self.server(),
                saved.task
            ))),
        }
    }

    /// `tasks/cancel` for the server's task `id`.
    async fn cancel_upstream_task(&self, id: &str, owner: &Owner) -> StepResult<CallState> {
        match self
            .upstream
            .task_request(id, TaskAction::Cancel, owner)
            .await
        {
            TaskRead::Got(_) | TaskRead::Done => Ok(Step::cancelled()),
            TaskRead::Refused(error) => Ok(Step::cancelled_saying(format!(
                "cancelled; MCP server \"{}\" refused to cancel its task {id}: {}",
                self.server(),
                error.message
            ))),
            TaskRead::Unreachable(message) => Err(JobError::Retryable {
                message,
                retry_after: None,
            }),
        }
    }
}

impl Job for UpstreamToolJob {
    type Args = JsonObject;
    type State = CallState;

    async fn start(&self, args: JsonObject, cx: &JobContext) -> StepResult<CallState> {
        if !self.may_call(cx) {
            return Ok(Step::Fail(ErrorData::invalid_request(
                format!(
                    "{} may not call the tools of MCP server \"{}\" (not in its `principals`)",
                    cx.owner,
                    self.server()
                ),
                None,
            )));
        }
        // Saved before anything is sent: see the module's doc.
        Ok(Step::Wait {
            status: Some(format!("calling MCP server \"{}\"", self.server())),
            after: Duration::ZERO,
            state: CallState {
                args,
                attempt: 1,
                holder: self.calls.holder().to_owned(),
                issued: false,
                unreached: 0,
                foreign_since: None,
                status: None,
                answers: None,
                upstream_task: None,
                upstream_round: 0,
                answered: Vec::new(),
                session_task: None,
                reentered: 0,
                entries: 0,
            },
        })
    }

    async fn resume(
        &self,
        state: CallState,
        event: Event,
        cx: &JobContext,
    ) -> StepResult<CallState> {
        let answers = match event {
            Event::Input(answers) => Some(answers),
            Event::Tick => None,
        };
        if let Some(id) = state.upstream_task.clone() {
            self.follow_task(state, id, answers, cx).await
        } else if state.holder == self.calls.holder() {
            self.follow(state, answers, cx).await
        } else {
            self.elsewhere(state, answers, cx)
        }
    }

    async fn cancel(&self, state: CallState, cx: &JobContext) -> StepResult<CallState> {
        if let Some(id) = &state.upstream_task {
            return self.cancel_upstream_task(id, &cx.owner).await;
        }
        let here = state.holder == self.calls.holder();
        let live = self.calls.get(&cx.task_id);
        if let Some(CallEnd::Task { id, .. }) = live.as_ref().and_then(|live| live.ended())
            && here
        {
            // The server made a task whose id no step saved yet: cancel it
            // there, as a saved one would be.
            return self.cancel_upstream_task(&id, &cx.owner).await;
        }
        // An entry that sends nothing (armed to enter the session, or its
        // connection lost) cannot reach the server's task: the cancel goes
        // to the session instead.
        let inert = live
            .as_ref()
            .is_some_and(|live| !live.sent() || matches!(live.ended(), Some(CallEnd::Lost(_))));
        if here && inert && state.session_task.is_some() {
            self.calls.forget(&cx.task_id);
            return self.cancel_in_session(&state, cx).await;
        }
        match live {
            Some(live) if here => {
                live.cancel();
                self.calls.forget(&cx.task_id);
                Ok(Step::cancelled())
            }
            _ if here && !state.issued => Ok(Step::cancelled()),
            _ if state.session_task.is_some() => self.cancel_in_session(&state, cx).await,
            _ => Ok(Step::cancelled_saying(format!(
                "cancelled; the call at MCP server \"{}\" was started by an agentgate process \
                 that is gone or elsewhere, so it could not be stopped and may have finished there",
                self.server()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The exactly-once rule, step by step, with no server: the job's
    //! steps run against a `Calls` of their own, as a process would, and a
    //! server that cannot be started (nothing can reach it).

    use agentgate_backend::{Owner, TaskId};

    use super::*;
    use crate::config::McpConfig;

    fn job(repeatable: bool) -> UpstreamToolJob {
        let config: McpConfig = agentgate_backend::parse_section(
            "mcp",
            Some(serde_json::json!({"servers": [{
                "name": "s", "command": "/nonexistent/server", "takeover_after_seconds": 5
            }]})),
        )
        .expect("parses");
        let settings = config.resolve(&|_| None).expect("resolves").remove(0);
        UpstreamToolJob {
            upstream: Arc::new(Upstream::new(
                settings,
                agentgate_backend::UpstreamMetrics::detached("mcp"),
            )),
            calls: Arc::new(Calls::new()),
            permits: Arc::new(Semaphore::new(4)),
            tool: "write".to_owned(),
            repeatable,
        }
    }

    fn cx(at_ms: i64) -> JobContext {
        JobContext::new(
            TaskId::from_client("task-1"),
            Owner::anonymous(),
            1,
            Millis::from_unix_ms(at_ms),
        )
    }

    fn waited(step: StepResult<CallState>) -> CallState {
        match step {
            Ok(Step::Wait { state, .. }) => state,
            other => panic!("expected a wait, got {other:?}"),
        }
    }

    fn failure(step: StepResult<CallState>) -> String {
        match step {
            Ok(Step::Fail(error)) => error.message.to_string(),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_call_is_saved_as_issued_before_a_later_step_sends_it() {
        let job = job(false);
        let started = waited(job.start(JsonObject::new(), &cx(0)).await);
        assert!(!started.issued, "nothing is sent by the first step");
        let armed = waited(job.resume(started.clone(), Event::Tick, &cx(1)).await);
        assert!(armed.issued, "the step that arms saves `issued`");
        let entry = job.calls.get(&cx(1).task_id).expect("armed here");
        assert!(!entry.sent(), "arming sends nothing");
        // Its save failed: the same step runs again from the older state.
        let again = waited(job.resume(started, Event::Tick, &cx(2)).await);
        assert!(again.issued);
        assert!(!entry.sent(), "running the arming step twice sends nothing");
        // Only a step from the saved `issued` state sends (here: tries to
        // start the server, which cannot start, so the call is armed again
        // for a later try).
        let tried = waited(job.resume(armed, Event::Tick, &cx(3)).await);
        assert_eq!(tried.unreached, 1, "one try to send");
        assert!(!entry.sent(), "armed again: nothing reached the server");
    }

    #[tokio::test]
    async fn issued_with_nothing_here_is_lost_and_never_sent_again() {
        let job = job(false);
        let started = waited(job.start(JsonObject::new(), &cx(0)).await);
        let mut issued = started;
        issued.issued = true;
        // This process's name, no entry: the entry was swept, or the step
        // that armed it belonged to a process of the same name that is gone.
        let message = failure(job.resume(issued, Event::Tick, &cx(1)).await);
        assert!(
            message
                .starts_with("interrupted; not repeated because the tool is not marked idempotent"),
            "{message}"
        );
        assert!(
            job.calls.get(&cx(1).task_id).is_none(),
            "nothing armed, nothing sent"
        );
    }

    #[tokio::test]
    async fn a_repeatable_tool_gets_a_new_attempt_armed_before_it_is_sent() {
        let job = job(true);
        let mut issued = waited(job.start(JsonObject::new(), &cx(0)).await);
        issued.issued = true;
        let next = waited(job.resume(issued, Event::Tick, &cx(1)).await);
        assert_eq!(next.attempt, 2);
        assert!(!next.issued, "the new attempt goes through arming again");
    }

    #[tokio::test]
    async fn a_lost_call_in_a_saved_session_is_followed_there_not_repeated() {
        let job = job(false);
        let mut lost = waited(job.start(JsonObject::new(), &cx(0)).await);
        lost.issued = true;
        lost.holder = "a-process-that-died".to_owned();
        lost.session_task = Some(SessionTask {
            session: "session-1".to_owned(),
            task: "their-task".to_owned(),
        });
        let waiting = waited(job.resume(lost, Event::Tick, &cx(1_000)).await);
        // Taken over after `takeover_after`: the session is entered again
        // (armed here, sent by the next step), no new attempt is made.
        let entered = waited(job.resume(waiting, Event::Tick, &cx(6_000)).await);
        assert_eq!(entered.attempt, 1, "not called again");
        assert_eq!(entered.reentered, 1);
        assert!(entered.issued);
        assert_eq!(entered.holder, job.calls.holder());
        assert_eq!(
            entered.session_task.as_ref().map(|t| t.task.as_str()),
            Some("their-task")
        );
        let entry = job.calls.get(&cx(6_000).task_id).expect("armed here");
        assert!(!entry.sent(), "arming sends nothing");

        // An answer to a question asked on the lost connection is said to
        // be undeliverable, not silently dropped.
        job.calls.forget(&cx(6_000).task_id);
        let mut answers = InputResponses::new();
        answers.insert("a1q1-elicitation".to_owned(), serde_json::json!({}));
        let step = job.resume(entered, Event::Input(answers), &cx(7_000)).await;
        let Ok(Step::Wait { status, state, .. }) = step else {
            panic!("expected a wait, got {step:?}")
        };
        assert!(
            status.is_some_and(|s| s.contains("could not be passed on")),
            "the answer's fate is told"
        );

        // A session entered again and again with no news of the task: the
        // call is lost, and a tool not marked idempotent is not repeated.
        let mut state = state;
        state.reentered = MAX_ATTEMPTS;
        job.calls.forget(&cx(8_000).task_id);
        let message = failure(job.resume(state, Event::Tick, &cx(8_000)).await);
        assert!(
            message.starts_with("interrupted; not repeated")
                && message.contains("entered again 3 times"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_cancel_before_the_session_is_entered_again_goes_to_the_session() {
        let job = job(false);
        let mut lost = waited(job.start(JsonObject::new(), &cx(0)).await);
        lost.issued = true;
        lost.session_task = Some(SessionTask {
            session: "session-1".to_owned(),
            task: "their-task".to_owned(),
        });
        // This process lost the call and armed an entry to enter the
        // session again, which has sent nothing.
        let entered = waited(job.resume(lost, Event::Tick, &cx(1)).await);
        assert!(!job.calls.get(&cx(1).task_id).expect("armed").sent());
        let step = job.cancel(entered, &cx(2)).await;
        let Ok(Step::Cancelled { status }) = step else {
            panic!("expected cancelled, got {step:?}")
        };
        // The server cannot be reached here: the cancel was tried in the
        // session, and the status says it did not get there.
        let status = status.unwrap_or_default();
        assert!(
            status.contains("could not be cancelled in its session"),
            "{status}"
        );
        assert!(job.calls.get(&cx(2).task_id).is_none(), "the entry is gone");
    }

    #[tokio::test]
    async fn a_call_held_elsewhere_is_waited_for_then_taken_over() {
        let job = job(false);
        let mut elsewhere = waited(job.start(JsonObject::new(), &cx(0)).await);
        elsewhere.holder = "another-process".to_owned();
        elsewhere.issued = true;
        let waiting = waited(job.resume(elsewhere, Event::Tick, &cx(1_000)).await);
        assert_eq!(waiting.foreign_since, Some(Millis::from_unix_ms(1_000)));
        let still = waited(job.resume(waiting, Event::Tick, &cx(5_999)).await);
        let message = failure(job.resume(still, Event::Tick, &cx(6_000)).await);
        assert!(
            message.contains("the agentgate process that held it stopped"),
            "{message}"
        );
        assert!(
            job.calls.get(&cx(1).task_id).is_none(),
            "nothing sent from here"
        );
    }
}
