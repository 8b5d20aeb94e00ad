//! Following one task for the length of one request: the one loop behind
//! every answer that waits on a task.
//!
//! ```text
//! tools/call, inline (inline.rs) ──┐
//! tasks/result, 2025-11-25 ────────┼─▶ TaskFollower::next ─▶ Turn
//!   (tasks_2025.rs)                │      read now, or wait for a change
//!                                  │      (Tasks::watch; a re-read every
//!                                  │      RECHECK, since another instance may
//!                                  │      run the task), the deadline or the
//!                                  │      request's cancellation
//! ```
//!
//! The callers differ only in what they do with each [`Turn`]: the inline
//! call sends progress, asks by MRTR or elicitation, and stops at the tool's
//! sync budget; `tasks/result` sends status notifications, elicits each
//! question once, and has no deadline. A tool's own inline answer
//! ([`agentgate_backend::SyncView`], see `inline_task`) paces itself, so it
//! reads and waits through the same [`TaskWatch`] without this loop.

use std::time::Duration;

use agentgate_backend::{TaskId, TaskPhase};
use rmcp::model::ErrorData;
use rmcp::service::{RequestContext, RoleServer};
use tokio::time::Instant;

use super::error::GatewayError;
use crate::engine::TaskWatch;
use crate::task::TaskRecord;

/// Longest wait between store reads while following a task: another
/// instance may be the one running it, and its changes are not announced
/// here.
const RECHECK: Duration = Duration::from_secs(1);

/// What a follower sees of its task at one turn.
#[derive(Debug)]
pub(super) enum Turn {
    /// Completed, failed or cancelled.
    Ended(TaskRecord),
    /// The task waits for input.
    NeedsInput(TaskRecord),
    /// The task works on.
    Working(TaskRecord),
    /// The deadline passed while the task was working.
    OutOfTime(TaskRecord),
}

/// One request following one task.
pub(super) struct TaskFollower<'a> {
    id: TaskId,
    watch: TaskWatch,
    cx: &'a RequestContext<RoleServer>,
    deadline: Option<Instant>,
    /// Whether the next turn waits for a change first (not the first turn,
    /// nor one after [`Self::read_again`]).
    wait: bool,
}

impl<'a> TaskFollower<'a> {
    /// Follows task `id`, read through `watch`, for request `cx`, with no
    /// deadline.
    pub(super) fn new(id: &TaskId, watch: TaskWatch, cx: &'a RequestContext<RoleServer>) -> Self {
        Self {
            id: id.clone(),
            watch,
            cx,
            deadline: None,
            wait: false,
        }
    }

    /// Gives up at `deadline` with [`Turn::OutOfTime`], unless the task has
    /// ended or waits for input by then.
    pub(super) fn until(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Makes the next turn read the task at once: after the caller changed
    /// it (an answer), there is no need to wait for the change to be seen.
    pub(super) fn read_again(&mut self) {
        self.wait = false;
    }

    /// The task's next state: at once on the first turn, else once it
    /// changes (re-read at least every [`RECHECK`]) or the deadline passes.
    /// The request's cancellation is an error naming the task, which goes
    /// on.
    pub(super) async fn next(&mut self) -> Result<Turn, ErrorData> {
        if std::mem::replace(&mut self.wait, true) {
            let deadline = self.deadline;
            tokio::select! {
                _ = self.watch.changed(RECHECK) => {}
                () = sleep_until(deadline) => {
                    return Ok(match self.read().await? {
                        Turn::Working(record) => Turn::OutOfTime(record),
                        other => other,
                    });
                }
                () = self.cx.ct.cancelled() => {
                    return Err(GatewayError::RequestCancelled(self.id.clone()).into());
                }
            }
        }
        self.read().await
    }

    async fn read(&self) -> Result<Turn, ErrorData> {
        let record = self.watch.read(&self.id).await?;
        Ok(match record.status {
            TaskPhase::Completed | TaskPhase::Failed | TaskPhase::Cancelled => Turn::Ended(record),
            TaskPhase::InputRequired => Turn::NeedsInput(record),
            TaskPhase::Working => Turn::Working(record),
        })
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
