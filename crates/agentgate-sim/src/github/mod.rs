//! A wire-faithful GitHub emulator: the GraphQL API subset (`POST /graphql` and the GHES
//! layout `POST /api/graphql`) and the REST routes that a Copilot cloud agent client
//! uses, with a simulated Copilot agent that opens and finishes pull requests.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use agentgate_sim::github::{DEFAULT_GITHUB_TOKEN, GithubConfig, GithubSim, serve};
//! let sim = GithubSim::new(GithubConfig { time_scale: 0.01, ..GithubConfig::default() });
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let api_url = format!("http://{}", listener.local_addr()?);
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(serve(listener, sim.router(), shutdown.clone()));
//! // GITHUB_API_URL=api_url, GITHUB_PERSONAL_ACCESS_TOKEN=DEFAULT_GITHUB_TOKEN
//! sim.faults().script(["502", "ok"]);
//! # Ok(()) }
//! ```
//!
//! Layout:
//! - `routes`: the routes and the front door (latency, auth, injected faults, the primary
//!   rate limit, `x-ratelimit-*` headers, body limit);
//! - `graphql` and `schema`: the GraphQL endpoint (async-graphql) and its schema subset;
//! - `rest`: timeline, comments, issues and pulls; `tasks`: the agent tasks API;
//! - `agent`: the simulated Copilot agent (assignment runs, `@copilot` review cycles,
//!   agent task runs) driven by background tasks;
//! - `seed`: the seed file format and the built-in seed; `state`: the data;
//! - `faults`: latency and injected failures; `wire`: REST shapes and errors; `ids`.

mod agent;
mod faults;
mod graphql;
mod ids;
mod rest;
mod routes;
mod schema;
pub mod seed;
mod state;
mod tasks;
mod wire;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use faults::{Faults, GithubFault, UnknownGithubFault};
pub use routes::MAX_BODY;
pub use seed::Seed;

/// The token accepted by default (`GITHUB_PERSONAL_ACCESS_TOKEN`).
pub const DEFAULT_GITHUB_TOKEN: &str = "ghp_AgentgateSimTokenForLocalTesting0001";
/// The login of the token's user in the built-in seed.
pub const DEFAULT_VIEWER: &str = "agentgate-user";
/// Copilot's bot node id (GraphQL `Bot.id`, REST `node_id`).
pub const COPILOT_BOT_ID: &str = "BOT_kgDOC9w8XQ";
/// Copilot's bot login in GraphQL.
pub const COPILOT_LOGIN: &str = "copilot-swe-agent";
/// Copilot's login in REST payloads.
pub const COPILOT_REST_LOGIN: &str = "Copilot";
/// Copilot's REST database id.
pub const COPILOT_DATABASE_ID: u64 = 198_982_749;
/// The `GraphQL-Features` flag needed to send `agentAssignment`.
pub const FEATURE_COPILOT_ASSIGNMENT: &str = "issues_copilot_assignment_api_support";
/// The `GraphQL-Features` flag needed to send `agentAssignment.model`.
pub const FEATURE_MODEL_SELECTION: &str = "coding_agent_model_selection";
/// The default primary rate-limit budget, points per hour (per resource).
pub const DEFAULT_RATE_LIMIT: u64 = 5000;

/// What the simulated agent does on an issue it is assigned to (see the crate docs of
/// `agent`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// PR after `pr_delay`, ready for review after `work_duration`.
    #[default]
    Normal,
    /// A Copilot error comment on the issue after `pr_delay`; no PR.
    FailsToStart,
    /// Like normal, but ends with `copilot_work_finished_failure` and an error comment.
    FinishesWithFailure,
    /// Like normal with `pr_delay` 30 s and `work_duration` 60 s (before the scale).
    Slow,
    /// Nothing happens after the assignment.
    Never,
}

/// The outcome of agent tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskScenario {
    /// `queued` → `in_progress` → `completed`.
    #[default]
    Completed,
    /// … → `failed` ("The agent failed: tests did not pass").
    Failed,
    /// … → `timed_out`.
    TimedOut,
    /// … → `cancelled`.
    Cancelled,
    /// … → `waiting_for_user` for `work_duration` → `completed`.
    WaitingForUser,
    /// … → `idle` for `work_duration` → `completed`. GitHub lists `idle` among the
    /// states without saying what it means; the emulator only passes through it.
    Idle,
}

