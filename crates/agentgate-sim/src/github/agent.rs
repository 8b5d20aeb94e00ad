//! The simulated Copilot cloud agent, and the mutations that drive it.
//!
//! - **Assignment run**: `updateIssue` putting Copilot into an issue's assignees starts a
//!   background task. Per the issue's [`Scenario`]: after `pr_delay` a draft PR
//!   `[WIP] <title>` (head `copilot/fix-<n>`, base `agentAssignment.baseRef` or the
//!   default branch) is opened, cross-referenced from the issue, with
//!   `copilot_work_started` on its timeline; after `work_duration` the title loses
//!   `[WIP] `, the PR is ready for review and gets `copilot_work_finished`
//!   (`finishes_with_failure`: `copilot_work_finished_failure` and an error comment, still
//!   draft). `fails_to_start`: an error comment on the issue instead of a PR. `slow`:
//!   30 s / 60 s. `never`: nothing.
//! - Keeping Copilot assigned is a *repeat assignment* (no new run); removing it stops
//!   the run before its next step (an opened PR stays).
//! - **Review cycle**: a REST comment mentioning `@copilot` on an open Copilot PR starts
//!   `copilot_work_started` (after `pr_delay`) → `copilot_work_finished` plus a reply
//!   comment (after `work_duration`), or the failure variant.
//! - **Agent task run**: `queued` → `in_progress` (+ PR if asked) after `pr_delay` → the
//!   outcome after `work_duration` (see [`TaskScenario`]).
//!
//! All delays are multiplied by the time scale. Each step takes the state lock once, so
//! the events of a step are atomic and timestamps never go backwards.

use std::time::Duration;

use super::state::{AgentTaskState, EventKind, ItemState, State};
use super::{
    COPILOT_LOGIN, FEATURE_COPILOT_ASSIGNMENT, FEATURE_MODEL_SELECTION, GithubSim,
    RecordedAssignment, Scenario, TaskScenario,
};

/// A GraphQL failure of a mutation, mapped to GitHub's error `type`.
#[derive(Debug)]
pub(crate) enum Failure {
    NotFound(String),
    Forbidden(String),
    /// A variable-validation style error (no `type`).
    Invalid(String),
}

/// `agentAssignment` of `UpdateIssueInput`.
#[derive(Clone, Debug, Default)]
pub(crate) struct AgentInput {
    pub target_repository_id: Option<String>,
    pub base_ref: Option<String>,
    pub custom_instructions: Option<String>,
    pub custom_agent: Option<String>,
    pub model: Option<String>,
}

/// `UpdateIssueInput`.
#[derive(Clone, Debug, Default)]
pub(crate) struct UpdateIssue {
    pub id: String,
    pub title: Option<String>,
    pub body: Option<String>,
    pub state: Option<ItemState>,
    pub assignee_ids: Option<Vec<String>>,
    pub agent: Option<AgentInput>,
}

/// Whether the `GraphQL-Features` header named `feature`.
pub(crate) fn has_feature(features: &[String], feature: &str) -> bool {
    features.iter().any(|f| f == feature)
}

const NOT_ENABLED: &str =
    "Could not assign agent: Copilot cloud agent is not enabled for this repository.";
const NO_ACCESS: &str = "Bot does not have access to the repository.";

fn unresolvable(id: &str) -> Failure {
    Failure::NotFound(format!(
        "Could not resolve to a node with the global id of '{id}'."
    ))
}

