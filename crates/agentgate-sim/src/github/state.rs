//! The emulator's data: users, repositories with their issues and pull requests (one
//! number space per repository), timelines, agent tasks, rate-limit buckets and counters.
//! Everything lives behind one mutex in [`super::GithubSim`]; the helpers here never
//! block or await.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};

use super::ids::node_id;
use super::seed::{IssueSeed, RepoSeed, Seed};
use super::{
    COPILOT_BOT_ID, COPILOT_DATABASE_ID, COPILOT_LOGIN, RecordedAssignment, Scenario, Stats,
    TaskScenario,
};

/// A user or a bot.
#[derive(Clone, Debug)]
pub(crate) struct Actor {
    pub login: String,
    pub db_id: u64,
    pub node_id: String,
    pub name: Option<String>,
    pub bot: bool,
}

/// An issue's or pull request's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItemState {
    Open,
    Closed,
    Merged,
}

/// What a pull request has on top of an issue.
#[derive(Clone, Debug)]
pub(crate) struct PrInfo {
    pub draft: bool,
    pub head_ref: String,
    pub base_ref: String,
    pub merged_at: Option<DateTime<Utc>>,
}

/// A timeline event.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    pub db_id: u64,
    pub node_id: String,
    pub created_at: DateTime<Utc>,
    pub actor: String,
    pub kind: EventKind,
}

#[derive(Clone, Debug)]
pub(crate) enum EventKind {
    /// `source` is a pull request of the same repository.
    CrossReferenced {
        source: u64,
        will_close: bool,
    },
    Comment {
        body: String,
        updated_at: DateTime<Utc>,
    },
    Assigned {
        assignee: String,
    },
    Unassigned {
        assignee: String,
    },
    ReadyForReview,
    ConvertToDraft,
    Closed,
    Merged,
    CopilotWorkStarted,
    CopilotWorkFinished,
    CopilotWorkFinishedFailure,
}

impl EventKind {
    /// The REST `event` name.
    pub(crate) fn rest_name(&self) -> &'static str {
        match self {
            Self::CrossReferenced { .. } => "cross-referenced",
            Self::Comment { .. } => "commented",
            Self::Assigned { .. } => "assigned",
            Self::Unassigned { .. } => "unassigned",
            Self::ReadyForReview => "ready_for_review",
            Self::ConvertToDraft => "convert_to_draft",
            Self::Closed => "closed",
            Self::Merged => "merged",
            Self::CopilotWorkStarted => "copilot_work_started",
            Self::CopilotWorkFinished => "copilot_work_finished",
            Self::CopilotWorkFinishedFailure => "copilot_work_finished_failure",
        }
    }

    fn node_prefix(&self) -> &'static str {
        match self {
            Self::CrossReferenced { .. } => "CRE_lADO",
            Self::Comment { .. } => "IC_kwDO",
            Self::Assigned { .. } => "AE_lADO",
            Self::Unassigned { .. } => "UAE_lADO",
            Self::ReadyForReview => "RFRE_lADO",
            Self::ConvertToDraft => "CTDE_lADO",
            Self::Closed => "CE_lADO",
            Self::Merged => "ME_lADO",
            Self::CopilotWorkStarted
            | Self::CopilotWorkFinished
            | Self::CopilotWorkFinishedFailure => "CWE_lADO",
        }
    }
}

/// An issue or a pull request (they share the repository's number space).
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub number: u64,
    pub db_id: u64,
    pub node_id: String,
    pub title: String,
    pub body: String,
    pub state: ItemState,
    pub pr: Option<PrInfo>,
    pub author: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub closed_at: Option<DateTime<Utc>>,
    pub assignees: Vec<String>,
    pub scenario: Scenario,
    pub timeline: Vec<Event>,
    /// The simulated agent run (or review cycle) in progress, if any.
    pub active_run: Option<u64>,
}

/// A repository.
#[derive(Clone, Debug)]
pub(crate) struct Repo {
    pub owner: String,
    pub name: String,
    pub db_id: u64,
    pub node_id: String,
    pub default_branch: String,
    pub copilot_enabled: bool,
    /// Human suggested actors, in order (Copilot comes after them when enabled).
    pub humans: Vec<String>,
    pub items: BTreeMap<u64, Item>,
    pub next_number: u64,
    pub agent_task_scenario: TaskScenario,
}

impl Repo {
    pub(crate) fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// Suggested actors that can be assigned: humans, then Copilot if enabled.
    pub(crate) fn suggested(&self) -> Vec<String> {
        let mut all = self.humans.clone();
        if self.copilot_enabled {
            all.push(COPILOT_LOGIN.to_owned());
        }
        all
    }
}

/// An agent task's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AgentTaskState {
    Queued,
    InProgress,
    Completed,
    Failed,
    WaitingForUser,
    Idle,
    TimedOut,
    Cancelled,
}

impl AgentTaskState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::WaitingForUser => "waiting_for_user",
            Self::Idle => "idle",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::TimedOut | Self::Cancelled
        )
    }
}

