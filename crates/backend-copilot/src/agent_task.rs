//! `create_pull_request_with_copilot`: an agent task of the Agent tasks REST
//! API, followed to `completed`, `failed`, `timed_out` or `cancelled`.
//!
//! ```text
//! start   checkpoint Create (nothing sent yet)
//! Create  list the tasks created since this step began and GET each one (only
//!         GET shows a task's sessions and so its prompt): one with our marker
//!         (the POST landed before a crash) is adopted, else
//!         POST /agents/repos/{o}/{r}/tasks → Follow, watch it (one list
//!         request per repository per tick)
//! Follow  state changes → statusMessage (every documented state, `idle`
//!         included); an end state → GET the task with its sessions, result
//!         (isError unless completed)
//! ```
//!
//! The API has no title field: a `title` becomes the first line of the prompt.
//! The prompt ends with an invisible marker, `<!-- agentgate:task TASK_ID -->`,
//! by which a repeated creating step recognises the agent task it started.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::{Event, Job, JobContext, JobError, Millis, Step, StepResult};
use rmcp::model::CallToolResult;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::args::{CreatePrArgs, Valid};
use crate::follow::{Followed, Progress, Seen, follow};
use crate::github::model::{AgentTask, AgentTaskList};
use crate::report;
use crate::watcher::{Observation, Target};
use crate::{AGENT_TASKS_API_VERSION, Shared};

#[derive(Debug, Clone)]
pub(crate) struct CreatePullRequest {
    shared: Arc<Shared>,
}

impl CreatePullRequest {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CreateState {
    pub owner: String,
    pub repo: String,
    pub prompt: String,
    pub base_ref: Option<String>,
    pub model: Option<String>,
    /// GitHub time (minus skew) when the creating step began.
    pub asked_at: String,
    #[serde(default)]
    pub agent_task: Option<String>,
    #[serde(default)]
    pub agent_state: Option<String>,
    #[serde(default)]
    pub html_url: Option<String>,
    /// The watch: when it began, what it saw, when the agent task was last
    /// read directly.
    #[serde(flatten)]
    pub progress: Progress,
}

/// How often a followed agent task is read directly.
const READ_EVERY: Duration = Duration::from_secs(60);

/// End states of an agent task.
const ENDED: [&str; 4] = ["completed", "failed", "timed_out", "cancelled"];

impl Job for CreatePullRequest {
    type Args = Valid<CreatePrArgs>;
    type State = CreateState;

    async fn start(&self, args: Valid<CreatePrArgs>, cx: &JobContext) -> StepResult<CreateState> {
        let args = args.0;
        if let Err(refused) = self.shared.github_for(cx, &args.owner, &args.repo) {
            return Ok(Step::Done(report::result(
                true,
                refused,
                json!({"owner": args.owner, "repo": args.repo}),
            )));
        }
        let marker = format!("<!-- agentgate:task {} -->", cx.task_id);
        let prompt = match &args.title {
            Some(title) => format!(
                "{}\n\n{}\n\n{marker}",
                title.trim(),
                args.problem_statement.trim()
            ),
            None => format!("{}\n\n{marker}", args.problem_statement.trim()),
        };
        Ok(Step::Wait {
            status: Some(format!(
                "Starting a Copilot agent task in {}/{}",
                args.owner, args.repo
            )),
            state: CreateState {
                owner: args.owner,
                repo: args.repo,
                prompt,
                base_ref: args.base_ref,
                model: args.model,
                asked_at: report::since(cx.now, Duration::from_secs(60)),
                agent_task: None,
                agent_state: None,
                html_url: None,
                progress: Progress::default(),
            },
            after: Duration::ZERO,
        })
    }

