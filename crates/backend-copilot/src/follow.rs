//! The one loop every followed Copilot task runs, a step at a time.
//!
//! The three tools follow different things (an issue, then its pull request;
//! a pull request's work cycle; an agent task) but in the same way, so that
//! way is written once here and each tool's state says only what its things
//! mean ([`Followed`]):
//!
//! ```text
//! step ─▶ the watcher's observation, if any ── Gone, or it ends the work? ──▶ Done
//!      ─▶ confirm (asked for by the observation, or due) ── work ended? ─────▶ Done
//!      ─▶ watched longer than `max_watch_minutes`? ──────────────────────────▶ Done (timeout)
//!      ─▶ register the target with the watcher, Wait(refresh_after(age))
//! ```
//!
//! Every `Done` forgets the watch. What a task knows between steps is in its
//! checkpoint ([`Progress`]), so a restarted or different instance goes on
//! from there and is nudged only for changes the task has not seen.

use std::future::Future;
use std::time::Duration;

use agentgate_backend::{JobContext, JobError, Millis, Step, StepResult};
use rmcp::model::CallToolResult;
use serde::{Deserialize, Serialize};

use crate::watcher::{Observation, Target};
use crate::{Shared, refresh_after};

/// How far a followed task is in its watch; flattened into its checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Progress {
    /// When the watch began (Unix ms).
    #[serde(default)]
    pub watch_started: Option<Millis>,
    /// The fingerprint of the last observation the task applied.
    #[serde(default)]
    pub seen: Option<String>,
    /// When the task last confirmed directly (Unix ms). Checkpoints written
    /// before the loop was shared call it `last_read` for agent tasks.
    #[serde(default, alias = "last_read")]
    pub last_confirm: Option<Millis>,
}

/// What an observation meant to the task.
#[derive(Debug)]
pub(crate) enum Seen {
    /// The work ended; this is the call's result.
    Finished(CallToolResult),
    /// Something changed that the watch cannot judge: confirm now.
    ConfirmNow,
    /// Applied; nothing more to do this step.
    Noted,
}

/// A task state the shared loop can follow.
pub(crate) trait Followed: Sized + Send {
    /// How often the task confirms directly while the watch shows nothing.
    const CONFIRM_EVERY: Duration;

    fn progress(&mut self) -> &mut Progress;

    /// Applies an observation of the target (never `Gone`: see [`Self::gone`]).
    fn observe(&mut self, observation: Observation) -> Seen;

    /// Whether the task confirms at all in its present phase.
    fn confirms(&self) -> bool {
        true
    }

    /// Reads what the watch does not show (a pull request's timeline, the
    /// agent task itself); `Some` when the work has ended.
    fn confirm(
        &mut self,
        shared: &Shared,
        now: Millis,
    ) -> impl Future<Output = Result<Option<CallToolResult>, JobError>> + Send;

    /// The result when GitHub no longer shows the target.
    fn gone(&self, message: &str) -> CallToolResult;

    /// The result when the watch ran longer than `max`.
    fn timed_out(&self, max: Duration) -> CallToolResult;

    /// What the watcher polls for the task now.
    fn target(&self) -> Target;

    /// The task's status message while it waits.
    fn status(&self) -> String;
}

/// One turn of the loop (see the module docs).
pub(crate) async fn follow<F: Followed>(
    shared: &Shared,
    mut task: F,
    cx: &JobContext,
) -> StepResult<F> {
    let mut confirm_now = false;
    if let Some(observed) = shared.watcher.take(&cx.task_id) {
        task.progress().seen = Some(observed.fingerprint);
        let seen = match observed.observation {
            Observation::Gone { message } => Seen::Finished(task.gone(&message)),
            observation => task.observe(observation),
        };
        match seen {
            Seen::Finished(result) => return Ok(done(shared, cx, result)),
            Seen::ConfirmNow => confirm_now = true,
            Seen::Noted => {}
        }
    }
    if task.confirms() {
        let due = task
            .progress()
            .last_confirm
            .is_none_or(|at| cx.now.since(at) >= F::CONFIRM_EVERY);
        if confirm_now || due {
            let ended = task.confirm(shared, cx.now).await?;
            task.progress().last_confirm = Some(cx.now);
            if let Some(result) = ended {
                return Ok(done(shared, cx, result));
            }
        }
    }
    let max = shared.config.max_watch();
    let started = *task.progress().watch_started.get_or_insert(cx.now);
    if cx.now.since(started) > max {
        return Ok(done(shared, cx, task.timed_out(max)));
    }
    let status = task.status();
    Ok(keep_watching(shared, task, status, cx))
}

/// Registers the task's target with the watcher and sleeps until it changes
/// (or `refresh_after`, which bounds how soon another instance takes over).
pub(crate) fn keep_watching<F: Followed>(
    shared: &Shared,
    mut task: F,
    status: String,
    cx: &JobContext,
) -> Step<F> {
    let started = *task.progress().watch_started.get_or_insert(cx.now);
    let age = cx.now.since(started);
    let seen = task.progress().seen.clone();
    shared.watcher.watch(&cx.task_id, task.target(), seen, age);
    Step::Wait {
        state: task,
        status: Some(status),
        after: refresh_after(age),
    }
}

fn done<F>(shared: &Shared, cx: &JobContext, result: CallToolResult) -> Step<F> {
    shared.watcher.forget(&cx.task_id);
    Step::Done(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_checkpoints_written_before_the_loop_was_shared() {
        let old = serde_json::json!({"watch_started": 5, "seen": "ab", "last_read": 7});
        let progress: Progress = serde_json::from_value(old).expect("old agent-task checkpoint");
        assert_eq!(
            progress,
            Progress {
                watch_started: Some(Millis::from_unix_ms(5)),
                seen: Some("ab".into()),
                last_confirm: Some(Millis::from_unix_ms(7)),
            }
        );
    }
}