/// How an emulator is set up. `Debug` redacts the token.
#[derive(Clone)]
pub struct GithubConfig {
    /// The token requests must carry (`Authorization: bearer …` or `token …`).
    pub token: String,
    /// More tokens accepted, as the same user: the emulator knows one
    /// viewer, but a test can see which token each request carried (say, a
    /// principal's own token instead of the gateway's).
    pub more_tokens: Vec<String>,
    /// Fixed latency added to every request.
    pub latency: Duration,
    /// Random extra latency, uniform in `0..=latency_jitter`.
    pub latency_jitter: Duration,
    /// Multiplies every simulated delay (0.1 = ten times faster).
    pub time_scale: f64,
    /// The primary rate-limit budget per hour, for `graphql` and for `core`.
    pub rate_limit: u64,
    /// The initial data.
    pub seed: Seed,
    /// Base of `html_url`/`url` fields (`https://github.com` by default).
    pub html_base_url: String,
}

impl std::fmt::Debug for GithubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubConfig")
            .field("token", &"<redacted>")
            .field("more_tokens", &self.more_tokens.len())
            .field("latency", &self.latency)
            .field("latency_jitter", &self.latency_jitter)
            .field("time_scale", &self.time_scale)
            .field("rate_limit", &self.rate_limit)
            .field("seed", &self.seed)
            .field("html_base_url", &self.html_base_url)
            .finish()
    }
}

impl Default for GithubConfig {
    fn default() -> Self {
        Self {
            token: DEFAULT_GITHUB_TOKEN.into(),
            more_tokens: Vec::new(),
            latency: Duration::ZERO,
            latency_jitter: Duration::ZERO,
            time_scale: 1.0,
            rate_limit: DEFAULT_RATE_LIMIT,
            seed: Seed::default(),
            html_base_url: "https://github.com".into(),
        }
    }
}

/// An `agentAssignment` as received by `updateIssue`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedAssignment {
    /// `owner/name` of the issue's repository.
    pub repo: String,
    /// The issue number.
    pub issue: u64,
    /// `assigneeIds` of the input.
    pub assignee_ids: Vec<String>,
    /// `agentAssignment.targetRepositoryId`.
    pub target_repository_id: Option<String>,
    /// `agentAssignment.baseRef`.
    pub base_ref: Option<String>,
    /// `agentAssignment.customInstructions`.
    pub custom_instructions: Option<String>,
    /// `agentAssignment.customAgent`.
    pub custom_agent: Option<String>,
    /// `agentAssignment.model`.
    pub model: Option<String>,
    /// Whether this mutation started an agent run (false for a repeat assignment).
    pub started_run: bool,
    /// When it was received.
    pub at: DateTime<Utc>,
}

/// Counters, as a snapshot from [`GithubSim::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// GraphQL requests that passed the front door (auth, faults, rate limit).
    pub graphql_requests: u64,
    /// … of which queries.
    pub graphql_queries: u64,
    /// … of which mutations.
    pub graphql_mutations: u64,
    /// Top-level `repository` fields (aliases) in the largest query.
    pub max_graphql_targets: usize,
    /// REST requests that passed the front door, by route label (`GET /repos/{owner}/…`).
    pub rest_requests: BTreeMap<String, u64>,
    /// The JSON body of every REST write that parsed, with its route label, oldest
    /// first: what tests check against GitHub's documented request schemas.
    pub rest_bodies: Vec<(String, serde_json::Value)>,
    /// `updateIssue` mutations that started an agent run.
    pub assignments: u64,
    /// `updateIssue` mutations that kept Copilot assigned (no new run).
    pub repeat_assignments: u64,
    /// Agent tasks created.
    pub agent_tasks_created: u64,
    /// Agent runs on issues that are over: their PR's work ended, or they
    /// stopped without a PR (Copilot unassigned in time, failed to start, a
    /// scenario that never opens one). Lets a test see that a run decided
    /// before it checks what the run did not do.
    pub issue_runs_over: u64,
    /// Failures injected (scripted, random, primary limit).
    pub faults_injected: u64,
    /// Successful answers replaced by a 502 after the request was handled (see
    /// [`Faults::set_lost_rate`]).
    pub answers_lost: u64,
    /// Every `agentAssignment` received, oldest first.
    pub agent_assignments: Vec<RecordedAssignment>,
    assignments_by_issue: BTreeMap<(String, u64), u64>,
    comments_by_item: BTreeMap<(String, u64), u64>,
}

impl Stats {
    /// Agent runs started on this issue (`owner_repo` is `owner/name`).
    pub fn assignments_for(&self, owner_repo: &str, number: u64) -> u64 {
        self.assignments_by_issue
            .get(&(owner_repo.to_ascii_lowercase(), number))
            .copied()
            .unwrap_or(0)
    }