/// `updateIssue`: validates everything first, then applies; returns the issue.
pub(crate) fn update_issue(
    sim: &GithubSim,
    features: &[String],
    input: UpdateIssue,
) -> Result<(String, u64), Failure> {
    if input.agent.is_some() && !has_feature(features, FEATURE_COPILOT_ASSIGNMENT) {
        return Err(Failure::Forbidden(NO_ACCESS.into()));
    }
    if input.agent.as_ref().is_some_and(|a| a.model.is_some())
        && !has_feature(features, FEATURE_MODEL_SELECTION)
    {
        return Err(Failure::Invalid(
            "Variable $input of type UpdateIssueInput! was provided invalid value for \
             agentAssignment.model (Field is not defined on AgentAssignmentInput)"
                .into(),
        ));
    }
    let mut st = sim.state();
    let (key, number) = st
        .item_by_node_id(&input.id)
        .filter(|(k, n)| st.item(k, *n).is_some_and(|i| i.pr.is_none()))
        .ok_or_else(|| unresolvable(&input.id))?;
    let new_assignees = match &input.assignee_ids {
        None => None,
        Some(ids) => {
            let mut logins = Vec::new();
            for id in ids {
                let login = st.actor_by_node_id(id).ok_or_else(|| unresolvable(id))?;
                if !logins.contains(&login) {
                    logins.push(login);
                }
            }
            Some(logins)
        }
    };
    let (old, copilot_enabled, default_branch) = {
        let repo = st.repos.get(&key).ok_or_else(|| unresolvable(&input.id))?;
        let item = repo
            .items
            .get(&number)
            .ok_or_else(|| unresolvable(&input.id))?;
        (
            item.assignees.clone(),
            repo.copilot_enabled,
            repo.default_branch.clone(),
        )
    };
    let had_copilot = old.iter().any(|a| a == COPILOT_LOGIN);
    let will_have = new_assignees
        .as_ref()
        .map_or(had_copilot, |n| n.iter().any(|a| a == COPILOT_LOGIN));
    if will_have && !had_copilot {
        if !copilot_enabled {
            return Err(Failure::Forbidden(NOT_ENABLED.into()));
        }
        if !has_feature(features, FEATURE_COPILOT_ASSIGNMENT) {
            return Err(Failure::Forbidden(NO_ACCESS.into()));
        }
    }

    // Validated: apply.
    let viewer = st.viewer.clone();
    let now = st.now();
    if let Some(item) = st.item_mut(&key, number) {
        if let Some(title) = &input.title {
            item.title.clone_from(title);
        }
        if let Some(body) = &input.body {
            item.body.clone_from(body);
        }
        item.updated_at = now;
    }
    match input.state {
        Some(ItemState::Closed)
            if st
                .item(&key, number)
                .is_some_and(|i| i.state == ItemState::Open) =>
        {
            set_closed(&mut st, &key, number, false);
        }
        Some(ItemState::Open) => {
            if let Some(item) = st.item_mut(&key, number) {
                item.state = ItemState::Open;
                item.closed_at = None;
            }
        }
        _ => {}
    }
    if let Some(new) = &new_assignees {
        for login in old.iter().filter(|l| !new.contains(l)) {
            st.push_event(
                &key,
                number,
                &viewer,
                EventKind::Unassigned {
                    assignee: login.clone(),
                },
            );
        }
        for login in new.iter().filter(|l| !old.contains(l)) {
            st.push_event(
                &key,
                number,
                &viewer,
                EventKind::Assigned {
                    assignee: login.clone(),
                },
            );
        }
        if let Some(item) = st.item_mut(&key, number) {
            item.assignees.clone_from(new);
        }
    }
    let starts_run = will_have && !had_copilot;
    if let Some(agent) = &input.agent {
        let display = st
            .repos
            .get(&key)
            .map_or_else(|| key.clone(), |r| r.full_name());
        st.record_assignment(RecordedAssignment {
            repo: display,
            issue: number,
            assignee_ids: input.assignee_ids.clone().unwrap_or_default(),
            target_repository_id: agent.target_repository_id.clone(),
            base_ref: agent.base_ref.clone(),
            custom_instructions: agent.custom_instructions.clone(),
            custom_agent: agent.custom_agent.clone(),
            model: agent.model.clone(),
            started_run: starts_run,
            at: now,
        });
    }
    if starts_run {
        let run = st.next_run();
        if let Some(item) = st.item_mut(&key, number) {
            item.active_run = Some(run);
        }
        st.stats.count_assignment(&key, number);
        let agent = input.agent.clone().unwrap_or_default();
        let base_ref = agent
            .base_ref
            .filter(|b| !b.trim().is_empty())
            .unwrap_or(default_branch);
        let instructions = agent.custom_instructions.filter(|c| !c.trim().is_empty());
        let counted = sim.clone();
        let agent_run = issue_run(
            sim.clone(),
            key.clone(),
            number,
            run,
            base_ref,
            instructions,
        );
        tokio::spawn(async move {
            agent_run.await;
            counted.state().stats.issue_runs_over += 1;
        });
    } else if will_have && (input.assignee_ids.is_some() || input.agent.is_some()) {
        st.stats.repeat_assignments += 1;
    }
    if had_copilot
        && !will_have
        && let Some(item) = st.item_mut(&key, number)
    {
        item.active_run = None;
    }
    Ok((key, number))
}