    async fn resume(
        &self,
        mut state: CreateState,
        _event: Event,
        cx: &JobContext,
    ) -> StepResult<CreateState> {
        if state.agent_task.is_none() {
            let task = match self.create(&state, cx).await {
                Ok(task) => task,
                Err(CreateError::Job(e)) => return Err(e),
                Err(CreateError::Refused(text)) => {
                    return Ok(Step::Done(report::result(
                        true,
                        text,
                        json!({"owner": state.owner, "repo": state.repo}),
                    )));
                }
            };
            state.agent_task = Some(task.id_text());
            state.agent_state = Some(task.state.clone());
            state.html_url = task.html_url.clone();
            state.progress.watch_started = Some(cx.now);
        }
        follow(&self.shared, state, cx).await
    }

    /// Stops following; the agent task itself goes on, since agentgate
    /// cannot stop it, and the status says so with where it is.
    async fn cancel(&self, state: CreateState, cx: &JobContext) -> StepResult<CreateState> {
        self.shared.watcher.forget(&cx.task_id);
        let repository = format!("{}/{}", state.owner, state.repo);
        Ok(Step::cancelled_saying(
            match (&state.agent_task, &state.html_url) {
                (Some(_), Some(url)) => format!(
                    "cancelled; the Copilot agent task goes on on GitHub (agentgate cannot stop it): \
                 {url}"
                ),
                (Some(id), None) => format!(
                    "cancelled; the Copilot agent task {id} in {repository} goes on on GitHub \
                 (agentgate cannot stop it)"
                ),
                (None, _) => format!(
                    "cancelled; if GitHub started the agent task, it goes on: look for it among \
                 {repository}'s agent tasks (agentgate cannot stop it)"
                ),
            },
        ))
    }
}

enum CreateError {
    Job(JobError),
    Refused(String),
}

impl CreatePullRequest {
    fn tasks_path(state: &CreateState) -> String {
        format!("agents/repos/{}/{}/tasks", state.owner, state.repo)
    }

    async fn create(&self, state: &CreateState, cx: &JobContext) -> Result<AgentTask, CreateError> {
        let marker = format!("<!-- agentgate:task {} -->", cx.task_id);
        let github = self
            .shared
            .github_for(cx, &state.owner, &state.repo)
            .map_err(CreateError::Refused)?;
        let path = Self::tasks_path(state);
        let recent: AgentTaskList = github
            .rest_get(
                &path,
                &[
                    ("since", state.asked_at.clone()),
                    ("sort", "created_at".into()),
                    ("direction", "desc".into()),
                    ("per_page", "100".into()),
                ],
                Some(AGENT_TASKS_API_VERSION),
            )
            .await
            .map_err(|e| classify(e, "listing agent tasks"))?;
        // List items carry no sessions (GitHub documents them only on GET of
        // one task), so each task created since this step began is read
        // whole and its prompt searched for our marker.
        for candidate in recent
            .tasks
            .iter()
            .filter(|t| created_since(t, &state.asked_at))
        {
            let Some(id) = candidate.get("id").and_then(Value::as_str) else {
                continue;
            };
            let task: AgentTask = github
                .rest_get(&format!("{path}/{id}"), &[], Some(AGENT_TASKS_API_VERSION))
                .await
                .map_err(|e| classify(e, "reading a recent agent task"))?;
            let prompt_is_ours = task.sessions.iter().any(|session| {
                session
                    .get("prompt")
                    .and_then(Value::as_str)
                    .is_some_and(|p| p.contains(&marker))
            });
            if prompt_is_ours {
                return Ok(task);
            }
        }
        let mut body = json!({"prompt": state.prompt, "create_pull_request": true});
        if let Some(map) = body.as_object_mut() {
            if let Some(base) = &state.base_ref {
                map.insert("base_ref".into(), json!(base));
            }
            if let Some(model) = &state.model {
                map.insert("model".into(), json!(model));
            }
        }
        github
            .rest_post(&path, &body, Some(AGENT_TASKS_API_VERSION))
            .await
            .map_err(|e| classify(e, "starting the agent task"))
    }
}

impl Followed for CreateState {
    const CONFIRM_EVERY: Duration = READ_EVERY;

