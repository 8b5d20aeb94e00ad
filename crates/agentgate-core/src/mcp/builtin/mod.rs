//! The built-in tools, served beside every backend's: how a client without
//! the tasks extension (most desktop hosts today) follows, answers and
//! stops a task that outlived its inline call.
//!
//! ```text
//! Gateway::call_tool ─▶ builtin::call(name, Caller { tasks, owner, … })
//!   task_status ─▶ status::call  ─▶ Tasks::watch / read ─▶ render
//!   task_answer ─▶ control::answer ─▶ Tasks::get, check the answers ─▶ Tasks::answer
//!   task_cancel ─▶ control::cancel ─▶ Tasks::cancel
//! ```
//!
//! The tools get what they need from the gateway in a [`Caller`] and never
//! call back into it. They take the caller's owner exactly as the task
//! methods do, so another principal's task is answered like an unknown one,
//! and they change a task through the same [`Tasks`] calls as the methods.

mod control;
mod status;

use agentgate_backend::Owner;
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorData, InputResponses, Tool};
use tokio_util::sync::CancellationToken;

use super::error::GatewayError;
use crate::engine::Tasks;

/// The built-in tools' names.
pub(super) const NAMES: [&str; 3] = [status::NAME, control::ANSWER, control::CANCEL];

/// The built-in tools, as `tools/list` shows them (their schemas in the
/// portable spelling every listed tool has, [`crate::schema`]). Built and
/// rewritten once per process: they never change.
pub(super) fn tools() -> &'static [Tool] {
    static TOOLS: std::sync::OnceLock<Vec<Tool>> = std::sync::OnceLock::new();
    TOOLS.get_or_init(|| {
        let mut tools = vec![status::tool()];
        tools.extend(control::tools());
        tools
            .into_iter()
            .map(crate::schema::portable_tool)
            .collect()
    })
}

/// What a built-in tool's call gets from the gateway.
pub(super) struct Caller<'a> {
    /// The task service.
    pub tasks: &'a Tasks,
    /// Whose tasks the call may see and change.
    pub owner: Owner,
    /// The largest `inputResponses` accepted, in bytes of JSON (`None`: no
    /// limit), as `tasks/update` has it.
    pub max_input_bytes: Option<usize>,
    /// Fires when the client cancels the request (a long poll ends early).
    pub cancelled: CancellationToken,
}

impl Caller<'_> {
    fn check_input_size(&self, responses: &InputResponses) -> Result<(), ErrorData> {
        match self.max_input_bytes {
            Some(max) => super::limits::check_input_size(responses, max),
            None => Ok(()),
        }
    }
}

/// Calls the built-in tool `request` names (one of [`NAMES`]).
pub(super) async fn call(
    caller: Caller<'_>,
    request: CallToolRequestParams,
) -> Result<CallToolResult, ErrorData> {
    match &*request.name {
        status::NAME => status::call(&caller, request).await,
        control::ANSWER => control::answer(&caller, request).await,
        control::CANCEL => control::cancel(&caller, request).await,
        other => Err(GatewayError::UnknownTool(other.to_owned()).into()),
    }
}
