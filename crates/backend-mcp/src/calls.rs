//! The upstream calls this process has open, by task: the part of a task
//! that cannot be saved, because it lives on a connection.
//!
//! ```text
//! step (arm)    ─▶ Calls::arm      ─▶ an entry that has sent nothing (the step saves issued = true)
//! step (send)   ─▶ LiveCall::start ─▶ spawned call: connect ─▶ tools/call ─▶ writes into the entry:
//!                                      the latest progress, the questions asked, the end
//! step (follow) ─▶ LiveCall::next(wait) ─▶ the end, else the open question, else new progress, else Quiet
//! step (answer) ─▶ LiveCall::answer ─▶ the open question answered on its connection
//! step (cancel) ─▶ LiveCall::cancel ─▶ notifications/cancelled, the connection closed
//! sweep ─▶ ended calls dropped after a while; calls no step followed for long cancelled
//! ```
//!
//! Every entry is tagged with this process's [`Calls::holder`], a name new
//! at each start: a task's saved state records which process holds its
//! call, so a step run anywhere else (after a restart, on another instance)
//! knows the call is not here.
//!
//! **A call is sent at most once.** It is sent only by a step that starts
//! from a saved state saying `issued` *and* finds the entry an earlier step
//! of this process armed, unsent. Arming happens in the step *before*, whose
//! save is what records `issued`; so a crash or a failed save can lose a
//! call, never send it twice: a step that finds `issued` and no entry (a new
//! process, or the entry swept) treats the call as lost.
//!
//! The spawned call never waits on a step: it writes into the entry's shared
//! state and wakes whoever follows, so its time limit holds even while the
//! task waits for a person's answer.
//!
//! A call a 2025-11-25 server runs as its task lives in the server's
//! session: the entry then names the session and the task
//! ([`SessionTask`], saved with the task), and a call that *enters* that
//! session again ([`Call::enter`]) follows the same task with `tasks/result`
//! and `tasks/get`, sending nothing that starts work.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentgate_backend::{Owner, TaskId, UpstreamOutcome};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
    CancelledNotificationParam, ClientRequest, CustomRequest, ElicitRequest, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorCode, InputRequest, InputRequests, InputResponses,
    JsonObject, ProtocolVersion, RequestId, ServerResult,
};
#[allow(deprecated)]
use rmcp::model::{CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use rmcp::{ErrorData, RoleClient};
use serde_json::{Value, json};
use tokio::sync::{Notify, OwnedSemaphorePermit, mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Sampling;
use crate::session::{SavedSession, SessionHandle};
use crate::upstream::{CallClient, CallEvent, Upstream, capped, lock};

/// An ended call is kept this long for a step that must read it again
/// (its save failed in a store outage): long enough for the engine's save
/// retries, short enough that results do not pile up in memory.
const KEEP_ENDED: Duration = Duration::from_secs(2 * 60);
/// A call no step looked at for this long is cancelled: its task is
/// followed elsewhere, ended or gone. (A call waiting for a person's answer
/// is bounded by its call timeout instead.)
const UNFOLLOWED: Duration = Duration::from_secs(15 * 60);
/// How long writing a cancel notification may take before the connection
/// is closed anyway.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(2);
/// Rounds of MRTR `input_required` answered before a call is given up.
const MAX_INPUT_ROUNDS: u32 = 16;
/// Progress is shown (and the task saved) at most this often.
const PROGRESS_GAP: Duration = Duration::from_secs(1);
/// The longest task id a server may give a call it runs as its own task.
const MAX_TASK_ID: usize = 256;
/// Questions a server may have open at once on one call.
const MAX_QUESTIONS: usize = 8;
/// How often the status of a server's 2025-11-25 task is read, at most
/// (and unless it asks for less often, at least).
const TASK_POLL: Duration = Duration::from_secs(5);
/// The shortest poll interval a server may ask for.
const TASK_POLL_MIN: Duration = Duration::from_millis(500);

/// How a call ended.
#[derive(Debug, Clone)]
pub(crate) enum CallEnd {
    /// The server answered (possibly with an `isError` result).
    Answered(CallToolResult),
    /// The server refused the request with a JSON-RPC error.
    Refused(ErrorData),
    /// The request was never sent: the server could not be started or
    /// reached. Safe to try again.
    NotSent(String),
    /// The connection broke after the request was sent: the server may or
    /// may not have done the work.
    Lost(String),
    /// No answer within the server's `call_timeout_seconds`; cancelled.
    TimedOut(Duration),
    /// Cancelled by agentgate.
    Cancelled,
    /// The server made the call a task of its own (the tasks extension,
    /// SEP-2663): it is followed by its id from now on, on any instance.
    Task {
        /// The server's task id.
        id: String,
        /// The poll interval the server suggested.
        poll: Option<Duration>,
    },
}

/// A task a 2025-11-25 server runs for a call, in the HTTP session that
/// made it: the session is entered again to follow it after a restart.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SessionTask {
    /// The server's `Mcp-Session-Id`.
    pub(crate) session: String,
    /// The server's task id.
    pub(crate) task: String,
}

/// What a step sees of its call.
#[derive(Debug)]
pub(crate) enum Seen {
    /// Progress, as a status message.
    Progress(String),
    /// The server asks: questions by key, to become `input_required`.
    Asked(InputRequests),
    /// The call ended.
    Ended(CallEnd),
    /// Nothing new within the wait.
    Quiet,
}

/// Where the answers to a question go.
#[derive(Debug)]
enum Responder {
    /// `elicitation/create`, asked under `key`.
    Elicit {
        key: String,
        reply: oneshot::Sender<ElicitResult>,
    },
    /// `sampling/createMessage`, asked of the caller under `key`.
    #[allow(deprecated)]
    Sample {
        key: String,
        reply: oneshot::Sender<Option<CreateMessageResult>>,
    },
    /// MRTR input requests, our keys mapped to the server's.
    Rounds {
        keys: BTreeMap<String, String>,
        reply: oneshot::Sender<InputResponses>,
    },
}

/// A question the server asked, kept until it is answered (a step whose
/// save failed shows it again).
#[derive(Debug)]
struct Question {
    requests: InputRequests,
    responder: Responder,
}

#[derive(Debug)]
struct Shared {
    /// Armed (false) until a step starts the call.
    sent: bool,
    progress: Option<String>,
    questions: VecDeque<Question>,
    asked: u32,
    ended: Option<(CallEnd, Instant)>,
    followed: Instant,
    /// The server's task and session, once the call became one.
    session_task: Option<SessionTask>,
    /// Given up by this process (no step followed it): a task of the
    /// server's is left running in its session, for whoever follows it now.
    abandoned: bool,
    /// The server answered a `tasks/get` of its task since a step last
    /// asked: the task is alive there, status message or not.
    heard: bool,
}

/// One call of this process.
#[derive(Debug)]
pub(crate) struct LiveCall {
    shared: Mutex<Shared>,
    changed: Notify,
    cancel: CancellationToken,
    /// The attempt's prefix of question keys.
    prefix: String,
}

impl LiveCall {
    fn new(prefix: String) -> Self {
        Self {
            shared: Mutex::new(Shared {
                sent: false,
                progress: None,
                questions: VecDeque::new(),
                asked: 0,
                ended: None,
                followed: Instant::now(),
                session_task: None,
                abandoned: false,
                heard: false,
            }),
            changed: Notify::new(),
            cancel: CancellationToken::new(),
            prefix,
        }
    }

    /// The server's task and the session it lives in, once the call is a
    /// 2025-11-25 task of an HTTP server's.
    pub(crate) fn session_task(&self) -> Option<SessionTask> {
        lock(&self.shared).session_task.clone()
    }

    /// Whether the server answered a `tasks/get` of its task since the
    /// last asking.
    pub(crate) fn take_heard(&self) -> bool {
        std::mem::take(&mut lock(&self.shared).heard)
    }

    fn set_session_task(&self, task: SessionTask, status: String) {
        let mut shared = lock(&self.shared);
        shared.session_task = Some(task);
        shared.progress = Some(status);
        drop(shared);
        self.changed.notify_waiters();
    }

    /// Whether a step already started the call.
    pub(crate) fn sent(&self) -> bool {
        lock(&self.shared).sent
    }

    /// How the call ended, if it did.
    pub(crate) fn ended(&self) -> Option<CallEnd> {
        lock(&self.shared)
            .ended
            .as_ref()
            .map(|(end, _)| end.clone())
    }

    /// Sends the call: `call` runs on its own task, holding `permit`.
    pub(crate) fn start(self: &Arc<Self>, call: Call, permit: OwnedSemaphorePermit) {
        lock(&self.shared).sent = true;
        tokio::spawn(call.run(self.clone(), permit));
    }

    /// Makes an entry whose connection could not be made armed again, so a
    /// later step may send it (nothing reached the server).
    pub(crate) fn rearm(&self) {
        let mut shared = lock(&self.shared);
        shared.sent = false;
        shared.ended = None;
    }

    /// Waits up to `wait` for news: the end, else the open question (shown
    /// until it is answered), else new progress. Progress is shown at most
    /// once per [`PROGRESS_GAP`], the latest of what came: each showing
    /// costs the task a save.
    pub(crate) async fn next(&self, wait: Duration) -> Seen {
        let start = Instant::now();
        let deadline = start + wait;
        let progress_due = start + PROGRESS_GAP;
        loop {
            let notified = self.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let until = {
                let mut shared = lock(&self.shared);
                shared.followed = Instant::now();
                if let Some((end, _)) = &shared.ended {
                    return Seen::Ended(end.clone());
                }
                if let Some(question) = shared.questions.front() {
                    return Seen::Asked(question.requests.clone());
                }
                let now = Instant::now();
                if (now >= progress_due || now >= deadline)
                    && let Some(status) = shared.progress.take()
                {
                    return Seen::Progress(status);
                }
                if now >= deadline {
                    return Seen::Quiet;
                }
                if shared.progress.is_some() {
                    progress_due.min(deadline)
                } else {
                    deadline
                }
            };
            // Woken by news, or at the time to show progress or give up;
            // the top of the loop decides which.
            let _ = tokio::time::timeout_at(until, notified).await;
        }
    }

    /// Sends the client's answers to the open question, when they answer
    /// it; answers to anything else (an earlier attempt's question, a
    /// repeated delivery) are dropped.
    pub(crate) fn answer(&self, responses: &InputResponses) {
        let question = {
            let mut shared = lock(&self.shared);
            let answers_it = shared
                .questions
                .front()
                .is_some_and(|q| q.requests.keys().any(|key| responses.contains_key(key)));
            if !answers_it {
                return;
            }
            shared.questions.pop_front()
        };
        let Some(question) = question else {
            return;
        };
        match question.responder {
            Responder::Elicit { key, reply } => {
                let result = responses
                    .get(&key)
                    .and_then(|answer| serde_json::from_value::<ElicitResult>(answer.clone()).ok())
                    // An answer the server could not read is a cancel, not a
                    // guess at what the user meant.
                    .unwrap_or_else(|| ElicitResult::new(ElicitationAction::Cancel));
                let _ = reply.send(result);
            }
            #[allow(deprecated)]
            Responder::Sample { key, reply } => {
                // An answer the server could not read is no answer: the
                // server is told so, nothing is made up.
                let result = responses.get(&key).and_then(|answer| {
                    serde_json::from_value::<CreateMessageResult>(answer.clone()).ok()
                });
                let _ = reply.send(result);
            }
            Responder::Rounds { keys, reply } => {
                let theirs = keys
                    .iter()
                    .filter_map(|(ours, theirs)| {
                        responses
                            .get(ours)
                            .map(|answer| (theirs.clone(), answer.clone()))
                    })
                    .collect();
                let _ = reply.send(theirs);
            }
        }
        self.changed.notify_waiters();
    }

    /// Stops the call: the server is sent `notifications/cancelled` (or
    /// `tasks/cancel` for its task) and the connection is closed.
    pub(crate) fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Stops following the call here, which no step followed for long:
    /// like [`Self::cancel`], except that a task of the server's is left
    /// running, since another process may follow it in its session.
    fn abandon(&self) {
        lock(&self.shared).abandoned = true;
        self.cancel.cancel();
    }

    fn set_progress(&self, status: String) {
        lock(&self.shared).progress = Some(status);
        self.changed.notify_waiters();
    }

    /// Keys unique for the task's life: the entry's prefix (by attempt and
    /// re-entry), a counter.
    fn key(shared: &mut Shared, prefix: &str, name: &str) -> String {
        shared.asked += 1;
        format!("{prefix}q{}-{name}", shared.asked)
    }

    /// Keeps an `elicitation/create` until it is answered; refuses it when
    /// too many are open.
    fn ask_elicitation(&self, params: ElicitRequestParams, reply: oneshot::Sender<ElicitResult>) {
        let mut shared = lock(&self.shared);
        if shared.questions.len() >= MAX_QUESTIONS {
            let _ = reply.send(ElicitResult::new(ElicitationAction::Cancel));
            return;
        }
        let key = Self::key(&mut shared, &self.prefix, "elicitation");
        let requests = InputRequests::from([(
            key.clone(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        )]);
        shared.questions.push_back(Question {
            requests,
            responder: Responder::Elicit { key, reply },
        });
        drop(shared);
        self.changed.notify_waiters();
    }

    /// Keeps a `sampling/createMessage` until the caller answers it;
    /// refuses it when too many questions are open.
    #[allow(deprecated)]
    fn ask_sampling(
        &self,
        params: CreateMessageRequestParams,
        reply: oneshot::Sender<Option<CreateMessageResult>>,
    ) {
        let mut shared = lock(&self.shared);
        if shared.questions.len() >= MAX_QUESTIONS {
            let _ = reply.send(None);
            return;
        }
        let key = Self::key(&mut shared, &self.prefix, "sampling");
        let requests = InputRequests::from([(
            key.clone(),
            InputRequest::CreateMessage(CreateMessageRequest::new(params)),
        )]);
        shared.questions.push_back(Question {
            requests,
            responder: Responder::Sample { key, reply },
        });
        drop(shared);
        self.changed.notify_waiters();
    }

    /// Keeps an MRTR round's input requests until they are answered.
    fn ask_round(&self, requests: InputRequests) -> oneshot::Receiver<InputResponses> {
        let (reply, answered) = oneshot::channel();
        let mut shared = lock(&self.shared);
        let mut keys = BTreeMap::new();
        let mut ours = InputRequests::new();
        for (theirs, request) in requests {
            let key = Self::key(&mut shared, &self.prefix, &theirs);
            keys.insert(key.clone(), theirs);
            ours.insert(key, request);
        }
        shared.questions.push_back(Question {
            requests: ours,
            responder: Responder::Rounds { keys, reply },
        });
        drop(shared);
        self.changed.notify_waiters();
        answered
    }

    fn end(&self, end: CallEnd) {
        let mut shared = lock(&self.shared);
        shared.questions.clear();
        shared.ended = Some((end, Instant::now()));
        drop(shared);
        self.changed.notify_waiters();
    }
}

/// This process's calls.
#[derive(Debug)]
pub(crate) struct Calls {
    holder: String,
    live: Mutex<HashMap<TaskId, Arc<LiveCall>>>,
}

impl Calls {
    pub(crate) fn new() -> Self {
        let holder = format!(
            "{}-{}",
            std::process::id(),
            TaskId::generate()
                .as_str()
                .chars()
                .take(12)
                .collect::<String>()
        );
        Self {
            holder,
            live: Mutex::default(),
        }
    }

    /// This process's name in saved call states.
    pub(crate) fn holder(&self) -> &str {
        &self.holder
    }

    /// The entry this process keeps for `task`'s call, if any.
    pub(crate) fn get(&self, task: &TaskId) -> Option<Arc<LiveCall>> {
        let call = lock(&self.live).get(task).cloned()?;
        lock(&call.shared).followed = Instant::now();
        Some(call)
    }

    /// An entry for `task`'s call that has sent nothing (kept if there is
    /// one already: the arming step ran again); its questions' keys start
    /// with `prefix`, which no earlier entry of the task used.
    pub(crate) fn arm(&self, task: &TaskId, prefix: String) {
        lock(&self.live)
            .entry(task.clone())
            .or_insert_with(|| Arc::new(LiveCall::new(prefix)));
    }

    /// Drops what this process keeps of `task`'s call (an open one is
    /// cancelled).
    pub(crate) fn forget(&self, task: &TaskId) {
        if let Some(call) = lock(&self.live).remove(task) {
            call.cancel();
        }
    }

    /// Drops what this process keeps of `task`'s call without cancelling
    /// a task of the server's it follows: another process may follow it
    /// now ([`LiveCall::abandon`]).
    pub(crate) fn abandon(&self, task: &TaskId) {
        if let Some(call) = lock(&self.live).remove(task) {
            call.abandon();
        }
    }

    /// Forgets ended calls kept long enough, and cancels calls no step
    /// followed for long.
    pub(crate) fn sweep(&self) {
        let now = Instant::now();
        lock(&self.live).retain(|_, call| {
            let shared = lock(&call.shared);
            if let Some((_, at)) = &shared.ended {
                return now.duration_since(*at) < KEEP_ENDED;
            }
            let waiting_for_answer = !shared.questions.is_empty();
            if !waiting_for_answer && now.duration_since(shared.followed) >= UNFOLLOWED {
                drop(shared);
                call.abandon();
                return false;
            }
            true
        });
    }
}

/// One `tools/call` to make.
pub(crate) struct Call {
    pub(crate) upstream: Arc<Upstream>,
    /// Whose call it is: the upstream identity comes from this principal's
    /// configuration.
    pub(crate) owner: Owner,
    pub(crate) tool: String,
    pub(crate) args: JsonObject,
    /// The server's task to follow in its saved session, instead of a new
    /// `tools/call`.
    pub(crate) enter: Option<SessionTask>,
}

impl Call {
    async fn run(self, live: Arc<LiveCall>, permit: OwnedSemaphorePermit) {
        let (end, kept) = self.call(&live).await;
        drop(permit);
        let method = match self.enter {
            Some(_) => "tasks/result",
            None => "tools/call",
        };
        let outcome = match &end {
            CallEnd::Answered(_) | CallEnd::Task { .. } => Some(UpstreamOutcome::Ok),
            CallEnd::Refused(_) => Some(UpstreamOutcome::ClientError),
            CallEnd::Lost(_) | CallEnd::TimedOut(_) => Some(UpstreamOutcome::Transport),
            CallEnd::NotSent(_) | CallEnd::Cancelled => None,
        };
        if let Some(outcome) = outcome {
            self.upstream.metrics.record(method, outcome);
        }
        live.end(end);
        // The session of a server's task that gave its result is ended only
        // once the result is saved (this call forgotten) or could have been:
        // a process that dies first enters it again and reads the result
        // anew, instead of finding the session gone.
        if let Some(session) = kept {
            tokio::select! {
                () = live.cancel.cancelled() => {}
                () = tokio::time::sleep(KEEP_ENDED) => {}
            }
            session.end(NOTIFY_TIMEOUT).await;
        }
    }

    /// The call, on a connection of its own; with the end, the session it
    /// leaves to [`SessionHandle::end`] once the result is safe.
    async fn call(&self, live: &LiveCall) -> (CallEnd, Option<Arc<SessionHandle>>) {
        let settings = &self.upstream.settings;
        let cancel = live.cancel.clone();
        let (events, mut from_server) = mpsc::channel(32);
        let enter = self.enter.as_ref().map(|saved| SavedSession {
            id: saved.session.clone(),
            server: settings.name.clone(),
        });
        let connecting =
            self.upstream
                .connect_in(CallClient::reporting(events), Some(&self.owner), enter);
        let connection = tokio::select! {
            () = cancel.cancelled() => return (CallEnd::Cancelled, None),
            connected = connecting => connected,
        };
        let connection = match connection {
            Ok(connection) => connection,
            Err(why) => return (CallEnd::NotSent(why.logged(&settings.name)), None),
        };
        // The request in flight, so a cancel can name it to the server.
        let in_flight: Mutex<Option<RequestId>> = Mutex::default();
        // The server's own task, when the call runs as a 2025-11-25 task.
        let task: Mutex<Option<String>> = Mutex::default();
        let peer = connection.peer().clone();
        let session = connection.session().map(|session| &**session);
        // Boxed, so it can be dropped before the connection is closed.
        let mut calling = Box::pin(self.rounds(&peer, live, &in_flight, &task, session));
        let deadline = tokio::time::sleep(settings.call_timeout);
        let mut deadline = std::pin::pin!(deadline);
        // Boxed like `calling`, and dropped with it.
        let mut refused = Box::pin(async {
            match session {
                Some(session) => session.refused().await,
                None => std::future::pending().await,
            }
        });
        let end = loop {
            tokio::select! {
                end = &mut calling => break end,
                why = &mut refused => break CallEnd::Lost(why),
                Some(event) = from_server.recv() => match event {
                    CallEvent::Progress(status) => live.set_progress(status),
                    CallEvent::Ask(params, reply) => live.ask_elicitation(params, reply),
                    CallEvent::Sample(params, reply) => live.ask_sampling(params, reply),
                },
                () = cancel.cancelled() => break CallEnd::Cancelled,
                () = &mut deadline => break CallEnd::TimedOut(settings.call_timeout),
            }
        };
        drop(calling);
        drop(refused);
        // A task of the server's still running is cancelled with
        // tasks/cancel (cancelling the request that waits for its result
        // would leave it running).
        let running = lock(&task).take();
        let abandoned = lock(&live.shared).abandoned;
        if let Some(id) = &running
            && !abandoned
            && matches!(end, CallEnd::Cancelled | CallEnd::TimedOut(_))
        {
            let cancel = request_raw(&peer, "tasks/cancel", json!({"taskId": id}), None);
            let cancelled = tokio::time::timeout(NOTIFY_TIMEOUT, cancel).await;
            self.upstream
                .metrics
                .record("tasks/cancel", crate::upstream::outcome_of(&cancelled));
        }
        // The session is left to a later process only while the server's
        // task may still run in it and be followed there: the connection
        // broke, so this one cannot follow it.
        let answered_task = matches!(end, CallEnd::Answered(_))
            && (self.enter.is_some() || live.session_task().is_some());
        let session = connection.session().cloned();
        if let Some(session) = &session {
            session.keep(
                matches!(end, CallEnd::Lost(_))
                    || (abandoned && running.is_some())
                    || answered_task,
            );
        }
        // A request still open is cancelled by name, and the notification
        // is written before the connection closes.
        let open = lock(&in_flight).take();
        if let Some(id) = open {
            let reason = match &end {
                CallEnd::TimedOut(_) => "agentgate: the call timed out",
                _ => "agentgate: the task was cancelled",
            };
            let notify = peer.notify_cancelled(CancelledNotificationParam::new(
                Some(id),
                Some(reason.to_owned()),
            ));
            let _ = tokio::time::timeout(NOTIFY_TIMEOUT, notify).await;
        }
        connection.close().await;
        let kept = session.filter(|_| answered_task);
        (end, kept)
    }

    /// `tools/call`, and the MRTR rounds a 2026-07-28 server may ask for;
    /// or, for a tool a 2025-11-25 server runs only as a task, the call as
    /// its task ([`Self::as_task_2025`]).
    async fn rounds(
        &self,
        peer: &Peer<RoleClient>,
        live: &LiveCall,
        in_flight: &Mutex<Option<RequestId>>,
        task: &Mutex<Option<String>>,
        session: Option<&SessionHandle>,
    ) -> CallEnd {
        let server = &self.upstream.settings.name;
        let refused = |what: String| CallEnd::Refused(ErrorData::internal_error(what, None));
        if let Some(saved) = &self.enter {
            *lock(task) = Some(saved.task.clone());
            return self
                .task_result_2025(peer, live, in_flight, task, &saved.task, TASK_POLL)
                .await;
        }
        let tasks_2025 = speaks_2025_11_25(peer);
        if tasks_2025 && lock(&self.upstream.task_only).contains(&self.tool) {
            return self
                .as_task_2025(peer, live, in_flight, task, session, None)
                .await;
        }
        let mut params =
            CallToolRequestParams::new(self.tool.clone()).with_arguments(self.args.clone());
        for _ in 0..MAX_INPUT_ROUNDS {
            match call_once(peer, params.clone(), in_flight).await {
                // A 2025-11-25 server refuses a plain call of a tool with
                // `taskSupport: "required"` as an unknown method, before
                // running anything (rmcp drops `execution` from the
                // listing, so this is how it shows): the call is made
                // again, as a task. A server that runs no tasks refuses
                // that too, and its first refusal is the answer.
                Err(ServiceError::McpError(error))
                    if tasks_2025 && error.code == ErrorCode::METHOD_NOT_FOUND =>
                {
                    return self
                        .as_task_2025(peer, live, in_flight, task, session, Some(error))
                        .await;
                }
                // The same refusal as the TypeScript SDK's McpServer says
                // it: a tool error whose text is the JSON-RPC error's.
                Ok(CallToolResponse::Complete(result))
                    if tasks_2025 && refused_as_unknown_method(&result) =>
                {
                    let message = result
                        .content
                        .first()
                        .and_then(|block| block.as_text())
                        .map(|text| text.text.clone())
                        .unwrap_or_default();
                    let error = ErrorData::new(ErrorCode::METHOD_NOT_FOUND, message, None);
                    return self
                        .as_task_2025(peer, live, in_flight, task, session, Some(error))
                        .await;
                }
                Ok(CallToolResponse::Complete(result)) => return CallEnd::Answered(result),
                Ok(CallToolResponse::InputRequired(asked)) => {
                    let requests = asked.input_requests.unwrap_or_default();
                    let sampling = self.upstream.settings.sampling;
                    if let Some(kind) = requests.values().find_map(|r| unserved(r, sampling)) {
                        return refused(format!(
                            "MCP server \"{server}\" asked for {kind} during `{}`, which agentgate \
                             does not serve to upstream servers",
                            self.tool
                        ));
                    }
                    let responses = if requests.is_empty() {
                        InputResponses::new()
                    } else {
                        match live.ask_round(requests).await {
                            Ok(responses) => responses,
                            Err(_) => return CallEnd::Cancelled,
                        }
                    };
                    params.input_responses = Some(responses);
                    params.request_state = asked.request_state;
                }
                Ok(CallToolResponse::Task(created)) => {
                    // Saved with the task and shown in its status: a server
                    // may not make it as long as it likes.
                    if created.task.task_id.len() > MAX_TASK_ID {
                        return refused(format!(
                            "MCP server \"{server}\" made `{}` a task whose id is over \
                             {MAX_TASK_ID} bytes; agentgate does not follow it",
                            self.tool
                        ));
                    }
                    return CallEnd::Task {
                        id: created.task.task_id,
                        poll: created.task.poll_interval_ms.map(Duration::from_millis),
                    };
                }
                Ok(_) => {
                    return refused(format!(
                        "MCP server \"{server}\" answered `{}` with a kind of result agentgate \
                         does not know",
                        self.tool
                    ));
                }
                Err(ServiceError::McpError(error)) => return CallEnd::Refused(error),
                Err(ServiceError::UnexpectedResponse) => {
                    return refused(format!(
                        "MCP server \"{server}\" answered `{}` with something that is not a tool \
                         result",
                        self.tool
                    ));
                }
                Err(other) => return CallEnd::Lost(describe_lost(&other)),
            }
        }
        refused(format!(
            "MCP server \"{server}\" asked for input {MAX_INPUT_ROUNDS} times in one call of `{}` \
             without finishing; agentgate gave up",
            self.tool
        ))
    }

    /// The call as a 2025-11-25 task of the server's, on this connection:
    /// `tools/call` with `task`, then `tasks/result`, which the server
    /// answers when the task ends and over which it asks its questions
    /// (they reach [`CallClient`] like any other), while `tasks/get` reads
    /// its status message for the task's. The server's task lives in this
    /// session: over HTTP the entry names both ([`SessionTask`]), so a step
    /// after a restart can enter the session again and go on following it;
    /// over stdio the task ends with the process, and the call is lost with
    /// the connection like a plain one.
    async fn as_task_2025(
        &self,
        peer: &Peer<RoleClient>,
        live: &LiveCall,
        in_flight: &Mutex<Option<RequestId>>,
        task: &Mutex<Option<String>>,
        session: Option<&SessionHandle>,
        plain_refusal: Option<ErrorData>,
    ) -> CallEnd {
        let server = &self.upstream.settings.name;
        let refused = |what: String| CallEnd::Refused(ErrorData::internal_error(what, None));
        let ttl =
            u64::try_from(self.upstream.settings.call_timeout.as_millis()).unwrap_or(u64::MAX);
        let params = json!({
            "name": self.tool,
            "arguments": self.args,
            "task": {"ttl": ttl},
        });
        let created = match request_raw(peer, "tools/call", params, Some(in_flight)).await {
            Ok(created) => created,
            Err(ServiceError::McpError(error)) => {
                lock(&self.upstream.task_only).remove(&self.tool);
                return CallEnd::Refused(plain_refusal.unwrap_or(error));
            }
            Err(other) => return CallEnd::Lost(describe_lost(&other)),
        };
        lock(&self.upstream.task_only).insert(self.tool.clone());
        let Some(id) = created["task"]["taskId"].as_str().map(str::to_owned) else {
            // A server that does not run tasks may ignore `task` and answer.
            if let Ok(result) = serde_json::from_value::<CallToolResult>(created.clone())
                && created.get("content").is_some()
            {
                return CallEnd::Answered(result);
            }
            return refused(format!(
                "MCP server \"{server}\" answered a task-augmented call of `{}` without a task id",
                self.tool
            ));
        };
        if id.len() > MAX_TASK_ID {
            return refused(format!(
                "MCP server \"{server}\" made `{}` a task whose id is over {MAX_TASK_ID} bytes; \
                 agentgate does not follow it",
                self.tool
            ));
        }
        *lock(task) = Some(id.clone());
        if let Some(session) = session
            && let Some(session_id) = session.id()
            && session_id.len() <= MAX_TASK_ID
        {
            session.keep(true);
            live.set_session_task(
                SessionTask {
                    session: session_id,
                    task: id.clone(),
                },
                format!("MCP server \"{server}\" runs the call as its task {id}"),
            );
        }
        let poll = created["task"]["pollInterval"]
            .as_u64()
            .map(Duration::from_millis)
            .unwrap_or(TASK_POLL)
            .clamp(TASK_POLL_MIN, TASK_POLL);
        self.task_result_2025(peer, live, in_flight, task, &id, poll)
            .await
    }

    /// Follows the server's 2025-11-25 task `id` to its end: `tasks/result`
    /// (answered when it ends; its questions come over it), while
    /// `tasks/get` reads its status message every `poll`.
    async fn task_result_2025(
        &self,
        peer: &Peer<RoleClient>,
        live: &LiveCall,
        in_flight: &Mutex<Option<RequestId>>,
        task: &Mutex<Option<String>>,
        id: &str,
        poll: Duration,
    ) -> CallEnd {
        let server = &self.upstream.settings.name;
        let refused = |what: String| CallEnd::Refused(ErrorData::internal_error(what, None));
        let result = request_raw(peer, "tasks/result", json!({"taskId": id}), Some(in_flight));
        let status = async {
            let mut last = None;
            loop {
                tokio::time::sleep(poll).await;
                let Ok(got) = request_raw(peer, "tasks/get", json!({"taskId": id}), None).await
                else {
                    continue;
                };
                lock(&live.shared).heard = true;
                let message = got["statusMessage"].as_str().map(capped);
                if message.is_some() && message != last {
                    if let Some(message) = &message {
                        live.set_progress(message.clone());
                    }
                    last = message;
                }
            }
        };
        let answered = tokio::select! {
            answered = result => answered,
            () = status => unreachable!("the status loop never ends"),
        };
        *lock(task) = None;
        match answered {
            Ok(value) => match serde_json::from_value::<CallToolResult>(value) {
                Ok(result) => CallEnd::Answered(result),
                Err(e) => refused(format!(
                    "MCP server \"{server}\" ended the task of `{}` with something that is not \
                     a tool result: {e}",
                    self.tool
                )),
            },
            Err(ServiceError::McpError(error)) => CallEnd::Refused(error),
            Err(other) => CallEnd::Lost(describe_lost(&other)),
        }
    }
}

/// `tasks/cancel` for the server's 2025-11-25 task `saved`, sent in its
/// session by a process that no longer follows it (the session is ended
/// after). The error says why it could not be sent, or the server's
/// refusal.
pub(crate) async fn cancel_in_session(
    upstream: &Upstream,
    owner: &Owner,
    saved: &SessionTask,
) -> Result<(), String> {
    let enter = SavedSession {
        id: saved.session.clone(),
        server: upstream.settings.name.clone(),
    };
    let connection = upstream
        .connect_in(CallClient::quiet(), Some(owner), Some(enter))
        .await
        .map_err(|error| error.logged(&upstream.settings.name))?;
    let cancel = request_raw(
        connection.peer(),
        "tasks/cancel",
        json!({"taskId": saved.task}),
        None,
    );
    let cancelled = tokio::time::timeout(NOTIFY_TIMEOUT, cancel).await;
    upstream
        .metrics
        .record("tasks/cancel", crate::upstream::outcome_of(&cancelled));
    connection.close().await;
    match cancelled {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(ServiceError::McpError(error))) => Err(capped(&error.message)),
        Ok(Err(other)) => Err(describe_lost(&other)),
        Err(_) => Err(format!("no answer within {}s", NOTIFY_TIMEOUT.as_secs())),
    }
}

/// What an input request of a 2026-07-28 server (an MRTR round, its own
/// task) asks for that agentgate does not serve upstream, if anything:
/// sampling unless `sampling = "caller"` (the caller answers it like a
/// question); roots, which that protocol deprecates (SEP-2577) and which
/// agentgate gives only to servers that ask with `roots/list`.
pub(crate) fn unserved(request: &InputRequest, sampling: Sampling) -> Option<&'static str> {
    match request {
        InputRequest::Elicitation(_) => None,
        #[allow(deprecated)]
        InputRequest::CreateMessage(_) if sampling == Sampling::Caller => None,
        #[allow(deprecated)]
        InputRequest::CreateMessage(_) => {
            Some("sampling (a model's completion; `sampling = \"caller\"` would ask the caller)")
        }
        #[allow(deprecated)]
        InputRequest::ListRoots(_) => Some("roots"),
        _ => Some("an input request of a kind it does not know"),
    }
}

