//! The Copilot agent tasks REST API (API version 2026-03-10): create, list and get
//! tasks, each with one session. There is no stop/cancel endpoint (GitHub has none).
//!
//! The outcome is the repository's `agent_task_scenario`, or a token in the prompt:
//! `[sim:failed]`, `[sim:timed_out]`, `[sim:cancelled]`, `[sim:waiting_for_user]`,
//! `[sim:idle]`, `[sim:completed]`. Repositories without Copilot answer 403.

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::agent;
use super::ids::{iso, parse_iso, uuid};
use super::rest::{bases, count, paginate, param, params, record_body, with_link};
use super::routes::RequestInfo;
use super::state::{AgentTaskState, State as SimState, Task, repo_key};
use super::wire::{Bases, REST_DOCS, RestError};
use super::{GithubSim, TaskScenario};

const TASKS_DOCS: &str = "https://docs.github.com/rest/agent-tasks/agent-tasks";

fn scenario_from_prompt(prompt: &str, default: TaskScenario) -> TaskScenario {
    for (token, scenario) in [
        ("[sim:failed]", TaskScenario::Failed),
        ("[sim:timed_out]", TaskScenario::TimedOut),
        ("[sim:cancelled]", TaskScenario::Cancelled),
        ("[sim:waiting_for_user]", TaskScenario::WaitingForUser),
        ("[sim:idle]", TaskScenario::Idle),
        ("[sim:completed]", TaskScenario::Completed),
    ] {
        if prompt.contains(token) {
            return scenario;
        }
    }
    default
}

/// The repository key, if it exists and has Copilot enabled.
fn enabled_repo(st: &SimState, owner: &str, repo: &str) -> Result<String, RestError> {
    let key = repo_key(owner, repo);
    let r = st.repos.get(&key).ok_or_else(RestError::not_found)?;
    if !r.copilot_enabled {
        return Err(RestError::new(
            StatusCode::FORBIDDEN,
            "Copilot cloud agent is not enabled for this repository.",
            TASKS_DOCS,
        ));
    }
    Ok(key)
}

fn task_json(st: &SimState, task: &Task, bases: &Bases, with_sessions: bool) -> Value {
    let Some(repo) = st.repos.get(&task.repo) else {
        return Value::Null;
    };
    let viewer = st.users.get(&st.viewer).map_or(0, |a| a.db_id);
    let owner_id = st.users.get(&repo.owner).map_or(repo.db_id, |a| a.db_id);
    // GitHub documents an artifact's `data` as the resource's id and global
    // id (type `pull`), nothing more.
    let artifacts: Vec<Value> = task
        .pull_request
        .and_then(|n| repo.items.get(&n))
        .map(|pr| {
            json!({
                "provider": "github",
                "type": "pull",
                "data": { "id": pr.db_id, "global_id": pr.node_id },
            })
        })
        .into_iter()
        .collect();
    let mut v = json!({
        "id": task.id,
        "url": format!("{}/agents/repos/{}/tasks/{}", bases.api, repo.full_name(), task.id),
        "html_url": format!("{}/{}/tasks/{}", bases.html, repo.full_name(), task.id),
        "name": task.name,
        "creator": { "id": viewer },
        "creator_type": "user",
        "owner": { "id": owner_id },
        "repository": { "id": repo.db_id },
        "state": task.state.as_str(),
        "session_count": 1,
        "artifacts": artifacts,
        "archived_at": null,
        "created_at": iso(task.created_at),
        "updated_at": iso(task.updated_at),
    });
    if with_sessions {
        let mut session = json!({
            "id": task.session_id,
            "name": task.name,
            "user": { "id": viewer },
            "owner": { "id": owner_id },
            "repository": { "id": repo.db_id },
            "task_id": task.id,
            "state": task.state.as_str(),
            "created_at": iso(task.created_at),
            "updated_at": iso(task.updated_at),
            "prompt": task.prompt,
            "head_ref": task.head_ref,
            "base_ref": task.base_ref,
        });
        // Absent rather than null: GitHub types these as strings and objects.
        if let Some(at) = task.completed_at {
            session["completed_at"] = json!(iso(at));
        }
        if let Some(model) = &task.model {
            session["model"] = json!(model);
        }
        if let Some(message) = &task.error {
            session["error"] = json!({ "message": message });
        }
        v["sessions"] = json!([session]);
    }
    v
}

type RepoPath = Result<Path<(String, String)>, PathRejection>;

