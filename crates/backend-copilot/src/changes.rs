//! `request_copilot_changes`: an `@copilot` comment on a pull request, then
//! the work cycle it starts, followed to its end.
//!
//! ```text
//! start    GET the PR (it must exist) → checkpoint Comment
//! Comment  our marker already among the PR's recent comments? (the post
//!          landed before a crash) keep it : POST the comment → Cycle, watch the PR
//! Cycle    on any change of the PR (or every minute): REST timeline →
//!          copilot_work_started after the comment, then _finished / _failure
//! ```
//!
//! The comment ends with an invisible marker, `<!-- agentgate:task TASK_ID -->`,
//! so a repeated step finds its own comment instead of posting twice.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{Event, Job, JobContext, Step, StepResult};
use rmcp::model::CallToolResult;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::args::{ChangesArgs, Valid};
use crate::github::model::{Comment, RestPull};
use crate::report::{self, CycleEnd, PullRequest};
use crate::watcher::{Observation, Target};
use crate::{Shared, refresh_after};

/// How often the timeline is read when the PR shows no change.
const CONFIRM_EVERY_MS: i64 = 60 * 1000;

#[derive(Debug, Clone)]
pub struct RequestChanges {
    shared: Arc<Shared>,
}

impl RequestChanges {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangesState {
    pub owner: String,
    pub repo: String,
    pub pull_request: PullRequest,
    pub instructions: String,
    /// When the step that posts began, as GitHub time minus skew.
    pub asked_at: String,
    #[serde(default)]
    pub comment: Option<PostedComment>,
    #[serde(default)]
    pub started: bool,
    #[serde(default)]
    pub watch_started: Option<i64>,
    #[serde(default)]
    pub seen: Option<String>,
    #[serde(default)]
    pub last_confirm: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PostedComment {
    pub id: i64,
    pub url: String,
    pub created_at: String,
}

fn marker(cx: &JobContext) -> String {
    format!("<!-- agentgate:task {} -->", cx.task_id)
}

impl Job for RequestChanges {
    type Args = Valid<ChangesArgs>;
    type State = ChangesState;

    async fn start(&self, args: Valid<ChangesArgs>, cx: &JobContext) -> StepResult<ChangesState> {
        let args = args.0;
        let pull: RestPull = match self
            .shared
            .github
            .rest_get(
                &format!(
                    "repos/{}/{}/pulls/{}",
                    args.owner, args.repo, args.pull_number
                ),
                &[],
                None,
            )
            .await
        {
            Ok(pull) => pull,
            Err(e) if e.is_transient() => {
                return Err(e.into_job_error("failed to get pull request"));
            }
            Err(e) => {
                return Ok(Step::Done(report::result(
                    true,
                    format!(
                        "failed to get pull request {}/{}#{}: {e}",
                        args.owner, args.repo, args.pull_number
                    ),
                    json!({"owner": args.owner, "repo": args.repo, "pull_number": args.pull_number}),
                )));
            }
        };
        let pull_request = PullRequest::from_rest(&pull);
        if pull.state != "open" {
            return Ok(Step::Done(report::result(
                true,
                format!(
                    "Pull request {} is {}: Copilot only works on open pull requests.",
                    pull_request.describe(),
                    pull.state
                ),
                json!({"owner": args.owner, "repo": args.repo, "pull_request": pull_request}),
            )));
        }
        Ok(Step::Wait {
            status: Some(format!(
                "Asking Copilot for changes on {}/{}#{}",
                args.owner, args.repo, args.pull_number
            )),
            state: ChangesState {
                owner: args.owner,
                repo: args.repo,
                pull_request,
                instructions: args.instructions,
                asked_at: report::since(cx.now, 60),
                comment: None,
                started: false,
                watch_started: None,
                seen: None,
                last_confirm: None,
            },
            after: Duration::ZERO,
        })
    }

    async fn resume(
        &self,
        mut state: ChangesState,
        _event: Event,
        cx: &JobContext,
    ) -> StepResult<ChangesState> {
        if state.comment.is_none() {
            state.comment = Some(self.post(&state, cx).await?);
            state.watch_started = Some(cx.now);
            // Save the posted comment before anything else can fail.
            return Ok(Step::Wait {
                status: Some(format!(
                    "Asked Copilot for changes on pull request #{}; waiting for it to start",
                    state.pull_request.number
                )),
                state,
                after: Duration::ZERO,
            });
        }
        self.follow(state, cx).await
    }

    async fn cancel(&self, _state: ChangesState, cx: &JobContext) -> StepResult<ChangesState> {
        self.shared.watcher.forget(&cx.task_id);
        Ok(Step::Cancelled)
    }
}

impl RequestChanges {
    /// Posts the comment once: a repeated step finds the marker instead.
    async fn post(
        &self,
        state: &ChangesState,
        cx: &JobContext,
    ) -> Result<PostedComment, agentgate_backend::JobError> {
        let github = &self.shared.github;
        let path = format!(
            "repos/{}/{}/issues/{}/comments",
            state.owner, state.repo, state.pull_request.number
        );
        let marker = marker(cx);
        let recent: Vec<Comment> = github
            .rest_get(
                &path,
                &[
                    ("since", state.asked_at.clone()),
                    ("per_page", "100".into()),
                ],
                None,
            )
            .await
            .map_err(|e| e.into_job_error("reading the pull request's comments"))?;
        let comment = match recent.into_iter().find(|c| c.body.contains(&marker)) {
            Some(existing) => existing,
            None => {
                let body = format!("@copilot {}\n\n{marker}", state.instructions.trim());
                github
                    .rest_post(&path, &json!({ "body": body }), None)
                    .await
                    .map_err(|e| e.into_job_error("posting the @copilot comment"))?
            }
        };
        Ok(PostedComment {
            id: comment.id,
            url: comment.html_url,
            created_at: comment.created_at,
        })
    }