/// `removeAssigneesFromAssignable`; returns the assignable.
pub(crate) fn remove_assignees(
    sim: &GithubSim,
    assignable_id: &str,
    assignee_ids: &[String],
) -> Result<(String, u64), Failure> {
    let mut st = sim.state();
    let (key, number) = st
        .item_by_node_id(assignable_id)
        .ok_or_else(|| unresolvable(assignable_id))?;
    let mut logins = Vec::new();
    for id in assignee_ids {
        logins.push(st.actor_by_node_id(id).ok_or_else(|| unresolvable(id))?);
    }
    let viewer = st.viewer.clone();
    let current = st
        .item(&key, number)
        .map(|i| i.assignees.clone())
        .unwrap_or_default();
    for login in current.iter().filter(|l| logins.contains(l)) {
        st.push_event(
            &key,
            number,
            &viewer,
            EventKind::Unassigned {
                assignee: login.clone(),
            },
        );
    }
    if let Some(item) = st.item_mut(&key, number) {
        item.assignees.retain(|l| !logins.contains(l));
        if logins.iter().any(|l| l == COPILOT_LOGIN) {
            item.active_run = None;
        }
    }
    Ok((key, number))
}

fn scaled_timings(st: &State, scenario: Scenario) -> (Duration, Duration) {
    let (pr_delay, work) = if scenario == Scenario::Slow {
        (Duration::from_secs(30), Duration::from_secs(60))
    } else {
        (st.timings.pr_delay, st.timings.work_duration)
    };
    (st.scaled(pr_delay), st.scaled(work))
}

fn still_active(st: &State, key: &str, number: u64, run: u64) -> bool {
    st.item(key, number)
        .is_some_and(|i| i.active_run == Some(run))
}

fn set_active(st: &mut State, key: &str, number: u64, run: Option<u64>) {
    if let Some(item) = st.item_mut(key, number) {
        item.active_run = run;
    }
}

/// Ends a piece of work on a Copilot PR: success (ready for review) or failure.
fn finish_work(st: &mut State, key: &str, pr: u64, failure: bool, first_cycle: bool) {
    if failure {
        st.push_event(
            key,
            pr,
            COPILOT_LOGIN,
            EventKind::CopilotWorkFinishedFailure,
        );
        let now = st.now();
        st.push_event(
            key,
            pr,
            COPILOT_LOGIN,
            EventKind::Comment {
                body: "Copilot stopped work on this pull request due to an error. You can ask \
                       Copilot to try again by mentioning @copilot in a comment."
                    .into(),
                updated_at: now,
            },
        );
        return;
    }
    let was_draft = st
        .item(key, pr)
        .and_then(|i| i.pr.as_ref())
        .is_some_and(|p| p.draft);
    if let Some(item) = st.item_mut(key, pr) {
        if let Some(title) = item.title.strip_prefix("[WIP] ") {
            item.title = title.to_owned();
        }
        if let Some(info) = item.pr.as_mut() {
            info.draft = false;
        }
    }
    if was_draft {
        st.push_event(key, pr, COPILOT_LOGIN, EventKind::ReadyForReview);
    }
    st.push_event(key, pr, COPILOT_LOGIN, EventKind::CopilotWorkFinished);
    if !first_cycle {
        let now = st.now();
        st.push_event(
            key,
            pr,
            COPILOT_LOGIN,
            EventKind::Comment {
                body: "I've addressed your feedback and pushed the changes to this pull \
                       request. Let me know if anything else needs attention."
                    .into(),
                updated_at: now,
            },
        );
    }
}

