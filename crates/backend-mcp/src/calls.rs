//! The upstream calls this process has open, by task: the part of a task
//! that cannot be saved, because it lives on a connection.
//!
//! ```text
//! step (issue) ─▶ Calls::issue ─▶ spawned call: connect ─▶ tools/call ─┬─▶ Update::Event (progress, a question)
//!                                                                      └─▶ Update::Ended (result, error, lost)
//! step (follow) ─▶ LiveCall::next(wait) ─▶ what came since the last step, or Quiet
//! step (answer) ─▶ LiveCall::answer ─▶ the upstream's question answered on its connection
//! step (cancel) ─▶ LiveCall::cancel ─▶ the request dropped (rmcp sends notifications/cancelled), connection closed
//! sweep ─▶ ended calls kept a while (a step whose save failed reads the end again), unfollowed calls cancelled
//! ```
//!
//! Every call is tagged with this process's [`Calls::holder`], a name new
//! at each start: a task's saved state records which process issued its
//! call, so a step run anywhere else (after a restart, on another instance)
//! knows the call is not here, and never issues it a second time by
//! mistake.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentgate_backend::{TaskId, UpstreamOutcome};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult,
    CancelledNotificationParam, ClientRequest, ElicitRequest, ElicitResult, ElicitationAction,
    InputRequest, InputRequests, InputResponses, JsonObject, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use rmcp::{ErrorData, RoleClient};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::upstream::{CallClient, CallEvent, Upstream};

/// An ended call is kept this long for a step that must read it again
/// (its save failed in a store outage): long enough for the engine's save
/// retries, short enough that results do not pile up in memory.
const KEEP_ENDED: Duration = Duration::from_secs(2 * 60);
/// A live call no step looked at for this long is cancelled: its task is
/// followed elsewhere, ended or gone.
const UNFOLLOWED: Duration = Duration::from_secs(15 * 60);
/// How long writing a cancel notification may take before the connection
/// is closed anyway.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(2);
/// Rounds of MRTR `input_required` answered before a call is given up.
const MAX_INPUT_ROUNDS: u32 = 16;

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

enum Update {
    Event(CallEvent),
    /// MRTR: the server's input requests for the call's next round.
    Input(InputRequests, oneshot::Sender<InputResponses>),
    Ended(CallEnd),
}

/// Where the answers to an outstanding question go.
enum Responder {
    /// `elicitation/create`, asked under `key`.
    Elicit {
        key: String,
        reply: oneshot::Sender<ElicitResult>,
    },
    /// MRTR input requests, our keys mapped to the server's.
    Rounds {
        keys: BTreeMap<String, String>,
        reply: oneshot::Sender<InputResponses>,
    },
}

