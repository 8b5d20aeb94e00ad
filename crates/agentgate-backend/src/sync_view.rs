//! Tool-specific answers for clients without the tasks extension.
//!
//! By default such a client waits on its task up to the tool's sync budget
//! (the gateway's inline follower). Some upstream tools had a different
//! contract that existing users rely on, say "poll 9 times, one second apart,
//! then answer *pending*". A tool keeps that contract by registering a
//! [`SyncView`]: it gets an [`InlineTask`] for the task the call created and
//! decides, from the task's status and checkpoint, what to report and when
//! to answer. The task itself runs on regardless, so `task_status` can
//! follow it afterwards.
//!
//! An [`InlineTask`] is a handle over an [`InlineRequest`], which the
//! transport provides (reads and waits through the engine, progress and
//! cancellation from the request), so a job's crate needs nothing of the MCP
//! side.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rmcp::model::{CallToolResult, ErrorData};

use crate::{TaskId, TaskView};

/// A boxed, sendable future, the shape of the object-safe traits here.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a tool answers a client without the tasks extension.
pub trait SyncView: Send + Sync + 'static {
    /// Follows `task` and returns the tool result to send.
    fn follow<'a>(
        &'a self,
        task: InlineTask<'a>,
    ) -> BoxFuture<'a, Result<CallToolResult, ErrorData>>;
}

/// What a transport gives an [`InlineTask`]: the task's reads and waits, and
/// the request's progress and cancellation.
pub trait InlineRequest: Send + Sync {
    /// The task as it is now.
    fn view(&self) -> BoxFuture<'_, Result<TaskView, ErrorData>>;
    /// Sends progress, if the request asked for it.
    fn progress(&self, progress: f64, total: Option<f64>, message: String) -> BoxFuture<'_, ()>;
    /// Waits until the task changes or `limit` passes; an error once the
    /// client cancelled the request.
    fn changed_within(&mut self, limit: Duration) -> BoxFuture<'_, Result<(), ErrorData>>;
    /// Sleeps; an error once the client cancelled the request.
    fn sleep(&self, duration: Duration) -> BoxFuture<'_, Result<(), ErrorData>>;
    /// The default answer for an ended task (see [`InlineTask::ended`]).
    fn ended(&self, task: &TaskView) -> Option<Result<CallToolResult, ErrorData>>;
}

/// The task a [`SyncView`] follows, and the request it answers.
pub struct InlineTask<'a> {
    id: TaskId,
    request: Box<dyn InlineRequest + 'a>,
}

impl std::fmt::Debug for InlineTask<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineTask")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl<'a> InlineTask<'a> {
    /// Task `id`, followed through `request`.
    pub fn new(id: TaskId, request: Box<dyn InlineRequest + 'a>) -> Self {
        Self { id, request }
    }

    /// The task followed.
    pub fn id(&self) -> &TaskId {
        &self.id
    }

    /// The task as it is now.
    pub async fn view(&self) -> Result<TaskView, ErrorData> {
        self.request.view().await
    }

    /// Sends `notifications/progress` if the request asked for progress.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: impl Into<String>) {
        self.request.progress(progress, total, message.into()).await;
    }

    /// Waits until the task changes in this process or `limit` passes. The
    /// task may run on another instance, so callers re-read on either.
    pub async fn changed_within(&mut self, limit: Duration) -> Result<(), ErrorData> {
        self.request.changed_within(limit).await
    }

    /// Sleeps, unless the client cancels the request.
    pub async fn sleep(&self, duration: Duration) -> Result<(), ErrorData> {
        self.request.sleep(duration).await
    }

    /// What the default inline follower answers for an ended task: its
    /// result, its error, or a tool error saying it was cancelled. `None` for
    /// a task still running.
    pub fn ended(&self, task: &TaskView) -> Option<Result<CallToolResult, ErrorData>> {
        self.request.ended(task)
    }
}
