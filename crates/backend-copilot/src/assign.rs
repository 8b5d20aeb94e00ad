//! `assign_copilot_to_issue`: upstream's flow as a durable task that follows
//! the agent to its finished pull request.
//!
//! ```text
//! start     suggestedActors (paged) → copilot-swe-agent? → issue id, and every
//!           assignee from assignedActors (bots are never in `assignees`)
//!           checkpoint Assign { Copilot assigned before? }
//! Assign    assigned before this call? no mutation; watch for its PR from
//!           the issue's start : re-read assignedActors; Copilot newly there?
//!           (the mutation landed before a crash) skip : updateIssue(every
//!           assignee + Copilot, agentAssignment)
//!           checkpoint AwaitPr, watch the issue
//! AwaitPr   Copilot's cross-referenced PR → Working, watch the PR
//!           Copilot's comment on the issue → "could not start" (isError)
//! Working   PR ready for review / closed / Copilot comment → REST timeline:
//!           copilot_work_finished → done; _failure → isError;
//!           merged → done; closed unmerged → isError
//! any       past max watch time → isError saying Copilot may still work
//! ```
//!
//! Clients without tasks get [`UpstreamView`]: upstream's nine one-second
//! polls for the PR, its progress messages and its JSON, plus the task id.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{
    Event, InlineTask, Job, JobContext, JobError, Millis, Step, StepResult, SyncView,
};
use rmcp::model::{CallToolResult, ContentBlock, ErrorData};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Shared;
use crate::args::{AssignArgs, Valid};
use crate::follow::{Followed, Progress, Seen, follow, keep_watching};
use crate::github::model::{self, COPILOT_LOGIN, TimelineItem};
use crate::github::{ASSIGNMENT_FEATURES, GitHubError};
use crate::report::{self, CycleEnd, PullRequest};
use crate::watcher::{Observation, Target};

/// Upstream's message when Copilot is not among the suggested actors.
pub(crate) const NOT_AVAILABLE: &str = "copilot isn't available as an assignee for this issue. Please inform the user to visit https://docs.github.com/en/copilot/concepts/agents/cloud-agent/about-cloud-agent for more information.";

/// The watch's start when Copilot already held the issue: its pull request
/// may be older than this call.
const FROM_THE_START: &str = "1970-01-01T00:00:00Z";

/// How often the REST timeline is read while nothing else suggests a change.
const CONFIRM_EVERY: Duration = Duration::from_secs(5 * 60);

/// The job behind `assign_copilot_to_issue`.
#[derive(Debug, Clone)]
pub(crate) struct AssignCopilot {
    shared: Arc<Shared>,
}

impl AssignCopilot {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

/// The checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AssignState {
    pub owner: String,
    pub repo: String,
    pub issue_number: i64,
    pub issue_id: String,
    pub issue_url: String,
    pub issue_title: String,
    pub repo_id: String,
    pub copilot_id: String,
    pub phase: Phase,
    /// The watch: when it began, what it saw, when it last confirmed.
    #[serde(flatten)]
    pub progress: Progress,
    /// Timeline items at or after this GitHub time are ours.
    #[serde(default)]
    pub since: Option<String>,
    /// The pull request Copilot opened, once seen.
    #[serde(default)]
    pub pull_request: Option<PullRequest>,
    /// Copilot was an assignee before this call: cancel leaves it assigned.
    #[serde(default)]
    pub had_copilot: bool,
    pub args: AssignArgs,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub(crate) enum Phase {
    /// Looked up, not assigned yet. `had_copilot`: Copilot was already an
    /// assignee before we asked.
    Assign {
        had_copilot: bool,
    },
    AwaitPr,
    Working,
}

impl Job for AssignCopilot {
    type Args = Valid<AssignArgs>;
    type State = AssignState;