pub(crate) async fn create(
    State(sim): State<GithubSim>,
    Extension(info): Extension<RequestInfo>,
    path: RepoPath,
    body: Bytes,
) -> Result<Response, RestError> {
    const LABEL: &str = "POST /agents/repos/{owner}/{repo}/tasks";
    count(&sim, LABEL);
    let Path((owner, repo)) = path.map_err(|_| RestError::not_found())?;
    let key = enabled_repo(&sim.state(), &owner, &repo)?;
    let parsed: Value =
        serde_json::from_slice(&body).map_err(|_| RestError::problems_parsing_json())?;
    record_body(&sim, LABEL, &parsed);
    let text = |name: &str| {
        parsed
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let prompt = text("prompt")
        .ok_or_else(|| RestError::custom_invalid("prompt must not be blank", TASKS_DOCS))?;
    let create_pr = parsed
        .get("create_pull_request")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let bases = bases(&sim, &info);
    let mut st = sim.state();
    let Some(r) = st.repos.get(&key) else {
        return Err(RestError::not_found());
    };
    let scenario = scenario_from_prompt(&prompt, r.agent_task_scenario);
    let default_branch = r.default_branch.clone();
    let id = uuid();
    let now = st.now();
    let name: String = prompt
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(60)
        .collect();
    let task = Task {
        head_ref: text("head_ref").unwrap_or_else(|| format!("copilot/task-{id}")),
        id: id.clone(),
        session_id: uuid(),
        repo: key,
        name,
        state: AgentTaskState::Queued,
        created_at: now,
        updated_at: now,
        completed_at: None,
        prompt,
        base_ref: text("base_ref").unwrap_or(default_branch),
        model: text("model"),
        create_pull_request: create_pr,
        pull_request: None,
        error: None,
        scenario,
    };
    // GitHub documents the 201 answer without `sessions` (only GET of one
    // task has them).
    let json = task_json(&st, &task, &bases, false);
    st.tasks.push(task);
    st.stats.agent_tasks_created += 1;
    drop(st);
    tokio::spawn(agent::task_run(sim.clone(), id));
    Ok((StatusCode::CREATED, Json(json)).into_response())
}

pub(crate) async fn list(
    State(sim): State<GithubSim>,
    Extension(info): Extension<RequestInfo>,
    path: RepoPath,
    RawQuery(raw): RawQuery,
) -> Result<Response, RestError> {
    count(&sim, "GET /agents/repos/{owner}/{repo}/tasks");
    let Path((owner, repo)) = path.map_err(|_| RestError::not_found())?;
    let params = params(raw.as_deref());
    let bases = bases(&sim, &info);
    let st = sim.state();
    let key = enabled_repo(&st, &owner, &repo)?;
    let states: Option<Vec<&str>> = param(&params, "state").map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    });
    let since = param(&params, "since").and_then(parse_iso);
    let by_created = param(&params, "sort") == Some("created_at");
    let ascending = param(&params, "direction") == Some("asc");
    let mut tasks: Vec<&Task> = st
        .tasks
        .iter()
        .filter(|t| t.repo == key)
        .filter(|t| {
            states
                .as_ref()
                .is_none_or(|s| s.contains(&t.state.as_str()))
        })
        .filter(|t| since.is_none_or(|s| t.updated_at >= s))
        .collect();
    tasks.sort_by_key(|t| {
        if by_created {
            t.created_at
        } else {
            t.updated_at
        }
    });
    if !ascending {
        tasks.reverse();
    }
    let total = st.tasks.iter().filter(|t| t.repo == key).count();
    let all: Vec<Value> = tasks
        .into_iter()
        .map(|t| task_json(&st, t, &bases, false))
        .collect();
    let (page, link) = paginate(all, &params, &info);
    Ok(with_link(
        StatusCode::OK,
        json!({ "tasks": page, "total_active_count": total, "total_archived_count": 0 }),
        link,
    ))
}

fn find(
    sim: &GithubSim,
    info: &RequestInfo,
    repo: Option<(String, String)>,
    id: &str,
) -> Result<Json<Value>, RestError> {
    let bases = bases(sim, info);
    let st = sim.state();
    let key = match repo {
        Some((owner, name)) => Some(enabled_repo(&st, &owner, &name)?),
        None => None,
    };
    let task = st
        .tasks
        .iter()
        .find(|t| t.id == id && key.as_ref().is_none_or(|k| *k == t.repo))
        .ok_or_else(|| RestError::new(StatusCode::NOT_FOUND, "Not Found", REST_DOCS))?;
    Ok(Json(task_json(&st, task, &bases, true)))
}

pub(crate) async fn get_in_repo(
    State(sim): State<GithubSim>,
    Extension(info): Extension<RequestInfo>,
    path: Result<Path<(String, String, String)>, PathRejection>,
) -> Result<Json<Value>, RestError> {
    count(&sim, "GET /agents/repos/{owner}/{repo}/tasks/{task_id}");
    let Path((owner, repo, id)) = path.map_err(|_| RestError::not_found())?;
    find(&sim, &info, Some((owner, repo)), &id)
}

pub(crate) async fn get(
    State(sim): State<GithubSim>,
    Extension(info): Extension<RequestInfo>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, RestError> {
    count(&sim, "GET /agents/tasks/{task_id}");
    let Path(id) = path.map_err(|_| RestError::not_found())?;
    find(&sim, &info, None, &id)
}