    async fn follow(&self, mut state: ChangesState, cx: &JobContext) -> StepResult<ChangesState> {
        let Some(comment) = state.comment.clone() else {
            return Err(agentgate_backend::JobError::Retryable {
                message: "the comment is not posted yet".into(),
                retry_after: None,
            });
        };
        let started_at = state.watch_started.unwrap_or(cx.now);
        let max = self.shared.config.max_watch();
        if cx.now.saturating_sub(started_at) > max.as_millis() as i64 {
            self.shared.watcher.forget(&cx.task_id);
            return Ok(Step::Done(finish(
                &state,
                "watch_timeout",
                true,
                format!(
                    "Stopped watching after {} minutes: Copilot may still be working on {}.",
                    max.as_secs() / 60,
                    state.pull_request.url
                ),
                None,
            )));
        }
        let mut changed = false;
        if let Some(observed) = self.shared.watcher.take(&cx.task_id) {
            state.seen = Some(observed.fingerprint);
            match observed.observation {
                Observation::Pull(pull) => {
                    state.pull_request = PullRequest::from_watched(&pull);
                    if pull.merged || pull.state == "CLOSED" {
                        self.shared.watcher.forget(&cx.task_id);
                        let (outcome, error, how) = if pull.merged {
                            ("merged", false, "was merged")
                        } else {
                            ("closed_unmerged", true, "was closed without being merged")
                        };
                        let text = format!("Pull request {} {how}.", state.pull_request.describe());
                        return Ok(Step::Done(finish(&state, outcome, error, text, None)));
                    }
                    changed = true;
                }
                Observation::Gone { message } => {
                    self.shared.watcher.forget(&cx.task_id);
                    let text = format!(
                        "Stopped watching: GitHub no longer shows the pull request ({message})"
                    );
                    return Ok(Step::Done(finish(&state, "gone", true, text, None)));
                }
                _ => {}
            }
        }
        let due = state
            .last_confirm
            .is_none_or(|at| cx.now.saturating_sub(at) >= CONFIRM_EVERY_MS);
        if changed || due {
            let events = report::copilot_events(
                &self.shared.github,
                &state.owner,
                &state.repo,
                state.pull_request.number,
            )
            .await
            .map_err(|e| e.into_job_error("reading the pull request's timeline"))?;
            state.last_confirm = Some(cx.now);
            state.started = state.started || report::cycle_started(&events, &comment.created_at);
            let detail = json!({"copilotEvents": events});
            match report::cycle_end(&events, &comment.created_at) {
                Some(CycleEnd::Finished { .. }) => {
                    self.shared.watcher.forget(&cx.task_id);
                    let text = format!(
                        "Copilot finished the requested changes on pull request {}.",
                        state.pull_request.describe()
                    );
                    return Ok(Step::Done(finish(
                        &state,
                        "finished",
                        false,
                        text,
                        Some(detail),
                    )));
                }
                Some(CycleEnd::Failed { .. }) => {
                    self.shared.watcher.forget(&cx.task_id);
                    let text = format!(
                        "Copilot stopped with a failure while changing pull request {}.",
                        state.pull_request.describe()
                    );
                    return Ok(Step::Done(finish(
                        &state,
                        "finished_with_failure",
                        true,
                        text,
                        Some(detail),
                    )));
                }
                None => {}
            }
        }
        let status = if state.started {
            format!(
                "Copilot is working on the changes to pull request {}",
                state.pull_request.describe()
            )
        } else {
            format!(
                "Asked Copilot for changes on pull request #{}; waiting for it to start",
                state.pull_request.number
            )
        };
        let age = Duration::from_millis(cx.now.saturating_sub(started_at).max(0) as u64);
        self.shared.watcher.watch(
            &cx.task_id,
            Target::Pull {
                owner: state.owner.clone(),
                repo: state.repo.clone(),
                number: state.pull_request.number,
                since: comment.created_at.clone(),
            },
            state.seen.clone(),
            age,
        );
        Ok(Step::Wait {
            state,
            status: Some(status),
            after: refresh_after(age),
        })
    }
}

fn finish(
    state: &ChangesState,
    outcome: &str,
    is_error: bool,
    text: String,
    detail: Option<Value>,
) -> CallToolResult {
    let mut structured = json!({
        "outcome": outcome,
        "message": text,
        "owner": state.owner,
        "repo": state.repo,
        "pull_request": state.pull_request,
        "comment": state.comment,
    });
    if let (Some(detail), Some(map)) = (detail, structured.as_object_mut()) {
        map.insert("detail".into(), detail);
    }
    report::result(
        is_error,
        format!("{text}\n{}", state.pull_request.url),
        structured,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_names_the_task() {
        let cx = JobContext {
            task_id: agentgate_backend::TaskId::generate(),
            step: 1,
            now: 0,
        };
        let m = marker(&cx);
        assert!(m.starts_with("<!--") && m.ends_with("-->"));
        assert!(m.contains(cx.task_id.as_str()));
    }
}