    async fn start(&self, args: Valid<AssignArgs>, cx: &JobContext) -> StepResult<AssignState> {
        let args = args.0;
        let github = match self.shared.github_for(cx, &args.owner, &args.repo) {
            Ok(github) => github,
            Err(refused) => return Ok(Step::Done(tool_error(refused))),
        };
        let copilot_id = match find_copilot(github, &args.owner, &args.repo).await {
            Ok(Some(id)) => id,
            Ok(None) => {
                return Ok(Step::Done(CallToolResult::error(vec![ContentBlock::text(
                    NOT_AVAILABLE,
                )])));
            }
            Err(e) if e.is_transient() => {
                return Err(e.into_job_error("failed to get suggested actors"));
            }
            Err(e) => {
                return Ok(Step::Done(tool_error(format!(
                    "failed to get suggested actors: {e}"
                ))));
            }
        };
        let issue = match read_issue(github, &args.owner, &args.repo, args.issue_number).await {
            Ok(issue) => issue,
            Err(e) if e.is_transient() => return Err(e.into_job_error("failed to get issue ID")),
            Err(e) => {
                return Ok(Step::Done(tool_error(format!(
                    "failed to get issue ID: {e}"
                ))));
            }
        };
        let had_copilot = issue.assignees.contains(&copilot_id);
        let status = format!(
            "Assigning Copilot to {}/{}#{}",
            args.owner, args.repo, args.issue_number
        );
        Ok(Step::Wait {
            state: AssignState {
                owner: args.owner.clone(),
                repo: args.repo.clone(),
                issue_number: args.issue_number,
                issue_id: issue.id,
                issue_url: issue.url,
                issue_title: issue.title,
                repo_id: issue.repo_id,
                copilot_id,
                phase: Phase::Assign { had_copilot },
                progress: Progress::default(),
                // Fixed before the mutation, so a repeated assignment step
                // cannot move it past a PR Copilot already opened.
                since: Some(report::since(cx.now, Duration::from_secs(30))),
                pull_request: None,
                had_copilot,
                args,
            },
            status: Some(status),
            after: Duration::ZERO,
        })
    }

    async fn resume(
        &self,
        state: AssignState,
        _event: Event,
        cx: &JobContext,
    ) -> StepResult<AssignState> {
        match state.phase {
            Phase::Assign { had_copilot } => self.assign(state, had_copilot, cx).await,
            Phase::AwaitPr | Phase::Working => follow(&self.shared, state, cx).await,
        }
    }

