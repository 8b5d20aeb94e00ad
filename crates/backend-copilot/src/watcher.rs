//! One watcher per instance for every Copilot task it runs.
//!
//! A task does not poll GitHub itself. Its step registers what it waits on
//! (an issue, a pull request or an agent task) and sleeps; the watcher polls
//! every registered target on a shared clock and nudges a task only when its
//! target changed:
//!
//! ```text
//! step ── watch(task, target, known fingerprint) ──▶ CopilotWatcher
//!                                                    │ every tick (poll_min):
//!                                                    │  due targets → GraphQL, 25 aliases per request
//!                                                    │  agent tasks → one REST list per repository
//!                                                    │  changed? keep the observation, nudge.nudge(task)
//! step ◀── take(task) ───────────────────────────────┘
//! ```
//!
//! Targets poll on a grid: a target's interval is a power-of-two multiple of
//! the tick (1 s, 2 s, 4 s, ... from the tool's poll policy by age), so the
//! targets due on a tick are due together and share requests: N targets cost
//! ⌈N/25⌉ GraphQL requests per tick at most. The same policy gives the
//! task's `pollIntervalMs`.
//!
//! Nothing here is durable, on purpose: the task's checkpoint holds what it
//! knows (the fingerprint of the last observation it applied), and a step
//! re-registers on every run, so a restarted or different instance rebuilds
//! the watch from the store and nudges only for changes the task has not seen.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentgate_backend::Nudge;
use agentgate_backend::{PollPolicy, TaskId, TaskPhase};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::github::model::{self, AgentTaskList, WatchedIssue, WatchedPull};
use crate::github::{GitHub, GitHubError};

/// Aliases per batched GraphQL request: GitHub's node limits are generous,
/// but a small document keeps each request cheap (1 point) and fast.
pub const BATCH: usize = 25;
/// A registration not refreshed by its task for this long is dropped (the
/// task ended, or another instance runs it now).
const STALE_AFTER: Duration = Duration::from_secs(180);
/// A nudge not acted on is repeated after this long (the task was in a step).
const RENUDGE_AFTER: Duration = Duration::from_secs(1);

/// An agent task to look for in its repository's listing: our task, the
/// agent task id, and the time its watch began.
type AgentWatch = (TaskId, String, String);

/// What a task waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// An issue Copilot was assigned to: its PR or its failure comment.
    Issue {
        owner: String,
        repo: String,
        number: i64,
        /// Timeline items older than this are not ours.
        since: String,
    },
    /// A pull request Copilot works on.
    Pull {
        owner: String,
        repo: String,
        number: i64,
        since: String,
    },
    /// An agent task of the Agent tasks API.
    AgentTask {
        owner: String,
        repo: String,
        id: String,
        since: String,
    },
}

/// What the watcher saw of a target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Observation {
    Issue(WatchedIssue),
    Pull(WatchedPull),
    AgentTask(Value),
    /// GitHub says the target does not exist (any more) or cannot be seen.
    Gone {
        message: String,
    },
}

impl Observation {
    /// A stable digest, stored in the task's checkpoint as what it knows.
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let digest = Sha256::digest(text.as_bytes());
        digest[..12].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A new observation for a task, taken by its step.
#[derive(Debug, Clone)]
pub struct Observed {
    pub observation: Observation,
    pub fingerprint: String,
}

#[derive(Debug)]
struct Entry {
    target: Target,
    known: Option<String>,
    pending: Option<Observed>,
    /// Poll on ticks that are multiples of this.
    every: u64,
    /// Poll on the next tick whatever the grid says (new registration).
    fresh: bool,
    refreshed: Instant,
    nudged: Option<Instant>,
}

/// Counters for tests, benchmarks and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatcherStats {
    pub ticks: u64,
    pub graphql_requests: u64,
    pub rest_requests: u64,
    /// The most requests sent in one tick.
    pub max_requests_per_tick: u64,
    pub targets: u64,
    pub nudges: u64,
}

/// The instance's watcher; share it (`Arc`) between the Copilot jobs.
#[derive(Debug)]
pub struct CopilotWatcher {
    github: GitHub,
    poll: PollPolicy,
    entries: Mutex<HashMap<TaskId, Entry>>,
    ticks: AtomicU64,
    graphql_requests: AtomicU64,
    rest_requests: AtomicU64,
    max_per_tick: AtomicU64,
    nudges: AtomicU64,
}