async fn issue_run(
    sim: GithubSim,
    key: String,
    issue: u64,
    run: u64,
    base_ref: String,
    instructions: Option<String>,
) {
    let (scenario, pr_delay, work) = {
        let st = sim.state();
        let Some(item) = st.item(&key, issue) else {
            return;
        };
        let (p, w) = scaled_timings(&st, item.scenario);
        (item.scenario, p, w)
    };
    if scenario == Scenario::Never {
        return;
    }
    tokio::time::sleep(pr_delay).await;
    let pr = {
        let mut st = sim.state();
        if !still_active(&st, &key, issue, run) {
            return;
        }
        if scenario == Scenario::FailsToStart {
            let now = st.now();
            st.push_event(
                &key,
                issue,
                COPILOT_LOGIN,
                EventKind::Comment {
                    body: "The agent encountered an error and was unable to start working on \
                           this issue: The token used to assign the agent doesn't have the \
                           necessary permissions. Unassign and reassign Copilot to try again."
                        .into(),
                    updated_at: now,
                },
            );
            set_active(&mut st, &key, issue, None);
            return;
        }
        let title = st
            .item(&key, issue)
            .map(|i| i.title.clone())
            .unwrap_or_default();
        let mut body = format!("Fixes #{issue}");
        if let Some(extra) = &instructions {
            body.push_str("\n\n");
            body.push_str(extra);
        }
        let Some(pr) = st.open_pull_request(
            &key,
            format!("[WIP] {title}"),
            body,
            COPILOT_LOGIN,
            format!("copilot/fix-{issue}"),
            base_ref,
            true,
            scenario,
        ) else {
            return;
        };
        st.push_event(
            &key,
            issue,
            COPILOT_LOGIN,
            EventKind::CrossReferenced {
                source: pr,
                will_close: true,
            },
        );
        st.push_event(&key, pr, COPILOT_LOGIN, EventKind::CopilotWorkStarted);
        pr
    };
    tokio::time::sleep(work).await;
    let mut st = sim.state();
    if !still_active(&st, &key, issue, run) {
        return;
    }
    finish_work(
        &mut st,
        &key,
        pr,
        scenario == Scenario::FinishesWithFailure,
        true,
    );
    set_active(&mut st, &key, issue, None);
}

/// After a REST comment: starts a review cycle if it mentions `@copilot` on an open
/// Copilot PR with no cycle running.
pub(crate) fn after_comment(sim: &GithubSim, st: &mut State, key: &str, number: u64, body: &str) {
    if !body.to_ascii_lowercase().contains("@copilot") {
        return;
    }
    let eligible = st.item(key, number).is_some_and(|i| {
        i.pr.is_some()
            && i.state == ItemState::Open
            && i.author == COPILOT_LOGIN
            && i.active_run.is_none()
    });
    if !eligible {
        return;
    }
    let run = st.next_run();
    set_active(st, key, number, Some(run));
    tokio::spawn(review_cycle(sim.clone(), key.to_owned(), number, run));
}

async fn review_cycle(sim: GithubSim, key: String, pr: u64, run: u64) {
    let (scenario, pr_delay, work) = {
        let st = sim.state();
        let Some(item) = st.item(&key, pr) else {
            return;
        };
        let (p, w) = scaled_timings(&st, item.scenario);
        (item.scenario, p, w)
    };
    if scenario == Scenario::Never {
        return;
    }
    tokio::time::sleep(pr_delay).await;
    {
        let mut st = sim.state();
        if !still_active(&st, &key, pr, run) {
            return;
        }
        st.push_event(&key, pr, COPILOT_LOGIN, EventKind::CopilotWorkStarted);
    }
    tokio::time::sleep(work).await;
    let mut st = sim.state();
    if !still_active(&st, &key, pr, run) {
        return;
    }
    finish_work(
        &mut st,
        &key,
        pr,
        scenario == Scenario::FinishesWithFailure,
        false,
    );
    set_active(&mut st, &key, pr, None);
}

