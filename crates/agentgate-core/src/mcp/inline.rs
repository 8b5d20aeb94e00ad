//! Following a task inline, for clients without the tasks extension.
//!
//! The call creates the same durable task a task-capable client would get,
//! then waits on it up to the tool's sync budget, sending
//! `notifications/progress` when the request carries a `progressToken`. If
//! the job asks for input:
//! - a 2026-07-28 client gets an MRTR `InputRequiredResult` whose sealed
//!   `requestState` is bound to the owner, the tool, the task and an expiry;
//! - a legacy client that declared elicitation gets `elicitation/create`;
//! - anyone else gets a tool error naming the input that is needed.
//!
//! When the budget runs out the result says the work continues and carries
//! the task id, which the `task_status` tool follows.

use std::time::Duration;

use agentgate_backend::{Owner, TaskId, ToolSpec};
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ElicitRequestParams,
    ErrorData, InputRequest, InputRequests, InputRequiredResult, InputResponses,
    ProgressNotificationParam, SealOptions,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::error::GatewayError;
use super::follower::{TaskFollower, Turn};
use super::gateway::{Gateway, at_least_2026_07_28};
use super::render;
use crate::task::TaskRecord;

/// How long a sealed MRTR `requestState` stays valid.
const REQUEST_STATE_TTL: Duration = Duration::from_secs(15 * 60);

/// What a sealed `requestState` carries. It is authenticated, not
/// encrypted: nothing secret goes in.
#[derive(Debug, Serialize, Deserialize)]
struct SealedState {
    task: TaskId,
    tool: String,
}

fn associated_data(owner: &Owner, tool: &str) -> Vec<u8> {
    format!("agentgate/mrtr\0{owner}\0{tool}").into_bytes()
}

impl Gateway {
    pub(super) fn open_request_state(
        &self,
        sealed: &str,
        owner: &Owner,
        tool: &str,
    ) -> Result<TaskId, ErrorData> {
        let state: SealedState = self
            .sealer
            .open_json_with(sealed, &associated_data(owner, tool))
            .map_err(|e| GatewayError::InvalidRequestState(e.to_string()))?;
        if state.tool != tool {
            return Err(
                GatewayError::InvalidRequestState("it belongs to another tool".to_owned()).into(),
            );
        }
        Ok(state.task)
    }

    fn seal_request_state(&self, owner: &Owner, record: &TaskRecord) -> Result<String, ErrorData> {
        let ad = associated_data(owner, &record.tool);
        self.sealer
            .seal_json_with(
                &SealedState {
                    task: record.id.clone(),
                    tool: record.tool.clone(),
                },
                &SealOptions::new()
                    .associated_data(&ad)
                    .ttl(REQUEST_STATE_TTL),
            )
            .map_err(|e| GatewayError::Internal(format!("sealing requestState: {e}")).into())
    }

    /// Waits on the task until it ends, needs input or the budget runs out.
    pub(super) async fn follow_inline(
        &self,
        id: &TaskId,
        owner: &Owner,
        spec: &ToolSpec,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(view) = spec.sync_view() {
            let watch = self.tasks.watch(owner, vec![id.clone()]);
            let task = super::inline_task::inline_task(id, watch, cx);
            return view.follow(task).await.map(Into::into);
        }
        let watch = self.tasks.watch(owner, vec![id.clone()]);
        let mut follower =
            TaskFollower::new(id, watch, cx).until(Instant::now() + spec.policy.sync_budget);
        let progress_token = cx.meta.get_progress_token();
        let mut progress = 0u32;
        let mut last_message: Option<String> = None;
        loop {
            match follower.next().await? {
                Turn::Ended(record) => return render::ended_call(&record).map(Into::into),
                Turn::NeedsInput(record) => {
                    if let Some(answer) = self.ask_inline(&record, owner, cx).await? {
                        return Ok(answer);
                    }
                    follower.read_again();
                }
                Turn::Working(record) => {
                    if let Some(token) = &progress_token
                        && record.status_message != last_message
                    {
                        progress += 1;
                        let mut note =
                            ProgressNotificationParam::new(token.clone(), f64::from(progress));
                        note.message = record.status_message.clone();
                        // A client that went away cannot take progress; the task goes on.
                        let _ = cx.peer.notify_progress(note).await;
                        last_message = record.status_message;
                    }
                }
                Turn::OutOfTime(record) => return Ok(still_running(&record, spec)),
            }
        }
    }

    /// Gets input for a task from a client without the tasks extension.
    /// `Some` is the answer to send now; `None` means the input was recorded
    /// and the task should be followed further.
    async fn ask_inline(
        &self,
        record: &TaskRecord,
        owner: &Owner,
        cx: &RequestContext<RoleServer>,
    ) -> Result<Option<CallToolResponse>, ErrorData> {
        let requests = render::input_requests(record)?;
        let caps = cx.client_capabilities().unwrap_or_default();
        let missing = missing_capabilities(&requests, &caps);
        if at_least_2026_07_28(cx) {
            if missing.is_empty() {
                let state = self.seal_request_state(owner, record)?;
                return Ok(Some(
                    InputRequiredResult::new(Some(requests), Some(state)).into(),
                ));
            }
        } else if missing.is_empty() && all_askable_legacy(&requests) {
            let responses = self.ask_legacy(&requests, cx).await?;
            // The same limit as answers by tasks/update (a completion may
            // hold images).
            self.check_input_size(&responses)?;
            self.tasks.answer(owner, &record.id, responses).await?;
            return Ok(None);
        }
        Ok(Some(needs_input_error(record, &requests).into()))
    }