/// Whether `result` is a refusal of the call as an unknown method, as the
/// TypeScript SDK's `McpServer` answers one (an `isError` result whose
/// text is "MCP error -32601: …"), which it sends before running anything.
fn refused_as_unknown_method(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
        && result.content.len() == 1
        && result
            .content
            .first()
            .and_then(|block| block.as_text())
            .is_some_and(|text| text.text.starts_with("MCP error -32601:"))
}

/// Whether the session speaks 2025-11-25, the protocol of task-augmented
/// `tools/call` (rmcp keeps no `capabilities.tasks` of that version, so
/// whether the server runs them shows only when it is asked).
fn speaks_2025_11_25(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|info| info.protocol_version == ProtocolVersion::V_2025_11_25)
}

/// A request rmcp has no type for (the 2025-11-25 task methods, a
/// `tools/call` with `task`), its answer as JSON; its id in `in_flight`
/// while it is open, when given.
async fn request_raw(
    peer: &Peer<RoleClient>,
    method: &str,
    params: Value,
    in_flight: Option<&Mutex<Option<RequestId>>>,
) -> Result<Value, ServiceError> {
    let request = ClientRequest::CustomRequest(CustomRequest::new(method.to_owned(), Some(params)));
    let handle = peer
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await?;
    if let Some(slot) = in_flight {
        *lock(slot) = Some(handle.id.clone());
    }
    let answer = handle.await_response().await;
    if let Some(slot) = in_flight {
        *lock(slot) = None;
    }
    // rmcp reads an answer as the first result type its shape fits; the
    // JSON it makes again has every field that type knows.
    serde_json::to_value(answer?).map_err(|_| ServiceError::UnexpectedResponse)
}

/// One `tools/call` on `peer`, its id in `in_flight` while it is open.
async fn call_once(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    in_flight: &Mutex<Option<RequestId>>,
) -> Result<CallToolResponse, ServiceError> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = peer
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await?;
    *lock(in_flight) = Some(handle.id.clone());
    let answer = handle.await_response().await;
    *lock(in_flight) = None;
    match answer? {
        ServerResult::CallToolResult(result) => Ok(CallToolResponse::Complete(result)),
        ServerResult::InputRequiredResult(result) => Ok(CallToolResponse::InputRequired(result)),
        ServerResult::CreateTaskResult(result) => Ok(CallToolResponse::Task(result)),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// A broken call, in a person's terms: rmcp's transport errors name their
/// types, so only the kind is told.
fn describe_lost(error: &ServiceError) -> String {
    match error {
        ServiceError::TransportClosed => {
            "the connection to the server closed during the call".to_owned()
        }
        ServiceError::Timeout { .. } => "the request timed out".to_owned(),
        other => format!(
            "the connection broke during the call ({})",
            capped(
                other
                    .to_string()
                    .lines()
                    .next()
                    .unwrap_or("transport error")
            )
        ),
    }
}
