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

use agentgate_backend::{Event, Job, JobContext, JobError, Millis, Step, StepResult};
use rmcp::model::{CallToolResult, ErrorData};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Shared;
use crate::args::{ChangesArgs, Valid};
use crate::follow::{Followed, Progress, Seen, follow};
use crate::github::model::{Comment, RestPull};
use crate::report::{self, CycleEnd, PullRequest};
use crate::watcher::{Observation, Target};

/// How often the timeline is read when the PR shows no change.
const CONFIRM_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub(crate) struct RequestChanges {
    shared: Arc<Shared>,
}

impl RequestChanges {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ChangesState {
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
    /// The watch: when it began, what it saw, when it last confirmed.
    #[serde(flatten)]
    pub progress: Progress,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PostedComment {
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
        let github = match self.shared.github_for(cx, &args.owner, &args.repo) {
            Ok(github) => github,
            Err(refused) => {
                return Ok(Step::Done(report::result(
                    true,
                    refused,
                    json!({"owner": args.owner, "repo": args.repo, "pull_number": args.pull_number}),
                )));
            }
        };
        let pull: RestPull = match github
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
                asked_at: report::since(cx.now, Duration::from_secs(60)),
                comment: None,
                started: false,
                progress: Progress::default(),
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
            state.progress.watch_started = Some(cx.now);
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
        follow(&self.shared, state, cx).await
    }

    /// Stops following; Copilot's work on the request goes on, since
    /// agentgate cannot stop it, and the status says so.
    async fn cancel(&self, state: ChangesState, cx: &JobContext) -> StepResult<ChangesState> {
        self.shared.watcher.forget(&cx.task_id);
        let pull = &state.pull_request.url;
        Ok(Step::cancelled_saying(if state.comment.is_some() {
            format!(
                "cancelled; the request was posted, and Copilot may go on working on it on \
                 GitHub (agentgate cannot stop it): {pull}"
            )
        } else {
            format!(
                "cancelled; if the request reached GitHub, Copilot may work on it (agentgate \
                 cannot stop it): {pull}"
            )
        }))
    }
}

impl RequestChanges {
    /// Posts the comment once: a repeated step finds the marker instead.
    async fn post(&self, state: &ChangesState, cx: &JobContext) -> Result<PostedComment, JobError> {
        let github = self
            .shared
            .github_for(cx, &state.owner, &state.repo)
            .map_err(|refused| JobError::Fatal(ErrorData::invalid_request(refused, None)))?;
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
}

impl Followed for ChangesState {
    const CONFIRM_EVERY: Duration = CONFIRM_EVERY;

    fn progress(&mut self) -> &mut Progress {
        &mut self.progress
    }

    fn observe(&mut self, observation: Observation) -> Seen {
        let Observation::Pull(pull) = observation else {
            return Seen::Noted;
        };
        self.pull_request = PullRequest::from_watched(&pull);
        if pull.merged || pull.state == "CLOSED" {
            let (outcome, error, how) = if pull.merged {
                ("merged", false, "was merged")
            } else {
                ("closed_unmerged", true, "was closed without being merged")
            };
            let text = format!("Pull request {} {how}.", self.pull_request.describe());
            return Seen::Finished(finish(self, outcome, error, text, None));
        }
        Seen::ConfirmNow
    }

    /// Reads the PR's timeline: did the cycle our comment asked for start, end?
    async fn confirm(
        &mut self,
        shared: &Shared,
        _now: Millis,
    ) -> Result<Option<CallToolResult>, JobError> {
        let Some(comment) = self.comment.clone() else {
            return Ok(None);
        };
        let events = report::copilot_events(
            &shared.github,
            &self.owner,
            &self.repo,
            self.pull_request.number,
        )
        .await
        .map_err(|e| e.into_job_error("reading the pull request's timeline"))?;
        self.started = self.started || report::cycle_started(&events, &comment.created_at);
        let detail = json!({"copilotEvents": events});
        Ok(match report::cycle_end(&events, &comment.created_at) {
            Some(CycleEnd::Finished { .. }) => {
                let text = format!(
                    "Copilot finished the requested changes on pull request {}.",
                    self.pull_request.describe()
                );
                Some(finish(self, "finished", false, text, Some(detail)))
            }
            Some(CycleEnd::Failed { .. }) => {
                let text = format!(
                    "Copilot stopped with a failure while changing pull request {}.",
                    self.pull_request.describe()
                );
                Some(finish(
                    self,
                    "finished_with_failure",
                    true,
                    text,
                    Some(detail),
                ))
            }
            None => None,
        })
    }

    fn gone(&self, message: &str) -> CallToolResult {
        let text = format!("Stopped watching: GitHub no longer shows the pull request ({message})");
        finish(self, "gone", true, text, None)
    }

    fn timed_out(&self, max: Duration) -> CallToolResult {
        let text = format!(
            "Stopped watching after {} minutes: Copilot may still be working on {}.",
            max.as_secs() / 60,
            self.pull_request.url
        );
        finish(self, "watch_timeout", true, text, None)
    }

    fn target(&self) -> Target {
        Target::Pull {
            owner: self.owner.clone(),
            repo: self.repo.clone(),
            number: self.pull_request.number,
            since: self
                .comment
                .as_ref()
                .map_or_else(|| self.asked_at.clone(), |c| c.created_at.clone()),
        }
    }

    fn status(&self) -> String {
        if self.started {
            format!(
                "Copilot is working on the changes to pull request {}",
                self.pull_request.describe()
            )
        } else {
            format!(
                "Asked Copilot for changes on pull request #{}; waiting for it to start",
                self.pull_request.number
            )
        }
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
        let cx = JobContext::new(
            agentgate_backend::TaskId::generate(),
            agentgate_backend::Owner::new("token:alice"),
            1,
            Millis::EPOCH,
        );
        let m = marker(&cx);
        assert!(m.starts_with("<!--") && m.ends_with("-->"));
        assert!(m.contains(cx.task_id.as_str()));
    }
}