impl CopilotWatcher {
    pub fn new(github: GitHub, poll: PollPolicy) -> Self {
        Self {
            github,
            poll,
            entries: Mutex::new(HashMap::new()),
            ticks: AtomicU64::new(0),
            graphql_requests: AtomicU64::new(0),
            rest_requests: AtomicU64::new(0),
            max_per_tick: AtomicU64::new(0),
            nudges: AtomicU64::new(0),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn github(&self) -> &GitHub {
        &self.github
    }

    /// The tick: the shortest poll interval.
    pub fn tick(&self) -> Duration {
        self.poll.working.max(Duration::from_millis(100))
    }

    /// The interval a target `age` into its watch is polled at.
    pub fn interval(&self, age: Duration) -> Duration {
        self.poll
            .interval(TaskPhase::Working, age)
            .unwrap_or(self.poll.max)
    }

    /// Registers (or refreshes) what `task` waits on. `known` is the
    /// fingerprint of the last observation the task applied; `age` how long
    /// it has been watching (for the interval).
    pub fn watch(&self, task: &TaskId, target: Target, known: Option<String>, age: Duration) {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let tick = millis(self.tick()).max(1);
        let every = (millis(self.interval(age)) / tick).max(1);
        // Round down to a power of two so the grids of all targets nest.
        let every = 1u64 << (63 - every.leading_zeros());
        let mut entries = self.entries();
        match entries.get_mut(task) {
            Some(entry) => {
                if entry.target != target {
                    entry.pending = None;
                    entry.fresh = true;
                }
                entry.target = target;
                if entry.pending.is_none() {
                    entry.known = known;
                }
                entry.every = every;
                entry.refreshed = Instant::now();
            }
            None => {
                entries.insert(
                    task.clone(),
                    Entry {
                        target,
                        known,
                        pending: None,
                        every,
                        fresh: true,
                        refreshed: Instant::now(),
                        nudged: None,
                    },
                );
            }
        }
    }

    /// The observation waiting for `task`, if its target changed.
    pub fn take(&self, task: &TaskId) -> Option<Observed> {
        let mut entries = self.entries();
        let entry = entries.get_mut(task)?;
        entry.nudged = None;
        entry.pending.take()
    }

    /// Stops watching for `task` (it ended).
    pub fn forget(&self, task: &TaskId) {
        self.entries().remove(task);
    }

    pub fn stats(&self) -> WatcherStats {
        WatcherStats {
            ticks: self.ticks.load(Ordering::Relaxed),
            graphql_requests: self.graphql_requests.load(Ordering::Relaxed),
            rest_requests: self.rest_requests.load(Ordering::Relaxed),
            max_requests_per_tick: self.max_per_tick.load(Ordering::Relaxed),
            targets: self.entries().len() as u64,
            nudges: self.nudges.load(Ordering::Relaxed),
        }
    }

    /// Polls until `shutdown`, nudging tasks through `nudge`.
    pub async fn run(self: std::sync::Arc<Self>, nudge: Nudge, shutdown: CancellationToken) {
        let mut clock = tokio::time::interval(self.tick());
        clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut tick: u64 = 0;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = clock.tick() => {}
            }
            tick += 1;
            self.ticks.fetch_add(1, Ordering::Relaxed);
            if self.github.backoff().is_none() {
                let requests = self.poll_once(tick).await;
                self.max_per_tick.fetch_max(requests, Ordering::Relaxed);
            }
            self.deliver(&nudge).await;
        }
    }

    /// One tick: polls the due targets, returns how many requests it sent.
    async fn poll_once(&self, tick: u64) -> u64 {
        let mut graph = Vec::new();
        let mut agent: BTreeMap<(String, String), Vec<AgentWatch>> = BTreeMap::new();
        {
            let mut entries = self.entries();
            entries.retain(|_, e| e.refreshed.elapsed() < STALE_AFTER);
            for (id, entry) in entries.iter_mut() {
                if entry.pending.is_some() || !(entry.fresh || tick.is_multiple_of(entry.every)) {
                    continue;
                }
                entry.fresh = false;
                match &entry.target {
                    Target::AgentTask {
                        owner,
                        repo,
                        id: agent_id,
                        since,
                    } => agent
                        .entry((owner.clone(), repo.clone()))
                        .or_default()
                        .push((id.clone(), agent_id.clone(), since.clone())),
                    target => graph.push((id.clone(), target.clone())),
                }
            }
        }
        let mut requests = 0;
        for chunk in graph.chunks(BATCH) {
            requests += 1;
            self.graphql_requests.fetch_add(1, Ordering::Relaxed);
            match self.poll_batch(chunk).await {
                Ok(seen) => self.record(seen),
                Err(e) => {
                    tracing::warn!(error = %e, targets = chunk.len(), "Copilot watch query failed");
                    if matches!(e, GitHubError::RateLimited { .. }) {
                        return requests;
                    }
                }
            }
        }
        for ((owner, repo), tasks) in agent {
            requests += 1;
            self.rest_requests.fetch_add(1, Ordering::Relaxed);
            match self.poll_agent_tasks(&owner, &repo, &tasks).await {
                Ok(seen) => self.record(seen),
                Err(e) => {
                    tracing::warn!(error = %e, %owner, %repo, "Copilot agent task listing failed");
                    if matches!(e, GitHubError::RateLimited { .. }) {
                        return requests;
                    }
                }
            }
        }
        requests
    }