    fn progress(&mut self) -> &mut Progress {
        &mut self.progress
    }

    fn observe(&mut self, observation: Observation) -> Seen {
        if let Observation::AgentTask(task) = observation
            && let Some(state) = task.get("state").and_then(Value::as_str)
        {
            self.agent_state = Some(state.to_owned());
            if ENDED.contains(&state) {
                // The listing shows the end; the result needs the task itself.
                return Seen::ConfirmNow;
            }
        }
        Seen::Noted
    }

    /// Reads the agent task directly (a fallback for a task the repository
    /// listing does not show) and, once it has ended, with its sessions.
    async fn confirm(
        &mut self,
        shared: &Shared,
        _now: Millis,
    ) -> Result<Option<CallToolResult>, JobError> {
        let path = self.task_path();
        let task: AgentTask = shared
            .github
            .rest_get(&path, &[], Some(AGENT_TASKS_API_VERSION))
            .await
            .map_err(|e| e.into_job_error("reading the agent task"))?;
        self.agent_state = Some(task.state.clone());
        if !ENDED.contains(&task.state.as_str()) {
            return Ok(None);
        }
        let full: Value = shared
            .github
            .rest_get(&path, &[], Some(AGENT_TASKS_API_VERSION))
            .await
            .map_err(|e| e.into_job_error("reading the agent task"))?;
        let pull = match pull_artifact(&full) {
            Some(id) => Some(pull_request(shared, id).await?),
            None => None,
        };
        Ok(Some(finish(self, &full, pull)))
    }

    fn gone(&self, message: &str) -> CallToolResult {
        report::result(
            true,
            format!("Stopped watching: GitHub no longer shows the agent task ({message})"),
            json!({"outcome": "gone", "agent_task_id": self.agent_task, "owner": self.owner, "repo": self.repo}),
        )
    }

    fn timed_out(&self, max: Duration) -> CallToolResult {
        let current = self.agent_state.clone().unwrap_or_default();
        report::result(
            true,
            format!(
                "Stopped watching after {} minutes: the agent task is still {current}. {}",
                max.as_secs() / 60,
                self.html_url.clone().unwrap_or_default()
            ),
            json!({"outcome": "watch_timeout", "agent_task_id": self.agent_task, "state": current}),
        )
    }

    fn target(&self) -> Target {
        Target::AgentTask {
            owner: self.owner.clone(),
            repo: self.repo.clone(),
            id: self.agent_task.clone().unwrap_or_default(),
            since: self.asked_at.clone(),
        }
    }