    /// Comments posted through REST on this issue or pull request.
    pub fn comments_on(&self, owner_repo: &str, number: u64) -> u64 {
        self.comments_by_item
            .get(&(owner_repo.to_ascii_lowercase(), number))
            .copied()
            .unwrap_or(0)
    }

    /// REST requests with this route label.
    pub fn rest_requests_for(&self, label: &str) -> u64 {
        self.rest_requests.get(label).copied().unwrap_or(0)
    }

    pub(crate) fn count_assignment(&mut self, key: &str, number: u64) {
        self.assignments += 1;
        *self
            .assignments_by_issue
            .entry((key.to_owned(), number))
            .or_default() += 1;
    }

    pub(crate) fn count_comment(&mut self, key: &str, number: u64) {
        *self
            .comments_by_item
            .entry((key.to_owned(), number))
            .or_default() += 1;
    }
}

/// A pull request, as a snapshot from [`GithubSim::pull_request`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PullRequestInfo {
    /// Number.
    pub number: u64,
    /// Title.
    pub title: String,
    /// Body.
    pub body: String,
    /// `OPEN`, `CLOSED` or `MERGED`.
    pub state: String,
    /// Draft.
    pub is_draft: bool,
    /// Author login (`copilot-swe-agent` for the agent's PRs).
    pub author: String,
    /// Head branch.
    pub head_ref: String,
    /// Base branch.
    pub base_ref: String,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last updated.
    pub updated_at: DateTime<Utc>,
}

/// A timeline entry, as a snapshot from [`GithubSim::timeline`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimelineEntry {
    /// The REST event name (`assigned`, `cross-referenced`, `commented`,
    /// `copilot_work_finished`, …).
    pub event: String,
    /// Actor login.
    pub actor: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// The comment body (`commented`), the assignee (`assigned`/`unassigned`), the
    /// source PR number (`cross-referenced`), else empty.
    pub detail: String,
}

/// A GitHub emulator. Cheap to clone; clones share one state.
#[derive(Clone, Debug)]
pub struct GithubSim {
    inner: Arc<Inner>,
}

