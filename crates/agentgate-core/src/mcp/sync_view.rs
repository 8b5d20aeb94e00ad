//! Tool-specific answers for clients without the tasks extension.
//!
//! By default such a client waits on its task up to the tool's sync budget
//! (see `inline`). Some upstream tools had a different contract that existing
//! users rely on, say "poll 9 times, one second apart, then answer
//! *pending*". A tool keeps that contract by registering a [`SyncView`]: it
//! gets an [`InlineTask`] for the task the call created and decides, from the
//! task's status and checkpoint, what to report and when to answer. The task
//! itself runs on regardless, so `task_status` can follow it afterwards.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, ErrorData, ProgressNotificationParam};
use rmcp::service::{RequestContext, RoleServer};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::gateway::Gateway;
use super::wire;
use crate::task::{Owner, TaskId, TaskRecord, TaskStatus};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a tool answers a client without the tasks extension.
pub trait SyncView: Send + Sync + 'static {
    /// Follows `task` and returns the tool result to send.
    fn follow<'a>(
        &'a self,
        task: InlineTask<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, ErrorData>>;
}

/// The task a [`SyncView`] follows, and the request it answers.
pub struct InlineTask<'a> {
    gateway: &'a Gateway,
    id: &'a TaskId,
    owner: &'a Owner,
    cx: &'a RequestContext<RoleServer>,
    changes: broadcast::Receiver<TaskId>,
}

impl std::fmt::Debug for InlineTask<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineTask")
            .field("id", self.id)
            .finish_non_exhaustive()
    }
}

impl<'a> InlineTask<'a> {
    pub(super) fn new(
        gateway: &'a Gateway,
        id: &'a TaskId,
        owner: &'a Owner,
        cx: &'a RequestContext<RoleServer>,
    ) -> Self {
        Self {
            gateway,
            id,
            owner,
            cx,
            changes: gateway.engine().subscribe(),
        }
    }

    pub fn id(&self) -> &TaskId {
        self.id
    }

    /// The task as it is now.
    pub async fn record(&self) -> Result<TaskRecord, ErrorData> {
        self.gateway.get_visible(self.owner, self.id).await
    }

    /// Sends `notifications/progress` if the request asked for progress.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: impl Into<String>) {
        let Some(token) = self.cx.meta.get_progress_token() else {
            return;
        };
        let mut note = ProgressNotificationParam::new(token, progress);
        note.total = total;
        note.message = Some(message.into());
        // A client that went away cannot take progress; the task goes on.
        let _ = self.cx.peer.notify_progress(note).await;
    }

    /// Waits until the task changes in this process or `limit` passes. The
    /// task may run on another instance, so callers re-read on either.
    pub async fn changed_within(&mut self, limit: Duration) -> Result<(), ErrorData> {
        let id = self.id.clone();
        let changes = &mut self.changes;
        let changed = async move {
            loop {
                match changes.recv().await {
                    Ok(changed) if changed == id => return,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => return,
                    Err(RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        tokio::select! {
            () = changed => Ok(()),
            () = tokio::time::sleep(limit) => Ok(()),
            () = self.cx.ct.cancelled() => Err(self.request_cancelled()),
        }
    }

    /// Sleeps, unless the client cancels the request.
    pub async fn sleep(&self, duration: Duration) -> Result<(), ErrorData> {
        tokio::select! {
            () = tokio::time::sleep(duration) => Ok(()),
            () = self.cx.ct.cancelled() => Err(self.request_cancelled()),
        }
    }

    /// What the default inline follower answers for an ended task: its
    /// result, its error, or a tool error saying it was cancelled. `None` for
    /// a task still running.
    pub fn ended(&self, record: &TaskRecord) -> Option<Result<CallToolResult, ErrorData>> {
        match record.status {
            TaskStatus::Completed => Some(wire::tool_result(record)),
            TaskStatus::Failed => Some(Err(wire::task_error(record))),
            TaskStatus::Cancelled => Some(Ok(CallToolResult::error(vec![ContentBlock::text(
                format!("Error: task {} was cancelled before it finished", record.id),
            )]))),
            TaskStatus::Working | TaskStatus::InputRequired => None,
        }
    }

    fn request_cancelled(&self) -> ErrorData {
        ErrorData::internal_error(
            format!("request cancelled; task {} keeps running", self.id),
            None,
        )
    }
}