/// An agent task (one session).
#[derive(Clone, Debug)]
pub(crate) struct Task {
    pub id: String,
    pub session_id: String,
    pub repo: String,
    pub name: String,
    pub state: AgentTaskState,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub prompt: String,
    pub base_ref: String,
    pub head_ref: String,
    pub model: Option<String>,
    pub create_pull_request: bool,
    pub pull_request: Option<u64>,
    pub error: Option<String>,
    pub scenario: TaskScenario,
}

/// A primary rate-limit bucket (`graphql` or `core`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bucket {
    pub limit: u64,
    pub used: u64,
    pub reset: u64,
}

impl Bucket {
    fn new(limit: u64) -> Self {
        Self {
            limit,
            used: 0,
            reset: epoch_now() + 3600,
        }
    }

    /// Starts a new window when the old one is over.
    pub(crate) fn refresh(&mut self) {
        let now = epoch_now();
        if now >= self.reset {
            self.used = 0;
            self.reset = now + 3600;
        }
    }

    pub(crate) fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

pub(crate) fn epoch_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Timings before the time scale is applied.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timings {
    pub pr_delay: Duration,
    pub work_duration: Duration,
}

/// All mutable state.
#[derive(Debug)]
pub(crate) struct State {
    pub viewer: String,
    pub users: Arc<BTreeMap<String, Actor>>,
    pub repos: BTreeMap<String, Repo>,
    pub tasks: Vec<Task>,
    pub timings: Timings,
    pub time_scale: f64,
    pub stats: Stats,
    pub graphql_bucket: Bucket,
    pub core_bucket: Bucket,
    next_db_id: u64,
    next_run: u64,
    last_ts: DateTime<Utc>,
}

/// The map key of a repository: `owner/name`, lowercased (GitHub is case-insensitive).
pub(crate) fn repo_key(owner: &str, name: &str) -> String {
    format!("{owner}/{name}").to_ascii_lowercase()
}

impl State {
    pub(crate) fn new(seed: &Seed, time_scale: f64, rate_limit: u64) -> Self {
        let mut users = BTreeMap::new();
        users.insert(
            COPILOT_LOGIN.to_owned(),
            Actor {
                login: COPILOT_LOGIN.to_owned(),
                db_id: COPILOT_DATABASE_ID,
                node_id: COPILOT_BOT_ID.to_owned(),
                name: None,
                bot: true,
            },
        );
        let mut st = Self {
            viewer: seed.viewer.clone(),
            users: Arc::new(users),
            repos: BTreeMap::new(),
            tasks: Vec::new(),
            timings: Timings {
                pr_delay: Duration::from_secs_f64(seed.timings.pr_delay.max(0.0)),
                work_duration: Duration::from_secs_f64(seed.timings.work_duration.max(0.0)),
            },
            time_scale: time_scale.max(0.0),
            stats: Stats::default(),
            graphql_bucket: Bucket::new(rate_limit),
            core_bucket: Bucket::new(rate_limit),
            next_db_id: 1_000_000,
            next_run: 1,
            last_ts: DateTime::<Utc>::MIN_UTC,
        };
        let viewer = seed.viewer.clone();
        st.ensure_user(&viewer, None);
        for user in &seed.users {
            st.ensure_user(&user.login, user.name.clone());
        }
        for repo in &seed.repositories {
            st.add_repo(repo);
        }
        st
    }

    pub(crate) fn next_db_id(&mut self) -> u64 {
        self.next_db_id += 1;
        self.next_db_id
    }

    pub(crate) fn next_run(&mut self) -> u64 {
        self.next_run += 1;
        self.next_run
    }

    /// The current time at second precision, never earlier than a time handed out before.
    pub(crate) fn now(&mut self) -> DateTime<Utc> {
        let wall = Utc::now();
        let secs = DateTime::<Utc>::from_timestamp(wall.timestamp(), 0).unwrap_or(wall);
        if secs > self.last_ts {
            self.last_ts = secs;
        }
        self.last_ts
    }

    /// The user with this login, created (as a human) if unknown.
    pub(crate) fn ensure_user(&mut self, login: &str, name: Option<String>) {
        if self.users.contains_key(login) {
            return;
        }
        let db_id = self.next_db_id();
        let actor = Actor {
            login: login.to_owned(),
            db_id,
            node_id: node_id("U_kgDO", db_id),
            name,
            bot: false,
        };
        Arc::make_mut(&mut self.users).insert(login.to_owned(), actor);
    }