struct Inner {
    config: GithubConfig,
    faults: Faults,
    state: Mutex<state::State>,
    schema: schema::GithubSchema,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("config", &self.config)
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

impl GithubSim {
    /// An emulator serving `config.seed`.
    pub fn new(config: GithubConfig) -> Self {
        let faults = Faults::default();
        faults.set_latency(config.latency, config.latency_jitter);
        let state = state::State::new(&config.seed, config.time_scale, config.rate_limit);
        Self {
            inner: Arc::new(Inner {
                config,
                faults,
                state: Mutex::new(state),
                schema: schema::build(),
            }),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, state::State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// All routes (see the `routes` module docs); serve them with [`serve`].
    pub fn router(&self) -> axum::Router {
        routes::router(self.clone())
    }

    /// The configuration.
    pub fn config(&self) -> &GithubConfig {
        &self.inner.config
    }

    /// The fault and latency knobs.
    pub fn faults(&self) -> &Faults {
        &self.inner.faults
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.state().stats.clone()
    }

    /// The GraphQL schema in SDL (for documentation and debugging).
    pub fn schema_sdl(&self) -> String {
        self.inner.schema.sdl()
    }

    /// Sets the agent's timings (before the time scale).
    pub fn set_timings(&self, pr_delay: Duration, work_duration: Duration) {
        let mut st = self.state();
        st.timings.pr_delay = pr_delay;
        st.timings.work_duration = work_duration;
    }

    /// Sets the time scale (0.1 = ten times faster).
    pub fn set_time_scale(&self, scale: f64) {
        self.state().time_scale = scale.max(0.0);
    }

    /// Adds a repository from a seed entry (replacing one of the same name).
    pub fn add_repo(&self, repo: &seed::RepoSeed) {
        self.state().add_repo(repo);
    }

    /// Adds an open issue to `owner_repo` (created with Copilot enabled if unknown);
    /// returns its number.
    pub fn add_issue(&self, owner_repo: &str, title: &str, scenario: Scenario) -> u64 {
        let (owner, name) = owner_repo.split_once('/').unwrap_or(("acme", owner_repo));
        let key = state::repo_key(owner, name);
        let mut st = self.state();
        if !st.repos.contains_key(&key) {
            st.add_repo(&seed::RepoSeed {
                owner: owner.into(),
                name: name.into(),
                ..seed::RepoSeed::default()
            });
        }
        let issue = seed::IssueSeed {
            title: title.into(),
            scenario,
            ..seed::IssueSeed::default()
        };
        st.add_issue(&key, &issue).unwrap_or(0)
    }

    /// The node id of an issue or pull request.
    pub fn node_id(&self, owner_repo: &str, number: u64) -> Option<String> {
        let st = self.state();
        st.item(&owner_repo.to_ascii_lowercase(), number)
            .map(|i| i.node_id.clone())
    }

    /// The node id of a repository.
    pub fn repo_node_id(&self, owner_repo: &str) -> Option<String> {
        let st = self.state();
        st.repos
            .get(&owner_repo.to_ascii_lowercase())
            .map(|r| r.node_id.clone())
    }

    /// The node id of a user (or `copilot-swe-agent`).
    pub fn user_node_id(&self, login: &str) -> Option<String> {
        self.state().users.get(login).map(|a| a.node_id.clone())
    }

    /// The assignee logins of an issue or pull request (empty if unknown).
    pub fn issue_assignees(&self, owner_repo: &str, number: u64) -> Vec<String> {
        let st = self.state();
        st.item(&owner_repo.to_ascii_lowercase(), number)
            .map(|i| i.assignees.clone())
            .unwrap_or_default()
    }

    /// A pull request (`None` for an issue or an unknown number).
    pub fn pull_request(&self, owner_repo: &str, number: u64) -> Option<PullRequestInfo> {
        let st = self.state();
        let item = st.item(&owner_repo.to_ascii_lowercase(), number)?;
        let pr = item.pr.as_ref()?;
        Some(PullRequestInfo {
            number,
            title: item.title.clone(),
            body: item.body.clone(),
            state: schema::state_name(item.state).into(),
            is_draft: pr.draft,
            author: item.author.clone(),
            head_ref: pr.head_ref.clone(),
            base_ref: pr.base_ref.clone(),
            created_at: item.created_at,
            updated_at: item.updated_at,
        })
    }

    /// The pull requests of a repository, by number.
    pub fn pull_requests(&self, owner_repo: &str) -> Vec<PullRequestInfo> {
        let numbers: Vec<u64> = {
            let st = self.state();
            st.repos
                .get(&owner_repo.to_ascii_lowercase())
                .map(|r| {
                    r.items
                        .values()
                        .filter(|i| i.pr.is_some())
                        .map(|i| i.number)
                        .collect()
                })
                .unwrap_or_default()
        };
        numbers
            .into_iter()
            .filter_map(|n| self.pull_request(owner_repo, n))
            .collect()
    }

    /// The timeline of an issue or pull request, oldest first.
    pub fn timeline(&self, owner_repo: &str, number: u64) -> Vec<TimelineEntry> {
        let st = self.state();
        let Some(item) = st.item(&owner_repo.to_ascii_lowercase(), number) else {
            return Vec::new();
        };
        item.timeline
            .iter()
            .map(|e| TimelineEntry {
                event: e.kind.rest_name().into(),
                actor: e.actor.clone(),
                created_at: e.created_at,
                detail: match &e.kind {
                    state::EventKind::Comment { body, .. } => body.clone(),
                    state::EventKind::Assigned { assignee }
                    | state::EventKind::Unassigned { assignee } => assignee.clone(),
                    state::EventKind::CrossReferenced { source, .. } => source.to_string(),
                    _ => String::new(),
                },
            })
            .collect()
    }

    /// The state of an agent task (`queued`, `in_progress`, `completed`, …).
    pub fn agent_task_state(&self, task_id: &str) -> Option<String> {
        let st = self.state();
        st.tasks
            .iter()
            .find(|t| t.id == task_id)
            .map(|t| t.state.as_str().to_owned())
    }

    /// Marks an open pull request merged (as a human merging it would).
    pub fn merge_pull_request(&self, owner_repo: &str, number: u64) -> bool {
        agent::close_item(self, &owner_repo.to_ascii_lowercase(), number, true)
    }

    /// Converts an open pull request back to a draft (as a human would).
    pub fn convert_to_draft(&self, owner_repo: &str, number: u64) -> bool {
        let key = owner_repo.to_ascii_lowercase();
        let mut st = self.state();
        let viewer = st.viewer.clone();
        let Some(pr) = st.item_mut(&key, number).and_then(|i| i.pr.as_mut()) else {
            return false;
        };
        if pr.draft {
            return false;
        }
        pr.draft = true;
        st.push_event(&key, number, &viewer, state::EventKind::ConvertToDraft);
        true
    }

    /// Closes an issue or pull request.
    pub fn close(&self, owner_repo: &str, number: u64) -> bool {
        agent::close_item(self, &owner_repo.to_ascii_lowercase(), number, false)
    }
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then finishes the
/// requests in flight.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}