    async fn cancel(&self, state: AssignState, cx: &JobContext) -> StepResult<AssignState> {
        self.shared.watcher.forget(&cx.task_id);
        let assigned = !matches!(state.phase, Phase::Assign { .. });
        let mut unassigned = false;
        if assigned && !state.had_copilot && self.shared.config.unassign_on_cancel {
            let input = json!({"input": {
                "assignableId": state.issue_id,
                "assigneeIds": [state.copilot_id],
            }});
            let github = match self.shared.github_for(cx, &state.owner, &state.repo) {
                Ok(github) => github,
                Err(refused) => {
                    tracing::warn!(task = %cx.task_id, reason = %refused, "not removing Copilot from the assignees on cancel");
                    return Ok(Step::cancelled_saying(cancelled_status(&state, false)));
                }
            };
            let response = github
                .graphql(model::REMOVE_ASSIGNEES, input, None)
                .await
                .and_then(|r| r.into_data::<Value>());
            match response {
                Ok(_) => {
                    tracing::info!(task = %cx.task_id, "removed Copilot from the assignees on cancel");
                    unassigned = true;
                }
                Err(e) if e.is_transient() => {
                    return Err(e.into_job_error("removing Copilot from the assignees"));
                }
                Err(e) => tracing::warn!(
                    task = %cx.task_id, error = %e,
                    "could not remove Copilot from the assignees on cancel"
                ),
            }
        }
        Ok(Step::cancelled_saying(cancelled_status(&state, unassigned)))
    }
}

/// What a cancelled assignment leaves on GitHub: agentgate stops following,
/// but nothing in GitHub's API stops a Copilot run, so the client is told
/// it may go on (and where to stop it) instead of just "cancelled".
fn cancelled_status(state: &AssignState, unassigned: bool) -> String {
    let issue = format!("{}/{}#{}", state.owner, state.repo, state.issue_number);
    let mut status = match (&state.phase, &state.pull_request) {
        (Phase::Assign { .. }, _) => format!(
            "cancelled; if the assignment reached GitHub, Copilot may be working on {issue}: \
             agentgate cannot stop its run"
        ),
        (_, Some(pull)) => format!(
            "cancelled; Copilot's run on {issue} goes on on GitHub (agentgate cannot stop it; \
             stop it from its pull request {})",
            pull.url
        ),
        (_, None) => format!(
            "cancelled; Copilot's run on {issue} goes on on GitHub (agentgate cannot stop it; \
             stop it from its pull request once one is open)"
        ),
    };
    if unassigned {
        status.push_str("; Copilot was removed from the issue's assignees");
    }
    status
}

impl AssignCopilot {
    async fn assign(
        &self,
        mut state: AssignState,
        had_copilot: bool,
        cx: &JobContext,
    ) -> StepResult<AssignState> {
        if had_copilot {
            // Copilot held the issue before this call. GitHub documents no new
            // run for assigning it again, so nothing is sent: the pull request
            // it opened (or is opening) is followed, found from the issue's
            // start rather than from now.
            state.phase = Phase::AwaitPr;
            state.progress.watch_started = Some(cx.now);
            state.since = Some(FROM_THE_START.into());
            let status = format!(
                "Copilot was already assigned to {}/{}#{} before this call, so it was not \
                 assigned again; following the pull request it opened for the issue",
                state.owner, state.repo, state.issue_number
            );
            return Ok(keep_watching(&self.shared, state, status, cx));
        }
        let github = match self.shared.github_for(cx, &state.owner, &state.repo) {
            Ok(github) => github,
            Err(refused) => return Ok(Step::Done(tool_error(refused))),
        };
        let issue = read_issue(github, &state.owner, &state.repo, state.issue_number)
            .await
            .map_err(|e| e.into_job_error("failed to get issue ID"))?;
        let has_copilot = issue.assignees.contains(&state.copilot_id);
        // The checkpoint says "not assigned yet" but GitHub shows Copilot
        // newly assigned: this step ran before and died after the mutation.
        let landed_before = has_copilot && !had_copilot;
        if !landed_before {
            let mut assignees = issue.assignees;
            if !assignees.contains(&state.copilot_id) {
                assignees.push(state.copilot_id.clone());
            }
            let mut assignment = serde_json::Map::new();
            assignment.insert("targetRepositoryId".into(), json!(state.repo_id));
            if let Some(base) = &state.args.base_ref {
                assignment.insert("baseRef".into(), json!(base));
            }
            assignment.insert(
                "customInstructions".into(),
                json!(state.args.custom_instructions.clone().unwrap_or_default()),
            );
            assignment.insert(
                "customAgent".into(),
                json!(state.args.custom_agent.clone().unwrap_or_default()),
            );
            if let Some(model) = &state.args.model {
                assignment.insert("model".into(), json!(model));
            }
            let variables = json!({"input": {
                "id": state.issue_id,
                "assigneeIds": assignees,
                "agentAssignment": assignment,
            }});
            let updated = github
                .graphql(model::UPDATE_ISSUE, variables, Some(ASSIGNMENT_FEATURES))
                .await
                .and_then(|r| r.into_data::<model::UpdateIssueData>());
            match updated {
                Ok(data) => {
                    if let Some(issue) = data.update_issue.and_then(|p| p.issue) {
                        state.issue_url = issue.url;
                    }
                }
                Err(e) if e.is_transient() => {
                    return Err(e.into_job_error("failed to update issue with agent assignment"));
                }
                Err(e) => {
                    return Ok(Step::Fail(ErrorData::internal_error(
                        format!("failed to update issue with agent assignment: {e}"),
                        None,
                    )));
                }
            }
        }
        state.phase = Phase::AwaitPr;
        state.progress.watch_started = Some(cx.now);
        if state.since.is_none() {
            state.since = Some(report::since(cx.now, Duration::from_secs(30)));
        }
        let status = format!(
            "Copilot assigned to {}/{}#{}; waiting for it to open a pull request",
            state.owner, state.repo, state.issue_number
        );
        Ok(keep_watching(&self.shared, state, status, cx))
    }
}

impl Followed for AssignState {
    const CONFIRM_EVERY: Duration = CONFIRM_EVERY;