    /// Adds (or replaces) a repository and its issues.
    pub(crate) fn add_repo(&mut self, seed: &RepoSeed) {
        let db_id = self.next_db_id();
        let mut humans = Vec::new();
        let push = |login: &str, humans: &mut Vec<String>| {
            if !humans.iter().any(|h| h == login) && login != COPILOT_LOGIN {
                humans.push(login.to_owned());
            }
        };
        for login in &seed.collaborators {
            push(login, &mut humans);
        }
        for i in 1..=seed.extra_suggested_actors {
            push(&format!("{}-dev-{i:03}", seed.owner), &mut humans);
        }
        push(&self.viewer.clone(), &mut humans);
        for login in humans.clone() {
            self.ensure_user(&login, None);
        }
        let repo = Repo {
            owner: seed.owner.clone(),
            name: seed.name.clone(),
            db_id,
            node_id: node_id("R_kgDO", db_id),
            default_branch: seed.default_branch.clone(),
            copilot_enabled: seed.copilot_enabled,
            humans,
            items: BTreeMap::new(),
            next_number: 1,
            agent_task_scenario: seed.agent_task_scenario,
        };
        let key = repo_key(&seed.owner, &seed.name);
        self.repos.insert(key.clone(), repo);
        for issue in &seed.issues {
            self.add_issue(&key, issue);
        }
    }

    /// Adds an issue; returns its number (`None` if the repository is unknown).
    pub(crate) fn add_issue(&mut self, key: &str, seed: &IssueSeed) -> Option<u64> {
        for login in &seed.assignees {
            self.ensure_user(login, None);
        }
        let now = self.now();
        let db_id = self.next_db_id();
        let viewer = self.viewer.clone();
        let repo = self.repos.get_mut(key)?;
        let number = seed.number.unwrap_or(repo.next_number);
        repo.next_number = repo.next_number.max(number + 1);
        let state = if seed.state.eq_ignore_ascii_case("closed") {
            ItemState::Closed
        } else {
            ItemState::Open
        };
        repo.items.insert(
            number,
            Item {
                number,
                db_id,
                node_id: node_id("I_kwDO", db_id),
                title: seed.title.clone(),
                body: seed.body.clone(),
                state,
                pr: None,
                author: viewer,
                created_at: now,
                updated_at: now,
                closed_at: (state == ItemState::Closed).then_some(now),
                assignees: seed.assignees.clone(),
                scenario: seed.scenario,
                timeline: Vec::new(),
                active_run: None,
            },
        );
        Some(number)
    }

    /// Opens a pull request authored by `author`; returns its number.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open_pull_request(
        &mut self,
        key: &str,
        title: String,
        body: String,
        author: &str,
        head_ref: String,
        base_ref: String,
        draft: bool,
        scenario: Scenario,
    ) -> Option<u64> {
        let now = self.now();
        let db_id = self.next_db_id();
        let viewer = self.viewer.clone();
        let repo = self.repos.get_mut(key)?;
        let number = repo.next_number;
        repo.next_number += 1;
        let mut assignees = vec![author.to_owned()];
        if author != viewer {
            assignees.push(viewer);
        }
        repo.items.insert(
            number,
            Item {
                number,
                db_id,
                node_id: node_id("PR_kwDO", db_id),
                title,
                body,
                state: ItemState::Open,
                pr: Some(PrInfo {
                    draft,
                    head_ref,
                    base_ref,
                    merged_at: None,
                }),
                author: author.to_owned(),
                created_at: now,
                updated_at: now,
                closed_at: None,
                assignees,
                scenario,
                timeline: Vec::new(),
                active_run: None,
            },
        );
        Some(number)
    }

    /// Appends an event to an item's timeline (and bumps its `updatedAt`); returns the
    /// event's database id.
    pub(crate) fn push_event(
        &mut self,
        key: &str,
        number: u64,
        actor: &str,
        kind: EventKind,
    ) -> Option<u64> {
        let now = self.now();
        let db_id = self.next_db_id();
        let item = self.repos.get_mut(key)?.items.get_mut(&number)?;
        let node_id = node_id(kind.node_prefix(), db_id);
        item.timeline.push(Event {
            db_id,
            node_id,
            created_at: now,
            actor: actor.to_owned(),
            kind,
        });
        item.updated_at = now;
        Some(db_id)
    }

    pub(crate) fn item(&self, key: &str, number: u64) -> Option<&Item> {
        self.repos.get(key)?.items.get(&number)
    }

    pub(crate) fn item_mut(&mut self, key: &str, number: u64) -> Option<&mut Item> {
        self.repos.get_mut(key)?.items.get_mut(&number)
    }

    /// The login of the actor with this node id.
    pub(crate) fn actor_by_node_id(&self, id: &str) -> Option<String> {
        self.users
            .values()
            .find(|a| a.node_id == id)
            .map(|a| a.login.clone())
    }

    /// The repository key and number of the issue or pull request with this node id.
    pub(crate) fn item_by_node_id(&self, id: &str) -> Option<(String, u64)> {
        self.repos.iter().find_map(|(key, repo)| {
            repo.items
                .values()
                .find(|i| i.node_id == id)
                .map(|i| (key.clone(), i.number))
        })
    }

    /// Scales a timing by the time scale.
    pub(crate) fn scaled(&self, d: Duration) -> Duration {
        d.mul_f64(self.time_scale)
    }

    pub(crate) fn record_assignment(&mut self, assignment: RecordedAssignment) {
        self.stats.agent_assignments.push(assignment);
    }
}