    /// Asks a client before 2026-07-28 each request as a request of its
    /// own: `elicitation/create`, or `sampling/createMessage` (an upstream
    /// server's sampling the operator lets the caller's model answer).
    async fn ask_legacy(
        &self,
        requests: &InputRequests,
        cx: &RequestContext<RoleServer>,
    ) -> Result<InputResponses, ErrorData> {
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let value = match request {
                InputRequest::Elicitation(elicit) => cx
                    .peer
                    .create_elicitation(elicit.params.clone())
                    .await
                    .map(serde_json::to_value),
                #[allow(deprecated)]
                InputRequest::CreateMessage(sample) => cx
                    .peer
                    .create_message(sample.params.clone())
                    .await
                    .map(serde_json::to_value),
                _ => continue,
            };
            let value = value
                .map_err(|e| GatewayError::Internal(format!("input request `{key}` failed: {e}")))?
                .map_err(|e| GatewayError::Internal(format!("input request `{key}`: {e}")))?;
            responses.insert(key.clone(), value);
        }
        Ok(responses)
    }
}

/// Capabilities the client must have declared to answer these requests.
fn missing_capabilities(requests: &InputRequests, caps: &ClientCapabilities) -> Vec<&'static str> {
    let mut missing = Vec::new();
    for request in requests.values() {
        let (ok, name) = match request {
            InputRequest::Elicitation(_) => (caps.elicitation.is_some(), "elicitation"),
            InputRequest::CreateMessage(_) => (caps.sampling.is_some(), "sampling"),
            InputRequest::ListRoots(_) => (caps.roots.is_some(), "roots"),
            _ => (false, "an input kind this server does not know"),
        };
        if !ok && !missing.contains(&name) {
            missing.push(name);
        }
    }
    missing
}

/// Whether a client before 2026-07-28 can be asked every request as a
/// request of its own (roots are never asked: agentgate gives its own).
fn all_askable_legacy(requests: &InputRequests) -> bool {
    requests.values().all(|r| {
        matches!(
            r,
            InputRequest::Elicitation(_) | InputRequest::CreateMessage(_)
        )
    })
}

/// What a client that cannot answer is told: which input is needed and how
/// the task can still be finished. `structuredContent` carries the pending
/// requests as `tasks/get` would show them, so nothing the job asked is lost.
fn needs_input_error(record: &TaskRecord, requests: &InputRequests) -> CallToolResult {
    let wanted: Vec<String> = requests
        .iter()
        .map(|(key, request)| match request {
            InputRequest::Elicitation(e) => match &e.params {
                ElicitRequestParams::FormElicitationParams { message, .. } => {
                    format!("`{key}`: {message}")
                }
                ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                    format!("`{key}`: {message} (open {url})")
                }
                _ => format!("`{key}`: an elicitation"),
            },
            InputRequest::CreateMessage(_) => format!("`{key}`: an LLM sampling response"),
            InputRequest::ListRoots(_) => format!("`{key}`: the client's roots"),
            _ => format!("`{key}`: an input of a kind this server does not know"),
        })
        .collect();
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "Error: this tool needs input this client did not declare it can give: {}. The work \
         waits as task {id}. Ask the user, then call the `task_answer` tool with \
         {{\"task_id\": \"{id}\", \"responses\": {{<key>: {{\"action\": \"accept\", \
         \"content\": {{…}}}}}}}} (`task_status` shows each request's fields), or \
         `task_cancel` to stop it.",
        wanted.join("; "),
        id = record.id
    ))]);
    result.structured_content = Some(serde_json::json!({
        "taskId": record.id.as_str(),
        "status": "input_required",
        "statusMessage": record.status_message,
        "inputRequests": requests,
    }));
    result
}

fn still_running(record: &TaskRecord, spec: &ToolSpec) -> CallToolResponse {
    let status = record
        .status_message
        .as_deref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    let mut result = CallToolResult::success(vec![ContentBlock::text(format!(
        "The work is still running after {}s and continues as task {id}{status}. Call the \
         `task_status` tool with {{\"task_id\": \"{id}\", \"wait_seconds\": 30}} to follow \
         it; if it asks a question, answer with `task_answer`; to stop it, `task_cancel`.",
        spec.policy.sync_budget.as_secs(),
        id = record.id
    ))]);
    let mut meta = rmcp::model::MetaObject::new();
    meta.0.insert(
        "io.agentgate/taskId".to_owned(),
        serde_json::Value::String(record.id.to_string()),
    );
    result.meta = Some(meta);
    result.into()
}