fn set_closed(st: &mut State, key: &str, number: u64, merged: bool) {
    let now = st.now();
    let viewer = st.viewer.clone();
    if let Some(item) = st.item_mut(key, number) {
        item.state = if merged {
            ItemState::Merged
        } else {
            ItemState::Closed
        };
        item.closed_at = Some(now);
        item.active_run = None;
        if merged && let Some(pr) = item.pr.as_mut() {
            pr.merged_at = Some(now);
        }
    }
    if merged {
        st.push_event(key, number, &viewer, EventKind::Merged);
    }
    st.push_event(key, number, &viewer, EventKind::Closed);
}

/// Closes (or merges, for an open PR) an item; false if unknown or not open.
pub(crate) fn close_item(sim: &GithubSim, key: &str, number: u64, merged: bool) -> bool {
    let mut st = sim.state();
    let ok = st
        .item(key, number)
        .is_some_and(|i| i.state == ItemState::Open && (!merged || i.pr.is_some()));
    if ok {
        set_closed(&mut st, key, number, merged);
    }
    ok
}

fn set_task(st: &mut State, task_id: &str, state: AgentTaskState, error: Option<&str>) {
    let now = st.now();
    if let Some(task) = st.tasks.iter_mut().find(|t| t.id == task_id) {
        task.state = state;
        task.updated_at = now;
        if state.is_terminal() {
            task.completed_at = Some(now);
        }
        if let Some(e) = error {
            task.error = Some(e.to_owned());
        }
    }
}

/// Runs an agent task to its outcome.
pub(crate) async fn task_run(sim: GithubSim, task_id: String) {
    let (scenario, pr_delay, work) = {
        let st = sim.state();
        let Some(task) = st.tasks.iter().find(|t| t.id == task_id) else {
            return;
        };
        let (p, w) = scaled_timings(&st, Scenario::Normal);
        (task.scenario, p, w)
    };
    tokio::time::sleep(pr_delay).await;
    let pr = {
        let mut st = sim.state();
        set_task(&mut st, &task_id, AgentTaskState::InProgress, None);
        let Some(task) = st.tasks.iter().find(|t| t.id == task_id).cloned() else {
            return;
        };
        let pr = if task.create_pull_request {
            st.open_pull_request(
                &task.repo,
                format!("[WIP] {}", task.name),
                task.prompt.clone(),
                COPILOT_LOGIN,
                task.head_ref.clone(),
                task.base_ref.clone(),
                true,
                Scenario::Normal,
            )
        } else {
            None
        };
        if let Some(n) = pr {
            st.push_event(&task.repo, n, COPILOT_LOGIN, EventKind::CopilotWorkStarted);
            if let Some(t) = st.tasks.iter_mut().find(|t| t.id == task_id) {
                t.pull_request = Some(n);
            }
        }
        pr.map(|n| (task.repo, n))
    };
    tokio::time::sleep(work).await;
    let pause = match scenario {
        TaskScenario::WaitingForUser => Some(AgentTaskState::WaitingForUser),
        TaskScenario::Idle => Some(AgentTaskState::Idle),
        _ => None,
    };
    if let Some(paused) = pause {
        set_task(&mut sim.state(), &task_id, paused, None);
        tokio::time::sleep(work).await;
    }
    let mut st = sim.state();
    let (state, error, pr_failure) = match scenario {
        TaskScenario::Completed | TaskScenario::WaitingForUser | TaskScenario::Idle => {
            (AgentTaskState::Completed, None, Some(false))
        }
        TaskScenario::Failed => (
            AgentTaskState::Failed,
            Some("The agent failed: tests did not pass"),
            Some(true),
        ),
        TaskScenario::TimedOut => (
            AgentTaskState::TimedOut,
            Some("The agent session timed out."),
            Some(true),
        ),
        TaskScenario::Cancelled => (AgentTaskState::Cancelled, None, None),
    };
    if let (Some((repo, n)), Some(failure)) = (&pr, pr_failure) {
        finish_work(&mut st, repo, *n, failure, true);
    }
    set_task(&mut st, &task_id, state, error);
}