    fn status(&self) -> String {
        status_message(
            self.agent_task.as_deref().unwrap_or_default(),
            self.agent_state.as_deref().unwrap_or_default(),
            self.html_url.as_deref(),
        )
    }
}

impl CreateState {
    fn task_path(&self) -> String {
        format!(
            "{}/{}",
            CreatePullRequest::tasks_path(self),
            self.agent_task.as_deref().unwrap_or_default()
        )
    }
}

/// Whether a listed agent task was created at or after `since`. A task without a
/// readable `created_at` counts as recent: reading one task too many is
/// cheaper than starting a second agent run.
fn created_since(task: &Value, since: &str) -> bool {
    task.get("created_at")
        .and_then(Value::as_str)
        .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .zip(chrono::DateTime::parse_from_rfc3339(since).ok())
        .is_none_or(|(at, since)| at >= since)
}

/// The task's `statusMessage` for an agent task that has not ended. GitHub
/// documents the states (`queued`, `in_progress`, `idle`,
/// `waiting_for_user`, …) but not what `idle` means, so it is reported as
/// it is and watched like any other live state, not taken as an end.
fn status_message(id: &str, state: &str, html_url: Option<&str>) -> String {
    let open = html_url.unwrap_or("the agent task on GitHub");
    match state {
        "queued" => format!("Copilot agent task {id} is queued"),
        "in_progress" => format!("Copilot is working on agent task {id} (in_progress)"),
        "waiting_for_user" => {
            format!("Copilot is waiting for you (waiting_for_user): open {open}")
        }
        "idle" => format!(
            "Copilot agent task {id} is idle: Copilot is not working on it now; \
             it goes on when someone follows up on GitHub: {open}"
        ),
        other => format!("Copilot agent task {id} is {other}: {open}"),
    }
}

fn classify(error: crate::github::GitHubError, what: &str) -> CreateError {
    if error.is_transient() {
        CreateError::Job(error.into_job_error(what))
    } else {
        CreateError::Refused(format!("{what} failed: {error}"))
    }
}

/// The global id of the pull request an agent task produced: its artifact
/// of provider `github` and type `pull` (GitHub documents `data` as the
/// resource's `id` and `global_id`).
fn pull_artifact(task: &Value) -> Option<&str> {
    task.get("artifacts")?
        .as_array()?
        .iter()
        .find(|a| a["provider"] == "github" && a["type"] == "pull")?
        .pointer("/data/global_id")?
        .as_str()
}

/// What GitHub says of the pull request `id`: `Ok(Err(why))` when it cannot
/// be read for good (gone, no access), so the result says so instead of
/// failing the finished task; a transient failure retries the step.
async fn pull_request(shared: &Shared, id: &str) -> Result<Result<Value, String>, JobError> {
    let response = shared
        .github
        .graphql(crate::github::model::PULL_BY_ID, json!({ "id": id }), None)
        .await;
    let response = match response {
        Ok(response) => response,
        Err(e) if e.is_transient() => return Err(e.into_job_error("reading the pull request")),
        Err(e) => return Ok(Err(e.to_string())),
    };
    let node = response.data.get("node").cloned().unwrap_or(Value::Null);
    if node.get("number").is_some() {
        return Ok(Ok(node));
    }
    let why = response
        .errors
        .first()
        .map(|e| e.message.clone())
        .unwrap_or_else(|| format!("{id} is not a pull request GitHub shows"));
    Ok(Err(why))
}

/// `#12 "Fix the login" (open, draft): https://…/pull/12`.
fn pull_line(pull: &Value) -> String {
    let state = pull["state"].as_str().unwrap_or("?").to_lowercase();
    let draft = if pull["isDraft"] == true {
        ", draft"
    } else {
        ""
    };
    format!(
        "#{} \"{}\" ({state}{draft}): {}",
        pull["number"],
        pull["title"].as_str().unwrap_or_default(),
        pull["url"].as_str().unwrap_or_default()
    )
}

fn finish(
    state: &CreateState,
    task: &Value,
    pull: Option<Result<Value, String>>,
) -> CallToolResult {
    let end = task
        .get("state")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned();
    let url = task
        .get("html_url")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| state.html_url.clone())
        .unwrap_or_default();
    let error = task
        .get("sessions")
        .and_then(Value::as_array)
        .and_then(|s| s.iter().rev().find_map(|s| s.pointer("/error/message")))
        .and_then(Value::as_str);
    let mut text = match (end.as_str(), error) {
        ("completed", _) => format!(
            "Copilot completed the agent task in {}/{}. {url}",
            state.owner, state.repo
        ),
        (other, Some(reason)) => format!("The Copilot agent task ended {other}: {reason}. {url}"),
        (other, None) => format!("The Copilot agent task ended {other}. {url}"),
    };
    let mut structured =
        json!({"outcome": end, "owner": state.owner, "repo": state.repo, "agent_task": task});
    match pull {
        Some(Ok(pull)) => {
            text.push_str(&format!("\nPull request {}", pull_line(&pull)));
            structured["pull_request"] = pull;
        }
        Some(Err(why)) => {
            text.push_str(&format!(
                "\nIts pull request could not be read ({why}); see the agent task."
            ));
            structured["pull_request_error"] = json!(why);
        }
        None if end == "completed" => {
            text.push_str("\nThe agent task names no pull request.");
        }
        None => {}
    }
    report::result(end != "completed", text, structured)
}