    fn progress(&mut self) -> &mut Progress {
        &mut self.progress
    }

    fn observe(&mut self, observation: Observation) -> Seen {
        let since = self.since.clone().unwrap_or_default();
        match (&self.phase, observation) {
            (Phase::AwaitPr, Observation::Issue(issue)) => {
                let items = &issue.timeline_items.nodes;
                if let Some(pr) = copilot_pull_request(items, &since) {
                    self.pull_request = Some(pr);
                    self.phase = Phase::Working;
                    // From now on the pull request is watched, not the issue.
                    self.progress.seen = None;
                } else if let Some(comment) = copilot_comment(items, &since) {
                    let text = format!(
                        "Copilot could not start working on {}/{}#{}: {}",
                        self.owner,
                        self.repo,
                        self.issue_number,
                        comment["body"].as_str().unwrap_or_default()
                    );
                    return Seen::Finished(self.finish(
                        "failed_to_start",
                        true,
                        text,
                        Some(comment),
                    ));
                }
                Seen::Noted
            }
            (Phase::Working, Observation::Pull(pull)) => {
                let pr = PullRequest::from_watched(&pull);
                let copilot_spoke = copilot_comment(&pull.timeline_items.nodes, &since).is_some();
                self.pull_request = Some(pr.clone());
                if pull.merged {
                    let text = format!("Pull request {} was merged.", pr.describe());
                    return Seen::Finished(self.finish("merged", false, text, None));
                }
                if pull.state == "CLOSED" {
                    let text = format!(
                        "Pull request {} was closed without being merged.",
                        pr.describe()
                    );
                    return Seen::Finished(self.finish("closed_unmerged", true, text, None));
                }
                if !pull.is_draft || copilot_spoke {
                    Seen::ConfirmNow
                } else {
                    Seen::Noted
                }
            }
            _ => Seen::Noted,
        }
    }

    fn confirms(&self) -> bool {
        self.phase == Phase::Working
    }

    /// Reads Copilot's events on the PR: has the cycle ended?
    async fn confirm(
        &mut self,
        shared: &Shared,
        _now: Millis,
    ) -> Result<Option<CallToolResult>, JobError> {
        let Some(pr) = self.pull_request.clone() else {
            return Ok(None);
        };
        let events = report::copilot_events(&shared.github, &self.owner, &self.repo, pr.number)
            .await
            .map_err(|e| e.into_job_error("reading the pull request's timeline"))?;
        let since = self.since.clone().unwrap_or_default();
        let detail = json!({"copilotEvents": events});
        Ok(match report::cycle_end(&events, &since) {
            Some(CycleEnd::Finished { .. }) => Some(self.finish(
                "finished",
                false,
                format!(
                    "Copilot finished: pull request {} is ready for review.",
                    pr.describe()
                ),
                Some(detail),
            )),
            Some(CycleEnd::Failed { .. }) => Some(self.finish(
                "finished_with_failure",
                true,
                format!(
                    "Copilot stopped with a failure on pull request {}.",
                    pr.describe()
                ),
                Some(detail),
            )),
            // Fallback for deployments whose timeline has no copilot_work_*
            // events: Copilot marks its PR ready for review when it is done.
            None if events.is_empty() && !pr.draft => Some(self.finish(
                "finished",
                false,
                format!(
                    "Copilot finished: pull request {} is ready for review (seen as ready for \
                     review; GitHub reported no Copilot work events).",
                    pr.describe()
                ),
                Some(detail),
            )),
            None => None,
        })
    }