    fn record(&self, seen: Vec<(TaskId, Observation)>) {
        let mut entries = self.entries();
        for (id, observation) in seen {
            let Some(entry) = entries.get_mut(&id) else {
                continue;
            };
            let fingerprint = observation.fingerprint();
            if entry.known.as_deref() != Some(fingerprint.as_str()) {
                entry.known = Some(fingerprint.clone());
                entry.pending = Some(Observed {
                    observation,
                    fingerprint,
                });
            }
        }
    }

    /// Nudges every task with an observation it has not taken yet.
    async fn deliver(&self, nudge: &Nudge) {
        let due: Vec<TaskId> = {
            let mut entries = self.entries();
            entries
                .iter_mut()
                .filter(|(_, e)| e.pending.is_some())
                .filter(|(_, e)| e.nudged.is_none_or(|at| at.elapsed() >= RENUDGE_AFTER))
                .map(|(id, e)| {
                    e.nudged = Some(Instant::now());
                    id.clone()
                })
                .collect()
        };
        for id in due {
            self.nudges.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = nudge.nudge(&id).await {
                tracing::warn!(task = %id, error = %e, "could not nudge a Copilot task");
            }
        }
    }

    async fn poll_batch(
        &self,
        targets: &[(TaskId, Target)],
    ) -> Result<Vec<(TaskId, Observation)>, GitHubError> {
        let (query, variables) = batch_query(targets);
        let response = self.github.graphql(&query, variables, None).await?;
        // An error not tied to one alias (a timeout, a node limit) or no data
        // at all says nothing about the targets: skip the batch, never
        // conclude they are gone.
        let aliased = |e: &model::GraphqlError| {
            e.path
                .first()
                .and_then(Value::as_str)
                .is_some_and(|p| p.starts_with('t'))
        };
        if !response.data.is_object() || !response.errors.iter().all(aliased) {
            let message = response
                .errors
                .first()
                .map(|e| e.message.clone())
                .unwrap_or_else(|| "no data".into());
            return Err(GitHubError::Server {
                status: 200,
                message,
            });
        }
        let mut seen = Vec::new();
        for (n, (id, target)) in targets.iter().enumerate() {
            let alias = format!("t{n}");
            let error = response
                .errors
                .iter()
                .find(|e| e.path.first().and_then(Value::as_str) == Some(alias.as_str()));
            let field = match target {
                Target::Issue { .. } => "issue",
                _ => "pullRequest",
            };
            let node = response.data.get(&alias).and_then(|r| r.get(field));
            let observation = match (node, error) {
                (Some(node), _) if !node.is_null() => match target {
                    Target::Issue { .. } => serde_json::from_value(node.clone())
                        .map(Observation::Issue)
                        .map_err(|e| GitHubError::Decode(e.to_string())),
                    _ => serde_json::from_value(node.clone())
                        .map(Observation::Pull)
                        .map_err(|e| GitHubError::Decode(e.to_string())),
                },
                (_, Some(error)) if error.kind.as_deref() == Some("NOT_FOUND") => {
                    Ok(Observation::Gone {
                        message: error.message.clone(),
                    })
                }
                (_, Some(error)) => Err(GitHubError::from_graphql(error.clone())),
                (_, None) => Err(GitHubError::Decode(
                    "GitHub returned nothing for this target".into(),
                )),
            };
            match observation {
                Ok(observation) => seen.push((id.clone(), observation)),
                Err(e) => tracing::warn!(task = %id, error = %e, "Copilot watch target unreadable"),
            }
        }
        Ok(seen)
    }

