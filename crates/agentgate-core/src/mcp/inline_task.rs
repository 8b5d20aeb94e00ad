//! The gateway's side of an [`InlineTask`]: what a tool's [`SyncView`]
//! follows when a client without the tasks extension calls it. Reads and
//! waits go through the engine's [`TaskWatch`]; progress and cancellation
//! are the request's.
//!
//! [`SyncView`]: agentgate_backend::SyncView

use std::time::Duration;

use agentgate_backend::engine::InlineRequest;
use agentgate_backend::{BoxFuture, InlineTask, TaskId, TaskPhase, TaskView};
use rmcp::model::{CallToolResult, ContentBlock, ErrorData, ProgressNotificationParam};
use rmcp::service::{RequestContext, RoleServer};

use super::error::GatewayError;
use super::render;
use crate::engine::TaskWatch;

/// One inline request following one task.
struct GatewayInline<'a> {
    id: TaskId,
    watch: TaskWatch,
    cx: &'a RequestContext<RoleServer>,
}

/// The [`InlineTask`] for task `id`, answered to request `cx`.
pub(super) fn inline_task<'a>(
    id: &TaskId,
    watch: TaskWatch,
    cx: &'a RequestContext<RoleServer>,
) -> InlineTask<'a> {
    InlineTask::new(
        id.clone(),
        Box::new(GatewayInline {
            id: id.clone(),
            watch,
            cx,
        }),
    )
}

impl GatewayInline<'_> {
    fn request_cancelled(&self) -> ErrorData {
        GatewayError::RequestCancelled(self.id.clone()).into()
    }
}

impl InlineRequest for GatewayInline<'_> {
    fn view(&self) -> BoxFuture<'_, Result<TaskView, ErrorData>> {
        Box::pin(async move { Ok(TaskView::from(&self.watch.read(&self.id).await?)) })
    }

    fn progress(&self, progress: f64, total: Option<f64>, message: String) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(token) = self.cx.meta.get_progress_token() else {
                return;
            };
            let mut note = ProgressNotificationParam::new(token, progress);
            note.total = total;
            note.message = Some(message);
            // A client that went away cannot take progress; the task goes on.
            let _ = self.cx.peer.notify_progress(note).await;
        })
    }

    fn changed_within(&mut self, limit: Duration) -> BoxFuture<'_, Result<(), ErrorData>> {
        Box::pin(async move {
            tokio::select! {
                _ = self.watch.changed(limit) => Ok(()),
                () = self.cx.ct.cancelled() => Err(self.request_cancelled()),
            }
        })
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'_, Result<(), ErrorData>> {
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(duration) => Ok(()),
                () = self.cx.ct.cancelled() => Err(self.request_cancelled()),
            }
        })
    }

    fn ended(&self, task: &TaskView) -> Option<Result<CallToolResult, ErrorData>> {
        match task.status {
            TaskPhase::Completed => Some(render::tool_result(&task.id, task.result.as_ref())),
            TaskPhase::Failed => Some(Err(render::task_error(task.error.as_ref()))),
            TaskPhase::Cancelled => Some(Ok(CallToolResult::error(vec![ContentBlock::text(
                render::cancelled_text(&task.id),
            )]))),
            TaskPhase::Working | TaskPhase::InputRequired => None,
        }
    }
}