    fn gone(&self, message: &str) -> CallToolResult {
        self.finish(
            "gone",
            true,
            format!("Stopped watching: GitHub no longer shows it ({message})"),
            None,
        )
    }

    fn timed_out(&self, max: Duration) -> CallToolResult {
        self.finish(
            "watch_timeout",
            true,
            format!(
                "Stopped watching after {} minutes: Copilot may still be working. Follow the \
                 issue {} for its pull request.",
                max.as_secs() / 60,
                self.issue_url
            ),
            None,
        )
    }

    fn target(&self) -> Target {
        let since = self.since.clone().unwrap_or_default();
        match (&self.phase, &self.pull_request) {
            (Phase::Working, Some(pr)) => Target::Pull {
                owner: self.owner.clone(),
                repo: self.repo.clone(),
                number: pr.number,
                since,
            },
            _ => Target::Issue {
                owner: self.owner.clone(),
                repo: self.repo.clone(),
                number: self.issue_number,
                since,
            },
        }
    }

    fn status(&self) -> String {
        match (&self.phase, &self.pull_request) {
            (Phase::Working, Some(pr)) => format!(
                "Copilot opened pull request {} and is working",
                pr.describe()
            ),
            _ => format!(
                "Copilot assigned to {}/{}#{}; waiting for it to open a pull request",
                self.owner, self.repo, self.issue_number
            ),
        }
    }
}

impl AssignState {
    fn finish(
        &self,
        outcome: &str,
        is_error: bool,
        text: String,
        detail: Option<Value>,
    ) -> CallToolResult {
        let mut structured = json!({
            "outcome": outcome,
            "message": text,
            "owner": self.owner,
            "repo": self.repo,
            "issue_number": self.issue_number,
            "issue_url": self.issue_url,
            "issue_title": self.issue_title,
        });
        if let Some(map) = structured.as_object_mut() {
            // Absent, not null, without one: upstream's schema types it as an object.
            if let Some(pr) = &self.pull_request {
                map.insert("pull_request".into(), json!(pr));
            }
            if let Some(detail) = detail {
                map.insert("detail".into(), detail);
            }
        }
        let text = match &self.pull_request {
            Some(pr) => format!("{text}\n{}", pr.url),
            None => text,
        };
        report::result(is_error, text, structured)
    }
}

fn tool_error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Pages through `suggestedActors` for `copilot-swe-agent`; its node id.
async fn find_copilot(
    github: &crate::github::GitHub,
    owner: &str,
    repo: &str,
) -> Result<Option<String>, GitHubError> {
    let mut cursor: Option<String> = None;
    // 100 pages of 100 actors is far beyond any real repository.
    for _ in 0..100 {
        let query = if cursor.is_some() {
            model::SUGGESTED_ACTORS_NEXT
        } else {
            model::SUGGESTED_ACTORS_FIRST
        };
        let data: model::SuggestedActorsData = github
            .graphql(
                query,
                json!({"endCursor": cursor, "name": repo, "owner": owner}),
                None,
            )
            .await?
            .into_data()?;
        let Some(repository) = data.repository else {
            return Err(GitHubError::NotFound {
                message: format!(
                    "Could not resolve to a Repository with the name '{owner}/{repo}'."
                ),
            });
        };
        let actors = repository.suggested_actors;
        if let Some(id) = actors
            .nodes
            .iter()
            .flatten()
            .find(|n| n.login.as_deref() == Some(COPILOT_LOGIN))
            .and_then(|n| n.id.clone())
        {
            return Ok(Some(id));
        }
        match actors.page_info {
            Some(page) if page.has_next_page && page.end_cursor.is_some() => {
                cursor = page.end_cursor;
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

struct IssueFacts {
    repo_id: String,
    id: String,
    url: String,
    title: String,
    /// The node ids of every assignee, bots included.
    assignees: Vec<String>,
}

async fn read_issue(
    github: &crate::github::GitHub,
    owner: &str,
    repo: &str,
    number: i64,
) -> Result<IssueFacts, GitHubError> {
    let data: model::IssueData = github
        .graphql(
            model::ISSUE,
            json!({"name": repo, "number": number, "owner": owner}),
            None,
        )
        .await?
        .into_data()?;
    let repository = data.repository.ok_or_else(|| GitHubError::NotFound {
        message: format!("Could not resolve to a Repository with the name '{owner}/{repo}'."),
    })?;
    let issue = repository.issue.ok_or_else(|| GitHubError::NotFound {
        message: format!("Could not resolve to an Issue with the number of {number}."),
    })?;
    // Every assignee must be kept when Copilot is added (the mutation replaces
    // the list): one whose id we cannot read stops the call rather than being
    // dropped.
    let mut assignees = Vec::new();
    for actor in issue.assigned_actors.nodes.into_iter().flatten() {
        match actor.id {
            Some(id) => assignees.push(id),
            None => {
                return Err(GitHubError::Decode(format!(
                    "issue {owner}/{repo}#{number} has an assignee of a kind agentgate does not \
                     know ({}), which assigning Copilot would remove; assign Copilot in GitHub's \
                     UI instead",
                    actor.typename.as_deref().unwrap_or("no __typename")
                )));
            }
        }
    }
    Ok(IssueFacts {
        repo_id: repository.id,
        id: issue.id,
        url: issue.url,
        title: issue.title,
        assignees,
    })
}

/// The first PR Copilot opened that cross-references the issue, at or after
/// `since` (upstream's match, read from the newest 50 items).
fn copilot_pull_request(items: &[TimelineItem], since: &str) -> Option<PullRequest> {
    let floor = model::parse_time(since)?;
    items.iter().find_map(|item| match item {
        TimelineItem::CrossReferencedEvent {
            source:
                Some(
                    source @ model::CrossReferenceSource::PullRequest {
                        created_at, author, ..
                    },
                ),
            ..
        } if author.as_ref().is_some_and(|a| model::is_copilot(&a.login))
            && model::parse_time(created_at).is_some_and(|t| t >= floor) =>
        {
            PullRequest::from_source(source)
        }
        _ => None,
    })
}

/// Copilot's first comment at or after `since`, as JSON.
fn copilot_comment(items: &[TimelineItem], since: &str) -> Option<Value> {
    let floor = model::parse_time(since)?;
    items.iter().find_map(|item| match item {
        TimelineItem::IssueComment {
            created_at,
            url,
            body,
            author,
        } if author.as_ref().is_some_and(|a| model::is_copilot(&a.login))
            && model::parse_time(created_at).is_some_and(|t| t >= floor) =>
        {
            Some(json!({"url": url, "body": body, "createdAt": created_at}))
        }
        _ => None,
    })
}

/// Upstream's answer for clients without tasks: nine polls one second apart
/// for the PR, with upstream's progress messages and JSON, plus the task id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpstreamView;

/// Upstream's poll: 9 attempts, 1 s apart ("p50 ~5s, p90 ~7s").
pub(crate) const ATTEMPTS: u32 = 9;
/// How long a client without tasks waits for the assignment itself.
const SETUP_BUDGET: Duration = Duration::from_secs(60);
pub(crate) const DELAY: Duration = Duration::from_secs(1);
pub(crate) const PENDING_NOTE: &str = "The pull request may still be in progress. Once created, the PR number can be used to check job status, or check the issue timeline for updates.";

impl SyncView for UpstreamView {
    fn follow<'a>(
        &'a self,
        mut task: InlineTask<'a>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<CallToolResult, ErrorData>> + Send + 'a>>
    {
        Box::pin(async move {
            // Until the assignment is made, the answer is whatever the task
            // says, within the tool's sync budget (GitHub may be throttling).
            let deadline = tokio::time::Instant::now() + SETUP_BUDGET;
            let state = loop {
                let record = task.view().await?;
                if let Some(ended) = task.ended(&record) {
                    return ended;
                }
                let state = record
                    .job_state
                    .as_ref()
                    .and_then(|s| serde_json::from_value::<AssignState>(s.clone()).ok());
                if let Some(state) = state.filter(|s| !matches!(s.phase, Phase::Assign { .. })) {
                    break state;
                }
                if tokio::time::Instant::now() >= deadline {
                    // An error result: the assignment this call asked for is
                    // not made, so there is nothing of the declared output yet.
                    let status = record.status_message.unwrap_or_default();
                    return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                        "The assignment is not made yet ({status}); it continues as task {}. \
                         Call `task_status` with {{\"task_id\": \"{}\"}} to follow it.",
                        task.id(),
                        task.id()
                    ))]));
                }
                task.changed_within(Duration::from_secs(1)).await?;
            };
            task.progress(
                0.0,
                Some(f64::from(ATTEMPTS)),
                "Copilot assigned to issue, waiting for PR creation...",
            )
            .await;
            for attempt in 0..ATTEMPTS {
                if attempt > 0 {
                    task.sleep(DELAY).await?;
                }
                task.progress(
                    f64::from(attempt + 1),
                    Some(f64::from(ATTEMPTS)),
                    format!(
                        "Waiting for Copilot to create PR... (attempt {}/{ATTEMPTS})",
                        attempt + 1
                    ),
                )
                .await;
                let record = task.view().await?;
                let current = record
                    .job_state
                    .as_ref()
                    .and_then(|s| serde_json::from_value::<AssignState>(s.clone()).ok());
                if let Some(pr) = current.as_ref().and_then(|s| s.pull_request.clone()) {
                    return Ok(upstream_result(&state, Some(&pr), task.id()));
                }
                if let Some(ended) = task.ended(&record) {
                    return ended;
                }
            }
            Ok(upstream_result(&state, None, task.id()))
        })
    }
}