/// One call of this process.
pub(crate) struct LiveCall {
    updates: tokio::sync::Mutex<mpsc::Receiver<Update>>,
    ended: Mutex<Option<(CallEnd, Instant)>>,
    asking: Mutex<Option<Responder>>,
    questions: Mutex<u32>,
    prefix: String,
    cancel: CancellationToken,
    followed: Mutex<Instant>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LiveCall {
    /// Waits up to `wait` for what the call did since the last look. An
    /// ended call answers its end every time it is asked.
    pub(crate) async fn next(&self, wait: Duration) -> Seen {
        *lock(&self.followed) = Instant::now();
        if let Some((end, _)) = lock(&self.ended).clone() {
            return Seen::Ended(end);
        }
        let mut updates = self.updates.lock().await;
        let update = match tokio::time::timeout(wait, updates.recv()).await {
            Err(_) => return Seen::Quiet,
            Ok(None) => Update::Ended(CallEnd::Lost(
                "agentgate's side of the call stopped".to_owned(),
            )),
            Ok(Some(update)) => update,
        };
        match update {
            Update::Event(CallEvent::Progress(status)) => Seen::Progress(status),
            Update::Event(CallEvent::Ask(params, reply)) => {
                let key = self.next_key("elicitation");
                let request = InputRequest::Elicitation(ElicitRequest::new(params));
                *lock(&self.asking) = Some(Responder::Elicit {
                    key: key.clone(),
                    reply,
                });
                Seen::Asked(InputRequests::from([(key, request)]))
            }
            Update::Input(requests, reply) => {
                let mut keys = BTreeMap::new();
                let mut ours = InputRequests::new();
                for (theirs, request) in requests {
                    let key = self.next_key(&theirs);
                    keys.insert(key.clone(), theirs);
                    ours.insert(key, request);
                }
                *lock(&self.asking) = Some(Responder::Rounds { keys, reply });
                Seen::Asked(ours)
            }
            Update::Ended(end) => {
                *lock(&self.ended) = Some((end.clone(), Instant::now()));
                Seen::Ended(end)
            }
        }
    }

    /// Keys unique for the task's life: the attempt's prefix, a counter.
    fn next_key(&self, name: &str) -> String {
        let mut n = lock(&self.questions);
        *n += 1;
        format!("{}q{}-{name}", self.prefix, *n)
    }

    /// Sends the client's answers to the outstanding question. Answers to
    /// nothing outstanding are dropped (the question was already answered,
    /// or belonged to an earlier attempt).
    pub(crate) fn answer(&self, responses: &InputResponses) {
        let Some(asking) = lock(&self.asking).take() else {
            return;
        };
        match asking {
            Responder::Elicit { key, reply } => {
                let result = responses
                    .get(&key)
                    .and_then(|answer| serde_json::from_value::<ElicitResult>(answer.clone()).ok())
                    // An answer the server could not read is a cancel, not a
                    // guess at what the user meant.
                    .unwrap_or_else(|| ElicitResult::new(ElicitationAction::Cancel));
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
    }

    /// Stops the call: rmcp drops the request with `notifications/cancelled`
    /// and the connection is closed.
    pub(crate) fn cancel(&self) {
        self.cancel.cancel();
    }
}

/// This process's calls.
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

    /// The call this process has open (or just ended) for `task`.
    pub(crate) fn get(&self, task: &TaskId) -> Option<Arc<LiveCall>> {
        lock(&self.live).get(task).cloned()
    }

    /// Drops what this process keeps of `task`'s call (an open one is
    /// cancelled).
    pub(crate) fn forget(&self, task: &TaskId) {
        if let Some(call) = lock(&self.live).remove(task) {
            call.cancel();
        }
    }

    /// Starts `tool` with `args` on `upstream` for `task`, holding `permit`
    /// until the call ends. `attempt` makes the keys of its questions its
    /// own.
    pub(crate) fn issue(
        &self,
        task: &TaskId,
        attempt: u32,
        call: Call,
        permit: OwnedSemaphorePermit,
    ) -> Arc<LiveCall> {
        let (updates, receiver) = mpsc::channel(32);
        let live = Arc::new(LiveCall {
            updates: tokio::sync::Mutex::new(receiver),
            ended: Mutex::default(),
            asking: Mutex::default(),
            questions: Mutex::new(0),
            prefix: format!("a{attempt}"),
            cancel: CancellationToken::new(),
            followed: Mutex::new(Instant::now()),
        });
        lock(&self.live).insert(task.clone(), live.clone());
        tokio::spawn(call.run(updates, live.cancel.clone(), permit));
        live
    }

    /// Forgets ended calls kept long enough, and cancels calls no step
    /// followed for long.
    pub(crate) fn sweep(&self) {
        let now = Instant::now();
        lock(&self.live).retain(|_, call| {
            if let Some((_, at)) = &*lock(&call.ended) {
                return now.duration_since(*at) < KEEP_ENDED;
            }
            // A call waiting for its question's answer is bounded by its
            // call timeout, however long the person takes.
            let asking = lock(&call.asking).is_some();
            if !asking && now.duration_since(*lock(&call.followed)) >= UNFOLLOWED {
                call.cancel();
                return false;
            }
            true
        });
    }
}

/// One `tools/call` to make.
pub(crate) struct Call {
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) tool: String,
    pub(crate) args: JsonObject,
}

impl Call {
    async fn run(
        self,
        updates: mpsc::Sender<Update>,
        cancel: CancellationToken,
        permit: OwnedSemaphorePermit,
    ) {
        let timeout = self.upstream.settings.call_timeout;
        let (events, mut from_server) = mpsc::channel(32);
        let connection = tokio::select! {
            () = cancel.cancelled() => Err(None),
            connected = self.upstream.connect(CallClient::reporting(events)) => connected.map_err(Some),
        };
        let connection = match connection {
            Ok(connection) => connection,
            Err(None) => {
                let _ = updates.send(Update::Ended(CallEnd::Cancelled)).await;
                return;
            }
            Err(Some(why)) => {
                let why = why.logged(&self.upstream.settings.name);
                let _ = updates.send(Update::Ended(CallEnd::NotSent(why))).await;
                return;
            }
        };
        let server = self.upstream.settings.name.clone();
        let rounds = updates.clone();
        // The request in flight, so a cancel can name it to the server.
        let in_flight: Mutex<Option<RequestId>> = Mutex::default();
        let peer = connection.peer().clone();
        let calling = async {
            let mut params =
                CallToolRequestParams::new(self.tool.clone()).with_arguments(self.args);
            for _ in 0..MAX_INPUT_ROUNDS {
                match call_once(&peer, params.clone(), &in_flight).await {
                    Ok(CallToolResponse::Complete(result)) => return CallEnd::Answered(result),
                    Ok(CallToolResponse::InputRequired(asked)) => {
                        let requests = asked.input_requests.unwrap_or_default();
                        let (reply, answered) = oneshot::channel();
                        if rounds.send(Update::Input(requests, reply)).await.is_err() {
                            return CallEnd::Cancelled;
                        }
                        let Ok(responses) = answered.await else {
                            return CallEnd::Cancelled;
                        };
                        params.input_responses = Some(responses);
                        params.request_state = asked.request_state;
                    }
                    Ok(CallToolResponse::Task(created)) => {
                        return CallEnd::Task {
                            id: created.task.task_id,
                            poll: created.task.poll_interval_ms.map(Duration::from_millis),
                        };
                    }
                    Ok(_) => {
                        return CallEnd::Refused(ErrorData::internal_error(
                            format!(
                                "MCP server \"{server}\" answered `{}` with a kind of result \
                                 agentgate does not know",
                                self.tool
                            ),
                            None,
                        ));
                    }
                    Err(ServiceError::McpError(error)) => return CallEnd::Refused(error),
                    Err(ServiceError::UnexpectedResponse) => {
                        return CallEnd::Refused(ErrorData::internal_error(
                            format!(
                                "MCP server \"{server}\" answered `{}` with something that is \
                                 not a tool result",
                                self.tool
                            ),
                            None,
                        ));
                    }
                    Err(other) => return CallEnd::Lost(describe_lost(&other)),
                }
            }
            CallEnd::Refused(ErrorData::internal_error(
                format!(
                    "MCP server \"{server}\" asked for input {MAX_INPUT_ROUNDS} times in one call \
                     of `{}` without finishing; agentgate gave up",
                    self.tool
                ),
                None,
            ))
        };
        // Boxed, so it can be dropped (and the request cancelled) before
        // the connection is closed.
        let mut calling = Box::pin(calling);
        let deadline = tokio::time::sleep(timeout);
        let mut deadline = std::pin::pin!(deadline);
        let end = loop {
            tokio::select! {
                end = &mut calling => break end,
                Some(event) = from_server.recv() => {
                    if updates.send(Update::Event(event)).await.is_err() {
                        break CallEnd::Cancelled;
                    }
                }
                () = cancel.cancelled() => break CallEnd::Cancelled,
                () = &mut deadline => break CallEnd::TimedOut(timeout),
            }
        };
        let outcome = match &end {
            CallEnd::Answered(_) | CallEnd::Task { .. } => Some(UpstreamOutcome::Ok),
            CallEnd::Refused(_) => Some(UpstreamOutcome::ClientError),
            CallEnd::Lost(_) | CallEnd::TimedOut(_) => Some(UpstreamOutcome::Transport),
            CallEnd::NotSent(_) | CallEnd::Cancelled => None,
        };
        if let Some(outcome) = outcome {
            self.upstream.metrics.record("tools/call", outcome);
        }
        drop(calling);
        // A request still open is cancelled by name, and the notification
        // is written before the connection closes (a stdio server's process
        // ends with it).
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
        let _ = connection.cancel().await;
        drop(permit);
        let _ = updates.send(Update::Ended(end)).await;
    }
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
        other => {
            let text = other.to_string();
            format!(
                "the connection broke during the call ({})",
                text.lines().next().unwrap_or("transport error")
            )
        }
    }
}