    async fn poll_agent_tasks(
        &self,
        owner: &str,
        repo: &str,
        tasks: &[AgentWatch],
    ) -> Result<Vec<(TaskId, Observation)>, GitHubError> {
        let since = tasks
            .iter()
            .map(|(_, _, since)| since.as_str())
            .min()
            .unwrap_or_default()
            .to_owned();
        let list: AgentTaskList = self
            .github
            .rest_get(
                &format!("agents/repos/{owner}/{repo}/tasks"),
                &[
                    ("sort", "updated_at".into()),
                    ("direction", "desc".into()),
                    ("per_page", "100".into()),
                    ("since", since),
                ],
                Some(crate::AGENT_TASKS_API_VERSION),
            )
            .await?;
        let by_id: HashMap<String, &Value> = list
            .tasks
            .iter()
            .filter_map(|t| {
                let id = match t.get("id")? {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Some((id, t))
            })
            .collect();
        Ok(tasks
            .iter()
            .filter_map(|(task, agent_id, _)| {
                let found = by_id.get(agent_id)?;
                Some((task.clone(), Observation::AgentTask(model_subset(found))))
            })
            .collect())
    }
}

/// The fields of a listed agent task that matter for a change.
fn model_subset(task: &Value) -> Value {
    json!({
        "id": task.get("id"),
        "state": task.get("state"),
        "updated_at": task.get("updated_at"),
        "session_count": task.get("session_count"),
        "artifacts": task.get("artifacts"),
    })
}

/// One GraphQL document for many targets: alias `tN` per target, with its
/// own variables (never spliced into the text).
pub fn batch_query(targets: &[(TaskId, Target)]) -> (String, Value) {
    let mut params = Vec::new();
    let mut fields = Vec::new();
    let mut variables = serde_json::Map::new();
    for (n, (_, target)) in targets.iter().enumerate() {
        let (owner, repo, number, since, selection) = match target {
            Target::Issue {
                owner,
                repo,
                number,
                since,
            } => (owner, repo, *number, since, model::WATCH_ISSUE),
            Target::Pull {
                owner,
                repo,
                number,
                since,
            } => (owner, repo, *number, since, model::WATCH_PULL),
            Target::AgentTask { .. } => continue,
        };
        params.push(format!(
            "$o{n}:String!,$n{n}:String!,$i{n}:Int!,$s{n}:DateTime"
        ));
        let selection = selection
            .replace("$i", &format!("$i{n}"))
            .replace("$s", &format!("$s{n}"));
        fields.push(format!(
            "t{n}:repository(owner:$o{n},name:$n{n}){{{selection}}}"
        ));
        variables.insert(format!("o{n}"), json!(owner));
        variables.insert(format!("n{n}"), json!(repo));
        variables.insert(format!("i{n}"), json!(number));
        variables.insert(format!("s{n}"), json!(since));
    }
    let query = format!(
        "query({}){{rateLimit{{cost,remaining,resetAt}}\n{}}}",
        params.join(","),
        fields.join("\n")
    );
    (query, Value::Object(variables))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(n: i64) -> Target {
        Target::Issue {
            owner: "acme".into(),
            repo: "widgets".into(),
            number: n,
            since: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn batch_query_gives_each_target_its_alias_and_variables() {
        let targets = vec![
            (TaskId::generate(), issue(1)),
            (
                TaskId::generate(),
                Target::Pull {
                    owner: "acme".into(),
                    repo: "widgets".into(),
                    number: 7,
                    since: "2026-01-01T00:00:00Z".into(),
                },
            ),
        ];
        let (query, variables) = batch_query(&targets);
        assert!(query.contains("t0:repository(owner:$o0,name:$n0){issue(number:$i0)"));
        assert!(query.contains("t1:repository(owner:$o1,name:$n1){pullRequest(number:$i1)"));
        assert!(query.contains("since:$s1"));
        assert!(!query.contains("acme"), "values travel as variables");
        assert_eq!(variables["i1"], json!(7));
        assert_eq!(variables["n0"], json!("widgets"));
    }

    #[test]
    fn intervals_nest_on_a_power_of_two_grid() {
        let watcher = CopilotWatcher::new(
            GitHub::new(crate::settings::Endpoint::new("http://127.0.0.1:9", None).expect("url")),
            PollPolicy::default()
                .working(Duration::from_secs(1))
                .input_required(Duration::from_secs(1))
                .grow_every(Some(Duration::from_secs(15)))
                .max(Duration::from_secs(30)),
        );
        let id = TaskId::generate();
        for (age, every) in [(0, 1), (16, 2), (31, 4), (46, 8), (61, 16), (400, 16)] {
            watcher.watch(&id, issue(1), None, Duration::from_secs(age));
            assert_eq!(watcher.entries()[&id].every, every, "age {age}");
        }
    }

    #[test]
    fn fingerprint_changes_with_the_observation() {
        let a = Observation::Gone {
            message: "a".into(),
        };
        let b = Observation::Gone {
            message: "b".into(),
        };
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_ne!(a.fingerprint(), b.fingerprint());
    }
}