fn upstream_result(
    state: &AssignState,
    pr: Option<&PullRequest>,
    task: &agentgate_backend::TaskId,
) -> CallToolResult {
    let mut body = json!({
        "issue_number": state.issue_number,
        "issue_url": state.issue_url,
        "owner": state.owner,
        "repo": state.repo,
        "task_id": task.as_str(),
    });
    if let Some(map) = body.as_object_mut() {
        match pr {
            Some(pr) => {
                map.insert(
                    "message".into(),
                    json!("successfully assigned copilot to issue - pull request created"),
                );
                map.insert(
                    "pull_request".into(),
                    json!({
                        "number": pr.number,
                        "url": pr.url,
                        "title": pr.title,
                        "state": pr.state,
                    }),
                );
            }
            None => {
                map.insert(
                    "message".into(),
                    json!("successfully assigned copilot to issue - pull request pending"),
                );
                map.insert("note".into(), json!(PENDING_NOTE));
            }
        }
    }
    // Upstream's JSON as text, and the same object as structured content (the
    // tool declares upstream's output schema).
    let mut result = CallToolResult::success(vec![ContentBlock::text(body.to_string())]);
    result.structured_content = Some(body);
    let mut meta = rmcp::model::MetaObject::new();
    meta.0
        .insert("io.agentgate/taskId".to_owned(), json!(task.as_str()));
    result.meta = Some(meta);
    result
}
